"""GP predictors: numpy inference equals scikit-learn's, plain-array storage, honest intervals,
measured modes in decisions, and `ptui fit --method`."""
import json
import zipfile

import numpy as np
import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.decision.pareto import Table, choose
from ptui.core.prediction.fit import Z90, calibrate, fit_model, gp_fit
from ptui.core.prediction.gp import F32_MAX_ERR, knob_features, raw_modes
from ptui.core.prediction.modeldir import meta_digest
from ptui.core.prediction.predictor import load_bundled, load_model

DEV = get_device("orin-agx")


def synthetic(n, seed, noise=0.02):
    """A smooth time-like and power-like function of the knobs, log-normal noise."""
    rng = np.random.default_rng(seed)
    grid = DEV.pt_grid()
    modes = [grid[i] for i in rng.choice(len(grid), n, replace=False)]
    A = raw_modes(modes)
    c, f, g, m = A.T
    t = 30 + 4e4 / g + 1.5e4 / m + 2e3 / (c * f / 1000)
    p = 8 + 0.012 * g + 0.004 * m + 0.8 * c * (f / 2200) ** 2
    t = t * np.exp(noise * rng.standard_normal(n))
    p = p * np.exp(noise * 0.7 * rng.standard_normal(n))
    return modes, A, t, p


@pytest.mark.parametrize("base", ["matern52", "rbf"])
def test_numpy_inference_equals_sklearn(base, monkeypatch):
    """The Matern-5/2 kernel ptui fits now and the RBF kernel of models saved before it; exactly
    in float64 (the float32 kernel, where its bound allows it, is within that bound)."""
    _, A, t, _ = synthetic(40, 0)
    g, kern = gp_fit("none", A, np.log(t), None, None, seed=0, base=base)
    assert g.kernel_type == base
    # rebuild the same fitted regressor in sklearn and compare predictions on other modes
    from sklearn.gaussian_process import GaussianProcessRegressor
    F = knob_features(A)
    gpr = GaussianProcessRegressor(kern, normalize_y=True, optimizer=None).fit(
        (F - g.x_mean) / g.x_scale, np.log(t))
    _, B, _, _ = synthetic(200, 1)
    mu_sk, sd_sk = gpr.predict((knob_features(B) - g.x_mean) / g.x_scale, return_std=True)
    mu, _ = g.predict_log(DEV, B)
    assert np.abs(mu - mu_sk).max() <= F32_MAX_ERR
    import ptui.core.prediction.gp as gpmod
    monkeypatch.setattr(gpmod, "F32_MAX_ERR", 0.0)
    mu, sd = g.predict_log(DEV, B)
    assert np.allclose(mu, mu_sk, rtol=0, atol=1e-8)
    assert np.allclose(sd, sd_sk, rtol=1e-6, atol=1e-9)


def _float64_prediction(g, B):
    """The plain float64 formula, from the member's own kernel()."""
    Z, m = g.inputs(DEV, B)
    K = g.kernel(Z, g.X)
    v = K @ np.linalg.inv(g.L).T
    mu = (K @ g.alpha) * g.y_scale + g.y_mean + m
    var = np.maximum(g.const + g.noise - (v * v).sum(1), 1e-12)
    return mu, np.sqrt(var) * g.y_scale * g.sd_scale


@pytest.mark.parametrize("n,seed,noise", [(40, 0, 0.01), (40, 0, 0.02), (40, 0, 0.08), (12, 1, 0.02), (20, 0, 0.02)])
def test_fast_blocks_equal_the_float64_formula(n, seed, noise):
    """predict_log runs the kernel's roots and exponentials in float32 only where its error bound
    on the log mean is <= F32_MAX_ERR (0.4 %); then the mean stays within that bound and the sd
    within 1e-3 (log units), and otherwise it is the float64 formula exactly, block after block."""
    _, A, t, _ = synthetic(n, seed, noise=noise)
    g, _ = gp_fit("none", A, np.log(t), None, None, seed=0, base="matern52")
    _, B, _, _ = synthetic(40, 1)
    B = np.vstack([B, raw_modes(DEV.full_space()[::2])])          # several blocks
    assert len(B) > 3 * 2048
    mu64, sd64 = _float64_prediction(g, B)
    mu, sd = g.predict_log(DEV, B)
    bound = 2.4e-7 * g.const * np.abs(g.alpha).sum() * g.y_scale
    if bound <= F32_MAX_ERR:
        assert np.abs(mu - mu64).max() <= bound
        assert np.abs(sd - sd64).max() <= 1e-3
    else:
        assert np.allclose(mu, mu64, rtol=0, atol=1e-10) and np.allclose(sd, sd64, rtol=1e-9)
    assert np.allclose(g.predict_log(DEV, B[5000:5010])[0], mu[5000:5010], rtol=0, atol=1e-9)


