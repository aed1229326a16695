"""A torchrun DDP script (gloo, CPU): every rank steps its own optimizer."""
import sys

import torch
import torch.distributed as dist

if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(256, 256))
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(32, 256)
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    dist.destroy_process_group()
