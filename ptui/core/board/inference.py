"""Forward-only (inference) minibatches in the simulator, calibrated on the measured MAXN sweep.

An inference minibatch is the training physics of board/physics.py with the work of a forward pass:
GPU FLOPs and DRAM bytes per sample and per minibatch (the weights) from the analytical counts that
come with the sweep, no data pipeline (requests arrive decoded), and a host thread that launches
the kernels.  Three constants per model are free and fitted on the measured Orin AGX MAXN sweep
(catalogue.inference.MAXN_SWEEP): the kernels' achieved fraction of peak (gpu_eff), the host's
work per minibatch (host_mcycles, what bounds small batches: PyTorch's eager launches), and the GPU
switching activity (gpu_act, power) with a constant board offset (extra_w: what the sweep's board
draws that the training model does not, e.g. the inference runtime's busy CPU threads).  The same
physics then scales time and power across every mode (GPU/EMC/CPU clocks, cores): SIMULATED.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..catalogue.devices import Device, get_device
from ..catalogue.inference import INFERENCE, MAXN_CLOCKS, POWER_GLITCHES, InferenceWorkload, sweep_rows
from .physics import DEVICE_PHYSICS, WorkloadPhysics, _smax, steady_state

ROOF_P = 3.0            # roofline overlap, as the training models of conv nets use


@dataclass(frozen=True)
class Calibration:
    """One inference model's fitted constants and how well they reproduce the measured sweep."""
    name: str
    physics: WorkloadPhysics
    extra_w: float
    time_mape: float            # mean |error| / measured over the sweep's batch sizes, %
    time_max_err: float         # worst |error| / measured, %
    power_mape: float
    power_max_err: float
    rows: tuple                 # (batch, measured ms, predicted ms, measured W, predicted W)


def _forward_physics(gflop: float, gb_per: float, gb_fixed: float, eff: float, host: float,
                     act: float, half: float) -> WorkloadPhysics:
    return WorkloadPhysics(gflop=gflop, gpu_eff=eff, gb_per_sample=gb_per, gb_fixed=gb_fixed,
                           roof_p=ROOF_P, host_mcycles=host, host_misses_k=0.0, data_mcycles=0.0,
                           data_misses_k=0.0, data_mb=0.0, gpu_act=act, first_batch_x=1.0,
                           act_gb=0.0, batch_half=half)


def _as_workload(w: InferenceWorkload, wp: WorkloadPhysics, batch: int) -> InferenceWorkload:
    return dataclasses.replace(w, physics=wp, batch_size=int(batch))


@lru_cache(maxsize=None)
def calibrate(name: str) -> Calibration:
    """Fit one inference model's free constants on the measured MAXN sweep (Orin AGX)."""
    return _fit(INFERENCE[name], tuple(tuple(r) for r in sweep_rows(INFERENCE[name])))


@dataclass(frozen=True)
class HeldOut:
    """Leave-one-batch-size-out: fitted on the sweep's other batch sizes, this one predicted."""
    batch: int
    time_err: float             # |predicted - measured| / measured, %
    power_err: float | None     # None where the measured power is a logging glitch


def leave_one_out(name: str) -> tuple[HeldOut, ...]:
    """Fit on all but one of the sweep's batch sizes and predict the one left out, for each: how
    well the constants carry to a batch size they were not fitted on (an over-fit shows here)."""
    w = INFERENCE[name]
    rows = [tuple(r) for r in sweep_rows(w)]
    dev = get_device("orin-agx")
    out = []
    for k, (bk, tk, pk, *_rest) in enumerate(rows):
        cal = _fit(w, tuple(rows[:k] + rows[k + 1:]))
        op = steady_state(dev, _as_workload(w, cal.physics, bk), *MAXN_CLOCKS)
        p = float(op.power_w) + cal.extra_w
        out.append(HeldOut(int(bk), abs(float(op.time_ms) - tk) / tk * 100.0,
                           None if (w.sweep, int(bk)) in POWER_GLITCHES else abs(p - pk) / pk * 100.0))
    return tuple(out)


