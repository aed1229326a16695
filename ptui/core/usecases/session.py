"""Use cases shared by the CLI and the app: profile, fit, decide, apply, roll back, persist, restore.

Each one takes plain values, reports progress through a callback and can be cancelled (a profile
through its Control, a fit through a threading.Event).  The CLI parses and prints around these calls;
the app's screens run them in workers and show what they return.  No rule lives in one face only:
which training loop runs on which backend, where files go, and what `ptui restore` goes back to are
all decided here.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import paths
from ..board.apply import ApplyResult, Plan, apply_mode, plan
from ..board.backends.base import Backend, BackendError
from ..board.files import WriteError, write_error
from ..catalogue.modes import Mode
from ..catalogue.workloads import Workload, get_workload
from ..decision.pareto import DEFAULT_RISK, Decision, Table
from ..errors import InputError, Interrupted, PtuiError
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
)
from ..profiling.store import SessionInfo, Store, StoreError, check_session_name
from ..progress import SAVING, SAVING_STEP, Step, stage

if TYPE_CHECKING:
    from ..decision.batch import JointSpace, SamplesToTarget
    from ..prediction.predictor import Model
    from ..profiling.active import ActivePlanner
    from ..profiling.userscript import ScriptSource


class Cancelled(Interrupted):
    """A use case stopped because its cancel event was set (exit code 130)."""


class CapabilityError(BackendError):
    """The backend cannot do what was asked (e.g. persist on the simulator): bad input, exit 2."""
    exit_code = 2


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


class ProfileRun:
    """One profiling run, from a request to a CSV.

    resolve (constructor) -> open_backend() [CLI] or a backend the app holds -> prepare() -> run().
    pause(), resume() and cancel() may be called from any thread while run() is under way.
    notify(text) receives notes while the run goes (a script still starting, ...)."""
    workload: Workload | None             # None only for a finished script session, which export() writes

    def __init__(self, req: ProfileRequest, store: Store | None = None,
                 control: Control | None = None, notify: Callable[[str], None] | None = None) -> None:
        self.req = req
        self.control = control or Control()
        self.notify = notify or (lambda text: None)
        import math
        if req.startup_timeout is not None and not (math.isfinite(req.startup_timeout)
                                                    and req.startup_timeout > 0):
            raise SessionError(f"--startup-timeout must be a positive number of seconds, "
                               f"got {req.startup_timeout:g}")
        from ..board.csvio import TIME_BASES
        if req.time_basis not in TIME_BASES:
            raise SessionError(f"--time must be one of {', '.join(TIME_BASES)}, got {req.time_basis!r}")
        if req.out is not None:
            from ..board.csvio import check_out_file
            check_out_file(req.out)
        self.store = store or Store()
        self._own_store = store is None
        self.notes: list[str] = []
        if self.store.notice:
            self.notes.append(self.store.notice)
        try:
            self._resolve()
        except BaseException:
            if self._own_store:
                self.store.close()
            raise
        self.backend: Backend | None = None
        self._own_backend = False
        self.name: str | None = None
        self.info: SessionInfo | None = None
        self._let_go = False              # close() released the session's lock
        self.profiler: Profiler | None = None
        self.planner: ActivePlanner | None = None
        self.source: ScriptSource | None = None
        self.log: Path | None = None
        self.out: Path | str | None = None

    def _resolve(self) -> None:
        req = self.req
        self.script = list(req.script)
        if not self.script and not req.workload and not req.resume and not req.corpus:
            raise SessionError("--workload is required (or --resume an existing --session; on the "
                               "replay device --corpus F.csv is the workload)")
        if req.session is not None:
            check_session_name(req.session)
        if req.resume and not req.session:
            raise SessionError("--resume needs --session NAME")
        self.existing: SessionInfo | None = self.store.get_session(req.session) if req.session else None
        if req.resume and self.existing is None:
            raise SessionError(f"no session named {req.session!r} to resume "
                               f"(list them with: ptui sessions)")
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
            from ..profiling.userscript import check_resume_command, command_text, script_workload
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
        from ..board.backends.replay import corpus_workload, replay_workload
        from ..catalogue.workloads import WORKLOADS
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
        from ..board.backends import open_backend
        corpus = corpus or self.req.corpus
        # refused before anything opens
        if (device or self.device_name) and self.memory_checked and self.workload is not None:
            from ..catalogue.devices import get_device
            check_memory(get_device(device or self.device_name), self.workload, self.batch_size)
        self.backend, note = open_backend(kind, device or self.device_name, seed=self.seed,
                                          sample_interval=self.req.sample_interval, root=root,
                                          corpus=corpus)
        self._own_backend = True
        return note

    def _plan(self, dev):
        """The plan function for open_session and, for active profiling, the planner."""
        from ..board.backends.replay import ReplayJetson
        from ..profiling.active import Goal, make_plan
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
        if not (req.modes_csv or req.grid or req.modes is not None):
            from ..prediction.predictor import load_bundled
            first, self.planner = make_plan(dev, strategy, count=count, seed=self.seed,
                                            candidates=cands, goal=goal,
                                            reference=load_bundled() if strategy == "active" else None)
        params = {"strategy": strategy, "count": count, "goal": goal.as_dict() if goal else None}

        def plan_fn() -> list[Mode]:
            if req.modes is not None:
                return choose_modes(dev, modes=req.modes)
            if req.modes_csv:
                from ..board.csvio import read_modes
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
            from ...probe.names import BUILTIN
            if wl.name not in BUILTIN:
                raise SessionError(
                    f"no built-in training loop for {wl.name} on a real board (built in: "
                    f"{', '.join(BUILTIN)}); profile your own script: ptui profile ... -- python train.py")
            self.script = [sys.executable, "-m", "ptui.probe.loops", wl.name,
                           "--batch-size", str(self.batch_size)]
        # a script's batch is what its own code feeds, unknown until measured: named only if stated
        self.bs_stated = not self.user_script or bool(req.batch_size)
        bs_part = f"-bs{self.batch_size}" if self.bs_stated else ""
        self.name = req.session or self.store.free_name(
            f"{dev.name}-{wl.name}{bs_part}-{time.strftime('%Y%m%d-%H%M%S')}")
        self.out = req.out if req.out is not None else paths.profile_csv(self.name)
        plan_fn, plan_params = self._plan(dev)
        params = {"out": str(self.out), **plan_params, **req.params}
        if self.user_script:
            params["command"] = self.script
            params.setdefault("batch_size_stated", self.bs_stated)
        from ..board.backends.replay import ReplayJetson
        if isinstance(be, ReplayJetson):      # the profile says its figures are replayed
            from ..board.csvio import profile_tags
            from ..profiling.profiler import time_unit
            params.setdefault("timed", f"{time_unit(profile_tags(be.corpus_path).get('timed'))} "
                                       f"(REPLAYED from {be.corpus_path.name})")
        if req.time_basis != "auto":
            params["time_basis"] = req.time_basis
        self.info = open_session(self.store, self.name, resume=req.resume, device=dev, workload=wl,
                                 seed=self.seed, backend_kind=be.kind, plan_fn=plan_fn,
                                 original_mode=be.current_mode(), params=params)
        todo = len(self.info.plan) - self.info.n_done
        bs_txt = f" bs{self.batch_size}" if self.bs_stated else ""
        self.notes.append(f"session {self.name}: {wl.model}{bs_txt} on {dev.name} "
                          f"({be.kind}); {len(self.info.plan)} modes, {self.info.n_done} done, "
                          f"{todo} to go")
        if self.script:
            from ..profiling.userscript import WHATIF_LABEL, ScriptSource, steps_note
            self.log = paths.script_log(f"{self.name}@bs{self.batch_size}" if req.batch_part
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
        self.profiler.time_basis = self.info.params.get("time_basis") or req.time_basis
        if self.planner is not None:
            self.notes.append(f"active profiling for the goal '{self.planner.goal.describe()}': up to "
                              f"{self.planner.count} modes, stopping early once the decision is confident")
        return self.info

    def resume_hint(self) -> str:
        from ..board.backends.replay import ReplayJetson
        from ..profiling.userscript import resume_hint
        assert self.name is not None          # prepare() or export() named the session
        be = self.backend
        replay = ["--backend", "replay", "--corpus", str(be.corpus_path)] \
            if isinstance(be, ReplayJetson) else []
        return resume_hint(self.name, self.out, (self.script if self.user_script else None) or None,
                           replay)

    # -- running ------------------------------------------------------------------------------------
    @property
    def progress(self) -> Progress | None:
        return self.profiler.progress if self.profiler else None

    def done_results(self) -> list[tuple[int, dict]]:
        """Modes this session finished before this run (a resumed session)."""
        return self.store.results(self.name) if self.name else []

    def _label(self) -> str:
        be = self.backend
        assert be is not None                 # run() asks only with a backend
        if self.source is not None and getattr(self.source, "workload", None) is not None:
            from ..profiling.userscript import WHATIF_LABEL
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
        saved, written, n_rows, final = "", None, 0, None
        try:
            try:
                self._let_go = True            # Profiler.run lets the session go when it ends
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
                written = self.out if n_rows and unsaved is None else None
                error = error or unsaved
                final = self.store.get_session(self.name)
            note = self.time_note()
        finally:
            label = self._label() if self.backend is not None else ""
            self.close()
        pl = self.planner
        be = self.backend                  # figures a live board did not give: said so
        simulated = be.not_live or (self.source is not None
                                    and getattr(self.source, "workload", None) is not None)
        return ProfileOutcome(status, self.name, written, n_rows,
                              final.device_time_s if final else 0.0, simulated,
                              time.perf_counter() - wall0, error, interrupted, stopped_by, saved,
                              label,
                              pl.stop_reason if pl is not None else "",
                              pl.best() if pl is not None else None, note)

    def time_note(self) -> str:
        """The warning for a profile whose wall time goes largely outside the timed steps."""
        from ..board.csvio import outside_warning
        rows = [r for _, r in self.store.results(self.name)] if self.name else []
        return outside_warning(rows, self.profiler.time_basis if self.profiler else self.req.time_basis)

    def export(self, device: str | None = None) -> ProfileOutcome:
        """A finished session resumed (`finished`): write its CSV from the store, holding the
        session's lock.  No device is opened and nothing is profiled; a script session needs no
        command.  `device`: the board the user named, which must be the session's."""
        from ..board.locks import lock_session, unlock_session
        ex = self.existing
        assert ex is not None                 # finished: a session resumed by name
        self.name = ex.name
        self.out = self.req.out if self.req.out is not None else paths.profile_csv(self.name)
        try:
            if device is not None and device != ex.device:
                raise SessionError(f"session {ex.name!r} was profiled on {ex.device}, not {device}")
            lock_session(self.name)
            try:
                n_rows, saved, unsaved = self._save("done")
            finally:
                unlock_session(self.name)
        finally:
            self.close()
        return ProfileOutcome("done", self.name, self.out if n_rows and unsaved is None else None,
                              n_rows, ex.device_time_s, ex.backend == "sim", 0.0, unsaved,
                              saved=saved, label={"sim": "simulated", "replay": "replayed from "
                                                  "recorded data"}.get(ex.backend, ""))

    def _save(self, status: str) -> tuple[int, str, WriteError | None]:
        """Write the session's finished modes to the CSV: (rows, what happened in words, None), or
        when the file cannot be written (disk full, read-only, ...) the failure as a WriteError
        that says how to get the rows, safe in the store, out to another file."""
        from ..profiling.profiler import save_profile
        assert self.name is not None          # prepare() or export() named the session
        n_rows = len(profile_rows(self.store, self.name))
        if self.req.batch_part:
            return n_rows, "", None
        try:
            if n_rows and isinstance(self.out, Path):
                self.out.parent.mkdir(parents=True, exist_ok=True)
            return n_rows, save_profile(self.out, self.store, self.name), None
        except StoreError:
            raise
        except (PtuiError, OSError) as e:
            msg = str(write_error(self.out, e) if isinstance(e, OSError) else e)
            from ..profiling.userscript import resume_hint
            script = self.script if self.user_script and status != "done" else None
            err = WriteError(f"{msg}; the {n_rows} finished modes are safe in session {self.name}: "
                             f"write them elsewhere with: "
                             f"{resume_hint(self.name, 'elsewhere.csv', script or None)}")
            return n_rows, str(err), err

    def close(self) -> None:
        """Close what this run opened (the CLI's backend, its own store connection) and let go of
        its session (prepare() took the session's lock; a run that never started, or failed
        before it did, must not keep it from a later --resume)."""
        if self.info is not None and self.name is not None and not self._let_go:
            from ..board.locks import release, session_key
            release(session_key(self.name))
            self._let_go = True
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
    profile, model = paths.latest_outputs(device, complete=_complete_profile)
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
        return [s for s in store.list_sessions() if s.n_done < len(s.plan) and s.device == device]
    finally:
        store.close()


