"""Sweep of the concurrent decision (training beside inference) on the SIMULATED Orin AGX.

For each training workload x inference workload x rate x latency budget x power budget: the walk's
pick (<= 15 profiled modes) and the exhaustive optimum over PowerTrain's grid x inference batches
(where none exists, the optimum without the decision's tail margin, and its event run);
the walk's pick is checked by the event-driven schedule (decision.concurrent.simulate, 300 s of
Poisson arrivals): it meets both budgets when <= 1 % of requests are late and the mean power is
within the budget.  Prints: feasible cases, share of picks meeting both budgets, throughput vs
the optimum (mean, worst), modes profiled per decision.

With --truth indep the board is benchmarks/indep_inference.py's (SYNTHETIC, not ptui's physics:
its training jobs, its inference models): the walk profiles it (noise-free, or with --noise K its
seeded measurement noise), the optimum, the baselines and the event-driven check use its noise-free
figures; the walk's throughput is its pick's on the truth.  --out FILE writes one JSON line a case.

Run: python benchmarks/eval_concurrent.py [--truth sim|indep] [--noise K] [--limit N] [--seed S]
     [--out FILE] [--shard I/K]   (N: a random subset of cases; I/K: every K-th of them from the I-th,
     whose event runs are seeded by the case's index, so shards add up to one run)
     python benchmarks/eval_concurrent.py --summarize FILE...   (the figures of --out files)
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from ptui.core.board.inference import calibrate
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.inference import INFERENCE
from ptui.core.catalogue.workloads import WORKLOADS, get_workload
from ptui.core.decision import concurrent
from ptui.core.decision.concurrent import decide, poisson_arrivals, predict, simulate
from ptui.core.decision.pareto import InfeasibleError
from ptui.core.usecases.colocate import exhaustive, source, walk

sys.path.insert(0, str(Path(__file__).resolve().parent))

RATES = (5.0, 20.0, 50.0)
LATENCY = (100.0, 250.0, 1000.0)
POWER = (25.0, 35.0, 50.0)


def _sources(dev, truth: str, noise: int | None):
    """(training workloads, case -> (what the walk measures, the truth)) of a board."""
    if truth == "indep":
        import indep_inference as ii
        if not ii.SWEEP_CSV.exists():
            print(f"indep calibration: {ii.SWEEP_CSV} not found, not checked")
        for n, (tm, tw, pm, pw) in (ii.calibration() if ii.SWEEP_CSV.exists() else {}).items():
            print(f"indep calibration {n:14s} time MAPE {tm:4.1f}% (max {tw:4.1f}%)  power MAPE "
                  f"{pm:4.1f}% (max {pw:4.1f}%)  (SYNTHETIC generator vs the measured MAXN sweep)")
        return list(ii.JOBS), lambda tw, iw: (ii.standalone_measure(dev, tw, iw, noise),
                                              ii.standalone_measure(dev, tw, iw))
    for n in INFERENCE:
        c = calibrate(n)
        print(f"calibration {n:14s} time MAPE {c.time_mape:4.1f}% (max {c.time_max_err:4.1f}%)  "
              f"power MAPE {c.power_mape:4.1f}% (max {c.power_max_err:4.1f}%)")

    def sim(tw, iw):
        m = source(dev, get_workload(tw), iw)
        return m, m
    return list(WORKLOADS), sim


def run_case(dev, case, meas, truth, ev_seed: int, lost_seed: int) -> dict:
    """One case: the optimum on the truth (else the no-margin optimum and its event run), the walk
    on `meas`, the baselines on the truth, the pick's event run on the truth; a JSON-able row."""
    tw, iw, rate, lat, pw = case
    row: dict = {"case": [tw, iw, rate, lat, pw]}
    try:
        opt, _st, _ = exhaustive(dev, None, iw, rate, lat, pw, truth)
    except InfeasibleError:
        opt = None
        # feasible without the tail margin? (what the margin gives up, and whether that pick
        # would have held in the event run)
        k, concurrent.TAIL_K = concurrent.TAIL_K, 0.0
        try:
            o0, _st, _ = exhaustive(dev, None, iw, rate, lat, pw, truth)
            s0 = simulate(truth([o0.mode]), 0, poisson_arrivals(rate, 300.0, seed=lost_seed), lat, o0.batch)
            row["lost_ok"] = bool((s0.over_budget <= 0.01) and (s0.power_w <= pw * 1.005))
        except InfeasibleError:
            pass
        finally:
            concurrent.TAIL_K = k
    try:
        pick, n = walk(dev, None, iw, rate, lat, pw, measure=meas)
    except InfeasibleError:
        pick, n = None, 15
    row.update(profiled=n, walk=None if pick is None else [pick.mode.key, pick.batch],
               optimum=None if opt is None else [opt.mode.key, opt.batch, round(opt.prediction.train_sps, 4)])
    if opt is None:
        return row
    try:
        row["preset"] = decide(truth([p.mode for p in dev.presets]), rate, lat,
                               pw).prediction.train_sps / opt.prediction.train_sps
    except InfeasibleError:
        row["preset"] = 0.0
    try:
        row["maxn_ok"] = decide(truth([dev.maxn]), rate, lat, pw) is not None
    except InfeasibleError:
        row["maxn_ok"] = False
    if pick is None:
        row["ratio"] = 0.0
        return row
    st = truth([pick.mode])
    sim = simulate(st, 0, poisson_arrivals(rate, 300.0, seed=ev_seed), lat, pick.batch)
    # the pick's throughput on the truth (the walk's own figure where it measured the truth)
    row.update(ratio=predict(st, 0, rate, lat, pick.batch).train_sps / opt.prediction.train_sps,
               met=bool((sim.over_budget <= 0.01) and (sim.power_w <= pw * 1.005)),
               late=sim.over_budget, power_w=sim.power_w)
    return row


