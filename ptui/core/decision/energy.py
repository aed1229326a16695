"""How much energy a decision's candidates take (issue 25): the least-energy candidate beside MAXN,
the best NVIDIA preset for the goal and the pick, and how much more each takes than the least.

Energy is counted in the unit the decision counts it in: per step (time per step x power, in J)
for a decision of one batch size, to the target (Wh) for a decision per target over batch sizes.
The least-energy candidate is the goal-free minimum over every candidate that fits in memory (a
row that does not fit is never eligible) and the presets it is compared with (MAXN and the best
preset, predicted apart, as the decision's baselines are: a preset outside the candidates read '4%
less' than the least-energy mode), ranked by each energy's upper bound at the decision's risk, as
tune's cautious ranking ranks time: a mode predicted 1.68 J/step with a power of 19.8 +- 5.8 W was
called the least-energy one where the board took 3.2 J, 39 % more than the measured pick.  Every
figure is the model's prediction (a profiled mode's measurement where the table holds one): the
point's `source` says which.
"""
from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass

import numpy as np

from ..catalogue.modes import Mode
from .pareto import DEFAULT_RISK, Decision, Table, exceeds_risk, log_sd, sig3, upper_z

PER_STEP = "J per step"
TO_TARGET = "Wh to target"
SHORT = {PER_STEP: "J/step", TO_TARGET: "Wh to target"}
NOT_PICKED = "faster than the pick, but"
"""Said before Energy._not_picked_reason, in the CLI's sentence and the app's panel alike."""


def _signed_pct(x: float | None) -> str:
    """How much more energy, signed, for the narrow panel ('+44%'); under half a per cent either
    way the CLI's 'as much' (the panel said 'MODE_30W -0%', a user trial)."""
    return "as much" if x is None or abs(x) < 0.5 else f"{x:+.0f}%"


@dataclass(frozen=True)
class EnergyPoint:
    """One candidate's energy: its mode (and batch size), time per step, power and energy in the
    report's unit; `row` its row of the decision's table (None: a preset predicted apart)."""
    tag: str                              # 'least energy', 'pick', 'MAXN' or a preset's name
    mode: Mode
    batch_size: int | None
    time_ms: float
    power_w: float
    energy: float
    source: str                           # measured | predicted
    row: int | None = None
    spread: float = 0.0                   # the energy's log-normal sd (time's and power's together)
    upper: float = math.nan               # its upper bound at the decision's risk (NaN: energy)

    @property
    def bound(self) -> float:
        """What the least-energy rule ranks by: the upper bound (the energy where none is set)."""
        return self.energy if math.isnan(self.upper) else self.upper

    @property
    def energy_std(self) -> float:
        """The energy's sd (log-normal with median `energy` and log-sd `spread`)."""
        s = self.spread
        return self.energy * math.exp(s * s / 2) * math.sqrt(math.expm1(s * s)) if s > 0 else 0.0


