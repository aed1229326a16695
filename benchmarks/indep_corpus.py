"""Independent ground-truth corpora for the evaluation: NOT ptui's physics (issue 8, item 7).

ptui's simulator (ptui/core/board/physics.py, backends/sim.py) produced the bundled reference, so on its
own corpora a transferred predictor meets a prior that matches by construction.  This generator is
written separately, with other functional forms and workloads ptui has never seen, so that the
bundled Orin AGX ResNet-18 reference acts as a *mismatched* prior, as it would on a real board.
It imports neither physics.py nor backends/sim.py; it uses ptui.core.catalogue.devices only for the mode
tables and the PowerTrain grid.

Step time of one minibatch (batch B; n cores, CPU f_c, GPU f_g, EMC f_m):
  * GPU kernels: compute B*F / (peak(f_g) * occupancy) and DRAM traffic / bandwidth(f_m), where the
    achievable bandwidth saturates in f_m (power law, exponent < 1) and is reduced by the data
    loader's own DRAM traffic (contention); the two are combined with a log-sum-exp soft maximum;
  * kernel launches: a per-step host cost in CPU cycles that the GPU waits on (launch-bound
    workloads), combined with the GPU time by a second, sharper soft maximum;
  * data loading: per-sample decode/augment work on the loader workers (parallel over
    min(workers, n - 1) cores with sub-linear scaling), partly stalled on DRAM latency (which grows
    as f_m falls and as the GPU saturates the memory controller); this part overlaps the GPU;
  * a serial part (collate, pinned-memory copy, host-to-device transfer, optimizer bookkeeping on
    the main thread) that does NOT overlap the GPU and simply adds to the step;
  * too few cores for workers + main thread: everything CPU-side time-shares the cores with a
    context-switch penalty.
  The contention terms depend on the step time itself; they are solved by fixed-point iteration.
Power (W): per-domain DVFS voltage curves of different shapes (GPU convex power law, CPU flat then
quadratic, EMC voltage steps), dynamic C V^2 f activity terms, a busy-polling main thread, DRAM
energy per byte plus EMC background power, and static leakage that grows exponentially with die
temperature, itself set by total power through a thermal resistance (fixed-point iteration).
Measurement noise: log-normal time (2 %) and power (1.5 %) per mode, occasional outliers (a
background hiccup slows a mode's minibatches, or a power reading catches a transient).

Calibrated loosely to published figures: Orin AGX MAXN ~50 W for a ResNet-like CNN, the slowest
grid modes ~10-12 W, a 20-40x time spread over the grid (see shared/research/real-data.md).

Output: one profile CSV per (device, workload) over PowerTrain's grid (`ptui modes --grid pt`), with
the columns of `ptui profile` (PROFILE_HEADER), readable by ptui's commands and the replay backend.
Everything in it is SYNTHETIC (an independent generator, not hardware).

Run: python benchmarks/indep_corpus.py --out DIR [--device D ...] [--workload W ...] [--seed S]
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptui.core.catalogue.devices import Device, get_device  # noqa: E402

# ptui's `ptui profile` CSV columns (ptui.core.profiling.profiler's PROFILE_HEADER: values, the notes timed
# and host_step_ms, the text tags workload, batch_size, session, then the whole cycle's columns,
# left empty: the generator models steps only); kept literal here so this file does not import the
# profiler.  The workload tag says where the data came from: indep-<workload>.
HEADER = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "time_ms", "power_w", "time_ms_p25",
          "time_ms_p75", "power_w_std", "n_minibatches", "n_power", "settle_s", "mode_s", "stable",
          "timed", "host_step_ms", "workload", "batch_size", "session", "cycle_ms", "outside_pct",
          "time_basis")


@dataclass(frozen=True)
class Board:
    peak_tflops: float          # FP32 peak at the top GPU clock
    bw_gbs: float               # achievable DRAM bandwidth at the top EMC clock
    bw_exp: float               # bandwidth ~ (f_m / f_max)^bw_exp
    cpu_gops: float             # loader work units per cycle per core relative to A78AE
    lat_ns: tuple[float, float]  # DRAM latency: fixed + part that scales as (f_max/f_m)^0.7
    # power
    gpu_v: tuple[float, float, float]    # V min, V max, exponent of the convex V(f) curve
    cpu_v: tuple[float, float, float]    # V min, V max, knee (fraction of f max)
    emc_v: tuple[float, ...]             # voltage by EMC frequency fraction thresholds (3 levels)
    gpu_cdyn: float             # W / (V^2 GHz) at full activity
    cpu_cdyn: float             # W / (V^2 GHz) per busy core
    emc_cdyn: float             # W / (V^2 GHz of EMC) background
    dram_pj: float              # pJ per byte moved
    leak: tuple[float, float, float]     # leakage W/V at 25 C: GPU, per online CPU core, SoC
    base_w: float               # board/regulators/always-on
    rth: float                  # C per W of total power
    t_leak: float               # leakage e-folding temperature, C
    vin_loss: float             # module input reads sum * (1 + loss)


BOARDS: dict[str, Board] = {
    "orin-agx": Board(peak_tflops=5.33, bw_gbs=178.0, bw_exp=0.82, cpu_gops=1.0,
                      lat_ns=(70.0, 38.0),
                      gpu_v=(0.58, 1.02, 2.1), cpu_v=(0.60, 1.00, 0.42), emc_v=(0.60, 0.75, 0.90),
                      gpu_cdyn=25.0, cpu_cdyn=0.55, emc_cdyn=0.85, dram_pj=48.0,
                      leak=(3.0, 0.09, 1.3), base_w=6.6, rth=0.55, t_leak=45.0, vin_loss=0.0),
    "xavier-agx": Board(peak_tflops=1.41, bw_gbs=112.0, bw_exp=0.78, cpu_gops=0.8,
                        lat_ns=(80.0, 45.0),
                        gpu_v=(0.60, 1.05, 1.8), cpu_v=(0.62, 1.06, 0.40), emc_v=(0.62, 0.78, 0.88),
                        gpu_cdyn=12.5, cpu_cdyn=0.75, emc_cdyn=1.1, dram_pj=70.0,
                        leak=(1.8, 0.12, 1.0), base_w=5.2, rth=0.75, t_leak=42.0, vin_loss=0.0),
    "orin-nano": Board(peak_tflops=1.28, bw_gbs=58.0, bw_exp=0.85, cpu_gops=1.0,
                       lat_ns=(75.0, 40.0),
                       gpu_v=(0.60, 0.86, 2.4), cpu_v=(0.60, 0.92, 0.45), emc_v=(0.60, 0.72, 0.80),
                       gpu_cdyn=5.2, cpu_cdyn=0.32, emc_cdyn=0.40, dram_pj=38.0,
                       leak=(0.6, 0.05, 0.5), base_w=2.2, rth=2.0, t_leak=40.0, vin_loss=0.09),
}


@dataclass(frozen=True)
class Job:
    """A training workload ptui has never seen, described by its own cost parameters."""
    title: str
    batch: int
    gflop: float               # training GFLOPs per sample (fwd + bwd)
    occupancy: float           # achieved fraction of peak when compute-bound
    gb_sample: float           # GPU DRAM traffic per sample, GB
    gb_step: float             # GPU DRAM traffic per step (weights, grads, optimizer state), GB
    kernels: int               # kernel launches per step
    launch_kcyc: float         # host cycles per launch (thousands)
    load_mcyc: float           # loader CPU work per sample, Mcycles
    load_mem: float            # fraction of loader time stalled on DRAM (at top EMC)
    load_mb: float             # loader DRAM traffic per sample, MB
    serial_ms: float           # non-overlapped main-thread work at top CPU clock (ms per step)
    serial_mcyc_sample: float  # non-overlapped per-sample work (collate, copy), Mcycles
    h2d_mb: float              # host-to-device copy per sample, MB (serial, DRAM bound)
    workers: int
    gpu_act: float             # switching activity of compute-bound kernels
    soft: float                # softness of the compute/memory soft maximum (larger = smoother)


JOBS: dict[str, Job] = {
    # ViT-Tiny/16 on 224 px images: attention + MLP GEMMs, moderate memory, JPEG decode on workers
    "vit-tiny": Job("ViT-Tiny/16 (image classification, 224 px)", batch=32, gflop=3.8,
                    occupancy=0.42, gb_sample=0.09, gb_step=0.09, kernels=420, launch_kcyc=22.0,
                    load_mcyc=18.0, load_mem=0.25, load_mb=1.3, serial_ms=6.0,
                    serial_mcyc_sample=0.6, h2d_mb=0.6, workers=4, gpu_act=0.95, soft=0.10),
    # U-Net on 256x256 segmentation tiles: large activations, memory-heavy, mask augmentation
    "unet": Job("U-Net (segmentation, 256 px tiles)", batch=8, gflop=165.0, occupancy=0.50,
                gb_sample=1.6, gb_step=0.12, kernels=300, launch_kcyc=20.0, load_mcyc=70.0,
                load_mem=0.35, load_mb=4.0, serial_ms=4.0, serial_mcyc_sample=2.0, h2d_mb=1.05,
                workers=4, gpu_act=0.85, soft=0.14),
    # GRU acoustic model: small recurrent kernels (launch-bound), log-mel features on the CPU
    "gru-speech": Job("GRU speech recognizer (log-mel features)", batch=32, gflop=1.1,
                      occupancy=0.18, gb_sample=0.015, gb_step=0.08, kernels=1600,
                      launch_kcyc=14.0, load_mcyc=12.0, load_mem=0.15, load_mb=0.5, serial_ms=3.0,
                      serial_mcyc_sample=0.3, h2d_mb=0.3, workers=3, gpu_act=0.70, soft=0.12),
    # ResNet-50 on ImageNet-size JPEGs: the calibration anchor (Orin AGX MAXN ~50 W published)
    "resnet50": Job("ResNet-50 (image classification, 224 px)", batch=32, gflop=12.3,
                    occupancy=0.50, gb_sample=0.30, gb_step=0.20, kernels=650, launch_kcyc=20.0,
                    load_mcyc=36.0, load_mem=0.25, load_mb=1.5, serial_ms=5.0,
                    serial_mcyc_sample=0.6, h2d_mb=0.6, workers=4, gpu_act=0.90, soft=0.10),
    # GPT-2 small fine-tune, 512 tokens, AdamW: compute-bound GEMMs, big optimizer traffic
    "gpt2-ft": Job("GPT-2 small fine-tune (512 tokens, AdamW)", batch=4, gflop=380.0,
                   occupancy=0.55, gb_sample=0.9, gb_step=2.4, kernels=900, launch_kcyc=18.0,
                   load_mcyc=1.5, load_mem=0.05, load_mb=0.02, serial_ms=9.0,
                   serial_mcyc_sample=0.05, h2d_mb=0.01, workers=1, gpu_act=0.90, soft=0.08),
}


# Softness of the maxima between concurrent pipeline stages: minibatch times jitter by ~5-10 %, so
# the mean of max(a, b) over minibatches rounds the corner where two stages take equally long.
JITTER_SOFT = 0.10


def _softmax(a: np.ndarray, b: np.ndarray, soft: float) -> np.ndarray:
    """Log-sum-exp soft maximum on a relative scale: soft*s*log(e^(a/(soft*s)) + e^(b/(soft*s)))
    with s = max(a, b) (so a == b gives a*(1 + soft*ln 2))."""
    s = np.maximum(a, b) * soft
    return np.maximum(a, b) + s * np.log1p(np.exp(-np.abs(a - b) / s))


def _volt_gpu(x: np.ndarray, v: tuple[float, float, float]) -> np.ndarray:
    return v[0] + (v[1] - v[0]) * x ** v[2]


def _volt_cpu(x: np.ndarray, v: tuple[float, float, float]) -> np.ndarray:
    y = np.clip((x - v[2]) / (1.0 - v[2]), 0.0, 1.0)
    return v[0] + (v[1] - v[0]) * y ** 2


def _volt_emc(x: np.ndarray, v: tuple[float, ...]) -> np.ndarray:
    return np.where(x < 0.3, v[0], np.where(x < 0.8, v[1], v[2]))


def truth(device: Device, job: Job, modes) -> tuple[np.ndarray, np.ndarray, dict]:
    """Noise-free (time_ms, power_w, internals) for a list of ptui Modes or an [n, 4] array."""
    bd = BOARDS[device.name]
    a = np.asarray([m.as_tuple() for m in modes], float) if not isinstance(modes, np.ndarray) else modes
    n, fc, fg, fm = a[:, 0], a[:, 1] / 1000.0, a[:, 2] / 1000.0, a[:, 3] / 1000.0
    xc, xg, xm = fc / (device.cpu_mhz[-1] / 1000.0), fg / (device.gpu_mhz[-1] / 1000.0), \
        fm / (device.mem_mhz[-1] / 1000.0)
    B = job.batch
    bw = bd.bw_gbs * xm ** bd.bw_exp                                     # GB/s
    lat = bd.lat_ns[0] + bd.lat_ns[1] * xm ** -0.7                       # ns
    lat_top = bd.lat_ns[0] + bd.lat_ns[1]
    # GPU compute; occupancy drops a little at high clocks when memory is slow (latency exposed)
    occ = job.occupancy * (1.0 - 0.12 * xg * (1.0 - xm) ** 2)
    t_comp = B * job.gflop / (bd.peak_tflops * xg * occ)                 # ms (GFLOP / TFLOP/s)
    gpu_gb = B * job.gb_sample + job.gb_step
    t_launch = job.kernels * job.launch_kcyc / (fc * 1e3 * bd.cpu_gops) * (1 + 0.2 * (lat / lat_top - 1))
    # loader per sample: CPU part / f_c + DRAM-stall part scaled by latency
    load_cpu = job.load_mcyc * (1 - job.load_mem) / (fc * bd.cpu_gops)   # ms (Mcyc / GHz)
    load_stall0 = job.load_mcyc * job.load_mem / (device.cpu_mhz[-1] / 1000.0) * (lat / lat_top)
    w = job.workers
    par = np.minimum(w, np.maximum(n - 1, 1)) ** 0.85
    serial_cpu = job.serial_ms * (device.cpu_mhz[-1] / 1000.0) / fc \
        + B * job.serial_mcyc_sample / (fc * bd.cpu_gops)
    cpu_gb = B * job.load_mb / 1000.0
    h2d_gb = B * job.h2d_mb / 1000.0
    oversub = np.maximum(0.0, (w + 1) - n) / (w + 1)
    t = np.full(len(n), 100.0)
    u_mem = np.zeros(len(n))
    for _ in range(12):
        # contention: the loader's DRAM traffic takes bandwidth from the GPU; the GPU's traffic
        # lengthens the loader's DRAM stalls (queueing: 1 / (1 - utilisation))
        cpu_rate = (cpu_gb + h2d_gb) / (t / 1000.0)
        bw_gpu = np.maximum(bw - cpu_rate, 0.25 * bw)
        t_mem = gpu_gb / bw_gpu * 1000.0
        t_gpu = _softmax(t_comp, t_mem, job.soft)
        t_dev = _softmax(t_gpu, t_launch, JITTER_SOFT)
        queue = 1.0 / (1.0 - np.minimum(u_mem, 0.85))
        load = B * (load_cpu + load_stall0 * queue) * (1.0 + 0.35 * oversub)
        t_par = load / par
        h2d = h2d_gb / (0.5 * bw) * 1000.0 * queue
        t_serial = serial_cpu + h2d
        t_new = t_serial + _softmax(t_dev, t_par, JITTER_SOFT)
        # time-sharing: all CPU-side work over the cores actually online
        t_new = _softmax(t_new, (load + t_serial + t_launch) / np.minimum(n, w + 1) * (1 + 0.35 * oversub),
                         JITTER_SOFT)
        u_new = np.clip((gpu_gb + cpu_gb + h2d_gb) / (t_new / 1000.0) / bw, 0.0, 0.95)
        t = 0.5 * t + 0.5 * t_new
        u_mem = 0.5 * u_mem + 0.5 * u_new
    gpu_busy = np.clip(t_gpu / t, 0.0, 1.0)
    comp_share = np.clip(t_comp / np.maximum(t_comp, t_mem), 0.0, 1.0)
    busy_cores = np.minimum(n, (load + t_serial + t_launch) / t + 1.0)   # +1: the busy-polling main thread
    # power
    vg = _volt_gpu(xg, bd.gpu_v)
    vc = _volt_cpu(xc, bd.cpu_v)
    ve = _volt_emc(xm, bd.emc_v)
    p_gpu = bd.gpu_cdyn * vg ** 2 * fg * (gpu_busy * job.gpu_act * (0.35 + 0.65 * comp_share) + 0.06)
    p_cpu = bd.cpu_cdyn * vc ** 2 * fc * busy_cores
    gbs = (gpu_gb + cpu_gb + h2d_gb) / (t / 1000.0)
    p_mem = bd.emc_cdyn * ve ** 2 * fm + bd.dram_pj * gbs * 1e-3
    dyn = p_gpu + p_cpu + p_mem + bd.base_w
    leak0 = bd.leak[0] * vg + bd.leak[1] * vc * n + bd.leak[2] * ve
    temp = np.full(len(n), 40.0)
    for _ in range(20):
        leak = leak0 * np.exp((temp - 25.0) / bd.t_leak)
        total = dyn + leak
        temp = 0.5 * temp + 0.5 * (25.0 + bd.rth * total)
    power = total * (1.0 + bd.vin_loss)
    return t, power, {"gpu_busy": gpu_busy, "temp_c": temp, "busy_cores": busy_cores,
                      "t_comp": t_comp, "t_mem": t_mem, "t_launch": t_launch, "t_par": t_par,
                      "t_serial": t_serial}


def _rng(seed: int, *parts) -> np.random.Generator:
    h = hashlib.blake2b("|".join(map(str, (seed,) + parts)).encode(), digest_size=8)
    return np.random.default_rng(int.from_bytes(h.digest(), "little"))


def measure(device: Device, job_name: str, modes, seed: int = 0, *, time_sd: float = 0.02,
            power_sd: float = 0.015, outlier_p: float = 0.01) -> dict[str, np.ndarray]:
    """Measured per-mode figures with noise, as a profile would record them (seeded)."""
    job = JOBS[job_name]
    t, p, aux = truth(device, job, modes)
    r = _rng(seed, device.name, job_name)
    k = len(t)
    tm = t * np.exp(r.normal(0.0, time_sd, k))
    pm = p * np.exp(r.normal(0.0, power_sd, k))
    slow = r.random(k) < outlier_p                       # a background hiccup during the mode
    tm = np.where(slow, tm * r.uniform(1.08, 1.35, k), tm)
    spike = r.random(k) < outlier_p                      # a power transient caught in the window
    pm = np.where(spike, pm * r.uniform(0.9, 1.15, k), pm)
    jitter = 0.02 + 0.03 * r.random(k) + np.where(slow, 0.1, 0.0)   # minibatch spread in the mode
    return {"time_ms": tm, "power_w": pm, "time_ms_p25": tm * np.exp(-0.674 * jitter),
            "time_ms_p75": tm * np.exp(0.674 * jitter),
            "power_w_std": pm * (0.01 + 0.02 * r.random(k) + np.where(spike, 0.05, 0.0)),
            "settle_s": 2.0 + r.random(k) * 2.0, "true_time_ms": t, "true_power_w": p,
            "temp_c": aux["temp_c"]}


def _fmt(v: float) -> str:
    return f"{v:.4f}".rstrip("0").rstrip(".")


def write_corpus(path: str | Path, device_name: str, job_name: str, seed: int = 0) -> int:
    """Write the whole PowerTrain grid of (device, job) as a ptui profile CSV; returns the rows."""
    from ptui.core.board.csvio import mode_cells, write_csv
    dev = get_device(device_name)
    modes = dev.pt_grid()
    m = measure(dev, job_name, modes, seed)
    nb = 40
    rows = []
    for i, mode in enumerate(modes):
        mode_s = m["settle_s"][i] + nb * m["time_ms"][i] / 1000.0
        rows.append(mode_cells(mode) + [_fmt(m["time_ms"][i]), _fmt(m["power_w"][i]),
                                        _fmt(m["time_ms_p25"][i]), _fmt(m["time_ms_p75"][i]),
                                        _fmt(m["power_w_std"][i]), str(nb), "12",
                                        _fmt(m["settle_s"][i]), _fmt(mode_s), "1",
                                        "minibatch (SYNTHETIC independent generator)", "",
                                        f"indep-{job_name}", str(JOBS[job_name].batch),
                                        f"indep-{device_name}-{job_name}-s{seed}", "", "", ""])
    write_csv(path, HEADER, rows)
    return len(rows)


def corpus_path(directory: str | Path, device_name: str, job_name: str, seed: int = 0) -> Path:
    return Path(directory) / f"indep-{device_name}-{job_name}-s{seed}.csv"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Independent (not ptui's physics) full-grid corpora, "
                                             "SYNTHETIC, as ptui profile CSVs")
    ap.add_argument("--out", required=True, help="directory for the CSV files")
    ap.add_argument("--device", action="append", choices=sorted(BOARDS))
    ap.add_argument("--workload", action="append", choices=sorted(JOBS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--summary", action="store_true", help="print ranges per corpus")
    a = ap.parse_args(argv)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    for d in a.device or sorted(BOARDS):
        for w in a.workload or sorted(JOBS):
            f = corpus_path(a.out, d, w, a.seed)
            n = write_corpus(f, d, w, a.seed)
            line = f"{f}: {n} modes"
            if a.summary:
                dev = get_device(d)
                t, p, _ = truth(dev, JOBS[w], dev.pt_grid())
                mx = dev.pt_grid().index(dev.maxn)
                line += (f"; time {t.min():.0f}-{t.max():.0f} ms (x{t.max() / t.min():.1f}), power "
                         f"{p.min():.1f}-{p.max():.1f} W, MAXN {t[mx]:.0f} ms {p[mx]:.1f} W")
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