def test_both_kernel_precisions_are_exercised():
    """The two parametrised cases above cover both paths (a test that could not see float32
    error would pass whatever the fast path did)."""
    bounds = []
    for noise in (0.01, 0.08):
        _, A, t, _ = synthetic(40, 0, noise=noise)
        g, _ = gp_fit("none", A, np.log(t), None, None, seed=0, base="matern52")
        bounds.append(2.4e-7 * g.const * np.abs(g.alpha).sum() * g.y_scale)
    assert max(bounds) > F32_MAX_ERR >= min(bounds), bounds


def test_interval_coverage_on_synthetic_case():
    """90 % intervals cover 80-98 % of 500 held-out modes (n=60 profiled, known noise)."""
    modes, A, t, p = synthetic(60, 3)
    model = fit_model(None, DEV, modes, t, p, method="gp", seed=0)
    _, B, tb, pb = synthetic(500, 4)
    pr = model.predict(B)
    for y, k in ((tb, "time_ms"), (pb, "power_w")):
        s = np.sqrt(np.log1p((pr[k + "_std"] / pr[k]) ** 2))
        cover = np.mean(np.abs(np.log(y / pr[k])) <= 1.645 * s)
        assert 0.80 <= cover <= 0.98, (k, cover)
        assert np.mean(np.abs(pr[k] / y - 1)) < 0.05


def test_calibration_widens_overconfident_intervals():
    z = np.abs(np.random.default_rng(0).standard_normal(200)) * 2.0   # sd claimed 2x too small
    assert calibrate(z) == pytest.approx(2.0, rel=0.15)
    assert calibrate(np.abs(np.random.default_rng(1).standard_normal(200))) == pytest.approx(1.0, abs=0.2)


def test_calibration_narrows_an_interval_only_from_enough_residuals():
    """Residuals all well inside the interval narrow it (x0.8 at most) only when there are at
    least 20 of them: 10 of 10 inside happens one time in three with an honest 90 % interval, and
    narrowing on them left a 10-mode fit's power interval holding 84 % of the held-out modes
    (issue 25)."""
    inside = np.abs(np.random.default_rng(2).standard_normal(40)) * 0.3
    assert calibrate(inside[:10]) == 1.0
    assert calibrate(inside[:19]) == 1.0
    assert calibrate(inside[:20]) == pytest.approx(0.8)
    assert calibrate(inside[:10] * 10) > 1.5                            # widening is unchanged


def test_calibration_narrows_below_0_8_only_from_many_residuals_and_to_their_upper_bound():
    """From 40 residuals the estimate itself is trusted, inflated to its 95 % upper bound (its rms
    is known to ~1/sqrt(2n)) and never below 0.4: a pooled fit's 50 rows had residuals at 0.34-0.50
    of their sd and the 0.8 floor kept the power interval twice too wide (eval_pool.py)."""
    rng = np.random.default_rng(3)
    inside = np.abs(rng.standard_normal(400)) * 0.3
    assert calibrate(inside[:39]) == pytest.approx(0.8)
    at50 = calibrate(inside[:50])
    assert 0.3 < at50 < 0.8
    est = max(np.quantile(inside[:50], 0.9) / Z90, np.sqrt(np.mean(inside[:50] ** 2)))
    assert at50 == pytest.approx(est * (1 + Z90 / np.sqrt(100)), rel=1e-9)
    assert calibrate(inside) < at50                     # more residuals, a tighter bound
    assert calibrate(inside * 0.1) == pytest.approx(0.4)            # the floor
    assert calibrate(np.abs(rng.standard_normal(100))) == pytest.approx(1.0, abs=0.25)
    assert calibrate(inside[:50], deep=False) == pytest.approx(0.8)    # networks, batch-size fits


