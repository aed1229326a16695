"""A plain training loop whose torch runs 2 intra-op threads on one core: an oversubscribed
machine, made certain.  Every 4th iteration also runs a few elementwise operators big enough to
run in parallel; their work is about a millisecond, but where OpenMP's threads spin while they
wait for each other (its default), the main thread spins at their end until its worker gets the
core, tens of milliseconds of its CPU time that read as work between the steps."""
import os

import torch

torch.set_num_threads(2)
big = torch.randn(512, 512)
torch.tanh(big)                                    # torch's worker thread is started
core = {min(os.sched_getaffinity(0))}
for task in os.listdir("/proc/self/task"):         # every thread onto the one core
    os.sched_setaffinity(int(task), core)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 8)
for i in range(10**9):
    if i % 4 == 0:
        for _ in range(5):
            big = torch.tanh(big)                  # 262144 elements: run in parallel
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
