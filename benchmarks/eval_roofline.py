"""How good is the roofline prior with no profiled mode (issue 25)?  Prints numbers; writes nothing.

For each board and workload, on every mode of PowerTrain's grid, the prior (ptui/core/prediction/roofline.py)
against two noise-free ground truths:
  * sim:   ptui's simulator (ptui/core/board/physics.py) with the catalog workloads; the spec is each
           workload's own FLOPs and DRAM bytes per step (its physics' counts, what a probe of it
           would measure) and its CPU milliseconds per step at the top CPU clock;
  * indep: benchmarks/indep_corpus.py; the spec is derived from each job's parameters (FLOPs and
           bytes per sample and per step, CPU cycles converted to ms at the top clock), never from
           the generator's functional forms.
--spec probe gives the prior what ptui's probe counts (FLOPs, bytes, input MB, workers; no CPU
timing), --spec counts FLOPs, bytes and batch size alone (the issue's SPEC.json): the CPU work it
lacks is then the reference's.  --spec published: the catalog workloads with a published MAXN
step, each with the prior a catalog --workload gets (anchored_spec) and predicted as a model of
that prior alone predicts (RooflinePrior.predictive: `ptui fit --workload W` without a profile,
`ptui tune --workload W --count 0`); sim only.
Metrics: time and power MAPE over the grid; budget decisions: for each budget (1 W steps) the
fastest mode whose predicted power stays within the budget with P(power > budget) <= 0.05
(pareto.choose, risk 0.05) against the true fastest mode within the budget: penalty = true time of
the pick / true best - 1; "over" counts picks whose true power exceeds the budget + 1 W.  The
"mean rule" columns decide on the predicted mean power alone (no risk rule), to show how much of
the penalty the prior's spread costs.
Budgets: 17-50 W on Orin AGX and Xavier AGX; 5-14 W on Orin Nano (whose grid never draws 17 W).

Run: python benchmarks/eval_roofline.py [--device D ...] [--spec full|probe|counts]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import indep_corpus  # noqa: E402

from ptui.core.board.physics import DEVICE_PHYSICS, WORKLOAD_PHYSICS, steady_state  # noqa: E402
from ptui.core.catalogue.devices import get_device  # noqa: E402
from ptui.core.catalogue.workloads import WORKLOADS, get_workload  # noqa: E402
from ptui.core.decision.pareto import InfeasibleError, Table, choose  # noqa: E402
from ptui.core.prediction.gp import raw_modes  # noqa: E402
from ptui.core.prediction.roofline import RooflinePrior, WorkloadSpec, anchored_spec  # noqa: E402

DEVICES = ("orin-agx", "xavier-agx", "orin-nano")
SPECS = {"full": "FLOPs, bytes, batch, CPU ms at the top clock",
         "probe": "FLOPs, bytes, batch, input MB, workers (what the probe counts)",
         "counts": "FLOPs, bytes, batch only (the issue's SPEC.json)",
         "published": "a catalog workload's published counts and MAXN step (anchored_spec), as a "
                      "prior-only model predicts"}
RISK = 0.05


def budgets(device: str) -> np.ndarray:
    return np.arange(5, 15, 1.0) if device == "orin-nano" else np.arange(17, 51, 1.0)


def sim_spec(dev, name: str, kind: str) -> WorkloadSpec:
    """A catalog workload's own counts: FLOPs and DRAM bytes per step; "probe": plus the input MB
    a step loads (what ptui's what-if reads as the probe's input bytes: half the loader's DRAM
    traffic, userscript.whatif_workload) and its workers; "full": plus the CPU time of its main
    thread and its data loading at the top CPU and EMC clocks (cycles / clock + DRAM misses x
    latency), as one timed step would show them."""
    wl, wp, dp = get_workload(name), WORKLOAD_PHYSICS[name], DEVICE_PHYSICS[dev.name]
    B = wl.batch_size
    gflop, gb = wp.gflop * B, wp.gb_per_sample * B + wp.gb_fixed
    if kind == "counts":
        return WorkloadSpec(gflop, gb, B)
    if kind == "probe":
        return WorkloadSpec(gflop, gb, B, input_mb=B * wp.data_mb / 2.0, workers=wl.workers)
    ghz, lat = dev.cpu_mhz[-1] / 1000.0, dp.lat0_ns + dp.lat1_ns
    host = wp.host_mcycles / (ghz * dp.cpu_ipc) + wp.host_misses_k * lat * 1e-3
    load = B * (wp.data_mcycles / (ghz * dp.cpu_ipc) + wp.data_misses_k * lat * 1e-3)
    return WorkloadSpec(gflop, gb, B, host_ms=host, loader_ms=load, workers=wl.workers)


def indep_spec(dev, job, kind: str) -> WorkloadSpec:
    """An independent job's counts from its parameters: FLOPs and GPU DRAM bytes per step;
    "probe": plus the MB of input copied to the GPU per step and its workers; "full": plus CPU
    milliseconds at the top CPU clock: launches (host, while the GPU runs), the main thread's work
    while the GPU waits (serial) and the loader's per-sample work (loader)."""
    B = job.batch
    gflop, gb = job.gflop * B, job.gb_sample * B + job.gb_step
    if kind == "counts":
        return WorkloadSpec(gflop, gb, B)
    if kind == "probe":
        return WorkloadSpec(gflop, gb, B, input_mb=B * job.h2d_mb, workers=job.workers)
    ghz = dev.cpu_mhz[-1] / 1000.0
    gops = indep_corpus.BOARDS[dev.name].cpu_gops
    launches = job.kernels * job.launch_kcyc / 1e3 / (ghz * gops)
    serial = job.serial_ms + B * job.serial_mcyc_sample / (ghz * gops)
    load = B * job.load_mcyc / (ghz * gops)
    return WorkloadSpec(gflop, gb, B, host_ms=launches, serial_ms=serial, loader_ms=load,
                        workers=job.workers)


