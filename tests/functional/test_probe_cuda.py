"""The probe on a CUDA GPU, as it runs on a Jetson: the training script's work is queued on the GPU
and an optimizer step returns before the GPU has done it.  Skipped where torch sees no CUDA device
(CI has none); run on a GPU machine with
`python -m pytest tests/functional/test_probe_cuda.py tests/functional/test_script_shapes.py
tests/functional/test_thirdparty.py`, where the third-party scripts train on the GPU by themselves.
"""
import csv
import re
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.realtime, pytest.mark.slow]

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device: the probe's GPU path is checked on a GPU machine",
                allow_module_level=True)

# the optimizer step returns at once; the GPU then spins for about argv[2] ms (torch.cuda._sleep;
# its cycles calibrated against CUDA events once the clock has ramped up).  The script prints the
# GPU time it measured itself (events around the spin) every 20 steps.  A step timed without
# waiting for the GPU would read the microseconds it takes to queue the work.
GPU_BOUND = textwrap.dedent("""
    import statistics, sys, time, torch
    steps, gpu_ms = int(sys.argv[1]), float(sys.argv[2])
    model = torch.nn.Linear(32, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 32, device="cuda"), torch.randint(0, 4, (64,), device="cuda")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:          # let the GPU's clock ramp up
        torch.cuda._sleep(10_000_000); torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); torch.cuda._sleep(50_000_000); b.record(); b.synchronize()
    cycles = int(50_000_000 / a.elapsed_time(b) * gpu_ms)
    spent = []
    for i in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); torch.cuda._sleep(cycles); b.record()
        opt.step()
        b.synchronize()
        spent.append(a.elapsed_time(b))
        if i % 20 == 19:
            print(f"gpu ms {statistics.median(spent[-20:]):.2f}", flush=True)
""")


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_step_is_timed_to_the_end_of_its_gpu_work_on_a_board(tmp_path, emulated_board, cli):
    """On a board the step is timed when the GPU has done the work queued before it (a CUDA event),
    so 40 ms of queued GPU work is 40 ms per iteration, not the microseconds of queueing."""
    root, _ = emulated_board
    script = tmp_path / "gpu.py"
    script.write_text(GPU_BOUND)
    out = tmp_path / "g.csv"
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "2",
                     "--sample-interval", "0.1", "--out", out, "--", sys.executable, script, "100000", "40")
    assert rc == 0, err
    gpu = [float(v) for v in re.findall(r"gpu ms ([\d.]+)", _log(err))]
    g = sorted(gpu)[len(gpu) // 2]
    print(f"the GPU's own time {g:.2f} ms; profiled", [r["time_ms"] for r in _rows(out)])
    assert g > 20.0
    for r in _rows(out):
        assert 0.95 * g <= float(r["time_ms"]) <= g + 8.0, r


# host work (data preparation in the main process) and GPU work in each iteration, overlapping as
# they do in a loop that never waits for the GPU: the loop takes the longer of the two.  Alone it
# prints its period over 280 iterations; under the probe it runs until ptui stops it.
OVERLAP = textwrap.dedent("""
    import sys, time, torch
    n, host_ms, gpu_ms = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    model = torch.nn.Linear(256, 10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:
        torch.cuda._sleep(10_000_000); torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); torch.cuda._sleep(50_000_000); b.record(); b.synchronize()
    cycles = int(50_000_000 / a.elapsed_time(b) * gpu_ms)
    for i in range(n):
        if i == 20:
            torch.cuda.synchronize()
            start = time.monotonic()
        end = time.perf_counter() + host_ms / 1000.0
        while time.perf_counter() < end:
            pass
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        torch.cuda._sleep(cycles)
        opt.step()
    torch.cuda.synchronize()
    print(f"period_ms {(time.monotonic() - start) * 1000 / (n - 20):.2f}", flush=True)
""")


@pytest.mark.parametrize("host_ms,gpu_ms", [(10, 30), (30, 10)])
def test_the_probe_leaves_host_and_gpu_work_overlapping(tmp_path, emulated_board, cli, host_ms, gpu_ms):
    """The probe synchronised at every step: the next iteration's host work could no longer overlap
    this one's GPU work, and 10 ms of host with 30 ms of GPU work measured 41.6 ms where the loop
    alone takes 30.1 ms (H100).  The steps are now timed by CUDA events."""
    import subprocess
    root, _ = emulated_board
    script = tmp_path / "overlap.py"
    script.write_text(OVERLAP)
    alone = subprocess.run([sys.executable, str(script), "300", str(host_ms), str(gpu_ms)],
                           capture_output=True, text=True, timeout=300)
    period = float(re.search(r"period_ms ([\d.]+)", alone.stdout).group(1))
    out = tmp_path / "o.csv"
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "1",
                     "--sample-interval", "0.1", "--out", out, "--", sys.executable, script, "100000",
                     str(host_ms), str(gpu_ms))
    assert rc == 0, err
    probed = float(_rows(out)[0]["time_ms"])
    print(f"host {host_ms} ms, GPU {gpu_ms} ms: alone {period:.2f} ms, probed {probed:.2f} ms")
    assert abs(probed / period - 1) < 0.1


