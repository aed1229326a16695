"""The managed interleaving at run time (issue 27): one process owns the GPU, registers an inference
callable and runs its training loop; the scheduler runs inference minibatches when they are due and
lets training fill the time between.

The policy is decision/concurrent.py's, exactly (and concurrent.simulate's event loop): at every
minibatch boundary, with b the inference batch, t_T the training minibatch's time, t_I(b) the
inference minibatch's and theta = L - max(t_T, t_I(b)) - t_I(b),

* an inference minibatch of the b oldest waiting requests runs when b wait, or, when fewer wait, of
  all of them once the oldest has waited longer than theta;
* else a training minibatch runs;
* a running minibatch (either kind) is never pre-empted: the scheduler acts only between them.

t_T and t_I(b) come from the standalone profiles (the decision's), and from the minibatches the
run has timed as soon as it has timed one (the largest of the last WINDOW, so theta errs early).

Requests arrive from a source (Poisson at a rate, or a recorded trace, as offsets in seconds from
the run's start) and/or are pushed by the user's code with submit() (thread-safe: a camera thread
may push while the training loop runs).  Time is a Clock (core.clock): on a VirtualClock the whole
schedule runs instantly and deterministically (tests, the simulated board).

`Managed` adds the board: it decides (mode, b) from standalone profiles (concurrent.decide),
applies the mode through ptui's verified apply, re-decides from the same profiles when the arrival
rate changes (set_rate: no profiling), and puts the board back in the state it started in at the
end, on an exception and on SIGTERM/SIGHUP/Ctrl-C (core.install() routes them; the CLI does).
"""
from __future__ import annotations

import bisect
import contextlib
import json
import math
import os
import stat
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..board import undo
from ..board.apply import restore_snapshot
from ..board.backends.base import Backend
from ..board.files import PathError, check_input, check_name_length, existing, read_head, write_error
from ..board.inference import inference_operating
from ..board.locks import board_lock
from ..board.physics import steady_state
from ..board.signals import shielded
from ..catalogue.devices import Device
from ..catalogue.inference import get_inference
from ..catalogue.modes import Mode
from ..catalogue.workloads import Workload
from ..clock import Clock, RealClock
from ..decision.concurrent import Pick, Standalone, decide, slack
from ..errors import InputError, PtuiError
from .board import apply, rollback
from .colocate import walk

WINDOW = 16            # minibatch times the run's own estimate of t_T and t_I(b) takes the largest of


# -- arrivals ---------------------------------------------------------------------------------------
class Poisson:
    """Arrival offsets (s) of a Poisson stream at `rate` requests/s; `rate` may change while it runs
    (the next gap is drawn at the new rate)."""

    def __init__(self, rate: float, seed: int = 0) -> None:
        if not rate > 0:
            raise InputError(f"the arrival rate must be positive, got {rate}")
        self.rate = float(rate)
        self._rng = np.random.default_rng(seed)

    def __iter__(self) -> Iterator[float]:
        t = 0.0
        while True:
            t += float(self._rng.exponential(1.0 / self.rate))
            yield t


def poisson(rate: float, seed: int = 0) -> Poisson:
    return Poisson(rate, seed)


def trace(times_s: Iterable[float]) -> list[float]:
    """A recorded trace: arrival offsets in seconds from the run's start, ascending."""
    ts = [float(t) for t in times_s]
    if any(b < a for a, b in zip(ts, ts[1:])) or any(t < 0 or not math.isfinite(t) for t in ts):
        raise InputError("a trace's arrival times must be finite, non-negative and ascending")
    return ts


@dataclass
class Request:
    id: int
    t: float                       # arrival, clock seconds
    payload: Any = None
    done: float | None = None      # end of its inference minibatch, clock seconds

    @property
    def latency_ms(self) -> float | None:
        return None if self.done is None else (self.done - self.t) * 1000.0


