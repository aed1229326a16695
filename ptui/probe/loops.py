"""Built-in training workloads for real boards: plain-torch models trained on synthetic tensors.

`python -m ptui.probe.loops resnet18 --batch-size 16` trains until stopped (or --steps), on CUDA
when present, else CPU.  ptui profiles it like any user script, through the minibatch probe.
Models (no torchvision): ResNet-18, MobileNetV3-small, a 2-layer LSTM language model, and a small
transformer encoder as the BERT-like question-answering stand-in.  There is no built-in YOLOv8n:
profile your own detector script instead (ptui profile ... -- python train.py).
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch import nn
from torch.nn import functional as F


class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.down(x))


def resnet18(classes=1000):
    layers, cin = [], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
        cin = cout
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1), *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(512, classes))


class SE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.f = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // 4, 1), nn.ReLU(),
                               nn.Conv2d(c // 4, c, 1), nn.Hardsigmoid())

    def forward(self, x):
        return x * self.f(x)


class InvRes(nn.Module):
    def __init__(self, cin, exp, cout, k, stride, se, act):
        super().__init__()
        A = nn.Hardswish if act == "hs" else nn.ReLU
        self.use_res = stride == 1 and cin == cout
        self.f = nn.Sequential(
            nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), A(),
            nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), A(),
            SE(exp) if se else nn.Identity(),
            nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.f(x)
        return x + y if self.use_res else y


def mobilenetv3_small(classes=203):
    cfg = [(16, 16, 16, 3, 2, 1, "re"), (16, 72, 24, 3, 2, 0, "re"), (24, 88, 24, 3, 1, 0, "re"),
           (24, 96, 40, 5, 2, 1, "hs"), (40, 240, 40, 5, 1, 1, "hs"), (40, 240, 40, 5, 1, 1, "hs"),
           (40, 120, 48, 5, 1, 1, "hs"), (48, 144, 48, 5, 1, 1, "hs"), (48, 288, 96, 5, 2, 1, "hs"),
           (96, 576, 96, 5, 1, 1, "hs"), (96, 576, 96, 5, 1, 1, "hs")]
    return nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
                         *[InvRes(*c) for c in cfg], nn.Conv2d(96, 576, 1, bias=False),
                         nn.BatchNorm2d(576), nn.Hardswish(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(576, 1024), nn.Hardswish(), nn.Linear(1024, classes))


class LSTMLM(nn.Module):
    def __init__(self, vocab=10000, dim=400, hidden=1150):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.out(self.rnn(self.emb(x))[0])


class Encoder(nn.Module):
    def __init__(self, vocab=30522, dim=256, layers=4, heads=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, heads, 4 * dim, batch_first=True),
                                         layers)
        self.qa = nn.Linear(dim, 2)

    def forward(self, x):
        return self.qa(self.enc(self.emb(x)))


from .names import BUILTIN  # noqa: E402


def build(name: str, bs: int, device):
    """(model, make_batch, loss_fn) for a workload name."""
    if name == "resnet18":
        return resnet18(), lambda: (torch.randn(bs, 3, 224, 224, device=device),
                                    torch.randint(0, 1000, (bs,), device=device)), F.cross_entropy
    if name == "mobilenetv3":
        return mobilenetv3_small(), lambda: (torch.randn(bs, 3, 224, 224, device=device),
                                             torch.randint(0, 203, (bs,), device=device)), F.cross_entropy
    if name == "lstm":
        def lm_loss(out, y):
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        return LSTMLM(), lambda: (torch.randint(0, 10000, (bs, 35), device=device),
                                  torch.randint(0, 10000, (bs, 35), device=device)), lm_loss
    if name == "bert-base":
        def qa_loss(out, y):
            return F.cross_entropy(out[..., 0], y[:, 0]) + F.cross_entropy(out[..., 1], y[:, 1])
        return Encoder(), lambda: (torch.randint(0, 30522, (bs, 128), device=device),
                                   torch.randint(0, 128, (bs, 2), device=device)), qa_loss
    raise SystemExit(f"no built-in torch training loop for {name!r} (built in: {', '.join(BUILTIN)})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ptui.probe.loops")
    ap.add_argument("workload")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many minibatches (0 = never)")
    a = ap.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model, batch, loss_fn = build(a.workload, a.batch_size, device)
    model.to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    print(f"training {a.workload} bs{a.batch_size} on {device}", flush=True)
    step = 0
    while not a.steps or step < a.steps:
        x, y = batch()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        step += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
