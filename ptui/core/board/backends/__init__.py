"""Device backends.  open_backend() picks one: explicit choice, else a detected Jetson, else sim.

Each backend's module is imported where open_backend picks it: this package runs whenever
backends.base is imported (the app's first screen), and the four modules (with csvio, physics and
the simulator's tables) would add 10-15 ms to the app's start (-X importtime) for backends it may
never open."""
from __future__ import annotations

from typing import Any

from ...catalogue.devices import Device, get_device
from ...errors import InputError
from ...paths import board_lock_dir, board_state_dir
from ..detect import Detection, detect, emulator_not_running
from .base import ApplyError, Backend, BackendError, MinibatchEvent, Telemetry

__all__ = ["ApplyError", "Backend", "BackendError", "MinibatchEvent", "Telemetry", "choose_backend",
           "open_backend"]


def choose_backend(kind: str | None = None, device: str | None = None, *, root: str | None = "/",
                   corpus: str | None = None,
                   detected: Detection | None = None) -> tuple[str, Device, str, Detection | None]:
    """What open_backend opens, without opening it: (the backend's kind, its board, one-line note
    on why this backend, the detection; None for the replay device, which needs none).  Commands
    that name files after the board (tune's session) name the board that will be used, and pass
    its detection on as `detected` (what detect(root) found) to the opens after, which then do
    not detect it again."""
    if corpus and kind not in (None, "auto", "replay"):
        raise InputError(f"--corpus is the replay device's recording; it goes with --backend "
                         f"replay, not {kind}")
    if kind == "replay" or (corpus and kind in (None, "auto")):
        if not corpus:
            raise InputError("the replay backend needs --corpus FILE.csv (a recorded profile)")
        return "replay", get_device(device or "orin-agx"), "", None
    det = detected or detect(root or "/")
    if kind in (None, "auto"):
        if det.device is None:
            kind = "sim"
            note = f"SIMULATED device: {det.reason}"
        else:
            from .jtop import jtop_available  # lazy: the app starts without the backends (above)
            kind = "jtop" if jtop_available() else "sysfs"
            note = f"{det.reason}; using {kind}"
    else:
        note = f"backend {kind} chosen on the command line"
        if det.emulated and kind != "sim":
            note += f"; {det.reason}"
    if kind == "sim":
        return kind, get_device(device or "orin-agx"), note, det
    if device:
        dev = get_device(device)
        if det.device is not None and det.device.name != dev.name:
            # a mode of one board written to another: cores it lacks, clocks it cannot run
            raise InputError(f"--device {dev.name}, but the board at {root or '/'} is {det.device.name} "
                             f"({det.reason}): drop --device or name {det.device.name} (a what-if for "
                             f"another board: --backend sim --device {dev.name})")
    elif det.device is not None:
        dev = det.device
    else:
        raise BackendError(f"cannot use the {kind} backend: {det.reason}; pass --device")
    return kind, dev, note, det


def open_backend(kind: str | None = None, device: str | None = None, *, root: str | None = "/",
                 clock=None, seed: int = 0, sample_interval: float | None = None,
                 corpus: str | None = None, detected: Detection | None = None) -> tuple[Backend, str]:
    """Return (backend, one-line note on why this backend); `detected`: choose_backend's."""
    kind, dev, note, det = choose_backend(kind, device, root=root, corpus=corpus, detected=detected)
    # the interval only where one is given (the backends have their own default)
    kw: dict[str, Any] = {"sample_interval": sample_interval} if sample_interval else {}
    if kind == "replay":
        from .replay import ReplayJetson  # lazy: the app starts without the backends (above)
        assert corpus is not None               # choose_backend: the replay device needs one
        b = ReplayJetson(dev, corpus, clock=clock, seed=seed, **kw)
        return b, f"{b.label}: recorded measurements replayed, not a live board"
    if kind == "sim":
        from .sim import SimJetson  # lazy: the app starts without the backends (above)
        unit = sim_unit()
        return SimJetson(dev, clock=clock, seed=seed, unit_power=unit.get("unit_power", 1.0),
                         unit_time=unit.get("unit_time", 1.0), **kw), note
    root = root or "/"
    if kind in ("sysfs", "jtop"):
        stopped = emulator_not_running(root, dev.name) if det is not None and det.emulated else None
        if stopped:
            raise BackendError(stopped)
        note = "; ".join([note] + [n for n in (board_lock_dir().notice, board_state_dir().notice) if n])
    if kind == "sysfs":
        from .sysfs import SysfsBackend  # lazy: the app starts without the backends (above)
        return SysfsBackend(dev, root=root), note
    if kind == "jtop":
        from .jtop import JtopBackend  # lazy: the app starts without the backends (above)
        return JtopBackend(dev, root=root), note
    raise BackendError(f"unknown backend {kind!r}; choose sim, sysfs, jtop or replay")


SIM_UNIT_ENV = "PTUI_SIM_UNIT"


def sim_unit() -> dict[str, float]:
    """The simulated unit's factors against the typical one, from $PTUI_SIM_UNIT=POWER[,TIME]
    (e.g. 1.08: this unit draws 8 % more power), so a fleet of simulated boards differs as real
    units do; {} when unset."""
    import os
    raw = os.environ.get(SIM_UNIT_ENV, "").strip()
    if not raw:
        return {}
    try:
        vals = [float(v) for v in raw.split(",")]
        if not 1 <= len(vals) <= 2 or not all(0.5 <= v <= 2.0 for v in vals):
            raise ValueError
    except ValueError:
        raise InputError(f"bad ${SIM_UNIT_ENV} {raw!r}: POWER[,TIME] factors between 0.5 and 2 "
                         f"(e.g. 1.08 or 1.08,0.99)") from None
    return {"unit_power": vals[0], "unit_time": vals[1] if len(vals) > 1 else 1.0}