def test_save_load_round_trip_plain_arrays(tmp_path):
    modes, A, t, p = synthetic(30, 5)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0)
    before = model.predict(A)
    model.save(tmp_path / "m")
    for f in ("time.npz", "power.npz"):
        with zipfile.ZipFile(tmp_path / "m" / f) as z:       # every member a plain .npy array
            for name in z.namelist():
                with z.open(name) as fh:
                    head = fh.read(128)
                assert b"'O'" not in head and b"|O" not in head, (f, name)
        with np.load(tmp_path / "m" / f, allow_pickle=False) as z:
            assert all(z[k].dtype != object for k in z.files)
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert meta["predictors"]["time"]["kind"] == "gp-stack"      # three candidates, stacked
    assert len(meta["predictors"]["time"]["members"]) == 3
    after = load_model(tmp_path / "m").predict(A)
    for k in before:
        assert np.allclose(before[k], after[k], rtol=1e-12)


def test_gp_fit_uses_matern52_by_default():
    from sklearn.gaussian_process.kernels import Matern
    _, A, t, _ = synthetic(30, 13)
    g, kern = gp_fit("none", A, np.log(t), None, None, seed=0)
    assert g.kernel_type == "matern52" and isinstance(kern.k1.k2, Matern) and kern.k1.k2.nu == 2.5


def _saved_without(tmp_path, key, old_value, seed, base="matern52"):
    """Save a two-GP model, then drop `key` from both predictors' configs (asserting it held
    `old_value`, what an older ptui implied by leaving it out) as an older ptui wrote it.
    Returns (its meta.json, the meta, the modes predicted, the predictions before)."""
    from ptui.core.prediction.predictor import Model
    _, A, t, p = synthetic(30, seed)
    gt, _ = gp_fit("none", A, np.log(t), None, None, seed=0, base=base)
    gpw, _ = gp_fit("none", A, np.log(p), None, None, seed=0, base=base)
    m = Model(DEV, gt, gpw, {"kind": "gp"})
    space = raw_modes(DEV.pt_grid())
    before = m.predict(space)
    m.save(tmp_path / "m")
    f = tmp_path / "m" / "meta.json"
    meta = json.loads(f.read_text())
    for cfg in meta["predictors"].values():
        assert cfg.pop(key) == old_value
    meta["digest"] = meta_digest(meta)
    f.write_text(json.dumps(meta))
    return f, meta, space, before


def test_gp_model_saved_before_the_kernel_key_loads_as_rbf(tmp_path):
    """A GP model directory written before Matern-5/2 (no kernel_type in its config) is an RBF
    GP: it loads and predicts exactly what it predicted when it was saved."""
    _, _, space, before = _saved_without(tmp_path, "kernel_type", "rbf", 14, base="rbf")
    again = load_model(tmp_path / "m")
    assert again.time.kernel_type == "rbf"
    for k in before:
        assert np.allclose(again.predict(space)[k], before[k], rtol=1e-12)


def test_unknown_kernel_refused(tmp_path):
    from ptui.core.prediction.predictor import ModelError
    modes, _, t, p = synthetic(20, 15)
    fit_model(None, DEV, modes, t, p, method="gp").save(tmp_path / "m")
    f = tmp_path / "m" / "meta.json"
    meta = json.loads(f.read_text())
    time_cfg = meta["predictors"]["time"]
    for cfg in time_cfg.get("members", [time_cfg]):          # a stack without a reference too
        cfg["kernel_type"] = "cubic"
    meta["digest"] = meta_digest(meta)
    f.write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="kernel"):
        load_model(tmp_path / "m")