def _fit(w: InferenceWorkload, rows: tuple) -> Calibration:
    """Fit the free constants on `rows` of the sweep: (batch, ms, W, GFLOP, GB) each."""
    dev = get_device("orin-agx")
    dp = DEVICE_PHYSICS[dev.name]
    b = np.array([r[0] for r in rows], float)
    t_meas = np.array([r[1] for r in rows])
    p_meas = np.array([r[2] for r in rows])
    gflop = float(np.mean(np.array([r[3] for r in rows]) / b))
    gb_per, gb_fixed = np.polyfit(b, np.array([r[4] for r in rows]), 1)
    gb_per, gb_fixed = max(float(gb_per), 0.0), max(float(gb_fixed), 0.0)
    cores, fc, fg, fm = MAXN_CLOCKS
    # the GPU time of a minibatch at MAXN, as steady_state computes it (no CPU traffic competes)
    bw = dev.mem_peak_gbs * dp.mem_eff * fm / dev.mem_mhz[-1]
    mem = (gb_fixed + b * gb_per) / bw * 1000.0
    effs = np.geomspace(1e-3, 1.0, 120)[:, None, None, None]
    hosts = np.geomspace(0.05, 200.0, 120)[None, :, None, None]
    halves = np.geomspace(0.05, 64.0, 60)[None, None, :, None]
    # batch_efficiency's saturating form with the half-utilisation batch as a free constant
    beff = (b / (b + halves)) / (16.0 / (16.0 + halves))
    comp = b * gflop / (dp.flops_per_cycle * fg / 1000.0 * beff * effs) * 1000.0
    host_ms = hosts / (fc / 1000.0 * 1000.0 * dp.cpu_ipc) * 1000.0
    t = _smax(_smax(comp, mem, ROOF_P), host_ms, 4.0)
    err = np.mean(np.log(t / t_meas) ** 2, axis=3)
    i, j, k = np.unravel_index(int(np.argmin(err)), err.shape)
    eff, host, half = float(effs[i, 0, 0, 0]), float(hosts[0, j, 0, 0]), float(halves[0, 0, k, 0])
    # power is linear in gpu_act at a fixed time: two evaluations give the line, least squares
    # (with a constant offset) fits it on the points that are not glitches
    def power(act: float) -> np.ndarray:
        wp = _forward_physics(gflop, gb_per, gb_fixed, eff, host, act, half)
        return np.array([float(steady_state(dev, _as_workload(w, wp, int(x)), cores, fc, fg, fm)
                               .power_w) for x in b])
    p0, p1 = power(0.0), power(1.0)
    ok = np.array([(w.sweep, int(x)) not in POWER_GLITCHES for x in b])
    d, y = (p1 - p0)[ok], (p_meas - p0)[ok]
    # the activity alone (no free offset: with the GPU busy at every batch, an offset and the
    # activity are collinear and the pair runs off to unphysical values)
    act = float(np.clip(np.dot(d, y) / np.dot(d, d), 0.05, 3.0))
    extra = 0.0
    wp = _forward_physics(gflop, gb_per, gb_fixed, eff, host, act, half)
    t_pred = np.array([float(steady_state(dev, _as_workload(w, wp, int(x)), cores, fc, fg, fm).time_ms)
                       for x in b])
    p_pred = power(act) + extra
    te = np.abs(t_pred - t_meas) / t_meas * 100.0
    pe = (np.abs(p_pred - p_meas) / p_meas * 100.0)[ok]
    out_rows = tuple((int(x), float(tm), float(tp), float(pm), float(pp))
                     for x, tm, tp, pm, pp in zip(b, t_meas, t_pred, p_meas, p_pred))
    return Calibration(w.name, wp, extra, float(te.mean()), float(te.max()), float(pe.mean()),
                       float(pe.max()), out_rows)


def inference_operating(device: Device, name: str, batch: int, cores, cpu_mhz, gpu_mhz, mem_mhz,
                        tpc: int | None = None):
    """Noise-free time per inference minibatch (ms) and board power (W) at modes (arrays)."""
    cal = calibrate(name)
    op = steady_state(device, _as_workload(INFERENCE[name], cal.physics, batch), cores, cpu_mhz,
                      gpu_mhz, mem_mhz, tpc=tpc)
    return op.time_ms, op.power_w + cal.extra_w
