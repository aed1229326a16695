"""Profiling the user's own training script under the probe (ptui/probe/hook.py).

What is timed: one *iteration* of the script's training loop.  With one optimizer that is one
optimizer.step() (with gradient accumulation: one step over several micro-batches, never one
micro-batch; where the weights or their gradients change between its backward passes, as SAM's
do, it is named a step after N backward passes, not accumulation); with several optimizers (a
GAN) it is one cycle through all of them, from one step
of the first optimizer used to its next step.  LBFGS-style closures the optimizer evaluates itself
are named as such; a script that calls backward() but never steps a torch.optim optimizer is
stopped after NO_STEP_S with what ptui times and how to make it timeable.  Beside the median
iteration each mode gets its whole cycle (Profiler: the window's wall time per iteration, the work
between the steps included: rollouts, validation passes).

On a real board the iterations are the minibatch events and the board's sensors give power.  On
the SIMULATED board the host's step time says nothing about a Jetson, so the script is run only
long enough to measure its model (training FLOPs, bytes touched, parameters, batch size, DataLoader
workers, optimizer steps per iteration) and time host iterations (over at least HOST_CYCLE_MIN_S,
for the host's whole cycle); that size becomes a Workload for the simulator's roofline physics, and
the profile is a what-if whose time and power follow the mode.  The host step time is reported
separately; the host's work outside the steps is added to each mode's cycle, scaled by CPU clock.
"""
from __future__ import annotations

import json
import os
import queue
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import ptui

from ..board.backends.base import Backend, MinibatchEvent
from ..board.csvio import OUTSIDE_WARN, outside_note
from ..board.physics import WorkloadPhysics
from ..catalogue.workloads import SCRIPT_WORKLOAD, Workload, get_workload
from ..errors import EXIT_INPUT
from ..prediction.roofline import HOST_FIXED_MCYCLES, HOST_MCYCLES_PER_OP, launch_ops, loading_ms
from ..progress import plural
from .profiler import ProfileConfig, ProfileError, ScriptUnprofilable, SessionError

PROBE_SITE = Path(ptui.__file__).resolve().parent / "probe" / "site"   # holds sitecustomize.py only
PTUI_ROOT = Path(ptui.__file__).resolve().parent.parent                # where `import ptui` is found
WHATIF_LABEL = "what-if from the model's measured size (SIMULATED)"
EMULATED_LABEL = "power and clocks from an emulated board (SIMULATED)"
"""Said of a profile on ptui emulate's tree, in its CSV's `timed` too: its rows read as a Jetson's
(`one optimizer step`), so ptui pool push counted them as a real board's measurements."""
HOST_ITERATIONS = 3            # clean host iterations timed before a what-if profile starts
HOST_CYCLE_MIN_S = 1.0         # ... over at least this much wall time and 3x the longest iteration
HOST_CYCLE_MAX_S = 30.0        #     (work between the steps: rollouts, validation), at most this
CYCLE_WINDOW_MAX_S = 60.0      # a board's window per mode spans 3x the longest recent iteration, to
                               # this at most, so its whole cycle holds the work between the steps
# FLOPs per operator at which Orin AGX's kernels half-fill its SMs: a measured ResNet-18 at batch
# 16 (570 MFLOP per launched operator, roofline.launch_ops) then has the half-utilisation batch the
# catalog's rule gives it, 8 x sqrt(5.4 / 10.65 GFLOP per sample) = 5.70
X_HALF_FLOP_PER_OP = 2.029e8
# a board's script whose torch sees no GPU (a torch from PyPI has no CUDA for a Jetson's GPU)
CPU_TRAINING_WARNING = (
    "warning: the script trains on the CPU: torch in it sees no CUDA device, so the GPU's clock "
    "will not change its step time and every mode is timed for CPU training; on a Jetson, install "
    "NVIDIA's torch for its JetPack (a torch wheel from PyPI has no CUDA for the Jetson's GPU)")
# the same, where the script is only counted for the roofline prior (tune --count 0): the prior's
# figures are the GPU's (a user's trial: 62 ms a step on one core at 115 MHz, for CPU training)
PRIOR_CPU_TRAINING_WARNING = (
    "warning: the script trains on the CPU (torch in it sees no CUDA device), but the roofline "
    "prior predicts its step as the board's GPU would train it: these figures will not hold until "
    "it trains on CUDA (on a Jetson, NVIDIA's torch for its JetPack; a torch wheel from PyPI has "
    "no CUDA for the Jetson's GPU), and a profile (--count N) would time CPU training")
UNTYPICAL_WAIT = 10            # iterations waited for the probe to measure again one like the
                               # recent ones (_measured_typical), then the what-if goes on, warned
NO_GRAD_WARN = 0.1             # the share of the optimizer's parameters with no gradient in the
                               # iteration measured that is warned of (_say_no_grad)
OUTSIDE_MIN_S = 0.005          # the least excess of an iteration counted as work outside the steps
COUNT_ITERATIONS = 5           # tune --count 0: host iterations run before the script is stopped
STARTUP_TIMEOUT_S = 600.0      # default wait for a script's first optimizer step (--startup-timeout)
NO_STEP_S = 60.0               # backward() called this long without any optimizer step: say it
                               # cannot be timed (unless --startup-timeout asks to wait longer)
FORWARD_ONLY_S = 120.0         # forward passes run this long without a backward(): inference only
                               # (60 s stopped a DQN-style loop filling its replay buffer with its
                               # policy's forward passes before it trained), as NO_STEP_S
FORWARD_GAP_S = 10.0           # forward passes this far apart are not one run of them (a warm-up
                               # pass, then minutes of data preparation, is no inference loop)
INFERENCE_ONLY = "a script that only runs inference or evaluation has no training step for ptui to time"
TIMED_SAVE_S = 1.0             # what one step is goes to the session store at most this often
SETTLE_S = 2.5                 # a mode's switch and power settling before its steps are timed
                               # (2.0-3.5 s on an emulated Orin AGX), then at least
                               # ProfileConfig.min_power_samples power samples are recorded


# -- session helpers (resume) --------------------------------------------------------------------
def command_text(argv) -> str:
    return shlex.join(str(a) for a in argv)


def check_command(argv) -> None:
    """A training command that cannot start is bad input, said before anything is opened (a
    session, a board): a path that is not an executable file, or a name not on $PATH."""
    if not argv:
        return
    cmd = str(argv[0])
    if os.sep in cmd:
        ok = os.path.isfile(cmd) and os.access(cmd, os.X_OK)
        why = "No such file or directory" if not os.path.exists(cmd) else "Permission denied"
    else:
        ok, why = shutil.which(cmd) is not None, "not found on $PATH"
    if not ok:
        raise ProfileError(f"cannot start {cmd!r}: {why}", exit_code=EXIT_INPUT)
    script = _python_script(argv)
    if script is not None and not os.path.isfile(script):
        # python itself starts, then exits 2 at once: that read as a training script that crashed
        # before its first step, with a resume hint (the user's trial)
        raise ProfileError(f"cannot start {command_text(argv)!r}: its script {script!r} "
                           f"{'is not a file' if os.path.exists(script) else 'does not exist'}",
                           exit_code=EXIT_INPUT)


