"""The least-energy mode beside MAXN, the best preset and the pick (issue 25): checked against brute
force over the decision's table, per step (one batch size) and to target (several)."""
import numpy as np
import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.decision import energy
from ptui.core.decision.pareto import Table, best_preset, choose, presets_table

ORIN = get_device("orin-agx")


def _table(n=300, seed=0, with_presets=True):
    """Random modes (the device's presets among them) with random time and power; every fifth row
    does not fit in memory and is given the least energy, so a rule that forgot memory would pick it."""
    rng = np.random.default_rng(seed)
    presets = [p.mode for p in ORIN.presets] if with_presets else []
    others = [m for m in ORIN.full_space() if m not in set(presets)]
    modes = presets + [others[k] for k in rng.choice(len(others), n - len(presets), replace=False)]
    p = rng.uniform(10, 55, n)
    t = 3000 / p * rng.uniform(0.8, 1.6, n)
    fits = np.ones(n, bool)
    fits[len(presets)::5] = False
    t[~fits] *= 0.3
    z = np.zeros(n)
    return Table(modes, t, p, z, z, np.zeros(n, bool), None, fits)


def test_the_least_energy_mode_per_step_is_the_brute_force_minimum_among_modes_that_fit():
    tab = _table()
    e = tab.time_ms * tab.power_w / 1000.0
    brute = min((i for i in range(len(tab)) if tab.fits[i]), key=lambda i: e[i])
    assert e[int(np.argmin(e))] < e[brute]              # a mode that does not fit would be less
    d = choose(tab, budget_w=30.0, risk=None)
    presets = presets_table(ORIN, table=tab)
    bp = best_preset(presets, budget_w=30.0, risk=None)
    got = energy.per_step(tab, d, presets, bp, batch_size=16)
    assert got.unit == energy.PER_STEP and got.least.row == brute
    assert got.least.mode == tab.modes[brute] and got.least.energy == pytest.approx(e[brute])
    assert got.least.batch_size == 16 and got.least.source == "predicted"
    # the pick, MAXN and the best preset, each against the least
    assert got.pick.energy == pytest.approx(e[d.index])
    assert got.pick.energy >= got.least.energy or not tab.fits[d.index]
    k = next(i for i, m in enumerate(tab.modes) if m == ORIN.maxn)
    assert got.maxn.mode == ORIN.maxn and got.maxn.energy == pytest.approx(e[k])
    assert got.more_pct(got.maxn) == pytest.approx(100 * (e[k] / e[brute] - 1))
    assert got.best_preset.tag == bp[1].name and got.best_preset.energy == pytest.approx(bp[0].time_ms
                                                                                          * bp[0].power_w / 1000)
    doc = got.as_dict()
    assert doc["unit"] == "J per step" and doc["least"]["key"] == tab.modes[brute].key
    assert doc["maxn"]["preset"] == "MAXN" and doc["best_preset"]["preset"] == bp[1].name
    assert doc["maxn"]["more_than_least_pct"] == pytest.approx(got.more_pct(got.maxn), abs=0.01)
    assert doc["least"]["more_than_least_pct"] == 0.0


def test_the_energy_lines_say_predicted_and_how_much_more_maxn_and_the_preset_take():
    tab = _table(seed=3)
    d = choose(tab, budget_w=55.0, risk=None)
    presets = presets_table(ORIN, table=tab)
    got = energy.per_step(tab, d, presets, best_preset(presets, budget_w=55.0, risk=None))
    lines = got.lines(80)
    text = " ".join(lines)
    assert all(len(line) <= 80 for line in lines) and 2 <= len(lines) <= 4
    assert text.startswith(f"Least energy: {got.least.mode.describe()}") and "J/step (predicted" in text
    assert f"MAXN uses {got.more_pct(got.maxn):.0f}% more energy" in text
    assert f"the best preset ({got.best_preset.tag})" in text
    assert all(len(line) <= 32 for line in got.lines(32))      # the app's details panel


