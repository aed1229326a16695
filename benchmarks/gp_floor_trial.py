"""A trial, not the product: an sd floor inside the calibration, on gp_heldout's draws.

f = a x the median uncalibrated sd over the held-out grid modes; the factor is calibrated on the
profile's cross-validated residuals with the floor in (c' = fit.calibrate(|e| / sqrt(sd_cv^2 +
f^2))) and the interval is c' sqrt(sd^2 + f^2).  a = 0 is today's rule.  Prints held-out 90 %
coverage per corpus, size, target and a (docs/accuracy-notes-gp.md, "Where the intervals miss").
Corpora cached as evaluate.py caches them.

    python benchmarks/gp_floor_trial.py          # both corpora, 25 and 50 modes, 3 draws: ~3 min
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import evaluate as ev  # noqa: E402
import gp_heldout as gh  # noqa: E402

from ptui.core.catalogue.devices import get_device  # noqa: E402
from ptui.core.prediction import fit as fitmod  # noqa: E402

ALPHAS = (0.0, 0.25, 0.5, 1.0)


class Capture:
    """Keeps each CV score's signed residuals and sds, and which score fit calibrated on."""

    def __init__(self) -> None:
        self.scores: list[dict] = []
        self.chosen: list[dict] = []
        self._score, self._cal = fitmod._CV.score, fitmod.calibrate
        cap = self

        def score(cv, ly):
            d = cap._score(cv, ly)
            ok = np.isfinite(cv.log_pred)
            d["_r"] = cv.log_pred[ok] - ly[ok]
            d["_sd"] = np.maximum(cv.log_sd[ok], 1e-9)
            cap.scores.append(d)
            return d

        def calibrate(z):
            cap.chosen.append(next(d for d in reversed(cap.scores) if d["_z"] is z))
            return cap._cal(z)
        fitmod._CV.score, fitmod.calibrate = score, calibrate

    def clear(self) -> None:
        self.scores.clear()
        self.chosen.clear()


def trial(cache: Path) -> dict:
    ref = ev.load_model(ev.bundled_reference())
    cap = Capture()
    res: dict = {}
    for corpus, scen in (("sim", ev.SIM_SCENARIOS), ("indep", ev.INDEP_SCENARIOS)):
        for dev_name, wl in scen:
            dev = get_device(dev_name)
            modes, A, tt, pp = gh.scenario(corpus, dev_name, wl, cache)
            for k in (25, 50):
                for r in range(3):                       # gp_heldout's and evaluate's draws
                    idx, ho = gh.draw(len(A), k, r)
                    cap.clear()
                    model = fitmod.fit_model(ref, dev, [modes[i] for i in idx], tt[idx], pp[idx],
                                             method="gp", seed=r)
                    for d, (tgt, y) in zip(cap.chosen, (("time", tt), ("power", pp))):
                        pred = getattr(model, tgt)
                        mu, sd = pred.predict_log(dev, A[ho])
                        raw = sd / pred.sd_scale
                        e = np.log(y[ho]) - mu
                        for a in ALPHAS:
                            f = a * np.median(raw)
                            c = cap._cal(np.abs(d["_r"]) / np.sqrt(d["_sd"] ** 2 + f ** 2))
                            cov = float(np.mean(np.abs(e) <= ev.Z90 * c * np.sqrt(raw ** 2 + f ** 2)) * 100)
                            res.setdefault((corpus, k, tgt, a), {}).setdefault(f"{dev_name}/{wl}", []).append(cov)
            print(corpus, dev_name, wl, flush=True)
    return res


def table(res: dict) -> list[str]:
    out = ["| corpus | modes | target | floor a | coverage per draw: mean | sd | range | "
           "scenarios in 85-95 % (median of draws) | scenario medians |", "|---|---|---|---|---|---|---|---|---|"]
    for (corpus, k, tgt, a), per in sorted(res.items()):
        allc = np.concatenate([np.asarray(v) for v in per.values()])
        meds = [float(np.median(v)) for v in per.values()]
        inb = sum(85 <= m <= 95 for m in meds)
        out.append(f"| {corpus} | {k} | {tgt} | {a} | {allc.mean():.1f} | {allc.std():.1f} | "
                   f"{allc.min():.0f}-{allc.max():.0f} | {inb}/{len(meds)} | {min(meds):.0f}-{max(meds):.0f} |")
    return out


if __name__ == "__main__":
    cache = Path(os.path.join(tempfile.gettempdir(), "ptui-eval-corpora"))
    cache.mkdir(parents=True, exist_ok=True)
    print("\n".join(table(trial(cache))))
