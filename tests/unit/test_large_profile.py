"""A fit on a large profile is bounded: every GP (and network) trains on at most fit.FIT_MAX_ROWS
rows chosen to cover the space, its cross-validation runs on those rows, and the other rows check
it (held-out error and interval coverage, far readings distrusted); a profile at or below the cap
fits exactly as before.  The cap is lowered here so that each test runs in seconds; the CLI test
in tests/functional/test_large_fit.py runs the real one."""
import numpy as np
import pytest

from ptui.core.prediction import fit as fitmod
from ptui.core.prediction.fit import fit_model
from ptui.core.prediction.predictor import load_bundled

from .test_gp import DEV, synthetic

CAP = 40


def _measured(A, t, p):
    return {"modes": A.copy(), "time_ms": t.copy(), "power_w": p.copy(),
            "time_ms_std": 0.004 * t, "power_w_std": 0.004 * p}


@pytest.fixture
def capped(monkeypatch):
    """The cap lowered to CAP; every gp_fit's row count recorded (and more than CAP refused at
    once, so that a fit on every row fails in a second rather than running for minutes)."""
    sizes = []
    real = fitmod.gp_fit

    def gp_fit(prior, A, *a, **k):
        sizes.append(len(A))
        if len(A) > CAP:
            raise AssertionError(f"gp_fit on {len(A)} rows (cap {CAP})")
        return real(prior, A, *a, **k)

    monkeypatch.setattr(fitmod, "FIT_MAX_ROWS", CAP, raising=False)
    monkeypatch.setattr(fitmod, "gp_fit", gp_fit)
    return sizes


def _members(pred):
    return getattr(pred, "members", [pred])


def test_gp_fit_on_a_large_profile_trains_on_a_capped_space_filling_subset(capped):
    modes, A, t, p = synthetic(400, 3, noise=0.01)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0,
                      measured=_measured(A, t, p))
    assert capped and max(capped) <= CAP
    assert min(capped) < CAP                                  # the CV folds: on the capped rows
    for tgt in ("time", "power"):
        m = model.meta["metrics"][tgt]
        assert m["fitted_rows"] == CAP and m["profile_rows"] == 400 and m["cv_folds"] == 5
        for g in _members(getattr(model, tgt)):
            assert g.X.shape[0] <= CAP and g.L.shape == (g.X.shape[0],) * 2
        # the other 360 rows checked it: a smooth function, so a few per cent at most
        assert 0 < m["rest_mape"] < 5 and 50 <= m["rest_coverage90"] <= 100
        assert m["rest_rows"] == 360
    assert model.meta["trained_on"] == {**model.meta["trained_on"], "modes": 400, "fitted_rows": CAP,
                                        "fitted_rows_seed": 0}
    assert "max-min distance" in model.meta["trained_on"]["fitted_rows_chosen"]
    assert len(model.measured["modes"]) == 400               # every measurement still counts
    # the rows cover the space: every knob's extremes are among them
    rows = fitmod.fit_rows(A, 0)
    assert len(rows) == CAP and len(set(rows.tolist())) == CAP
    for k in range(4):
        assert A[rows, k].min() == A[:, k].min() and A[rows, k].max() == A[:, k].max()
    note = fitmod.subset_note(model.meta["metrics"])
    assert note.startswith(f"fitted on {CAP} of 400 profiled modes, chosen to cover the space")
    assert "the other 360 checked it: time MAPE" in note and "power MAPE" in note


def test_a_profile_at_the_cap_fits_on_every_row_as_before(capped):
    modes, A, t, p = synthetic(CAP, 4)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0)
    assert max(capped) == CAP
    assert fitmod.fit_rows(A, 0) is None
    assert "fitted_rows" not in model.meta["metrics"]["time"]
    assert fitmod.subset_note(model.meta["metrics"]) is None
    assert all(g.X.shape[0] == CAP for g in _members(model.time))


def test_a_far_reading_among_the_rows_not_fitted_is_distrusted(capped):
    """A disturbed measurement among the rows the fit did not train on is found by the check
    (far from the prediction in the fit's own sds) and its ± widened for decisions, as an outlier
    in the fitted rows is; no clean row is."""
    modes, A, t, p = synthetic(400, 5, noise=0.01)
    rest = np.setdiff1d(np.arange(400), fitmod.fit_rows(A, 0))
    victim = int(rest[17])
    p_bad = p.copy()
    p_bad[victim] *= 0.85                           # a power reading caught 15 % low
    model = fit_model(load_bundled(), DEV, modes, t, p_bad, method="gp", seed=0,
                      measured=_measured(A, t, p_bad))
    out = model.meta["metrics"]["power"].get("outliers", [])
    assert [o["row"] for o in out] == [victim]
    assert out[0]["fitted"] is False
    assert abs(out[0]["cross_validated"] - p[victim]) / p[victim] < 0.03
    sd = model.measured["power_w_std"]
    assert sd[victim] > 0.1 * p[victim] and np.all(np.delete(sd, victim) == 0.004 * np.delete(p_bad, victim))
    note = fitmod.outlier_note("power", model.meta["metrics"]["power"])
    assert "not among the fitted rows" in note and "is far from what the fit predicts" in note


