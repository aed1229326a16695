"""Fitting predictors to a profile: Gaussian processes (scikit-learn) and PowerTrain's networks
(torch), chosen per target by cross-validation.

Methods (``ptui fit --method``):
  * ``gp``         : the three GP candidates of ``gp.py`` (no prior, reference as prior mean,
                     reference as an input), the best by cross-validated MAPE;
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
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .devices import Device
from .errors import PtuiInputError
from .gp import GPTarget, knob_features, raw_modes

METHODS = ("auto", "gp", "powertrain")
GP_CANDIDATES = ("gp", "gp-refmean", "gp-refinput")
NN_CANDIDATES = ("transfer", "transfer-nodropout", "scratch")
Z90 = 1.6448536269514722
CV_FOLDS = 5


@dataclass
class _CV:
    log_pred: np.ndarray
    log_sd: np.ndarray

    def score(self, ly: np.ndarray) -> dict:
        err = np.exp(self.log_pred - ly) - 1.0
        z = np.abs(self.log_pred - ly) / np.maximum(self.log_sd, 1e-9)
        return {"cv_mape": float(np.mean(np.abs(err)) * 100),
                "cv_resid_sd": float(np.sqrt(np.mean((self.log_pred - ly) ** 2))),
                "cv_coverage90": float(np.mean(z <= Z90) * 100), "_z": z}


MIN_MODES = 6


def n_folds(n: int) -> int:
    """5-fold cross-validation, fewer folds (at least 2 rows each) for very small profiles."""
    return min(CV_FOLDS, n // 2)


def folds(n: int, seed: int) -> np.ndarray:
    """Fold of each row; the same assignment as train.fit_target uses for the networks."""
    return np.random.default_rng(seed + 1).permutation(n) % n_folds(n)


# -- Gaussian processes ------------------------------------------------------------------------
NOISE_FLOOR = 0.004        # relative sd of a profiled mode's median time / mean power


def _kernel(dim: int, y_sd: float):
    """C * RBF(ARD) + white noise; the noise may not drop below NOISE_FLOOR (in the normalised
    units the regressor works in): a profiled value is a measurement, and a GP that believed it
    exact would claim sub-0.1 % certainty next to it."""
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    floor = min((NOISE_FLOOR / max(y_sd, 1e-9)) ** 2, 0.05)
    return (C(1.0, (1e-3, 1e3)) * RBF(np.ones(dim), (5e-2, 1e3))
            + WhiteKernel(max(1e-3, 2 * floor), (floor, 0.5)))


def _gp_inputs(prior: str, F: np.ndarray, ref_log: np.ndarray | None):
    return np.hstack([F, ref_log[:, None]]) if prior == "refinput" else F


def gp_fit(prior: str, A: np.ndarray, ly: np.ndarray, ref_log: np.ndarray | None, ref_net,
           *, seed: int = 0, kernel=None, restarts: int = 1) -> tuple[GPTarget, object]:
    """Fit one GP on raw modes A [n, 4] and log targets; returns (GPTarget, fitted kernel).
    restarts=None: a short local re-optimisation starting from `kernel` (for CV folds)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    F = _gp_inputs(prior, knob_features(A), ref_log)
    xm = F.mean(axis=0)
    xs = F.std(axis=0)
    xs = np.where(xs > 1e-12, xs, 1.0)
    a = b = 0.0
    r = ly
    if prior == "refmean":
        M = np.vstack([np.ones_like(ref_log), ref_log]).T
        a, b = np.linalg.lstsq(M, ly, rcond=None)[0]
        r = ly - (a + b * ref_log)
    gpr = GaussianProcessRegressor(kernel if kernel is not None else _kernel(F.shape[1], float(np.std(r))),
                                   normalize_y=True, n_restarts_optimizer=restarts or 0,
                                   optimizer=_short_lbfgs if restarts is None else "fmin_l_bfgs_b",
                                   random_state=seed)
    with warnings.catch_warnings(), _one_thread():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gpr.fit((F - xm) / xs, r)
    k = gpr.kernel_
    y_scale = float(np.atleast_1d(gpr._y_train_std)[0])
    g = GPTarget(prior, xm, xs, np.asarray(gpr.X_train_, np.float64),
                 np.asarray(gpr.alpha_, np.float64).ravel(), np.asarray(gpr.L_, np.float64),
                 np.atleast_1d(np.asarray(k.k1.k2.length_scale, np.float64)).copy(),
                 float(k.k1.k1.constant_value), float(k.k2.noise_level),
                 float(np.atleast_1d(gpr._y_train_mean)[0]), y_scale if y_scale > 0 else 1.0,
                 float(a), float(b), 1.0, ref_net if prior != "none" else None)
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


