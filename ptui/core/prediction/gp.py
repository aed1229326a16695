"""Gaussian-process predictors: numpy inference from plain arrays (fitting lives in ``gpfit.py``).

One target (time or power) is a GP on log(target):

    log y(x) = m(x) + f(x),   f ~ GP(0, c * Matern52_ARD(length) + noise * delta)

(models saved before the Matern kernel use an RBF kernel and still load: ``kernel_type``).
Matern-5/2 rather than RBF: its functions are twice differentiable, not infinitely, so it follows
the bends where one resource takes over from another (a maximum of per-resource times) without
the ringing an RBF needs to fit them; on held-out modes of both synthetic corpora (ptui's
simulator and benchmarks/indep_corpus.py) it had lower error for every prior mean (docs/accuracy-notes-gp.md).

Inputs: for each knob (cores, CPU, GPU, EMC frequency) its log and its reciprocal, standardised;
for power the knob itself too (``target_inputs``).  A minibatch's time is close to a sum of
per-resource terms that each scale like 1/frequency and a board's power like a sum of terms that
grow with frequency, convexly (f V(f)^2), so these inputs make both targets smooth functions that
a stationary kernel interpolates well from a few dozen modes.  Models saved before power had the
linear inputs say nothing of ``inputs`` and load as log-recip.

The prior mean m(x) is one of
  * ``none``     : a constant (the GP's normalised mean);
  * ``physmean`` : a + b * log(phys(x)), phys a non-negative sum of per-resource terms fitted to the
                   profile (``phys_basis``): time as a constant plus terms in 1/f of CPU (per core
                   and in all), GPU and EMC; power as a constant plus terms in cores, cores x f_cpu,
                   cores x f_cpu^3, f_gpu, f_gpu^3 and f_emc.  A shape that extrapolates like the
                   hardware does, from the profile alone;
  * ``refmean``  : a + b * log(reference prediction) — the reference network's prediction, rescaled
                   by least squares on the profile (fitted before 2026-11-23; still loads);
  * ``refinput`` : a constant, with log(reference prediction) as a ninth input the kernel weighs
                   by its own length scale: transfer learning through the kernel;
  * ``roofmean`` : a + b * log(roofline(x)), the roofline prior of the user's workload
                   (roofline.RooflinePrior: its FLOPs and bytes against each mode's roofs), rescaled
                   by least squares on the profile.  Its configuration travels with the model as
                   plain JSON (config()["roofline"]).
The reference network travels with the model (its arrays, prefixed ``ref_``), so a model directory
needs nothing else to predict.

Uncertainty: the predictive sd of a new measurement (latent variance + fitted noise), multiplied by
``sd_scale``, a calibration factor fitted on cross-validated residuals (1 when the GP's own
intervals already covered what they claim).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

import numpy as np

from ..board.csvio import REPEAT_SD
from ..catalogue.devices import Device
from ..catalogue.modes import ModeList
from .nets import Net, Predictor, features
from .roofline import RooflinePrior

PRIORS = ("none", "refmean", "refinput", "physmean", "roofmean")
F32_MAX_ERR = REPEAT_SD   # the most a float32 kernel may move a log mean (GPTarget._block)
WITH_REFERENCE = ("refmean", "refinput")        # priors that carry the reference network


def phys_basis(A: np.ndarray, basis: str) -> np.ndarray:
    """Per-resource terms of the ``physmean`` prior for raw modes A [n, >= 4] (frequencies in GHz so
    that the cubes stay near 1).  Time: a minibatch is close to a sum of per-resource times, each
    scaling like 1/frequency (CPU work split over the cores or not).  Power: static power, per-core
    and per-domain dynamic power growing like f (fixed voltage) to f^3 (voltage rising with f)."""
    A = np.asarray(A, np.float64)
    c, fc, fg, fm = A[:, 0], A[:, 1] / 1000.0, A[:, 2] / 1000.0, A[:, 3] / 1000.0
    one = np.ones_like(c)
    if basis == "time":
        return np.stack([one, 1.0 / fc, 1.0 / (c * fc), 1.0 / fg, 1.0 / fm], axis=1)
    if basis == "power":
        return np.stack([one, c, c * fc, c * fc ** 3, fg, fg ** 3, fm], axis=1)
    raise ValueError(f"unknown physical basis {basis!r}")


PHYS_TERMS = {"time": 5, "power": 7}


def phys_fit(A: np.ndarray, y: np.ndarray, basis: str) -> np.ndarray:
    """Non-negative weights of phys_basis that fit y with the least squared relative error."""
    from scipy.optimize import nnls
    y = np.asarray(y, np.float64)
    B = phys_basis(A, basis)
    w, _ = nnls(B / y[:, None], np.ones_like(y))
    if not np.any(w > 0):                       # degenerate: a constant at the geometric mean
        w = np.zeros(B.shape[1])
        w[0] = float(np.exp(np.mean(np.log(y))))
    return w


def phys_log(A: np.ndarray, w: np.ndarray, basis: str) -> np.ndarray:
    return np.log(np.maximum(phys_basis(A, basis) @ w, 1e-12))
KERNELS = ("rbf", "matern52")


INPUTS = ("log-recip", "log-recip-linear")


def knob_features(A: np.ndarray, inputs: str = "log-recip") -> np.ndarray:
    """log and reciprocal of each knob (and, for ``log-recip-linear``, the knob itself); A is
    [n, 4] raw mode values (cores, MHz, MHz, MHz), or [n, 5] with the batch size as a fifth knob
    (a profile over several batch sizes)."""
    A = np.asarray(A, np.float64)
    A = A.reshape(-1, A.shape[-1] if A.ndim == 2 and A.shape[-1] == 5 else 4)
    return np.hstack([np.log(A), 1.0 / A] + ([A] if inputs == "log-recip-linear" else []))


def spacefill(A: np.ndarray, k: int, seed: int, start: int | None = None) -> list[int]:
    """Greedy max-min design: k rows of raw modes A (4 knobs, or 5 with the batch size), each the
    farthest from those chosen before in the standardised knob features (log and reciprocal of
    each knob), from a seeded random start.  Active profiling's initial design, the space-filling
    strategy, and the rows a large profile's fit trains on (fit.fit_rows)."""
    Z = knob_features(A)
    Z = (Z - Z.mean(0)) / np.where(Z.std(0) > 0, Z.std(0), 1.0)
    rng = np.random.default_rng(seed)
    first = int(rng.integers(len(Z))) if start is None else start
    chosen = [first]
    d = np.linalg.norm(Z - Z[first], axis=1)
    while len(chosen) < min(k, len(Z)):
        i = int(np.argmax(d + 1e-9 * rng.random(len(d))))
        chosen.append(i)
        d = np.minimum(d, np.linalg.norm(Z - Z[i], axis=1))
    return chosen


