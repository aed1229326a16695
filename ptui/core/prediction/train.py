"""Training the PowerTrain networks with torch (the only module that imports it).

* reference: a fresh network trained on a large corpus (PowerTrain: 4,368 modes of ResNet-18);
* transfer:  the reference body with its last layer replaced by a fresh one, fine-tuned on ~50
             profiled modes of a new workload (or of another device);
* scratch:   the same network trained from random weights on the same modes (the NN baseline).
Hyper-parameters as in the paper: Adam lr 1e-3, MSE loss, 100 epochs, batch 32, 10 % validation,
keep the best-validation weights.  Inputs are standardised exactly as scikit-learn's StandardScaler
does (mean, population sd; a test checks the equivalence) without importing scikit-learn here.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from ..errors import InputError
from ..progress import stage
from .predictor import Model, Net, features

try:
    import torch
except ImportError as e:  # pragma: no cover - exercised on machines without torch
    raise ImportError("training needs PyTorch: pip install torch==2.13.0 (CPU build) — on a "
                      "Jetson use NVIDIA's torch") from e



def _pick_threads() -> int:
    """Two threads halve the time of these small stacked networks on an idle machine; on a busy
    one (a training job beside ptui) extra OpenMP threads only spin against it, so use one."""
    cpus = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0] > max(0.5, cpus - 0.5)       # another job keeps most cores busy
    except OSError:
        busy = False
    return 1 if busy or cpus < 2 else 2

HIDDEN = (256, 128, 64)
DROPOUT = (0.4, 0.3, 0.0)


class TrainError(InputError):
    pass


@dataclass
class Member:
    """One network to train: its training rows, initial weights and dropout."""
    rows: np.ndarray                      # indices into X / y
    init: Net | None = None               # reference to transfer from (fresh last layer)
    dropout: tuple = DROPOUT
    seed: int = 0
    y: np.ndarray | None = None           # this member's own targets (else train_many's y)


def train_many(X: np.ndarray, y: np.ndarray | None, members: list[Member], *, epochs: int = 100,
               lr: float = 1e-3, batch: int = 32, loss: str = "mse", val_frac: float = 0.1
               ) -> list[Net]:
    """Train several independent networks at once, stacked along a member axis.

    Each member has its own parameters, data, shuffles, dropout masks, validation split and
    best-validation checkpoint; Adam is elementwise and the losses are summed, so every member
    follows exactly the algorithm of a lone fit (the random streams differ) — only the Python and
    dispatch overhead is shared, and cross-validation costs little more than one fit.  A member
    with its own targets (Member.y, one per row of X) trains on those: the time and the power
    networks of a profile then train in one stack."""
    if loss not in ("mse", "mape"):
        raise TrainError(f"unknown loss {loss!r}; use mse or mape")
    lys = _log_targets(X, y, members)
    torch.set_num_threads(_pick_threads())
    M = len(members)
    widths = (4,) + HIDDEN + (1,)
    rng = np.random.default_rng([m.seed for m in members])
    torch.manual_seed(int(rng.integers(2 ** 31)))
    scal, xs, ys, tr_idx, va_idx = [], [], [], [], []
    Ws = [np.empty((M, a, b), np.float32) for a, b in zip(widths, widths[1:])]
    bs = [np.empty((M, 1, b), np.float32) for b in widths[1:]]
    for k, m in enumerate(members):
        rows = np.asarray(m.rows)
        xm, xsd, ym, ysd = _scaling(m.init, X[rows], lys[k][rows])
        scal.append((xm, xsd, ym, ysd))
        xs.append(((X - xm) / xsd).astype(np.float32))
        ys.append(((lys[k] - ym) / ysd).astype(np.float32))
        mr = np.random.default_rng(m.seed)      # the split first, then the weights: one stream
        va, tr = _validation_split(rows, mr, val_frac)
        va_idx.append(va)
        tr_idx.append(tr)
        _init_weights(k, m.init, mr, widths, Ws, bs)
    Xt = torch.from_numpy(np.stack(xs))                      # [M, n, 4]
    Yt = torch.from_numpy(np.stack(ys))                      # [M, n]
    params = [torch.nn.Parameter(torch.from_numpy(w)) for w in Ws] + \
             [torch.nn.Parameter(torch.from_numpy(b)) for b in bs]
    drop = torch.tensor([[list(m.dropout)] for m in members], dtype=torch.float32)  # [M,1,3]
    ysd_t = torch.tensor([s[3] for s in scal], dtype=torch.float32).unsqueeze(1)
    best_params = _train_stack(Xt, Yt, params, drop, tr_idx, va_idx, rng, _criterion(loss, ysd_t),
                               epochs=epochs, lr=lr, batch=batch)
    return [_net_of(best_params, k, scal[k]) for k in range(M)]


def _log_targets(X: np.ndarray, y: np.ndarray | None, members: list[Member]) -> list[np.ndarray]:
    """Each member's targets (its own, or `y`), one per row of X, in log; TrainError unless all
    are positive and finite."""
    lys = []
    for m in members:
        t = np.asarray(m.y if m.y is not None else y, np.float64)
        if t.shape != (len(X),) or np.any(~np.isfinite(t)) or np.any(t <= 0):
            raise TrainError("targets must be positive finite numbers")
        lys.append(np.log(t))
    return lys


def _scaling(init: Net | None, X_rows: np.ndarray, ly_rows: np.ndarray) -> tuple:
    """(x mean, x sd, log-target mean, log-target sd) that standardise a member's inputs and targets:
    the reference's input scaling when it transfers, else its training rows'."""
    if init is not None:
        xm, xsd = init.x_mean, init.x_scale             # keep the reference's input scaling
    else:
        xm = X_rows.mean(axis=0)
        xsd = X_rows.std(axis=0)
        xsd = np.where(xsd > 0, xsd, 1.0)
    return xm, xsd, float(ly_rows.mean()), float(ly_rows.std()) or 1.0


def _validation_split(rows: np.ndarray, mr: np.random.Generator, val_frac: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(validation rows, training rows), shuffled; under 10 rows none is held out and all serve
    as both."""
    perm = rows[mr.permutation(len(rows))]
    n_val = max(1, int(round(val_frac * len(rows)))) if len(rows) >= 10 else 0
    return (perm[:n_val], perm[n_val:]) if n_val else (perm, perm)


