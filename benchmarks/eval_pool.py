"""Profiles pooled across boards (issue 26, item 6): per-board decisions of a fleet of simulated
boards of one type with unit-to-unit variation, pooled against alone.

N simulated boards of one device type (default 10 Orin AGX), each with its own unit factors
(power uniform within +-10 %, time within +-1 %: SimJetson(unit_power, unit_time)), profile 5
random modes of PowerTrain's grid each through ptui's own measurement (Profiler.measure on the
simulated board: settling, jitter, sensor noise).  The rows go into a pool (an SQLite pool in a
temporary folder: the same Pool class and SQL as a PostgreSQL one), and for every budget each
board decides with pareto's rule (risk 0.05, the model's decision space) on:

  * pooled-5 : the pooled fit (usecases.pool.fit_pooled_rows: its 5 rows + the fleet's 45, a
               per-board power and time factor), the code `ptui fit --pool` runs;
  * alone-5  : its own 5 measured modes, the best that meets the budget as measured (a fit needs
               6 modes, so 5 alone can only be chosen from);
  * alone-6  : a GP fit on 6 modes of its own (the fewest a fit takes);
  * alone-50 : a GP fit on 50 modes of its own (PowerTrain's protocol).

Penalty = the board's true (noise-free) time of the pick / its true best time over every mode
within the budget - 1; "over" counts picks whose true power exceeds the budget + 1 W; "none"
counts budgets where the method picked nothing; "power left" is the median of 1 - the pick's true
power / the budget (how cautious the picks are).  Truth: the simulator's steady state times the
board's unit factors.  SIMULATED throughout.

--truth indep takes the units' figures from the independent generator instead
(benchmarks/indep_corpus.py: its own physics, 2 % time and 1.5 % power noise with outliers, --job
its workload, resnet50 by default), times the same unit factors; ptui's bundled reference (the
simulator's Orin AGX ResNet-18) is then a mismatched prior, as on a real board.  Nothing in ptui
is tuned on it.

--oracle factor tells each pooled fit its unit's true power factor (against the other boards'
typical unit) in place of the one its regression estimates, its stated error kept; --oracle
factor-se0 also sets that error to 0: what the factor's error and what its margin cost (A/B).

--plan fleet gives each board its share of one space-filling design (profiling.active.fleet_share)
instead of its own random draw; --methods runs a subset (pooled-5 alone takes ~1 min on 2 cores);
--risk the decisions' risk; --detail says each pick over budget + 1 W.

Run: python benchmarks/eval_pool.py [--boards 10] [--own 5] [--device orin-agx]
         [--workload resnet18] [--spread 0.10] [--seed 0] [--truth sim|indep] [--job resnet50]
         [--plan random|fleet] [--methods pooled-5,alone-5,alone-6,alone-50] [--risk 0.05]
         [--detail] [--oracle none|factor|factor-se0]
Prints numbers only; nothing is written outside a temporary folder.
"""
from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptui.core.board.backends.sim import SimJetson  # noqa: E402
from ptui.core.board.physics import steady_state  # noqa: E402
from ptui.core.catalogue.devices import get_device  # noqa: E402
from ptui.core.catalogue.workloads import get_workload  # noqa: E402
from ptui.core.decision.pareto import DEFAULT_RISK, InfeasibleError, Table, choose, parse_risk  # noqa: E402
from ptui.core.prediction import pooled  # noqa: E402
from ptui.core.prediction.fit import fit_model  # noqa: E402
from ptui.core.prediction.predictor import bundled_reference, load_model  # noqa: E402
from ptui.core.profiling.active import fleet_share  # noqa: E402
from ptui.core.profiling.pool import Pool, rows_from_results  # noqa: E402
from ptui.core.profiling.profiler import Profiler  # noqa: E402
from ptui.core.usecases.pool import fit_pooled_rows  # noqa: E402

BUDGETS = (17, 20, 25, 30, 35, 40, 45, 50)


def measure(device, workload, unit_power: float, unit_time: float, modes, seed: int) -> list[dict]:
    """ptui's measurement of each mode on a simulated unit (rows as the session store keeps them)."""
    be = SimJetson(device, seed=seed, unit_power=unit_power, unit_time=unit_time)
    be.start_training(workload)
    events = be.events()
    prof = Profiler(be, workload, None, "bench")
    out = []
    for m in modes:
        out.append(prof.measure_checked(events, m).row())
    be.stop_training()
    return out


