"""Measurement outliers: a profiled mode disturbed while it was measured is left out of the GP fit
(and said so), a clean profile loses no row, and both faces print which rows were left out."""
import json

import numpy as np
import pytest

from ptui.core.catalogue.modes import Mode
from ptui.core.prediction.fit import _CV, OUTLIER_MIN_MODES, OUTLIER_Z, fit_model, next_outlier, outlier_note
from ptui.core.prediction.predictor import load_bundled

from .test_gp import DEV, synthetic


def _cv(n, seed=0):
    """CV predictions whose errors are exactly N(0, sd) in z."""
    rng = np.random.default_rng(seed)
    ly = rng.normal(4.0, 0.5, n)
    sd = np.full(n, 0.02)
    return ly, _CV(ly + sd * rng.standard_normal(n), sd)


def _all(cv, ly):
    """What the fit's loop would leave out if refitting changed nothing: next_outlier repeatedly."""
    cv = _CV(cv.log_pred.copy(), cv.log_sd.copy())
    out = []
    while (i := next_outlier(cv, ly)) is not None:
        out.append(i)
        cv.log_pred[i] = np.nan
    return out


def test_one_far_row_is_flagged_and_only_it():
    ly, cv = _cv(50)
    cv.log_pred[7] = ly[7] + 0.30                # 30 % off where the others are 2 %: z = 15
    assert _all(cv, ly) == [7]


def test_no_row_of_a_gaussian_profile_is_flagged():
    for seed in range(20):
        ly, cv = _cv(50, seed)
        assert next_outlier(cv, ly) is None


def test_threshold_is_robust_to_the_outlier_itself():
    """The scale is the median |z|: one huge error does not raise it and hide a second one; the
    worse goes first."""
    ly, cv = _cv(45, 3)
    cv.log_pred[0] = ly[0] + 2.0                  # z = 100
    cv.log_pred[1] = ly[1] - 0.25                 # z = 12.5
    assert _all(cv, ly) == [0, 1]


def test_small_profiles_and_the_cap():
    ly, cv = _cv(OUTLIER_MIN_MODES - 1)
    cv.log_pred[0] = ly[0] + 1.0
    assert next_outlier(cv, ly) is None           # too few rows to tell a bad row from a hard region
    ly, cv = _cv(50)
    cv.log_pred[:8] = ly[:8] + np.linspace(0.5, 1.0, 8)
    assert _all(cv, ly) == [7, 6, 5, 4, 3]        # at most a tenth, the worst first


def test_just_below_the_threshold_stays():
    ly, cv = _cv(50, 5)
    z = np.abs(cv.log_pred - ly) / cv.log_sd
    scale = np.median(z) / 0.6745
    cv.log_pred[9] = ly[9] + 0.98 * OUTLIER_Z * scale * cv.log_sd[9]
    assert next_outlier(cv, ly) is None
    cv.log_pred[9] = ly[9] + 1.1 * OUTLIER_Z * scale * cv.log_sd[9]
    assert next_outlier(cv, ly) == 9


@pytest.fixture(scope="module")
def corrupted():
    modes, _, t, p = synthetic(45, 21, noise=0.01)
    t_bad = t.copy()
    t_bad[5] *= 1.35                              # a background job slowed this mode's minibatches
    clean = fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0)
    bad = fit_model(load_bundled(), DEV, modes, t_bad, p, method="gp", seed=0)
    return modes, t, t_bad, clean, bad, p


@pytest.mark.slow
def test_fit_leaves_the_disturbed_mode_out_and_predicts_it_as_the_clean_fit(corrupted):
    modes, t, t_bad, clean, bad, _ = corrupted
    mt = bad.meta["metrics"]["time"]
    assert [o["mode"] for o in mt["outliers"]] == [modes[5].key]
    o = mt["outliers"][0]
    assert o["measured"] == pytest.approx(t_bad[5])
    assert abs(o["cross_validated"] / t[5] - 1) < 0.05            # what the others predict
    assert "outliers" not in bad.meta["metrics"]["power"]          # power was measured cleanly
    assert "outliers" not in clean.meta["metrics"]["time"]         # a clean profile loses nothing
    # the model of the disturbed profile predicts that mode (and the others) as the clean one
    mu_bad = bad.predict(modes)["time_ms"]
    mu_clean = clean.predict(modes)["time_ms"]
    assert abs(mu_bad[5] / t[5] - 1) < 0.05
    assert np.median(np.abs(mu_bad / mu_clean - 1)) < 0.01
    # the cross-validation is scored on the kept rows only: no NaN leaks into the metrics
    assert np.isfinite(mt["cv_mape"]) and np.isfinite(mt["sd_scale"])
    assert all(np.isfinite(v) for v in mt["candidates_cv_mape"].values())


