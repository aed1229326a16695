"""The pooled fit: one board's model from the rows of a fleet of boards of its type.

Identical units differ: a rerun of an Orin AGX's MLPerf submission drew 27-32 % more power at
equal throughput, and Xavier AGX / Nano units differ significantly in power and runtime
(research notes: fleet.md).  So the fleet's rows are not one board's.  The model here takes each
board's figures as the fleet's shape times a factor of its own, per target (log y = log f(mode) +
c_board + noise):

1. each board's factor: one least-squares fit of log y on the fleet's shape (_features: the
   reference's log prediction, the knobs' logs and, with rows enough, their squares and cross
   terms) plus a factor per board (board_corrections says why not a GP), centred on the fleet's
   typical unit; its standard error from the residual sd about that fit;
2. the board's model: ``fit_model`` on every row brought to this board's unit (y x exp(c_own -
   c_board)), its own rows as they are.  The fleet's rows count as measurements for this board
   with their spread widened by both factors' standard errors, and this board's factor's standard
   error (the one error every prediction shares) is added in quadrature to each target's
   predictive sd (GPStack.sd_shared).  It used to multiply every sd by a factor sized at the
   board's own rows, where the sd is least, which doubled the sd of the modes it did not profile.
   Measured (benchmarks/eval_pool.py, seeds 0 and 1, with the factors' squares of _features):
   median time penalty 4.43 / 2.82 -> 2.87 / 1.90 % on the simulator, none over budget + 1 W;
   8.65 / 7.12 -> 5.13 / 4.53 % on the independent generator, where seed 1 goes over budget + 1 W
   at the high-power corner in 14 picks of 80 (5 before): the shape there is off by 10-20 %, more
   than any widening by the factor error covers (docs/fleets.md);
3. above the most power any row drew on this unit (measured_power_max_w) the power prediction is
   extrapolated: its extrapolated part, log(predicted / reach), is one more sd in quadrature
   (GPStack.reach_log).  Indep seed 1: 14 -> 2 over budget + 1 W, median unchanged; the
   simulator unchanged; indep seed 0, where the extrapolation was right, 5.13 -> 8.19 % median
   (its 40-50 W picks conservative).  sd x predicted / reach instead: 5.95 % there, 10 over on
   seed 1.

With 5 rows of its own a board's factor is known to about the noise over sqrt(5); the shape
comes from all N x 5 rows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..catalogue.devices import Device
from ..catalogue.modes import Mode
from ..errors import InputError
from .fit import MIN_MODES, fit_model
from .roofline import RooflinePrior

OWN = "\x00own"               # the label of the board's own rows among the fleet's
TARGETS = ("time", "power")
SQUARES_ROWS = 3              # rows a coefficient before the factors' shape takes squares (_features)


@dataclass
class Rows:
    """Measured rows: raw modes A [n, 4], time and power, their measurement sds, and each row's
    board."""
    A: np.ndarray
    time_ms: np.ndarray
    power_w: np.ndarray
    time_ms_std: np.ndarray
    power_w_std: np.ndarray
    boards: list[str]

    def __len__(self) -> int:
        return len(self.A)

    @classmethod
    def concat(cls, parts: list["Rows"]) -> "Rows":
        def cat(k: str) -> np.ndarray:
            return np.concatenate([getattr(p, k) for p in parts])
        return cls(np.vstack([p.A for p in parts]).reshape(-1, 4), cat("time_ms"), cat("power_w"),
                   cat("time_ms_std"), cat("power_w_std"), [b for p in parts for b in p.boards])


@dataclass
class Correction:
    """One target's factor for this board against the fleet's typical unit, and its standard
    error (log units)."""
    factor: float
    log_se: float
    board_factors: dict[str, float]     # every other board's, for the record
    resid_sd: float                     # rows about the fleet's shape, after the factors


def _predict_log(pred, device: Device, A: np.ndarray) -> np.ndarray:
    mid, _ = pred.predict_modes(device, A)
    return np.log(mid)


def fleet_shape(device: Device, rows: "Rows", reference,
                prior: RooflinePrior | None) -> RooflinePrior | None:
    """Where the reference is not of this device, `prior` (a roofline prior of the workload)
    refitted to every row of the fleet, which the factors' regression takes as the fleet's shape
    instead (RooflinePrior.adapted: its GPU, CPU and power scales; the boards' factors only add
    noise to them); None on the reference's device (the reference is the shape there, an Orin
    AGX) or without a prior.  The knobs' logs alone left the shape of an Orin Nano's or an AGX
    Xavier's rows 6-14 % (power) and 22-28 % (time) off, each board's factor 3-7 % and 10-12 %
    off; with the adapted roofline 1-2 % and 3-4 %, the factors within about 1 %.  On the Orin
    AGX, beside the reference, the adapted roofline moved the decisions both ways, 0.2-1.9 points
    (benchmarks/eval_pool.py, docs/fleets.md)."""
    if prior is None or (reference is not None and reference.device == device):
        return None
    return prior.adapted(rows.A[:, :4], rows.time_ms, rows.power_w)


def _features(device: Device, A: np.ndarray, reference, tgt: str, n: int,
              shape: RooflinePrior | None = None) -> np.ndarray:
    """The fleet's shape for the factors' regression: the reference model's log prediction (when
    it is for this device) and the knobs' logs, with their squares and the GPU x memory and cores x
    CPU terms when there are rows enough (SQUARES_ROWS rows a coefficient, the boards' factors
    left out: 10 boards x 5 modes have them).  Without them the linear shape missed curvature
    that each board's factor then took up, according to which modes it profiled; measured
    (benchmarks/eval_pool.py, 10 boards x 5 modes, 4 rows a coefficient -> 3): median penalty
    on the simulator 2.10 -> 1.90 % (seed 1) with 3 -> 0 picks over budget + 1 W, on the
    independent generator 6.31 -> 5.13 % (seed 0)."""
    cols = [np.ones(len(A))]
    if reference is not None and reference.device == device:
        modes = [Mode(int(a[0]), float(a[1]), float(a[2]), float(a[3])) for a in A]
        cols.append(np.log(np.asarray(reference.predict(modes)["time_ms" if tgt == "time" else "power_w"])))
    if shape is not None:
        cols.append(np.log(np.asarray(shape.predict(A[:, :4])["time_ms" if tgt == "time" else "power_w"])))
    lg = [np.log(A[:, k]) for k in range(4)]
    lg = [(v - v.mean()) / (v.std() or 1.0) for v in lg]
    cols += lg
    if n >= SQUARES_ROWS * (len(cols) + 5):
        cols += [lg[1] ** 2, lg[2] ** 2, lg[3] ** 2, lg[2] * lg[3], lg[0] * lg[1]]
    return np.column_stack(cols)


def board_corrections(device: Device, rows: Rows, reference, *, seed: int = 0, progress=None,
                      shape: RooflinePrior | None = None) -> dict[str, tuple[Correction, np.ndarray]]:
    """Per target: this board's Correction and every row's log factor (centred on the other
    boards' mean), from one least-squares fit of log y on the fleet's shape (_features) plus a
    factor per board (a fixed effect).  A GP would be the better shape, but fitted on the rows
    themselves it absorbs most of a board's offset (5 rows of 50) and reports factors near 1 with
    no error; the regression's few coefficients cannot, and its residual sd (shape misfit and
    noise) gives each factor's standard error honestly, wide when the shape fits badly."""
    labels = np.asarray(rows.boards, dtype=object)
    others = sorted(set(rows.boards) - {OWN})
    boards = others + [OWN]
    n = len(labels)
    D = np.column_stack([(labels == b).astype(float) for b in boards])
    out = {}
    for tgt in TARGETS:
        if progress:
            progress(f"pooled fit: {tgt}, each board's factor against the fleet's shape")
        y = rows.time_ms if tgt == "time" else rows.power_w
        ly = np.log(y)
        F = _features(device, rows.A, reference, tgt, n - len(boards), shape)
        X = np.hstack([F[:, 1:], D])                 # the board factors take the intercept
        coef, *_ = np.linalg.lstsq(X, ly, rcond=None)
        resid = ly - X @ coef
        dof = max(n - np.linalg.matrix_rank(X), 1)
        resid_sd = float(np.sqrt(np.sum(resid ** 2) / dof))
        cov = resid_sd ** 2 * np.linalg.pinv(X.T @ X)
        k = F.shape[1] - 1
        raw = {b: float(coef[k + j]) for j, b in enumerate(boards)}
        m = float(np.mean([raw[b] for b in others]))
        c = {b: v - m for b, v in raw.items()}
        # this board's factor against the others' mean: its coefficient minus their average
        w = np.zeros(len(coef))
        w[k + len(others)] = 1.0
        w[k:k + len(others)] -= 1.0 / len(others)
        se = float(np.sqrt(max(float(w @ cov @ w), 0.0)))
        per_row = np.array([c[b] for b in labels])
        corr = Correction(float(np.exp(c[OWN])), se,
                          {b: float(np.exp(v)) for b, v in c.items() if b != OWN}, resid_sd)
        out[tgt] = (corr, per_row)
    return out


