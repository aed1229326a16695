"""Independent ground truth for training beside inference: NOT ptui's physics (issue 27).

benchmarks/indep_corpus.py's sibling: the same boards (BOARDS: peak FLOPs, DRAM bandwidth and
latency, voltage curves, leakage and thermal resistance) and training jobs (JOBS), plus forward-only
inference models of ptui's catalogue with this module's own functional forms.  It imports neither
ptui/core/board/physics.py nor ptui/core/board/inference.py; ptui.core.catalogue is used only for the
mode tables, PowerTrain's grid and the inference batch sizes.

Time of one inference minibatch of b requests (n cores, CPU f_c, GPU f_g, EMC f_m):
  * GPU work: compute b*F / (peak(f_g) * eff) and DRAM traffic (weights once per minibatch +
    activations per sample) / (bandwidth(f_m) * eff_m), soft maximum of the two (log-sum-exp);
  * a GPU latency chain per minibatch (layer after layer, each a kernel too small to fill the GPU):
    70 % GPU clock, 30 % DRAM latency;
  * the host: a fixed cost per minibatch (Python, eager kernel launches) plus a per-request part
    (decode, resize, tokenise), in CPU cycles, stalled on DRAM latency, slowed a little by OS
    noise on few cores; launches are asynchronous, so host and GPU overlap: a soft maximum of the
    two (sharp, the GPU waits on a launch-bound host);
  * a serial input copy (host to device, DRAM bound) that adds.
Power (W): the boards' voltage curves; GPU switching C V^2 f x busy share x an activity that rises
with the batch (larger GEMMs keep more of the SMs switching: why the measured power climbs with b at
full utilisation), weighted towards compute-bound kernels; one busy-polling host core plus idle
cores; EMC background + DRAM energy per byte; base; leakage growing with die temperature, itself
set by total power (fixed-point iteration), as in indep_corpus.

Calibrated loosely, by rounded constants (a one-off least-squares fit, not run here), to the measured Orin AGX MAXN sweep
(shared/research-data/pagoda_orin_agx_maxn_inference_batch_sweep.csv, Pagoda; the ResNet-50
batch-32 power is a logging glitch and ignored): `python benchmarks/indep_inference.py --check`
prints the errors.  Other boards reuse the Orin constants (scaled by their BOARDS entry).
Everything this module produces is SYNTHETIC (an independent generator, not hardware).

`standalone_measure(device, job, infer)` returns a ptui Measure (modes -> Standalone): training
alone (indep_corpus.truth) and inference alone at every INFER_BATCHES size; with `seed` given,
log-normal noise per (mode, quantity) seeded by the mode, so a mode measured twice reads the same,
and the power readings' standard error from their samples' spread (Standalone.power_se).

Run: python benchmarks/indep_inference.py --check | --summary
"""
from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from indep_corpus import BOARDS, JOBS, Board, _rng, _softmax, _volt_cpu, _volt_emc, _volt_gpu, truth  # noqa: E402

from ptui.core.catalogue.devices import Device, get_device  # noqa: E402
from ptui.core.catalogue.inference import INFER_BATCHES  # noqa: E402
from ptui.core.decision.concurrent import Standalone  # noqa: E402

SWEEP_CSV = ROOT.parent / "shared" / "research-data" / "pagoda_orin_agx_maxn_inference_batch_sweep.csv"


@dataclass(frozen=True)
class InferJob:
    """A forward-only model, by its own cost parameters (top clocks of the Orin AGX)."""
    title: str
    sweep: str                 # its model name in the measured sweep
    gflop: float               # forward GFLOPs per request
    w_gb: float                # DRAM traffic per minibatch (weights), GB
    a_gb: float                # DRAM traffic per request (activations), GB
    eff: float                 # achieved fraction of peak FLOPs when compute-bound
    eff_m: float               # achieved fraction of the bandwidth when memory-bound
    chain_ms: float            # GPU latency chain per minibatch at top clocks
    host_ms: float             # host cost per minibatch at the top CPU clock
    host_req_ms: float         # host cost per request at the top CPU clock
    in_mb: float               # input copied to the GPU per request, MB
    act: tuple[float, float, float]   # GPU activity: at b -> 0, at b -> inf, half-way batch
    soft: float                # softness of the compute/memory maximum


