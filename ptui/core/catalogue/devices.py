"""Device catalog: Jetson Orin AGX, Xavier AGX and Orin Nano.

Frequency tables, core counts, NVIDIA nvpmodel presets and INA3221 rail names.  Sources (see
shared/research/jetson-facts.md): PowerTrain Table 2 and its profiling scripts, NVIDIA nvpmodel conf
files (p3701-0000, p3767-0003, t194), MIRAGE's Xavier AGX tables.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..errors import InputError
from .modes import Mode, full_space, make_mode, pt_grid


class DeviceError(InputError):
    """Unknown device name."""


@dataclass(frozen=True)
class Preset:
    """An NVIDIA nvpmodel power mode.  Caps are snapped to the frequency tables; `tpc` is the
    number of GPU TPCs left powered (presets may power-gate some, custom modes keep all)."""
    id: int
    name: str
    mode: Mode
    tpc: int
    budget_w: float | None  # the nominal budget in the preset's name (None for MAXN)


@dataclass(frozen=True)
class Device:
    name: str            # catalog key, e.g. "orin-agx"
    title: str           # human name
    max_cores: int
    cpu_mhz: tuple[float, ...]
    gpu_mhz: tuple[float, ...]
    mem_mhz: tuple[float, ...]
    gpu_cuda_cores: int
    gpu_tpcs: int
    mem_peak_gbs: float  # DRAM peak bandwidth at the top EMC frequency
    peak_power_w: float
    rails: tuple[str, ...]
    total_rail: str | None  # rail that is the module input; None = total is the sum of rails
    cpu_clusters: tuple[tuple[int, ...], ...]
    preset_specs: tuple = field(default=(), repr=False)
    default_preset: int = 0
    mem_gb: float = 0.0   # unified (CPU + GPU) memory of the board, GB

    @cached_property
    def presets(self) -> tuple[Preset, ...]:
        out = []
        for pid, name, cores, cpu, gpu, mem, tpc, budget in self.preset_specs:
            out.append(Preset(pid, name, make_mode(self, cores, cpu, gpu, mem), tpc, budget))
        return tuple(out)

    def preset(self, key: int | str) -> Preset:
        for p in self.presets:
            if p.id == key or str(p.id) == str(key).strip() or p.name.lower() == str(key).strip().lower():
                return p
        names = ", ".join(f"{p.id}={p.name}" for p in self.presets)
        raise DeviceError(f"{self.name} has no nvpmodel preset {key!r}; presets: {names}")

    @property
    def maxn(self) -> Mode:
        return Mode(self.max_cores, self.cpu_mhz[-1], self.gpu_mhz[-1], self.mem_mhz[-1])

    @property
    def slowest_grid_mode(self) -> Mode:
        g = pt_grid(self)
        return min(g)  # fewest cores, lowest frequencies

    def mode(self, cores, cpu_mhz, gpu_mhz, mem_mhz) -> Mode:
        return make_mode(self, cores, cpu_mhz, gpu_mhz, mem_mhz)

    def full_space(self) -> list[Mode]:
        return full_space(self)

    def pt_grid(self) -> list[Mode]:
        return pt_grid(self)

    @property
    def n_modes(self) -> int:
        return self.max_cores * len(self.cpu_mhz) * len(self.gpu_mhz) * len(self.mem_mhz)

    def preset_for(self, mode: Mode) -> Preset | None:
        for p in self.presets:
            if p.mode == mode:
                return p
        return None


def _a78_table(last: float, n: int) -> tuple[float, ...]:
    """ARM A78AE/Carmel cpufreq steps: 115.2 MHz + k * 76.8 MHz, the last entry replaced by `last`."""
    t = [round(115.2 + 76.8 * k, 1) for k in range(n - 1)]
    return tuple(t + [last])


_ORIN_GPU = tuple([round(114.75 + 102 * k, 2) for k in range(12)] + [1300.5])

ORIN_AGX = Device(
    name="orin-agx",
    title="Jetson AGX Orin 64GB devkit",
    max_cores=12,
    cpu_mhz=_a78_table(2201.6, 29),
    gpu_mhz=_ORIN_GPU,
    mem_mhz=(204.0, 665.6, 2133.0, 3199.0),
    gpu_cuda_cores=2048, gpu_tpcs=8, mem_peak_gbs=204.8, peak_power_w=60.0,
    rails=("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"),
    total_rail=None,
    cpu_clusters=((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)),
    # id, name, cores, CPU cap, GPU cap (JP5 table), EMC cap, TPCs on, nominal budget
    preset_specs=(
        (0, "MAXN", 12, 2201.6, 1300.5, 3199, 8, None),
        (1, "MODE_15W", 4, 1113.6, 420.75, 2133, 3, 15.0),
        (2, "MODE_30W", 8, 1728.0, 624.75, 3199, 4, 30.0),
        (3, "MODE_50W", 12, 1497.6, 828.75, 3199, 8, 50.0),
    ),
    default_preset=2,
    mem_gb=64.0,
)

XAVIER_AGX = Device(
    name="xavier-agx",
    title="Jetson AGX Xavier devkit",
    max_cores=8,
    cpu_mhz=_a78_table(2265.6, 29),
    gpu_mhz=(114.75, 216.75, 318.75, 420.75, 522.75, 624.75, 675.75, 828.75, 905.25, 1032.75,
             1198.5, 1236.75, 1338.75, 1377.0),
    mem_mhz=(204.0, 408.0, 665.6, 800.0, 1065.6, 1331.2, 1600.0, 1866.0, 2133.0),
    gpu_cuda_cores=512, gpu_tpcs=4, mem_peak_gbs=136.5, peak_power_w=65.0,
    rails=("GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"),
    total_rail=None,
    cpu_clusters=((0, 1), (2, 3), (4, 5), (6, 7)),
    preset_specs=(
        (0, "MAXN", 8, 2265.6, 1377.0, 2133, 4, None),
        (1, "MODE_10W", 2, 1190.4, 522.75, 1065.6, 4, 10.0),
        (2, "MODE_15W", 4, 1190.4, 675.75, 1331.2, 4, 15.0),
        (3, "MODE_30W_ALL", 8, 1190.4, 905.25, 1600, 4, 30.0),
        (4, "MODE_30W_6CORE", 6, 1420.8, 905.25, 1600, 4, 30.0),
        (5, "MODE_30W_4CORE", 4, 1728.0, 905.25, 1600, 4, 30.0),
        (6, "MODE_30W_2CORE", 2, 2035.2, 905.25, 1600, 4, 30.0),
    ),
    default_preset=2,
    mem_gb=32.0,
)

ORIN_NANO = Device(
    name="orin-nano",
    title="Jetson Orin Nano 8GB devkit",
    max_cores=6,
    cpu_mhz=_a78_table(1510.4, 20),
    gpu_mhz=(306.0, 408.0, 510.0, 612.0, 624.75),
    mem_mhz=(204.0, 665.6, 2133.0),
    gpu_cuda_cores=1024, gpu_tpcs=4, mem_peak_gbs=68.0, peak_power_w=15.0,
    rails=("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"),
    total_rail="VDD_IN",
    cpu_clusters=((0, 1, 2, 3), (4, 5)),
    preset_specs=(
        (0, "15W", 6, 1510.4, 624.75, 2133, 4, 15.0),
        (1, "7W", 4, 960.0, 408.0, 2133, 2, 7.0),
    ),
    default_preset=0,
    mem_gb=8.0,
)

DEVICES: dict[str, Device] = {d.name: d for d in (ORIN_AGX, XAVIER_AGX, ORIN_NANO)}


def get_device(name: str) -> Device:
    key = (name or "").strip().lower().replace("_", "-")
    aliases = {"orin": "orin-agx", "agx-orin": "orin-agx", "xavier": "xavier-agx",
               "agx-xavier": "xavier-agx", "nano": "orin-nano"}
    key = aliases.get(key, key)
    if key not in DEVICES:
        raise DeviceError(f"unknown device {name!r}; known devices: {', '.join(DEVICES)}")
    return DEVICES[key]
