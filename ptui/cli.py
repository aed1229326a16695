"""Command line: argument parsing only; the work is done in ptui.core.

`ptui` alone opens the app; `ptui <command>` runs the same engine headless.
Exit codes: 0 ok, 1 runtime error, 2 bad input, 3 no feasible mode, 130 interrupted.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable

from . import __version__, core
from .cliprogress import Steps
from .core import EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUNTIME, LOG, PtuiError, hms

EXIT_ERR, EXIT_INT = EXIT_RUNTIME, EXIT_INTERRUPTED


class CLIError(PtuiError):
    """Bad input found by a command (exit 2 unless another code is given)."""
    exit_code = EXIT_INPUT


def _err(msg: str) -> None:
    _say(f"ptui: error: {msg}")         # always said, -q or not


def _info(msg: str) -> None:
    """What a command says on stderr as it goes (progress, notes): the log at INFO (-q hides it)."""
    LOG.info(msg)


def _warn(msg: str) -> None:
    LOG.warning(msg)


def _say(line: str) -> None:
    """One line to stderr; a terminal that is gone (SSH closed: SIGHUP, then EIO) does not stop ptui
    from finishing what it does, such as putting the board back."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass


# -- commands ------------------------------------------------------------------------------------
def cmd_modes(a) -> int:
    if a.json and a.out not in (None, "-"):
        raise CLIError("--json prints the modes as JSON and --out writes them as CSV: give one of them")
    core.check_out_file(a.out)
    dev = core.get_device(a.device)
    if a.json:
        ps = dev.presets if a.grid == "presets" else None
        modes = [p.mode for p in ps] if ps else dev.full_space() if a.grid == "full" else dev.pt_grid()
        rows = [{"mode": m.as_dict(), "key": m.key} for m in modes]
        for r, p in zip(rows, ps or ()):
            r.update(id=p.id, name=p.name, tpc=p.tpc)
        print(core.document("modes", {"device": dev.name, "grid": a.grid, "count": len(rows), "modes": rows}))
        return EXIT_OK
    if a.grid == "presets":
        rows = [core.mode_cells(p.mode) + [str(p.id), p.name, str(p.tpc)] for p in dev.presets]
        core.write_csv(a.out, ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "id", "name", "tpc"), rows)
    else:
        modes = dev.full_space() if a.grid == "full" else dev.pt_grid()
        # the grid's name in a column of its own: a file of the four knobs alone is what a user
        # writes by hand for --modes, and ptui must not take it for its own and replace it
        core.write_csv(a.out, ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "grid"),
                       (core.mode_cells(m) + [a.grid] for m in modes))
    if a.out not in (None, "-"):
        n = len(dev.presets) if a.grid == "presets" else len(modes)
        _info(f"wrote {n} {a.grid} modes of {dev.name} to {a.out}")
    return EXIT_OK


def _check_profile(a, req, sizes) -> None:
    """What `ptui profile` refuses before its session store opens: knobs of a profile over batch
    sizes given without --batch-sizes, and a catalogue workload that does not fit in memory (a
    script, a resumed session or a replayed corpus is checked by its run)."""
    _workload_or_script(a)
    if sizes is None and (req.noise_scale is not None or req.samples_to_target):
        raise CLIError("--noise-scale and --samples-to-target go with --batch-sizes (an active "
                       "profile over batch sizes)")
    if a.device and a.workload and sizes is None and not (a.command_line or a.resume or a.corpus):
        w = core.get_workload(a.workload, a.batch_size or 16)
        core.check_memory(core.get_device(a.device), w, w.batch_size)