def test_a_pick_that_is_the_least_energy_mode_says_so_and_no_model_means_no_presets():
    tab = _table(with_presets=False)
    tab.fits[:] = True
    d = choose(tab, objective="energy", risk=None)
    got = energy.per_step(tab, d)
    assert got.pick.row == got.least.row and got.maxn is None and got.best_preset is None
    assert got.sentences()[1] == "The pick is the least-energy one."
    assert got.as_dict()["maxn"] is None
    nothing = Table(tab.modes[:2], tab.time_ms[:2], tab.power_w[:2], np.zeros(2), np.zeros(2),
                    fits=np.zeros(2, bool))
    assert energy.per_step(nothing, None) is None             # no mode fits: no least-energy mode


def test_the_least_energy_pair_to_target_is_the_brute_force_minimum_among_pairs_that_fit():
    from ptui.core.decision.batch import JointSpace, Memory, SamplesToTarget, decide_in
    rng = np.random.default_rng(1)
    sizes = (8, 16, 32, 64)
    modes = [p.mode for p in ORIN.presets] + [ORIN.full_space()[k] for k in rng.choice(5000, 40, replace=False)]
    n = len(modes)
    batch = np.repeat(sizes, n)
    allm = modes * len(sizes)
    p = rng.uniform(10, 55, len(allm))
    t = batch * 4.0 * 30 / p * rng.uniform(0.8, 1.6, len(allm))
    t[batch == 64] *= 0.2                                 # 64 would take the least energy, but does not fit
    memory = Memory(10.0, {8: 1.0, 64: 20.0}, "modelled")
    z = np.zeros(len(allm))
    tab = Table(allm, t, p, z, z, np.zeros(len(allm), bool), batch, np.asarray(memory.fits(batch), bool))
    assert not tab.fits[batch == 64].any() and tab.fits[batch <= 32].all()
    space = JointSpace(tab, memory, 16, sizes, 10000.0)
    rel = SamplesToTarget.throughput()
    r = decide_in(space, sizes, rel, budget_w=30.0, risk=None)
    presets = presets_table(ORIN, table=tab.subset(batch == 16))
    bp = best_preset(presets, budget_w=30.0, risk=None)
    got = energy.to_target(r, presets, bp)
    # throughput only, a fixed number of samples: energy to target is time per sample x power
    e = t / 1000.0 / batch * 10000.0 * p / 3600.0
    brute = min((i for i in range(len(allm)) if tab.fits[i]), key=lambda i: e[i])
    assert got.unit == energy.TO_TARGET and got.least.row == brute
    assert got.least.batch_size == batch[brute] and got.least.energy == pytest.approx(e[brute])
    assert got.pick.energy == pytest.approx(e[r.pick.index]) and got.pick.energy >= got.least.energy
    k = next(i for i in range(n) if allm[i] == ORIN.maxn)            # MAXN at the default batch, 16
    assert got.maxn.batch_size == 16 and got.maxn.energy == pytest.approx(e[n + k])
    assert got.best_preset.tag == bp[1].name
    assert got.as_dict()["unit"] == "Wh to target"
    text = " ".join(got.lines(80))
    assert f"at batch {batch[brute]}" in text and "Wh to target (predicted" in text


def test_where_no_preset_meets_the_goal_the_line_says_so():
    tab = _table(seed=5)
    tab.fits[:] = True
    d = choose(tab, objective="energy", risk=None)
    presets = presets_table(ORIN, table=tab)
    assert best_preset(presets, budget_w=1.0, risk=None) is None
    got = energy.per_step(tab, d, presets, None)
    assert got.maxn is not None and got.best_preset is None
    assert got.sentences()[1].endswith("(no preset meets the goal).")
    assert any("MAXN +" in line for line in got.panel_lines(40))


