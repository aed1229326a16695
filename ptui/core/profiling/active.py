"""Which modes to profile: random (PowerTrain's protocol), space-filling, or goal-aware active.

Active profiling (``--strategy active`` with a goal) starts from a small space-filling set of
plausible modes (by the workload's roofline prior when its counts are known, else by the bundled
ResNet-18 reference; with the prior, the first is the mode it picks for the goal), refits a GP
after every measured mode, and profiles next the mode with the highest constrained expected
improvement (Gardner et al. 2014): P(the mode meets the constraint) x the expected improvement of
the objective over the best measured mode that meets it, both from the GP's predictive
distribution (log-normal).  It stops at ``count`` modes, or earlier once no unprofiled mode is
expected to improve the decision by more than ``STOP_EI`` (relative), the best measured mode
meets the goal with confidence, and at least ``STOP_MIN_SHARE`` of ``count`` modes have been profiled.

The same planner searches (mode, batch size) pairs (`ptui profile --batch-sizes 8,16,32,64
--strategy active (--budget-w W | --objective energy) [--noise-scale B | --samples-to-target F]`):
its `Space` holds the modes, the sizes and the samples-to-target relation; the start is
space-filling over the five knobs, the GPs learn time per sample with the batch size a fifth input,
and the objective is the one `ptui pareto --batch-sizes` decides on: time per sample x relative
samples to target.  With one size the space is the classic one (modes; time per step).

Goals (the same meaning as ``ptui pareto``): fastest under a power budget; lowest power meeting a
minibatch deadline; least energy per minibatch (optionally under a budget).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np

from ..board.csvio import measured_uncertainty
from ..catalogue.devices import Device
from ..catalogue.modes import transition_order
from ..decision.batch import BatchError, SamplesToTarget, joint_table
from ..decision.goals import Goal
from ..decision.pareto import DEFAULT_RISK, InfeasibleError, Table, choose
from ..decision.pareto import _ncdf as _pareto_ncdf
from ..errors import PtuiInputError
from ..prediction import fit as fitting  # its names looked up when called (tests patch them)
from ..prediction.gp import WITH_REFERENCE, raw_modes, spacefill, target_inputs
from ..prediction.predictor import features

STRATEGIES = ("random", "space-filling", "active")
STOP_EI = 0.001            # stop when no mode promises more than 0.1 % improvement ...
STOP_FEASIBLE = 0.95       # ... and the incumbent meets the goal with this probability ...
STOP_MIN_SHARE = 0.75      # ... and at least this share of --count modes has been profiled
REFIT_CHOICE_EVERY = 5     # re-choose the GP prior by cross-validation every few modes
# The single GPs the planner chooses among as it goes (from 10 rows on).  They keep the reference
# as prior mean (two coefficients) rather than `fit`'s physical mean (five to seven non-negative
# terms, freer on 10-20 rows): with the physical mean the planner took another path on one of the
# 32 evaluation goals (sim MobileNetV3 at 18 W; the decision then lost 20 %) and no goal gained.
# The fit after profiling (`tune`, `fit`) uses fit's stack as always.
PLANNER_GPS = ("gp", "gp-refmean", "gp-refinput")


def _ncdf(z):
    return _pareto_ncdf(np.asarray(z, np.float64))


def _npdf(z):
    return np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _objective(goal: Goal, lt, lp):
    """Log objective and its constraint's log value/limit for arrays of log time / log power."""
    if goal.objective == "energy":
        return lt + lp
    if goal.budget_w is not None:
        return lt
    return lp


