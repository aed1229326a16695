"""Profiles pooled across boards through the Flower mod (issue 26, items 1 and 6): what a fleet of
simulated boards of one type pays, and how well each decides, when the mod's nodes share a pool.

N simulated Orin AGX nodes (default 10; each unit's power within +-10 % of the typical unit's:
the mod's sim-unit-power) take their first round through ``ptui.flower.ptui_power_mod`` with no
model, in order:

  * pool  : one pool for the fleet (an SQLite pool in a temporary folder, the same Pool code as
            PostgreSQL).  A node whose pool holds fewer than fit_modes (20) rows of other boards
            profiles 20 modes of its own and fits alone; the others profile pool_modes (5) and
            fit their unit's model on them and the fleet's rows (ptui fit --pool);
  * alone : each node its own empty pool: every node profiles 20 modes of its own unit.

Reported per arm: modes profiled over the fleet, the simulated device time of that profiling, the
wall time of the first rounds, and each node's decisions with its model as the mod takes them
(core.choose on the node's table, risk 0.05) at budgets 17-50 W: penalty = the unit's true time of
the pick over its true best within the budget (every mode of the board) - 1, picks over budget +
1 W.  Truth: the simulator's steady state times the unit's factor.  SIMULATED throughout.

Run: python benchmarks/eval_pool_flower.py [--nodes 10] [--seed 0] [--spread 0.10]
Needs flwr (pip install -e ".[flower]").  Prints numbers only; writes nothing outside a temporary
folder.
"""
from __future__ import annotations

import argparse
import csv
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_flower import instruction, train  # noqa: E402  (a train message, a no-op ClientApp)
from flwr.app import Context, RecordDict  # noqa: E402

from ptui import core, flower  # noqa: E402
from ptui.core.board.physics import steady_state  # noqa: E402

BUDGETS = (17, 20, 25, 30, 35, 40, 45, 50)
DEVICE, WORKLOAD, BATCH = "orin-agx", "resnet18", 16


def run_arm(arm: str, units: list[float], tmp: Path, steps: int) -> dict:
    said: list[str] = []
    mod = flower.ptui_power_mod(device=DEVICE, workload=WORKLOAD, batch_size=BATCH, steps=steps,
                                data_dir=str(tmp / arm / "data"), pool="", say=said.append)
    out = {"wall": [], "models": []}
    for k, u in enumerate(units):
        pool = (f"sqlite:///{tmp / arm / 'pool.sqlite'}" if arm == "pool"
                else f"sqlite:///{tmp / arm / f'pool-{k}.sqlite'}")
        ctx = Context(run_id=1, node_id=k + 1, state=RecordDict(), run_config={},
                      node_config={"board-id": f"unit-{k:02d}", "sim-unit-power": u, "pool-url": pool})
        t = time.perf_counter()
        mod(instruction({"power-budget-w": 30.0}), ctx, train)
        out["wall"].append(time.perf_counter() - t)
    for node in mod.nodes.values():
        out["models"].append((node.spec.unit_power, node.predictions, node.model_dir))
    rows = [r for p in sorted((tmp / arm / "data" / "profiles").glob("*.csv"))
            for r in csv.DictReader(p.open())]
    out["modes"] = len(rows)
    out["device_s"] = sum(float(r["mode_s"]) for r in rows)     # each mode's settling and measuring
    return out


def grade(models, op_t, op_p, where) -> dict:
    pen, over = [], 0
    for u, pred, _ in models:
        true_t, true_p = op_t, op_p * u
        tab = pred.table
        for B in BUDGETS:
            ok = true_p <= B
            if not ok.any():
                continue
            best = true_t[ok].min()
            try:
                d = core.choose(tab, budget_w=B, risk=core.DEFAULT_RISK)
            except core.InfeasibleError:
                continue
            i = where[d.mode.as_tuple()]
            pen.append((true_t[i] / best - 1) * 100)
            over += bool(true_p[i] > B + 1)
    return {"median": float(np.median(pen)), "mean": float(np.mean(pen)), "max": float(np.max(pen)),
            "over": over, "n": len(pen)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spread", type=float, default=0.10)
    ap.add_argument("--steps", type=int, default=200, help="minibatches of the first round")
    a = ap.parse_args(argv)
    # what the mod would refuse in the first node's round (a unit's factor is 0.5-2), or a fleet
    # of no node to grade, refused before any node profiles
    if a.nodes < 1:
        ap.error(f"--nodes must be at least 1, got {a.nodes}")
    if not 0 <= a.spread <= 0.5:
        ap.error(f"--spread must be within 0-0.5 (each unit's power 1 +- it), got {a.spread:g}")
    if a.steps < 1:
        ap.error(f"--steps must be at least 1, got {a.steps}")
    rng = random.Random(a.seed)
    units = [1 + rng.uniform(-a.spread, a.spread) for _ in range(a.nodes)]
    dev = core.get_device(DEVICE)
    space = dev.full_space()
    S = np.array([m.as_tuple() for m in space], np.float64)
    op = steady_state(dev, core.get_workload(WORKLOAD, BATCH), *S.T)
    where = {m.as_tuple(): k for k, m in enumerate(space)}
    print(f"{a.nodes} simulated {DEVICE} nodes through ptui.flower's mod, {WORKLOAD} bs{BATCH}, unit power "
          f"within +-{a.spread:.0%}, seed {a.seed}; budgets {BUDGETS[0]}-{BUDGETS[-1]} W (risk 0.05); SIMULATED")
    print("| arm | modes profiled (fleet) | device time profiling (fleet) | first round wall s (median / max) "
          "| median penalty | mean | max | over budget +1 W |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for arm in ("pool", "alone"):
            r = run_arm(arm, units, Path(tmp), a.steps)
            g = grade(r["models"], op.time_ms, op.power_w, where)
            print(f"| {arm} | {r['modes']} | {r['device_s'] / 60:.1f} min | {np.median(r['wall']):.1f} / "
                  f"{max(r['wall']):.1f} | {g['median']:.2f} % | {g['mean']:.2f} % | {g['max']:.1f} % | "
                  f"{g['over']} of {g['n']} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
