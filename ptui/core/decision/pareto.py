"""Pareto front over (time, power) and the decisions ptui offers.

* budget:   the fastest mode whose power stays within W; risk-aware, the fastest mode whose
            predicted probability of exceeding W is at most `risk` (power ~ log-normal(mean, sd));
* deadline: the lowest-power mode whose minibatch time meets T (same risk rule on time);
* energy:   the least energy per minibatch (optionally under a budget).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..catalogue.modes import Mode
from ..errors import Infeasible, InputError
from .goals import TIE_REL, Goal, goal_from, least

if TYPE_CHECKING:
    from ..catalogue.devices import Preset

# --risk: the allowed probability that the picked mode exceeds the budget (or the deadline), under
# the predictive distribution.  One default everywhere a decision is made (CLI, app, tune, the
# active planner); deciding on the mean instead is its own explicit choice, RISK_MEAN.
DEFAULT_RISK = 0.05
RISK_MEAN = "mean"


def parse_risk(value) -> float | None:
    """A --risk value: a probability strictly between 0 and 1, or 'mean' (None: decide on the
    predicted value alone, no risk rule).  0 and 1 are refused: 0 would demand certainty (and could be
    read as 'no risk rule', the least cautious answer), 1 allows anything."""
    text = str(value).strip()
    if text.lower() == RISK_MEAN:
        return None
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and 0.0 < x < 1.0):
        raise InputError(f"--risk must lie strictly between 0 and 1 (the allowed probability of "
                         f"exceeding the budget or deadline, e.g. {DEFAULT_RISK:g}), got {text!r}; "
                         f"to decide on the mean use --risk {RISK_MEAN}")
    return x


class InfeasibleError(Infeasible):
    """No mode meets the goal (exit code 3); `table` and `closest` (a row of it, or None) name the
    closest option for a --json document."""

    def __init__(self, message: str = "", table: "Table | None" = None, closest: int | None = None,
                 unit: str = "minibatch"):
        super().__init__(message)
        self.table, self.closest, self.unit = table, closest, unit     # unit: as choose's


_UNSET = np.zeros(0, dtype=bool)      # a column not given (Table fills it in)


@dataclass
class Table:
    """The candidates of a decision: points of the search space (a power mode, and the batch size
    where the source holds several) with predicted (or measured) time per step and power, and
    their spreads.  ``measured[i]`` is True where row i holds a profiled measurement instead of a
    prediction; ``batch`` is None for a source of one batch size (every row at that size), else
    the batch size of each row; ``fits[i]`` is False where that batch does not fit in memory (such
    a row is shown, never chosen)."""
    modes: list[Mode]
    time_ms: np.ndarray
    power_w: np.ndarray
    time_ms_std: np.ndarray
    power_w_std: np.ndarray
    measured: np.ndarray = field(default_factory=lambda: _UNSET)    # unset: nothing measured
    batch: np.ndarray | None = None
    fits: np.ndarray = field(default_factory=lambda: _UNSET)        # unset: every row fits

    def __post_init__(self) -> None:
        n = len(self.modes)
        if self.measured is _UNSET or self.measured is None:
            self.measured = np.zeros(n, dtype=bool)
        if self.fits is _UNSET or self.fits is None:
            self.fits = np.ones(n, dtype=bool)

    @property
    def batches(self) -> np.ndarray:
        """The batch size of every row of a table over several sizes (ValueError for one size)."""
        if self.batch is None:
            raise ValueError("a table of one batch size has no batch column")
        return self.batch

    def source(self, i: int) -> str:
        return "measured" if self.measured[i] else "predicted"

    def batch_of(self, i: int) -> int | None:
        return None if self.batch is None else int(self.batch[i])

    def subset(self, rows) -> "Table":
        """The rows `rows` (indices or a mask), every column kept."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return Table([self.modes[i] for i in rows], self.time_ms[rows], self.power_w[rows],
                     self.time_ms_std[rows], self.power_w_std[rows], self.measured[rows],
                     None if self.batch is None else self.batch[rows], self.fits[rows])

    @classmethod
    def concat(cls, tables: list["Table"], batch_sizes) -> "Table":
        """One table of several, each at its batch size (`batch_sizes`, one per table)."""
        cat = lambda k: np.concatenate([getattr(t, k) for t in tables]) if tables else np.zeros(0)  # noqa: E731
        batch = np.concatenate([np.full(len(t), int(b)) for t, b in zip(tables, batch_sizes)]) \
            if tables else np.zeros(0, int)
        return cls([m for t in tables for m in t.modes], cat("time_ms"), cat("power_w"),
                   cat("time_ms_std"), cat("power_w_std"), cat("measured").astype(bool),
                   batch.astype(int), cat("fits").astype(bool))

    def with_measurements(self, measured: dict | None) -> "Table":
        """Rows of profiled modes take their measured time, power and spread: a decision is then
        never worse than the best measured mode that meets the goal.  Returns a new table."""
        if not measured or len(measured["time_ms"]) == 0:
            return self
        where: dict[tuple, int] = {m.as_tuple(): i for i, m in enumerate(self.modes)}
        t, p = self.time_ms.copy(), self.power_w.copy()
        ts, ps = self.time_ms_std.copy(), self.power_w_std.copy()
        flag = self.measured.copy()
        for k, row in enumerate(np.asarray(measured["modes"])):
            i = where.get(tuple(float(v) for v in row))   # 5.0 == 5
            if i is None:
                continue
            t[i], p[i] = measured["time_ms"][k], measured["power_w"][k]
            ts[i], ps[i] = measured["time_ms_std"][k], measured["power_w_std"][k]
            flag[i] = True
        return Table(self.modes, t, p, ts, ps, flag, self.batch, self.fits)

    @classmethod
    def from_prediction(cls, modes, pred: dict) -> "Table":
        z = np.zeros(len(modes))
        return cls(list(modes), np.asarray(pred["time_ms"], float), np.asarray(pred["power_w"], float),
                   np.asarray(pred.get("time_ms_std", z), float),
                   np.asarray(pred.get("power_w_std", z), float))

    def __len__(self) -> int:
        return len(self.modes)


