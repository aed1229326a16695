"""Benchmark: cost of sampling a Jetson through sysfs at 10 Hz (emulated Orin AGX tree).

Target: under 1 % of one core.  Run: python benchmarks/bench_sampling.py
"""
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptui.core.board import emulator  # noqa: E402
from ptui.core.board.backends.sysfs import SysfsBackend  # noqa: E402
from ptui.core.board.telemetry import Sampler  # noqa: E402
from ptui.core.catalogue.devices import get_device  # noqa: E402


def main(seconds: float = 10.0) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = emulator.build(Path(d), "orin-agx")
        emulator.Driver(root).step()
        be = SysfsBackend(get_device("orin-agx"), root=root)
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            be.read()
        per = (time.perf_counter() - t0) / n
        s = Sampler(be, interval=0.1)
        c0, w0 = sum(os.times()[:2]), time.perf_counter()
        s.start()
        time.sleep(seconds)
        s.stop()
        cpu, wall = sum(os.times()[:2]) - c0, time.perf_counter() - w0
        samples = len(s.history())
        t = s.latest()
    print(f"one sample (4 rails, clocks, cores, load, 4 zones)  {per * 1e6:.0f} us")
    print(f"10 Hz for {seconds:.0f} s: {samples} samples kept, CPU {100 * cpu / wall:.2f} % of one core "
          f"(target < 1 %)")
    print(f"last sample: {t.power_w} W, rails {sorted(t.rails)}")


if __name__ == "__main__":
    main()
