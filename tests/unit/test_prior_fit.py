"""The roofline prior wired into the fit, the decision and active profiling (issue 25): a model
from the prior alone (no mode profiled) that predict and pareto read like any other and label
honestly; the prior as a cross-validated GP candidate's mean; the active planner's first modes."""
import json

import numpy as np
import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.decision.goals import Goal
from ptui.core.prediction.predictor import load_model
from ptui.core.prediction.roofline import RooflinePrior, WorkloadSpec

AGX = get_device("orin-agx")
SPEC = {"gflop_per_step": 90.0, "gbytes_per_step": 6.0, "batch_size": 32}


def _spec_file(tmp_path, d=SPEC, name="spec.json"):
    p = tmp_path / name
    p.write_text(json.dumps(d) if isinstance(d, dict) else d)
    return p


def test_fit_without_a_profile_is_the_prior_alone_and_pareto_reads_it(cli, tmp_path):
    spec = _spec_file(tmp_path)
    rc, out, err = cli("fit", "--device", "orin-agx", "--workload-spec", spec, "--out", tmp_path / "m",
                       "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["profiled"] == 0 and doc["method"] == "roofline" and doc["profile"] is None
    model = load_model(tmp_path / "m")
    assert model.about.kind == "roofline-prior" and model.about.trained_on["modes"] == 0
    assert model.about.batch_size == 32
    # its predictions are the prior's median over the scales the spec leaves unknown, spreads
    # included
    modes = AGX.full_space()[::997]
    want = RooflinePrior(AGX, WorkloadSpec.from_dict(SPEC)).predictive(modes)
    got = model.predict(modes)
    for k in ("time_ms", "power_w", "time_ms_std", "power_w_std"):
        assert np.allclose(got[k], want[k]), k
    assert np.all(got["time_ms_std"] > 0)
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["profiled"] == 0 and d["feasible"] is True and d["source"] == "predicted"
    assert "rests on no measurement" in err
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--epochs", "10")
    assert rc == 0 and "rests on no measurement" in err, err
    # the answer itself says it (stdout), and an epoch the spec cannot give is said missing
    assert "no mode profiled: predicted by the roofline prior" in out
    assert "no epoch time" in err and "--batches-per-epoch" in err and "epoch:" not in out
    rc, out, err = cli("predict", "--model", tmp_path / "m")
    assert rc == 0, err
    assert "these predictions rest on no measurement" in err        # said (a user trial)
    assert len(out.strip().splitlines()) == len(AGX.full_space()) + 1
    # a goal no mode meets says it too, and its document how many modes it rests on (0)
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "2", "--json")
    assert rc == 3 and "rests on no measurement" in err, err
    assert json.loads(out)["feasible"] is False and json.loads(out)["profiled"] == 0


@pytest.mark.parametrize("text, words", [
    ('{"gflop_per_step": 90, "batch_size": 32}', "gbytes_per_step"),
    ('{"gflop_per_step": -1, "gbytes_per_step": 6, "batch_size": 32}', "gflop_per_step"),
    ('{"gflop_per_step": 90, "gbytes_per_step": 6, "batch_size": 32, "flops": 1}', "unknown field"),
    ("not json", "not JSON"),
    ("[1, 2]", "JSON object"),
])
def test_a_bad_spec_is_one_line_and_exit_2(cli, tmp_path, text, words):
    spec = _spec_file(tmp_path, text)
    rc, out, err = cli("fit", "--device", "orin-agx", "--workload-spec", spec, "--out", tmp_path / "m")
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and words in lines[0] and "Traceback" not in err, err
    assert not (tmp_path / "m").exists()


def test_fit_without_profile_or_spec_is_one_line_and_exit_2(cli, tmp_path):
    rc, _, err = cli("fit", "--device", "orin-agx", "--out", tmp_path / "m")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--workload-spec" in err, err


def test_every_decision_says_how_many_profiled_modes_it_rests_on(cli, tmp_path):
    prof = tmp_path / "p.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "lstm",
                     "--count", "10", "--session", "p", "--out", prof)
    assert rc == 0, err
    rc, _, err = cli("fit", "--device", "orin-agx", "--profile", prof, "--out", tmp_path / "m",
                     "--method", "gp")
    assert rc == 0, err
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--json")
    assert rc == 0, err
    assert json.loads(out)["profiled"] == 10 and "rests on no measurement" not in err
    # the prior is asked for: without --workload-spec the fit is as it was (no roofline candidate)
    m = load_model(tmp_path / "m")
    for t in ("time", "power"):
        cands = m.about.metrics[t]["candidates_cv_mape"]
        assert "gp-roofmean" not in cands and "gp-physmean" in cands and "gp-stack" in cands


