"""Build step of the roofline prior (issue 25): calibrate each board's constants once and print
them as the BOARDS entries of ptui/core/prediction/roofline.py (paste them there; nothing is written).

Sources: the bundled reference model (ResNet-18 at batch 16, recorded on ptui's simulated Orin
AGX; its predictions over PowerTrain's grid) and published figures (shared/research/real-data.md).
See roofline.reference_calibration.

Run: python benchmarks/calibrate_roofline.py
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptui.core.catalogue.devices import DEVICES  # noqa: E402
from ptui.core.prediction import roofline  # noqa: E402
from ptui.core.prediction.predictor import load_bundled  # noqa: E402


def main() -> int:
    ref = load_bundled("orin-agx")
    boards = roofline.reference_calibration(ref.device, ref.predict)
    print("BOARDS: dict[str, BoardRoof] = {")
    for name in DEVICES:
        print(f'    "{name}": BoardRoof(')
        line = "       "
        for k, v in roofline.roof_constants(boards[name]).items():
            item = f" {k}={v!r},"
            if len(line) + len(item) > 100:
                print(line)
                line = "       "
            line += item
        print(line)
        print("    ),")
    print("}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
