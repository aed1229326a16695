"""First-principles steady-state model of DNN training on a Jetson power mode.

Used by the simulated Jetson (backends/sim.py) for its noise-free operating point.  Everything is
vectorised over arrays of modes so the evaluation harness can get the ground truth of thousands of
modes at once.

Time per minibatch (batch B, mode = n cores, CPU f_c, GPU f_g, EMC f_m):
  * GPU compute:   B * flop / (flops_per_cycle * f_g * TPC share * efficiency)
  * GPU memory:    (B * bytes + fixed bytes) / (DRAM bandwidth(f_m) shared with the CPU's traffic)
  * roofline:      the two overlap imperfectly: a smooth maximum (p-norm) of compute and memory
  * host thread:   kernel launches + Python per step, CPU cycles / f_c, plus DRAM latency stalls
  * data pipeline: per-sample decode/augment cycles / f_c + DRAM-latency stalls, spread over
                   min(workers, spare cores) processes; with 0 workers it runs serially on the host
  * step time:     smooth max of GPU and host (asynchronous launches), then the data pipeline is
                   overlapped with it (pipelining) and bounded below by the total CPU demand divided
                   by the usable cores (oversubscription when cores < workers + 1)
Power per rail: voltage-frequency DVFS (P = C V(f)^2 f * activity + leakage(V)), static SoC/board
power, DRAM background power proportional to EMC frequency plus energy per byte moved.
Calibrated against the published figures listed in tests/test_calibration.py (batch 16).
Batch size B: compute, GPU traffic and data work scale with B, per-step host work does not, and the
GPU's kernel efficiency saturates in B (batch_efficiency: exactly 1 at the calibration batch 16).
Memory footprint (footprint_gb): optimizer state + activations x B + framework and workers, against
the board's memory less the OS's share (memory_gb); a batch that does not fit cannot train.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..catalogue.devices import Device
from ..catalogue.workloads import Workload


@dataclass(frozen=True)
class DevicePhysics:
    flops_per_cycle: float     # FP32 FLOPs per GPU clock, all TPCs
    gpu_eff: float             # device-level achieved fraction of peak for training kernels
    mem_eff: float             # achievable fraction of DRAM peak bandwidth (STREAM-like)
    cpu_ipc: float             # relative work per cycle of the CPU core (A78AE = 1.0)
    lat0_ns: float             # DRAM latency, frequency-independent part
    lat1_ns: float             # DRAM latency part that scales with 1/f_mem (at top EMC)
    # power (W); voltages in V
    gpu_v: tuple[float, float, float]   # (V min, V max, knee as fraction of f max)
    cpu_v: tuple[float, float, float]
    gpu_c: float               # W per (V^2 * GHz) at full activity, all TPCs
    gpu_leak: float            # W per V, all TPCs powered
    cpu_c: float               # W per (V^2 * GHz) per busy core
    cpu_leak: float            # W per V per online core
    soc_static: float          # always-on SoC power on the GPU/SoC rail
    soc_mem: float             # SoC (memory controller, fabric) W at top EMC, scales with f_mem
    soc_active: float          # fabric/engines kept busy while training runs (data movement, DMA)
    sys_static: float          # 5 V system rail / module input overhead
    sys_act: float             # extra system power per unit of GPU+CPU activity
    dram_static: float
    dram_freq: float           # W at the top EMC frequency
    dram_pj_per_byte: float    # energy per byte moved (pJ/B)
    os_gb: float = 2.5         # memory the OS, desktop and services keep (unified memory)


@dataclass(frozen=True)
class WorkloadPhysics:
    gflop: float               # training GFLOPs per sample (forward + backward)
    gpu_eff: float             # achieved fraction of peak for this model's kernels
    gb_per_sample: float       # GPU DRAM traffic per sample, GB
    gb_fixed: float            # GPU DRAM traffic per step (weights, gradients, optimizer), GB
    roof_p: float              # roofline overlap p-norm exponent (higher = better overlap)
    host_mcycles: float        # host-thread CPU work per step (launches, Python, optimizer), Mcycles
    host_misses_k: float       # host-thread DRAM misses per step, thousands
    data_mcycles: float        # data pipeline CPU work per sample, Mcycles
    data_misses_k: float       # data pipeline DRAM misses per sample, thousands
    data_mb: float             # CPU-side DRAM traffic per sample, MB
    gpu_act: float             # switching activity of the GPU when busy (power)
    first_batch_x: float       # first minibatch of a run is this many times slower (autotuning)
    act_gb: float = 0.10       # activations (+ their gradients) kept per sample, GB (memory footprint)
    batch_half: float | None = None  # measured half-utilisation batch (None: batch_half's rule)
    # share of the busy GPU's switching that does not depend on how full its SMs are (clock
    # distribution, L2, schedulers); the rest scales with the occupancy B / (B + B_half): a batch
    # that fills a third of the SMs toggles about a third of their logic.  1.0: activity
    # independent of the batch (the training models, calibrated at batch 16)
    act_floor: float = 1.0
    # the batch at which gpu_eff holds: the calibration batch for the catalog's models, the
    # measured batch for a script's what-if (its efficiency comes from its own kernels)
    eff_batch: float = 16.0


DEVICE_PHYSICS: dict[str, DevicePhysics] = {
    "orin-agx": DevicePhysics(
        flops_per_cycle=2 * 2048, gpu_eff=1.0, mem_eff=0.86, cpu_ipc=1.0,
        lat0_ns=85.0, lat1_ns=25.0,
        gpu_v=(0.60, 1.00, 0.30), cpu_v=(0.62, 1.02, 0.35),
        gpu_c=44.0, gpu_leak=2.4, cpu_c=0.62, cpu_leak=0.10,
        soc_static=1.95, soc_mem=1.10, soc_active=1.8, sys_static=3.50, sys_act=2.6,
        dram_static=0.28, dram_freq=0.40, dram_pj_per_byte=42.0),
    "xavier-agx": DevicePhysics(
        flops_per_cycle=2 * 512, gpu_eff=0.70, mem_eff=0.80, cpu_ipc=0.78,
        lat0_ns=95.0, lat1_ns=30.0,
        gpu_v=(0.60, 1.05, 0.30), cpu_v=(0.62, 1.05, 0.35),
        gpu_c=13.0, gpu_leak=1.5, cpu_c=0.70, cpu_leak=0.12,
        soc_static=1.60, soc_mem=1.00, soc_active=1.2, sys_static=2.50, sys_act=2.0,
        dram_static=0.20, dram_freq=0.55, dram_pj_per_byte=60.0),
    "orin-nano": DevicePhysics(
        flops_per_cycle=2 * 1024, gpu_eff=1.0, mem_eff=0.85, cpu_ipc=1.0,
        lat0_ns=90.0, lat1_ns=28.0,
        gpu_v=(0.60, 0.85, 0.35), cpu_v=(0.62, 0.90, 0.35),
        gpu_c=6.4, gpu_leak=0.7, cpu_c=0.30, cpu_leak=0.05,
        soc_static=0.90, soc_mem=0.45, soc_active=0.5, sys_static=1.30, sys_act=0.9,
        dram_static=0.10, dram_freq=0.25, dram_pj_per_byte=35.0, os_gb=1.5),
}

WORKLOAD_PHYSICS: dict[str, WorkloadPhysics] = {
    "resnet18": WorkloadPhysics(
        gflop=5.4, gpu_eff=0.55, gb_per_sample=0.155, gb_fixed=0.19, roof_p=3.0,
        host_mcycles=33.0, host_misses_k=40.0, data_mcycles=27.0, data_misses_k=26.0,
        data_mb=1.2, gpu_act=1.0, first_batch_x=12.0, act_gb=0.09),
    "mobilenetv3": WorkloadPhysics(
        gflop=0.68, gpu_eff=0.05, gb_per_sample=0.75, gb_fixed=0.09, roof_p=2.5,
        host_mcycles=95.0, host_misses_k=60.0, data_mcycles=41.0, data_misses_k=22.0,
        data_mb=1.6, gpu_act=0.78, first_batch_x=15.0, act_gb=0.08),
    "yolov8n": WorkloadPhysics(
        gflop=26.1, gpu_eff=0.60, gb_per_sample=0.42, gb_fixed=0.06, roof_p=3.0,
        host_mcycles=120.0, host_misses_k=80.0, data_mcycles=6.5, data_misses_k=8.0,
        data_mb=1.5, gpu_act=0.85, first_batch_x=10.0, act_gb=0.22),
    "bert-base": WorkloadPhysics(
        gflop=210.0, gpu_eff=0.67, gb_per_sample=0.55, gb_fixed=1.80, roof_p=4.0,
        host_mcycles=60.0, host_misses_k=40.0, data_mcycles=0.8, data_misses_k=0.5,
        data_mb=0.05, gpu_act=0.74, first_batch_x=4.0, act_gb=0.50),
    "lstm": WorkloadPhysics(
        gflop=0.6, gpu_eff=0.30, gb_per_sample=0.012, gb_fixed=0.14, roof_p=2.5,
        host_mcycles=17.0, host_misses_k=12.0, data_mcycles=0.05, data_misses_k=0.05,
        data_mb=0.01, gpu_act=0.60, first_batch_x=6.0, act_gb=0.012),
}


def workload_physics(workload: Workload) -> WorkloadPhysics:
    """A workload's physics: its own (a what-if measured from a user's script) or the catalog's."""
    wp = getattr(workload, "physics", None)
    return wp if wp is not None else WORKLOAD_PHYSICS[workload.name]


