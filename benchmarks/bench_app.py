"""Benchmark: ptui app on the simulator — startup to the first dashboard render, memory, idle CPU.

Targets: dashboard in < 1 s, < 150 MB before fine-tuning, < 2 % of a core when idle.
Runs the real app headless in a child process.  Run: python benchmarks/bench_app.py
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, resource, sys, time
out = sys.argv[1]
from ptui.app import PtuiApp, make_state
app = PtuiApp(make_state())
marks = {}

def first_render():
    marks["ready"] = time.time()
    app.set_timer(2.0, start_idle)

def start_idle():
    marks["cpu0"] = sum(os.times()[:2]); marks["t0"] = time.time()
    app.set_timer(10.0, finish)

def finish():
    cpu = sum(os.times()[:2]) - marks["cpu0"]; wall = time.time() - marks["t0"]
    json.dump({"ready": marks["ready"], "idle_cpu_pct": 100 * cpu / wall,
               "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "torch_imported": "torch" in sys.modules, "sklearn_imported": "sklearn" in sys.modules},
              open(out, "w"))
    app.exit()

app.call_after_refresh(lambda: app.call_after_refresh(first_render))
app.run(headless=True, size=(100, 32))
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        t0 = time.time()
        subprocess.run([sys.executable, "-c", CHILD, out], check=True, cwd=ROOT,
                       env=dict(os.environ, PTUI_DATA_DIR=d))
        r = json.load(open(out))
    print(f"start to first dashboard render  {r['ready'] - t0:.2f} s  (target < 1 s; includes Python start)")
    print(f"peak memory (RSS)                {r['maxrss_mb']:.0f} MB  (target < 150 MB)")
    print(f"idle CPU, dashboard live         {r['idle_cpu_pct']:.2f} % of a core  (target < 2 %)")
    print(f"torch imported                   {r['torch_imported']}  (must be False)")
    print(f"scikit-learn imported            {r['sklearn_imported']}")


if __name__ == "__main__":
    main()
