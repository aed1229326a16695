"""Guided N-mode profiling, following PowerTrain's protocol (paper section 2.5).

For each mode: apply it and verify the read-back; drop the minibatch that straddled the switch and
the first one after it; wait until power is stable (a sliding window of samples whose spread is
within a tolerance); then record at least 40 clean minibatches and enough power samples to cover
them.  Result per mode: median minibatch time (ms), mean power (W), plus spread and counts.
Every finished mode is committed to the session store before the next starts.  On normal exit,
Ctrl-C or any error the device goes back to the state it was in before the run.
"""
from __future__ import annotations

import random
import statistics
import threading
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Callable

from ..board import undo
from ..board.backends.base import ApplyError, Backend, BackendError, MinibatchEvent
from ..board.csvio import choose_time, fmt_value, keep_aside, mode_cells, profile_tags, with_time, write_csv
from ..board.locks import (
    LockError,
    board_key,
    board_lock,
    board_root,
    holder,
    lock_session,
    session_key,
    unlock_session,
)
from ..board.logs import get as _logger
from ..board.signals import shielded
from ..catalogue.devices import Device
from ..catalogue.modes import Mode, transition_order
from ..catalogue.workloads import SCRIPT_WORKLOAD, Workload
from ..errors import RuntimeFailure
from ..paths import board_state_dir
from ..progress import plural
from .store import SessionInfo, Store, StoreError

LOG = _logger(__name__)


class ProfileError(RuntimeFailure):
    pass


class RestoreFailed(BackendError):
    """Profiling ended but the board could not be put back in its original mode."""


class ProfileAborted(ProfileError):
    pass


class ThermalLimit(ProfileError):
    """A thermal zone reached the limit: profiling stops and the mode is restored."""


class SessionError(ProfileError):
    """A session that cannot be created or resumed as asked (bad input, exit code 2)."""
    exit_code = 2