def _profile_rows(prior: RooflinePrior, n: int, seed: int):
    """n modes measured on a board that the prior describes up to a smooth, mode-dependent error
    (what the prior cannot know) and measurement noise."""
    rng = np.random.default_rng(seed)
    modes = AGX.full_space()
    idx = rng.choice(len(modes), n, replace=False)
    sub = [modes[i] for i in idx]
    A = np.array([m.as_tuple() for m in sub], float)
    p = prior.predict(sub)
    tilt = 0.25 * np.log(A[:, 2] / AGX.gpu_mhz[-1]) - 0.1 * np.log(A[:, 3] / AGX.mem_mhz[-1])
    t = p["time_ms"] * np.exp(tilt + rng.normal(0, 0.02, n))
    w = p["power_w"] * np.exp(-0.3 * tilt + rng.normal(0, 0.01, n))
    return sub, t, w


def test_the_roofline_candidate_is_cross_validated_and_round_trips(tmp_path):
    from ptui.core.prediction.fit import fit_model
    prior = RooflinePrior(AGX, WorkloadSpec.from_dict(SPEC, "test"))
    sub, t, w = _profile_rows(prior, 12, 0)
    with_prior = fit_model(None, AGX, sub, t, w, method="gp", roofline=prior)
    without = fit_model(None, AGX, sub, t, w, method="gp")
    for tgt in ("time", "power"):
        got = with_prior.about.metrics[tgt]["candidates_cv_mape"]
        assert "gp-roofmean" in got and "gp-roofmean" not in without.about.metrics[tgt]["candidates_cv_mape"]
        # on a board the prior describes up to a tilt, its mean cross-validates best of the single GPs
        singles = {k: v for k, v in got.items() if k != "gp-stack"}
        assert min(singles, key=singles.__getitem__) == "gp-roofmean", got
    with_prior.save(tmp_path / "m")
    back = load_model(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert "roofline" in json.dumps(meta["predictors"])         # the prior's config, plain JSON
    modes = AGX.full_space()[::313]
    a, b = with_prior.predict(modes), back.predict(modes)
    for k in a:
        assert np.allclose(a[k], b[k], rtol=1e-9), k


def test_a_prior_only_model_round_trips(tmp_path):
    from ptui.core.usecases.fit import prior_model
    spec = WorkloadSpec.from_dict(dict(SPEC, host_ms=3.0, loader_ms=8.0, workers=4))
    m = prior_model(AGX, spec, workload=None)
    m.save(tmp_path / "m")
    back = load_model(tmp_path / "m")
    modes = AGX.full_space()[::501]
    a, b = m.predict(modes), back.predict(modes)
    assert all(np.allclose(a[k], b[k]) for k in a)
    assert back.about.kind == "roofline-prior" and back.about.trained_on["modes"] == 0


def test_the_active_planners_first_modes_come_from_the_prior():
    from ptui.core.prediction.predictor import load_bundled
    from ptui.core.profiling.active import ActivePlanner, plausible
    # a memory-heavy model (intensity 1 FLOP/byte) unlike the ResNet-18 reference
    spec = WorkloadSpec.from_dict({"gflop_per_step": 20.0, "gbytes_per_step": 20.0, "batch_size": 8})
    prior = RooflinePrior(AGX, spec)
    goal = Goal(budget_w=20.0)
    cands = AGX.full_space()
    ref = load_bundled()
    with_prior = ActivePlanner(AGX, cands, goal, count=20, reference=ref, prior=prior).initial()
    blind = ActivePlanner(AGX, cands, goal, count=20, reference=ref).initial()
    assert with_prior != blind
    pr = prior.predict(with_prior)
    assert plausible(goal, pr["time_ms"], pr["power_w"]).all()
    # the first mode is the prior's own pick for the goal
    allp = prior.predict(cands)
    ok = allp["power_w"] <= 20.0
    best = cands[int(np.flatnonzero(ok)[np.argmin(allp["time_ms"][ok])])]
    assert with_prior[0] == best
    # a roofline passed as the reference filters the design but is no GP prior (it has no networks)
    pl = ActivePlanner(AGX, cands, goal, count=20, reference=prior)
    assert pl.reference is None and pl.prior is prior and pl.initial() == with_prior


def test_a_few_modes_rescale_the_prior_and_refine_it(tmp_path):
    """3 modes (too few to cross-validate) with the prior: the prior rescaled to them, closer to
    the board than the prior alone, its spread at least the floor calibrated for 3 modes and less than
    the prior's own; without a prior ptui refuses."""
    from ptui.core.errors import PtuiInputError
    from ptui.core.prediction.fit import fit_model
    prior = RooflinePrior(AGX, WorkloadSpec.from_dict(SPEC, "test"))
    sub, t, w = _profile_rows(prior, 3, 1)
    with pytest.raises(PtuiInputError, match="at least 6"):
        fit_model(None, AGX, sub, t, w, method="gp")
    m = fit_model(None, AGX, sub, t, w, method="gp", roofline=prior)
    assert m.about.metrics["time"]["choice"] == "gp-roofmean" and m.about.metrics["time"]["few_modes"]
    # the board: the prior times a 1.3x slower step and 10 % more power everywhere
    sub, t, w = sub, t * 1.3, w * 1.1
    m = fit_model(None, AGX, sub, t, w, method="gp", roofline=prior)
    modes = AGX.full_space()[::211]
    p0, got = prior.predict(modes), m.predict(modes)
    ratio_t, ratio_p = np.median(got["time_ms"] / p0["time_ms"]), np.median(got["power_w"] / p0["power_w"])
    # the board's own median ratio to the prior (1.23 and 1.12: the scales and _profile_rows's
    # tilt): the model within 7 % (time) and 5 % (power) of it, where the prior alone is 19 % and
    # 11 % off.  (Time was within 5 % while the refitted prior was its fitted scales alone; the
    # median over what 3 modes leave unknown of them prices slower GPU clocks higher, and this
    # board's time, unlike any roofline's, falls with the GPU's clock: 6.2 % off since.)
    A = np.array([m.as_tuple() for m in modes], float)
    tilt = 0.25 * np.log(A[:, 2] / AGX.gpu_mhz[-1]) - 0.1 * np.log(A[:, 3] / AGX.mem_mhz[-1])
    true_t, true_p = np.median(1.3 * np.exp(tilt)), np.median(1.1 * np.exp(-0.3 * tilt))
    assert abs(ratio_t / true_t - 1) < 0.07 and abs(ratio_p / true_p - 1) < 0.05, \
        (ratio_t, true_t, ratio_p, true_p)
    # its spread: at least the floor calibrated for 3 modes (a share of the prior's), and narrower
    # than the unprofiled prior's (which held 98-100 % of the held-out errors in its 90 % interval)
    from ptui.core.prediction.fit import FEW_MODES_SD_SHARE
    lsd = lambda d, k: np.sqrt(np.log1p((d[k + "_std"] / d[k]) ** 2))  # noqa: E731
    for j, k in enumerate(("time_ms", "power_w")):
        assert (lsd(got, k) >= lsd(p0, k) * FEW_MODES_SD_SHARE[3][j] - 1e-9).all(), k
        assert np.median(lsd(got, k)) < 0.8 * np.median(lsd(p0, k)), k
    m.save(tmp_path / "m")
    back = load_model(tmp_path / "m").predict(modes)
    assert all(np.allclose(back[k], got[k]) for k in got)


def _misread_board():
    """(the counted prior, a board it misreads): the board's GPU activity is 0.7 of what the counts
    imply and its CPU work 3x the reference's."""
    from dataclasses import replace

    from ptui.core.prediction.roofline import _cpu_work
    spec = WorkloadSpec.from_dict(SPEC, "test")
    prior = RooflinePrior(AGX, spec)
    host, serial, loader, workers, fref = _cpu_work(spec, prior.roof, AGX)
    a = list(prior.roof.power)
    a[4] *= 0.7
    board = RooflinePrior(AGX, WorkloadSpec(spec.gflop_per_step, spec.gbytes_per_step,
                                            spec.batch_size, host_ms=3 * host, serial_ms=3 * serial,
                                            loader_ms=3 * loader, workers=workers, cpu_mhz=fref),
                          replace(prior.roof, power=tuple(a)))
    return prior, board


@pytest.mark.parametrize("k", [5, 10])
def test_profiled_modes_refit_the_priors_activity_and_cpu_work(k, monkeypatch):
    """With 5 (too few to cross-validate) or 10 profiled modes, the fit first refits the prior to
    them (RooflinePrior.adapted: the GPU's activity, the CPU work, the static power), so on a board
    whose GPU activity is 0.7 of what the counts imply and whose CPU work is 3x the reference's,
    the held-out power is within 3 % and the time within 5 %; the prior rescaled alone (as before)
    missed both by more.  The model still records the user's spec, not the refitted one."""
    from ptui.core.prediction import fit as fitmod
    from ptui.core.prediction.gp import raw_modes
    prior, board = _misread_board()
    grid = AGX.pt_grid()
    A = raw_modes(grid)
    truth = board.predict(A)
    rng = np.random.default_rng(7)
    idx = rng.choice(len(grid), k, replace=False)
    held = np.setdiff1d(np.arange(len(grid)), idx)
    sub = [grid[i] for i in idx]
    t = truth["time_ms"][idx] * np.exp(rng.normal(0, 0.01, k))
    w = truth["power_w"][idx] * np.exp(rng.normal(0, 0.01, k))

    def errors():
        m = fitmod.fit_model(None, AGX, sub, t, w, method="gp", roofline=prior)
        p = m.predict([grid[i] for i in held])
        return (m, float(np.mean(np.abs(p["time_ms"] / truth["time_ms"][held] - 1))),
                float(np.mean(np.abs(p["power_w"] / truth["power_w"][held] - 1))))
    m, et, ep = errors()
    assert et < 0.05 and ep < 0.03, (et, ep)
    assert m.meta["roofline_spec"] == WorkloadSpec.from_dict(SPEC, "test").as_dict()
    monkeypatch.setattr(fitmod, "ADAPT_PRIOR", False)
    _, et0, ep0 = errors()
    assert ep0 > ep and et0 > et, (et0, ep0, et, ep)


def _board_truth(k, seed):
    """k random PowerTrain-grid modes of a board the counted prior misreads (GPU activity 0.7 of
    what the counts imply, 3x the reference's CPU work), measured with 1 % noise; returns
    (the counted prior, the modes, their raw knobs, time, power)."""
    from ptui.core.prediction.gp import raw_modes
    prior, board = _misread_board()
    grid = AGX.pt_grid()
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(grid), k, replace=False)
    sub = [grid[i] for i in idx]
    A = raw_modes(sub)
    truth = board.predict(A)
    return (prior, sub, A, truth["time_ms"] * np.exp(rng.normal(0, 0.01, k)),
            truth["power_w"] * np.exp(rng.normal(0, 0.01, k)))


