"""Every goal of pareto.choose against a brute-force answer written independently here.

Tables are random (seeded) with ties in time and power and a spread on both.  The brute force reads
the rules from the module docstring and the CLI help, not from the implementation:

* budget B (risk r, tolerance t): a mode qualifies when its predicted power is <= B and, when any
  power spread is given, P(power > B + t) <= r with power log-normal around the prediction;
  the pick is the fastest, ties to the lower power, then to the first row;
* deadline D alone: the lowest power whose time meets D (same risk rule on time when any time
  spread is given), ties to the faster, then to the first row;
* energy: the least time x power among the qualifying modes (first row on a tie).
"""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.decision.pareto import InfeasibleError, Table, choose, front_indices

ORIN = get_device("orin-agx")
MODES = ORIN.full_space()


# -- the independent reference --------------------------------------------------------------
def p_exceed(median: float, sd: float, limit: float) -> float:
    """P(X > limit) for a log-normal X whose median is `median` and whose sd/median is sd/median."""
    if sd <= 0:
        return 1.0 if median > limit else 0.0
    sigma = math.sqrt(math.log(1.0 + (sd / median) ** 2))
    z = (math.log(limit) - math.log(median)) / sigma
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def brute(tab: Table, budget=None, deadline=None, objective=None, risk=0.05, tol=0.0):
    n = len(tab)
    t, p = list(map(float, tab.time_ms)), list(map(float, tab.power_w))
    ts, ps = list(map(float, tab.time_ms_std)), list(map(float, tab.power_w_std))
    ok = []
    power_spread = any(x > 0 for x in ps)
    time_spread = any(x > 0 for x in ts)
    for i in range(n):
        good = True
        if budget is not None:
            good = good and p[i] <= budget
            if risk is not None and power_spread:
                good = good and p_exceed(p[i], ps[i], budget + tol) <= risk
        if deadline is not None:
            if risk is not None and time_spread:
                good = good and p_exceed(t[i], ts[i], deadline) <= risk
            else:
                good = good and t[i] <= deadline
        if good:
            ok.append(i)
    if not ok:
        return None
    if objective == "energy":
        return min(ok, key=lambda i: (t[i] * p[i], i))
    if deadline is not None and budget is None:
        return min(ok, key=lambda i: (p[i], t[i], i))
    return min(ok, key=lambda i: (t[i], p[i], i))


def rand_table(seed: int, n: int = 60, sd_frac=(0.0, 0.12), ties: bool = True) -> Table:
    rng = random.Random(seed)
    modes = rng.sample(MODES, n)
    p, t = [], []
    for _ in range(n):
        pw = rng.uniform(8, 55)
        tm = 3000 / pw * rng.uniform(0.8, 1.6)
        if ties:                       # coarse values: many equal times and powers
            pw, tm = round(pw), round(tm, -1) or 10.0
        p.append(pw)
        t.append(tm)
    if ties:                           # exact duplicates too
        for _ in range(5):
            a, b = rng.randrange(n), rng.randrange(n)
            p[a], t[a] = p[b], t[b]
    ps = [x * rng.uniform(*sd_frac) for x in p]
    ts = [x * rng.uniform(*sd_frac) for x in t]
    return Table(modes, np.array(t), np.array(p), np.array(ts), np.array(ps))


def check(tab, **goal):
    kw = dict(goal)
    want = brute(tab, budget=kw.get("budget_w"), deadline=kw.get("deadline_ms"),
                 objective=kw.get("objective"), risk=kw.get("risk", 0.05),
                 tol=kw.get("tolerance_w", 0.0))
    if want is None:
        with pytest.raises(InfeasibleError):
            choose(tab, **goal)
        return None
    d = choose(tab, **goal)
    assert d.index == want, (goal, d.index, want, tab.modes[want].key)
    assert d.mode == tab.modes[want]
    assert (d.time_ms, d.power_w) == (tab.time_ms[want], tab.power_w[want])
    assert (d.time_ms_std, d.power_w_std) == (tab.time_ms_std[want], tab.power_w_std[want])
    return d


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_budget_matches_brute_force(seed):
    tab = rand_table(seed)
    for budget in (9, 14, 20, 25.5, 30, 40, 60):
        for risk in (None, 0.05, 0.2, 0.5):
            check(tab, budget_w=budget, risk=risk)


@pytest.mark.parametrize("seed", SEEDS)
def test_budget_with_tolerance_matches_brute_force(seed):
    tab = rand_table(seed)
    for budget in (14, 20, 30, 40):
        for tol in (0.5, 2.0, 5.0):
            for risk in (None, 0.05, 0.3):
                check(tab, budget_w=budget, risk=risk, tolerance_w=tol)


