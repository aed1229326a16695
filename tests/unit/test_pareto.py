import numpy as np
import pytest

from ptui.core.devices import get_device
from ptui.core.pareto import InfeasibleError, Table, choose, front_indices

ORIN = get_device("orin-agx")


def table(n=400, seed=0, sd=0.0):
    rng = np.random.default_rng(seed)
    modes = rng.choice(ORIN.full_space(), n, replace=False).tolist()
    p = rng.uniform(10, 55, n)
    t = 3000 / p * rng.uniform(0.8, 1.6, n)
    return Table(modes, t, p, t * sd, p * sd)


def test_front_matches_brute_force():
    tab = table()
    f = set(front_indices(tab.time_ms, tab.power_w).tolist())
    brute = {i for i in range(len(tab)) if not any(
        (tab.time_ms[j] <= tab.time_ms[i] and tab.power_w[j] <= tab.power_w[i]
         and (tab.time_ms[j] < tab.time_ms[i] or tab.power_w[j] < tab.power_w[i])) for j in range(len(tab)))}
    assert f == brute
    idx = front_indices(tab.time_ms, tab.power_w)
    assert np.all(np.diff(tab.power_w[idx]) >= 0) and np.all(np.diff(tab.time_ms[idx]) < 0)


def test_budget_picks_fastest_within():
    tab = table()
    d = choose(tab, budget_w=30, risk=None)
    ok = np.flatnonzero(tab.power_w <= 30)
    want = ok[np.argmin(tab.time_ms[ok])]             # no ties in this table
    assert d.index == want and d.mode == tab.modes[want]


def test_risk_aware_is_more_conservative():
    tab = table(sd=0.05)
    plain = choose(tab, budget_w=30, risk=None)
    safe = choose(tab, budget_w=30, risk=0.05)
    assert safe.power_w < plain.power_w and safe.time_ms >= plain.time_ms
    assert safe.exceed_prob <= 0.05
    # a mean 1.645 sd below the budget is the 5 % line for a normal; log-normal is close
    assert safe.power_w + 1.5 * safe.power_w_std <= 30 + 1e-9


def test_deadline_and_energy():
    tab = table()
    d = choose(tab, deadline_ms=100, risk=None)
    ok = np.flatnonzero(tab.time_ms <= 100)
    assert d.index == ok[np.argmin(tab.power_w[ok])]
    energy = tab.time_ms * tab.power_w
    e = choose(tab, objective="energy", risk=None)
    assert e.index == np.argmin(energy)
    eb = choose(tab, objective="energy", budget_w=20, risk=None)
    ok = np.flatnonzero(tab.power_w <= 20)
    assert eb.index == ok[np.argmin(energy[ok])] and eb.index != np.argmin(energy)


def test_infeasible_names_closest():
    tab = table()
    with pytest.raises(InfeasibleError, match=r"no mode stays within 5 W.*lowest-power mode is"):
        choose(tab, budget_w=5, risk=None)
    with pytest.raises(InfeasibleError, match="the fastest is"):
        choose(tab, deadline_ms=0.5, risk=None)


def test_tolerance_relaxes_the_risk_only_above_the_budget():
    tab = table(sd=0.05)
    strict = choose(tab, budget_w=30, risk=0.05)
    tol = choose(tab, budget_w=30, risk=0.05, tolerance_w=1.0)
    assert tol.time_ms <= strict.time_ms              # (test_decisions has a table where it must change)
    assert tol.power_w <= 30                          # the mean still stays within the budget
    assert choose(tab, budget_w=30, risk=None).time_ms <= tol.time_ms
    with pytest.raises(ValueError, match="must not be negative"):
        choose(tab, budget_w=30, risk=0.05, tolerance_w=-1)
