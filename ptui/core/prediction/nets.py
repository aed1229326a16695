"""What every predictor shares, below the model and its members: the model inputs (features), the
PowerTrain network's numpy inference (Net), the model error, the check of a prediction, and the
measurements a model keeps (at one batch size).  predictor (the model), gp (its GP members) and
modeldir (its files) build on this module; it imports none of them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..catalogue.devices import Device
from ..errors import InputError

TARGETS = ("time", "power")
MEASURED_KEYS = ("modes", "time_ms", "power_w", "time_ms_std", "power_w_std")


class ModelError(InputError):
    """Missing, corrupt or mismatched model files."""


def features(device: Device, modes) -> np.ndarray:
    """Raw model inputs: each knob as a fraction of the device's maximum."""
    if isinstance(modes, np.ndarray):
        a = modes.astype(np.float64)
    else:
        a = np.array([m.as_tuple() for m in modes], dtype=np.float64).reshape(-1, 4)
    return a / np.array([device.max_cores, device.cpu_mhz[-1], device.gpu_mhz[-1], device.mem_mhz[-1]])


class Predictor(Protocol):
    """A model's time or power predictor: a Net here, or gp's GPTarget or GPStack (a GP's
    predict_modes also takes a cache shared by the predictors of the same modes)."""
    def predict_modes(self, device: Device, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def config(self) -> dict: ...

    def to_arrays(self) -> dict[str, np.ndarray]: ...


@dataclass
class Net:
    """One target's network: scaler, body layers, K output heads, target scaling."""
    x_mean: np.ndarray
    x_scale: np.ndarray
    layers: list[tuple[np.ndarray, np.ndarray]]     # body: (W [in, out], b [out]) x 3, ReLU
    heads_w: np.ndarray                              # [K, 64]
    heads_b: np.ndarray                              # [K]
    y_mean: float
    y_scale: float
    resid_sd: float = 0.0                            # cross-validated residual sd, log units

    def body(self, X: np.ndarray) -> np.ndarray:
        h = ((X - self.x_mean) / self.x_scale).astype(np.float32)
        for W, b in self.layers:
            h = h @ W
            h += b
            np.maximum(h, 0.0, out=h)
        return h

    def predict_log(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and sd of log(target) over the heads."""
        h = self.body(X)
        out = h @ self.heads_w.T + self.heads_b            # [n, K]
        out = out.astype(np.float64) * self.y_scale + self.y_mean
        mu = out.mean(axis=1)
        sd = out.std(axis=1) if out.shape[1] > 1 else np.zeros_like(mu)
        return mu, np.sqrt(sd ** 2 + self.resid_sd ** 2)

    kind = "nn"

    def config(self) -> dict:
        return {"kind": "nn"}

    def predict_modes(self, device: Device, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Point estimate and sd for raw modes A [n, 4] (cores, CPU, GPU, EMC MHz)."""
        return self.predict(features(device, A))

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Point estimate and sd in the target's units (log-normal)."""
        mu, sd = self.predict_log(X)
        mid = np.exp(mu)                      # the median: the point estimate that minimises MAPE
        return mid, mid * np.sqrt(np.expm1(sd ** 2))

    def to_arrays(self) -> dict[str, np.ndarray]:
        d = {"x_mean": self.x_mean, "x_scale": self.x_scale, "heads_w": self.heads_w,
             "heads_b": self.heads_b,
             "y": np.array([self.y_mean, self.y_scale, self.resid_sd], dtype=np.float64)}
        for i, (W, b) in enumerate(self.layers):
            d[f"W{i}"], d[f"b{i}"] = W, b
        return d

    @classmethod
    def from_arrays(cls, d) -> "Net":
        layers = []
        i = 0
        while f"W{i}" in d:
            layers.append((np.asarray(d[f"W{i}"], np.float32), np.asarray(d[f"b{i}"], np.float32)))
            i += 1
        y = d["y"]
        net = cls(np.asarray(d["x_mean"], np.float64), np.asarray(d["x_scale"], np.float64), layers,
                  np.asarray(d["heads_w"], np.float32), np.asarray(d["heads_b"], np.float32),
                  float(y[0]), float(y[1]), float(y[2]))
        net.check()
        return net

    def check(self) -> None:
        dims = [4] + [W.shape[1] for W, _ in self.layers]
        for (W, b), din in zip(self.layers, dims):
            if W.shape[0] != din or b.shape != (W.shape[1],):
                raise ValueError("layer shapes do not chain")
        if self.heads_w.ndim != 2 or self.heads_w.shape[1] != dims[-1]:
            raise ValueError("head shape does not match the body")
        if self.heads_b.shape != (self.heads_w.shape[0],) or self.x_mean.shape != (4,):
            raise ValueError("bad head bias or scaler shape")
        arrays = [self.x_mean, self.x_scale, self.heads_w, self.heads_b]
        arrays += [a for layer in self.layers for a in layer]
        if not all(np.all(np.isfinite(a)) for a in arrays) or not all(
                map(math.isfinite, (self.y_mean, self.y_scale, self.resid_sd))):
            raise ValueError("non-finite weights")


def check_predictions(pred: dict, where: str) -> None:
    """ModelError when a prediction is not a finite positive number (corrupt or overflowing weights)."""
    for k in ("time_ms", "power_w"):
        v = pred[k]
        if not (np.all(np.isfinite(v)) and np.all(v > 0) and np.all(np.isfinite(pred[f"{k}_std"]))):
            raise ModelError(f"{where}: the model predicts non-finite or non-positive {k} "
                             f"(corrupt weights); rebuild it with ptui fit")


def measured_at(measured: dict | None, batch: int, default_batch) -> dict | None:
    """The measured rows of one batch size (rows without a batch column are at the default)."""
    if not measured:
        return None
    bs = measured.get("batch_size")
    if bs is None:
        return measured if default_batch is None or int(default_batch) == int(batch) else None
    keep = np.asarray(bs) == batch
    return {k: np.asarray(v)[keep] for k, v in measured.items()}
