"""Optimizer-step probe, installed inside the user's unmodified training script.

ptui starts the script with PTUI_PROBE_SOCK naming a Unix socket.  A path in the environment
survives launchers (torchrun, accelerate launch) that close inherited file descriptors; under a
launcher only rank 0 (RANK, else LOCAL_RANK, is 0 or unset) reports.  The probe registers torch's
global optimizer-step post-hook and writes one line per event:

``H <pid> <t>``            hello (t: CLOCK_MONOTONIC seconds)
``D <cpu|cuda|...>``       where the script trains: the device of its optimizer's parameters (sent
                           at the first optimizer step; torch seeing a GPU is not enough)
``F <n> <t>``              the script has run n forward passes of a model (a module with parameters,
                           a frozen or loaded TorchScript one, outermost calls only, not a
                           DataLoader's) and has neither called backward() nor stepped (sent at the
                           first, then at most once a second; counted until the first backward()
                           or step; from torch.compile on, compiled models' calls, counted
                           outside the compiled code, and the eager models' run or made before it,
                           by hooks of their own: dynamo guards on the global module hooks)
``B <n> <t> [g]``          backward() (or torch.autograd.grad, g: some of them were, a functional
                           loop) has been called n times and no optimizer has stepped yet (sent at
                           the first call, then at most once a second, until the first step)
``S <t> <opt> <nbw> <ncl> c<cpu> [x] [r] [s]``
                           an optimizer step ended at t; opt = index of the optimizer in order of
                           first use (several for GANs); nbw = the script's own backward() calls
                           (not those a running backward makes: checkpointing) since the previous
                           step, before this one began (>1: gradient accumulation, or with s
                           several passes of another kind); ncl = backward()
                           calls inside this step (a closure the optimizer evaluated itself: LBFGS);
                           cpu = the script's main thread's CPU seconds at the step (its work,
                           whatever else the machine runs); x = the interval ending here was slowed
                           by ptui's measurement and must not be timed; r = the first optimizer
                           stopped stepping and this one (opt 0 from here) is the first now;
                           s = the weights or their gradients changed between the nbw backward()
                           calls (SAM's two passes: no gradient accumulation)
``L <ms> <n>``             after the W line: the lower median of n batches' loading in the script's
                           own process (a DataLoader without workers), each iterator's first left out
``W <json>``               the model's measured size over one whole iteration, or over the period
                           of iterations whose work alternates (iterations: how many; PTUI_PROBE_WHATIF=1
                           only): training FLOPs (torch's FlopCounterMode), bytes touched by every
                           operator, operator count, parameters, optimizer state, DataLoader batch
                           size/workers/input bytes, optimizer steps and backward passes per iteration,
                           how many of its steps ran compiled (their operators are not seen), and
                           the first optimizer's parameters that got no gradient (frozen)

On CUDA a step's time is when the GPU finishes the work queued before the step ended: the hook
records a CUDA event there and reports the step once the GPU has reached it (checked at the next
steps and backward() calls), its time being the event's on the GPU's clock put on CLOCK_MONOTONIC
(a synchronise at the first step sets the offset, and one every 30 s keeps it; the iteration after
such a wait is flagged not to be timed).  Otherwise the script is never made to wait: a
synchronise per step would stop its next iteration's host work (data preparation, Python,
launches) from overlapping this one's GPU work, and the probe would time host + GPU where the
script alone takes the longer of the two (benchmarks/bench_probe_sync.py: 10 ms of host and 30 ms
of GPU work measured 41.6 ms against 30.1 ms alone on an H100).  The cost per step is one event and
one small write.  Nothing here may break the user's script: every failure is swallowed (and
reported to ptui where possible).

A compiled optimizer step (``torch.compile(opt.step)``, or a compiled function that steps): dynamo
traces torch's step wrapper and with it the step hooks.  While it traces, the hooks add one marker
operator (``ptui_probe::step_end``) to the graph and nothing else, so they cause no graph break; the
marker runs when the compiled step does and reports the step then.  The measuring window (torch
dispatch modes) is never entered or left inside a compiled call (dynamo restores the dispatcher's
state when the call returns, which leaves a mode half-installed): it waits for the next backward()
call made outside one.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import sys
import threading
import time

_sock: socket.socket | None = None
_lock = threading.Lock()


def _send(line: str) -> None:
    global _sock
    if _sock is None:
        return
    with _lock:
        try:
            _sock.sendall(line.encode())
        except OSError:                 # ptui went away: stop probing, keep training
            _sock = None


def is_reporting_rank(env=None) -> bool:
    """Rank 0 of a distributed launch, or a plain process (no RANK/LOCAL_RANK)."""
    env = os.environ if env is None else env
    for key in ("RANK", "LOCAL_RANK"):
        v = (env.get(key) or "").strip()
        if v:
            return v == "0"
    return True


def _connect(path: str) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        s.close()
        return None
    return s


def _tensor_bytes(obj) -> int:
    import torch
    from torch.utils._pytree import tree_leaves
    n = 0
    for x in tree_leaves(obj):
        if isinstance(x, torch.Tensor) and x.device.type != "meta":
            n += x.numel() * x.element_size()
    return n


class _GlobalOnly:
    """FlopCounterMode's module tracker, which puts every FLOP under 'Global' (all the probe reads)
    without registering global module hooks: torch's own tracker did, for the whole measured
    iteration, and a compiled model called in it made torch write "Using `torch.compile(module)`
    when there are global hooks on modules ..." into the script's log."""

    parents = frozenset({"Global"})

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


