"""Clocks: virtual (instant, for tests and headless profiling), real-time, or accelerated."""
from __future__ import annotations

import time


def hms(seconds: float) -> str:
    """Seconds as H:MM:SS (device times, ETAs)."""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Clock:
    virtual = False

    def now(self) -> float:
        raise NotImplementedError

    def sleep_until(self, t: float) -> None:
        raise NotImplementedError

    def sleep(self, dt: float) -> None:
        self.sleep_until(self.now() + dt)


class VirtualClock(Clock):
    """Time only moves when someone waits: a profile of hours of device time runs instantly."""
    virtual = True

    def __init__(self, start: float = 0.0) -> None:
        self._t = float(start)

    def now(self) -> float:
        return self._t

    def sleep_until(self, t: float) -> None:
        if t > self._t:
            self._t = t


class RealClock(Clock):
    """Wall-clock time, optionally accelerated by `speed` (speed 10 = ten device seconds per second)."""

    def __init__(self, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError("clock speed must be positive")
        self.speed = float(speed)
        self._t0 = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._t0) * self.speed

    def sleep_until(self, t: float) -> None:
        dt = (t - self.now()) / self.speed
        if dt > 0:
            time.sleep(dt)