@dataclass(frozen=True)
class Minibatch:
    kind: str                      # "train" or "infer"
    t0: float
    t1: float
    k: int                         # requests (inference) or samples (training)


@dataclass(frozen=True)
class Report:
    requests: int                  # requests served
    p50_ms: float
    p99_ms: float
    over_budget: float             # share of served requests over the latency budget
    train_sps: float               # training samples per second over the run's span
    train_minibatches: int
    infer_minibatches: int
    mean_batch: float              # requests per inference minibatch
    infer_share: float             # share of the span spent in inference minibatches
    power_w: float                 # mean board power (nan: no reading)
    span_s: float
    latency_ms: float              # the budget
    batch: int                     # the inference batch b at the end
    power_from: str = ""           # where the watts come from, in words
    simulated: bool = False        # figures of a simulated (or emulated) board: SIMULATED

    def as_dict(self) -> dict:
        d = asdict(self)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


# -- meters: the board's power over a minibatch -----------------------------------------------------
Meter = Callable[[str, int], "float | None"]
"""meter(kind, k) -> watts over the time since the previous reading (None: no reading)."""


class BoardMeter:
    """The board's telemetry through its backend (sysfs, jtop, an emulated tree): one reading at a
    minibatch's end, at most every `interval` seconds of the backend's clock."""

    def __init__(self, backend: Backend, interval: float = 0.1) -> None:
        self.backend, self.interval = backend, float(interval)
        self._last = -math.inf
        self.power_from = ("the emulated board's telemetry, SIMULATED" if backend.emulated else
                           "SIMULATED board telemetry" if backend.not_live else "the board's telemetry")

    def __call__(self, kind: str, k: int) -> float | None:
        now = self.backend.clock.now()
        if now - self._last < self.interval:
            return None
        self._last = now
        p = self.backend.read().power_w
        return None if p is None else float(p)


class SimWork:
    """The simulated board's minibatches: each one advances the backend's (virtual) clock by the
    simulator's time for the board's current mode and reads its modelled power (SIMULATED).  The
    host's own computation (the demo's torch loops) runs too; its wall time is not the board's."""

    def __init__(self, backend: Backend, train: Workload, infer_name: str) -> None:
        self.backend, self.device = backend, backend.device
        self.train, self.infer = train, get_inference(infer_name).name
        self._cache: dict[tuple, tuple[float, float]] = {}
        self.power_from = "the simulator's power model per minibatch, SIMULATED"

    def figures(self, kind: str, k: int) -> tuple[float, float]:
        """(ms, W) of one minibatch in the board's current mode."""
        mode = self.backend.current_mode()
        key = (kind, k, mode)
        got = self._cache.get(key)
        if got is None:
            if kind == "train":
                op = steady_state(self.device, self.train, *mode.as_tuple())
                got = (float(op.time_ms), float(op.power_w))
            else:
                t, p = inference_operating(self.device, self.infer, int(k), *mode.as_tuple())
                got = (float(t), float(p))
            self._cache[key] = got
        return got

    def run(self, kind: str, k: int) -> None:
        self.backend.clock.sleep(self.figures(kind, k)[0] / 1000.0)

    def meter(self, kind: str, k: int) -> float:
        return self.figures(kind, k)[1]


