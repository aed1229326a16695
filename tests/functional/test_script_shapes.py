"""Training code shaped in ways ptui did not time well (issue 23), reproduced with plain torch by
the scripts in tests/support/thirdparty/: LBFGS with a closure, a manual parameter update (no
torch.optim step), a compiled optimizer step, and a PPO-like loop whose wall time goes mostly into
CPU rollouts between short optimizer steps."""
import csv
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

HERE = Path(__file__).resolve().parents[1] / "support" / "thirdparty"


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_lbfgs_closure_evaluations_are_not_gradient_accumulation(tmp_path, cli):
    """LBFGS's step(closure) evaluates the closure (forward + backward) up to max_iter times: that
    was labelled 'gradient accumulation: 5 backward passes per step'."""
    out = tmp_path / "l.csv"
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--sample-interval", "0.1",
                     "--out", out, "--", sys.executable, HERE / "lbfgs_closure.py")
    assert rc == 0, err
    assert "accumulation" not in err and "micro-batches" not in err, err
    assert "timing one optimizer step with a closure (5 closure evaluations per step" in err, err
    for r in _rows(out):
        assert "accumulation" not in r["timed"]
        assert r["timed"].endswith("one optimizer step with a closure (5 closure evaluations per step: "
                                   "the optimizer's own forward and backward passes)"), r["timed"]


def test_closure_words_in_time_unit():
    from ptui.core.profiler import time_unit
    from ptui.core.userscript import _Iterations
    it = _Iterations()
    for k in range(4):                       # opt 0, no backward before the step, 5 inside it
        it.step(float(k), 0, 0, False, 5)
    assert it.timed() == ("optimizer step with a closure (5 closure evaluations per step: the "
                          "optimizer's own forward and backward passes)")
    assert time_unit("one " + it.timed()).startswith("optimizer step with a closure (5 closure")
