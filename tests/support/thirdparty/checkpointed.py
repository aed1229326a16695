"""Activation checkpointing as long-context and large models use it
(torch.utils.checkpoint.checkpoint, reentrant: its backward runs the checkpointed block's forward
again and calls torch.autograd.backward on it, inside the loss's backward()): one backward() and
one optimizer step per iteration."""
import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()) for _ in range(4))
head = torch.nn.Linear(64, 4)
opt = torch.optim.SGD([*blocks.parameters(), *head.parameters()], lr=0.01)
x, y = torch.randn(32, 64, requires_grad=True), torch.randint(0, 4, (32,))
while True:
    h = x
    for block in blocks:
        h = checkpoint(block, h, use_reentrant=True)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(head(h), y).backward()
    opt.step()
