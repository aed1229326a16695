"""The built-in demo pair under the managed interleaving (`ptui interleave-demo`): a small torch
training loop and a small torch inference loop in one process, on whatever board the backend is.

The (mode, inference batch) is decided by colocate's walk for a catalogue training workload beside
a catalogue inference workload (SIMULATED standalone profiles: the simulator's physics, inference
calibrated on a measured sweep), applied through ptui's verified apply, re-decided from the same
profiles when the rate changes (--then-rate), and the board's starting state is restored at the end.

* On the simulated board (virtual clock) each minibatch of the pair runs on the host and advances
  the board's clock by the simulator's time for the catalogue workload in the board's mode; power
  is the simulator's model: every figure is SIMULATED, and deterministic for a seed.
* On a sysfs or jtop board (`ptui emulate`'s tree, or a real Jetson) the pair runs in wall time:
  latency and throughput are the host's, power is the board's telemetry (an emulated board's is
  SIMULATED)."""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..board.backends.base import Backend
from ..catalogue.inference import get_inference
from ..catalogue.workloads import get_workload
from ..errors import InputError
from .interleave import BoardMeter, Decision, Interleaver, Managed, Poisson, SimWork, walk_profiles

FEATURES, CLASSES = 64, 10


def torch_device() -> str:
    """Where the demo pair runs: the GPU where there is one (a Jetson's), else the host's CPU."""
    import torch  # lazy: only the demo's own loops use torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def demo_pair(train_batch: int, seed: int = 0) -> tuple[Callable[[], Any], Callable[[list], Any]]:
    """(train_step, infer): an MLP trained by SGD on random minibatches of `train_batch`, and a
    second MLP answering a list of requests (payload: a feature vector, or None for a random one)."""
    try:
        import torch  # lazy: only the demo's own loops use torch
    except ImportError:
        raise InputError("the demo pair needs torch (pip install 'ptui[train]')") from None
    torch.manual_seed(seed)
    on = torch_device()
    if on == "cpu":
        torch.set_num_threads(1)
    net = torch.nn.Sequential(torch.nn.Linear(FEATURES, 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, CLASSES)).to(on)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    served = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(),
                                 torch.nn.Linear(64, CLASSES)).to(on).eval()
    gen = torch.Generator().manual_seed(seed + 1)

    def train_step() -> float:
        x = torch.randn(train_batch, FEATURES, generator=gen).to(on)
        y = torch.randint(0, CLASSES, (train_batch,), generator=gen).to(on)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return float(loss.detach())          # waits for the GPU: the minibatch is over when it returns

    def infer(payloads: list) -> list[int]:
        x = torch.stack([torch.as_tensor(p, dtype=torch.float32) if p is not None
                         else torch.randn(FEATURES, generator=gen) for p in payloads]).to(on)
        with torch.no_grad():
            return served(x).argmax(1).tolist()

    return train_step, infer


