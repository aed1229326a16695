"""Profiling use case: a request becomes a profile CSV (one batch size or, with
batchprofile, several), resumable, and the board goes back to its mode whatever happens."""
from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...probe.names import BUILTIN
from ..board import backends  # open_backend looked up when called (tests patch it)
from ..board.backends.base import Backend
from ..board.backends.replay import ReplayJetson, corpus_workload, replay_workload
from ..board.csvio import TIME_BASES, check_out_file, outside_warning, profile_tags, read_modes
from ..board.files import WriteError, write_error
from ..board.locks import lock_session, unlock_session
from ..board.physics import fits, footprint_gb, largest_batch, memory_gb, steady_state
from ..catalogue.devices import get_device
from ..catalogue.modes import Mode
from ..catalogue.workloads import WORKLOADS, Workload, get_workload
from ..errors import Interrupted, PtuiError
from ..paths import latest_outputs as latest_paths
from ..paths import profile_csv, script_log
from ..prediction.predictor import load_bundled
from ..prediction.roofline import BOARDS, RooflinePrior, WorkloadSpec
from ..profiling.active import ActivePlanner, Goal, make_plan
from ..profiling.pool import Pool, PoolError, pooling_store
from ..profiling.profiler import (
    Control,
    ProfileAborted,
    ProfileConfig,
    Profiler,
    Progress,
    SessionError,
    choose_modes,
    open_session,
    profile_rows,
    save_profile,
    time_unit,
)
from ..profiling.store import SessionInfo, Store, StoreError, check_session_name
from ..profiling.userscript import (
    WHATIF_LABEL,
    ScriptSource,
    check_resume_command,
    command_text,
    script_workload,
    steps_note,
)
from ..profiling.userscript import resume_hint as resume_command


class Cancelled(Interrupted):
    """A use case stopped because its cancel event was set (exit code 130)."""


# -- profile -----------------------------------------------------------------------------------------
@dataclass
class ProfileRequest:
    """What to profile.  A script (argv) profiles the user's own training command; otherwise a
    catalog workload; `session` + `resume` continue an interrupted session.  strategy/goal choose
    the modes (active profiling extends the plan one mode at a time); a replay device (corpus)
    offers only its recorded modes."""
    workload: str | None = None
    batch_size: int | None = None
    count: int | None = None
    modes_csv: str | None = None
    grid: str | None = None
    seed: int | None = None
    session: str | None = None
    resume: bool = False
    sample_interval: float | None = None
    script: list[str] = field(default_factory=list)
    out: Path | str | None = None         # None: the app's profiles directory
    params: dict = field(default_factory=dict)
    strategy: str | None = None           # random | space-filling | active (None: random, or resumed)
    budget_w: float | None = None         # active profiling's goal (pareto's meaning)
    deadline_ms: float | None = None
    objective: str | None = None
    startup_timeout: float | None = None  # a script's first optimizer step may take this long
                                          # (None: userscript.STARTUP_TIMEOUT_S)
    modes: list[Mode] | None = None       # an explicit plan (a profile over batch sizes draws its pairs)
    noise_scale: float | None = None      # active over batch sizes: samples to target (batch.relation)
    samples_to_target: str | None = None
    corpus: str | None = None             # the replay device's recorded profile (with no workload:
                                          # the corpus is the workload)
    time_basis: str = "auto"              # what decides: step | cycle | auto (csvio.choose_time);
                                          # recorded in the CSV's time_basis when not auto
    batch_part: bool = False              # one batch size of a profile over several (batchprofile):
                                          # its script log is NAME@bsB.log, the CSV is the profile's
    workload_spec: str | None = None      # SPEC.json: the step's counts (roofline prior, active start)