def test_a_budget_pick_slower_than_the_least_energy_mode_says_why_that_mode_was_not_picked():
    """`ptui pareto --budget-w 10` on an Orin Nano prior printed a least-energy mode faster than
    the pick (471 ms at 6.1 W against 547 ms at 5.5 W) and nothing said why 'fastest within 10 W'
    did not take it: its power was too likely to go over 10 W at the risk.  Now a line says so,
    in the CLI's sentences and the app's panel; other goals and a pick that is faster say nothing."""
    modes = list(ORIN.full_space()[:3])
    # the least-energy row's power is uncertain (its energy least at its upper bound too)
    t, p = np.array([300.0, 500.0, 900.0]), np.array([9.0, 8.0, 12.0])
    psd = np.array([0.15, 0.01, 0.01]) * p
    tab = Table(modes, t, p, np.zeros(3), psd)
    d = choose(tab, budget_w=10.0)                     # risk 0.05: row 0 may go over 10 W
    assert d.index == 1
    got = energy.per_step(tab, d, budget_w=10.0)
    assert got.least.row == 0 and got.least.time_ms < got.pick.time_ms
    text = " ".join(got.lines(80))
    assert "faster than the pick, but at the decision's risk its predicted power may go over 10 W" in text
    # the panel says the CLI's reason, wrapped to its width (one wording: it said 'may go over
    # 10 W' where the CLI said why)
    why = "faster than the pick, but at the decision's risk its predicted power may go over 10 W"
    assert why in " ".join(got.panel_lines(40)) and why in text
    assert all(len(line) <= 40 for line in got.panel_lines(40))
    # predicted over the budget on its mean
    over = energy.per_step(tab, choose(tab, budget_w=8.5), budget_w=8.5)
    assert "its predicted power is over 8.5 W" in " ".join(over.lines(80))
    assert "faster than the pick, but its predicted power is over 8.5 W" in " ".join(over.panel_lines(40))
    # a deadline's pick (least power) is not for speed: nothing to say; nor without a goal's budget
    dl = energy.per_step(tab, choose(tab, deadline_ms=600.0))
    assert "faster than the pick" not in " ".join(dl.lines(80) + dl.panel_lines(40))


def test_a_least_energy_mode_that_qualifies_is_not_said_to_go_over_the_budget():
    """Under tune's cautious ranking (each mode at its time's upper bound) a least-energy mode
    well within the budget (6 W of 10, its power certain) but with an uncertain time loses to a
    slower certain one; the line said "at the decision's risk its predicted power may go over
    10 W", which it may not (review).  It now says the ranking at the upper bound is why; at
    --risk mean (no risk on power) neither says power."""
    modes = list(ORIN.full_space()[:2])
    t, p = np.array([400.0, 500.0]), np.array([6.0, 8.0])
    # the least-energy row's time is uncertain (its energy least at its upper bound all the same)
    tsd = np.array([0.2, 0.0]) * t
    tab = Table(modes, t, p, tsd, np.array([0.01, 0.01]))
    for risk in (0.05, None):
        d = choose(tab, budget_w=10.0, risk=risk, cautious=True)
        assert d.index == 1
        got = energy.per_step(tab, d, budget_w=10.0, risk=risk)
        text = " ".join(got.lines(80))
        assert "power may go over" not in text and "power is over" not in text, text
        assert "not at its upper bound" in text, text
        assert "faster than the pick, but not at its upper bound" in " ".join(got.panel_lines(40))


def test_a_wrapped_line_keeps_least_energy_whole():
    """`ptui pareto --objective energy` printed '... the pick is the least-' and 'energy one.' on
    the next line: the wrap broke the word at its hyphen.  Words stay whole, at any width."""
    tab = _table(seed=3)
    tab.fits[:] = True
    d = choose(tab, objective="energy", risk=None)
    presets = presets_table(ORIN, table=tab)
    got = energy.per_step(tab, d, presets, best_preset(presets, objective="energy", risk=None))
    assert got.pick.row == got.least.row
    for width in range(30, 100):
        lines = got.lines(width) + got.panel_lines(width)
        assert not [ln for ln in lines if ln.endswith("least-")], (width, lines)
        assert "the least-energy" in " ".join(got.lines(width)), (width, got.lines(width))