class ScriptUnprofilable(ProfileError):
    """The training script cannot be profiled as it is: it trains no step ptui can time (inference
    only, an update made by hand, no step within --startup-timeout, no training at all) or its
    model cannot be measured.  A resume runs it again the same way and fails the same way, so none
    is offered, unless `resume_with` names a flag and a value with which a resume could get past it
    (("--startup-timeout", "1200"): a script, or a later batch size of it, that took no step within
    the start-up timeout may need longer)."""

    def __init__(self, *args, resume_with: tuple[str, str] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.resume_with = resume_with


class ModeDisturbed(ProfileError):
    """Something other than ptui changed the board's mode while a mode was being measured."""


# a measurement whose mode changed under it is taken again this many times before profiling stops
REMEASURE = 2


@dataclass(frozen=True)
class ProfileConfig:
    min_minibatches: int = 40
    min_power_samples: int = 5
    window: int = 4              # samples in the stability window
    stable_tol: float = 0.03     # (max - min) / mean of the window
    min_settle_s: float = 1.0
    settle_timeout_s: float = 30.0
    mode_timeout_s: float = 1800.0
    sample_interval: float | None = None   # None: the backend's default
    thermal_limit_c: float = 85.0          # stop and restore when any zone reaches this


@dataclass
class ModeResult:
    mode: Mode
    time_ms: float
    power_w: float
    time_ms_p25: float
    time_ms_p75: float
    power_w_std: float
    n_minibatches: int
    n_power: int
    settle_s: float
    mode_s: float
    stable: bool
    cycle_ms: float | None = None   # wall time per minibatch/step over the window (work between
                                    # the steps included); time_ms is the median step

    def row(self) -> dict:
        d = asdict(self)
        d.pop("mode")
        d.update(self.mode.as_dict())
        return d


@dataclass
class Progress:
    """What the profiler reports after each mode (and the UI polls while a mode runs)."""
    done: int
    total: int
    mode: Mode | None
    last: ModeResult | None
    device_time_s: float
    phase: str = ""
    live_power_w: float | None = None
    live_minibatch_ms: float | None = None
    batch_size: int | None = None         # profiles over several batch sizes: the pair's size


@dataclass
class Control:
    """Thread-safe pause/abort switches for a running profile (used by the app)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _run: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._run.set()

    def abort(self) -> None:
        self._stop.set()
        self._run.set()

    def pause(self) -> None:
        self._run.clear()

    def resume(self) -> None:
        self._run.set()

    @property
    def paused(self) -> bool:
        return not self._run.is_set()

    @property
    def aborted(self) -> bool:
        return self._stop.is_set()

    def wait(self) -> None:
        while not self._run.wait(0.1):
            pass
        if self._stop.is_set():
            raise ProfileAborted("profile aborted")


def choose_modes(device: Device, *, count: int | None = None, modes: list[Mode] | None = None,
                 grid: str | None = None, seed: int = 0) -> list[Mode]:
    """The plan: given modes, the whole PowerTrain grid, or `count` random grid modes (seeded);
    ordered so transitions are cheap."""
    if modes is not None:
        chosen = list(dict.fromkeys(modes))
    elif grid == "pt":
        chosen = device.pt_grid()
    else:
        g = device.pt_grid()
        n = 50 if count is None else count
        if not 1 <= n <= len(g):
            raise SessionError(f"--count must be between 1 and {len(g)} for {device.name}, got {n}")
        chosen = random.Random(seed).sample(g, n)
    return transition_order(chosen)


def summarise(mode: Mode, mbs: list[float], pw: list[float], settle_s: float, mode_s: float,
              stable: bool, extra_ms: float = 0.0) -> ModeResult:
    """mbs: the window's minibatch (step-to-step) times, back to back: their median is the step,
    their mean the whole cycle, wall time per step, with extra_ms added (work the events do not
    hold: a what-if's work outside the steps, measured on the host)."""
    q = statistics.quantiles(mbs, n=4) if len(mbs) >= 2 else [mbs[0]] * 3
    return ModeResult(mode, statistics.median(mbs), statistics.fmean(pw), q[0], q[2],
                      statistics.pstdev(pw), len(mbs), len(pw),
                      settle_s, mode_s, stable, statistics.fmean(mbs) + extra_ms)


@dataclass
class _Readings:
    """What measuring one mode has gathered so far."""
    t_a: float                          # when the mode read back as applied
    window: deque[float]                # the last power samples, while settling
    stable_at: float | None = None      # when the power settled (or settling gave up)
    stable: bool = True
    dropped_first: bool = False
    mbs: list[float] = field(default_factory=list)
    pw: list[float] = field(default_factory=list)


class Profiler:
    def __init__(self, backend: Backend, workload: Workload, store: Store, session: str,
                 config: ProfileConfig | None = None, source=None, planner=None) -> None:
        self.backend = backend
        self.planner = planner          # active.ActivePlanner: extends the plan one mode at a time
        self.source = source            # e.g. userscript.ScriptSource; None = the backend's own workload
        self.workload = workload
        self.store = store
        self.session = session
        self.cfg = config or ProfileConfig()
        self.control = Control()
        self.progress: Progress | None = None
        self.notify: Callable[[str], None] = lambda text: None
        self.time_basis = "auto"        # what active profiling decides on (csvio.choose_time)
        self.left_in: Mode | None = None  # the mode the board was put back in, read back

    # -- one mode -----------------------------------------------------------------------------
    def measure_checked(self, events, mode: Mode) -> ModeResult:
        """measure(), then read the mode back: a measurement during which another program changed a
        clock (or a core) is taken again, up to REMEASURE times; if it keeps happening profiling
        stops (ModeDisturbed), and no such row is ever saved."""
        for attempt in range(REMEASURE + 1):
            r = self.measure(events, mode)
            now = self.backend.current_mode()
            if now == mode:
                return r
            what = (f"the board's mode changed from {mode.key} to {now.key} while it was being "
                    f"measured (another program set a clock or a core)")
            if attempt < REMEASURE:
                self.notify(f"{what}; measuring {mode.key} again")
        raise ModeDisturbed(f"{what}, {REMEASURE + 1} times in a row: no row was saved for it; stop the "
                            f"other program, then resume")

    def measure(self, events, mode: Mode, *, record: bool = True) -> ModeResult | None:
        be, cfg, clock = self.backend, self.cfg, self.backend.clock
        t_start = clock.now()
        LOG.debug("profiling mode %s", mode.key)
        with shielded():                           # a mode is applied whole or not at all
            got = be.apply_mode(mode)
        if got != mode or be.current_mode() != mode:
            raise ApplyError(f"mode {mode.key} did not read back (device reports {be.current_mode().key})")
        r = _Readings(clock.now(), deque(maxlen=cfg.window))
        for ev in events:
            now = clock.now()
            if isinstance(ev, MinibatchEvent):
                if ev.t_end <= r.t_a + 1e-9:
                    continue                       # straddled the switch
                if not r.dropped_first:
                    r.dropped_first = True         # the first minibatch in a new mode is slow
                    continue
                self._take_minibatch(r, ev)
            else:
                self._take_power(r, ev, mode)
            if r.stable_at is not None and (not record or self._enough(r)):
                break
            limit = max(cfg.mode_timeout_s, getattr(self.source, "mode_timeout_s", 0.0) or 0.0)
            if now - r.t_a > limit:            # a script with slow steps extends the limit
                raise ProfileError(f"mode {mode.key}: no result after {limit:.0f} s "
                                   f"({len(r.mbs)} minibatches) — is the workload still training?")
            if self.control.aborted or self.control.paused:
                self.control.wait()
        if not record:
            return None
        extra = getattr(self.source, "outside_ms", None)
        return summarise(mode, r.mbs, r.pw, r.stable_at - r.t_a, clock.now() - t_start, r.stable,
                         extra(mode) if extra else 0.0)

    def _take_minibatch(self, r: _Readings, ev: MinibatchEvent) -> None:
        """A minibatch of the new mode: shown live, recorded if it started once the power was stable."""
        if self.progress:
            self.progress.live_minibatch_ms = ev.ms
        if r.stable_at is not None and ev.t_end - ev.ms / 1000.0 >= r.stable_at - 1e-9:
            r.mbs.append(ev.ms)

    def _take_power(self, r: _Readings, ev, mode: Mode) -> None:
        """A power sample: checked (a sensor, no zone too hot), then part of the settling window
        until the power is stable, recorded after."""
        if ev.power_w is None:
            raise BackendError("no power reading: the device reports no power sensor")
        hot = [(z, c) for z, c in ev.temps.items() if c >= self.cfg.thermal_limit_c]
        if hot:
            z, c = max(hot, key=lambda x: x[1])
            raise ThermalLimit(f"thermal guard: {z} reached {c:.1f} °C (limit "
                               f"{self.cfg.thermal_limit_c:.0f} °C) in mode {mode.key}; profiling "
                               f"stopped and the original mode restored")
        if self.progress:
            self.progress.live_power_w = ev.power_w
        if r.stable_at is None:
            self._settle(r, ev)
        elif ev.t > r.stable_at:
            r.pw.append(ev.power_w)

    def _settle(self, r: _Readings, ev) -> None:
        """Stable once the last cfg.window samples lie within cfg.stable_tol of their mean, no sooner
        than cfg.min_settle_s after the switch; unstable (recorded as such) after cfg.settle_timeout_s."""
        cfg = self.cfg
        r.window.append(ev.power_w)
        if len(r.window) == cfg.window and ev.t - r.t_a >= cfg.min_settle_s:
            lo, hi = min(r.window), max(r.window)
            if (hi - lo) <= cfg.stable_tol * (sum(r.window) / len(r.window)):
                r.stable_at = ev.t
        if r.stable_at is None and ev.t - r.t_a >= cfg.settle_timeout_s:
            r.stable_at, r.stable = ev.t, False
        if r.stable_at is not None and self.progress:
            self.progress.phase = "recording"

    def _enough(self, r: _Readings) -> bool:
        """Enough recorded: the minibatches and power samples the config asks for, covering at least
        the source's cycle window (a what-if's whole cycle)."""
        cfg = self.cfg
        return (len(r.mbs) >= cfg.min_minibatches and len(r.pw) >= cfg.min_power_samples
                and sum(r.mbs) / 1000.0 >= getattr(self.source, "cycle_window_s", 0.0))

    def _extend(self, plan: list[Mode]) -> list[int]:
        """Active profiling: ask the planner for the next mode and append it to the plan."""
        if self.planner is None:
            return []
        self.progress.phase = "choosing the next mode"
        rows = [r for _, r in self.store.results(self.session)]
        rows = with_time(rows, choose_time(rows, self.time_basis).basis)
        nxt = self.planner.next_mode(rows)
        if nxt is None:
            self.progress.total = len(plan)
            return []
        self.store.extend_plan(self.session, [nxt])
        self.progress.total = max(self.progress.total, len(plan) + 1)
        return [len(plan)]

    # -- a whole session ------------------------------------------------------------------------
    def run(self, info: SessionInfo, on_progress: Callable[[Progress], None] | None = None
            ) -> list[ModeResult]:
        """Profile the session's remaining modes, holding the board's lock (one process changes a
        board's mode at a time); the session's lock (taken by open_session) is released at the end."""
        try:
            with board_lock(self.backend):
                return self._run(info, on_progress)
        finally:
            unlock_session(self.session)

    def start_state(self, info: SessionInfo):
        """The state this run must leave the board in, recorded durably before the board is touched.

        A profile record left by a killed profile means the board is still in a mode nobody chose:
        this run ends in the state before that profile, and says so (a resume of the killed one
        too: not in whatever the killed run left).  Else a resume of a run that was cut before it
        put the board back (the session keeps the state it started from until it does) goes back
        to that state when its record cannot be seen from here (another state directory) and it
        was cut on this board (a resume on another ended that board in the first one's start
        state); else the run ends in the board's state now (a record gone was taken by `ptui
        restore` or by an apply of a mode the user chose).  A resume ended in the state
        its first run found, whatever came since: a mode the user chose after a stopped run (a
        user's trial), or, with another profile's record left, the state before that one, lost.
        The board-wide profile record (undo.PROFILE) lets `ptui restore` put the state back after a
        kill -9.  Called with the board's lock held."""
        be = self.backend
        stale = undo.load(be, undo.PROFILE)
        board = board_key(be) or ""
        undo_dir = str(board_state_dir().path) if undo.keeps_records(be) else ""
        if stale is not None:
            snap = stale.state
        elif (info.original_state is not None and info.params.get("original_board", board) == board
              and (not undo_dir or info.params.get("undo_dir") != undo_dir)):
            snap = be.snapshot_from_json(info.original_state)
        else:
            # a run cut on another board (not that board's state), or one whose record, which this
            # process would see, is gone: `ptui restore` put the state back, or an apply took it
            # as its way back and set a mode the user chose (the resume went back over it)
            snap = be.snapshot()
        if stale is not None and stale.session != self.session:
            self.notify(f"an interrupted profile (session {stale.session}, {stale.when()}) left this "
                        f"board in a mode nobody chose; this profile ends in the mode before it, "
                        f"{be.snapshot_mode(snap).key}")
        self.store.set_original_state(self.session, be.snapshot_json(snap), be.snapshot_mode(snap))
        # the session's, as its start state is: kept per size, a resume that went on at the next
        # size found neither and ended in that state, over a mode applied since (a restore's too)
        self.store.merge_session_params(self.session, {"original_board": board,
                                                       "board_where": board_where(be),
                                                       "undo_dir": undo_dir})
        self.record = undo.save(be, undo.PROFILE, snap, self.session)
        return snap

    def _put_back(self, snap) -> None:
        """Restore the start state, read it back, then drop the profile record (kept when the board
        is not back, so that `ptui restore` can try again)."""
        be = self.backend
        with shielded():
            be.restore(snap)
            now, want = be.current_mode(), be.snapshot_mode(snap)
            if now != want:
                raise BackendError(f"the board reads back {now.key}, not {want.key}")
            self.left_in = now
            undo.clear(be, undo.PROFILE, getattr(self, "record", None))
            try:
                self.store.forget_original_state(self.session)   # a resume ends where it starts
            except StoreError:
                pass                          # kept: a resume goes back to it, as before

    def _run(self, info: SessionInfo, on_progress: Callable[[Progress], None] | None = None
             ) -> list[ModeResult]:
        be, clock = self.backend, self.backend.clock
        plan = info.plan
        done = self.store.done_indices(self.session)
        t0 = clock.now()
        base_time = info.device_time_s
        results: list[ModeResult] = []
        snap = self.start_state(info)
        total = max(len(plan), self.planner.count) if self.planner is not None else len(plan)
        self.progress = Progress(len(done), total, None, None, base_time, "starting")
        status, cause = "failed", ""
        try:
            if self.source is not None:
                self.source.start()
                events = self.source.events(self.cfg.sample_interval)
            else:
                be.start_training(self.workload)
                events = be.events(self.cfg.sample_interval)
            todo = [i for i in range(len(plan)) if i not in done]
            if not todo and done:                       # resumed after the last planned mode
                todo = self._extend(plan)
                plan = self.store.get_session(self.session).plan
            if todo and todo[0] > 0 and (todo[0] - 1) in done:
                # resuming: bring the board to the state the uninterrupted run would be in,
                # training in the previous mode with settled power
                self.progress.phase = "warming up"
                self.measure(events, plan[todo[0] - 1], record=False)
                clock.sleep(0.0)
            while True:
                for i in todo:
                    mode = plan[i]
                    self.progress.mode, self.progress.phase = mode, "settling"
                    self.control.wait()
                    r = self.measure_checked(events, mode)
                    dev_t = base_time + (clock.now() - t0)
                    self.store.save_result(self.session, i, r.row(), dev_t)
                    results.append(r)
                    self.progress.done += 1
                    self.progress.last = r
                    self.progress.device_time_s = dev_t
                    if on_progress:
                        on_progress(self.progress)
                todo = self._extend(plan)
                if not todo:
                    break
                plan = self.store.get_session(self.session).plan
            status = "done"
        except ProfileAborted:                  # the app's stop
            status, cause = "aborted", "profiling was stopped in the app"
            raise
        except KeyboardInterrupt as e:          # Ctrl-C, SIGTERM, SIGHUP: said with the resume hint,
            status = "interrupted"              # and listed as a killed one is (store.get_session)
            cause = f"profiling was stopped by {getattr(e, 'name', 'Ctrl-C')}"
            raise
        except Exception as e:
            cause = f"profiling failed: {e}"
            raise
        finally:
            try:
                if self.source is not None:
                    self.source.stop()
                else:
                    be.stop_training()
            finally:
                restore_error = None
                try:
                    self._put_back(snap)
                except Exception as e:  # noqa: BLE001 - report, don't mask the original error
                    restore_error = e
                try:
                    self.store.set_status(self.session, status, base_time + (clock.now() - t0))
                except StoreError:
                    pass
                self.progress.phase = status
                if restore_error is not None:
                    # what stopped the profile is said too: it said only the put-back's error
                    # (SIGTERM, or a mode the board refused, was lost: a user's trial)
                    why = f": {restore_error}"
                    if cause.endswith(why):        # a stopped emulator: one reason, said once
                        why = " either, for the same reason"
                    raise RestoreFailed(f"{cause + '; then ' if cause else ''}could not restore the "
                                        f"original mode{why}; `ptui restore` tries again")
        return results


PROFILE_VALUES = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "time_ms", "power_w", "time_ms_p25",
                  "time_ms_p75", "power_w_std", "n_minibatches", "n_power", "settle_s", "mode_s",
                  "stable")
PROFILE_NOTES = ("timed", "host_step_ms")                # what one time_ms is; a what-if's host step
PROFILE_TAGS = ("workload", "batch_size", "session")     # trailing text columns: what was profiled
# the whole cycle beside the median step: wall time per step over the window, the share of it
# outside the steps (percent), and the time basis the profile was asked to decide on (csvio)
PROFILE_CYCLE = ("cycle_ms", "outside_pct", "time_basis")
PROFILE_HEADER = PROFILE_VALUES + PROFILE_NOTES + PROFILE_TAGS + PROFILE_CYCLE


def timed_unit(info: SessionInfo | None) -> str:
    """What time_ms measures in a session, in words (the CSV's `timed` column)."""
    if info is None:
        return ""
    if info.params.get("timed"):
        return str(info.params["timed"])
    return "minibatch (SIMULATED built-in workload)" if info.backend == "sim" else "minibatch"


def batch_tag(info: SessionInfo) -> str:
    """The CSV's batch_size: the session's, but for a user's script whose batch the user did not
    state, the samples per iteration the probe measured (blank when it saw no DataLoader)."""
    p = info.params
    if info.workload == SCRIPT_WORKLOAD and p.get("batch_size_stated") is False:
        n = ((p.get("whatif") or {}).get("model") or {}).get("samples") or p.get("samples")
        return str(int(n)) if n else ""
    return str(info.batch_size)


CYCLE_WORDS = "over the whole cycle (its wall time, the work in between included)"


@dataclass(frozen=True)
class Timed:
    """What one time_ms is, as a value: read once from the phrase a profile or model keeps (the
    CSV's `timed` column, a model's meta), instead of parsing the phrase again where it is used.

    unit: what one time is, in words for "<t> ms per <unit>" (a built-in workload's minibatch, or
    what the probe timed in a script: an optimizer step, a whole iteration of several optimizers,
    a step over accumulated micro-batches, closure evaluations); per_step: a script's step or
    iteration rather than a minibatch; what_if: a SIMULATED what-if from the script's measured
    size; cycle: the whole cycle (the wall time per step, the work in between included)."""
    text: str
    unit: str
    per_step: bool
    what_if: bool
    cycle: bool

    @classmethod
    def of(cls, timed: "str | Timed | None") -> "Timed":
        if isinstance(timed, Timed):
            return timed
        text = (timed or "").strip()
        t = text
        what_if = t.startswith("what-if")
        if what_if and ":" in t:
            t = t.split(":", 1)[1].strip()
        if t.startswith("one "):
            t = t[4:]
        cycle = CYCLE_WORDS in t
        if not t or t.startswith("minibatch"):     # "minibatch (SIMULATED built-in workload)" ...
            unit = "minibatch" + (f" {CYCLE_WORDS}" if cycle else "")
        else:
            unit = t
        per_step = not unit.startswith("minibatch") and ("step" in unit or "iteration" in unit)
        return cls(text, unit, per_step, what_if, cycle)

    @property
    def step_word(self) -> str:
        """'step' for a script's step or iteration, else 'minibatch'."""
        return "step" if self.per_step else "minibatch"


def time_unit(timed: str | None) -> str:
    """One time_ms, in words for "<t> ms per <unit>" (Timed.unit)."""
    return Timed.of(timed).unit


def model_timed(model) -> str:
    """What one time_ms of a model is (its profile's `timed`; a script's optimizer step, else a
    minibatch)."""
    return model.about.timed or ("optimizer step (of the user's script)"
                                 if model.about.workload == SCRIPT_WORKLOAD else "minibatch")


def cycle_timed(timed: str | None) -> str:
    """`timed` for a time taken over the whole cycle (csvio.with_time 'cycle')."""
    t = (timed or "").strip() or "one minibatch"
    return t if CYCLE_WORDS in t else f"{t} {CYCLE_WORDS}"


def keep_timed(model, profile, basis: str = "step") -> None:
    """Record in a model's meta what one time_ms of its profile is (the CSV's `timed` column) and
    which time it was fitted on (time_basis: the median step, or the whole cycle)."""
    timed = profile_tags(profile).get("timed")
    if basis == "cycle":
        timed = cycle_timed(timed)
    if timed:
        model.tell(timed=timed)
    model.tell(time_basis=basis)


def profile_rows(store: Store, session: str) -> list[list[str]]:
    """The session's finished modes as CSV cells, in plan order; `timed` says what one time_ms is
    (a script: an optimizer step, a GAN's whole iteration, a what-if ...) and host_step_ms is a
    SIMULATED what-if's step time measured on this machine (empty otherwise)."""
    info = store.get_session(session)
    tags = [info.workload, batch_tag(info), session] if info else ["", "", session]
    timed = timed_unit(info)
    host = info.params.get("host_step_ms") if info else None
    basis = (info.params.get("time_basis") or "") if info else ""
    out = []
    for _, r in store.results(session):
        m = Mode(r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"])
        cyc = r.get("cycle_ms")
        share = (100.0 * (1.0 - r["time_ms"] / cyc) if cyc and cyc > 0 else None)
        out.append(mode_cells(m) + [fmt_value(r[k]) for k in PROFILE_VALUES[4:]]
                   + [timed, fmt_value(host)] + tags
                   + [fmt_value(cyc), "" if share is None else f"{max(0.0, share):.1f}", basis])
    return out


def save_profile(path, store: Store, session: str) -> str:
    """Write the session's finished modes to the profile CSV `path`; say what happened, as a
    phrase.  Writes nothing while no mode has finished; a file at `path` that is not this
    session's profile is kept, renamed to `path.~N~`."""
    rows = profile_rows(store, session)
    if not rows:
        return f"no mode finished yet, {path} not written"
    moved = keep_aside(path, session)
    write_csv(path, PROFILE_HEADER, rows)
    kept = f" (the file that was there is kept as {moved})" if moved else ""
    return f"{plural(len(rows), 'finished mode')} saved to {path}{kept}"


def board_where(backend) -> str:
    """The board a profile runs on, in words (an emulated tree by its real path)."""
    if getattr(backend, "simulated", False):
        return "the simulator" if getattr(backend, "kind", "") != "replay" else "the replay device"
    real = board_root(backend)
    name = backend.device.name
    if real == "/":
        return f"this {name} (--sysfs-root /)"
    return f"the {'emulated ' if getattr(backend, 'emulated', False) else ''}{name} at {real}"


def _family(kind: str) -> str:
    """What a backend's rows are: simulated, replayed, or measured on a board (sysfs and jtop
    drive the same board)."""
    return kind if kind in ("sim", "replay") else "board"


def check_same_board(info: SessionInfo, backend) -> None:
    """SessionError unless `backend` is the board the session was profiled on: a resume on another
    board (another emulated tree) mixed two boards' rows in one session, and its put-back used one
    board's start state on the other (a user's trial); a resume on another kind of backend (a
    simulator's session on a board, or on the replay device) mixed simulated, replayed and measured
    rows, and tune --apply of a finished simulator's session set its pick on a board (a user's
    trial).  The board is the key a run records when it first touches the board
    (params['original_board'], per size over several batch sizes); a session without one (made by
    an older ptui, or stopped before it touched a board) is checked by its backend's kind alone,
    which every session records."""
    here = board_key(backend) or ""
    parts = [p for p in (info.params, *(info.params.get("per_size") or {}).values())
             if isinstance(p, dict) and p.get("original_board") is not None]
    other = next((p for p in parts if p["original_board"] != here), None)
    family = _family(info.backend)
    if other is None and family == _family(backend.kind):
        return
    said = (other or (parts[0] if parts else {})).get("board_where")    # the run's own words
    key = other["original_board"] if other else ""
    where = said or (f"the board {key}" if key else {
        "sim": "the simulator", "replay": "the replay device"}.get(
        family, f"a board ({info.device}, {info.backend} backend)"))
    how = {"sim": f"resume it with --backend sim --device {info.device}",
           "replay": "resume it with --backend replay --corpus F.csv"}.get(family, "resume it there")
    raise SessionError(f"session {info.name!r} was profiled on {where}, not on "
                       f"{board_where(backend)}: {how}, or start a new session here "
                       f"(another --session name); nothing was written")


def reserve_name(store: Store, base: str, busy: Callable[[str], bool] = lambda name: False) -> str:
    """An automatic session name: `base`, or `base-2`, `base-3`... whichever no session has, nor
    `busy` (what else the name names: tune's model), and no other process is taking, returned with
    the session's lock held (let go with unlock_session).  Every process takes a session's lock
    before creating it, so two runs started within the same second no longer both chose the free
    `base` and the second was refused (a user's trial).  A lock nobody holds that cannot be taken
    (no permission on the lock directory) is its LockError."""
    tried: set[str] = set()
    misses = 0
    while True:
        name = store.free_name(base, tried)
        if busy(name):
            tried.add(name)
            continue
        try:
            lock_session(name)
        except LockError:
            if holder(session_key(name)) is None:   # not taken by another run: just let go, or no lock at all
                misses += 1
                if misses > 3:
                    raise
            else:
                tried.add(name)
            continue
        if store.get_session(name) is None and not busy(name):
            return name
        unlock_session(name)                    # made by another run while we looked
        tried.add(name)


def open_session(store: Store, name: str, *, resume: bool, device: Device, workload: Workload,
                 seed: int, backend_kind: str, plan_fn: Callable[[], list[Mode]],
                 original_mode: Mode | None, params: dict) -> SessionInfo:
    """Create a new session with the plan from plan_fn, or reopen one to resume it.  Takes the
    session's lock (LockError when another process runs it); Profiler.run releases it."""
    lock_session(name)
    try:
        return _open_session(store, name, resume=resume, device=device, workload=workload,
                             seed=seed, backend_kind=backend_kind, plan_fn=plan_fn,
                             original_mode=original_mode, params=params)
    except BaseException:
        unlock_session(name)
        raise


def _open_session(store: Store, name: str, *, resume: bool, device: Device, workload: Workload,
                  seed: int, backend_kind: str, plan_fn: Callable[[], list[Mode]],
                  original_mode: Mode | None, params: dict) -> SessionInfo:
    info = store.get_session(name)
    if resume:
        if info is None:
            raise SessionError(f"no session named {name!r} to resume "
                               f"(list them with: ptui sessions)")
        if info.device != device.name:
            raise SessionError(f"session {name!r} was profiled on {info.device}, not {device.name}")
        if info.workload != workload.name or info.batch_size != workload.batch_size:
            raise SessionError(f"session {name!r} profiles {info.workload} at batch size "
                               f"{info.batch_size}, not {workload.name} at {workload.batch_size}")
        store.set_status(name, "running")
        info.status = "running"
        return info
    if info is not None:
        raise SessionError(f"session {name!r} already exists; add --resume to continue it "
                           f"or pick another --session name")
    plan = plan_fn()
    store.create_session(name, device=device.name, workload=workload.name,
                         batch_size=workload.batch_size, seed=seed, backend=backend_kind,
                         plan=plan, params=params, original_mode=original_mode)
    return store.get_session(name)
