"""A small CNN trained on CIFAR-sized random images through a DataLoader (batch 32), SGD with
momentum: the training script of the README's `ptui colocate ... -- python train.py` example.
Runs until stopped (ptui stops it once it has counted one iteration)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                      nn.Flatten(), nn.Linear(512, 10)).to(device)
data = TensorDataset(torch.randn(2048, 3, 32, 32), torch.randint(0, 10, (2048,)))
loader = DataLoader(data, batch_size=32, shuffle=True)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
while True:
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