def decisions(dev_name: str, modes, pred: dict, t: np.ndarray, p: np.ndarray,
              risk: float | None = RISK) -> dict:
    """Penalties (%) and over-budget picks of the budget decisions from a prediction (risk None:
    the fastest mode whose predicted mean power is within the budget)."""
    table = Table.from_prediction(modes, pred)
    pen, over, infeasible = [], 0, 0
    for b in budgets(dev_name):
        ok = p <= b
        if not ok.any():
            continue
        best = t[ok].min()
        try:
            i = choose(table, budget_w=float(b), risk=risk).index
        except InfeasibleError:
            infeasible += 1
            i = int(np.argmin(pred["power_w"]))
        pen.append(t[i] / best - 1.0)
        over += bool(p[i] > b + 1.0)
    pen = np.array(pen) * 100
    return {"n": len(pen), "median": float(np.median(pen)) if len(pen) else float("nan"),
            "worst": float(pen.max()) if len(pen) else float("nan"), "over": over,
            "infeasible": infeasible}


def score(dev, modes, prior: RooflinePrior, t: np.ndarray, p: np.ndarray, predictive: bool = False) -> dict:
    pred = prior.predictive(modes) if predictive else prior.predict(modes)
    r = {"time": float(np.mean(np.abs(pred["time_ms"] / t - 1)) * 100),
         "power": float(np.mean(np.abs(pred["power_w"] / p - 1)) * 100)}
    z = 1.6448536269514722
    for k, y in (("time", t), ("power", p)):
        mu, sd = pred[f"{k}_ms" if k == "time" else "power_w"], pred[f"{k}_ms_std" if k == "time" else "power_w_std"]
        lsd = np.sqrt(np.log1p((sd / mu) ** 2))
        r[f"{k}_cov90"] = float(np.mean(np.abs(np.log(y / mu)) <= z * lsd) * 100)
    r.update(decisions(dev.name, modes, pred, t, p))
    mean = decisions(dev.name, modes, pred, t, p, risk=None)
    r["mean_median"], r["mean_over"] = mean["median"], mean["over"]
    return r


def rows(dev_names, kind: str):
    for d in dev_names:
        dev = get_device(d)
        modes = dev.pt_grid()
        A = raw_modes(modes)
        for name in WORKLOADS:
            op = steady_state(dev, get_workload(name), *A.T, tpc=dev.gpu_tpcs)
            if kind == "published":
                spec = anchored_spec(get_workload(name))
                if spec.published:
                    yield "sim", d, name, score(dev, modes, RooflinePrior(dev, spec), op.time_ms,
                                                op.power_w, predictive=True)
                continue
            prior = RooflinePrior(dev, sim_spec(dev, name, kind))
            yield "sim", d, name, score(dev, modes, prior, op.time_ms, op.power_w)
        if kind == "published":
            continue
        for name, job in indep_corpus.JOBS.items():
            t, p, _ = indep_corpus.truth(dev, job, A)
            prior = RooflinePrior(dev, indep_spec(dev, job, kind))
            yield "indep", d, name, score(dev, modes, prior, t, p)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", action="append", choices=DEVICES)
    ap.add_argument("--spec", choices=sorted(SPECS), default="full",
                    help="what the prior is given (default: full)")
    a = ap.parse_args(argv)
    print(f"roofline prior, 0 profiled modes, PowerTrain grid; spec: {SPECS[a.spec]}")
    print(f"{'truth':6} {'board':10} {'workload':12} {'time %':>7} {'power %':>7} {'cov90 t/p %':>12} "
          f"{'budgets':>7} {'med pen %':>9} {'worst %':>8} {'over+1W':>7} {'infeas':>6} "
          f"{'mean rule: med pen %':>20} {'over+1W':>7}")
    summary: dict = {}
    for truth, d, name, r in rows(a.device or DEVICES, a.spec):
        print(f"{truth:6} {d:10} {name:12} {r['time']:7.1f} {r['power']:7.1f} "
              f"{r['time_cov90']:5.0f}/{r['power_cov90']:<5.0f}  {r['n']:7d} {r['median']:9.1f} "
              f"{r['worst']:8.1f} {r['over']:7d} {r['infeasible']:6d} {r['mean_median']:20.1f} "
              f"{r['mean_over']:7d}", flush=True)
        summary.setdefault((truth, d), []).append(r)
    print("\nper board (mean MAPE over workloads; medians and worst pooled over budgets' picks "
          "per workload: the median of the workloads' medians, the worst of their worsts)")
    for (truth, d), rs in summary.items():
        print(f"{truth:6} {d:10} time {np.mean([r['time'] for r in rs]):5.1f} % "
              f"(worst {max(r['time'] for r in rs):5.1f})  power {np.mean([r['power'] for r in rs]):4.1f} % "
              f"(worst {max(r['power'] for r in rs):4.1f})  penalty median "
              f"{np.median([r['median'] for r in rs]):4.1f} % worst {max(r['worst'] for r in rs):5.1f} %  "
              f"over+1W {sum(r['over'] for r in rs)}/{sum(r['n'] for r in rs)}  (mean rule: median "
              f"{np.median([r['mean_median'] for r in rs]):4.1f} %, over+1W "
              f"{sum(r['mean_over'] for r in rs)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
