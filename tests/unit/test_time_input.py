"""Power GPs that take the predicted step time as an input (fit.TIME_INPUT): fitted after time,
stored with the time predictor they use (plain arrays), wired to the model's own time predictor on
load, and never changing the time prediction itself."""
import json

import numpy as np
import pytest

from ptui.core.prediction import gp as gpmod
from ptui.core.prediction.fit import TIME_INPUT, fit_model, fit_one
from ptui.core.prediction.gp import GPStack, raw_modes
from ptui.core.prediction.modeldir import meta_digest
from ptui.core.prediction.predictor import Model, ModelError, load_bundled, load_model

from .test_gp import DEV, synthetic


@pytest.fixture(scope="module")
def fitted():
    modes, _, t, p = synthetic(30, 31)
    return modes, t, p, fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0)


def test_power_members_take_the_time_prediction(fitted):
    modes, t, p, model = fitted
    pw = model.power
    assert isinstance(pw, GPStack) and pw.time_source is model.time
    flags = {m.prior: m.time_input for m in pw.members}
    assert flags == {"none": "gp" in TIME_INPUT, "physmean": "gp-physmean" in TIME_INPUT,
                     "refinput": "gp-refinput" in TIME_INPUT}
    assert not any(m.time_input for m in model.time.members)      # time never takes itself
    # the time input column of the training rows: the time model's prediction of those modes
    m = next(m for m in pw.members if m.time_input)
    k = 12                                   # power's knob features: log, 1/x and x of 4 knobs
    col = m.X[:, k] * m.x_scale[k] + m.x_mean[k]
    assert np.allclose(col, model.time.predict_log(DEV, raw_modes(modes))[0], atol=1e-9)
    with pytest.raises(ValueError, match="step time"):        # alone it cannot predict
        m.predict_log(DEV, raw_modes(modes))


def test_held_out_rows_get_a_time_that_did_not_see_them(monkeypatch):
    """In cross-validation a held-out row's time input is the time GPs' own cross-validated
    prediction (what a never-profiled mode gets), not the all-data time model's, which saw the row:
    with that, the power member's CV coverage read 84-96 % where held-out modes saw 61-86 %."""
    from ptui.core.prediction import fit
    seen, stacks = {}, []
    real_stack, real_cand = fit._gp_stack, fit._gp_candidate

    def stack(*a):
        out = real_stack(*a)
        stacks.append(out[1])
        return out

    def cand(*a, **k):
        if a[-1] is not None:
            seen["inside"], seen["held"] = a[-2], a[-1]
        return real_cand(*a, **k)
    monkeypatch.setattr(fit, "_gp_stack", stack)
    monkeypatch.setattr(fit, "_gp_candidate", cand)
    modes, _, t, p = synthetic(30, 31)
    fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0)
    time_cv = stacks[0].log_pred                  # the first stack fitted is time's
    assert np.allclose(seen["held"], time_cv) and not np.allclose(seen["held"], seen["inside"])


def test_fitting_power_leaves_time_as_fitted_alone(fitted):
    """The time predictor of a two-target fit predicts exactly as the time fitted on its own (a
    reference grid of the power network once leaked into the time members: 1 % off)."""
    modes, t, _, model = fitted
    alone, _ = fit_one(DEV, raw_modes(modes), t, load_bundled().time, method="gp", seed=0,
                       target="time")
    B = raw_modes(DEV.full_space()[::7])
    assert np.allclose(model.time.predict_log(DEV, B)[0], alone.predict_log(DEV, B)[0], atol=1e-9)


