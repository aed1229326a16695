"""Goals as types: what a decision optimises and what it must meet.

A Goal is one value that travels from the faces (the CLI's flags, the app's fields) through planning
and deciding, instead of three keyword arguments.  Its kind says what is optimised:

* ``budget``: the fastest mode within a power budget (a deadline may join it);
* ``deadline``: the lowest-power mode meeting a deadline per minibatch;
* ``energy``: the least energy per minibatch (within a power budget, if one is given).

Feasibility under uncertainty (the risk of exceeding the budget or missing the deadline) belongs to
the decision (pareto.choose), which asks the goal for its limits, its ranking and its words.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

# figures within this share of each other are the same figure for a decision (far below any
# measurement's precision): the other figure breaks the tie
TIE_REL = 1e-4

KINDS = ("budget", "deadline", "energy")
NO_GOAL = ("a decision needs a goal: a power budget (--budget-w W), a deadline (--deadline-ms T) or "
           "the energy objective (--objective energy)")


def least(first: np.ndarray, then: np.ndarray, idx: np.ndarray | None = None) -> int:
    """The row (of idx, default all) least in `first`; rows within TIE_REL of it are a tie, broken
    by `then` (the decisions' tie rule: Goal.best, and the closest option a goal no mode meets)."""
    idx = np.arange(len(first)) if idx is None else np.asarray(idx)
    f = first[idx]
    near = idx[f <= f.min() * (1 + TIE_REL)]
    return int(near[np.lexsort((first[near], then[near]))[0]])


@dataclass(frozen=True)
class Goal:
    budget_w: float | None = None
    deadline_ms: float | None = None
    objective: str | None = None            # 'energy', or None: time or power is optimised

    def __post_init__(self) -> None:
        if self.budget_w is None and self.deadline_ms is None and self.objective is None:
            raise InputError(NO_GOAL)
        if self.objective not in (None, "energy"):
            raise InputError(f"unknown objective {self.objective!r}: the one objective is 'energy'")
        for v, flag in ((self.budget_w, "--budget-w"), (self.deadline_ms, "--deadline-ms")):
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InputError(f"{flag} must be positive, got {v}")

    @classmethod
    def of(cls, kind: str, budget_w: float | None = None, deadline_ms: float | None = None) -> "Goal":
        """The goal a face names by its kind (the app's goal selector): 'budget' needs a budget,
        'deadline' a deadline (and takes no budget), 'energy' takes an optional budget."""
        if kind == "budget":
            if budget_w is None:
                raise InputError("set a power budget in W")
            return cls(budget_w=budget_w)
        if kind == "deadline":
            if deadline_ms is None:
                raise InputError("set a deadline")
            return cls(deadline_ms=deadline_ms)
        if kind == "energy":
            return cls(budget_w=budget_w, objective="energy")
        raise InputError(f"unknown goal {kind!r}; choose {', '.join(KINDS)}")

    @property
    def kind(self) -> str:
        if self.objective == "energy":
            return "energy"
        if self.deadline_ms is not None and self.budget_w is None:
            return "deadline"
        return "budget"

    def describe(self, risk: float | None = None, tolerance_w: float = 0.0,
                 unit: str = "minibatch") -> str:
        """The goal in words, each limit it has (a budget and a deadline together: both); with a
        risk, the chance of exceeding the budget it allows.  unit: what one time is (a model's:
        profiler.time_unit, e.g. a script's optimizer step)."""
        meeting = f" meeting {self.deadline_ms:g} ms" if self.deadline_ms is not None else ""
        if self.kind == "energy":
            return (f"least energy per {unit}" + (f" within {self.budget_w:g} W" if self.budget_w else "")
                    + meeting)
        if self.kind == "deadline":
            return f"lowest power{meeting} per {unit}"
        assert self.budget_w is not None    # the kind is 'budget' only with a budget (see kind)
        over = f" of exceeding {self.budget_w + tolerance_w:g} W" if tolerance_w else ""
        return (f"fastest within {self.budget_w:g} W" + (f"{meeting} per {unit}" if meeting else "")
                + (f" (risk {risk:g}{over})" if risk is not None else ""))

    def describe_per_target(self, risk: float | None = None, tolerance_w: float = 0.0) -> str:
        """The goal of a decision over batch sizes, in words: per target (the time or energy to
        reach it), not per minibatch; with a risk, as describe says it."""
        if self.kind == "energy":
            return "least energy to target" + (f" within {self.budget_w:g} W" if self.budget_w else "")
        if self.budget_w is None:
            raise ValueError("a deadline per minibatch is no goal per target")
        over = f" of exceeding {self.budget_w + tolerance_w:g} W" if tolerance_w else ""
        return (f"least time to target within {self.budget_w:g} W"
                + (f" (risk {risk:g}{over})" if risk is not None else ""))

    def best(self, idx: np.ndarray, time_ms: np.ndarray, power_w: np.ndarray) -> int:
        """The best of rows idx for this goal, on the values given (a median or an upper bound).
        For a budget or a deadline, values within TIE_REL of the best are a tie, broken by the
        other figure (energy: the first least, as before): a CPU-bound
        prior's modes differ in time by a millionth of a millisecond across GPU clocks, and
        `--risk mean` picked the one 9 W hungrier for it (a user's trial)."""
        if self.kind == "energy":
            return int(idx[np.argmin(time_ms[idx] * power_w[idx])])
        if self.kind == "deadline":
            return least(power_w, time_ms, idx)
        return least(time_ms, power_w, idx)

    def as_dict(self) -> dict:
        return {"budget_w": self.budget_w, "deadline_ms": self.deadline_ms, "objective": self.objective}


def goal_from(goal: Goal | None = None, *, budget_w: float | None = None, deadline_ms: float | None = None,
              objective: str | None = None) -> Goal:
    """`goal`, or the goal the three flags describe (where a caller still passes them)."""
    if goal is not None:
        if budget_w is not None or deadline_ms is not None or objective is not None:
            raise ValueError("give a Goal or its flags, not both")
        return goal
    return Goal(budget_w, deadline_ms, objective)
