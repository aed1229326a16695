"""The simulated Jetson: ptui's embedded default when no board is attached.

The steady state of every mode comes from the first-principles model in ``core/physics.py``; this
module adds what a real board does to a measurement:

* a mode switch stalls training for a switch latency (EMC re-lock, core hot-plug, DVFS steps);
  the minibatch in flight completes when the switch does;
* the first minibatch of a training run is much slower (cuDNN autotuning), the first after a
  mode switch somewhat slower (caches, DVFS governors settling);
* minibatch times jitter (log-normal, ~2 %) with rare hiccups (GC, page cache);
* power relaxes to its new level exponentially (tau 0.6 s, stable after 2-3 s) from the level it
  had when the mode changed; temperatures follow with a ~60 s thermal time constant;
* every INA3221 rail carries independent sensor noise (~1 %) and reads in whole mW;
* sampling at the backend's interval (default 0.5 s; jtop-like 1 s or faster).

Randomness is drawn from generators keyed by (seed, mode), so a mode measured after the same
preceding mode gives the same numbers whatever happened before: a resumed profile reproduces an
uninterrupted one exactly.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from ...catalogue.devices import Device
from ...catalogue.modes import Mode, make_mode
from ...catalogue.workloads import Workload
from ...clock import Clock, VirtualClock
from ..physics import fits, footprint_gb, memory_gb, steady_state, workload_physics
from .base import ApplyError, Backend, BackendError, DamagedSnapshot, MinibatchEvent, Telemetry, _json_mode

POWER_TAU_S = 0.6
THERMAL_TAU_S = 60.0
SETTLED_AFTER_S = 5 * POWER_TAU_S


def _seed(*parts) -> int:
    h = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


@dataclass
class _Point:
    time_ms: float
    power_w: float
    rails: dict[str, float]
    gpu_util: float
    temp_c: float


class _Draws:
    """Pre-drawn standard normals from a keyed generator (fast scalar access)."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._buf: list[float] = []

    def normal(self) -> float:
        if not self._buf:
            self._buf = self._rng.standard_normal(256).tolist()
        return self._buf.pop()

    def uniform(self) -> float:
        return 0.5 * (1.0 + math.erf(self.normal() / math.sqrt(2.0)))


