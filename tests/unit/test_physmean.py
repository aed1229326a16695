"""The physical prior mean (gp.py ``physmean``): per-resource terms fitted to the profile alone,
stored as plain weights, refitted per CV fold; the reference as prior mean still loads."""
import json

import numpy as np
import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.prediction.fit import fit_model, gp_fit
from ptui.core.prediction.gp import phys_basis, phys_fit, raw_modes
from ptui.core.prediction.modeldir import meta_digest
from ptui.core.prediction.predictor import Model, ModelError, load_bundled, load_model
from tests.unit.test_gp import synthetic

DEV = get_device("orin-agx")


def test_a_sum_of_per_resource_terms_is_recovered_from_a_few_modes():
    """Time that is exactly a constant + CPU, GPU and EMC terms in 1/f, power exactly static +
    per-core and per-domain terms: 12 modes give both on the whole grid to 1e-6."""
    grid = raw_modes(DEV.pt_grid())
    c, f, g, m = (grid / np.array([1, 1000, 1000, 1000])).T
    t = 20 + 35 / f + 60 / (c * f) + 90 / g + 40 / m
    p = 6 + 0.3 * c + 0.9 * c * f ** 3 + 4 * g + 7 * g ** 3 + 2.5 * m
    idx = np.random.default_rng(0).choice(len(grid), 12, replace=False)
    for y, basis in ((t, "time"), (p, "power")):
        w = phys_fit(grid[idx], y[idx], basis)
        assert np.all(w >= 0)
        assert np.max(np.abs(phys_basis(grid, basis) @ w / y - 1)) < 1e-6


def test_physmean_extrapolates_to_the_fast_corner_where_a_constant_mean_cannot():
    """Profiled only at low GPU and EMC clocks, predicted at the top of both: the physical mean
    follows 1/f out there; the constant-mean GP reverts towards the profiled average."""
    grid = raw_modes(DEV.pt_grid())
    low = grid[(grid[:, 2] <= 700) & (grid[:, 3] <= 2200)]
    idx = np.random.default_rng(1).choice(len(low), 30, replace=False)
    top = grid[(grid[:, 2] == DEV.gpu_mhz[-1]) & (grid[:, 3] == DEV.mem_mhz[-1])]

    def truth(A):
        c, f, g, m = (A / np.array([1, 1000, 1000, 1000])).T
        return 15 + 50 / (c * f) + 120 / g + 60 / m

    y = truth(low[idx])
    err = {}
    for prior in ("physmean", "none"):
        gpt, _ = gp_fit(prior, low[idx], np.log(y), None, None, seed=0, basis="time")
        mu, _ = gpt.predict_log(DEV, top)
        err[prior] = float(np.mean(np.abs(np.exp(mu) / truth(top) - 1)))
    assert err["physmean"] < 0.02 < err["none"]


def _physmean_model(tmp_path):
    _, A, t, p = synthetic(30, 21)
    gt, _ = gp_fit("physmean", A, np.log(t), None, None, seed=0, basis="time")
    gpw, _ = gp_fit("physmean", A, np.log(p), None, None, seed=0, basis="power",
                    inputs="log-recip-linear")
    m = Model(DEV, gt, gpw, {"kind": "gp"})
    m.save(tmp_path / "m")
    return m


def test_physmean_round_trip_predicts_the_same(tmp_path):
    m = _physmean_model(tmp_path)
    space = DEV.full_space()
    again = load_model(tmp_path / "m")
    assert again.time.prior == "physmean" and again.power.phys_basis == "power"
    for k, v in m.predict(space).items():
        assert np.array_equal(again.predict(space)[k], v)