# -- fit ---------------------------------------------------------------------------------------------
@dataclass
class FitOutcome:
    model: Model
    out: Path
    n_modes: int                  # profiled modes, or (mode, batch size) pairs
    seconds: float
    sizes: list[int] = field(default_factory=list)     # the profile's batch sizes (one: a plain profile)
    workload: str = "custom"

    @property
    def fitted_on(self) -> str:
        """What the model was fitted on, in words: '12 profiled modes', or the pairs and sizes."""
        if len(self.sizes) > 1:
            return (f"{self.n_modes} profiled (mode, batch size) pairs, batch sizes "
                    f"{','.join(map(str, self.sizes))}")
        return f"{self.n_modes} profiled modes"


def profile_time_choice(profile, time_basis: str,
                        progress: Callable[[str], None] | None = None) -> str:
    """The time a decision on `profile` takes (csvio.profile_time: --time, the profile's own
    time_basis, or the whole cycle when the wall time goes largely outside the steps); its note
    goes to progress.  Returns 'step' or 'cycle'."""
    from ..board.csvio import profile_time
    c = profile_time(profile, time_basis)
    if c.note and progress:
        progress(c.note)
    return c.basis


def fit(device, profile: Path | str, *, workload: str | None = None, out: Path | None = None,
        reference: Path | str | None = None, progress: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None, method: str = "auto", time_basis: str = "auto",
        scratch: bool = False, seed: int = 0, loss: str = "mse",
        note: Callable[[str], None] | None = None, min_modes: int | None = None) -> FitOutcome:
    """The one fit, for `ptui fit` and the Fine-tune screen: time and power predictors for a profile
    CSV (``fit.fit_model``: GPs and PowerTrain's networks chosen by cross-validation), over (mode,
    batch size) when the profile holds several batch sizes; ``scratch``: PowerTrain's network
    trained on the profile alone.  The model records the profile's workload (``workload`` overrides
    the profile's own tag), its batch size and minibatches per epoch, and what one time is; it is
    saved with the profile's measurements (default: the models directory, named after the profile).
    Cancelled between steps.  time_basis: what one time is, --time (csvio.profile_time); its note
    (which time decides, and why) goes to `note`, else to progress."""
    from ..board.csvio import profile_batch_sizes, profile_tags, read_profile_measured
    from ..prediction.predictor import bundled_reference, load_model

    def step(msg: str) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled("fine-tuning cancelled")
        if progress:
            progress(msg)
    sizes = [int(b) for b in profile_batch_sizes(profile)]
    if scratch and len(sizes) > 1:
        raise InputError("--scratch trains a network, which takes no batch-size input; this profile "
                         f"holds batch sizes {','.join(map(str, sizes))} (use --method gp or auto)")
    basis = profile_time_choice(profile, time_basis, note or progress)
    tags = profile_tags(profile)                    # a ptui profile names its workload
    workload = workload or tags.get("workload") or "custom"
    ref = load_model(reference or bundled_reference())
    t0 = time.perf_counter()
    if len(sizes) > 1:
        from ..prediction.fit import fit_batch_profile
        model = fit_batch_profile(profile, device, ref, method=method, seed=seed, loss=loss,
                                  workload=workload, progress=step, time_basis=basis)
        n = len(model.measured["modes"])
    else:
        modes, t, p, measured = read_profile_measured(
            profile, device, time=basis, **({} if min_modes is None else {"min_modes": min_modes}))
        n = len(modes)
        if scratch:
            from ..prediction import train
            from ..prediction.fit import check_model_rest, fit_rows
            from ..prediction.gp import raw_modes
            A = raw_modes(modes)
            rows = fit_rows(A, seed)               # a large profile: the rows fit_model takes
            sel = slice(None) if rows is None else rows
            model = train.transfer(ref, device, A[sel], t[sel], p[sel], workload=workload,
                                   source=f"profile {profile}", seed=seed, loss=loss,
                                   scratch=True, progress=step)
            model.measured = measured
            if rows is not None:
                check_model_rest(model, A, t, p, rows, measured, seed)
        else:
            from ..prediction.fit import fit_model
            model = fit_model(ref, device, modes, t, p, method=method, workload=workload,
                              source=f"profile {profile}", measured=measured, progress=step,
                              seed=seed, loss=loss)
        remember_epoch_size(model, workload, sizes[0] if sizes else tags.get("batch_size"))
    from ..profiling.profiler import keep_timed
    keep_timed(model, profile, basis)               # what one time_ms is: pareto says it
    step(SAVING_STEP)
    out = Path(out) if out is not None else paths.model_dir(Path(profile).stem)
    model.save(out)
    return FitOutcome(model, out, n, time.perf_counter() - t0, sizes, workload)