# -- the scheduler ----------------------------------------------------------------------------------
class Interleaver:
    """One minibatch at a time, training or inference, never pre-empted (the module docstring).

    infer(payloads) runs one inference minibatch (a list of the requests' payloads, at most
    `batch`); the training loop calls serve() before each training minibatch and times the
    minibatch with `with sched.training(samples):`, or hands run() a train_step callable.
    train_ms / infer_ms: the standalone profiles' t_T and t_I(k) (ms; infer_ms a mapping
    {batch: ms} or a callable k -> ms), used until the run has timed its own."""

    def __init__(self, infer: Callable[[list], Any], *, batch: int, latency_ms: float,
                 clock: Clock | None = None, arrivals: Iterable[float] | None = None,
                 train_ms: float | None = None, infer_ms: Any = None, meter: Meter | None = None,
                 power_from: str | None = None, simulated: bool = False) -> None:
        if not (isinstance(batch, (int, np.integer)) and batch >= 1):
            raise InputError(f"the inference batch must be a whole number >= 1, got {batch!r}")
        if not (latency_ms > 0 and math.isfinite(latency_ms)):
            raise InputError(f"the latency budget must be a positive number of ms, got {latency_ms!r}")
        self.infer = infer
        self.latency_ms = float(latency_ms)
        self.clock = clock or RealClock()
        self.meter = meter
        self.power_from = power_from or getattr(meter, "power_from", "") or ("" if meter else "no meter")
        self.simulated = simulated
        self._src = iter(arrivals) if arrivals is not None else None
        self._src_next: float | None = None
        self._lock = threading.Lock()
        self._queue: list[Request] = []          # waiting, oldest first
        self._ids = 0
        self.t0: float | None = None
        self.done: list[Request] = []
        self.minibatches: list[Minibatch] = []
        self._power: list[tuple[float, float, float]] = []     # (end, W, seconds covered)
        self._t_meter: float | None = None
        self.reconfigure(int(batch), train_ms, infer_ms)

    # -- what the policy needs -----------------------------------------------------------------
    def reconfigure(self, batch: int, train_ms: float | None = None, infer_ms: Any = None) -> None:
        """A new inference batch and profile times (a re-decision): the run's own timings of the
        old mode are forgotten."""
        self.batch = int(batch)
        self._train_ms = train_ms
        self._infer_ms = infer_ms
        self._obs_train: deque[float] = deque(maxlen=WINDOW)
        self._obs_infer: dict[int, deque[float]] = {}

    def t_train_ms(self) -> float:
        if self._obs_train:
            return max(self._obs_train)
        return float(self._train_ms) if self._train_ms is not None else 0.0

    def t_infer_ms(self, k: int) -> float:
        obs = self._obs_infer.get(k)
        if obs:
            return max(obs)
        given = self._infer_ms
        if given is not None:
            if callable(given):
                return float(given(k))
            ks = sorted(given)
            return float(np.interp(k, ks, [given[x] for x in ks]))
        if self._obs_infer:            # scale the nearest timed batch (linear: errs long)
            j = min(self._obs_infer, key=lambda x: abs(x - k))
            return max(self._obs_infer[j]) * max(1.0, k / j)
        return 0.0

    def theta_ms(self) -> float:
        """How long the oldest request may wait before its batch must start."""
        tib = self.t_infer_ms(self.batch)
        return float(slack(self.t_train_ms(), tib, self.latency_ms))

    # -- requests ------------------------------------------------------------------------------
    def start(self) -> None:
        if self.t0 is None:
            self.t0 = self.clock.now()
            self._t_meter = self.t0

    def submit(self, payload: Any = None, at: float | None = None) -> Request:
        """A request arrives now (or at clock time `at`); safe from any thread."""
        self.start()
        with self._lock:
            self._ids += 1
            r = Request(self._ids, self.clock.now() if at is None else float(at), payload)
            bisect.insort(self._queue, r, key=lambda q: q.t)
        return r

    def _admit(self, now: float, horizon: float | None = None) -> None:
        """Requests of the source that have arrived by `now` join the queue."""
        if self._src is None:
            return
        assert self.t0 is not None
        while True:
            if self._src_next is None:
                nxt = next(self._src, None)
                if nxt is None:
                    self._src = None
                    return
                self._src_next = self.t0 + float(nxt)
            if self._src_next > now:
                return
            if horizon is not None and self._src_next > horizon:
                return                           # after this run's end (a later run may take it)
            self.submit(None, at=self._src_next)
            self._src_next = None

    def waiting(self) -> int:
        with self._lock:
            return len(self._queue)

    def due(self) -> bool:
        """At a minibatch boundary: must an inference minibatch run now?"""
        self.start()
        now = self.clock.now()
        self._admit(now, self._horizon)
        with self._lock:
            q = len(self._queue)
            oldest = self._queue[0].t if q else None
        if q >= self.batch:
            return True
        return q > 0 and oldest is not None and (now - oldest) * 1000.0 > self.theta_ms()

    _horizon: float | None = None

    # -- minibatches ---------------------------------------------------------------------------
    def _record(self, kind: str, t0: float, t1: float, k: int) -> None:
        self.minibatches.append(Minibatch(kind, t0, t1, k))
        if self.meter is not None:
            w = self.meter(kind, k)
            if w is not None and math.isfinite(w):
                since = self._t_meter if self._t_meter is not None else t0
                self._power.append((t1, float(w), t1 - since))
                self._t_meter = t1

    def infer_once(self) -> int:
        """One inference minibatch of the (at most) b oldest requests; returns how many."""
        with self._lock:
            batch, self._queue = self._queue[:self.batch], self._queue[self.batch:]
        if not batch:
            return 0
        t0 = self.clock.now()
        try:
            self.infer([r.payload for r in batch])
        finally:
            t1 = self.clock.now()
            for r in batch:
                r.done = t1
            self.done.extend(batch)
            self._obs_infer.setdefault(len(batch), deque(maxlen=WINDOW)).append((t1 - t0) * 1000.0)
            self._record("infer", t0, t1, len(batch))
        return len(batch)

    def serve(self) -> int:
        """Run the inference minibatches that are due (call it before each training minibatch);
        returns the requests served."""
        n = 0
        while self.due():
            n += self.infer_once()
        return n

    def training(self, samples: int) -> _Training:
        """`with sched.training(len(x)): step(x)`: times one training minibatch."""
        return _Training(self, int(samples))

    def run(self, train_step: Callable[[], Any], *, train_batch: int, duration_s: float | None = None,
            steps: int | None = None, tick: Callable[[], bool] | None = None) -> Report:
        """Train with train_step() (one minibatch each call), serving inference between, for
        `duration_s` of clock time (arrivals of the source after it are not taken) and/or `steps`
        training minibatches; requests still waiting then are served, training filling the gaps
        (concurrent.simulate's loop) until `steps` is reached, then idling between them.
        tick() runs after each training minibatch; False ends the run there as its duration would
        (no arrival taken after it, the requests waiting still served)."""
        if duration_s is None and steps is None:
            raise InputError("give the run a duration or a number of training steps")
        self.start()
        assert self.t0 is not None
        self._horizon = None if duration_s is None else self.t0 + float(duration_s)
        n = 0
        while True:
            self.serve()
            now = self.clock.now()
            more = (self._horizon is None or now < self._horizon) and (steps is None or n < steps)
            if not more and not self.pending():
                break
            if steps is not None and n >= steps:
                self._idle()
                continue
            with self.training(train_batch):
                train_step()
            n += 1
            if tick is not None and tick() is False:
                self._horizon, steps = self.clock.now(), n
        return self.report()

    def pending(self) -> bool:
        """Requests waiting, or due from the source before the run's end."""
        if self.waiting():
            return True
        if self._src is None:
            return False
        if self._src_next is None:
            nxt = next(self._src, None)
            if nxt is None:
                self._src = None
                return False
            assert self.t0 is not None
            self._src_next = self.t0 + float(nxt)
        return self._horizon is None or self._src_next <= self._horizon

    def _idle(self) -> None:
        """Nothing to train: wait for the next arrival or the oldest's deadline (at most 10 ms)."""
        now = self.clock.now()
        with self._lock:
            oldest = self._queue[0].t if self._queue else None
        ts = [now + 0.01]
        if oldest is not None:
            ts.append(oldest + self.theta_ms() / 1000.0 + 1e-9)
        if self._src_next is not None:
            ts.append(self._src_next)
        self.clock.sleep_until(max(now + 1e-9, min(ts)))

    def drain(self) -> None:
        """Serve every waiting request by the policy (no training between)."""
        while self.waiting():
            if not self.serve():
                self._idle()

    # -- the figures ---------------------------------------------------------------------------
    def report(self, since: float | None = None) -> Report:
        """The run's figures; `since` (clock seconds): only the minibatches that began then or
        later and the requests that arrived then or later (one phase of a run)."""
        t0 = self.t0 if self.t0 is not None else 0.0
        if since is not None:
            t0 = max(t0, since)
        lat = np.array([r.latency_ms for r in self.done if r.latency_ms is not None and r.t >= t0], float)
        mbs = [m for m in self.minibatches if m.t0 >= t0]
        end = max([m.t1 for m in mbs], default=t0)
        span = max(end - t0, 1e-12)
        train = [m for m in mbs if m.kind == "train"]
        inf = [m for m in mbs if m.kind == "infer"]
        pw = [(w, dt) for t1, w, dt in self._power if t1 > t0]
        metered = sum(dt for _, dt in pw)
        nan = math.nan
        return Report(
            requests=len(lat),
            p50_ms=float(np.percentile(lat, 50)) if len(lat) else nan,
            p99_ms=float(np.percentile(lat, 99)) if len(lat) else nan,
            over_budget=float(np.mean(lat > self.latency_ms)) if len(lat) else nan,
            train_sps=sum(m.k for m in train) / span,
            train_minibatches=len(train), infer_minibatches=len(inf),
            mean_batch=(sum(m.k for m in inf) / len(inf)) if inf else nan,
            infer_share=sum(m.t1 - m.t0 for m in inf) / span,
            power_w=sum(w * dt for w, dt in pw) / metered if metered > 0 else nan,
            span_s=span, latency_ms=self.latency_ms, batch=self.batch,
            power_from=self.power_from, simulated=self.simulated)