@dataclass(frozen=True)
class Energy:
    """The least-energy candidate of a decision and, against it, the pick, MAXN and the best preset
    for the goal (None where there is none: a source without a model has no presets)."""
    unit: str                             # PER_STEP or TO_TARGET
    least: EnergyPoint
    pick: EnergyPoint | None = None
    maxn: EnergyPoint | None = None
    best_preset: EnergyPoint | None = None
    budget_w: float | None = None         # the goal's power budget (None: another goal)
    least_risky: bool = False             # the least-energy row may go over it at the decision's risk
    risk: float | None = DEFAULT_RISK     # the level of the upper bounds ranked by (None: default)
    median_least: EnergyPoint | None = None   # the candidate of least median energy, where it is
    #                                           not the least (ranked out for its spread)
    pick_by_median: bool = False          # the goal is least energy and the decision ranked it by
    #                                       the median (`ptui pareto`; tune ranks by upper bounds)

    def more_pct(self, p: EnergyPoint | None) -> float | None:
        """How much more energy `p` takes than the least-energy candidate, in per cent (negative:
        less, for a preset outside the candidates)."""
        if p is None or not self.least.energy > 0 or not math.isfinite(p.energy):
            return None
        return 100.0 * (p.energy / self.least.energy - 1.0)

    def more_upper_pct(self, p: EnergyPoint | None) -> float | None:
        """How much more energy `p` may take than the least-energy candidate at their upper bounds
        (what the least is ranked by: never negative), in per cent."""
        if p is None or not self.least.bound > 0 or not math.isfinite(p.bound):
            return None
        return 100.0 * (p.bound / self.least.bound - 1.0)

    @property
    def level(self) -> str:
        """The upper bound's level in words: '95 %'."""
        return f"{1.0 - (DEFAULT_RISK if self.risk is None else self.risk):.0%}".replace("%", " %")

    @property
    def source(self) -> str:
        """'measured' where every figure compared is a measurement, else 'predicted'."""
        pts = [p for p in (self.least, self.pick, self.maxn, self.best_preset) if p is not None]
        return "measured" if all(p.source == "measured" for p in pts) else "predicted"

    @property
    def _other_preset(self) -> EnergyPoint | None:
        """The best preset for the goal where it is not MAXN (MAXN is said once), else None."""
        bp = self.best_preset
        return None if bp is None or (self.maxn is not None and bp.tag == self.maxn.tag) else bp

    def _amount(self, p: EnergyPoint) -> str:
        return f"{sig3(p.energy)} {SHORT[self.unit]}"

    def _spread(self, p: EnergyPoint, share: float = 0.005) -> str:
        """' ± 0.52' where the energy's sd is `share` of it or more (0.5 %: visible), else ''."""
        sd, e = p.energy_std, sig3(p.energy)
        if not (p.energy > 0 and sd >= share * p.energy):
            return ""
        # to the energy's own decimals ('2.27 J/step ± 0.02', not '± 0.0187')
        places = len(e.split(".")[1]) if "." in e else 0
        return f" ± {sd:.{places}f}" if round(sd, places) > 0 else f" ± {sig3(sd)}"

    def _vs(self, p: EnergyPoint | None) -> tuple[str, str]:
        """(how much, which way) of `p` against the least: ('44%', 'more'), ('', 'as much');
        a point whose median is less but whose upper bound is not (the least is ranked by it):
        ('', 'as much within the spread')."""
        x = self.more_pct(p)
        if p is None or x is None or abs(x) < 0.5:
            return "", "as much"
        if x < 0 and self._spread_out(p):
            return "", "as much within the spread"
        return f"{abs(x):.0f}%", "more" if x > 0 else "less"

    def _spread_out(self, p: EnergyPoint) -> bool:
        """`p`'s median energy is less than the least's, but not its upper bound, which the least
        is ranked by (a point that is simply less, such as a pick that does not fit in memory,
        is not)."""
        return (self.more_pct(p) or 0.0) <= -0.5 and p.bound >= self.least.bound
    def sentences(self) -> tuple[str, str]:
        """The two plain sentences the CLI and the app say: where the least energy is, and how much
        more MAXN, the best preset and the pick take ('' for the second where there is nothing to
        compare)."""
        lst = self.least
        at = f" at batch {lst.batch_size}" if self.unit == TO_TARGET and lst.batch_size else ""
        preset = f"the {lst.tag} preset, " if lst.row is None else ""
        # a least-energy goal's pick ranked by its median, not this mode: the rule said here too
        rule = f" at the {self.level} upper bound" if self._ranked_out() is self.pick and \
            self.pick is not None and self.pick_by_median else ""
        where = f"Least energy{rule}: {preset}{lst.mode.describe()}{at}"
        # its own source (it said 'predicted' of a measured mode, the figures compared' source)
        amount = (f"{self._amount(lst)}{self._spread(lst)} ({lst.source}: {sig3(lst.time_ms)} ms, "
                  f"{lst.power_w:.1f} W).")
        first = f"{where}, {amount}"         # one line where it fits, else the figures on their own
        if len(first) > 80 and len(where) < 80:
            first = f"{where}.\n{amount[0].upper()}{amount[1:]}"
        elif len(first) > 80 and at:
            # the batch size with the figures: its number wrapped to a line of its own ('32.')
            first = f"Least energy: {lst.mode.describe()},\n{at.strip()}: {amount}"
        parts: list[tuple[str, EnergyPoint]] = []          # (who, its point)
        other = self._other_preset
        if self.maxn is not None and self.maxn is not lst:
            maxn_is_best = self.best_preset is not None and other is None
            parts.append(("MAXN (the best preset for the goal)" if maxn_is_best else "MAXN", self.maxn))
        if other is not None and other is not lst:
            parts.append((f"the best preset ({other.tag})", other))
        pick_is_least = self.pick is not None and self.pick.row is not None and self.pick.row == lst.row
        if self.pick is not None and not pick_is_least:
            parts.append(("the pick", self.pick))
        said, way0 = [], ""
        for k, (who, p) in enumerate(parts):
            n, way = self._vs(p)
            if k == 0:
                way0 = way
                said.append(f"{who} uses {way} energy" if way.startswith("as much")
                            else f"{who} uses {n} {way} energy")
            else:           # '55%' after '60% more energy'; the way said where it differs
                said.append(f"{who} " + (way if way.startswith("as much") else
                                         n if way == way0 else f"{n} {way}"))
        if pick_is_least:
            said.append("the pick is the least-energy one")
        if not said:
            return first, ""
        second = ", ".join(said)
        if self.maxn is not None and self.best_preset is None:      # presets, none meets the goal
            second += " (no preset meets the goal)"
        second = second[0].upper() + second[1:] + "."
        ranked = self._ranked_sentence()
        if ranked:                              # a less median passed over for its spread
            second += f"\n{ranked}"
        why = self._why_not_least()
        return first, f"{second}\n{why}" if why else second

    def _least_not_picked(self) -> str | None:
        """Why a budget's pick is not the least-energy mode where that mode is the faster one:
        'over' (it is predicted over the budget), 'risk' (too likely to go over it at the
        decision's risk) or 'upper' (within the budget, but slower at its time's upper bound,
        which tune's cautious ranking ranks by); None where that is not so.  A user read 'fastest
        within 10 W' beside a faster least-energy mode predicted at 6.1 W, and nothing said why
        it was not picked."""
        lst, pk, b = self.least, self.pick, self.budget_w
        if b is None or pk is None or pk.row == lst.row or not lst.time_ms < pk.time_ms * 0.995:
            return None
        if lst.row is None:                 # a preset outside the modes decided over
            return "outside" if lst.power_w <= b else "over"
        return "over" if lst.power_w > b else "risk" if self.least_risky else "upper"

    def _not_picked_reason(self) -> str:
        """Why the least-energy mode, faster than a budget's pick, is not the pick, in the words
        both the CLI's sentence and the app's panel say after 'faster than the pick, but'; ""
        where there is nothing to say (_least_not_picked)."""
        why, b, src = self._least_not_picked(), self.budget_w, self.least.source
        if why is None:
            return ""
        return {"over": f"its {src} power is over {b:g} W",
                "risk": f"at the decision's risk its {src} power may go over {b:g} W",
                "upper": f"not at its upper bound, which the decision ranks by (its {src} time is "
                         "uncertain)",
                "outside": "it is not among the modes decided over"}[why]

    def _why_not_least(self) -> str:
        why = self._not_picked_reason()
        return f"The least-energy mode is {NOT_PICKED} {why}." if why else ""

    def _ranked_out(self) -> EnergyPoint | None:
        """A point compared whose median energy is less than the least-energy one's, passed over
        for its spread (its upper bound is more); None where there is none."""
        pts = [p for p in (self.pick, self.maxn, self.best_preset, self.median_least)
               if p is not None and p is not self.least]
        x = [p for p in pts if self._spread_out(p)]
        return min(x, key=lambda p: p.energy) if x else None

    def _ranked_sentence(self) -> str:
        """Which less median the least-energy rule passed over for its spread, and how much it may
        take ('' where none was): the CLI's sentence and the app's panel alike."""
        out = self._ranked_out()
        if out is None:
            return ""
        who = "the pick" if out is self.pick else out.tag if out.row is None else out.mode.describe()
        if out is self.pick and self.pick_by_median:
            # the goal's pick and the 'Least energy' line named two least-energy modes (a user's
            # trial): which rule each follows, so the two read as one answer
            return (f"The pick has the least median energy, {self._amount(out)}, which the goal "
                    f"ranks by; it may take {sig3(out.bound)} {SHORT[self.unit]} at its {self.level} "
                    f"upper bound, which the least-energy mode above is ranked by (at most "
                    f"{sig3(self.least.bound)} {SHORT[self.unit]}).")
        return (f"Ranked by the {self.level} upper bound: {who} is {out.source} at "
                f"{self._amount(out)} but may take {sig3(out.bound)} {SHORT[self.unit]}.")

    def panel_ranked(self, width: int) -> list[str]:
        """The app's panel's last lines: the sentence of _ranked_sentence wrapped to `width` (the
        panel said only the least, so a less median read as a mistake)."""
        return wrap(self._ranked_sentence(), width)

    def lines(self, width: int = 80) -> list[str]:
        """The sentences wrapped to `width` columns (a number kept with its word and unit)."""
        return [line for s in self.sentences() if s for part in s.split("\n")
                for line in wrap(part, width)]

    def panel_lines(self, width: int) -> list[str]:
        """The same figures in the app's narrow details panel: the least-energy mode (and batch
        size), then its energy and how much more MAXN, the best preset and the pick take, signed
        per cent ('+44%': 44 % more), each line at most `width` columns (the pick left out where it
        does not fit; the panel says predicted or measured beside its figures)."""
        lst = self.least
        # the mode in the words the CLI and the README use (it said '6c/2112/522.75/3199'): on one
        # line where it fits, else its knobs over two, as the panel's selected mode is
        bs = f" bs {lst.batch_size}" if self.unit == TO_TARGET and lst.batch_size else ""
        w = lst.mode.words()
        pre = f"{lst.tag} " if lst.row is None else ""         # a preset
        first = f"least energy: {pre}{lst.mode.describe()}{bs}"
        if len(first) > width:
            first = f"least energy: {pre}{w[0]} · {w[1]}\n  {w[2]} · {w[3]}{bs}"
        bp = self._other_preset
        parts = [f"{tag} {_signed_pct(x)}" for tag, p, x in
                 (("MAXN", self.maxn, self.more_pct(self.maxn)),
                  (bp.tag if bp else "", bp, self.more_pct(bp)))
                 if x is not None and p is not lst]
        # to target: the panel says 'to target ... Wh' just above
        amount = (self._amount(lst) if self.unit == PER_STEP else f"{sig3(lst.energy)} Wh") \
            + self._spread(lst, 0.05)     # the narrow panel: where the spread is wide
        second = amount + ("; " + ", ".join(parts) if parts else "")
        if self.pick is not None and not (self.pick.row is not None and self.pick.row == lst.row):
            x = self.more_pct(self.pick)
            with_pick = f"{second}{', ' if parts else '; '}pick {_signed_pct(x)}"
            second = with_pick if len(with_pick) <= width else second
        elif self.pick is not None:
            second += f"{', ' if parts else '; '}the pick"
        why = self._not_picked_reason()
        third = f"{NOT_PICKED} {why}" if why else ""
        return [line for s in (*first.split("\n"), second, third) if s
                for line in wrap(s, width)]

    def as_dict(self) -> dict:
        """The `energy` object of a decision's --json document."""
        def pt(p: EnergyPoint | None, **extra) -> dict | None:
            if p is None:
                return None
            x = self.more_pct(p)
            u = self.more_upper_pct(p)
            return {"mode": p.mode.as_dict(), "key": p.mode.key, "batch_size": p.batch_size,
                    "source": p.source, "time_ms": round(p.time_ms, 4), "power_w": round(p.power_w, 4),
                    "energy": round(p.energy, 6), "more_than_least_pct": None if x is None else round(x, 2),
                    "energy_std": round(p.energy_std, 6), "energy_upper": round(p.bound, 6),
                    "more_than_least_upper_pct": None if u is None else round(u, 2), **extra}
        # the least is ranked by energy_upper (the upper bound at `risk`); least_preset: the preset
        # it is, where it is one (null: a candidate)
        return {"unit": self.unit, "source": self.source,
                "ranked_by": "energy_upper", "risk": DEFAULT_RISK if self.risk is None else self.risk,
                # what the pick was ranked by where the goal is least energy: its median energy
                # (`pareto`), so it may differ from `least` (null: another goal, or tune's cautious
                # ranking by upper bounds)
                "pick_ranked_by": "energy" if self.pick_by_median else None,
                "least_preset": self.least.tag if self.least.row is None else None,
                "least": pt(self.least), "pick": pt(self.pick),
                "maxn": pt(self.maxn, preset="MAXN"),
                "best_preset": pt(self.best_preset, preset=None if self.best_preset is None
                                  else self.best_preset.tag)}