def test_fit_without_leaving_out_would_widen_the_intervals(corrupted, monkeypatch):
    """What leaving the row out buys: kept in, the outlier widens every interval of the model
    (the calibration on CV residuals and the GP's noise both grow)."""
    modes, _, t_bad, _, bad, p = corrupted
    from ptui.core.prediction import fit
    monkeypatch.setattr(fit, "OUTLIER_MIN_MODES", 10 ** 6)
    kept_in = fit_model(load_bundled(), DEV, modes, t_bad, p, method="gp", seed=0)
    assert "outliers" not in kept_in.meta["metrics"]["time"]
    sd_in = kept_in.time.predict_log(DEV, np.array([m.as_tuple() for m in modes], float))[1]
    sd_out = bad.time.predict_log(DEV, np.array([m.as_tuple() for m in modes], float))[1]
    assert np.median(sd_in) > 1.3 * np.median(sd_out)


def test_outlier_note_names_mode_and_figures(corrupted):
    modes, t, t_bad, _, bad, _ = corrupted
    note = outlier_note("time", bad.meta["metrics"]["time"])
    assert modes[5].describe() in note and f"{t_bad[5]:.4g} ms" in note and "re-profile" in note
    assert outlier_note("power", bad.meta["metrics"]["power"]) is None


def test_model_with_outliers_saves_and_loads(corrupted, tmp_path):
    from ptui.core.prediction.predictor import load_model
    _, _, _, _, bad, _ = corrupted
    bad.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    assert again.meta["metrics"]["time"]["outliers"] == bad.meta["metrics"]["time"]["outliers"]


def _measured(modes, t, p, sd=0.004):
    return {"modes": np.array([m.as_tuple() for m in modes], float), "time_ms": np.array(t),
            "power_w": np.array(p), "time_ms_std": np.array(t) * sd, "power_w_std": np.array(p) * sd}


@pytest.mark.slow
def test_a_left_out_measurement_is_not_trusted_as_exact(corrupted):
    """Decisions count profiled modes' measurements; one the fit left out keeps its figure but its
    sd widens to the distance from what the other modes predict (a risk-aware pick then does not
    take a disturbed reading as exact).  fit_model does this to the model's measured figures."""
    from ptui.core.prediction.fit import distrust_outliers
    from ptui.core.prediction.gp import raw_modes
    modes, _, t_bad, _, bad, p = corrupted
    meas = _measured(modes, t_bad, p)
    got = distrust_outliers(meas, raw_modes(modes), bad.meta["metrics"])
    o = bad.meta["metrics"]["time"]["outliers"][0]
    assert got["time_ms_std"][5] == pytest.approx(abs(o["measured"] - o["cross_validated"]))
    assert got["time_ms"][5] == t_bad[5]                               # the figure is kept
    others = np.arange(len(modes)) != 5
    assert np.array_equal(got["time_ms_std"][others], meas["time_ms_std"][others])
    assert np.array_equal(got["power_w_std"], meas["power_w_std"])
    assert meas["time_ms_std"][5] == pytest.approx(t_bad[5] * 0.004)   # the caller's dict is kept
    model = fit_model(load_bundled(), DEV, modes, t_bad, p, method="gp", seed=0, measured=meas)
    assert model.measured["time_ms_std"][5] == pytest.approx(got["time_ms_std"][5])
    clean = fit_model(load_bundled(), DEV, modes[:30], t_bad[:30], p[:30], method="gp", seed=0,
                      measured=_measured(modes[:30], t_bad[:30], p[:30]))
    assert clean.measured["time_ms_std"][5] == pytest.approx(t_bad[5] * 0.004)   # under 40 modes


@pytest.mark.slow
def test_cli_fit_names_a_disturbed_reading_and_pareto_does_not_trust_it(tmp_path, cli):
    """A power reading caught low by a transient (about 20 W read as 17.2 W) on a 45-mode profile:
    ptui fit names it, and the 18 W budget's pick is not that mode at its low reading (before:
    picked as 'measured 17.20 W +-0.08', a mode that draws 20 W)."""
    from tests.support.cli import disturbed_profile
    q, victim, true_w, key = disturbed_profile(tmp_path)
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", q, "--out", tmp_path / "m",
                       "--method", "gp")
    assert rc == 0, err
    # it alone, named in plain words
    assert "left out of the power fit as an outlier (" in out and Mode.from_key(key).describe() in out
    assert "measured 17.2 W" in out
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "18", "--json")
    assert rc == 0, err
    res = json.loads(out)
    picked = [float(res["mode"][k]) for k in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")]
    assert picked != [float(v) for v in victim[:4]], true_w


def test_tune_decides_with_the_widened_measurement_and_says_why(tmp_path):
    """ptui tune's decision (core.tune_decide) counts the profile's measurements as the fitted
    model keeps them: a reading the fit left out is not exact there either (it used the raw
    readings: the 18 W pick was the mode read 3 W low), and it says which reading it left out."""
    from ptui import core
    from ptui.core.catalogue.devices import get_device
    from tests.support.cli import disturbed_profile
    q, victim, _, key = disturbed_profile(tmp_path)
    said = []
    td = core.tune_decide(q, get_device("orin-agx"), budget_w=18.0, method="gp",
                             model_dir=tmp_path / "m", progress=said.append)
    assert any("left out of the power fit" in s and Mode.from_key(key).describe() in s for s in said)
    assert [float(v) for v in td.decision.mode.as_tuple()] != [float(v) for v in victim[:4]]
