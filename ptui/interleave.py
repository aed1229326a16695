"""Training beside inference in one process: ptui's managed interleaving as a Python API.

One process owns the GPU.  It registers an inference callable and runs its training loop; at every
minibatch boundary the scheduler runs an inference minibatch of size b once b requests wait or the
oldest would miss its latency budget (it has waited longer than L - max(t_T, t_I(b)) - t_I(b)),
else the training minibatch runs; a running minibatch is never pre-empted (decision/concurrent.py
states the policy, README: "Training beside inference").  Requests arrive from `poisson(rate)`, a
recorded `trace([...])` of arrival offsets in seconds, and/or `submit(payload)` from any thread.

    from ptui import interleave as il

    sched = il.Interleaver(answer, batch=8, latency_ms=250, arrivals=il.poisson(20))
    for x, y in loader:                     # your training loop
        sched.serve()                       # the inference minibatches that are due
        with sched.training(len(x)):        # one training minibatch, timed
            train_step(x, y)
    sched.drain()
    print(sched.report())                   # p50/p99 ms, share over budget, samples/s, W

`Managed(backend, profiles, sched, rate, budget_w)` as a context manager also decides the power mode
and b from standalone profiles (`walk_profiles`, or `load_profiles` of a file `ptui colocate
--save-profiles` wrote), applies the mode verified, re-decides with `set_rate(r)` from the same
profiles (no profiling) and puts the board back as it was at the end, on an exception and, after
`install()`, on SIGTERM/SIGHUP.  `BoardMeter(backend)` reads the board's power (`open_backend`:
sim, sysfs, jtop).  A face like the CLI: it uses ptui.core through its façade only; it imports
neither textual nor torch (only the demo pair, `run_demo`, uses torch)."""
from __future__ import annotations

from . import core

Interleaver = core.Interleaver
Managed = core.Managed
Report = core.Report
Request = core.Request
Minibatch = core.Minibatch
Poisson = core.Poisson
poisson = core.poisson
trace = core.trace
BoardMeter = core.BoardMeter
SimWork = core.SimWork
Standalone = core.Standalone
walk_profiles = core.walk_profiles
profiles_of = core.profiles_of
save_profiles = core.save_profiles
load_profiles = core.load_profiles
open_backend = core.open_backend
install = core.install
VirtualClock = core.VirtualClock
RealClock = core.RealClock
get_workload = core.get_workload
demo_pair = core.demo_pair
run_demo = core.run_demo

__all__ = ["BoardMeter", "Interleaver", "Managed", "Minibatch", "Poisson", "RealClock", "Report", "Request",
           "SimWork", "Standalone", "VirtualClock", "demo_pair", "get_workload", "install", "load_profiles",
           "open_backend", "poisson", "profiles_of", "run_demo", "save_profiles", "trace", "walk_profiles"]
