"""Profiling use case: a request becomes a profile CSV (at one batch size or over several, one
run class: ProfileRun), resumable, and the board goes back to its mode whatever happens."""
from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ...probe.names import BUILTIN
from ..board import backends  # open_backend looked up when called (tests patch it)
from ..board.apply import tpc_note
from ..board.backends.base import Backend
from ..board.backends.replay import ReplayJetson, corpus_workload, replay_workload
from ..board.csvio import (
    PEAK_COL,
    TIME_BASES,
    check_profile_out,
    choose_time,
    fmt_value,
    keep_aside,
    outside_warning,
    profile_tags,
    read_modes,
    with_time,
    write_csv,
)
from ..board.files import WriteError, write_error
from ..board.locks import LockError, board_lock, lock_session, unlock_session
from ..board.physics import fits, footprint_gb, largest_batch, memory_gb, steady_state
from ..catalogue.devices import get_device
from ..catalogue.modes import Mode
from ..catalogue.workloads import SCRIPT_WORKLOAD, WORKLOADS, Workload, get_workload
from ..decision.batch import BatchError, relation
from ..errors import InputError, Interrupted, PtuiError
from ..paths import latest_outputs as latest_paths
from ..paths import model_dir, profile_csv, profiles_dir, script_log
from ..prediction.predictor import load_bundled
from ..prediction.roofline import BOARDS, RooflinePrior, WorkloadSpec
from ..profiling.active import ActivePlanner, Goal, Space, make_plan
from ..profiling.pool import Pool, PoolError, board_id, board_seed, pool_url, pooling_store
from ..profiling.profiler import (
    PROFILE_HEADER,
    Control,
    ProfileAborted,
    ProfileConfig,
    Profiler,
    Progress,
    SessionError,
    check_same_board,
    choose_modes,
    open_session,
    profile_rows,
    reserve_name,
    time_unit,
)
from ..profiling.store import SessionInfo, Store, StoreError, check_session_name
from ..profiling.userscript import (
    EMULATED_LABEL,
    WHATIF_LABEL,
    ScriptSource,
    check_command,
    check_resume_command,
    command_text,
    script_workload,
    steps_note,
)
from ..profiling.userscript import resume_hint as resume_command
from ..progress import plural

EMULATED_TIMES = ("an emulated board: the training runs on this machine, so each mode's step times "
                  "are this machine's (the emulator sets the clocks and the power, not the speed); "
                  "the power is SIMULATED")
PLACEHOLDER = "{bs}"        # where a user script's command takes the batch size, over several sizes
ACTIVE_COUNT = 40          # most pairs an active profile over batch sizes takes by default
ACTIVE_MIN = 10            # fewest: `ptui fit` over (mode, batch size) needs 10 pairs


def startup_timeout_args(given: float | None, more=()) -> list[str]:
    """A resume's --startup-timeout: the one the user gave (a resume without it waited the default
    600 s where they had asked for longer), unless `more` sets another."""
    if given is None or "--startup-timeout" in more:
        return []
    return ["--startup-timeout", f"{given:g}"]


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
    workload_spec: str | None = None      # SPEC.json: the step's counts (roofline prior, active start)
    tune: bool = False                    # the profile of `ptui tune` (its fit needs MIN_MODES modes)


def default_seed() -> int:
    """A new profile's seed when --seed is not given: 0, or with a fleet's pool configured
    ($PTUI_POOL / $PTUI_STORE) one drawn from the board's id, so that boards of a fleet profile
    different modes (with 0 every board drew the same ones: the pool then held no more modes than
    one profile, and the pooled fit's cross-validation saw each held-out mode on other boards)."""
    return 0 if pool_url() is None else board_seed(board_id())


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
    left_in: Mode | None = None           # the mode the board was put back in (None: not touched)


def _board_free(backend: Backend) -> None:
    """LockError, before a session is opened or a script started, when another live process
    drives this board: the profile would stop at its first mode anyway, after saying it was
    running the script and had restored the board, and leave an interrupted 0/N session (a
    user's trial).  A lock that cannot be taken at all (a lock directory that is not writable, a
    link at its path) is found too: the profile started, then failed on it and left a failed 0/N
    session under the name (a user's trial).  Both by taking the lock and letting go (its refusal
    names the holder); the lock itself is still taken where the board is written."""
    try:
        with board_lock(backend):
            pass
    except LockError as e:
        raise LockError(f"{e} (nothing was started)") from None