def test_calibration_rarely_leaves_intervals_too_narrow():
    """50 cross-validated residuals of a GP whose sd is 1.5x too small: after calibration the
    true coverage of the 90 % interval falls below 85 % in few draws (the 90 % quantile alone,
    resting on the five largest residuals, left ~20 % of draws below 85 %)."""
    from scipy.stats import norm
    rng = np.random.default_rng(0)
    cover = []
    for _ in range(1000):
        s = calibrate(np.abs(rng.standard_normal(50)) * 1.5)
        cover.append(2 * norm.cdf(1.6448536 * s / 1.5) - 1)
    cover = np.array(cover)
    assert np.mean(cover < 0.85) < 0.13
    assert np.median(cover) == pytest.approx(0.90, abs=0.02)


def test_stack_weights_recover_a_known_combination():
    from ptui.core.prediction.gp import stack_weights
    rng = np.random.default_rng(0)
    P = rng.standard_normal((40, 3))
    w = stack_weights(P, P @ np.array([0.7, 0.3, 0.0]))
    assert np.all(w >= 0) and w.sum() == pytest.approx(1.0)
    assert np.allclose(w, [0.7, 0.3, 0.0], atol=1e-3)


def test_stack_predicts_its_members_combined():
    """GPStack: mean = sum w mu; sd = the members' spread with every member counted equally,
    (1/m) sum (sd_i^2 + (mu_i - mean)^2), x sd_scale (a member without weight widens it too);
    an old stack (spread "mixture") keeps the weighted mixture's sd.  fit --method gp with a
    reference stacks the three candidates."""
    from ptui.core.prediction.gp import GPStack
    modes, A, t, p = synthetic(30, 16)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0)
    st = model.time
    assert isinstance(st, GPStack) and model.meta["metrics"]["time"]["choice"] == "gp-stack"
    assert [m.prior for m in st.members] == ["none", "physmean", "refinput"]
    assert st.spread == "members"
    B = raw_modes(DEV.pt_grid()[:200])
    mu, sd = st.predict_log(DEV, B)
    parts = [m.predict_log(DEV, B) for m in st.members]
    mix = sum(w * m for w, (m, _) in zip(st.weights, parts))
    var = sum(s * s + (m - mix) ** 2 for m, s in parts) / 3
    assert np.allclose(mu, mix, atol=1e-12)
    assert np.allclose(sd, np.sqrt(var) * st.sd_scale, rtol=1e-9)
    assert all(m.sd_scale == 1.0 for m in st.members)
    # a member with no weight moves the sd, not the mean
    w0 = GPStack(st.members, np.array([1.0, 0.0, 0.0]), 1.0)
    mu0, sd0 = w0.predict_log(DEV, B)
    assert np.allclose(mu0, parts[0][0], atol=1e-12)
    assert np.allclose(sd0, np.sqrt(sum(s * s + (m - parts[0][0]) ** 2 for m, s in parts) / 3))
    # the old rule, as model directories saved before it load
    old = GPStack(st.members, st.weights, st.sd_scale, "mixture")
    mu1, sd1 = old.predict_log(DEV, B)
    var1 = sum(w * (s * s + m * m) for w, (m, s) in zip(st.weights, parts)) - mix ** 2
    assert np.allclose(mu1, mix, atol=1e-12)
    assert np.allclose(sd1, np.sqrt(var1) * st.sd_scale, rtol=1e-9)
    assert not np.allclose(sd1, sd)


