"""Benchmark: apply latency through sysfs (plan + ordered writes + read-back + verify), and a
rollback, on the emulated Orin AGX tree.  Real sysfs writes add the kernel's DVFS/hot-plug time
(core hot-plug is the slow part on a real board).  Run: python benchmarks/bench_apply.py
"""
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptui.core.board import emulator  # noqa: E402
from ptui.core.board.apply import apply_mode, rollback  # noqa: E402
from ptui.core.board.backends.sysfs import SysfsBackend  # noqa: E402
from ptui.core.catalogue.devices import get_device  # noqa: E402


def main(n: int = 200) -> None:
    orin = get_device("orin-agx")
    with tempfile.TemporaryDirectory() as d:
        root = emulator.build(Path(d), "orin-agx")
        be = SysfsBackend(orin, root=root)
        modes = orin.pt_grid()[::97]
        app, rb = [], []
        for k in range(n):
            m = modes[k % len(modes)]
            t = time.perf_counter()
            r = apply_mode(be, m)
            app.append(time.perf_counter() - t)
            assert r.ok, r.message
            t = time.perf_counter()
            rollback(be, r.snapshot)
            rb.append(time.perf_counter() - t)
    print(f"apply + verify   median {1000 * statistics.median(app):.2f} ms, p95 "
          f"{1000 * sorted(app)[int(0.95 * n)]:.2f} ms over {n} applies (emulated tree)")
    print(f"rollback         median {1000 * statistics.median(rb):.2f} ms")


if __name__ == "__main__":
    main()
