"""Held-out accuracy of `fit --method gp` alone, fast enough to compare modelling changes.

For every scenario of a corpus (evaluate.py's SIM_SCENARIOS or INDEP_SCENARIOS, corpora cached as
evaluate.py caches them), each size and repeat: the same random profiled modes as evaluate.py
draws, fit_model(method="gp") (both targets: power's GPs take the predicted time), MAPE and 90 %
interval coverage on every other grid mode.
No networks, no decisions (evaluate.py does those).  Prints one line per scenario and size and,
with --save-json, keeps the rows; --compare A.json B.json prints the range over scenarios of the
per-scenario medians of two saved runs side by side.

It ends with how the 90 % intervals behave draw by draw (per corpus, size and target): the spread
of the held-out coverage over draws, and how well the sd factor that `fit` calibrates on the
profile's cross-validated residuals (``sd_scale``) matches the factor that would have given
exactly 90 % on that draw's held-out modes (the "oracle"): their correlation over draws and the
sd of log(chosen / oracle).  A factor fitted on a few dozen residuals cannot be better than its
correlation with the oracle allows (docs/accuracy-notes-gp.md).  Last, where the intervals miss:
held-out coverage by quintile of the predicted sd, and on extrapolated modes (a knob value no
profiled mode had) against the others.

    python benchmarks/gp_heldout.py --corpus indep --sizes 25,50 --repeats 3 --save-json new.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import evaluate as ev  # noqa: E402

from ptui.core.catalogue.devices import get_device  # noqa: E402
from ptui.core.prediction import fit as fitmod  # noqa: E402


def scenario(corpus: str, dev_name: str, wl: str, cache: Path):
    """A scenario's full-grid corpus as evaluate.py caches it: (modes, A [n, 4], time_ms, power_w)."""
    if corpus == "sim":
        modes, tt, pp, _ = ev.sim_corpus(dev_name, wl, cache)
    else:
        modes, tt, pp, _ = ev._read(ev.indep_corpus_file(dev_name, wl, cache), dev_name)
    return modes, np.array([m.as_tuple() for m in modes], float), tt, pp


