"""An accelerate script with gradient accumulation."""
import sys

import torch
from accelerate import Accelerator

if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    acc = Accelerator(cpu=not torch.cuda.is_available(), gradient_accumulation_steps=2)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.AdamW(model.parameters())
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(100000, 64)), batch_size=16)
    model, opt, data = acc.prepare(model, opt, data)
    for i, (x,) in enumerate(data):
        if i >= steps:
            break
        with acc.accumulate(model):
            loss = model(x).square().mean()
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