def test_the_least_energy_pair_keeps_its_batch_size_with_its_number():
    """tune over batch sizes printed 'Least energy: 6 cores · ... · memory 3199 MHz at batch' and
    '32.' on a line of its own: the mode and its size were wider than 80 columns."""
    for mode in (ORIN.mode(6, 1958.4, 522.75, 3199), ORIN.mode(12, 2201.6, 1300.5, 3199),
                 ORIN.mode(1, 115.2, 114.75, 204)):
        for b in (8, 32, 512):
            least = energy.EnergyPoint("least energy", mode, b, 144.0, 27.5, 1.73, "predicted", 0)
            got = energy.Energy(energy.TO_TARGET, least)
            lines = got.lines(80)
            assert all(len(ln) <= 80 for ln in lines), lines
            assert any(f"at batch {b}" in ln for ln in lines), lines
            assert mode.describe() in " ".join(lines) and "1.73 Wh to target" in " ".join(lines), lines


def _measured_table(modes, t, p, tsd, psd, measured):
    return Table(list(modes), np.array(t, float), np.array(p, float), np.array(tsd, float),
                 np.array(psd, float), np.array(measured, bool))


def test_the_least_energy_mode_is_ranked_at_its_upper_bound_and_says_its_spread():
    """After `ptui tune --budget-w 25 --count 6` the line read 'Least energy: 9 cores · GPU 1301
    MHz ... 1.68 J/step (predicted: 84.8 ms, 19.8 W)', a power predicted 19.75 +- 5.77 W where the
    board took 38.4 W (3.2 J, more than the measured pick).  The least is now ranked by each
    energy's upper bound at the decision's risk: a measured mode of 2.27 J, not the uncertain one,
    whose median is named beside it with how much it may take; the least's spread is shown."""
    modes = list(ORIN.full_space()[:3])
    tab = _measured_table(modes, [84.8, 90.4, 98.9], [19.75, 25.14, 23.43], [4.0, 0.7, 0.7],
                          [5.77, 0.11, 0.11], [False, True, True])
    d = choose(tab, budget_w=25.0, cautious=True)
    assert d.index == 2
    got = energy.per_step(tab, d, budget_w=25.0)
    assert got.least.row == 1 and got.least.source == "measured"
    assert got.median_least is not None and got.median_least.row == 0
    text = " ".join(got.lines(80))
    assert "Least energy: " + modes[1].describe() in text
    assert "2.27 J/step ± 0.02 (measured: 90.4 ms, 25.1 W)" in text, text
    assert f"Ranked by the 95 % upper bound: {modes[0].describe()} is predicted at 1.67 J/step but may take" in text
    assert "may take 2.7 J/step." in text                  # its unit said
    # the app's narrow panel says the spread where it is wide (5 % or more)
    assert "2.27 J/step;" in " ".join(got.panel_lines(40))
    wide = energy.per_step(_measured_table(modes[:1], [84.8], [19.75], [4.0], [5.77], [False]), None)
    assert "1.67 J/step ± 0.5" in " ".join(wide.panel_lines(40)), wide.panel_lines(40)
    doc = got.as_dict()
    assert doc["ranked_by"] == "energy_upper" and doc["risk"] == 0.05
    assert doc["least"]["energy_upper"] <= doc["pick"]["energy_upper"]
    assert doc["least"]["energy_std"] == pytest.approx(90.4 * 25.14 / 1000 * np.hypot(0.7 / 90.4, 0.11 / 25.14), rel=0.02)
    # with no spread, the least is the least median, as before
    flat = _measured_table(modes, tab.time_ms, tab.power_w, [0, 0, 0], [0, 0, 0], [False] * 3)
    assert energy.per_step(flat, d).least.row == 0