def summary(rows: list[dict]) -> None:
    """The sweep's figures from its rows."""
    feas = [r for r in rows if r["optimum"] is not None]
    picked = [r for r in feas if r["walk"] is not None]
    met = sum(r["met"] for r in picked)
    late = sum(r["late"] > 0.01 for r in picked)
    hot = sum(r["power_w"] > r["case"][4] * 1.005 for r in picked)
    lost = [r for r in rows if "lost_ok" in r]
    r = np.array([x["ratio"] for x in feas] or [np.nan])      # no feasible case: the figures read nan
    pr_ = np.array([x["preset"] for x in feas] or [np.nan])
    profiled = [x["profiled"] for x in rows]
    print(f"cases {len(rows)}  feasible (exhaustive) {len(feas)}  infeasible both "
          f"{sum(x['optimum'] is None and x['walk'] is None for x in rows)}  walk found none where "
          f"feasible {len(feas) - len(picked)}  walk picked where the optimum found none "
          f"{sum(x['optimum'] is None and x['walk'] is not None for x in rows)}")
    print(f"picks meeting both budgets (event sim) {met}/{len(picked)} = "
          f"{100.0 * met / max(len(picked), 1):.1f}%  (over 1 % late: {late}, mean power over budget "
          f"+ 0.5 %: {hot})")
    print(f"cases feasible only without the tail margin {len(lost)} (their no-margin optimum meets both "
          f"budgets in the event run in {sum(x['lost_ok'] for x in lost)})")
    print(f"throughput vs optimum: mean {100 * r.mean():.2f}%  worst {100 * r.min():.2f}%  "
          f"(loss mean {100 * (1 - r.mean()):.2f}%)")
    rp = np.array([x["ratio"] for x in picked] or [np.nan])
    print(f"... over the picks only: mean {100 * rp.mean():.2f}%  worst {100 * rp.min():.2f}%")
    print(f"baseline best NVIDIA preset: mean {100 * pr_.mean():.2f}% of the optimum, "
          f"none feasible in {int((pr_ == 0).sum())}/{len(feas)}; MAXN (any batch) meets both budgets in "
          f"{sum(x['maxn_ok'] for x in feas)}/{len(feas)}")
    print(f"walk ratio quartiles: {np.nanpercentile(r, [25, 50, 75]).round(4).tolist()}, "
          f"cases within 3 %: {int((r >= 0.97).sum())}/{len(feas)}")
    print(f"modes profiled per decision: mean {np.mean(profiled):.1f}  max {max(profiled)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--truth", choices=("sim", "indep"), default="sim")
    ap.add_argument("--noise", type=int, default=None, help="indep: the walk's measurements noisy (seed)")
    ap.add_argument("--out", default=None, help="one JSON line per case")
    ap.add_argument("--shard", default=None, help="I/K: every K-th case from the I-th")
    ap.add_argument("--summarize", nargs="+", default=None, help="--out files to summarise")
    a = ap.parse_args()
    if a.summarize:
        summary([json.loads(x) for f in a.summarize for x in open(f) if x.strip()])
        return
    dev = get_device("orin-agx")
    trains, sources = _sources(dev, a.truth, a.noise)
    cases = list(itertools.product(trains, INFERENCE, RATES, LATENCY, POWER))
    if a.limit:
        cases = random.Random(a.seed).sample(cases, a.limit)
    idx = list(range(len(cases)))
    if a.shard:
        i, k = (int(x) for x in a.shard.split("/"))
        idx = idx[i::k]
    log = open(a.out, "w") if a.out else None
    rows: list[dict] = []
    n_ok = n_lost = 0
    t0 = time.time()
    for j in idx:
        meas, truth = sources(*cases[j][:2])
        # unsharded: the event runs seeded as before (by the count of picks and of lost cases)
        row = run_case(dev, cases[j], meas, truth, j if a.shard else n_ok, j if a.shard else 1000 + n_lost)
        n_ok += "ratio" in row
        n_lost += "lost_ok" in row
        rows.append(row)
        if log:
            print(json.dumps(row), file=log, flush=True)
    summary(rows)
    print(f"wall {time.time() - t0:.0f} s  cpu {time.process_time():.0f} s  truth {a.truth}"
          f"{'' if a.noise is None else f' (walk measures with noise, seed {a.noise})'}")


if __name__ == "__main__":
    main()