def _python_script(argv) -> str | None:
    """The script a `python [options] SCRIPT.py ...` command runs (None: not such a command, or
    `-m module` / `-c code`)."""
    if not os.path.basename(str(argv[0])).startswith("python"):
        return None
    args = [str(a) for a in argv[1:]]
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-m", "-c") or a.startswith(("-m", "-c")) and len(a) > 2:
            return None
        if a in ("-X", "-W", "--check-hash-based-pycs"):
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        return a if a.endswith(".py") else None
    return None


def check_resume_command(params: dict, argv) -> None:
    """A script session resumes only with the command it was started with."""
    stored = params.get("command")
    if stored is None or not argv:
        return
    if list(map(str, stored)) != list(map(str, argv)):
        raise SessionError(f"session was profiled with `{command_text(stored)}`, not "
                           f"`{command_text(argv)}`; resume with the same command or start a new session")


def resume_hint(name: str, out, argv=None, extra=()) -> str:
    """The exact command that resumes a session (extra options, e.g. the replay device's, before
    --out; the script's command after --)."""
    cmd = shlex.join(["ptui", "profile", "--session", name, "--resume", *extra, "--out", str(out)])
    return cmd + (f" -- {command_text(argv)}" if argv else "")


def steps_note(min_timed: int, n_modes: int) -> str:
    per = min_timed + 2
    return (f"each mode needs at least {per} training iterations (optimizer steps; 2 dropped after "
            f"the switch, {min_timed} timed) once power has settled; {plural(n_modes, 'mode')} to go")


# -- what-if workload ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ScriptWorkload(Workload):
    """A workload measured from a user's script; carries its own roofline physics."""
    physics: object = None


def whatif_workload(info: dict, *, command: str = "") -> ScriptWorkload:
    """Turn the probe's measurement of one iteration into a Workload for the simulator's physics.

    Compute: the iteration's FLOPs (forward + backward + optimizer) from torch's counter.  Bytes:
    what every operator reads and writes (views excluded), split into a fixed part that scales with
    the parameters (weights read twice, gradients, optimizer update and state) and a part per
    sample.  Kernel efficiency grows with the average work per operator (small kernels leave the
    GPU idle); host work scales with the operator count (launches, Python); the data pipeline with
    the bytes each sample brings in."""
    if info.get("error"):
        raise ScriptUnprofilable(f"could not measure the script's model: {info['error']}; no what-if for "
                           f"the simulated board (on a Jetson ptui times its steps directly)")
    flops = float(info.get("flops") or 0)
    if flops <= 0:
        raise ScriptUnprofilable("torch's FLOP counter saw no FLOPs in one iteration of the script (a "
                           "torch.compile'd or non-torch model?): no what-if for the simulated board; "
                           "profile it on a Jetson")
    samples = int(info.get("samples") or 0)
    B = samples if samples > 0 else 1
    ops = max(1, launch_ops(info))
    param_bytes = float(info.get("param_bytes") or 0)
    state_bytes = float(info.get("state_bytes") or 0)
    total_bytes = float(info.get("bytes") or 0) + compiled_step_bytes(info)
    fixed = min(total_bytes, 6.0 * param_bytes + 2.0 * state_bytes)
    per_sample = max(0.0, total_bytes - fixed) / B
    x = flops / ops
    # FLOPs per FP32-FMA peak: training kernels on Jetson use TF32 tensor cores, so large kernels
    # beat the CUDA-core FP32 rate; calibrated so a measured ResNet-18 lands on the catalog's
    eff = min(1.1, max(0.02, 1.1 * x / (x + 5e6)))
    # A known batch: kernel efficiency follows it as for the catalog's models (batch_half's rule,
    # relative to batch 16).  An unknown one (no DataLoader: the iteration is one unit of however
    # many samples) was priced as one sample of the whole iteration's work at batch 1's efficiency,
    # 2x the GPU time of the same iteration through a DataLoader: its kernels are what they are,
    # so the unit holds eff as measured, and the batch that half-fills Orin AGX's SMs is the one
    # whose kernels would do X_HALF_FLOP_PER_OP
    known = samples > 0
    half, eff_batch = (None, 16.0) if known else (X_HALF_FLOP_PER_OP / x, 1.0)
    in_b = float(info.get("input_bytes") or 0) / B
    # data loading: measured where the script loads its batches itself (no workers), its host
    # seconds as cycles at the host's clock (as the host's work outside the steps is scaled); else
    # the rule per input byte (a decoding, augmenting pipeline's cost)
    loaded = _loading_mcycles(info)
    data_mcycles = (0.02 + 45.0 * in_b / 1e6) if loaded is None else loaded
    data_misses_k = (0.01 + in_b / 64.0 / 400.0) if loaded is None else 0.01
    wp = WorkloadPhysics(
        gflop=flops / B / 1e9, gpu_eff=eff, gb_per_sample=per_sample / 1e9, gb_fixed=fixed / 1e9,
        roof_p=3.0, host_mcycles=HOST_FIXED_MCYCLES + HOST_MCYCLES_PER_OP * ops,
        host_misses_k=5.0 + 0.06 * ops,
        data_mcycles=data_mcycles, data_misses_k=data_misses_k,
        data_mb=2.0 * in_b / 1e6, gpu_act=0.55 + 0.45 * min(1.0, eff / 1.1), first_batch_x=4.0,
        batch_half=half, eff_batch=eff_batch)
    params_m = float(info.get("params") or 0) / 1e6
    return ScriptWorkload(
        name=SCRIPT_WORKLOAD, model=f"what-if: {command[:50]}" if command else "what-if: user script",
        task="user script", dataset="user data", samples=B, params_m=params_m,
        fwd_gflops=flops / B / 3e9, layers=0, workers=int(info.get("workers") or 0),
        dataset_size="?", maxn_epoch_min=0.0, batch_size=B, physics=wp)


def _loading_mcycles(info: dict) -> float | None:
    """Mcycles per sample of the batches' loading the probe timed in the script's own process (a
    DataLoader with no workers, host seconds x the host's MHz), or None where it timed none."""
    loaded, samples = loading_ms(info), int(info.get("samples") or 0)
    if loaded is None or samples <= 0:
        return None
    return loaded / 1000.0 * float(info["host_mhz"]) / samples


def compiled_step_bytes(info: dict) -> float:
    """Memory traffic of the optimizer steps that ran compiled in the measured iteration (the
    probe does not see a compiled graph's operators): a fused update reads the parameters, their
    gradients and the optimizer state and writes the parameters and the state once."""
    n = int(info.get("compiled_steps") or 0)
    steps = max(1, int(info.get("opt_steps") or 1))
    share = min(1.0, n / steps)
    return share * (3.0 * float(info.get("param_bytes") or 0) + 2.0 * float(info.get("state_bytes") or 0))


# what a measurement over several iterations (a period of iterations whose work alternates) has
# summed over them: per_iteration divides it
PERIOD_SUMS = ("flops", "bytes", "ops", "opt_steps", "backward", "batches", "samples", "input_bytes",
               "compiled_steps", "step_ops", "step_tensors", "step_groups", "load_flops")


def per_iteration(info: dict) -> dict:
    """The probe's measurement per iteration: a period of iterations whose work alternates (a
    GAN's generator stepping every other iteration) is measured over all of them, its mean."""
    n = int(info.get("iterations") or 1)
    if n <= 1:
        return info
    return {**info, **{k: info[k] / n for k in PERIOD_SUMS if isinstance(info.get(k), (int, float))}}


