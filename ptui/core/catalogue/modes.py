"""Power modes: an immutable (cores, cpu_mhz, gpu_mhz, mem_mhz) value, validation and grids.

Frequencies are kept in MHz as given by the device tables (e.g. 114.75, 665.6).  A mode read from
user input is snapped to the table value it matches within 0.01 MHz; anything else is rejected
with a message that names the valid values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product
from typing import Iterable, Protocol, Sequence

import numpy as np

from ..errors import InputError


class Board(Protocol):
    """What a mode space needs of a board (devices.Device has it): its name, core count and
    frequency tables.  modes sits below devices and does not import it.  Read-only properties: a
    frozen dataclass's fields match them, and modes never sets them."""
    @property
    def name(self) -> str: ...
    @property
    def max_cores(self) -> int: ...
    @property
    def cpu_mhz(self) -> Sequence[float]: ...
    @property
    def gpu_mhz(self) -> Sequence[float]: ...
    @property
    def mem_mhz(self) -> Sequence[float]: ...


_TOL_MHZ = 0.01


class ModeError(InputError):
    """A mode that is not on the device's tables."""


def fmt_mhz(x: float) -> str:
    """Shortest exact text for a table frequency: 204, 665.6, 1300.5, 114.75."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def cpu_ghz(mhz: float) -> str:
    """A CPU clock as people read it: 1497.6 MHz -> '1.50' (GHz; every table value stays distinct)."""
    return f"{mhz / 1000:.2f}"


def whole_mhz(mhz: float) -> str:
    """A GPU or memory clock to the MHz, half up: 522.75 -> '523', 665.6 -> '666'."""
    return str(math.floor(mhz + 0.5))


@dataclass(frozen=True, order=True)
class Mode:
    cores: int
    cpu_mhz: float
    gpu_mhz: float
    mem_mhz: float

    @property
    def key(self) -> str:
        """The compact exact form, '6c/1497.6/522.75/2133', for CSV, JSON and anything a machine
        reads back; people read describe()."""
        return f"{self.cores}c/{fmt_mhz(self.cpu_mhz)}/{fmt_mhz(self.gpu_mhz)}/{fmt_mhz(self.mem_mhz)}"

    @classmethod
    def from_key(cls, key: str) -> "Mode":
        """The mode a key names ('6c/1497.6/522.75/2133'); ValueError when it is not a key."""
        c, f, g, m = key.strip().split("/")
        if not c.endswith("c"):
            raise ValueError(f"not a mode key: {key!r}")
        return cls(int(c[:-1]), float(f), float(g), float(m))

    def words(self) -> tuple[str, str, str, str]:
        """Each knob in plain words: '6 cores', 'CPU 1.50 GHz', 'GPU 523 MHz', 'memory 2133 MHz'."""
        return (f"{self.cores} core{'' if self.cores == 1 else 's'}", f"CPU {cpu_ghz(self.cpu_mhz)} GHz",
                f"GPU {whole_mhz(self.gpu_mhz)} MHz", f"memory {whole_mhz(self.mem_mhz)} MHz")

    def describe(self) -> str:
        """The mode as people read it, on screen and in the CLI's text:
        '6 cores · CPU 1.50 GHz · GPU 523 MHz · memory 2133 MHz'."""
        return " · ".join(self.words())

    def as_tuple(self) -> tuple[int, float, float, float]:
        return (self.cores, self.cpu_mhz, self.gpu_mhz, self.mem_mhz)

    def as_dict(self) -> dict:
        return {"cores": self.cores, "cpu_mhz": self.cpu_mhz, "gpu_mhz": self.gpu_mhz,
                "mem_mhz": self.mem_mhz}

    def __str__(self) -> str:
        return self.describe()


def _snap(value: float, table: Sequence[float], what: str, device_name: str) -> float:
    for v in table:
        if abs(v - value) <= _TOL_MHZ:
            return v
    valid = ", ".join(fmt_mhz(v) for v in table)
    raise ModeError(f"{what} {fmt_mhz(value)} MHz is not available on {device_name}; "
                    f"valid values: {valid}")


def make_mode(device: Board, cores, cpu_mhz, gpu_mhz, mem_mhz) -> Mode:
    """Validate against the device tables and return the canonical Mode."""
    try:
        c = int(cores)
        if c != float(cores):
            raise ValueError
    except (TypeError, ValueError):
        raise ModeError(f"core count {cores!r} is not an integer") from None
    if not 1 <= c <= device.max_cores:
        raise ModeError(f"core count {c} is not available on {device.name}; "
                        f"valid values: 1..{device.max_cores}")
    return Mode(
        c,
        _snap(float(cpu_mhz), device.cpu_mhz, "CPU frequency", device.name),
        _snap(float(gpu_mhz), device.gpu_mhz, "GPU frequency", device.name),
        _snap(float(mem_mhz), device.mem_mhz, "EMC frequency", device.name),
    )


class ModeList(list):
    """A list of modes that also carries their values as a read-only array [n, 4] (cores, CPU,
    GPU, EMC MHz), so that predicting a device's whole space does not walk 18,096 objects to build
    it (gp.raw_modes).  Any change through the list's methods drops the array; a slice is a plain
    list.  A caller passing `raw` vouches that it lists the same modes in the same order (only
    the length is checked)."""
    __slots__ = ("raw",)

    def __init__(self, modes=(), raw: np.ndarray | None = None):
        super().__init__(modes)
        self.raw = raw if raw is not None and len(raw) == len(self) else None


def _dropping_raw(name: str):
    method = getattr(list, name)

    def changed(self, *args, **kwargs):
        self.raw = None
        return method(self, *args, **kwargs)
    changed.__name__ = name
    return changed


for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend", "insert",
              "pop", "remove", "reverse", "sort", "clear"):
    setattr(ModeList, _name, _dropping_raw(_name))

# a device's spaces, built once per process: 18,096 Mode objects take ~10 ms to make
_SPACES: dict = {}


def _space(cores: Sequence[int], cpu: Sequence[float], gpu: Sequence[float],
           mem: Sequence[float]) -> ModeList:
    key = (tuple(cores), tuple(cpu), tuple(gpu), tuple(mem))
    hit = _SPACES.get(key)
    if hit is None:
        combos = list(product(*key))
        raw = np.array(combos, np.float64).reshape(-1, 4)
        raw.setflags(write=False)
        hit = _SPACES[key] = (tuple(Mode(*c) for c in combos), raw)
    return ModeList(*hit)


def full_space(device: Board) -> ModeList:
    return _space(range(1, device.max_cores + 1), device.cpu_mhz, device.gpu_mhz, device.mem_mhz)


def pt_grid_cpu(device: Board) -> list[float]:
    """PowerTrain's CPU points: every other table frequency, skipping the two slowest,
    always keeping the maximum (on Orin AGX this gives the paper's 14 points)."""
    pts = list(device.cpu_mhz[2::2])
    if device.cpu_mhz[-1] not in pts:
        pts.append(device.cpu_mhz[-1])
    return pts


def pt_grid_cores(device: Board) -> list[int]:
    return list(range(2, device.max_cores + 1, 2))


def pt_grid(device: Board) -> ModeList:
    """PowerTrain's profiling grid: even core counts x every other CPU frequency (without the two
    slowest) x all GPU x all EMC frequencies.  Orin AGX: 6 x 14 x 13 x 4 = 4,368."""
    return _space(pt_grid_cores(device), pt_grid_cpu(device), device.gpu_mhz, device.mem_mhz)


def transition_order(modes: Iterable[Mode]) -> list[Mode]:
    """Order modes so consecutive ones differ in as few (and as cheap) knobs as possible.

    EMC changes are the most expensive (clock lock and retraining), then core hot-plug, then GPU and
    CPU DVFS.  Modes are sorted high to low (Jetson DVFS steps down cheaply) in a snake order:
    EMC outermost, then cores, GPU, CPU, with the direction of each inner level alternating so that
    the last mode of one block is next to the first of the following one.
    """
    modes = sorted(set(modes))
    out: list[Mode] = []

    def level(group: list[Mode], depth: int, descending: bool) -> None:
        if depth == 4:
            out.extend(group)
            return
        attr = ("mem_mhz", "cores", "gpu_mhz", "cpu_mhz")[depth]
        keys = sorted({getattr(m, attr) for m in group}, reverse=descending)
        flip = descending
        for k in keys:
            level([m for m in group if getattr(m, attr) == k], depth + 1, flip)
            flip = not flip

    level(modes, 0, True)
    return out