def _profiled_and_presets(preset_energy_scale: float):
    """50 measured modes (no preset among them: `pareto --modes profile.csv`) and the device's
    presets predicted apart, MODE_30W's energy `preset_energy_scale` x the least row's."""
    rng = np.random.default_rng(5)
    pre = {p.mode for p in ORIN.presets}
    others = [m for m in ORIN.full_space() if m not in pre]
    modes = [others[k] for k in rng.choice(len(others), 50, replace=False)]
    p = rng.uniform(15, 29, 50)
    t = 2300 / p * rng.uniform(1.0, 1.5, 50)
    tab = _measured_table(modes, t, p, 0.005 * t, 0.005 * p, [True] * 50)
    least_e = float(np.min(t * p / 1000))
    ps = list(ORIN.presets)
    pp = np.array([{"MAXN": 49.8, "MODE_15W": 14.0, "MODE_30W": 29.4, "MODE_50W": 45.0}[q.name] for q in ps])
    pt = np.array([59.5, 400.0, 0.0, 70.0])
    k30 = next(j for j, q in enumerate(ps) if q.name == "MODE_30W")
    pt[k30] = preset_energy_scale * least_e * 1000 / pp[k30]
    ptab = Table([q.mode for q in ps], pt, pp, 0.01 * pt, 0.01 * pp)
    presets = (ptab, ps)
    return tab, presets, best_preset(presets, budget_w=30.0, risk=None)


def test_a_measured_least_energy_mode_is_labelled_measured_beside_predicted_presets():
    """`pareto --modes profile.csv` with a model: the least-energy mode (a measured row) read
    '(predicted: 131 ms, 27.9 W)', the label of the figures compared as a whole, while the JSON
    said least.source: measured.  It says its own source now."""
    tab, presets, bp = _profiled_and_presets(1.5)
    d = choose(tab, budget_w=30.0, risk=None)
    got = energy.per_step(tab, d, presets, bp, batch_size=16, budget_w=30.0, risk=None)
    assert got.least.source == "measured" and got.source == "predicted"
    text = " ".join(got.lines(80))
    assert "J/step ± " in text or "J/step (" in text
    assert "(measured: " in text and "(predicted: " not in text, text
    assert got.as_dict()["least"]["source"] == "measured"


def test_a_preset_outside_the_profiled_modes_that_takes_less_energy_is_the_least():
    """`pareto --modes profile.csv`: 'the best preset (MODE_30W) 4% less', a preset taking less
    energy than the 'least-energy' mode, which was least among the profiled modes only.  The least
    is now least over what it is compared with: MODE_30W here, said as a preset; nothing compared
    takes less."""
    tab, presets, bp = _profiled_and_presets(0.96)
    assert bp[1].name == "MODE_30W"
    d = choose(tab, budget_w=30.0, risk=None)
    got = energy.per_step(tab, d, presets, bp, batch_size=16, budget_w=30.0, risk=None)
    assert got.least.row is None and got.least.tag == "MODE_30W" and got.least.source == "predicted"
    for p in (got.pick, got.maxn):
        assert got.more_pct(p) > 0
    text = " ".join(got.lines(80))
    assert text.startswith("Least energy: the MODE_30W preset, " + bp[0].mode.describe()), text
    assert " less" not in text and "the best preset (MODE_30W)" not in text, text
    assert "it is not among the modes decided over" in text or got.least.time_ms >= got.pick.time_ms
    assert got.as_dict()["least_preset"] == "MODE_30W"
    assert "MODE_30W" in " ".join(got.panel_lines(40)) and all(len(x) <= 40 for x in got.panel_lines(40))
    # where it takes more, the least is a profiled mode and the preset is said beside it
    more = energy.per_step(tab, d, *_profiled_and_presets(1.2)[1:], batch_size=16)
    assert more.least.row is not None and more.more_pct(more.best_preset) == pytest.approx(20, abs=1)