@dataclass
class ProfileOutcome:
    status: str                           # done | aborted | failed
    session: str
    out: Path | str | None                # the CSV written, or None when nothing was written
    n_rows: int
    device_time_s: float
    simulated: bool                       # not a live board's figures: simulated, emulated, a what-if
    wall_s: float
    error: BaseException | None = None
    interrupted: bool = False             # Ctrl-C or a stop signal (as opposed to a cancel from the app)
    stopped_by: str = ""                  # what interrupted it: "Ctrl-C", "SIGTERM", "SIGHUP"
    saved: str = ""                       # what happened to the CSV, in words
    label: str = ""                       # simulated / replayed / what-if, in words ("" on a board)
    stop_reason: str = ""                 # active profiling: why it stopped
    best: tuple | None = None             # active profiling: (best measured mode, P(meets goal))
    time_note: str = ""                   # a large share of the wall time outside the timed steps


class RunBase:
    """What a profile at one batch size (ProfileRun) and one over several (batchprofile.
    BatchProfileRun) share: the request's checks and the store, the session looked up for a
    resume, the backend the CLI opens, the CSV's place, the session's lock until close(), the
    export of a finished session, writing the CSV (each class's save()) and the failure to, the
    outcome of run(), pause/resume/cancel through the control, and closing."""
    backend: Backend | None = None
    _own_backend = False                  # opened here (the CLI), not lent by the app
    _own_store = False
    name: str | None = None
    out: Path | str | None = None
    existing: SessionInfo | None = None   # the session --session names
    seed: int = 0
    simulated = False                     # the session's figures are the simulator's
    _locked = False                       # this run holds the session's lock until close()
    planner: ActivePlanner | None = None  # active profiling's (over a joint Space for several sizes)

    def _start(self, req: ProfileRequest, store: Store | None, control: Control | None,
               notify: Callable[[str], None] | None) -> None:
        """Check the request and the --out file, and open the store (this run's own unless one is
        lent): refused before any session exists, at one batch size or several."""
        if req.startup_timeout is not None and not (math.isfinite(req.startup_timeout)
                                                    and req.startup_timeout > 0):
            raise SessionError(f"--startup-timeout must be a positive number of seconds, "
                               f"got {req.startup_timeout:g}")
        if req.time_basis not in TIME_BASES:
            raise SessionError(f"--time must be one of {', '.join(TIME_BASES)}, got {req.time_basis!r}")
        self.req = req
        self.control = control or Control()
        self.notify = notify or (lambda text: None)
        if req.out is not None:
            check_out_file(req.out)
        self.store = store or Store()
        self._own_store = store is None
        self.notes: list[str] = [self.store.notice] if self.store.notice else []

    def _session(self) -> SessionInfo | None:
        """The session --session names (None: none by that name, or no --session); a resume
        needs one that exists."""
        req = self.req
        if req.session is not None:
            check_session_name(req.session)
        if req.resume and not req.session:
            raise SessionError("--resume needs --session NAME")
        ex = self.store.get_session(req.session) if req.session else None
        if req.resume and ex is None:
            raise SessionError(f"no session named {req.session!r} to resume "
                               f"(list them with: ptui sessions)")
        return ex

    def _open_backend(self, kind: str | None, device: str | None, root: str | None,
                      corpus: str | None) -> str:
        self.backend, note = backends.open_backend(kind, device, seed=self.seed,
                                          sample_interval=self.req.sample_interval, root=root,
                                          corpus=corpus)
        self._own_backend = True
        return note

    def _name_session(self, stem: str) -> None:
        """The session's name (--session, else a free one: the stem and the time) and its CSV."""
        self.name = self.req.session or self.store.free_name(f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}")
        self.out = self._csv(self.name)

    def _csv(self, name: str) -> Path | str:
        """The CSV a session goes to: --out, else the app's profiles directory."""
        return self.req.out if self.req.out is not None else profile_csv(name)

    what = "modes"                        # the CSV's rows, in words

    def save(self) -> tuple[int, str]:
        """Write the session's finished rows to the CSV: (rows, what happened in words)."""
        raise NotImplementedError

    def _elsewhere(self, status: str) -> str:
        """The command that writes the finished rows, safe in the store, to another file."""
        raise NotImplementedError

    def _save(self, status: str) -> tuple[int, str, WriteError | None]:
        """save(): (rows, what happened in words, None), or when the file cannot be written (disk
        full, read-only, ...) the failure as a WriteError that says how to get the rows, safe in
        the store, out to another file (at one batch size or several)."""
        assert self.name is not None          # prepare() or export() named the session
        try:
            return (*self.save(), None)
        except StoreError:
            raise
        except (PtuiError, OSError) as e:
            info = self.store.get_session(self.name)
            n = info.n_done if info else 0
            if not n:
                raise
            err = self._write_failed(e, n, self.what, self._elsewhere(status))
            return n, str(err), err

    def export(self, device: str | None = None) -> ProfileOutcome:
        """A finished session resumed (`finished`): write its CSV from the store, holding the
        session's lock, then close.  No device is opened and nothing is profiled; a script session
        needs no command.  `device`: the board the user named, which must be the session's."""
        ex = self.existing
        assert ex is not None                 # finished: a session resumed by name
        self.name = ex.name
        self.out = self._csv(ex.name)
        self.simulated = ex.backend == "sim"
        try:
            if device is not None and device != ex.device:
                raise SessionError(f"session {ex.name!r} was profiled on {ex.device}, not {device}")
            lock_session(ex.name)
            try:
                n_rows, saved, unsaved = self._save("done")
            finally:
                unlock_session(ex.name)
        finally:
            self.close()
        return ProfileOutcome("done", ex.name, self.out if n_rows and unsaved is None else None,
                              n_rows, ex.device_time_s, self.simulated, 0.0, unsaved, saved=saved,
                              label={"sim": "simulated", "replay": "replayed from recorded data"}
                              .get(ex.backend, ""))

    def _write_failed(self, e: Exception, n: int, what: str, hint: str) -> WriteError:
        """The CSV could not be written: the failure, saying the n finished `what` are safe in the
        session and how to write them elsewhere (hint)."""
        msg = str(write_error(self.out, e) if isinstance(e, OSError) else e)
        return WriteError(f"{msg}; the {n} finished {what} are safe in session {self.name}: "
                          f"write them elsewhere with: {hint}")

    def _resume_args(self) -> tuple[list[str], list[str] | None]:
        raise NotImplementedError

    def _device_s(self) -> float:
        """The device time the session has taken, over all its runs."""
        info = self.store.get_session(self.name) if self.name else None
        return info.device_time_s if info else 0.0

    def _outcome(self, status: str, wall0: float, n_rows: int, unsaved: WriteError | None,
                 dev_s: float, simulated: bool, error: BaseException | None, interrupted: bool,
                 stopped_by: str, saved: str, label: str, note: str = "", *,
                 planner_said: bool = True) -> ProfileOutcome:
        """What run() ends with: the CSV only when rows went to it; active profiling's stop and
        best mode, when planner_said."""
        assert self.name is not None
        pl = self.planner if planner_said else None
        return ProfileOutcome(status, self.name, self.out if n_rows and unsaved is None else None,
                              n_rows, dev_s, simulated, time.perf_counter() - wall0,
                              error or unsaved, interrupted, stopped_by, saved, label,
                              pl.stop_reason if pl is not None else "",
                              pl.best() if pl is not None else None, note)

    def resume_hint(self, out: Path | str | None = None) -> str:
        """The command that resumes this session (writing its CSV to `out`, default --out's)."""
        assert self.name is not None          # prepare() or export() named the session
        extra, script = self._resume_args()
        return resume_command(self.name, self.out if out is None else out, script, extra)

    def done_results(self) -> list[tuple[int, dict]]:
        """The points this session finished before this run (a resumed session)."""
        return self.store.results(self.name) if self.name else []

    def close(self) -> None:
        """Let go of the session's lock this run holds, and close the CLI's backend and this run's
        own store connection."""
        if self._locked:
            assert self.name is not None
            unlock_session(self.name)
            self._locked = False
        if self._own_backend and self.backend is not None:
            self.backend.close()
            self._own_backend = False
        if self._own_store:
            self.store.close()
            self._own_store = False

    def pause(self) -> None:
        self.control.pause()

    def resume(self) -> None:
        self.control.resume()

    def cancel(self) -> None:
        self.control.abort()


