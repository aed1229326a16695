"""Command line: argument parsing only; the work is done in ptui.core.

`ptui` alone opens the app; `ptui <command>` runs the same engine headless.
Exit codes: 0 ok, 1 runtime error, 2 bad input, 3 no feasible mode, 130 interrupted.
"""
from __future__ import annotations

import argparse
import sys
import time

EXIT_OK, EXIT_ERR, EXIT_INPUT, EXIT_INFEASIBLE, EXIT_INT = 0, 1, 2, 3, 130


class CLIError(Exception):
    def __init__(self, msg: str, code: int = EXIT_INPUT) -> None:
        super().__init__(msg)
        self.code = code


def _err(msg: str) -> None:
    print(f"ptui: error: {msg}", file=sys.stderr)


def _info(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


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
    from .core.profiler import (PROFILE_HEADER, ProfileConfig, Profiler, choose_modes,
                                open_session, profile_rows)
    from .core.store import Store
    from .core.workloads import get_workload

    if a.command_line:
        from .core.userscript import profile_script  # issue 4: the user's own training script
        return profile_script(a)
    if not a.workload and not a.resume:
        raise CLIError("--workload is required (or --resume an existing --session)")
    store = Store()
    if a.resume and not a.session:
        raise CLIError("--resume needs --session NAME")
    existing = store.get_session(a.session) if a.session else None
    if a.resume and existing is None:
        raise CLIError(f"no session named {a.session!r} to resume (list them with: ptui sessions)")
    device_name = a.device or (existing.device if existing else None)
    seed = a.seed if a.seed is not None else (existing.seed if existing else 0)
    wl_name = a.workload or existing.workload
    bs = a.batch_size or (existing.batch_size if existing else 16)
    workload = get_workload(wl_name, bs)
    backend, note = open_backend(a.backend, device_name, seed=seed,
                                 sample_interval=a.sample_interval)
    _info(note)
    dev = backend.device
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
    prof = Profiler(backend, workload, store, name, ProfileConfig(sample_interval=a.sample_interval))
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


# -- parser --------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ptui", description="Pick the right Jetson power mode for DNN "
                                "training (PowerTrain). With no command, opens the app.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument("--device", help="orin-agx, xavier-agx or orin-nano (app; default: detected)")
    p.add_argument("--backend", choices=("auto", "sim", "sysfs", "jtop"), default=None,
                   help="device backend for the app (default: auto)")
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
    pr.add_argument("--out", required=True, help="CSV file for the results")
    pr.add_argument("command_line", nargs="*", help="after --: your own training command")
    pr.set_defaults(fn=cmd_profile)

    se = sub.add_parser("sessions", help="list profiling sessions")
    se.set_defaults(fn=cmd_sessions)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if a.version:
        from . import __version__
        print(f"ptui {__version__}")
        return EXIT_OK
    if a.cmd is None:
        from .app import run_app
        return run_app(a)
    from .core.errors import known_errors
    try:
        return a.fn(a)
    except CLIError as e:
        _err(str(e))
        return e.code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INT
    except known_errors() as e:
        _err(str(e))
        return getattr(e, "exit_code", EXIT_INPUT if isinstance(e, ValueError) else EXIT_ERR)
    except BrokenPipeError:
        return EXIT_OK