def cmd_profile(a) -> int:
    req = core.ProfileRequest(
        workload=a.workload, batch_size=a.batch_size, count=a.count, modes_csv=a.modes, grid=a.grid,
        seed=a.seed, session=a.session, resume=a.resume, sample_interval=a.sample_interval,
        script=list(a.command_line), out=a.out, strategy=a.strategy, budget_w=a.budget_w,
        deadline_ms=a.deadline_ms, objective=a.objective, startup_timeout=a.startup_timeout,
        noise_scale=getattr(a, "noise_scale", None),
        samples_to_target=getattr(a, "samples_to_target", None), corpus=a.corpus,
        time_basis=a.time, workload_spec=getattr(a, "workload_spec", None),
        tune=getattr(a, "tune_hint", None) is not None)
    sizes = getattr(a, "batch_sizes", None)
    _check_profile(a, req, sizes)
    run = core.profile_run(req, sizes, notify=_info)
    if getattr(run, "finished", False):           # nothing left to profile: the CSV, no device
        res = run.export(a.device)
        if res.error is not None:
            raise res.error
        _info(f"session {res.session} is finished, nothing left to profile: {res.saved}")
        return EXIT_OK
    try:
        _info(run.open_backend(a.backend, a.device, root=a.sysfs_root, corpus=a.corpus,
                               detected=getattr(a, "detected", None)))
        info = run.prepare()
    except BaseException:
        run.close()
        raise
    for note in run.notes:
        _info(note)
    every = max(1, len(info.plan) // 100) if len(info.plan) > 200 else 1
    total = max(len(info.plan), run.planner.count) if run.planner is not None else len(info.plan)
    bar = Steps("profiling", total, _info, done=info.n_done)

    def show(p):
        r = p.last
        # the mode in plain words (the CSV keeps the exact values)
        key = r.mode.describe() + (f" · batch {p.batch_size}" if p.batch_size is not None else "")
        w = 56 if p.batch_size is None else 67
        bar.update(p.done, f"{r.time_ms:.1f} ms {r.power_w:.2f} W  {key}",
                   f"[{p.done:>5}/{p.total}] {key:<{w}} {r.time_ms:9.1f} ms {r.power_w:6.2f} W"
                   f"   device time {hms(p.device_time_s)}" if p.done % every == 0 or p.done == p.total
                   else None)

    with bar:
        res = run.run(show)
    a.profiled = res                              # tune reads what the profile was
    hint = getattr(a, "tune_hint", None) or run.resume_hint()
    # the simulated board was 'the device', restored, as if this machine's clocks had been set
    device = run.backend.labelled() if run.backend is not None else "device"
    if res.status == "aborted":
        by = res.stopped_by if res.stopped_by.startswith("SIG") else ""
        _info(f"{'stopped by ' + by if by else 'interrupted'}: {device} restored to its original mode; "
              f"{res.saved}; resume with: {hint}")
        return core.exit_code_for(by) if by else EXIT_INT
    if isinstance(res.error, core.WriteError):        # profiled, but the CSV could not be written
        raise res.error
    if res.error is not None:
        _info(res.saved)
        # a profile stopped before it touched the board (its undo state not saved, the lock
        # taken by another) said the board was restored
        where = ("the board is NOT back in its original mode (see the error below)"
                 if isinstance(res.error, core.RestoreFailed) else
                 f"the {device} was restored to its original mode" if res.left_in is not None else
                 f"nothing was written to the {device}")
        if isinstance(res.error, core.ScriptUnprofilable):
            # a resume runs the script the same way, and it fails the same way: no hint that
            # cannot help (the user's trial); one with another flag's value can, where the error
            # names it (a later batch size that took no step within --startup-timeout was offered
            # no resume, though finished sizes were kept)
            kept = f"; finished modes are kept in session {res.session}" if res.n_rows else ""
            flag = res.error.resume_with
            again = "" if flag is None else (
                f"; a resume with a larger {flag[0]} could get past this: "
                + (_tune_hint(a, flag) if getattr(a, "tune_hint", None) else run.resume_hint(more=flag)))
            _info(f"{where}{kept}{again}")
        else:
            # no mode finished: none is said to be kept (a lock that could not be taken said so)
            kept = (f"finished modes are kept in session {res.session}" if res.n_rows else
                    f"no mode finished in session {res.session}")
            _info(f"{where}; {kept} (resume with: {hint})")
        raise res.error
    if res.stop_reason:
        _info(f"stopped: {res.stop_reason}")
    if res.best and getattr(a, "best_line", True):      # tune says it after deciding
        what = res.best[0]
        what = (f"(mode, batch size) pair for the goal: {what[0].describe()} at batch {what[1]}"
                if isinstance(what, tuple) else f"mode for the goal: {what.describe()}")
        _info(f"best measured {what} (P(meets the goal) {res.best[1]:.0%} by the model)")
    label = f" ({res.label})" if res.label else ""
    _info(f"profiled: {res.saved}; device time {hms(res.device_time_s)}{label}, "
          f"wall time {res.wall_s:.1f} s")
    if res.time_note:
        _info(res.time_note)
    if getattr(a, "json", False) and not getattr(a, "tune_hint", None):    # tune prints its own
        best = None
        if res.best:
            what, prob = res.best
            m, b = what if isinstance(what, tuple) else (what, None)
            best = {"mode": m.as_dict(), "key": m.key, "batch_size": b, "p_meets_goal": prob}
        print(core.document("profile", {
            "session": res.session, "out": None if res.out is None else str(res.out),
            "status": res.status, "rows": res.n_rows, "simulated": res.simulated,
            "label": res.label, "device_time_s": round(res.device_time_s, 3),
            "wall_s": round(res.wall_s, 3), "stop_reason": res.stop_reason or None, "best": best,
            "time_note": res.time_note or None}))
    return EXIT_OK


def _workload_or_script(a) -> None:
    """A catalog --workload and a training command are two workloads: the command was profiled
    and the --workload ignored, or only named the session and model (the user's trial)."""
    if getattr(a, "workload", None) and getattr(a, "command_line", None):
        raise CLIError(f"one workload at a time: --workload {a.workload} (the catalog's) or "
                       f"-- {core.command_text(a.command_line)} (your script), not both")


def cmd_tune(a) -> int:
    """Active profile + fit + decision (+ verified apply): one command for one goal."""
    if a.budget_w is None and a.deadline_ms is None and a.objective is None:
        raise CLIError("choose a goal: --budget-w W, --deadline-ms T or --objective energy")
    _workload_or_script(a)
    if a.session is not None:                   # it names the profile and the model too
        core.check_session_name(a.session)
    elif a.resume:
        # a made-up name was 'no session named tune-orin-agx-resnet18-<now> to resume'
        raise CLIError("--resume needs --session NAME (list them with: ptui sessions)")
    method_given = a.method not in (None, "auto")          # auto, the default, changes nothing
    a.method = a.method or "auto"
    if a.count == 0 and not a.resume:
        ignored = [flag for flag, on in (("--seed", a.seed is not None), ("--method", method_given),
                                         ("--sample-interval", a.sample_interval is not None),
                                         ("--noise-scale", a.noise_scale is not None),
                                         ("--samples-to-target", a.samples_to_target is not None))
                   if on]
        if ignored:
            # they were accepted and ignored (a user's trial)
            raise CLIError(f"--count 0 profiles and fits nothing, so {', '.join(ignored)} would do "
                           f"nothing; drop {'it' if len(ignored) == 1 else 'them'}")
        if getattr(a, "batch_sizes", None) is not None:
            raise CLIError("--count 0 decides for one batch size (the roofline prior over batch "
                           "sizes is not there yet); drop --batch-sizes")
        # a spec's model is no script's: its time is a minibatch of the spec (fit_prior's name)
        name = a.workload or ("spec" if a.workload_spec else "script")
        return _under_tune_name(a, name, lambda: _tune_prior(a, name))
    sizes = getattr(a, "batch_sizes", None)
    stored = _check_tune(a, sizes)
    a.strategy = "active"
    a.count = a.count or (None if sizes is not None else 20)     # over batch sizes: 40 pairs
    a.modes = a.grid = None
    name = a.workload or ("script" if a.command_line or not a.corpus else _corpus_name(a.corpus))
    return _under_tune_name(a, name, lambda: _tune_profiled(a, sizes, stored))


def _under_tune_name(a, name: str, tune: Callable[[], int]) -> int:
    """tune() under --session, or else under a free tune-BOARD-NAME-TIME, held until it returns:
    named after the board the tune will use, as profile's sessions are (without --device it was
    tune-auto-...); another tune started within the same second had the same name and was refused
    (--count 0: the same model directory, the first tune's model replaced by the second's).
    What was found at --sysfs-root is kept as a.detected for the tune's opens of the board (each
    looked again)."""
    if a.session is not None:
        return tune()
    _, board, _, a.detected = core.choose_backend(a.backend, a.device, root=a.sysfs_root, corpus=a.corpus)
    a.session = core.reserve_session(f"tune-{board.name}-{name}")
    try:
        return tune()
    finally:
        core.release_session(a.session)


def _tune_profiled(a, sizes: tuple[int, ...] | None, stored: dict | None) -> int:
    """cmd_tune's active profile (session a.session), fit and decision."""
    from pathlib import Path

    if a.out is not None:
        out = Path(a.out)           # checked as profile's --out is: tune made a mistyped folder
    else:
        out = core.data_dir() / "tune" / f"{a.session}.csv"
        out.parent.mkdir(parents=True, exist_ok=True)
    a.out = str(out)
    a.tune_hint = _tune_hint(a)                 # an interrupted tune resumes as a tune
    a.best_line = False                         # the best measured mode is said with the decision
    a.tune_from = _start_mode(a)
    rc = cmd_profile(a)
    if rc != EXIT_OK:
        return rc
    # the board goes while tune fits and decides: --apply writes only over the mode the profile
    # left it in (it wrote over another user's apply made meanwhile, without a word)
    a.tune_left = getattr(getattr(a, "profiled", None), "left_in", None)
    store = core.Store()
    try:
        first = store.get_session(a.session)
        dev = core.get_device(first.device)
        recorded = first.batch_sizes
    finally:
        store.close()
    workload = first.workload                   # as profiled (a replayed corpus names its own)
    if stored:                                  # decide for what the session was profiled for
        a.noise_scale = stored["relation"].get("noise_scale")
        a.samples_to_target = stored["relation"].get("samples_to_target")
    if sizes is not None or recorded:
        return _tune_batches(a, dev, out, tuple(sizes or recorded), workload, first.backend)
    goal = dict(budget_w=a.budget_w, deadline_ms=a.deadline_ms, objective=a.objective, risk=a.risk)
    try:
        with _finish_with(a.tune_hint):
            td = core.tune_decide(out, dev, **goal, method=a.method, seed=a.seed or 0,
                                  workload=workload, corpus=a.corpus,
                                  model_dir=core.data_dir() / "models" / a.session, progress=_info,
                                  time_basis=a.time,
                                  spec=core.workload_spec(a.workload_spec) if a.workload_spec else None)
    except core.InfeasibleError as e:
        if a.json:
            _infeasible_document("tune", e, goal, first.batch_size)
        raise
    d = td.decision
    res = core.decision_body(td.table, d, td.model, goal, timed=td.timed or _timed(td.model),
                             batch_size=td.model.about.batch_size,
                             mb_per_epoch=td.model.about.batches_per_epoch, cautious=True)
    res.update(simulated=_profiled_simulated(a, first.backend),
               predicted={k: round(v, 4) for k, v in td.predicted.items()},
               profiled=td.n_modes, profile=str(out), model=str(td.model_dir),
               best_measured=td.best_measured, notes=list(d.notes), applied=False)
    _trains_on(res, (first.params or {}).get("trains_on"), on_board=first.backend not in ("sim", "replay"))
    return _tune_report(a, dev, td, goal, res, batch_size=td.model.about.batch_size)


def _check_tune(a, sizes) -> dict | None:
    """tune's inputs that need no board, each one line before anything is profiled; returns what
    a resumed tune's session was profiled for (None for a new one)."""
    if not a.command_line and not a.workload and not a.resume and not a.corpus:
        raise CLIError("--workload is required (or your own training command after --; on the "
                       "replay device --corpus F.csv is the workload)")
    if a.workload_spec:                         # a bad spec: one line before any mode is profiled
        core.workload_spec(a.workload_spec)
    stored = _resumed_tune(a) if a.resume and a.session else None
    group = sizes is not None or bool(stored and stored["batch_sizes"])
    if group and a.deadline_ms is not None:
        raise CLIError("--deadline-ms is per minibatch, which means different work at each batch "
                       "size; with --batch-sizes use --budget-w W or --objective energy")
    if not group and (a.noise_scale is not None or a.samples_to_target):
        raise CLIError("--noise-scale and --samples-to-target go with --batch-sizes")
    floor = 10 if group else 6
    if a.count is not None and not a.resume and a.count < floor:
        raise CLIError(f"--count {a.count} is too few for tune: the fit after profiling needs at "
                       f"least {floor} {'(mode, batch size) pairs' if group else 'modes'}")
    return stored


def _tune_report(a, dev, td, goal: dict, res: dict, *, batch_size, prior: bool = False) -> int:
    """What tune says once it has decided (from profiled modes, or the prior alone): the
    decision's notes, the verified apply with --apply, then the JSON document or the lines."""
    d = td.decision
    for note in d.notes:
        _warn(note)
    if a.apply:
        res["applied"] = True
        res["apply_message"] = _tune_apply(a, dev, d.mode)
    if a.json:
        print(core.document("tune", res))
        return EXIT_OK
    print(f"goal: {d.goal}")
    if res.get("simulated") and getattr(a, "corpus", None):
        print(f"board: REPLAYED {dev.name} (the figures below are the recorded corpus's, or "
              "predicted from it)")
    elif res.get("simulated"):
        print(f"board: SIMULATED {dev.name} (the figures below are for the simulated board, not "
              "measured on a Jetson)")
    if prior:
        print(PRIOR_LINE)
    print(f"mode: {d.mode}")
    print(_figures_line(td.source, d, td.timed or _timed(td.model), prior=prior))
    if td.source == "measured":
        print(f"the model predicts {td.predicted['time_ms']:.1f} ms, {td.predicted['power_w']:.2f} W "
              f"for it (model {td.model_dir})")
    bm = td.best_measured
    if bm is not None:
        # in words, as the pick's 'mode:' line above (the JSON keeps its key)
        print(f"best measured mode for the goal: {core.Mode.from_key(bm['key']).describe()} "
              f"({bm['time_ms']:.1f} ms, {bm['power_w']:.2f} W): {bm['why']}")
    _print_energy(core.decision_energy(td.table, d, td.model, goal, batch_size=batch_size,
                                       cautious=True))
    if a.apply:
        print(res["apply_message"])
    else:
        print(f"apply with: ptui apply --cores {d.mode.cores} --cpu-mhz {d.mode.cpu_mhz:g} "
              f"--gpu-mhz {d.mode.gpu_mhz:g} --mem-mhz {d.mode.mem_mhz:g}  (or ptui tune ... --apply)")
    if prior:
        print(f"model: {td.model_dir}")
        print("profiled modes refine it: ptui tune without --count 0 (or ptui fit --profile)")
    return EXIT_OK


def _tune_prior(a, name: str) -> int:
    """tune --count 0: no mode profiled.  The spec comes from the probe counting one iteration of
    the user's command (on the board it runs on; the mode is left alone), or --workload-spec, or a
    catalog --workload's published counts; the decision is the roofline prior's, with its spreads
    at the goal's risk, and says so.  `name`: the workload's, as cmd_tune named the session."""
    if a.corpus:
        raise CLIError("--count 0 decides from the workload's counts; a replayed corpus is "
                       "measurements: drop --count 0 to tune on them")
    if a.out:
        raise CLIError("--count 0 profiles no mode, so there is no profile CSV for --out to hold "
                       "(the model is saved in the data directory, and said)")
    _one_source_of_counts(a)
    if a.workload_spec and a.batch_size:
        raise CLIError("--workload-spec gives the batch size (its batch_size field); drop "
                       "--batch-size, or write the counts of that batch in the spec")
    if a.command_line and not a.workload_spec:
        core.check_command(a.command_line)    # before a board is opened or a log written for it
    if a.session is not None:
        _check_prior_session(a.session)
    backend, note = core.open_backend(a.backend, a.device, root=a.sysfs_root,
                                      detected=getattr(a, "detected", None))
    _info(note)
    a.tune_from = backend.current_mode() if a.apply and not backend.simulated else None
    dev = backend.device
    session = a.session                         # cmd_tune's name, when none was given
    timed, t0, simulated = "", time.monotonic(), backend.not_live
    time_note: str | None = None
    basis = "step"                  # what the prior's time is: a probe's whole cycle, else the step
    bs_known = True
    if a.command_line and a.workload_spec:
        _info(f"--count 0 with --workload-spec: the counts are {a.workload_spec}'s; "
              f"{core.command_text(a.command_line)!r} is not run")
    try:
        if a.command_line and not a.workload_spec:
            log = core.script_log(session)
            _info(f"counting one iteration of {core.command_text(a.command_line)!r} under the probe "
                  f"(no mode is profiled; its output goes to {log})")
            info, timed = core.count_script(backend, a.command_line, log,
                                            startup_timeout=a.startup_timeout, notify=_info)
    finally:
        backend.close()
    if a.workload_spec:
        spec = core.workload_spec(a.workload_spec)
    elif a.command_line:
        basis, time_note = core.probe_time(info, getattr(a, "time", "auto"))
        spec = core.probe_spec(info, a.batch_size, basis)
        if basis == "cycle":
            timed = core.cycle_timed(timed)
        bs_known = bool(info.get("samples") or a.batch_size)
        of = f" of {spec.batch_size} samples" if bs_known else ""
        _info(f"counted in {time.monotonic() - t0:.1f} s: {spec.gflop_per_step:.3g} GFLOP and "
              f"{spec.gbytes_per_step:.3g} GB per iteration{of}")
        if not bs_known:
            _info("the script's batch size is unknown (no DataLoader batch was seen): the counts "
                  "are per iteration; give --batch-size N to record it")
    else:
        spec = core.workload_spec(None, a.workload, a.batch_size)
    if spec is None:
        raise CLIError("--count 0 needs the workload's counts: your training command after --, "
                       "--workload-spec SPEC.json, or a catalog --workload")
    bs_said = spec.batch_size if bs_known else None        # JSON: null, not an assumed 1
    goal = dict(budget_w=a.budget_w, deadline_ms=a.deadline_ms, objective=a.objective, risk=a.risk)
    model_dir = core.data_dir() / "models" / session
    try:
        td = core.tune_prior(dev, spec, **goal, workload=name, model_dir=model_dir,
                             timed=(f"{timed} (of the user's script)" if timed else ""),
                             time_basis=basis)
    except core.InfeasibleError as e:
        # the prior is saved all the same: say where, so that pareto can decide again from it
        if a.json:
            _infeasible_document("tune", e, goal, bs_said, profiled=0,
                                 extra={"model": str(model_dir), "simulated": simulated})
        else:
            _info(f"the roofline prior is saved as {model_dir}: decide again from it with ptui "
                  f"pareto --model {model_dir}")
        raise
    d, model = td.decision, td.model
    res = core.decision_body(td.table, d, model, goal, timed=td.timed or _timed(model),
                             batch_size=bs_said, mb_per_epoch=model.about.batches_per_epoch, cautious=True)
    res.update(simulated=simulated, predicted={k: round(v, 4) for k, v in td.predicted.items()},
               profiled=0, profile=None, model=str(td.model_dir), best_measured=None,
               prior=_prior_counts(spec.source, spec.as_dict(), bs_said),
               notes=list(d.notes), applied=False, interval90=_interval90(d))
    if a.command_line and not a.workload_spec:
        _trains_on(res, info.get("device"), on_board=not backend.simulated, prior=True)
        if time_note:
            res["notes"].append(time_note)
            _warn(time_note)
    _warn(_prior_only_note(model))
    return _tune_report(a, dev, td, goal, res, batch_size=bs_said, prior=True)


def _check_prior_session(name: str) -> None:
    """--count 0 --session NAME saves its model as NAME in the data directory (and a script's
    output as NAME.log): the name of a profiling session, or of a model that is not the prior
    alone, is refused, as a profiled tune refuses a session that exists (--count 0 replaced a
    profiled tune's model with the prior's, silently: a user trial).  A prior model of its own
    under that name is replaced, as asked."""
    store = core.Store()
    try:
        profiled = store.get_session(name) is not None
    finally:
        store.close()
    model = core.data_dir() / "models" / name
    fitted = False
    if not profiled and (model / "meta.json").exists():
        meta = core.model_meta(model)          # unreadable: not known to be the prior's, kept
        fitted = meta is None or meta.get("kind") != core.PRIOR_KIND
    if profiled or fitted:
        what = ("a profiling session of that name exists (ptui sessions lists it), and --count 0 "
                "would write over its model" if profiled else
                f"{model} holds a fitted model, which --count 0 would replace")
        raise CLIError(f"--session {name}: {what}; pick another --session name")


def _trains_on(res: dict, device: str | None, *, on_board: bool, prior: bool = False) -> None:
    """tune's document says where the user's script trained, and a board's CPU training first in
    its notes (a script reading the JSON is told, as profile tells the terminal); for the prior
    (--count 0), that its figures are GPU training's (a user's trial: 62 ms a step on one core at
    115 MHz, for a script training on that CPU)."""
    if device:
        res["trains_on"] = device
        if device == "cpu" and on_board:
            res["notes"].insert(0, core.PRIOR_CPU_TRAINING_WARNING if prior else core.CPU_TRAINING_WARNING)


def _profiled_simulated(a, kind: str) -> bool:
    """Whether tune's profile ran on a board of this process or a recording (or a what-if), not a
    live board; a resumed tune with nothing left to profile says it from its session's backend."""
    res = getattr(a, "profiled", None)
    if res is not None:
        return bool(res.simulated)
    return kind in ("sim", "replay")


def _corpus_name(corpus: str) -> str:
    return core.corpus_workload(corpus).name


def _start_mode(a) -> core.Mode | None:
    """With --apply, the mode the board is in as tune starts, which tune --apply writes over only
    if the board is still in it (where no profile touches the board); None for a board of this
    process or a recording, which nobody else drives.  A resumed session profiled on another board
    or kind of backend is refused here, before anything is profiled or fitted."""
    if not a.apply:
        return None
    backend, _ = core.open_backend(a.backend, a.device, root=a.sysfs_root, corpus=a.corpus,
                                   detected=getattr(a, "detected", None))
    try:
        if a.resume:                            # its pick is set on the board it was profiled on
            core.check_resumed_board(a.session, backend)
        return None if backend.simulated else backend.current_mode()
    finally:
        backend.close()


def _tune_apply(a, dev, mode) -> str:
    """tune --apply: apply the pick on the board, verified (remembered for ptui restore), only
    over the mode the profile left the board in, or, where none touched it (a finished session
    resumed, --count 0), the mode it was in when tune started: it wrote over a mode selected
    meanwhile, without a word, where no profile ran."""
    backend, note = core.open_backend(a.backend, dev.name, root=a.sysfs_root, corpus=a.corpus,
                                      detected=getattr(a, "detected", None))
    _info(note)
    left, start = getattr(a, "tune_left", None), getattr(a, "tune_from", None)
    expected, was = ((left, f"the profile left it in {left.key}") if left is not None else
                     (start, f"it was in {start.key} when tune started") if start is not None else
                     (None, ""))
    try:
        with core.board_lock(backend):
            now = backend.current_mode()
            if expected is not None and now != expected:
                raise CLIError(f"not applied: the board was changed while tune fitted and decided (it "
                               f"is in {now.key} now; {was}), and tune "
                               f"does not write over that change: apply the pick yourself with: "
                               f"ptui apply --cores {mode.cores} --cpu-mhz {mode.cpu_mhz:g} --gpu-mhz "
                               f"{mode.gpu_mhz:g} --mem-mhz {mode.mem_mhz:g}", EXIT_ERR)
            with _said_before_stop(backend, _say):  # on stderr, where --json's stdout stays a document
                r = core.apply(backend, mode)
    except core.LockError as e:
        raise CLIError(f"not applied: {e}", EXIT_ERR) from None
    if not r.ok:
        raise CLIError(r.message, EXIT_ERR)
    return _applied(r.message, backend)


@contextlib.contextmanager
def _finish_with(hint: str):
    """Tune's fit and decision, after its profile: stopped there (Ctrl-C, SIGTERM, SIGHUP), the
    profiled modes are safe in the session store, and the line says how to finish (it said only
    'interrupted')."""
    try:
        yield
    except (KeyboardInterrupt, core.Terminated):
        _info(f"stopped while fitting; the profiled modes are saved: finish the fit and the "
              f"decision with: {hint}")
        raise


def _tune_hint(a, more=()) -> str:
    """The command that resumes an interrupted `ptui tune` (profile, fit and decision); `more`:
    options it adds (a longer --startup-timeout)."""
    import shlex

    goal = (["--budget-w", f"{a.budget_w:g}"] if a.budget_w is not None else []) + \
        (["--deadline-ms", f"{a.deadline_ms:g}"] if a.deadline_ms is not None else []) + \
        (["--objective", a.objective] if a.objective else [])
    risk = [] if a.risk == core.DEFAULT_RISK else \
        ["--risk", core.RISK_MEAN if a.risk is None else f"{a.risk:g}"]
    extra = (["--method", a.method] if a.method and a.method != "auto" else []) + risk + \
        (["--apply"] if a.apply else []) + (["--json"] if a.json else []) + \
        core.startup_timeout_args(getattr(a, "startup_timeout", None), more) + list(more)
    replay = ["--backend", "replay", "--corpus", a.corpus] if a.corpus else []
    cmd = shlex.join(["ptui", "tune", "--session", a.session, "--resume", *goal, *extra, *replay,
                      "--out", a.out])
    return cmd + (f" -- {core.command_text(a.command_line)}" if a.command_line else "")


def _resumed_tune(a) -> dict | None:
    """What a resumed tune session was profiled for: its workload and, for a profile over batch sizes,
    its sizes and samples-to-target relation, so the decision is made for the same.  A goal or a
    relation on the command line that differs from the stored one is refused before any
    profiling.  None when there is no such session (the profile then says so)."""
    from pathlib import Path

    store = core.Store()
    try:
        first = store.get_session(a.session)
    finally:
        store.close()
    if first is None:
        return None
    p = first.params or {}
    mine = core.Goal(budget_w=a.budget_w, deadline_ms=a.deadline_ms, objective=a.objective)
    if p.get("goal") and core.Goal(**p["goal"]) != mine:
        raise CLIError(f"session {a.session} was profiled for '{core.Goal(**p['goal']).describe()}', not "
                       f"'{mine.describe()}'; resume it with its own goal, or start a new session")
    rel = p.get("relation") or {}
    ns, stt = rel.get("noise_scale"), rel.get("samples_to_target")
    given_stt = None if a.samples_to_target is None else str(Path(a.samples_to_target).resolve())
    if (a.noise_scale is not None and a.noise_scale != ns) or (
            given_stt is not None and (stt is None or given_stt != str(Path(stt).resolve()))):
        have = (f"--noise-scale {ns:g}" if ns is not None else f"--samples-to-target {stt}" if stt
                else "throughput only (no --noise-scale or --samples-to-target)")
        raise CLIError(f"session {a.session} was profiled with {have}; resume it with the same, or "
                       f"start a new session")
    return {"workload": first.workload, "relation": rel, "batch_sizes": first.batch_sizes}


def _tune_batches(a, dev, out, sizes, workload, kind: str) -> int:
    """tune --batch-sizes: after the active profile over (mode, batch size), fit and decide."""
    try:
        with _finish_with(a.tune_hint):
            r, model_dir, n, model = core.tune_decide_batches(
                out, dev, sizes, budget_w=a.budget_w, objective=a.objective,
                risk=a.risk, samples_file=a.samples_to_target,
                noise_scale=a.noise_scale, method=a.method, seed=a.seed or 0,
                workload=workload, model_dir=core.data_dir() / "models" / a.session, progress=_info,
                time_basis=a.time)
    except core.InfeasibleError as e:
        if a.json:
            _infeasible_document("tune", e, {}, words=_joint_goal_words(a.budget_w, a.objective, a.risk))
        raise
    for note in r.notes:
        _info(note)
    p = r.pick
    for note in p.notes:
        _warn(note)
    best = None
    tab = r.space.table
    if p.best_measured is not None:          # one answer: the best measured pair and the pick
        j = p.best_measured
        best = {"mode": tab.modes[j].as_dict(), "key": tab.modes[j].key, "batch_size": tab.batch_of(j),
                "time_ms": round(float(tab.time_ms[j]), 4),
                "power_w": round(float(tab.power_w[j]), 4), "is_pick": j == p.index,
                "why": p.why}
    applied = _tune_apply(a, dev, p.mode) if a.apply else None
    if a.json:
        pred = model.predict([p.mode], batch_size=p.batch_size)
        d = dict(core.batch_decision_body(r, model, _joint_goal(a), timed=_timed(model)),
                 simulated=_profiled_simulated(a, kind), profiled=n, profile=str(out),
                 predicted={"time_ms": round(float(pred["time_ms"][0]), 4),
                            "power_w": round(float(pred["power_w"][0]), 4)},
                 model=str(model_dir), best_measured=best, notes=p.notes,
                 applied=applied is not None, **({"apply_message": applied} if applied else {}))
        print(core.document("tune", d))
        return EXIT_OK
    _print_batch_decision(r, core.batch_decision_energy(r, model, _joint_goal(a)), timed=_timed(model))
    if best is not None:
        print(f"best measured (mode, batch size) for the goal: "
              f"{core.Mode.from_key(best['key']).describe()} at batch {best['batch_size']} "
              f"({best['time_ms']:.1f} ms per step, {best['power_w']:.2f} W): {p.why}")
    print(f"from {n} profiled (mode, batch size) pairs; model {model_dir}")
    if applied:
        print(f"{applied}; train at batch size {p.batch_size}")
    else:
        print(f"apply with: ptui apply --cores {p.mode.cores} --cpu-mhz {p.mode.cpu_mhz:g} "
              f"--gpu-mhz {p.mode.gpu_mhz:g} --mem-mhz {p.mode.mem_mhz:g}  and train at batch size "
              f"{p.batch_size}  (or ptui tune ... --apply)")
    return EXIT_OK


def cmd_sessions(a) -> int:
    store = core.Store()
    if store.notice:
        _info(store.notice)
    rows = store.list_sessions()
    if a.json:
        print(core.document("sessions", {"store": str(store.path), "sessions": [
            {"name": s.name, "device": s.device, "workload": s.workload, "batch_size": _session_batch(s),
             "batch_sizes": _session_sizes(s), "backend": s.backend, "status": s.status,
             "done": s.n_done, "planned": len(s.plan), "up_to": s.up_to,
             "device_time_s": round(s.device_time_s, 3), "created": s.created} for s in rows]}))
        return EXIT_OK
    if not rows:
        _info(f"no profiling sessions in {store.path}")
        return EXIT_OK
    print(f"{'session':<44} {'device':<10} {'workload':<12} {'batch':<11} {'done':>11} {'status':<11} "
          f"device time")
    for s in rows:
        # an active profile's plan grows as it goes: its most points, not what is planned so far
        planned = f"{len(s.plan)}" if s.up_to is None or s.status == "done" else f"<={s.up_to}"
        print(f"{s.name:<44} {s.device:<10} {s.workload:<12} "
              f"{','.join(map(str, _session_sizes(s))) or '?':<11} {s.n_done:>5}/{planned:<5} "
              f"{s.status:<11} {hms(s.device_time_s)}")
    return EXIT_OK


def _session_batch(s) -> int | None:
    """A session's batch size as its CSV says it (None: a script's, neither stated nor seen)."""
    tag = core.batch_tag(s) if s.batch_sizes is None else str(s.batch_size)
    return int(tag) if tag else None


def _session_sizes(s) -> list[int]:
    """The batch sizes a session profiles: those asked for over several (the ones planned when
    memory left some out), else its one size; a user's script's as its CSV says it (the samples
    per iteration the probe counted, none where the batch was neither stated nor seen)."""
    if s.batch_sizes is None:
        tag = core.batch_tag(s)
        return [int(tag)] if tag else []
    planned = set(s.plan_sizes)
    return [b for b in s.batch_sizes if b in planned] or list(s.batch_sizes)


def _refuse_overwrite_into(path) -> None:
    """Before training: refuse an --out that ptui may not replace (see core.modeldir)."""
    core.check_out_dir(path)


def cmd_reference_build(a) -> int:
    dev = core.get_device(a.device)
    modes, t, p = core.read_profile(a.profile, dev, min_modes=100)
    _refuse_overwrite_into(a.out)
    t0 = time.perf_counter()
    with Steps("training", 2, _info) as bar:          # two networks: time, power
        model = core.train.build_reference(dev, modes, t, p, workload=a.workload, source=a.source or
                                           f"profile {a.profile}", seed=a.seed, progress=bar.stage)
    model.save(a.out)
    m = model.about.metrics
    _info(f"reference for {dev.name}/{a.workload} from {len(modes)} modes -> {a.out} "
          f"({time.perf_counter() - t0:.1f} s); hold-out MAPE time {m['time']['holdout_mape']:.1f} %, "
          f"power {m['power']['holdout_mape']:.1f} %")
    return EXIT_OK


def cmd_fit(a) -> int:
    dev = core.get_device(a.device)
    _refuse_overwrite_into(a.out)
    spec = core.workload_spec(a.workload_spec) if a.workload_spec else None
    if a.profile is None:
        return _fit_prior(a, dev, spec)
    if getattr(a, "pool", False) or getattr(a, "pool_url", None):
        return _fit_pooled(a, dev, spec)
    with Steps("fitting", 2, _info) as bar:           # two targets: time, power

        def progress(msg: str) -> None:
            st = core.Step.of(msg)
            if st.kind == core.STAGE:
                bar.stage(st)
            elif st.kind != core.SAVING:
                bar.update(bar.done, st, st)
        res = core.fit(dev, a.profile, workload=a.workload, out=a.out, reference=a.reference,
                          progress=progress, method=a.method, time_basis=a.time, scratch=a.scratch,
                          seed=a.seed, loss=a.loss, note=_info, spec=spec)
    m = res.model.about.metrics
    if a.json:
        keep = ("choice", "cv_mape", "cv_coverage90", "cv_coverage90_calibrated", "sd_scale", "note")
        print(core.document("fit", {
            "device": dev.name, "model": str(res.out), "profile": str(a.profile),
            "method": "scratch" if a.scratch else a.method, "workload": res.workload,
            "batch_sizes": res.sizes, "profiled": res.n_modes, "fitted_on": res.fitted_on,
            "seconds": round(res.seconds, 3), "timed": _timed(res.model),
            "simulated": _profile_simulated(_timed(res.model)),
            "time_basis": res.model.about.time_basis,
            "metrics": {t: {k: round(v, 4) if isinstance(v, float) else v
                            for k, v in ((k, m[t].get(k)) for k in keep)} for t in ("time", "power")},
            "notes": [n for n in [core.subset_note(m, "(mode, batch size) pairs" if len(res.sizes) > 1
                                                   else "modes")]
                      + [core.outlier_note(t, m[t]) for t in ("time", "power")] if n]}))
        return EXIT_OK
    how = "trained from scratch" if a.scratch else f"method {a.method}"
    print(f"model for {dev.name} ({how}), {res.fitted_on} -> {a.out} ({res.seconds:.1f} s)")
    _say_profile_basis(_timed(res.model))          # as pareto and predict say it of the model
    sub = core.subset_note(m, "(mode, batch size) pairs" if len(res.sizes) > 1 else "modes")
    if sub:
        print(f"  {sub}")
    for name in ("time", "power"):
        mm = m[name]
        cov = (f"; 90 % interval covered {mm['cv_coverage90']:.0f} % of held-out modes"
               + (f" (sd x{mm['sd_scale']:.2f} -> {mm['cv_coverage90_calibrated']:.0f} %)"
                  if abs(mm.get("sd_scale", 1.0) - 1.0) > 0.005 else "")
               if "cv_coverage90" in mm else "")
        mape = (f"cross-validated MAPE {mm['cv_mape']:.1f} %" if "cv_mape" in mm
                else "not cross-validated")
        print(f"  {name:<5}: {mm.get('choice', '?'):<18} {mape}{cov}")
        for line in (mm.get("note"), core.outlier_note(name, mm)):
            if line:
                print(f"         {line}")
    return EXIT_OK


def _one_source_of_counts(a) -> None:
    """A model from the prior alone takes its counts from --workload-spec or a catalog --workload,
    not both: with both, the spec's counts were used and the model was named after the catalog
    workload (its published counts, its epoch), a model labelled ResNet-18 that was not.  Another
    name (--workload my-model) only names the spec's model."""
    if a.workload_spec and str(a.workload) in core.WORKLOADS:
        raise CLIError(f"--workload {a.workload} is a catalog workload with published counts of its "
                       f"own, and --workload-spec gives others: drop one (or name the spec's model "
                       f"otherwise, e.g. --workload my-model)")


def _fit_prior(a, dev, spec) -> int:
    """fit without --profile: the roofline prior of --workload-spec (or of a catalog --workload)
    alone, saved as a model that predict and pareto read like any other."""
    _one_source_of_counts(a)
    if spec is None:
        spec = core.workload_spec(None, a.workload)
    if spec is None:
        raise CLIError("give --profile CSV, or --workload-spec SPEC.json (or a catalog --workload) "
                       "for a model from the roofline prior alone")
    given = [f for f, on in (("--scratch", a.scratch), (f"--method {a.method}", a.method != "auto"),
                             (f"--time {a.time}", getattr(a, "time", "auto") != "auto")) if on]
    if given:
        raise CLIError(f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to a fit "
                       f"on a profile; without --profile the model is the roofline prior alone")
    res = core.fit_prior(dev, spec, out=a.out, workload=a.workload)
    m = res.model.about.metrics
    if a.json:
        print(core.document("fit", {
            "device": dev.name, "model": str(res.out), "profile": None, "method": "roofline",
            "workload": res.workload, "batch_sizes": res.sizes, "profiled": 0,
            "fitted_on": res.fitted_on, "seconds": round(res.seconds, 3), "timed": _timed(res.model),
            "time_basis": res.model.about.time_basis,
            "metrics": {t: {"choice": m[t]["choice"], "note": m[t]["note"]} for t in ("time", "power")},
            "notes": [m["time"]["note"]]}))
        return EXIT_OK
    print(f"model for {dev.name}, {res.fitted_on} -> {a.out}")
    print(f"  {m['time']['note']}")
    print("  decisions from it rest on no measurement: profile a few modes and fit with --profile "
          "to refine it")
    return EXIT_OK


def _prior_counts(source, spec: dict, batch_size) -> dict:
    """The counts a decision from the roofline prior alone rests on (--json's `prior`)."""
    return {"source": source or "workload spec", "gflop_per_step": spec.get("gflop_per_step"),
            "gbytes_per_step": spec.get("gbytes_per_step"), "batch_size": batch_size}


def _prior_only_note(model, what: str = "this decision rests") -> str | None:
    """The line a decision (or `what`) from a model with no profiled mode says (stderr), else None."""
    if model.about.kind != core.PRIOR_KIND:
        return None
    return (f"{what} on no measurement: the roofline prior of "
            f"{model.about.trained_on.get('source') or 'a workload spec'} alone, with its spreads; "
            f"profile a few modes to refine it")
def _fit_pooled(a, dev, spec) -> int:
    """`ptui fit --pool`: this board's profile with the fleet's rows (README: Fleets); with
    --workload-spec its roofline prior is one more candidate, as without --pool."""
    if a.scratch:
        raise CLIError("--scratch trains a network on the profile alone; it does not pool")
    res = core.fit_with_pool(dev, a.profile, url=a.pool_url, board=a.board, workload=a.workload, out=a.out,
                             reference=a.reference, method=a.method, seed=a.seed, loss=a.loss,
                             progress=None, spec=spec, time_basis=a.time, note=_info)
    m, p = res.model.about.metrics, res.model.about.trained_on["pooled"]
    if a.json:
        keep = ("choice", "cv_mape", "cv_coverage90", "cv_coverage90_calibrated", "sd_scale")
        print(core.document("fit", {
            "device": dev.name, "model": str(res.out), "profile": str(a.profile), "method": a.method,
            "workload": res.workload, "batch_sizes": res.sizes, "profiled": p["own_rows"],
            "fitted_on": f"{res.n_modes} rows, {p['own_rows']} of this board, pooled",
            "seconds": round(res.seconds, 3), "timed": _timed(res.model),
            "time_basis": res.model.about.time_basis, "pooled": p,
            "metrics": {t: {k: round(v, 4) if isinstance(v, float) else v
                            for k, v in ((k, m[t].get(k)) for k in keep)} for t in ("time", "power")},
            "notes": [core.pooled_note(res.model)]}))
        return EXIT_OK
    print(f"model for {dev.name} (method {a.method}), pooled: {res.n_modes} rows -> {a.out} "
          f"({res.seconds:.1f} s)")
    print(f"  {core.pooled_note(res.model)}")
    for name in ("time", "power"):
        mm = m[name]
        print(f"  {name:<5}: {mm.get('choice', '?'):<18} cross-validated MAPE {mm['cv_mape']:.1f} % "
              f"(over the pooled rows, corrected to this board)")
    return EXIT_OK


def cmd_pool(a) -> int:
    """`ptui pool list | pull | push`: the fleet's shared rows (README: Fleets)."""
    if a.poolcmd == "list":
        got, where = core.pool_summary(a.pool_url)
        if a.json:
            print(core.document("pool", {"pool": where, "groups": got}))
            return EXIT_OK
        if not got:
            _info(f"the pool {where} holds no rows yet")
            return EXIT_OK
        print(f"pool {where}")
        # columns as wide as their longest name (a script's workload can be any length)
        dw = max(11, *(len(str(g["device"])) for g in got))
        ww = max(14, *(len(str(g["workload"])) for g in got))
        print(f"{'device':<{dw}} {'workload':<{ww}} {'batch':>5} {'rows':>6} {'boards':>6} "
              f"{'simulated':>9}  newest")
        for g in got:
            print(f"{g['device']:<{dw}} {g['workload']:<{ww}} {g['batch_size']:>5} {g['rows']:>6} "
                  f"{g['boards']:>6} {g['simulated_rows']:>9}  "
                  f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(g['newest']))} UTC")
        return EXIT_OK
    if a.poolcmd == "push":
        dev = core.get_device(a.device)
        me = core.board_id(a.board)
        added, had, where, guess = core.push_profile(a.profile, dev, url=a.pool_url, board=me,
                                                     workload=a.workload, batch_size=a.batch_size)
        print(f"{added} rows of {a.profile} added to the pool {where} as board {me!r}"
              + (f" ({had} were there already)" if had else "") + (f", {guess}" if guess else ""))
        return EXIT_OK
    core.check_out_file(a.out)
    dev = core.get_device(a.device)
    rows, where = core.pull_rows(dev, a.workload, a.batch_size, url=a.pool_url, board=a.board)
    if not rows:
        raise CLIError(f"the pool {where} holds no rows for {dev.name}"
                       + (f", {core.workload_name(a.workload)}" if a.workload else "")
                       + (f" at batch size {a.batch_size}" if a.batch_size else "")
                       + (f" of board {a.board.strip()!r}" if a.board is not None else ""))
    cols = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "time_ms", "power_w", "time_ms_p25", "time_ms_p75",
            "power_w_std", "n_minibatches", "n_power", "workload", "batch_size", "board", "simulated",
            "source", "measured_at")
    core.write_csv(a.out, cols, [[core.fmt_value(getattr(r, c)) if c not in ("workload", "board", "source")
                                  else getattr(r, c) for c in cols] for r in rows])
    boards = len({r.board for r in rows})
    sim = sum(r.simulated for r in rows)
    print(f"{len(rows)} rows of {boards} board{'s' * (boards != 1)} from the pool {where} -> {a.out}"
          + (f" ({sim} SIMULATED)" if sim else ""))
    return EXIT_OK


