"""LBFGS with a closure: each optimizer.step(closure) evaluates the closure (forward and backward)
up to max_iter times itself; a step is one LBFGS iteration, not gradient accumulation."""
import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"     # as real training code picks it
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to(dev)
opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=5, tolerance_grad=0.0,
                        tolerance_change=0.0, history_size=10)
for _ in range(steps):
    x = torch.randn(64, 16, device=dev)           # a new batch every step: the closure never converges
    y = x.sum(dim=1, keepdim=True).sin()

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    opt.step(closure)