def test_stack_spread_saved_and_old_stacks_load_as_the_mixture(tmp_path):
    """The spread rule is saved with the model; a stack saved without one (before it existed)
    loads with the weighted mixture's sd, as it predicted when it was fitted; an unknown rule
    is refused."""
    from ptui.core.prediction.predictor import ModelError
    modes, _, t, p = synthetic(20, 17)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="gp")
    model.save(tmp_path / "m")
    B = raw_modes(DEV.pt_grid()[:100])
    again = load_model(tmp_path / "m")
    assert again.time.spread == "members"
    assert np.allclose(again.time.predict_log(DEV, B)[1], model.time.predict_log(DEV, B)[1])
    f = tmp_path / "m" / "meta.json"
    meta = json.loads(f.read_text())
    del meta["predictors"]["time"]["spread"]
    meta["digest"] = meta_digest(meta)
    f.write_text(json.dumps(meta))
    old = load_model(tmp_path / "m").time
    assert old.spread == "mixture"
    parts = [m.predict_log(DEV, B) for m in old.members]
    mix = sum(w * m for w, (m, _) in zip(old.weights, parts))
    var = sum(w * (s * s + m * m) for w, (m, s) in zip(old.weights, parts)) - mix ** 2
    assert np.allclose(old.predict_log(DEV, B)[1], np.sqrt(var) * old.sd_scale, rtol=1e-9)
    meta["predictors"]["time"]["spread"] = "widest"
    meta["digest"] = meta_digest(meta)
    f.write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="spread"):
        load_model(tmp_path / "m")


def test_stack_with_bad_weights_refused(tmp_path):
    from ptui.core.prediction.predictor import ModelError
    modes, _, t, p = synthetic(20, 17)
    fit_model(load_bundled(), DEV, modes, t, p, method="gp").save(tmp_path / "m")
    f = tmp_path / "m" / "meta.json"
    meta = json.loads(f.read_text())
    meta["predictors"]["time"]["weights"] = [0.5, 0.5, 0.5]
    meta["digest"] = meta_digest(meta)
    f.write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="weights"):
        load_model(tmp_path / "m")


def test_old_format_model_still_loads():
    from ptui.core.prediction.predictor import bundled_reference
    meta = json.loads((bundled_reference() / "meta.json").read_text())
    assert meta["format"] == "ptui-powertrain-1"
    pr = load_model(bundled_reference()).predict(DEV.pt_grid()[:5])
    assert np.all(pr["time_ms"] > 0)


def test_corrupt_gp_arrays_refused(tmp_path):
    from ptui.core.prediction.predictor import ModelError
    modes, _, t, p = synthetic(20, 6)
    fit_model(None, DEV, modes, t, p, method="gp").save(tmp_path / "m")
    with np.load(tmp_path / "m" / "time.npz") as z:
        d = {k: z[k] for k in z.files}
    key = next(k for k in d if k.endswith("alpha"))          # m0_alpha in a stack
    d[key] = d[key][:-1]
    np.savez(tmp_path / "m" / "time.npz", **d)
    with pytest.raises(ModelError):
        load_model(tmp_path / "m")


def test_auto_keeps_the_lowest_cv_error_and_reports_coverage():
    modes, _, t, p = synthetic(30, 7)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="auto", seed=0)
    for name in ("time", "power"):
        m = model.meta["metrics"][name]
        cands = m["candidates_cv_mape"]
        assert {"gp", "gp-physmean", "gp-refinput", "gp-stack", "transfer", "transfer-nodropout",
                "scratch"} <= set(cands)
        # the single GPs are reported; the stack stands for them against the networks
        pool = {k: v for k, v in cands.items() if k not in ("gp", "gp-physmean", "gp-refinput")}
        assert m["choice"] == min(pool, key=pool.get)
        assert 0 <= m["cv_coverage90"] <= 100


def test_powertrain_method_is_the_paper_transfer_alone():
    modes, _, t, p = synthetic(30, 8)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="powertrain", seed=0)
    for name in ("time", "power"):
        assert model.meta["metrics"][name]["choice"] == "transfer"
        assert set(model.meta["metrics"][name]["candidates_cv_mape"]) == {"transfer"}
    assert model.time.kind == "nn" and model.power.kind == "nn"