# rounded from a least-squares fit on the MAXN sweep (log errors of time and power; BERT's host cost
# fixed at 15 ms and the LSTM's at 0.6 ms and 50 % of peak, where the fit ran to its bounds)
INFER: dict[str, InferJob] = {
    "resnet50": InferJob("ResNet-50 (224 px)", "resnet50", gflop=8.2, w_gb=0.10, a_gb=0.23,
                         eff=0.57, eff_m=0.49, chain_ms=6.9, host_ms=15.3, host_req_ms=0.05,
                         in_mb=0.6, act=(0.09, 0.90, 3.0), soft=0.10),
    "mobilenetv3-l": InferJob("MobileNetV3-Large (224 px)", "mobnet", gflop=0.45, w_gb=0.02,
                              a_gb=0.081, eff=0.11, eff_m=0.29, chain_ms=2.45, host_ms=18.8,
                              host_req_ms=0.05, in_mb=0.6, act=(0.05, 0.67, 2.0), soft=0.12),
    "yolov8n-det": InferJob("YOLOv8n (640 px)", "yolov8n", gflop=8.84, w_gb=0.01, a_gb=0.53,
                            eff=0.27, eff_m=0.50, chain_ms=4.2, host_ms=17.5, host_req_ms=0.3,
                            in_mb=4.9, act=(0.12, 0.61, 5.6), soft=0.10),
    "bert-large": InferJob("BERT-large (seq 128)", "bert-large", gflop=79.1, w_gb=1.33,
                           a_gb=1.38, eff=0.26, eff_m=0.25, chain_ms=0.05, host_ms=15.0,
                           host_req_ms=0.02, in_mb=0.002, act=(0.59, 1.14, 0.5), soft=0.08),
    "lstm-lm": InferJob("LSTM language model (seq 32)", "lstm", gflop=0.12, w_gb=0.034,
                        a_gb=0.001, eff=0.50, eff_m=0.72, chain_ms=1.06, host_ms=0.6,
                        host_req_ms=0.002, in_mb=0.0005, act=(0.27, 0.83, 100.0), soft=0.10),
}


def _clocks(device: Device, modes) -> np.ndarray:
    return (np.asarray([m.as_tuple() for m in modes], float)
            if not isinstance(modes, np.ndarray) else modes)


def infer_truth(device: Device, job: InferJob, b: int, modes) -> tuple[np.ndarray, np.ndarray]:
    """Noise-free (time_ms, power_w) of an inference minibatch of b requests at `modes`."""
    bd: Board = BOARDS[device.name]
    a = _clocks(device, modes)
    n, fc, fg, fm = a[:, 0], a[:, 1] / 1000.0, a[:, 2] / 1000.0, a[:, 3] / 1000.0
    fc_top = device.cpu_mhz[-1] / 1000.0
    xc, xg, xm = fc / fc_top, fg / (device.gpu_mhz[-1] / 1000.0), fm / (device.mem_mhz[-1] / 1000.0)
    lat = bd.lat_ns[0] + bd.lat_ns[1] * xm ** -0.7
    lat_top = bd.lat_ns[0] + bd.lat_ns[1]
    # the Orin AGX's constants carry to another board by its peak and bandwidth
    peak = bd.peak_tflops * xg * job.eff * (1.0 - 0.1 * xg * (1.0 - xm) ** 2)
    bw = bd.bw_gbs * xm ** bd.bw_exp * job.eff_m
    gb = job.w_gb + b * job.a_gb
    t_comp = b * job.gflop / peak
    t_mem = gb / bw * 1000.0
    t_work = _softmax(t_comp, t_mem, job.soft)
    scale = BOARDS["orin-agx"].peak_tflops / bd.peak_tflops
    t_chain = job.chain_ms * scale ** 0.5 * (0.7 / xg + 0.3 * lat / lat_top)
    t_gpu = t_chain + t_work
    noise = (1.0 + 0.4 / n) / (1.0 + 0.4 / device.max_cores)
    t_host = ((job.host_ms + b * job.host_req_ms) / (xc * bd.cpu_gops)
              * (1.0 + 0.25 * (lat / lat_top - 1.0)) * noise)
    t_copy = b * job.in_mb / 1000.0 / (0.4 * bd.bw_gbs * xm ** bd.bw_exp) * 1000.0
    t = t_copy + _softmax(t_gpu, t_host, 0.06)
    # power
    busy = np.clip(t_gpu / t, 0.0, 1.0)
    lo, hi, bh = job.act
    act = lo + (hi - lo) * b / (b + bh)
    comp = np.clip(t_comp / np.maximum(t_comp, t_mem), 0.0, 1.0)
    vg, vc, ve = _volt_gpu(xg, bd.gpu_v), _volt_cpu(xc, bd.cpu_v), _volt_emc(xm, bd.emc_v)
    p_gpu = bd.gpu_cdyn * vg ** 2 * fg * (busy * act * (0.45 + 0.55 * comp) + 0.05)
    p_cpu = bd.cpu_cdyn * vc ** 2 * fc * (1.0 + 0.08 * (n - 1.0))
    p_mem = bd.emc_cdyn * ve ** 2 * fm + bd.dram_pj * (gb + b * job.in_mb / 1000.0) / (t / 1000.0) * 1e-3
    dyn = p_gpu + p_cpu + p_mem + bd.base_w
    leak0 = bd.leak[0] * vg + bd.leak[1] * vc * n + bd.leak[2] * ve
    temp = np.full(len(n), 40.0)
    total = dyn
    for _ in range(20):
        total = dyn + leak0 * np.exp((temp - 25.0) / bd.t_leak)
        temp = 0.5 * temp + 0.5 * (25.0 + bd.rth * total)
    return t, total * (1.0 + bd.vin_loss)


