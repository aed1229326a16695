"""Benchmark: profile PowerTrain's whole Orin AGX grid (4,368 modes) on the simulator.

Prints the wall time, the simulated device time and the per-mode cost.  Target: < 60 s wall on a
2-core machine.  Run: python benchmarks/bench_profile.py
"""
import os
import subprocess
import sys
import tempfile
import time


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, PTUI_DATA_DIR=d)
        out = os.path.join(d, "grid.csv")
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "ptui", "profile", "--device", "orin-agx",
                            "--workload", "resnet18", "--grid", "pt", "--out", out],
                           env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if r.returncode:
            sys.exit(r.stderr)
        n = sum(1 for _ in open(out)) - 1
        last = r.stderr.strip().splitlines()[-1]
        print(f"modes profiled        {n}")
        print(f"wall time             {wall:.1f} s  (target < 60 s; {1000 * wall / n:.2f} ms per mode)")
        print(f"cpu count             {os.cpu_count()}")
        print(f"ptui says             {last}")


if __name__ == "__main__":
    main()
