"""Test helpers over ptui's emulated Jetson (ptui/core/board/emulator.py, what `ptui emulate` runs).

build() is an emulated Orin AGX tree (the board most tests drive); Driver, read_mode and
install_nvpmodel are the product's.  Added here for tests only: a stricter kernel (Kernel), the
INA3221 sum channel, an nvpmodel that fails on purpose, and a listing of every knob of a board.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

from ptui.core.board import emulator
from ptui.core.board.backends.sysfs import GPU_DEVFREQ
from ptui.core.board.emulator import Driver, read_mode, write_file  # noqa: F401 (re-exported for the tests)
from ptui.core.catalogue.modes import Mode


def build(root: Path, mode: Mode | None = None, nvp_id: int = 2) -> Path:
    """An emulated Orin AGX's tree (in MODE_30W unless told otherwise), without its nvpmodel
    (emulator.build(root, device) for the other boards)."""
    return emulator.build(root, "orin-agx", mode, nvp_id)


def install_nvpmodel(bin_dir: Path, root: Path) -> Path:
    """The tree's nvpmodel stand-in, put in `bin_dir` (for a PATH, or the jtop service's)."""
    return emulator.install_nvpmodel(root, bin_dir)


# -- a stricter kernel, the sum channel, failing nvpmodel -------------------------------------------
_PAIRS = {"scaling_min_freq": ("min", "scaling_max_freq"), "scaling_max_freq": ("max", "scaling_min_freq"),
          "min_freq": ("min", "max_freq"), "max_freq": ("max", "min_freq")}


class Kernel:
    """Plays the kernel's side of a sysfs write, stricter than a plain file: the file must already
    exist (sysfs never creates files), the value must be an integer, a minimum above the current
    maximum (or a maximum below the minimum) is EINVAL, the cpufreq limits of an offline CPU are
    EBUSY (an inactive policy), cpu0 cannot go offline.  Install it with
    `backend._write = Kernel(root).write`; `log` keeps every accepted write, `rejected` the others.
    `fail` injects errors: {(path suffix, value or None): errno} fail every time, `fail_once` the
    first time only."""

    def __init__(self, root: Path, *, fail: dict | None = None, fail_once: dict | None = None) -> None:
        self.root = Path(root)
        self.log: list[tuple[str, str]] = []
        self.rejected: list[tuple[str, str, str]] = []
        self.fail = dict(fail or {})
        self.fail_once = dict(fail_once or {})

    def _err(self, code: int, path: Path, value: str):
        self.rejected.append((self.rel(path), value, errno.errorcode[code]))
        return OSError(code, os.strerror(code), str(path))

    def rel(self, path: Path) -> str:
        return str(Path(path).relative_to(self.root))

    def write(self, path: Path, value: str) -> None:
        path = Path(path)
        for (suffix, v), code in self.fail.items():
            if str(path).endswith(suffix) and v in (None, value):
                raise self._err(code, path, value)
        for (suffix, v), code in list(self.fail_once.items()):
            if str(path).endswith(suffix) and v in (None, value):
                del self.fail_once[(suffix, v)]
                raise self._err(code, path, value)
        if not path.is_file():
            raise self._err(errno.ENOENT, path, value)
        try:
            new = int(value)
        except ValueError:
            raise self._err(errno.EINVAL, path, value) from None
        if path.parent.name == "cpufreq":
            online = path.parent.parent / "online"
            if online.exists() and online.read_text().strip() == "0":
                raise self._err(errno.EBUSY, path, value)
        pair = _PAIRS.get(path.name)
        if pair:
            kind, other = pair
            o = int(float((path.parent / other).read_text().split()[0]))
            if (kind == "min" and new > o) or (kind == "max" and new < o):
                raise self._err(errno.EINVAL, path, value)
        if path.name == "online" and (new not in (0, 1) or path.parent.name == "cpu0"):
            raise self._err(errno.EINVAL, path, value)
        path.write_text(f"{value}\n")
        self.log.append((self.rel(path), value))


def add_sum_channel(root: Path, addr: str = "1-0040", k: int = 4, mv: int = 5000, ma: int = 3000) -> None:
    """The INA3221 summation channel newer kernels expose next to the three rails."""
    hw = next((root / "sys/bus/i2c/devices" / addr / "hwmon").glob("hwmon*"))
    write_file(hw / f"in{k}_label", "Sum of shunt voltages")
    write_file(hw / f"in{k}_input", mv)
    write_file(hw / f"curr{k}_input", ma)


NVPM_FAULTS = ("exit1", "nvpm-error", "reboot", "wrong")


def install_faulty_nvpmodel(bin_dir: Path, root: Path, fault: str, on_ids=(1,)) -> Path:
    """The emulated nvpmodel, failing when asked for one of `on_ids` after changing part of the
    board (the CPU clocks), as a real one can: exit 1 with a message, print `NVPM ERROR` and exit 0,
    or ask for a reboot (answered NO) after switching its status file; "wrong" exits 0 silently
    with the board not in the preset's mode."""
    assert fault in NVPM_FAULTS, fault
    f = install_nvpmodel(bin_dir, root)
    text = f.read_text()
    hook = f'''        if text.isdigit() and int(text) in {tuple(on_ids)!r}:
            for core in range(12):
                on = ROOT / f"sys/devices/system/cpu/cpu{{core}}/online"
                if core and on.read_text().strip() != "1":
                    continue                     # an offline policy cannot be written (EBUSY)
                for k in ("scaling_min_freq", "scaling_max_freq"):
                    put(ROOT / f"sys/devices/system/cpu/cpu{{core}}/cpufreq/{{k}}", 1113600)
            if {fault!r} == "exit1":
                print("NVPM ERROR: failed to write CPU frequency", file=sys.stderr); return 1
            if {fault!r} == "nvpm-error":
                print("NVPM ERROR: optMask is 1, no request for power mode"); return 0
            if {fault!r} == "wrong":            # says nothing, exits 0, but the GPU cap is not set
                set_status(int(text))
                return 0
            if {fault!r} == "reboot":
                (ROOT / "nvpmodel-answer").write_text(sys.stdin.readline().strip())
                set_status(int(text))
                print("NVPM WARN: Reboot required for changing to this power mode: " + text)
                print("NVPM WARN: DO YOU WANT TO REBOOT NOW? enter YES/yes to confirm:")
                return 0
'''
    marker = '        text = args[args.index("-m") + 1]\n'
    assert marker in text
    f.write_text(text.replace(marker, marker + hook))
    return f


def board_files(root: Path) -> dict[str, str]:
    """Every knob a mode change can touch, as text (to compare a board before and after)."""
    out = {}
    pats = ("sys/devices/system/cpu/cpu*/online", "sys/devices/system/cpu/cpufreq/policy*/scaling_m*_freq",
            *(f"{d}/m*_freq" for d in GPU_DEVFREQ[1:]),       # each board's GPU devfreq node
            "sys/kernel/debug/bpmp/debug/clk/emc/rate", "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked",
            "var/lib/nvpmodel/status")
    for pat in pats:
        for p in sorted(root.glob(pat)):
            out[str(p.relative_to(root))] = p.read_text().strip()
    return out


def immutable_gpu_max(be, monkeypatch):
    """Writes of the sysfs backend `be` to the GPU's devfreq max_freq fail as an immutable file
    (chattr +i) fails them for root."""
    real = be._write

    def write(path, value):
        if path.name == "max_freq" and "devfreq" in str(path):
            raise PermissionError(1, "Operation not permitted")
        real(path, value)
    monkeypatch.setattr(be, "_write", write)
