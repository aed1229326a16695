"""Which device and backend to use: a real Jetson when one is found, otherwise the simulator.

A tree made by `ptui emulate` carries a marker file (EMULATED_MARKER) at its root: detection reads
its device-tree model like any board's and says that the board is emulated (SIMULATED)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..catalogue.devices import Device, get_device


@dataclass
class Detection:
    device: Device | None      # None: not a Jetson
    reason: str                # one line saying what was found
    emulated: bool = False     # a tree made by `ptui emulate`, not a real board


EMULATED_MARKER = ".ptui-emulated"


def is_emulated(root: str | os.PathLike) -> bool:
    """Whether `root` is a tree `ptui emulate` made (its marker file is there)."""
    return (Path(root) / EMULATED_MARKER).is_file()


def emulator_gone(root: str | os.PathLike) -> str | None:
    """Why nothing drives the emulated board under `root` any more, else None.  `ptui emulate`
    marks its tree "running" with its pid while it drives it and "stopped" when it stops; a tree
    whose emulator stopped, or was killed (its pid gone on this host), is only files: a mode
    written there reads back as written, and its sensors never move, so a profile or an apply on
    it would report what no board did (an apply "verified" on a stopped emulator: a user's trial).
    A tree made without a driver (emulator.build, tests) says "ready" and is taken as it is."""
    import json
    import socket
    try:
        m = json.loads((Path(root) / EMULATED_MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(m, dict):
        return None
    state = m.get("state")
    if state == "stopped":
        return "its emulator (ptui emulate) has stopped"
    if state == "running" and m.get("host") == socket.gethostname():
        try:
            pid = int(m.get("pid", 0))
        except (TypeError, ValueError):
            return None
        if pid > 0 and not _alive(pid):
            return f"its emulator (ptui emulate, pid {pid}) is gone"
    return None


def emulator_not_running(root: str | os.PathLike, device: str) -> str | None:
    """The error a backend gives for an emulated tree nothing drives (emulator_gone), naming the
    command that starts it again; None while it runs (or for a tree made without a driver)."""
    gone = emulator_gone(root)
    return (f"the emulated {device} in {root} is not running: {gone}; start it again with: ptui "
            f"emulate --device {device} --root {root}") if gone else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:               # another user's process: alive
        return True
    try:                                  # killed, not yet reaped by its parent: gone all the same
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


MODEL_HINTS = (("orin nano", "orin-nano"), ("agx orin", "orin-agx"), ("orin agx", "orin-agx"),
               ("agx xavier", "xavier-agx"), ("xavier agx", "xavier-agx"))
# whole model strings that name no board in words: the AGX Xavier devkit's device tree says "Jetson-AGX"
MODEL_NAMES = {"jetson-agx": "xavier-agx"}


def detect(root: str | os.PathLike = "/") -> Detection:
    det = _detect(Path(root))
    if det.device is not None and is_emulated(root):
        return Detection(det.device, f"{det.reason}: an emulated {det.device.name} made by ptui emulate "
                                     f"(SIMULATED, not a real board)", emulated=True)
    return det


def _detect(root: Path) -> Detection:
    for p in (root / "proc/device-tree/model", root / "sys/firmware/devicetree/base/model"):
        try:
            model = p.read_bytes().decode(errors="replace").strip("\x00 \n")
        except OSError:
            continue
        low = model.lower()
        if low in MODEL_NAMES:
            return Detection(get_device(MODEL_NAMES[low]), f"found {model!r} ({p})")
        for hint, name in MODEL_HINTS:
            if hint in low:
                return Detection(get_device(name), f"found {model!r} ({p})")
        if "jetson" in low or "nvidia" in low:
            return Detection(None, f"{model!r} is a Jetson ptui does not support "
                                   f"(supported: orin-agx, xavier-agx, orin-nano)")
        return Detection(None, f"no Jetson found (device tree model is {model!r})")
    if (root / "etc/nv_tegra_release").exists():
        return Detection(None, "L4T is installed but the device tree model is unreadable")
    return Detection(None, "no Jetson found (no device tree model, no /etc/nv_tegra_release)")