_NBSP = "\u00a0"
_BEFORE = re.compile(r"(?<=\S) (?=[±+-]?\d)")                    # 'batch 16', '± 0.52'
_AFTER = re.compile(r"(?<=\d) (?=[A-Za-z%/]{1,6}(?![A-Za-z]))")    # '16 ms', '1.50 GHz'
_AT = re.compile(r"(?<=\bat) (?=batch\b)")                         # 'at batch 16' whole


def wrap(text: str, width: int) -> list[str]:
    """textwrap.wrap, words whole ('least-' / 'energy' broke at its hyphen) and a number kept on one
    line with the word before it and its unit after it (the least-energy sentence broke 'at batch' /
    '16')."""
    glued = _AT.sub(_NBSP, _AFTER.sub(_NBSP, _BEFORE.sub(_NBSP, text)))
    return [line.replace(_NBSP, " ") for line in textwrap.wrap(glued, width, break_on_hyphens=False)]


def _least_row(energy: np.ndarray, eligible: np.ndarray) -> int | None:
    ok = eligible & np.isfinite(energy) & (energy > 0)
    if not ok.any():
        return None
    idx = np.flatnonzero(ok)
    return int(idx[np.argmin(energy[idx])])


def _spreads(t: Table) -> np.ndarray:
    """Each row's energy log-sd: time's and power's together (energy = time x power)."""
    return np.hypot(log_sd(t.time_ms, t.time_ms_std), log_sd(t.power_w, t.power_w_std))