def remember_epoch_size(model, workload: str, batch_size) -> None:
    """Record the profiled batch size and its minibatches per epoch (a catalogued workload) so a
    decision turns time per minibatch into time per epoch at the batch size that was profiled."""
    from ..catalogue.workloads import WORKLOADS
    w = WORKLOADS.get(workload)
    if w is not None and str(batch_size or "").isdigit() and int(batch_size) > 0:
        w = w.with_batch(int(batch_size))
        model.tell(batch_size=w.batch_size, batches_per_epoch=w.minibatches_per_epoch)


def fit_cancellable(device, profile: Path | str, *, workload: str | None = None,
                    out: Path | None = None,
                    progress: Callable[[str], None] | None = None,
                    cancel: threading.Event | None = None) -> FitOutcome:
    """``fit`` in a child process, so that a cancel (the app quitting) ends it within a fraction
    of a second: ``fit`` itself checks its cancel event only between stages, which take seconds.
    The child (and the network process it starts) is ended on cancel, except while it saves (that
    finishes, the model directory is written whole or not at all)."""
    import json
    import os
    import queue
    import signal
    import subprocess

    from ..errors import InputError, RuntimeFailure
    root = str(Path(__file__).resolve().parents[3])            # the directory holding ptui/
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from ptui.core.usecases.session import _fit_child; _fit_child()",
         json.dumps({"device": device.name, "profile": str(profile), "workload": workload,
                     "out": str(out) if out is not None else None})],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, start_new_session=True)
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None        # stdout=PIPE
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True, name="ptui-fit-child").start()
    saving, result, error = False, None, None
    try:
        while True:
            if cancel is not None and cancel.is_set() and not saving:
                raise Cancelled("fine-tuning cancelled")
            try:
                line = lines.get(timeout=0.05)
            except queue.Empty:
                continue
            if line is None:
                break
            kind, _, text = line.partition(" ")
            if kind == "P":
                st = Step.from_line(text)
                saving = st.kind == SAVING
                if progress:
                    progress(st)
            elif kind == "R":
                result = json.loads(text)
            elif kind in ("I", "E"):
                error = (kind, text)
    finally:
        if proc.poll() is None and result is None:
            try:                                  # the child and its network process
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        proc.wait()
    if result is None:
        if error is not None:
            raise (InputError if error[0] == "I" else RuntimeFailure)(error[1])
        raise RuntimeFailure(f"fine-tuning failed (the fitting process ended with code {proc.returncode})")
    from ..prediction.predictor import load_model
    model = load_model(result["out"])
    return FitOutcome(model, Path(result["out"]), int(result["n_modes"]), time.perf_counter() - t0,
                      [int(b) for b in result.get("sizes", [])], str(result.get("workload", "custom")))