def _gp_candidate(prior, device, A, ly, ref_log, ref_net, fold, seed):
    """All-data fit plus cross-validated predictions: each fold's GP is fitted on the other folds
    (hyper-parameters re-optimised from the all-data optimum, so the held-out error and interval
    coverage are honest)."""
    full, kern = gp_fit(prior, A, ly, ref_log, ref_net, seed=seed)
    mu = np.empty(len(ly))
    sd = np.empty(len(ly))
    for f in range(fold.max() + 1):
        te, tr = fold == f, fold != f
        g, _ = gp_fit(prior, A[tr], ly[tr], None if ref_log is None else ref_log[tr], ref_net,
                      seed=seed, kernel=kern, restarts=None)
        mu[te], sd[te] = g.predict_log(device, A[te])
    return full, _CV(mu, sd)


def calibrate(z: np.ndarray) -> float:
    """Factor on the predictive sd so that the 90 % interval covers 90 % of the cross-validated
    residuals (|z| = |log error| / sd).  It may widen a lot (x5) but narrow only a little (x0.8):
    a few dozen residuals estimate that quantile with a spread of several points, and an interval
    slightly too wide costs far less than one too narrow."""
    if len(z) < 10:
        return 1.0
    return float(np.clip(np.quantile(z, 0.90) / Z90, 0.8, 5.0))


# -- PowerTrain networks -----------------------------------------------------------------------
def torch_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None


def _nn_candidates(X, y, ref_net, names, seed, loss):
    """CV predictions of the PowerTrain recipes (stacked training, same folds as the GPs)."""
    from . import train
    n = len(y)
    fold = folds(n, seed)
    jobs = [(nm, f) for nm in names for f in range(n_folds(n))]
    members = []
    for nm, f in jobs:
        c = train.CANDIDATES[nm]
        members.append(train.Member(np.flatnonzero(fold != f), ref_net if c["from_reference"] else None,
                                    c["dropout"], seed + 10 + f))
    nets = train.train_many(X, y, members, loss=loss)
    preds = {nm: np.empty(n) for nm in names}
    for (nm, f), net in zip(jobs, nets):
        te = fold == f
        preds[nm][te] = net.predict_log(X[te])[0]
    out = {}
    for nm, p in preds.items():
        resid = float(np.sqrt(np.mean((p - np.log(y)) ** 2)))
        out[nm] = _CV(p, np.full(n, max(resid, 1e-6)))
    return out


def _nn_final(X, y, ref_net, name, seed, loss, resid_sd):
    from . import train
    c = train.CANDIDATES[name]
    net = train.train_many(X, y, [train.Member(np.arange(len(y)), ref_net if c["from_reference"]
                                               else None, c["dropout"], seed)], loss=loss)[0]
    train.add_heads(net, X, y, k=8, seed=seed)
    net.resid_sd = resid_sd
    return net


