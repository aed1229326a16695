"""Forward-only (inference) minibatches in the simulator, calibrated on the measured MAXN sweep.

An inference minibatch is the training physics of board/physics.py with the work of a forward pass:
GPU FLOPs and DRAM bytes per sample and per minibatch (the weights) from the analytical counts that
come with the sweep, no data pipeline (requests arrive decoded), and a host thread that launches
the kernels. Five constants per model are free and fitted on the measured Orin AGX MAXN sweep
(catalogue.inference.MAXN_SWEEP), time and power together: the kernels' achieved fraction of peak
(gpu_eff), the half-utilisation batch (batch_half), the host's work per minibatch (host_mcycles,
what bounds small batches: PyTorch's eager launches), and the GPU's switching activity (gpu_act,
power) with the share of it that does not depend on how full the SMs are (act_floor; the rest
scales with the occupancy B / (B + B_half): a batch-1 ResNet-50 fills a third of the GPU and draws
27 W, batch 64 55 W, at nearly the same busy share).  extra_w, a constant board offset, stays 0
(with the GPU busy at every batch it is collinear with the activity).  The same
physics then scales time and power across every mode (GPU/EMC/CPU clocks, cores): SIMULATED.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..catalogue.devices import Device, get_device
from ..catalogue.inference import INFERENCE, MAXN_CLOCKS, POWER_GLITCHES, InferenceWorkload, sweep_rows
from .physics import DEVICE_PHYSICS, WorkloadPhysics, _smax, board_power, steady_state

ROOF_P = 3.0            # roofline overlap, as the training models of conv nets use
CANDIDATES = 4000       # the time fit's best constants among which the power picks
POWER_WEIGHT = 1.0      # a power error weighs as much as a time error of the same ratio
RIDGE = 1e-3            # keeps the two activities' split finite where they are collinear


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
                     act: float, half: float, floor: float) -> WorkloadPhysics:
    return WorkloadPhysics(gflop=gflop, gpu_eff=eff, gb_per_sample=gb_per, gb_fixed=gb_fixed,
                           roof_p=ROOF_P, host_mcycles=host, host_misses_k=0.0, data_mcycles=0.0,
                           data_misses_k=0.0, data_mb=0.0, gpu_act=act, first_batch_x=1.0,
                           act_gb=0.0, batch_half=half, act_floor=floor)


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
    """Fit the free constants on `rows` of the sweep: (batch, ms, W, GFLOP, GB) each.

    Time and power are fitted together: the half-utilisation batch is poorly pinned by the times
    alone (it trades against the host's work and the roofline), and the power says how full the
    SMs are (the GPU's switching scales with its occupancy, board.physics.act_floor)."""
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
    err_t = np.mean(np.log(t / t_meas) ** 2, axis=3).ravel()
    # the power of the constants that reproduce the times best (the power term cannot rescue a
    # time that is far off), at each of them the activity fitted by least squares
    cand = np.argpartition(err_t, CANDIDATES)[:CANDIDATES]
    i, j, k = np.unravel_index(cand, (effs.size, hosts.size, halves.size))
    eff_c, host_c, half_c = effs.ravel()[i, None], hosts.ravel()[j, None], halves.ravel()[k, None]
    comp_c = comp[i, 0, k] / eff_c * effs.ravel()[i, None]      # (candidates, batches)
    t_gpu = _smax(comp_c, mem, ROOF_P)
    t_c = _smax(t_gpu, host_ms.ravel()[j, None], 4.0)
    util, comp_frac = np.clip(t_gpu / t_c, 0.0, 1.0), np.clip(comp_c / t_gpu, 0.0, 1.0)
    gbs = (gb_fixed + b * gb_per) / (t_c / 1000.0)

    def total(act) -> np.ndarray:
        rails = board_power(dev, cores, fc / 1000.0, fg / 1000.0, fm, 1.0, util, comp_frac,
                            min(cores, 1.15), gbs, act, True)
        return sum(rails.values(), np.zeros_like(t_c))
    p0 = total(0.0)
    d_full = total(1.0) - p0                       # power per unit of activity, linear in it
    occ = b / (b + half_c)
    ok = np.array([(w.sweep, int(x)) not in POWER_GLITCHES for x in b])
    rel = 1.0 / p_meas[ok]                 # relative errors, as the sweep's MAPE counts them
    floor_a, occ_a = _two_activities(d_full[:, ok] * rel, (d_full * occ)[:, ok] * rel,
                                     (p_meas - p0)[:, ok] * rel)
    p_c = p0 + floor_a[:, None] * d_full + occ_a[:, None] * d_full * occ
    err = err_t[cand] + POWER_WEIGHT * np.mean(np.log(np.maximum(p_c, 1e-3) / p_meas)[:, ok] ** 2,
                                               axis=1)
    m = int(np.argmin(err))
    eff, host, half = float(eff_c[m, 0]), float(host_c[m, 0]), float(half_c[m, 0])
    act = float(np.clip(floor_a[m] + occ_a[m], 0.05, 3.0))
    floor = float(floor_a[m] / max(floor_a[m] + occ_a[m], 1e-12))
    extra = 0.0
    wp = _forward_physics(gflop, gb_per, gb_fixed, eff, host, act, half, floor)
    ops = [steady_state(dev, _as_workload(w, wp, int(x)), cores, fc, fg, fm) for x in b]
    t_pred = np.array([float(op.time_ms) for op in ops])
    p_pred = np.array([float(op.power_w) for op in ops]) + extra
    te = np.abs(t_pred - t_meas) / t_meas * 100.0
    pe = (np.abs(p_pred - p_meas) / p_meas * 100.0)[ok]
    out_rows = tuple((int(x), float(tm), float(tp), float(pm), float(pp))
                     for x, tm, tp, pm, pp in zip(b, t_meas, t_pred, p_meas, p_pred))
    return Calibration(w.name, wp, extra, float(te.mean()), float(te.max()), float(pe.mean()),
                       float(pe.max()), out_rows)


def _two_activities(x1: np.ndarray, x2: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, non-negative least squares of y on a1 x1 + a2 x2 (the activity a busy GPU draws
    whatever its occupancy, and the activity that scales with it).  Where both batches fill the
    GPU alike the two are collinear: a small ridge keeps the split finite, and a negative one
    falls back to the better single term."""
    a11 = np.sum(x1 * x1, axis=1) * (1.0 + RIDGE)
    a22 = np.sum(x2 * x2, axis=1) * (1.0 + RIDGE)
    a12 = np.sum(x1 * x2, axis=1)
    r1, r2 = np.sum(x1 * y, axis=1), np.sum(x2 * y, axis=1)
    det = a11 * a22 - a12 * a12
    c1, c2 = (a22 * r1 - a12 * r2) / det, (a11 * r2 - a12 * r1) / det
    s1, s2 = np.maximum(r1 / a11, 0.0), np.maximum(r2 / a22, 0.0)
    e1 = np.sum((y - s1[:, None] * x1) ** 2, axis=1)
    e2 = np.sum((y - s2[:, None] * x2) ** 2, axis=1)
    bad = (c1 < 0.0) | (c2 < 0.0)
    c1 = np.where(bad, np.where(e1 <= e2, s1, 0.0), c1)
    c2 = np.where(bad, np.where(e1 <= e2, 0.0, s2), c2)
    return c1, c2


def inference_operating(device: Device, name: str, batch: int, cores, cpu_mhz, gpu_mhz, mem_mhz,
                        tpc: int | None = None):
    """Noise-free time per inference minibatch (ms) and board power (W) at modes (arrays)."""
    cal = calibrate(name)
    op = steady_state(device, _as_workload(INFERENCE[name], cal.physics, batch), cores, cpu_mhz,
                      gpu_mhz, mem_mhz, tpc=tpc)
    return op.time_ms, op.power_w + cal.extra_w