def describe_model(info: dict) -> str:
    samples = int(info.get("samples") or 0)
    bs = (f"{samples} samples per iteration" if samples else
          "batch size unknown (no DataLoader seen: the iteration is one unit)")
    est = compiled_step_bytes(info)
    compiled = (f"; the optimizer step ran compiled (torch.compile): its operators are not counted, "
                f"its memory traffic is estimated from the parameters and optimizer state "
                f"({est / 1e6:.3g} MB: parameters and gradients read, parameters written, state read "
                f"and written once)" if info.get("compiled_steps") else "")
    ops, launched = int(info.get("ops") or 0), launch_ops(info)
    ops_said = f"{ops} operators"
    if launched != ops:
        ops_said += (f" ({launched} as a Jetson launches them: the optimizer steps its parameters "
                     f"at once on CUDA, one by one on this CPU)")
    loading = (f" ({float(info['load_ms']):.1f} ms loading each batch in the script's process, measured "
               f"on this machine)" if _loading_mcycles(info) is not None else "")
    n = int(info.get("iterations") or 1)
    mean = f" (the mean of {n} iterations whose work alternates)" if n > 1 else ""
    return (f"{info.get('flops', 0) / 1e9:.3g} GFLOP and "
            f"{(info.get('bytes', 0) + est) / 1e6:.3g} MB touched "
            f"per iteration{mean}, {info.get('params', 0):,} parameters, {ops_said}, "
            f"{bs}, {info.get('workers') or 0} DataLoader workers{loading}" + compiled)


# -- what an iteration is ------------------------------------------------------------------------
class _Iterations:
    """Turns the probe's step lines into whole iterations (boundary: the first optimizer's step)."""

    def __init__(self) -> None:
        self.steps = 0                       # optimizer steps seen (all optimizers)
        self.optimizers = 0
        self.last: float | None = None       # time of the last iteration boundary
        self.n_iter = 0                      # iterations completed
        self.steps_in: int = 0
        self.bw_in: int = 0
        self.cl_in: int = 0
        self.per_iter_steps: list[int] = []
        self.per_step_bw: list[float] = []   # backward() calls before each step (accumulation)
        self.per_step_cl: list[float] = []   # backward() calls inside each step (closure evaluations)
        self.per_iter_bw: list[int] = []     # backward() calls in each iteration, all its steps'
        self.per_step_changed: list[bool] = []   # the weights or gradients changed between them
        self.changed_in = False

    def step(self, t: float, opt: int, nbw: int, excluded: bool, ncl: int = 0,
             rebased: bool = False, changed: bool = False) -> float | None:
        """Feed one step; return the duration (s) of an iteration that ended here, if any
        (rebased: the first optimizer stopped stepping and this one is the first now: the
        iterations start again from here; changed: the weights or their gradients changed between
        the step's backward passes, as SAM's do: not gradient accumulation)."""
        self.steps += 1
        if rebased:
            self.optimizers, self.last = 1, t
            self.steps_in = self.bw_in = self.cl_in = 0
            for kept in (self.per_iter_steps, self.per_step_bw, self.per_step_cl, self.per_iter_bw,
                         self.per_step_changed):
                kept.clear()
            return None
        self.optimizers = max(self.optimizers, opt + 1)
        self.steps_in += 1
        self.bw_in += nbw
        self.cl_in += ncl
        self.changed_in = self.changed_in or changed
        if opt != 0:
            return None
        done = None
        if self.last is not None:
            self.n_iter += 1
            self.per_iter_steps.append(self.steps_in)
            self.per_step_bw.append(self.bw_in / max(1, self.steps_in))
            self.per_step_cl.append(self.cl_in / max(1, self.steps_in))
            self.per_iter_bw.append(self.bw_in + self.cl_in)
            self.per_step_changed.append(self.changed_in)
            if not excluded:
                done = t - self.last
        self.last, self.steps_in, self.bw_in, self.cl_in = t, 0, 0, 0
        self.changed_in = False
        return done

    @property
    def uneven(self) -> bool:
        """Several optimizers, and some recent step-to-step interval of the first holds no step of
        another: the first steps more often (a WGAN's critic, n_critic times per generator step),
        so the unit timed and counted (from the first's step to its next) is not a whole
        iteration."""
        return self.optimizers > 1 and bool(self.per_iter_steps) and \
            min(self.per_iter_steps[-20:]) < self.optimizers

    def typical(self, last: int = 5, period: int = 1) -> tuple[int, int] | None:
        """(backward passes, optimizer steps) of the recent whole iterations, or of `period`
        consecutive ones (the median of the last few); None before any."""
        if len(self.per_iter_steps) < period or not self.per_iter_steps:
            return None

        def sums(per: list[int]) -> list[int]:
            return [sum(per[i:i + period]) for i in range(len(per) - period + 1)][-last:]
        return (statistics.median_low(sums(self.per_iter_bw)),
                statistics.median_low(sums(self.per_iter_steps)))

    def timed(self) -> str:
        """What one timed unit is, in words (CSV column `timed`, CLI)."""
        if not self.per_iter_steps:
            return "optimizer step"
        k = statistics.median(self.per_iter_steps[-20:])
        bw = statistics.median(self.per_step_bw[-20:])
        cl = statistics.median(self.per_step_cl[-20:])
        if self.uneven:
            mean = statistics.mean(self.per_iter_steps[-20:])
            return (f"step of the first of {self.optimizers} optimizers, which step at different "
                    f"rates ({mean:.3g} optimizer steps per step of the first: not a whole "
                    f"iteration of all of them)")
        if self.optimizers > 1:
            return (f"iteration of {self.optimizers} optimizers ({k:g} optimizer steps, "
                    f"{(bw + cl) * k:g} backward passes)")
        if cl > 1.0:
            return (f"optimizer step with a closure ({cl:g} closure evaluations per step: the "
                    f"optimizer's own forward and backward passes)")
        if bw > 1.0 and 2 * sum(self.per_step_changed[-20:]) > len(self.per_step_changed[-20:]):
            # SAM: a forward and backward pass, the weights perturbed by its gradient (no step),
            # a second pass, then the base optimizer's step: was named gradient accumulation
            return (f"optimizer step after {bw:g} backward passes (the weights or their gradients "
                    f"changed between them, as in sharpness-aware minimization)")
        if bw > 1.0:
            return (f"optimizer step over {bw:g} micro-batches (gradient accumulation: "
                    f"{bw:g} backward passes per step)")
        return "optimizer step"