class ProfileRun(RunBase):
    """One profiling run, from a request to a CSV.

    resolve (constructor) -> open_backend() [CLI] or a backend the app holds -> prepare() -> run().
    pause(), resume() and cancel() may be called from any thread while run() is under way.
    notify(text) receives notes while the run goes (a script still starting, ...)."""
    workload: Workload | None             # None only for a finished script session, which export() writes
    device_name: str | None               # the resumed session's board

    def __init__(self, req: ProfileRequest, store: Store | None = None,
                 control: Control | None = None, notify: Callable[[str], None] | None = None) -> None:
        self._start(req, store, control, notify)
        try:
            self._resolve()
        except BaseException:
            if self._own_store:
                self.store.close()
            raise
        self.info: SessionInfo | None = None
        self.profiler: Profiler | None = None
        self.planner: ActivePlanner | None = None
        self.source: ScriptSource | None = None
        self.log: Path | None = None
        self._pool: Pool | None = None    # the fleet's pool, when $PTUI_POOL names one

    def _resolve(self) -> None:
        req = self.req
        self.script = list(req.script)
        if not self.script and not req.workload and not req.resume and not req.corpus:
            raise SessionError("--workload is required (or --resume an existing --session; on the "
                               "replay device --corpus F.csv is the workload)")
        self.existing = self._session()
        ex = self.existing
        if req.resume and ex is not None and ex.batch_sizes is not None and not req.batch_part:
            # one training run holds one batch size: a profile over several runs size by size
            raise SessionError(f"session {ex.name!r} profiles batch sizes "
                               f"{','.join(map(str, ex.batch_sizes))}: resume it with "
                               f"ptui profile --session {ex.name} --resume")
        # resumed with nothing left to profile: export() writes its CSV from the store, no device
        self.finished = bool(req.resume and ex is not None and ex.status == "done" and ex.n_done)
        self.seed = req.seed if req.seed is not None else (ex.seed if ex else 0)
        self.batch_size = req.batch_size or (ex.batch_size if ex else 16)
        self.is_script = bool(self.script) or (ex is not None and ex.workload == "script")
        self.recorded = False                 # a recorded model replayed under its own name
        if self.finished and ex is not None and ((req.workload and req.workload != ex.workload) or (
                req.batch_size and req.batch_size != ex.batch_size)):
            raise SessionError(f"session {ex.name!r} profiles {ex.workload} at batch size "
                               f"{ex.batch_size}, not {req.workload or ex.workload} at "
                               f"{req.batch_size or ex.batch_size}")
        if self.is_script:
            if not self.script:
                assert ex is not None                 # a script session without a command: resumed
                if self.finished:                     # export() needs no command
                    self.workload, self.device_name, self.user_script = None, ex.device, False
                    return
                cmd = ex.params.get("command")
                raise SessionError("resume a script session with the same command after --"
                                   + (f": -- {command_text(cmd)}" if cmd else ""))
            if req.resume and ex is not None:
                check_resume_command(ex.params, self.script)
            # on the simulator the profile is a what-if of the script's measured model
            self.workload = script_workload(self.batch_size, self.script)
        else:
            self.workload = self._catalog_or_replayed(req.workload or (ex.workload if ex else None))
            self.batch_size = self.workload.batch_size
        self.device_name = ex.device if ex else None
        self.user_script = bool(self.script)

    def _catalog_or_replayed(self, name: str | None) -> Workload:
        """A built-in workload, or on the replay device the recorded one: the corpus is the
        workload (named by its workload column or file name, at its batch size; a name of the
        user's own is kept), and a replay session resumes under the name it was profiled as."""
        req, ex = self.req, self.existing
        replayed = bool(req.corpus) or (ex is not None and ex.backend == "replay")
        self.recorded = replayed and (name is None or name.strip().lower() not in WORKLOADS)
        if name is None:
            assert req.corpus                 # no workload and no session: _resolve let the corpus in
            return corpus_workload(req.corpus, req.batch_size)
        if not self.recorded:
            return get_workload(name, self.batch_size)
        size = (self.batch_size if req.batch_size or ex or not req.corpus
                else corpus_workload(req.corpus).batch_size)
        return replay_workload(name, size, Path(req.corpus).name if req.corpus else "")

    @property
    def memory_checked(self) -> bool:
        """Whether a batch that does not fit is refused up front: a catalog workload's modelled
        footprint (not a script's, not a recorded model the corpus shows running)."""
        return not self.is_script and not self.recorded

    # -- set-up -------------------------------------------------------------------------------------
    def open_backend(self, kind: str | None, device: str | None, root: str | None = "/",
                     corpus: str | None = None) -> str:
        """Open the backend this run needs; returns the note saying which and why."""
        # refused before anything opens
        board = device or self.device_name
        if board and self.memory_checked and self.workload is not None:
            check_memory(get_device(board), self.workload, self.batch_size)
        return self._open_backend(kind, board, root, corpus or self.req.corpus)

    def _spec(self, sp: dict):
        """The workload's spec for its roofline prior: the one a resumed session recorded (its plan
        continues as it started), else --workload-spec; None without one (the planner then starts
        from the bundled reference, as before the prior existed: the prior is asked for)."""
        if isinstance(sp.get("workload_spec"), dict):
            return WorkloadSpec.from_dict(sp["workload_spec"], "the session's workload spec")
        if self.req.workload_spec:
            return WorkloadSpec.from_json(self.req.workload_spec)
        return None

    def _plan(self, dev):
        """The plan function for open_session and, for active profiling, the planner."""
        req, be = self.req, self.backend
        replay = be if isinstance(be, ReplayJetson) else None
        sp = self.existing.params if self.existing and req.resume else {}
        strategy = sp.get("strategy") or req.strategy or "random"
        cands = replay.candidates() if replay is not None else None    # recorded modes only
        goal_d = sp.get("goal") or {"budget_w": req.budget_w, "deadline_ms": req.deadline_ms,
                                    "objective": req.objective}
        goal = Goal(**goal_d) if any(v is not None for v in goal_d.values()) else None
        count = sp.get("count", req.count)
        first = None
        spec = self._spec(sp)
        if not (req.modes_csv or req.grid or req.modes is not None):
            prior = None
            if strategy == "active" and spec is not None:
                prior = RooflinePrior(dev, spec) if dev.name in BOARDS else None
            first, self.planner = make_plan(dev, strategy, count=count, seed=self.seed,
                                            candidates=cands, goal=goal,
                                            reference=load_bundled() if strategy == "active" else None,
                                            prior=prior)
        params = {"strategy": strategy, "count": count, "goal": goal.as_dict() if goal else None,
                  **({"workload_spec": spec.as_dict()} if spec is not None else {})}

        def plan_fn() -> list[Mode]:
            if req.modes is not None:
                return choose_modes(dev, modes=req.modes)
            if req.modes_csv:
                modes = read_modes(req.modes_csv, dev)
                if replay is not None:          # before any mode is profiled, not in the middle
                    check_recorded(modes, cands, replay.corpus_path.name)
                return choose_modes(dev, modes=modes)
            if req.grid:
                return choose_modes(dev, modes=cands) if cands else choose_modes(dev, grid=req.grid)
            assert first is not None            # planned above: no modes were given
            return first
        return plan_fn, params

    def prepare(self, backend: Backend | None = None) -> SessionInfo:
        """Choose the training loop for the backend, open (or reopen) the session with its plan,
        and build the profiler.  A backend that cannot train a catalog workload itself (a real board)
        runs ptui's own plain-torch loop for it under the minibatch probe."""
        if backend is not None:
            self.backend = backend
        be = self.backend
        if be is None:
            raise SessionError("no backend to profile on")
        dev = be.device
        req, wl = self.req, self.workload
        assert wl is not None, "a finished script session is exported, not profiled"
        ex = self.existing
        if (self.recorded or (req.resume and ex is not None and ex.backend == "replay")) \
                and be.kind != "replay":
            raise SessionError(f"session {ex.name} was profiled on the replay device: resume it "
                               f"with --backend replay --corpus F.csv" if req.resume and ex else
                               f"{wl.name} is a recorded workload, not a built-in one: replay it "
                               f"with --backend replay --corpus F.csv")
        if self.memory_checked:
            check_memory(dev, wl, self.batch_size)
        if not self.is_script and not be.trains_builtin:
            if wl.name not in BUILTIN:
                raise SessionError(
                    f"no built-in training loop for {wl.name} on a real board (built in: "
                    f"{', '.join(BUILTIN)}); profile your own script: ptui profile ... -- python train.py")
            self.script = [sys.executable, "-m", "ptui.probe.loops", wl.name,
                           "--batch-size", str(self.batch_size)]
        # a script's batch is what its own code feeds, unknown until measured: named only if stated
        self.bs_stated = not self.user_script or bool(req.batch_size)
        bs_part = f"-bs{self.batch_size}" if self.bs_stated else ""
        self._name_session(f"{dev.name}-{wl.name}{bs_part}")
        assert self.name is not None
        plan_fn, plan_params = self._plan(dev)
        params = {"out": str(self.out), **plan_params, **req.params}
        if self.user_script:
            params["command"] = self.script
            params.setdefault("batch_size_stated", self.bs_stated)
        if isinstance(be, ReplayJetson):      # the profile says its figures are replayed
            params.setdefault("timed", f"{time_unit(profile_tags(be.corpus_path).get('timed'))} "
                                       f"(REPLAYED from {be.corpus_path.name})")
        if req.time_basis != "auto":
            params["time_basis"] = req.time_basis
        self.info = open_session(self.store, self.name, resume=req.resume, device=dev, workload=wl,
                                 seed=self.seed, backend_kind=be.kind, plan_fn=plan_fn,
                                 original_mode=be.current_mode(), params=params)
        self._locked = True                   # open_session took the session's lock
        todo = len(self.info.plan) - self.info.n_done
        bs_txt = f" bs{self.batch_size}" if self.bs_stated else ""
        self.notes.append(f"session {self.name}: {wl.model}{bs_txt} on {dev.name} "
                          f"({be.kind}); {len(self.info.plan)} modes, {self.info.n_done} done, "
                          f"{todo} to go")
        if self.script:
            self.log = script_log(f"{self.name}@bs{self.batch_size}" if req.batch_part
                                        else self.name)
            cfg0 = ProfileConfig()
            name = self.name
            self.source = ScriptSource(be, self.script, self.log,
                                       first_step_timeout=req.startup_timeout, notify=self.notify,
                                       on_info=lambda d: self.store.merge_params(name, d),
                                       steps_per_mode=cfg0.min_minibatches + 2, modes_todo=todo)
            self.notes.append(f"running {' '.join(self.script)!r} under the optimizer-step probe; "
                              f"its output goes to {self.log}")
            if be.simulated:
                self.notes.append(f"no Jetson: the profile is a {WHATIF_LABEL}; the script runs only "
                                  f"until its model is measured and a few steps are timed on this machine")
            else:
                self.notes.append(steps_note(cfg0.min_minibatches, todo))
        self.profiler = Profiler(be, wl, self.store, self.name,
                                 ProfileConfig(sample_interval=req.sample_interval),
                                 source=self.source, planner=self.planner)
        self.profiler.control = self.control
        self.profiler.notify = self.notify
        self._send_to_pool(be)
        self.profiler.time_basis = self.info.params.get("time_basis") or req.time_basis
        if self.planner is not None:
            self.notes.append(f"active profiling for the goal '{self.planner.goal.describe()}': up to "
                              f"{self.planner.count} modes, stopping early once the decision is confident")
        return self.info

    def _send_to_pool(self, be: Backend) -> None:
        """With a fleet's pool configured ($PTUI_POOL), every finished row also goes there, right
        after the session store committed it (and the rows a killed run finished before it could
        send them); a pool that cannot be reached is said, and the profile goes on without it."""
        assert self.profiler is not None and self.info is not None and self.name is not None
        try:
            store, pool = pooling_store(self.profiler.store, device=be.device, workload=self.info.workload,
                                        batch_size=self.batch_size, simulated=bool(be.simulated),
                                        notify=self.notify)
        except PoolError as e:
            self.notes.append(f"warning: {e}; this profile is not sent to the pool (send it later "
                              f"with ptui pool push)")
            return
        if pool is None:
            return
        self._pool = pool
        self.profiler.store = store
        store.sync(self.name)
        self.notes.append(f"each finished row also goes to the pool {pool.where} as board "
                          f"{store.board!r}")

    def _resume_args(self) -> tuple[list[str], list[str] | None]:
        """What a resume adds to --session NAME --resume: options before --out (the replay device's),
        and the user's command after -- (None: no script)."""
        be = self.backend
        replay = ["--backend", "replay", "--corpus", str(be.corpus_path)] \
            if isinstance(be, ReplayJetson) else []
        return replay, (self.script if self.user_script else None) or None

    # -- running ------------------------------------------------------------------------------------
    @property
    def progress(self) -> Progress | None:
        return self.profiler.progress if self.profiler else None

    def _label(self) -> str:
        be = self.backend
        assert be is not None                 # run() asks only with a backend
        if self.source is not None and getattr(self.source, "workload", None) is not None:
            host = (f"{self.source.host_step_ms:.1f} ms" if self.source.host_step_ms else "not timed")
            return f"{WHATIF_LABEL}; host step time on this machine {host}"
        if be.kind == "replay":
            return "replayed from recorded data"
        if be.emulated:
            return "power and clocks from an emulated board (SIMULATED); step times measured"
        return "simulated" if be.simulated else ""

    def run(self, on_progress: Callable[[Progress], None] | None = None) -> ProfileOutcome:
        """Profile every remaining mode; the device is back in its original mode afterwards.
        The CSV holds every finished mode, whatever happened (never written before one finished;
        a file there that ptui did not write for this session is kept aside)."""
        if self.profiler is None:
            self.prepare()
        # prepare() made them (or raised)
        assert self.profiler is not None and self.info is not None and self.name is not None
        assert self.backend is not None
        wall0 = time.perf_counter()
        status, error, interrupted, stopped_by = "failed", None, False, ""
        saved, n_rows, unsaved, dev_s = "", 0, None, 0.0
        try:
            try:
                self._locked = False           # Profiler.run lets the session go when it ends
                self.profiler.run(self.info, on_progress)
                status = "done"
            except ProfileAborted:
                status = "aborted"
            except KeyboardInterrupt as e:
                status, interrupted = "aborted", True
                stopped_by = getattr(e, "name", "Ctrl-C")
            except Exception as e:  # noqa: BLE001 - reported in the outcome; the caller decides
                error = e
            finally:
                n_rows, saved, unsaved = self._save(status)
                dev_s = self._device_s()
            note = self.time_note()
        finally:
            label = self._label() if self.backend is not None else ""
            self.close()
        be = self.backend                  # figures a live board did not give: said so
        simulated = be.not_live or (self.source is not None
                                    and getattr(self.source, "workload", None) is not None)
        return self._outcome(status, wall0, n_rows, unsaved, dev_s, simulated, error, interrupted,
                             stopped_by, saved, label, note)

    def time_note(self) -> str:
        """The warning for a profile whose wall time goes largely outside the timed steps."""
        rows = [r for _, r in self.store.results(self.name)] if self.name else []
        return outside_warning(rows, self.profiler.time_basis if self.profiler else self.req.time_basis)

    def save(self) -> tuple[int, str]:
        """Write the session's finished modes to the CSV (a batch size's part writes none: the
        profile over several sizes writes its own)."""
        assert self.name is not None          # prepare() or export() named the session
        n_rows = len(profile_rows(self.store, self.name))
        if self.req.batch_part:
            return n_rows, ""
        if n_rows and isinstance(self.out, Path):
            self.out.parent.mkdir(parents=True, exist_ok=True)
        return n_rows, save_profile(self.out, self.store, self.name)

    def _elsewhere(self, status: str) -> str:
        assert self.name is not None
        script = self.script if self.user_script and status != "done" else None
        return resume_command(self.name, "elsewhere.csv", script or None)

    def close(self) -> None:
        """Close what this run opened (the CLI's backend, its own store connection) and let go of
        its session (prepare() took the session's lock; a run that never started, or failed
        before it did, must not keep it from a later --resume)."""
        super().close()
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def check_recorded(modes: list[Mode], recorded, corpus: str, what: str = "--modes") -> None:
    """The replay device applies only recorded modes: a plan (a --modes file, a mode to apply)
    with others is refused up front, naming how many and the first ones."""
    have = set(recorded)
    missing = [m for m in dict.fromkeys(modes) if m not in have]
    if missing:
        first = ", ".join(m.key for m in missing[:3]) + (", ..." if len(missing) > 3 else "")
        which = (f"{len(missing)} of the {len(set(modes))} {what} are" if len(modes) > 1 else
                 f"{what} {first} is")
        raise SessionError(f"{which} not in the replay corpus {corpus} ({len(have)} recorded "
                           f"modes), which can replay only recorded modes"
                           + (f": {first}" if len(modes) > 1 else ""))


