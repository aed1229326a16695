"""The probe's step times on a CUDA device (ptui.probe.hook._GpuStamps), against a fake CUDA whose
GPU runs a queue of work on its own clock: a step is reported once the GPU has done the work queued
before it, at the GPU's time, and the script is never made to wait.  The real thing runs in
tests/functional/test_probe_cuda.py on a GPU machine (benchmarks/bench_probe_sync.py measures it)."""
import threading
import time

import pytest

from ptui.probe import hook


class FakeCuda:
    """A GPU whose queue ends at `queued` (s on CLOCK_MONOTONIC): an event recorded now is reached
    then; synchronize() waits for the whole queue (the call the probe used to make every step)."""

    def __init__(self):
        self.queued = time.monotonic()
        self.synchronized = 0
        self.refuse = False
        cuda = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                if cuda.refuse:
                    raise RuntimeError("operation not permitted when stream is capturing")
                self.at = max(cuda.queued, time.monotonic())

            def query(self):
                return time.monotonic() >= self.at

            def synchronize(self):
                time.sleep(max(0.0, self.at - time.monotonic()))

            def elapsed_time(self, end):
                return (end.at - self.at) * 1000.0

        self.Event = Event

    def queue(self, s):
        self.queued = max(self.queued, time.monotonic()) + s

    def current_device(self):
        return 0

    def device(self, _):
        import contextlib
        return contextlib.nullcontext()

    def is_initialized(self):
        return True

    def synchronize(self):
        self.synchronized += 1
        time.sleep(max(0.0, self.queued - time.monotonic()))


class FakeTorch:
    def __init__(self):
        self.cuda = FakeCuda()


@pytest.fixture
def gpu(monkeypatch):
    torch = FakeTorch()
    sent = []
    lock = threading.Lock()

    def send(line):
        with lock:
            sent.append((time.monotonic(), line))
    monkeypatch.setitem(__import__("sys").modules, "torch", torch)
    monkeypatch.setattr(hook, "_send", send)
    monkeypatch.setattr(hook, "_cuda", True)
    monkeypatch.setattr(hook, "_gpu_stamps", None)
    monkeypatch.setattr(hook, "_sock", object())           # the polling thread runs while ptui is there
    yield torch.cuda, sent
    hook._sock = None


def _steps(sent):
    return [(at, float(line.split()[1]), line.split()[2:]) for at, line in sent if line.startswith("S ")]


def test_a_step_is_reported_when_the_gpu_reaches_it_at_the_gpus_time(gpu):
    cuda, sent = gpu
    cuda.queue(0.05)
    hook._send_step("0 0 0\n")                 # the first step sets the clocks' offset: it waits
    t0 = time.monotonic()
    for i in range(1, 4):
        cuda.queue(0.05)                       # 50 ms of GPU work queued by this iteration
        hook._send_step(f"0 {i} 0\n")          # the step returns at once
    returned = time.monotonic() - t0
    assert returned < 0.04                     # the script did not wait for 150 ms of GPU work
    assert cuda.synchronized == 0
    deadline = time.monotonic() + 2
    while len(_steps(sent)) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    steps = _steps(sent)
    assert [s[2][1] for s in steps] == ["0", "1", "2", "3"]     # in order
    gaps = [b[1] - a[1] for a, b in zip(steps, steps[1:])]
    assert all(abs(g - 0.05) < 0.01 for g in gaps), gaps      # the GPU's 50 ms per step
    for sent_at, t, _ in steps:
        assert sent_at >= t - 0.002                 # never reported before the GPU got there


def test_events_refused_fall_back_to_waiting_with_the_earlier_steps_first(gpu):
    cuda, sent = gpu
    cuda.queue(0.05)
    hook._send_step("0 1 0\n")
    cuda.refuse = True                          # a CUDA graph being captured, say
    cuda.queue(0.05)
    hook._send_step("0 1 0 x\n")
    steps = _steps(sent)
    assert len(steps) == 2 and steps[1][2] == ["0", "1", "0", "x"]
    assert cuda.synchronized == 1
    assert steps[1][1] >= steps[0][1] + 0.045