@pytest.mark.parametrize("seed", SEEDS)
def test_deadline_matches_brute_force(seed):
    tab = rand_table(seed)
    for deadline in (50, 80, 120, 200, 400, 1000):
        for risk in (None, 0.05, 0.25):
            check(tab, deadline_ms=deadline, risk=risk)


@pytest.mark.parametrize("seed", SEEDS)
def test_energy_with_and_without_budget_matches_brute_force(seed):
    tab = rand_table(seed)
    for risk in (None, 0.05):
        check(tab, objective="energy", risk=risk)
        for budget in (12, 20, 30, 45):
            check(tab, objective="energy", budget_w=budget, risk=risk)
        check(tab, objective="energy", deadline_ms=150, risk=risk)


@pytest.mark.parametrize("seed", SEEDS)
def test_budget_and_deadline_together(seed):
    tab = rand_table(seed)
    for budget, deadline in ((30, 150), (20, 300), (45, 90), (12, 2000)):
        for risk in (None, 0.1):
            check(tab, budget_w=budget, deadline_ms=deadline, risk=risk)


def test_without_spread_the_risk_rule_is_the_plain_rule():
    tab = rand_table(3, sd_frac=(0.0, 0.0))
    for budget in (15, 30, 45):
        a = check(tab, budget_w=budget, risk=0.05)
        b = check(tab, budget_w=budget, risk=None)
        assert a.index == b.index and a.exceed_prob is None


def test_energy_under_budget_never_picks_over_budget():
    """The energy goal with a budget picks among the modes within it (an index into the filtered
    rows must be mapped back to the table): here the least-energy mode overall is over budget."""
    m = MODES[:4]
    tab = Table(m, np.array([10.0, 40.0, 30.0, 100.0]), np.array([50.0, 20.0, 25.0, 5.0]),
                np.zeros(4), np.zeros(4))
    # energies 500, 800, 750, 500 -> overall least is row 0 (first) or 3
    assert choose(tab, objective="energy", risk=None).index == 0
    d = choose(tab, objective="energy", budget_w=26, risk=None)
    assert d.index == 3 and d.mode == m[3]
    d = choose(tab, objective="energy", budget_w=30, deadline_ms=50, risk=None)
    assert d.index == 2 and d.power_w == 25.0


def test_budget_picks_the_fastest_not_just_any_within():
    m = MODES[:5]
    tab = Table(m, np.array([100.0, 50.0, 60.0, 50.0, 20.0]), np.array([10.0, 29.0, 28.0, 29.5, 31.0]),
                np.zeros(5), np.zeros(5))
    d = choose(tab, budget_w=30, risk=None)
    assert d.index == 1                 # 50 ms at 29 W beats 50 ms at 29.5 W (tie on time -> power)
    assert "fastest within 30 W" in d.goal
    d = choose(tab, budget_w=31, risk=None)
    assert d.index == 4                 # exactly at the budget qualifies


def test_deadline_picks_the_lowest_power_and_ties_to_faster():
    m = MODES[:4]
    tab = Table(m, np.array([90.0, 80.0, 100.0, 101.0]), np.array([20.0, 20.0, 25.0, 5.0]),
                np.zeros(4), np.zeros(4))
    d = choose(tab, deadline_ms=100, risk=None)
    assert d.index == 1 and "lowest power meeting 100 ms" in d.goal


def test_tolerance_changes_the_pick():
    """A fast mode near the budget with a wide spread is too risky without tolerance and fine with
    it; the mean must still stay within the budget either way."""
    m = MODES[:3]
    t = np.array([50.0, 80.0, 40.0])
    p = np.array([29.0, 20.0, 30.5])          # row 2 is over budget on its mean
    ps = np.array([1.5, 0.5, 0.1])
    tab = Table(m, t, p, t * 0.02, ps)
    strict = choose(tab, budget_w=30, risk=0.05)
    assert strict.index == 1
    assert p_exceed(29.0, 1.5, 30.0) > 0.05   # the reason row 0 is refused
    tol = choose(tab, budget_w=30, risk=0.05, tolerance_w=3.0)
    assert tol.index == 0
    assert p_exceed(29.0, 1.5, 33.0) < 0.05
    assert tol.exceed_prob == pytest.approx(p_exceed(29.0, 1.5, 33.0), abs=1e-6)
    assert strict.exceed_prob == pytest.approx(p_exceed(20.0, 0.5, 30.0), abs=1e-6)
    assert "33 W" in tol.goal and "risk 0.05" in tol.goal
    # without a risk the tolerance has nothing to relax: the plain budget rule
    assert choose(tab, budget_w=30, risk=None, tolerance_w=3.0).index == 0
    assert choose(tab, budget_w=30, risk=None).index == 0


