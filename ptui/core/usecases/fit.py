"""The one fit, for `ptui fit` and the Fine-tune screen, in this process or in a child
that a cancel ends at once."""
from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..board.csvio import (
    OUTSIDE_WARN,
    outside_note,
    profile_batch_sizes,
    profile_tags,
    profile_time,
    read_profile_measured,
)
from ..catalogue.devices import get_device
from ..catalogue.workloads import WORKLOADS
from ..errors import InputError, RuntimeFailure
from ..paths import model_dir
from ..prediction.fit import (
    MIN_MODES,
    MIN_MODES_PRIOR,
    check_model_rest,
    fit_batch_profile,
    fit_model,
    fit_rows,
)
from ..prediction.gp import raw_modes
from ..prediction.predictor import Model, Net, bundled_reference, load_model
from ..prediction.roofline import (
    HOST_REF_MHZ,
    PRIOR_KIND,
    RooflinePrior,
    RooflineTarget,
    WorkloadSpec,
    anchored_spec,
)
from ..profiling.profiler import keep_timed
from ..profiling.userscript import compiled_step_bytes, count_outside_share
from ..progress import SAVING, SAVING_STEP, Step

if TYPE_CHECKING:
    from ..prediction.predictor import Model


from .profile import Cancelled


# -- fit ---------------------------------------------------------------------------------------------
@dataclass
class FitOutcome:
    model: Model
    out: Path
    n_modes: int                  # profiled modes, or (mode, batch size) pairs
    seconds: float
    sizes: list[int] = field(default_factory=list)     # the profile's batch sizes (one: a plain profile)
    workload: str = "custom"

    @property
    def prior_only(self) -> bool:
        """The model is the roofline prior alone (no mode profiled)."""
        return self.model.about.kind == PRIOR_KIND

    @property
    def fitted_on(self) -> str:
        """What the model was fitted on, in words: '12 profiled modes', or the pairs and sizes."""
        if self.prior_only:
            return "no profiled mode (the roofline prior alone)"
        if len(self.sizes) > 1:
            return (f"{self.n_modes} profiled (mode, batch size) pairs, batch sizes "
                    f"{','.join(map(str, self.sizes))}")
        return f"{self.n_modes} profiled modes"




def workload_spec(spec_path=None, workload: str | None = None, batch_size=None):
    """The workload spec a fit's roofline prior comes from: SPEC.json when given (a bad file: one
    SpecError line), else a catalog workload's published counts (at `batch_size` when given),
    else None (the fit then has no roofline candidate).  A script's probe counts come as a spec
    from the probe (roofline.WorkloadSpec.from_probe)."""
    if spec_path is not None:
        return WorkloadSpec.from_json(spec_path)
    w = WORKLOADS.get(str(workload)) if workload else None
    if w is None:
        return None
    if str(batch_size or "").isdigit() and int(batch_size) > 0:
        w = w.with_batch(int(batch_size))
    return anchored_spec(w)


def probe_spec(info: dict, batch_size: int | None = None, basis: str = "step"):
    """The roofline spec of one iteration the probe counted (profiling.userscript.count_script):
    its FLOPs and bytes (plus what a compiled optimizer step touches unseen) over its samples.
    basis 'cycle': the host's work between the steps (count_script's host_cycle_ms over its
    host_step_ms: rollouts, validation) is main-thread work while the GPU waits (serial_ms, at this
    machine's clock stated at the reference clock, as host_ms is), so the prior predicts the whole
    cycle.  A count with no FLOPs or bytes (a compiled or non-torch model) is a SpecError line."""
    info = dict(info)
    if batch_size and not info.get("samples"):
        info["batch_size"] = int(batch_size)
    spec = WorkloadSpec.from_probe(info, extra_bytes=compiled_step_bytes(info))
    step, cycle = info.get("host_step_ms"), info.get("host_cycle_ms")
    if basis == "cycle" and step and cycle and cycle > step:
        mhz = float(info.get("host_mhz") or HOST_REF_MHZ)
        spec = replace(spec, serial_ms=(spec.serial_ms or 0.0) + (cycle - step) * mhz / HOST_REF_MHZ,
                       cpu_mhz=HOST_REF_MHZ)
    return spec