def measure_indep(device, job: str, unit_power: float, unit_time: float, modes, seed: int) -> list[dict]:
    """The independent generator's measurement (benchmarks/indep_corpus.py: its own physics and
    noise, not ptui's) of each mode on a unit: its figures times the unit's factors."""
    import indep_corpus
    m = indep_corpus.measure(device, job, modes, seed=seed)
    out = []
    for k, mode in enumerate(modes):
        out.append({"cores": mode.cores, "cpu_mhz": mode.cpu_mhz, "gpu_mhz": mode.gpu_mhz,
                    "mem_mhz": mode.mem_mhz, "time_ms": float(m["time_ms"][k] * unit_time),
                    "power_w": float(m["power_w"][k] * unit_power),
                    "time_ms_p25": float(m["time_ms_p25"][k] * unit_time),
                    "time_ms_p75": float(m["time_ms_p75"][k] * unit_time),
                    "power_w_std": float(m["power_w_std"][k] * unit_power)})
    return out


def pick_measured(rows: list[dict], budget: float):
    ok = [r for r in rows if r["power_w"] <= budget]
    if not ok:
        return None
    r = min(ok, key=lambda r: r["time_ms"])
    return (r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"])


def pick_model(model, budget: float, risk=DEFAULT_RISK):
    modes, _ = model.decision_space()
    tab = Table.from_prediction(modes, model.predict(modes)).with_measurements(model.measured)
    try:
        d = choose(tab, budget_w=budget, risk=risk)
    except InfeasibleError:
        return None
    return d.mode.as_tuple()


@contextlib.contextmanager
def oracle_factor(true_factor: float | None, zero_se: bool):
    """An A/B of the pooled fit with this unit's true power factor (and, zero_se, no stated error)
    in place of its regression's estimate (pooled.board_corrections), the other boards' kept."""
    if true_factor is None:
        yield
        return
    estimate = pooled.board_corrections

    def told(device, rows, reference, **kw):
        out = estimate(device, rows, reference, **kw)
        c, per_row = out["power"]
        own = np.asarray(rows.boards, dtype=object) == pooled.OWN
        out["power"] = (pooled.Correction(true_factor, 0.0 if zero_se else c.log_se, c.board_factors,
                                          c.resid_sd), np.where(own, np.log(true_factor), per_row))
        return out
    pooled.board_corrections = told
    try:
        yield
    finally:
        pooled.board_corrections = estimate


def run_seed(a, seed: int, ctx: dict):
    """One fleet (the boards' units and modes drawn from `seed`): each method's penalties, the
    picks over budget + 1 W, the budgets with no pick, the power left, per budget, the fit
    times, and the pooled fits' power factors against the units'."""
    dev, wl, wl_name, spec, ref = ctx["dev"], ctx["wl"], ctx["wl_name"], ctx["spec"], ctx["ref"]
    space, S, op_t, op_p = ctx["space"], ctx["S"], ctx["op_t"], ctx["op_p"]
    methods, budgets, risk = ctx["methods"], ctx["budgets"], ctx["risk"]
    rng = random.Random(seed)
    grid = dev.pt_grid()
    boards = []
    for b in range(a.boards):
        up = 1 + rng.uniform(-a.spread, a.spread)
        ut = 1 + rng.uniform(-0.01, 0.01)
        modes50 = rng.sample(grid, 50)
        if a.plan == "fleet":
            mine = fleet_share(dev, a.boards, a.own, b, seed=seed)
            modes50 = mine + [m for m in modes50 if m not in mine][:50 - len(mine)]
        boards.append({"id": f"unit-{b:02d}", "up": up, "ut": ut, "modes": modes50})
    t0 = time.perf_counter()
    for i, bd in enumerate(boards):
        if a.truth == "indep":
            bd["rows50"] = measure_indep(dev, a.job, bd["up"], bd["ut"], bd["modes"], seed * 1000 + i)
        else:
            bd["rows50"] = measure(dev, wl, bd["up"], bd["ut"], bd["modes"], seed * 1000 + i)
    t_meas = time.perf_counter() - t0
    where = {m.as_tuple(): k for k, m in enumerate(space)}

    res: dict[str, dict] = {k: {"pen": [], "over": 0, "none": 0, "room": []} for k in methods}
    by_b: dict[tuple, list] = {}
    fit_s: dict[str, list] = {k: [] for k in res}
    with tempfile.TemporaryDirectory() as tmp:
        pool = Pool(f"sqlite:///{tmp}/pool.sqlite")
        for bd in boards:
            own = list(enumerate(bd["rows50"][:a.own]))
            for r in rows_from_results(own, board=bd["id"], device=dev.name, workload=wl_name,
                                       batch_size=wl.batch_size, simulated=True, source="bench"):
                pool.add(r)
        factors = []
        for bd in boards:
            mine = pool.rows(device=dev.name, workload=wl_name, batch_size=wl.batch_size, board=bd["id"])
            fleet = [r for r in pool.rows(device=dev.name, workload=wl_name, batch_size=wl.batch_size)
                     if r.board != bd["id"]]
            fitted = {}
            if "pooled-5" in methods:
                # the factor is against the other boards' typical unit (the geometric mean of
                # theirs): the true one is this unit's over theirs, not the unit's own factor
                typical = np.exp(np.mean([np.log(o["up"]) for o in boards if o is not bd]))
                t = time.perf_counter()
                with oracle_factor(bd["up"] / typical if a.oracle != "none" else None,
                                   a.oracle == "factor-se0"):
                    fitted["pooled-5"] = fit_pooled_rows(dev, mine, fleet, workload=wl_name,
                                                         batch_size=wl.batch_size, reference=ref,
                                                         method="gp", seed=seed, spec=spec)
                fit_s["pooled-5"].append(time.perf_counter() - t)
                pinfo = fitted["pooled-5"].about.trained_on["pooled"]
                if a.no_reach_sd and hasattr(fitted["pooled-5"].power, "reach_log"):
                    fitted["pooled-5"].power.reach_log = None
                factors.append((bd["up"] / typical, pinfo["power_factor"], pinfo["power_factor_se_pct"]))
            for k, n in (("alone-6", 6), ("alone-50", 50)):
                if k not in methods:
                    continue
                rows = bd["rows50"][:n]
                modes = [space[where[(r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"])]] for r in rows]
                t = time.perf_counter()
                fitted[k] = fit_model(ref, dev, modes, [r["time_ms"] for r in rows],
                                      [r["power_w"] for r in rows], method="gp", seed=seed,
                                      workload=wl_name, measured={
                                          "modes": np.array([m.as_tuple() for m in modes], np.float64),
                                          "time_ms": np.array([r["time_ms"] for r in rows]),
                                          "power_w": np.array([r["power_w"] for r in rows]),
                                          "time_ms_std": 0.004 * np.array([r["time_ms"] for r in rows]),
                                          "power_w_std": 0.004 * np.array([r["power_w"] for r in rows])})
                fit_s[k].append(time.perf_counter() - t)
            true_t, true_p = op_t * bd["ut"], op_p * bd["up"]
            for B in budgets:
                ok = true_p <= B
                if not ok.any():
                    continue
                best = true_t[ok].min()
                picks = {k: pick_measured(bd["rows50"][:a.own], B) if k == "alone-5"
                         else pick_model(fitted[k], B, risk) for k in methods}
                for k, m in picks.items():
                    if m is None:
                        res[k]["none"] += 1
                        continue
                    i = where[tuple(float(x) for x in m)] if tuple(float(x) for x in m) in where else \
                        where[m]
                    res[k]["pen"].append(100 * (true_t[i] / best - 1))
                    by_b.setdefault((k, B), []).append((100 * (true_t[i] / best - 1), true_p[i] > B + 1))
                    res[k]["over"] += int(true_p[i] > B + 1)
                    if a.detail and true_p[i] > B + 1:
                        mdl = fitted[k] if k != "alone-5" else None
                        pr = mdl.predict([space[i]]) if mdl is not None else {}
                        meas = mdl is not None and mdl.measured is not None and any(
                            np.allclose(row, S[i]) for row in mdl.measured["modes"])
                        print(f"over: {k} {bd['id']} budget {B} W, mode {space[i].as_tuple()}, true "
                              f"{true_p[i]:.2f} W, predicted {pr.get('power_w', [np.nan])[0]:.2f} W "
                              f"(sd {pr.get('power_w_std', [np.nan])[0]:.2f}), in the model's rows: {meas}")
                    res[k]["room"].append(100 * (1 - true_p[i] / B))
        pool.close()
    return res, by_b, fit_s, factors, t_meas


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--boards", type=int, default=10)
    ap.add_argument("--own", type=int, default=5)
    ap.add_argument("--device", default="orin-agx")
    ap.add_argument("--workload", default="resnet18")
    ap.add_argument("--spread", type=float, default=0.10, help="unit power factor within 1 +- this")
    ap.add_argument("--seed", default="0",
                    help="the fleet's seed, or several fleets: 0-9 or 0,2,5 (a row each, and all together)")
    ap.add_argument("--truth", choices=("sim", "indep"), default="sim",
                    help="sim: ptui's simulator measured by ptui's profiler; indep: the independent "
                         "generator (benchmarks/indep_corpus.py), --job its workload")
    ap.add_argument("--job", default="resnet50", help="the independent generator's job (--truth indep)")
    ap.add_argument("--methods", default="pooled-5,alone-5,alone-6,alone-50",
                    help="which of pooled-5, alone-5, alone-6, alone-50 to run (comma-separated)")
    ap.add_argument("--plan", choices=("random", "fleet"), default="random",
                    help="each board's own modes: random (PowerTrain's draw, each board its own) or "
                         "fleet (profiling.active.fleet_share: one space-filling design dealt across "
                         "the boards); the 50 of alone-50 are these and random others")
    ap.add_argument("--risk", default=str(DEFAULT_RISK),
                    help="the decisions' risk (pareto's rule; 'mean': on the predicted value alone)")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)),
                    help="the power budgets in W, comma-separated (default 17-50: Orin AGX's range; an "
                         "Orin Nano's PowerTrain grid spans about 5-16 W)")
    ap.add_argument("--detail", action="store_true", help="say each pick over budget + 1 W")
    ap.add_argument("--by-budget", action="store_true",
                    help="the median penalty and the picks over budget + 1 W at each budget")
    ap.add_argument("--prior", action="store_true",
                    help="the pooled fit also takes the workload's counts (FLOPs, bytes, batch size: "
                         "eval_roofline's 'counts' spec) as its roofline prior, as the Flower mod's "
                         "fit does for a catalog workload")
    ap.add_argument("--no-reach-sd", action="store_true",
                    help="the pooled model without its power sd beyond the rows' reach (A/B)")
    ap.add_argument("--oracle", choices=("none", "factor", "factor-se0"), default="none",
                    help="A/B: the pooled fit told its unit's true power factor (factor), and also "
                         "no stated error for it (factor-se0)")
    a = ap.parse_args()
    risk = parse_risk(a.risk)
    try:
        budgets = tuple(float(x) for x in a.budgets.split(",") if x.strip())
    except ValueError:
        ap.error(f"--budgets takes numbers in W, comma-separated, got {a.budgets!r}")
    if not budgets or min(budgets) <= 0:
        ap.error("--budgets takes at least one budget above 0 W")
    methods = [k.strip() for k in a.methods.split(",") if k.strip()]
    known = ("pooled-5", "alone-5", "alone-6", "alone-50")
    if not methods or [k for k in methods if k not in known]:
        ap.error(f"--methods takes some of {', '.join(known)} (comma-separated), got {a.methods!r}")
    try:
        seeds = parse_seeds(a.seed)
    except ValueError:
        ap.error(f"--seed takes a seed, a range 0-9 or a list 0,2,5, got {a.seed!r}")
    dev = get_device(a.device)
    if a.truth == "indep":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import indep_corpus
        wl = get_workload(a.workload).with_batch(indep_corpus.JOBS[a.job].batch)
        wl_name = f"indep-{a.job}"
    else:
        wl = get_workload(a.workload)
        wl_name = wl.name
    spec = None
    if a.prior:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import eval_roofline
        spec = (eval_roofline.indep_spec(dev, indep_corpus.JOBS[a.job], "counts") if a.truth == "indep"
                else eval_roofline.sim_spec(dev, a.workload, "counts"))
    space = dev.full_space()
    S = np.array([m.as_tuple() for m in space], np.float64)
    if a.truth == "indep":
        op_t, op_p, _ = indep_corpus.truth(dev, indep_corpus.JOBS[a.job], S)
    else:
        op = steady_state(dev, wl, S[:, 0], S[:, 1], S[:, 2], S[:, 3])
        op_t, op_p = op.time_ms, op.power_w
    ref = load_model(bundled_reference())
    ctx = {"dev": dev, "wl": wl, "wl_name": wl_name, "spec": spec, "ref": ref, "space": space, "S": S,
           "op_t": op_t, "op_p": op_p, "methods": methods, "budgets": budgets, "risk": risk}
    runs = {seed: run_seed(a, seed, ctx) for seed in seeds}
    n = a.boards * len(budgets)
    what = "independent generator (indep_corpus), SYNTHETIC" if a.truth == "indep" else "SIMULATED"
    print(f"{a.boards} {dev.name} boards, {wl_name} batch {wl.batch_size}, unit power within "
          f"+-{100 * a.spread:.0f} % (time +-1 %), budgets {min(budgets):g}-{max(budgets):g} W: {n} decisions "
          f"per method and fleet ({what}); fleets (seeds): {', '.join(map(str, seeds))}")
    print(f"measuring 50 modes on each board: {sum(r[4] for r in runs.values()):.1f} s wall")
    print()
    print("| seed | method | own modes profiled | median penalty | mean penalty | p90 penalty | max penalty "
          "| over budget +1 W | no pick | power left (median) | fit s (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    own = {"pooled-5": f"{a.own} (+{a.own * (a.boards - 1)} fleet)", "alone-5": str(a.own),
           "alone-6": "6", "alone-50": "50"}

    def row(seed: str, k: str, r: dict, fit_s: list) -> None:
        pen = np.array(r["pen"]) if r["pen"] else np.array([np.nan])
        fs = f"{np.median(fit_s):.1f}" if fit_s else "-"
        print(f"| {seed} | {k} | {own[k]} | {np.median(pen):.2f} % | {np.mean(pen):.2f} % | "
              f"{np.percentile(pen, 90):.2f} % | {np.max(pen):.2f} % | {r['over']} | {r['none']} | "
              f"{np.median(r['room']) if r['room'] else np.nan:.2f} % | {fs} |")

    for seed, (res, _, fit_s, _, _) in runs.items():
        for k, r in res.items():
            row(str(seed), k, r, fit_s[k])
    if len(seeds) > 1:
        for k in methods:
            allr = {"pen": [p for res, *_ in runs.values() for p in res[k]["pen"]],
                    "room": [p for res, *_ in runs.values() for p in res[k]["room"]],
                    "over": sum(res[k]["over"] for res, *_ in runs.values()),
                    "none": sum(res[k]["none"] for res, *_ in runs.values())}
            row(f"all {len(seeds)}", k, allr, [f for _, _, fs, _, _ in runs.values() for f in fs[k]])
        print()
        for k in methods:
            meds = [float(np.median(res[k]["pen"])) for res, *_ in runs.values() if res[k]["pen"]]
            print(f"{k}: each fleet's median penalty: {', '.join(f'{m:.2f}' for m in meds)} % "
                  f"(median over fleets {np.median(meds):.2f} %, {sum(m <= 1.5 for m in meds)} of "
                  f"{len(meds)} at most 1.5 %)")
    print()
    if a.by_budget:
        by_b: dict = {}
        for _, b, *_ in runs.values():
            for key, v in b.items():
                by_b.setdefault(key, []).extend(v)
        for (k, B), v in sorted(by_b.items()):
            print(f"by budget: {k} {B} W: median penalty {np.median([p for p, _ in v]):.2f} %, "
                  f"over budget + 1 W {sum(o for _, o in v)} of {len(v)}")
        print()
    factors = [f for *_, fs, _ in runs.values() for f in fs]
    if not factors:
        return
    err = np.array([100 * np.log(f / u) for u, f, _ in factors])
    se = np.array([s for _, _, s in factors])
    ratio = f"{np.sqrt(np.mean((err / se) ** 2)):.2f}" if np.all(se > 0) else "- (an se of 0)"
    print(f"power factor estimated vs true (this unit's over the other boards' typical unit): error "
          f"rms {np.sqrt(np.mean(err ** 2)):.2f} %, median |error| {np.median(np.abs(err)):.2f} %, range "
          f"{err.min():+.2f} % .. {err.max():+.2f} %; stated se median {np.median(se):.2f} %, "
          f"error / se rms {ratio}")


def parse_seeds(text: str) -> list[int]:
    """'3', '0-9' or '0,2,5': the fleets' seeds."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    if not out:
        raise ValueError(text)
    return out

if __name__ == "__main__":
    main()