class _Window:
    """Counts one iteration: FLOPs (torch's counter), operators and bytes every operator reads and
    writes (views excluded), backward passes, optimizer steps and DataLoader batches."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import FlopCounterMode
        win = self
        self.ops = 0
        self.bytes = 0
        self.backward = 0
        self.steps = 0
        self.compiled_steps = 0              # steps that ran compiled (their operators unseen)
        self.batches = 0
        self.samples = 0
        self.input_bytes = 0
        # the optimizer steps that went parameter by parameter where CUDA would step them all at
        # once (torch's default foreach): their operators (after the step's last backward, so not a
        # closure's forward and backward), the tensors they updated, their parameter groups
        self.ops_at_pre: int | None = None   # operators counted when the running step's update began
        self.step_ops = 0
        self.step_tensors = 0
        self.step_groups = 0
        self.load_flops = 0                  # FLOPs of a batch's loading (a dataset that computes)
        self.iters = 0                       # whole iterations ended in it (a period: _period)
        self.no_grad_params = 0              # the first optimizer's parameters (elements) with no
        self.stepped_params = 0              # gradient at its step, of all of them (_no_grad)

        class _Bytes(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if getattr(_loading, "n", 0):
                    return out               # a DataLoader's own indexing and collating: the host's
                try:
                    win.ops += 1
                    if not getattr(func, "is_view", False):
                        win.bytes += _tensor_bytes((args, kwargs)) + _tensor_bytes(out)
                except Exception:  # noqa: BLE001, S110 - never break the user's script
                    pass
                return out

        self.flops = FlopCounterMode(display=False)
        if hasattr(self.flops, "mod_tracker"):
            self.flops.mod_tracker = _GlobalOnly()
        self.bytes_mode = _Bytes()

    def __enter__(self):
        self.flops.__enter__()
        self.bytes_mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.bytes_mode.__exit__(None, None, None)
        finally:
            self.flops.__exit__(None, None, None)


class _State:
    def __init__(self, whatif: bool) -> None:
        self.whatif = whatif
        self.optimizers: dict[int, object] = {}     # id -> weakref to the optimizer
        self.backward = 0
        self.backward_at_pre: int | None = None     # backward() calls when the running step began
        self.stepped = False                         # some optimizer has stepped
        self.backward_total = 0                      # backward() calls before the first step
        self.backward_said = 0.0                     # when the last B line went out
        self.grad_called = False                     # some were torch.autograd.grad calls
        self.forward_total = 0                       # forward passes before any backward() or step
        self.forward_said = 0.0                      # when the last F line went out
        self.forward_depth = 0                       # module calls running (outermost: 1)
        self.opt0_steps = 0
        self.window: _Window | None = None
        self.pending: str | None = None              # "open" / "close" the window at a safe point
        self.pending_since = 0                       # opt0_steps when it became pending
        self.window_touched = False                  # the window was open in this iteration
        self.measured = False
        self.workers: int | None = None
        self.batch_size: int | None = None
        self.device_tries = 0                        # the D line: 0 until sent, then -1
        self.load_s: list[float] = []                # batches' loading time, no workers (s)
        self.load_said = 0                           # how many of them the last L line had
        # what each whole iteration (first optimizer's step to its next) did: (backward() calls,
        # optimizer steps), to measure one like the others (_typical_window)
        self.iter_bw = 0                             # ... so far in the running iteration
        self.iter_steps = 0
        self.iter_evals = 0                          # ... and model.eval() calls (validation)
        self.iter_nograd = 0                         # ... and a model's forward passes with grad
                                                     # disabled (no_grad, inference_mode)
        self.iter_forward = 0                        # ... and with grad enabled
        self.sigs: list[tuple[int, ...]] = []        # the last few iterations'
        self.measured_sig: tuple[tuple[int, ...], ...] | None = None   # the measured iterations'
        self.span = 1                                # iterations a measurement spans (_period)
        self.remeasured = 0                          # windows discarded or measured again
        self.others_since = 0                        # steps of the others since the first's last
        self.most_steps = 0                          # the most optimizer steps a whole iteration had
        self.after_bw: list | None = None            # the sampled parameters after the last backward()
        self.passes_changed = False                  # the weights or their gradients changed between
                                                     # two backward() calls before this step (SAM)


_state: _State | None = None


def _is_compiling() -> bool:
    """torch.compiler.is_compiling where torch has it (dynamo folds the call to True while it
    traces; then the probe must add nothing to the graph)."""
    return False


def _no_ref():
    """The reference kept for an optimizer first seen stepping compiled (the marker gives its id)."""
    return None


def _find_optimizer(key: int):
    """The live optimizer whose id is key (one seen only through a compiled step's marker)."""
    import gc

    import torch
    for o in gc.get_objects():
        if id(o) == key and isinstance(o, torch.optim.Optimizer):
            return o
    return None


def _optimizer_sizes() -> tuple[int, int, int]:
    """(parameters, parameter bytes, optimizer state bytes) over the distinct optimizers."""
    import weakref

    import torch
    seen: set[int] = set()
    n = nbytes = state = 0
    for key, ref in list(_state.optimizers.items()):
        opt = ref()
        if opt is None and ref is _no_ref:
            opt = _find_optimizer(key)
            if opt is not None:
                _state.optimizers[key] = weakref.ref(opt)
        if opt is None:
            continue
        for g in opt.param_groups:
            for p in g["params"]:
                if id(p) in seen:
                    continue
                seen.add(id(p))
                n += p.numel()
                nbytes += p.numel() * p.element_size()
                for v in opt.state.get(p, {}).values():
                    if isinstance(v, torch.Tensor) and v.numel() > 1:
                        state += v.numel() * v.element_size()
    return n, nbytes, state


def _finish_window(device: str) -> None:
    w = _state.window
    _state.window = None
    _state.measured = True
    w.__exit__(None, None, None)
    params, param_bytes, state_bytes = _optimizer_sizes()
    info = {"flops": int(w.flops.get_total_flops() - w.load_flops), "bytes": int(w.bytes), "ops": w.ops,
            "params": params, "param_bytes": param_bytes, "state_bytes": state_bytes,
            "optimizers": len(_state.optimizers), "opt_steps": w.steps, "backward": w.backward,
            "batches": w.batches, "samples": w.samples, "input_bytes": w.input_bytes,
            "workers": _state.workers, "batch_size": _state.batch_size, "device": device,
            "compiled_steps": w.compiled_steps, "step_ops": w.step_ops, "step_tensors": w.step_tensors,
            "step_groups": w.step_groups, "no_grad_params": w.no_grad_params,
            "iterations": max(1, w.iters),
            "stepped_params": w.stepped_params,
            # a batch's loading in the script's own process (no workers), outside the window
            "load_ms": _load_ms(_state), "load_flops": w.load_flops}
    _send("W " + json.dumps(info) + "\n")


def _window_error(e: BaseException | str) -> None:
    _state.window, _state.measured, _state.pending = None, True, None
    _send("W " + json.dumps({"error": e if isinstance(e, str) else f"{type(e).__name__}: {e}"}) + "\n")


_compiled_code = None        # the code object of the wrapper torch.compile puts around a callable
_own_compile = False         # the probe compiles (to find that code object): not the script


def _inside_compiled_call() -> bool:
    """True when a torch.compile'd callable is on the stack (its graph, or the eager code run at a
    graph break): a dispatch mode entered or left there is undone by dynamo when the call returns."""
    global _compiled_code, _own_compile
    if "torch._dynamo" not in sys.modules:       # nothing was ever compiled
        return False
    if _compiled_code is None:
        try:
            import torch
            compile = getattr(torch.compile, "__wrapped__", torch.compile)     # not the probe's
            _own_compile = True
            try:
                _compiled_code = getattr(compile(_no_ref, backend="eager"), "__code__", False)
            finally:
                _own_compile = False
        except Exception:  # noqa: BLE001 - a torch whose compile cannot be asked: none on the stack
            _compiled_code = False
    f = sys._getframe(1)
    while f is not None:
        if f.f_code is _compiled_code:
            return True
        f = f.f_back
    return False


REMEASURE = 4                # windows at most discarded or measured again (_typical_window)
GIVE_UP_STEPS = 8            # a window that cannot open (or close) outside compiled code for this
                             # many iterations: the script's training step runs compiled end to end


def _window_point() -> None:
    """Open or close the measuring window as it is pending, here, outside any compiled call."""
    st = _state
    if st.pending is None or _is_compiling() or _inside_compiled_call():
        return
    try:
        if st.pending == "open":
            st.window = _Window().__enter__()
            st.window_touched = True
        else:
            _finish_window(_device)
    except Exception as e:  # noqa: BLE001 - never break the user's script
        _window_error(e)
    st.pending = None


def _flagged(rest: str) -> str:
    """An S line's rest with the flag: the interval ending here must not be timed."""
    return rest if " x" in rest else rest.rstrip("\n") + " x\n"


class _GpuStamps:
    """Step ends on a CUDA device, timed by events the GPU reaches (the module's docstring).

    All of it runs on the script's own thread, at its steps and backward() calls (a CUDA call from
    another thread can break a CUDA graph the script is capturing), and makes no CUDA call while
    the current stream captures.  Each step's time is chained from the previous one (CUDA's elapsed
    time is a float32 of milliseconds: from one fixed event it would round a step to a millisecond
    after 2.3 hours).  Every RESYNC_S the step waits for the GPU once to put the GPU's clock back on
    CLOCK_MONOTONIC (NTP slews the latter), and the next iteration, whose host work could not
    overlap, is flagged not to be timed."""

    RESYNC_S = 30.0

    def __init__(self, torch) -> None:
        self.torch = torch
        self.pending: list = []              # (event or None, monotonic time if None, the rest of the S line)
        self.base = None                     # (an event, CLOCK_MONOTONIC when the GPU reached it)
        self.synced = 0.0
        self.slow_next = False               # the next iteration started after a wait: flag it

    def _capturing(self) -> bool:
        try:
            return bool(self.torch.cuda.is_current_stream_capturing())
        except Exception:  # noqa: BLE001 - a torch without the call: assume not
            return False

    def _base_on(self, ev) -> None:
        """`ev`, which the GPU has just reached, is the next steps' base: its time is now."""
        self.synced = time.monotonic()
        self.base = (ev, self.synced)

    def stamp(self, rest: str) -> None:
        torch = self.torch
        if self.slow_next and rest.split()[0] == "0":
            self.slow_next, rest = False, _flagged(rest)
        if self._capturing():                # a captured step runs nothing now: no CUDA call
            self.pending.append((None, time.monotonic(), _flagged(rest)))
            return
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        if self.base is None:
            ev.synchronize()
            self._base_on(ev)
            import atexit
            atexit.register(self._last)
        self.pending.append((ev, None, rest))
        if time.monotonic() - self.synced > self.RESYNC_S:
            self.flush(wait=True)                # the GPU has reached ev (the last of them)
            self._base_on(ev)
            self.slow_next = True
            return
        self.flush()

    def flush(self, wait: bool = False) -> None:
        """Send the steps the GPU has reached, oldest first (wait: all of them)."""
        if self.pending and self._capturing():
            return
        while self.pending:
            ev, at, rest = self.pending[0]
            if ev is not None:
                try:
                    if wait:
                        ev.synchronize()
                    elif not ev.query():
                        return
                    base, base_t = self.base
                    at = base_t + base.elapsed_time(ev) / 1000.0
                    self.base = (ev, at)
                except Exception:  # noqa: BLE001 - an event that cannot be read: its step untimed
                    at, rest = time.monotonic(), _flagged(rest)
            del self.pending[0]
            _send(f"S {at:.6f} {rest}")

    def _last(self) -> None:
        """The steps still queued on the GPU when the script exits."""
        try:
            self.flush(wait=True)
        except Exception:  # noqa: BLE001, S110 - never break the user's script
            pass


_gpu_stamps: _GpuStamps | None = None


def _send_step(rest: str) -> None:
    """Report a step that ends now (rest: the S line after its time)."""
    global _gpu_stamps
    import torch
    if _cuda and _device == "cuda" and torch.cuda.is_initialized() and not _is_compiling():
        try:
            if _gpu_stamps is None:
                _gpu_stamps = _GpuStamps(torch)
            _gpu_stamps.stamp(rest)
            return
        except Exception:  # noqa: BLE001 - events refused: the steps before go out, then this one,
            try:               # on the host's clock (not the GPU's): untimed
                _gpu_stamps.flush(wait=True)
            except Exception:  # noqa: BLE001, S110 - never break the user's script
                pass
            rest = _flagged(rest)
    elif _gpu_stamps is not None and _gpu_stamps.pending:
        _gpu_stamps.pending.append((None, time.monotonic(), rest))   # in order after the queued ones
        return
    _send(f"S {time.monotonic():.6f} {rest}")


def _drain_steps() -> None:
    """At a backward() call: send the steps the GPU has reached since (no waiting)."""
    if _gpu_stamps is not None and _gpu_stamps.pending:
        try:
            _gpu_stamps.flush()
        except Exception:  # noqa: BLE001, S110 - never break the user's script
            pass


def _say_device(st: "_State", optimizer) -> None:
    """The D line, once: where the optimizer's parameters are (a script on a GPU machine whose
    model stayed on the CPU trains on the CPU).  Given up after three optimizers without any."""
    global _device
    st.device_tries += 1
    try:
        for group in optimizer.param_groups:
            for param in group["params"]:
                _device = param.device.type
                st.device_tries = -1
                _send(f"D {_device}\n")
                return
    except Exception:  # noqa: BLE001, S110 - no optimizer found (None) or no parameters
        pass
    if st.device_tries >= 3:
        st.device_tries = -1


def _foreach_by_default(optimizer) -> bool:
    """A torch.optim optimizer left to its default implementation, which steps all parameters at
    once (foreach) on CUDA and one at a time on a CPU: not one told foreach=False or fused, not a
    differentiable one, not one without a foreach implementation (LBFGS, most third-party ones)."""
    try:
        import torch
        if not isinstance(optimizer, torch.optim.Optimizer) or "foreach" not in optimizer.defaults:
            return False
        return all(g.get("foreach") is None and not g.get("fused") and not g.get("differentiable")
                   for g in optimizer.param_groups)
    except Exception:  # noqa: BLE001 - never break the user's script
        return False


def _step_ended(optimizer, key: int, compiled: bool) -> None:
    """One optimizer step ended: the hook, or the marker of a compiled step (optimizer None);
    compiled: called inside a compiled call (the step's operators ran compiled)."""
    import weakref

    st = _state
    if st.device_tries >= 0:
        _say_device(st, optimizer if optimizer is not None else _find_optimizer(key))
    st.stepped = True
    _stop_counting_forwards()
    ref = st.optimizers.get(key)
    if optimizer is not None and (ref is None or ref() is not optimizer):
        st.optimizers[key] = weakref.ref(optimizer)   # new (or a new one reusing a dead one's id)
    elif ref is None:
        st.optimizers[key] = _no_ref
    idx = list(st.optimizers).index(key)
    rebased = idx != 0 and _first_stopped(st, key)
    if rebased:
        idx = 0
    before = st.backward if st.backward_at_pre is None else st.backward_at_pre
    nbw, ncl = before, st.backward - before
    st.backward, st.backward_at_pre = 0, None
    changed = nbw > 1 and st.passes_changed
    st.passes_changed, st.after_bw = False, None
    flag = ""
    if st.window is not None:
        w = st.window
        w.steps += 1
        w.compiled_steps += int(compiled)
        if w.ops_at_pre is not None and _foreach_by_default(optimizer):
            w.step_ops += w.ops - w.ops_at_pre
            w.step_tensors += sum(1 for g in optimizer.param_groups for q in g["params"]
                                  if q.grad is not None)
            w.step_groups += len(optimizer.param_groups)
        w.ops_at_pre = None
        if idx == 0 and optimizer is not None:
            _quietly(_no_grad, w, optimizer)
    st.iter_bw += nbw + ncl
    st.iter_steps += 1
    if idx == 0:
        st.opt0_steps += 1
        st.others_since = 0
        st.most_steps = max(st.most_steps, st.iter_steps)
        if st.window is not None and st.pending is None:
            st.window.iters += 1
        _quietly(_typical_window, st, (st.iter_bw, st.iter_steps, st.iter_evals, st.iter_nograd,
                                       st.iter_forward), compiled)
        st.iter_bw = st.iter_steps = st.iter_evals = st.iter_nograd = st.iter_forward = 0
        if rebased:
            st.sigs = []                          # the iteration that ended here spans both
        if _made and st.whatif:
            _quietly(_watch_made)                 # models made since: an EMA's copy
        try:
            _say_loading(st)
        except Exception:  # noqa: BLE001, S110 - never break the user's script
            pass
        if st.window is not None or st.window_touched:
            flag = " x"                           # the measurement slowed this iteration
        if st.window is not None:
            if st.window.iters >= st.span:
                st.pending, st.pending_since = "close", st.opt0_steps
        elif st.whatif and not st.measured and st.pending is None and st.opt0_steps >= 2:
            st.pending, st.pending_since = "open", st.opt0_steps    # measure the next iteration
        if st.pending == "open" and st.opt0_steps - st.pending_since >= GIVE_UP_STEPS:
            _window_error("the training step runs compiled (torch.compile) end to end: ptui found "
                          "no point outside compiled code to count one iteration's FLOPs")
        if not compiled:
            _window_point()
        st.window_touched = st.window is not None
    _send_step(f"{idx} {nbw} {ncl} c{time.thread_time():.6f}{flag}{' r' if rebased else ''}"
               f"{' s' if changed else ''}\n")


def _no_grad(w: _Window, optimizer) -> None:
    """The first optimizer's parameters (elements) that got no gradient for its step in the window,
    and all of them: a warm-up that trains the head alone, the backbone frozen, for longer than
    the measurement was priced as every iteration's work, unsaid (ptui warns of it)."""
    none = n = 0
    for g in optimizer.param_groups:
        for p in g["params"]:
            n += p.numel()
            none += p.numel() if p.grad is None else 0
    w.no_grad_params, w.stepped_params = none, n


SAMPLED = 4                  # parameters sampled between backward() calls (_sampled)


def _sampled(st: _State) -> list | None:
    """What the first optimizer's first SAMPLED parameters are now: each one's version (bumped
    by an in-place change: SAM's perturbation) and its gradient's identity and version (set to None
    or zeroed: a zero_grad).  None before any step (no optimizer known)."""
    ref = next(iter(st.optimizers.values()), None)
    opt = ref() if ref is not None else None
    if opt is None:
        return None
    out = []
    for g in opt.param_groups:
        for p in g["params"]:
            grad = p.grad
            out.append((p._version, id(grad), -1 if grad is None else grad._version))
            if len(out) >= SAMPLED:
                return out
    return out


def _between_passes(st: _State, ended: bool) -> None:
    """Around a backward() call of the script's own, outside any step: where the weights or their
    gradients changed since the one before (SAM: the first pass's gradient perturbs the weights,
    zeroes the gradients, a second forward and backward pass follows, then the base optimizer
    steps), the step's backward passes are no gradient accumulation (micro-batches summed into one
    gradient), said in the S line (s).  ended: the call returned (sample the parameters)."""
    if st.backward_at_pre is not None:
        return                                # a closure evaluated inside a step (LBFGS)
    if ended:
        st.after_bw = _sampled(st)
    elif st.after_bw is not None and not st.passes_changed and st.backward > 1:
        st.passes_changed = _sampled(st) != st.after_bw


REBASE_STEPS = 10            # steps of other optimizers, none of the first's, that make one first


def _first_stopped(st: _State, key: int) -> bool:
    """Optimizer `key`, not the first, steps: True where the first has stopped stepping (a head
    trained alone by its own optimizer, then the whole model by another: every step after the
    head's read as one long unfinished iteration, and the what-if priced the head's training, or
    waited for ever) and `key` becomes the first: more steps of the others since the first's last
    than REBASE_STEPS and 3 whole iterations of the most steps seen, once a whole iteration has
    been (a WGAN's generator, first used, steps once per 5 critic steps, or 100 at first, and stays
    first).  What was measured is measured again."""
    st.others_since += 1
    if st.opt0_steps < 2 or st.others_since < max(REBASE_STEPS, 3 * st.most_steps):
        return False
    st.optimizers = {key: st.optimizers[key], **{k: v for k, v in st.optimizers.items() if k != key}}
    st.others_since = 0
    if st.window is not None:
        w, st.window = st.window, None
        _quietly(w.__exit__, None, None, None)
    # what was measured (a W line of the first's iterations) is not these: measured again
    st.pending, st.measured, st.measured_sig, st.opt0_steps, st.span = None, False, None, 0, 1
    return True


def _alike(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Two iterations' signatures do the same work: the same backward() calls, optimizer steps and
    model.eval() calls, and forward passes with grad disabled, and with grad enabled, each either
    in neither or in both, the one's at most twice the other's (a reinforcement-learning loop's
    rollouts, of varying length, run in every iteration; a validation pass without model.eval()
    in one of them only, under torch.no_grad() or not)."""
    if a[:3] != b[:3]:
        return False
    for x, y in zip(a[3:], b[3:]):
        m, n = sorted((x, y))
        if not (m == n or (m > 0 and n <= 2 * m)):
            return False
    return True


def _typical_window(st: _State, sig: tuple[int, ...], compiled: bool) -> None:
    """An iteration (`sig`: its backward() calls, optimizer steps, model.eval() calls and a
    model's forward passes with grad disabled and enabled) ended at
    the first optimizer's step: measure one that does what the others do.  An iteration whose work
    differs from the one before it is measured again at the next (a GradScaler that skipped a step
    on an overflow merges two iterations into one: the window held 2 forward and backward passes
    where every other step has 1, and the what-if priced 2x the FLOPs, said nowhere; a validation
    pass every 10 steps in the iteration measured priced 4.9x, its forward passes in every
    step, though the host's cycle has them once per 10; so did one under torch.no_grad() without
    model.eval(): its forward passes with grad disabled tell it, _alike; and one with grad enabled,
    its forward passes); iterations whose work alternates (a GAN's generator stepping every
    other iteration, micro-batches accumulated 2 then 1) are measured over their period, which
    repeats (_period: one of them measured priced every iteration as it, or used up the measures
    again and was warned of); and once the iterations have settled
    on other work than the one measured (LBFGS: 5 closure evaluations a step in its first few, then
    1), one of them is measured and sent again.  At most REMEASURE times in all; never around
    compiled steps (their window closes at the next backward(), not here)."""
    w = st.window
    st.sigs = (st.sigs + [sig])[-2 * PERIODS:]
    if compiled or st.remeasured >= REMEASURE or not st.whatif:
        return
    if w is not None and st.pending is None and not w.compiled_steps:
        if w.iters < st.span:
            return                                        # the period measured goes on
        if not _repeats(st.sigs, st.span):                # unlike the ones before it: again
            st.window = None
            st.remeasured += 1
            _quietly(w.__exit__, None, None, None)
            st.pending, st.pending_since = "open", st.opt0_steps
            st.span = _period(st.sigs)
        else:
            st.measured_sig = tuple(st.sigs[-st.span:])
    elif (st.measured and st.measured_sig is not None and st.pending is None and w is None
          and len(st.sigs) >= 3 and all(_alike(x, sig) for x in st.sigs[-3:])
          and not any(_alike(sig, m) for m in st.measured_sig)):
        st.measured, st.measured_sig = False, None      # the work settled elsewhere: measure again
        st.remeasured, st.span = st.remeasured + 1, 1


PERIODS = 3                  # the most iterations whose work alternates measured as one (_period)


def _repeats(sigs: list, p: int) -> bool:
    """The last p iterations did what the p before them did (as far as there are any)."""
    return all(_alike(sigs[-i], sigs[-i - p]) for i in range(1, p + 1) if i + p <= len(sigs))


def _period(sigs: list) -> int:
    """The fewest iterations over which the last ones' work repeats (2: a GAN's generator stepping
    every other iteration); 1 where none does within PERIODS."""
    return next((p for p in range(1, PERIODS + 1) if len(sigs) >= 2 * p and _repeats(sigs, p)), 1)


def _patch_backward() -> None:
    import torch
    orig = torch.autograd.backward
    # the graph task the calling thread is running (-1: none); a torch without it: -1
    running = getattr(torch._C, "_current_graph_task_id", lambda: -1)

    def backward(*args, **kwargs):
        if _is_compiling():           # traced inside a compiled function: no guards on the probe
            return orig(*args, **kwargs)
        if running() != -1:
            # called by a backward that is running (reentrant activation checkpointing runs each
            # block's backward inside the loss's, on autograd's threads): part of the script's
            # backward(), not one of its own (it read as gradient accumulation)
            return orig(*args, **kwargs)
        st = _state
        if st is not None:
            st.backward += 1
            if st.pending is not None:
                _window_point()
            if st.window is not None:
                st.window.backward += 1
            if not st.stepped:
                _backward_before_any_step(st)
            _drain_steps()
            _quietly(_between_passes, st, False)
        out = orig(*args, **kwargs)
        if st is not None:
            if st.window is not None and st.backward_at_pre is not None:
                st.window.ops_at_pre = st.window.ops      # a closure inside a step: the update follows
            _quietly(_between_passes, st, True)
        return out

    backward.__wrapped__ = orig
    torch.autograd.backward = backward
    _UNTRACED.append(backward)


def _quietly(fn, *args) -> None:
    """fn(*args), whatever it raises swallowed: never break the user's script."""
    try:
        fn(*args)
    except Exception:  # noqa: BLE001, S110
        pass


_in_train = 0                # Module.train calls running (a model's own: 1; its children's: more)


def _patch_eval() -> None:
    """Count the script's model.eval() calls (Module.train(False), the outermost only) in each
    iteration: one with a validation pass is no iteration to measure (_typical_window)."""
    from torch.nn import Module
    orig = Module.train

    def train(self, mode=True):
        global _in_train
        st = _state
        if st is not None and not mode and not _in_train and st.stepped and not _is_compiling():
            st.iter_evals += 1
        _in_train += 1
        try:
            return orig(self, mode)
        finally:
            _in_train -= 1

    train.__wrapped__ = orig
    Module.train = train
    _UNTRACED.append(train)


def _patch_grad() -> None:
    """torch.autograd.grad before any step: the script trains (a functional loop whose update is
    made by hand, MAML), said as a backward() is; never counted in a step's backward passes (a
    WGAN-GP's gradient penalty is no micro-batch)."""
    import torch
    orig = torch.autograd.grad

    def grad(*args, **kwargs):
        st = _state
        if st is not None and not st.stepped and not _is_compiling():
            _backward_before_any_step(st, grad=True)
        return orig(*args, **kwargs)

    grad.__wrapped__ = orig
    torch.autograd.grad = grad
    _UNTRACED.append(grad)


def _backward_before_any_step(st: _State, grad: bool = False) -> None:
    """Tell ptui that the script trains (calls backward(), or torch.autograd.grad: `grad`) while no
    optimizer has stepped: a parameter update without torch.optim (Keras on torch, a hand-written
    SGD) is never timed."""
    _stop_counting_forwards()
    st.backward_total += 1
    st.grad_called = st.grad_called or grad
    st.backward_said = _say_count("B", st.backward_total, st.backward_said, " g" if st.grad_called else "")


def _say_count(kind: str, n: int, said: float, tail: str = "") -> float:
    """The line `kind n t` (and tail) at the first event, then at most once a second; returns when
    the last one went out."""
    now = time.monotonic()
    if n == 1 or now - said >= 1.0:
        _send(f"{kind} {n} {now:.6f}{tail}\n")
        return now
    return said


_forward_hooks: list = []         # the global module hooks counting forward passes (F lines)
_model_hooks: list = []           # ... and the hooks on compiled modules, once torch.compile is called
_counting = False                 # forward passes are counted (until a backward(), a step, a fork)
_models = None                    # TorchScript models without parameters (frozen: folded into the
                                  # graph), a weakref.WeakSet once torch is hooked


def _forward_pre(module, args) -> None:
    if not _is_compiling() and _counting and _state is not None and not getattr(_loading, "n", 0):
        _state.forward_depth += 1


def _forward_post(module, args, out, seen: bool = True) -> None:
    """An outermost call of a model ended: one forward pass (module: what was called, or a
    compiled function's model; None: not a model; seen: the model is watched once training
    begins, _watch_models: not one a compiled function runs)."""
    st = _state
    if _is_compiling() or not _counting or st is None or getattr(_loading, "n", 0):
        return
    st.forward_depth = max(0, st.forward_depth - 1)
    try:
        if st.forward_depth == 0 and module is not None and _is_model(module):
            st.forward_total += 1
            st.forward_said = _say_count("F", st.forward_total, st.forward_said)
            if seen and len(_seen_models) < SEEN_MODELS and not any(r() is module for r in _seen_models):
                import weakref
                _seen_models.append(weakref.ref(module))
    except Exception:  # noqa: BLE001, S110 - never break the user's script
        pass


SEEN_MODELS = 16                  # models watched for forward passes, at most
_seen_models: list = []           # weak references to the models run before training began
_compile_called = False           # torch.compile was called (a model it traced takes no new hook)
_made: list = []                  # weak references to the modules made or copied since the last
                                  # look (_watch_made), the what-if's only
_made_room = 4096                 # its length at which the dead ones are dropped


def _watched_pre(module, args) -> None:
    """A watched model's call: one forward pass, with grad disabled (a validation pass under
    torch.no_grad() without model.eval(), a rollout) or enabled (the training's, or a validation
    pass that forgot torch.no_grad() too), counted in the running iteration."""
    if _is_compiling():
        return
    st = _state
    if st is not None and st.stepped and not getattr(_loading, "n", 0):
        if _grad_enabled():
            st.iter_forward += 1
        else:
            st.iter_nograd += 1


def _grad_enabled() -> bool:
    return True                       # torch.is_grad_enabled once torch is hooked


def _watch_models() -> None:
    """Training begins: a forward pre-hook on each model the script ran before (its outermost
    calls) and each it has made but not run yet (an EMA copy evaluated every N steps,
    _watch_made), at most SEEN_MODELS of them, counts its calls (grad disabled, enabled) per iteration
    (_typical_window).  One hook per model call, not per module (the global hooks cost every
    module's call)."""
    import torch
    global _grad_enabled
    _grad_enabled = torch.is_grad_enabled
    for ref in _seen_models:
        _watch(ref())
    _seen_models.clear()
    _watch_made()


_watched: list = []               # weak references to the models watched


def _watch(m) -> None:
    """Watch model m (_watched_pre), unless it is watched already, SEEN_MODELS are, or a compiled
    function may have traced it (adding a hook would recompile it): only compiled modules'
    wrappers then, whose hooks run outside the compiled code."""
    import weakref
    wrapper = getattr(sys.modules.get("torch._dynamo.eval_frame"), "OptimizedModule", None)
    if m is None or len(_watched) >= SEEN_MODELS or any(r() is m for r in _watched) or (
            _compile_called and (wrapper is None or not isinstance(m, wrapper))):
        return
    try:
        _watched_hooks.append(m.register_forward_pre_hook(_watched_pre))
        _watched.append(weakref.ref(m))
    except Exception:  # noqa: BLE001, S110 - a module that takes no hooks: not watched
        pass


def _watch_made() -> None:
    """Watch the models made or copied since the last look that no other module made since holds
    (an EMA's copy of the model, torch.optim.swa_utils.AveragedModel or a deepcopy, first run in a
    validation pass after training began, was never seen running and its passes went unseen: the
    what-if priced 8 validation passes into every iteration, 5x, unsaid)."""
    roots = _made_roots()
    _made.clear()
    for m in roots:
        _watch(m)


def _made_roots() -> list:
    """The models (modules with parameters) made or copied since the last look that no other module
    made since holds."""
    made = [m for m in (r() for r in _made) if m is not None]
    inner = {id(c) for m in made for c in m.children()}
    return [m for m in made if id(m) not in inner and _is_model(m)]


def _made_one(module) -> None:
    import weakref
    global _made_room
    if _state is None or not (_state.whatif or _counting):
        return
    _made.append(weakref.ref(module))
    if len(_made) >= _made_room:      # modules made and dropped (one made in each forward pass)
        _made[:] = [r for r in _made if r() is not None]
        _made_room = max(4096, 2 * len(_made))


def _patch_module_making() -> None:
    """Remember each module made (Module.__init__) or copied (Module.__setstate__: copy.deepcopy,
    a whole model unpickled): _watch_made looks at them when training begins and at each
    iteration's end after."""
    from torch.nn import Module
    init, setstate = Module.__init__, Module.__setstate__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if not _is_compiling():
            _quietly(_made_one, self)

    def __setstate__(self, state):
        setstate(self, state)
        if not _is_compiling():
            _quietly(_made_one, self)

    __init__.__wrapped__, __setstate__.__wrapped__ = init, setstate
    Module.__init__, Module.__setstate__ = __init__, __setstate__


_watched_hooks: list = []


def _is_model(module) -> bool:
    """A module with parameters, or a TorchScript model whose parameters were folded into its graph
    (torch.jit.freeze, optimize_for_inference) or that was loaded from a file."""
    if next(module.parameters(), None) is not None:
        return True
    try:
        return _models is not None and module in _models
    except TypeError:                 # unhashable (its class defines __eq__): not one torch.jit made
        return False


def _count_forwards() -> None:
    """Count the model's forward passes until the script calls backward() or steps: a script that
    only runs inference is then named as such once it has run them a while (the F lines), not
    after the whole start-up timeout.  Only a process's own outermost calls of a model count (not a
    DataLoader's transforms, nor a forked worker's): an eager or TorchScript module's, and from
    torch.compile on, a compiled model's (_counted_compile)."""
    global _counting
    from torch.nn.modules import module as nn_module

    _counting = True
    _forward_hooks.append(nn_module.register_module_forward_pre_hook(_forward_pre))
    try:
        _forward_hooks.append(nn_module.register_module_forward_hook(_forward_post, always_call=True))
    except TypeError:                 # an older torch: a forward that raises leaves the depth up
        _forward_hooks.append(nn_module.register_module_forward_hook(_forward_post))
    os.register_at_fork(after_in_child=lambda: _stop_counting_forwards(training=False))
    _stop_counting_at_compile()
    try:
        _mark_torchscript_models()
    except Exception:  # noqa: BLE001, S110 - never break the user's script
        pass


def _mark_torchscript_models() -> None:
    """A frozen TorchScript model (torch.jit.freeze, optimize_for_inference: the usual way to
    deploy one) has no parameters left, and one loaded from a file may have none: each is marked
    as a model when the script makes it (an inference loop over one waited out the whole start-up
    timeout, 600 s: the probe trial)."""
    import functools
    import weakref

    import torch
    global _models
    _models = weakref.WeakSet()

    def marking(orig):
        @functools.wraps(orig)
        def make(*args, **kwargs):
            out = orig(*args, **kwargs)
            try:
                if _counting and isinstance(out, torch.nn.Module):
                    _models.add(out)
            except Exception:  # noqa: BLE001, S110 - never break the user's script
                pass
            return out
        return make

    for name in ("freeze", "optimize_for_inference", "load"):
        if callable(getattr(torch.jit, name, None)):
            setattr(torch.jit, name, marking(getattr(torch.jit, name)))


def _stop_counting_at_compile() -> None:
    """torch.compile stops the global hooks' counting before it compiles anything (dynamo guards
    on them: removed later, they would recompile the model).  Not the import of dynamo: every
    torch.optim optimizer's constructor imports it, and a script that built one before its
    inference loop was never counted.  What it compiles is counted from outside the compiled code
    instead (_counted_compile): a compiled model's inference loop waited out the whole start-up
    timeout, 600 s (the probe trial)."""
    import functools

    import torch
    orig = torch.compile

    @functools.wraps(orig)
    def compile(*args, **kwargs):
        global _compile_called
        _quietly(_end_global_counting)
        _quietly(_uncount_eager, args[0] if args else kwargs.get("model"))
        _compile_called = True
        out = orig(*args, **kwargs)
        if not _counting or (not args and kwargs.get("model") is None):
            return out          # training already, or a decorator: its compile comes back here
        try:
            return _counted_compile(out, args[0] if args else kwargs["model"])
        except Exception:  # noqa: BLE001 - never break the user's script
            return out

    torch.compile = compile


def _counted_compile(out, model):
    """What torch.compile made of `model`, its calls counted as forward passes where it runs a
    model (a compiled module; a module's compiled method: Module.compile(); a compiled function
    given a module with parameters, @torch.compile on forward among them, or naming one), outside
    the compiled code: the hooks on a compiled module's wrapper run before dynamo's frame (dynamo
    traces the module inside), and a compiled function's wrapper passes straight through while
    dynamo traces it or once counting stops.  Another object's compiled method (an optimizer's
    step) and a function that takes nothing and names no model are returned as they are."""
    import functools

    import torch
    if isinstance(out, torch.nn.Module):
        if out is model:              # compiling disabled: the module itself, which dynamo may
            return out                # trace later (its own hooks would be guarded on)
        _count_calls(out)
        return out
    owner = getattr(model, "__self__", None)
    code = getattr(model, "__code__", None)
    if not callable(out) or (owner is not None and not isinstance(owner, torch.nn.Module)) or (
            owner is None and (code is None or not code.co_argcount and _model_of(model, ()) is None)):
        return out

    @functools.wraps(out)
    def counted(*args, **kwargs):
        if _is_compiling() or not _counting:
            return out(*args, **kwargs)
        try:
            who = owner if owner is not None else _model_of(model, (*args, *kwargs.values()))
        except Exception:  # noqa: BLE001 - never break the user's script
            who = None
        _forward_pre(who, args)
        try:
            return out(*args, **kwargs)
        finally:
            _forward_post(who, args, None, seen=False)

    return counted


def _count_calls(module) -> list:
    """Hooks on `module` that count its calls as forward passes (removed when counting stops)."""
    hooks = [module.register_forward_pre_hook(_forward_pre)]
    try:
        hooks.append(module.register_forward_hook(_forward_post, always_call=True))
    except TypeError:
        hooks.append(module.register_forward_hook(_forward_post))
    _model_hooks.extend(hooks)
    return hooks


_eager: dict = {}                 # id(model) -> the hooks counting an eager model's calls


def _end_global_counting() -> None:
    """dynamo is about to compile (torch.compile, torch._dynamo.optimize): the global hooks stop
    counting, and the eager models' own hooks count from here (_count_eager_models)."""
    if _forward_hooks and _counting:
        _remove(_forward_hooks)
        _count_eager_models()


def _count_eager_models() -> None:
    """The script's first torch.compile call ends the global hooks' counting: the models it has run
    or made, eager, are counted by hooks of their own from here (an eager model's inference loop
    after an unrelated compiled function, data preparation, counted nothing and waited out the
    whole start-up timeout, 600 s)."""
    for m in [r() for r in _seen_models] + _made_roots():
        if m is not None and id(m) not in _eager and _is_model(m):
            _eager[id(m)] = _count_calls(m)


def _uncount_eager(target) -> None:
    """A model about to be compiled (the module, a module's method, or one a compiled function
    names) loses its eager hooks: dynamo would trace them, and their removal when counting stops
    would recompile it.  What torch.compile makes of it is counted instead (_counted_compile)."""
    if not _eager or target is None:
        return
    for m in {id(x): x for x in (target, getattr(target, "__self__", None), _model_of(target, ()))
              if x is not None}.values():
        _remove(_eager.pop(id(m), []))


def _model_of(fn, given):
    """The model a compiled function runs: a module with parameters it is given (`given`: its
    arguments; a method's module among them) or its code names (a global, a closure's variable),
    found at each call (a global assigned after the function's definition); None: none (a function
    on tensors alone is no model: data preparation looks the same)."""
    import torch
    Module = torch.nn.Module
    found = list(given)
    code = getattr(fn, "__code__", None)
    if code is not None:
        glob = getattr(fn, "__globals__", {})
        found += [glob.get(n) for n in code.co_names]
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                found.append(cell.cell_contents)
            except ValueError:        # a variable not yet assigned
                pass
    return next((m for m in found if isinstance(m, Module) and _is_model(m)), None)


def _remove(hooks: list) -> None:
    while hooks:
        try:
            hooks.pop().remove()
        except Exception:  # noqa: BLE001, S110 - never break the user's script
            pass


def _stop_counting_forwards(training: bool = True) -> None:
    """The script trains (backward(), a step), or is a forked worker: stop counting; training:
    watch the models seen or made for forward passes with grad disabled from here (_watch_models)."""
    global _counting
    was, _counting = _counting, False
    _remove(_forward_hooks)
    _remove(_model_hooks)
    _eager.clear()
    if was and training:
        _quietly(_watch_models)


_loading = threading.local()      # this thread is inside a DataLoader's __next__ (n deep)
LOAD_TIMED = 32                   # batches' loading timed at most (the L line's median)


def _load_ms(st: "_State") -> float | None:
    """The lower median of the batches' loading timed so far (ms), from 3 of them; None before or
    with DataLoader workers (their loading is not in this process)."""
    if len(st.load_s) < 3 or st.workers:
        return None
    return sorted(st.load_s)[(len(st.load_s) - 1) // 2] * 1000.0


def _say_loading(st: "_State") -> None:
    """The L line: the loading timed since the W line went out (its median, and how many)."""
    if st.measured and len(st.load_s) > st.load_said and (ms := _load_ms(st)) is not None:
        st.load_said = len(st.load_s)
        _send(f"L {ms:.4f} {len(st.load_s)}\n")


def _patch_dataloader() -> None:
    from torch.utils.data import dataloader as dl
    orig = dl._BaseDataLoaderIter.__next__

    def __next__(self):
        if _is_compiling():
            return orig(self)
        st = _state
        w = st.window if st is not None else None
        f0 = w.flops.get_total_flops() if w is not None else 0
        _loading.n = getattr(_loading, "n", 0) + 1
        t0 = time.perf_counter()
        try:
            batch = orig(self)
        finally:
            _loading.n -= 1
        try:
            if w is not None and w is st.window:
                w.load_flops += w.flops.get_total_flops() - f0
            # the loading of this process's own batches: not an iterator's first (its sampler's
            # shuffle, files opened, caches cold), not inside the measured iteration, not an
            # inner loader's (nested), at most LOAD_TIMED of them
            first = not getattr(self, "_ptui_timed", False)
            self._ptui_timed = True
            if (st is not None and st.window is None and not first and _loading.n == 0
                    and not getattr(self, "_num_workers", 0) and len(st.load_s) < LOAD_TIMED):
                st.load_s.append(time.perf_counter() - t0)
        except Exception:  # noqa: BLE001, S110 - never break the user's script
            pass
        try:
            import torch
            from torch.utils._pytree import tree_leaves
            first = next((x for x in tree_leaves(batch) if isinstance(x, torch.Tensor) and x.dim()), None)
            _state.workers = int(getattr(self, "_num_workers", 0) or 0)
            if first is not None:
                _state.batch_size = int(first.shape[0])
            w = _state.window
            if w is not None:
                w.batches += 1
                w.samples += int(first.shape[0]) if first is not None else 0
                w.input_bytes += _tensor_bytes(batch)
        except Exception:  # noqa: BLE001, S110 - never break the user's script
            pass
        return batch

    dl._BaseDataLoaderIter.__next__ = __next__
    _UNTRACED.append(__next__)


def install() -> None:
    """Connect to ptui and hook torch once the script imports it.

    Every Python process started under ptui runs this (launcher parents such as torchrun, helper
    tools, the script itself): torch is imported and hooked only in a process that imports it
    itself, never by the probe (a helper without torch stays without it)."""
    global _sock, _state
    if not is_reporting_rank():
        return
    _sock = _connect(os.environ["PTUI_PROBE_SOCK"])
    if _sock is None:
        return
    _state = _State(os.environ.get("PTUI_PROBE_WHATIF") == "1")
    _send(f"H {os.getpid()} {time.monotonic():.6f}\n")
    threading.Thread(target=_watch_ptui, args=(_sock,), daemon=True, name="ptui-probe-watch").start()
    if "torch" in sys.modules:
        _install_torch()
    else:
        sys.meta_path.insert(0, _TorchImportWatch("torch", _install_torch))


def _watch_ptui(sock: socket.socket) -> None:
    """ptui never writes to the probe: the connection reads end-of-file only when ptui is gone
    (killed with kill -9, crashed).  The script runs in its own session, so nothing else would end
    it: end it here (its whole process group: a launcher's ranks too), then force it if it is still
    running after a grace period."""
    try:
        while sock.recv(64):
            pass
    except OSError as e:
        if e.errno in (errno.EBADF, errno.ENOTSOCK):
            # the script closed this descriptor itself (a launcher's os.closerange before it
            # starts its ranks): that says nothing about ptui, which is still there
            return
    _end_orphaned_script()


def _end_orphaned_script(grace_s: float = 10.0) -> None:
    import signal
    try:
        sys.stderr.write("ptui is gone (the probe's connection to it closed): ending the training "
                         "script\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001, S110
        pass
    group = os.getpgrp() == os.getsid(0)      # the session ptui started: this process's group
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            if group:
                os.killpg(os.getpgrp(), sig)
            else:
                os.kill(os.getpid(), sig)
        except OSError:
            return
        time.sleep(grace_s)                    # still here: the script handled SIGTERM and lives on


class _TorchImportWatch:
    """A meta path finder: when module `name` (``torch``; later ``torch._dynamo``) finishes
    importing, call `then` (install the step hooks).  Finding torch is not importing it (libraries
    ask importlib.util.find_spec('torch') first): the watch ends only when the module actually
    runs."""

    def __init__(self, name: str, then) -> None:
        self.name, self.then = name, then
        self.done = False

    def find_spec(self, name, path=None, target=None):
        if name != self.name or self.done:
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HookAfterLoad(spec.loader, self)
        return spec

    def finish(self) -> None:
        self.done = True
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


class _HookAfterLoad:
    """Wraps a module's loader: runs it, then the watch's action on the fully imported module."""

    def __init__(self, loader, watch: _TorchImportWatch) -> None:
        self._loader, self._watch = loader, watch

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = self._loader          # torch sees its own loader, not this wrapper
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        first = not self._watch.done
        self._watch.finish()
        self._loader.exec_module(module)
        if first:
            try:
                self._watch.then()
            except Exception as e:  # noqa: BLE001 - never break the user's script
                sys.stderr.write(f"ptui probe not installed: {e}\n")


_device = "cpu"
_cuda = False
_MARK = None                 # the tensor the compiled-step marker names as mutated (kept in graphs)


def _register_marker(torch):
    """The marker operator a compiled step carries (None where torch has no custom_op)."""
    global _MARK
    try:
        @torch.library.custom_op("ptui_probe::step_end", mutates_args=("mark",),
                                 schema="(Tensor(a!) mark, int key) -> ()")
        def step_end(mark, key):
            try:
                _step_ended(None, key, compiled=True)
            except Exception:  # noqa: BLE001, S110 - never break the user's script
                pass
    except Exception:  # noqa: BLE001 - an older torch: compiled steps graph-break at the hook
        return None
    _MARK = torch.zeros(1)
    return torch.ops.ptui_probe.step_end


def _install_torch() -> None:
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    global _is_compiling, _cuda
    _is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _is_compiling
    _cuda = torch.cuda.is_available()
    marker = _register_marker(torch)

    def pre_hook(optimizer, args, kwargs) -> None:
        if not _is_compiling():
            _state.backward_at_pre = _state.backward
            if _state.window is not None:
                _state.window.ops_at_pre = _state.window.ops

    def hook(optimizer, args, kwargs) -> None:
        if _is_compiling():                       # dynamo traces this: only the marker goes in
            if marker is not None:
                marker(_MARK, id(optimizer))
                return
        # eager here, but maybe inside a compiled call: dynamo runs a frame it cannot trace (the
        # hooks' loop after torch's own graph break in the step) as it is; the update ran compiled
        try:
            _step_ended(optimizer, id(optimizer), compiled=_inside_compiled_call())
        except Exception:  # noqa: BLE001, S110 - never break the user's script
            pass

    register_optimizer_step_pre_hook(pre_hook)
    register_optimizer_step_post_hook(hook)
    _patch_backward()
    _patch_grad()
    _quietly(_patch_eval)
    _quietly(_patch_module_making)
    if "torch._dynamo" not in sys.modules:
        try:
            _count_forwards()
        except Exception:  # noqa: BLE001, S110 - never break the user's script
            _stop_counting_forwards(training=False)
    try:
        _patch_dataloader()
    except Exception:  # noqa: BLE001, S110 - never break the user's script
        pass
    if "torch._dynamo" in sys.modules:
        _skip_in_dynamo()
    else:
        sys.meta_path.insert(0, _TorchImportWatch("torch._dynamo", _skip_in_dynamo))


_UNTRACED: list = []         # the probe's wrappers dynamo must not trace (it would guard on the probe)


def _skip_in_dynamo() -> None:
    """Once dynamo is loaded: it runs the probe's backward() and DataLoader wrappers as they are,
    never compiling their frames nor inlining them (a graph breaks there anyway: torch's backward
    and a DataLoader's iteration cannot be traced).  The step hooks stay traceable: they add only
    the compiled-step marker."""
    from torch._dynamo import decorators
    for fn in _UNTRACED:
        decorators.skip(fn)
    _quietly(_end_counting_at_optimize)


def _end_counting_at_optimize() -> None:
    """torch._dynamo.optimize(backend)(model) makes a compiled model without torch.compile: the
    global hooks, still counting, made torch warn in the script's log that global hooks would
    fire an extra time for its OptimizedModule (at each call).  They stop counting there too."""
    import functools

    import torch._dynamo as dynamo
    orig = getattr(dynamo, "optimize", None)
    if not callable(orig):
        return

    @functools.wraps(orig)
    def optimize(*args, **kwargs):
        global _compile_called
        if not _own_compile:        # torch.compile's own call comes here too
            _quietly(_end_global_counting)
            _compile_called = True
        return orig(*args, **kwargs)

    dynamo.optimize = optimize