def probe_time(info: dict, time_basis: str = "auto") -> tuple[str, str | None]:
    """What a decision on a probe's count predicts: 'step' (the optimizer step alone) or 'cycle'
    (the whole cycle, the work between the steps included), as --time asks, else the whole cycle
    where more than OUTSIDE_WARN of the host's wall time was outside the steps, as a profile's fit
    decides; with the warning to say where that share is large (None: nothing to say)."""
    share = count_outside_share(info)
    basis = time_basis if time_basis in ("step", "cycle") else ("cycle" if share > OUTSIDE_WARN else "step")
    if share <= OUTSIDE_WARN:
        return basis, None
    said = outside_note(share, info.get("host_step_ms"), info.get("host_cycle_ms"))
    if basis == "cycle":
        return basis, (f"on this machine {said}: the prediction is per step over the whole cycle, "
                       f"that work priced as the script's CPU work (--time step: the step alone)")
    return basis, (f"on this machine {said}: the prediction is the optimizer step alone, as --time "
                   f"step asks, and leaves out that work (rollouts, validation, data waits)")


def roofline_of(device, spec):
    """The roofline prior of `spec` on `device`, or None without a spec."""
    return None if spec is None else RooflinePrior(device, spec)


def prior_model(device, spec, *, workload: str | None = None, timed: str = "",
                time_basis: str = "step") -> Model:
    """A model that is the roofline prior alone: no mode profiled, its spreads the prior's (the
    board calibration's residual, widened for each assumption the spec leaves to the reference).
    Its About says so: kind PRIOR_KIND, trained_on modes 0.  time_basis: what its time is ('cycle':
    a probe's spec with the work between the steps in it, probe_spec), kept as a fit keeps it."""
    prior = RooflinePrior(device, spec)
    note = ("the roofline prior alone: no mode profiled; the spread is the prior's on the "
            "board's calibration data" + (f" (assumed: {'; '.join(prior.assumed)})"
                                          if prior.assumed else ""))
    meta = {"kind": PRIOR_KIND, "method": "roofline", "workload": workload or "spec",
            "reference_workload": None,
            "trained_on": {"source": spec.source or "workload spec", "modes": 0, "device": device.name},
            "roofline_spec": spec.as_dict(), "assumed": prior.assumed,
            "metrics": {t: {"method": "roofline", "choice": "roofline-prior", "note": note}
                        for t in ("time", "power")},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    model = Model(device, RooflineTarget(prior, "time"), RooflineTarget(prior, "power"), meta)
    model.tell(batch_size=spec.batch_size)
    if timed:                                 # what one time is, where the counts said (a script's step)
        model.tell(timed=timed)
    # a probe's whole-cycle spec said 'the median step' (pareto --time cycle refused it, and took
    # --time step)
    if time_basis != "step":
        model.tell(time_basis=time_basis)
    w = WORKLOADS.get(str(workload)) if workload else None
    if w is not None:
        w = w.with_batch(spec.batch_size)
        model.tell(samples_per_epoch=w.samples, batches_per_epoch=w.minibatches_per_epoch)
    return model


def fit_prior(device, spec, *, out: Path | str, workload: str | None = None,
              timed: str = "", time_basis: str = "step") -> FitOutcome:
    """`ptui fit` without a profile: the roofline prior alone (prior_model), saved to `out`."""
    t0 = time.perf_counter()
    model = prior_model(device, spec, workload=workload, timed=timed, time_basis=time_basis)
    model.save(Path(out))
    return FitOutcome(model, Path(out), 0, time.perf_counter() - t0, [spec.batch_size],
                      workload or "spec")


def profile_time_choice(profile, time_basis: str,
                        progress: Callable[[str], None] | None = None) -> str:
    """The time a decision on `profile` takes (csvio.profile_time: --time, the profile's own
    time_basis, or the whole cycle when the wall time goes largely outside the steps); its note
    goes to progress.  Returns 'step' or 'cycle'."""
    c = profile_time(profile, time_basis)
    if c.note and progress:
        progress(c.note)
    return c.basis


def fit(device, profile: Path | str, *, workload: str | None = None, out: Path | None = None,
        reference: Path | str | None = None, progress: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None, method: str = "auto", time_basis: str = "auto",
        scratch: bool = False, seed: int = 0, loss: str = "mse",
        note: Callable[[str], None] | None = None, min_modes: int | None = None,
        spec=None) -> FitOutcome:
    """The one fit, for `ptui fit` and the Fine-tune screen: time and power predictors for a profile
    CSV (``fit.fit_model``: GPs and PowerTrain's networks chosen by cross-validation), over (mode,
    batch size) when the profile holds several batch sizes; ``scratch``: PowerTrain's network
    trained on the profile alone.  The model records the profile's workload (``workload`` overrides
    the profile's own tag), its batch size and minibatches per epoch, and what one time is; it is
    saved with the profile's measurements (default: the models directory, named after the profile).
    Cancelled between steps.  time_basis: what one time is, --time (csvio.profile_time); its note
    (which time decides, and why) goes to `note`, else to progress.  spec: the workload's
    roofline.WorkloadSpec (--workload-spec): its roofline prior is one more GP candidate's mean
    (gp-roofmean), on a profile of one batch size; without one the fit is as it was (the prior
    is asked for: on profiles of 10 modes it won decisions' median but lost more picks over the
    budget, docs/accuracy.md)."""

    def step(msg: str) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled("fine-tuning cancelled")
        if progress:
            progress(msg)
    sizes = [int(b) for b in profile_batch_sizes(profile)]
    if scratch and len(sizes) > 1:
        raise InputError("--scratch trains a network, which takes no batch-size input; this profile "
                         f"holds batch sizes {','.join(map(str, sizes))} (use --method gp or auto)")
    if len(sizes) == 1:
        check_spec_batch(spec, sizes[0])
    basis = profile_time_choice(profile, time_basis, note or progress)
    tags = profile_tags(profile)                    # a ptui profile names its workload
    workload = workload or tags.get("workload") or "custom"
    ref = load_reference(reference) if reference else load_model(bundled_reference())
    t0 = time.perf_counter()
    if len(sizes) > 1:
        model = fit_batch_profile(profile, device, ref, method=method, seed=seed, loss=loss,
                                  workload=workload, progress=step, time_basis=basis)
        n = len(model.measured["modes"])
    else:
        if spec is not None and not scratch:      # a few modes refine the prior (fit.prior_fit)
            min_modes = MIN_MODES_PRIOR
        elif min_modes is None:
            # the fit's own minimum, as tune's (a profile of 6 modes that tune fitted was refused
            # by fit: 'at least 10 are needed', a fuzzing trial)
            min_modes = MIN_MODES
        modes, t, p, measured = read_profile_measured(
            profile, device, time=basis, **({} if min_modes is None else {"min_modes": min_modes}))
        n = len(modes)
        if scratch:
            from ..prediction import train  # torch: lazy (train imports it at its top)
            A = raw_modes(modes)
            rows = fit_rows(A, seed)               # a large profile: the rows fit_model takes
            sel = slice(None) if rows is None else rows
            model = train.transfer(ref, device, A[sel], t[sel], p[sel], workload=workload,
                                   source=f"profile {profile}", seed=seed, loss=loss,
                                   scratch=True, progress=step)
            model.measured = measured
            if rows is not None:
                check_model_rest(model, A, t, p, rows, measured, seed)
        else:
            model = fit_model(ref, device, modes, t, p, method=method, workload=workload,
                              source=f"profile {profile}", measured=measured, progress=step,
                              seed=seed, loss=loss, roofline=roofline_of(device, spec))
        remember_epoch_size(model, workload, sizes[0] if sizes else tags.get("batch_size"))
    keep_timed(model, profile, basis)               # what one time_ms is: pareto says it
    step(SAVING_STEP)
    out = Path(out) if out is not None else model_dir(Path(profile).stem)
    model.save(out)
    return FitOutcome(model, out, n, time.perf_counter() - t0, sizes, workload)


def load_reference(directory) -> Model:
    """--reference: a model whose time and power are networks (ptui reference build's, or a
    PowerTrain fit's); a GP or roofline model is a fitted model, not a reference to transfer
    from (it ended in a traceback)."""
    ref = load_model(directory)
    if not (isinstance(ref.time, Net) and isinstance(ref.power, Net)):
        raise InputError(f"{directory}: a fitted model ({ref.about.method or ref.about.kind}), not "
                         f"reference networks: give a reference built with ptui reference build (or "
                         f"leave --reference out for the bundled one)")
    return ref


def check_spec_batch(spec, batch_size) -> None:
    """A workload spec counts one step at its batch size: a profile at another size is a different
    step (a batch-32 profile with a batch-16 spec fitted without a word; a user trial)."""
    if spec is not None and batch_size and int(batch_size) != int(spec.batch_size):
        raise InputError(f"the profile was taken at batch size {int(batch_size)}, the workload spec "
                         f"counts a step at batch size {int(spec.batch_size)}: give the spec of the "
                         f"profiled batch size (a step's FLOPs and bytes grow with it)")


def remember_epoch_size(model, workload: str, batch_size) -> None:
    """Record the profiled batch size and its minibatches per epoch (a catalogued workload) so a
    decision turns time per minibatch into time per epoch at the batch size that was profiled."""
    w = WORKLOADS.get(workload)
    if w is not None and str(batch_size or "").isdigit() and int(batch_size) > 0:
        w = w.with_batch(int(batch_size))
        model.tell(batch_size=w.batch_size, batches_per_epoch=w.minibatches_per_epoch)


def fit_cancellable(device, profile: Path | str, *, workload: str | None = None,
                    out: Path | None = None,
                    progress: Callable[[str], None] | None = None,
                    cancel: threading.Event | None = None) -> FitOutcome:
    """``fit`` in a child process, so that a cancel (the app quitting) ends it within a fraction
    of a second: ``fit`` itself checks its cancel event only between stages, which take seconds.
    The child (and the network process it starts) is ended on cancel, except while it saves (that
    finishes, the model directory is written whole or not at all)."""
    t0 = time.perf_counter()
    proc = _start_fit_child(device, profile, workload, out)
    got: dict = {}                          # filled as the lines arrive: a cancel may come after the result
    try:
        _follow_fit_child(_lines_of(proc), progress, cancel, got)
    finally:
        _end_fit_child(proc, got.get("result"))
    result, error = got.get("result"), got.get("error")
    if result is None:
        if error is not None:
            raise (InputError if error[0] == "I" else RuntimeFailure)(error[1])
        raise RuntimeFailure(f"fine-tuning failed (the fitting process ended with code {proc.returncode})")
    model = load_model(result["out"])
    return FitOutcome(model, Path(result["out"]), int(result["n_modes"]), time.perf_counter() - t0,
                      [int(b) for b in result.get("sizes", [])], str(result.get("workload", "custom")))


def _start_fit_child(device, profile: Path | str, workload: str | None, out: Path | None):
    """The child process of fit_cancellable (_fit_child), in its own session so that ending it ends
    the network process it starts too; it runs this ptui, whatever PYTHONPATH says."""
    import json
    import subprocess

    root = str(Path(__file__).resolve().parents[3])            # the directory holding ptui/
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    return subprocess.Popen(
        [sys.executable, "-c", "from ptui.core.usecases.fit import _fit_child; _fit_child()",
         json.dumps({"device": device.name, "profile": str(profile), "workload": workload,
                     "out": str(out) if out is not None else None})],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, start_new_session=True)


def _lines_of(proc):
    """A queue of the child's output lines, read by a thread (None once it closes its output), so
    that waiting for the next one can time out and look at the cancel event."""
    import queue

    lines: queue.Queue = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None        # stdout=PIPE
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True, name="ptui-fit-child").start()
    return lines


