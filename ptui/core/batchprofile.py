"""`ptui profile --batch-sizes 8,16,32,64`: profile (mode, batch size) pairs.

The pairs are drawn at random over the joint space (PowerTrain's grid x the sizes that fit in
memory), or are every --modes mode at every size.  Each batch size is profiled as its own session,
`NAME@bsB` (a training run holds one batch size; the store keeps one per session), one after the
other on the same backend; the CSV at --out joins them, with a batch_size column and, on the
simulator, the modelled peak memory (peak_mem_gb).  The group records its batch sizes, so a resume
with another set is refused.  A user script is run at each size through a `{bs}` placeholder in
its command.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from . import paths
from .batch import BatchError
from .modes import Mode
from .profiler import SessionError
from .session import ProfileOutcome, ProfileRequest, ProfileRun
from .store import Store
from .workloads import get_workload

PLACEHOLDER = "{bs}"
SEP = "@bs"


def sub_name(group: str, b: int) -> str:
    return f"{group}{SEP}{b}"


def group_sessions(store: Store, group: str) -> dict[int, object]:
    """The sub-sessions of a batch-size group, by batch size."""
    out = {}
    for s in store.list_sessions():
        if s.name.startswith(group + SEP) and s.name[len(group) + len(SEP):].isdigit():
            out[int(s.name[len(group) + len(SEP):])] = s
    return out


def is_batch_group(name: str | None) -> bool:
    """True when `name` is a batch-size group (its sessions are NAME@bsB), not a session."""
    if not name:
        return False
    store = Store()
    try:
        return store.get_session(name) is None and bool(group_sessions(store, name))
    finally:
        store.close()


@dataclass
class _Info:
    plan: list
    n_done: int


class BatchProfileRun:
    """Same surface as session.ProfileRun for the CLI: open_backend, prepare, notes, run,
    resume_hint, close; planner is None (random pairs only)."""
    planner = None

    def __init__(self, req: ProfileRequest, batch_sizes: tuple[int, ...] | None,
                 notify: Callable[[str], None] | None = None) -> None:
        self.req = req
        self.notify = notify or (lambda text: None)
        self.store = Store()
        self.notes: list[str] = [self.store.notice] if self.store.notice else []
        self.backend = None
        self.runs: list[ProfileRun] = []
        self.current: ProfileRun | None = None
        try:
            self._resolve(batch_sizes)
        except BaseException:
            self.store.close()
            raise

    def _resolve(self, batch_sizes) -> None:
        req = self.req
        if req.batch_size is not None:
            raise BatchError("give --batch-size or --batch-sizes, not both")
        if req.strategy not in (None, "random"):
            raise BatchError(f"--batch-sizes profiles random (mode, batch size) pairs (or every "
                             f"--modes mode at each size); --strategy {req.strategy} is not "
                             f"supported with it")
        if req.grid:
            raise BatchError("--batch-sizes with --grid would profile the whole grid at every size; "
                             "use --count N (random pairs) or --modes FILE")
        if req.script and not any(PLACEHOLDER in a for a in req.script):
            raise BatchError("--batch-sizes runs your command once per batch size: put {bs} where "
                             "the batch size goes, e.g. -- python train.py --batch-size {bs}")
        self.existing = group_sessions(self.store, req.session) if req.session else {}
        if req.resume:
            if not req.session:
                raise SessionError("--resume needs --session NAME")
            if not self.existing:
                raise SessionError(f"no batch-size session named {req.session!r} to resume "
                                   f"(list them with: ptui sessions)")
            first = next(iter(self.existing.values()))
            recorded = tuple(first.params.get("batch_sizes") or sorted(self.existing))
            if batch_sizes is not None and tuple(batch_sizes) != recorded:
                raise BatchError(f"session {req.session!r} profiles batch sizes "
                                 f"{','.join(map(str, recorded))}, not "
                                 f"{','.join(map(str, batch_sizes))}; resume it with the same "
                                 f"--batch-sizes (or start a new --session)")
            batch_sizes = recorded
            self.seed = req.seed if req.seed is not None else first.seed
            wl = first.workload
            if wl == "script" and not req.script:
                raise SessionError("resume a script session with the same command after --")
            self.workload_name = req.workload or (None if wl == "script" else wl)
        else:
            if self.existing or (req.session and self.store.get_session(req.session)):
                raise SessionError(f"session {req.session!r} already exists; add --resume to "
                                   f"continue it or pick another --session name")
            if not req.script and not req.workload:
                raise SessionError("--workload is required (or your own training command after --)")
            self.seed = req.seed or 0
            self.workload_name = req.workload
        self.batch_sizes = tuple(batch_sizes)

    # -- set-up -------------------------------------------------------------------------------------
    def open_backend(self, kind, device, root="/", corpus=None) -> str:
        from .backends import open_backend
        dev = device or (next(iter(self.existing.values())).device if self.existing else None)
        self.backend, note = open_backend(kind, dev, seed=self.seed,
                                          sample_interval=self.req.sample_interval, root=root,
                                          corpus=corpus)
        return note

    def _memory(self, dev) -> list[int]:
        """The sizes that fit; notes the largest batch that fits and what does not."""
        from .physics import footprint_gb, largest_batch, memory_gb
        if self.workload_name is None:          # a script: known only once it runs
            if self.backend.simulated:
                self.notes.append("memory: a script's footprint is measured when it runs; a size that "
                                  "does not fit fails its session (out of memory)")
            else:
                self.notes.append("memory: your script's footprint is not known up front; a batch "
                                  "size that runs out of memory fails its session")
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
            from .csvio import read_modes
            modes = read_modes(req.modes_csv, dev)
            return {b: list(modes) for b in sizes}
        cands = dev.pt_grid()
        space = [(m, b) for b in sizes for m in cands]
        n = 50 if n is None else n
        if not 1 <= n <= len(space):
            raise SessionError(f"--count must be between 1 and {len(space)} (mode, batch size) pairs "
                               f"for {dev.name}, got {n}")
        pairs = random.Random(self.seed).sample(space, n)
        return {b: [m for m, bb in pairs if bb == b] for b in sizes}

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
            first = next(iter(self.existing.values()))
            self.how = first.params.get("pairs", "random")
            self.count = first.params.get("pairs_count")
        else:
            self.how = "modes" if req.modes_csv else "random"
            self.count = req.count if req.count is not None else 50
        if self.how == "modes":
            fresh = ({b: list(self.existing[min(self.existing)].plan) for b in sizes} if req.resume
                     else self._pairs(dev, sizes))
        else:
            fresh = self._pairs(dev, sizes, self.count)
        wl = self.workload_name or "script"
        self.name = req.session or self.store.free_name(
            f"{dev.name}-{wl}-bs{'-'.join(map(str, self.batch_sizes))}-{time.strftime('%Y%m%d-%H%M%S')}")
        self.out = req.out if req.out is not None else paths.profile_csv(self.name)
        total = done = 0
        self.plans: dict[int, list | None] = {}
        for b in sizes:
            ex = self.existing.get(b)
            if ex is not None:                  # stored plan, resumed
                self.plans[b] = None
                total, done = total + len(ex.plan), done + ex.n_done
            elif fresh.get(b):
                self.plans[b] = fresh[b]
                total += len(fresh[b])
        self.info = _Info([None] * total, done)
        self.notes.append(f"session {self.name}: {wl} at batch sizes "
                          f"{','.join(map(str, sizes))} on {dev.name} ({self.backend.kind}); "
                          f"{total} (mode, batch size) pairs, {done} done, {total - done} to go")
        return self.info

    def _sub_request(self, b: int, plan) -> ProfileRequest:
        req = self.req
        script = [a.replace(PLACEHOLDER, str(b)) for a in req.script]
        return replace(req, batch_size=b, session=sub_name(self.name, b), seed=self.seed,
                       workload=None if req.script else self.workload_name,
                       resume=b in self.existing, script=script, modes_csv=None, grid=None,
                       count=None, strategy="random", modes=plan,
                       out=paths.profile_csv(sub_name(self.name, b)),
                       params={**req.params, "batch_sizes": list(self.batch_sizes),
                               "group": self.name, "pairs": self.how, "pairs_count": self.count})

    def resume_hint(self) -> str:
        import shlex

        from .userscript import command_text
        cmd = (f"ptui profile --session {shlex.quote(self.name)} --resume --batch-sizes "
               f"{','.join(map(str, self.batch_sizes))} --out {shlex.quote(str(self.out))}")
        return cmd + (f" -- {command_text(self.req.script)}" if self.req.script else "")

    # -- running ------------------------------------------------------------------------------------
    def run(self, on_progress=None) -> ProfileOutcome:
        wall0 = time.perf_counter()
        total = len(self.info.plan)
        self.simulated = self.backend.simulated
        try:
            status, error, interrupted, dev_s, label = self._run_all(on_progress, total)
        finally:
            self.current = None
            try:
                n_rows, saved = self.save()
            finally:
                self.close()
        return ProfileOutcome(status, self.name, self.out if n_rows else None, n_rows, dev_s,
                              self.simulated, time.perf_counter() - wall0, error,
                              interrupted, saved, label)

    def _run_all(self, on_progress, total):
        offset = 0
        status, error, interrupted, dev_s, label = "done", None, False, 0.0, ""
        for b, plan in self.plans.items():
            paths.profile_csv(sub_name(self.name, b)).parent.mkdir(parents=True, exist_ok=True)
            sub = ProfileRun(self._sub_request(b, plan), store=self.store, notify=self.notify)
            self.current = sub
            try:
                sub.prepare(self.backend)
            except BaseException:
                sub.close()
                raise
            for note in sub.notes[1:] if sub.notes and "session " in sub.notes[0] else sub.notes:
                self.notify(note)
            n_sub = len(sub.info.plan)
            base = offset

            def show(p, base=base, dev0=dev_s):
                if on_progress is not None:
                    on_progress(replace(p, done=base + p.done, total=total,
                                        device_time_s=dev0 + p.device_time_s))
            res = sub.run(show)
            offset += n_sub
            dev_s += res.device_time_s
            label = res.label or label
            if res.status != "done":
                status, error, interrupted = res.status, res.error, res.interrupted
                break
        return status, error, interrupted, dev_s, label

    def save(self) -> tuple[int, str]:
        """Join the sub-sessions' rows into the group's CSV (batch_size column; peak_mem_gb from
        the simulator's memory model)."""
        from .csvio import PEAK_COL, fmt_value, keep_aside, write_csv
        from .physics import footprint_gb
        from .profiler import PROFILE_HEADER, profile_rows
        rows = []
        i_sess = PROFILE_HEADER.index("session")
        for b, s in sorted(group_sessions(self.store, self.name).items()):
            peak = ""
            if getattr(self, "simulated", False) and self.workload_name:
                peak = fmt_value(float(footprint_gb(get_workload(self.workload_name, b))))
            for r in profile_rows(self.store, s.name):
                r = list(r)
                r[i_sess] = self.name
                rows.append(r + [peak])
        if not rows:
            return 0, f"no pair finished yet, {self.out} not written"
        if isinstance(self.out, Path):
            self.out.parent.mkdir(parents=True, exist_ok=True)
        moved = keep_aside(self.out, self.name)
        write_csv(self.out, PROFILE_HEADER + (PEAK_COL,), rows)
        kept = f" (the file that was there is kept as {moved})" if moved else ""
        return len(rows), f"{len(rows)} finished (mode, batch size) pairs saved to {self.out}{kept}"

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None
        self.store.close()

    def pause(self) -> None:
        if self.current is not None:
            self.current.pause()

    def resume(self) -> None:
        if self.current is not None:
            self.current.resume()