def test_deadline_risk_uses_the_time_spread():
    m = MODES[:2]
    t = np.array([95.0, 70.0])
    tab = Table(m, t, np.array([10.0, 20.0]), np.array([10.0, 1.0]), np.array([0.5, 0.5]))
    # row 0 meets 100 ms on its median but exceeds it with ~30 % probability
    assert choose(tab, deadline_ms=100, risk=None).index == 0
    assert p_exceed(95.0, 10.0, 100.0) > 0.25
    assert choose(tab, deadline_ms=100, risk=0.05).index == 1
    assert choose(tab, deadline_ms=100, risk=0.5).index == 0


def test_risk_005_exceeds_the_budget_in_at_most_5_percent_of_draws():
    """Monte Carlo from the predictive log-normal: the pick exceeds budget + tolerance in <= 5 % of
    draws, and the next faster mode it passed over exceeds it in more (the rule is tight)."""
    rng = np.random.default_rng(7)
    n = 40
    m = MODES[:n]
    p = np.linspace(20.0, 29.9, n)            # faster as power grows
    t = 3000.0 / p
    cv = 0.06
    tab = Table(m, t, p, t * 0.01, p * cv)
    sigma = math.sqrt(math.log(1 + cv * cv))
    for budget, tol in ((30.0, 0.0), (30.0, 1.0), (28.0, 0.5)):
        d = choose(tab, budget_w=budget, risk=0.05, tolerance_w=tol)
        draws = np.exp(rng.normal(math.log(d.power_w), sigma, 400_000))
        frac = float(np.mean(draws > budget + tol))
        assert frac <= 0.05 + 0.002, (budget, tol, frac)
        assert frac > 0.03                         # the grid is fine: the pick sits near the line
        faster = [i for i in range(n) if t[i] < d.time_ms and p[i] <= budget]
        if faster:
            j = min(faster, key=lambda i: p[i])
            draws = np.exp(rng.normal(math.log(p[j]), sigma, 400_000))
            assert float(np.mean(draws > budget + tol)) > 0.05
        assert d.exceed_prob == pytest.approx(frac, abs=0.003)


@pytest.mark.parametrize("seed", range(6))
def test_front_matches_brute_force_with_ties(seed):
    tab = rand_table(seed, n=80)
    t, p = tab.time_ms, tab.power_w
    n = len(tab)
    brute_front = []
    for i in range(n):
        dominated = any(t[j] <= t[i] and p[j] <= p[i] and (t[j] < t[i] or p[j] < p[i])
                        for j in range(n))
        dup_before = any(t[j] == t[i] and p[j] == p[i] for j in range(i))
        if not dominated and not dup_before:
            brute_front.append(i)
    brute_front.sort(key=lambda i: (p[i], t[i]))
    assert front_indices(t, p).tolist() == brute_front


def test_bad_goals_are_refused():
    tab = rand_table(1)
    for kw, msg in (({"budget_w": 0}, "--budget-w must be positive"),
                    ({"budget_w": -3}, "--budget-w must be positive"),
                    ({"deadline_ms": 0}, "--deadline-ms must be positive"),
                    ({"budget_w": 30, "tolerance_w": -0.1}, "must not be negative"),
                    ({"budget_w": 30, "risk": 0}, "--risk must be between 0 and 1"),
                    ({"budget_w": 30, "risk": 1}, "--risk must be between 0 and 1"),
                    ({"budget_w": 30, "risk": 1.5}, "--risk must be between 0 and 1"),
                    ({}, "needs a goal"),
                    ({"objective": "speed"}, "unknown objective")):
        with pytest.raises(ValueError, match=msg) as ei:
            choose(tab, **kw)
        assert not isinstance(ei.value, InfeasibleError)
    assert choose(tab, budget_w=60, risk=0.999).index is not None


def test_infeasible_names_the_closest_modes():
    m = MODES[:3]
    tab = Table(m, np.array([100.0, 50.0, 80.0]), np.array([12.0, 30.0, 15.0]),
                np.zeros(3), np.array([0.5, 1.0, 0.7]))
    with pytest.raises(InfeasibleError) as ei:
        choose(tab, budget_w=10, risk=0.05)
    msg = str(ei.value)
    assert ei.value.exit_code == 3
    assert "no mode stays within 10 W with risk <= 0.05" in msg
    assert f"lowest-power mode is {m[0].describe()} at 12.0 W (±0.5), 100 ms" in msg
    with pytest.raises(InfeasibleError) as ei:
        choose(tab, deadline_ms=20, risk=None)
    assert f"the fastest is {m[1].describe()} at 50.0 ms, 30.0 W" in str(ei.value)
    with pytest.raises(InfeasibleError) as ei:
        choose(tab, budget_w=10, deadline_ms=20, risk=None)
    assert m[0].describe() in str(ei.value) and m[1].describe() in str(ei.value)
    assert "with risk" not in str(ei.value)