class SimJetson(Backend):
    kind = "sim"
    simulated = True
    can_select_presets = True
    trains_builtin = True

    def __init__(self, device: Device, *, clock: Clock | None = None, seed: int = 0,
                 sample_interval: float = 0.5, start_mode: Mode | None = None,
                 noise: bool = True, unit_power: float = 1.0, unit_time: float = 1.0) -> None:
        super().__init__(device)
        # this unit against the modelled typical one: identical boards differ (an Orin AGX MLPerf
        # rerun drew 27-32 % more power at equal throughput), which a fleet's pooled fit corrects
        if not (0.5 <= unit_power <= 2.0 and 0.5 <= unit_time <= 2.0):
            raise ValueError(f"unit factors must be within 0.5-2, got {unit_power}, {unit_time}")
        self.unit_power, self.unit_time = float(unit_power), float(unit_time)
        self._clock = clock or VirtualClock()
        self.seed = seed
        self.sample_interval = float(sample_interval)
        self.noise = noise
        default = device.preset(device.default_preset)
        self._mode = start_mode or default.mode
        self._tpc = default.tpc if start_mode is None else device.gpu_tpcs
        # a start in a preset's clocks (with its TPCs) is that preset, as apply_mode and ptui
        # status name it: a replay board starting in MAXN's clocks read 'a custom mode' on the
        # dashboard and '(MAXN)' in ptui status (a user trial)
        same = device.preset_for(self._mode)
        self._nvp = (default.name if start_mode is None else
                     same.name if same is not None and same.tpc == self._tpc else None)
        self._cache: dict[tuple, _Point] = {}
        self._workload: Workload | None = None
        self._mb_index = 0
        self._mb_end: float | None = None
        self._mb_start = 0.0
        self._mb_ms = 0.0
        self._since_switch = 0
        self._t_change = self.clock.now() - 1e6
        self._p_from = self._point().power_w
        self._temp_from = self._point().temp_c
        self._draw_mb: _Draws               # both set by _rekey, below
        self._draw_pw: _Draws
        self._rekey()
        self.fail_next_apply: str | None = None   # test hook: make the next apply fail

    def set_unit(self, power: float) -> None:
        """This unit's power factor from now on (a fleet gives each virtual board its own)."""
        if not 0.5 <= power <= 2.0:
            raise ValueError(f"unit factors must be within 0.5-2, got {power}")
        self.unit_power = float(power)
        self._cache.clear()
        self._p_from = self._point().power_w

    # -- steady state ---------------------------------------------------------------------
    def _point(self, mode: Mode | None = None, workload=...) -> _Point:
        mode = mode or self._mode
        wl = self._workload if workload is ... else workload
        key = (mode, self._tpc, wl.name if wl else None, wl.batch_size if wl else 0)
        p = self._cache.get(key)
        if p is None:
            op = steady_state(self.device, wl, *mode.as_tuple(), tpc=self._tpc)
            u = self.unit_power
            p = _Point(float(op.time_ms) * self.unit_time, float(op.power_w) * u,
                       {k: float(v) * u for k, v in op.rails.items()}, float(op.gpu_util),
                       float(op.temp_c))
            self._cache[key] = p
        return p

    def _rekey(self) -> None:
        wl = self._workload.name if self._workload else "-"
        self._draw_mb = _Draws(_seed(self.seed, "mb", wl, self._mode.key, self._tpc))
        self._draw_pw = _Draws(_seed(self.seed, "pw", wl, self._mode.key, self._tpc))

    def _power_now(self, t: float) -> float:
        target = self._point().power_w
        return target + (self._p_from - target) * math.exp(-(t - self._t_change) / POWER_TAU_S)

    def _change(self, t: float) -> None:
        """The operating point is about to change at time t: remember where power stood."""
        if t - self._t_change >= SETTLED_AFTER_S:
            self._p_from = self._point().power_w       # settled: exactly the steady level
        else:
            self._p_from = self._power_now(t)
        target_t = self._point().temp_c
        self._temp_from = target_t + (self._temp_from - target_t) * math.exp(
            -(t - self._t_change) / THERMAL_TAU_S)
        self._t_change = t

    # -- Backend interface ----------------------------------------------------------------
    def current_mode(self) -> Mode:
        return self._mode

    @property
    def tpc(self) -> int:
        return self._tpc

    def apply_mode(self, mode: Mode, *, tpc: int | None = None, nvpmodel: str | None = None) -> Mode:
        mode = make_mode(self.device, *mode.as_tuple())
        if self.fail_next_apply:
            msg, self.fail_next_apply = self.fail_next_apply, None
            raise ApplyError(f"simulated failure applying {mode.key}: {msg}; device left in {self._mode.key}")
        old = self._mode
        latency = 0.02
        if mode.mem_mhz != old.mem_mhz:
            latency += 0.35
        latency += 0.05 * abs(mode.cores - old.cores)
        now = self.clock.now()
        self._change(now)
        self._mode = mode
        self._tpc = tpc if tpc is not None else self.device.gpu_tpcs
        preset = self.device.preset_for(mode)
        self._nvp = nvpmodel or (preset.name if preset and self._tpc == preset.tpc else None)
        self._rekey()
        self._since_switch = -1          # the stalled minibatch doesn't count
        self.clock.sleep(latency)
        if self._mb_end is not None:
            now = self.clock.now()              # the stalled minibatch completes with the switch
            self._mb_ms = (now - self._mb_start) * 1000.0
            self._mb_end = now
        return self.current_mode()

    def snapshot(self):
        return (self._mode, self._tpc, self._nvp)

    def restore(self, snap) -> None:
        mode, tpc, nvp = snap
        self.apply_mode(mode, tpc=tpc, nvpmodel=nvp)

    def snapshot_json(self, snap):
        mode, tpc, nvp = snap
        return {"mode": list(mode.as_tuple()), "tpc": tpc, "nvpmodel": nvp}

    def snapshot_from_json(self, obj):
        if not isinstance(obj, dict):
            raise DamagedSnapshot(f"the saved state is not a simulated board's: {str(obj)[:80]}")
        mode = _json_mode(self.device, obj.get("mode"), "the saved mode")
        tpc, nvp = obj.get("tpc"), obj.get("nvpmodel")
        if not (isinstance(tpc, int) and 1 <= tpc <= self.device.gpu_tpcs):
            raise DamagedSnapshot(f"the saved GPU TPC count {tpc!r} is not 1..{self.device.gpu_tpcs}")
        if nvp is not None and not isinstance(nvp, str):
            raise DamagedSnapshot(f"the saved nvpmodel name {nvp!r} is not a name")
        return (mode, tpc, nvp)

    def snapshot_mode(self, snap) -> Mode:
        return snap[0]

    def apply_preset(self, key) -> Mode:
        p = self.device.preset(key)
        return self.apply_mode(p.mode, tpc=p.tpc, nvpmodel=p.name)

    def read(self) -> Telemetry:
        t = self.clock.now()
        pt = self._point()
        scale = self._power_now(t) / pt.power_w
        d = self._draw_pw
        rails = {}
        for name, w in pt.rails.items():
            z = d.normal() if self.noise else 0.0
            rails[name] = round(max(0.0, w * scale * (1.0 + self._rail_sd() * z)), 3)
        dev = self.device
        total = rails[dev.total_rail] if dev.total_rail else round(sum(rails.values()), 3)
        temp = pt.temp_c + (self._temp_from - pt.temp_c) * math.exp(-(t - self._t_change) / THERMAL_TAU_S)
        temps = {"CPU": round(temp - 1.5, 1), "GPU": round(temp, 1), "SOC": round(temp - 2.5, 1),
                 "tj": round(temp + 1.0, 1)}
        load = pt.gpu_util * 100.0 if self._workload else 0.0
        m = self._mode
        return Telemetry(t=t, power_w=total, rails=rails, cpu_mhz=m.cpu_mhz, gpu_mhz=m.gpu_mhz,
                         mem_mhz=m.mem_mhz, cores_online=m.cores, gpu_load=round(load, 1),
                         temps=temps, nvpmodel=self._nvp)

    # -- training workload ----------------------------------------------------------------
    @property
    def workload(self) -> Workload | None:
        return self._workload

    def _check_memory(self, workload: Workload) -> None:
        if not fits(self.device, workload, workload.batch_size):   # a real run dies of OOM
            raise BackendError(f"{workload.name} at batch size {workload.batch_size} needs "
                               f"{float(footprint_gb(workload)):.1f} GB, more than the "
                               f"{memory_gb(self.device):.1f} GB the simulated {self.device.name} "
                               f"has for training (out of memory)")

    def start_training(self, workload: Workload) -> None:
        self._check_memory(workload)
        now = self.clock.now()
        self._change(now)
        self._workload = workload
        self._rekey()
        self._mb_index = 0
        self._since_switch = 0
        self._next_minibatch(now)

    def stop_training(self) -> None:
        if self._workload is None:
            return
        self._change(self.clock.now())
        self._workload = None
        self._mb_end = None
        self._rekey()

    def _next_minibatch(self, start: float) -> None:
        self._mb_start = start
        self._mb_ms = self._draw_minibatch() * 1000.0
        self._mb_end = start + self._mb_ms / 1000.0

    def _draw_minibatch(self) -> float:
        """Duration (s) of the next minibatch in the current mode."""
        pt = self._point()
        d = self._draw_mb
        ms = pt.time_ms
        if self.noise:
            ms *= math.exp(self._time_sd() * d.normal())
            if d.uniform() < self.hiccup_p:
                ms *= 1.3
        if self._mb_index == 0:
            ms *= self._first_batch_factor()
        elif self._since_switch == 0:
            ms *= 1.5
        return ms / 1000.0

    # measurement behaviour (the replay device overrides these with recorded spreads)
    hiccup_p = 0.01                       # chance of a 1.3x minibatch (GC, page cache)

    def _time_sd(self) -> float:
        return 0.02                       # log-normal minibatch jitter

    def _rail_sd(self) -> float:
        return 0.01                       # INA3221 noise per rail, relative

    def _first_batch_factor(self) -> float:
        assert self._workload is not None   # asked of a minibatch, so while one is training
        return _first_batch_factor(self._workload)

    def events(self, interval: float | None = None):
        """Minibatch completions and telemetry samples in time order, forever.

        Samples are taken every `interval` seconds counted from the last mode change, so a mode's
        samples do not depend on what happened before it."""
        interval = interval or self.sample_interval
        last_sample = -math.inf
        while True:
            t0 = self._t_change
            k = max(1, math.floor((max(last_sample, self.clock.now()) - t0) / interval + 1e-9) + 1)
            t_s = t0 + k * interval
            if t_s <= last_sample + 1e-12:
                t_s += interval
            t_mb = self._mb_end
            if t_mb is not None and t_mb <= t_s:
                self.clock.sleep_until(t_mb)
                ev = MinibatchEvent(t_end=t_mb, ms=self._mb_ms, index=self._mb_index)
                self._mb_index += 1
                self._since_switch += 1
                self._next_minibatch(t_mb)
                yield ev
            else:
                self.clock.sleep_until(t_s)
                last_sample = t_s
                yield self.read()


def _first_batch_factor(workload: Workload) -> float:
    return workload_physics(workload).first_batch_x