def test_a_resnet18_counted_on_the_gpu_gives_the_cpu_counts_whatif(tmp_path, cli):
    """A Jetson user's script trains on CUDA, so that is where the what-if counts the model: cuDNN's
    operators (fewer than the CPU's: fused) must give the FLOPs and bytes the CPU count gives
    (tests/functional/test_userscript.py: RESNET18_BS16, which lands on the catalog's ResNet-18),
    and the same simulated time and power."""
    from ptui.core.board.physics import steady_state
    from ptui.core.catalogue.devices import get_device
    from ptui.core.profiling.userscript import whatif_workload
    from tests.functional.test_userscript import RESNET18_BS16
    out = tmp_path / "r.csv"
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--sample-interval", "0.1",
                     "--out", out, "--", sys.executable, "-m", "ptui.probe.loops", "resnet18",
                     "--batch-size", "16")
    assert rc == 0, err
    assert "training resnet18 bs16 on cuda" in _log(err)
    m = re.search(r"([\d.e+]+) GFLOP and ([\d.e+]+) MB touched", err)
    assert m, err
    gflop, mb = float(m.group(1)), float(m.group(2))
    print(f"counted on CUDA: {gflop} GFLOP, {mb} MB (CPU: {RESNET18_BS16['flops'] / 1e9:.4g} GFLOP, "
          f"{RESNET18_BS16['bytes'] / 1e6:.4g} MB)")
    assert abs(gflop / (RESNET18_BS16["flops"] / 1e9) - 1) < 0.02
    assert abs(mb / (RESNET18_BS16["bytes"] / 1e6) - 1) < 0.1
    # ptui's loop has no DataLoader (its batches are made on the GPU): the CPU count without one
    cpu = whatif_workload(dict(RESNET18_BS16, samples=0, workers=0, input_bytes=0))
    dev = get_device("orin-agx")
    for r in _rows(out):
        mode = (int(r["cores"]), float(r["cpu_mhz"]), float(r["gpu_mhz"]), float(r["mem_mhz"]))
        ref = steady_state(dev, cpu, *mode)
        print(f"{mode}: {r['time_ms']} ms {r['power_w']} W; from the CPU count {float(ref.time_ms):.1f} ms "
              f"{float(ref.power_w):.1f} W")
        assert abs(float(r["time_ms"]) / float(ref.time_ms) - 1) < 0.05
        assert abs(float(r["power_w"]) / float(ref.power_w) - 1) < 0.05


def _log(err):
    m = re.search(r"its output goes to (\S+\.log)", err)
    assert m, err
    return Path(m.group(1)).read_text(errors="replace")