@pytest.mark.parametrize("change", ["negative", "zero", "missing", "basis"])
def test_corrupt_physmean_refused(tmp_path, change):
    """Each is re-checksummed as if ptui had written it, so the refusal comes from the GP's own
    checks, not from the model directory's checksums."""
    from ptui.core.prediction.modeldir import sha256_file
    _physmean_model(tmp_path)
    f = tmp_path / "m" / "time.npz"
    with np.load(f) as z:
        d = {k: z[k] for k in z.files}
    if change == "negative":
        d["phys_w"] = -np.abs(d["phys_w"]) - 1
    elif change == "zero":
        d["phys_w"] = np.zeros_like(d["phys_w"])
    elif change == "missing":
        del d["phys_w"]
    np.savez(f, **d)
    mf = tmp_path / "m" / "meta.json"
    meta = json.loads(mf.read_text())
    if change == "basis":
        meta["predictors"]["time"]["phys_basis"] = "voltage"
    meta["files"]["time.npz"] = sha256_file(f)
    meta["digest"] = meta_digest(meta)
    mf.write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="physmean|physical basis|phys_w"):
        load_model(tmp_path / "m")


def test_a_model_with_the_reference_as_prior_mean_still_loads(tmp_path):
    """gp-refmean left the stack's candidates; models that used it load and predict as saved."""
    from ptui.core.prediction.predictor import features
    ref = load_bundled()
    _, A, t, p = synthetic(30, 22)
    parts = []
    for y, net in ((t, ref.time), (p, ref.power)):
        g, _ = gp_fit("refmean", A, np.log(y), net.predict_log(features(DEV, A))[0], net, seed=0)
        parts.append(g)
    m = Model(DEV, *parts, {"kind": "gp"})
    space = DEV.pt_grid()
    before = m.predict(space)
    m.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    assert again.time.prior == "refmean"
    for k, v in before.items():
        assert np.allclose(again.predict(space)[k], v, rtol=1e-12)


def test_fit_without_a_reference_stacks_the_physical_mean():
    modes, _, t, p = synthetic(25, 23)
    model = fit_model(None, DEV, modes, t, p, method="gp", seed=0)
    assert [g.prior for g in model.time.members] == ["none", "physmean"]
    assert set(model.meta["metrics"]["power"]["candidates_cv_mape"]) == {"gp", "gp-physmean", "gp-stack"}


def test_the_active_planner_chooses_among_its_own_gps_not_the_physical_mean():
    """On 10-20 rows the planner keeps the reference as prior mean among its candidates: on a
    truth that is exactly a sum of per-resource terms, where the physical mean wins fit's
    cross-validation, the planner still picks one of PLANNER_GPS."""
    from ptui.core.prediction.fit import fit_one
    from ptui.core.profiling.active import PLANNER_GPS, ActivePlanner, Goal
    grid = raw_modes(DEV.pt_grid())
    idx = np.random.default_rng(5).choice(len(grid), 15, replace=False)
    c, f, g, m = (grid[idx] / np.array([1, 1000, 1000, 1000])).T
    y = 20 + 35 / f + 60 / (c * f) + 90 / g + 40 / m
    ref = load_bundled()
    _, met = fit_one(DEV, grid[idx], y, ref.time, method="gp", seed=0, target="time")
    singles = {k: v for k, v in met["candidates_cv_mape"].items() if k != "gp-stack"}
    assert min(singles, key=singles.get) == "gp-physmean"
    from ptui.core.prediction.fit import _gp_candidate, folds
    from ptui.core.prediction.predictor import features
    ly = np.log(y)
    ref_log = ref.time.predict_log(features(DEV, grid[idx]))[0]
    cv = {nm: _gp_candidate(nm, DEV, grid[idx], ly, ref_log, ref.time, folds(15, 0), 0,
                            "log-recip", "time")[1].score(ly)["cv_mape"] for nm in PLANNER_GPS}
    pl = ActivePlanner(DEV, DEV.pt_grid(), Goal(budget_w=30.0), count=20, reference=ref)
    assert "gp-physmean" not in PLANNER_GPS
    assert pl._choice("time", grid[idx], y, ref.time, ref_log) == min(cv, key=cv.get)