def _fit_child() -> None:
    """The child of fit_cancellable: progress as `P kind text` lines (progress.Step.line), then
    `R {json}`, or `I`/`E text` on an input/other error.  It ends itself when its parent goes
    away (stdin closes)."""
    import json
    import os

    from ..catalogue.devices import get_device
    from ..errors import InputError
    a = json.loads(sys.argv[1])
    saving = threading.Event()

    def parent_gone() -> None:
        sys.stdin.read()
        if not saving.is_set():
            os._exit(130)

    threading.Thread(target=parent_gone, daemon=True).start()

    def say(text: str) -> None:
        st = Step.of(text)
        if st.kind == SAVING:
            saving.set()
        print("P " + st.line(), flush=True)

    try:
        res = fit(get_device(a["device"]), a["profile"], workload=a["workload"], out=a["out"],
                  progress=say)
    except InputError as e:
        print("I " + " ".join(str(e).split()), flush=True)
        sys.exit(2)
    except Exception as e:  # noqa: BLE001 - said to the app in one line
        print("E " + " ".join(f"{type(e).__name__}: {e}".split()), flush=True)
        sys.exit(1)
    print("R " + json.dumps({"out": str(res.out), "n_modes": res.n_modes, "sizes": res.sizes,
                             "workload": res.workload}), flush=True)


def check_memory(device, workload: Workload, batch_size: int) -> None:
    """Refuse up front a catalog workload whose batch does not fit the board's memory (the
    simulator's footprint model, physics.fits; on a real board an estimate), before any session
    is opened or mode changed."""
    from ..board.physics import fits, footprint_gb, largest_batch, memory_gb
    if bool(fits(device, workload, batch_size)):
        return
    big = largest_batch(device, workload)
    raise SessionError(
        f"{workload.name} at batch size {batch_size} does not fit {device.name}: it needs "
        f"{float(footprint_gb(workload, batch_size)):.1f} GB, {memory_gb(device):.1f} GB is free for "
        f"training (ptui's memory model); " + (f"the largest batch that fits is {big}" if big else
                                               "not even batch size 1 fits"))