def _predict_table(a):
    model = core.load_model(a.model)
    if getattr(a, "device", None) and core.get_device(a.device) != model.device:
        raise CLIError(f"model {a.model} is for {model.device.name}, not {core.get_device(a.device).name}")
    # before the note on the modes left out: bad input is one line (--time cycle on a model of the
    # median step printed that note, then the error)
    _check_time_basis(a, model)
    if a.modes:
        modes = core.read_modes(a.modes, model.device)
    else:
        modes, note = model.decision_space(extrapolate=getattr(a, "extrapolate", False))
        if note:
            _info(note + " (--extrapolate to include them)")
    pred = model.predict(modes)
    core.check_predictions(pred, str(a.model))
    return model, core.Table.from_prediction(modes, pred).with_measurements(model.measured_at())


def cmd_predict(a) -> int:
    core.check_out_file(a.out)
    model = core.load_model(a.model)
    if getattr(a, "device", None) and core.get_device(a.device) != model.device:
        raise CLIError(f"model {a.model} is for {model.device.name}, not {core.get_device(a.device).name}")
    tab, batch = core.predict_table(model, a.modes)
    have = model.batch_sizes
    if batch is not None and have:
        out = sorted({int(b) for b in batch if not min(have) <= b <= max(have)})
        if out:
            many = len(out) > 1
            _warn(f"batch size{'s' if many else ''} {','.join(map(str, out))} lie{'' if many else 's'} "
                  f"outside the profiled {','.join(map(str, have))}: those rows are extrapolations")
    bcol = () if batch is None else ("batch_size",)
    rows = ([*core.mode_cells(m), *([str(batch[i])] if bcol else []), core.fmt_value(float(tab.time_ms[i])),
             core.fmt_value(float(tab.power_w[i])), core.fmt_value(float(tab.time_ms_std[i])),
             core.fmt_value(float(tab.power_w_std[i]))]
            for i, m in enumerate(tab.modes))
    core.write_csv(a.out, ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", *bcol, "time_ms", "power_w",
                           "time_ms_std", "power_w_std"), rows)
    if a.out not in (None, "-"):
        _info(f"predicted {len(tab)} modes of {model.device.name} -> {a.out}")
    basis = _profile_basis(_timed(model))       # on stderr: stdout is the CSV (pareto says it too)
    if basis:
        _info(basis)
    note = _prior_only_note(model, "these predictions rest")
    if note:
        _warn(note)
    return EXIT_OK


