"""Training the PowerTrain networks with torch (the only module that imports it).

* reference: a fresh network trained on a large corpus (PowerTrain: 4,368 modes of ResNet-18);
* transfer:  the reference body with its last layer replaced by a fresh one, fine-tuned on ~50
             profiled modes of a new workload (or of another device);
* scratch:   the same network trained from random weights on the same modes (the NN baseline).
Hyper-parameters as in the paper: Adam lr 1e-3, MSE loss, 100 epochs, batch 32, 10 % validation,
keep the best-validation weights.
"""
from __future__ import annotations

import time

import numpy as np

from .predictor import Net

try:
    import torch
    from torch import nn
except ImportError as e:  # pragma: no cover - exercised on machines without torch
    raise ImportError("training needs PyTorch: pip install torch==2.13.0 (CPU build) — on a "
                      "Jetson use NVIDIA's torch") from e

torch.set_num_threads(1)   # tiny networks: threading overhead costs more than it gains

HIDDEN = (256, 128, 64)
DROPOUT = (0.4, 0.3, 0.0)


class TrainError(ValueError):
    pass


def _module(init: Net | None, fresh_head: bool) -> nn.Sequential:
    mods: list[nn.Module] = []
    din = 4
    for width, p in zip(HIDDEN, DROPOUT):
        mods += [nn.Linear(din, width), nn.ReLU()]
        if p:
            mods.append(nn.Dropout(p))
        din = width
    mods.append(nn.Linear(din, 1))
    net = nn.Sequential(*mods)
    if init is not None:
        lin = [m for m in net if isinstance(m, nn.Linear)]
        with torch.no_grad():
            for m, (W, b) in zip(lin[:-1], init.layers):
                m.weight.copy_(torch.from_numpy(np.ascontiguousarray(W.T)))
                m.bias.copy_(torch.from_numpy(b))
            if not fresh_head:
                lin[-1].weight.copy_(torch.from_numpy(init.heads_w[:1].copy()))
                lin[-1].bias.copy_(torch.from_numpy(init.heads_b[:1].copy()))
    return net


def _to_net(module: nn.Sequential, x_mean, x_scale, y_mean, y_scale) -> Net:
    lin = [m for m in module if isinstance(m, nn.Linear)]
    layers = [(m.weight.detach().numpy().T.astype(np.float32).copy(),
               m.bias.detach().numpy().astype(np.float32).copy()) for m in lin[:-1]]
    hw = lin[-1].weight.detach().numpy().astype(np.float32).copy()
    hb = lin[-1].bias.detach().numpy().astype(np.float32).copy()
    return Net(np.asarray(x_mean, np.float64), np.asarray(x_scale, np.float64), layers, hw, hb,
               float(y_mean), float(y_scale))


def train_net(X: np.ndarray, y: np.ndarray, *, init: Net | None = None, epochs: int = 100,
              lr: float = 1e-3, batch: int = 32, seed: int = 0, loss: str = "mse",
              val_frac: float = 0.1) -> Net:
    """Train one target.  X: features() rows; y: positive targets (ms or W)."""
    from sklearn.preprocessing import StandardScaler
    if loss not in ("mse", "mape"):
        raise TrainError(f"unknown loss {loss!r}; use mse or mape")
    y = np.asarray(y, np.float64)
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise TrainError("targets must be positive finite numbers")
    ly = np.log(y)
    if init is not None:
        x_mean, x_scale = init.x_mean, init.x_scale        # keep the reference's input scaling
    else:
        sc = StandardScaler().fit(X)
        x_mean, x_scale = sc.mean_, np.where(sc.scale_ > 0, sc.scale_, 1.0)
    y_mean, y_scale = float(ly.mean()), float(ly.std()) or 1.0
    Xs = torch.from_numpy(((X - x_mean) / x_scale).astype(np.float32))
    Ys = torch.from_numpy(((ly - y_mean) / y_scale).astype(np.float32)).unsqueeze(1)
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    n = len(y)
    n_val = max(1, int(round(val_frac * n))) if n >= 10 else 0
    perm = torch.randperm(n, generator=g)
    vi, ti = perm[:n_val], perm[n_val:]
    module = _module(init, fresh_head=True)
    opt = torch.optim.Adam(module.parameters(), lr=lr)

    def crit(pred, target):
        if loss == "mse":
            return torch.mean((pred - target) ** 2)
        return torch.mean(torch.abs(torch.expm1((pred - target) * y_scale)))

    best, best_state = float("inf"), None
    for _ in range(epochs):
        module.train()
        order = ti[torch.randperm(len(ti), generator=g)]
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            opt.zero_grad()
            crit(module(Xs[idx]), Ys[idx]).backward()
            opt.step()
        module.eval()
        with torch.no_grad():
            check = vi if n_val else ti
            v = float(crit(module(Xs[check]), Ys[check]))
        if v < best:
            best = v
            best_state = [p.detach().clone() for p in module.parameters()]
    with torch.no_grad():
        for p, b in zip(module.parameters(), best_state):
            p.copy_(b)
    return _to_net(module, x_mean, x_scale, y_mean, y_scale)


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