def _roofmean_priors(monkeypatch):
    """Record the roofline prior every gp-roofmean GP of a fit is given: [(basis, its training
    modes, the prior)]."""
    from ptui.core.prediction import fit as fitmod
    seen: list = []
    real = fitmod.gp_fit

    def spy(prior, A, *args, **kw):
        if prior == "roofmean":
            seen.append((kw.get("basis"), np.array(A), kw.get("roofline")))
        return real(prior, A, *args, **kw)
    monkeypatch.setattr(fitmod, "gp_fit", spy)
    return seen


def test_a_held_out_fold_never_refits_the_prior_its_roofmean_gp_predicts_it_with(monkeypatch):
    """Cross-validation of gp-roofmean: the GP that predicts a held-out fold gets a prior refitted
    to the other folds only, so changing the held-out modes' measurements (time x1.4, power x0.7)
    leaves that prior exactly as it was; the final GP's prior, refitted to every mode, moves.  With
    the prior refitted to all modes before cross-validation, the held-out fold had already bent the
    prior it was predicted with (its CV error optimistic)."""
    from ptui.core.prediction import fit as fitmod
    prior, sub, A, t, w = _board_truth(10, 3)
    fold = fitmod.folds(len(A), 0)
    probe = AGX.pt_grid()[::41]
    runs = []
    for tm, pm in ((t, w), (np.where(fold == 0, t * 1.4, t), np.where(fold == 0, w * 0.7, w))):
        seen = _roofmean_priors(monkeypatch)
        fitmod.fit_model(None, AGX, sub, tm, pm, method="gp", roofline=prior)
        runs.append({(basis, len(a), a[:, :4].tobytes()): r.log_predict(probe)[basis]
                     for basis, a, r in seen})
    held0 = [key for key in runs[0] if key[1] == int((fold != 0).sum())
             and key[2] == A[fold != 0].tobytes()]
    assert {key[0] for key in held0} == {"time", "power"}
    for key in held0:
        assert np.array_equal(runs[0][key], runs[1][key]), key[0]
    full = [key for key in runs[0] if key[1] == len(A)]
    assert full and all(not np.allclose(runs[0][key], runs[1][key]) for key in full)