@pytest.mark.parametrize("width", [80, 36, 40, 44])
def test_a_number_is_never_wrapped_away_from_its_word(width):
    """The least-energy sentence broke 'at batch' / '16' across two lines: a number stays with the
    word before it and its unit after it, in the CLI's lines and the app's panel."""
    from ptui.core.decision.energy import TO_TARGET, Energy, EnergyPoint
    seen = 0
    for m in ORIN.full_space()[::97]:
        pt = EnergyPoint("least energy", m, 16, 123.4, 25.6, 0.987, "predicted", 0)
        en = Energy(TO_TARGET, pt, maxn=EnergyPoint("MAXN", ORIN.maxn, 16, 60.0, 49.8, 1.3, "predicted"))
        lines = en.lines(width) if width == 80 else en.panel_lines(width)
        said = " ".join(lines)
        assert "batch 16" in said or "bs 16" in said
        assert not any(x.endswith((" batch", " bs", " at")) for x in lines), lines
        assert all(any(w in x for x in lines) for w in ("123 ms", "25.6 W") if w in said)
        seen += any(x.endswith("16") or "16," in x or "16." in x for x in lines)
    assert seen


def test_the_panel_says_as_much_not_minus_zero_for_a_preset_within_half_a_per_cent():
    """The app's details read 'MAXN +35%, MODE_30W -0%' where the CLI said the preset uses 'as
    much' (a user trial): a figure within half a per cent of the least is 'as much' in both."""
    from dataclasses import replace
    tab = _table(seed=3)
    d = choose(tab, budget_w=55.0, risk=None)
    presets = presets_table(ORIN, table=tab)
    got = energy.per_step(tab, d, presets, best_preset(presets, budget_w=55.0, risk=None))
    bp = got.best_preset
    assert bp is not None and bp.tag != "MAXN"
    near = replace(got, best_preset=replace(bp, energy=got.least.energy * 0.997))
    panel = " ".join(near.panel_lines(80))
    assert f"{bp.tag} as much" in panel and "-0%" not in panel, panel
    assert "as much" in near.sentences()[1] and bp.tag in near.sentences()[1]
    maxn = got.more_pct(got.maxn)
    assert f"MAXN {maxn:+.0f}%" in panel                  # a real difference keeps its sign


def test_a_least_energy_goal_says_which_rule_its_pick_and_the_least_energy_line_follow():
    """A user's trial: `ptui pareto --objective energy` named one mode as the pick ('mode: ...',
    its least median energy) and another under 'Least energy:' (ranked by the 95 % upper bound):
    two least-energy answers.  The line says the rule it ranks by, the pick's sentence says the
    goal ranks by the median and what the pick may take; --json adds pick_ranked_by 'energy'
    (tune, ranking cautiously, and other goals: null)."""
    from ptui.core.usecases.contract import decision_body, decision_energy
    modes = list(ORIN.full_space()[:3])
    tab = _measured_table(modes, [84.8, 90.4, 98.9], [19.75, 25.14, 23.43], [4.0, 0.7, 0.7],
                          [5.77, 0.11, 0.11], [False, True, True])
    d = choose(tab, objective="energy")               # pareto's ranking: the least median
    assert d.index == 0
    goal = {"objective": "energy"}
    got = decision_energy(tab, d, None, goal)
    assert got.least.row == 1
    text = " ".join(got.lines(80))
    assert "Least energy at the 95 % upper bound: " + modes[1].describe() in text, text
    assert "The pick has the least median energy, 1.67 J/step, which the goal ranks by" in text, text
    assert "Ranked by the" not in text, text
    assert got.as_dict()["pick_ranked_by"] == "energy"
    assert decision_body(tab, d, None, goal, timed="")["energy"]["pick_ranked_by"] == "energy"
    # tune's cautious ranking, and a budget goal: the line as before, no rule for the pick
    for g, cautious in ((goal, True), ({"budget_w": 25.0}, False)):
        e = decision_energy(tab, d, None, g, cautious=cautious)
        assert "Least energy: " in " ".join(e.lines(80)) and e.as_dict()["pick_ranked_by"] is None
