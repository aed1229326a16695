"""Background telemetry sampling: a daemon thread snapshots the backend into a ring buffer.

The UI never touches the device: it renders the latest snapshot (nvitop's snapshot-then-render).
A failing sensor read is kept as an error string, never raised into the UI.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections import deque

from .backends.base import Backend, Telemetry


class Sampler:
    def __init__(self, backend: Backend, interval: float = 0.5, history_s: float = 60.0,
                 now=time.monotonic) -> None:
        self.backend = backend
        self.now = now                              # timestamps for history() (tests: a virtual clock)
        self.interval = interval
        self._buf: deque[tuple[float, Telemetry]] = deque(maxlen=max(2, int(history_s / interval) + 1))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.minibatch_ms: float | None = None      # set by whoever runs a workload
        self._count = 0                             # readings taken since the start

    def sample_once(self) -> Telemetry | None:
        try:
            t = self.backend.read()
        except Exception as e:  # noqa: BLE001 - any sensor failure is shown, not raised
            self.error = f"{type(e).__name__}: {e}"
            return None
        self.error = None
        with self._lock:
            self._buf.append((self.now(), t))
            self._count += 1
        return t

    def _run(self) -> None:
        nxt = time.monotonic()
        while not self._stop.is_set():
            self.sample_once()
            nxt += self.interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def start(self) -> "Sampler":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ptui-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def latest(self) -> Telemetry | None:
        with self._lock:
            return self._buf[-1][1] if self._buf else None

    def taken_after(self, n: int) -> tuple[list[tuple[float, float | None]], int]:
        """The readings taken after the first `n` (those still kept), as (time, total W) on the
        sampler's clock, and how many were taken in all: a watcher that keeps its own list asks for
        the new ones only (history() copies every kept reading)."""
        with self._lock:
            k = min(self._count - n, len(self._buf))
            new = [(t, s.power_w) for t, s in itertools.islice(reversed(self._buf), max(k, 0))]
            return new[::-1], self._count

    def history(self) -> list[tuple[float, float | None]]:
        """(seconds ago, total W) for the last minute, oldest first."""
        now = self.now()
        with self._lock:
            return [(t - now, s.power_w) for t, s in self._buf]