def duration_words(s: float) -> str:
    """Seconds as a person says them: "40 s", "12 min", "2.5 h" ("about 0.0 h for 3 modes" was
    said of a few minutes: the user's trial)."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def host_cycle_ms(wall: list[float], cpu: list[float]) -> float | None:
    """The host's whole cycle per iteration (ms): its median iteration plus the work that comes
    between some iterations only (rollouts, validation), as the mean over the median.  That work is
    taken from the main thread's CPU time where the probe sent it: on the wall clock a busy machine's
    stalls (other processes) read as work outside the steps, 41-96 % of a gradient-accumulation
    loop's wall time on a loaded machine (the user's trial), and a Jetson's CPU clock does not
    scale another process's load.  Work outside the steps is the excess of the iterations that take
    at least twice the median and OUTSIDE_MIN_S more."""
    if not wall:
        return None
    per = cpu if len(cpu) >= 3 else wall
    mid = statistics.median(per)
    # only iterations of at least twice the median, and 5 ms over it, carry such work: a
    # sub-millisecond step's own jitter (29-31 % of a 0.8 ms step in CPU time, on a loaded
    # machine) is not a rollout
    outside = sum(x - mid for x in per if x >= 2.0 * mid and x - mid >= OUTSIDE_MIN_S) / len(per)
    return (statistics.median(wall) + outside) * 1000.0


class ScriptSource:
    """A training command run under the probe; a measurement source for the Profiler."""

    def __init__(self, backend: Backend, argv: list[str], log_path: Path,
                 first_step_timeout: float | None = None, notify: Callable[[str], None] | None = None,
                 on_info: Callable[[dict], None] | None = None, progress_every: float = 30.0,
                 whatif: bool | None = None, steps_per_mode: int = 42, modes_todo: int = 0,
                 no_step_s: float | None = None) -> None:
        """first_step_timeout: the user's --startup-timeout (None: STARTUP_TIMEOUT_S); no_step_s:
        how long backward() may be called without an optimizer step before ptui says the script
        cannot be timed (None: NO_STEP_S, or the user's own --startup-timeout when given)."""
        if not argv:
            raise ProfileError("no training command given after --")
        self.backend, self.argv, self.log_path = backend, [str(a) for a in argv], Path(log_path)
        self.first_step_timeout = float(first_step_timeout or STARTUP_TIMEOUT_S)
        self.user_timeout = bool(first_step_timeout)  # the user's --startup-timeout
        self.no_step_s = no_step_s if no_step_s is not None else (
            first_step_timeout if first_step_timeout else None)    # None: NO_STEP_S when used
        self.backward_calls = 0                      # before the first step (the probe's B lines)
        self.t_backward: float | None = None         # when the first came
        self.grad_called = False                     # some were torch.autograd.grad calls (B ... g)
        self.forward_passes = 0                      # before any backward() or step (F lines)
        self.t_forwards: float | None = None         # when the present run of them began ...
        self.forwards_before = 0                     # (those run before it) ...
        self.t_forward: float | None = None          # ... and when the last F line came
        self.notify = notify or (lambda msg: None)
        self.on_info = on_info or (lambda d: None)
        self.progress_every = progress_every
        self.whatif = backend.simulated if whatif is None else whatif
        self.steps_per_mode, self.modes_todo = steps_per_mode, modes_todo
        self.proc: subprocess.Popen | None = None
        self.q: queue.Queue = queue.Queue()
        self.it = _Iterations()
        self.step_cpu: float | None = None           # the main thread's CPU s at the last step
        self.host_cpu: list[float] = []              # its CPU s per host iteration (what-if)
        self.device_kind: str | None = None          # where the script trains (the probe's D line)
        self.model_info: dict | None = None          # the probe's W line (what-if)
        self.workload: Workload | None = None        # the what-if workload given to the simulator
        self.host_step_ms: float | None = None
        self.host_cycle_ms: float | None = None       # wall time per step on the host (what-if)
        self.host_mhz: float | None = None            # the host CPU's clock, to scale that work
        self._recent: deque[float] = deque(maxlen=256)   # recent iteration times, s (a board)
        # the Profiler's per-mode limit: none while starting (--startup-timeout applies), then
        # raised for slow steps
        self.mode_timeout_s = float("inf")
        self.startup_s = 0.0                         # start to the first step (s)
        self._readers: list[threading.Thread] = []
        self._srv: socket.socket | None = None
        self._dir: str | None = None
        self._closing = threading.Event()
        self._exited = threading.Event()     # the script exited (set by _watch)
        self._drained = threading.Event()    # ... and no connection of it is left to accept
        self._step_conn = None
        self._timed_said: str | None = None
        self._timed_changed = ""             # what one step was before it changed mid-profile
        self._timed_unsaved: dict | None = None   # the label not yet in the session store ...
        self._timed_saved_at = float("-inf")      # ... and when the last one went there
        self._uneven_said = False            # the optimizers' different rates were warned of

    @property
    def steps(self) -> int:
        return self.it.steps

    @property
    def cycle_window_s(self) -> float:
        """How long a mode's recording must last for its whole cycle to hold the work between the
        steps: 3x the longest recent iteration (a rollout, a validation pass), CYCLE_WINDOW_MAX_S
        at most (the Profiler's stop condition)."""
        return min(CYCLE_WINDOW_MAX_S, 3.0 * max(self._recent)) if self._recent else 0.0

    def outside_ms(self, mode) -> float:
        """What-if: the work outside the steps per step, measured on the host and scaled by CPU
        clock to the mode (the simulator's events hold the steps only).  0 on a board, whose own
        events hold it."""
        if not self.whatif or not self.host_cycle_ms or not self.host_step_ms:
            return 0.0
        out = max(0.0, self.host_cycle_ms - self.host_step_ms)
        return out * (self.host_mhz / mode.cpu_mhz if self.host_mhz else 1.0)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        clock = self.backend.clock
        if not self.whatif and (getattr(clock, "virtual", False) or getattr(clock, "speed", 1.0) != 1.0):
            raise ProfileError("profiling a real script needs a real-time clock (no --speed)")
        self._dir = tempfile.mkdtemp(prefix="ptui-")
        path = os.path.join(self._dir, "probe.sock")
        self._srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._srv.bind(path)
        self._srv.listen(16)
        self._srv.settimeout(0.2)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(PROBE_SITE), str(PTUI_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
        env["PTUI_PROBE_SOCK"] = path
        env.pop("PTUI_PROBE_FD", None)
        if self.whatif:
            env["PTUI_PROBE_WHATIF"] = "1"
            # the host's work between the steps is the main thread's CPU time (host_cycle_ms), and
            # OpenMP's threads spin where they wait for each other at a parallel operator's end: on
            # a loaded machine torch's main thread then spun for its descheduled worker, tens of ms
            # in some iterations, and a plain loop with 2 threads read as mostly work outside the
            # steps (3 of 4 counts: the probe trial).  Waiting passively, they wait without CPU time
            # (unless the user chose a policy); a what-if times the host only for its work
            env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        else:
            env.pop("PTUI_PROBE_WHATIF", None)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            self.proc = subprocess.Popen(self.argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            self._cleanup()
            # a command that is not there (or not runnable) is bad input: exit 2, as a bad flag
            bad = isinstance(e, (FileNotFoundError, PermissionError, NotADirectoryError))
            raise ProfileError(f"cannot start {self.argv[0]!r}: {e.strerror or e}",
                               exit_code=EXIT_INPUT if bad else None) from None
        finally:
            log.close()
        self.t_start = time.monotonic()
        threading.Thread(target=self._accept, daemon=True, name="ptui-probe-accept").start()
        threading.Thread(target=self._watch, daemon=True, name="ptui-probe-watch").start()

    def _accept(self) -> None:
        assert self._srv is not None          # start() opened it before starting this thread
        n = 0
        while not self._closing.is_set():
            exited = self._exited.is_set()    # before the wait: every connection is queued by then
            try:
                conn, _ = self._srv.accept()
            except TimeoutError:
                if exited:
                    self._drained.set()
                continue
            except OSError:
                break
            n += 1
            t = threading.Thread(target=self._reader, args=(conn, n), daemon=True,
                                 name=f"ptui-probe-{n}")
            self._readers.append(t)
            t.start()
        self._drained.set()                   # closed: nothing more will be accepted

    def _reader(self, conn: socket.socket, cid: int) -> None:
        buf = b""
        conn.setblocking(True)
        with conn:
            while True:
                try:
                    chunk = conn.recv(4096)
                except OSError:
                    break
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    self.q.put((cid, line.decode(errors="replace")))

    def _watch(self) -> None:
        assert self.proc is not None          # start() started it before this thread
        self.proc.wait()
        # its last connections wait in the listening socket's queue: the end waits until the
        # accept thread found it empty (a fixed 0.1 s lost a reporter's last lines whenever a busy
        # machine ran that thread later), 5 s at most
        self._exited.set()
        self._drained.wait(5.0)
        deadline = time.monotonic() + 2.0
        for t in list(self._readers):         # let every reporter's last lines arrive
            t.join(max(0.0, deadline - time.monotonic()))
        self.q.put(None)                      # the script ended

    def _kill(self) -> None:
        if self.proc is None:
            return
        try:                                  # the whole process group: launchers' children too
            os.killpg(self.proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()

    def _cleanup(self) -> None:
        self._closing.set()
        if self._srv is not None:
            try:
                self._srv.close()
            except OSError:
                pass
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def stop(self) -> None:
        self._kill()
        self._cleanup()
        try:
            self._save_timed(force=True)         # the label's last change
        except Exception:  # noqa: BLE001, S110 - a store failing now fails the session's own writes,
            pass           # which say so; the board's restore must not wait on it
        finally:
            if self.backend.simulated:
                self.backend.stop_training()

    # -- messages ---------------------------------------------------------------------------------
    def _tail(self) -> str:
        try:
            lines = [x for x in self.log_path.read_text(errors="replace").splitlines() if x.strip()]
            return lines[-1].strip()[:200] if lines else ""
        except OSError:
            return ""

    def _ended(self, why: str = "") -> ProfileError:
        """The script ended; why: what that means for ptui, said before its last output."""
        rc = self.proc.wait() if self.proc else None
        tail = self._tail()
        what = "crashed" if rc else "ended"
        last = (f"; last output: {tail}" if tail else "") + f"; full log: {self.log_path}"
        if self.it.steps == 0:
            hint = ("; ptui times optimizer.step() calls of torch.optim optimizers: does the script "
                    "train (not only evaluate), and does it train in this process or one started by "
                    "a launcher (torchrun, accelerate launch)?" if not rc else "")
            # one that ended by itself (exit code 0) without training ends so again; a crash
            # may not (out of memory, killed)
            return (ProfileError if rc else ScriptUnprofilable)(
                f"the training script {what} (exit code {rc}) before its first optimizer "
                f"step{hint}{last}")
        # why: the script ended too soon for ptui, as it will again
        return (ScriptUnprofilable if why else ProfileError)(
            f"the training script {what} (exit code {rc}) after "
            f"{plural(self.it.steps, 'optimizer step')} "
            f"({plural(self.it.n_iter, 'whole iteration')}){why}{last}")

    def _still_starting(self, waited: float) -> None:
        assert self.proc is not None          # asked while the script runs
        tail = self._tail()
        if self.backward_calls:
            bw = f"has {self._gradients_said()} but "
            limit = (f"stopped {min(self._no_step_limit(), self.first_step_timeout):.0f} s after its "
                     f"first backward() without a step")
        elif self.forward_passes:
            bw = f"has run {plural(self.forward_passes, 'forward pass')} of its model, no backward(), and "
            # the start-up timeout counts from the script's start, the forward passes' limit from
            # their run's first: the earlier stops it (--startup-timeout T promised 'after T s of
            # forward passes', and T from the start always came first: the probe trial)
            run_s = min(self._forward_limit(), self.first_step_timeout)
            first = (self.t_forwards or self.t_start) - self.t_start
            limit = (f"stopped after {run_s:.0f} s of forward passes without a backward()"
                     if first + run_s < self.first_step_timeout else
                     f"stopped at --startup-timeout {self.first_step_timeout:g} s if it is still "
                     f"running forward passes without a backward() then")
            limit += f": {INFERENCE_ONLY}"
        else:
            # nor a backward(): a script that only runs inference waited out the whole start-up
            # timeout (600 s) told only that it was starting (the probe trial)
            bw, limit = "", (f"limit --startup-timeout {self.first_step_timeout:g} s; no "
                             f"backward() either: {INFERENCE_ONLY}")
        self.notify(f"still starting: the script is running (pid {self.proc.pid}) and {bw}has taken "
                    f"no optimizer step after {waited:.0f} s ({limit})"
                    + (f"; last output: {tail}" if tail else ""))

    def _gradients_said(self) -> str:
        """What the script did before any step, in words: its backward() calls (or gradients
        taken with torch.autograd.grad: a functional loop)."""
        n = plural(self.backward_calls, "time")
        return (f"called backward() {n}" if not self.grad_called else
                f"computed gradients {n} (backward(), torch.autograd.grad)")

    def _no_step_limit(self) -> float:
        return NO_STEP_S if self.no_step_s is None else self.no_step_s

    def _forward_limit(self) -> float:
        return FORWARD_ONLY_S if self.no_step_s is None else self.no_step_s

    def _forwarding(self, now: float) -> bool:
        """A run of forward passes is still going, with no backward() yet."""
        return (not self.backward_calls and self.t_forwards is not None and self.t_forward is not None
                and now - self.t_forward <= FORWARD_GAP_S)

    def _inference_only(self, now: float) -> bool:
        """The script has run forward passes, one run of them still going, for FORWARD_ONLY_S (or
        --startup-timeout) with no backward() (an inference loop waited out the whole start-up
        timeout, 600 s, though every progress note said it had called no backward(): the probe
        trial), or is running them when the start-up timeout ends (with --startup-timeout T the
        passes' limit is T too, but from their first: the timeout, from the script's start, always
        ended first, and an inference loop was told only to raise --startup-timeout)."""
        return self._forwarding(now) and (
            now - (self.t_forwards or now) > min(self._forward_limit(), self.first_step_timeout)
            or now - self.t_start > self.first_step_timeout)

    def _only_forwards(self, now: float) -> ProfileError:
        """The script runs forward passes but neither calls backward() nor steps."""
        tail = self._tail()
        waited = now - (self.t_forwards or now)
        # the passes of the run timed, not every run's (1,000 passes of a warm-up, minutes before,
        # read as run in this one's 120 s)
        run = self.forward_passes - self.forwards_before
        return ScriptUnprofilable(
            f"the training script ran {plural(run, 'forward pass')} of its model in "
            f"{waited:.0f} s but called no backward() and stepped no optimizer: {INFERENCE_ONLY} "
            f"(ptui times optimizer.step() of torch.optim optimizers); if it runs forward passes this "
            f"long before it trains (a validation pass first, a reinforcement-learning warm-up, "
            f"features computed in advance), give {self._longer_timeout()}"
            + (f"; last output: {tail}" if tail else "")
            + f"; full log: {self.log_path}")

    def _longer_timeout(self) -> str:
        """The flag that waits longer, in words: the user's own --startup-timeout, raised."""
        if self.user_timeout:
            return f"a --startup-timeout longer than the {self.first_step_timeout:g} s given"
        return "--startup-timeout"

    def _no_optimizer_step(self, waited: float) -> ProfileError:
        """The script trains (calls backward()) but never steps a torch.optim optimizer."""
        tail = self._tail()
        return ScriptUnprofilable(
            f"the training script {self._gradients_said()} in "
            f"{waited:.0f} s but stepped no torch.optim optimizer: ptui times torch.optim optimizer "
            f"steps (optimizer.step()), and a parameter update made by hand (p.data -= lr * p.grad) "
            f"or by a framework's own optimizer (Keras) has none to time; to profile the script, use "
            f"a torch.optim optimizer (or a torch.optim.Optimizer subclass whose step() makes the "
            f"update); if it does step, but only after more backward passes than that, give "
            f"--startup-timeout" + (f"; last output: {tail}" if tail else "")
            + f"; full log: {self.log_path}")

    def _never_stepped(self) -> ProfileError:
        # a script that only runs inference (forward passes, no backward()) was told only to
        # raise --startup-timeout, as if it were slow to start (the probe trial)
        none = "" if self.backward_calls else f"; it called no backward() either: {INFERENCE_ONLY}"
        return ScriptUnprofilable(f"the training script is still running but has taken no optimizer step "
                            f"in {self.first_step_timeout:g} s; if it needs longer to start "
                            f"(torch.compile, data preparation) raise --startup-timeout{none}; its "
                            f"output is in {self.log_path}", resume_with=self._longer_resume())

    def _longer_resume(self) -> tuple[str, str]:
        """The flag a resume could get past the start-up timeout with: twice the timeout used."""
        return ("--startup-timeout", f"{2.0 * self.first_step_timeout:g}")

    def _say_timed(self) -> None:
        timed = self.it.timed()
        if timed != self._timed_said:
            before, self._timed_said = self._timed_said, timed
            label = f"{WHATIF_LABEL}: " if self.whatif else ""
            if before and not self._timed_changed and self.it.n_iter >= self.steps_per_mode:
                # the work of one step changed under a profile already measuring (LBFGS whose line
                # search needs fewer closure evaluations as it converges: 5 then 1 per step, the
                # modes 18.6, 19.6 and 3.8 ms, every row labelled 'one optimizer step' and no
                # warning: a user's trial): said, in the CSV's timed column too
                self._timed_changed = f"changed during the profile, from one {before}"
                self.notify(f"warning: what one step does changed during the profile (it was one "
                            f"{before}, now one {timed}): the modes measured before and after are "
                            f"not the same work, so their times cannot be compared; fix the "
                            f"optimizer's work per step (e.g. LBFGS's max_iter and line search) and "
                            f"profile again")
            tail = f" ({self._timed_changed})" if self._timed_changed else ""
            if getattr(self.backend, "emulated", False):
                tail += f" ({EMULATED_LABEL})"
            self._timed_unsaved = {"timed": label + "one " + timed + tail}
            if not self._timed_changed:          # once warned, the changes go on unsaid
                self.notify(f"timing one {timed}: time_ms is the time of one such unit")
            if self.it.uneven and not self._uneven_said:
                # a WGAN (5 critic steps per generator step) was timed and counted per critic
                # step, labelled 'one iteration of 2 optimizers (1 optimizer steps, 1 backward
                # passes)', with no word (the probe trial)
                self._uneven_said = True
                self.notify(f"warning: the script's {self.it.optimizers} optimizers step at "
                            f"different rates (the first, in order of use, more often than the "
                            f"others): ptui times and counts from one step of the first to its "
                            f"next, not a whole iteration of all of them; a decision's times are "
                            f"per step of the first")
        self._save_timed()

    def _save_timed(self, force: bool = False) -> None:
        """The label's latest change to the session store, at most every TIMED_SAVE_S (force: now).
        A step whose closure evaluations vary (1 or 2 a step) changes the label, a median over
        the last 20 steps, at 18 % of its steps: a durable store write each (2.2 ms here, more on
        a Jetson's eMMC) on the thread that reads the probe fell behind a 0.2 ms step, its
        backlog growing with every mode (an emulated board: 4.5, 5.5 and 10 s for 3 modes, 6141
        steps timed in the first, 60 in the last)."""
        if self._timed_unsaved is None:
            return
        now = time.monotonic()
        if force or now - self._timed_saved_at >= TIMED_SAVE_S:
            info, self._timed_unsaved, self._timed_saved_at = self._timed_unsaved, None, now
            self.on_info(info)

    # -- the probe's lines ------------------------------------------------------------------------
    def _lines(self, deadline_fn):
        """(kind, fields) from the probe until the script ends (raises); ('', None) on timeouts."""
        assert self.proc is not None          # read while the script runs
        next_note = self.t_start + self.progress_every
        while True:
            timeout = min(deadline_fn(), 0.5)
            try:
                item = self.q.get(timeout=max(0.0, timeout))
            except queue.Empty:
                item = ("", "")
            if item is None:
                raise self._ended()
            cid, line = item
            now = time.monotonic()
            if line.startswith("B "):
                self.backward_calls = max(self.backward_calls, int(line.split()[1]))
                self.grad_called = self.grad_called or "g" in line.split()[3:]
                self.t_backward = self.t_backward or now
            elif line.startswith("F "):
                n = int(line.split()[1])
                self.forward_passes = max(self.forward_passes, n)
                if self.t_forward is None or now - self.t_forward > FORWARD_GAP_S:
                    # a run's first pass is sent at once (the probe's last line was >= 1 s ago)
                    self.t_forwards, self.forwards_before = now, n - 1
                self.t_forward = now
            if self.it.steps == 0 and self.proc.poll() is None:
                waited = now - self.t_start
                if self.t_backward is not None and (now - self.t_backward > self._no_step_limit()
                                                    or waited > self.first_step_timeout):
                    raise self._no_optimizer_step(now - self.t_backward)
                if self._inference_only(now):
                    raise self._only_forwards(now)
                if waited > self.first_step_timeout:
                    raise self._never_stepped()
                if now >= next_note:
                    next_note += self.progress_every
                    self._still_starting(waited)
            if line.startswith("S "):
                if self._step_conn is None:
                    self._step_conn = cid
                if cid != self._step_conn:
                    continue                  # another process stepping (not rank 0's loop)
                f = line.split()           # S <t> <opt> <nbw> <ncl> [c<cpu>] [x] [r] [s]
                cpu = next((w[1:] for w in f[5:] if w.startswith("c")), None)
                self.step_cpu = float(cpu) if cpu else None
                yield "S", (float(f[1]), int(f[2]) if len(f) > 2 else 0,
                            int(f[3]) if len(f) > 3 else 0, "x" in f[4:],
                            int(f[4]) if len(f) > 4 and f[4].isdigit() else 0, "r" in f[5:],
                            "s" in f[5:])
            elif line.startswith("L "):
                try:
                    yield "L", float(line.split()[1])
                except (IndexError, ValueError):
                    yield "", None
            elif line.startswith("W "):
                try:
                    yield "W", json.loads(line[2:])
                except ValueError:
                    yield "W", {"error": "unreadable measurement"}
            elif line.startswith("D "):
                self.device_kind = line.split()[1]
                self.on_info({"trains_on": self.device_kind})
                if self.device_kind == "cpu" and not self.backend.simulated:
                    self.notify(PRIOR_CPU_TRAINING_WARNING if self.whatif else CPU_TRAINING_WARNING)
            else:
                yield "", None

    # -- events -----------------------------------------------------------------------------------
    def events(self, interval: float | None = None):
        if self.whatif:
            yield from self._whatif_events(interval)
        else:
            yield from self._board_events(interval)

    def _board_events(self, interval: float | None):
        """A real board: every whole iteration of the script is a minibatch event."""
        clock = self.backend.clock
        interval = interval or 0.5
        to_clock = clock.now() - time.monotonic()          # offset from CLOCK_MONOTONIC
        next_sample = clock.now() + interval
        said_estimate = False
        for kind, val in self._lines(lambda: min(next_sample - clock.now(), self.progress_every)):  # noqa: B023
            if kind == "S":
                t = val[0]
                dur = self.it.step(*val)
                if dur is not None:
                    self._say_timed()
                    if self.it.n_iter > 1:                   # the first iteration warms up
                        self._recent.append(dur)
                    # slow steps: a mode may take as long as 3x its iterations at this pace
                    # (plus the start-up, which the first mode's clock also counted: the time to
                    # the first step, not the time since the start, which grew with every mode;
                    # a script hung 2 h into a profile held its mode 2 h before the restore)
                    if self.it.n_iter == 1 or self.mode_timeout_s == float("inf"):
                        self.mode_timeout_s = 0.0
                        self.startup_s = time.monotonic() - self.t_start
                    self.mode_timeout_s = max(self.mode_timeout_s, 3.0 * dur * self.steps_per_mode
                                              + self.startup_s)
                    # the estimate from the first iteration after the warm-up (the first took
                    # 0.25 s of a 16 ms step: a helper's trial)
                    if not said_estimate and self.modes_todo and self.it.n_iter > 1:
                        said_estimate = True
                        per = dur * self.steps_per_mode
                        # the settling counted too: it was left out ('about 0 s for 3 modes' of
                        # 1 ms steps, then 5 s a mode in the ETA)
                        mode_s = SETTLE_S + max(per, ProfileConfig.min_power_samples * interval)
                        self.notify(f"one iteration took {dur:.2f} s: a mode needs at least "
                                    f"{self.steps_per_mode} iterations ({duration_words(per)}) once "
                                    f"its power has settled, about {duration_words(mode_s)} in all; "
                                    f"about {duration_words(mode_s * self.modes_todo)} for "
                                    f"{plural(self.modes_todo, 'mode')}")
                    yield MinibatchEvent(t_end=t + to_clock, ms=dur * 1000.0, index=self.it.n_iter)
            if clock.now() >= next_sample:
                next_sample += interval
                yield self.backend.read()

    def _whatif_events(self, interval: float | None):
        """The simulated board: measure the model, time a few host iterations, stop the script,
        then stream the simulator running the measured model (time and power follow the mode)."""
        info, host = self._measure_model(_host_window_done, "3 whole iterations")
        self.host_step_ms = statistics.median(host) * 1000.0 if host else None
        self.host_cycle_ms = host_cycle_ms(host, self.host_cpu)
        self.host_mhz = info.get("host_mhz")          # read when the measurement came
        self.workload = whatif_workload(info, command=command_text(self.argv))
        self._say_timed()
        host_txt = (f"{self.host_step_ms:.1f} ms per iteration on this machine (host, not a Jetson; "
                    f"median of {len(host)})" if self.host_step_ms else "not timed")
        self.notify(f"{WHATIF_LABEL}: {describe_model(info)}; host step time {host_txt}; "
                    f"the times and powers below are simulated for this model on the board")
        self._say_host_cycle(host)
        self.on_info({"whatif": {"label": WHATIF_LABEL, "model": self.model_info,
                                 "host_step_ms": self.host_step_ms,
                                 "host_cycle_ms": self.host_cycle_ms, "host_mhz": self.host_mhz,
                                 "host_iterations": len(host)},
                      "host_step_ms": self.host_step_ms})
        self.mode_timeout_s = 0.0                     # the simulator: the Profiler's own limit
        self.backend.start_training(self.workload)
        yield from self.backend.events(interval)

    def _measure_model(self, enough: Callable[[list[float]], bool], need: str) -> tuple[dict, list[float]]:
        """Read the probe until it has measured the script's model (its W line) and `enough` of
        the host's iteration times (s, the first left out: it warms up), then stop the script;
        returns (the measurement, those times).  Raises when the script stops first, or when it steps for
        --startup-timeout without the measurement (`need`: what it takes, in words)."""
        host: list[float] = []
        t_first = None
        cpu_mark = None                                         # CPU s at the last iteration's end
        w_at = 0                                                # iterations when the W line came
        for kind, val in self._measure_lines():
            if kind == "S":
                t_first = t_first or time.monotonic()
                if val[5]:
                    # the first optimizer stopped stepping (a head trained alone first): what was
                    # measured and timed is of its steps; the probe measures the new ones
                    t_first, self.model_info, cpu_mark = time.monotonic(), None, None
                    host.clear()
                    self.host_cpu.clear()
                dur = self.it.step(*val)
                if dur is not None and self.it.n_iter > 1:     # the first iteration warms up
                    host.append(dur)
                    if cpu_mark is not None and self.step_cpu is not None:
                        self.host_cpu.append(self.step_cpu - cpu_mark)
                if val[1] == 0:                                 # the first optimizer: an iteration's end
                    cpu_mark = self.step_cpu
            elif kind == "W":
                if self.model_info is not None:
                    # measured again (the iterations settled on other work: LBFGS converged):
                    # the host is timed anew, over iterations of the work measured (the first
                    # ones' 5 closure evaluations read as 31 % of the wall time outside the steps)
                    host.clear()
                    self.host_cpu.clear()
                self.model_info = val if val.get("error") else dict(per_iteration(val),
                                                                    host_mhz=host_cpu_mhz())
                w_at = self.it.n_iter
            elif kind == "L" and self.model_info is not None and not self.model_info.get("error"):
                self.model_info["load_ms"] = val      # the loading timed since, over more batches
            if self.model_info is not None and enough(host) and (
                    self._measured_typical() or self.it.n_iter - w_at >= UNTYPICAL_WAIT):
                self._say_untypical()
                self._say_no_grad()
                break
            if (self.model_info is None and t_first is not None
                    and time.monotonic() - t_first > self.first_step_timeout):
                self._kill()
                raise ScriptUnprofilable(
                    f"the script took {plural(self.it.steps, 'optimizer step')} in "
                    f"{self.first_step_timeout:.0f} s but ptui needs {need} to measure "
                    f"its model; raise --startup-timeout for slow steps",
                    resume_with=self._longer_resume())
        self._kill()
        if self.model_info is None:
            raise ProfileError("the script stopped before ptui could measure its model")
        return self.model_info, host

    def _measured_sig(self) -> tuple[int, int] | None:
        """(backward passes, optimizer steps) of the iterations measured, all of them (a period)."""
        info = self.model_info
        if not info or info.get("error") or "backward" not in info:
            return None
        n = self._measured_period()
        return round(float(info.get("backward") or 0) * n), round(float(info.get("opt_steps") or 0) * n)

    def _measured_period(self) -> int:
        return int((self.model_info or {}).get("iterations") or 1)

    def _measured_typical(self) -> bool:
        """The iteration measured did what the recent ones do (backward passes, optimizer steps):
        the probe measures again where it did not (a GradScaler's skipped step merged two
        iterations into the one measured; LBFGS evaluated its closure 5 times a step at first, then
        once), and its FLOPs were priced, unsaid, as every iteration's."""
        sig, typical = self._measured_sig(), self.it.typical(period=self._measured_period())
        return sig is None or typical is None or sig == typical

    def _say_untypical(self) -> None:
        """Warn where the iteration measured still differs from the recent ones."""
        if self._measured_typical():
            return
        n = self._measured_period()
        (bw, steps), (tbw, tsteps) = self._measured_sig(), self.it.typical(period=n)  # type: ignore[misc]
        what, recent = (("the iteration", "iterations") if n == 1 else
                        (f"the {n} iterations", f"{n} iterations"))
        self.notify(f"warning: {what} ptui measured for the what-if ran "
                    f"{plural(bw, 'backward pass')} and {plural(steps, 'optimizer step')}, where "
                    f"the script's recent {recent} run {tbw} and {tsteps} (a skipped step, a "
                    f"closure evaluated more often): its FLOPs and bytes, and so the simulated "
                    f"times, may not be those of a typical iteration")

    def _say_no_grad(self) -> None:
        """Warn where many of the optimizer's parameters got no gradient in the iteration measured
        (a warm-up that trains the head alone, the backbone frozen, for longer than the
        measurement: the what-if priced that phase's iterations, 67.8 MFLOP where the whole model
        trains at 169, unsaid)."""
        info = self.model_info or {}
        none, n = int(info.get("no_grad_params") or 0), int(info.get("stepped_params") or 0)
        if n <= 0 or none < NO_GRAD_WARN * n:
            return
        self.notify(f"warning: {100.0 * none / n:.3g} % of the optimizer's parameters ({none:,} of "
                    f"{n:,}) got no gradient in the measured iteration (frozen, or unused in it): "
                    f"the what-if's FLOPs and bytes, and so the simulated times, are those of training "
                    f"the rest alone; if the script trains them later (a warm-up that trains part of "
                    f"the model first), its iterations then do more work than simulated")

    def _say_host_cycle(self, host: list[float]) -> None:
        """The host's whole cycle beside its median step, and what the what-if does with it."""
        if not self.host_cycle_ms or not self.host_step_ms:
            return
        share = max(0.0, 1.0 - self.host_step_ms / self.host_cycle_ms)
        clock = (f"scaled by CPU clock from this machine's {self.host_mhz:.0f} MHz" if self.host_mhz
                 else "unscaled (this machine's CPU clock is unknown)")
        said = outside_note(share, self.host_step_ms, self.host_cycle_ms)
        self.notify(f"{'warning: ' if share > OUTSIDE_WARN else ''}on this machine over "
                    f"{sum(host):.1f} s, {said}; each mode's cycle_ms adds that work to the "
                    f"simulated step, {clock} (what-if)")

    def _measure_lines(self):
        """The probe's lines until the script ends.  A script that ends normally (exit code 0)
        after its model was measured leaves fewer host timings; one that dies (any other exit) is
        reported, whatever was measured."""
        try:
            yield from self._lines(lambda: self.progress_every)
        except ProfileError:
            if self.model_info is None and self.it.steps and self.proc is not None \
                    and self.proc.poll() == 0:
                # a script that ended by itself after 2 optimizer steps was told only that it had
                # ended, not why 2 were not enough (the probe trial)
                raise self._ended("; ptui counts the model over its third iteration (the first two "
                                  "warm up), so it must run at least 3 iterations") from None
            if self.model_info is None or (self.proc is not None and self.proc.wait() != 0):
                raise
            return


def _host_window_done(host: list[float]) -> bool:
    """Enough host iterations timed: HOST_ITERATIONS, over HOST_CYCLE_MIN_S and 3x the longest
    (so that the work between the steps is in the whole cycle), or HOST_CYCLE_MAX_S in all."""
    span = sum(host)
    return len(host) >= HOST_ITERATIONS and (
        span >= max(HOST_CYCLE_MIN_S, 3.0 * max(host)) or span >= HOST_CYCLE_MAX_S)


def host_cpu_mhz() -> float | None:
    """This machine's CPU clock (the highest core's, MHz), or None where it cannot be read: the
    clock it may run at now (scaling_max_freq: a board in a low-clock mode is capped there, and
    the loading it timed ran at the cap), else the hardware's maximum."""
    import glob
    got = []
    for name in ("scaling_max_freq", "cpuinfo_max_freq"):
        for f in glob.glob(f"/sys/devices/system/cpu/cpu[0-9]*/cpufreq/{name}"):
            try:
                got.append(float(Path(f).read_text()) / 1000.0)
            except (OSError, ValueError):
                pass
        if got:
            break
    if not got:
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.lower().startswith("cpu mhz"):
                    got.append(float(line.split(":", 1)[1]))
        except (OSError, ValueError, IndexError):
            pass
    mhz = max(got) if got else None
    return mhz if mhz and mhz > 0 else None


def script_workload(bs: int, argv) -> Workload:
    """The placeholder workload a script session is stored under (name 'script')."""
    return replace(get_workload("resnet18", bs), name=SCRIPT_WORKLOAD, model=command_text(argv)[:60],
                   task="user script")


def count_script(backend: Backend, argv, log_path: Path, *, startup_timeout: float | None = None,
                 notify: Callable[[str], None] | None = None) -> tuple[dict, str]:
    """Run the training command under the probe only until it has counted one whole iteration
    (training FLOPs, bytes its operators touched, parameters, samples: the probe's W line), then
    stop it; no mode is set or timed.  Returns (the counts, what one iteration is).  On a real
    board the script runs there as it is (its own Python, its own GPU), so the counts are the
    board's; the board's mode is left alone."""
    src = ScriptSource(backend, list(argv), log_path, first_step_timeout=startup_timeout,
                       notify=notify, whatif=True)
    src.start()
    try:
        # a few iterations past the measured one (the loading of its batches is timed by then),
        # over the what-if profile's host window: the work between some steps only (a PPO
        # rollout every 8 steps) is in it (5 iterations alone held none, and the step was
        # predicted without it)
        info, host = src._measure_model(
            lambda host: len(host) >= COUNT_ITERATIONS and _host_window_done(host),
            "one whole iteration")
    finally:
        src.stop()
    if host and not info.get("error"):
        info = dict(info, host_step_ms=statistics.median(host) * 1000.0,
                    host_cycle_ms=host_cycle_ms(host, src.host_cpu))
    return info, src.it.timed()


def count_outside_share(info: dict) -> float:
    """The share of the host's wall time outside the optimizer steps in a count (count_script's
    host_step_ms and host_cycle_ms); 0 where it was not timed."""
    step, cycle = info.get("host_step_ms"), info.get("host_cycle_ms")
    return max(0.0, 1.0 - step / cycle) if step and cycle else 0.0