class ProfileRun:
    """One profiling run, from a request to a CSV, at one batch size or over several.

    resolve (constructor) -> open_backend() [CLI] or a backend the app holds -> prepare() -> run().
    pause(), resume() and cancel() may be called from any thread while run() is under way.
    notify(text) receives notes while the run goes (a script still starting, ...).

    A profile is one session whose points each have their batch size.  A training run holds one
    batch size, so run() profiles the session one size after the other (_run_size): the profiler,
    the script and its log, the pool of one size at a time.  At one batch size the session is that
    size's own (stored as it always was); over several (`batch_sizes`, `ptui profile --batch-sizes
    8,16,32`) prepare() plans every (mode, batch size) pair up front in the session (random pairs
    over PowerTrain's grid x the sizes that fit in memory, every --modes mode at every size, or the
    active planner's start over the joint Space), and each size is a part of it (store.BatchPart)
    opened when its turn comes; a user script runs at each size through a `{bs}` placeholder in its
    command, and the CSV holds every size, with a batch_size column and, on the simulator, the
    modelled peak memory (peak_mem_gb).  Active profiling at one size extends the plan inside the
    profiler; over several, run() asks the planner for one pair at a time (_SameSize)."""
    workload: Workload | None             # None only for a finished script session, which export()
                                          # writes, or a script over several sizes
    device_name: str | None               # the resumed session's board
    backend: Backend | None = None
    _own_backend = False                  # opened here (the CLI), not lent by the app
    _own_store = False
    name: str | None = None
    out: Path | str | None = None
    existing: SessionInfo | None = None   # the session --session names
    seed: int = 0
    simulated = False                     # the session's figures are the simulator's
    _locked = False                       # this run holds the session's lock until close()
    left_in: Mode | None = None           # the mode the last size's run put the board back in
    planner: ActivePlanner | None = None  # active profiling's (over a joint Space for several sizes)
    what = "modes"                        # the CSV's rows, in words

    def __init__(self, req: ProfileRequest, batch_sizes: tuple[int, ...] | None = None, *,
                 store: Store | None = None, control: Control | None = None,
                 notify: Callable[[str], None] | None = None) -> None:
        self._start(req, store, control, notify)
        self.batch_sizes: tuple[int, ...] | None = None   # over several sizes: those asked for
        try:
            if batch_sizes is not None or self._resumes_several():
                self._resolve_sizes(batch_sizes)
            else:
                self._resolve()
        except BaseException:
            if self._own_store:
                self.store.close()
            raise
        self.info: SessionInfo | _Info | None = None
        self.profiler: Profiler | None = None  # the running size's
        self.planner: ActivePlanner | None = None
        self.source: ScriptSource | None = None
        self.log: Path | None = None
        self._pool: Pool | None = None    # the fleet's pool, when $PTUI_POOL names one
        self._size_locked = False         # the running size's hold on the session's lock
        self._base = 0                    # over several sizes: pairs finished at other sizes
        self._stopped_by = ""

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
            check_profile_out(req.out)
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
                      corpus: str | None, detected=None) -> str:
        self.backend, note = backends.open_backend(kind, device, seed=self.seed,
                                          sample_interval=self.req.sample_interval, root=root,
                                          corpus=corpus, detected=detected)
        self._own_backend = True
        return note

    def _name_session(self, stem: str) -> None:
        """The session's name (--session, else a free one: the stem and the time, its lock held by
        this run until close(), so that no other run takes it meanwhile) and its CSV."""
        if self.req.session:
            self.name = self.req.session
        else:
            self.name = reserve_name(self.store, stamped(stem))
            self._locked = True
        self.out = self._csv(self.name)

    def _csv(self, name: str) -> Path | str:
        """The CSV a session goes to: --out, else the app's profiles directory."""
        return self.req.out if self.req.out is not None else profile_csv(name)

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
                              pl.best() if pl is not None else None, note, self.left_in)

    def resume_hint(self, out: Path | str | None = None, more: tuple[str, ...] = ()) -> str:
        """The command that resumes this session (writing its CSV to `out`, default --out's; `more`:
        options it adds, e.g. a longer --startup-timeout)."""
        assert self.name is not None          # prepare() or export() named the session
        extra, script = self._resume_args()
        return resume_command(self.name, self.out if out is None else out, script,
                              [*extra, *startup_timeout_args(self.req.startup_timeout, more), *more])

    def done_results(self) -> list[tuple[int, dict]]:
        """The points this session finished before this run (a resumed session)."""
        return self.store.results(self.name) if self.name else []

    def pause(self) -> None:
        self.control.pause()

    def resume(self) -> None:
        self.control.resume()

    def cancel(self) -> None:
        self.control.abort()


    def _resumes_several(self) -> bool:
        """A resumed session that profiles several batch sizes (resumed by its name alone)."""
        req = self.req
        if not (req.resume and req.session):
            return False
        ex = self.store.get_session(req.session)
        return ex is not None and ex.batch_sizes is not None

    def _resolve(self) -> None:
        req = self.req
        self.script = list(req.script)
        check_command(self.script)            # before a session is opened for it
        if not self.script and not req.workload and not req.resume and not req.corpus:
            raise SessionError("--workload is required (or --resume an existing --session; on the "
                               "replay device --corpus F.csv is the workload)")
        self.existing = self._session()
        ex = self.existing
        # resumed with nothing left to profile: export() writes its CSV from the store, no device
        self.finished = bool(req.resume and ex is not None and ex.status == "done" and ex.n_done)
        self.seed = req.seed if req.seed is not None else (ex.seed if ex else default_seed())
        self.batch_size = req.batch_size or (ex.batch_size if ex else 16)
        self.is_script = bool(self.script) or (ex is not None and ex.workload == SCRIPT_WORKLOAD)
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

    def _refuse_with_sizes(self, batch_sizes) -> None:
        """What a profile over several batch sizes cannot be combined with, refused up front."""
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

    def _resolve_sizes(self, batch_sizes) -> None:
        """The request of a profile over several batch sizes (_refuse_with_sizes), the session and
        the sizes (a resume's are the session's own)."""
        self._refuse_with_sizes(batch_sizes)
        req = self.req
        self.existing = first = self._session()
        if req.resume:
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
            if wl == SCRIPT_WORKLOAD and not req.script and not self.finished:
                raise SessionError("resume a script session with the same command after --")
            if wl == SCRIPT_WORKLOAD and req.script and not self.finished:
                check_resume_command(first.params, req.script)     # the command with its {bs}
            self.workload_name = req.workload or (None if wl == SCRIPT_WORKLOAD else wl)
        else:
            if first is not None:
                raise SessionError(f"session {req.session!r} already exists; add --resume to "
                                   f"continue it or pick another --session name")
            if not req.script and not req.workload:
                raise SessionError("--workload is required (or your own training command after --)")
            self.finished = False
            self.seed = req.seed if req.seed is not None else default_seed()
            self.workload_name = req.workload
        self.batch_sizes = tuple(batch_sizes)
        self.what = "(mode, batch size) pairs"
        self.device_name = first.device if first else None
        self.recorded = False
        self._at_size(self.batch_sizes[0])
        self.workload = self._whole_workload()

    def _whole_workload(self) -> Workload | None:
        """Over several sizes: the catalog workload profiled (at the first size), None for a script."""
        assert self.batch_sizes is not None
        return get_workload(self.workload_name, self.batch_sizes[0]) if self.workload_name else None

    def _at_size(self, b: int) -> None:
        """Over several sizes: the run's size is b, its command the user's with b for {bs}."""
        self.batch_size = b
        self.script = [a.replace(PLACEHOLDER, str(b)) for a in self.req.script]
        self.is_script = self.user_script = bool(self.script)
        self.bs_stated = True                 # named in the session's name and rows
        if self.script:
            self.workload = script_workload(b, self.script)
        else:
            assert self.workload_name is not None     # a catalog workload when no script
            self.workload = get_workload(self.workload_name, b)

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
        footprint (not a script's, not a recorded model the corpus shows running); over several
        sizes, prepare() leaves out those that do not fit instead."""
        return not self.is_script and not self.recorded and self.batch_sizes is None

    # -- set-up -------------------------------------------------------------------------------------
    def open_backend(self, kind: str | None, device: str | None, root: str | None = "/",
                     corpus: str | None = None, detected=None) -> str:
        """Open the backend this run needs; returns the note saying which and why.  `detected`:
        the board found at `root`, where the caller has looked already (backends.choose_backend)."""
        # refused before anything opens
        board = device or self.device_name
        if board and self.memory_checked and self.workload is not None:
            check_memory(get_device(board), self.workload, self.batch_size)
        self._check_spec_batch()
        return self._open_backend(kind, board, root, corpus or self.req.corpus, detected)

    def _check_spec_batch(self) -> None:
        """A --workload-spec counts one step at its batch size: a new profile at another size
        (a script's only where --batch-size says it) is refused before any mode, not by the fit
        after every mode (a tune's), nor planned on the other step's prior (an active profile's)."""
        req = self.req
        if (not req.workload_spec or req.resume or self.batch_sizes is not None
                or (self.is_script and not req.batch_size)):
            return
        spec = WorkloadSpec.from_json(req.workload_spec)
        if int(spec.batch_size) != int(self.batch_size):
            raise InputError(f"the profile would run at batch size {self.batch_size}, the workload "
                             f"spec counts a step at batch size {int(spec.batch_size)}: give "
                             f"--batch-size {int(spec.batch_size)}, or the spec of batch size "
                             f"{self.batch_size} (a step's FLOPs and bytes grow with it)")

    def _spec(self, req: ProfileRequest, sp: dict):
        """The workload's spec for its roofline prior: the one a resumed session recorded (its plan
        continues as it started), else --workload-spec; None without one (the planner then starts
        from the bundled reference, as before the prior existed: the prior is asked for)."""
        if isinstance(sp.get("workload_spec"), dict):
            return WorkloadSpec.from_dict(sp["workload_spec"], "the session's workload spec")
        if req.workload_spec:
            return WorkloadSpec.from_json(req.workload_spec)
        return None

    def _plan(self, dev, req: ProfileRequest, sp: dict):
        """One size's plan function for open_session, its params and, for active profiling, the
        planner.  `sp`: the params of the session (or part) resumed, {} for a new one."""
        replay = self.backend if isinstance(self.backend, ReplayJetson) else None
        strategy = sp.get("strategy") or req.strategy or "random"
        cands = replay.candidates() if replay is not None else None    # recorded modes only
        goal_d = sp.get("goal") or {"budget_w": req.budget_w, "deadline_ms": req.deadline_ms,
                                    "objective": req.objective}
        goal = Goal(**goal_d) if any(v is not None for v in goal_d.values()) else None
        count = sp.get("count", req.count)
        first, planner = None, None
        spec = self._spec(req, sp)
        if not (req.modes_csv or req.grid or req.modes is not None):
            prior = None
            if strategy == "active" and spec is not None:
                prior = RooflinePrior(dev, spec) if dev.name in BOARDS else None
            first, planner = make_plan(dev, strategy, count=count, seed=self.seed,
                                       candidates=cands, goal=goal,
                                       reference=load_bundled() if strategy == "active" else None,
                                       prior=prior, tune=req.tune)
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
        return plan_fn, params, planner

    def prepare(self, backend: Backend | None = None) -> SessionInfo | _Info:
        """Open (or reopen) the session with its plan.  At one batch size, also choose the training
        loop for the backend and build the profiler (_open_size); over several, each size's part
        is opened when run() comes to it.  A backend that cannot train a catalog workload itself
        (a real board) runs ptui's own plain-torch loop for it under the minibatch probe."""
        if backend is not None:
            self.backend = backend
        be = self.backend
        if be is None:
            raise SessionError("no backend to profile on")
        if self.req.resume and self.existing is not None:
            check_same_board(self.existing, be)
        _board_free(be)
        tpc = tpc_note(be)                        # the mask every profiled mode runs under
        if tpc:
            self.notes.append(f"warning: {tpc}")
        if be.emulated:
            # nothing said where the times come from: 900 ms steps of this machine's CPU beside the
            # emulated board's watts (a user's trial)
            self.notes.append(EMULATED_TIMES)
        if self.batch_sizes is not None:
            return self._prepare_sizes(be.device)
        dev = be.device
        req, wl = self.req, self.workload
        assert wl is not None, "a finished script session is exported, not profiled"
        ex = self.existing
        if self.recorded and be.kind != "replay":   # a resumed replay session: check_same_board
            raise SessionError(f"{wl.name} is a recorded workload, not a built-in one: replay it "
                               f"with --backend replay --corpus F.csv")
        if self.memory_checked:
            check_memory(dev, wl, self.batch_size)
        # a script's batch is what its own code feeds, unknown until measured: named only if stated
        self.bs_stated = not self.user_script or bool(req.batch_size)
        bs_part = f"-bs{self.batch_size}" if self.bs_stated else ""
        self._name_session(f"{dev.name}-{wl.name}{bs_part}")
        self.info = self._open_size(req, self.store, ex.params if ex and req.resume else None,
                                    self.notes)
        if self.planner is not None:
            self.notes.append(f"active profiling for the goal '{self.planner.goal.describe()}': up to "
                              f"{plural(self.planner.count, 'mode')}, stopping early once the decision "
                              f"is confident")
        return self.info

    def _open_size(self, req: ProfileRequest, store, resumed: dict | None,
                   notes: list[str]) -> SessionInfo:
        """One size's part of prepare(): its training loop, plan and params, the session (or its
        part at this size, `store`) opened with them (`resumed`: the params of the one resumed,
        None: a new one), the script's source and log, the profiler and the pool."""
        be = self.backend
        assert be is not None and self.name is not None and self.workload is not None
        dev, wl = be.device, self.workload
        if not self.is_script and not be.trains_builtin:
            if wl.name not in BUILTIN:
                raise SessionError(
                    f"no built-in training loop for {wl.name} on a real board (built in: "
                    f"{', '.join(BUILTIN)}); profile your own script: ptui profile ... -- python train.py")
            self.script = [sys.executable, "-m", "ptui.probe.loops", wl.name,
                           "--batch-size", str(self.batch_size)]
        plan_fn, plan_params, planner = self._plan(dev, req, resumed or {})
        out = req.out if req.out is not None else profile_csv(self.name)
        params = {"out": str(out), **plan_params, **req.params}
        if self.user_script:
            params["command"] = self.script
            params.setdefault("batch_size_stated", self.bs_stated)
        if isinstance(be, ReplayJetson):      # the profile says its figures are replayed
            params.setdefault("timed", f"{time_unit(profile_tags(be.corpus_path).get('timed'))} "
                                       f"(REPLAYED from {be.corpus_path.name})")
        if req.time_basis != "auto":
            params["time_basis"] = req.time_basis
        info = open_session(store, self.name, resume=resumed is not None, device=dev, workload=wl,
                            seed=self.seed, backend_kind=be.kind, plan_fn=plan_fn,
                            original_mode=be.current_mode(), params=params)
        self._size_locked = True              # open_session took the session's lock
        todo = len(info.plan) - info.n_done
        bs_txt = f" bs{self.batch_size}" if self.bs_stated else ""
        # an active plan grows mode by mode: its first design is not how many it will profile
        counts = (f"{plural(info.n_done, 'mode')} done, the next chosen one by one" if planner is not None
                  else f"{plural(len(info.plan), 'mode')}, {info.n_done} done, {todo} to go")
        notes.append(f"session {self.name}: {wl.model}{bs_txt} on {dev.name} ({be.kind}); {counts}")
        if self.script:
            self.log = script_log(self.name if self.batch_sizes is None
                                  else f"{self.name}@bs{self.batch_size}")
            cfg0 = ProfileConfig()
            name = self.name
            self.source = ScriptSource(be, self.script, self.log,
                                       first_step_timeout=req.startup_timeout, notify=self.notify,
                                       on_info=lambda d: store.merge_params(name, d),
                                       steps_per_mode=cfg0.min_minibatches + 2, modes_todo=todo)
            notes.append(f"running {' '.join(self.script)!r} under the optimizer-step probe; "
                         f"its output goes to {self.log}")
            if be.simulated:
                notes.append(f"no Jetson: the profile is a {WHATIF_LABEL}; the script runs only "
                             f"until its model is measured and a few steps are timed on this machine")
            else:
                notes.append(steps_note(cfg0.min_minibatches, todo))
        else:
            self.source, self.log = None, None
        if self.batch_sizes is None:          # over several sizes the pairs are chosen by run()
            self.planner = planner
        self.profiler = Profiler(be, wl, store, self.name,
                                 ProfileConfig(sample_interval=req.sample_interval),
                                 source=self.source, planner=planner)
        self.profiler.control = self.control
        self.profiler.notify = self.notify
        self._send_to_pool(be, info, notes)
        self.profiler.time_basis = info.params.get("time_basis") or req.time_basis
        return info

    def _send_to_pool(self, be: Backend, info: SessionInfo, notes: list[str]) -> None:
        """With a fleet's pool configured ($PTUI_POOL), every finished row also goes there, right
        after the session store committed it (and the rows a killed run finished before it could
        send them); a pool that cannot be reached is said, and the profile goes on without it."""
        assert self.profiler is not None and self.name is not None
        if info.workload == SCRIPT_WORKLOAD and pool_url() is not None:
            # an unnamed script: pooled as 'script', every board's own training would be one group
            notes.append(f"this script's profile is not sent to the pool: its rows name no workload, and "
                         f"every board's own script would pool as one; send it, once profiled, with: "
                         f"ptui pool push --profile {self.out} --workload NAME (the same NAME on every "
                         f"board that runs this training)")
            return
        try:
            store, pool = pooling_store(self.profiler.store, device=be.device, workload=info.workload,
                                        batch_size=self.batch_size, simulated=bool(be.simulated),
                                        notify=self.notify)
        except PoolError as e:
            notes.append(f"warning: {e}; this profile is not sent to the pool (send it later "
                         f"with ptui pool push)")
            return
        if pool is None:
            return
        self._pool = pool
        self.profiler.store = store
        store.sync(self.name)
        notes.append(f"each finished row also goes to the pool {pool.where} as board "
                     f"{store.board!r} (modes drawn with seed {self.seed}"
                     + (", from the board's id: each board of the fleet draws its own)"
                        if self.seed == default_seed() else ")"))

    # -- set-up over several batch sizes ------------------------------------------------------------
    def _memory(self, dev) -> list[int]:
        """The sizes that fit; notes the largest batch that fits and what does not."""
        assert self.backend is not None and self.batch_sizes is not None
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

    def _prepare_sizes(self, dev) -> _Info:
        """prepare() over several sizes: the sizes that fit, and the session with its pairs."""
        assert self.backend is not None
        req = self.req
        if self.backend.kind == "replay":
            raise BatchError("the replay device replays a profile recorded at one batch size; "
                             "--batch-sizes needs the simulator or a board")
        sizes = self._memory(dev)
        if req.resume:                          # the first run's way of drawing pairs
            first = self.existing
            assert first is not None
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
            assert ex is not None
            first_size = ex.plan_sizes[0] if ex.plan_sizes else None
            fresh = {b: [m for m, bb in zip(ex.plan, ex.plan_sizes) if bb == first_size]
                     for b in sizes}
        elif self.how == "modes":
            fresh = self._pairs(dev, sizes)
        else:
            fresh = self._pairs(dev, sizes, self.count)
        self._name(dev, sizes)
        self._plan_pairs(dev, sizes, fresh)
        info = self.store.get_session(self.name)
        total, done = len(info.plan), info.n_done
        self.info = _Info([None] * total, done)
        wl = self.workload_name or SCRIPT_WORKLOAD
        self.notes.append(f"session {self.name}: {wl} at batch sizes "
                          f"{','.join(map(str, sizes))} on {dev.name} ({self.backend.kind}); "
                          f"{total} (mode, batch size) pairs, {done} done, {total - done} to go")
        return self.info

    def _name(self, dev, sizes: list[int]) -> None:
        """The session's name over the sizes profiled (those that fit: '--batch-sizes 8,16,1000'
        named it ...-bs8-16-1000-... after refusing 1000, a user's trial)."""
        wl = self.workload_name or SCRIPT_WORKLOAD
        self._name_session(f"{dev.name}-{wl}-bs{'-'.join(map(str, sizes))}")
        assert self.name is not None
        if not self._locked:                    # an automatic name is held already
            lock_session(self.name)             # held by this run until close()
            self._locked = True

    def _plan_pairs(self, dev, sizes: list[int], fresh: dict[int, list[Mode]]) -> None:
        """Store the plan: every size's pairs (in the order a training run at that size profiles
        them), in a new session, or, resumed, for a size that has none stored yet (the sizes a
        store of ptui before version 1 had not reached when its run stopped)."""
        assert self.name is not None and self.backend is not None and self.batch_sizes is not None
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
            self.name, device=dev.name, workload=self.workload_name or SCRIPT_WORKLOAD,
            batch_size=plan_sizes[0] if plan_sizes else sizes[0], seed=self.seed,
            backend=self.backend.kind, plan=plan, plan_sizes=plan_sizes, params=params,
            original_mode=self.backend.current_mode())

    def _prepare_active(self, dev, sizes: list[int]) -> _Info:
        """Active over the joint space: the goal, the samples-to-target relation and the count are
        the session's (a resume takes them from the store); the planner's space-filling start is
        the session's first plan, later pairs are chosen one at a time as the profile runs."""
        assert self.backend is not None and self.batch_sizes is not None and self.count is not None
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
            assert self.existing is not None
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
        self._name(dev, sizes)
        start = self.planner.initial()
        self._plan_pairs(dev, sizes, {b: [m for m, bb in start if bb == b] for b in sizes})
        done = self.store.get_session(self.name).n_done
        self.info = _Info([None] * int(self.count), done)
        wl = self.workload_name or SCRIPT_WORKLOAD
        how = ("throughput only: no --samples-to-target or --noise-scale" if rel.throughput_only
               else f"time to target by the {rel.source}")
        self.notes.append(f"session {self.name}: {wl} at batch sizes {','.join(map(str, sizes))} "
                          f"on {dev.name} ({self.backend.kind}); active profiling for the goal "
                          f"'{goal.describe_per_target()}' ({how}): up to "
                          f"{self.count} (mode, batch size) pairs, {done} done, stopping early once "
                          f"the decision is confident")
        return self.info

    def _size_request(self, b: int) -> ProfileRequest:
        """Over several sizes: the request of size b's part, its planned pairs as given modes."""
        info = self.store.get_session(self.name)
        return replace(self.req, modes_csv=None, grid=None, count=None, strategy="random",
                       modes=[m for m, bb in zip(info.plan, info.plan_sizes) if bb == b],
                       out=None, params={})

    def _resume_args(self) -> tuple[list[str], list[str] | None]:
        """What a resume adds to --session NAME --resume: options before --out (the sizes, the
        replay device's), and the user's command after -- (None: no script)."""
        if self.batch_sizes is not None:
            return ["--batch-sizes", ",".join(map(str, self.batch_sizes))], self.req.script or None
        be = self.backend
        replay = ["--backend", "replay", "--corpus", str(be.corpus_path)] \
            if isinstance(be, ReplayJetson) else []
        return replay, (self.script if self.user_script else None) or None

    # -- running ------------------------------------------------------------------------------------
    @property
    def progress(self) -> Progress | None:
        """The running size's progress; over several sizes counted over the whole profile, with
        its batch size (None between sizes)."""
        p = self.profiler.progress if self.profiler else None
        if p is None or self.batch_sizes is None:
            return p
        assert self.info is not None
        return replace(p, done=self._base + p.done, total=len(self.info.plan),
                       batch_size=self.batch_size)

    def _label(self) -> str:
        be = self.backend
        assert be is not None                 # run() asks only with a backend
        if self.source is not None and getattr(self.source, "workload", None) is not None:
            host = (f"{self.source.host_step_ms:.1f} ms" if self.source.host_step_ms else "not timed")
            return f"{WHATIF_LABEL}; host step time on this machine {host}"
        if be.kind == "replay":
            return "replayed from recorded data"
        if be.emulated:
            return f"{EMULATED_LABEL}; step times this machine's"
        return "simulated" if be.simulated else ""

    def run(self, on_progress: Callable[[Progress], None] | None = None) -> ProfileOutcome:
        """Profile every remaining point, size by size; the device is back in its original mode
        afterwards.  The CSV holds every finished point, whatever happened (never written before
        one finished; a file there that ptui did not write for this session is kept aside)."""
        if self.info is None:
            self.prepare()
        # prepare() made them (or raised)
        assert self.info is not None and self.name is not None and self.backend is not None
        several = self.batch_sizes is not None
        wall0 = time.perf_counter()
        if several:
            self.simulated = self.backend.simulated
        status, error, interrupted, label, note = "failed", None, False, "", ""
        saved, n_rows, unsaved, dev_s = "", 0, None, 0.0
        self._stopped_by = ""
        try:
            try:
                status, error, interrupted, label = self._run_sizes(on_progress)
            except KeyboardInterrupt as e:   # Ctrl-C between pairs (choosing one, opening a
                # size's part): the board is in its original mode (each size's run restores it)
                status, interrupted = "aborted", True
                self._stopped_by = getattr(e, "name", "Ctrl-C")
            finally:
                if several:
                    self.profiler = None
                    self.workload = self._whole_workload()
                    # done: a later --resume only exports; a stop signal lists it as interrupted
                    self.store.set_status(self.name, "interrupted" if interrupted else status)
                dev_s = self._device_s()
                n_rows, saved, unsaved = self._save(status)
            if not several:
                note = self.time_note()
        finally:
            self.close()
        return self._outcome(status, wall0, n_rows, unsaved, dev_s, self._simulated(), error,
                             interrupted, self._stopped_by, saved, label, note,
                             planner_said=not several or status == "done")

    def _simulated(self) -> bool:
        """The figures are not a live board's: simulated, emulated, a what-if."""
        be = self.backend
        assert be is not None
        if self.batch_sizes is not None:
            return bool(self.simulated)
        return be.not_live or (self.source is not None
                               and getattr(self.source, "workload", None) is not None)

    def _run_sizes(self, on_progress) -> tuple[str, BaseException | None, bool, str]:
        """Profile the session size by size: (status, error, interrupted, label).  At one size
        the size prepare() opened; over several the sizes with pairs left (for active profiling
        its start), then the pairs the planner chooses one at a time."""
        if self.batch_sizes is None:
            assert isinstance(self.info, SessionInfo)
            return (*self._run_size(self.info, on_progress), self._label())
        assert self.info is not None
        total = len(self.info.plan)
        status, error, interrupted = "done", None, False
        assert self.backend is not None
        label = "simulated" if self.backend.simulated and not self.req.script else ""
        self._pending, self._stopped = None, False
        for b in self._sizes_left():            # the drawn pairs; for active, the start
            status, error, interrupted, lab = self._size(b, on_progress, total, quiet=False)
            label = lab or label
            if status != "done":
                return status, error, interrupted, label
        while self.how == "active" and not self._stopped:   # then one chosen pair at a time
            assert self.planner is not None
            nxt = self._pending or self.planner.next_mode(self._rows())
            self._pending = None
            if nxt is None:
                break
            m, b = nxt
            self.store.extend_plan(self.name, [m], b)   # committed before it runs: a resume runs it
            status, error, interrupted, lab = self._size(b, on_progress, total, quiet=True,
                                                         stay=True)
            label = lab or label
            if status != "done":
                break
        return status, error, interrupted, label

    def _run_size(self, info: SessionInfo, on_progress) -> tuple[str, BaseException | None, bool]:
        """Run the profiler over one size's remaining points: (status, error, interrupted); what
        stopped it is self._stopped_by."""
        assert self.profiler is not None
        self._stopped_by = ""
        try:
            self._size_locked = False          # Profiler.run lets the session go when it ends
            self.profiler.run(info, on_progress)
            return "done", None, False
        except ProfileAborted:
            return "aborted", None, False
        except KeyboardInterrupt as e:
            self._stopped_by = getattr(e, "name", "Ctrl-C")
            return "aborted", None, True
        except Exception as e:  # noqa: BLE001 - reported in the outcome; the caller decides
            return "failed", e, False
        finally:
            self.left_in = self.profiler.left_in or self.left_in

    def _sizes_left(self) -> list[int]:
        """The sizes with planned pairs not profiled yet, in the order of --batch-sizes."""
        assert self.batch_sizes is not None
        info = self.store.get_session(self.name)
        done = {g for g, _ in self.store.results(self.name)}
        left = {b for g, b in enumerate(info.plan_sizes) if g not in done}
        order = list(self.batch_sizes) + sorted(set(info.plan_sizes) - set(self.batch_sizes))
        return [b for b in order if b in left]

    def _rows(self) -> list[dict]:
        """Every measured pair of the profile, with its batch size (in a fixed order: by size,
        then as profiled), for the active planner; time_ms is the median step or the whole cycle,
        as --time decides (csvio.choose_time)."""
        rows = [r for _, r in sorted(self.store.results(self.name),
                                     key=lambda x: (x[1]["batch_size"], x[0]))]
        return with_time(rows, choose_time(rows, self.req.time_basis).basis)

    def _size(self, b: int, on_progress, total: int, *, quiet: bool, stay: bool = False):
        """Profile the pairs of one batch size (its plan, or what a resume left of it), as a part
        of the session: (status, error, interrupted, label).  stay: the active planner extends it
        while the next pair it chooses has the same size."""
        assert self.name is not None
        part = self.store.part(self.name, b)
        resumed = part.get_session(self.name)
        self._at_size(b)
        if not self.is_script:                  # the sizes that do not fit were left out
            assert self.backend is not None and self.workload is not None
            check_memory(self.backend.device, self.workload, b)
        notes: list[str] = []
        try:
            info = self._open_size(self._size_request(b), part,
                                   None if resumed is None else resumed.params, notes)
        except BaseException:
            self._close_size()
            raise
        if not quiet:                           # the whole profile's session note said it
            for note in notes[1:]:
                self.notify(note)
        assert self.profiler is not None
        if stay:
            self.profiler.planner = _SameSize(self, b)
        base = self._base = self.store.get_session(self.name).n_done - info.n_done

        def show(p):
            if on_progress is not None:
                on_progress(replace(p, done=base + p.done, total=total, batch_size=b))
        try:
            return (*self._run_size(info, show), self._label())
        finally:
            self.profiler = None
            self._close_size()

    def time_note(self) -> str:
        """The warning for a profile whose wall time goes largely outside the timed steps."""
        rows = [r for _, r in self.store.results(self.name)] if self.name else []
        return outside_warning(rows, self.profiler.time_basis if self.profiler else self.req.time_basis)

    def save(self) -> tuple[int, str]:
        """Write the session's finished points to the CSV: at one size its modes; over several
        every pair, size by size (a batch_size column; peak_mem_gb from the simulator's memory
        model)."""
        assert self.name is not None          # prepare() or export() named the session
        header: tuple[str, ...]
        if self.batch_sizes is None:
            rows, header, one = profile_rows(self.store, self.name), PROFILE_HEADER, "mode"
        else:
            rows, header, one = self._pair_rows(), PROFILE_HEADER + (PEAK_COL,), "pair"
        if not rows:
            return 0, f"no {one} finished yet, {self.out} not written"
        if isinstance(self.out, Path):
            self.out.parent.mkdir(parents=True, exist_ok=True)
        moved = keep_aside(self.out, self.name)
        write_csv(self.out, header, rows)
        kept = f" (the file that was there is kept as {moved})" if moved else ""
        saved = plural(len(rows), "finished " + self.what.removesuffix("s"))    # '1 finished mode'
        return len(rows), f"{saved} saved to {self.out}{kept}"

    def _pair_rows(self) -> list[list[str]]:
        """Every finished pair as CSV cells, size by size, with its modelled peak memory."""
        assert self.name is not None
        rows = []
        info = self.store.get_session(self.name)
        for b in sorted(set(info.plan_sizes)):
            part = self.store.part(self.name, b)
            if part.get_session(self.name) is None:      # not started at this size yet
                continue
            peak = ""
            if self.simulated and self.workload_name:
                peak = fmt_value(float(footprint_gb(get_workload(self.workload_name, b))))
            # a part has the Store methods profile_rows reads (its rows, its size's params)
            rows += [list(r) + [peak] for r in profile_rows(part, self.name)]  # type: ignore[arg-type]
        return rows

    def _elsewhere(self, status: str) -> str:
        assert self.name is not None
        if self.batch_sizes is not None:
            return self.resume_hint("elsewhere.csv")
        script = self.script if self.user_script and status != "done" else None
        return resume_command(self.name, "elsewhere.csv", script or None)

    def _close_size(self) -> None:
        """Let go of what the running size holds: its hold on the session's lock, its pool."""
        if self._size_locked:
            assert self.name is not None
            unlock_session(self.name)
            self._size_locked = False
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def close(self) -> None:
        """Close what this run opened (the CLI's backend, its own store connection, the running
        size's pool) and let go of its session (prepare() took the session's lock; a run that never
        started, or failed before it did, must not keep it from a later --resume)."""
        self._close_size()
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


@dataclass
class _Info:
    """What prepare() returns over several sizes: the whole profile's plan (its length) and done."""
    plan: list
    n_done: int


class _SameSize:
    """The planner one size's run goes on with during active profiling over batch sizes: it goes
    on while the whole profile's planner chooses a pair of its own size, and otherwise ends that
    run, leaving the chosen pair (or the stop) to the whole profile."""

    def __init__(self, whole: ProfileRun, b: int) -> None:
        assert whole.planner is not None
        self.whole, self.b = whole, b
        self.count, self.goal = whole.planner.count, whole.planner.goal

    def next_mode(self, _rows):
        assert self.whole.planner is not None
        nxt = self.whole.planner.next_mode(self.whole._rows())
        if nxt is None:
            self.whole._stopped = True
            return None
        if int(nxt[1]) == self.b:
            return nxt[0]
        self.whole._pending = nxt
        return None


def profile_run(req: ProfileRequest, batch_sizes: tuple[int, ...] | None = None, *,
                notify: Callable[[str], None] | None = None,
                control: Control | None = None) -> ProfileRun:
    """The run of a profile request, the one entry of the CLI and the app: over several batch
    sizes (`batch_sizes`, or a resumed session that profiles several) or one."""
    return ProfileRun(req, batch_sizes, notify=notify, control=control)


def random_pairs(dev, sizes, n: int, seed: int) -> dict[int, list[Mode]]:
    """n (mode, batch size) pairs drawn at random over PowerTrain's grid x the sizes (the draw a
    profile with this seed makes), by batch size."""
    space = [(m, b) for b in sizes for m in dev.pt_grid()]
    pairs = random.Random(seed).sample(space, n)
    return {b: [m for m, bb in pairs if bb == b] for b in sizes}


def estimate_pairs_device_s(dev, workload, pairs: dict[int, list[Mode]]) -> float:
    """Rough device time of profiling these pairs (estimate_device_s at each size)."""
    return sum(estimate_device_s(dev, workload.with_batch(b), ms) for b, ms in pairs.items() if ms)



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


def unfinished_after(device: str, profile: Path | None) -> list[Path]:
    """The app's profiles of this device newer than `profile` (every one where it is None) that
    did not finish (stopped, failed or still running): what the Fine-tune screen's pre-filled
    profile passed over, said beside it."""
    since = profile.stat().st_mtime if profile is not None and profile.exists() else -1.0
    newer = sorted((p for p in profiles_dir().glob(f"{device}-*.csv") if p.stat().st_mtime > since),
                   key=lambda p: p.stat().st_mtime)
    if not newer:
        return []
    try:
        store = Store()
    except StoreError:
        return []                       # not known (another process holds the store): not said
    try:
        return [p for p in newer if not _finished(store.get_session(p.stem))]
    except StoreError:
        return []
    finally:
        store.close()


def _finished(s) -> bool:
    """A profile's session (None: gone from the store) finished every mode of its plan."""
    return s is None or (s.status == "done" and s.n_done == len(s.plan))


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
    return _finished(s)


def stamped(stem: str) -> str:
    """An automatic session name before its -2, -3... : the stem and the time to the second."""
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def reserve_session(stem: str) -> str:
    """A new session's automatic name (stamped(stem), or with -2, -3... when another session, run
    or model has it), its lock held by this process until release_session(name): tune's, which
    names its CSV and model before the profile runs (--count 0: the model alone, no session)."""
    store = Store()
    try:
        return reserve_name(store, stamped(stem), lambda name: model_dir(name).exists())
    finally:
        store.close()


def check_resumed_board(name: str, backend) -> None:
    """A resumed session's pick is set on `backend` (tune --apply) only if the session was
    profiled on it (check_same_board): a finished simulator's session, resumed with --sysfs-root
    and --apply, set its simulated pick on the board (a user's trial).  Checked before anything is
    profiled or fitted; no session by that name: the profile says so."""
    store = Store()
    try:
        info = store.get_session(name)
    finally:
        store.close()
    if info is not None:
        check_same_board(info, backend)


def release_session(name: str) -> None:
    """Let go of the name reserve_session held (the profile took and let go of its own hold)."""
    unlock_session(name)


def resumable_sessions(device: str, backend=None) -> list[SessionInfo]:
    """Unfinished sessions profiled on this device, newest first; with `backend`, those that
    resume on it (check_same_board): the app's list on a board offered a simulator's session
    (and another board's), which its Resume then refused."""
    store = Store()
    try:
        return [s for s in store.list_sessions() if s.resumable and s.device == device
                and (backend is None or _resumes_on(s, backend))]
    finally:
        store.close()


def _resumes_on(info: SessionInfo, backend) -> bool:
    try:
        check_same_board(info, backend)
    except SessionError:
        return False
    return True


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