class _Training:
    def __init__(self, sched: Interleaver, samples: int) -> None:
        self.s, self.samples = sched, samples

    def __enter__(self) -> _Training:
        self.s.start()
        self.t0 = self.s.clock.now()
        return self

    def __exit__(self, *exc) -> None:
        t1 = self.s.clock.now()
        self.s._obs_train.append((t1 - self.t0) * 1000.0)
        self.s._record("train", self.t0, t1, self.samples)


# -- standalone profiles, kept and read back ---------------------------------------------------------
def profiles_of(parts: Iterable[Standalone]) -> Standalone:
    """One Standalone of several (one row each, e.g. the modes a walk profiled)."""
    ps = list(parts)
    if not ps:
        raise InputError("no standalone profiles")
    return Standalone.stack(ps)


def walk_profiles(device: Device, train: Workload, infer: str, rate: float, latency_ms: float,
                  budget_w: float) -> tuple[Standalone, int]:
    """The standalone profiles colocate's walk takes for a decision (at most 15 modes, SIMULATED:
    the simulator's figures for catalogue workloads) and how many modes it profiled."""
    meas: dict = {}
    walk(device, train, get_inference(infer).name, rate, latency_ms, budget_w, keep=meas)
    return profiles_of(meas[i] for i in sorted(meas)), len(meas)


