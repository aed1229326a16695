"""The tiny model every node trains: an MLP on synthetic regression data (CPU, torch)."""
from __future__ import annotations

import time

import torch
from torch import nn

FEATURES = 8


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, 1))


def local_data(seed: int, n: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """A node's own data: y = x . w + noise, with w the same everywhere and x from the node's seed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    w = torch.linspace(-1.0, 1.0, FEATURES)
    return x, (x @ w + 0.1 * torch.randn(n, generator=g)).unsqueeze(1)


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, min_s: float = 0.0,
          batch: int = 32, lr: float = 0.05) -> float:
    """At least `steps` minibatches of plain SGD, and more until `min_s` seconds have passed (the
    board's telemetry needs a few readings in the round's mode); the last minibatch's loss.  The
    update is written out: torch.optim's first step imports torch._dynamo, 3 s of a ClientApp
    process that lives for one round (Flower's Deployment Engine starts one per message)."""
    loss, i, end = 0.0, 0, time.monotonic() + min_s
    while i < steps or time.monotonic() < end:
        j = (i * batch) % len(x)
        model.zero_grad()
        out = nn.functional.mse_loss(model(x[j:j + batch]), y[j:j + batch])
        out.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
        loss = float(out.detach())
        i += 1
    return loss
