"""How well the inference models reproduce the measured Orin AGX MAXN sweep (Pagoda's data).

For each model: time and power MAPE (and worst point) of the fit on all five batch sizes, then a
leave-one-batch-size-out check (fit on four, predict the fifth, for each of the five): the mean
and worst error on the point left out.  The ResNet-50 batch-32 power (a logging glitch) is left
out of every power figure.  Per-batch predictions with --rows.

Run: python benchmarks/eval_inference_calibration.py [--rows]
"""
from __future__ import annotations

import argparse

import numpy as np

from ptui.core.board.inference import calibrate, leave_one_out
from ptui.core.catalogue.inference import INFERENCE


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", action="store_true", help="print every batch size's prediction")
    a = ap.parse_args()
    print(f"{'model':14s} {'fit: time MAPE (max)':>21s} {'power MAPE (max)':>17s}   "
          f"{'left out: time (max)':>20s} {'power (max)':>13s}")
    for n in INFERENCE:
        c = calibrate(n)
        lo = leave_one_out(n)
        lt = np.array([h.time_err for h in lo])
        lp = np.array([h.power_err for h in lo if h.power_err is not None])
        print(f"{n:14s} {c.time_mape:9.1f}% ({c.time_max_err:4.1f}%) {c.power_mape:8.1f}% "
              f"({c.power_max_err:4.1f}%)   {lt.mean():10.1f}% ({lt.max():4.1f}%) "
              f"{lp.mean():5.1f}% ({lp.max():4.1f}%)")
        if a.rows:
            for (b, tm, tp, pm, pp), h in zip(c.rows, lo):
                hp = "-" if h.power_err is None else f"{h.power_err:.1f}%"
                print(f"    batch {b:3d}: {tm:9.2f} ms -> {tp:9.2f}  {pm:5.1f} W -> {pp:5.1f}   "
                      f"left out: time {h.time_err:.1f}%  power {hp}")


if __name__ == "__main__":
    main()