def cmd_pareto(a) -> int:
    if a.budget_w is None and a.deadline_ms is None and a.objective is None:
        raise CLIError("choose a goal: --budget-w W, --deadline-ms T or --objective energy")
    if a.batch_sizes is not None:
        return _pareto_batches(a)
    if a.samples_to_target is not None or a.noise_scale is not None:
        raise CLIError("--samples-to-target and --noise-scale need --batch-sizes (the sizes to compare)")
    model, tab = _predict_table(a)
    wl_mb = a.batches_per_epoch or model.about.batches_per_epoch
    if wl_mb is None:
        w = core.WORKLOADS.get(str(model.about.workload))
        wl_mb = w.minibatches_per_epoch if w else None
    goal = dict(budget_w=a.budget_w, deadline_ms=a.deadline_ms, objective=a.objective, risk=a.risk,
                tolerance_w=a.tolerance_w)
    bs = model.about.batch_size
    prior_note = _prior_only_note(model)
    if prior_note:                     # before the decision: a goal no mode meets says it too
        _warn(prior_note)
    d = _choose_or_document(a, "pareto", tab, goal, batch_size=bs, mb_per_epoch=wl_mb, epochs=a.epochs,
                            profiled=core.profiled_modes(model), unit=core.time_unit(_timed(model)))
    res = core.decision_body(tab, d, model, goal, timed=_timed(model), batch_size=bs, mb_per_epoch=wl_mb,
                             epochs=a.epochs)
    if prior_note:
        # the counts too, as tune --count 0 says them (README: a prior model's pareto --json)
        res.update(interval90=_interval90(d), prior=_prior_counts(
            model.about.trained_on.get("source"), model.about.roofline_spec, bs))
    if a.epochs and not res["epoch_s"]:
        _info(f"no epoch time: this model's workload ({model.about.workload}) does not say how many "
              "minibatches an epoch has; give --batches-per-epoch N")
    if a.json:
        print(core.document("pareto", {**res, "simulated": _profile_simulated(res.get("timed"))}))
        return EXIT_OK
    print(f"goal: {d.goal}")
    _say_profile_basis(res.get("timed"))
    if prior_note:                                  # on the answer itself, as tune says it
        print(PRIOR_LINE)
    print(f"mode: {d.mode}")
    if model.batch_sizes:
        print(f"batch size: {model.about.batch_size} (the model's default; add --batch-sizes "
              f"{','.join(map(str, model.batch_sizes))} to choose it too)")
    print(_figures_line(tab.source(d.index), d, res.get("timed"), prior=bool(prior_note)))
    if tab.measured.any():
        print(f"({int(tab.measured.sum())} profiled modes count with their measurements)")
    if res["epoch_s"]:
        print(f"epoch: {res['epoch_s'] / 60:.2f} min" + (
            f"; {a.epochs} epochs: {res['epoch_s'] * a.epochs / 3600:.2f} h, {res['energy_wh']:.1f} Wh"
            if a.epochs else ""))
    _print_energy(core.decision_energy(tab, d, model, goal, batch_size=bs))
    print(f"apply with: ptui apply --cores {d.mode.cores} --cpu-mhz {d.mode.cpu_mhz:g} "
          f"--gpu-mhz {d.mode.gpu_mhz:g} --mem-mhz {d.mode.mem_mhz:g}")
    print(f"Pareto front: {len(res['front'])} of {len(tab)} modes")
    return EXIT_OK


PRIOR_LINE = "no mode profiled: predicted by the roofline prior of the workload's counts"


def _profile_simulated(timed: str | None) -> bool:
    """pareto --json's `simulated`: the model's profiled figures are the simulator's (an emulated
    board's too) or a replayed recording's, as its text says on its 'profile:' line (the document
    said nothing, and its front's points read 'source: measured')."""
    return bool(_profile_basis(timed))


def _profile_basis(timed: str | None) -> str:
    """What a model's profiled figures are where they are not a Jetson's, in one line ('' else)."""
    text = timed or ""
    if "SIMULATED" in text:
        return ("profile: SIMULATED (the model's profiled figures are the simulated board's, not "
                "measured on a Jetson)")
    if "REPLAYED" in text:
        return "profile: REPLAYED (the model's profiled figures are a recorded corpus's, replayed)"
    return ""


def _say_profile_basis(timed: str | None) -> None:
    """pareto on a model of a simulated or replayed profile says so, as tune says its board (its
    figures and 'N profiled modes count with their measurements' read as a Jetson's)."""
    line = _profile_basis(timed)
    if line:
        print(line)


def _figures_line(source: str, d, timed: str, *, prior: bool = False) -> str:
    """A decision's time and power with their spreads (tune's and pareto's line); a spread of half
    the value or more says its 90 % interval too ("135.2 ms (+-219.8)" read as if the time could
    be negative; a user trial), and a prediction from the roofline prior alone always does."""
    def spread(v: float, sd: float, fmt: str, unit: str) -> str:
        words = core.wide_interval(v, sd, unit, always=prior)
        return f"(±{sd:{fmt}}" + (f"; {words})" if words else ")")
    return (f"{source}: {d.time_ms:.1f} ms per {core.time_unit(timed)} "
            f"{spread(d.time_ms, d.time_ms_std, '.1f', 'ms')}, "
            f"{d.power_w:.2f} W {spread(d.power_w, d.power_w_std, '.2f', 'W')}")


def _interval90(d) -> dict:
    """A decision's 90 % intervals of time and power (a prediction from the roofline prior alone
    says them in its document, as its figures line does)."""
    return {k: [round(x, 4) for x in core.interval90(getattr(d, k), getattr(d, f"{k}_std"))]
            for k in ("time_ms", "power_w")}


def _timed(model) -> str:
    """What one time_ms of a model is (its profile's `timed`; a script's step, else a minibatch)."""
    return core.model_timed(model)


def _choose_or_document(a, command: str, tab, goal: dict, batch_size=None, profiled=None,
                        unit: str = "minibatch", **per_epoch):
    """pareto.choose (the goal's words per `unit`, the model's); with --json a goal no mode meets
    prints its document (feasible: false, the closest option, and with `profiled` how many
    profiled modes it rests on) before the one-line error (exit 3)."""
    try:
        return core.choose(tab, unit=unit, **goal)
    except core.InfeasibleError as e:
        if getattr(a, "json", False):
            _infeasible_document(command, e, goal, batch_size, profiled=profiled, **per_epoch)
        raise