def plausible(goal: Goal, t: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Modes a prior prediction (t, p) does not rule out for the goal: within 1.5x of the
    constraint and within 3x of the predicted best objective (all modes when too few remain)."""
    ok = np.ones(len(t), bool)
    if goal.budget_w is not None:
        ok &= p <= 1.5 * goal.budget_w
    if goal.deadline_ms is not None:
        ok &= t <= 1.5 * goal.deadline_ms
    obj = np.exp(_objective(goal, np.log(t), np.log(p)))
    feas = ok & ((p <= goal.budget_w) if goal.budget_w is not None else True) & \
        ((t <= goal.deadline_ms) if goal.deadline_ms is not None else True)
    best = obj[feas].min() if feas.any() else obj.min()
    ok &= obj <= 3.0 * best
    return ok


@dataclass
class Acquisition:
    index: int | None          # candidate to profile next (None: stop)
    score: float               # the largest constrained EI over candidates (relative improvement)
    incumbent: int | None      # best measured candidate meeting the goal
    p_feasible: float          # P(incumbent meets the constraint)
    reason: str = ""


def acquire(goal: Goal, mu_t, sd_t, mu_p, sd_p, measured: np.ndarray, meas_t, meas_p,
            ) -> Acquisition:
    """Constrained EI over candidates; mu/sd in log units, measured: bool mask of profiled rows
    with their measured values meas_t/meas_p (NaN elsewhere)."""
    lim_ok = np.ones(len(mu_t))
    if goal.budget_w is not None:
        lim_ok = lim_ok * _ncdf((math.log(goal.budget_w) - mu_p) / np.maximum(sd_p, 1e-9))
    if goal.deadline_ms is not None:
        lim_ok = lim_ok * _ncdf((math.log(goal.deadline_ms) - mu_t) / np.maximum(sd_t, 1e-9))
    if goal.objective == "energy":
        mu, sd = mu_t + mu_p, np.sqrt(sd_t ** 2 + sd_p ** 2)
    elif goal.budget_w is not None:
        mu, sd = mu_t, sd_t
    else:
        mu, sd = mu_p, sd_p
    # incumbent: the best measured mode that meets the constraint
    feas = measured.copy()
    if goal.budget_w is not None:
        feas &= np.nan_to_num(meas_p, nan=np.inf) <= goal.budget_w
    if goal.deadline_ms is not None:
        feas &= np.nan_to_num(meas_t, nan=np.inf) <= goal.deadline_ms
    inc = None
    cand = ~measured
    if not cand.any():
        return Acquisition(None, 0.0, None, 0.0, "every candidate mode has been profiled")
    if feas.any():
        obj = _objective(goal, np.log(np.where(feas, meas_t, 1.0)), np.log(np.where(feas, meas_p, 1.0)))
        obj = np.where(feas, obj, np.inf)
        inc = int(np.argmin(obj))
        f_star = obj[inc]
        z = (f_star - mu) / np.maximum(sd, 1e-9)
        ei = np.maximum(sd, 1e-9) * _npdf(z) + (f_star - mu) * _ncdf(z)
        raw = np.where(cand, ei * lim_ok, -1.0)
        p_inc = float(lim_ok[inc]) if goal.budget_w or goal.deadline_ms else 1.0
        t_ref = meas_t[inc]
    else:
        raw = np.where(cand, lim_ok, -1.0)       # nothing meets the goal yet: find a mode that does
        p_inc = 0.0
        t_ref = float(np.exp(np.median(mu_t)))
    # improvement per unit of device time: a mode predicted k times slower than the incumbent
    # costs k times as long to profile (EI per second, Snoek et al. 2012)
    cost = np.maximum(1.0, np.exp(mu_t) / t_ref)
    best = int(np.argmax(np.where(cand, raw / cost, -1.0)))
    return Acquisition(best, float(raw.max()), inc, p_inc)


ACTIVE_MIN_COUNT = 3
"""The fewest modes an active search profiles."""

REF_BATCH = 16      # the bundled reference's batch size (ResNet-18 at 16)


@dataclass(frozen=True)
class Space:
    """What an active search chooses among: (mode, batch size) points, batch by batch (as
    batch.joint_table orders its rows).

    One batch size (`Space.one`, the classic search at the workload's own size): the candidates a
    caller sees are the modes, a measured row needs no batch_size, the GPs see the four mode knobs
    and learn the time per step, and the objective is the goal's own (time per step, power or
    energy per step).  Several (`Space.joint`, `ptui profile --batch-sizes --strategy active`): the
    candidates are the (mode, batch) pairs, a row carries its batch_size, the batch size is the GPs'
    fifth input, time is learnt per sample, and the objective is the one `ptui pareto
    --batch-sizes` decides on: time per sample x relative samples to target (rel).  With one size
    that objective is time per step up to a constant factor, which changes no choice: the one-size
    space keeps time per step, so a deadline keeps its per-minibatch meaning."""
    modes: tuple
    sizes: tuple = (None,)               # one size: (the workload's size, or None when not known)
    rel: SamplesToTarget | None = None   # several sizes: relative samples to target

    @classmethod
    def one(cls, modes, batch: int | None = None) -> Space:
        return cls(tuple(modes), (batch,))

    @classmethod
    def joint(cls, modes, sizes, rel: SamplesToTarget) -> Space:
        sizes = tuple(sorted(int(b) for b in sizes))
        if len(sizes) < 2:
            raise BatchError("active profiling over batch sizes needs at least two sizes that fit")
        rel.check_covers(sizes)
        return cls(tuple(modes), sizes, rel)

    @property
    def several(self) -> bool:
        return len(self.sizes) > 1

    @property
    def points(self) -> list[tuple]:
        return [(m, b) for b in self.sizes for m in self.modes]

    @property
    def candidates(self) -> list:
        """What the planner proposes: modes (one size) or (mode, batch) pairs."""
        return self.points if self.several else list(self.modes)

    @property
    def unit(self) -> str:
        return "(mode, batch size) pair" if self.several else "mode"

    def inputs(self) -> np.ndarray:
        """The GPs' inputs of every candidate: the mode knobs, and the batch size when several."""
        A = raw_modes(list(self.modes))
        if not self.several:
            return A
        return np.vstack([np.hstack([A, np.full((len(A), 1), float(b))]) for b in self.sizes])

    def key(self, c) -> tuple:
        return c[0].as_tuple() + (int(c[1]),) if self.several else c.as_tuple()

    def row_key(self, r: dict) -> tuple:
        k = (r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"])
        return k + (int(r["batch_size"]),) if self.several else k

    def rows_inputs(self, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        """Model inputs of measured rows and the time target the GP learns (log taken later):
        time per step, or per sample over several sizes."""
        cols = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz") + (("batch_size",) if self.several else ())
        A = np.array([[r[k] for k in cols] for r in rows], float).reshape(-1, len(cols))
        t = np.array([r["time_ms"] for r in rows], float)
        return A, (t / A[:, 4] if self.several else t)

    def shift(self, A: np.ndarray) -> np.ndarray:
        """Log factor from the learnt time to the objective's: relative samples / batch (time per
        sample x relative samples to target), 0 for one size (time per step)."""
        if not self.several:
            return np.zeros(len(A))
        assert self.rel is not None
        b = A[:, 4]
        return np.log(self.rel.relative(b, float(max(self.sizes))) / b)

    def point(self, c) -> tuple:
        """A candidate as a (mode, batch) point."""
        return c if self.several else (c, self.sizes[0])

    def row(self, c, time_ms: float, power_w: float) -> dict:
        """The measured row of a candidate."""
        m, b = self.point(c)
        cc, f, g, e = m.as_tuple()
        r = {"cores": cc, "cpu_mhz": f, "gpu_mhz": g, "mem_mhz": e}
        if self.several:
            r["batch_size"] = b
        return {**r, "time_ms": time_ms, "power_w": power_w}


class ActivePlanner:
    """Chooses the next candidate of a Space to profile from the rows measured so far (stateless
    between calls apart from caches, so a resumed session continues exactly as an uninterrupted
    one).  `space`: a Space, or the modes (the one-size space)."""

    def __init__(self, device: Device, space, goal: Goal, *, count: int,
                 reference=None, seed: int = 0, n_initial: int | None = None,
                 prior=None) -> None:
        if count < ACTIVE_MIN_COUNT:
            raise PtuiInputError(f"active profiling needs --count of at least {ACTIVE_MIN_COUNT}, "
                                 f"got {count}")
        space = space if isinstance(space, Space) else Space.one(space)
        if space.several and goal.deadline_ms is not None:
            raise BatchError("active profiling over batch sizes needs --budget-w W or --objective "
                             "energy (a per-minibatch deadline means different work at each size)")
        self.device, self.goal, self.count, self.seed = device, goal, count, seed
        self.space = space
        self.candidates = space.candidates
        self.A = space.inputs()
        self.index = {space.key(c): i for i, c in enumerate(self.candidates)}
        self.shift = space.shift(self.A)  # log factor from the learnt time to the objective's
        # the reference model's networks are its GPs' prior (fit, _choice); a roofline prior has
        # none, so one passed as the reference only filters the initial design
        if getattr(reference, "kind", "") == "roofline":
            reference, prior = None, prior or reference
        self.reference = reference
        self.prior = prior               # the workload's roofline.RooflinePrior, or None
        default = max(6, min(12, count // 4)) if space.several else max(4, min(8, count // 3))
        self.n_initial = min(count, n_initial or default)
        self.unit = space.unit
        # when the model may call itself confident (the module's constants say what each means).
        # Measured on the independent generator (16 budget goals, <= 20 modes): with 0.3 % and no
        # minimum share, 11 of 16 runs stopped at 11-18 modes, median penalty 2.0 %, worst 6.9 %;
        # with these (and power's linear GP inputs), 0.8 % and 3.3 % (docs/accuracy.md).  Over
        # batch sizes 0.3 % and no minimum share (docs/accuracy-batch.md: median 0.0-0.2 %).
        self.stop_ei = 0.003 if space.several else STOP_EI
        self.stop_min_share = 0.0 if space.several else STOP_MIN_SHARE
        self.stop_reason = ""
        self.state: dict = {}            # (target, rows) -> the GP candidate chosen by CV
        self.last: Acquisition | None = None
        self.verifying = None           # the predicted pick measured before stopping

    # the initial design ---------------------------------------------------------------------
    def initial(self) -> list:
        """The initial design: space-filling among the candidates the prior does not rule out for
        the goal.  With the workload's roofline prior it starts at the mode the prior picks (its
        best objective among those it predicts to meet the goal), so the first measurement already
        tests a candidate answer."""
        ok = np.ones(len(self.A), bool)
        pr = None
        if self.prior is not None:
            pr = self.prior.predict(self.A[:, :4])
        elif self.reference is not None:
            pr = self.reference.predict(self.A[:, :4])
        if pr is not None:
            t = pr["time_ms"]
            if self.space.several:
                # the reference knows a step at its own batch (16) only: as a loose filter, take a
                # step's work as proportional to the batch, so time per sample is the reference's
                # step / 16 at every size (step / 16 x relative samples to target).  Taking the
                # step as the same at every size made a batch of 8 look 8x slower per sample than
                # one of 64, and the start left out the small sizes.
                t = t / REF_BATCH * np.exp(self.shift) * self.A[:, 4]
            ok = plausible(self.goal, t, pr["power_w"])
            if ok.sum() < 3 * self.n_initial:
                ok[:] = True
        idx = np.flatnonzero(ok)
        start = None
        if self.prior is not None and pr is not None:
            start = int(np.argmin(self._prior_objective(pr)[idx]))
        pick = spacefill(self.A[idx], self.n_initial, self.seed, start)
        return [self.candidates[idx[i]] for i in pick]
    def _prior_objective(self, pr: dict) -> np.ndarray:
        """The goal's objective by the prior, infinite where the prior says the goal is missed
        (all finite when it says no mode meets it)."""
        g = self.goal
        obj = np.exp(_objective(g, np.log(pr["time_ms"]), np.log(pr["power_w"])))
        feas = np.ones(len(obj), bool)
        if g.budget_w is not None:
            feas &= pr["power_w"] <= g.budget_w
        if g.deadline_ms is not None:
            feas &= pr["time_ms"] <= g.deadline_ms
        return np.where(feas, obj, np.inf) if feas.any() else obj

    # one step -------------------------------------------------------------------------------
    def _choice(self, name: str, A, y, ref, ref_log, roof=None) -> str:
        """The GP candidate for a target: chosen by cross-validation on the first 5k rows (k the
        largest possible, at least 10 rows, at most fit.FIT_MAX_ROWS: the choice made there
        stands), so it depends only on the rows, never on when the session was interrupted and
        resumed.  ref_log: the reference's log prediction of every row (None without a
        reference).  roof: the roofline prior with the rows' measurements (fit.ProfiledPrior),
        then one more candidate (gp-roofmean), and the mean before 10 rows."""
        n5 = (min(len(y), fitting.FIT_MAX_ROWS) // REFIT_CHOICE_EVERY) * REFIT_CHOICE_EVERY
        if n5 < 10:
            if roof is not None:
                return "gp-roofmean"
            return "gp-refmean" if ref is not None else "gp"
        key = (name, n5)
        if key not in self.state:
            ly = np.log(y[:n5])
            fold = fitting.folds(n5, self.seed)
            cv: dict[str, float] = {}
            for nm in PLANNER_GPS + (("gp-roofmean",) if roof is not None else ()):
                if ref is not None or fitting.GP_PRIOR[nm] not in WITH_REFERENCE:
                    _, c = fitting._gp_candidate(nm, self.device, A[:n5], ly,
                                         None if ref_log is None else ref_log[:n5], ref, fold,
                                         self.seed, target_inputs(name), name,
                                         roofline=None if roof is None else roof.take(slice(0, n5)))
                    cv[nm] = c.score(ly)["cv_mape"]
            self.state[key] = min(cv, key=cv.__getitem__)       # the best single GP (refits are cheap)
        return self.state[key]

    def _profiled_prior(self, rows: list[dict]):
        """The workload's roofline prior with the measured rows' time and power (fit.ProfiledPrior,
        refitted to a GP's own training rows where it is used), or None: no prior, or a space over
        batch sizes (the prior is one size's)."""
        if self.prior is None or self.space.several:
            return None
        return fitting.ProfiledPrior(self.prior, np.array([r["time_ms"] for r in rows], float),
                                     np.array([r["power_w"] for r in rows], float))

    def fit(self, rows: list[dict]):
        """GP time and power models on the measured rows (in plan order); beyond fit.FIT_MAX_ROWS
        rows, on fit_rows' subset of them, as `ptui fit` (the acquisition still knows every
        measured mode).  With the workload's roofline prior (one batch size) it is a candidate
        GP mean, refitted to the rows, as in `ptui fit --workload-spec`; before 10 rows, too few to
        choose by cross-validation, it is the mean, its slope fixed at 1 below 6 rows (fit.prior_fit)."""
        A, yt = self.space.rows_inputs(rows)
        roof = self._profiled_prior(rows)
        keep: np.ndarray | slice | None = fitting.fit_rows(A, self.seed)
        keep = slice(None) if keep is None else keep
        out = {}
        for name, y in (("time", yt), ("power", np.array([r["power_w"] for r in rows], float))):
            ref = getattr(self.reference, name) if self.reference is not None else None
            ref_log = ref.predict_log(features(self.device, A[:, :4]))[0] if ref is not None else None
            prior = fitting.GP_PRIOR[self._choice(name, A, y, ref, ref_log, roof)]
            roofline = fitting._prior_on(roof, A, keep) if prior == "roofmean" else None
            out[name], _ = fitting.gp_fit(prior, A[keep], np.log(y[keep]),
                                  None if ref_log is None else ref_log[keep],
                                  ref if prior in WITH_REFERENCE else None,
                                  seed=self.seed, inputs=target_inputs(name), basis=name,
                                  roofline=roofline,
                                  slope=1.0 if roofline is not None and len(y) < fitting.MIN_MODES else None)
            out[name].per_sample = name == "time" and A.shape[1] == 5
        return out

    def next_mode(self, rows: list[dict]):
        """The next mode to profile given the measured rows (dicts with mode columns, time_ms,
        power_w), or None with self.stop_reason set."""
        n = len(rows)
        if n >= self.count:
            self.stop_reason = f"reached --count {self.count} profiled {self.unit}s"
            return None
        measured = np.zeros(len(self.A), bool)
        mt = np.full(len(self.A), np.nan)
        mp = np.full(len(self.A), np.nan)
        for r in rows:
            i = self.index.get(self.space.row_key(r))
            if i is not None:
                measured[i] = True
                mt[i], mp[i] = r["time_ms"], r["power_w"]
        if n < 3:
            # not enough for a model: finish the initial design
            for m in self.initial():
                if not measured[self.index[self.space.key(m)]]:
                    return m
        models = self.fit(rows)
        mu_t, sd_t = models["time"].predict_log(self.device, self.A)
        mu_p, sd_p = models["power"].predict_log(self.device, self.A)
        acq = acquire(self.goal, mu_t + self.shift, sd_t, mu_p, sd_p, measured,
                      mt * np.exp(self.shift), mp)
        self.last = acq
        if acq.index is None:
            self.stop_reason = acq.reason
            return None
        confident = n >= max(10, self.n_initial + 4, math.ceil(self.stop_min_share * self.count)) \
            and acq.incumbent is not None and acq.score < self.stop_ei \
            and acq.p_feasible >= STOP_FEASIBLE
        if confident or n == self.count - 1:
            # before stopping (or in the last slot), measure the mode the decision would pick if
            # it is only predicted: a pick is then a measured mode, never worse than the best
            # measured one
            pick = self.decide(rows)
            if pick is not None and not measured[pick]:
                self.verifying = self.candidates[pick]
                return self.verifying
            if confident:
                self.stop_reason = (f"confident after {n} {self.unit}s: no unprofiled {self.unit} is "
                                    f"expected to improve on the best measured one by more than "
                                    f"{self.stop_ei:.1%}")
                return None
        return self.candidates[acq.index]

    def decide(self, rows: list[dict]) -> int | None:
        """The candidate the decision picks now: calibrated GPs (cross-validated, as `ptui fit
        --method gp`), measured candidates with their measurements; over one size the cautious
        ranking of `ptui tune`, over several the pair `ptui pareto --batch-sizes` picks (the
        default risk)."""
        sp = self.space
        if len(rows) < 6:
            return None
        A, _ = sp.rows_inputs(rows)
        t, p = [r["time_ms"] for r in rows], [r["power_w"] for r in rows]
        try:
            if sp.several:
                B = A[:, 4].astype(int)
                if len(set(B.tolist())) < 2:
                    return None
                model = fitting.fit_model(self.reference, self.device, A[:, :4], t, p, method="gp",
                                  seed=self.seed, measured=dict(measured_from_rows(rows), batch_size=B),
                                  batch_sizes=B)
                return choose(joint_table(model, list(sp.modes), sp.sizes), budget_w=self.goal.budget_w,
                              objective=self.goal.objective, risk=DEFAULT_RISK, relation=sp.rel).index
            model = fitting.fit_model(self.reference, self.device, A, np.array(t), np.array(p), method="gp",
                              seed=self.seed, roofline=self.prior)
            tab = Table.from_prediction(self.candidates, model.predict(self.A)).with_measurements(
                fitting.distrust_outliers(measured_from_rows(rows), A, model.about.metrics))
            return choose(tab, risk=DEFAULT_RISK, cautious=True, **self.goal.as_dict()).index
        except InfeasibleError:
            return None

    def best(self) -> tuple[object, float] | None:
        """The incumbent (best measured mode meeting the goal) and the confidence that it does."""
        if self.last is None or self.last.incumbent is None:
            return None
        return self.candidates[self.last.incumbent], self.last.p_feasible


def measured_from_rows(rows: list[dict]) -> dict:
    """Profile rows (store or CSV dicts) as the measurements a decision table takes (sds: the
    uncertainty of each figure, csvio.measured_uncertainty)."""
    return {"modes": np.array([[r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"]] for r in rows],
                              float).reshape(-1, 4),
            "time_ms": np.array([float(r["time_ms"]) for r in rows]),
            "power_w": np.array([float(r["power_w"]) for r in rows]),
            **measured_uncertainty(rows)}


def profile_offline(pl: ActivePlanner, measure_fn) -> list:
    """Run a planner against a table (evaluation, replay): its start, then its choices until it
    stops; measure_fn(candidate) -> (time_ms, power_w).  Returns the candidates profiled in order
    (pl.stop_reason says why it stopped)."""
    rows: list[dict] = []
    order: list = []

    def take(c):
        rows.append(pl.space.row(c, *measure_fn(c)))
        order.append(c)

    for c in pl.initial():
        if len(rows) < pl.count:
            take(c)
    while (c := pl.next_mode(rows)) is not None:
        take(c)
    return order


def active_profile_offline(device: Device, modes: list, measure_fn, *, goal: dict | Goal,
                           count: int = 20, reference=None, seed: int = 0, prior=None):
    """Active profiling over modes against a table: measure_fn(i) -> (time_ms, power_w) for
    mode i.  Returns (indices profiled in order, stop reason, planner)."""
    g = goal if isinstance(goal, Goal) else Goal(**goal)
    pl = ActivePlanner(device, Space.one(modes), g, count=count, reference=reference, seed=seed,
                       prior=prior)
    pos = {m.as_tuple(): i for i, m in enumerate(modes)}
    order = profile_offline(pl, lambda m: measure_fn(pos[m.as_tuple()]))
    return [pos[m.as_tuple()] for m in order], pl.stop_reason, pl


def joint_active_offline(device: Device, modes: list, sizes, measure_fn, *, goal: dict | Goal,
                         rel: SamplesToTarget, count: int = 40, reference=None, seed: int = 0):
    """Active profiling over (mode, batch) pairs against a table: measure_fn(mode, batch) ->
    (time_ms, power_w).  Returns (pairs profiled in order, stop reason, planner)."""
    g = goal if isinstance(goal, Goal) else Goal(**goal)
    pl = ActivePlanner(device, Space.joint(modes, sizes, rel), g, count=count, reference=reference,
                       seed=seed)
    return profile_offline(pl, lambda c: measure_fn(*c)), pl.stop_reason, pl


def plan_candidates(device: Device, strategy: str, candidates=None) -> list:
    """The modes a strategy chooses from: random and space-filling draw from PowerTrain's grid;
    active searches every mode the board has (the decision is made over all of them); on the
    replay device (`candidates`), the recorded ones."""
    if strategy not in STRATEGIES:
        raise PtuiInputError(f"unknown strategy {strategy!r}; choose {', '.join(STRATEGIES)}")
    return list(candidates) if candidates is not None else (
        device.full_space() if strategy == "active" else device.pt_grid())


def make_plan(device: Device, strategy: str, *, count: int | None, seed: int, candidates=None,
              goal: Goal | None = None, reference=None, prior=None, tune: bool = False):
    """The initial plan for a strategy and, for ``active``, the planner that extends it.
    candidates: the modes a strategy may choose (default: the device's PowerTrain grid; on the
    replay device, the recorded modes).  prior: the workload's roofline prior (the active
    planner's initial design).  tune: the profile of `ptui tune`, whose fit needs MIN_MODES modes
    (its --count 0, the prior alone, profiles nothing and never comes here)."""
    cands = plan_candidates(device, strategy, candidates)
    n = 50 if count is None else count
    least = fitting.MIN_MODES if tune else ACTIVE_MIN_COUNT if strategy == "active" else 1
    if not least <= n <= len(cands):
        zero = "0 (no profile) or " if tune else ""
        raise PtuiInputError(f"--count must be {zero}between {least} and {len(cands)} here, got {n}"
                             if least <= len(cands) else
                             f"--count: only {len(cands)} modes here, fewer than the {least} "
                             f"{'the fit after profiling needs' if tune else 'active profiling needs'}")
    if strategy == "active":
        if goal is None:
            raise PtuiInputError("--strategy active needs a goal: --budget-w W, --deadline-ms T "
                                 "or --objective energy")
        pl = ActivePlanner(device, cands, goal, count=n, reference=reference, seed=seed, prior=prior)
        return pl.initial(), pl
    if strategy == "space-filling":
        return transition_order([cands[i] for i in spacefill(raw_modes(cands), n, seed)]), None
    return transition_order(random.Random(seed).sample(cands, n)), None


def fleet_share(device: Device, boards: int, count: int, index: int, *, seed: int = 0,
                candidates=None) -> list:
    """Board `index`'s share of a fleet's coordinated plan: `boards` boards of one type profile
    `count` modes each for a pool (profiling/pool.py), and together they cover the grid.  One
    space-filling design of boards x count modes (maximin, the same seed on every board), dealt
    round-robin: each board gets one of the first `boards` modes (the most spread), one of the
    next `boards`, and so on, so every board's own few modes still span the grid (its power and
    time factors against the fleet come from them) and no two boards profile the same mode.
    Independent random draws of 5 modes a board overlap and leave gaps the pooled shape must
    guess (benchmarks/eval_pool.py --plan)."""
    cands = plan_candidates(device, "space-filling", candidates)
    if boards < 1 or not 0 <= index < boards:
        raise PtuiInputError(f"board index {index} must lie in 0..{boards - 1}")
    if not 1 <= count <= len(cands) // boards:
        raise PtuiInputError(f"{boards} boards x {count} modes do not fit the {len(cands)} candidates")
    order = spacefill(raw_modes(cands), boards * count, seed)
    return transition_order([cands[i] for i in order[index::boards]])
