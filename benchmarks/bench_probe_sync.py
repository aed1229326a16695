"""Does the probe change the iteration time it measures on a GPU?  (Run on a machine with CUDA.)

A training loop queues its GPU work and goes on with the next iteration's host work (data
preparation in the main process, Python, launches) while the GPU computes: the two overlap.  The
probe stamps each optimizer step's end; if it waits for the GPU to get there (a synchronise), the
next iteration's host work can no longer overlap this one's GPU work, and the measured time is
host + GPU instead of max(host, GPU).

For each case (host ms and GPU ms per iteration, with or without a loss.item() that synchronises
every iteration itself), the loop's period is measured alone (no probe: the mean over 300
iterations), then through `ptui profile` on an emulated board (`ptui emulate`: the step times are
this machine's, timed by the probe).  Prints one row per case: alone, probed, and their ratio.

    PYTHONPATH=. python3 benchmarks/bench_probe_sync.py

Measured on an H100 (2026-11-27): the probe that synchronised every step read 41.6 ms for a loop
of 10 ms host and 30 ms GPU work that takes 30.1 ms alone (1.38x), 41.5 against 31.8 ms for 30 ms
host and 10 ms GPU (1.31x).  Timed by CUDA events: 30.0 against 30.1 ms (1.00), 32.9 against 32.3
ms (1.02); docs/testing.md has the table.
"""
from __future__ import annotations

import csv
import os
import re
import select
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = """
import sys, time, numpy as np, torch
n, host_ms, gpu_ms, sync = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "sync"
model = torch.nn.Linear(256, 10).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
t0 = time.monotonic()
while time.monotonic() - t0 < 1.0:                    # the GPU's clock ramps up
    torch.cuda._sleep(10_000_000); torch.cuda.synchronize()
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record(); torch.cuda._sleep(50_000_000); b.record(); b.synchronize()
cycles = int(50_000_000 / a.elapsed_time(b) * gpu_ms)
rng = np.random.default_rng(0)

def host_work(ms):                                    # data preparation in the main process
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        rng.standard_normal(256).sum()

for i in range(n):
    if i == 20:
        torch.cuda.synchronize()
        start = time.monotonic()
    host_work(host_ms)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    torch.cuda._sleep(cycles)                         # the rest of the GPU's work
    opt.step()
    if sync:
        loss.item()
torch.cuda.synchronize()
print(f"period_ms {(time.monotonic() - start) * 1000 / (n - 20):.2f}", flush=True)
"""

CASES = [(0.0, 30.0, False), (10.0, 30.0, False), (10.0, 30.0, True), (30.0, 10.0, False)]


def main() -> int:
    py = sys.executable
    work = Path(tempfile.mkdtemp(prefix="ptui-sync-"))
    loop = work / "loop.py"
    loop.write_text(LOOP)
    env = dict(os.environ, PTUI_DATA_DIR=str(work / "data"), PTUI_LOCK_DIR=str(work / "locks"),
               PTUI_STATE_DIR=str(work / "state"))
    root = work / "root"
    emu = subprocess.Popen([py, "-m", "ptui", "emulate", "--device", "orin-agx", "--root", str(root),
                            "--interval", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env)
    try:
        ready, _, _ = select.select([emu.stdout], [], [], 60)
        if not ready or not emu.stdout.readline():
            print("ptui emulate did not start", file=sys.stderr)
            return 1
        print(f"{'host ms':>8} {'GPU ms':>7} {'sync':>5} {'alone ms':>9} {'probed ms':>10} {'ratio':>6}")
        for i, (host, gpu, sync) in enumerate(CASES):
            args = [str(host), str(gpu), "sync" if sync else "async"]
            alone = subprocess.run([py, str(loop), "300", *args], capture_output=True, text=True,
                                   env=env, timeout=300)
            m = re.search(r"period_ms ([\d.]+)", alone.stdout)
            if not m:
                print(alone.stderr[-2000:], file=sys.stderr)
                return 1
            out = work / f"c{i}.csv"
            prof = subprocess.run([py, "-m", "ptui", "profile", "--backend", "sysfs", "--sysfs-root",
                                   str(root), "--count", "1", "--sample-interval", "0.1",
                                   "--session", f"sync{i}", "--out", str(out), "--", py, str(loop),
                                   "100000", *args], capture_output=True, text=True, env=env, timeout=300)
            if prof.returncode != 0:
                print(prof.stderr[-2000:], file=sys.stderr)
                return 1
            with open(out, newline="") as fh:
                probed = float(next(csv.DictReader(fh))["time_ms"])
            a = float(m.group(1))
            print(f"{host:8.1f} {gpu:7.1f} {str(sync):>5} {a:9.2f} {probed:10.2f} {probed / a:6.2f}",
                  flush=True)
    finally:
        emu.terminate()
        emu.communicate(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
