"""Batch size as a knob (issue 11): time-to-target penalty of ptui's joint (mode, batch size)
choice against the true optimum, and of the two baselines, on Orin AGX budgets 17-50 W.

For each workload: profile <= 100 random (mode, batch size) pairs over PowerTrain's grid x the
batch sizes that fit (noisy measurements of the ground truth), fit ptui's batch-aware GP (the
bundled ResNet-18 reference as the prior, as `ptui fit` does), then decide per budget with
`ptui pareto --batch-sizes`'s rule (risk 0.05) over the whole mode space x the sizes:
  * joint      : ptui's (mode, batch) with least predicted time to target within the budget;
  * fixed-16   : the best mode at batch 16 (PowerTrain's protocol), same model;
  * paper      : the largest batch that fits, at the fastest mode under the cap (same model);
  * oracle-16  : the true best mode at batch 16 (what the batch knob alone is worth).
Penalty = true time to target of the choice / true optimum over (mode, batch) within the budget
- 1; "over" counts choices whose true power exceeds the budget + 1 W.

Ground truths: ptui's simulator (physics.py, memory model included) and, where cheap, the
independent generator of benchmarks/indep_corpus.py (its jobs with the batch replaced; it has no
memory model: every size is taken to fit).  Samples to target: throughput only (relative samples
1) and the noise-scale model E(B) ~ 1 + B / B_noise.

Run: python benchmarks/eval_batch.py [--pairs 100] [--sizes 8,16,32,64] [--noise-scale 64]
         [--source sim,indep] [--workloads resnet18,...] [--seed 0]
         [--candidates profiled|full|pt]
Prints numbers only; nothing is written.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ptui.core.catalogue.devices import get_device  # noqa: E402
from ptui.core.decision import batch as bt  # noqa: E402
from ptui.core.decision.pareto import InfeasibleError, choose  # noqa: E402
from ptui.core.prediction.fit import fit_model  # noqa: E402
from ptui.core.prediction.predictor import load_bundled  # noqa: E402

BUDGETS = (17, 20, 25, 30, 35, 40, 45, 50)
SIM_WORKLOADS = ("resnet18", "mobilenetv3", "yolov8n", "bert-base", "lstm")


class Truth:
    """Noise-free time and power of (modes array [n, 4], batch) and which sizes fit."""

    def __init__(self, source: str, device, name: str):
        self.source, self.device, self.name = source, device, name
        if source == "sim":
            from ptui.core.catalogue.workloads import get_workload
            self.w = get_workload(name)
        else:
            import indep_corpus
            self.ic = indep_corpus
            self.job = indep_corpus.JOBS[name]

    def __call__(self, A: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
        if self.source == "sim":
            from ptui.core.board.physics import steady_state
            op = steady_state(self.device, self.w.with_batch(b), A[:, 0], A[:, 1], A[:, 2], A[:, 3],
                              batch_size=b)
            return np.asarray(op.time_ms, float), np.asarray(op.power_w, float)
        t, p, _ = self.ic.truth(self.device, replace(self.job, batch=b), A)
        return np.asarray(t, float), np.asarray(p, float)

    def fits(self, b: int) -> bool:
        if self.source == "sim":
            from ptui.core.board.physics import fits
            return bool(fits(self.device, self.w, b))
        return True

    @property
    def samples(self) -> float:
        return float(self.w.samples) if self.source == "sim" else 50_000.0


def run_one(truth: Truth, sizes, pairs: int, seed: int, rels: dict, risk: float = 0.05,
            candidates: str = "full"):
    dev = truth.device
    sizes = [b for b in sizes if truth.fits(b)]
    rng = np.random.default_rng(seed)
    grid = np.array([m.as_tuple() for m in dev.pt_grid()], float)
    space = [(i, b) for b in sizes for i in range(len(grid))]
    pick = rng.choice(len(space), size=min(pairs, len(space)), replace=False)
    A = np.array([grid[space[k][0]] for k in pick])
    B = np.array([space[k][1] for k in pick])
    t = np.empty(len(A))
    p = np.empty(len(A))
    for b in sizes:
        s = B == b
        if s.any():
            t[s], p[s] = truth(A[s], b)
    t *= np.exp(rng.normal(0, 0.01, len(t)))        # a profiled median of >= 40 steps
    p *= np.exp(rng.normal(0, 0.01, len(p)))
    modes = [dev.mode(*row) for row in A]
    t0 = time.perf_counter()
    model = fit_model(load_bundled(), dev, modes, t, p, method="gp", seed=seed,
                      workload=truth.name if truth.source == "sim" else "custom", batch_sizes=B)
    fit_s = time.perf_counter() - t0
    model.meta["batch_size"] = bt.default_batch(sizes)
    model.measured = {"modes": A, "time_ms": t, "power_w": p, "time_ms_std": np.zeros(len(t)),
                      "power_w_std": np.zeros(len(t)), "batch_size": B.astype(float)}
    if candidates == "profiled":        # what ptui pareto decides among (Model.decision_space)
        full, _ = model.decision_space()
    else:
        full = dev.full_space() if candidates == "full" else dev.pt_grid()
    FA = np.array([m.as_tuple() for m in full], float)
    jt = bt.joint_table(model, full, sizes)               # all sizes here fit (filtered above)
    true_t = np.concatenate([truth(FA, b)[0] for b in sizes])
    true_p = np.concatenate([truth(FA, b)[1] for b in sizes])
    largest = float(max(sizes))
    out = {}
    for rname, rel in rels.items():
        r_true = rel.relative(jt.batch, largest)
        ttt = true_t / jt.batch * r_true
        rows = []
        for W in BUDGETS:
            ok = true_p <= W
            if not ok.any():
                continue
            best = ttt[ok].min()
            row = {"budget": W}
            kw = dict(budget_w=W, risk=risk, samples=1.0)
            for tag, fn in (("joint", lambda: choose(jt, relation=rel, **kw)),
                            ("fixed16", lambda: bt.fixed_batch(jt, rel, 16, **kw)),
                            ("paper", lambda: bt.paper_baseline(jt, rel, **kw))):
                try:
                    c = fn()
                except InfeasibleError:
                    c = None
                if c is None:
                    row[tag] = (np.nan, False)
                else:
                    row[tag] = (ttt[c.index] / best - 1.0, bool(true_p[c.index] > W + 1.0))
            s16 = ok & (jt.batch == 16)
            row["oracle16"] = ((ttt[s16].min() / best - 1.0) if s16.any() else np.nan, False)
            row["best_bs"] = int(jt.batch[ok][np.argmin(ttt[ok])])
            rows.append(row)
        out[rname] = rows
    return out, fit_s, sizes


def run_active(truth: Truth, sizes, rels: dict, budgets, count: int, seed: int) -> dict:
    """`ptui profile --batch-sizes --strategy active --budget-w W` against the truth (1 % noise on
    each measured pair), then the decision it leads to (measured pairs count); penalty against
    the true optimum over PowerTrain's grid x the sizes (its candidates).  Returns
    {rel name: [{"budget", "active": (penalty, over), "n": pairs profiled}]}."""
    from ptui.core.profiling.active import joint_active_offline
    dev = truth.device
    sizes = [b for b in sizes if truth.fits(b)]
    grid = dev.pt_grid()
    GA = np.array([m.as_tuple() for m in grid], float)
    tt = {b: truth(GA, b) for b in sizes}
    pos = {m.as_tuple(): i for i, m in enumerate(grid)}
    out = {}
    for rname, rel in rels.items():
        rows = []
        for W in budgets:
            rng = np.random.default_rng(seed)
            taken = []

            def measure(m, b, rng=rng, taken=taken):
                i = pos[m.as_tuple()]
                t = float(tt[b][0][i]) * float(np.exp(rng.normal(0, 0.01)))
                p = float(tt[b][1][i]) * float(np.exp(rng.normal(0, 0.01)))
                c, f, g, e = m.as_tuple()
                taken.append({"cores": c, "cpu_mhz": f, "gpu_mhz": g, "mem_mhz": e, "batch_size": b,
                              "time_ms": t, "power_w": p})
                return t, p
            order, why, pl = joint_active_offline(dev, grid, sizes, measure, goal={"budget_w": W},
                                                  rel=rel, count=count, reference=load_bundled(),
                                                  seed=seed)
            largest = float(max(sizes))
            ttt = {b: tt[b][0] / b * rel.relative(b, largest) for b in sizes}
            feas = [ttt[b][tt[b][1] <= W] for b in sizes]
            feas = np.concatenate(feas)
            if not len(feas):
                continue
            row = {"budget": W, "n": len(order)}
            k = pl.decide(taken)
            if k is None:
                row["active"] = (np.nan, False)
            else:
                m, b = pl.candidates[k]
                i = pos[m.as_tuple()]
                row["active"] = (float(ttt[b][i] / feas.min() - 1.0), bool(tt[b][1][i] > W + 1.0))
            m, b = tune_pick(dev, taken, sizes, rel, W, seed)
            if m is None:
                row["tune"] = (np.nan, False)
            else:
                t1, p1 = truth(np.array([m.as_tuple()], float), b)
                row["tune"] = (float(t1[0] / b * rel.relative(b, largest) / feas.min() - 1.0),
                               bool(p1[0] > W + 1.0))
            rows.append(row)
        out[rname] = rows
    return out


def tune_pick(dev, taken: list[dict], sizes, rel, budget_w: float, seed: int):
    """What `ptui tune --batch-sizes --budget-w W --method gp` decides from the profiled pairs
    (session.tune_decide_batches without the CSV): the batch-aware fit with measured pairs kept,
    among the modes whose knob values were profiled x the sizes, risk 0.05, cautious ranking.
    Returns (mode, batch size), or (None, None) when nothing qualifies."""
    from ptui.core.profiling.active import measured_from_rows
    B = np.array([int(r["batch_size"]) for r in taken])
    A = np.array([[r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"]] for r in taken], float)
    model = fit_model(load_bundled(), dev, A, [r["time_ms"] for r in taken],
                      [r["power_w"] for r in taken], method="gp", seed=seed,
                      measured=dict(measured_from_rows(taken), batch_size=B), batch_sizes=B)
    model.meta["batch_size"] = bt.default_batch(sorted(set(B.tolist())))
    modes, _ = model.decision_space()
    try:
        r = bt.decide_in(bt.model_space(model, tuple(sizes), modes), tuple(sizes), rel,
                         budget_w=budget_w, risk=0.05, cautious=True)
    except InfeasibleError:
        return None, None
    return r.pick.mode, r.pick.batch_size


def markdown(agg: dict, a, wall_s: float) -> list[str]:
    """The summary as a markdown section for docs/accuracy.md."""
    names = {"joint": "ptui joint (mode, batch)", "fixed16": "best mode at batch 16 (same model)",
             "paper": "paper baseline: largest batch that fits, fastest mode under the cap",
             "oracle16": "true best mode at batch 16 (oracle)",
             "active": f"ptui active over (mode, batch), <= {a.active} pairs per goal: the planner's pick",
             "tune": f"ptui active over (mode, batch), <= {a.active} pairs per goal: what `ptui tune "
                     f"--batch-sizes` decides and applies"}
    L = ["## Batch size as a knob: time to target (Orin AGX, budgets 17-50 W)", "",
         f"Generated by `python benchmarks/eval_batch.py --pairs {a.pairs} --sizes {a.sizes} "
         f"--noise-scale {a.noise_scale:g} --source {a.source} --seed {a.seed} --candidates "
         f"{a.candidates}" + (f" --active {a.active} --active-budgets {a.active_budgets}" if a.active
                                else "") + f"` ({time.strftime('%Y-%m-%d', time.gmtime())}, {wall_s:.0f} s on 2 shared "
         "CPU cores). SYNTHETIC ground truth, no hardware: **sim** = ptui's simulator (memory model "
         "and small-batch GPU efficiency included; sizes that do not fit are left out), **indep** = "
         "benchmarks/indep_corpus.py's jobs with the batch replaced (no memory model).", "",
         f"Per workload: {a.pairs} random (mode, batch size) pairs on PowerTrain's grid, measured "
         "with 1 % noise, fitted with ptui's batch-aware GP (the bundled reference as prior), then "
         "one decision per budget (17, 20, 25, ..., 50 W) with risk 0.05 among the modes whose knob "
         "values were all profiled x the sizes (what `ptui pareto --batch-sizes` does). 'True' is the "
         "generator's noise-free value (the expected grading of docs/accuracy.md; the methods see only "
         "the noisy measurements of the pairs they profiled). Penalty = true time to "
         "target of the choice / the true optimum over (mode, batch size) within the budget - 1 "
         "(negative = faster than the optimum, possible only by exceeding the budget). Samples to "
         f"target: **throughput** (relative samples 1 at every size) and **noise{a.noise_scale:g}** "
         f"(E(B) ~ 1 + B / {a.noise_scale:g}, McCandlish et al. 2018)."
         + (f" **Active** rows: `ptui profile --batch-sizes --strategy active --budget-w W` at "
            f"budgets {a.active_budgets} W, at most {a.active} pairs chosen for each budget (1 % "
            "noise), then two decisions from those pairs: the planner's own (GPs, PowerTrain's grid x "
            "the sizes) and the one `ptui tune --batch-sizes --method gp` applies (the batch-aware "
            "fit, modes whose knob values were profiled x the sizes, risk 0.05, cautious ranking: a "
            "pair the model knows little about does not beat a measured one on its median alone). "
            "Both against the true optimum over PowerTrain's grid x the sizes (tune may pick a mode "
            f"off that grid). Pairs profiled per goal: {a.active_pairs}."
            if a.active else ""), "",
         "| corpus | samples to target | method | decisions | median % | Q3 % | worst % | "
         "over budget + 1 W % |", "|---|---|---|---|---|---|---|---|"]
    order = ("joint", "tune", "active", "fixed16", "paper", "oracle16")
    for (source, rname, k), vals in sorted(agg.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                         order.index(kv[0][2]))):
        pen = np.array([v[0] for v in vals], float)
        pen = pen[np.isfinite(pen)] * 100
        over = np.mean([v[1] for v in vals]) * 100
        if len(pen):
            L.append(f"| {source} | {rname} | {names[k]} | {len(pen)} | {np.median(pen):.1f} | "
                     f"{np.percentile(pen, 75):.1f} | {pen.max():.1f} | {over:.1f} |")
    return L


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--sizes", default="8,16,32,64")
    ap.add_argument("--noise-scale", type=float, default=64.0)
    ap.add_argument("--source", default="sim,indep")
    ap.add_argument("--workloads", default=None, help="comma-separated (default: all of a source)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--candidates", choices=("profiled", "full", "pt"), default="profiled",
                    help="modes decided over: those whose knob values were all profiled (what ptui "
                    "pareto does), the whole space (pareto --extrapolate) or PowerTrain's grid (where the "
                    "pairs are drawn)")
    ap.add_argument("--active", type=int, default=0, metavar="N",
                    help="also run active profiling over (mode, batch) with at most N pairs per goal")
    ap.add_argument("--active-budgets", default="20,30,40", help="budgets for the active rows")
    ap.add_argument("--markdown", metavar="FILE",
                    help="also write the summary as a markdown section (docs/accuracy-batch.md, "
                    "which benchmarks/evaluate.py includes in docs/accuracy.md)")
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    dev = get_device("orin-agx")
    sizes = bt.parse_batch_sizes(a.sizes)
    rels = {"throughput": bt.SamplesToTarget.throughput(),
            f"noise{a.noise_scale:g}": bt.SamplesToTarget.from_noise_scale(a.noise_scale)}
    agg: dict = {}
    npairs: list[int] = []
    for source in a.source.split(","):
        if source == "sim":
            names = SIM_WORKLOADS
        else:
            import indep_corpus
            names = tuple(indep_corpus.JOBS)
        if a.workloads:
            names = tuple(n for n in a.workloads.split(",") if n in names)
        for name in names:
            truth = Truth(source, dev, name)
            res, fit_s, used = run_one(truth, sizes, a.pairs, a.seed, rels, candidates=a.candidates)
            print(f"\n== {source} / {name}: {a.pairs} pairs over batch sizes "
                  f"{','.join(map(str, used))} (fit {fit_s:.1f} s)")
            for rname, rows in res.items():
                print(f"  samples to target: {rname}")
                print(f"  {'W':>4} {'best bs':>7} {'joint %':>8} {'fixed16 %':>10} {'paper %':>8} "
                      f"{'oracle16 %':>10}   over(+1 W): joint/fixed16/paper")
                for r in rows:
                    f = lambda k: f"{100 * r[k][0]:.1f}" if np.isfinite(r[k][0]) else "-"  # noqa: E731
                    print(f"  {r['budget']:>4} {r['best_bs']:>7} {f('joint'):>8} {f('fixed16'):>10} "
                          f"{f('paper'):>8} {f('oracle16'):>10}   "
                          f"{int(r['joint'][1])}/{int(r['fixed16'][1])}/{int(r['paper'][1])}")
                    for k in ("joint", "fixed16", "paper", "oracle16"):
                        agg.setdefault((source, rname, k), []).append(r[k])
            if a.active:
                t1 = time.perf_counter()
                budgets = [float(x) for x in a.active_budgets.split(",")]
                for rname, rows in run_active(truth, sizes, rels, budgets, a.active, a.seed).items():
                    for r in rows:
                        agg.setdefault((source, rname, "active"), []).append(r["active"])
                        agg.setdefault((source, rname, "tune"), []).append(r["tune"])
                        npairs.append(r["n"])
                        print(f"  active {rname} {r['budget']:g} W: {r['n']} pairs, penalty "
                              f"{100 * r['active'][0]:.1f} % (tune's decision "
                              f"{100 * r['tune'][0]:.1f} %), over +1 W {int(r['active'][1])}/"
                              f"{int(r['tune'][1])}")
                print(f"  (active: {time.perf_counter() - t1:.0f} s)")
    a.active_pairs = (f"median {int(np.median(npairs))}, range {min(npairs)}-{max(npairs)}"
                      if npairs else "-")
    if a.markdown:
        Path(a.markdown).write_text("\n".join(markdown(agg, a, time.perf_counter() - t_start)) + "\n")
    print("\n== summary: median (mean) time-to-target penalty vs the true optimum over "
          "(mode, batch); over = share of choices above budget + 1 W")
    for (source, rname, k), vals in sorted(agg.items()):
        pen = np.array([v[0] for v in vals], float)
        pen = pen[np.isfinite(pen)]
        over = np.mean([v[1] for v in vals]) * 100
        if len(pen):
            print(f"  {source:<6} {rname:<12} {k:<9} median {100 * np.median(pen):6.2f} %  mean "
                  f"{100 * np.mean(pen):6.2f} %  over {over:4.1f} %  (n={len(pen)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
