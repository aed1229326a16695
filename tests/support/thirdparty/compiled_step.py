"""A compiled optimizer step (torch.compile on opt.step; on the GPU where there is one): the update runs as one compiled
graph; the forward and backward stay eager."""
import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"     # as real training code picks it
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
opt.step = torch.compile(opt.step)
x, y = torch.randn(64, 32, device=dev), torch.randint(0, 4, (64,), device=dev)
for _ in range(steps):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