def standalone_truth(device: Device, job_name: str, infer_name: str, modes,
                     batches: tuple[int, ...] = INFER_BATCHES) -> Standalone:
    """Training alone (indep_corpus) and inference alone at every batch, noise-free, as a ptui
    Standalone (SYNTHETIC)."""
    modes = list(modes)
    job = JOBS[job_name]
    tt, tp, _ = truth(device, job, modes)
    ij = INFER[infer_name]
    im, iw = zip(*(infer_truth(device, ij, b, modes) for b in batches))
    return Standalone(modes, job.batch, np.asarray(tt, float), np.asarray(tp, float), tuple(batches),
                      np.array(im).T, np.array(iw).T)


N_SAMPLES = 16          # power samples a profiled reading averages (a profiler's telemetry)


def standalone_measure(device: Device, job_name: str, infer_name: str, seed: int | None = None,
                       time_sd: float = 0.02, power_sd: float = 0.015):
    """A ptui Measure (modes -> Standalone) on this generator; seed None: noise-free (exact, no
    power_se), else log-normal noise (time_sd, power_sd) drawn per mode from (seed, device, jobs,
    mode).  A noisy power reading is the mean of N_SAMPLES samples whose spread (drawn from another
    seeded stream, centred on the reading) gives the Standalone's power_se, the relative standard
    error a profiler computes from its samples (RMS over the mode's power readings): an estimate
    of power_sd, not the constant."""
    def measure(modes) -> Standalone:
        st = standalone_truth(device, job_name, infer_name, modes)
        if seed is None:
            return st
        k = len(st.batches)
        eps = np.array([_rng(seed, device.name, job_name, infer_name, m.key).normal(0.0, 1.0, 2 + 2 * k)
                        for m in st.modes])
        se = []
        for m in st.modes:
            xi = _rng(seed, "samples", device.name, job_name, infer_name, m.key).normal(
                0.0, 1.0, (1 + k, N_SAMPLES))
            # samples: reading x exp(power_sd sqrt(N) (xi - mean xi)); their log-sd / sqrt(N)
            se.append(float(np.sqrt(np.mean((power_sd * xi.std(axis=1, ddof=1)) ** 2))))
        return Standalone(st.modes, st.train_batch, st.train_ms * np.exp(time_sd * eps[:, 0]),
                          st.train_w * np.exp(power_sd * eps[:, 1]), st.batches,
                          st.infer_ms * np.exp(time_sd * eps[:, 2:2 + k]),
                          st.infer_w * np.exp(power_sd * eps[:, 2 + k:]), np.array(se))
    return measure


def sweep(path: Path = SWEEP_CSV) -> dict[str, list[tuple[int, float, float]]]:
    """The measured MAXN sweep: model -> [(batch, time_ms, power_w)]."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            out.setdefault(r["model"], []).append((int(r["batch_size"]), float(r["observed_time_ms"]),
                                                   float(r["observed_power_w"])))
    return out


GLITCHES = {("resnet50", 32)}     # power logged 18.4 W between 53.5 and 55.4 W


def calibration(path: Path = SWEEP_CSV) -> dict[str, tuple[float, float, float, float]]:
    """Per catalogue model: time MAPE, worst time error, power MAPE, worst power error (%) at
    MAXN against the measured sweep."""
    dev = get_device("orin-agx")
    data = sweep(path)
    out = {}
    for name, job in INFER.items():
        te, pe = [], []
        for b, t, p in data[job.sweep]:
            mt, mp = infer_truth(dev, job, b, [dev.maxn])
            te.append(abs(mt[0] / t - 1.0) * 100.0)
            if (job.sweep, b) not in GLITCHES:
                pe.append(abs(mp[0] / p - 1.0) * 100.0)
        out[name] = (float(np.mean(te)), max(te), float(np.mean(pe)), max(pe))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Independent inference generator (SYNTHETIC)")
    ap.add_argument("--check", action="store_true", help="errors against the measured MAXN sweep")
    ap.add_argument("--summary", action="store_true", help="ranges over PowerTrain's grid")
    a = ap.parse_args(argv)
    if a.check:
        for name, (tm, tw, pm, pw) in calibration().items():
            print(f"{name:14s} time MAPE {tm:5.1f}% (worst {tw:5.1f}%)  power MAPE {pm:5.1f}% (worst {pw:5.1f}%)")
    if a.summary:
        dev = get_device("orin-agx")
        grid = dev.pt_grid()
        mx = grid.index(dev.maxn)
        for name, job in INFER.items():
            for b in (1, 16, 64):
                t, p = infer_truth(dev, job, b, grid)
                print(f"{name:14s} b={b:2d} time {t.min():8.1f}-{t.max():8.1f} ms (x{t.max() / t.min():5.1f}) "
                      f"power {p.min():5.1f}-{p.max():5.1f} W; MAXN {t[mx]:7.1f} ms {p[mx]:5.1f} W "
                      f"(fastest {t.min() / t[mx]:.3f} of MAXN)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