def test_table_from_prediction():
    m = MODES[:3]
    tab = Table.from_prediction(m, {"time_ms": [100, 50, 80], "power_w": [10, 30, 20]})
    assert len(tab) == 3 and tab.modes == list(m)
    for a in (tab.time_ms, tab.power_w, tab.time_ms_std, tab.power_w_std):
        assert a.dtype == np.float64 and a.shape == (3,)
    assert tab.time_ms_std.tolist() == [0.0, 0.0, 0.0] and tab.power_w_std.tolist() == [0.0] * 3
    assert choose(tab, budget_w=25).exceed_prob is None          # no spread: the plain rule
    tab = Table.from_prediction(m, {"time_ms": [100, 50, 80], "power_w": [10, 30, 20],
                                    "time_ms_std": [1, 2, 3], "power_w_std": [1, 1, 2]})
    assert tab.time_ms_std.tolist() == [1.0, 2.0, 3.0]
    assert tab.time_ms_std.dtype == np.float64 and tab.power_w_std.dtype == np.float64
    assert tab.power_w_std.tolist() == [1.0, 1.0, 2.0]
    d = choose(tab, budget_w=25)
    assert d.index == 2 and d.exceed_prob == pytest.approx(p_exceed(20, 2, 25), abs=1e-6)


# -- the CLI names the brute-force mode ---------------------------------------------------------
@pytest.mark.parametrize("args, goal", [
    (("--budget-w", "30"), {"budget": 30.0, "risk": 0.05}),
    (("--budget-w", "30", "--risk", "mean"), {"budget": 30.0, "risk": None}),
    (("--budget-w", "25", "--tolerance-w", "2"), {"budget": 25.0, "risk": 0.05, "tol": 2.0}),
    (("--budget-w", "20", "--risk", "0.2"), {"budget": 20.0, "risk": 0.2}),
    (("--deadline-ms", "150"), {"deadline": 150.0, "risk": 0.05}),
    (("--deadline-ms", "150", "--risk", "mean"), {"deadline": 150.0, "risk": None}),
    (("--objective", "energy", "--budget-w", "20"), {"objective": "energy", "budget": 20.0, "risk": 0.05}),
    (("--objective", "energy", "--risk", "mean"), {"objective": "energy", "risk": None}),
])
def test_cli_pareto_names_the_brute_force_mode(cli, args, goal, tmp_path):
    import json

    from ptui.core.board.csvio import mode_cells, write_csv
    from ptui.core.prediction.predictor import bundled_reference, load_bundled
    model = load_bundled("orin-agx")
    modes = random.Random(4).sample(MODES, 1500)
    write_csv(tmp_path / "modes.csv", ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"), map(mode_cells, modes))
    tab = Table.from_prediction(modes, model.predict(modes))
    want = modes[brute(tab, **goal)]
    sel = ("--model", bundled_reference(), "--modes", tmp_path / "modes.csv")
    rc, out, err = cli("pareto", *sel, *args, "--json")
    assert rc == 0, err
    assert json.loads(out)["mode"] == want.as_dict()
    rc, out, err = cli("pareto", *sel, *args)
    assert rc == 0, err
    assert (f"apply with: ptui apply --cores {want.cores} --cpu-mhz {want.cpu_mhz:g} "
            f"--gpu-mhz {want.gpu_mhz:g} --mem-mhz {want.mem_mhz:g}") in out


def test_certain_mode_exactly_at_the_budget_qualifies_under_risk():
    """sd 0 means certain: a mode predicted exactly at the budget is within it, also when other
    rows carry a spread (and the risk rule is on)."""
    m = MODES[:2]
    tab = Table(m, np.array([50.0, 80.0]), np.array([30.0, 20.0]), np.zeros(2), np.array([0.0, 1.0]))
    d = choose(tab, budget_w=30, risk=0.05)
    assert d.index == 0 and d.exceed_prob == 0.0


def test_front_of_nothing_is_an_empty_index_array():
    f = front_indices(np.array([]), np.array([]))
    assert f.dtype.kind == "i" and f.size == 0


def test_a_wide_interval_above_a_thousand_is_written_without_an_exponent():
    """A prior alone's time for a slow workload: "90 % within 31.3-1.32e+03 ms" on the Apply
    screen and in pareto; now "31.3-1320"."""
    from ptui.core.decision.pareto import sig3, wide_interval
    words = wide_interval(202.9, 329.9, "ms", always=True)
    assert "e+" not in words and words.startswith("90 % within 31.3-13") and words.endswith(" ms")
    assert [sig3(v) for v in (0.0123, 31.26, 999.4, 1316.2, 123456.0)] == \
        ["0.0123", "31.3", "999", "1316", "123456"]
