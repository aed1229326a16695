"""Decisions use only knob values the profile measured: elsewhere a prediction is an
extrapolation that no measurement checked (on the independent generator 12.5 % of budget picks
over the whole space were more than 1 W over the budget)."""
import numpy as np

from ptui import core
from ptui.core.catalogue.devices import get_device
from ptui.core.prediction.fit import fit_model
from ptui.core.prediction.gp import raw_modes
from ptui.core.prediction.predictor import load_bundled, load_model

DEV = get_device("orin-agx")


def _model(tmp_path, lo_cpu=1036.8):
    """A GP fitted on modes with >= 6 cores and CPU >= lo_cpu only; truth: power falls steeply
    with CPU frequency, so the cheapest modes are the ones never profiled."""
    rng = np.random.default_rng(3)
    grid = [m for m in DEV.pt_grid() if m.cores >= 6 and m.cpu_mhz >= lo_cpu]
    modes = [grid[i] for i in rng.choice(len(grid), 30, replace=False)]
    c, f, g, m = raw_modes(modes).T
    t = 30 + 4e4 / g + 1.5e4 / m + 2e3 / (c * f / 1000)
    p = 6 + 0.012 * g + 0.004 * m + 0.8 * c * (f / 2200) ** 2
    measured = {"modes": raw_modes(modes), "time_ms": t, "power_w": p,
                "time_ms_std": np.zeros(30), "power_w_std": np.zeros(30)}
    model = fit_model(load_bundled(), DEV, modes, t, p, method="gp", seed=0, measured=measured)
    model.save(tmp_path / "m")
    return load_model(tmp_path / "m"), modes


def test_decisions_only_inside_the_profiled_range(tmp_path):
    model, modes = _model(tmp_path)
    kept, note = model.decision_space()
    A = raw_modes(kept)
    P = raw_modes(modes)
    for k in range(4):                          # every knob at a value some profiled mode had
        assert set(A[:, k]) == set(P[:, k])
    assert 0 < len(kept) < len(DEV.full_space())
    assert f"{len(DEV.full_space()) - len(kept)} of {len(DEV.full_space())} modes" in note
    assert "extrapolations" in note
    allm, none = model.decision_space(extrapolate=True)
    assert len(allm) == len(DEV.full_space()) and none == ""
    pred = core.load_predictions(tmp_path / "m", DEV)
    assert len(pred.table) == len(kept) and pred.note == note
    for budget in (15, 20, 30):
        d = core.view(pred, goal="budget", budget_w=budget, mb_per_epoch=3125).decision
        m = d.mode
        assert P[:, 0].min() <= m.cores and P[:, 1].min() <= m.cpu_mhz <= P[:, 1].max()


def test_the_bundled_reference_keeps_every_mode():
    ref = load_bundled()
    kept, note = ref.decision_space()
    assert len(kept) == len(DEV.full_space()) and note == ""


def test_cli_pareto_says_what_it_left_out_and_extrapolate_includes_it(tmp_path, cli):
    """A budget below every profiled-range prediction: by default nothing inside the range meets
    it (exit 3, the closest option named) while --extrapolate picks an unprofiled, cheaper mode."""
    import json
    model, modes = _model(tmp_path)
    P = raw_modes(modes)
    kept, _ = model.decision_space()
    p_in = model.predict(kept)["power_w"].min()
    p_all = model.predict(DEV.full_space())["power_w"].min()
    assert p_all < p_in - 0.5                  # cheaper modes exist only by extrapolation
    budget = f"{(p_all + p_in) / 2:.2f}"
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", budget, "--risk", "mean")
    assert rc == 3, (rc, err)
    assert "no profiled mode had" in err and "--extrapolate" in err
    rc2, out2, err2 = cli("pareto", "--model", tmp_path / "m", "--budget-w", budget, "--risk", "mean",
                          "--extrapolate", "--json")
    assert rc2 == 0 and "no profiled mode had" not in err2, err2
    m2 = json.loads(out2)["mode"]
    assert m2["cores"] < P[:, 0].min() or m2["cpu_mhz"] < P[:, 1].min()


def test_the_view_decides_a_profile_on_its_measurements_and_a_model_with_its_risk():
    """The rule was the Pareto screen's (risk 0.05 for a model, none for a profile's measured
    figures); it is the use case's now, so both faces decide alike."""
    import numpy as np

    from ptui.core.decision.pareto import Table
    from ptui.core.usecases.decide import Predictions
    grid = DEV.pt_grid()
    tab = Table([grid[0], grid[1]], np.array([100.0, 150.0]), np.array([29.8, 25.0]),
                np.array([1.0, 1.0]), np.array([2.0, 0.1]), np.array([True, True]))
    measured = Predictions(tab, None, 1000, "resnet18")
    assert core.view(measured, goal="budget", budget_w=30, mb_per_epoch=1000).decision.index == 0
    assert core.view(measured, goal="budget", budget_w=30, mb_per_epoch=1000, risk=0.05).decision.index == 1