def _infeasible_document(command: str, e, goal: dict, batch_size=None, *, words: str | None = None,
                         profiled: int | None = None, extra: dict | None = None, **per_epoch) -> None:
    """The document of a goal no mode meets: its words (a decision over batch sizes says its own),
    the reason, the closest option where the decision names one row, and `profiled` where known
    (0: the roofline prior alone, as a feasible decision's document says)."""
    closest = (core.point(e.table, e.closest, batch_size=batch_size, **per_epoch)
               if getattr(e, "table", None) is not None and e.closest is not None else None)
    words = words or core.Goal(goal.get("budget_w"), goal.get("deadline_ms"), goal.get("objective")).describe(
        goal.get("risk"), goal.get("tolerance_w") or 0.0, getattr(e, "unit", "minibatch"))
    print(core.document(command, {**core.infeasible(words, str(e), closest, profiled), **(extra or {})}))


def _joint_goal(a) -> dict:
    """The goal of a decision over batch sizes as the keyword arguments its baselines take."""
    return dict(budget_w=a.budget_w, objective=a.objective, risk=a.risk,
                tolerance_w=getattr(a, "tolerance_w", 0.0) or 0.0)


def _joint_goal_words(budget_w, objective, risk=None) -> str:
    """A decision over (mode, batch size) says its goal per target, as batch.decide_in does."""
    return core.joint_goal(budget_w, objective, risk)


def _check_time_basis(a, model) -> None:
    """pareto --time step|cycle: the model must have been fitted on that time (fit --time)."""
    have = model.about.time_basis
    if getattr(a, "time", "auto") in ("step", "cycle") and a.time != have:
        what = {"step": "the median step", "cycle": "the whole cycle"}
        if model.about.kind == core.PRIOR_KIND:
            # fit refuses --time without a profile: its advice would fail
            raise CLIError(f"model {a.model} is the roofline prior alone (no mode profiled), which "
                           f"predicts {what[have]}; {what[a.time]} needs a fit on a profile: "
                           f"ptui fit --profile P.csv ... --time {a.time}")
        raise CLIError(f"model {a.model} was fitted on {what[have]}, not {what[a.time]}; refit it "
                       f"with: ptui fit ... --time {a.time}")


def _pareto_batches(a) -> int:
    """pareto --batch-sizes: the (mode, batch size) with the least time (or energy) to target."""
    if a.deadline_ms is not None:
        raise CLIError("--deadline-ms is per minibatch, which means different work at each batch "
                       "size; with --batch-sizes use --budget-w W or --objective energy")
    model = core.load_model(a.model)
    if getattr(a, "device", None) and core.get_device(a.device) != model.device:
        raise CLIError(f"model {a.model} is for {model.device.name}, not {core.get_device(a.device).name}")
    _check_time_basis(a, model)
    modes = core.read_modes(a.modes, model.device) if a.modes else None
    note = ""
    if modes is None:
        modes, note = model.decision_space(extrapolate=a.extrapolate)
    try:
        r = core.decide(model, a.batch_sizes, modes=modes, samples_file=a.samples_to_target,
                        noise_scale=a.noise_scale, budget_w=a.budget_w, objective=a.objective,
                        risk=a.risk, tolerance_w=a.tolerance_w, epochs=a.epochs,
                        batches_per_epoch=a.batches_per_epoch, extrapolate=a.extrapolate)
    except core.InfeasibleError as e:
        if a.json:
            _infeasible_document("pareto", e, {}, words=_joint_goal_words(a.budget_w, a.objective, a.risk))
        raise
    if note:                            # after the input is known good: bad input is one line
        _info(note + " (--extrapolate to include them)")
    for note in r.notes:
        _info(note)
    if a.json:
        body = core.batch_decision_body(r, model, _joint_goal(a), timed=_timed(model))
        print(core.document("pareto", {**body, "simulated": _profile_simulated(body.get("timed"))}))
        return EXIT_OK
    _print_batch_decision(r, core.batch_decision_energy(r, model, _joint_goal(a)), timed=_timed(model))
    print(f"apply with: ptui apply --cores {r.pick.mode.cores} --cpu-mhz {r.pick.mode.cpu_mhz:g} "
          f"--gpu-mhz {r.pick.mode.gpu_mhz:g} --mem-mhz {r.pick.mode.mem_mhz:g}  and train at batch "
          f"size {r.pick.batch_size}")
    return EXIT_OK


def _print_energy(energy) -> None:
    """The least-energy mode beside MAXN, the best preset and the pick (core: Energy.lines), in
    lines of 80 columns at most."""
    if energy is not None:
        for line in energy.lines(80):
            print(line)


def _print_batch_decision(r, energy=None, timed: str | None = None) -> None:
    """A joint (mode, batch size) decision, its two baselines (pareto and tune) and its energy."""
    p = r.pick

    def line(tag, q):
        if q is None:
            return f"  {tag:<28} not available (no such pair fits the goal and memory)"
        pen = (q.target_s / p.target_s - 1.0) * 100 if p.target_s > 0 else 0.0
        return (f"  {tag:<28} bs {q.batch_size:>4}  {hms(q.target_s)}  {q.power_w:5.1f} W  "
                f"{q.energy_wh:8.1f} Wh  ({pen:+.1f} %)\n  {'':<28} {q.mode.describe()}")
    print(f"goal: {r.goal}")
    _say_profile_basis(timed)
    print(f"mode: {p.mode}   batch size: {p.batch_size}")
    print(f"{p.source}: {p.time_ms:.1f} ms per step (±{p.time_ms_std:.1f}), {p.power_w:.2f} W "
          f"(±{p.power_w_std:.2f})")
    print(f"time to target: {hms(p.target_s)}, energy {p.energy_wh:.1f} Wh ({r.samples_note}; "
          f"samples to target: {r.rel.source})")
    print("compared with (time to target, power, energy, vs this choice):")
    print(line("this choice", p))
    print(line(f"best mode at batch {r.default_batch}", r.default))
    print(line("largest batch, fastest mode", r.paper))
    lb = r.memory.largest()
    print(f"memory: {r.memory.capacity_gb:.1f} GB for training; largest batch that fits: "
          f"{lb if lb is not None else 'unknown'} ({r.memory.how})")
    _print_energy(energy)


def _applied(message: str, backend) -> str:
    """An apply's outcome line: on the simulator it says so (apply and tune --apply alike), and on
    ptui emulate's tree (under -q, which hides the line naming the board, it read as a Jetson's)."""
    if backend.simulated:
        return message + _board_words(backend)
    where = " on the EMULATED board (SIMULATED)" if backend.emulated else ""
    return f"{message}{where}; undo with: ptui restore"


def _save_colocate_profiles(a, dev, keep: dict, counted, *, body: dict | None = None,
                            train: str | None = None) -> str | None:
    """colocate's --save-profiles: the profiles its walk kept, written; the path, or None."""
    if not a.save_profiles or "profiles" not in keep:
        return None
    core.save_profiles(keep["profiles"], a.save_profiles, device=dev.name, simulated=True,
                       train_workload=body["train_workload"] if body else train,
                       infer_workload=body["infer_workload"] if body else a.infer_workload,
                       strategy=body["strategy"] if body else a.strategy,
                       **({"train_script": counted} if counted else {}))
    return str(a.save_profiles)


COLOCATE_BATCH = 16        # colocate's training batch for a catalogue workload without --batch-size


def _colocate_inputs(a, dev, script: list[str]):
    """The checks before anything runs and the saved profiles: (profiles, their about) for
    --profiles, else (None, {}) once the workloads and budgets are known good."""
    if a.profiles and a.save_profiles:
        raise CLIError("--profiles re-decides from a file --save-profiles wrote: give one of them")
    if a.save_profiles:
        core.check_profiles_out(a.save_profiles)       # before any profiling
    if script and (a.train_workload or a.profiles):
        given = "--train-workload" if a.train_workload else "--profiles"
        raise CLIError(f"the training workload is either {given} or your training command after --, "
                       f"not both")
    if a.profiles:
        st, about = core.load_profiles(a.profiles, dev)
        if about.get("device") not in (None, dev.name):
            raise CLIError(f"{a.profiles} holds profiles of {about['device']}, not {dev.name}")
        return st, about
    missing = [o for o, v in (("--train-workload or your training command after --",
                               a.train_workload or script),
                              ("--infer-workload", a.infer_workload)) if not v]
    if missing:
        raise CLIError(f"colocate needs {' and '.join(missing)} (or --profiles FILE)")
    core.get_inference(a.infer_workload)                 # a bad name: one line, before the script
    core.colocate_goal(a.rate, a.latency_ms, a.budget_w)    # bad budgets: before the script too
    return None, {}


def _colocate_script(a, dev, script: list[str]):
    """The training workload counted from the user's script by the probe: (workload, counts)."""
    log = core.script_log(f"colocate-{dev.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    _info(f"counting one iteration of {core.command_text(script)!r} under the probe on this "
          f"machine (the decision is for the SIMULATED {dev.name}; its output goes to {log})")
    t0 = time.monotonic()
    train, counted = core.script_train(dev.name, script, log, batch_size=a.batch_size,
                                       startup_timeout=a.startup_timeout, notify=_info)
    _info(f"counted in {time.monotonic() - t0:.1f} s: {counted['counted']}")
    for n in counted["notes"]:
        _warn(n)
    return train, counted


def cmd_colocate(a) -> int:
    """Training beside inference: the power mode and inference batch of highest training
    throughput within a latency and a power budget (SIMULATED board)."""
    dev = core.get_device(a.device)
    script = list(a.command_line or [])
    if script:
        core.check_command(script)               # a command that cannot start is bad input
    st, about = _colocate_inputs(a, dev, script)
    counted = about.get("train_script")             # profiles of a script's model
    train = None
    if script:
        train, counted = _colocate_script(a, dev, script)
    elif st is None:
        train = core.get_workload(a.train_workload, a.batch_size or COLOCATE_BATCH)
    keep: dict = {}
    try:
        if train is None:
            t0 = time.perf_counter()
            body = core.colocate_profiles(st, a.rate, a.latency_ms, a.budget_w, about)
            body["decided_in_s"] = round(time.perf_counter() - t0, 4)
            if counted:
                body.update(train_batch_size=counted["batch_size"], train_script=counted)
        else:
            body = core.colocate(dev, train, a.infer_workload, a.rate, a.latency_ms, a.budget_w,
                                 a.strategy, keep=keep, train_script=counted)
    except core.InfeasibleError as e:
        # the profiles are kept all the same: re-deciding for a looser goal is what they are for
        saved = _save_colocate_profiles(a, dev, keep, counted, train=getattr(train, "name", None))
        if a.json:
            print(core.document("colocate", {**core.infeasible(
                core.goal_text(a.rate, a.latency_ms, a.budget_w), str(e), getattr(e, "closest_point", None)),
                "simulated": True, **({"train_script": counted} if counted else {}),
                **({"saved_profiles": saved} if saved else {})}))
        elif saved:
            _info(f"the standalone profiles are saved to {saved}: decide again from them with "
                  f"--profiles {saved}")
        raise
    saved = _save_colocate_profiles(a, dev, keep, counted, body=body)
    if saved:
        body["saved_profiles"] = saved
    if a.json:
        print(core.document("colocate", body))
        return EXIT_OK
    _colocate_report(a, dev, body, counted)
    return EXIT_OK


def _colocate_report(a, dev, body: dict, counted: dict | None) -> None:
    """`ptui colocate`'s text: what was decided for, the pick and the baselines."""
    p = body["pick"]
    unit = "samples"
    if counted:
        unit = "samples" if counted["unit"] == "sample" else "iterations"
        what = (f"train the script's counted model of `{counted['command']}` (batch: {counted['batch']}) "
                f"beside {body['infer_workload']} inference")
    else:
        what = (f"train {body['train_workload']} (batch {body['train_batch_size']}) beside "
                f"{body['infer_workload']} inference")
    how = (f"re-decided from {a.profiles}: {body['profiles_modes']} modes' saved profiles, 0 modes "
           f"profiled, {body['decided_in_s']:.3f} s" if a.profiles else
           f"{body['strategy']}, {body['profiled_modes']} modes profiled")
    print(f"SIMULATED {dev.name}: {what} at {a.rate:g} req/s, p99 <= {a.latency_ms:g} ms, "
          f"mean power <= {a.budget_w:g} W ({how})")
    if counted:
        print(f"counted by the probe (one iteration, {counted['timed']}): {counted['counted']}; "
              f"its time and power at each mode are the simulator's for that model, not measured")
    # each mode in words, as pareto and tune name one (the JSON keeps its key for machines)
    print(f"pick: {core.Mode.from_key(p['key']).describe()}, inference batch {p['batch_size']}")
    print(f"  {p['train_samples_per_s']:.1f} training {unit}/s, latency p50 {p['latency_p50_ms']:.1f} "
          f"/ p99 {p['latency_p99_ms']:.1f} ms, {100 * p['over_budget']:.2f}% over budget, "
          f"{p['power_w']:.1f} W")
    for name, b in body["baselines"].items():
        if b is None:
            print(f"  {name}: none meets the budgets")
            continue
        extra = f", inference batch {b['batch_size']}" if "batch_size" in b else ""
        over = "" if b.get("within_power_budget", True) else " (over the power budget)"
        print(f"  {name}: {core.Mode.from_key(b['key']).describe()}{extra}")
        print(f"    {b['train_samples_per_s']:.1f} {unit}/s, {b['power_w']:.1f} W{over}")


