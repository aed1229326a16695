"""Which device and backend to use: a real Jetson when one is found, otherwise the simulator."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .devices import Device, get_device


@dataclass
class Detection:
    device: Device | None      # None: not a Jetson
    reason: str                # one line saying what was found


MODEL_HINTS = (("orin nano", "orin-nano"), ("agx orin", "orin-agx"), ("orin agx", "orin-agx"),
               ("agx xavier", "xavier-agx"), ("xavier agx", "xavier-agx"))
# whole model strings that name no board in words: the AGX Xavier devkit's device tree says "Jetson-AGX"
MODEL_NAMES = {"jetson-agx": "xavier-agx"}


def detect(root: str | os.PathLike = "/") -> Detection:
    root = Path(root)
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
