"""`ptui fit` on a profile larger than the fit's cap (fit.FIT_MAX_ROWS, the real one): it finishes,
says in one line what it fitted on and how the other rows checked it, and the model records it.
Before the cap a GP fit on 1,500 rows ran for many minutes (4,368: no answer after 420 s)."""
import json
import subprocess

import pytest

from ptui.core.prediction.fit import FIT_MAX_ROWS
from tests.support.cli import PY, ROOT, subprocess_env


def _ptui(tmp_path, *args, timeout):
    r = subprocess.run([PY, "-m", "ptui", *map(str, args)], env=subprocess_env(tmp_path), cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.slow
def test_fit_on_a_1500_mode_profile_finishes_on_a_capped_subset(tmp_path):
    _ptui(tmp_path, "profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "1500",
          "--out", tmp_path / "p.csv", timeout=300)
    # generous: about 20 s on an idle 2-core machine; the bound that matters is structural
    out = _ptui(tmp_path, "fit", "--device", "orin-agx", "--profile", tmp_path / "p.csv",
                "--method", "gp", "--out", tmp_path / "m", timeout=600)
    line = next(x for x in out.splitlines() if "fitted on" in x)
    assert f"fitted on {FIT_MAX_ROWS} of 1,500 profiled modes, chosen to cover the space" in line
    assert f"the other {1500 - FIT_MAX_ROWS:,} checked it: time MAPE" in line
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert meta["trained_on"]["modes"] == 1500 and meta["trained_on"]["fitted_rows"] == FIT_MAX_ROWS
    for tgt in ("time", "power"):
        m = meta["metrics"][tgt]
        assert m["rest_rows"] == 1500 - FIT_MAX_ROWS and m["rest_mape"] < 3
        assert m["cv_folds"] == 5
    # every measured mode still counts in decisions: the model holds all 1,500
    from ptui.core.prediction.predictor import load_model
    assert len(load_model(tmp_path / "m").measured["time_ms"]) == 1500