def run_demo(backend: Backend, *, train_workload: str = "resnet18", batch_size: int = 16,
             infer_workload: str = "resnet50", rate: float = 20.0, then_rate: float | None = None,
             latency_ms: float = 250.0, budget_w: float = 35.0, seconds: float | None = None,
             seed: int = 0, say: Callable[[str], None] = lambda _s: None,
             progress: Callable[[dict], None] | None = None, every_s: float = 1.0,
             stop: threading.Event | None = None) -> dict:
    """Run the demo pair; returns the decisions and the measured figures of each phase (a phase
    per rate).  InfeasibleError when no profiled mode meets the budgets.  progress(snapshot) gets
    the running phase's figures every `every_s` of the board's clock (live_snapshot); a set `stop`
    ends the run at the next training minibatch (the board is restored as at the end)."""
    for name, v in (("--rate", rate), ("--latency-ms", latency_ms), ("--budget-w", budget_w)):
        if not v > 0:
            raise InputError(f"{name} must be a positive number")
    if then_rate is not None and not then_rate > 0:
        raise InputError("--then-rate must be a positive number")
    virtual = backend.clock.virtual
    seconds = float(seconds if seconds is not None else (60.0 if virtual else 10.0))
    if not seconds > 0:
        raise InputError("--seconds must be a positive number")
    dev = backend.device
    train = get_workload(train_workload, batch_size)
    infer_name = get_inference(infer_workload).name
    say(f"deciding: {train.name} (batch {batch_size}) beside {infer_name} inference, standalone "
        f"profiles from the simulator's {dev.name} (SIMULATED)")
    profiles, profiled = walk_profiles(dev, train, infer_name, rate, latency_ms, budget_w)
    step, infer = demo_pair(batch_size, seed)
    arrivals = Poisson(rate, seed)
    if virtual:
        sim = SimWork(backend, train, infer_name)

        def train_step() -> None:
            step()
            sim.run("train", batch_size)

        def infer_step(payloads: list) -> None:
            infer(payloads)
            sim.run("infer", len(payloads))
        sched = Interleaver(infer_step, batch=1, latency_ms=latency_ms, clock=backend.clock,
                            arrivals=arrivals, meter=sim.meter, power_from=sim.power_from, simulated=True)
    else:
        meter = BoardMeter(backend)
        train_step = step
        sched = Interleaver(infer, batch=1, latency_ms=latency_ms, clock=backend.clock, arrivals=arrivals,
                            meter=meter, simulated=backend.not_live)
    start = backend.current_mode()
    phases = []
    with Managed(backend, profiles, sched, rate, budget_w, profiled=profiled) as m:
        sched.start()
        assert sched.t0 is not None
        cuts = [(rate, seconds if then_rate is None else seconds / 2)]
        if then_rate is not None:
            cuts.append((then_rate, seconds))
        for k, (r, until) in enumerate(cuts):
            if k:
                arrivals.rate = r
                d = m.set_rate(r)
            else:
                d = m.decisions[0]
            say(f"rate {r:g}/s: {d.pick.mode.describe()}, inference batch {d.pick.batch} "
                f"({'decided' if k == 0 else 're-decided from the same profiles'}): {d.applied}")
            t_phase = sched.clock.now()
            if stop is not None and stop.is_set():
                break
            tick = _ticker(sched, t_phase, r, d, progress, every_s, stop)
            sched.run(train_step, train_batch=batch_size, duration_s=until, tick=tick)
            rep = sched.report(since=t_phase)
            phases.append({"rate_per_s": r, "mode": d.pick.mode.as_dict(), "key": d.pick.mode.key,
                           "batch": d.pick.batch, "profiled_modes": d.profiled,
                           "predicted": {"train_samples_per_s": d.pick.prediction.train_sps,
                                         "latency_p99_ms": d.pick.prediction.p99_ms,
                                         "power_w": d.pick.prediction.power_w,
                                         "over_budget": d.pick.prediction.over_budget},
                           "measured": rep.as_dict()})
    end = backend.current_mode()
    return {"device": dev.name, "backend": backend.kind, "simulated": bool(backend.not_live),
            "virtual_clock": bool(virtual), "train_workload": train.name, "batch_size": batch_size,
            "infer_workload": infer_name, "latency_ms": latency_ms, "budget_w": budget_w,
            "seconds": seconds, "profiled_modes": profiled, "phases": phases,
            "start_mode": start.key, "end_mode": end.key, "restored": end == start,
            "power_from": sched.power_from, "torch_device": torch_device(),
            "stopped": bool(stop is not None and stop.is_set())}


def live_snapshot(sched: Interleaver, t_phase: float, rate: float, d: Decision) -> dict:
    """What a live view shows of a running phase: the board's clock since the run began, the
    phase's decision and its figures so far (Report.as_dict)."""
    assert sched.t0 is not None
    return {"clock_s": sched.clock.now() - sched.t0, "rate_per_s": rate, "key": d.pick.mode.key,
            "batch": d.pick.batch, "predicted_p99_ms": d.pick.prediction.p99_ms,
            "predicted_train_sps": d.pick.prediction.train_sps,
            "predicted_power_w": d.pick.prediction.power_w,
            "measured": sched.report(since=t_phase).as_dict()}


def _ticker(sched: Interleaver, t_phase: float, rate: float, d: Decision,
            progress: Callable[[dict], None] | None, every_s: float, stop: threading.Event | None):
    """The run's tick: a snapshot to `progress` every `every_s` of clock; False once `stop` is set."""
    if progress is None and stop is None:
        return None
    last = [sched.clock.now()]

    def tick() -> bool:
        now = sched.clock.now()
        if progress is not None and now - last[0] >= every_s:
            last[0] = now
            progress(live_snapshot(sched, t_phase, rate, d))
        return not (stop is not None and stop.is_set())
    return tick