# -- batch size: kernel utilisation and memory footprint --------------------------------------------
CALIBRATION_BATCH = 16      # the published figures the model is calibrated on use batch 16


def batch_half(device: Device, workload: Workload | None = None) -> float:
    """Batch at which the GPU's kernels reach half their large-batch utilisation: a wider GPU needs
    more samples in flight to fill its SMs (8 on Orin AGX's 2048 CUDA cores, 4 on Orin Nano's 1024,
    2 on Xavier AGX's 512, for a ResNet-18-sized sample of 5.4 GFLOP), and a sample with more work
    (more threads per kernel) fills them sooner: x sqrt(5.4 GFLOP / the workload's GFLOP)."""
    h = 8.0 * DEVICE_PHYSICS[device.name].flops_per_cycle / 4096.0
    fitted = None if workload is None else workload_physics(workload).batch_half
    if fitted is not None:      # fitted on one board (Orin AGX); a narrower GPU fills sooner
        return fitted * DEVICE_PHYSICS[device.name].flops_per_cycle / 4096.0
    if workload is not None:
        h *= (5.4 / workload_physics(workload).gflop) ** 0.5
    return h


def batch_efficiency(device: Device, batch, workload: Workload | None = None) -> np.ndarray:
    """Kernel efficiency at batch B relative to the batch the workload's efficiency holds at (16,
    the calibration batch, for the catalog's models; the measured batch for a script's what-if):
    saturating, B / (B + B_half), normalised so that batch is exactly 1: small batches under-use
    the GPU, large ones gain at most (B_ref + B_half) / B_ref."""
    h = batch_half(device, workload)
    ref = CALIBRATION_BATCH if workload is None else workload_physics(workload).eff_batch
    B = np.asarray(batch, dtype=float)
    return (B / (B + h)) / (ref / (ref + h))


