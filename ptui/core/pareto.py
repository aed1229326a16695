"""Pareto front over (time, power) and the decisions ptui offers.

* budget:   the fastest mode whose power stays within W; risk-aware, the fastest mode whose
            predicted probability of exceeding W is at most `risk` (power ~ log-normal(mean, sd));
* deadline: the lowest-power mode whose minibatch time meets T (same risk rule on time);
* energy:   the least energy per minibatch (optionally under a budget).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import Infeasible
from .modes import Mode


class InfeasibleError(Infeasible):
    """No mode meets the goal (exit code 3)."""


@dataclass
class Table:
    """Modes with predicted (or measured) time and power, and optional spreads.
    ``measured[i]`` is True where row i holds a profiled measurement instead of a prediction."""
    modes: list[Mode]
    time_ms: np.ndarray
    power_w: np.ndarray
    time_ms_std: np.ndarray
    power_w_std: np.ndarray
    measured: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.measured is None:
            self.measured = np.zeros(len(self.modes), dtype=bool)

    def source(self, i: int) -> str:
        return "measured" if self.measured[i] else "predicted"

    def with_measurements(self, measured: dict | None) -> "Table":
        """Rows of profiled modes take their measured time, power and spread: a decision is then
        never worse than the best measured mode that meets the goal.  Returns a new table."""
        if not measured or len(measured["time_ms"]) == 0:
            return self
        where = {m.as_tuple(): i for i, m in enumerate(self.modes)}
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
        return Table(self.modes, t, p, ts, ps, flag)

    @classmethod
    def from_prediction(cls, modes, pred: dict) -> "Table":
        z = np.zeros(len(modes))
        return cls(list(modes), np.asarray(pred["time_ms"], float), np.asarray(pred["power_w"], float),
                   np.asarray(pred.get("time_ms_std", z), float),
                   np.asarray(pred.get("power_w_std", z), float))

    def __len__(self) -> int:
        return len(self.modes)


def front_indices(time_ms: np.ndarray, power_w: np.ndarray) -> np.ndarray:
    """Indices of the Pareto-optimal points (minimise both), ordered by increasing power."""
    order = np.lexsort((time_ms, power_w))       # by power, then time
    best = math.inf
    keep = []
    for i in order:
        if time_ms[i] < best:
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


def choose(table: Table, *, budget_w: float | None = None, deadline_ms: float | None = None,
           objective: str | None = None, risk: float | None = 0.05, tolerance_w: float = 0.0,
           cautious: float = 0.0) -> Decision:
    """Pick the mode for a goal; raises InfeasibleError naming the closest option.

    With risk, a mode qualifies when P(power > budget + tolerance) <= risk, and its predicted
    mean power stays within the budget.  cautious = k > 0 ranks modes by a pessimistic value,
    median x exp(k x log-sd), instead of the median: a well-predicted or measured mode then wins
    over one the model knows little about (used after active profiling, whose modes cluster
    where the goal is decided)."""
    t, p, ts, ps = table.time_ms, table.power_w, table.time_ms_std, table.power_w_std
    n = len(table)
    if cautious:
        with np.errstate(divide="ignore", invalid="ignore"):
            up = lambda v, sd: v * np.exp(cautious * np.nan_to_num(np.sqrt(np.log1p((sd / v) ** 2))))  # noqa: E731
        rt, rp = up(t, ts), up(p, ps)
    else:
        rt, rp = t, p
    ok = np.ones(n, dtype=bool)
    prob = None
    if risk is not None and not 0 < risk < 1:
        raise ValueError(f"--risk must be between 0 and 1, got {risk}")
    if budget_w is not None:
        if budget_w <= 0:
            raise ValueError(f"--budget-w must be positive, got {budget_w}")
        if tolerance_w < 0:
            raise ValueError(f"--tolerance-w must not be negative, got {tolerance_w}")
        ok &= p <= budget_w
        if risk is not None and np.any(ps > 0):
            prob = _exceed_prob(p, ps, budget_w + tolerance_w)
            ok &= prob <= risk
    if deadline_ms is not None:
        if deadline_ms <= 0:
            raise ValueError(f"--deadline-ms must be positive, got {deadline_ms}")
        if risk is not None and np.any(ts > 0):
            ok &= _exceed_prob(t, ts, deadline_ms) <= risk
        else:
            ok &= t <= deadline_ms
    if not ok.any():
        raise InfeasibleError(_closest(table, budget_w, deadline_ms, risk))
    idx = np.flatnonzero(ok)
    if objective == "energy":
        goal = "least energy per minibatch" + (f" within {budget_w:g} W" if budget_w else "")
        i = idx[np.argmin(rt[idx] * rp[idx])]
    elif deadline_ms is not None and budget_w is None:
        goal = f"lowest power meeting {deadline_ms:g} ms per minibatch"
        i = idx[np.lexsort((rt[idx], rp[idx]))[0]]
    elif budget_w is not None:
        goal = f"fastest within {budget_w:g} W" + (
            f" (risk {risk:g}{f' of exceeding {budget_w + tolerance_w:g} W' if tolerance_w else ''})"
            if prob is not None else "")
        i = idx[np.lexsort((rp[idx], rt[idx]))[0]]
    else:
        raise ValueError("choose a goal: --budget-w, --deadline-ms or --objective energy")
    return Decision(int(i), table.modes[i], float(t[i]), float(p[i]), float(ts[i]), float(ps[i]),
                    goal, None if prob is None else float(prob[i]))


def _closest(table: Table, budget_w, deadline_ms, risk) -> str:
    t, p = table.time_ms, table.power_w
    parts = []
    if budget_w is not None:
        i = int(np.argmin(p))
        parts.append(f"no mode stays within {budget_w:g} W"
                     + (f" with risk <= {risk:g}" if risk is not None else "")
                     + f"; the lowest-power mode is {table.modes[i].describe()} at {p[i]:.1f} W "
                       f"(+-{table.power_w_std[i]:.1f}), {t[i]:.0f} ms")
    if deadline_ms is not None:
        i = int(np.argmin(t))
        parts.append(f"no mode meets {deadline_ms:g} ms; the fastest is {table.modes[i].describe()} at "
                     f"{t[i]:.1f} ms, {p[i]:.1f} W")
    return "; ".join(parts) or "no feasible mode"
