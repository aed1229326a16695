"""Does a fleet hold its power cap?  deploy/flower/fleet_sim.py (10 virtual Jetsons in Flower's
simulation engine, each its own SIMULATED unit drawing a seeded factor of its kind's typical power)
over several unit seeds, and per seed: the fleet's measured watts per round against the cap, the
rounds over it, and the slowest node's seconds per round.

Two ways to start: with the nodes' models cached (--data-dir fitted by an earlier run: round 1 is
split by the models' fronts) and fresh (each run a new data directory: the nodes fit their models
in round 1, which is split by the devices' roofline priors).

Run: python benchmarks/eval_fleet_cap.py [--seeds 0-9] [--fresh-seeds 0-4] [--rounds 3]
         [--cap-w 150] [--unit-spread 0.10] [--python PY] [-- fleet_sim options...]
Needs flwr[simulation] (Ray) in PY's environment.  Prints numbers; writes only in a temporary folder.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "deploy" / "flower" / "fleet_sim.py"


def seeds(text: str) -> list[int]:
    """'0-9', '0,3,9' or '' (none): the seeds; anything else is a ValueError naming the part."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        if not (lo.isdigit() and (not dash or hi.isdigit())) or (hi and int(hi) < int(lo)):
            raise ValueError(f"{part!r} is no seed nor range of seeds (0-9, 0,3,9)")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def run(py: str, seed: int, data: Path, a, extra: list[str], tmp: Path) -> dict:
    out = tmp / f"run-{seed}-{time.monotonic_ns()}.json"
    cmd = [py, str(SIM), "--seed", str(seed), "--rounds", str(a.rounds), "--cap-w", str(a.cap_w),
           "--unit-spread", str(a.unit_spread), "--data-dir", str(data), "--json", str(out), *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0 or not out.exists():
        raise SystemExit(f"fleet_sim.py seed {seed} failed (rc {p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(out.read_text())


def line(kind: str, seed: int, r: dict, cap: float) -> tuple[str, int, float]:
    ws = [h["fleet"]["w"] for h in r["rounds"]]
    ss = [h["fleet"]["s"] for h in r["rounds"]]
    over = sum(w > cap for w in ws)
    return (f"| {kind} | {seed} | {' / '.join(f'{w:.1f}' for w in ws)} | {over} | "
            f"{' / '.join(f'{s:.0f}' for s in ss)} |", over, max(ws))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0-9", help="unit seeds with cached models (e.g. 0-9 or 0,3,9)")
    ap.add_argument("--fresh-seeds", default="0-4", help="unit seeds run with a fresh data directory")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cap-w", type=float, default=150.0)
    ap.add_argument("--unit-spread", type=float, default=0.10)
    ap.add_argument("--python", default=sys.executable, help="the interpreter with flwr[simulation]")
    a, extra = ap.parse_known_args(argv)
    extra = [x for x in extra if x != "--"]
    def refuse(msg: str):
        ap.exit(2, f"{ap.prog}: {msg}\n")
    try:
        todo = {"cached": seeds(a.seeds), "fresh": seeds(a.fresh_seeds)}
    except ValueError as e:
        refuse(f"--seeds/--fresh-seeds: {e}")
    if not todo["cached"] and not todo["fresh"]:
        refuse("no seeds to run: give --seeds or --fresh-seeds")
    if a.rounds < 1 or not math.isfinite(a.cap_w) or a.cap_w <= 0:
        refuse("--rounds must be >= 1 and --cap-w a finite number of watts > 0")
    if shutil.which(a.python) is None:
        refuse(f"--python: {a.python} is no interpreter that can be run")
    print(f"fleet_sim.py, 10 SIMULATED Jetsons, cap {a.cap_w:g} W, units within +-{a.unit_spread:.0%}, "
          f"{a.rounds} rounds{', ' + ' '.join(extra) if extra else ''}")
    print("| models | seed | fleet W per round | rounds over the cap | slowest node s per round |")
    print("|---|---|---|---|---|")
    overs, worst, n = 0, 0.0, 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        cached = tmp / "cached"
        for kind in ("cached", "fresh"):
            for s in todo[kind]:
                data = cached if kind == "cached" else tmp / f"fresh-{s}"
                if kind == "cached" and not (cached / "models").exists():
                    run(a.python, s, cached, a, extra, tmp)          # fits the models once
                text, o, w = line(kind, s, run(a.python, s, data, a, extra, tmp), a.cap_w)
                overs, worst, n = overs + o, max(worst, w), n + a.rounds
                print(text, flush=True)
    print(f"\n{overs} of {n} rounds over the cap; the most a round drew {worst:.1f} W "
          f"({100 * (worst / a.cap_w - 1):+.2f} % of the cap); {time.perf_counter() - t0:.0f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
