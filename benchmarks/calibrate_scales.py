"""The log-spread of the roofline prior's time scales a workload spec leaves unknown: prints
roofline.SCALE_SD.

A model of the prior alone (no mode profiled) predicts each mode's median over three scales of
the spec's work (RooflinePrior.predictive): the FLOPs' (the kernels' efficiency against the
board's compute roof), the DRAM bytes' (what the caches keep) and the CPU work's (the reference's
where the spec gives none).  Their spread is calibrated here on ptui's simulator only, as the
prior's spreads are (roofline.spread_calibration): every catalog workload on every board, with a
spec of counts (FLOPs, bytes, batch) and the full one (CPU ms too), the prior refitted
(RooflinePrior.adapted, noise-free) to every mode of PowerTrain's grid; each scale's log-spread is
the rms of the fitted log scales (the CPU's apart for counts, where it is assumed, and for the
full spec, where it is given).  --truth indep prints the same on the independent generator
(benchmarks/indep_corpus.py), which only checks the result.

Run: python benchmarks/calibrate_scales.py [--truth sim|indep]   (about 4 min on 2 cores)
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibrate_few_modes  # noqa: E402

from ptui.core.catalogue.devices import get_device  # noqa: E402
from ptui.core.prediction import roofline  # noqa: E402
from ptui.core.prediction.gp import raw_modes  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--truth", choices=("sim", "indep"), default="sim")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    scales: dict[str, list] = {"counts": [], "full": []}
    for board in calibrate_few_modes.BOARDS:
        dev = get_device(board)
        modes = dev.pt_grid()
        A = raw_modes(modes)
        for name, t, p, spec in calibrate_few_modes.cases(dev, A, a.truth):
            prior = roofline.RooflinePrior(dev, spec)
            fitted = prior.adapted(modes, t, p).spec
            host = roofline._cpu_work(spec, prior.roof, dev)[0]
            g = math.log(fitted.gflop_per_step / spec.gflop_per_step)
            m = math.log(fitted.gbytes_per_step / spec.gbytes_per_step)
            c = math.log(fitted.host_ms / host) if host and fitted.host_ms else float("nan")
            kind = "full" if spec.has_host_work else "counts"
            scales[kind].append((g, m, c))
            print(f"{board:10} {name:12} {kind:6} log scales: FLOPs {g:+.2f}, bytes {m:+.2f}, "
                  f"CPU {c:+.2f}")
    rms = {k: np.sqrt(np.nanmean(np.array(v) ** 2, axis=0)) for k, v in scales.items()}
    both = np.sqrt(np.nanmean(np.array(scales["counts"] + scales["full"]) ** 2, axis=0))
    print(f"\n{a.truth}: rms log scale over {sum(map(len, scales.values()))} fits "
          f"({time.perf_counter() - t0:.0f} s)")
    print(f"SCALE_SD = {{\"gflop\": {both[0]:.2f}, \"gbytes\": {both[1]:.2f}, "
          f"\"cpu_assumed\": {rms['counts'][2]:.2f}, \"cpu_given\": {rms['full'][2]:.2f}}}")
    print(f"stored:    {roofline.SCALE_SD}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
