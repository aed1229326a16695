"""Benchmark: fine-tuning time (50 modes, both models) and prediction of the whole mode space.

Targets: fit < 5 s on a 2-core CPU; 18,096 Orin AGX modes predicted in < 50 ms of compute.
Run: python benchmarks/bench_predict.py
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    from ptui.core.csvio import read_profile
    from ptui.core.devices import get_device
    from ptui.core.predictor import bundled_reference, load_model
    dev = get_device("orin-agx")
    with tempfile.TemporaryDirectory() as d:
        csv = os.path.join(d, "p.csv")
        subprocess.run([sys.executable, "-m", "ptui", "profile", "--device", "orin-agx", "--workload",
                        "mobilenetv3", "--count", "50", "--out", csv], check=True, capture_output=True,
                       env=dict(os.environ, PTUI_DATA_DIR=d), cwd=ROOT)
        modes, t, p = read_profile(csv, dev)
        t0 = time.perf_counter()
        from ptui.core import train
        t_import = time.perf_counter() - t0
        ref = load_model(bundled_reference())
        train.transfer(ref, dev, modes[:12], t[:12], p[:12], workload="warmup", source="x", cv_folds=0)
        t0 = time.perf_counter()
        model = train.transfer(ref, dev, modes, t, p, workload="mobilenetv3", source="bench")
        fit = time.perf_counter() - t0
        space = dev.full_space()
        model.predict(space)
        runs = []
        for _ in range(10):
            t0 = time.perf_counter()
            model.predict(space)
            runs.append(time.perf_counter() - t0)
        runs.sort()
    print(f"torch import              {t_import:.2f} s")
    print(f"fit, both models, 50 modes {fit:.2f} s  (target < 5 s; 3 recipes x 5-fold CV + final + heads)")
    print(f"predict {len(space)} modes      median {1000 * runs[5]:.1f} ms, best {1000 * runs[0]:.1f} ms "
          f"(target < 50 ms)")
    print(f"cpu count                 {os.cpu_count()}")


if __name__ == "__main__":
    main()