def cmd_interleave_demo(a) -> int:
    """The demo pair (a torch training loop, a torch inference loop) under the managed interleaving
    on the board the backend drives; the board goes back to its starting state at the end."""
    core.get_workload(a.train_workload, a.batch_size)      # bad names: one line, before the board
    core.get_inference(a.infer_workload)
    if a.backend == "replay" or a.corpus:
        raise CLIError("interleave-demo runs on the simulated board, an emulated tree or a Jetson "
                       "(--backend sim, sysfs or jtop), not on a replay")
    backend, note = core.open_backend(a.backend, a.device, root=a.sysfs_root, corpus=a.corpus)
    _info(note)
    r = core.run_demo(backend, train_workload=a.train_workload, batch_size=a.batch_size,
                      infer_workload=a.infer_workload, rate=a.rate, then_rate=a.then_rate,
                      latency_ms=a.latency_ms, budget_w=a.budget_w, seconds=a.seconds, seed=a.seed,
                      say=_info)
    if a.json:
        print(core.document("interleave-demo", r))
        return EXIT_OK
    label = "SIMULATED " if r["simulated"] else ""
    clock = "the simulated board's clock" if r["virtual_clock"] else "wall time"
    print(f"{label}{r['device']} ({r['backend']} backend): the demo pair (torch MLP training, batch "
          f"{r['batch_size']}, beside a torch MLP inference loop, on {r['torch_device']}), "
          f"{r['seconds']:g} s of {clock}; "
          f"latency budget {r['latency_ms']:g} ms, power budget {r['budget_w']:g} W")
    if not r["virtual_clock"]:
        print("measured: the demo pair's own loops on this host (small MLPs), not the catalogue "
              "workloads the mode was decided for")
    print(f"decided as {r['train_workload']} beside {r['infer_workload']} from {r['profiled_modes']} "
          f"modes' SIMULATED standalone profiles")
    for ph in r["phases"]:
        m, p = ph["measured"], ph["predicted"]
        how = (f"{ph['profiled_modes']} modes profiled" if ph["profiled_modes"]
               else "re-decided from the same profiles, 0 modes profiled")
        print(f"rate {ph['rate_per_s']:g}/s: {core.Mode.from_key(ph['key']).describe()}, inference batch "
              f"{ph['batch']} ({how})")
        print(f"  predicted: {p['train_samples_per_s']:.1f} training samples/s, p99 "
              f"{p['latency_p99_ms']:.1f} ms, {p['power_w']:.1f} W")
        w = "n/a" if m["power_w"] is None else f"{m['power_w']:.1f} W"
        print(f"  measured:  {m['train_sps']:.1f} training samples/s, {m['requests']} requests, p50 "
              f"{_ms(m['p50_ms'])} / p99 {_ms(m['p99_ms'])}, {_pct(m['over_budget'])} over budget, "
              f"mean batch {_num(m['mean_batch'])}, {w} from {m['power_from']}")
    back = "back in its starting mode" if r["restored"] else "NOT back in its starting mode"
    print(f"board {back}: {core.Mode.from_key(r['end_mode']).describe()}")
    return EXIT_OK if r["restored"] else EXIT_ERR


def _ms(v) -> str:
    return "n/a" if v is None else f"{v:.1f} ms"


def _pct(v) -> str:
    return "n/a" if v is None else f"{100 * v:.2f}%"


def _num(v) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def cmd_apply(a) -> int:
    given = [f for f, v in (("--cores", a.cores), ("--cpu-mhz", a.cpu_mhz), ("--gpu-mhz", a.gpu_mhz),
                            ("--mem-mhz", a.mem_mhz)) if v is not None]
    if a.preset is not None and given:
        raise CLIError(f"--preset selects a whole NVIDIA mode: give it alone, or {', '.join(given)} "
                       f"and the other clocks without --preset")
    backend, note = core.open_backend(a.backend, a.device, root=a.sysfs_root, corpus=a.corpus)
    _info(note)
    dev = backend.device
    if a.persist:
        core.check_persist(backend)          # before anything is applied
    if a.preset is not None:
        return _apply_preset(a, backend)
    if None in (a.cores, a.cpu_mhz, a.gpu_mhz, a.mem_mhz):
        raise CLIError("give --cores, --cpu-mhz, --gpu-mhz and --mem-mhz, or --preset NAME")
    mode = dev.mode(a.cores, a.cpu_mhz, a.gpu_mhz, a.mem_mhz)
    p = core.plan_apply(backend, mode)
    tpc = core.tpc_note(backend)
    if tpc:
        _warn(tpc)
    if a.json:
        def run():
            res = core.apply(backend, mode)
            if not res.ok:
                raise CLIError(res.message, EXIT_ERR)
            return res.readback, _applied(res.message, backend)
        return _apply_json(a, backend, p.current, mode, lambda: backend.holds(mode), p.steps, run)
    print(f"plan for {dev.name} ({backend.kind}): from {p.current} to {mode}")
    for k, step in enumerate(p.steps, 1):
        print(f"  {k}. {step}")
    if a.dry_run:
        print("dry run: nothing written")
        return EXIT_OK
    if not a.yes:
        if not sys.stdin.isatty():
            raise CLIError("add --yes to apply without a confirmation prompt (or --dry-run to only plan)")
        try:
            answer = input("apply this mode? [y/N] ")
        except EOFError:                      # Ctrl-D: no answer is no (it was a traceback)
            print()
            answer = ""
        except KeyboardInterrupt:             # Ctrl-C, SIGTERM, SIGHUP: the error on its own line
            print(flush=True)                 # (it was said after the prompt, on its line)
            raise
        if answer.strip().lower() not in ("y", "yes"):
            print("not applied")
            return EXIT_OK
    with _said_before_stop(backend):
        res = core.apply(backend, mode, expect_from=p.current)   # the plan shown, or nothing
    if not res.ok:
        raise CLIError(res.message, EXIT_ERR)
    print(_applied(res.message, backend))
    if a.persist:
        try:
            print(core.persist(backend, mode))
        except KeyboardInterrupt as e:
            if getattr(e, "persisted", None):   # nvpmodel selected it before the stop: said
                print(e.persisted)
            raise
    return EXIT_OK


def _applied_before_stop(e: BaseException):
    """The verified apply a stop signal waited for (board.apply.apply_mode), or None."""
    done = getattr(e, "applied", None)
    return done if done is not None and done.ok and done.readback is not None else None


@contextlib.contextmanager
def _said_before_stop(backend, say=print):
    """A stop signal that waited for a verified apply (or a preset's selection) says what was
    applied, then stops: the custom mode's apply, the preset's and tune --apply's."""
    try:
        yield
    except KeyboardInterrupt as e:
        done = _applied_before_stop(e)
        if done is not None:
            say(_applied(done.message, backend))
        raise


def _apply_json(a, backend, current, target, holds, steps, do, preset: str | None = None) -> int:
    """apply --json: one document saying whether anything would change (--dry-run) or did; the
    apply itself as without --json (--yes needed, under the board's lock, verified, rolled back on
    a mismatch).  holds(): the board is in the target and held there (a custom --persist always
    writes nvpmodel's configuration: a change, unless nvpmodel already keeps this very mode)."""
    persists = bool(a.persist) and preset is None and not backend.persisted(target)
    body = {"device": backend.device.name, "backend": backend.kind, "simulated": backend.not_live,
            "dry_run": bool(a.dry_run), "preset": preset, "from": current.as_dict(),
            "from_key": current.key, "to": target.as_dict(), "to_key": target.key,
            "changed": persists or not holds(), "steps": list(steps), "applied": False,
            "readback": None, "readback_key": None,
            "message": "dry run: nothing written" if a.dry_run else ""}
    if a.dry_run:
        print(core.document("apply", body))
        return EXIT_OK
    if not a.yes:
        raise CLIError("add --yes to apply with --json (or --dry-run to only plan)")
    try:
        with core.board_lock(backend):         # nothing is said or written while another ptui drives it
            if not holds():
                try:
                    got, msg = do()
                except KeyboardInterrupt as e:
                    done = _applied_before_stop(e)
                    if done is not None:           # the document of what was done, then the stop
                        body.update(changed=True, applied=True, message=_applied(done.message, backend),
                                    readback=done.readback.as_dict(), readback_key=done.readback.key,
                                    stopped_by=str(e) or "SIGINT")
                        print(core.document("apply", body))
                    raise
                body.update(changed=True, applied=True, message=msg)
            else:
                got = backend.current_mode()
                body.update(changed=persists, message="nothing to change: the board is already "
                                                      "held in this mode")
            if a.persist and persists:
                try:
                    body["persist"] = core.persist(backend, target)
                except KeyboardInterrupt as e:
                    if getattr(e, "persisted", None):   # the document of what was done, then the stop
                        body.update(persist=e.persisted, readback=got.as_dict(), readback_key=got.key,
                                    stopped_by=str(e) or "SIGINT")
                        print(core.document("apply", body))
                    raise
            elif a.persist:
                body["persist"] = (f"--persist: nvpmodel keeps the selected preset {preset} across "
                                   f"reboots" if preset is not None else
                                   f"--persist: nvpmodel already keeps {target.key} across reboots "
                                   f"(nvpmodel {backend.nvpmodel_id()})")
    except core.LockError as e:
        raise CLIError(f"not applied: {e}", EXIT_ERR) from None
    body.update(readback=got.as_dict(), readback_key=got.key)
    print(core.document("apply", body))
    return EXIT_OK


def _board_words(backend) -> str:
    """Where a mode was applied when that is not a live board (it lives in this process only)."""
    if backend.kind == "replay":
        return f" on the REPLAY board ({backend.corpus_path.name}, this process only)"
    return " on the SIMULATED board"


def _apply_preset(a, backend) -> int:
    dev = backend.device
    p = dev.preset(a.preset)
    how = {"jtop": "through the jtop service (nvpmodel)", "sysfs": "with nvpmodel -m",
           "sim": "on the simulated board", "replay": "on the replay board"}.get(backend.kind, "")
    step = (f"select nvpmodel {p.id} {p.name} {how}: {p.mode} with {p.tpc}/{dev.gpu_tpcs} GPU TPCs; "
            f"read back and roll back on mismatch")
    if backend.kind == "replay":              # a preset it never recorded: refused before a plan
        core.plan_apply(backend, p.mode)
    # the board read first, as every plan is (a dry run said its plan, exit 0, on a board whose
    # mode cannot be read, where --json and a custom mode's dry run fail)
    st = core.board_status(backend)
    if a.json:

        def holds() -> bool:               # a preset sets maximum clocks (nvpmodel leaves minimums)
            now = core.board_status(backend)
            return now.mode == p.mode and (now.nvpmodel_id == p.id if now.nvpmodel_id is not None
                                           else now.preset == p.name)

        def run():
            notes: list[str] = []
            got = core.apply_preset(backend, p.id, notes)
            return got, _applied("; ".join([f"selected {p.name}: {got}", *notes]), backend)
        return _apply_json(a, backend, st.mode, p.mode, holds, [step], run, preset=p.name)
    print(f"plan for {dev.name} ({backend.kind}): from {st.mode}, {step}")
    if a.dry_run:
        print("dry run: nothing written")
        return EXIT_OK
    if not a.yes:
        raise CLIError("add --yes to select a preset without a confirmation prompt")
    notes: list[str] = []
    with _said_before_stop(backend):
        got = core.apply_preset(backend, p.id, notes)
    print(_applied("; ".join([f"selected {p.name}: {got}", *notes]), backend))
    if a.persist:
        print(f"--persist: nvpmodel keeps the selected preset {p.name} across reboots")
    return EXIT_OK


def cmd_restore(a) -> int:
    backend, note = core.open_backend(a.backend, a.device, root=a.sysfs_root, corpus=a.corpus)
    _info(note)

    def say(said: str, now) -> None:
        if a.json:
            print(core.document("restore", {"device": backend.device.name, "backend": backend.kind,
                                            "simulated": backend.not_live, "restored": True,
                                            "mode": now.as_dict(), "key": now.key, "message": said}))
        else:
            print(said)
    try:
        said = core.restore(backend)
    except KeyboardInterrupt as e:
        if getattr(e, "restored", None):      # a stop signal waited for the restore: said, then stop
            say(e.restored, backend.current_mode())
        raise
    say(said, backend.current_mode())
    return EXIT_OK


def _key_words(key: str) -> str:
    """A saved mode's key in the words the CLI's text uses (the key itself where it does not read
    as a mode: status reads only, and says what it finds)."""
    try:
        return core.Mode.from_key(key).describe()
    except ValueError:
        return key


def cmd_status(a) -> int:
    """The board, its mode, who drives it and what restore would undo (reads only)."""
    backend, note = core.open_backend(a.backend, a.device, root=a.sysfs_root, corpus=a.corpus)
    _info(note)
    st = core.board_status(backend)
    r = st.restore
    if a.json:
        print(core.document("status", {
            "device": st.device, "backend": st.backend, "simulated": st.simulated,
            "emulated": st.emulated, "board": st.board, "mode": st.mode.as_dict(), "key": st.mode.key,
            "words": st.mode.describe(), "preset": st.preset, "nvpmodel_id": st.nvpmodel_id,
            "lock_holder": st.lock_holder,
            "restore": None if r is None else {"kind": r.kind, "mode": r.mode, "session": r.session,
                                               "created": r.created, "pid": r.pid,
                                               "in_progress": r.in_progress},
            "restore_problem": st.restore_problem, "gpu_tpcs_on": st.gpu_tpcs_on,
            "lock_problem": st.lock_problem}))
        return EXIT_OK
    label = (" (REPLAY of recorded measurements)" if st.backend == "replay" else " (EMULATED, SIMULATED)"
             if st.emulated else " (SIMULATED)" if st.simulated else "")
    print(f"board: {st.device}, {st.backend} backend{label}")
    print(f"mode: {st.mode}" + (f" ({st.preset})" if st.preset else " (not an nvpmodel preset)"))
    if st.gpu_tpcs_on is not None:
        print(f"GPU: {st.gpu_tpcs_on} of its {core.get_device(st.device).gpu_tpcs} TPCs powered (set at boot "
              f"by the nvpmodel mode's TPC power gating; every mode runs on {st.gpu_tpcs_on})")
    if st.board is None:
        print("lock: none (this board lives in each ptui process)")
    else:
        print(f"lock: cannot be taken: {st.lock_problem}" if st.lock_problem else
              f"lock: held by pid {st.lock_holder}" if st.lock_holder else "lock: free")
    if st.restore_problem:
        print(f"restore: refused: {st.restore_problem}")
    elif r is None:
        print("restore: nothing to undo")
    elif r.in_progress:
        print(f"restore: a profile (session {r.session}) is under way in pid {r.pid}; it puts the "
              f"board back in {_key_words(r.mode)} when it ends (ptui restore does so if it is killed)")
    else:
        what = (f"the state before the interrupted profile (session {r.session})"
                if r.kind == "profile" else "the state before the last ptui apply")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created))
        print(f"restore: would put back {what}, saved {when}: {_key_words(r.mode)}")
    return EXIT_OK