FRAMEWORK_GB = 1.6          # CUDA context, cuDNN/cuBLAS workspaces, the caching allocator's slack
WORKER_GB = 0.35            # each DataLoader worker process (a Python interpreter plus its prefetch)
STATE_BYTES_PER_PARAM = 16  # fp32 weights + gradients + two optimizer moments (Adam; SGD+momentum: 12)


def memory_gb(device: Device) -> float:
    """Memory a training run can use: the board's unified memory less what the OS keeps."""
    return float(device.mem_gb) - DEVICE_PHYSICS[device.name].os_gb


def footprint_gb(workload: Workload, batch_size=None) -> np.ndarray:
    """Peak memory of training `workload` at batch B (GB): weights, gradients and optimizer state,
    activations x B, framework overhead and the DataLoader workers."""
    wp = workload_physics(workload)
    B = np.asarray(batch_size if batch_size is not None else workload.batch_size, dtype=float)
    return (workload.params_m * 1e6 * STATE_BYTES_PER_PARAM / 1e9 + wp.act_gb * B + FRAMEWORK_GB
            + WORKER_GB * workload.workers)


def fits(device: Device, workload: Workload, batch_size) -> np.ndarray:
    return footprint_gb(workload, batch_size) <= memory_gb(device)


def largest_batch(device: Device, workload: Workload, limit: int = 4096) -> int:
    """The largest batch whose modelled footprint fits the device's memory (0: not even batch 1)."""
    wp = workload_physics(workload)
    spare = memory_gb(device) - float(footprint_gb(workload, 0))
    if spare < wp.act_gb:
        return 0
    return int(min(limit, np.floor(spare / wp.act_gb + 1e-9)))