# -- one target, one model ---------------------------------------------------------------------
def fit_one(device: Device, A: np.ndarray, y: np.ndarray, ref_net, *, method: str = "auto",
            seed: int = 0, loss: str = "mse", progress=None) -> tuple[object, dict]:
    """Fit one target on raw modes A and positive values y; returns (predictor, metrics)."""
    from .predictor import features
    y = np.asarray(y, np.float64)
    ly = np.log(y)
    n = len(y)
    X = features(device, A[:, :4])
    batch_knob = A.shape[1] == 5               # several batch sizes: GPs only (see fit_model)
    ref_log = ref_net.predict_log(X)[0] if ref_net is not None else None
    gp_names = () if method == "powertrain" else GP_CANDIDATES if ref_net is not None else ("gp",)
    fold = folds(n, seed)
    cvs, fulls = {}, {}
    for nm in gp_names:
        prior = {"gp": "none", "gp-refmean": "refmean", "gp-refinput": "refinput"}[nm]
        fulls[nm], cvs[nm] = _gp_candidate(prior, device, A, ly, ref_log, ref_net, fold, seed)
    skipped = None
    if method == "powertrain":
        cvs.update(_nn_candidates(X, y, ref_net, ("transfer",), seed, loss))
    elif method == "auto":
        if batch_knob:
            skipped = "PowerTrain network recipes skipped: they take no batch-size input"
        elif torch_available():
            names = NN_CANDIDATES if ref_net is not None else ("scratch",)
            if progress:
                progress("cross-validating the PowerTrain network recipes")
            cvs.update(_nn_candidates(X, y, ref_net, names, seed, loss))
        else:
            skipped = "PowerTrain network recipes skipped: torch is not installed"
    scores = {nm: cv.score(ly) for nm, cv in cvs.items()}
    choice = min(scores, key=lambda k: (round(scores[k]["cv_mape"], 6), k not in GP_CANDIDATES))
    best = scores[choice]
    scale = calibrate(best["_z"])
    if choice in fulls:
        pred = fulls[choice]
        pred.sd_scale = scale
        if pred.ref is not None:                 # the reference on every mode, looked up later
            from .gp import reference_grid
            pred.ref_grid = reference_grid(device, pred.ref)
    else:
        if progress:
            progress(f"training the chosen network recipe ({choice}) on all {n} modes")
        pred = _nn_final(X, y, ref_net, choice, seed, loss, best["cv_resid_sd"] * scale)
    z_cal = best["_z"] / scale
    metrics = {"method": method, "choice": choice, "cv_mape": best["cv_mape"],
               "cv_resid_sd": best["cv_resid_sd"], "cv_coverage90": best["cv_coverage90"],
               "cv_coverage90_calibrated": float(np.mean(z_cal <= Z90) * 100),
               "sd_scale": scale, "cv_folds": n_folds(n),
               "candidates_cv_mape": {k: v["cv_mape"] for k, v in scores.items()}}
    if skipped:
        metrics["note"] = skipped
    return pred, metrics


def fit_model(reference, device: Device, modes, times, powers, *, method: str = "auto",
              seed: int = 0, loss: str = "mse", workload: str = "custom", source: str = "",
              measured: dict | None = None, progress=None, batch_sizes=None):
    """Fit time and power predictors for a profile; returns a predictor.Model.  batch_sizes (one
    per mode) with more than one distinct size makes log/reciprocal batch size a GP input (the
    reference still predicts the mode, so a new batch size needs no new reference); a single size
    fits exactly as without it."""
    from .predictor import Model
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
    if len(A) < MIN_MODES:
        raise PtuiInputError(f"fitting needs at least {MIN_MODES} profiled modes, got {len(A)}")
    for nm, y in (("time", t), ("power", p)):
        if y.shape != (len(A),) or not np.all(np.isfinite(y)) or np.any(y <= 0):
            raise PtuiInputError(f"{nm} values must be positive finite numbers, one per mode")
    if method == "powertrain" and not torch_available():
        raise PtuiInputError("--method powertrain trains networks and needs torch: "
                             "pip install torch==2.13.0 (CPU build; on a Jetson use NVIDIA's torch)")
    if method == "powertrain" and reference is None:
        raise PtuiInputError("--method powertrain needs a reference model to transfer from")
    preds, metrics = {}, {}
    t0 = time.perf_counter()
    for name, y in (("time", t), ("power", p)):
        if progress:
            progress(f"fitting {name} ({method}) on {len(y)} modes")
        ref_net = getattr(reference, name) if reference is not None else None
        per_sample = name == "time" and A.shape[1] == 5   # time per sample varies little with B
        preds[name], metrics[name] = fit_one(device, A, y / A[:, 4] if per_sample else y, ref_net,
                                             method=method, seed=seed, loss=loss, progress=progress)
        if per_sample:
            preds[name].per_sample = True
    kind = {"powertrain": "transfer"}.get(method, method)
    meta = {"kind": kind, "method": method, "workload": workload,
            "reference_workload": reference.meta.get("reference_workload") if reference else None,
            "reference_device": reference.device.name if reference else None,
            "trained_on": {"source": source, "modes": int(len(A)), "device": device.name},
            **({"batch_sizes": sizes} if len(sizes) > 1 else {}),
            "loss": loss, "metrics": metrics, "fit_s": round(time.perf_counter() - t0, 3),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    model = Model(device, preds["time"], preds["power"], meta)
    model.measured = measured
    return model