def cmd_emulate(a) -> int:
    """Make (or reboot) an emulated board under --root and drive it until SIGTERM, SIGINT or SIGHUP
    (main() routes them: each raises here, between two steps of the board)."""
    emu = core.Emulator(a.root, a.device, workload=a.workload, interval=a.interval)
    core.check_memory(emu.device, emu.workload, emu.workload.batch_size)     # before anything is written
    core.install(interrupt=True)        # SIGINT stops it too, also when started in the background
    got = "done"
    try:
        with core.shielded():             # the tree is made whole, or a signal waits until it is
            done = emu.open()
        print(emu.usage(done), flush=True)
        emu.run()
    except core.Terminated as e:
        got = e.name
    except KeyboardInterrupt:
        got = "SIGINT"
    finally:
        emu.close()
    _info(f"ptui emulate: stopped ({got}); the emulated {emu.device.name} stays in "
          f"{emu.root}: the same command starts it again (a reboot)")
    return EXIT_OK


SYSFS_ROOT_HELP = ("read and write the board's sysfs under DIR instead of / (e.g. an emulated board made by "
                   "ptui emulate); under a DIR other than /, ptui runs DIR/bin/nvpmodel when it exists, "
                   "else nvpmodel from PATH")


TIME_HELP = ("what one time is for the decision: step (the median optimizer step or minibatch), "
             "cycle (the whole cycle: wall time per step, the work between the steps included), "
             "or auto (the default: cycle when more than 25 %% of the wall time is outside the "
             "steps, else step)")


def _time_arg(p) -> None:
    p.add_argument("--time", choices=("auto", "step", "cycle"), default="auto", help=TIME_HELP)


# -- parser --------------------------------------------------------------------------------------
def _profile_args(pr, *, tune: bool) -> None:
    """Arguments shared by profile and tune."""
    pr.add_argument("--device")
    pr.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop", "replay"), default=None)
    pr.add_argument("--workload", help="resnet18, mobilenetv3, yolov8n, bert-base or lstm (with "
                    "--backend replay --corpus F.csv: optional, the corpus is the workload)")
    pr.add_argument("--batch-size", type=int, default=None)
    if tune:
        pr.add_argument("--count", type=int, default=None,
                        help="most modes to profile (default 20, at least 6; stops earlier when "
                             "confident); with --batch-sizes, (mode, batch size) pairs (default 40, "
                             "at least 10); 0: profile nothing, decide from the roofline prior of "
                             "the workload's counts (a script's: the probe counts one iteration; "
                             "--workload-spec; a catalog --workload's published counts)")
    else:
        g = pr.add_mutually_exclusive_group()
        g.add_argument("--count", type=int, default=None,
                       help="modes to profile (default 50); with --batch-sizes, (mode, batch size) "
                            "pairs (default 50 at random; with --strategy active at most 40, at "
                            "least 10)")
        g.add_argument("--modes", help="CSV of modes to profile")
        g.add_argument("--grid", choices=("pt",), help="profile PowerTrain's whole grid")
    pr.add_argument("--batch-sizes", type=_batch_sizes, metavar="B1,B2,...",
                    help=("choose the batch size too: active over (mode, batch size) pairs (at most "
                          "--count, default 40); a script needs {bs} in its command" if tune else
                          "profile (mode, batch size) pairs over these sizes (--count pairs at "
                          "random, or every --modes mode at each size); a script needs {bs} "
                          "in its command"))
    if not tune:
        pr.add_argument("--strategy", choices=("random", "space-filling", "active"), default=None,
                        help="which modes to profile: random (PowerTrain's protocol, the default), "
                             "space-filling, or active (needs a goal; stops early when confident)")
    pr.add_argument("--noise-scale", type=float, default=None, metavar="B",
                    help="with --batch-sizes: samples to target grow as 1 + B_size / B "
                         "(McCandlish et al. 2018)")
    pr.add_argument("--samples-to-target", metavar="FILE",
                    help="with --batch-sizes: CSV batch_size,relative_samples")
    pr.add_argument("--workload-spec", metavar="SPEC.json",
                    help='active: the training step\'s counts, {"gflop_per_step": G, '
                    '"gbytes_per_step": B, "batch_size": N}: its roofline prior chooses the first '
                    'modes (default: a catalog --workload\'s published counts)')
    pr.add_argument("--budget-w", type=float, help="active: the power budget to decide for")
    pr.add_argument("--deadline-ms", type=float, help="active: the minibatch deadline to decide for")
    pr.add_argument("--objective", choices=("energy",), help="active: least energy per minibatch")
    pr.add_argument("--corpus", help="with --backend replay: the recorded profile CSV that acts as the board")
    pr.add_argument("--seed", type=int, default=None)
    pr.add_argument("--session", help="session name (to resume later)")
    pr.add_argument("--resume", action="store_true", help="continue an interrupted --session")
    pr.add_argument("--sample-interval", type=float, default=None, help="power sampling period, s")
    pr.add_argument("--sysfs-root", default="/", type=_sysfs_root, metavar="DIR", help=SYSFS_ROOT_HELP)
    pr.add_argument("--out", required=not tune, help="CSV file for the results"
                    + (" (default: in ptui's data directory)" if tune else ""))
    pr.add_argument("--startup-timeout", type=float, default=None, metavar="S",
                    help="with a script: seconds its first optimizer step may take (default 600; "
                    "a script calling backward() without an optimizer step is stopped after 60 s "
                    "unless this is given)")
    _time_arg(pr)
    pr.add_argument("command_line", nargs="*", help="after --: your own training command, "
                    "e.g. -- python train.py --epochs 1 (profiled unmodified under a probe)")



class _Parser(argparse.ArgumentParser):
    """Bad flags: one line `ptui: error: ...` and exit 2 (the usage is one --help away)."""

    def error(self, message: str):
        self.exit(EXIT_INPUT, f"ptui: error: {message} (see: {self.prog} --help)\n")


MAX_BATCH = 4096   # no Jetson holds a bigger minibatch of any catalogued model in memory
MAX_EPOCHS = core.MAX_EPOCHS
# Every numeric option, by destination, validated where it enters: a bad value is one line and exit 2
# before any work starts.  Bounds as for core.errors.number (ge/gt/le/lt; integer=True for counts).
NUMERIC = {
    "speed": dict(gt=0, le=1000),
    "seed": dict(integer=True, ge=0, le=2**32 - 1),
    "batch_size": dict(integer=True, ge=1, le=MAX_BATCH),
    "count": dict(integer=True, ge=1),
    "tune.count": dict(integer=True, ge=0),      # tune --count 0: the roofline prior alone
    "sample_interval": dict(ge=0.01, le=60),
    "startup_timeout": dict(gt=0, le=7 * 24 * 3600),
    "budget_w": dict(gt=0),
    "deadline_ms": dict(gt=0),
    "tolerance_w": dict(ge=0),
    # a training job's epochs and an epoch's minibatches: beyond these no job is (the app showed
    # 7806768471854214144.00 h for 1e20 epochs: a user's trial)
    "epochs": dict(integer=True, ge=1, le=MAX_EPOCHS),
    "batches_per_epoch": dict(integer=True, ge=1, le=10**9),
    "noise_scale": dict(gt=0, le=1e9),
    "cores": dict(integer=True, ge=1),
    "cpu_mhz": dict(gt=0),
    "gpu_mhz": dict(gt=0),
    "mem_mhz": dict(gt=0),
    "interval": dict(ge=0.01, le=60),
    "rate": dict(gt=0, le=1e6),
    "then_rate": dict(gt=0, le=1e6),
    "latency_ms": dict(gt=0),
    "seconds": dict(gt=0, le=7 * 24 * 3600),
}


def _numeric_type(integer: bool, **bounds):

    def parse(text: str):
        try:
            return core.number(text, "the value", integer=integer, **bounds)
        except core.InputError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix("the value ")) from None
    parse.__name__ = "whole number" if integer else "number"
    return parse


def _risk(text: str) -> float | None:
    try:
        return core.parse_risk(text)
    except core.InputError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--risk ")) from None


def _add_risk(p: argparse.ArgumentParser) -> None:
    """--risk, as pareto and tune take it (one parse, one default)."""
    p.add_argument("--risk", type=_risk, default=core.DEFAULT_RISK, metavar=f"P|{core.RISK_MEAN}",
                   help=f"the allowed probability of exceeding the budget (or deadline) under the "
                        f"prediction's uncertainty, strictly between 0 and 1 (default "
                        f"{core.DEFAULT_RISK:g}: a mode qualifies when P(power > budget) <= P); "
                        f"'{core.RISK_MEAN}' decides on the predicted value alone, the least cautious "
                        f"choice")


def _batch_sizes(text: str) -> tuple[int, ...]:
    try:
        return core.parse_batch_sizes(text)
    except core.BatchError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--batch-sizes: ")) from None


def _sysfs_root(text: str) -> str:
    """--sysfs-root names a directory that is there: a missing one read as "no Jetson found; pass
    --device", then as a board without its cpufreq files (exit 1; the user's trial)."""
    import os
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory" if os.path.exists(text)
                                         else f"{text!r} does not exist")
    return text


def _pool_url(text: str) -> str:
    """--pool-url names a pool: an empty one was read as none (`fit --pool-url ""` fitted the
    profile alone, `pool list` said 'no pool: give --pool-url' with $PTUI_POOL set)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} names no pool: give postgresql://USER@HOST:PORT/DB or "
                                         f"sqlite:///PATH, or leave --pool-url out for $PTUI_POOL")
    return text


def _device_name(text: str) -> str:
    try:
        return core.get_device(text).name
    except core.DeviceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _validate_numbers(p: argparse.ArgumentParser) -> None:
    """Give every int/float option a validating type: its NUMERIC rule ('command.dest' before
    'dest'), else at least a finite number."""
    for parser in (p, *_subparsers(p)):
        command = parser.prog.split()[-1]
        for act in parser._actions:
            if act.type in (int, float) and act.option_strings:
                rule = dict(NUMERIC.get(f"{command}.{act.dest}", NUMERIC.get(act.dest, {})))
                integer = rule.pop("integer", act.type is int)
                act.type = _numeric_type(integer, **rule)


WORDS = {
    "CV MAPE": "cross-validated MAPE, the mean absolute percentage error of the predictions for "
               "profiled modes held out of the fit (5-fold cross-validation); lower is better",
    "risk": "the largest accepted probability that the chosen mode goes over the budget (or "
            "misses the deadline), from the predictions' uncertainty, between 0 and 1 (0.05 by "
            "default); --risk mean decides on the predicted values alone",
    "P(meets the goal)": "the model's probability that the mode meets the goal (stays within the "
                         "budget, or meets the deadline)",
}
"""The words ptui's output uses that need saying (the app's Help says the same)."""


def _words(*names: str) -> str:
    """A --help epilog explaining the words a command prints."""
    return "Words in the output: " + "; ".join(f"{n}: {WORDS[n]}" for n in names) + "."


JSON_HELP = "print one JSON document on stdout (schema_version 2; README: --json)"
GLOBAL_OPTIONS = ("--device", "--backend", "--sysfs-root", "--speed", "--corpus")


def _subparsers(p: argparse.ArgumentParser):
    """Every subcommand's parser, nested ones (reference build) included."""
    for act in p._actions:
        if isinstance(act, argparse._SubParsersAction):
            for sp in dict.fromkeys(act.choices.values()):
                yield sp
                yield from _subparsers(sp)