def test_batch_aware_fit_is_bounded_the_same_way(capped):
    """fit_batch_profile goes through fit_model: (mode, batch size) pairs, one mechanism."""
    modes, A, t, p = synthetic(150, 6)
    sizes = np.repeat([8, 32], 150)
    A2 = np.vstack([A, A])
    t2 = np.r_[t, t * 3.2]
    p2 = np.r_[p, p * 1.05]
    model = fit_model(load_bundled(), DEV, A2, t2, p2, method="gp", seed=0, batch_sizes=sizes)
    assert max(capped) <= CAP
    m = model.meta["metrics"]["time"]
    assert m["fitted_rows"] == CAP and m["profile_rows"] == 300
    assert m["rest_mape"] < 5                 # per step, at both batch sizes
    for g in _members(model.time):
        assert g.X.shape[0] <= CAP and g.batch_aware
    assert "(mode, batch size) pairs" in fitmod.subset_note(model.meta["metrics"], "(mode, batch size) pairs")


def test_network_recipes_in_auto_train_on_the_capped_rows(capped, monkeypatch):
    pytest.importorskip("torch")
    from ptui.core.prediction import train
    seen = []
    real = train.train_many

    def train_many(X, y, members, **k):
        seen.extend(len(m.rows) for m in members)
        assert len(X) <= CAP, f"networks given {len(X)} rows"
        return real(X, y, members, **k)

    monkeypatch.setattr(train, "train_many", train_many)
    monkeypatch.setattr(fitmod, "_worker", lambda parallel: fitmod._Local())   # in this process
    modes, A, t, p = synthetic(300, 7)
    model = fit_model(load_bundled(), DEV, modes, t, p, method="auto", seed=0)
    assert seen and max(seen) <= CAP
    assert model.meta["metrics"]["power"]["fitted_rows"] == CAP


def test_active_planner_refits_are_bounded(capped, monkeypatch):
    from ptui.core.profiling.active import ActivePlanner, Goal
    modes, A, t, p = synthetic(120, 8)
    pl = ActivePlanner(DEV, modes, Goal(budget_w=30.0), count=120, reference=load_bundled(), seed=0)
    rows = [{"cores": a[0], "cpu_mhz": a[1], "gpu_mhz": a[2], "mem_mhz": a[3], "time_ms": ti,
             "power_w": pi} for a, ti, pi in zip(A, t, p)]
    out = pl.fit(rows)
    assert max(capped) <= CAP
    assert all(g.X.shape[0] <= CAP for g in out.values())


def test_outliers_left_out_of_a_fit_are_at_most_outlier_max():
    """Each one costs a refit of every GP candidate: at most OUTLIER_MAX of them, so a noisy
    capped profile is still bounded (and a 50-mode profile, a tenth of which is 5, is as before)."""
    from .test_outliers import _all, _cv
    ly, cv = _cv(200)
    cv.log_pred[:12] = ly[:12] + np.linspace(0.5, 1.0, 12)
    assert _all(cv, ly) == [11, 10, 9, 8, 7]
    ly, cv = _cv(50)
    cv.log_pred[:8] = ly[:8] + np.linspace(0.5, 1.0, 8)
    assert _all(cv, ly) == [7, 6, 5, 4, 3]


def test_fit_scratch_trains_the_baseline_network_on_the_capped_rows(capped, monkeypatch, tmp_path):
    """`ptui fit --scratch` (the NN baseline, train.transfer) is bounded by the same rows."""
    pytest.importorskip("torch")
    import json

    from ptui.core.prediction import train
    from tests.support.cli import run_cli
    given = []
    real = train.train_many

    def train_many(X, y, members, **k):
        given.append(len(X))
        assert len(X) <= CAP, f"networks given {len(X)} rows"
        return real(X, y, members, **k)

    monkeypatch.setattr(train, "train_many", train_many)
    monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / "data"))
    rc, _, err = run_cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "100",
                         "--out", tmp_path / "p.csv")
    assert rc == 0, err
    rc, out, err = run_cli("fit", "--device", "orin-agx", "--profile", tmp_path / "p.csv", "--scratch",
                           "--out", tmp_path / "m")
    assert rc == 0, err
    assert given and max(given) <= CAP
    assert f"fitted on {CAP} of 100 profiled modes" in out
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert meta["trained_on"]["fitted_rows"] == CAP and meta["trained_on"]["modes"] == 100
    assert meta["metrics"]["time"]["rest_rows"] == 100 - CAP