def test_pick_never_worse_than_best_measured_mode():
    """A predictor that is wrong about every profiled mode: the measurement wins."""
    grid = DEV.pt_grid()
    modes = grid[:300]
    n = len(modes)
    rng = np.random.default_rng(0)
    t = rng.uniform(50, 500, n)
    p = rng.uniform(10, 50, n)
    tab = Table(modes, t, p, np.zeros(n), np.zeros(n))
    measured_rows = [5, 17, 42]
    meas = {"modes": raw_modes([modes[i] for i in measured_rows]),
            "time_ms": np.array([10.0, 20.0, 5.0]), "power_w": np.array([15.0, 18.0, 40.0]),
            "time_ms_std": np.zeros(3), "power_w_std": np.array([0.1, 0.1, 0.1])}
    tab2 = tab.with_measurements(meas)
    d = choose(tab2, budget_w=20.0, risk=0.05)
    assert d.index == 5 and tab2.source(d.index) == "measured"      # 10 ms at 15 W beats all
    assert tab2.measured.sum() == 3 and not tab.measured.any()


def test_cli_fit_method_gp_and_pareto_uses_measurements(tmp_path, cli):
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "20",
                     "--out", tmp_path / "p.csv")
    assert rc == 0, err
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "p.csv",
                       "--out", tmp_path / "m", "--method", "gp")
    assert rc == 0, err
    assert "90 % interval covered" in out and "gp" in out
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["source"] in ("measured", "predicted")
    assert res["power_w"] <= 30
    # the profiled modes are in the decision table with their measured values
    from ptui.core.board.csvio import read_profile
    pm, pt_, pp = read_profile(tmp_path / "p.csv", DEV)
    ok = pp <= 30
    assert res["time_ms"] <= pt_[ok].min() + 1e-6


def test_without_torch_auto_fits_gps_and_says_so(monkeypatch):
    import ptui.core.prediction.fit as F
    monkeypatch.setattr(F, "torch_available", lambda: False)
    modes, _, t, p = synthetic(20, 9)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="auto", seed=0)
    for name in ("time", "power"):
        m = model.meta["metrics"][name]
        assert set(m["candidates_cv_mape"]) == {"gp", "gp-physmean", "gp-refinput", "gp-stack"}
        assert "torch is not installed" in m["note"]
    from ptui.core.errors import PtuiInputError
    with pytest.raises(PtuiInputError, match="needs torch"):
        fit_model(load_bundled(), DEV, modes, t, p, method="powertrain")


def test_reference_grid_lookup_equals_evaluating_the_reference(tmp_path):
    from ptui.core.prediction.gp import reference_grid
    from ptui.core.prediction.predictor import Model, features
    ref = load_bundled()
    _, A, t, p = synthetic(30, 10)
    space = raw_modes(DEV.full_space())
    gs = []
    for prior, net, y in (("refinput", ref.time, t), ("refmean", ref.power, p)):
        g, _ = gp_fit(prior, A, np.log(y), net.predict_log(features(DEV, A))[0], net, seed=0)
        evaluated = g.predict_log(DEV, space)               # runs the reference network
        g.ref_grid = reference_grid(DEV, net)
        looked_up = g.predict_log(DEV, space)               # looks the reference up
        assert np.allclose(looked_up[0], evaluated[0], rtol=0, atol=1e-9)
        assert np.allclose(looked_up[1], evaluated[1], rtol=1e-9)
        gs.append(g)
    m = Model(DEV, gs[0], gs[1], {"kind": "test"})
    before = m.predict(space)
    m.save(tmp_path / "m")                                   # stored with the model, used after load
    again = load_model(tmp_path / "m")
    assert again.time.ref_grid is not None and again.power.ref_grid is not None
    for k in before:
        assert np.allclose(again.predict(space)[k], before[k], rtol=1e-12)


@pytest.mark.slow
def test_nn_screen_stops_recipes_far_behind_the_gps(monkeypatch):
    """auto screens the network recipes on the first folds: with a zero margin every recipe is
    stopped there (the choice is a GP, the stopped ones are named with their screen MAPE); with an
    infinite margin none is, and every recipe has a full cross-validation."""
    import ptui.core.prediction.fit as fit
    modes, _, t, p = synthetic(30, 11)
    monkeypatch.setattr(fit, "NN_SCREEN_MARGIN", 0.0)
    m0 = fit_model(load_bundled(), DEV, modes, t, p, method="auto", seed=0)
    for name in ("time", "power"):
        mt = m0.meta["metrics"][name]
        assert set(mt["screened_out"]) == set(fit.NN_CANDIDATES)
        assert mt["choice"] in fit.GP_CANDIDATES
        assert "stopped there" in mt["screen"]
    monkeypatch.setattr(fit, "NN_SCREEN_MARGIN", float("inf"))
    m1 = fit_model(load_bundled(), DEV, modes, t, p, method="auto", seed=0)
    for name in ("time", "power"):
        mt = m1.meta["metrics"][name]
        assert "screened_out" not in mt
        assert set(fit.NN_CANDIDATES) <= set(mt["candidates_cv_mape"])


