"""Fitting predictors to a profile: Gaussian processes (scikit-learn) and PowerTrain's networks
(torch), chosen per target by cross-validation.

Methods (``ptui fit --method``):
  * ``gp``         : the three GP candidates of ``gp.py`` (no prior, the physical prior mean, the
                     reference as an input), stacked with weights fitted on their CV predictions;
  * ``powertrain`` : the paper's method alone: the reference network's body with a fresh last layer
                     fine-tuned on the profile (train.py's ``transfer`` recipe), nothing else;
  * ``auto``       : every GP candidate and every PowerTrain recipe (transfer, transfer without
                     dropout, scratch) on the same folds; the lowest CV MAPE wins per target.
                     Without torch the network recipes are skipped (and the metadata says so).
scikit-learn and torch are imported inside the functions that need them, never at import time.
Every candidate is scored on the same 5 folds; each fold's GP re-optimises its hyper-parameters on
the other folds (warm-started at the all-data optimum), each fold's network is retrained.
The 90 % interval coverage in cross-validation is reported beside the MAPE; when it falls outside
85-95 % the predictive sd is rescaled by the factor that makes it right on the CV residuals.
A profile of more than FIT_MAX_ROWS rows is fitted on that many of them chosen to cover the space,
the others checking the result (fit_rows, "large profiles" below).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..board.csvio import REPEAT_SD, read_batch_profile
from ..catalogue.devices import Device
from ..catalogue.modes import Mode, fmt_mhz
from ..catalogue.workloads import WORKLOADS
from ..decision.batch import default_batch
from ..errors import PtuiInputError
from ..progress import stage
from .gp import (
    TIME_LOG,
    WITH_REFERENCE,
    GPStack,
    GPTarget,
    input_columns,
    knob_features,
    phys_fit,
    phys_log,
    raw_modes,
    reference_grid,
    roof_log,
    spacefill,
    stack_moments,
    stack_weights,
    target_inputs,
    time_log,
)
from .predictor import Model, Net, features
from .roofline import RooflinePrior

METHODS = ("auto", "gp", "powertrain")
NN_CANDIDATES = ("transfer", "transfer-nodropout", "scratch")
Z90 = 1.6448536269514722
CV_FOLDS = 5


@dataclass
class _CV:
    log_pred: np.ndarray
    log_sd: np.ndarray

    def score(self, ly: np.ndarray) -> dict:
        """CV MAPE, residual sd and 90 % coverage over the rows this CV predicted (a row left out
        of the fit as an outlier has a NaN prediction and is not scored)."""
        ok = np.isfinite(self.log_pred)
        r = self.log_pred[ok] - ly[ok]
        z = np.abs(r) / np.maximum(self.log_sd[ok], 1e-9)
        return {"cv_mape": float(np.mean(np.abs(np.expm1(r))) * 100),
                "cv_resid_sd": float(np.sqrt(np.mean(r ** 2))),
                "cv_coverage90": float(np.mean(z <= Z90) * 100), "_z": z}

    def expand(self, keep: np.ndarray) -> "_CV":
        """This CV of the kept rows laid out over every row (NaN where a row was left out)."""
        mu = np.full(len(keep), np.nan)
        sd = np.full(len(keep), np.nan)
        mu[keep], sd[keep] = self.log_pred, self.log_sd
        return _CV(mu, sd)


MIN_MODES = 6
# With the workload's roofline prior a few modes already say something: fewer than MIN_MODES (too
# few to cross-validate) rescale the prior to them (prior_fit), from this many
MIN_MODES_PRIOR = 3


def n_folds(n: int) -> int:
    """5-fold cross-validation, fewer folds (at least 2 rows each) for very small profiles."""
    return min(CV_FOLDS, n // 2)


def folds(n: int, seed: int, A: np.ndarray | None = None) -> np.ndarray:
    """Fold of each row; without repeated modes the same assignment as train.fit_target uses for
    the networks (`ptui train`, whose rows are a profile's distinct modes).  With the rows' knobs
    `A`, rows of one mode (a pooled fit's: two boards that profiled the same mode) share a fold,
    the modes dealt round the folds: a held-out row whose twin stayed in the training rows is
    predicted by its twin, and the cross-validated error, and so the calibrated interval, came out
    too small.  Without such rows the assignment is unchanged."""
    perm = np.random.default_rng(seed + 1).permutation(n)
    fold = perm % n_folds(n)
    if A is None or n == 0:
        return fold
    first: dict[bytes, int] = {}
    rows = np.ascontiguousarray(np.asarray(A, np.float64).reshape(n, -1))
    owner = np.array([first.setdefault(r.tobytes(), i) for i, r in enumerate(rows)])
    if len(first) == n:
        return fold
    # each mode (its first row's place in the permutation) dealt round the folds in turn, as the
    # rows are without repeats: every fold holds a mode while there are as many modes as folds
    heads = np.array(sorted(first.values(), key=lambda i: perm[i]))
    rank = np.empty(n, np.int64)
    rank[heads] = np.arange(len(heads))
    return rank[owner] % min(n_folds(n), len(heads))


# -- the workload's roofline prior, refitted to the rows a fit trains on --------------------------
@dataclass(frozen=True)
class ProfiledPrior:
    """The workload's roofline prior and the profile's measured time and power, one per row of the
    modes a fit is given (None: nothing to refit it to, the prior as counted).  The prior a GP gets
    is refitted (RooflinePrior.adapted) to that GP's training rows only (_prior_on): a fold's GP to
    the other folds, the final GP to the rows the outlier check kept.  Refitted to every row, the
    prior would already have seen each held-out fold, and gp-roofmean's cross-validated error, which
    chooses among the candidates and calibrates the intervals, would come out optimistic; refitted
    before the outlier check, a disturbed mode would bend it."""
    prior: RooflinePrior
    time_ms: np.ndarray | None = None
    power_w: np.ndarray | None = None
    # _prior_on's refits, by the rows' bytes: the time and the power fit refit the prior to the
    # same rows, fold by fold, and once is enough (it is deterministic; three scales searched on a
    # grid take 0.2 s for 50 modes)
    refits: dict = field(default_factory=dict, compare=False, repr=False)

    def take(self, rows) -> "ProfiledPrior":
        """The same prior with the measurements of `rows` only (a mask or indices), for a fit given
        those rows of the modes."""
        if self.time_ms is None or self.power_w is None:
            return self
        return ProfiledPrior(self.prior, self.time_ms[rows], self.power_w[rows])

    def without_times(self, rows: np.ndarray) -> "ProfiledPrior":
        """The same with the times of `rows` (a mask) not used: the modes the time fit left out
        as outliers still give their power, at the utilisations the refitted time implies."""
        if self.time_ms is None or not np.any(rows):
            return self
        return ProfiledPrior(self.prior, np.where(rows, np.nan, self.time_ms), self.power_w)


def _prior_on(roof: ProfiledPrior | None, A: np.ndarray, rows=None) -> RooflinePrior | None:
    """The roofline prior refitted to `rows` (a mask or indices; None: all) of raw modes A, whose
    measurements `roof` holds row for row; the prior as counted where it holds none, or with
    ADAPT_PRIOR off.  A measurement that is NaN (a time the time fit left out as an outlier) is not
    used.  The one place a fit refits the prior: per fold, for the final fit, and for prior_fit."""
    if roof is None:
        return None
    if not ADAPT_PRIOR or roof.time_ms is None or roof.power_w is None:
        return roof.prior
    sel = slice(None) if rows is None else rows
    args = (np.asarray(A, np.float64)[sel, :4], roof.time_ms[sel], roof.power_w[sel])
    key = tuple(np.ascontiguousarray(a).tobytes() for a in args)
    if key not in roof.refits:
        roof.refits[key] = roof.prior.adapted(*args)
    return roof.refits[key]


# fit_model refits the workload's roofline prior to the profiled modes a GP trains on (_prior_on);
# False: the prior as counted (an evaluation's "before" arm)
ADAPT_PRIOR = True


# -- Gaussian processes ------------------------------------------------------------------------
NOISE_FLOOR = REPEAT_SD   # relative sd of a profiled mode's median time / mean power


def _kernel(dim: int, y_sd: float, base: str = "matern52"):
    """C * Matern-5/2(ARD) (or RBF) + white noise; the noise may not drop below NOISE_FLOOR (in
    the normalised units the regressor works in): a profiled value is a measurement, and a GP that
    believed it exact would claim sub-0.1 % certainty next to it."""
    from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    floor = min((NOISE_FLOOR / max(y_sd, 1e-9)) ** 2, 0.05)
    stat = (Matern(np.ones(dim), (5e-2, 1e3), nu=2.5) if base == "matern52"
            else RBF(np.ones(dim), (5e-2, 1e3)))
    return C(1.0, (1e-3, 1e3)) * stat + WhiteKernel(max(1e-3, 2 * floor), (floor, 0.5))


# GP candidates: name -> prior mean.  All use the Matern-5/2 kernel (gp.py says why); measured on
# both synthetic corpora, a linear (DotProduct) term on the inputs beside it did not help.
# The physical prior mean replaced the reference as prior mean (gp-refmean) in the stack on
# 2026-11-23: held out on 12 scenarios x 25/50 modes, on the evaluation's draws and on fresh ones,
# the mean error over scenarios fell in 14 of 16 (corpus, size, target, draws) groups (one equal,
# one 0.04 points worse), and Xavier power at 25 modes, where the Orin-trained reference as a mean
# misled, 4.8 -> 3.6 % (sim) and 4.5 -> 3.9 % (indep); docs/accuracy-notes-gp.md.  gp-refmean
# still names a prior (models fitted before, active profiling's first steps).
# gp-roofmean (the workload's roofline prior as mean) is a candidate only when the fit is given a
# workload spec (fit_model's roofline), and only for a profile of one batch size.
GP_SPECS = {"gp": "none", "gp-physmean": "physmean", "gp-refinput": "refinput",
            "gp-roofmean": "roofmean"}
GP_PRIOR = {**GP_SPECS, "gp-refmean": "refmean"}


def _kernel_parts(k) -> tuple[float, np.ndarray, str, float]:
    """(signal variance, length scales, kernel type, noise) of a fitted _kernel."""
    from sklearn.gaussian_process.kernels import Matern
    stat = k.k1.k2
    return (float(k.k1.k1.constant_value),
            np.atleast_1d(np.asarray(stat.length_scale, np.float64)).copy(),
            "matern52" if isinstance(stat, Matern) and stat.nu == 2.5 else "rbf",
            float(k.k2.noise_level))


STACK = "gp-stack"        # the GP candidates combined (gp.GPStack), when there are several
GP_CANDIDATES = tuple(GP_SPECS) + (STACK,)


def gp_candidates(with_reference: bool, with_roofline: bool = False) -> tuple[str, ...]:
    """The single GP candidates fitted for a target (those using the reference need one, the
    roofline's a roofline prior)."""
    return tuple(nm for nm in GP_SPECS
                 if (with_reference or GP_SPECS[nm] not in WITH_REFERENCE)
                 and (with_roofline or GP_SPECS[nm] != "roofmean"))


def _gp_stack(fulls: dict, cvs: dict, ly: np.ndarray):
    """Stack the single GP candidates: weights from their CV predictions (gp.stack_weights); the
    stack's CV prediction and sd are combined from theirs by the stack's own rules
    (gp.stack_moments; its weights saw those predictions, so its CV error is slightly
    optimistic).  Returns (GPStack, _CV)."""
    names = list(fulls)
    w = stack_weights(np.stack([cvs[nm].log_pred for nm in names], axis=1), ly)
    stack = GPStack([fulls[nm] for nm in names], w)
    mu, var = stack_moments(w, [cvs[nm].log_pred for nm in names], [cvs[nm].log_sd for nm in names],
                            stack.spread)
    return stack, _CV(mu, np.sqrt(var))


def gp_fit(prior: str, A: np.ndarray, ly: np.ndarray, ref_log: np.ndarray | None, ref_net,
           *, seed: int = 0, kernel=None, restarts: int | None = 1,
           base: str = "matern52", inputs: str = "log-recip",
           basis: str = "time", time_log: np.ndarray | None = None,
           roofline=None, slope: float | None = None) -> tuple[GPTarget, object]:
    """Fit one GP on raw modes A [n, 4] and log targets; returns (GPTarget, fitted kernel).
    restarts=None: a short local re-optimisation starting from `kernel` (for CV folds).
    inputs: the knob features (gp.INPUTS; gp.target_inputs says which a target uses).
    basis: the physmean prior's per-resource terms ("time" or "power"), fitted here on A alone
    (so each CV fold refits them on its own rows).
    time_log: the log step time the profile's time predictor gives each row: an input of its own
    (power GPs; the GP then needs that predictor to predict, GPStack.time_source).
    roofline: the workload's roofline.RooflinePrior (prior "roofmean": its prediction of `basis`).
    slope: fix the prior mean's b (only its offset a is fitted), for rows too few to fit both."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    F = np.hstack(input_columns(prior, knob_features(A, inputs), time_log, ref_log))
    xm = F.mean(axis=0)
    xs = F.std(axis=0)
    xs = np.where(xs > 1e-12, xs, 1.0)
    a = b = 0.0
    r = ly
    phys_w = None
    if prior == "physmean":
        phys_w = phys_fit(A, np.exp(ly), basis)
        ref_log = phys_log(A, phys_w, basis)
    elif prior == "roofmean":
        if roofline is None:
            raise ValueError("the roofmean prior needs a roofline prior")
        ref_log = roof_log(roofline, A, basis)
    if prior in ("refmean", "physmean", "roofmean"):
        assert ref_log is not None      # refmean is a candidate only with a reference; the others' are above
        if slope is not None:
            a, b = float(np.mean(ly - slope * ref_log)), slope
        else:
            M = np.vstack([np.ones_like(ref_log), ref_log]).T
            a, b = np.linalg.lstsq(M, ly, rcond=None)[0]
        r = ly - (a + b * ref_log)
    gpr = GaussianProcessRegressor(kernel if kernel is not None
                                   else _kernel(F.shape[1], float(np.std(r)), base),
                                   normalize_y=True, n_restarts_optimizer=restarts or 0,
                                   optimizer=_short_lbfgs if restarts is None else "fmin_l_bfgs_b",
                                   random_state=seed)
    with warnings.catch_warnings(), _one_thread():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gpr.fit((F - xm) / xs, r)
    k = gpr.kernel_
    y_scale = float(np.atleast_1d(gpr._y_train_std)[0])
    const, length, kind, noise = _kernel_parts(k)
    g = GPTarget(prior, xm, xs, np.asarray(gpr.X_train_, np.float64),
                 np.asarray(gpr.alpha_, np.float64).ravel(), np.asarray(gpr.L_, np.float64),
                 length, const, noise,
                 float(np.atleast_1d(gpr._y_train_mean)[0]), y_scale if y_scale > 0 else 1.0,
                 float(a), float(b), 1.0, ref_net if prior in WITH_REFERENCE else None,
                 kernel_type=kind, knob_inputs=inputs, phys_w=phys_w,
                 phys_basis=basis if prior == "physmean" else "", time_input=time_log is not None,
                 roofline=roofline if prior == "roofmean" else None,
                 roof_target=basis if prior == "roofmean" else "")
    return g, k


def _short_lbfgs(obj_func, initial_theta, bounds):
    """L-BFGS-B from a warm start (the all-data optimum), at most 25 iterations."""
    from scipy.optimize import minimize
    r = minimize(obj_func, initial_theta, method="L-BFGS-B", jac=True, bounds=bounds,
                 options={"maxiter": 25})
    return r.x, r.fun


def _one_thread():
    """BLAS on one thread: for these 50x50 matrices threads only add overhead (6x slower on a
    busy 2-core machine), and ptui runs beside a training job."""
    from threadpoolctl import threadpool_limits
    return threadpool_limits(1)


def _gp_candidate(name, device, A, ly, ref_log, ref_net, fold, seed, inputs="log-recip", basis="time",
                  time_log=None, time_held=None, roofline=None):
    """All-data fit plus cross-validated predictions: each fold's GP is fitted on the other folds
    (hyper-parameters re-optimised from the all-data optimum, so the held-out error and interval
    coverage are honest).  time_log: a power candidate's time input at each row (the time model's
    prediction of the profiled mode, as fitted); time_held: the same from a time model that did not
    see the row, which a held-out row gets, as a mode never profiled does at prediction (with the
    in-sample value the CV error and coverage came out optimistic: 84-96 % covered in CV where
    held-out modes saw 61-86 %).  roofline: a ProfiledPrior (rows as A's), refitted to each GP's
    own training rows (_prior_on), for gp-roofmean."""
    prior = GP_PRIOR[name]
    roof = roofline if prior == "roofmean" else None
    full, kern = gp_fit(prior, A, ly, ref_log, ref_net, seed=seed, inputs=inputs, basis=basis,
                        time_log=time_log, roofline=_prior_on(roof, A))
    mu = np.empty(len(ly))
    sd = np.empty(len(ly))
    for f in range(fold.max() + 1):
        te, tr = fold == f, fold != f
        g, _ = gp_fit(prior, A[tr], ly[tr], None if ref_log is None else ref_log[tr], ref_net,
                      seed=seed, kernel=kern, restarts=None, inputs=inputs, basis=basis,
                      time_log=None if time_log is None else time_log[tr],
                      roofline=_prior_on(roof, A, tr))
        mu[te], sd[te] = g.predict_log(device, A[te],
                                       None if time_log is None else {TIME_LOG: time_held[te]})
    return full, _CV(mu, sd)


def calibrate(z: np.ndarray, deep: bool = True) -> float:
    """Factor on the predictive sd so that the 90 % interval covers 90 % of the cross-validated
    residuals (|z| = |log error| / sd): the larger of two estimates, the 90 % quantile of |z| over
    1.645 (right when the tails are heavier than a normal's) and the root mean square of z (the
    steadier estimate when they are not: it uses every residual, where the quantile rests on the
    few largest of a few dozen).  It may widen a lot (x5) but narrow only a little (x0.8), and
    only from CALIBRATE_NARROW_MIN residuals: an interval slightly too wide costs far less than
    one too narrow, and a handful of residuals all inside it says little (10 of 10 inside happens
    one time in three when it holds exactly 90 %).  With `deep`, from CALIBRATE_DEEP_MIN
    residuals it narrows further, to the estimate's upper bound (see there)."""
    if len(z) < 10:
        return 1.0
    z = np.asarray(z, np.float64)
    est = max(np.quantile(z, 0.90) / Z90, np.sqrt(np.mean(z * z)))
    floor = 1.0
    if len(z) >= CALIBRATE_NARROW_MIN:
        floor = 0.8
    if deep and len(z) >= CALIBRATE_DEEP_MIN:
        # enough residuals to trust the estimate itself: narrow to its upper confidence bound
        # (the rms of n z's is known to about 1 / sqrt(2n) of itself)
        floor = min(floor, max(est * (1.0 + Z90 / np.sqrt(2.0 * len(z))), CALIBRATE_DEEP_FLOOR))
    return float(np.clip(est, floor, 5.0))


# calibrate() narrows an interval only from this many cross-validated residuals: with 10 (a
# 10-mode profile) the stack's CV, whose weights saw those residuals, often had all inside and
# narrowed it to 0.8, and the 90 % interval then held 84 % of the held-out power on the
# simulator at 10 modes, most of its picks over budget + 1 W coming from one such fit
# (docs/accuracy.md, issue 25).  0.9^20 = 12 %: twenty inside of twenty is some evidence
CALIBRATE_NARROW_MIN = 20

# ... and below 0.8 only from this many, to the estimate's 95 % upper bound (x1.16 at 50) and
# never below CALIBRATE_DEEP_FLOOR.  A pooled fit's 50 rows (5 of the board's own + the fleet's)
# had cross-validated residuals at 0.34-0.50 of their sd, and the held-out truth agreed (|log
# error| a median 0.3 sd, all inside the 90 % interval): the 0.8 floor left the power interval
# twice too wide, and the risk rule kept 5 % of the budget unspent (benchmarks/eval_pool.py)
CALIBRATE_DEEP_MIN = 40
CALIBRATE_DEEP_FLOOR = 0.4


# -- PowerTrain networks -----------------------------------------------------------------------
def torch_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None


# NN screen in auto: the network recipes are cross-validated fold by fold on the GPs' folds; after
# the first NN_SCREEN_FOLDS folds a recipe whose MAPE on those held-out rows is above
# NN_SCREEN_MARGIN x the best GP candidate's MAPE on the same rows stops there (it cannot
# plausibly win); the others complete all folds.  A completed recipe's CV is exactly the full one.
# Measured on 72 profiles (sim + independent corpora, 10/25/50 modes): the full CV's winner was
# kept in 71 (the one miss: 6.98 % vs 7.08 %); at 50 modes ~5 % of the recipes go past the screen.
NN_SCREEN_FOLDS = 2
NN_SCREEN_MARGIN = 1.25


def _nn_cv(X, jobs, fold, fold_ids, seed, loss):
    """CV predictions of network recipes on the given folds, all jobs in one stacked training.
    jobs: list of (key, recipe, y, ref_net); returns {key: (held-out mask, predictions)}."""
    from . import train  # torch: lazy (train imports it at its top)
    members, spec = [], []
    for key, nm, y, ref_net in jobs:
        c = train.CANDIDATES[nm]
        for f in fold_ids:
            members.append(train.Member(np.flatnonzero(fold != f), ref_net if c["from_reference"] else None,
                                        c["dropout"], seed + 10 + f, y=y))
            spec.append((key, f))
    nets = train.train_many(X, None, members, loss=loss) if members else []
    out: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    for (key, f), net in zip(spec, nets):
        te = fold == f
        mask, pred = out.setdefault(key, (np.zeros(len(fold), bool), np.full(len(fold), np.nan)))
        mask |= te
        pred[te] = net.predict_log(X[te])[0]
    return out


def _mape_on(log_pred, ly, mask) -> float:
    mask = mask & np.isfinite(log_pred)
    return float(np.mean(np.abs(np.exp(log_pred[mask] - ly[mask]) - 1.0)) * 100)


def _screen_folds(n: int, screen: bool) -> tuple:
    """Folds of the networks' first stage: all of them (no screen), else the first one
    (n >= 40: 8+ held-out rows) or two."""
    nf = n_folds(n)
    if not screen:
        return tuple(range(nf))
    return tuple(range(min(1 if n >= 40 else NN_SCREEN_FOLDS, nf)))


def _pack_jobs(jobs, fold, fold_ids, seed, loss, X) -> dict:
    d = {"X": X, "fold": fold, "fold_ids": np.asarray(fold_ids, np.int64),
         "seed": np.int64(seed), "loss": np.array(loss), "n_jobs": np.int64(len(jobs))}
    for j, (key, nm, y, ref) in enumerate(jobs):
        d[f"j{j}_key"] = np.array("|".join(key))
        d[f"j{j}_recipe"] = np.array(nm)
        d[f"j{j}_y"] = y
        if ref is not None:
            d.update({f"j{j}_ref_{k}": v for k, v in ref.to_arrays().items()})
    return d


def _unpack_jobs(z) -> list:
    jobs = []
    for j in range(int(z["n_jobs"])):
        pre = f"j{j}_ref_"
        ref = {k[len(pre):]: z[k] for k in z.files if k.startswith(pre)}
        jobs.append((tuple(str(z[f"j{j}_key"]).split("|")), str(z[f"j{j}_recipe"]),
                     np.asarray(z[f"j{j}_y"]), Net.from_arrays(ref) if ref else None))
    return jobs


class _NNWorker:
    """Network CV in a child Python process, so that its torch import and training overlap this
    process's scikit-learn import and GP fits (two or more cores).  Requests and results travel as
    plain .npz files (no pickle) in a private temporary directory, one line on the child's stdin
    per request.  Any failure of the child: the work runs here instead."""

    def __init__(self):
        import os
        import subprocess
        import sys
        import tempfile
        from pathlib import Path
        self.tmp: tempfile.TemporaryDirectory[str] | None = tempfile.TemporaryDirectory(prefix="ptui-fit-")
        self.k = 0
        self.pending: tuple[tuple, Path] | None = None
        root = str(Path(__file__).resolve().parents[3])           # the directory holding ptui/
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
            [root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
        self.proc: subprocess.Popen[str] | None = subprocess.Popen(
            [sys.executable, "-c", "from ptui.core.prediction.fit import _nn_worker_main; _nn_worker_main()"],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)

    def submit(self, *args) -> None:
        """Start _nn_cv(X, jobs, fold, fold_ids, seed, loss) in the child."""
        from pathlib import Path
        X, jobs, fold, fold_ids, seed, loss = args
        # run() and fit_model submit only to a live child (close() ends it and clears both)
        assert self.proc is not None and self.proc.stdin is not None and self.tmp is not None
        self.k += 1
        f = Path(self.tmp.name) / f"in{self.k}.npz"
        np.savez(f, **_pack_jobs(jobs, fold, fold_ids, seed, loss, X))
        self.pending = (args, f)
        try:
            self.proc.stdin.write(str(f) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def result(self) -> dict:
        assert self.pending is not None and self.proc is not None and self.proc.stdout is not None
        args, f = self.pending
        self.pending = None
        try:
            line = self.proc.stdout.readline().strip()
            if line == "ok":
                with np.load(f.with_name("out" + f.name[2:]), allow_pickle=False) as z:
                    return {key: (z["|".join(key) + "|mask"].copy(), z["|".join(key) + "|pred"].copy())
                            for key, *_ in args[1]}
        except (OSError, KeyError, ValueError):
            pass
        self.close()                             # the child failed: train here instead
        return _nn_cv(*args)

    def run(self, *args) -> dict:
        if not args[1]:
            return {}
        if self.proc is None:
            return _nn_cv(*args)
        self.submit(*args)
        return self.result()

    def close(self) -> None:
        if self.proc is not None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=2)
            except Exception:                    # noqa: BLE001 - stuck: end it
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None


class _Local:
    """The same interface, in this process."""
    proc = None

    def submit(self, *args):
        self.args = args

    def result(self):
        return _nn_cv(*self.args)

    def run(self, *args):
        return _nn_cv(*args) if args[1] else {}

    def close(self):
        pass


def _nn_worker_main() -> None:
    """The child of _NNWorker: one request path per stdin line, answer 'ok' when out*.npz is
    written ('error' if the work failed)."""
    import os
    import sys
    from pathlib import Path

    from . import train  # torch: lazy (train imports it at its top)
    train._pick_threads = lambda: 1              # the parent fits GPs on the other core
    for line in sys.stdin:
        f = Path(line.strip())
        try:
            with np.load(f, allow_pickle=False) as z:
                res = _nn_cv(z["X"], _unpack_jobs(z), z["fold"],
                             tuple(int(i) for i in z["fold_ids"]), int(z["seed"]), str(z["loss"]))
            out = {}
            for key, (mask, pred) in res.items():
                out["|".join(key) + "|mask"], out["|".join(key) + "|pred"] = mask, pred
            np.savez(f.with_name("out" + f.name[2:]), **out)
            print("ok", flush=True)
        except Exception:                        # noqa: BLE001 - the parent redoes the work
            print("error", flush=True)
    # stdin closed: every answer is written and flushed.  Leave without the interpreter's
    # teardown, which with torch loaded took 0.6-0.9 s that the parent's close() waited for.
    sys.stdout.flush()
    os._exit(0)


def _worker(parallel: bool):
    if parallel:
        try:
            return _NNWorker()
        except OSError:
            pass
    return _Local()


def _nn_jobs(targets, names):
    return [((t, nm), nm, targets[t][0], targets[t][1]) for t in targets for nm in names[t]]


def _nn_candidates(X, targets, names, gp_cvs, seed, loss, *, screen: bool, worker=None):
    """CV of the PowerTrain recipes for every target at once (same folds as the GPs).
    targets: {target: (y, ref_net)}; names: {target: recipes}; gp_cvs: {target: {name: _CV}};
    worker: an _NNWorker whose first stage (the screen folds) is already submitted, else None.
    Returns ({target: {recipe: _CV}}, {target: {recipe: screen MAPE}} for recipes stopped early)."""
    n = len(X)
    fold = folds(n, seed, X)
    nf = n_folds(n)
    jobs = _nn_jobs(targets, names)
    first = _screen_folds(n, screen)
    if worker is None:
        worker = _Local()
        worker.submit(X, jobs, fold, first, seed, loss)
    res = worker.result()
    stopped: dict = {t: {} for t in targets}
    rest = []
    for job in jobs:
        (t, nm) = job[0]
        if len(first) == nf:
            continue
        mask, pred = res[(t, nm)]
        ly = np.log(targets[t][0])
        gp_best = min((_mape_on(cv.log_pred, ly, mask) for cv in gp_cvs[t].values()), default=np.inf)
        mine = _mape_on(pred, ly, mask & _scored(gp_cvs[t], n))
        if mine > NN_SCREEN_MARGIN * gp_best:
            stopped[t][nm] = mine
        else:
            rest.append(job)
    more = worker.run(X, rest, fold, tuple(range(len(first), nf)), seed, loss)
    out: dict = {t: {} for t in targets}
    for (t, nm), (_mask, pred) in res.items():
        if nm in stopped[t]:
            continue
        if (t, nm) in more:
            m2, p2 = more[(t, nm)]
            pred = np.where(m2, p2, pred)
        ly = np.log(targets[t][0])
        pred = np.where(_scored(gp_cvs[t], n), pred, np.nan)   # scored on the GPs' rows
        resid = float(np.sqrt(np.nanmean((pred - ly) ** 2)))
        out[t][nm] = _CV(pred, np.full(n, max(resid, 1e-6)))
    return out, stopped


def _scored(cvs: dict, n: int) -> np.ndarray:
    """The rows a target's CV is scored on: those its GPs kept (outliers left out), else all.
    The networks are cross-validated on every row (their training starts before the GPs say which
    rows are outliers); their errors count on the same rows as the GPs'."""
    for cv in cvs.values():
        return np.isfinite(cv.log_pred)
    return np.ones(n, bool)


def _nn_final(X, jobs, seed, loss):
    """Train the chosen recipes on the kept modes (one stack); jobs: {target: (recipe, y, ref_net,
    resid_sd, training rows)}."""
    from . import train  # torch: lazy (train imports it at its top)
    members = []
    for nm, y, ref_net, _, rows in jobs.values():
        c = train.CANDIDATES[nm]
        members.append(train.Member(rows, ref_net if c["from_reference"] else None,
                                    c["dropout"], seed, y=y))
    nets = train.train_many(X, None, members, loss=loss)
    out = {}
    for (t, (_, y, _, resid_sd, rows)), net in zip(jobs.items(), nets):
        train.add_heads(net, X[rows], y[rows], k=8, seed=seed)
        net.resid_sd = resid_sd
        out[t] = net
    return out


def _gp_all(device, A, ly, ref_log, ref_net, fold, seed, target, times=None,
            roofline=None) -> tuple[dict, dict]:
    """Every GP candidate of a target (and their stack, when there are several): ({name: GP},
    {name: _CV}).  times: (time predictor, its log step time for each row of A, the same from
    time models that did not see the row) for power: the candidates of TIME_INPUT take it as an
    input and the stack keeps the predictor.  roofline: the workload's roofline prior with the
    rows' measurements (ProfiledPrior), a candidate's mean (gp-roofmean) on a profile of one
    batch size."""
    fulls, cvs = {}, {}
    roofline = roofline if A.shape[1] == 4 else None
    names = gp_candidates(ref_net is not None, roofline is not None)
    if len(names) < 2:                     # only a stack holds the time predictor
        times = None
    for nm in names:
        tl, th = times[1:] if times is not None and nm in TIME_INPUT else (None, None)
        fulls[nm], cvs[nm] = _gp_candidate(nm, device, A, ly, ref_log, ref_net, fold, seed,
                                           target_inputs(target), target, tl, th, roofline=roofline)
    if len(fulls) > 1:
        fulls[STACK], cvs[STACK] = _gp_stack(dict(fulls), cvs, ly)
        if any(m.time_input for m in fulls[STACK].members):
            fulls[STACK].time_source = times[0]
    return fulls, cvs


# Power candidates that take the profile's predicted step time as an input (its log, from the
# time GPs fitted just before): a step's power follows how busy each unit is, and the step time
# carries that (a CPU-bound step leaves the GPU idle; the knobs alone say so only through an
# interaction the GP must learn from a few dozen modes).  Measured: docs/accuracy-notes-gp.md.
TIME_INPUT = ("gp",)
# ... from this many profiled modes.  Held out (12 scenarios x 3 draws, gp_heldout.py): at 10
# modes the time predictions it rests on are 1.5-23 % off, and with it the power intervals covered
# 78 % on average (4 of 12 scenarios in 85-95 %) against 84 % (8 of 12) without; at 15 its power
# MAPE was better on 4 scenarios and worse on 3; at 20 better on 8, worse on 3 (by <= 0.22 points),
# intervals alike (7 of 12 in the band either way).
TIME_INPUT_MIN_MODES = 20


# Measurement outliers.  A profiled mode disturbed while it was measured (a background job during
# the mode, a power transient in the sampling window) sits far from what every other profiled
# mode predicts for it.  Left in, it pulls the GP towards it and, through the calibration on
# cross-validated residuals, widens every interval.  A row is left out of the fit when its
# cross-validated error is more than OUTLIER_Z times the typical one (|z| over the median |z| of
# the profile / 0.6745, a robust sd that one outlier cannot move): one row at a time, refitting in
# between (next_outlier), at most a tenth of the rows and OUTLIER_MAX, and only from
# OUTLIER_MIN_MODES profiled modes.  With fewer, a mode in a region no other profiled mode is near
# is as far from its cross-validated prediction as a disturbed one, and leaving it out costs more
# than the outlier would (measured at 25 modes: ptui's simulator, which has no outliers, lost
# accuracy on 3 of 6 scenarios).  Its measurement stays in the profile and in the model's
# measured figures; the fit says which rows it left out.  Measured: docs/accuracy-notes-gp.md.
OUTLIER_Z = 6.0
OUTLIER_MIN_MODES = 40
# ... and at most this many per target: each costs a refit of every GP candidate, which on a
# profile at FIT_MAX_ROWS takes seconds (a tenth of 200 rows was 20 refits, minutes).  A 50-mode
# profile, a tenth of which is 5, is fitted as before.
OUTLIER_MAX = 5


def _outlier_record(row: int, a: np.ndarray, y: float, log_pred: float, target: str) -> dict:
    """What the metrics keep of a row left out: its row, mode (and batch size), its measurement
    and what the other rows' cross-validated fit expected (time per step: a batch-aware fit's time
    target is per sample, fit_model)."""
    per = float(a[4]) if len(a) == 5 and target == "time" else 1.0
    key = f"{int(a[0])}c/{fmt_mhz(a[1])}/{fmt_mhz(a[2])}/{fmt_mhz(a[3])}"
    return {"row": int(row), "mode": key + (f" at batch {int(a[4])}" if len(a) == 5 else ""),
            "measured": float(y) * per, "cross_validated": float(np.exp(log_pred)) * per}


def distrust_outliers(measured: dict | None, A: np.ndarray, metrics: dict) -> dict | None:
    """The measured figures a decision may trust, given the rows a fit left out as outliers: the
    sd of such a measurement is widened to its distance from what the other modes predict, so a
    risk-aware decision does not take a disturbed reading (a power transient read 10 % low) as
    exact.  The figure itself stays what was measured.  Returns a new dict (measured is kept)."""
    if not measured or not any(metrics[t].get("outliers") for t in metrics):
        return measured
    out = {k: np.array(v, copy=True) for k, v in measured.items()}
    rows = np.asarray(out["modes"], np.float64).reshape(-1, 4)
    sizes = out.get("batch_size")
    for t, key in (("time", "time_ms_std"), ("power", "power_w_std")):
        for o in metrics.get(t, {}).get("outliers", []):
            a = A[o["row"]]
            hit = np.all(np.isclose(rows, a[:4]), axis=1)
            if len(a) == 5 and sizes is not None:
                hit &= np.isclose(np.asarray(sizes, np.float64), a[4])
            out[key][hit] = np.maximum(out[key][hit], abs(o["measured"] - o["cross_validated"]))
    return out


NOTE_NAMES = 5           # the rows a note names; the model's metadata lists every one
def _mode_words(recorded: str) -> str:
    """An outlier's mode as the metrics keep it ('12c/883.2/522.75/3199', maybe ' at batch 32'),
    in plain words; a text that is not a mode key is shown as it is."""
    key, sep, rest = recorded.partition(" at batch ")
    try:
        return Mode.from_key(key).describe() + (f", batch {rest}" if sep else "")
    except ValueError:
        return recorded


def outlier_note(target: str, m: dict) -> str | None:
    """The line a fit's report (CLI and app) gives the rows a target's fit left out, and those of
    a large profile's rows not fitted whose measurement is far from the fit (fitted False), else
    None."""
    rows = m.get("outliers")
    if not rows:
        return None
    unit = "ms" if target == "time" else "W"

    def each(recs: list, who: str) -> str:
        s = "; ".join(f"{_mode_words(o['mode'])}: measured {o['measured']:.4g} {unit}, {who} predict"
                      f"{'s' if who == 'the fit' else ''} {o['cross_validated']:.4g} {unit}"
                      for o in recs[:NOTE_NAMES])
        more = len(recs) - NOTE_NAMES
        return s + (f"; and {more} more (listed in the model's meta.json)" if more > 0 else "")
    left = [o for o in rows if o.get("fitted", True)]
    far = [o for o in rows if not o.get("fitted", True)]
    parts = []
    if left:
        parts.append(f"left out of the {target} fit as {'outliers' if len(left) > 1 else 'an outlier'} "
                     f"(re-profile to check): {each(left, 'the other modes')}")
    if far:
        parts.append(f"not among the fitted rows, {len(far)} measurement"
                     f"{'s are' if len(far) > 1 else ' is'} far from what the fit predicts and "
                     f"counted with a wider ± (re-profile to check): {each(far, 'the fit')}")
    return ". ".join(parts)


def _chosen_cv(cvs: dict) -> _CV:
    """The GP cross-validation a target's outliers are judged on: the stack's, else the only one."""
    return cvs[STACK] if STACK in cvs else next(iter(cvs.values()))


def next_outlier(cv: _CV, ly: np.ndarray) -> int | None:
    """The row to leave out next as a measurement outlier (see OUTLIER_Z), else None.  cv: the
    cross-validation of a fit without the rows already left out (NaN there).  One row at a time,
    refitting in between: a disturbed row also pulls its neighbours' cross-validated predictions,
    so flagging every far row of one pass would leave good rows out with it."""
    n = len(ly)
    ok = np.isfinite(cv.log_pred)
    if n < OUTLIER_MIN_MODES or n - ok.sum() >= min(max(1, n // 10), OUTLIER_MAX):
        return None
    rows = np.flatnonzero(ok)
    far = far_rows(np.abs(cv.log_pred[ok] - ly[ok]) / np.maximum(cv.log_sd[ok], 1e-9), 1)
    return int(rows[far[0]]) if len(far) else None


def far_rows(z: np.ndarray, limit: int) -> np.ndarray:
    """Rows whose |z| (error over predicted sd) is more than OUTLIER_Z times the typical one (the
    median |z| / 0.6745, a robust sd), the farthest first, at most `limit` of them."""
    scale = max(float(np.median(z)) / 0.6745, 1e-9)
    far = np.flatnonzero(z / scale > OUTLIER_Z)
    return far[np.argsort(-z[far], kind="stable")][:limit]


# -- large profiles ----------------------------------------------------------------------------
# An exact GP costs O(n^3) time to fit and, in scikit-learn's likelihood gradient, O(n^2 d) memory
# (a whole grid of 4,368 modes gave no answer in 420 s, 18,096 a MemoryError), and its prediction
# O(n) per mode.  A profile of more than FIT_MAX_ROWS rows is fitted on FIT_MAX_ROWS of them chosen
# to cover the space (fit_rows): every GP candidate, its cross-validation, the outlier refits, the
# stack, the calibration and, in auto, the network recipes, exactly as a profile of that size is.
# The other rows are predicted by the fitted model, which they did not train: their error and
# interval coverage are reported (rest_mape, rest_coverage90), and a reading far from the
# prediction is distrusted in decisions as a left-out outlier is (fitted False).  Every row stays
# in the model's measured figures.  The calibration stays the cross-validated one: the other rows
# lie between fitted ones, closer than a mode the profile never saw.  Measured on the 4,368-mode
# grid: the factor that would calibrate the sds to the other rows was 0.89 (time) and 0.59
# (power), to the 13,728 modes of the full grid that the profile did not hold 1.47 and 1.15;
# scaling to the other rows would have narrowed intervals that were already too narrow there.
# 200: on the 4,368-mode ResNet-18 grid (simulator), 100 / 200 / 300 fitted rows gave a held-out
# MAPE on the other rows of 1.3 / 0.8 / 0.7 % (time) and 0.8 / 0.5 / 0.4 % (power), and took
# 4 / 16 / 38 s (method gp, 2 busy cores); predicting the device's 18,096 modes 78 / 173 / 296 ms.
FIT_MAX_ROWS = 200
SUBSET_HOW = "chosen to cover the space (max-min distance over the knobs' log and reciprocal)"


def fit_rows(A: np.ndarray, seed: int) -> np.ndarray | None:
    """The rows of raw modes A (4 knobs, or 5 with the batch size) a fit trains on: None (all of
    them) up to FIT_MAX_ROWS, else FIT_MAX_ROWS of them in profile order, chosen by greedy max-min
    distance in the standardised log and reciprocal of the knobs (gp.spacefill, the GP's inputs
    for time; the extremes of every knob come first), seeded."""
    if len(A) <= FIT_MAX_ROWS:
        return None
    return np.sort(np.asarray(spacefill(A, FIT_MAX_ROWS, seed), np.int64))


def _log_moments(pred, device: Device, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of the log target a GP or network predicts for raw modes A (predict_modes,
    which both have, inverted from its log-normal median and sd)."""
    mid, sd = pred.predict_modes(device, A)
    return np.log(mid), np.sqrt(np.log1p((sd / mid) ** 2))


def _check_rest(pred, device: Device, A: np.ndarray, y: np.ndarray, rows: np.ndarray,
                target: str, m: dict) -> None:
    """Score a target's model, fitted on `rows` of A, on every other row (metrics m gain
    fitted_rows, profile_rows, rest_rows, rest_mape, rest_coverage90), map the outliers' rows
    back to A's, and add the other rows whose reading is far from the prediction (far_rows, from
    OUTLIER_MIN_MODES of them; at most a tenth) as outliers not fitted."""
    n = len(A)
    rest = np.setdiff1d(np.arange(n), rows)
    mu, sd = _log_moments(pred, device, A[rest])
    if getattr(pred, "per_sample", False):          # a batch-aware time GP predicts per step
        mu = mu - np.log(A[rest, 4])
    r = mu - np.log(y[rest])
    z = np.abs(r) / np.maximum(sd, 1e-9)
    for o in m.get("outliers", []):
        o["row"] = int(rows[o["row"]])
    far: np.ndarray | list = far_rows(z, max(1, len(rest) // 10)) if len(rest) >= OUTLIER_MIN_MODES else []
    if len(far):
        m.setdefault("outliers", []).extend(
            {**_outlier_record(rest[i], A[rest[i]], y[rest[i]], mu[i], target), "fitted": False}
            for i in far)
    m.update(fitted_rows=int(len(rows)), profile_rows=int(n), rest_rows=int(len(rest)),
             rest_mape=float(np.mean(np.abs(np.expm1(r))) * 100),
             rest_coverage90=float(np.mean(z <= Z90) * 100))


def subset_meta(m: dict, seed: int) -> dict:
    """What a model's trained_on records of a fit on a subset (a target's metrics m), else {}."""
    if "fitted_rows" not in m:
        return {}
    return {"fitted_rows": m["fitted_rows"], "fitted_rows_chosen": SUBSET_HOW, "fitted_rows_seed": seed}


def check_model_rest(model, A: np.ndarray, t: np.ndarray, p: np.ndarray, rows: np.ndarray,
                     measured: dict | None, seed: int) -> None:
    """A model fitted on `rows` of a profile by another route (``ptui fit --scratch``:
    train.transfer on fit_rows' subset) checked on the other rows as fit_model's are (_check_rest);
    its metadata and measured figures (every row, far readings distrusted) updated in place."""
    metrics = {k: dict(v) for k, v in model.about.metrics.items()}
    for tgt, y in (("time", t), ("power", p)):
        _check_rest(getattr(model, tgt), model.device, A, np.asarray(y, np.float64), rows, tgt,
                    metrics[tgt])
    model.tell(metrics=metrics, trained_on=dict(model.about.trained_on, modes=int(len(A)),
                                                **subset_meta(metrics["time"], seed)))
    model.measured = distrust_outliers(measured, A, metrics)


def subset_note(metrics: dict, unit: str = "modes") -> str | None:
    """The line a fit's report gives a profile fitted on a subset of its rows ({target: metrics}),
    else None."""
    first = next((m for m in metrics.values() if "fitted_rows" in m), None)
    if first is None:
        return None
    k, n = first["fitted_rows"], first["profile_rows"]
    checks = "; ".join(f"{t} MAPE {m['rest_mape']:.1f} %, 90 % interval covered "
                       f"{m['rest_coverage90']:.0f} %" for t, m in metrics.items() if "rest_mape" in m)
    return (f"fitted on {k:,} of {n:,} profiled {unit}, {SUBSET_HOW}; the other {n - k:,} checked "
            f"it: {checks}")


# -- per target, one model ---------------------------------------------------------------------
def _fit_targets(device: Device, A: np.ndarray, targets: dict, *, method: str, seed: int,
                 loss: str, progress=None, per_sample: bool = False,
                 roofline=None) -> tuple[dict, dict]:
    """_fit_all on every row of a profile up to FIT_MAX_ROWS; beyond, on fit_rows' subset, the
    other rows checking the models (_check_rest)."""
    rows = fit_rows(A, seed)
    kw = dict(method=method, seed=seed, loss=loss, progress=progress, per_sample=per_sample,
              roofline=roofline)
    if rows is None:
        return _fit_all(device, A, targets, **kw)
    if progress:
        progress(f"choosing {len(rows)} of the {len(A)} profiled rows to fit, covering the space")
    kw["roofline"] = None if roofline is None else roofline.take(rows)
    preds, metrics = _fit_all(device, A[rows], {t: (y[rows], ref) for t, (y, ref) in targets.items()},
                              **kw)
    for t, (y, _) in targets.items():
        _check_rest(preds[t], device, A, y, rows, t, metrics[t])
    return preds, metrics


def _fit_all(device: Device, A: np.ndarray, targets: dict, *, method: str, seed: int,
             loss: str, progress=None, per_sample: bool = False,
             roofline=None) -> tuple[dict, dict]:
    """Fit every target ({name: (y, ref_net)}) on raw modes A; returns ({name: predictor},
    {name: metrics}).  The GP candidates are cross-validated first, then the network recipes of
    all targets in one stacked training (screened in auto, see NN_SCREEN_FOLDS).  With both
    targets, time first: the power stack's TIME_INPUT candidates take the time GPs' prediction.
    per_sample: the time target is per sample (fit_model, several batch sizes).  roofline: the
    workload's roofline prior with the rows' measurements (ProfiledPrior; gp-roofmean among the GP
    candidates)."""
    n = len(A)
    X = features(device, A[:, :4])
    batch_knob = A.shape[1] == 5               # several batch sizes: GPs only (see fit_model)
    fold = folds(n, seed, A)
    use_nn = method == "powertrain" or (method == "auto" and torch_available() and not batch_knob)
    names = {t: NN_CANDIDATES if targets[t][1] is not None else ("scratch",) for t in targets}
    worker = None
    if use_nn and method == "auto":          # the networks' first stage runs beside the GPs
        import os
        worker = _worker((os.cpu_count() or 1) >= 2)
        worker.submit(X, _nn_jobs(targets, names), fold, _screen_folds(n, True), seed, loss)
    try:
        fulls, cvs, keep, left_out = _fit_gp_candidates(
            device, A, X, targets, fold, method=method, seed=seed, progress=progress,
            per_sample=per_sample, roofline=roofline)
    except BaseException:
        if worker is not None:
            worker.close()                       # no orphaned child on an error or Ctrl-C
        raise
    nn, stopped = _network_candidates(X, targets, names, cvs, method=method, use_nn=use_nn,
                                      worker=worker, seed=seed, loss=loss, progress=progress)
    skipped = None
    if method == "auto" and not use_nn:
        skipped = ("PowerTrain network recipes skipped: they take no batch-size input" if batch_knob
                   else "PowerTrain network recipes skipped: torch is not installed")
    preds, metrics, final_jobs = {}, {}, {}
    for t, (y, ref_net) in targets.items():
        ly = np.log(y)
        cvs[t].update(nn[t])
        scores = {nm: cv.score(ly) for nm, cv in cvs[t].items()}
        choice = _best_candidate(scores)
        best = scores[choice]
        # below x0.8 only where it was measured: a GP of one batch size (not yet the networks'
        # sd, nor a fit over (mode, batch size) pairs, whose decisions were not re-measured)
        scale = calibrate(best["_z"], deep=choice in fulls[t] and not batch_knob)
        if choice in fulls[t]:
            preds[t] = _with_reference_grids(device, fulls[t][choice], scale)
        else:
            final_jobs[t] = (choice, y, ref_net, best["cv_resid_sd"] * scale, np.flatnonzero(keep[t]))
        metrics[t] = _target_metrics(method, n, scores, choice, scale, stopped[t], skipped,
                                     left_out.get(t))
    if final_jobs:
        if progress:
            progress("training the chosen network recipe"
                     + "".join(f" ({t}: {j[0]})" for t, j in final_jobs.items()) + f" on all {n} modes")
        preds.update(_nn_final(X, final_jobs, seed, loss))
    return preds, metrics


def _fit_gp_candidates(device: Device, A: np.ndarray, X: np.ndarray, targets: dict, fold, *,
                       method: str, seed: int, progress, per_sample: bool,
                       roofline) -> tuple[dict, dict, dict, dict]:
    """Every target's GP candidates fitted on all rows and cross-validated, outliers left out;
    returns ({target: {name: fit}}, {target: {name: _CV}}, {target: the rows kept},
    {target: the outliers, as metrics say}).  powertrain fits no GP: all empty."""
    n = len(A)
    fulls: dict = {t: {} for t in targets}
    cvs: dict = {t: {} for t in targets}
    keep = {t: np.ones(n, bool) for t in targets}
    left_out: dict = {}
    if method == "powertrain":
        return fulls, cvs, keep, left_out
    for t, (y, ref_net) in targets.items():
        ref_log = ref_net.predict_log(X)[0] if ref_net is not None else None
        if progress:
            progress(stage(f"fitting {t} ({method}) on {n} "
                           f"{'(mode, batch size) pairs' if per_sample else 'modes'}"))
        times = _time_input(device, A, fulls, cvs, per_sample) if t == "power" else None
        roof = (roofline.without_times(~keep["time"]) if roofline is not None and t == "power"
                and "time" in keep else roofline)
        fulls[t], cvs[t], keep[t], gone = _fit_gps_leaving_out_outliers(
            device, A, y, ref_log, ref_net, fold, seed, t, times, roof,
            progress=progress, label=f"{t} ({method})")
        if gone:
            left_out[t] = gone
    return fulls, cvs, keep, left_out


def _time_input(device: Device, A: np.ndarray, fulls: dict, cvs: dict, per_sample: bool):
    """What the power GPs' TIME_INPUT candidates take: (the time fit, each row's time from it, each
    row's time from a model that did not see it); None without a time fit or with too few modes."""
    if not fulls.get("time") or len(A) < TIME_INPUT_MIN_MODES:
        return None
    src = fulls["time"].get(STACK) or next(iter(fulls["time"].values()))
    if per_sample:
        src.per_sample = True              # its time_log: per step, as predicted
    inside = time_log(src, device, A)
    # each row's time from a model that did not see it: the time GPs' cross-validated
    # prediction (per step), or the fit's own for a row it left out as an outlier
    held = _chosen_cv(cvs["time"]).log_pred + (np.log(A[:, 4]) if per_sample else 0.0)
    held = np.where(np.isfinite(held), held, inside)
    return src, inside, held


def _fit_gps_leaving_out_outliers(device: Device, A: np.ndarray, y: np.ndarray, ref_log, ref_net,
                                  fold, seed: int, target: str, times, roofline, *, progress,
                                  label: str) -> tuple[dict, dict, np.ndarray, list]:
    """One target's GP candidates, refitted without its worst outlier until none is left (see
    next_outlier); returns ({name: fit}, {name: _CV over every row}, the rows kept, the outliers)."""
    ly = np.log(y)
    keep = np.ones(len(A), bool)
    fulls, cvs = _gp_all(device, A, ly, ref_log, ref_net, fold, seed, target, times, roofline)
    gone: list = []
    while (i := next_outlier(_chosen_cv(cvs), ly)) is not None:
        gone.append(_outlier_record(i, A[i], y[i], _chosen_cv(cvs).log_pred[i], target))
        keep[i] = False                        # refit every GP without it, then look again
        if progress:
            progress(stage(f"fitting {label} again without {len(gone)} outlying "
                           f"measurement{'s' if len(gone) > 1 else ''}"))
        fulls, cv_kept = _gp_all(device, A[keep], ly[keep], None if ref_log is None else ref_log[keep],
                                 ref_net, folds(int(keep.sum()), seed, A[keep]), seed, target,
                                 None if times is None else
                                 (times[0], times[1][keep], times[2][keep]),
                                 None if roofline is None else roofline.take(keep))
        cvs = {nm: cv.expand(keep) for nm, cv in cv_kept.items()}
    return fulls, cvs, keep, gone


def _network_candidates(X: np.ndarray, targets: dict, names: dict, cvs: dict, *, method: str,
                        use_nn: bool, worker, seed: int, loss: str, progress) -> tuple[dict, dict]:
    """Every target's cross-validated network recipes ({target: {name: _CV}}) and those the screen
    stopped ({target: {name: MAPE on the screened folds}}); none where use_nn is false.  Closes
    the worker (auto's screen, started beside the GPs)."""
    stopped: dict = {t: {} for t in targets}
    if method == "powertrain":
        if progress:
            progress(stage(f"fine-tuning the time and power networks on {len(X)} modes"))
        nn, _ = _nn_candidates(X, targets, {t: ("transfer",) for t in targets}, cvs, seed, loss,
                               screen=False)
        return nn, stopped
    if not use_nn:
        return {t: {} for t in targets}, stopped
    assert worker is not None       # method 'auto': its first stage started beside the GPs
    if progress:
        progress("cross-validating the PowerTrain network recipes")
    try:
        return _nn_candidates(X, targets, names, cvs, seed, loss, screen=True, worker=worker)
    finally:
        worker.close()


def _best_candidate(scores: dict) -> str:
    """The candidate with the lowest cross-validated MAPE (a GP candidate on a tie)."""
    # with a stack, the single GPs are reported but not chosen: the stack's weights already
    # chose among them (measured: always the stack beat picking the CV-best single GP)
    pool = [k for k in scores if not (STACK in scores and k in GP_SPECS)]
    return min(pool, key=lambda k: (round(scores[k]["cv_mape"], 6), k not in GP_CANDIDATES))


def _with_reference_grids(device: Device, pred, sd_scale: float):
    """The chosen GP fit, calibrated, with every reference network's prediction of every mode
    worked out once (each GP looks its reference up there later)."""
    pred.sd_scale = sd_scale
    grids: dict = {}                     # per reference network (time's, power's)
    src = getattr(pred, "time_source", None)
    for g in getattr(pred, "members", [pred]) + getattr(src, "members", [src] if src else []):
        if g.ref is not None and g.ref_grid is None:
            if id(g.ref) not in grids:
                grids[id(g.ref)] = reference_grid(device, g.ref)
            g.ref_grid = grids[id(g.ref)]
    return pred


def _target_metrics(method: str, n: int, scores: dict, choice: str, scale: float, stopped: dict,
                    skipped: str | None, outliers: list | None) -> dict:
    """What the model's metadata says of one target's fit: the choice, its cross-validated figures,
    every candidate's MAPE (those the screen stopped included), and why rows or recipes are missing."""
    best = scores[choice]
    z_cal = best["_z"] / scale
    m = {"method": method, "choice": choice, "cv_mape": best["cv_mape"],
         "cv_resid_sd": best["cv_resid_sd"], "cv_coverage90": best["cv_coverage90"],
         "cv_coverage90_calibrated": float(np.mean(z_cal <= Z90) * 100),
         "sd_scale": scale, "cv_folds": n_folds(n),
         "candidates_cv_mape": {k: v["cv_mape"] for k, v in scores.items()}}
    if stopped:
        # recipes stopped by the screen: their MAPE on the screened folds' held-out rows
        m["candidates_cv_mape"].update(stopped)
        m["screened_out"] = sorted(stopped)
        m["screen"] = (f"network recipes cross-validated on {len(_screen_folds(n, True))} of "
                       f"{n_folds(n)} folds first; those above {NN_SCREEN_MARGIN:g} x the best GP's "
                       f"MAPE on the same rows stopped there")
    if skipped:
        m["note"] = skipped
    if outliers:
        m["outliers"] = outliers
    return m


def fit_one(device: Device, A: np.ndarray, y: np.ndarray, ref_net, *, method: str = "auto",
            seed: int = 0, loss: str = "mse", progress=None,
            target: str = "time", roofline=None) -> tuple[object, dict]:
    """Fit one target ("time" or "power": its GP inputs, gp.target_inputs) on raw modes A and
    positive values y; returns (predictor, metrics)."""
    preds, metrics = _fit_targets(device, np.asarray(A, np.float64),
                                  {target: (np.asarray(y, np.float64), ref_net)}, method=method,
                                  seed=seed, loss=loss, progress=progress,
                                  roofline=None if roofline is None else ProfiledPrior(roofline))
    return preds[target], metrics[target]


def fit_model(reference, device: Device, modes, times, powers, *, method: str = "auto",
              seed: int = 0, loss: str = "mse", workload: str = "custom", source: str = "",
              measured: dict | None = None, progress=None, batch_sizes=None, roofline=None):
    """Fit time and power predictors for a profile; returns a predictor.Model.  batch_sizes (one
    per mode) with more than one distinct size makes log/reciprocal batch size a GP input (the
    reference still predicts the mode, so a new batch size needs no new reference); a single size
    fits exactly as without it.  roofline: the workload's roofline.RooflinePrior for this device,
    whose prediction is one GP candidate's prior mean (gp-roofmean; one batch size only)."""
    if method not in METHODS:
        raise PtuiInputError(f"unknown method {method!r}; choose auto, gp or powertrain")
    A = raw_modes(modes)
    sizes = sorted({int(b) for b in batch_sizes}) if batch_sizes is not None else []
    if len(sizes) > 1:
        B = np.asarray(batch_sizes, np.float64).reshape(-1, 1)
        if len(B) != len(A) or np.any(B < 1):
            raise PtuiInputError("batch sizes must be positive, one per profiled mode")
        if method == "powertrain":
            raise PtuiInputError("--method powertrain cannot fit several batch sizes (its networks "
                                 "take no batch-size input); use --method gp or auto")
        A = np.hstack([A, B])
    t = np.asarray(times, np.float64)
    p = np.asarray(powers, np.float64)
    few = roofline is not None and A.shape[1] == 4 and MIN_MODES_PRIOR <= len(A) < MIN_MODES
    if len(A) < MIN_MODES and not few:
        with_prior = (f" ({MIN_MODES_PRIOR} with a workload spec's roofline prior)"
                      if MIN_MODES_PRIOR < MIN_MODES else "")
        raise PtuiInputError(f"fitting needs at least {MIN_MODES} profiled modes{with_prior}, "
                             f"got {len(A)}")
    for nm, y in (("time", t), ("power", p)):
        if y.shape != (len(A),) or not np.all(np.isfinite(y)) or np.any(y <= 0):
            raise PtuiInputError(f"{nm} values must be positive finite numbers, one per mode")
    if method == "powertrain" and not torch_available():
        raise PtuiInputError("--method powertrain trains networks and needs torch: "
                             "pip install torch==2.13.0 (CPU build; on a Jetson use NVIDIA's torch)")
    if method == "powertrain" and reference is None:
        raise PtuiInputError("--method powertrain needs a reference model to transfer from")
    t0 = time.perf_counter()
    per_sample = A.shape[1] == 5              # time per sample varies little with the batch size
    targets = {name: (y / A[:, 4] if per_sample and name == "time" else y,
                      getattr(reference, name) if reference is not None else None)
               for name, y in (("time", t), ("power", p))}
    spec_meta = roofline.spec.as_dict() if roofline is not None else None
    # the prior is refitted to the profiled modes (its GPU and CPU work, the GPU's activity and
    # the static power), the board's physics kept, the GPs then correcting what is left; each GP
    # refits it to its own training rows (ProfiledPrior)
    profiled = ProfiledPrior(roofline, t, p) if roofline is not None else None
    if few:
        preds, metrics = prior_fit(device, A, {"time": t, "power": p}, _prior_on(profiled, A),
                                   seed=seed, method=method, progress=progress)
    else:
        preds, metrics = _fit_targets(device, A, targets, method=method, seed=seed, loss=loss,
                                      progress=progress, per_sample=per_sample, roofline=profiled)
    if per_sample:
        preds["time"].per_sample = True
    kind = {"powertrain": "transfer"}.get(method, method)
    meta = {"kind": kind, "method": method, "workload": workload,
            "reference_workload": reference.about.reference_workload if reference else None,
            "reference_device": reference.device.name if reference else None,
            "trained_on": {"source": source, "modes": int(len(A)), "device": device.name,
                           **subset_meta(metrics["time"], seed)},
            **({"batch_sizes": sizes} if len(sizes) > 1 else {}),
            **({"roofline_spec": spec_meta} if spec_meta is not None else {}),
            "loss": loss, "metrics": metrics, "fit_s": round(time.perf_counter() - t0, 3),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    model = Model(device, preds["time"], preds["power"], meta)
    model.measured = distrust_outliers(measured, A, metrics)
    return model


def prior_fit(device: Device, A: np.ndarray, targets: dict, roofline, *, seed: int = 0,
              method: str = "gp", progress=None) -> tuple[dict, dict]:
    """Fewer modes than cross-validation needs, with the workload's roofline prior: per target a
    GP on the log ratio of the measurements to the prior (gp-roofmean with its slope fixed at 1:
    two or three points cannot fit a slope that extrapolates), so the prior is rescaled where the
    modes say it is off and left as it is far from them.  Its sd is the larger of the GP's and a
    floor (a GP's hyper-parameters from a handful of rows are no calibration): the prior's own
    spread times FEW_MODES_SD_SHARE for this many modes."""
    preds, metrics = {}, {}
    for t, y in targets.items():
        if progress:
            progress(stage(f"rescaling the roofline prior's {t} to {len(A)} modes"))
        ly = np.log(y)
        g, _ = gp_fit("roofmean", A, ly, None, None, seed=seed, inputs=target_inputs(t), basis=t,
                      roofline=roofline, slope=1.0)
        preds[t] = g
        metrics[t] = {"method": method, "choice": "gp-roofmean", "few_modes": True,
                      "note": f"{len(A)} profiled modes, fewer than the {MIN_MODES} that cross-"
                              f"validation needs: the roofline prior rescaled to them (not "
                              f"cross-validated; its spread at least a calibrated share of the prior's)"}
        g.sd_floor = _prior_log_sd(roofline, t) * FEW_MODES_SD_SHARE[min(len(A), max(FEW_MODES_SD_SHARE))][
            0 if t == "time" else 1]
    return preds, metrics


# the floor of prior_fit's sd after k profiled modes, as a share (time, power) of the unprofiled
# prior's log-sd: printed by benchmarks/calibrate_few_modes.py, which measures it as the prior's own
# spread is measured, on ptui's simulator alone (every catalog workload on every board, both kinds
# of spec, 90 % of the held-out errors inside the 90 % interval); on the independent generator the
# same shares are 0.17-0.20 (time) and 0.43-0.49 (power), so its intervals hold more than 90 %.
# Recalibrated (2026-11-27) after the refit got a scale for the bytes apart from the FLOPs': it
# was 0.474 / 0.442 / 0.412 (time) and 0.626 / 0.612 / 0.489 (power) at 3 / 4 / 5 modes.
# The whole prior's spread stood here before: after 3-5 modes 98-100 % of the held-out errors fell
# inside the 90 % interval and a budget decision kept a margin of a third of the budget
FEW_MODES_SD_SHARE = {3: (0.339, 0.577), 4: (0.315, 0.547), 5: (0.302, 0.445)}


def _prior_log_sd(roofline, target: str) -> float:
    """The roofline prior's own spread of a target, in log units (its predictions' sd over their
    mean is the same at every mode)."""
    p = roofline.predict(np.array([[1, roofline.device.cpu_mhz[-1], roofline.device.gpu_mhz[-1],
                                    roofline.device.mem_mhz[-1]]], np.float64))
    k = "time_ms" if target == "time" else "power_w"
    return float(np.sqrt(np.log1p((p[k + "_std"][0] / p[k][0]) ** 2)))


def fit_batch_profile(path, device, reference, *, method: str = "auto", seed: int = 0,
                      loss: str = "mse", workload: str = "custom", progress=None,
                      time_basis: str = "step"):
    """Fit time and power over (mode, batch size) on a profile with several batch sizes (time:
    the median step or the whole cycle, csvio.with_time)."""
    prof = read_batch_profile(path, device, time=time_basis)
    sizes = sorted(set(int(b) for b in prof["batch"]))
    model = fit_model(reference, device, prof["modes"], prof["time_ms"], prof["power_w"],
                      method=method, seed=seed, loss=loss, workload=workload,
                      source=f"profile {path}", measured=prof["measured"], progress=progress,
                      batch_sizes=prof["batch"])
    b0 = default_batch(sizes)
    model.tell(batch_size=b0)
    if prof["peak"]:
        model.tell(peak_mem_gb=prof["peak"])
    w = WORKLOADS.get(workload)
    if w is not None:
        model.tell(samples_per_epoch=w.samples, batches_per_epoch=w.with_batch(b0).minibatches_per_epoch)
    return model