def fit_pooled(reference, device: Device, own: Rows, fleet: Rows, *, method: str = "auto",
               seed: int = 0, loss: str = "mse", workload: str = "custom", source: str = "",
               fleet_source: str = "", simulated_rows: int = 0, progress=None, roofline=None,
               shape_prior: RooflinePrior | None = None):
    """This board's model (predictor.Model) from its own rows and the fleet's (other boards of
    its device type, same workload and batch size); roofline: the workload's roofline prior, one
    more candidate of the fit (fit_model)."""
    if len(own) < 1:
        raise InputError("a pooled fit needs at least one profiled mode of this board (its power "
                         "and time factor against the fleet are estimated from them)")
    others = sorted(set(fleet.boards) - {OWN})
    if not others:
        raise InputError("the pool holds no rows of another board for this device, workload and "
                         "batch size: nothing to pool")
    own = Rows(own.A, own.time_ms, own.power_w, own.time_ms_std, own.power_w_std, [OWN] * len(own))
    rows = Rows.concat([fleet, own])                 # own rows last: their measurement wins
    if len(rows) < MIN_MODES:
        raise InputError(f"a pooled fit needs at least {MIN_MODES} rows in all, got {len(rows)}")
    shape = fleet_shape(device, rows, reference, shape_prior)
    corr = board_corrections(device, rows, reference, seed=seed, progress=progress, shape=shape)
    to_own, sds = {}, {}
    for tgt in TARGETS:
        c, per_row = corr[tgt]
        y = rows.time_ms if tgt == "time" else rows.power_w
        y_sd = rows.time_ms_std if tgt == "time" else rows.power_w_std
        shift = np.log(c.factor) - per_row            # 0 on this board's own rows
        fleet_row = np.asarray(rows.boards, dtype=object) != OWN
        to_own[tgt] = y * np.exp(shift)
        # a fleet row as this board's measurement: its own spread, and both factors' errors
        n_b = {b: rows.boards.count(b) for b in set(rows.boards)}
        se_b = np.array([c.resid_sd / np.sqrt(n_b[b]) for b in rows.boards])
        extra = np.where(fleet_row, np.hypot(c.log_se, se_b), 0.0)
        sds[tgt] = np.hypot(y_sd * np.exp(shift), to_own[tgt] * extra)
    modes = [Mode(int(a[0]), float(a[1]), float(a[2]), float(a[3])) for a in rows.A]
    measured = {"modes": rows.A.copy(), "time_ms": to_own["time"], "power_w": to_own["power"],
                "time_ms_std": sds["time"], "power_w_std": sds["power"]}
    if progress:
        progress(f"pooled fit: this board's model on {len(rows)} rows ({len(own)} its own)")
    model = fit_model(reference, device, modes, to_own["time"], to_own["power"], method=method,
                      seed=seed, loss=loss, workload=workload, source=source, measured=measured,
                      progress=progress, roofline=roofline)
    widened: dict[str, object] = {}
    for tgt in TARGETS:
        pred = getattr(model, tgt)
        c = corr[tgt][0]
        if hasattr(pred, "sd_shared"):
            # the factor's error is one error every prediction shares: in quadrature with each
            # mode's own sd (a factor on every sd, sized at the own rows where the sd is least,
            # widened the sd of the modes the board did not profile several times over)
            pred.sd_shared = float(np.hypot(pred.sd_shared, c.log_se))
            rec: dict[str, object] = {"shared_sd_pct": round(100 * c.log_se, 3)}
            widened[tgt] = rec
            if tgt == "power":
                # above the most power any row drew the prediction is extrapolated: its
                # extrapolated part (log predicted - log reach) is one more sd, in quadrature
                pred.reach_log = float(np.log(np.max(to_own["power"])))
                rec["beyond_reach"] = "extrapolated part as one sd"
        elif hasattr(pred, "sd_scale"):
            mid, sd = pred.predict_modes(device, own.A)
            base = float(np.median(np.sqrt(np.log1p((sd / mid) ** 2))))
            k = float(np.sqrt(1.0 + (c.log_se / max(base, 1e-6)) ** 2))
            pred.sd_scale = float(pred.sd_scale) * k
            widened[tgt] = round(k, 4)
    pooled = {
        "fleet_rows": int(len(fleet)), "own_rows": int(len(own)), "boards": len(others),
        "fleet_source": fleet_source, "simulated_rows": int(simulated_rows),
        "correction": "per-board multiplicative factor per target against the fleet's typical "
                      "unit, from this board's own rows (prediction/pooled.py)",
        "shape": "the bundled reference" if shape is None else f"the roofline prior ({shape.spec.source})",
        **{f"{t}_factor": round(corr[t][0].factor, 5) for t in TARGETS},
        **{f"{t}_factor_se_pct": round(100 * corr[t][0].log_se, 3) for t in TARGETS},
        **{f"{t}_resid_sd_pct": round(100 * corr[t][0].resid_sd, 3) for t in TARGETS},
        "board_power_factors": {b: round(v, 4) for b, v in corr["power"][0].board_factors.items()},
        # the most power any row drew, brought to this board's unit: above it a decision rests on
        # extrapolation (eval_pool --truth indep, seed 1: the rows stopped at ~40 W, the 45-50 W
        # picks were predicted 10-20 % low and went over budget)
        "measured_power_max_w": round(float(np.max(to_own["power"])), 2),
        "sd_widened": widened,
    }
    model.tell(trained_on=dict(model.about.trained_on, pooled=pooled))
    return model


def pooled_note(model) -> str | None:
    """One line saying that a model was pooled, and its correction; None for another model."""
    p = model.about.trained_on.get("pooled")
    if not p:
        return None
    sim = f", {p['simulated_rows']} of them SIMULATED" if p.get("simulated_rows") else ""
    return (f"pooled: {p['own_rows']} row{'s' * (p['own_rows'] != 1)} of this board + {p['fleet_rows']} "
            f"from {p['boards']} other "
            f"board{'s' * (p['boards'] != 1)} of the fleet{sim}; this board's power x{p['power_factor']:.3f} "
            f"(± {p['power_factor_se_pct']:.1f} %), time x{p['time_factor']:.3f} "
            f"(± {p['time_factor_se_pct']:.1f} %) against the fleet's typical unit{_reach(p)}")


def _reach(p: dict) -> str:
    top = p.get("measured_power_max_w")
    if top is None:                      # a model pooled before the key
        return ""
    return (f"; the pooled rows reach {top:.1f} W on this board: a budget above that is decided on "
            f"extrapolation (profile a mode near it)")
