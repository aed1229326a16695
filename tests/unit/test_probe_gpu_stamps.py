"""The probe's step times on a CUDA device (ptui.probe.hook._GpuStamps), against a fake CUDA whose
GPU works through a queue on a virtual clock the test moves: a step is reported once the GPU has
done the work queued before it, at the GPU's time, and the script is never made to wait (only the
first step waits once, to set the clocks' offset, and one step every 30 s to keep it).  The real thing runs in
tests/functional/test_probe_cuda.py on a GPU machine (benchmarks/bench_probe_sync.py measures it)."""
import struct
import sys

import pytest

from ptui.probe import hook


class FakeCuda:
    """A GPU on a virtual clock (`now`, s): work queued ends at `queued`; an event recorded is
    reached when the queue before it is done.  Waiting (an event's or the device's synchronize)
    moves the clock there at once and is counted."""

    def __init__(self):
        self.now = 100.0
        self.queued = self.now
        self.event_waits = 0
        self.synchronized = 0
        self.refuse = False
        self.capturing = False
        self.calls_while_capturing = 0
        self.float32 = False                 # elapsed_time as CUDA returns it: a float32 of ms
        cuda = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                cuda.calls_while_capturing += cuda.capturing
                if cuda.refuse:
                    raise RuntimeError("operation not permitted when stream is capturing")
                self.at = max(cuda.queued, cuda.now)

            def query(self):
                cuda.calls_while_capturing += cuda.capturing
                if self.at is None:
                    raise RuntimeError("an event that was never recorded")
                return cuda.now >= self.at

            def synchronize(self):
                cuda.calls_while_capturing += cuda.capturing
                cuda.event_waits += 1
                cuda.now = max(cuda.now, self.at)

            def elapsed_time(self, end):
                ms = (end.at - self.at) * 1000.0
                return struct.unpack("f", struct.pack("f", ms))[0] if cuda.float32 else ms

        self.Event = Event

    def queue(self, s):
        self.queued = max(self.queued, self.now) + s

    def current_device(self):
        return 0

    def device(self, _):
        import contextlib
        return contextlib.nullcontext()

    def is_initialized(self):
        return True

    def is_current_stream_capturing(self):
        return self.capturing

    def synchronize(self):
        self.synchronized += 1
        self.now = max(self.now, self.queued)


class FakeTorch:
    def __init__(self):
        self.cuda = FakeCuda()


@pytest.fixture
def gpu(monkeypatch):
    torch = FakeTorch()
    sent = []
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(hook, "_send", sent.append)
    monkeypatch.setattr(hook, "_cuda", True)
    monkeypatch.setattr(hook, "_device", "cuda")
    monkeypatch.setattr(hook, "_gpu_stamps", None)
    yield torch.cuda, sent


def _steps(sent):
    return [(float(line.split()[1]), line.split()[2:]) for line in sent if line.startswith("S ")]


def test_a_step_is_reported_when_the_gpu_reaches_it_at_the_gpus_time(gpu):
    cuda, sent = gpu
    cuda.queue(0.05)
    hook._send_step("0 0 0\n")                 # the first step sets the clocks' offset: one wait
    assert cuda.event_waits == 1 and len(_steps(sent)) == 1
    for i in range(1, 4):
        cuda.queue(0.05)                       # 50 ms of GPU work queued by this iteration
        hook._send_step(f"0 {i} 0\n")          # the step returns at once
    assert cuda.event_waits == 1 and cuda.synchronized == 0     # the script never waited
    assert len(_steps(sent)) == 1                                # the GPU has not got there yet
    for i in range(1, 4):
        cuda.now += 0.049
        hook._gpu_stamps.flush()
        assert len(_steps(sent)) == i                            # not before the GPU gets there
        cuda.now += 0.001
        hook._gpu_stamps.flush()
        assert len(_steps(sent)) == i + 1
    steps = _steps(sent)
    assert [s[1][1] for s in steps] == ["0", "1", "2", "3"]       # in order
    gaps = [b[0] - a[0] for a, b in zip(steps, steps[1:])]
    assert gaps == pytest.approx([0.05] * 3, abs=2e-6)            # the GPU's 50 ms per step


