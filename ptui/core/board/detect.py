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