def test_the_final_prior_is_refitted_after_the_outlier_check_without_the_outlier(monkeypatch):
    """A mode whose power was disturbed (x1.6) is left out by the outlier check; the final power
    GP's roofline prior is refitted to the modes the check kept only.  (The outlier check starts
    at 40 modes; lowered here to 20 so the test stays small.)  With the prior refitted before the
    outlier check, the disturbed power had raised its power scales."""
    from ptui.core.prediction import fit as fitmod
    monkeypatch.setattr(fitmod, "OUTLIER_MIN_MODES", 20)
    prior, sub, A, t, w = _board_truth(20, 5)
    w = w.copy()
    w[4] *= 2.0
    m = fitmod.fit_model(None, AGX, sub, t, w, method="gp", roofline=prior)
    gone = [o["row"] for o in m.about.metrics["power"].get("outliers", [])]
    assert 4 in gone, m.about.metrics["power"]
    roof = next(g for g in m.power.members if g.prior == "roofmean").roofline
    keep = ~np.isin(np.arange(20), gone)
    probe = AGX.pt_grid()[::41]
    want = prior.adapted(A[keep], t[keep], w[keep]).log_predict(probe)["power"]
    assert np.allclose(roof.log_predict(probe)["power"], want)
    bent = prior.adapted(A, t, w).log_predict(probe)["power"]
    assert np.mean(bent - want) > 0.01