def latest_outputs(device: str) -> tuple[Path | None, Path | None]:
    """The newest complete profile and the newest model the app made for this device: an aborted
    or failed profile is never offered as the one to fine-tune on."""
    profile, model = latest_paths(device, complete=_complete_profile)
    return profile, model


def _complete_profile(csv: Path) -> bool:
    """A profile the app wrote is complete when its session finished (or is gone from the store);
    while the store cannot be read (another process holds it) it is not known to be."""
    try:
        store = Store()
    except StoreError:
        return False
    try:
        s = store.get_session(csv.stem)
    except StoreError:
        return False
    finally:
        store.close()
    return s is None or (s.status == "done" and s.n_done == len(s.plan))


def resumable_sessions(device: str) -> list[SessionInfo]:
    """Unfinished sessions profiled on this device, newest first."""
    store = Store()
    try:
        return [s for s in store.list_sessions() if s.resumable and s.device == device]
    finally:
        store.close()


def check_memory(device, workload: Workload, batch_size: int) -> None:
    """Refuse up front a catalog workload whose batch does not fit the board's memory (the
    simulator's footprint model, physics.fits; on a real board an estimate), before any session
    is opened or mode changed."""
    if bool(fits(device, workload, batch_size)):
        return
    big = largest_batch(device, workload)
    raise SessionError(
        f"{workload.name} at batch size {batch_size} does not fit {device.name}: it needs "
        f"{float(footprint_gb(workload, batch_size)):.1f} GB, {memory_gb(device):.1f} GB is free for "
        f"training (ptui's memory model); " + (f"the largest batch that fits is {big}" if big else
                                               "not even batch size 1 fits"))


def estimate_device_s(device, workload, modes, sample_interval: float = 0.5) -> float:
    """Rough device time of a plan: per mode, the protocol's ~4 s of switching and settling plus
    ~42 minibatches (at least 5 power samples), each as long as ptui's model of the workload at
    its batch size says (core.physics: the simulator's, so exact there; a board's own times
    differ, and so does the estimate)."""
    a = np.array([m.as_tuple() for m in modes], dtype=float).reshape(-1, 4)
    t = steady_state(device, workload, a[:, 0], a[:, 1], a[:, 2], a[:, 3]).time_ms / 1000.0
    return float(np.sum(3.8 + np.maximum(42 * t, 5 * sample_interval)))