def _share_global_options(p: argparse.ArgumentParser) -> None:
    """Global options work before or after the subcommand.  A subcommand's copy defaults to SUPPRESS,
    so when it is not given there the value given before the subcommand (or the global default) stays;
    a subcommand that needs one (required=True) is checked after parsing instead (see main)."""
    glob = {o: p._option_string_actions[o] for o in GLOBAL_OPTIONS}
    for sp in _subparsers(p):
        sp.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        sp.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)
        need = []
        for opt, ga in glob.items():
            own = sp._option_string_actions.get(opt)
            if own is None:
                sp.add_argument(opt, dest=ga.dest, type=ga.type, choices=ga.choices, metavar=ga.metavar,
                                default=argparse.SUPPRESS, help=ga.help)
                continue
            own.default = argparse.SUPPRESS
            own.type = own.type or ga.type
            if own.required:
                own.required = False
                need.append(opt)
        if need:
            sp.set_defaults(_required_globals=(sp.prog, tuple(need)))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ptui", description="Pick the right Jetson power mode for DNN "
                                "training (PowerTrain). With no command, opens the app. Global options "
                                "(--device, --backend, --speed) go before or after the command.",
                epilog=_words(*WORDS))
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="say each step on stderr (every write to the board and its read-back, each "
                        "lock, each mode); in the app, in its log file")
    p.add_argument("-q", "--quiet", action="store_true", help="say only warnings and errors")
    p.add_argument("--device", type=_device_name,
                   help="orin-agx, xavier-agx or orin-nano (default: detected)")
    p.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop", "replay"), default=None,
                   help="device backend (default: auto)")
    p.add_argument("--corpus", help="with --backend replay: a recorded profile CSV that acts as the board")
    p.add_argument("--sysfs-root", default="/", type=_sysfs_root, metavar="DIR", help=SYSFS_ROOT_HELP)
    p.add_argument("--speed", type=float, default=1.0,
                   help="simulator clock speed for the app (default 1 = real time)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    m = sub.add_parser("modes", help="list a device's power modes")
    m.add_argument("--device", required=True)
    m.add_argument("--grid", choices=("full", "pt", "presets"), default="full")
    m.add_argument("--out", help="CSV file (default: stdout)")
    m.add_argument("--json", action="store_true", help=JSON_HELP)
    m.set_defaults(fn=cmd_modes)

    pr = sub.add_parser("profile", help="profile a training workload on a set of power modes",
                        epilog=_words("P(meets the goal)"))
    _profile_args(pr, tune=False)
    pr.add_argument("--json", action="store_true", help=JSON_HELP + " at the end (progress stays on stderr)")
    pr.set_defaults(fn=cmd_profile)

    tu = sub.add_parser("tune", help="active profile + fit + decision for one goal (+ --apply)",
                        epilog=_words(*WORDS))
    _profile_args(tu, tune=True)
    tu.add_argument("--method", choices=("auto", "gp", "powertrain"), default=None,
                    help="the fit after profiling (default auto)")
    _add_risk(tu)
    tu.add_argument("--apply", action="store_true", help="apply the chosen mode (verified)")
    tu.add_argument("--json", action="store_true", help=JSON_HELP)
    tu.set_defaults(fn=cmd_tune, strategy="active", modes=None, grid=None)

    se = sub.add_parser("sessions", help="list profiling sessions")
    se.add_argument("--json", action="store_true", help=JSON_HELP)
    se.set_defaults(fn=cmd_sessions)

    rb = sub.add_parser("reference", help="build reference predictors from a large profile")
    rsub = rb.add_subparsers(dest="refcmd", metavar="build", required=True)
    rbb = rsub.add_parser("build", help="train reference NNs on a full profile")
    rbb.add_argument("--device", required=True)
    rbb.add_argument("--profile", required=True, help="profile CSV (the reference corpus)")
    rbb.add_argument("--workload", default="resnet18", help="name of the profiled workload")
    rbb.add_argument("--source", help="provenance text stored in the metadata")
    rbb.add_argument("--seed", type=int, default=0)
    rbb.add_argument("--out", required=True, help="model directory")
    rbb.set_defaults(fn=cmd_reference_build)

    f = sub.add_parser("fit", help="transfer-learn the reference predictors onto a profile",
                       epilog=_words("CV MAPE"))
    f.add_argument("--device", required=True)
    f.add_argument("--profile", help="profile CSV (without it: a model from the roofline prior "
                   "of --workload-spec alone, no mode profiled)")
    f.add_argument("--workload-spec", metavar="SPEC.json",
                   help='the training step\'s counts, {"gflop_per_step": G, "gbytes_per_step": B, '
                   '"batch_size": N} (optional host_ms, serial_ms, loader_ms or input_mb, workers, '
                   'cpu_mhz): its roofline prior is a GP candidate\'s mean (default: a catalog '
                   '--workload\'s published counts)')
    f.add_argument("--out", required=True, help="model directory")
    f.add_argument("--reference", help="reference model directory (default: bundled Orin AGX ResNet-18)")
    f.add_argument("--loss", choices=("mse", "mape"), default="mse")
    f.add_argument("--workload", help="name of the profiled workload (metadata)")
    f.add_argument("--method", choices=("auto", "gp", "powertrain"), default="auto",
                   help="auto: cross-validate GPs and PowerTrain networks, keep the best per "
                        "target (default); gp: Gaussian processes only; powertrain: the paper's "
                        "transfer learning alone")
    f.add_argument("--scratch", action="store_true", help="train the network from scratch (NN baseline)")
    f.add_argument("--seed", type=int, default=0)
    _time_arg(f)
    f.add_argument("--pool", action="store_true",
                   help="pool the fleet's rows ($PTUI_POOL) for this device, workload and batch size "
                        "with this board's profile, correcting for this unit's power and time")
    f.add_argument("--pool-url", type=_pool_url,
                   help="the fleet's pool (implies --pool; default $PTUI_POOL): "
                        "postgresql://USER@HOST:PORT/DB or sqlite:///PATH")
    f.add_argument("--board", help="this board's id in the pool (default $PTUI_BOARD_ID, else the host name)")
    f.add_argument("--json", action="store_true", help=JSON_HELP)
    f.set_defaults(fn=cmd_fit)

    po = sub.add_parser("pool", help="the fleet's pool of measured rows: list, pull, push")
    posub = po.add_subparsers(dest="poolcmd", metavar="list|pull|push", required=True)
    pol = posub.add_parser("list", help="what the pool holds, per device, workload and batch size")
    pop = posub.add_parser("pull", help="the pool's rows to a CSV")
    pop.add_argument("--device", required=True)
    pop.add_argument("--workload")
    pop.add_argument("--batch-size", type=int)
    pop.add_argument("--board", help="one board's rows only")
    pop.add_argument("--out", required=True)
    pou = posub.add_parser("push", help="send a profile CSV's rows to the pool as this board's")
    pou.add_argument("--device", required=True)
    pou.add_argument("--profile", required=True)
    pou.add_argument("--workload", help="the profile's workload (default: its workload column)")
    pou.add_argument("--batch-size", type=int, help="default: its batch_size column")
    pou.add_argument("--board", help="this board's id (default $PTUI_BOARD_ID, else the host name)")
    for q in (pol, pop, pou):
        q.add_argument("--pool-url", type=_pool_url, help="postgresql://USER@HOST:PORT/DB or sqlite:///PATH "
                                          "(default $PTUI_POOL)")
    pol.add_argument("--json", action="store_true", help=JSON_HELP)
    po.set_defaults(fn=cmd_pool)

    pd = sub.add_parser("predict", help="predict time and power for modes")
    pd.add_argument("--model", required=True)
    pd.add_argument("--device", help="fail unless the model is for this device")
    pd.add_argument("--modes", help="CSV of modes (default: the device's whole mode space)")
    pd.add_argument("--out", help="CSV file (default: stdout)")
    pd.set_defaults(fn=cmd_predict)

    pa = sub.add_parser("pareto", help="Pareto front and the best mode for a goal",
                        epilog=_words("risk"))
    pa.add_argument("--model", required=True)
    pa.add_argument("--device", help="fail unless the model is for this device")
    _time_arg(pa)
    pa.add_argument("--modes", help="CSV of candidate modes (default: the modes whose every knob "
                    "value was profiled)")
    pa.add_argument("--extrapolate", action="store_true",
                    help="also choose modes with knob values no profiled mode had, and batch sizes "
                    "beyond the profiled ones (predictions there are extrapolations)")
    pa.add_argument("--budget-w", type=float)
    pa.add_argument("--deadline-ms", type=float)
    pa.add_argument("--objective", choices=("energy",))
    pa.add_argument("--epochs", type=int, default=None)
    pa.add_argument("--batches-per-epoch", type=int, default=None,
                    help="optimizer steps per epoch (what a profile times; with gradient "
                    "accumulation: micro-batches per epoch / accumulation steps)")
    _add_risk(pa)
    pa.add_argument("--tolerance-w", type=float, default=0.0,
                    help="with --risk: the overshoot above the budget you can live with (W)")
    pa.add_argument("--batch-sizes", type=_batch_sizes, metavar="B1,B2,...",
                    help="choose the batch size too, among these (needs a model fitted on a profile "
                    "over several batch sizes): least time (or energy) to target")
    pa.add_argument("--samples-to-target", metavar="FILE.csv",
                    help="with --batch-sizes: batch_size,relative_samples (samples needed to reach "
                    "the target accuracy at each size, e.g. 1.0 at the largest)")
    pa.add_argument("--noise-scale", type=float, metavar="B_NOISE",
                    help="with --batch-sizes: samples to target grow as 1 + B / B_NOISE "
                    "(McCandlish et al. 2018)")
    pa.add_argument("--json", action="store_true", help=JSON_HELP)
    pa.set_defaults(fn=cmd_pareto)

    ap_ = sub.add_parser("apply", help="apply a power mode to the device (verified, reversible)")
    ap_.add_argument("--device")
    ap_.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop", "replay"), default=None)
    ap_.add_argument("--sysfs-root", default="/", type=_sysfs_root, metavar="DIR", help=SYSFS_ROOT_HELP)
    ap_.add_argument("--cores", type=int)
    ap_.add_argument("--cpu-mhz", type=float)
    ap_.add_argument("--gpu-mhz", type=float)
    ap_.add_argument("--mem-mhz", type=float)
    ap_.add_argument("--preset", help="an NVIDIA nvpmodel preset instead (name or id, e.g. MODE_30W)")
    ap_.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    ap_.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    ap_.add_argument("--persist", action="store_true", help="keep the mode across reboots (nvpmodel)")
    ap_.add_argument("--json", action="store_true", help="one JSON document (schema_version 2): with "
                     "--dry-run, whether anything would change")
    ap_.set_defaults(fn=cmd_apply)

    rs = sub.add_parser("restore", help="undo the last ptui apply (or select the default nvpmodel mode)")
    rs.add_argument("--device")
    rs.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop", "replay"), default=None)
    rs.add_argument("--sysfs-root", default="/", type=_sysfs_root, metavar="DIR", help=SYSFS_ROOT_HELP)
    rs.add_argument("--json", action="store_true", help=JSON_HELP)
    rs.set_defaults(fn=cmd_restore)

    st = sub.add_parser("status", help="the board, its mode, the process driving it and what restore "
                        "would undo (reads only)")
    st.add_argument("--device")
    st.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop", "replay"), default=None)
    st.add_argument("--sysfs-root", default="/", type=_sysfs_root, metavar="DIR", help=SYSFS_ROOT_HELP)
    st.add_argument("--json", action="store_true", help=JSON_HELP)
    st.set_defaults(fn=cmd_status)

    em = sub.add_parser("emulate", help="an emulated Jetson sysfs tree under DIR, driven by the simulator, "
                        "for trying the real-board path and testing automation (SIMULATED)")
    em.add_argument("--device", required=True, help="orin-agx, xavier-agx or orin-nano")
    em.add_argument("--root", required=True, metavar="DIR",
                    help="where the tree goes: a new or empty directory, or one ptui emulate made (then "
                         "the board reboots into the nvpmodel mode it was left in)")
    em.add_argument("--workload", default="resnet18",
                    help="what the emulated board trains (default resnet18)")
    em.add_argument("--interval", type=float, default=0.2, metavar="S",
                    help="seconds between sensor updates (default 0.2)")
    em.set_defaults(fn=cmd_emulate)
    co = sub.add_parser("colocate", help="training beside inference: the power mode and inference "
                        "batch for a latency and a power budget (simulated board)")
    co.add_argument("--device", required=True)
    co.add_argument("--train-workload", help="a built-in training workload (or your training "
                    "command after --)")
    co.add_argument("--batch-size", type=int, default=None,
                    help="training batch size (default 16); with a script: the samples one iteration "
                    "holds where the probe sees no DataLoader")
    co.add_argument("--infer-workload",
                    help="resnet50, mobilenetv3-l, yolov8n-det, bert-large or lstm-lm")
    co.add_argument("--rate", type=float, required=True, help="inference requests per second (Poisson)")
    co.add_argument("--latency-ms", type=float, required=True, help="latency budget (p99), ms")
    co.add_argument("--budget-w", type=float, required=True, help="mean power budget, W")
    co.add_argument("--strategy", choices=("walk", "exhaustive"), default="walk",
                    help="walk: profiles at most 15 modes (default); exhaustive: the whole grid")
    co.add_argument("--save-profiles", metavar="FILE.json",
                    help="keep the standalone profiles the decision took (for --profiles)")
    co.add_argument("--profiles", metavar="FILE.json",
                    help="decide again from profiles --save-profiles kept (a new --rate, --latency-ms "
                         "or --budget-w), profiling nothing")
    co.add_argument("--startup-timeout", type=float, default=None, metavar="S",
                    help="with a script: seconds its first optimizer step may take (default 600)")
    co.add_argument("--json", action="store_true")
    co.add_argument("command_line", nargs="*", help="after --: your own training command, e.g. -- "
                    "python train.py (the probe counts one iteration; the decision is SIMULATED)")
    co.set_defaults(fn=cmd_colocate)
    il = sub.add_parser("interleave-demo", help="a torch training loop and a torch inference loop in "
                        "one process under the managed interleaving (simulated board by default)")
    il.add_argument("--device")
    il.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop", "replay"), default=None)
    il.add_argument("--sysfs-root", default="/", type=_sysfs_root, metavar="DIR", help=SYSFS_ROOT_HELP)
    il.add_argument("--train-workload", default="resnet18",
                    help="the catalogue training workload the decision is made for (default resnet18)")
    il.add_argument("--batch-size", type=int, default=16, help="training batch size (default 16)")
    il.add_argument("--infer-workload", default="resnet50",
                    help="the catalogue inference workload the decision is made for (default resnet50)")
    il.add_argument("--rate", type=float, default=20.0, help="requests per second, Poisson (default 20)")
    il.add_argument("--then-rate", type=float,
                    help="half-way, the rate changes to this: re-decided from the same profiles")
    il.add_argument("--latency-ms", type=float, default=250.0, help="latency budget, ms (default 250)")
    il.add_argument("--budget-w", type=float, default=35.0, help="mean power budget, W (default 35)")
    il.add_argument("--seconds", type=float,
                    help="how long it runs (default 60 s of the simulated board's clock, 10 s of wall "
                         "time on a sysfs or jtop board)")
    il.add_argument("--seed", type=int, default=0)
    il.add_argument("--json", action="store_true", help=JSON_HELP)
    il.set_defaults(fn=cmd_interleave_demo)
    _share_global_options(p)
    _validate_numbers(p)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    prog, need = getattr(a, "_required_globals", ("", ()))
    missing = [o for o in need if getattr(a, o[2:].replace("-", "_")) is None]
    if missing:
        _err(f"{prog} needs {' and '.join(missing)} (before or after the command)")
        return EXIT_INPUT
    if a.version:
        print(f"ptui {__version__}")
        return EXIT_OK
    if a.cmd is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            _err("the app needs a terminal (stdin and stdout); headless, run a command instead, "
                 "e.g. ptui modes --device orin-agx (list them with: ptui --help)")
            return EXIT_INPUT
        core.logs.for_app(core.data_dir(), a.verbose)
        from .app import run_app  # lazy: textual loads only for the app, not for a command
        return run_app(a)
    if a.speed != 1.0:                  # only the app runs a clock it can speed up
        _err(f"--speed applies to the app (ptui without a command), not to ptui {a.cmd}")
        return EXIT_INPUT
    core.logs.for_cli(a.verbose, a.quiet)
    core.install()                       # SIGTERM and SIGHUP stop a command as Ctrl-C does
    try:
        return a.fn(a)
    except core.Terminated as e:
        _err(f"stopped by {e.name}")
        return e.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except core.known_errors() as e:
        _err(str(e))
        return core.exit_code(e)
    except BrokenPipeError:
        return EXIT_OK
