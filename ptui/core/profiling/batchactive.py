"""Active profiling over the joint (mode, batch size) space for one goal.

`ptui profile --batch-sizes 8,16,32,64 --strategy active (--budget-w W | --objective energy)
[--noise-scale B | --samples-to-target F]` chooses the pairs one at a time, as `active.ActivePlanner`
chooses modes: a space-filling start over the five knobs (cores, CPU, GPU, EMC, batch size), a GP
refit after every pair (time per sample and power, the batch size a fifth input), then the pair
with the highest constrained expected improvement of the time (or energy) to target, and a stop
once no pair is expected to improve the decision.  The objective is the one `ptui pareto
--batch-sizes` decides on: time per step x relative samples / batch size.
"""
from __future__ import annotations

import numpy as np

from ..catalogue.devices import Device
from ..decision.batch import BatchError, SamplesToTarget
from ..prediction.gp import raw_modes
from .active import ActivePlanner, Goal, drive_offline, plausible, spacefill

REF_BATCH = 16      # the bundled reference's batch size (ResNet-18 at 16)


class JointPlanner(ActivePlanner):
    """Candidates are (mode, batch) pairs, ordered batch by batch (as batch.joint_table orders its
    rows); a measured row carries its `batch_size`."""
    unit = "(mode, batch size) pair"
    stop_ei = 0.003          # measured with these (docs/accuracy-batch.md: median 0.0-0.2 %)
    stop_min_share = 0.0

    def __init__(self, device: Device, modes: list, sizes, goal: Goal, rel: SamplesToTarget, *,
                 count: int, reference=None, seed: int = 0) -> None:
        if goal.deadline_ms is not None:
            raise BatchError("active profiling over batch sizes needs --budget-w W or --objective "
                             "energy (a per-minibatch deadline means different work at each size)")
        self.modes = list(modes)
        self.sizes = tuple(sorted(int(b) for b in sizes))
        if len(self.sizes) < 2:
            raise BatchError("active profiling over batch sizes needs at least two sizes that fit")
        rel.check_covers(self.sizes)
        self.rel = rel
        pairs = [(m, b) for b in self.sizes for m in self.modes]
        super().__init__(device, pairs, goal, count=count, reference=reference, seed=seed,
                         n_initial=max(6, min(12, count // 4)))
        b = self.A[:, 4]
        self.shift = np.log(rel.relative(b, float(max(self.sizes))) / b)

    @staticmethod
    def _inputs(candidates) -> np.ndarray:
        return np.hstack([raw_modes([m for m, _ in candidates]),
                          np.array([[float(b)] for _, b in candidates]).reshape(-1, 1)])

    @staticmethod
    def _key(c) -> tuple:
        return c[0].as_tuple() + (int(c[1]),)

    @staticmethod
    def _row_key(r: dict) -> tuple:
        return (r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"], int(r["batch_size"]))

    def _rows_inputs(self, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        A = np.array([[r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"], r["batch_size"]]
                      for r in rows], float)
        return A, np.array([r["time_ms"] for r in rows], float) / A[:, 4]     # time per sample

    def initial(self) -> list:
        ok = np.ones(len(self.A), bool)
        if self.reference is not None:
            # the reference knows a step at its own batch (16) only: as a loose filter, take a step's
            # work as proportional to the batch, so time per sample is the reference's step / 16
            # at every size (step / 16 x relative samples to target).  Taking the step as the same
            # at every size made a batch of 8 look 8x slower per sample than one of 64, and the
            # start left out the small sizes.
            pr = self.reference.predict(self.A[:, :4])
            b = self.A[:, 4]
            per_sample = pr["time_ms"] / REF_BATCH * np.exp(self.shift) * b
            ok = plausible(self.goal, per_sample, pr["power_w"])
            if ok.sum() < 3 * self.n_initial:
                ok[:] = True
        idx = np.flatnonzero(ok)
        pick = spacefill(self.A[idx], self.n_initial, self.seed)
        return [self.candidates[idx[i]] for i in pick]

    def decide(self, rows: list[dict]) -> int | None:
        """The pair `ptui pareto --batch-sizes` would pick now (calibrated GPs, measured pairs with
        their measurements, the default risk)."""
        from ..decision.batch import joint_table
        from ..decision.pareto import DEFAULT_RISK, InfeasibleError, choose
        from ..prediction.fit import fit_model
        from .active import measured_from_rows
        B = np.array([int(r["batch_size"]) for r in rows])
        if len(rows) < 6 or len(set(B.tolist())) < 2:
            return None
        A, _ = self._rows_inputs(rows)
        measured = dict(measured_from_rows(rows), batch_size=B)
        model = fit_model(self.reference, self.device, A[:, :4], [r["time_ms"] for r in rows],
                          [r["power_w"] for r in rows], method="gp", seed=self.seed,
                          measured=measured, batch_sizes=B)
        table = joint_table(model, self.modes, self.sizes)
        try:
            return choose(table, budget_w=self.goal.budget_w, objective=self.goal.objective,
                          risk=DEFAULT_RISK, relation=self.rel).index
        except InfeasibleError:
            return None


def joint_active_offline(device: Device, modes: list, sizes, measure_fn, *, goal: dict | Goal,
                         rel: SamplesToTarget, count: int = 40, reference=None, seed: int = 0):
    """Active profiling over (mode, batch) pairs against a table (evaluation): measure_fn(mode,
    batch) -> (time_ms, power_w).  Returns (pairs profiled in order, stop reason, planner)."""
    g = goal if isinstance(goal, Goal) else Goal(**goal)
    pl = JointPlanner(device, modes, sizes, g, rel, count=count, reference=reference, seed=seed)
    rows, order = [], []

    def take(pair):
        m, b = pair
        t, p = measure_fn(m, b)
        c, f, gg, mm = m.as_tuple()
        rows.append({"cores": c, "cpu_mhz": f, "gpu_mhz": gg, "mem_mhz": mm, "batch_size": b,
                     "time_ms": t, "power_w": p})
        order.append(pair)

    drive_offline(pl, take, count, rows)
    return order, pl.stop_reason, pl
