"""Goals as types (ptui.core.decision.goals): one value from the faces to the decision."""
import numpy as np
import pytest

from ptui.core.decision.goals import Goal, goal_from
from ptui.core.errors import InputError


def test_a_goal_knows_its_kind_and_words():
    assert Goal(budget_w=20).kind == "budget" and Goal(budget_w=20).describe() == "fastest within 20 W"
    assert Goal(budget_w=20).describe(0.05) == "fastest within 20 W (risk 0.05)"
    assert Goal(budget_w=20).describe(0.05, 1.0) == "fastest within 20 W (risk 0.05 of exceeding 21 W)"
    assert Goal(deadline_ms=100).kind == "deadline"
    assert Goal(deadline_ms=100).describe(0.05) == "lowest power meeting 100 ms per minibatch"
    assert Goal(budget_w=30, deadline_ms=100).kind == "budget"         # a deadline joins the budget
    assert Goal(objective="energy").describe() == "least energy per minibatch"
    assert Goal(budget_w=15, objective="energy").describe() == "least energy per minibatch within 15 W"


@pytest.mark.parametrize("kw, msg", [({}, "needs a goal"), ({"budget_w": 0}, "--budget-w must be positive"),
                                     ({"deadline_ms": -1}, "--deadline-ms must be positive"),
                                     ({"budget_w": float("nan")}, "--budget-w must be positive"),
                                     ({"objective": "speed"}, "unknown objective")])
def test_a_goal_that_is_not_one_is_refused(kw, msg):
    with pytest.raises(InputError, match=msg):
        Goal(**kw)


def test_the_app_names_a_goal_by_its_kind():
    assert Goal.of("budget", 20, 5) == Goal(budget_w=20)
    assert Goal.of("deadline", 20, 5) == Goal(deadline_ms=5)          # a deadline goal has no budget
    assert Goal.of("energy", None, None) == Goal(objective="energy")
    for kind, msg in (("budget", "set a power budget"), ("deadline", "set a deadline"),
                      ("fastest", "unknown goal")):
        with pytest.raises(InputError, match=msg):
            Goal.of(kind)


def test_the_best_row_for_each_kind():
    t = np.array([10.0, 20.0, 30.0, 20.0])
    p = np.array([30.0, 10.0, 5.0, 12.0])
    idx = np.arange(4)
    assert Goal(budget_w=99).best(idx, t, p) == 0                       # fastest
    assert Goal(deadline_ms=99).best(idx, t, p) == 2                    # lowest power
    assert Goal(objective="energy").best(idx, t, p) == 2                # 150 < 200 < 240 < 300
    assert Goal(budget_w=99).best(np.array([1, 3]), t, p) == 1          # a tie on time: less power


def test_a_goal_or_its_flags_not_both():
    g = Goal(budget_w=10)
    assert goal_from(g) is g and goal_from(budget_w=10) == g
    with pytest.raises(ValueError, match="not both"):
        goal_from(g, budget_w=10)


def test_a_goal_with_a_budget_and_a_deadline_says_both(cli):
    """--budget-w with --deadline-ms: the decision holds both limits, and the goal line said only
    the budget ('fastest within 30 W')."""
    assert (Goal(budget_w=30, deadline_ms=200).describe(0.05)
            == "fastest within 30 W meeting 200 ms per minibatch (risk 0.05)")
    assert (Goal(budget_w=30, deadline_ms=200, objective="energy").describe()
            == "least energy per minibatch within 30 W meeting 200 ms")
    assert Goal(deadline_ms=200, objective="energy").describe() == "least energy per minibatch meeting 200 ms"
    from ptui.core.prediction.predictor import bundled_reference
    rc, out, err = cli("pareto", "--model", bundled_reference(), "--budget-w", "30", "--deadline-ms", "200")
    assert rc == 0 and out.splitlines()[0] == "goal: fastest within 30 W meeting 200 ms per minibatch (risk 0.05)", out


