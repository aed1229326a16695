"""No torch.optim optimizer: the parameters are updated by hand (as Keras 3 on the torch backend
does, or a textbook SGD loop): backward() is called every iteration but no optimizer step ever is."""
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"     # as real training code picks it
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(dev)
x, y = torch.randn(64, 32, device=dev), torch.randint(0, 4, (64,), device=dev)
lr = 0.01
for it in range(steps):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.data -= lr * p.grad
    if it % 50 == 0:
        print(f"iteration {it} loss {loss.item():.4f}", flush=True)
    time.sleep(0.01)