def test_a_time_outlier_does_not_refit_the_power_priors_time(monkeypatch):
    """A mode whose time was disturbed (x3) is left out of the time fit; the power GP's prior
    (whose utilisations come from the refitted time) is refitted without that time too, its power
    still counting: its time is the prior refitted to the other modes' times.  Refitted with it,
    the disturbed time had slowed every mode's predicted step."""
    from ptui.core.prediction import fit as fitmod
    monkeypatch.setattr(fitmod, "OUTLIER_MIN_MODES", 20)
    prior, sub, A, t, w = _board_truth(20, 5)
    t = t.copy()
    t[4] *= 3.0
    m = fitmod.fit_model(None, AGX, sub, t, w, method="gp", roofline=prior)
    gone_t = [o["row"] for o in m.about.metrics["time"].get("outliers", [])]
    gone_p = [o["row"] for o in m.about.metrics["power"].get("outliers", [])]
    assert 4 in gone_t, m.about.metrics["time"]
    keep = ~np.isin(np.arange(20), gone_t + gone_p)
    roof = next(g for g in m.power.members if g.prior == "roofmean").roofline
    probe = AGX.pt_grid()[::41]
    want = prior.adapted(A[keep], t[keep], w[keep]).log_predict(probe)["time"]
    assert np.allclose(roof.log_predict(probe)["time"], want)
    bent = prior.adapted(A, t, w).log_predict(probe)["time"]
    assert np.mean(bent - want) > 0.01


def test_a_large_profiles_unfitted_rows_do_not_refit_the_prior_that_they_check(monkeypatch):
    """A profile larger than FIT_MAX_ROWS is fitted on a subset, the other rows checking the
    model (rest_mape); the prior is refitted to the fitted rows only, so that check is on modes
    the model never saw.  (FIT_MAX_ROWS lowered from 200 to 12 so the test stays small.)  With the
    prior refitted to every row first, the checking rows had shaped it."""
    from ptui.core.prediction import fit as fitmod
    monkeypatch.setattr(fitmod, "FIT_MAX_ROWS", 12)
    prior, sub, A, t, w = _board_truth(20, 5)
    m = fitmod.fit_model(None, AGX, sub, t, w, method="gp", roofline=prior)
    assert m.about.metrics["time"]["fitted_rows"] == 12
    rows = fitmod.fit_rows(A, 0)
    probe = AGX.pt_grid()[::41]
    want = prior.adapted(A[rows], t[rows], w[rows]).log_predict(probe)
    for tgt in ("time", "power"):
        roof = next(g for g in getattr(m, tgt).members if g.prior == "roofmean").roofline
        assert np.allclose(roof.log_predict(probe)[tgt], want[tgt]), tgt