def presets_table(device, model=None, table: Table | None = None):
    """The device's nvpmodel presets as candidates, (Table, presets): predicted by `model` (its
    measurements where a preset's mode was profiled; the prediction uses the preset's cores and
    clocks, not its TPC power gating), else the rows of a measured `table` that are a preset's
    mode; None when there are none."""
    if model is not None:
        ps = list(device.presets)
        modes = [p.mode for p in ps]
        return Table.from_prediction(modes, model.predict(modes)).with_measurements(model.measured_at()), ps
    if table is None:
        return None
    where = {m: i for i, m in enumerate(table.modes)}
    ps = [p for p in device.presets if p.mode in where]
    if not ps:
        return None
    return table.subset([where[p.mode] for p in ps]), ps


def best_preset(presets, unit: str = "minibatch", **goal) -> tuple[Decision, Preset] | None:
    """The NVIDIA preset a user would pick for the same goal (choose() over presets_table's rows;
    unit as choose's), with its Preset; None when no preset meets it."""
    if presets is None:
        return None
    tab, ps = presets
    if all(goal.get(k) is None for k in ("budget_w", "deadline_ms", "objective")):
        i = int(np.argmin(tab.time_ms))             # no goal: the fastest preset
        return Decision(i, tab.modes[i], float(tab.time_ms[i]), float(tab.power_w[i]),
                        float(tab.time_ms_std[i]), float(tab.power_w_std[i]), "fastest"), ps[i]
    try:
        d = choose(tab, unit=unit, **goal)
    except InfeasibleError:
        return None
    return d, ps[d.index]


def front_indices(time_ms: np.ndarray, power_w: np.ndarray) -> np.ndarray:
    """Indices of the Pareto-optimal points (minimise both), ordered by increasing power.  A point
    no more than TIE_REL faster than a lower-power one is not on the front (a CPU-bound prior's
    modes differ in time by a millionth of a millisecond across GPU clocks: 7 of 99 front points
    were such twins, 9 W hungrier for nothing)."""
    order = np.lexsort((time_ms, power_w))       # by power, then time
    best = math.inf
    keep = []
    for i in order:
        if time_ms[i] < best / (1 + TIE_REL):
            keep.append(i)
            best = time_ms[i]
    return np.array(keep, dtype=int)