# -- decide ------------------------------------------------------------------------------------------
@dataclass
class Predictions:
    table: Table
    model: Model | None                   # None: measured values from a profile CSV
    batches_per_epoch: int | None         # of the profiled workload; None: not known (a script)
    workload: str | None = None           # what was profiled ('script': the user's own)
    timed: str = ""                       # what one time_ms is (a profile CSV's `timed` column)
    note: str = ""                        # modes left out of the decision (knob values never profiled)
    space: JointSpace | None = None       # the source holds several batch sizes


def load_predictions(path: Path, device, time_basis: str = "auto") -> Predictions:
    """Every mode predicted by a model directory, or the measured modes of a profile CSV (with
    time_ms the median step or the whole cycle: csvio.profile_time)."""
    from ..catalogue.workloads import WORKLOADS
    from ..decision.pareto import Table
    path = Path(path)
    if path.is_dir():
        from ..prediction.predictor import load_model
        model = load_model(path)
        modes, note = model.decision_space()
        wl = model.about.workload
        w = WORKLOADS.get(str(wl))
        mb = model.about.batches_per_epoch or (w.minibatches_per_epoch if w else None)
        table = Table.from_prediction(modes, model.predict(modes)).with_measurements(model.measured_at())
        space = None
        if len(model.batch_sizes) > 1:
            from ..decision.batch import model_space
            space = model_space(model, model.batch_sizes, modes)
        return Predictions(table, model, mb, wl, model.about.timed, note=note,
                           space=space)
    from ..board.csvio import profile_batch_sizes, profile_tags, read_profile_measured
    from ..profiling.profiler import cycle_timed
    basis = profile_time_choice(path, time_basis)
    if len(profile_batch_sizes(path)) > 1:
        # a profile over (mode, batch size) pairs: the measured pairs; the table is the default size
        from ..decision.batch import profile_space
        space = profile_space(path, device, time_basis=basis)
        tags = profile_tags(path)
        if basis == "cycle":
            tags["timed"] = cycle_timed(tags.get("timed"))
        sub = space.table.subset(space.table.batch == space.default_batch)
        w = WORKLOADS.get(tags.get("workload", ""))
        mb = w.with_batch(space.default_batch).minibatches_per_epoch if w else None
        return Predictions(sub, None, mb, tags.get("workload"), tags.get("timed", ""), space=space)
    modes, t, p, ms = read_profile_measured(path, device, min_modes=1, time=basis)
    tags = profile_tags(path)          # the profile's own workload counts its epochs
    if basis == "cycle":
        tags["timed"] = cycle_timed(tags.get("timed"))
    w = WORKLOADS.get(tags.get("workload", ""))
    bs = tags.get("batch_size", "")
    mb = (w.with_batch(int(bs)) if bs.isdigit() and int(bs) > 0 else w).minibatches_per_epoch if w else None
    # each row with the uncertainty of its figures, as a batch profile's rows and a model's
    # measured modes have: a measurement is not exact
    return Predictions(Table(modes, t, p, ms["time_ms_std"], ms["power_w_std"]), None, mb,
                       tags.get("workload"), tags.get("timed", ""))


def saved_sources(device: str) -> list[tuple[str, Path]]:
    """What the Pareto screen can open, newest first: ('model'|'profile', path) for the models ptui
    saved (any board's: another board's is a what-if there) and this board's complete profiles."""
    models = [p for p in paths.models_dir().glob("*") if (p / "meta.json").exists()]
    profiles = [p for p in paths.profiles_dir().glob(f"{device}-*.csv") if _complete_profile(p)]
    got = [("model", p) for p in models] + [("profile", p) for p in profiles]

    def mtime(kp):
        try:
            return kp[1].stat().st_mtime
        except OSError:
            return 0.0
    return sorted(got, key=mtime, reverse=True)


@dataclass(frozen=True)
class Baseline:
    """A point a decision on screen is compared with: an NVIDIA preset, the best mode at the default
    batch size, the paper's (largest batch, fastest mode); `row` is its candidate row where it is
    one (None: a preset, predicted apart), `job_s`/`energy_wh` the whole job at it as the view
    counts it; `missing` says why there is none (then the figures are 0)."""
    tag: str
    row: int | None = None
    time_ms: float = 0.0
    power_w: float = 0.0
    job_s: float = 0.0
    energy_wh: float = 0.0
    missing: str = ""


@dataclass(frozen=True)
class View:
    """What the Pareto screen shows of a source for a goal: the candidates (`rows` of `table`,
    sorted), each with its `x_s` (the axis: seconds per epoch for one batch size, to target for
    several), the whole job's seconds and energy (epochs x epoch, or to target), the front, the
    decision (or `error`: why none) and the baselines, in one shape for one batch size or several."""
    table: Table
    per_target: bool                      # several batch sizes: the job is reaching the target
    rows: np.ndarray
    x_s: np.ndarray
    job_s: np.ndarray
    energy_wh: np.ndarray
    front: np.ndarray                     # rows, by increasing power
    decision: Decision | None             # its index a row of table
    error: str | None
    baselines: tuple = ()
    dropped: tuple = ()                   # batch sizes that do not fit in memory
    relation: SamplesToTarget | None = None   # several batch sizes: the samples each needs

    def pos(self, i: int) -> int:
        """Where row i sits among the candidates."""
        return int(np.searchsorted(self.rows, i))

    def batch_of(self, i: int) -> int | None:
        return self.table.batch_of(i)

    def job(self, i: int) -> tuple[float, float]:
        """(seconds, Wh) of the whole job at row i."""
        k = self.pos(i)
        return float(self.job_s[k]), float(self.energy_wh[k])


GOALS = ("budget", "deadline", "energy")