def test_round_trip_wires_the_loaded_time_predictor(fitted, tmp_path, monkeypatch):
    modes, _, _, model = fitted
    model.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    assert again.power.time_source is again.time
    grid = DEV.full_space()
    a, b = model.predict(grid), again.predict(grid)
    for k in a:
        assert np.allclose(a[k], b[k], rtol=1e-9), k
    # predicting both targets computes the time once: the power stack takes it from the model
    calls = []
    real = gpmod.time_log
    monkeypatch.setattr(gpmod, "time_log", lambda *x: calls.append(1) or real(*x))
    again.predict(grid)
    assert calls == []
    # power.npz alone predicts: the stack stores its time predictor (the time_ arrays)
    with np.load(tmp_path / "m" / "power.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    assert any(k.startswith("time_m0_") for k in arrays)
    cfg = json.loads((tmp_path / "m" / "meta.json").read_text())["predictors"]["power"]
    alone = GPStack.from_arrays(cfg, arrays)
    A = raw_modes(grid[:500])
    assert np.allclose(alone.predict_log(DEV, A)[0], again.power.predict_log(DEV, A)[0], atol=1e-9)
    assert len(calls) == 2              # called on their own, each stack computed the time itself


def test_with_another_time_predictor_the_stack_uses_its_own(fitted):
    """A model whose time predictor is not the one the power stack was fitted with (auto chose a
    network for time) still predicts power from the stack's own time GPs."""
    modes, _, _, model = fitted
    mixed = Model(DEV, load_bundled().time, model.power, {})
    A = raw_modes(DEV.pt_grid()[:300])
    got = mixed.predict(DEV.pt_grid()[:300])["power_w"]
    assert np.allclose(np.log(got), model.power.predict_log(DEV, A)[0], atol=1e-9)


def _edit(tmp_path, fn):
    f = tmp_path / "m" / "meta.json"
    meta = json.loads(f.read_text())
    fn(meta["predictors"]["power"])
    meta["digest"] = meta_digest(meta)
    f.write_text(json.dumps(meta))


def test_a_stack_with_time_inputs_but_no_time_predictor_is_refused(fitted, tmp_path):
    fitted[3].save(tmp_path / "m")
    _edit(tmp_path, lambda cfg: cfg.pop("time_source"))
    with pytest.raises(ModelError, match="no time predictor"):
        load_model(tmp_path / "m")


def test_a_time_predictor_with_a_time_input_is_refused(fitted, tmp_path):
    fitted[3].save(tmp_path / "m")
    _edit(tmp_path, lambda cfg: cfg["time_source"]["members"][0].update(time_input=True))
    with pytest.raises(ModelError):
        load_model(tmp_path / "m")


def test_power_fitted_alone_has_no_time_input():
    modes, _, _, p = synthetic(20, 5)
    pw, _ = fit_one(DEV, raw_modes(modes), p, load_bundled().power, method="gp", seed=0,
                    target="power")
    assert pw.time_source is None and not any(m.time_input for m in pw.members)


def test_batch_aware_power_takes_the_time_per_step():
    """Several batch sizes: the time GPs predict per sample x B; the power stack's time input is
    that per-step time, at fit and at prediction alike."""
    modes, _, t, p = synthetic(36, 8)
    B = np.array([8, 16, 32, 64] * 9, float)
    t = t * (0.6 + B / 40.0)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0, batch_sizes=B)
    assert model.power.time_source is model.time and model.time.per_sample
    A5 = np.hstack([raw_modes(modes), B[:, None]])
    lt = gpmod.time_log(model.time, DEV, A5)
    assert np.median(np.abs(lt - np.log(t))) < 0.05                    # per step, not per sample
    # the power member was fitted on that very column (per step), as it predicts with it
    m = next(m for m in model.power.members if m.time_input)
    k = 15                                   # power's knob features: log, 1/x and x of 5 knobs
    assert np.allclose(m.X[:, k] * m.x_scale[k] + m.x_mean[k], lt, atol=1e-9)
    pred = model.predict(modes[:4], batch_size=B[:4])["power_w"]
    assert np.all(np.abs(pred / p[:4] - 1) < 0.1)
    # modes without their batch size are refused, not predicted from uninitialised inputs (the
    # scaled inputs are written column by column into one array: found by review)
    for g in model.time.members:
        with pytest.raises(ValueError, match=r"takes \d+ inputs per mode; the modes give \d+"):
            g.predict_log(DEV, raw_modes(modes))


def test_below_twenty_modes_power_goes_without_the_time_input():
    """Fewer than TIME_INPUT_MIN_MODES profiled modes: the time it would rest on is too rough."""
    from ptui.core.prediction.fit import TIME_INPUT_MIN_MODES
    modes, _, t, p = synthetic(TIME_INPUT_MIN_MODES - 1, 12)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0)
    assert model.power.time_source is None and not any(m.time_input for m in model.power.members)
    modes, _, t, p = synthetic(TIME_INPUT_MIN_MODES, 12)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0)
    assert model.power.time_source is model.time


def test_one_cache_for_both_targets_changes_no_figure(fitted):
    """Model.predict shares one cache (knob features, the grid index, scratch arrays) between the
    time and power stacks: every figure equals the one each predictor gives with nothing shared,
    on the whole mode space (more than one block) and on a few off-grid modes."""
    _, _, _, model = fitted
    grid = DEV.full_space()
    A = raw_modes(grid)
    got = model.predict(grid)
    t_mu, t_sd = model.time.predict_log(DEV, A)
    p_mu, p_sd = model.power.predict_log(DEV, A)
    for (mid, sd), (lmu, lsd) in (((got["time_ms"], got["time_ms_std"]), (t_mu, t_sd)),
                                  ((got["power_w"], got["power_w_std"]), (p_mu, p_sd))):
        assert np.allclose(np.log(mid), lmu, rtol=0, atol=1e-12)
        assert np.allclose(sd, mid * np.sqrt(np.expm1(lsd ** 2)), rtol=1e-12, atol=0)
    for m in model.time.members + model.power.members:            # a member alone, fresh scratch
        cache = {gpmod.TIME_LOG: t_mu} if m.time_input else {}
        alone = m.predict_log(DEV, A, cache)
        again = m.predict_log(DEV, A, cache)                      # scratch reused: same figures
        assert np.array_equal(alone[0], again[0]) and np.array_equal(alone[1], again[1])
    off = np.array([[3.0, 1000.0, 500.0, 2000.0], [5.0, 1234.5, 777.0, 3100.0]])
    mixed = model.time.predict_log(DEV, np.vstack([A[:3], off]))   # off the table: no grid lookup
    # (the reference network evaluated in float32 rather than looked up: equal to rounding)
    assert np.all(np.isfinite(mixed[0])) and np.allclose(mixed[0][:3], t_mu[:3], rtol=0, atol=1e-5)


def test_prediction_rebuilds_each_members_training_inputs(fitted):
    """Fitting and prediction assemble a member's kernel inputs with one helper (gp.input_columns):
    a member's inputs for its own training modes, as prediction builds them, are the training
    inputs it stored, column for column (knob features, predicted time, reference)."""
    modes, _, _, model = fitted
    A = raw_modes(modes)
    lt = model.time.predict_log(DEV, A)[0]
    for stack in (model.time, model.power):
        for m in stack.members:
            cache = {gpmod.TIME_LOG: lt} if m.time_input else {}
            Z, _ = m.inputs(DEV, A, cache)
            assert Z.shape == m.X.shape, (m.prior, m.time_input)
            # within the float32 parts (reference grid, fast kernel blocks); a column out of place
            # would be off by O(1)
            assert np.allclose(Z, m.X, rtol=0, atol=1e-5), (m.prior, m.time_input)