def _exceed_prob(mean: np.ndarray, sd: np.ndarray, limit: float) -> np.ndarray:
    """P(X > limit) for X log-normal with the given median and sd (sd 0 = certain)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.sqrt(np.log1p((sd / mean) ** 2))
        z = (np.log(limit) - np.log(mean)) / s
    p = np.where(s > 0, 1.0 - _ncdf(z), (mean > limit).astype(float))
    return np.nan_to_num(p, nan=1.0)


def _ncdf(z: np.ndarray) -> np.ndarray:
    # vectorised erf without scipy: Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7)
    x = np.abs(z) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * y)



# tune's cautious ranking: a predicted pick whose time or power sd is more than this share of its
# value is said to be uncertain (a warning to profile it before relying on it)
WIDE_SD = 0.10


@dataclass
class Decision:
    index: int
    mode: Mode
    time_ms: float
    power_w: float
    time_ms_std: float
    power_w_std: float
    goal: str
    exceed_prob: float | None = None
    # with cautious ranking: the best measured row for the goal on its measured figures (None:
    # no measured row meets it), why the pick is not that row ('' when it is), and warnings
    best_measured: int | None = None
    why: str = ""
    notes: list[str] = field(default_factory=list)
    # the point's batch size (None: the source's one size) and, for a decision per target (several
    # batch sizes), the time and energy to reach the target
    batch_size: int | None = None
    target_s: float | None = None
    energy_wh: float | None = None
    source: str = ""

    def to_target(self) -> tuple[float, float]:
        """(seconds, Wh) to the target of a decision per target (several batch sizes)."""
        if self.target_s is None or self.energy_wh is None:
            raise ValueError("a decision per step has no time to target")
        return self.target_s, self.energy_wh


def upper_z(risk: float | None) -> float:
    """The normal quantile of the upper bound at a risk level (1.645 at 0.05); --risk mean ranks
    at the default level."""
    from statistics import NormalDist
    return NormalDist().inv_cdf(1.0 - (DEFAULT_RISK if risk is None else risk))


def log_sd(v, sd) -> np.ndarray:
    """The log-normal sd of figures v with sd `sd`: what upper_bound's z multiplies (a NaN reads 0)."""
    v, sd = np.asarray(v, float), np.asarray(sd, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(np.sqrt(np.log1p((sd / v) ** 2)))


def sig3(v: float) -> str:
    """A figure to three significant digits without an exponent: "31.3", "1320" (the %g form
    wrote a prior's 90 % interval as "31.3-1.32e+03 ms")."""
    s = f"{v:.3g}"
    return f"{v:.0f}" if "e+" in s else s


def interval90(value: float, sd: float) -> tuple[float, float]:
    """A figure's 90 % interval (log-normal: median x exp(+-1.645 log-sd))."""
    k = upper_z(0.05) * float(log_sd(np.array(value, float), np.array(sd, float)))
    return value * math.exp(-k), value * math.exp(k)


def wide_interval(value: float, sd: float, unit: str, *, always: bool = False) -> str:
    """"90 % within LO-HI unit" for a figure whose spread is half its value or more (or `always`:
    a prediction from the roofline prior alone), else "": "135.2 ms +- 219.8" reads as if the time
    could be negative, so the faces say the interval beside such a spread."""
    if not (value > 0 and (always or sd >= 0.5 * value)):
        return ""
    lo, hi = interval90(value, sd)
    return f"90 % within {sig3(lo)}-{sig3(hi)} {unit}"


def upper_bound(v, sd, risk: float | None) -> np.ndarray:
    """Each value's upper bound at a risk level, median x exp(z x log-sd) (what choose holds a
    budget to: a mode qualifies when its power's bound is within it); the median itself without a
    risk, and where the median is not positive."""
    v = np.asarray(v, float)
    if risk is None:
        return v.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        b = v * np.exp(upper_z(risk) * log_sd(v, np.asarray(sd, float)))
    return np.where(v > 0, b, v)


def choose(table: Table, goal: Goal | None = None, *, budget_w: float | None = None,
           deadline_ms: float | None = None, objective: str | None = None,
           risk: float | None = DEFAULT_RISK, tolerance_w: float = 0.0,
           cautious: bool = False, relation=None, samples: float = 1.0,
           restrict: np.ndarray | None = None, unit: str = "minibatch") -> Decision:
    """Pick the point for a goal; raises InfeasibleError naming the closest option.  unit: what
    one time of the table is, for the goal's words (a model's: profiler.time_unit).

    With a `relation` (batch.SamplesToTarget: the relative samples each batch size needs) the
    decision is per target: the least time (or energy) to process `samples` x relative samples,
    among the rows that fit in memory (and `restrict`, a mask); without one, per step.

    With risk, a mode qualifies when P(power > budget + tolerance) <= risk, and its predicted
    mean power stays within the budget.  cautious (`ptui tune`, the active planner) ranks modes by
    their upper bound at the risk level, median x exp(z x log-sd) (z = 1.645 at risk 0.05, at the
    default level for --risk mean), instead of the median: a predicted mode beats a measured one
    only when the gain it promises is larger than its uncertainty (a 6-mode tune applied a mode
    predicted 289 +- 69 ms over a measured 379 ms one; it took 379 ms).  The decision then also
    names the best measured mode for the goal and why the pick is not that mode."""
    if relation is not None:
        return _choose_per_target(table, goal_from(goal, budget_w=budget_w, objective=objective),
                                  relation, samples, risk=risk, tolerance_w=tolerance_w,
                                  restrict=restrict, cautious=cautious)
    g = goal_from(goal, budget_w=budget_w, deadline_ms=deadline_ms, objective=objective)
    budget_w, deadline_ms = g.budget_w, g.deadline_ms
    t, p, ts, ps = table.time_ms, table.power_w, table.time_ms_std, table.power_w_std
    n = len(table)
    k = upper_z(risk) if cautious else 0.0
    rt, rp = (t * np.exp(k * log_sd(t, ts)), p * np.exp(k * log_sd(p, ps))) if k else (t, p)
    ok = np.ones(n, dtype=bool)
    prob = prob_t = None
    if risk is not None and not 0 < risk < 1:
        raise ValueError(f"--risk must be between 0 and 1, got {risk}")
    if budget_w is not None:
        if tolerance_w < 0:
            raise ValueError(f"--tolerance-w must not be negative, got {tolerance_w}")
        ok &= p <= budget_w
        if risk is not None and np.any(ps > 0):
            prob = _exceed_prob(p, ps, budget_w + tolerance_w)
            ok &= prob <= risk
    if deadline_ms is not None:
        if risk is not None and np.any(ts > 0):
            prob_t = _exceed_prob(t, ts, deadline_ms)
            ok &= prob_t <= risk
        else:
            ok &= t <= deadline_ms
    if not ok.any():
        raise InfeasibleError(_closest(table, budget_w, deadline_ms, risk, unit, tolerance_w), table,
                              _closest_row(table, budget_w, deadline_ms), unit)
    idx = np.flatnonzero(ok)
    i = g.best(idx, rt, rp)
    d = Decision(int(i), table.modes[i], float(t[i]), float(p[i]), float(ts[i]), float(ps[i]),
                 g.describe(risk if prob is not None else None, tolerance_w, unit),
                 None if prob is None else float(prob[i]), batch_size=table.batch_of(i),
                 source=table.source(i))
    if cautious:
        _against_measured(d, table, g, ok, rt, rp, prob, prob_t, risk, budget_w,
                          tolerance_w, deadline_ms)
    return d


def _choose_per_target(table: Table, g: Goal, rel, samples: float, *, risk, tolerance_w: float,
                       restrict, cautious: bool) -> Decision:
    """choose() per target: each row's time per step scaled to the time per target sample (relative
    samples at its batch / its batch), the per-step rule applied to that, and the pick given back in
    `table`'s rows with its time and energy to target."""
    if g.deadline_ms is not None:
        raise InputError("a deadline per minibatch means different work at each batch size: "
                         "choose a power budget or the least energy")
    if table.batch is None:
        raise ValueError("a decision per target needs the batch size of every row")
    keep = table.fits.copy()
    if restrict is not None:
        keep &= restrict
    idx = np.flatnonzero(keep)
    if len(idx) == 0:
        raise InfeasibleError("no (mode, batch size) pair fits in the board's memory")
    t, batch = table.time_ms, table.batch
    largest = float(batch[table.fits].max()) if table.fits.any() else float(batch.max())
    r = rel.relative(batch[idx], largest)
    scale = r / batch[idx]                          # time per step -> time per (target) sample
    sub = table.subset(idx)
    sub = Table(sub.modes, sub.time_ms * scale, sub.power_w, sub.time_ms_std * scale,
                sub.power_w_std, sub.measured)
    try:
        d = choose(sub, g, risk=risk, tolerance_w=tolerance_w, cautious=cautious)
    except InfeasibleError:             # said per step and per pair, not per sample
        if g.budget_w is None:
            raise
        i = int(idx[np.argmin(table.power_w[idx])])
        raise InfeasibleError(
            f"no (mode, batch size) pair stays within {g.budget_w:g} W"
            + (f" with risk <= {risk:g}" if risk is not None else "")
            + f"; the lowest-power pair is {table.modes[i].describe()} at batch {int(batch[i])}: "
              f"{table.power_w[i]:.1f} W (±{table.power_w_std[i]:.1f}), {t[i]:.0f} ms per step "
              f"({table.source(i)})",
            table, i) from None
    i = int(idx[d.index])
    target = float(t[i]) / 1000.0 / float(batch[i]) * float(r[d.index]) * samples
    said_risk = risk if d.exceed_prob is not None else None        # as choose() says it
    return replace(d, index=i, goal=g.describe_per_target(said_risk, tolerance_w), time_ms=float(t[i]),
                   time_ms_std=float(table.time_ms_std[i]),
                   best_measured=None if d.best_measured is None else int(idx[d.best_measured]),
                   batch_size=int(batch[i]), target_s=target,
                   energy_wh=target * float(table.power_w[i]) / 3600.0, source=table.source(i))


def _against_measured(d: Decision, table: Table, g: Goal, ok, rt, rp, prob, prob_t, risk,
                      budget_w, tolerance_w, deadline_ms) -> None:
    """Fill d.best_measured, d.why and d.notes: the best measured row for the goal on its measured
    figures (what active profiling reports as its best), and why a cautious pick differs."""
    t, p, ts, ps, meas = table.time_ms, table.power_w, table.time_ms_std, table.power_w_std, table.measured
    i = d.index
    plain = meas.copy()
    if budget_w is not None:
        plain &= p <= budget_w
    if deadline_ms is not None:
        plain &= t <= deadline_ms
    kind = g.kind
    j = g.best(np.flatnonzero(plain), t, p) if plain.any() else None
    d.best_measured = j
    level = f"{1.0 - (DEFAULT_RISK if risk is None else risk):.0%} upper bound"
    better = {"energy": "less energy", "deadline": "lower power", "budget": "faster"}[kind]
    val = {"energy": rt * rp, "deadline": rp, "budget": rt}[kind]       # what the ranking compares

    def gain_over(m: int, whom: str) -> str:
        by = f" by {1.0 - val[i] / val[m]:.1%}" if val[m] > 0 else ""
        return f"{better} than {whom}{by} even at its {level}"
    if j is None:
        d.why = ""
    elif j == i:
        d.why = "the pick"
    elif not ok[j]:
        if prob is not None and prob[j] > risk:
            what, pj = f"{budget_w + tolerance_w:g} W", prob[j]
        else:
            what, pj = f"{deadline_ms:g} ms", prob_t[j]
        d.why = (f"not taken: with the uncertainty of its measurement it exceeds {what} with "
                 f"probability {pj:.0%}, more than the risk {risk:g}")
        if not meas[i]:
            within = np.flatnonzero(ok & meas)
            d.why += ("; the pick is predicted, not measured, and " + (
                gain_over(g.best(within, rt, rp), "the best measured one within the risk")
                if len(within) else "no other measured one is within the risk"))
    else:
        d.why = (f"not taken: the pick is {gain_over(j, 'it')}"
                 + (" (the pick is predicted, not measured)" if not meas[i] else
                    f" (this mode's figure is uncertain: ±{ts[j] / t[j]:.0%} time, "
                    f"±{ps[j] / p[j]:.0%} power)"))
    if not meas[i]:
        st, sp = ts[i] / t[i], ps[i] / p[i]
        if j is None:
            d.notes.append("nothing profiled meets the goal on its measurement: the pick is "
                           "predicted, not measured")
        if max(st, sp) > WIDE_SD:
            d.notes.append(f"the pick is predicted, not measured, and uncertain (time ±{st:.0%}, "
                           f"power ±{sp:.0%}): profile it before relying on it")


def _closest_row(table: Table, budget_w, deadline_ms) -> int | None:
    """The closest option to a goal no mode meets: the lowest-power mode under a budget, else the
    fastest under a deadline."""
    if budget_w is not None:
        return least(table.power_w, table.time_ms)
    if deadline_ms is not None:
        return least(table.time_ms, table.power_w)
    return None


def exceeds_risk(table: Table, i: int, budget_w, deadline_ms=None, risk=DEFAULT_RISK,
                 tolerance_w: float = 0.0) -> bool:
    """Whether row i's predicted figures are within the limits but so uncertain that, at `risk`,
    it may go over them (why choose passes such a row over; _uncertain says it in words)."""
    return bool(_uncertain(table, i, budget_w, deadline_ms, risk, tolerance_w))


def _uncertain(table: Table, i: int, budget_w, deadline_ms, risk, tolerance_w: float = 0.0) -> str:
    """Why row i, whose predicted figures are within the limits, is no pick: the limits its
    uncertainty may take it over, with their probabilities (as choose holds them); "" when its
    figures are not within them or certain enough."""
    if risk is None:
        return ""
    over = []
    for v, sd, limit, unit in ((table.time_ms, table.time_ms_std, deadline_ms, "ms"),
                               (table.power_w, table.power_w_std, None if budget_w is None
                                else budget_w + tolerance_w, "W")):
        if limit is None or not sd[i] > 0 or v[i] > limit:
            continue
        pr = float(_exceed_prob(v[i:i + 1], sd[i:i + 1], limit)[0])
        if pr > risk:
            over.append(f"{limit:g} {unit} with probability {pr:.0%}")
    within = (all(lim is None or v[i] <= lim for v, lim in ((table.time_ms, deadline_ms),
                                                           (table.power_w, budget_w))))
    if not over or not within:
        return ""
    return (f": its predicted figures meet the goal, but are so uncertain that it may exceed "
            f"{' and '.join(over)} (profile modes to narrow it, or decide on the median with "
            "--risk mean)")


def _closest(table: Table, budget_w, deadline_ms, risk, unit: str = "minibatch",
             tolerance_w: float = 0.0) -> str:
    """Why no mode meets the goal, and the closest option, its figures said predicted or measured
    (a prior's '10.1 W (+-1.8), 8018 ms' did not say); a deadline in the table's unit of time
    (choose's: 'no mode meets 200 ms' said of a script's optimizer step did not say which)."""
    t, p = table.time_ms, table.power_w
    parts = []
    within = (np.flatnonzero(p <= budget_w) if budget_w is not None and deadline_ms is not None
              else np.zeros(0, dtype=int))
    if within.size:
        # both limits, and modes within the budget: the deadline is what none of them meets ("no
        # mode stays within 30 W" was said of a budget half the modes met: the user's trial)
        i = least(t, p, within)
        return (f"no mode meets {deadline_ms:g} ms per {unit} within {budget_w:g} W"
                + (f" with risk <= {risk:g}" if risk is not None else "")
                + f"; the fastest within the budget is {table.modes[i].describe()} at {t[i]:.1f} ms, "
                  f"{p[i]:.1f} W ({table.source(i)})"
                + _uncertain(table, i, budget_w, deadline_ms, risk, tolerance_w))
    if budget_w is not None:
        i = least(p, t)
        parts.append(f"no mode stays within {budget_w:g} W"
                     + (f" with risk <= {risk:g}" if risk is not None else "")
                     + f"; the lowest-power mode is {table.modes[i].describe()} at {p[i]:.1f} W "
                       f"(±{table.power_w_std[i]:.1f}), {t[i]:.0f} ms ({table.source(i)})")
    if deadline_ms is not None:
        i = least(t, p)
        ts = table.time_ms_std
        risky = risk is not None and bool(np.any(ts > 0))        # as choose() holds a deadline
        msg = (f"no mode meets {deadline_ms:g} ms per {unit}" + (f" with risk <= {risk:g}" if risky else "")
               + f"; the fastest is {table.modes[i].describe()} at {t[i]:.1f} ms"
               + (f" (±{ts[i]:.1f})" if risky else "") + f", {p[i]:.1f} W ({table.source(i)})")
        parts.append(msg + (_uncertain(table, i, None, deadline_ms, risk) if risky else ""))
    return "; ".join(parts) or "no feasible mode"