def _follow_fit_child(lines, progress: Callable[[str], None] | None, cancel: threading.Event | None,
                      got: dict) -> None:
    """Pass the child's steps to `progress` until its output ends, its result and its error
    ((kind, text)) into `got`.  Cancelled on `cancel`, unless the child is saving."""
    import json
    import queue

    saving = False
    while True:
        if cancel is not None and cancel.is_set() and not saving:
            raise Cancelled("fine-tuning cancelled")
        try:
            line = lines.get(timeout=0.05)
        except queue.Empty:
            continue
        if line is None:
            return
        kind, _, text = line.partition(" ")
        if kind == "P":
            st = Step.from_line(text)
            saving = st.kind == SAVING
            if progress:
                progress(st)
        elif kind == "R":
            got["result"] = json.loads(text)
        elif kind in ("I", "E"):
            got["error"] = (kind, text)


def _end_fit_child(proc, result: dict | None) -> None:
    """Wait for the child; one that has not sent its result (cancelled, or the parent failed) is
    killed first, with the network process it started."""
    import signal

    if proc.poll() is None and result is None:
        try:                                  # the child and its network process
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    proc.wait()


def _fit_child() -> None:
    """The child of fit_cancellable: progress as `P kind text` lines (progress.Step.line), then
    `R {json}`, or `I`/`E text` on an input/other error.  It ends itself when its parent goes
    away (stdin closes)."""
    import json

    a = json.loads(sys.argv[1])
    saving = threading.Event()

    def parent_gone() -> None:
        sys.stdin.read()
        if not saving.is_set():
            os._exit(130)

    threading.Thread(target=parent_gone, daemon=True).start()

    def say(text: str) -> None:
        st = Step.of(text)
        if st.kind == SAVING:
            saving.set()
        print("P " + st.line(), flush=True)

    try:
        res = fit(get_device(a["device"]), a["profile"], workload=a["workload"], out=a["out"],
                  progress=say)
    except InputError as e:
        print("I " + " ".join(str(e).split()), flush=True)
        sys.exit(2)
    except Exception as e:  # noqa: BLE001 - said to the app in one line
        print("E " + " ".join(f"{type(e).__name__}: {e}".split()), flush=True)
        sys.exit(1)
    print("R " + json.dumps({"out": str(res.out), "n_modes": res.n_modes, "sizes": res.sizes,
                             "workload": res.workload}), flush=True)