def fit_target(X, y, *, init: Net | None, seed: int = 0, loss: str = "mse", heads: int = 8,
               cv_folds: int = 5, epochs: int = 100) -> tuple[Net, dict]:
    """Fit one target, cross-validate it, and attach the uncertainty heads.

    Returns the net and metrics: cv_mape (%), cv_resid_sd (log units)."""
    n = len(y)
    metrics: dict = {}
    if cv_folds and n >= 2 * cv_folds:
        rng = np.random.default_rng(seed + 1)
        fold = rng.permutation(n) % cv_folds
        pred = np.empty(n)
        for f in range(cv_folds):
            tr, te = fold != f, fold == f
            net_f = train_net(X[tr], y[tr], init=init, seed=seed + 10 + f, loss=loss, epochs=epochs)
            pred[te] = np.exp(net_f.predict_log(X[te])[0])
        lr_ = np.log(pred) - np.log(y)
        metrics = {"cv_mape": float(np.mean(np.abs(pred - y) / y) * 100), "cv_folds": cv_folds,
                   "cv_resid_sd": float(np.sqrt(np.mean(lr_ ** 2)))}
    net = train_net(X, y, init=init, seed=seed, loss=loss, epochs=epochs)
    if heads > 1:
        add_heads(net, X, y, k=heads, seed=seed)
    net.resid_sd = metrics.get("cv_resid_sd", 0.0)
    return net, metrics


def timed(fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t


def _rows_xy(device, modes, times, powers):
    from .predictor import features
    X = features(device, modes)
    return X, np.asarray(times, np.float64), np.asarray(powers, np.float64)


def build_reference(device, modes, times, powers, *, workload: str, source: str, seed: int = 0,
                    epochs: int = 100, progress=None):
    """Train the reference time and power networks on a large corpus."""
    from .predictor import Model
    X, t, p = _rows_xy(device, modes, times, powers)
    nets, metrics = {}, {}
    for name, y in (("time", t), ("power", p)):
        if progress:
            progress(f"training reference {name} network on {len(y)} modes")
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
             scratch: bool = False, progress=None):
    """PowerTrain transfer: reference body, fresh last layer, fine-tuned on the profile.
    scratch=True trains the same network from random weights instead (the NN baseline)."""
    from .predictor import Model
    X, t, p = _rows_xy(device, modes, times, powers)
    nets, metrics = {}, {}
    for name, y in (("time", t), ("power", p)):
        if progress:
            progress(f"{'training' if scratch else 'fine-tuning'} {name} network on {len(y)} modes")
        init = None if scratch else getattr(reference, name)
        nets[name], metrics[name] = fit_target(X, y, init=init, seed=seed, loss=loss,
                                               heads=heads, cv_folds=cv_folds)
    meta = {"kind": "scratch" if scratch else "transfer", "workload": workload,
            "reference_workload": None if scratch else reference.meta.get("reference_workload"),
            "reference_device": None if scratch else reference.device.name,
            "trained_on": {"source": source, "modes": int(len(t)), "device": device.name},
            "loss": loss, "metrics": metrics,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return Model(device, nets["time"], nets["power"], meta)