def view(pred: Predictions, *, goal: str | None, budget_w: float | None = None,
         deadline_s: float | None = None, epochs: int = 1, mb_per_epoch: int,
         sizes=None, noise_scale: float | None = None,
         risk: float | None = DEFAULT_RISK) -> View:
    """The decision for the Pareto screen, made as `ptui pareto` makes it (with --batch-sizes for a
    source of several sizes: batch.decide_in): 'budget' (fastest, or least time to target, within
    budget_w), 'deadline' (lowest power meeting deadline_s per epoch; one batch size only) or
    'energy' (least energy, within budget_w if given).  `sizes` None: every size of the source; a
    noise scale gives the samples each size needs (none: throughput only).  Bad input raises
    InputError; a goal nothing meets is returned as `error` with the candidates still drawn.
    goal None: the candidates and their front alone (no decision, one batch size)."""
    from ..decision.goals import Goal
    from ..decision.pareto import InfeasibleError, best_preset, choose, front_indices, presets_table
    if goal is not None and goal not in GOALS:
        raise InputError(f"unknown goal {goal!r}; choose {', '.join(GOALS)}")
    if goal == "budget" and budget_w is None:
        raise InputError("set a power budget in W")
    space = pred.space
    if space is not None and goal is not None:
        return _view_per_target(space, goal=goal, budget_w=budget_w, sizes=sizes,
                                noise_scale=noise_scale, epochs=epochs, risk=risk)
    if goal == "deadline" and deadline_s is None:
        raise InputError("set a deadline in seconds per epoch")
    tab = pred.table
    rows = np.arange(len(tab))
    x_s = tab.time_ms * mb_per_epoch / 1000.0
    job_s = x_s * epochs
    energy = tab.power_w * job_s / 3600.0
    front = front_indices(tab.time_ms, tab.power_w)
    d = error = None
    try:
        d = None if goal is None else choose(tab, Goal.of(goal, budget_w, None if deadline_s is None
                                else deadline_s * 1000.0 / mb_per_epoch), risk=risk)
    except InfeasibleError as e:
        error = str(e)
    base: tuple = ()
    if pred.model is not None and goal is not None:
        # the rule the CLI's best_preset baseline uses, at the budget on screen
        bp = best_preset(presets_table(pred.model.device, pred.model), budget_w=budget_w,
                         risk=DEFAULT_RISK)
        if bp is None:
            base = (Baseline("", missing="no NVIDIA preset fits this budget"),)
        else:
            b, pre = bp
            js = b.time_ms * mb_per_epoch / 1000.0 * epochs
            base = (Baseline(pre.name, None, b.time_ms, b.power_w, js, b.power_w * js / 3600.0),)
    return View(tab, False, rows, x_s, job_s, energy, front, d, error, base)


def _view_per_target(space, *, goal: str, budget_w, sizes, noise_scale, epochs: int,
                     risk) -> View:
    from ..decision import batch
    from ..decision.pareto import InfeasibleError, front_indices
    if goal == "deadline":
        raise InputError("a deadline per minibatch is different work at each batch size: "
                         "choose fastest or least energy")
    rel = batch.relation(None, noise_scale)
    sizes = tuple(space.sizes if sizes is None else sizes)
    tg = batch.targets(space, sizes, rel, epochs=epochs)
    front = (tg.rows[front_indices(tg.target_s, tg.power_w)] if len(tg.rows)
             else np.zeros(0, int))
    tab = space.table
    d = error = None
    base: list[Baseline] = []
    dropped: tuple = ()
    try:
        r = batch.decide_in(space, sizes, rel, budget_w=budget_w,
                            objective="energy" if goal == "energy" else None, risk=risk,
                            epochs=epochs)
    except InfeasibleError as e:
        error = str(e)
    else:
        d, dropped = r.pick, tuple(r.dropped)
        for tag, q in ((f"bs{r.default_batch} best mode", r.default),
                       (f"paper bs{r.paper.batch_size if r.paper else ''} fastest", r.paper)):
            base.append(Baseline(tag, missing="none fits") if q is None else
                        Baseline(tag, q.index, q.time_ms, q.power_w, *q.to_target()))
    return View(tab, True, tg.rows, tg.target_s, tg.target_s, tg.energy_wh, front, d, error,
                tuple(base), dropped, rel)


# -- apply, roll back, persist, restore --------------------------------------------------------------
def plan_apply(backend: Backend, mode: Mode) -> Plan:
    """The steps of an apply; on the replay device a mode it never recorded is refused here,
    before a dry run shows a plan it could not carry out."""
    from ..board.backends.replay import ReplayJetson
    if isinstance(backend, ReplayJetson):
        check_recorded([mode], backend.table, backend.corpus_path.name, "mode")
    return plan(backend, mode)


def _applying(backend: Backend, change):
    """Run `change()` (an apply or a preset) under the board's lock, keeping the last-apply record
    right.  It is written before the board is touched (a kill -9 mid-apply still leaves ptui restore
    a way back) and names the state to undo to: the board's own, or, when a killed profile left the
    board in a mode nobody chose, the state before that profile (whose record this consumes).  A
    change that failed and left the board where it was puts the previous record back."""
    from ..board import undo
    from ..board.locks import board_lock
    with board_lock(backend):
        stale = undo.load(backend, undo.PROFILE)
        before = undo.load(backend, undo.APPLY)
        pre = backend.snapshot()
        rec = undo.save(backend, undo.APPLY, stale.state if stale else pre)
        done = False
        try:
            result = change()
            done = True
            return result
        finally:
            if rec is not None:
                if stale is not None:
                    undo.clear(backend, undo.PROFILE, stale)
                elif not done and backend.current_mode() == backend.snapshot_mode(pre):
                    if before is not None:
                        undo.save(backend, undo.APPLY, before.state)
                    else:
                        undo.clear(backend, undo.APPLY, rec)


