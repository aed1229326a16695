"""Fault-injecting backends: the simulated Jetson with one thing going wrong.

* LyingBackend:      apply_mode() says it reached the target, the board reports another mode
                     (the kernel clamped the GPU one step down);
* RaisingBackend:    apply_mode() changes the cores, then fails writing the clocks;
* RestoreFailsBackend: restore() raises (a write refused while rolling back);
* SilentRestoreBackend: restore() returns without changing anything (a rollback that lies);
* UnsettledBackend / HotBackend / StalledBackend: telemetry that never settles, a zone at a given
  temperature, a training run that stops reporting minibatches (for the profiler).
Each one arms its fault for modes other than the one it started in, so rolling back to the start
works unless the fault is the rollback itself.
"""
from __future__ import annotations

from dataclasses import replace

from ptui.core.board.backends.base import BackendError
from ptui.core.board.backends.sim import SimJetson
from ptui.core.catalogue.modes import Mode


class _Armed(SimJetson):
    def __init__(self, device, **kw) -> None:
        super().__init__(device, **kw)
        self.start = self.current_mode()
        self.armed = True
        self.applies: list[Mode] = []
        self.restores = 0

    def _fault_for(self, mode: Mode) -> bool:
        return self.armed and mode != self.start

    def apply_mode(self, mode: Mode, **kw) -> Mode:
        self.applies.append(mode)
        return super().apply_mode(mode, **kw)

    def restore(self, snap) -> None:
        self.restores += 1
        super().restore(snap)


class LyingBackend(_Armed):
    """Reports the target as applied; the board ends one GPU step lower."""

    def apply_mode(self, mode: Mode, **kw) -> Mode:
        got = super().apply_mode(mode, **kw)
        if self._fault_for(mode):
            g = self.device.gpu_mhz
            i = max(0, g.index(got.gpu_mhz) - 1) if got.gpu_mhz != g[0] else 1
            self._mode = replace(got, gpu_mhz=g[i])
            return mode                               # the lie
        return got


class RaisingBackend(_Armed):
    """Brings the cores to the target, then a clock write fails (the board is half-changed)."""

    def apply_mode(self, mode: Mode, **kw) -> Mode:
        if self._fault_for(mode):
            self.applies.append(mode)
            self._mode = replace(self._mode, cores=mode.cores)
            raise BackendError(f"writing {int(mode.gpu_mhz * 1e6)} to .../devfreq/17000000.gpu/max_freq"
                               f" failed: Input/output error")
        return super().apply_mode(mode, **kw)


class RestoreFailsBackend(RaisingBackend):
    """Applying fails half way and so does the rollback."""

    def restore(self, snap) -> None:
        self.restores += 1
        raise BackendError("writing 1728000 to cpu0/cpufreq/scaling_max_freq failed: Device or resource busy")


class SilentRestoreBackend(LyingBackend):
    """The apply lies and the rollback does nothing, without an error."""

    def restore(self, snap) -> None:
        self.restores += 1


class UnsettledBackend(SimJetson):
    """Power swings by +-15 % from sample to sample: it never settles."""

    def read(self):
        t = super().read()
        self._swing = -getattr(self, "_swing", -1)
        return replace(t, power_w=t.power_w * (1 + 0.15 * self._swing))


class HotBackend(SimJetson):
    """One thermal zone reads `zone_c` once a workload runs."""

    def __init__(self, device, zone_c: float, **kw) -> None:
        super().__init__(device, **kw)
        self.zone_c = zone_c

    def read(self):
        t = super().read()
        if self.workload is None:
            return t
        return replace(t, temps={**t.temps, "tj": self.zone_c})


class StalledBackend(SimJetson):
    """Training stops reporting minibatches after `after` of them: only telemetry keeps coming,
    for `horizon_s` seconds of device time (then the stream ends)."""

    def __init__(self, device, after: int = 0, horizon_s: float = 4000.0, **kw) -> None:
        super().__init__(device, **kw)
        self.after = after
        self.horizon_s = horizon_s

    def events(self, interval=None):
        n = 0
        for ev in super().events(interval):
            if self.clock.now() > self.horizon_s:
                return
            if hasattr(ev, "ms"):
                n += 1
                if n > self.after:
                    continue
            yield ev


class RestoreRaisesAfterRunBackend(SimJetson):
    """Profiling works; putting the original mode back at the end fails."""

    def restore(self, snap) -> None:
        raise BackendError("cpu0/cpufreq/scaling_max_freq: Device or resource busy")


class OtherModeBackend(SimJetson):
    """The board ends in another mode than the one applied (reported honestly by current_mode
    but apply_mode returns the target): the profiler must not measure it."""

    def __init__(self, device, wrong_after: int = 0, **kw) -> None:
        super().__init__(device, **kw)
        self.wrong_after = wrong_after
        self.n = 0

    def apply_mode(self, mode: Mode, **kw) -> Mode:
        got = super().apply_mode(mode, **kw)
        self.n += 1
        if self.n > self.wrong_after and kw.get("tpc") is None:   # restore() passes tpc
            self._mode = replace(got, mem_mhz=self.device.mem_mhz[0] if got.mem_mhz != self.device.mem_mhz[0]
                                 else self.device.mem_mhz[1])
            return mode
        return got