def test_an_event_refused_sends_the_earlier_steps_first_and_its_own_untimed(gpu):
    cuda, sent = gpu
    cuda.queue(0.05)
    hook._send_step("0 0 0\n")
    cuda.queue(0.05)
    hook._send_step("0 1 0\n")
    cuda.refuse = True                          # the driver refuses a new event
    cuda.queue(0.05)
    hook._send_step("0 2 0\n")
    steps = _steps(sent)
    assert [s[1] for s in steps] == [["0", "0", "0"], ["0", "1", "0"], ["0", "2", "0", "x"]]


def test_a_step_captured_into_a_cuda_graph_makes_no_cuda_call_and_goes_out_in_order(gpu):
    """Querying or waiting on an event while a stream captures invalidates the capture (the
    script's CUDA graph): the captured step is queued, untimed (its code ran no kernel), and sent
    after the steps before it once the capture is over."""
    cuda, sent = gpu
    cuda.queue(0.05)
    hook._send_step("0 0 0\n")
    cuda.queue(0.05)
    hook._send_step("0 1 0\n")
    cuda.capturing = True
    hook._send_step("0 2 0\n")
    hook._drain_steps()                                 # a backward() inside the captured region
    assert cuda.calls_while_capturing == 0
    cuda.capturing = False
    cuda.now += 0.1
    cuda.queue(0.05)
    hook._send_step("0 3 0\n")
    cuda.now += 0.05
    hook._drain_steps()
    assert [s[1] for s in _steps(sent)] == [["0", "0", "0"], ["0", "1", "0"], ["0", "2", "0", "x"],
                                            ["0", "3", "0"]]


def test_step_times_keep_their_precision_hours_into_a_run(gpu):
    """CUDA's elapsed time is a float32 of milliseconds: taken from the first step's event it
    rounds every step to 1 ms after 2.3 hours (found by review).  Each step is timed from the one
    before it."""
    cuda, sent = gpu
    cuda.float32 = True
    hook._send_step("0 0 0\n")
    cuda.now += 3 * 3600                                # three hours of training later
    for i in range(1, 6):
        cuda.queue(0.0303)
        hook._send_step(f"0 {i} 0\n")
    cuda.now = cuda.queued
    hook._drain_steps()
    steps = _steps(sent)[1:]
    gaps = [b[0] - a[0] for a, b in zip(steps, steps[1:])]
    assert gaps == pytest.approx([0.0303] * 4, abs=2e-5)


def test_every_30_s_one_step_resets_the_clocks_and_the_next_iteration_is_not_timed(gpu):
    cuda, sent = gpu
    hook._send_step("0 0 0\n")
    hook._gpu_stamps.synced -= 31                       # 31 s since the clocks were last put together
    cuda.queue(0.05)
    hook._send_step("0 1 0\n")                          # waits for the GPU: its host work did not overlap
    assert cuda.event_waits == 2
    cuda.queue(0.05)
    hook._send_step("1 0 0\n")                          # another optimizer's step: not an iteration's end
    cuda.queue(0.05)
    hook._send_step("0 1 0\n")
    cuda.now = cuda.queued
    hook._drain_steps()
    assert [s[1] for s in _steps(sent)] == [["0", "0", "0"], ["0", "1", "0"], ["1", "0", "0"],
                                            ["0", "1", "0", "x"]]
    assert cuda.event_waits == 2


def test_an_event_that_cannot_be_read_does_not_silence_the_steps_after_it(gpu):
    cuda, sent = gpu
    hook._send_step("0 0 0\n")
    cuda.queue(0.05)
    hook._send_step("0 1 0\n")
    hook._gpu_stamps.pending[0][0].at = None            # its query raises
    cuda.queue(0.05)
    hook._send_step("0 2 0\n")
    cuda.now = cuda.queued
    hook._drain_steps()
    assert [s[1] for s in _steps(sent)] == [["0", "0", "0"], ["0", "1", "0", "x"], ["0", "2", "0"]]