def apply(backend: Backend, mode: Mode) -> ApplyResult:
    """Apply, read back, roll back on a mismatch; a verified apply is remembered for restore."""
    from ..board.locks import LockError
    try:
        res = _applying(backend, lambda: _ok_or_raise(apply_mode(backend, mode)))
    except _NotApplied as e:
        return e.result
    except LockError as e:                   # nothing was touched
        return ApplyResult(False, mode, None, None, f"not applied: {e}")
    return res


class _NotApplied(Exception):
    def __init__(self, result: ApplyResult) -> None:
        super().__init__(result.message)
        self.result = result


def _ok_or_raise(res: ApplyResult) -> ApplyResult:
    if not res.ok:
        raise _NotApplied(res)
    return res


def apply_preset(backend: Backend, key) -> Mode:
    """Select an nvpmodel preset (verified, rolled back on a mismatch, under the board's lock);
    remembered for restore."""
    from ..board.apply import select_preset
    preset = backend.device.preset(key)
    _applying(backend, lambda: select_preset(backend, preset))
    return backend.current_mode()


def rollback(backend: Backend, snapshot) -> Mode:
    """Return to the state before an apply; `ptui restore` then has nothing left to undo."""
    from ..board import undo
    from ..board.apply import restore_snapshot
    now = restore_snapshot(backend, snapshot)
    rec = undo.load(backend, undo.APPLY)
    if rec is not None and backend.snapshot_json(rec.state) == backend.snapshot_json(snapshot):
        undo.clear(backend, undo.APPLY, rec)
    return now


def check_persist(backend: Backend) -> None:
    """Up front, before anything is applied: keeping a mode across reboots needs nvpmodel."""
    from ..board.apply import check_persist as check
    check(backend)


def persist(backend: Backend, mode: Mode) -> str:
    check_persist(backend)
    return backend.persist(mode)


class NothingToRestore(BackendError):
    """`ptui restore` with no apply waiting to be undone: the board is left alone (exit 2)."""
    exit_code = 2


def restore(backend: Backend) -> str:
    """Undo what ptui left on the board, made by the CLI or the app: first a profile (or tune) that
    was killed before it could put the board back, else the last apply or preset.  Every record is
    checked against the board before anything is written, and what is reported is what the board
    reads back.  With nothing saved the board stays where it is, on every backend (selecting a
    default mode could move it away from where the user started)."""
    from ..board import undo
    from ..board.apply import restore_snapshot
    from ..board.locks import board_lock
    dev = backend.device
    if not undo.keeps_records(backend):
        raise NothingToRestore(f"nothing to restore: a {backend.kind} board starts afresh in "
                               f"{backend.current_mode().key} with every ptui run, so no apply is "
                               f"waiting to be undone (choose a preset with ptui apply --preset NAME)")
    with board_lock(backend):
        rec = undo.load(backend, undo.PROFILE) or undo.load(backend, undo.APPLY)
        if rec is None:
            raise NothingToRestore(f"nothing to restore: no ptui apply or interrupted profile on this "
                                   f"{dev.name} is waiting to be undone (the board stays in "
                                   f"{backend.current_mode().key}; choose a preset with ptui apply "
                                   f"--preset NAME)")
        now = restore_snapshot(backend, rec.state)
        if now.key != rec.mode:
            raise BackendError(f"restore wrote the saved state back but the board reads {now.key}, "
                               f"not {rec.mode}; {rec.path} is kept: check the board, then run "
                               f"ptui restore again")
        undo.clear(backend, rec.kind, rec)
        if rec.kind == undo.PROFILE:
            more = undo.load(backend, undo.APPLY)
            tail = ("; the last ptui apply before it can be undone too: run ptui restore again"
                    if more is not None else "")
            return (f"restored the state before the interrupted profile (session {rec.session}, "
                    f"{rec.when()}): the board reads back {now.key}{tail}")
        return f"restored the state before the last ptui apply: the board reads back {now.key}"


# -- status: the board, its mode, who drives it, what restore would undo ---------------------------------
@dataclass(frozen=True)
class PendingRestore:
    kind: str                             # 'profile' (an interrupted profile or tune) | 'apply'
    mode: str                             # the key of the mode restore would put the board in
    session: str | None                   # the interrupted profiling session
    created: float                        # when the state was saved (seconds since the epoch)
    pid: int                              # the process that saved it
    in_progress: bool = False             # that process still runs (a profile under way, not killed)


@dataclass(frozen=True)
class BoardStatus:
    device: str
    backend: str                          # sim | sysfs | jtop | replay
    simulated: bool                       # figures from the simulator or a recording, not a board
    emulated: bool                        # a tree made by `ptui emulate` (its readings SIMULATED)
    board: str | None                     # the board-wide lock's name (None: a board of this process)
    mode: Mode
    preset: str | None                    # the nvpmodel preset whose mode the board is in
    nvpmodel_id: int | None               # what the board's nvpmodel status says (a real board)
    lock_holder: int | None               # the pid of the process driving the board, if any
    restore: PendingRestore | None        # what `ptui restore` would undo
    restore_problem: str | None = None    # a saved state restore would refuse, in one line