def _vf(f: np.ndarray, fmax: float, v: tuple[float, float, float]) -> np.ndarray:
    """Voltage for frequency f: flat at V min up to the knee, then linear to V max at f max."""
    vmin, vmax, knee = v
    x = np.clip((f / fmax - knee) / (1.0 - knee), 0.0, 1.0)
    return vmin + (vmax - vmin) * x


def _smax(a: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    """Smooth maximum (p-norm): imperfect overlap of two concurrent activities."""
    return (a ** p + b ** p) ** (1.0 / p)


@dataclass
class Operating:
    """Steady-state operating point(s); arrays of equal length."""
    time_ms: np.ndarray
    power_w: np.ndarray
    rails: dict[str, np.ndarray]
    gpu_util: np.ndarray
    cpu_busy: np.ndarray        # busy cores (fractional)
    dram_gbs: np.ndarray        # DRAM traffic, GB/s
    temp_c: np.ndarray          # steady-state SoC temperature


def steady_state(device: Device, workload: Workload | None, cores, cpu_mhz, gpu_mhz, mem_mhz,
                 tpc: int | None = None, batch_size: int | None = None) -> Operating:
    """Noise-free minibatch time and power for modes (scalars or arrays).  workload=None is idle."""
    dp = DEVICE_PHYSICS[device.name]
    n = np.asarray(cores, dtype=float)
    fc = np.asarray(cpu_mhz, dtype=float) / 1000.0          # GHz
    fg = np.asarray(gpu_mhz, dtype=float) / 1000.0
    fm = np.asarray(mem_mhz, dtype=float)
    n, fc, fg, fm = np.broadcast_arrays(n, fc, fg, fm)
    fmmax = device.mem_mhz[-1]
    tpc_share = (tpc if tpc is not None else device.gpu_tpcs) / device.gpu_tpcs
    bw = device.mem_peak_gbs * dp.mem_eff * fm / fmmax                      # GB/s
    lat_ns = dp.lat0_ns + dp.lat1_ns * fmmax / fm

    if workload is None:
        t = np.full(n.shape, np.nan)
        gpu_util = np.zeros(n.shape)
        comp_frac = np.zeros(n.shape)
        busy = np.full(n.shape, 0.15)
        gbs = np.full(n.shape, 0.4)
    else:
        wp = workload_physics(workload)
        B = float(batch_size or workload.batch_size)
        # data pipeline (per sample, on one core), ms
        data_ms = (wp.data_mcycles / (fc * 1000.0 * dp.cpu_ipc) * 1000.0
                   + wp.data_misses_k * 1000.0 * lat_ns * 1e-6)
        host_ms = (wp.host_mcycles / (fc * 1000.0 * dp.cpu_ipc) * 1000.0
                   + wp.host_misses_k * 1000.0 * lat_ns * 1e-6)
        comp_ms = B * wp.gflop / (dp.flops_per_cycle * fg * tpc_share * wp.gpu_eff * dp.gpu_eff
                                  * batch_efficiency(device, B, workload)) * 1000.0
        gpu_bytes = B * wp.gb_per_sample + wp.gb_fixed
        cpu_bytes = B * wp.data_mb / 1000.0
        w = workload.workers
        # more runnable processes than cores: context switches and cache thrashing
        data_ms = data_ms * (1.0 + 0.15 * np.maximum(0.0, (w + 1.0 - n) / n))

        def pipeline(t_gpu):
            """Minibatch time and busy cores, given the GPU time of a step."""
            if w == 0:                   # no workers: the host loads data, then runs the step
                return _smax(t_gpu, host_ms, 4.0) + B * data_ms, np.minimum(n, 1.15)
            par = np.minimum(w, np.maximum(n - 1.0, 1.0))
            t = np.maximum(_smax(_smax(t_gpu, host_ms, 4.0), B * data_ms / par, 6.0),
                           (B * data_ms + host_ms) / np.minimum(n, w + 1.0))
            return t, np.minimum(n, (B * data_ms + host_ms) / t + 0.15)

        # first pass without contention, to estimate the CPU pipeline's share of DRAM bandwidth
        t0, _ = pipeline(_smax(comp_ms, gpu_bytes / bw * 1000.0, wp.roof_p))
        cpu_rate = cpu_bytes / (t0 / 1000.0)
        bw_gpu = bw * np.clip(1.0 - cpu_rate / bw, 0.5, 1.0)
        t_gpu = _smax(comp_ms, gpu_bytes / bw_gpu * 1000.0, wp.roof_p)
        t, busy = pipeline(t_gpu)
        gpu_util = np.clip(t_gpu / t, 0.0, 1.0)
        # cycles stalled on DRAM toggle far less logic than FMA-bound cycles
        comp_frac = np.clip(comp_ms / t_gpu, 0.0, 1.0)
        gbs = (gpu_bytes + cpu_bytes) / (t / 1000.0)

    act = 0.0
    if workload is not None:
        wp = workload_physics(workload)
        B = float(batch_size or workload.batch_size)
        act = wp.gpu_act * (wp.act_floor
                            + (1.0 - wp.act_floor) * B / (B + batch_half(device, workload)))
    rails = board_power(device, n, fc, fg, fm, tpc_share, gpu_util, comp_frac, busy, gbs, act,
                        workload is not None)
    total = rails[device.total_rail] if device.total_rail else sum(rails.values(), np.zeros_like(t))
    temp = 32.0 + 0.85 * total
    return Operating(t, total, rails, gpu_util, busy, gbs, temp)


def board_power(device: Device, n, fc, fg, fm, tpc_share, gpu_util, comp_frac, busy, gbs, act,
                active: bool) -> dict[str, np.ndarray]:
    """Power per rail (W) of a mode (n cores, clocks fc, fg in GHz, fm in MHz) running at the
    given GPU utilisation, compute share of the GPU's time, busy cores, DRAM traffic (GB/s) and GPU
    switching activity; `active`: a workload runs (the fabric's engines are busy).  Arrays
    broadcast (the inference fit evaluates it over a grid of candidate constants)."""
    dp = DEVICE_PHYSICS[device.name]
    fcmax, fgmax, fmmax = device.cpu_mhz[-1] / 1000.0, device.gpu_mhz[-1] / 1000.0, device.mem_mhz[-1]
    vg = _vf(fg, fgmax, dp.gpu_v)
    vc = _vf(fc, fcmax, dp.cpu_v)
    # each busy core draws dynamic power; memory-bound GPU phases toggle less logic
    p_gpu = (dp.gpu_leak * vg * (0.35 + 0.65 * tpc_share)
             + dp.gpu_c * vg ** 2 * fg * gpu_util * act * tpc_share * (0.25 + 0.75 * comp_frac)
             + 0.25 * vg ** 2 * fg)                                       # clock tree when idle
    p_cpu = dp.cpu_leak * vc * n + dp.cpu_c * vc ** 2 * fc * busy + 0.30
    p_soc = dp.soc_static + dp.soc_mem * fm / fmmax + (dp.soc_active if active else 0.0)
    p_dram = dp.dram_static + dp.dram_freq * fm / fmmax + dp.dram_pj_per_byte * gbs * 1e-3
    p_sys = dp.sys_static + dp.sys_act * (0.6 * gpu_util * act + 0.4 * busy / n)
    return _split_rails(device, p_gpu, p_cpu, p_soc, p_dram, p_sys)


def _split_rails(device: Device, gpu, cpu, soc, dram, sys) -> dict[str, np.ndarray]:
    if device.name == "orin-agx":
        return {"VDD_GPU_SOC": gpu + soc, "VDD_CPU_CV": cpu, "VIN_SYS_5V0": sys,
                "VDDQ_VDD2_1V8AO": dram}
    if device.name == "xavier-agx":
        return {"GPU": gpu, "CPU": cpu, "SOC": soc, "CV": 0.0 * gpu, "VDDRQ": dram, "SYS5V": sys}
    # Orin Nano: VDD_IN is the module input (sum + regulator loss); the sub-rails don't add up to it
    vin = (gpu + cpu + soc + dram + sys) * 1.08
    return {"VDD_IN": vin, "VDD_CPU_GPU_CV": gpu + cpu, "VDD_SOC": soc}