def test_nn_worker_child_equals_local_and_falls_back_when_it_dies():
    """The network CV run in the child process gives the same held-out predictions as in this
    process; a child that died is replaced by local training, not an error."""
    import ptui.core.prediction.fit as fit
    from ptui.core.prediction.predictor import features
    modes, A, t, _ = synthetic(24, 12)
    X = features(DEV, A)
    ref = load_bundled().time
    jobs = [(("time", "transfer"), "transfer", t, ref), (("time", "scratch"), "scratch", t, None)]
    fold = fit.folds(len(t), 0)
    args = (X, jobs, fold, (0, 1), 0, "mse")
    local = fit._nn_cv(*args)
    w = fit._NNWorker()
    try:
        assert w.proc is not None
        child = w.run(*args)
    finally:
        w.close()
    assert set(child) == set(local)
    for k in local:
        assert np.array_equal(child[k][0], local[k][0])
        np.testing.assert_allclose(child[k][1][local[k][0]], local[k][1][local[k][0]], rtol=2e-3)
    w = fit._NNWorker()
    w.proc.kill()
    w.proc.wait()
    try:
        again = w.run(*args)
    finally:
        w.close()
    for k in local:
        np.testing.assert_allclose(again[k][1][local[k][0]], local[k][1][local[k][0]], rtol=2e-3)


def test_power_gps_take_the_knobs_linearly_and_time_gps_do_not():
    """Power: log, reciprocal and the knob itself (dynamic power is convex in the frequency);
    time: log and reciprocal only.  Every GP of a fitted model says so, and its numpy inference
    equals scikit-learn's on those inputs."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    modes, A, t, p = synthetic(30, 21)
    m = fit_model(load_bundled(), DEV, modes, t, p, method="gp")
    for target, want in ((m.time, "log-recip"), (m.power, "log-recip-linear")):
        for g in getattr(target, "members", [target]):
            assert g.knob_inputs == want
    g, kern = gp_fit("none", A, np.log(p), None, None, seed=0, inputs="log-recip-linear")
    F = knob_features(A, "log-recip-linear")
    assert F.shape == (30, 12) and np.array_equal(F[:, 8:], A)
    gpr = GaussianProcessRegressor(kern, normalize_y=True, optimizer=None).fit(
        (F - g.x_mean) / g.x_scale, np.log(p))
    _, B, _, _ = synthetic(100, 22)
    mu_sk = gpr.predict((knob_features(B, "log-recip-linear") - g.x_mean) / g.x_scale)
    # within the float32 path's bound (gp.GPTarget._block)
    assert np.allclose(g.predict_log(DEV, B)[0], mu_sk, rtol=0, atol=F32_MAX_ERR)


def test_gp_model_saved_before_the_inputs_key_loads_as_log_recip(tmp_path):
    """A model written before power GPs took linear inputs (no `inputs` in its configs) loads
    with log and reciprocal inputs and predicts what it predicted when saved; an unknown value is
    refused."""
    from ptui.core.prediction.predictor import ModelError
    f, meta, space, before = _saved_without(tmp_path, "inputs", "log-recip", 23)
    again = load_model(tmp_path / "m")
    assert again.power.knob_inputs == "log-recip"
    for k in before:
        assert np.allclose(again.predict(space)[k], before[k], rtol=1e-12)
    meta["predictors"]["power"]["inputs"] = "quadratic"
    meta["digest"] = meta_digest(meta)
    f.write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="inputs"):
        load_model(tmp_path / "m")
