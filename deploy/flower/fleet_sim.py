"""Ten virtual Jetsons federated with Flower's simulation engine (flwr 1.42, Ray), each training in
the power mode for its share of a fleet power cap.  Everything is SIMULATED: the boards are ptui's
simulator (a virtual clock: a round's seconds and watts are the simulated board's for one epoch of
ResNet-18 minibatches in the picked mode), the model is a toy linear regression in numpy.

    pip install -e ".[flower]" "flwr[simulation]==1.42.0"
    python deploy/flower/fleet_sim.py --cap-w 150 --rounds 3

Each virtual board is its own unit: it draws a seeded factor of its kind's typical power (uniform
within +-`--unit-spread`, default 10 %; identical Xavier AGX and Nano units differ significantly, an
Orin AGX MLPerf rerun drew 27-32 % more power at equal throughput) while its node's model is the
typical unit's.  The strategy corrects each node's curve by its unit's factor, estimated from its
measured/predicted watts of its previous rounds, and keeps a reserve for what is not known of the
factors yet (`--no-correction` to see the fleet without either, `--reserve-spread 0` without the
prior on the factors: no reserve, no factor estimated); `--margin` pads every node's curve.

The first run fits one model per device kind into --data-dir (a few seconds each, said in the log);
later runs reuse them.  README: Fleets (Flower).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation

from ptui import core
from ptui.flower import FIT_MODES, MIN_FIT_MODES, UNIT_SPREAD, PtuiFleet, ptui_power_mod

# partition k runs on DEVICES[k]: four Orin AGX, three AGX Xavier, three Orin Nano
DEVICES = ["orin-agx", "xavier-agx", "orin-nano", "orin-agx", "xavier-agx", "orin-nano", "orin-agx",
           "xavier-agx", "orin-nano", "orin-agx"]
TRUE_W = np.array([1.0, -2.0, 0.5, 3.0, -1.0])


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cap-w", type=float, default=150.0, help="the fleet's power cap (W)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--data-dir", default=os.environ.get("PTUI_FLEET_DATA", "/tmp/ptui-flower-fleet"),
                   help="the nodes' ptui data directory (their fitted models are cached there and "
                        "reused: a cache from an older ptui gives other figures); default "
                        "$PTUI_FLEET_DATA, else /tmp/ptui-flower-fleet ($PTUI_DATA_DIR is not read)")
    p.add_argument("--fit-modes", type=int, default=FIT_MODES,
                   help=f"modes each device kind profiles for its first model (default {FIT_MODES})")
    p.add_argument("--unit-spread", type=float, default=0.10,
                   help="each board's power factor is drawn uniform within 1 +- this (default 0.10; 0: "
                        "every unit typical)")
    p.add_argument("--seed", type=int, default=0, help="the seed of the boards' unit factors")
    p.add_argument("--no-correction", action="store_true",
                   help="split the cap by the nodes' models alone (no measured/predicted correction)")
    p.add_argument("--reserve-spread", type=float, default=UNIT_SPREAD,
                   help="the unit-to-unit spread the strategy assumes of the units before it measured "
                        f"them (PtuiFleet's unit_spread, default {UNIT_SPREAD:g}; 0: no prior on the units' "
                        "factors, so no reserve and no factor estimated, only a model's bound broken "
                        "corrects); the strategy is not told --unit-spread")
    p.add_argument("--margin", type=float, default=0.0,
                   help="fraction added to a node's predicted power before it was measured (round 1)")
    p.add_argument("--hold-shares", action="store_true",
                   help="each node holds its share of the cap as its board draws it: one over it once "
                        "its power settled steps down (PtuiFleet(hold_shares=True))")
    p.add_argument("--pool", default="",
                   help="the fleet's pool of profiles (sqlite:///PATH or postgresql://...; default "
                        "none: $PTUI_POOL is not read, so that SIMULATED rows go to no pool unless "
                        "named here): a node whose pool holds --fit-modes rows of its device kind "
                        "profiles 5 modes and fits its unit's model on them and the fleet's")
    p.add_argument("--json", help="write each round's per-node figures to this file")
    a = p.parse_args()
    if not 0 <= a.unit_spread <= 0.5:
        p.exit(2, f"{p.prog}: --unit-spread must be within 0-0.5, got {a.unit_spread:g}\n")
    if not 0 <= a.reserve_spread <= 1:
        p.exit(2, f"{p.prog}: --reserve-spread must be within 0-1, got {a.reserve_spread:g}\n")
    if not 0 <= a.margin <= 1:
        p.exit(2, f"{p.prog}: --margin must be within 0-1, got {a.margin:g}\n")
    if a.fit_modes < MIN_FIT_MODES:
        p.exit(2, f"{p.prog}: --fit-modes must be at least {MIN_FIT_MODES} (a node's fit), "
                  f"got {a.fit_modes}\n")
    if a.rounds < 1 or not (math.isfinite(a.cap_w) and a.cap_w > 0):
        p.exit(2, f"{p.prog}: --rounds must be >= 1 and --cap-w > 0 (a finite number of watts)\n")
    # what would fail only after the whole run, or in every node: refused before Ray starts
    if a.pool:
        try:
            kind, path = core.check_url(a.pool)
            if kind == "sqlite" and os.path.exists(path):
                core.pool_summary(a.pool)      # a file of another program: refused, left as it is
        except core.PtuiError as e:
            p.exit(2, f"{p.prog}: --pool: {e}\n")
    if a.json and not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
        p.exit(2, f"{p.prog}: --json: no folder {os.path.dirname(os.path.abspath(a.json))} to write "
                  f"{os.path.basename(a.json)} in\n")
    if a.json and os.path.isdir(a.json):
        p.exit(2, f"{p.prog}: --json: {a.json} is a folder: name a file to write the rounds to\n")
    if os.path.exists(a.data_dir) and not os.path.isdir(a.data_dir):
        p.exit(2, f"{p.prog}: --data-dir: {a.data_dir} is not a folder\n")
    import importlib.util
    if importlib.util.find_spec("ray") is None:
        p.exit(2, f"{p.prog}: Flower's simulation engine needs Ray: "
                  f"pip install \"flwr[simulation]==1.42.0\"\n")
    return a


ARGS = parse() if __name__ == "__main__" else None


def unit_factors(spread: float, seed: int) -> list[float]:
    """Each board's power factor against its kind's typical unit, uniform within 1 +- spread."""
    rng = np.random.default_rng(seed)
    return [round(float(f), 4) for f in rng.uniform(1 - spread, 1 + spread, len(DEVICES))]


UNITS = unit_factors(ARGS.unit_spread, ARGS.seed) if ARGS else [1.0] * len(DEVICES)


def local_data(pid: int, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(pid)
    x = rng.normal(size=(n, len(TRUE_W)))
    return x, x @ TRUE_W + 0.1 * rng.normal(size=n)


power = ptui_power_mod(devices=DEVICES, unit_power=UNITS, data_dir=ARGS.data_dir if ARGS else None,
                       fit_modes=ARGS.fit_modes if ARGS else FIT_MODES, pool=ARGS.pool if ARGS else "")
client = ClientApp(mods=[power])
power.register(client)       # the fleet asks each node its device (and model) before its first round


@client.train()
def train(msg: Message, ctx: Context) -> Message:
    w = msg.content["arrays"].to_numpy_ndarrays()[0]
    x, y = local_data(int(ctx.node_config["partition-id"]))
    for _ in range(20):
        w = w - 0.05 * 2 * x.T @ (x @ w - y) / len(y)
    loss = float(np.mean((x @ w - y) ** 2))
    return Message(RecordDict({"arrays": ArrayRecord([w]),
                               "metrics": MetricRecord({"num-examples": len(y), "loss": loss})}),
                   reply_to=msg)


server = ServerApp()
FLEET: list[PtuiFleet] = []


@server.main()
def main(grid: Grid, ctx: Context) -> None:
    n = len(DEVICES)
    fleet = PtuiFleet(FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=n,
                             min_available_nodes=n), cap_w=ARGS.cap_w,
                      correct=not ARGS.no_correction, margin=ARGS.margin,
                      hold_shares=ARGS.hold_shares, unit_spread=ARGS.reserve_spread, log=print)
    FLEET.append(fleet)
    fleet.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(len(TRUE_W))]), num_rounds=ARGS.rounds)


def baselines(cap_w: float, workload: str = "resnet18", units: list[float] | None = None) -> dict:
    """What the same fleet would do without ptui, for one round (an epoch of `workload` per node)
    on the simulator's noise-free physics: every node at MAXN, and one NVIDIA preset for all (each
    board in its highest preset whose nominal watts fit an equal share of the cap, else its
    lowest).  Each board draws its unit factor of the typical power.  Fleet watts, the slowest
    node's seconds, joules."""
    w = core.get_workload(workload)
    share = cap_w / len(DEVICES)

    def run(pick) -> dict:
        ts, ps, names = [], [], []
        for d, u in zip(DEVICES, units or [1.0] * len(DEVICES)):
            dev = core.get_device(d)
            mode, name = pick(dev)
            op = core.steady_state(dev, w, *[np.array([x], float) for x in mode.as_tuple()])
            ts.append(float(op.time_ms[0]) * w.minibatches_per_epoch / 1000.0)
            ps.append(float(op.power_w[0]) * u)
            names.append(name)
        return {"w": sum(ps), "s": max(ts), "j": sum(p * t for p, t in zip(ps, ts)),
                "within_cap": sum(ps) <= cap_w, "modes": names}

    def preset(dev):
        fit = [p for p in dev.presets if p.budget_w is not None and p.budget_w <= share]
        p = (max(fit, key=lambda p: p.budget_w) if fit
             else min((p for p in dev.presets if p.budget_w is not None), key=lambda p: p.budget_w))
        return p.mode, p.name
    return {"maxn": run(lambda dev: (dev.maxn, "MAXN")), "preset": run(preset), "share_w": share}