def test_the_active_planners_gps_take_the_prior_as_their_mean(monkeypatch):
    """With the workload's prior, the planner's GP models (what its acquisition and its verifying
    decision see) start from the prior refitted to the measured rows, as `ptui fit --workload-spec`
    does; before, the prior chose only the initial design and the GPs knew the reference alone.
    A board the prior describes up to a smooth error: after 5 modes the planner's prediction of
    every other mode is much closer to it than without the prior, and its decision's fit is the
    prior's (the model names its spec)."""
    from ptui.core.prediction.gp import raw_modes
    from ptui.core.prediction.predictor import load_bundled
    from ptui.core.profiling.active import ActivePlanner
    spec = WorkloadSpec.from_dict({"gflop_per_step": 20.0, "gbytes_per_step": 20.0, "batch_size": 8})
    prior = RooflinePrior(AGX, spec)
    sub, t, w = _profile_rows(prior, 7, 3)
    rows = [dict(zip(("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"), m.as_tuple()), time_ms=float(a),
                 power_w=float(b)) for m, a, b in zip(sub, t, w)]
    grid = AGX.pt_grid()
    truth = prior.predict(grid)
    A = raw_modes(grid)
    tilt = 0.25 * np.log(A[:, 2] / AGX.gpu_mhz[-1]) - 0.1 * np.log(A[:, 3] / AGX.mem_mhz[-1])
    err = {}
    for arm, pr in (("prior", prior), ("none", None)):
        pl = ActivePlanner(AGX, grid, Goal(budget_w=25.0), count=20, reference=load_bundled(), prior=pr)
        models = pl.fit(rows[:5])
        mu, _ = models["time"].predict_log(AGX, A)
        err[arm] = float(np.median(np.abs(mu - np.log(truth["time_ms"]) - tilt)))
    assert err["prior"] < 0.5 * err["none"], err
    pl = ActivePlanner(AGX, grid, Goal(budget_w=25.0), count=20, reference=load_bundled(), prior=prior)
    from ptui.core.prediction import fit as fitmod
    seen: list = []
    real = fitmod.fit_model

    def spy(*a, **k):
        seen.append(k.get("roofline"))
        return real(*a, **k)
    monkeypatch.setattr(fitmod, "fit_model", spy)
    pl.decide(rows)
    assert seen and seen[0] is prior


def test_a_spec_of_another_batch_size_than_the_profile_is_one_line(cli, tmp_path):
    """A batch-32 profile fitted with a batch-16 spec without a word (a user trial): the spec
    counts another step.  One line, exit 2, no model written."""
    prof = tmp_path / "p.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--batch-size", "32", "--count", "6", "--session", "p", "--out", prof)
    assert rc == 0, err
    spec = _spec_file(tmp_path, {"gflop_per_step": 90.0, "gbytes_per_step": 6.0, "batch_size": 16})
    rc, _, err = cli("fit", "--device", "orin-agx", "--profile", prof, "--workload-spec", spec,
                     "--out", tmp_path / "m")
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "batch size 32" in err and "batch size 16" in err and not (tmp_path / "m").exists()


