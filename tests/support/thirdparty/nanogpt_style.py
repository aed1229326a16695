"""The shape of nanoGPT's train.py (not installable from the registry, so written out here): a small
causal transformer, gradient accumulation over micro-steps, float16 autocast with a GradScaler on CUDA
(as nanoGPT runs on a GPU without bf16, a Xavier's Volta; the scaler skips the optimizer step of
an iteration whose gradients overflowed), gradient clipping, a cosine learning-rate schedule set
by hand on every iteration."""
import contextlib
import math
import sys

import torch
from torch import nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
torch.manual_seed(1337)
vocab, block, accum, micro = 256, 64, 4, 8
dev = "cuda" if torch.cuda.is_available() else "cpu"
ctx = (torch.autocast("cuda", dtype=torch.float16) if dev == "cuda" else contextlib.nullcontext())


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(vocab, 64)
        self.pos = nn.Embedding(block, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(64, vocab, bias=False)

    def forward(self, idx, targets):
        mask = nn.Transformer.generate_square_subsequent_mask(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        logits = self.head(self.blocks(x, mask=mask, is_causal=True))
        return nn.functional.cross_entropy(logits.view(-1, vocab), targets.view(-1))


data = torch.randint(0, vocab, (200_000,))


def get_batch():
    ix = torch.randint(len(data) - block - 1, (micro,))
    x = torch.stack([data[i:i + block] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block] for i in ix])
    return x.to(dev), y.to(dev)


model = GPT().to(dev)
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
scaler = torch.amp.GradScaler("cuda", enabled=dev == "cuda")
for it in range(steps):
    lr = 6e-5 + 0.5 * (6e-4 - 6e-5) * (1 + math.cos(math.pi * min(it, 5000) / 5000))
    for group in optimizer.param_groups:
        group["lr"] = lr
    for _ in range(accum):
        x, y = get_batch()
        with ctx:
            loss = model(x, y) / accum
        scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