def baseline_lines(base: dict) -> list[str]:
    """What baselines() found, as the run prints it."""
    names = ", ".join(sorted(set(base["preset"]["modes"])))
    lines = ["without ptui (SIMULATED, noise-free, one round):"]
    for key, what in (("maxn", "every node at MAXN"),
                      ("preset", f"one NVIDIA preset for all ({base['share_w']:.3g} W share each: {names})")):
        b = base[key]
        lines.append(f"  {what}: fleet {b['w']:.1f} W ({'within' if b['within_cap'] else 'OVER'} the cap), "
                     f"slowest node {b['s']:.0f} s, {b['j'] / 1000:.1f} kJ")
    return lines


if __name__ == "__main__":
    print(f"SIMULATED unit power factors (spread +-{ARGS.unit_spread:.0%}, seed {ARGS.seed}): "
          + ", ".join(f"{d} {u:.3f}" for d, u in zip(DEVICES, UNITS))
          + f"; correction {'off' if ARGS.no_correction else 'on'}, reserve for a "
            f"+-{ARGS.reserve_spread:.0%} spread, margin {ARGS.margin:.0%}")
    t0 = time.perf_counter()
    run_simulation(server_app=server, client_app=client, num_supernodes=len(DEVICES),
                   backend_config={"client_resources": {"num_cpus": 1},
                                   "init_args": {"num_cpus": 2, "_node_ip_address": "127.0.0.1",
                                                 "include_dashboard": False}})
    wall = time.perf_counter() - t0
    hist = FLEET[0].history if FLEET else []
    if ARGS.pool:
        print(f"the nodes' profiles went to the pool {core.redact(ARGS.pool)} (SIMULATED rows)")
    print(f"\n{len(DEVICES)} virtual Jetsons (SIMULATED), cap {ARGS.cap_w:g} W, {ARGS.rounds} rounds, "
          f"wall {wall:.1f} s; unit spread +-{ARGS.unit_spread:.0%} (seed {ARGS.seed}), correction "
          f"{'off' if ARGS.no_correction else 'on'}, reserve for a +-{ARGS.reserve_spread:.0%} spread, "
          f"margin {ARGS.margin:.0%}, "
          f"shares held as measured: {'yes' if ARGS.hold_shares else 'no'}")
    for r in hist:
        f = r["fleet"]
        over = " OVER THE CAP" if f["w"] > ARGS.cap_w else ""
        ok = [x for x in r["nodes"] if "error" not in x]
        steps = sum(x["notes"].count("stepped down to") for x in ok)
        over_share = sum(x["w"] > x["budget_w"] for x in ok if x.get("budget_w"))
        print(f"round {r['round']}: fleet {f['w']:.1f} W measured{over} (predicted {f['predicted_w']:.1f} W, "
              f"cap {ARGS.cap_w:g} W), {f['j'] / 1000:.1f} kJ, slowest node {f['s']:.0f} s "
              f"(predicted {f['predicted_s']:.0f} s); reserve {100 * f.get('unmeasured_reserve', 0):.1f} % "
              f"for the units' factors not known yet; {steps} step(s) down on "
              f"{sum('stepped down to' in x['notes'] for x in ok)} node(s), {over_share} node(s) over "
              f"their share as measured")
        for x in sorted(r["nodes"], key=lambda x: (x.get("device") or "", x["node"])):
            if "error" in x:
                print(f"  node {x['node']}: {x['error']}")
                continue
            print(f"  {x['device']:<10} unit {x['unit_power'] or 1.0:.3f} split x{x['power_factor']:.3f} "
                  f"{x['mode']:<24} budget {x['budget_w']:5.1f} W  "
                  f"{x['w']:5.1f} W  {x['s']:6.0f} s (predicted {x['predicted_s']:6.0f} s)  "
                  f"{x['j'] / 1000:6.1f} kJ")
    base = baselines(ARGS.cap_w, units=UNITS)
    print("\n".join(baseline_lines(base)))
    if ARGS.json:
        with open(ARGS.json, "w") as fh:
            json.dump({"wall_s": wall, "cap_w": ARGS.cap_w, "unit_spread": ARGS.unit_spread,
                       "seed": ARGS.seed, "units": UNITS, "correction": not ARGS.no_correction,
                       "margin": ARGS.margin, "reserve_spread": ARGS.reserve_spread,
                       "hold_shares": ARGS.hold_shares, "rounds": hist,
                       "baselines": base}, fh,
                      indent=1, default=str)
    silent = [r["round"] for r in hist if not any("error" not in x for x in r["nodes"])]
    if silent or len(hist) < ARGS.rounds:
        print(f"fleet_sim.py: {ARGS.rounds - len(hist) + len(silent)} of {ARGS.rounds} round(s) without "
              f"any node's figures (the errors are above)", file=sys.stderr)
        raise SystemExit(1)