@pytest.mark.parametrize("command", [
    ("tune", "--count", "6"),
    ("profile", "--strategy", "active", "--count", "6", "--out", "act.csv"),
])
def test_a_spec_of_another_batch_size_than_the_profile_is_refused_before_any_mode(cli, tmp_path, command):
    """`ptui tune --workload resnet18 --workload-spec spec.json` (a batch-32 spec, the profile at
    16) profiled every mode, then refused at the fit; an active profile ran on the other step's
    prior.  Now one line, exit 2, before any mode is profiled (no session, no CSV)."""
    spec = _spec_file(tmp_path)
    cmd, *rest = command
    rest = [str(tmp_path / x) if x.endswith(".csv") else x for x in rest]
    rc, out, err = cli(cmd, "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                       "--workload-spec", spec, "--budget-w", "30", "--session", "s", *rest)
    assert rc == 2 and not out and len(err.strip().splitlines()) == 1, err
    assert "batch size 16" in err and "batch size 32" in err and "--batch-size 32" in err, err
    assert not (tmp_path / "act.csv").exists()
    rc, out, _ = cli("sessions", "--json")
    assert rc == 0 and json.loads(out)["sessions"] == []
    # at the spec's batch size it runs
    rc, out, err = cli(cmd, "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                       "--batch-size", "32", "--workload-spec", spec, "--budget-w", "30",
                       "--session", "s2", *rest)
    assert rc == 0, err


def test_the_time_and_power_fits_refit_the_prior_once_per_set_of_rows(monkeypatch):
    """Each GP of gp-roofmean refits the prior to its training rows (the whole profile, and each
    fold's rows); the power fit asked for the same refits again.  Refitting, three scales searched
    on a grid, is the slow part of a fit with a spec."""
    from ptui.core.prediction.fit import fit_model, n_folds
    prior = RooflinePrior(AGX, WorkloadSpec.from_dict(SPEC, "test"))
    sub, t, w = _profile_rows(prior, 12, 4)
    calls = []
    real = RooflinePrior.adapted
    monkeypatch.setattr(RooflinePrior, "adapted", lambda self, *a: calls.append(1) or real(self, *a))
    fit_model(None, AGX, sub, t, w, method="gp", roofline=prior)
    assert len(calls) == 1 + n_folds(12)


def test_a_reference_that_is_no_network_is_refused_in_one_line(cli, tmp_path):
    """`ptui fit --reference DIR` with DIR a fitted GP model or a roofline prior (a model, not
    reference networks) ended in a traceback (GPStack.predict_log() missing 'A'; RooflineTarget has
    no predict_log).  One line, exit 2, no model written."""
    prof = tmp_path / "p.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "10", "--session", "p", "--out", prof)
    assert rc == 0, err
    rc, _, err = cli("fit", "--device", "orin-agx", "--workload-spec", _spec_file(tmp_path),
                     "--out", tmp_path / "prior")
    assert rc == 0, err
    rc, _, err = cli("fit", "--device", "orin-agx", "--profile", prof, "--method", "gp",
                     "--out", tmp_path / "gp")
    assert rc == 0, err
    for ref in ("prior", "gp"):
        rc, out, err = cli("fit", "--device", "orin-agx", "--profile", prof, "--reference",
                           tmp_path / ref, "--out", tmp_path / "m")
        assert rc == 2 and not out and len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err and "not reference networks" in err and "ptui reference build" in err
        assert not (tmp_path / "m").exists()


def test_five_modes_that_say_nothing_of_the_flops_do_not_send_a_budget_to_the_slowest_gpu_clock(tmp_path):
    """MobileNetV3 on the simulator, 5 profiled modes none of which its GPU's compute bounds: the
    prior rescaled to them (as `ptui fit --workload-spec` with 5 modes) took the grid's slowest GPU
    clock (115 MHz) for 20 and 26 W budgets, predicted at 301 and 148 ms, where it takes 474 and
    467 (the optimum 202 and 134 ms): the refit's FLOPs were a point where nothing measured them.
    Now the rescaled prior is the median over what the modes leave unknown."""
    from ptui.core.board.physics import WORKLOAD_PHYSICS, steady_state
    from ptui.core.catalogue.workloads import get_workload
    from ptui.core.decision.pareto import Table, choose
    from ptui.core.prediction.fit import fit_model
    from ptui.core.prediction.gp import raw_modes
    wl, wp = get_workload("mobilenetv3"), WORKLOAD_PHYSICS["mobilenetv3"]
    B = wl.batch_size
    prior = RooflinePrior(AGX, WorkloadSpec(wp.gflop * B, wp.gb_per_sample * B + wp.gb_fixed, B))
    grid = AGX.pt_grid()
    A = raw_modes(grid)
    truth = steady_state(AGX, wl, *A.T, tpc=AGX.gpu_tpcs)
    want = [(10, 1344, 624.75, 2133), (4, 2112, 1032.75, 665.6), (10, 1958.4, 318.75, 204),
            (4, 1497.6, 1236.75, 204), (6, 268.8, 930.75, 3199)]
    idx = [int(np.flatnonzero(np.all(np.isclose(A, w), axis=1))[0]) for w in want]
    m = fit_model(None, AGX, [grid[i] for i in idx], truth.time_ms[idx], truth.power_w[idx],
                  method="gp", roofline=prior)
    assert m.about.metrics["time"]["few_modes"]
    tab = Table.from_prediction(grid, m.predict(grid))
    for budget in (20.0, 26.0):
        pick = grid[choose(tab, budget_w=budget).index]
        assert pick.gpu_mhz > AGX.gpu_mhz[0], (budget, pick)
