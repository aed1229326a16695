"""benchmarks/eval_concurrent.py's summary: a sweep (or a shard) with no feasible case prints its
figures as nan instead of failing (it raised on the minimum of no ratios: a 12-case --truth indep
run whose first cases were all infeasible), and shards' rows add up."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import eval_concurrent as ec  # noqa: E402

INFEASIBLE = {"case": ["unet", "lstm-lm", 50.0, 100.0, 25.0], "profiled": 15, "walk": None, "optimum": None}
PICKED = {"case": ["vit-tiny", "lstm-lm", 5.0, 1000.0, 35.0], "profiled": 15,
          "walk": ["12c/2201.6/930.75/3199", 16], "optimum": ["8c/2201.6/1032.75/3199", 16, 316.7],
          "preset": 0.9, "maxn_ok": True, "ratio": 0.98659, "met": True, "late": 0.0, "power_w": 33.2}


def test_summary_of_no_feasible_case_does_not_fail(capsys):
    ec.summary([INFEASIBLE, INFEASIBLE])
    out = capsys.readouterr().out
    assert "feasible (exhaustive) 0" in out and "mean nan%" in out


def test_summary_counts_picks_budgets_and_ratios(capsys):
    hot = {**PICKED, "met": False, "power_w": 35.5, "ratio": 1.0}
    ec.summary([INFEASIBLE, PICKED, hot])
    out = capsys.readouterr().out
    assert "cases 3  feasible (exhaustive) 2" in out
    assert "picks meeting both budgets (event sim) 1/2 = 50.0%" in out
    assert "mean power over budget + 0.5 %: 1" in out
    assert "worst 98.66%" in out
    assert "over the picks only: mean 99.33%  worst 98.66%" in out