def target_inputs(target: str) -> str:
    """The kernel inputs of a target.  Time: log and reciprocal (a minibatch is close to a sum of
    per-resource terms that scale like 1/frequency).  Power: the knobs themselves as well, since
    a domain's dynamic power grows like f V(f)^2, convex in the frequency, which neither the log
    nor the reciprocal follows.  Measured with benchmarks/gp_heldout.py (2 repeats, 6 + 6
    scenarios): power MAPE on the independent generator at 50 modes 2.4-3.6 -> 1.8-3.3 %; the
    same inputs for time made it worse (gru-speech at 25 modes 7.6 -> 9.9 %)."""
    return "log-recip-linear" if target == "power" else "log-recip"


def raw_modes(modes) -> np.ndarray:
    """[n, 4] raw values of modes (Mode objects, a ModeList, or an array)."""
    if isinstance(modes, ModeList) and modes.raw is not None:
        return modes.raw
    if isinstance(modes, np.ndarray):
        return modes.astype(np.float64).reshape(-1, 4)
    modes = list(modes)
    return np.fromiter(chain.from_iterable(map(_KNOBS, modes)), np.float64,
                       count=4 * len(modes)).reshape(-1, 4)


def input_columns(prior: str, F: np.ndarray, time_log: np.ndarray | None = None,
                  ref_log: np.ndarray | None = None) -> list[np.ndarray]:
    """A GP's raw kernel input columns in the one order that fitting and prediction share: the
    knob features F, then the predicted log step time (a power GP with a time input), then the
    reference's log prediction (prior "refinput"; the other priors enter the mean, not the
    inputs)."""
    cols = [F]
    if time_log is not None:
        cols.append(np.asarray(time_log, np.float64).reshape(-1, 1))
    if prior == "refinput":
        cols.append(np.asarray(ref_log, np.float64).reshape(-1, 1))
    return cols


