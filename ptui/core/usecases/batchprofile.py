"""`ptui profile --batch-sizes 8,16,32,64`: profile (mode, batch size) pairs.

The pairs are drawn at random over the joint space (PowerTrain's grid x the sizes that fit in
memory), or are every --modes mode at every size.  The profile is one session: its plan holds every
pair, each row its batch size, and its params the sizes asked for (a resume with another set is
refused).  A training run holds one batch size, so the pairs are profiled one size after the other
on the same backend, each size as a part of the session (store.BatchPart); the CSV at --out holds
them all, with a batch_size column and, on the simulator, the modelled peak memory (peak_mem_gb).
A user script is run at each size through a `{bs}` placeholder in its command.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..board.csvio import PEAK_COL, choose_time, fmt_value, keep_aside, read_modes, with_time, write_csv
from ..board.locks import lock_session
from ..board.physics import footprint_gb, largest_batch, memory_gb
from ..catalogue.modes import Mode
from ..catalogue.workloads import get_workload
from ..decision.batch import BatchError, relation
from ..prediction.predictor import load_bundled
from ..profiling.active import ActivePlanner, Goal, Space
from ..profiling.profiler import PROFILE_HEADER, Control, SessionError, choose_modes, profile_rows
from ..profiling.store import Store
from ..profiling.userscript import check_resume_command
from .profile import ProfileOutcome, ProfileRequest, ProfileRun, RunBase, estimate_device_s

PLACEHOLDER = "{bs}"
ACTIVE_COUNT = 40          # most pairs an active profile over batch sizes takes by default
ACTIVE_MIN = 10            # fewest: `ptui fit` over (mode, batch size) needs 10 pairs


def is_batch_profile(name: str | None) -> bool:
    """True when the session `name` profiles several batch sizes (resumed by BatchProfileRun)."""
    if not name:
        return False
    store = Store()
    try:
        s = store.get_session(name)
        return s is not None and s.batch_sizes is not None
    finally:
        store.close()


def profile_run(req: ProfileRequest, batch_sizes: tuple[int, ...] | None = None, *,
                notify: Callable[[str], None] | None = None,
                control: Control | None = None) -> ProfileRun | BatchProfileRun:
    """The run of a profile request, the one entry of the CLI and the app: over several batch
    sizes (`batch_sizes`, or a resumed session that profiles several) a BatchProfileRun, else a
    ProfileRun; both have the same surface (profile.RunBase)."""
    if batch_sizes is not None or (req.resume and is_batch_profile(req.session)):
        return BatchProfileRun(req, batch_sizes, notify=notify, control=control)
    return ProfileRun(req, notify=notify, control=control)


@dataclass
class _Info:
    plan: list
    n_done: int


class _SameSize:
    """The planner one size's run goes on with during active profiling over batch sizes: it goes
    on while the whole profile's planner chooses a pair of its own size, and otherwise ends that
    run, leaving the chosen pair (or the stop) to the whole profile."""

    def __init__(self, whole: "BatchProfileRun", b: int) -> None:
        self.whole, self.b = whole, b
        self.count, self.goal = whole.planner.count, whole.planner.goal

    def next_mode(self, _rows):
        nxt = self.whole.planner.next_mode(self.whole._rows())
        if nxt is None:
            self.whole._stopped = True
            return None
        if int(nxt[1]) == self.b:
            return nxt[0]
        self.whole._pending = nxt
        return None


class BatchProfileRun(RunBase):
    """Same surface as session.ProfileRun (their shared part: profile.RunBase): open_backend,
    prepare, notes, run, resume_hint, close, finished, export, pause/resume/cancel; planner is the
    ActivePlanner (over a joint Space) of an active profile, else None.  What is its own: the
    sizes (memory per size), the pairs drawn over them, one session whose parts are one training
    run per size, and the CSV over every size."""
    finished = False
    what = "(mode, batch size) pairs"

    def __init__(self, req: ProfileRequest, batch_sizes: tuple[int, ...] | None,
                 notify: Callable[[str], None] | None = None, control: Control | None = None) -> None:
        self._start(req, None, control, notify)
        self.current: ProfileRun | None = None
        self._base = 0                      # pairs finished at other sizes than the running one
        try:
            self._resolve(batch_sizes)
        except BaseException:
            self.store.close()
            raise

    def _resolve(self, batch_sizes) -> None:
        req = self.req
        if req.batch_size is not None:
            if batch_sizes is None:             # a resume: the sizes are the session's own
                raise BatchError(f"session {req.session} profiles several batch sizes: resume it "
                                 f"without --batch-size")
            raise BatchError("give --batch-size or --batch-sizes, not both")
        if req.strategy not in (None, "random", "active"):
            raise BatchError(f"--batch-sizes profiles random (mode, batch size) pairs, every "
                             f"--modes mode at each size, or (--strategy active) the pairs that "
                             f"decide a goal; --strategy {req.strategy} is not supported with it")
        if req.strategy == "active" and req.modes_csv:
            raise BatchError("--strategy active chooses the (mode, batch size) pairs itself; "
                             "drop --modes (or drop --strategy active to profile those modes)")
        if (req.noise_scale is not None or req.samples_to_target) and req.strategy != "active":
            raise BatchError("--noise-scale and --samples-to-target steer an active profile "
                             "(--strategy active with a goal); a random profile does not use them "
                             "(give them to ptui pareto --batch-sizes)")
        if req.grid:
            raise BatchError("--batch-sizes with --grid would profile the whole grid at every size; "
                             "use --count N (random pairs) or --modes FILE")
        if req.script and not any(PLACEHOLDER in a for a in req.script):
            raise BatchError("--batch-sizes runs your command once per batch size: put {bs} where "
                             "the batch size goes, e.g. -- python train.py --batch-size {bs}")
        self.existing = self._session()
        if req.resume:
            first = self.existing
            assert first is not None            # _session: a resume names one that exists
            recorded = first.batch_sizes
            if recorded is None:
                raise BatchError(f"session {req.session!r} profiles one batch size "
                                 f"({first.batch_size}), not several: resume it without "
                                 f"--batch-sizes")
            if batch_sizes is not None and tuple(batch_sizes) != recorded:
                raise BatchError(f"session {req.session!r} profiles batch sizes "
                                 f"{','.join(map(str, recorded))}, not "
                                 f"{','.join(map(str, batch_sizes))}; resume it with the same "
                                 f"--batch-sizes (or start a new --session)")
            batch_sizes = recorded
            # a profile whose run ended done: resumed, it only writes its CSV (export), no device
            self.finished = first.status == "done"
            self.seed = req.seed if req.seed is not None else first.seed
            wl = first.workload
            if wl == "script" and not req.script and not self.finished:
                raise SessionError("resume a script session with the same command after --")
            if wl == "script" and req.script and not self.finished:
                check_resume_command(first.params, req.script)     # the command with its {bs}
            self.workload_name = req.workload or (None if wl == "script" else wl)
        else:
            if self.existing is not None:
                raise SessionError(f"session {req.session!r} already exists; add --resume to "
                                   f"continue it or pick another --session name")
            if not req.script and not req.workload:
                raise SessionError("--workload is required (or your own training command after --)")
            self.seed = req.seed or 0
            self.workload_name = req.workload
        self.batch_sizes = tuple(batch_sizes)

    # -- set-up -------------------------------------------------------------------------------------
    def open_backend(self, kind, device, root="/", corpus=None) -> str:
        return self._open_backend(kind, device or (self.existing.device if self.existing else None),
                                  root, corpus)

    def _memory(self, dev) -> list[int]:
        """The sizes that fit; notes the largest batch that fits and what does not."""
        if self.workload_name is None:          # a script: known only once it runs
            if self.backend.simulated:
                self.notes.append("memory: a script's footprint is measured when it runs; a size that "
                                  "does not fit fails the profile at that size (out of memory)")
            else:
                self.notes.append("memory: your script's footprint is not known up front; a batch "
                                  "size that runs out of memory fails the profile at that size")
            return list(self.batch_sizes)
        w = get_workload(self.workload_name)
        big = largest_batch(dev, w)
        how = "modelled" if self.backend.simulated else "modelled estimate, not measured on the board"
        ok = [b for b in self.batch_sizes if b <= big]
        self.notes.append(f"memory: {memory_gb(dev):.1f} GB for training on {dev.name}; largest "
                          f"{w.name} batch that fits: {big} ({how})")
        bad = [b for b in self.batch_sizes if b > big]
        if bad:
            need = float(footprint_gb(w, bad[0]))
            if not ok:
                raise BatchError(f"none of the batch sizes {','.join(map(str, self.batch_sizes))} fits: "
                                 f"batch {bad[0]} needs {need:.1f} GB of {memory_gb(dev):.1f} GB; "
                                 f"the largest that fits is {big}")
            self.notes.append(f"not profiled: batch size{'s' if len(bad) > 1 else ''} "
                              f"{','.join(map(str, bad))} (does not fit: batch {bad[0]} needs "
                              f"{need:.1f} GB)")
        return ok

    def _pairs(self, dev, sizes: list[int], n: int | None = None) -> dict[int, list[Mode]]:
        """Random pairs over the joint space, or every --modes mode at every size."""
        req = self.req
        if req.modes_csv:
            modes = read_modes(req.modes_csv, dev)
            return {b: list(modes) for b in sizes}
        space = len(sizes) * len(dev.pt_grid())
        n = 50 if n is None else n
        if not 1 <= n <= space:
            raise SessionError(f"--count must be between 1 and {space} (mode, batch size) pairs "
                               f"for {dev.name}, got {n}")
        return random_pairs(dev, sizes, n, self.seed)

    def prepare(self, backend=None):
        if backend is not None:
            self.backend = backend
        dev = self.backend.device
        req = self.req
        if self.backend.kind == "replay":
            raise BatchError("the replay device replays a profile recorded at one batch size; "
                             "--batch-sizes needs the simulator or a board")
        sizes = self._memory(dev)
        if req.resume:                          # the first run's way of drawing pairs
            first = self.existing
            if first.device != dev.name:
                raise SessionError(f"session {first.name!r} was profiled on {first.device}, "
                                   f"not {dev.name}")
            self.how = first.params.get("pairs", "random")
            self.count = first.params.get("pairs_count")
        else:
            self.how = ("modes" if req.modes_csv else
                        "active" if req.strategy == "active" else "random")
            self.count = req.count if req.count is not None else (ACTIVE_COUNT if self.how == "active"
                                                                  else 50)
        if self.how == "active":
            return self._prepare_active(dev, sizes)
        if self.how == "modes" and req.resume:
            ex = self.existing
            first_size = ex.plan_sizes[0] if ex.plan_sizes else None
            fresh = {b: [m for m, bb in zip(ex.plan, ex.plan_sizes) if bb == first_size]
                     for b in sizes}
        elif self.how == "modes":
            fresh = self._pairs(dev, sizes)
        else:
            fresh = self._pairs(dev, sizes, self.count)
        self._name(dev)
        self._plan(dev, sizes, fresh)
        info = self.store.get_session(self.name)
        total, done = len(info.plan), info.n_done
        self.info = _Info([None] * total, done)
        wl = self.workload_name or "script"
        self.notes.append(f"session {self.name}: {wl} at batch sizes "
                          f"{','.join(map(str, sizes))} on {dev.name} ({self.backend.kind}); "
                          f"{total} (mode, batch size) pairs, {done} done, {total - done} to go")
        return self.info

    def _name(self, dev) -> None:
        wl = self.workload_name or "script"
        self._name_session(f"{dev.name}-{wl}-bs{'-'.join(map(str, self.batch_sizes))}")
        lock_session(self.name)                 # held by this run until close()
        self._locked = True

    def _plan(self, dev, sizes: list[int], fresh: dict[int, list[Mode]]) -> None:
        """Store the plan: every size's pairs (in the order a training run at that size profiles
        them), in a new session, or, resumed, for a size that has none stored yet (the sizes a
        store of ptui before version 1 had not reached when its run stopped)."""
        ex = self.store.get_session(self.name) if self.req.resume else None
        todo = [(b, choose_modes(dev, modes=fresh[b])) for b in sizes
                if fresh.get(b) and (ex is None or b not in ex.plan_sizes)]
        if ex is not None:
            for b, mine in todo:
                self.store.extend_plan(self.name, mine, b)
            self.store.set_status(self.name, "running")
            return
        plan = [m for _, mine in todo for m in mine]
        plan_sizes = [b for b, mine in todo for _ in mine]
        params = {"batch_sizes": list(self.batch_sizes), "pairs": self.how,
                  "pairs_count": self.count, "out": str(self.out), "per_size": {},
                  **({"goal": self.goal.as_dict(), "relation": self.rel_spec}
                     if self.how == "active" else {}),
                  **({"command": list(self.req.script)} if self.req.script else {}),
                  **self.req.params}
        self.store.create_session(
            self.name, device=dev.name, workload=self.workload_name or "script",
            batch_size=plan_sizes[0] if plan_sizes else sizes[0], seed=self.seed,
            backend=self.backend.kind, plan=plan, plan_sizes=plan_sizes, params=params,
            original_mode=self.backend.current_mode())

    def _prepare_active(self, dev, sizes: list[int]):
        """Active over the joint space: the goal, the samples-to-target relation and the count are
        the session's (a resume takes them from the store); the planner's space-filling start is
        the session's first plan, later pairs are chosen one at a time as the profile runs."""
        req = self.req
        if len(sizes) < 2:                      # say why, before the planner's general refusal
            if len(self.batch_sizes) < 2:
                raise BatchError("active profiling over batch sizes needs at least two sizes: "
                                 "give --batch-sizes B1,B2,...")
            dropped = [n for n in self.notes if n.startswith(("not profiled: batch", "memory:"))]
            raise BatchError(f"active profiling over batch sizes needs at least two sizes that fit; "
                             f"only {','.join(map(str, sizes)) or 'none'} of "
                             f"{','.join(map(str, self.batch_sizes))} does ("
                             + "; ".join(dropped) + ")")
        if req.resume:
            first = self.existing.params
            goal, rel_spec = Goal(**first["goal"]), first.get("relation") or {}
        else:
            goal = Goal(budget_w=req.budget_w, deadline_ms=req.deadline_ms, objective=req.objective)
            stt = req.samples_to_target        # stored absolute: a resume may run from elsewhere
            rel_spec = {"noise_scale": req.noise_scale,
                        "samples_to_target": None if stt is None else str(Path(stt).resolve())}
            space = len(sizes) * len(dev.pt_grid())
            if not ACTIVE_MIN <= int(self.count) <= space:
                raise SessionError(f"--count must be between {ACTIVE_MIN} and {space} (mode, batch "
                                   f"size) pairs here (a fit over batch sizes needs {ACTIVE_MIN}), "
                                   f"got {self.count}")
        rel = relation(rel_spec.get("samples_to_target"), rel_spec.get("noise_scale"))
        self.goal, self.rel_spec = goal, rel_spec
        self.planner = ActivePlanner(dev, Space.joint(dev.pt_grid(), sizes, rel), goal,
                                     count=int(self.count), reference=load_bundled(), seed=self.seed)
        self._name(dev)
        start = self.planner.initial()
        self._plan(dev, sizes, {b: [m for m, bb in start if bb == b] for b in sizes})
        done = self.store.get_session(self.name).n_done
        self.info = _Info([None] * int(self.count), done)
        wl = self.workload_name or "script"
        how = ("throughput only: no --samples-to-target or --noise-scale" if rel.throughput_only
               else f"time to target by the {rel.source}")
        self.notes.append(f"session {self.name}: {wl} at batch sizes {','.join(map(str, sizes))} "
                          f"on {dev.name} ({self.backend.kind}); active profiling for the goal "
                          f"'{goal.describe_per_target()}' ({how}): up to "
                          f"{self.count} (mode, batch size) pairs, {done} done, stopping early once "
                          f"the decision is confident")
        return self.info

    def _sub_request(self, b: int, part) -> ProfileRequest:
        req = self.req
        script = [a.replace(PLACEHOLDER, str(b)) for a in req.script]
        info = self.store.get_session(self.name)
        return replace(req, batch_size=b, session=self.name, seed=self.seed,
                       workload=None if req.script else self.workload_name,
                       resume=part.get_session(self.name) is not None,
                       script=script, modes_csv=None, grid=None, count=None, strategy="random",
                       modes=[m for m, bb in zip(info.plan, info.plan_sizes) if bb == b],
                       out=None, params={}, batch_part=True)

    def _resume_args(self) -> tuple[list[str], list[str] | None]:
        return ["--batch-sizes", ",".join(map(str, self.batch_sizes))], self.req.script or None

    # -- running ------------------------------------------------------------------------------------
    def run(self, on_progress=None) -> ProfileOutcome:
        wall0 = time.perf_counter()
        total = len(self.info.plan)
        self.simulated = self.backend.simulated
        status = "failed"
        try:
            try:
                status, error, interrupted, label = self._run_all(on_progress, total)
            except KeyboardInterrupt as e:   # Ctrl-C between pairs (choosing one, opening a
                # size's run): the board is in its original mode (each size's run restores it)
                status, error, interrupted, label = "aborted", None, True, ""
                self._stopped_by = getattr(e, "name", "Ctrl-C")
        finally:
            self.current = None
            try:
                self.store.set_status(self.name, status)    # done: a later --resume only exports
                dev_s = self._device_s()
                n_rows, saved, unsaved = self._save(status)
            finally:
                self.close()
        return self._outcome(status, wall0, n_rows, unsaved, dev_s, self.simulated, error,
                             interrupted, self._stopped_by, saved, label,
                             planner_said=status == "done")

    @property
    def workload(self):
        """The catalog workload profiled (at the first size), None for a script."""
        return get_workload(self.workload_name, self.batch_sizes[0]) if self.workload_name else None

    @property
    def progress(self):
        """The running size's progress, counted over the whole profile (None between sizes)."""
        cur = self.current
        p = cur.progress if cur is not None else None
        if p is None:
            return None
        return replace(p, done=self._base + p.done, total=len(self.info.plan),
                       batch_size=cur.batch_size)

    def _sizes_left(self) -> list[int]:
        """The sizes with planned pairs not profiled yet, in the order of --batch-sizes."""
        info = self.store.get_session(self.name)
        done = {g for g, _ in self.store.results(self.name)}
        left = {b for g, b in enumerate(info.plan_sizes) if g not in done}
        order = list(self.batch_sizes) + sorted(set(info.plan_sizes) - set(self.batch_sizes))
        return [b for b in order if b in left]

    def _run_all(self, on_progress, total):
        status, error, interrupted = "done", None, False
        self._stopped_by = ""
        label = "simulated" if self.backend.simulated and not self.req.script else ""
        self._pending, self._stopped = None, False
        for b in self._sizes_left():            # the drawn pairs; for active, the start
            res = self._sub(b, on_progress, total, quiet=False)
            label = res.label or label
            if res.status != "done":
                self._stopped_by = res.stopped_by
                return res.status, res.error, res.interrupted, label
        while self.how == "active" and not self._stopped:   # then one chosen pair at a time
            nxt = self._pending or self.planner.next_mode(self._rows())
            self._pending = None
            if nxt is None:
                break
            m, b = nxt
            self.store.extend_plan(self.name, [m], b)   # committed before it runs: a resume runs it
            res = self._sub(b, on_progress, total, quiet=True, stay=True)
            label = res.label or label
            if res.status != "done":
                status, error, interrupted = res.status, res.error, res.interrupted
                self._stopped_by = res.stopped_by
                break
        return status, error, interrupted, label

    def _rows(self) -> list[dict]:
        """Every measured pair of the profile, with its batch size (in a fixed order: by size,
        then as profiled), for the active planner; time_ms is the median step or the whole cycle,
        as --time decides (csvio.choose_time)."""
        rows = [r for _, r in sorted(self.store.results(self.name),
                                     key=lambda x: (x[1]["batch_size"], x[0]))]
        return with_time(rows, choose_time(rows, self.req.time_basis).basis)

    def _sub(self, b: int, on_progress, total, *, quiet: bool, stay: bool = False):
        """Profile the pairs of one batch size (its plan, or what a resume left of it), as a part
        of the session.  stay: the active planner extends it while the next pair it chooses has
        the same size."""
        part = self.store.part(self.name, b)
        sub = ProfileRun(self._sub_request(b, part), store=part, control=self.control,
                         notify=self.notify)
        self.current = sub
        try:
            sub.prepare(self.backend)
        except BaseException:
            sub.close()
            raise
        if not quiet:
            for note in sub.notes[1:] if sub.notes and "session " in sub.notes[0] else sub.notes:
                self.notify(note)
        if stay:
            sub.profiler.planner = _SameSize(self, b)
        base = self._base = self.store.get_session(self.name).n_done - sub.info.n_done

        def show(p):
            if on_progress is not None:
                on_progress(replace(p, done=base + p.done, total=total, batch_size=b))
        return sub.run(show)

    def save(self) -> tuple[int, str]:
        """Write every finished pair to the CSV, size by size (batch_size column; peak_mem_gb from
        the simulator's memory model)."""
        rows = []
        info = self.store.get_session(self.name)
        for b in sorted(set(info.plan_sizes)):
            part = self.store.part(self.name, b)
            if part.get_session(self.name) is None:      # not started at this size yet
                continue
            peak = ""
            if getattr(self, "simulated", False) and self.workload_name:
                peak = fmt_value(float(footprint_gb(get_workload(self.workload_name, b))))
            rows += [list(r) + [peak] for r in profile_rows(part, self.name)]
        if not rows:
            return 0, f"no pair finished yet, {self.out} not written"
        if isinstance(self.out, Path):
            self.out.parent.mkdir(parents=True, exist_ok=True)
        moved = keep_aside(self.out, self.name)
        write_csv(self.out, PROFILE_HEADER + (PEAK_COL,), rows)
        kept = f" (the file that was there is kept as {moved})" if moved else ""
        return len(rows), f"{len(rows)} finished (mode, batch size) pairs saved to {self.out}{kept}"

    def _elsewhere(self, status: str) -> str:
        return self.resume_hint("elsewhere.csv")


def random_pairs(dev, sizes, n: int, seed: int) -> dict[int, list[Mode]]:
    """n (mode, batch size) pairs drawn at random over PowerTrain's grid x the sizes (the draw a
    profile with this seed makes), by batch size."""
    space = [(m, b) for b in sizes for m in dev.pt_grid()]
    pairs = random.Random(seed).sample(space, n)
    return {b: [m for m, bb in pairs if bb == b] for b in sizes}


def estimate_pairs_device_s(dev, workload, pairs: dict[int, list[Mode]]) -> float:
    """Rough device time of profiling these pairs (profile.estimate_device_s at each size)."""
    return sum(estimate_device_s(dev, workload.with_batch(b), ms) for b, ms in pairs.items() if ms)