PROFILES_KIND = "ptui-standalone-profiles"


def _is_profiles(path: Path) -> bool:
    """Whether the regular file at `path` is standalone profiles ptui wrote."""
    got = read_head(path)
    if got is None or not got[1]:
        return False
    try:
        body = json.loads(got[0].decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(body, dict) and body.get("kind") == PROFILES_KIND


def check_profiles_out(path: str | Path) -> Path:
    """Up front, before any profiling: PathError unless colocate's --save-profiles may write
    `path`: nothing there, or standalone profiles ptui wrote (a symbolic link: its target), in a
    folder that exists.  A user's file, a directory, a device node or a FIFO is never opened for
    writing (it was overwritten, written through a link, or hung on a FIFO).  Returns the path
    to write: a link's target, so that the link stays."""
    p = Path(path)
    st = existing(p, "--save-profiles", "a JSON file")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise PathError(f"{p}: is a directory; give a file name for the profiles")
    if st is not None and st.st_size > 0 and not _is_profiles(p):
        raise PathError(f"{p} exists and is not standalone profiles ptui wrote; nothing written "
                        f"(choose another --save-profiles, or move the file away first)")
    target = Path(os.path.realpath(p)) if p.is_symlink() else p
    check_name_length(target)
    d = target.parent if str(target.parent) else Path(".")
    if not d.is_dir():
        raise PathError(f"{p}: folder {d} does not exist")
    return target


def save_profiles(st: Standalone, path: str | Path, **about) -> None:
    """Write the profiles to `path` (checked again by check_profiles_out) through a temporary
    beside it, renamed over it: a crash leaves the old file or the new one, never half of one."""
    target = check_profiles_out(path)
    body = {"kind": PROFILES_KIND, "version": 1, **about,
            "modes": [list(m.as_tuple()) for m in st.modes], "train_batch": st.train_batch,
            "train_ms": st.train_ms.tolist(), "train_w": st.train_w.tolist(),
            "batches": list(st.batches), "infer_ms": st.infer_ms.tolist(), "infer_w": st.infer_w.tolist()}
    if st.power_se is not None:
        body["power_se"] = np.asarray(st.power_se, float).tolist()
    d = target.parent if str(target.parent) else Path(".")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.ptui-tmp-{os.getpid()}-", dir=d)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(body, indent=1) + "\n")
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise write_error(path, e) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def load_profiles(path: str | Path, device: Device) -> tuple[Standalone, dict]:
    """(profiles, the file's other fields); InputError when it is not one ptui wrote."""
    check_input(path, "a JSON file")
    try:
        body = json.loads(Path(path).read_text())
        if not isinstance(body, dict) or body.get("kind") != PROFILES_KIND:
            raise ValueError("not a ptui standalone-profiles file")
        if not isinstance(body.get("modes"), list) or not all(
                isinstance(m, list) and len(m) == 4 for m in body["modes"]):
            raise ValueError("'modes' must be a list of [cores, CPU MHz, GPU MHz, memory MHz]")
        modes = [device.mode(*m) for m in body["modes"]]
        n = len(modes)
        for k, shape in (("train_ms", (n,)), ("train_w", (n,)), ("infer_w", None), ("infer_ms", None)):
            v = np.asarray(body.get(k), float)
            if (shape is not None and v.shape != shape) or not np.all(np.isfinite(v)) or np.any(v <= 0):
                raise ValueError(f"'{k}' must hold a positive number per mode"
                                 + ("" if shape is None else f" ({n})"))
        if not body.get("batches") or any(not isinstance(b, int) or b < 1 for b in body["batches"]):
            raise ValueError("'batches' must be a list of batch sizes (whole numbers from 1)")
        st = Standalone(modes, int(body["train_batch"]), np.array(body["train_ms"], float),
                        np.array(body["train_w"], float), tuple(int(b) for b in body["batches"]),
                        np.array(body["infer_ms"], float), np.array(body["infer_w"], float),
                        None if body.get("power_se") is None else np.array(body["power_se"], float))
        if st.infer_ms.shape != (len(modes), len(st.batches)):
            raise ValueError("its inference table does not match its modes and batches")
        if st.power_se is not None and st.power_se.shape != (len(modes),):
            raise ValueError("its power_se does not match its modes")
    except KeyError as e:
        raise InputError(f"cannot read standalone profiles {path}: no {e} field") from None
    except (OSError, ValueError, TypeError, IndexError) as e:
        raise InputError(f"cannot read standalone profiles {path}: {e}") from None
    about = {k: v for k, v in body.items() if k not in ("modes", "train_ms", "train_w", "infer_ms",
                                                          "infer_w", "batches", "train_batch", "power_se")}
    return st, about


# -- the managed run: decide, apply, re-decide, restore ----------------------------------------------
@dataclass
class Decision:
    rate: float
    pick: Pick
    applied: str                   # the apply's message
    at_s: float                    # clock seconds from the run's start
    profiled: int = 0              # modes profiled for it (0: a re-decision from the profiles)


@dataclass
class Managed:
    """An Interleaver on a board, its (mode, b) decided from standalone profiles: `with Managed(...)
    as m:` applies the pick (verified) and restores the board's starting state on the way out,
    whatever ends the block; m.set_rate(r) re-decides from the same profiles (no profiling)."""
    backend: Backend
    profiles: Standalone
    sched: Interleaver
    rate: float
    budget_w: float
    profiled: int = 0
    decisions: list[Decision] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._snap: Any = None
        self._start: Mode | None = None
        self._undo: Any = None          # the state `ptui restore` goes back to, after the first apply
        self._hold = contextlib.ExitStack()     # the board's lock, from __enter__ until it is back

    def __enter__(self) -> Managed:
        # the board is this run's from its first apply until it is back: another ptui (an apply, a
        # profile) is refused meanwhile instead of changing the mode under the run, or having it
        # rolled back under itself (LockError names who holds it)
        self._hold.enter_context(board_lock(self.backend))
        try:
            self._snap = self.backend.snapshot()
            self._start = self.backend.snapshot_mode(self._snap)
            self._decide(self.rate, self.profiled)
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._restore()

    def _restore(self) -> None:
        try:
            if self._snap is None:
                return
            with shielded():               # a stop signal waits until the board is back
                if self.backend.current_mode() != self._start or self.decisions:
                    back = rollback(self.backend, self._snap)
                    if back != self._start:
                        back = restore_snapshot(self.backend, self._snap)
                    if back != self._start:
                        assert self._start is not None
                        raise PtuiError(f"the board did not go back to {self._start.key}: it reads "
                                        f"{back.key}")
            self._snap = None
        finally:
            self._hold.close()                    # a second close releases nothing

    def _decide(self, rate: float, profiled: int) -> Decision:
        pick = decide(self.profiles, rate, self.sched.latency_ms, self.budget_w)
        r = pick.row
        msg = "already in this mode"
        if not self.backend.holds(pick.mode):
            res = apply(self.backend, pick.mode)
            if not res.ok:
                raise PtuiError(res.message)
            msg = res.message
            # `ptui restore` (after a kill -9) goes back to the state before the run, not to the
            # mode of the previous decision: each apply's record names the run's starting state
            rec = undo.load(self.backend, undo.APPLY)
            if self._undo is None:
                self._undo = rec.state if rec is not None else None
            elif rec is not None:
                undo.save(self.backend, undo.APPLY, self._undo)
        st = self.profiles
        self.sched.reconfigure(pick.batch, float(st.train_ms[r]), lambda k, r=r: float(st.t_inf(r, k)))
        self.rate = rate
        t0 = self.sched.t0 if self.sched.t0 is not None else self.sched.clock.now()
        d = Decision(rate, pick, msg, self.sched.clock.now() - t0, profiled)
        self.decisions.append(d)
        return d

    def set_rate(self, rate: float) -> Decision:
        """The arrival rate changed: decide (mode, b) again from the profiles this run already has
        (no new profiling), apply the new mode and switch the inference batch at the next
        minibatch boundary."""
        if not (rate > 0 and math.isfinite(rate)):
            raise InputError(f"the arrival rate must be a positive number, got {rate!r}")
        return self._decide(float(rate), 0)