_KNOBS = attrgetter("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")
@dataclass
class GPTarget:
    """One target's GP: everything inference needs, as plain arrays and numbers."""
    prior: str                      # none | physmean | refinput | refmean (PRIORS)
    x_mean: np.ndarray              # [d] input scaler
    x_scale: np.ndarray             # [d]
    X: np.ndarray                   # [n, d] standardised training inputs
    alpha: np.ndarray               # [n] K^-1 (y - mean), normalised units
    L: np.ndarray                   # [n, n] lower Cholesky factor of K (with noise)
    length: np.ndarray              # [d] ARD length scales
    const: float                    # signal variance c
    noise: float                    # white-noise variance
    y_mean: float                   # target normalisation (after the prior mean)
    y_scale: float
    prior_a: float = 0.0            # refmean / physmean: m(x) = a + b * log(ref(x) or phys(x))
    prior_b: float = 0.0
    sd_scale: float = 1.0           # calibration of the predictive sd
    ref: Net | None = None          # the reference's network (refmean / refinput)
    ref_grid: np.ndarray | None = None   # the reference's log prediction on every mode of the device
    phys_w: np.ndarray | None = None     # physmean: weights of phys_basis
    phys_basis: str = ""                 # physmean: "time" | "power"
    roofline: RooflinePrior | None = None  # roofmean: the workload's roofline prior
    roof_target: str = ""                # roofmean: which of its predictions ("time" | "power")
    sd_floor: float = 0.0           # the least predictive sd, log units (a GP fitted on a handful
                                    # of modes: the prior's own spread, fit.prior_fit)
    per_sample: bool = False        # batch-size models: the GP predicts time per sample; x B here
    kernel_type: str = "rbf"        # rbf | matern52 (models saved before Matern: rbf)
    knob_inputs: str = "log-recip"  # knob features (INPUTS; models saved before the key: log-recip)
    time_input: bool = False        # power: the step time the model predicts is an input too
                                    # (given by its GPStack, whose time_source predicts it)
    _linv: np.ndarray | None = None

    kind = "gp"

    @property
    def batch_aware(self) -> bool:
        """True when the batch size is a fifth input (fitted on several batch sizes)."""
        return len(self.x_mean) - (self.prior == "refinput") - self.time_input == 5 * self._per_knob

    @property
    def _per_knob(self) -> int:
        return 3 if self.knob_inputs == "log-recip-linear" else 2

    # -- inference -------------------------------------------------------------------------
    def _ref_log(self, device: Device, A: np.ndarray, cache: dict | None = None) -> np.ndarray:
        """The reference's log prediction: looked up in ref_grid (computed once at fit time, so
        predicting the whole mode space does not run the reference network), else evaluated.
        cache: shared by the predictors of the same A, which then find the grid index once."""
        A = np.asarray(A, np.float64)[:, :4]          # the reference knows no batch size
        if self.ref_grid is not None and self.ref_grid.shape == grid_shape(device):
            c = {} if cache is None else cache
            if GRID_INDEX not in c:
                c[GRID_INDEX] = grid_index(device, A)
            idx = c[GRID_INDEX]
            if idx is not None:
                return self.ref_grid.ravel()[idx]
        assert self.ref is not None         # a prior WITH_REFERENCE, which from_arrays and fit give one
        return self.ref.predict_log(features(device, A))[0]

    def _columns(self, device: Device, A: np.ndarray, c: dict) -> tuple[list, np.ndarray]:
        """The raw kernel input columns for raw modes A (input_columns' order, as the GP was
        fitted) and the prior mean (log units).  c: a dict shared by the predictors of the same A
        (the members of both targets' stacks), which then compute the knob features and look up
        the reference once."""
        F = c.get(self.knob_inputs)
        if F is None:
            F = c[self.knob_inputs] = knob_features(A, self.knob_inputs)
        lt = r = None
        if self.time_input:
            lt = c.get(TIME_LOG)
            if lt is None:
                raise ValueError("this power GP takes the predicted step time as an input; "
                                 "predict it with its model (or stack)")
        m = np.zeros(len(F))
        if self.prior == "physmean":
            assert self.phys_w is not None      # from_arrays and fit give a physmean GP its weights
            m = self.prior_a + self.prior_b * phys_log(np.asarray(A, np.float64).reshape(len(F), -1),
                                                      self.phys_w, self.phys_basis)
        elif self.prior == "roofmean":
            assert self.roofline is not None    # from_arrays and fit give a roofmean GP its prior
            m = self.prior_a + self.prior_b * roof_log(self.roofline, A, self.roof_target, c)
        elif self.prior != "none":
            key = ("ref", id(self.ref))
            r = c.get(key)
            if r is None:
                r = c[key] = self._ref_log(device, A, c)
            if self.prior == "refmean":
                m = self.prior_a + self.prior_b * r
        return input_columns(self.prior, F, lt, r), m

    def inputs(self, device: Device, A: np.ndarray,
               cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Standardised kernel inputs and the prior mean (log units) for raw modes A; cache: see
        _columns."""
        cols, m = self._columns(device, A, {} if cache is None else cache)
        return (np.hstack(cols) - self.x_mean) / self.x_scale, m

    def kernel(self, Z1: np.ndarray, Z2: np.ndarray) -> np.ndarray:
        """k(Z1, Z2) in float64: the reference for the faster blocks that prediction uses."""
        a, b = Z1 / self.length, Z2 / self.length
        d2 = np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T, 0.0)
        if self.kernel_type == "matern52":
            r5 = np.sqrt(5.0 * d2)
            return self.const * (1.0 + r5 + r5 * r5 / 3.0) * np.exp(-r5)
        return self.const * np.exp(-0.5 * d2)

    def _block(self, Zs: np.ndarray, pre: tuple, ws: dict) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance (normalised units) for one block of augmented scaled inputs, the kernel
        computed in place on one array.  The scaled squared distances come from one product of
        augmented matrices ([a, |a|^2, 1] @ [-2 b; 1; |b|^2]); for Matern the sqrt(5) is folded
        into the length scales and the signal variance into alpha and L^-1, so each of the
        18,096 x n entries is passed over as few times as possible.

        With ``f32`` the square roots and exponentials (most of the time spent predicting the whole
        mode space) run in float32; the products with alpha and L^-1 stay in float64 (L^-1 has
        entries near 1/sqrt(noise): a float32 product would lose the small variances of modes close
        to profiled ones).  ``predict_log`` allows it only where the error bound on the log mean,
        a few float32 ulps x const x sum|alpha| x y_scale, is at most F32_MAX_ERR: the run-to-run
        floor of a measurement (REPEAT_SD, 0.4 %), below which no figure ptui gives is meaningful.
        Measured on the 144 GPs of one 25- and one 50-mode fit of every evaluation scenario: the
        actual error is at most 37 % of the bound, and at most 0.07 % where the bound allows
        float32 (up to 1e-3, the limit before 2026-11-24, 21 of them ran in float64; now 3).  The
        sd moves by less than 3e-4 in log units there (1e-3 on 8-60 synthetic modes): a few per
        cent of the sd only right next to profiled modes, where the sd itself is ~0.005.

        ws: scratch arrays reused from block to block and member to member (a fresh array of this
        size is fresh pages from the system each time: about a sixth of the time, measured)."""
        b_aug, c_alpha, c_linv_t, f32 = pre
        rows = len(Zs)
        d2 = np.matmul(Zs, b_aug, out=scratch(ws, "d2", rows, b_aug.shape[1], np.float64))
        if f32:                                  # clip and cast in one pass
            k = scratch(ws, "k", rows, d2.shape[1], np.float32)
            np.maximum(d2, 0.0, out=k, casting="unsafe")
        else:
            k = np.maximum(d2, 0.0, out=d2)
        if self.kernel_type == "matern52":       # (1 + r + r^2 / 3) * exp(-r), r = sqrt(5) * distance
            r = np.sqrt(k, out=scratch(ws, "r", rows, k.shape[1], k.dtype))
            k *= 1.0 / 3.0
            k += 1.0
            k += r
            np.negative(r, out=r)
            np.exp(r, out=r)
            k *= r
        else:
            k *= -0.5
            np.exp(k, out=k)
        if f32:
            K = scratch(ws, "K", rows, k.shape[1], np.float64)
            K[...] = k
        else:
            K = k
        v = np.matmul(K, c_linv_t, out=scratch(ws, "v", rows, c_linv_t.shape[1], np.float64))
        return K @ c_alpha, self.const + self.noise - np.einsum("ij,ij->i", v, v)

    def _scaled_inputs(self, device: Device, A: np.ndarray, cache: dict,
                       inv_len: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows [a, |a|^2, 1] that _block takes (a: the standardised inputs divided by the
        length scales) and the prior mean: inputs() written column by column into one array
        (Fortran order, so that each column is one contiguous pass) and nothing else copied."""
        cols, m = self._columns(device, A, cache)
        dim, given = len(self.x_mean), sum(c.shape[1] for c in cols)
        if given != dim:
            raise ValueError(f"this GP takes {dim} inputs per mode; the modes give {given}")
        scale = inv_len / self.x_scale
        shift = self.x_mean * scale
        out = np.empty((dim + 2, len(m)))          # transposed: row j is input column j
        j = 0
        for c in cols:
            k = c.shape[1]
            np.multiply(c.T, scale[j:j + k, None], out=out[j:j + k])
            out[j:j + k] -= shift[j:j + k, None]
            j += k
        np.einsum("ji,ji->i", out[:dim], out[:dim], out=out[dim])
        out[dim + 1] = 1.0
        return out.T, m

    def predict_log(self, device: Device, A: np.ndarray,
                    cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Mean and sd of log(target) for raw modes A [n, 4] (sd of a new measurement); cache:
        see _columns()."""
        if self._linv is None:
            self._linv = np.linalg.inv(self.L)
        cache = {} if cache is None else cache
        inv_len = (np.sqrt(5.0) if self.kernel_type == "matern52" else 1.0) / self.length
        a_aug, m = self._scaled_inputs(device, A, cache, inv_len)
        b = self.X * inv_len
        b_aug = np.vstack([-2.0 * b.T, np.ones((1, len(b))), (b * b).sum(1)[None, :]])
        f32 = 2.4e-7 * self.const * float(np.abs(self.alpha).sum()) * self.y_scale <= F32_MAX_ERR
        pre = (b_aug, self.const * self.alpha, self.const * self._linv.T, f32)
        n = len(a_aug)
        step = 2048                                       # bounded memory, cache-sized blocks
        mu = np.empty(n)
        var = np.empty(n)
        ws = cache.setdefault(SCRATCH, {})
        for s in range(0, n, step):
            mu[s:s + step], var[s:s + step] = self._block(a_aug[s:s + step], pre, ws)
        mu *= self.y_scale
        mu += self.y_mean
        mu += m
        if self.per_sample:
            mu += np.log(np.asarray(A, np.float64)[:, 4])
        np.maximum(var, 1e-12, out=var)
        sd = np.sqrt(var, out=var)
        sd *= self.y_scale * self.sd_scale
        if self.sd_floor > 0:
            np.maximum(sd, self.sd_floor, out=sd)
        return mu, sd

    def predict_modes(self, device: Device, A: np.ndarray,
                      cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        mu, sd = self.predict_log(device, A, cache)
        mid = np.exp(mu)
        return mid, mid * np.sqrt(np.expm1(sd ** 2))

    # -- plain-array storage ---------------------------------------------------------------
    def config(self) -> dict:
        return {"kind": "gp", "prior": self.prior, "const": self.const, "noise": self.noise,
                "y_mean": self.y_mean, "y_scale": self.y_scale, "prior_a": self.prior_a,
                "prior_b": self.prior_b, "sd_scale": self.sd_scale,
                **({"per_sample": True} if self.per_sample else {}),
                **({"phys_basis": self.phys_basis} if self.prior == "physmean" else {}),
                **({"roofline": self.roofline.config(), "roof_target": self.roof_target}
                   if self.roofline is not None else {}),
                **({"time_input": True} if self.time_input else {}),
                **({"sd_floor": self.sd_floor} if self.sd_floor > 0 else {}),
                "kernel_type": self.kernel_type, "inputs": self.knob_inputs}

    def to_arrays(self) -> dict[str, np.ndarray]:
        d = {"x_mean": self.x_mean, "x_scale": self.x_scale, "X": self.X, "alpha": self.alpha,
             "L": self.L, "length": self.length}
        if self.ref is not None:
            d.update({f"ref_{k}": v for k, v in self.ref.to_arrays().items()})
        if self.ref_grid is not None:
            d["grid_ref"] = self.ref_grid
        if self.phys_w is not None:
            d["phys_w"] = self.phys_w
        return d

    @classmethod
    def from_arrays(cls, cfg: dict, d) -> "GPTarget":
        prior = cfg.get("prior")
        if prior not in PRIORS:
            raise ValueError(f"unknown GP prior {prior!r}")
        ref = grid = None
        if prior in WITH_REFERENCE:
            ref = Net.from_arrays({k[4:]: d[k] for k in d if k.startswith("ref_")})
            grid = np.asarray(d["grid_ref"], np.float64) if "grid_ref" in d else None
        x_mean, x_scale, X, alpha, L, length = (np.asarray(d[k], np.float64) for k in
                                                ("x_mean", "x_scale", "X", "alpha", "L", "length"))
        const, noise, y_mean, y_scale = (float(cfg[k]) for k in ("const", "noise", "y_mean", "y_scale"))
        g = cls(prior, x_mean, x_scale, X, alpha, L, length, const, noise, y_mean, y_scale,
                float(cfg.get("prior_a", 0.0)), float(cfg.get("prior_b", 0.0)),
                float(cfg.get("sd_scale", 1.0)), ref, grid)
        if prior == "physmean":
            if "phys_w" not in d:
                raise ValueError("a physmean GP needs its phys_w array")
            g.phys_w = np.asarray(d["phys_w"], np.float64)
            g.phys_basis = str(cfg.get("phys_basis", ""))
        if prior == "roofmean":
            if not isinstance(cfg.get("roofline"), dict):
                raise ValueError("a roofmean GP needs its roofline configuration")
            g.roofline = RooflinePrior.from_config(cfg["roofline"])
            g.roof_target = str(cfg.get("roof_target", ""))
        g.per_sample = bool(cfg.get("per_sample", False))
        g.kernel_type = str(cfg.get("kernel_type", "rbf"))      # models before the key: RBF
        g.knob_inputs = str(cfg.get("inputs", "log-recip"))     # models before the key
        g.time_input = cfg.get("time_input", False) is True     # models before 2026-11-24: none
        g.sd_floor = float(cfg.get("sd_floor", 0.0))
        g.check()
        return g

    def check(self) -> None:
        if self.knob_inputs not in INPUTS:
            raise ValueError(f"unknown GP inputs {self.knob_inputs!r}")
        n, dim = self.X.shape if self.X.ndim == 2 else (-1, -1)
        k = self._per_knob                                        # features per knob
        want = tuple(k * knobs + (self.prior == "refinput") + self.time_input
                     for knobs in (4, 5))                                         # 5: batch size
        if dim not in want or self.x_mean.shape != (dim,) or self.x_scale.shape != (dim,) \
                or self.length.shape != (dim,) or self.alpha.shape != (n,) or self.L.shape != (n, n):
            raise ValueError("GP array shapes do not match each other")
        arrays = [self.x_mean, self.x_scale, self.X, self.alpha, self.L, self.length]
        scalars = [self.const, self.noise, self.y_mean, self.y_scale, self.prior_a, self.prior_b,
                   self.sd_scale, self.sd_floor]
        if not all(np.all(np.isfinite(a)) for a in arrays) or not np.all(np.isfinite(scalars)):
            raise ValueError("non-finite GP parameters")
        if self.const <= 0 or self.noise < 0 or self.y_scale <= 0 or self.sd_scale <= 0 \
                or self.sd_floor < 0 \
                or np.any(self.length <= 0) or np.any(self.x_scale <= 0):
            raise ValueError("GP scales must be positive")
        if self.kernel_type not in KERNELS:
            raise ValueError(f"unknown GP kernel {self.kernel_type!r}")
        if self.per_sample and not self.batch_aware:
            raise ValueError("a per-sample GP needs the batch size as an input")
        if (self.prior in WITH_REFERENCE) != (self.ref is not None):
            raise ValueError("GP prior and reference arrays disagree")
        if self.prior == "physmean":
            if self.phys_basis not in PHYS_TERMS or self.phys_w is None \
                    or self.phys_w.shape != (PHYS_TERMS[self.phys_basis],) \
                    or not np.all(np.isfinite(self.phys_w)) or np.any(self.phys_w < 0) \
                    or not np.any(self.phys_w > 0):
                raise ValueError("a physmean GP needs non-negative finite weights for its basis")
        if self.prior == "roofmean" and (self.roofline is None
                                         or self.roof_target not in ("time", "power")):
            raise ValueError("a roofmean GP needs a roofline prior and its target")
        if self.ref_grid is not None and not np.all(np.isfinite(self.ref_grid)):
            raise ValueError("non-finite reference grid")


def roof_log(prior: RooflinePrior, A: np.ndarray, target: str, cache: dict | None = None) -> np.ndarray:
    """The roofline prior's log prediction of one target for raw modes A (the first four
    columns: the roofline knows the spec's batch size only); cache: shared by the predictors of
    the same A, so the stack's members and both targets compute it once."""
    c = {} if cache is None else cache
    key = ("roof", id(prior))
    if key not in c:
        c[key] = prior.log_predict(np.asarray(A, np.float64).reshape(len(A), -1)[:, :4])
    return c[key][target]


def scratch(ws: dict, name: str, rows: int, cols: int, dtype) -> np.ndarray:
    """A [rows, cols] array of dtype from the scratch dict ws: the first rows of a buffer kept under
    (name, cols, dtype), grown when too small.  Its contents are garbage until written."""
    key = (name, cols, np.dtype(dtype).str)
    buf = ws.get(key)
    if buf is None or len(buf) < rows:
        buf = ws[key] = np.empty((rows, cols), dtype)
    return buf[:rows]


def grid_shape(device: Device) -> tuple[int, int, int, int]:
    return (device.max_cores, len(device.cpu_mhz), len(device.gpu_mhz), len(device.mem_mhz))


def grid_index(device: Device, A: np.ndarray) -> np.ndarray | None:
    """Flat index of each raw mode in the device's (cores, CPU, GPU, EMC) table; None when any
    mode is off the table."""
    A = np.asarray(A, np.float64).reshape(-1, 4)
    shape = grid_shape(device)
    parts = [A[:, 0].astype(np.int64) - 1]
    ok = (A[:, 0] == np.round(A[:, 0])) & (parts[0] >= 0) & (parts[0] < shape[0])
    for k, table in ((1, device.cpu_mhz), (2, device.gpu_mhz), (3, device.mem_mhz)):
        t = np.asarray(table, np.float64)
        i = np.clip(np.searchsorted(t, A[:, k]), 0, len(t) - 1)
        ok &= np.abs(t[i] - A[:, k]) < 1e-6
        parts.append(i)
    if not ok.all():
        return None
    return np.ravel_multi_index(tuple(parts), shape)


def reference_grid(device: Device, ref) -> np.ndarray:
    """The reference network's log prediction on every (cores, CPU, GPU, EMC) combination."""
    shape = grid_shape(device)
    axes = np.meshgrid(np.arange(1, shape[0] + 1), device.cpu_mhz, device.gpu_mhz, device.mem_mhz,
                       indexing="ij")
    A = np.stack([a.ravel() for a in axes], axis=1).astype(np.float64)
    return ref.predict_log(features(device, A))[0].reshape(shape)


@dataclass
class GPStack:
    """A weighted combination of GP candidates of one target (stacking): mean = sum w_i mu_i; the
    weights (non-negative, summing to 1) are fitted on the candidates' cross-validated predictions.

    The variance (``spread``):
      * ``members`` (fits from 2026-11-24): every member counts equally, whatever its weight:
        (1/m) sum (sd_i^2 + (mu_i - mean)^2).  The weights are fitted on a few dozen predictions;
        a member they drop still says how far a plausible model of the same profile lands, which
        is uncertainty the weighted mixture leaves out (measured on 12 scenarios x 5 draws: the
        mean distance of a draw's held-out coverage from 90 % fell in all four corpus/size groups,
        by 0.1-1.4 points, and its sd over draws by 5-24 %; docs/accuracy-notes-gp.md);
      * ``mixture`` (older model directories, which load as saved): the weighted mixture's,
        sum w_i (sd_i^2 + mu_i^2) - mean^2.
    Either times sd_scale^2.  Stored as each member's arrays prefixed ``m<i>_`` and their configs
    in order."""
    members: list
    weights: np.ndarray
    sd_scale: float = 1.0
    spread: str = "members"
    time_source: Predictor | None = None   # power: the time predictor members with time_input use
    sd_shared: float = 0.0      # an error every prediction shares (log units), added in quadrature
    #                             after sd_scale: a pooled model's board factor (prediction/pooled.py)
    reach_log: float | None = None  # the log of the most its rows measured (a pooled power stack:
    #                             prediction/pooled.py): a prediction mu above it gets mu - reach_log
    #                             more sd in quadrature, its extrapolated part as one sd

    kind = "gp"

    @property
    def per_sample(self) -> bool:
        return self.members[0].per_sample

    @per_sample.setter
    def per_sample(self, value: bool) -> None:
        for m in self.members:
            m.per_sample = value

    def predict_log(self, device: Device, A: np.ndarray,
                    cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """cache: a dict the caller may pre-fill with TIME_LOG, the log step time of A that the
        model's time predictor (this stack's time_source) already computed."""
        shared: dict = {} if cache is None else cache
        if TIME_LOG not in shared and any(m.time_input for m in self.members):
            if self.time_source is None:
                raise ValueError("this power stack takes the predicted step time as an input but "
                                 "has no time predictor")
            shared[TIME_LOG] = time_log(self.time_source, device, A)
        every = self.spread == "members"
        parts = [(w, *m.predict_log(device, A, shared)) for w, m in zip(self.weights, self.members)
                 if w > 0 or every]
        mu, var = stack_moments([p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts],
                                self.spread)
        sd = np.sqrt(var) * self.sd_scale
        if self.sd_shared > 0:
            sd = np.hypot(sd, self.sd_shared)
        if self.reach_log is not None:
            sd = np.hypot(sd, np.maximum(mu - self.reach_log, 0.0))
        return mu, sd

    def predict_modes(self, device: Device, A: np.ndarray,
                      cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        mu, sd = self.predict_log(device, A, cache)
        mid = np.exp(mu)
        return mid, mid * np.sqrt(np.expm1(sd ** 2))

    def config(self) -> dict:
        return {"kind": "gp-stack", "weights": [float(w) for w in self.weights],
                "sd_scale": self.sd_scale, "spread": self.spread,
                "members": [m.config() for m in self.members],
                **({"sd_shared": self.sd_shared} if self.sd_shared > 0 else {}),
                **({"reach_log": self.reach_log} if self.reach_log is not None else {}),
                **({"time_source": self.time_source.config()} if self.time_source is not None else {})}

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The members' arrays (prefixed m<i>_) and, for a power stack with a time input, its time
        predictor's (prefixed time_: the model directory then holds that predictor twice, in
        time.npz and here, so that this file predicts on its own)."""
        d = {f"m{i}_{k}": v for i, m in enumerate(self.members) for k, v in m.to_arrays().items()}
        if self.time_source is not None:
            d.update({f"{TIME_PREFIX}{k}": v for k, v in self.time_source.to_arrays().items()})
        return d

    @classmethod
    def from_arrays(cls, cfg: dict, d) -> "GPStack":
        cfgs = cfg.get("members")
        w = np.asarray(cfg.get("weights"), np.float64)
        if not isinstance(cfgs, list) or not cfgs or w.shape != (len(cfgs),):
            raise ValueError("GP stack: members and weights do not match")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or abs(w.sum() - 1.0) > 1e-6:
            raise ValueError("GP stack weights must be non-negative and sum to 1")
        members = []
        for i, mc in enumerate(cfgs):
            if not isinstance(mc, dict) or mc.get("kind") != "gp":
                raise ValueError("GP stack member is not a GP")
            pre = f"m{i}_"
            members.append(GPTarget.from_arrays(mc, {k[len(pre):]: d[k] for k in d if k.startswith(pre)}))
        scale = float(cfg.get("sd_scale", 1.0))
        if not np.isfinite(scale) or scale <= 0:
            raise ValueError("GP scales must be positive")
        spread = cfg.get("spread", "mixture")           # saved before 2026-11-24: the mixture's
        if spread not in SPREADS:
            raise ValueError(f"GP stack spread must be one of {', '.join(SPREADS)}")
        source = None
        tcfg = cfg.get("time_source")
        if tcfg is not None:
            sub = {k[len(TIME_PREFIX):]: d[k] for k in d if k.startswith(TIME_PREFIX)}
            if not isinstance(tcfg, dict) or tcfg.get("kind") not in ("gp", "gp-stack"):
                raise ValueError("a power stack's time predictor must be a GP")
            source = (GPStack if tcfg["kind"] == "gp-stack" else GPTarget).from_arrays(tcfg, sub)
            if getattr(source, "time_source", None) is not None or any(
                    getattr(m, "time_input", False) for m in getattr(source, "members", [source])):
                raise ValueError("a power stack's time predictor cannot itself take a time input")
        if any(m.time_input for m in members) and source is None:
            raise ValueError("GP stack members take the predicted time as an input but the stack "
                             "has no time predictor")
        shared = float(cfg.get("sd_shared", 0.0))
        if not np.isfinite(shared) or shared < 0:
            raise ValueError("a GP stack's shared sd must be a finite non-negative number")
        reach = cfg.get("reach_log")
        if reach is not None:
            reach = float(reach)
            if not np.isfinite(reach):
                raise ValueError("a GP stack's reach must be a finite number")
        return cls(members, w, scale, spread, source, shared, reach)


SCRATCH = "scratch"          # cache key: GPTarget._block's scratch arrays
GRID_INDEX = "grid_index"    # cache key: the modes' flat index in the device's table (or None)
TIME_LOG = "time_log"        # cache key: the log step time the model predicts for the modes at hand
TIME_PREFIX = "time_"        # array prefix of a power stack's time predictor


def time_log(source, device: Device, A: np.ndarray) -> np.ndarray:
    """The log step time a GP time predictor (GPTarget or GPStack) predicts for raw modes A: the
    input of power GPs with ``time_input`` (a step's power follows how busy each unit is, which the
    step time says: a CPU-bound step leaves the GPU idle)."""
    return np.asarray(source.predict_log(device, np.asarray(A, np.float64))[0], np.float64)


SPREADS = ("members", "mixture")


def stack_moments(weights, mus, sds, spread: str = "members") -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance (log units, before sd_scale) of a stack from its members' means and sds
    (GPStack's rules; `spread` names the variance's).  With "members" every member must be given,
    whatever its weight."""
    w = np.asarray(weights, np.float64)
    mu = sum(wi * mi for wi, mi in zip(w, mus))
    if spread == "members":
        var = sum(si * si + (mi - mu) ** 2 for mi, si in zip(mus, sds)) / len(mus)
    else:
        var = sum(wi * (si * si + mi * mi) for wi, mi, si in zip(w, mus, sds)) - mu * mu
    return mu, np.maximum(var, 1e-12)


def stack_weights(P: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative weights summing to 1 for the columns of P (cross-validated log predictions of
    each candidate) that best fit y in least squares (the sum enforced by a heavily weighted extra
    row)."""
    from scipy.optimize import nnls
    k = P.shape[1]
    lam = 100.0 * max(1.0, float(np.abs(P).max()))
    w, _ = nnls(np.vstack([P, np.full((1, k), lam)]), np.r_[y, lam])
    return w / w.sum() if w.sum() > 0 else np.full(k, 1.0 / k)