def draw(n: int, k: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw r of k profiled rows out of n, as evaluate.py draws them, and the held-out mask."""
    idx = np.random.default_rng(1000 * k + r).choice(n, k, replace=False)
    return idx, ev.held_out(n, idx)


def run(corpus: str, scenarios, sizes, repeats: int, cache: Path) -> list[dict]:
    ref = ev.load_model(ev.bundled_reference())
    rows = []
    for dev_name, wl in scenarios:
        dev = get_device(dev_name)
        modes, A, tt, pp = scenario(corpus, dev_name, wl, cache)
        n = len(A)
        for k in sizes:
            res: dict = {"time": [], "power": [], "cov_t": [], "cov_p": [], "ch_t": [], "ch_p": [],
                         "scale_t": [], "scale_p": [], "oracle_t": [], "oracle_p": [],
                         "where_t": [], "where_p": []}
            secs = []
            for r in range(repeats):
                idx, ho = draw(n, k, r)
                # held-out modes with a knob value no profiled mode had (extrapolations)
                ext = np.zeros(n, bool)
                for j in range(A.shape[1]):
                    ext |= ~np.isin(A[:, j], A[idx, j])
                ext = ext[ho]
                t1 = time.perf_counter()
                model = fitmod.fit_model(ref, dev, [modes[i] for i in idx], tt[idx], pp[idx],
                                         method="gp", seed=r)
                secs.append((time.perf_counter() - t1) / 2)
                for tgt, y, ck, chk in (("time", tt, "cov_t", "ch_t"), ("power", pp, "cov_p", "ch_p")):
                    pred, met = getattr(model, tgt), model.meta["metrics"][tgt]
                    mu, sd = pred.predict_log(dev, A[ho])
                    res[tgt].append(ev.mape(mu, y[ho]))
                    res[ck].append(ev.coverage(mu, sd, y[ho]))
                    res[chk].append(met["choice"])
                    res["scale_" + ck[-1]].append(met["sd_scale"])
                    res["oracle_" + ck[-1]].append(oracle_factor(mu, sd / met["sd_scale"], y[ho]))
                    res["where_" + ck[-1]].append(where_missed(mu, sd, y[ho], ext))
            row = {"corpus": corpus, "scen": f"{dev_name}/{wl}", "k": k, "raw": res,
                   "secs": float(np.mean(secs)),
                   **{key: float(np.median(v)) for key, v in res.items()
                      if key in ("time", "power", "cov_t", "cov_p")}}
            rows.append(row)
            print(f"{corpus} {row['scen']} k={k}: time {row['time']:.2f} % power {row['power']:.2f} % "
                  f"coverage {row['cov_t']:.0f}/{row['cov_p']:.0f} % ({row['secs']:.2f} s per target) "
                  f"choices {res['ch_t']} {res['ch_p']}", flush=True)
    return rows


def oracle_factor(mu: np.ndarray, raw_sd: np.ndarray, y: np.ndarray) -> float:
    """The factor on the uncalibrated sd that puts exactly 90 % of these held-out values inside
    the interval: the 90 % quantile of |log error| / sd over 1.645."""
    return float(np.quantile(np.abs(np.log(y) - mu) / raw_sd, 0.90) / ev.Z90)


def where_missed(mu: np.ndarray, sd: np.ndarray, y: np.ndarray, ext: np.ndarray) -> dict:
    """Which held-out modes one draw's 90 % intervals cover: by quintile of the predicted sd
    (within this draw, lowest first) and for extrapolated modes (a knob value no profiled mode
    had) against the others; counts, so draws pool exactly."""
    hit = np.abs(np.log(y) - mu) <= ev.Z90 * sd
    rank = np.argsort(np.argsort(sd, kind="stable"), kind="stable") * 5 // len(sd)
    return {"q_n": np.bincount(rank, minlength=5).tolist(),
            "q_hit": np.bincount(rank, weights=hit, minlength=5).astype(int).tolist(),
            "ext": [int(ext.sum()), int(hit[ext].sum()), int((~ext).sum()), int(hit[~ext].sum())]}


def miss_report(rows: list[dict]) -> list[str]:
    """Per corpus, size and target: held-out coverage by quintile of the predicted sd (each draw's
    own quintiles, pooled) and for extrapolated against interpolated modes."""
    out = ["| corpus | modes | target | coverage by predicted-sd quintile, lowest sd first (%) | "
           "extrapolated modes: share, coverage | interpolated: coverage |", "|---|---|---|---|---|---|"]
    for corpus in ("sim", "indep"):
        for k in sorted({r["k"] for r in rows}):
            sel = [r for r in rows if r["corpus"] == corpus and r["k"] == k and "where_t" in r["raw"]]
            for tgt, c in (("time", "t"), ("power", "p")):
                ws = [w for r in sel for w in r["raw"]["where_" + c]]
                if not ws:
                    continue
                qn = np.sum([w["q_n"] for w in ws], axis=0)
                qh = np.sum([w["q_hit"] for w in ws], axis=0)
                e = np.sum([w["ext"] for w in ws], axis=0)
                quint = " / ".join(f"{100 * h / max(m, 1):.0f}" for h, m in zip(qh, qn))
                ext_cov = f"{100 * e[1] / e[0]:.0f}" if e[0] else "-"
                out.append(f"| {corpus} | {k} | {tgt} | {quint} | {100 * e[0] / (e[0] + e[2]):.1f} %, "
                           f"{ext_cov} % | {100 * e[3] / max(e[2], 1):.0f} % |")
    return out


def interval_report(rows: list[dict]) -> list[str]:
    """Per corpus, size and target: held-out coverage over every draw (mean, sd, range), how many
    scenarios' median coverage lies in 85-95 %, and the calibrated factor against the oracle."""
    out = ["| corpus | modes | target | coverage per draw: mean | sd | range | scenarios in 85-95 % "
           "(median of draws) | corr(log chosen, log oracle) | sd of log(chosen / oracle) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for corpus in ("sim", "indep"):
        for k in sorted({r["k"] for r in rows}):
            sel = [r for r in rows if r["corpus"] == corpus and r["k"] == k and "scale_t" in r["raw"]]
            for tgt, c in (("time", "t"), ("power", "p")):
                if not sel:
                    continue
                cov = np.concatenate([r["raw"]["cov_" + c] for r in sel])
                ls = np.log(np.concatenate([r["raw"]["scale_" + c] for r in sel]))
                lo = np.log(np.concatenate([r["raw"]["oracle_" + c] for r in sel]))
                inband = sum(85 <= np.median(r["raw"]["cov_" + c]) <= 95 for r in sel)
                corr = np.corrcoef(ls, lo)[0, 1] if np.std(ls) > 0 and np.std(lo) > 0 else float("nan")
                out.append(f"| {corpus} | {k} | {tgt} | {cov.mean():.1f} | {cov.std():.1f} | "
                           f"{cov.min():.0f}-{cov.max():.0f} | {inband}/{len(sel)} | {corr:.2f} | "
                           f"{np.std(ls - lo):.2f} |")
    return out


def compare(a_path: str, b_path: str) -> None:
    a, b = (json.loads(Path(p).read_text()) for p in (a_path, b_path))
    print("| corpus | modes | run | time MAPE % range (mean) | power MAPE % range (mean) | coverage % range |")
    print("|---|---|---|---|---|---|")
    for corpus in ("sim", "indep"):
        for k in sorted({r["k"] for r in a + b}):
            for name, rows in ((a_path, a), (b_path, b)):
                sel = [r for r in rows if r["corpus"] == corpus and r["k"] == k]
                if not sel:
                    continue
                t, p = [r["time"] for r in sel], [r["power"] for r in sel]
                cov = [r["cov_t"] for r in sel] + [r["cov_p"] for r in sel]
                print(f"| {corpus} | {k} | {Path(name).stem} | {min(t):.1f}-{max(t):.1f} ({np.mean(t):.2f}) "
                      f"| {min(p):.1f}-{max(p):.1f} ({np.mean(p):.2f}) | {min(cov):.0f}-{max(cov):.0f} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", choices=("sim", "indep", "both"), default="both")
    ap.add_argument("--sizes", default="25,50")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scenarios", default=None, help="comma-separated device/workload pairs to keep")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "ptui-eval-corpora"))
    ap.add_argument("--save-json")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"))
    a = ap.parse_args(argv)
    if a.compare:
        compare(*a.compare)
        return
    keep = None if a.scenarios is None else {tuple(s.split("/")) for s in a.scenarios.split(",")}
    rows = []
    for corpus in (("sim", "indep") if a.corpus == "both" else (a.corpus,)):
        scen = ev.SIM_SCENARIOS if corpus == "sim" else ev.INDEP_SCENARIOS
        scen = [s for s in scen if keep is None or s in keep]
        Path(a.cache).mkdir(parents=True, exist_ok=True)
        rows += run(corpus, scen, [int(s) for s in a.sizes.split(",")], a.repeats, Path(a.cache))
    print("\n" + "\n".join(interval_report(rows)))
    print("\nWhere the 90 % intervals miss:\n" + "\n".join(miss_report(rows)))
    if a.save_json:
        Path(a.save_json).write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