def _upper(energy, spread, risk: float | None):
    """The energy's upper bound at `risk` (at the default level for --risk mean, as tune's
    cautious ranking bounds time): median x exp(z x log-sd)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(energy, float) * np.exp(upper_z(risk) * np.asarray(spread, float))


def _maxn_row(presets) -> int | None:
    if presets is None:
        return None
    _, ps = presets
    return next((j for j, p in enumerate(ps) if p.name == "MAXN"), None)


def _least(cands: EnergyPoint | None, others, median: EnergyPoint | None) -> tuple:
    """(least, median_least): the least-energy point at its upper bound among the candidate `cands`
    and the presets compared with it (`others`: a preset only where its bound is strictly less),
    and the candidate of least median `median` where it is not that point."""
    least = cands
    for p in others:
        if p is not None and least is not None and 0 < p.bound < least.bound * (1 - 1e-9):
            least = p
    keep = median if median is not None and least is not None and median.row != least.row else None
    return least, keep


def per_step(table: Table, pick: Decision | None, presets=None,
             best: tuple | None = None, batch_size: int | None = None,
             budget_w: float | None = None, risk: float | None = DEFAULT_RISK,
             tolerance_w: float = 0.0, pick_by_median: bool = False) -> Energy | None:
    """The energy per step (J: time per step x power) of a decision of one batch size: the
    least-energy row of `table` among those that fit in memory, or MAXN or the best preset where
    one is less (each at its upper bound at `risk`), the pick (a row of it), MAXN (from `presets`,
    pareto.presets_table's (Table, presets)) and the best preset (`best`, pareto.best_preset's
    (Decision, Preset)); budget_w: the goal's budget, if it is one (risk and tolerance_w as the
    decision's, to say why the least-energy row was not picked); pick_by_median: the goal is least
    energy, the pick ranked by its median energy.  None when no row is eligible."""
    e = table.time_ms * table.power_w / 1000.0
    sp = _spreads(table)
    up = _upper(e, sp, risk)
    i = _least_row(up, table.fits)
    if i is None:
        return None

    def row(tag: str, t: Table, k: int, r: int | None) -> EnergyPoint:
        b = t.batch_of(k)
        en = float(t.time_ms[k] * t.power_w[k] / 1000.0)
        s = float(_spreads(t.subset([k]))[0])
        return EnergyPoint(tag, t.modes[k], batch_size if b is None else b, float(t.time_ms[k]),
                           float(t.power_w[k]), en, t.source(k), r, s, float(_upper(en, s, risk)))
    maxn = bp = None
    k = _maxn_row(presets)
    if k is not None:
        maxn = row("MAXN", presets[0], k, None)
    if best is not None and presets is not None:
        d, pre = best
        bp = row(pre.name, presets[0], d.index, None)
    m = _least_row(e, table.fits)
    least, med = _least(row("least energy", table, i, i), (maxn, bp),
                        None if m is None else row("least median", table, m, m))
    risky = budget_w is not None and least.row is not None and \
        exceeds_risk(table, least.row, budget_w, None, risk, tolerance_w)
    return Energy(PER_STEP, least,
                  None if pick is None else row("pick", table, pick.index, pick.index), maxn, bp,
                  budget_w, risky, risk, med, pick_by_median)


def to_target(r, presets=None, best: tuple | None = None,
              risk: float | None = DEFAULT_RISK) -> Energy | None:
    """The energy to target (Wh) of a decision over batch sizes (batch.BatchDecision `r`): the
    least-energy (mode, batch size) among its candidate pairs (those of the sizes asked for that
    fit in memory: r.targets), or MAXN or the best preset where one is less (each at its upper
    bound at `risk`), the pick, and MAXN and the best preset at the default batch size (as the
    --json baselines count them: r.target_at).  None when no pair is eligible."""
    tg, tab = r.targets, r.space.table
    if not len(tg.rows):
        return None
    ew = np.asarray(tg.energy_wh, float)
    sp = _spreads(tab)
    fits = tab.fits[tg.rows]
    k = _least_row(_upper(ew, sp[tg.rows], risk), fits)
    if k is None:
        return None

    def pair(tag: str, k: int) -> EnergyPoint:
        i = int(tg.rows[k])
        return EnergyPoint(tag, tab.modes[i], int(tg.batch[k]), float(tab.time_ms[i]),
                           float(tab.power_w[i]), float(ew[k]), tab.source(i), i, float(sp[i]),
                           float(_upper(ew[k], sp[i], risk)))
    p = r.pick
    pe = float(p.to_target()[1])
    pick = EnergyPoint("pick", p.mode, p.batch_size, p.time_ms, p.power_w, pe,
                       p.source or tab.source(p.index), p.index, float(sp[p.index]),
                       float(_upper(pe, sp[p.index], risk)))

    def preset(tag: str, t: Table, j: int) -> EnergyPoint:
        tm, pw = float(t.time_ms[j]), float(t.power_w[j])
        en = r.target_at(tm, pw, r.default_batch)[1]
        s = float(_spreads(t.subset([j]))[0])
        return EnergyPoint(tag, t.modes[j], r.default_batch, tm, pw, en, t.source(j), None, s,
                           float(_upper(en, s, risk)))
    maxn = bp = None
    j = _maxn_row(presets)
    if j is not None:
        maxn = preset("MAXN", presets[0], j)
    if best is not None and presets is not None:
        d, pre = best
        bp = preset(pre.name, presets[0], d.index)
    m = _least_row(ew, fits)
    least, med = _least(pair("least energy", k), (maxn, bp),
                        None if m is None else pair("least median", m))
    return Energy(TO_TARGET, least, pick, maxn, bp, risk=risk, median_least=med)
