"""Benchmark: `ptui fit` (both targets, cross-validation included) per method on 50 profiled modes,
the whole `ptui fit` process, and prediction of all 18,096 Orin AGX modes.

Targets (issue 8): fit <= 5 s on 2 cores (whole process <= 8 s); predicting the 18,096 modes
<= 50 ms of compute.  Run: python benchmarks/bench_predict.py [--methods gp,auto,powertrain]
[--count N]: N profiled modes (default 50); above fit.FIT_MAX_ROWS the fit takes that many of them,
so --count 1000 shows a capped model's fit and prediction (the targets are for 50).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", default="gp,auto,powertrain")
    ap.add_argument("--count", type=int, default=50)
    args = ap.parse_args()
    from ptui.core.board.csvio import read_profile
    from ptui.core.catalogue.devices import get_device
    from ptui.core.prediction.fit import fit_model
    from ptui.core.prediction.predictor import load_bundled
    dev = get_device("orin-agx")
    space = dev.full_space()
    print(f"cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, PTUI_DATA_DIR=d, PYTHONPATH=str(ROOT))
        csv = os.path.join(d, "p.csv")
        subprocess.run([sys.executable, "-m", "ptui", "profile", "--device", "orin-agx", "--workload",
                        "mobilenetv3", "--count", str(args.count), "--out", csv], check=True, capture_output=True,
                       env=env, cwd=ROOT)
        modes, t, p = read_profile(csv, dev)
        ref = load_bundled()
        fit_model(ref, dev, modes[:12], t[:12], p[:12], method="gp")       # warm imports
        for method in args.methods.split(","):
            t0 = time.perf_counter()
            model = fit_model(ref, dev, modes, t, p, method=method)
            fit = time.perf_counter() - t0
            model.predict(space)
            runs, cpu = [], []
            for _ in range(21):
                t0, c0 = time.perf_counter(), time.process_time()
                model.predict(space)
                runs.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            runs.sort()
            cpu.sort()
            kinds = "/".join(model.meta["metrics"][k]["choice"] for k in ("time", "power"))
            print(f"{method:<10} fit both targets (CV incl.) {fit:5.2f} s   predict {len(space)} modes "
                  f"median {1000 * runs[10]:5.1f} ms  best {1000 * runs[0]:5.1f} ms  (CPU time, "
                  f"BLAS threads included: median {1000 * cpu[10]:5.1f} ms)   [{kinds}]")
        for method in args.methods.split(","):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "ptui", "fit", "--device", "orin-agx", "--profile", csv,
                            "--method", method, "--out", os.path.join(d, f"m-{method}")], check=True,
                           capture_output=True, env=env, cwd=ROOT)
            print(f"{method:<10} whole `ptui fit` process {time.perf_counter() - t0:5.2f} s")
    print("targets: fit <= 5 s, process <= 8 s, predict <= 50 ms")


if __name__ == "__main__":
    main()