def board_status(backend: Backend) -> BoardStatus:
    """What the board is doing, read without writing anything or taking its lock: its mode, the
    preset that mode is, the process driving the board, and what `ptui restore` would undo (the
    same record restore reads first: an interrupted profile, else the last apply)."""
    from ..board import undo
    from ..board.backends.base import DamagedSnapshot
    from ..board.locks import board_key, holder
    mode = backend.current_mode()
    nvp = backend.nvpmodel_id()
    same = [p for p in backend.device.presets if p.mode == mode]
    pick = next((p for p in same if p.id == nvp), same[0] if same else None)
    key = board_key(backend)
    pending, problem = None, None
    try:
        rec = undo.load(backend, undo.PROFILE) or undo.load(backend, undo.APPLY)
    except DamagedSnapshot as e:
        rec, problem = None, str(e)
    if rec is not None:
        from ..board.locks import pid_alive
        pending = PendingRestore(rec.kind, rec.mode, rec.session, rec.created, rec.pid,
                                 rec.kind == undo.PROFILE and rec.pid != os.getpid()
                                 and pid_alive(rec.pid))
    return BoardStatus(backend.device.name, backend.kind, backend.not_live, backend.emulated, key, mode,
                       pick.name if pick else None, nvp, holder(key) if key else None, pending,
                       problem)


# -- tune: active profile + fit + decision -------------------------------------------------------------
@dataclass
class TuneDecision:
    decision: Decision
    source: str                           # measured | predicted
    predicted: dict                       # the model's time_ms / power_w for the picked mode
    model_dir: Path
    n_modes: int
    table: Table | None = None            # the table the decision was made in

    @property
    def best_measured(self) -> dict | None:
        """The best measured mode for the goal (on its measured figures) and why the pick is or
        is not that mode (pareto.choose's cautious ranking): one answer, not two."""
        j, tab = self.decision.best_measured, self.table
        if j is None or tab is None:
            return None
        return {"mode": tab.modes[j].as_dict(), "key": tab.modes[j].key,
                "time_ms": round(float(tab.time_ms[j]), 4), "power_w": round(float(tab.power_w[j]), 4),
                "is_pick": j == self.decision.index, "why": self.decision.why}
    timed: str = ""                       # what one time is (the model's meta: step or cycle)
    model: Model | None = None            # the fitted predictor the decision was made with


def _rows_of(profile, what: str) -> str:
    """'12 profiled modes of PROFILE' for a progress line (the file alone where it cannot be read)."""
    from ..board.csvio import count_rows
    n = count_rows(profile)
    return f"{profile}" if n is None else f"{n} {what} of {profile}"


def tune_decide(profile: Path | str, device, *, budget_w: float | None = None,
                deadline_ms: float | None = None, objective: str | None = None,
                risk: float | None = DEFAULT_RISK, method: str = "auto", seed: int = 0,
                workload: str = "custom", corpus: str | None = None, model_dir: Path | None = None,
                progress: Callable[[str], None] | None = None,
                time_basis: str = "auto") -> TuneDecision:
    """After an active profile: fit (measurements kept), then decide with the measured modes
    counting and a cautious ranking (pareto.choose: a predicted mode beats the best measured one
    only when it does so at its upper bound at the risk level; the decision says why it differs
    from the best measured mode, and warns about an uncertain predicted pick).  On the replay
    device only recorded modes are candidates."""
    from ..decision.pareto import Table, choose
    if progress:
        progress(stage(f"fitting time and power ({method}) on {_rows_of(profile, 'profiled modes')}"))
    res = fit(device, profile, workload=workload, out=model_dir, method=method, seed=seed,
              time_basis=time_basis, note=progress, min_modes=6)
    model, out = res.model, res.out
    from ..prediction.fit import outlier_note, subset_note
    for note in [subset_note(model.about.metrics)] + [outlier_note(tgt, model.about.metrics[tgt])
                                                        for tgt in ("time", "power")]:
        if note and progress:
            progress(note)
    if corpus:
        from ..board.backends.replay import load_corpus
        space = list(load_corpus(corpus, device))
    else:
        space, _ = model.decision_space()          # no extrapolation beyond what was profiled
    # model.measured: the profile's measurements, those the fit left out as outliers not exact
    tab = Table.from_prediction(space, model.predict(space)).with_measurements(model.measured)
    d = choose(tab, budget_w=budget_w, deadline_ms=deadline_ms, objective=objective, risk=risk,
               cautious=True)
    pred = model.predict([d.mode])
    return TuneDecision(d, tab.source(d.index), {"time_ms": float(pred["time_ms"][0]),
                                                 "power_w": float(pred["power_w"][0])},
                        out, res.n_modes, tab, model.about.timed, model)


def tune_decide_batches(profile: Path | str, device, batch_sizes, *, budget_w: float | None = None,
                        objective: str | None = None, risk: float | None = DEFAULT_RISK,
                        samples_file: str | None = None, noise_scale: float | None = None,
                        method: str = "auto", seed: int = 0, workload: str = "custom",
                        model_dir: Path | None = None,
                        progress: Callable[[str], None] | None = None,
                        time_basis: str = "auto") -> tuple[object, Path, int, object]:
    """After an active profile over batch sizes: fit the batch-aware model (measured pairs kept)
    and decide as `ptui pareto --batch-sizes` does, with tune's cautious ranking (as
    `tune_decide`: a pair the model knows little about never beats a measured one on its median
    alone).  Returns (batch.BatchDecision, model dir, pairs profiled, the fitted model)."""
    from ..decision.batch import decide
    if progress:
        progress(stage(f"fitting time and power ({method}) over (mode, batch size) on "
                       f"{_rows_of(profile, 'profiled pairs')}"))
    res = fit(device, profile, workload=workload, out=model_dir, method=method, seed=seed,
              time_basis=time_basis, note=progress)
    model, out = res.model, res.out
    modes, _ = model.decision_space()            # no extrapolation beyond what was profiled
    r = decide(model, batch_sizes, modes=modes, samples_file=samples_file, noise_scale=noise_scale,
               budget_w=budget_w, objective=objective, risk=risk, cautious=True)
    return r, out, int(model.about.trained_on["modes"]), model
