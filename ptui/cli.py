"""Command line: argument parsing only; the work is done in ptui.core.

`ptui` alone opens the app; `ptui <command>` runs the same engine headless.
Exit codes: 0 ok, 1 runtime error, 2 bad input, 3 no feasible mode, 130 interrupted.
"""
from __future__ import annotations

import argparse
import sys
import time

from .core.clock import hms
from .core.errors import EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUNTIME, PtuiError

EXIT_ERR, EXIT_INT = EXIT_RUNTIME, EXIT_INTERRUPTED


class CLIError(PtuiError):
    """Bad input found by a command (exit 2 unless another code is given)."""
    exit_code = EXIT_INPUT


def _err(msg: str) -> None:
    print(f"ptui: error: {msg}", file=sys.stderr)


def _info(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- commands ------------------------------------------------------------------------------------
def cmd_modes(a) -> int:
    from .core.csvio import mode_cells, write_csv
    from .core.devices import get_device
    dev = get_device(a.device)
    if a.grid == "presets":
        rows = [mode_cells(p.mode) + [str(p.id), p.name, str(p.tpc)] for p in dev.presets]
        write_csv(a.out, ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "id", "name", "tpc"), rows)
    else:
        modes = dev.full_space() if a.grid == "full" else dev.pt_grid()
        write_csv(a.out, ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"), (mode_cells(m) for m in modes))
    if a.out not in (None, "-"):
        n = len(dev.presets) if a.grid == "presets" else len(modes)
        _info(f"wrote {n} {a.grid} modes of {dev.name} to {a.out}")
    return EXIT_OK


def cmd_profile(a) -> int:
    from .core.backends import open_backend
    from .core.csvio import read_modes, write_csv
    from .core.profiler import (
        PROFILE_HEADER,
        ProfileConfig,
        Profiler,
        choose_modes,
        open_session,
        profile_rows,
    )
    from .core.store import Store
    from .core.workloads import get_workload

    script = list(a.command_line)
    if not script and not a.workload and not a.resume:
        raise CLIError("--workload is required (or --resume an existing --session)")
    store = Store()
    if a.resume and not a.session:
        raise CLIError("--resume needs --session NAME")
    existing = store.get_session(a.session) if a.session else None
    if a.resume and existing is None:
        raise CLIError(f"no session named {a.session!r} to resume (list them with: ptui sessions)")
    device_name = a.device or (existing.device if existing else None)
    seed = a.seed if a.seed is not None else (existing.seed if existing else 0)
    bs = a.batch_size or (existing.batch_size if existing else 16)
    clock = None
    if script or (existing and existing.workload == "script"):
        from dataclasses import replace

        from .core.clock import RealClock
        if not script:
            raise CLIError("resume a script session with the same command after --")
        workload = replace(get_workload("resnet18", bs), name="script", model=" ".join(script)[:60],
                           task="user script")
        clock = RealClock()
    else:
        workload = get_workload(a.workload or existing.workload, bs)
    backend, note = open_backend(a.backend, device_name, seed=seed, clock=clock,
                                 sample_interval=a.sample_interval, root=a.sysfs_root)
    _info(note)
    dev = backend.device
    if not script and not backend.simulated:
        # a real board: run ptui's own plain-torch training loop for the workload under the probe
        from .workloads_torch_names import BUILTIN
        if workload.name not in BUILTIN:
            raise CLIError(f"no built-in training loop for {workload.name} on a real board (built in: "
                           f"{', '.join(BUILTIN)}); profile your own script: "
                           "ptui profile ... -- python train.py")
        script = [sys.executable, "-m", "ptui.workloads_torch", workload.name, "--batch-size", str(bs)]
    name = a.session or f"{dev.name}-{workload.name}-bs{bs}-{time.strftime('%Y%m%d-%H%M%S')}"

    def plan():
        if a.modes:
            return choose_modes(dev, modes=read_modes(a.modes, dev))
        return choose_modes(dev, count=a.count, grid=a.grid, seed=seed)

    info = open_session(store, name, resume=a.resume, device=dev, workload=workload, seed=seed,
                        backend_kind=backend.kind, plan_fn=plan,
                        original_mode=backend.current_mode(), params={"out": a.out})
    todo = len(info.plan) - info.n_done
    _info(f"session {name}: {workload.model} bs{bs} on {dev.name} ({backend.kind}); "
          f"{len(info.plan)} modes, {info.n_done} done, {todo} to go")
    source = None
    if script:
        from .core.store import data_dir
        from .core.userscript import ScriptSource
        log = data_dir() / "logs" / f"{name}.log"
        source = ScriptSource(backend, script, log, stand_in=get_workload(a.workload or "resnet18", bs))
        _info(f"running {' '.join(script)!r} under the minibatch probe; its output goes to {log}")
    prof = Profiler(backend, workload, store, name, ProfileConfig(sample_interval=a.sample_interval),
                    source=source)
    every = max(1, len(info.plan) // 100) if len(info.plan) > 200 else 1
    wall0 = time.perf_counter()

    def show(p):
        if p.done % every == 0 or p.done == p.total:
            r = p.last
            _info(f"[{p.done:>5}/{p.total}] {r.mode.key:<26} {r.time_ms:9.1f} ms {r.power_w:6.2f} W"
                  f"   device time {hms(p.device_time_s)}")

    try:
        prof.run(info, show)
    except KeyboardInterrupt:
        write_csv(a.out, PROFILE_HEADER, profile_rows(store, name))
        _info(f"interrupted: device restored to its original mode; {len(profile_rows(store, name))}"
              f" finished modes saved to {a.out}; resume with: ptui profile --session {name} --resume"
              f" --out {a.out}")
        return EXIT_INT
    except Exception:
        rows = profile_rows(store, name)
        if rows:
            write_csv(a.out, PROFILE_HEADER, rows)
        _info(f"the device was restored to its original mode; finished modes are kept in session "
              f"{name} (resume with --session {name} --resume)")
        raise
    finally:
        backend.close()
    rows = profile_rows(store, name)
    write_csv(a.out, PROFILE_HEADER, rows)
    final = store.get_session(name)
    sim = " (simulated)" if backend.simulated else ""
    _info(f"profiled {len(rows)} modes -> {a.out}; device time {hms(final.device_time_s)}{sim}, "
          f"wall time {time.perf_counter() - wall0:.1f} s")
    return EXIT_OK


def cmd_sessions(a) -> int:
    from .core.store import Store
    store = Store()
    rows = store.list_sessions()
    if not rows:
        _info(f"no profiling sessions in {store.path}")
        return EXIT_OK
    print(f"{'session':<44} {'device':<10} {'workload':<12} {'done':>11} {'status':<8} device time")
    for s in rows:
        print(f"{s.name:<44} {s.device:<10} {s.workload:<12} {s.n_done:>5}/{len(s.plan):<5} "
              f"{s.status:<8} {hms(s.device_time_s)}")
    return EXIT_OK


def _refuse_overwrite_into(path) -> None:
    from pathlib import Path
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise CLIError(f"{p} exists and is not a model directory; nothing written")


def cmd_reference_build(a) -> int:
    from .core.csvio import read_profile
    from .core.devices import get_device
    dev = get_device(a.device)
    modes, t, p = read_profile(a.profile, dev, min_modes=100)
    _refuse_overwrite_into(a.out)
    from .core import train
    t0 = time.perf_counter()
    model = train.build_reference(dev, modes, t, p, workload=a.workload, source=a.source or
                                  f"profile {a.profile}", seed=a.seed, progress=_info)
    model.save(a.out)
    m = model.meta["metrics"]
    _info(f"reference for {dev.name}/{a.workload} from {len(modes)} modes -> {a.out} "
          f"({time.perf_counter() - t0:.1f} s); hold-out MAPE time {m['time']['holdout_mape']:.1f} %, "
          f"power {m['power']['holdout_mape']:.1f} %")
    return EXIT_OK


def cmd_fit(a) -> int:
    from .core.csvio import read_profile
    from .core.devices import get_device
    from .core.predictor import bundled_reference, load_model
    dev = get_device(a.device)
    modes, t, p = read_profile(a.profile, dev)
    ref = load_model(a.reference or bundled_reference())
    _refuse_overwrite_into(a.out)
    from .core import train
    t0 = time.perf_counter()
    model = train.transfer(ref, dev, modes, t, p, workload=a.workload or "custom",
                           source=f"profile {a.profile}", seed=a.seed, loss=a.loss,
                           scratch=a.scratch, progress=_info)
    el = time.perf_counter() - t0
    model.save(a.out)
    m = model.meta["metrics"]
    kind = "trained from scratch" if a.scratch else (
        f"transferred from {ref.meta.get('reference_workload')} on {ref.device.name}")
    print(f"model for {dev.name} {kind}, {len(modes)} modes -> {a.out} ({el:.1f} s)")
    print(f"cross-validated MAPE: time {m['time']['cv_mape']:.1f} %, power {m['power']['cv_mape']:.1f} %")
    return EXIT_OK


def _predict_table(a):
    from .core.csvio import read_modes
    from .core.devices import get_device
    from .core.pareto import Table
    from .core.predictor import load_model
    model = load_model(a.model)
    if getattr(a, "device", None) and get_device(a.device) != model.device:
        raise CLIError(f"model {a.model} is for {model.device.name}, not {get_device(a.device).name}")
    modes = read_modes(a.modes, model.device) if a.modes else model.device.full_space()
    return model, Table.from_prediction(modes, model.predict(modes))


def cmd_predict(a) -> int:
    from .core.csvio import fmt_value, mode_cells, write_csv
    model, tab = _predict_table(a)
    rows = ([*mode_cells(m), fmt_value(float(tab.time_ms[i])), fmt_value(float(tab.power_w[i])),
             fmt_value(float(tab.time_ms_std[i])), fmt_value(float(tab.power_w_std[i]))]
            for i, m in enumerate(tab.modes))
    write_csv(a.out, ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "time_ms", "power_w",
                      "time_ms_std", "power_w_std"), rows)
    if a.out not in (None, "-"):
        _info(f"predicted {len(tab)} modes of {model.device.name} -> {a.out}")
    return EXIT_OK


def cmd_pareto(a) -> int:
    import json

    from .core.pareto import choose, front_indices
    if a.budget_w is None and a.deadline_ms is None and a.objective is None:
        raise CLIError("choose a goal: --budget-w W, --deadline-ms T or --objective energy")
    model, tab = _predict_table(a)
    wl_mb = a.batches_per_epoch
    if wl_mb is None:
        from .core.workloads import WORKLOADS
        w = WORKLOADS.get(str(model.meta.get("workload")))
        wl_mb = w.minibatches_per_epoch if w else None
    d = choose(tab, budget_w=a.budget_w, deadline_ms=a.deadline_ms, objective=a.objective,
               risk=None if a.risk == 0 else a.risk, tolerance_w=a.tolerance_w)
    front = front_indices(tab.time_ms, tab.power_w)

    def point(i):
        m = tab.modes[i]
        t, pw = float(tab.time_ms[i]), float(tab.power_w[i])
        out = {"mode": m.as_dict(), "time_ms": round(t, 4), "power_w": round(pw, 4),
               "time_ms_std": round(float(tab.time_ms_std[i]), 4),
               "power_w_std": round(float(tab.power_w_std[i]), 4),
               "epoch_s": round(t * wl_mb / 1000.0, 3) if wl_mb else None}
        out["energy_wh"] = (round(pw * out["epoch_s"] * a.epochs / 3600.0, 4)
                            if wl_mb and a.epochs else None)
        return out

    res = point(d.index)
    res["goal"] = d.goal
    res["exceed_prob"] = d.exceed_prob
    res["front"] = [point(int(i)) for i in front]
    if a.json:
        print(json.dumps(res))
        return EXIT_OK
    print(f"goal: {d.goal}")
    print(f"mode: {d.mode}")
    print(f"predicted: {d.time_ms:.1f} ms per minibatch (+-{d.time_ms_std:.1f}), "
          f"{d.power_w:.2f} W (+-{d.power_w_std:.2f})")
    if res["epoch_s"]:
        print(f"epoch: {res['epoch_s'] / 60:.2f} min" + (
            f"; {a.epochs} epochs: {res['epoch_s'] * a.epochs / 3600:.2f} h, {res['energy_wh']:.1f} Wh"
            if a.epochs else ""))
    print(f"apply with: ptui apply --cores {d.mode.cores} --cpu-mhz {d.mode.cpu_mhz:g} "
          f"--gpu-mhz {d.mode.gpu_mhz:g} --mem-mhz {d.mode.mem_mhz:g}")
    print(f"Pareto front: {len(front)} of {len(tab)} modes")
    return EXIT_OK


def _snapshot_path(device: str):
    from .core.store import data_dir
    return data_dir() / f"last-apply-{device}.json"


def _remember_for_restore(backend, snap) -> None:
    """Keep the pre-apply state so `ptui restore` can return to it (a real board only)."""
    if not backend.simulated:
        from .core.backends.sysfs import save_snapshot
        save_snapshot(_snapshot_path(backend.device.name), backend.device.name, snap)


def cmd_apply(a) -> int:
    from .core.apply import apply_mode, plan
    from .core.backends import open_backend
    backend, note = open_backend(a.backend, a.device, root=a.sysfs_root)
    _info(note)
    dev = backend.device
    if a.preset is not None:
        return _apply_preset(a, backend)
    if None in (a.cores, a.cpu_mhz, a.gpu_mhz, a.mem_mhz):
        raise CLIError("give --cores, --cpu-mhz, --gpu-mhz and --mem-mhz, or --preset NAME")
    mode = dev.mode(a.cores, a.cpu_mhz, a.gpu_mhz, a.mem_mhz)
    p = plan(backend, mode)
    print(f"plan for {dev.name} ({backend.kind}): {p.current.key} -> {mode.key}")
    for k, step in enumerate(p.steps, 1):
        print(f"  {k}. {step}")
    if a.dry_run:
        print("dry run: nothing written")
        return EXIT_OK
    if not a.yes:
        if not sys.stdin.isatty():
            raise CLIError("add --yes to apply without a confirmation prompt (or --dry-run to only plan)")
        if input("apply this mode? [y/N] ").strip().lower() not in ("y", "yes"):
            print("not applied")
            return EXIT_OK
    res = apply_mode(backend, mode)
    if not res.ok:
        raise CLIError(res.message, EXIT_ERR)
    _remember_for_restore(backend, res.snapshot)
    print(f"{res.message}" + (" on the SIMULATED board" if backend.simulated else
                              "; undo with: ptui restore"))
    if a.persist:
        if not hasattr(backend, "persist"):
            raise CLIError(f"--persist needs a real Jetson (nvpmodel); the {backend.kind} backend cannot")
        print(backend.persist(mode))
    return EXIT_OK


def _apply_preset(a, backend) -> int:
    dev = backend.device
    p = dev.preset(a.preset)
    how = {"jtop": "through the jtop service (nvpmodel)", "sysfs": "with nvpmodel -m",
           "sim": "on the simulated board"}.get(backend.kind, "")
    print(f"plan for {dev.name} ({backend.kind}): select nvpmodel {p.id} {p.name} {how} -> {p.mode.key}"
          f" with {p.tpc}/{dev.gpu_tpcs} GPU TPCs; read back and roll back on mismatch")
    if a.dry_run:
        print("dry run: nothing written")
        return EXIT_OK
    if not a.yes:
        raise CLIError("add --yes to select a preset without a confirmation prompt")
    if not hasattr(backend, "apply_preset"):
        raise CLIError(f"the {backend.kind} backend cannot select presets")
    snap = backend.snapshot()
    backend.apply_preset(p.id)
    _remember_for_restore(backend, snap)
    print(f"selected {p.name}: {backend.current_mode().key}"
          + ("" if backend.simulated else "; undo with: ptui restore"))
    return EXIT_OK


def cmd_restore(a) -> int:
    from .core.backends import open_backend
    from .core.backends.sysfs import load_snapshot
    backend, note = open_backend(a.backend, a.device, root=a.sysfs_root)
    _info(note)
    dev = backend.device
    if backend.simulated:
        p = dev.preset(dev.default_preset)
        backend.apply_preset(p.id)
        print(f"simulated board back in its default mode {p.name}")
        return EXIT_OK
    snap = load_snapshot(_snapshot_path(dev.name))
    if snap and snap.get("device") == dev.name:
        backend.restore(snap["state"])
        _snapshot_path(dev.name).unlink()
        print(f"restored the state before the last ptui apply: {backend.current_mode().key}")
        return EXIT_OK
    import subprocess
    pid = dev.default_preset
    r = subprocess.run([getattr(backend, "nvpmodel_cmd", "nvpmodel"), "-m", str(pid)],
                       capture_output=True, text=True)
    if r.returncode:
        out = (r.stdout + r.stderr).strip()[:200]
        raise CLIError(f"no saved snapshot and nvpmodel -m {pid} failed: {out}", EXIT_ERR)
    print(f"no saved snapshot: selected the default nvpmodel mode {dev.preset(pid).name}")
    return EXIT_OK


# -- parser --------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """Bad flags: one line `ptui: error: ...` and exit 2 (the usage is one --help away)."""

    def error(self, message: str):
        self.exit(EXIT_INPUT, f"ptui: error: {message} (see: {self.prog} --help)\n")


MAX_BATCH = 4096   # no Jetson holds a bigger minibatch of any catalogued model in memory
# Every numeric option, by destination, validated where it enters: a bad value is one line and exit 2
# before any work starts.  Bounds as for core.errors.number (ge/gt/le/lt; integer=True for counts).
NUMERIC = {
    "speed": dict(gt=0, le=1000),
    "seed": dict(integer=True, ge=0, le=2**32 - 1),
    "batch_size": dict(integer=True, ge=1, le=MAX_BATCH),
    "count": dict(integer=True, ge=1),
    "sample_interval": dict(ge=0.01, le=60),
    "startup_timeout": dict(gt=0, le=7 * 24 * 3600),
    "budget_w": dict(gt=0),
    "deadline_ms": dict(gt=0),
    "risk": dict(ge=0, lt=1),
    "tolerance_w": dict(ge=0),
    "epochs": dict(integer=True, ge=1),
    "batches_per_epoch": dict(integer=True, ge=1),
    "cores": dict(integer=True, ge=1),
    "cpu_mhz": dict(gt=0),
    "gpu_mhz": dict(gt=0),
    "mem_mhz": dict(gt=0),
}


def _numeric_type(integer: bool, **bounds):
    from .core.errors import InputError, number

    def parse(text: str):
        try:
            return number(text, "the value", integer=integer, **bounds)
        except InputError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix("the value ")) from None
    parse.__name__ = "whole number" if integer else "number"
    return parse