def _init_weights(k: int, init: Net | None, mr: np.random.Generator, widths: tuple,
                  Ws: list, bs: list) -> None:
    """Member k's initial weights into the stacks Ws, bs: the reference's body, or PyTorch's
    default init; always a fresh last layer."""
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        bound = 1.0 / np.sqrt(a)
        if init is not None and i < len(widths) - 2:
            Ws[i][k], bs[i][k, 0] = init.layers[i]
        else:
            Ws[i][k] = mr.uniform(-bound, bound, (a, b))
            bs[i][k, 0] = mr.uniform(-bound, bound, b)


def _forward(W: list, B: list, drop, xb, train: bool):
    """The stacked networks' output for inputs xb [M, rows, 4]; dropout only while training."""
    h = xb
    for i in range(len(W)):
        h = torch.baddbmm(B[i], h, W[i])
        if i < len(W) - 1:
            h = torch.relu(h)
            if train:
                p = drop[:, :, i:i + 1]
                keep = (torch.rand_like(h) >= p).float()
                h = h * keep / (1.0 - p)
    return h.squeeze(-1)


def _criterion(loss: str, ysd_t):
    """Each member's mean loss over the rows its mask marks ([M]): MSE of the standardised log
    target, or MAPE of the target itself (ysd_t, each member's sd, undoes the standardisation)."""
    def crit(pred, target, mask):
        if loss == "mse":
            e = (pred - target) ** 2
        else:
            e = torch.abs(torch.expm1((pred - target) * ysd_t))
        return (e * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    return crit


def _gather(idx_lists, size: int):
    """Pad each member's indices to `size`; mask marks the real ones."""
    idx = np.zeros((len(idx_lists), size), dtype=np.int64)
    mask = np.zeros((len(idx_lists), size), dtype=np.float32)
    for k, r in enumerate(idx_lists):
        idx[k, :len(r)] = r
        mask[k, :len(r)] = 1
    return torch.from_numpy(idx), torch.from_numpy(mask)


def _train_stack(Xt, Yt, params: list, drop, tr_idx: list, va_idx: list, rng: np.random.Generator,
                 crit, *, epochs: int, lr: float, batch: int) -> list:
    """Adam on the stacked parameters for `epochs` epochs; returns each parameter as it was at its
    member's best validation loss."""
    W, B = params[:len(params) // 2], params[len(params) // 2:]
    opt = torch.optim.Adam(params, lr=lr, foreach=True)
    vidx, vmask = _gather(va_idx, max(len(v) for v in va_idx))
    vx = torch.gather(Xt, 1, vidx.unsqueeze(-1).expand(-1, -1, 4))
    vy = torch.gather(Yt, 1, vidx)
    n_batches = max(int(np.ceil(len(t) / batch)) for t in tr_idx)
    best = torch.full((len(tr_idx),), float("inf"))
    best_params = [p.detach().clone() for p in params]
    for _ in range(epochs):
        perms = [t[rng.permutation(len(t))] for t in tr_idx]
        for s in range(n_batches):
            idx, mask = _gather([p[s * batch:(s + 1) * batch] for p in perms], batch)
            if mask.sum() == 0:
                continue
            xb = torch.gather(Xt, 1, idx.unsqueeze(-1).expand(-1, -1, 4))
            yb = torch.gather(Yt, 1, idx)
            opt.zero_grad()
            crit(_forward(W, B, drop, xb, True), yb, mask).sum().backward()
            opt.step()
        with torch.no_grad():
            v = crit(_forward(W, B, drop, vx, False), vy, vmask)
            better = v < best
            if better.any():
                best = torch.where(better, v, best)
                for bp, p in zip(best_params, params):
                    bp[better] = p.detach()[better]
    return best_params


def _net_of(best_params: list, k: int, scaling: tuple) -> Net:
    """Member k of the trained stack as a numpy Net."""
    n_layers = len(best_params) // 2
    xm, xsd, ym, ysd = scaling
    layers = [(best_params[i][k].numpy().copy(), best_params[n_layers + i][k, 0].numpy().copy())
              for i in range(n_layers - 1)]
    hw = best_params[n_layers - 1][k].numpy().T.copy()            # [1, 64]
    hb = best_params[-1][k, 0].numpy().copy()                  # [1]
    return Net(np.asarray(xm, np.float64), np.asarray(xsd, np.float64), layers,
               hw.astype(np.float32), hb.astype(np.float32), ym, ysd)


def train_net(X: np.ndarray, y: np.ndarray, *, init: Net | None = None, epochs: int = 100,
              lr: float = 1e-3, batch: int = 32, seed: int = 0, loss: str = "mse",
              val_frac: float = 0.1, dropout=DROPOUT) -> Net:
    """Train one network on all rows of X (features()) and y (positive targets, ms or W)."""
    return train_many(X, y, [Member(np.arange(len(y)), init, dropout, seed)], epochs=epochs,
                      lr=lr, batch=batch, loss=loss, val_frac=val_frac)[0]


def add_heads(net: Net, X: np.ndarray, y: np.ndarray, k: int = 8, seed: int = 0,
              shrink: float = 3.0) -> Net:
    """Bootstrap refits of the last layer, each pulled toward the trained head by a ridge
    penalty (closed form): min ||H h - t||^2 + shrink * ||h - h0||^2."""
    H = net.body(X).astype(np.float64)
    H1 = np.hstack([H, np.ones((len(H), 1))])
    t = (np.log(y) - net.y_mean) / net.y_scale
    h0 = np.concatenate([net.heads_w[0].astype(np.float64), [float(net.heads_b[0])]])
    rng = np.random.default_rng(seed)
    ws, bs = [net.heads_w[0]], [net.heads_b[0]]
    eye = shrink * np.eye(H1.shape[1])
    for _ in range(k - 1):
        idx = rng.integers(0, len(t), len(t))
        A, b = H1[idx], t[idx]
        h = np.linalg.solve(A.T @ A + eye, A.T @ b + shrink * h0)
        ws.append(h[:-1].astype(np.float32))
        bs.append(np.float32(h[-1]))
    net.heads_w = np.stack(ws).astype(np.float32)
    net.heads_b = np.array(bs, dtype=np.float32)
    return net


# Candidates cross-validated per target; the best one is trained on all modes.
class Candidate(TypedDict):
    from_reference: bool                  # start from the reference net's weights
    dropout: tuple[float, float, float]


CANDIDATES: dict[str, Candidate] = {
    "transfer": {"from_reference": True, "dropout": DROPOUT},
    "transfer-nodropout": {"from_reference": True, "dropout": (0.0, 0.0, 0.0)},
    "scratch": {"from_reference": False, "dropout": DROPOUT},
}


def fit_target(X, y, *, init: Net | None, seed: int = 0, loss: str = "mse", heads: int = 8,
               cv_folds: int = 5, epochs: int = 100, candidates: tuple[str, ...] | None = None
               ) -> tuple[Net, dict]:
    """Fit one target.  Each candidate (transfer from the reference, the same without dropout,
    from scratch) is cross-validated on the profile; the one with the lowest CV MAPE is trained
    on all modes and gets the uncertainty heads.

    Returns the net and metrics: cv_mape (%), cv_resid_sd (log units), the choice and every
    candidate's CV MAPE."""
    n = len(y)
    if candidates is None:
        candidates = tuple(CANDIDATES) if init is not None else ("scratch",)

    def member(name, rows, s):
        c = CANDIDATES[name]
        return Member(rows, init if c["from_reference"] else None, c["dropout"], s)

    metrics: dict = {}
    choice = candidates[0]
    if cv_folds and n >= 2 * cv_folds:
        fold = np.random.default_rng(seed + 1).permutation(n) % cv_folds
        jobs = [(name, f) for name in candidates for f in range(cv_folds)]
        nets = train_many(X, y, [member(name, np.flatnonzero(fold != f), seed + 10 + f)
                                 for name, f in jobs], epochs=epochs, loss=loss)
        preds = {name: np.empty(n) for name in candidates}
        for (name, f), net_f in zip(jobs, nets):
            te = fold == f
            preds[name][te] = net_f.predict_log(X[te])[0]
        scores = {}
        for name, pred in preds.items():
            err = np.exp(pred) / y - 1.0
            scores[name] = (float(np.mean(np.abs(err)) * 100),
                            float(np.sqrt(np.mean((pred - np.log(y)) ** 2))))
        choice = min(scores, key=lambda k: scores[k][0])
        metrics = {"cv_mape": scores[choice][0], "cv_resid_sd": scores[choice][1],
                   "cv_folds": cv_folds, "choice": choice,
                   "candidates_cv_mape": {k: v[0] for k, v in scores.items()}}
    else:
        metrics = {"choice": choice}
    net = train_many(X, y, [member(choice, np.arange(n), seed)], epochs=epochs, loss=loss)[0]
    if heads > 1:
        add_heads(net, X, y, k=heads, seed=seed)
    net.resid_sd = metrics.get("cv_resid_sd", 0.0)
    return net, metrics


def timed(fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t


def _rows_xy(device, modes, times, powers):
    X = features(device, modes)
    return X, np.asarray(times, np.float64), np.asarray(powers, np.float64)


def build_reference(device, modes, times, powers, *, workload: str, source: str, seed: int = 0,
                    epochs: int = 100, progress=None):
    """Train the reference time and power networks on a large corpus."""
    X, t, p = _rows_xy(device, modes, times, powers)
    nets, metrics = {}, {}
    for name, y in (("time", t), ("power", p)):
        if progress:
            progress(stage(f"training reference {name} network on {len(y)} modes"))
        # hold out 10 % for an honest accuracy figure, then train on everything
        rng = np.random.default_rng(seed)
        te = rng.permutation(len(y))[: max(1, len(y) // 10)]
        tr = np.setdiff1d(np.arange(len(y)), te)
        probe = train_net(X[tr], y[tr], seed=seed, epochs=epochs)
        pred = np.exp(probe.predict_log(X[te])[0])
        lres = np.log(pred) - np.log(y[te])
        nets[name] = train_net(X, y, seed=seed, epochs=epochs)
        nets[name].resid_sd = float(np.sqrt(np.mean(lres ** 2)))
        metrics[name] = {"holdout_mape": float(np.mean(np.abs(pred - y[te]) / y[te]) * 100),
                         "holdout_n": int(len(te))}
    meta = {"kind": "reference", "reference_workload": workload, "workload": workload,
            "trained_on": {"source": source, "modes": int(len(t)), "device": device.name},
            "metrics": metrics, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return Model(device, nets["time"], nets["power"], meta)


def transfer(reference, device, modes, times, powers, *, workload: str, source: str,
             seed: int = 0, loss: str = "mse", heads: int = 8, cv_folds: int = 5,
             scratch: bool = False, transfer_only: bool = False, progress=None):
    """PowerTrain transfer: reference body, fresh last layer, fine-tuned on the profile, with the
    training recipe chosen per target by cross-validation (see fit_target).
    transfer_only=True is the paper's method alone; scratch=True trains the same network from
    random weights (the NN baseline)."""
    X, t, p = _rows_xy(device, modes, times, powers)
    nets, metrics = {}, {}
    for name, y in (("time", t), ("power", p)):
        if progress:
            progress(stage(f"{'training' if scratch else 'fine-tuning'} {name} network on {len(y)} modes"))
        init = None if scratch else getattr(reference, name)
        nets[name], metrics[name] = fit_target(X, y, init=init, seed=seed, loss=loss,
                                               heads=heads, cv_folds=cv_folds,
                                               candidates=("scratch",) if scratch else
                                               ("transfer",) if transfer_only else None)
    meta = {"kind": "scratch" if scratch else "transfer", "workload": workload,
            "reference_workload": None if scratch else reference.about.reference_workload,
            "reference_device": None if scratch else reference.device.name,
            "trained_on": {"source": source, "modes": int(len(t)), "device": device.name},
            "loss": loss, "metrics": metrics,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return Model(device, nets["time"], nets["power"], meta)