def test_the_goal_says_the_models_unit_of_time(tmp_path, cli):
    """A script's model times an optimizer step: its goal line said 'per minibatch' beside figures
    'per optimizer step (of the user's script)'.  The goal's words take the model's unit (tune,
    pareto, the preset baseline and a goal no mode meets)."""
    import json

    from ptui import core
    step = "optimizer step (of the user's script)"
    spec = core.workload_spec(workload="resnet18", batch_size=16)
    td = core.tune_prior(core.get_device("orin-agx"), spec, deadline_ms=2000, model_dir=tmp_path / "m",
                         workload="script", timed=step)
    assert td.decision.goal == f"lowest power meeting 2000 ms per {step}"
    m = tmp_path / "m"
    rc, out, err = cli("pareto", "--model", m, "--budget-w", "30", "--deadline-ms", "2000")
    assert rc == 0 and out.splitlines()[0] == f"goal: fastest within 30 W meeting 2000 ms per {step} (risk 0.05)", out
    rc, out, err = cli("pareto", "--model", m, "--objective", "energy", "--deadline-ms", "2000", "--json")
    d = json.loads(out)
    assert d["goal"] == d["baselines"]["best_preset"]["goal"] == f"least energy per {step} meeting 2000 ms"
    rc, out, err = cli("pareto", "--model", m, "--deadline-ms", "0.01", "--json")
    assert rc == 3 and json.loads(out)["goal"] == f"lowest power meeting 0.01 ms per {step}", out
    assert Goal(deadline_ms=5).describe() == "lowest power meeting 5 ms per minibatch"


def test_a_goal_no_mode_meets_for_its_uncertainty_says_so_with_a_budget_too():
    """`tune --count 0 --budget-w 30 --deadline-ms 400` on the prior alone said 'no mode meets 400
    ms within 30 W; the fastest within the budget is ... at 134.6 ms, 25.1 W', a mode that meets
    both, without the reason: its time's spread (+-219 ms).  The deadline alone said it."""
    import numpy as np
    import pytest

    from ptui.core.catalogue.modes import Mode
    from ptui.core.decision.pareto import InfeasibleError, Table, choose
    modes = [Mode(4, 1000.0, 600.0, 2000.0), Mode(8, 2000.0, 1000.0, 3000.0)]
    tab = Table(modes, np.array([134.6, 90.0]), np.array([25.1, 40.0]),
                np.array([218.9, 150.0]), np.array([1.0, 1.5]))
    with pytest.raises(InfeasibleError) as e:
        choose(tab, budget_w=30, deadline_ms=400)
    msg = str(e.value)
    assert "the fastest within the budget is" in msg and "134.6 ms" in msg
    assert "so uncertain that it may exceed 400 ms with probability" in msg, msg
    with pytest.raises(InfeasibleError) as e:
        choose(tab, deadline_ms=400)
    assert "so uncertain that it may exceed 400 ms with probability" in str(e.value)
    # a mode whose power is the uncertain figure says the budget
    tab = Table(modes, np.array([134.6, 90.0]), np.array([29.0, 40.0]),
                np.array([1.0, 1.0]), np.array([3.0, 1.5]))
    with pytest.raises(InfeasibleError) as e:
        choose(tab, budget_w=30, deadline_ms=400)
    assert "may exceed 30 W with probability" in str(e.value), str(e.value)


def test_a_goal_no_mode_meets_says_its_unit_of_time(tmp_path, cli):
    """'no mode meets 0.01 ms' said of a script's model, whose times are per optimizer step: the
    reason (the error line and the --json reason) says the model's unit, as the goal's words do."""
    import json

    from ptui import core
    step = "optimizer step (of the user's script)"
    spec = core.workload_spec(workload="resnet18", batch_size=16)
    core.tune_prior(core.get_device("orin-agx"), spec, budget_w=30, model_dir=tmp_path / "m",
                    workload="script", timed=step)
    m = tmp_path / "m"
    rc, _, err = cli("pareto", "--model", m, "--deadline-ms", "0.01")
    assert rc == 3 and f"no mode meets 0.01 ms per {step} with risk <= 0.05; the fastest is" in err, err
    rc, out, _ = cli("pareto", "--model", m, "--deadline-ms", "0.01", "--budget-w", "30", "--json")
    assert rc == 3 and json.loads(out)["reason"].startswith(f"no mode meets 0.01 ms per {step} within 30 W")
    with pytest.raises(core.InfeasibleError, match=r"^no mode meets 0\.5 ms per minibatch; the fastest"):
        core.choose(core.Table([core.Mode(4, 729.6, 318.75, 665.6)], np.array([9.0]), np.array([10.0]),
                               np.zeros(1), np.zeros(1)), deadline_ms=0.5, risk=None)