def _device_name(text: str) -> str:
    from .core.devices import DeviceError, get_device
    try:
        return get_device(text).name
    except DeviceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _validate_numbers(p: argparse.ArgumentParser) -> None:
    """Give every int/float option a validating type: its NUMERIC rule, else at least a finite number."""
    for parser in (p, *_subparsers(p)):
        for act in parser._actions:
            if act.type in (int, float) and act.option_strings:
                rule = dict(NUMERIC.get(act.dest, {}))
                integer = rule.pop("integer", act.type is int)
                act.type = _numeric_type(integer, **rule)


GLOBAL_OPTIONS = ("--device", "--backend", "--sysfs-root", "--speed")


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
                                "(--device, --backend, --speed) go before or after the command.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument("--device", type=_device_name,
                   help="orin-agx, xavier-agx or orin-nano (default: detected)")
    p.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop"), default=None,
                   help="device backend (default: auto)")
    p.add_argument("--sysfs-root", default="/", help=argparse.SUPPRESS)
    p.add_argument("--speed", type=float, default=1.0,
                   help="simulator clock speed for the app (default 1 = real time)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    m = sub.add_parser("modes", help="list a device's power modes")
    m.add_argument("--device", required=True)
    m.add_argument("--grid", choices=("full", "pt", "presets"), default="full")
    m.add_argument("--out", help="CSV file (default: stdout)")
    m.set_defaults(fn=cmd_modes)

    pr = sub.add_parser("profile", help="profile a training workload on a set of power modes")
    pr.add_argument("--device")
    pr.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop"), default=None)
    pr.add_argument("--workload", help="resnet18, mobilenetv3, yolov8n, bert-base or lstm")
    pr.add_argument("--batch-size", type=int, default=None)
    g = pr.add_mutually_exclusive_group()
    g.add_argument("--count", type=int, default=None, help="random grid modes to profile (default 50)")
    g.add_argument("--modes", help="CSV of modes to profile")
    g.add_argument("--grid", choices=("pt",), help="profile PowerTrain's whole grid")
    pr.add_argument("--seed", type=int, default=None)
    pr.add_argument("--session", help="session name (to resume later)")
    pr.add_argument("--resume", action="store_true", help="continue an interrupted --session")
    pr.add_argument("--sample-interval", type=float, default=None, help="power sampling period, s")
    pr.add_argument("--sysfs-root", default="/", help=argparse.SUPPRESS)
    pr.add_argument("--out", required=True, help="CSV file for the results")
    pr.add_argument("command_line", nargs="*", help="after --: your own training command, "
                    "e.g. -- python train.py --epochs 1 (profiled unmodified under a probe)")
    pr.set_defaults(fn=cmd_profile)

    se = sub.add_parser("sessions", help="list profiling sessions")
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

    f = sub.add_parser("fit", help="transfer-learn the reference predictors onto a profile")
    f.add_argument("--device", required=True)
    f.add_argument("--profile", required=True)
    f.add_argument("--out", required=True, help="model directory")
    f.add_argument("--reference", help="reference model directory (default: bundled Orin AGX ResNet-18)")
    f.add_argument("--loss", choices=("mse", "mape"), default="mse")
    f.add_argument("--workload", help="name of the profiled workload (metadata)")
    f.add_argument("--scratch", action="store_true", help="train from scratch (NN baseline)")
    f.add_argument("--seed", type=int, default=0)
    f.set_defaults(fn=cmd_fit)

    pd = sub.add_parser("predict", help="predict time and power for modes")
    pd.add_argument("--model", required=True)
    pd.add_argument("--device", help="fail unless the model is for this device")
    pd.add_argument("--modes", help="CSV of modes (default: the device's whole mode space)")
    pd.add_argument("--out", help="CSV file (default: stdout)")
    pd.set_defaults(fn=cmd_predict)

    pa = sub.add_parser("pareto", help="Pareto front and the best mode for a goal")
    pa.add_argument("--model", required=True)
    pa.add_argument("--device", help="fail unless the model is for this device")
    pa.add_argument("--modes", help="CSV of candidate modes (default: all modes)")
    pa.add_argument("--budget-w", type=float)
    pa.add_argument("--deadline-ms", type=float)
    pa.add_argument("--objective", choices=("energy",))
    pa.add_argument("--epochs", type=int, default=None)
    pa.add_argument("--batches-per-epoch", type=int, default=None)
    pa.add_argument("--risk", type=float, default=0.05,
                    help="max probability of exceeding the budget/deadline (0 = use the mean)")
    pa.add_argument("--tolerance-w", type=float, default=0.0,
                    help="with --risk: the overshoot above the budget you can live with (W)")
    pa.add_argument("--json", action="store_true")
    pa.set_defaults(fn=cmd_pareto)

    ap_ = sub.add_parser("apply", help="apply a power mode to the device (verified, reversible)")
    ap_.add_argument("--device")
    ap_.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop"), default=None)
    ap_.add_argument("--sysfs-root", default="/", help=argparse.SUPPRESS)
    ap_.add_argument("--cores", type=int)
    ap_.add_argument("--cpu-mhz", type=float)
    ap_.add_argument("--gpu-mhz", type=float)
    ap_.add_argument("--mem-mhz", type=float)
    ap_.add_argument("--preset", help="an NVIDIA nvpmodel preset instead (name or id, e.g. MODE_30W)")
    ap_.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    ap_.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    ap_.add_argument("--persist", action="store_true", help="keep the mode across reboots (nvpmodel)")
    ap_.set_defaults(fn=cmd_apply)

    rs = sub.add_parser("restore", help="undo the last ptui apply (or select the default nvpmodel mode)")
    rs.add_argument("--device")
    rs.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop"), default=None)
    rs.add_argument("--sysfs-root", default="/", help=argparse.SUPPRESS)
    rs.set_defaults(fn=cmd_restore)
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
        from . import __version__
        print(f"ptui {__version__}")
        return EXIT_OK
    if a.cmd is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            _err("the app needs a terminal (stdin and stdout); headless, run a command instead, "
                 "e.g. ptui modes --device orin-agx (list them with: ptui --help)")
            return EXIT_INPUT
        from .app import run_app
        return run_app(a)
    from .core.errors import exit_code, known_errors
    try:
        return a.fn(a)
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except known_errors() as e:
        _err(str(e))
        return exit_code(e)
    except BrokenPipeError:
        return EXIT_OK
