"""A Lightning Fabric loop in bf16 mixed precision (an autocast loop, as AMP scripts write them)."""
import sys

import lightning as L
import torch

if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    fabric = L.Fabric(accelerator="auto", devices=1, precision="bf16-mixed")
    fabric.launch()
    model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.GELU(), torch.nn.Linear(512, 128))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    model, opt = fabric.setup(model, opt)
    x = torch.randn(64, 128, device=fabric.device)
    for _ in range(steps):
        opt.zero_grad()
        loss = (model(x) - x).pow(2).mean()
        fabric.backward(loss)
        opt.step()
