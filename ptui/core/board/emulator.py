"""An emulated Jetson: a sysfs/debugfs tree under a directory, driven by the simulator.

`build()` writes the files a real board has where ptui's sysfs backend (and the jetson-stats service)
read them, with each catalogued board's own layout: CPU clusters and cpufreq policies, the GPU's
devfreq node (Orin AGX as on JetPack 6, AGX Xavier and Orin Nano as on JetPack 5), EMC in bpmp
debugfs, INA3221 rails with the board's labels, thermal zones, the device-tree model detection
reads, and nvpmodel's status file and an nvpmodel.conf holding the board's presets.
`install_nvpmodel()` puts a stand-in `nvpmodel` at DIR/bin/nvpmodel that switches modes from that
conf.  `Driver.step()` plays the kernel and the board: it reads the knobs (whoever wrote them), puts
the simulator in that mode and writes its rails, clocks, GPU load, temperatures and CPU counters back.
`Emulator` is `ptui emulate`: it makes (or reboots) a tree and drives it until told to stop.

Everything here is SIMULATED, and the tree says so (its marker file, the DMI product name, the conf).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..catalogue.devices import Device, get_device
from ..catalogue.modes import Mode
from ..catalogue.workloads import get_workload
from ..errors import InputError, RuntimeFailure, number
from . import locks, signals
from .backends.sim import SimJetson
from .backends.sysfs import NVPMODEL_STATUS, nvpmodel_block, tpcs_on
from .detect import EMULATED_MARKER, detect

EMC_DIR = "sys/kernel/debug/bpmp/debug/clk/emc"
RAIL_MV = 5000              # the INA3221s watch the 5 V inputs of each rail's regulator
OFFLINE_ZONE = -256000      # what an unpowered thermal sensor reads (CV clusters with nothing on them)


class EmulatorError(InputError):
    """A directory ptui will not make or reuse an emulated board in (exit 2)."""


@dataclass(frozen=True)
class Layout:
    """Where one board keeps what ptui and jtop read (paths relative to the tree's root)."""
    device: str
    model: str                                  # /proc/device-tree/model
    compatible: tuple[str, ...]                 # /proc/device-tree/compatible
    gpu_dev: str                                # the GPU's device directory
    gpu_name: str                               # its devfreq node, e.g. 17000000.gpu
    gpu_of_name: str                            # of_node/name: what jtop calls the GPU
    gpu_loads: tuple[str, ...]                  # GPU load files (per mille) besides gpu_dev/load
    gpu_alias: str | None                       # sys/devices/gpu.0 links to the GPU (JetPack 5)
    emc_cap: str                                # nvpmodel's EMC cap file
    emc_tables: bool                            # Xavier lists EMC rates as table directories
    ina: tuple[tuple[str, str, tuple[str, ...]], ...]   # (i2c address, hwmon dir, channel labels)
    zones: tuple[tuple[str, str | None], ...]   # (zone type, the simulator's temperature or None)
    board_id: str                               # module part number

    @property
    def gpu_dir(self) -> str:
        return f"{self.gpu_dev}/devfreq/{self.gpu_name}"


LAYOUTS: dict[str, Layout] = {lay.device: lay for lay in (
    Layout("orin-agx", "NVIDIA Jetson AGX Orin Developer Kit",
           ("nvidia,p3737-0000+p3701-0000", "nvidia,p3701-0000", "nvidia,tegra234", "nvidia,tegra23x"),
           "sys/devices/platform/bus@0/17000000.gpu", "17000000.gpu", "gpu",
           ("sys/devices/platform/gpu.0/load",), None,
           "sys/kernel/nvpmodel_clk_cap/emc", False,
           (("1-0040", "hwmon3", ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")),
            ("1-0041", "hwmon4", ("NC", "VDDQ_VDD2_1V8AO", "NC"))),
           (("CPU-therm", "CPU"), ("GPU-therm", "GPU"), ("SOC0-therm", "SOC"), ("tj-therm", "tj"),
            ("CV0-therm", None)),
           "p3701-0000"),
    Layout("xavier-agx", "Jetson-AGX", ("nvidia,p2972-0000", "nvidia,galen", "nvidia,tegra194"),
           "sys/devices/17000000.gv11b", "17000000.gv11b", "gv11b", (), "17000000.gv11b",
           "sys/kernel/nvpmodel_emc_cap/emc_iso_cap", True,
           (("1-0040", "hwmon1", ("GPU", "CPU", "SOC")), ("1-0041", "hwmon2", ("CV", "VDDRQ", "SYS5V"))),
           (("CPU-therm", "CPU"), ("GPU-therm", "GPU"), ("AUX-therm", "SOC"), ("AO-therm", "SOC"),
            ("Tdiode_tegra", "tj"), ("thermal-fan-est", "tj")),
           "p2888-0001"),
    Layout("orin-nano", "NVIDIA Jetson Orin Nano Developer Kit",
           ("nvidia,p3768-0000+p3767-0005", "nvidia,p3767-0005", "nvidia,tegra234", "nvidia,tegra23x"),
           "sys/devices/17000000.ga10b", "17000000.ga10b", "ga10b", (), "17000000.ga10b",
           "sys/kernel/nvpmodel_emc_cap/emc_iso_cap", False,
           (("1-0040", "hwmon1", ("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC")),),
           (("CPU-therm", "CPU"), ("GPU-therm", "GPU"), ("CV0-therm", None), ("CV1-therm", None),
            ("CV2-therm", None), ("SOC0-therm", "SOC"), ("SOC1-therm", "SOC"), ("SOC2-therm", "SOC"),
            ("tj-therm", "tj")),
           "p3767-0005"),
)}


def layout(device: Device | str) -> Layout:
    dev = get_device(device) if isinstance(device, str) else device
    return LAYOUTS[dev.name]                  # every catalogued board has one (a unit test says so)


def tpc_mask(device: Device, tpc: int) -> int:
    """nvpmodel's TPC_PG_MASK for `tpc` powered TPCs: one bit per gated TPC of an 8-bit field
    (Orin AGX: 8 TPCs -> 0, 4 -> 240, 3 -> 248; Orin Nano: 4 -> 240, 2 -> 252)."""
    return (0xFF << tpc) & 0xFF


# -- files ------------------------------------------------------------------------------------------
def write_file(path: Path, text) -> None:
    """A file of the tree as the board has it at boot (parents made, whole file written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")


def write_sensor(path: Path, text) -> None:
    """Rewrite a sensor file in place, as sysfs appears to readers: never empty, never truncated
    mid-read.  The new text is padded with spaces to the old length instead of truncating."""
    data = f"{text}\n".encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        old = os.fstat(fd).st_size
        os.pwrite(fd, data + b" " * max(0, old - len(data)), 0)
    finally:
        os.close(fd)


def _link(link: Path, target: str) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink() and not link.exists():
        link.symlink_to(target)


def _hz(mhz: float) -> int:
    return int(round(mhz * 1e6))


def _khz(mhz: float) -> int:
    return int(round(mhz * 1000))


def marker(root: Path) -> dict | None:
    """What the tree's marker says (None: not a tree ptui made, or unreadable)."""
    try:
        m = json.loads((Path(root) / EMULATED_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) and m.get("made_by") == "ptui emulate" else None


def _write_marker(root: Path, device: Device, state: str, **extra) -> None:
    write_file(root / EMULATED_MARKER, json.dumps(
        {"made_by": "ptui emulate", "label": "SIMULATED", "device": device.name, "state": state, **extra}))


# -- the tree -----------------------------------------------------------------------------------------
def build(root: str | os.PathLike, device: Device | str = "orin-agx", mode: Mode | None = None,
          nvp_id: int | None = None, *, keep_nvpmodel: bool = False) -> Path:
    """Write the emulated tree of `device` under `root` in `mode` (default: the nvpmodel preset
    `nvp_id`, default the board's default), with sensors at their idle readings.  keep_nvpmodel
    leaves nvpmodel.conf and its status file as they are where they exist (a reboot)."""
    root = Path(root)
    dev = get_device(device) if isinstance(device, str) else device
    lay = layout(dev)
    nvp_id = dev.default_preset if nvp_id is None else nvp_id
    preset = dev.preset(nvp_id)
    mode = mode or preset.mode
    _write_marker(root, dev, "building")            # the directory is ptui's from here on
    _write_cpus(root, dev, mode)
    _write_gpu(root, dev, lay, mode, preset.tpc)
    _write_emc(root, dev, lay, mode)
    _write_power_monitors(root, lay)
    _write_thermal_zones(root, lay)
    _write_identity(root, dev, lay)
    _write_nvpmodel(root, dev, nvp_id, keep_nvpmodel)
    write_stat(root, mode.cores, 0)
    Driver(root, dev).step(0.0)                     # sensors at the mode's idle readings
    _write_marker(root, dev, "ready")
    return root


def _write_cpus(root: Path, dev: Device, mode: Mode) -> None:
    """The cores' online switches and one cpufreq policy per cluster, pinned at the mode's clock."""
    cpu = root / "sys/devices/system/cpu"
    for c in range(1, dev.max_cores):
        write_file(cpu / f"cpu{c}" / "online", 1 if c < mode.cores else 0)
    write_file(cpu / "possible", f"0-{dev.max_cores - 1}")
    f = _khz(mode.cpu_mhz)
    for cl in dev.cpu_clusters:                     # one cpufreq policy per cluster, shared by its CPUs
        pol = cpu / "cpufreq" / f"policy{cl[0]}"
        for name, v in (("scaling_min_freq", f), ("scaling_max_freq", f), ("scaling_cur_freq", f),
                        ("cpuinfo_min_freq", _khz(dev.cpu_mhz[0])),
                        ("cpuinfo_max_freq", _khz(dev.cpu_mhz[-1])),
                        ("scaling_available_frequencies", " ".join(str(_khz(x)) for x in dev.cpu_mhz)),
                        ("scaling_governor", "schedutil"), ("related_cpus", " ".join(map(str, cl)))):
            write_file(pol / name, v)
        for c in cl:
            _link(cpu / f"cpu{c}" / "cpufreq", f"../cpufreq/policy{cl[0]}")


def _write_gpu(root: Path, dev: Device, lay: Layout, mode: Mode, tpc: int) -> None:
    """The GPU's devfreq node at the mode's clock, its device files (`tpc` TPCs powered) and loads."""
    gdev, gpu = root / lay.gpu_dev, root / lay.gpu_dir
    g = _hz(mode.gpu_mhz)
    for name, v in (("min_freq", g), ("max_freq", g), ("cur_freq", g), ("governor", "nvhost_podgov"),
                    ("available_frequencies", " ".join(str(_hz(x)) for x in dev.gpu_mhz))):
        write_file(gpu / name, v)
    _link(gpu / "device", "../..")
    _link(root / "sys/class/devfreq" / lay.gpu_name, os.path.relpath(gpu, root / "sys/class/devfreq"))
    if lay.gpu_alias:
        _link(root / "sys/devices/gpu.0", lay.gpu_alias)
    for name, v in (("of_node/name", lay.gpu_of_name), ("load", 0), ("railgate_enable", 0),
                    ("tpc_pg_mask", tpc_mask(dev, tpc)), ("enable_3d_scaling", 1),
                    ("power/control", "auto")):
        write_file(gdev / name, v)
    for p in lay.gpu_loads:
        write_file(root / p, 0)


def _write_emc(root: Path, dev: Device, lay: Layout, mode: Mode) -> None:
    """The memory clock at the mode's rate, the BPMP's table of rates (in the board's form), its cap."""
    emc = root / EMC_DIR
    for name, v in (("rate", _hz(mode.mem_mhz)), ("min_rate", _hz(dev.mem_mhz[0])),
                    ("max_rate", _hz(dev.mem_mhz[-1])), ("mrq_rate_locked", 0), ("state", 1)):
        write_file(emc / name, v)
    rates = root / "sys/kernel/debug/bpmp/debug/emc"
    if lay.emc_tables:
        for x in dev.mem_mhz:
            (rates / "tables/regular" / str(_khz(x))).mkdir(parents=True, exist_ok=True)
    else:
        write_file(rates / "possible_rates", " ".join(str(_khz(x)) for x in dev.mem_mhz))
    write_file(root / lay.emc_cap, 0)


def _write_power_monitors(root: Path, lay: Layout) -> None:
    """The INA3221s on the I2C bus, each rail at RAIL_MV drawing nothing (NC channels read 0)."""
    for addr, hw, labels in lay.ina:
        d = root / "sys/bus/i2c/devices" / addr
        write_file(d / "name", "ina3221")
        for k, label in enumerate(labels, start=1):
            for name, v in ((f"in{k}_label", label), (f"in{k}_input", RAIL_MV if label != "NC" else 0),
                            (f"curr{k}_input", 0), (f"curr{k}_max", 20000), (f"curr{k}_crit", 30000)):
                write_file(d / "hwmon" / hw / name, v)
        _link(root / "sys/bus/i2c/drivers/ina3221" / addr, f"../../devices/{addr}")


def _write_thermal_zones(root: Path, lay: Layout) -> None:
    for i, (name, _) in enumerate(lay.zones):
        z = root / f"sys/devices/virtual/thermal/thermal_zone{i}"
        write_file(z / "type", name)
        write_file(z / "temp", OFFLINE_ZONE)


def _write_identity(root: Path, dev: Device, lay: Layout) -> None:
    """What tells a reader which board this is (device tree, DMI), and the rest jtop reads."""
    dt = root / "sys/firmware/devicetree/base"
    dt.mkdir(parents=True, exist_ok=True)
    (dt / "model").write_bytes(lay.model.encode() + b"\0")
    (dt / "compatible").write_bytes(b"".join(c.encode() + b"\0" for c in lay.compatible))
    _link(root / "proc/device-tree", "../sys/firmware/devicetree/base")
    # what the genuine jtop service also reads (its JTOP_TESTING tree is this sys/ directory)
    write_file(root / "sys/kernel/actmon_avg_activity/mc_all", 0)
    write_file(root / "sys/kernel/debug/nvmap/iovmm/maps", "total 0K")
    (root / "sys/kernel/debug/clk").mkdir(parents=True, exist_ok=True)
    (root / "sys/class/power_supply").mkdir(parents=True, exist_ok=True)
    for name, v in (("product_name", f"{dev.title} (emulated by ptui, SIMULATED)"), ("sys_vendor", "NVIDIA"),
                    ("board_name", lay.board_id)):
        write_file(root / "sys/devices/virtual/dmi/id" / name, v)


def _write_nvpmodel(root: Path, dev: Device, nvp_id: int, keep: bool) -> None:
    """nvpmodel.conf and the status file saying preset `nvp_id`; `keep` leaves either that exists."""
    conf, status = root / "etc/nvpmodel.conf", root / NVPMODEL_STATUS
    if not (keep and conf.is_file()):
        write_file(conf, nvpmodel_conf(dev).rstrip("\n"))
    if not (keep and status.is_file()):
        write_file(status, f"pmode:{nvp_id:04d} fmode:quiet")


def nvpmodel_conf(device: Device) -> str:
    """An nvpmodel.conf for the emulated board: its parameters (board paths) and presets."""
    dev, lay = device, layout(device)
    prefix = "CPU_DENVER" if dev.name == "xavier-agx" else "CPU_A78"
    out = [f"# nvpmodel.conf of an emulated {dev.title}, written by ptui emulate (SIMULATED board)",
           "# its nvpmodel stand-in (bin/nvpmodel) switches TPC gating live, with no reboot", "",
           "< PARAM TYPE=FILE NAME=CPU_ONLINE >"]
    out += [f"CORE_{c} /sys/devices/system/cpu/cpu{c}/online" for c in range(1, dev.max_cores)]
    out += ["", "< PARAM TYPE=FILE NAME=TPC_POWER_GATING >", f"TPC_PG_MASK /{lay.gpu_dev}/tpc_pg_mask"]
    for i, cl in enumerate(dev.cpu_clusters):
        d = f"/sys/devices/system/cpu/cpu{cl[0]}/cpufreq"
        out += ["", f"< PARAM TYPE=CLOCK NAME={prefix}_{i} >",
                f"FREQ_TABLE {d}/scaling_available_frequencies", f"MAX_FREQ {d}/scaling_max_freq",
                f"MIN_FREQ {d}/scaling_min_freq"]
    out += ["", "< PARAM TYPE=CLOCK NAME=GPU >", f"FREQ_TABLE /{lay.gpu_dir}/available_frequencies",
            f"MAX_FREQ /{lay.gpu_dir}/max_freq", f"MIN_FREQ /{lay.gpu_dir}/min_freq",
            "", "< PARAM TYPE=CLOCK NAME=EMC >", f"MAX_FREQ /{lay.emc_cap}", ""]
    for p in dev.presets:
        out.append(nvpmodel_block(dev, p.mode, p.id, p.name)
                   + f"TPC_POWER_GATING TPC_PG_MASK {tpc_mask(dev, p.tpc)}\n")
    out.append(f"< PM_CONFIG DEFAULT={dev.default_preset} >\n")
    return "\n".join(out)


def write_stat(root: Path, cores: int, tick: int) -> None:
    """CPU counters for jtop (its tree's `stat`): they keep growing, about half of each core busy."""
    u, idle = 100 + 50 * tick, 100 + 50 * tick
    lines = [f"cpu  {u * cores} 0 0 {idle * cores} 0 0 0 0 0 0"]
    lines += [f"cpu{c} {u} 0 0 {idle} 0 0 0 0 0 0" for c in range(cores)]
    path = root / "sys/stat"
    (write_sensor if path.exists() else write_file)(path, "\n".join(lines + ["intr 0"]))


def _tree_device(root: Path, device: Device | str | None) -> Device:
    if device is not None:
        return get_device(device) if isinstance(device, str) else device
    m = marker(root)
    if m and m.get("device"):
        return get_device(m["device"])
    det = detect(root)
    if det.device is None:
        raise EmulatorError(f"{root} holds no emulated board ({det.reason})")
    return det.device


def read_mode(root: str | os.PathLike, device: Device | str | None = None, wait_s: float = 1.0) -> Mode:
    """The mode the tree's knobs are set to (exactly: a value off the board's tables raises).  A
    knob caught mid-write (a writer truncates the file, then writes: an empty read) is read again
    for up to `wait_s` (a test polling the tree while ptui applied a mode read '' and failed)."""
    end = time.monotonic() + wait_s
    while True:
        try:
            return _read_mode(root, device)
        except ValueError:
            if time.monotonic() >= end:
                raise
            time.sleep(0.01)


def _read_mode(root: str | os.PathLike, device: Device | str | None) -> Mode:
    root = Path(root)
    dev = _tree_device(root, device)
    cpu = root / "sys/devices/system/cpu"
    online = [int((cpu / f"cpu{c}/online").read_text()) for c in range(1, dev.max_cores)]
    khz = int((cpu / "cpu0/cpufreq/scaling_max_freq").read_text())
    gpu = int((root / layout(dev).gpu_dir / "max_freq").read_text())
    emc = int((root / EMC_DIR / "rate").read_text())
    return _mode_of(dev, online, khz, gpu, emc)


def _mode_of(dev: Device, online, cpu_khz: int, gpu_hz: int, emc_hz: int) -> Mode:
    """The mode the knobs' values set: the online flags of the CPUs after the first, the CPU's
    cap in kHz, the GPU's and the EMC's in Hz (a value off the board's tables raises ValueError)."""
    return dev.mode(1 + sum(online), cpu_khz / 1000, gpu_hz / 1e6, emc_hz / 1e6)


class Driver:
    """The board: follows the knobs in the tree and writes the simulator's sensors into it."""

    def __init__(self, root: str | os.PathLike, device: Device | str | None = None,
                 sim: SimJetson | None = None, seed: int = 0) -> None:
        self.root = Path(root)
        self.device = _tree_device(self.root, device)
        self.layout = layout(self.device)
        self.sim = sim or SimJetson(self.device, seed=seed)
        self.tick = 0
        cpu = self.root / "sys/devices/system/cpu"
        gpu, emc = self.root / self.layout.gpu_dir, self.root / EMC_DIR
        self._online = [cpu / f"cpu{c}/online" for c in range(1, self.device.max_cores)]
        self._policies = [cpu / f"cpufreq/policy{cl[0]}" for cl in self.device.cpu_clusters]
        self._knobs = (self._online + [pol / f for pol in self._policies
                                       for f in ("scaling_min_freq", "scaling_max_freq")]
                       + [gpu / "min_freq", gpu / "max_freq", emc / "rate", emc / "mrq_rate_locked"])
        self._good: dict[Path, str] = {}             # a knob's last whole value
        self._empty: dict[Path, int] = {}            # steps it has read empty (or not a number)
        self._follow(self._heal())

    def _heal(self) -> dict[Path, int]:
        """A knob its writer left empty (killed between truncating it and writing it) is written
        back with its last value once it has read so at two steps in a row: a real kernel never
        shows an empty knob, and it stayed empty for good (ptui status could not read the mode, and
        ptui restore failed in the tree's nvpmodel with a traceback).  One step is a writer's
        moment between its truncate and its write.  Returns the knobs' values as read (a healed one
        as written back; one caught mid-write left out), which the step follows: each file is read
        once a step (_follow read them again)."""
        values: dict[Path, int] = {}
        for k in self._knobs:
            try:
                text = k.read_text()
                value = int(text.split()[0])
            except (OSError, ValueError, IndexError):
                n = self._empty[k] = self._empty.get(k, 0) + 1
                if n >= 2 and k in self._good and k.exists():
                    write_sensor(k, self._good[k])
                    self._empty.pop(k)
                    values[k] = int(self._good[k].split()[0])
                continue
            self._good[k] = text.strip()
            self._empty.pop(k, None)
            values[k] = value
        return values

    def _tpc(self) -> int:
        try:
            mask = int((self.root / self.layout.gpu_dev / "tpc_pg_mask").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return self.sim.tpc
        return tpcs_on(self.device, mask)

    def _follow(self, knobs: dict[Path, int]) -> Mode:
        """Put the simulator in the mode of the tree's `knobs` (_heal's); a knob caught mid-write,
        or set off the board's tables, leaves it where it was until the next step."""
        gpu, emc = self.root / self.layout.gpu_dir, self.root / EMC_DIR
        try:
            mode = _mode_of(self.device, [knobs[k] for k in self._online],
                            knobs[self._policies[0] / "scaling_max_freq"], knobs[gpu / "max_freq"],
                            knobs[emc / "rate"])
        except (KeyError, ValueError):
            return self.sim.current_mode()
        tpc = self._tpc()
        if (mode, tpc) != (self.sim.current_mode(), self.sim.tpc):
            self.sim.apply_mode(mode, tpc=tpc)
        return mode

    def step(self, dt: float = 0.5) -> None:
        root, lay = self.root, self.layout
        knobs = self._heal()
        mode = self._follow(knobs)
        self.sim.clock.sleep(dt)
        t = self.sim.read()
        for addr, hw, labels in lay.ina:
            d = root / "sys/bus/i2c/devices" / addr / "hwmon" / hw
            for k, label in enumerate(labels, start=1):
                if label in t.rails:
                    write_sensor(d / f"in{k}_input", RAIL_MV)
                    write_sensor(d / f"curr{k}_input", int(round(t.rails[label] * 1e6 / RAIL_MV)))
        # the clocks run at their knobs' values (the clusters at their cap: min = max); a knob
        # caught mid-write is followed at the next step
        for pol in self._policies:
            _follow_knob(knobs, pol / "scaling_cur_freq", pol / "scaling_max_freq")
        _follow_knob(knobs, root / lay.gpu_dir / "cur_freq", root / lay.gpu_dir / "max_freq")
        load = int(round((t.gpu_load or 0) * 10))
        for p in (f"{lay.gpu_dev}/load", *lay.gpu_loads):
            write_sensor(root / p, load)
        self.tick += 1
        write_stat(root, mode.cores, self.tick)
        zones = root / "sys/devices/virtual/thermal"
        for i, (_, key) in enumerate(lay.zones):
            if key is not None:
                write_sensor(zones / f"thermal_zone{i}/temp", int(t.temps[key] * 1000))


def _follow_knob(knobs: dict[Path, int], cur: Path, knob: Path) -> None:
    if knob in knobs:
        write_sensor(cur, knobs[knob])


# -- the nvpmodel stand-in -----------------------------------------------------------------------------
NVPMODEL = r'''#!{python} -IS
# nvpmodel stand-in of an emulated Jetson made by ptui emulate (a SIMULATED board, tree {root}):
# -q, -p [--verbose], [-f CONF] -m ID, switching modes as POWER_MODEL blocks of the conf say.
# Never asks for a reboot: TPC gating changes live.  (-IS: no site packages, it starts in half the
# time; the jtop service runs `-q` every sample.)
import os, sys
from pathlib import Path
ROOT = Path({root!r})
STATUS = ROOT / "var/lib/nvpmodel/status"
EMC = ROOT / "sys/kernel/debug/bpmp/debug/clk/emc"


def board(path):
    """A board path (/sys/...) inside the emulated tree."""
    return ROOT / path.lstrip("/")


def put(path, value):
    # in place, padded to the old length: the jtop service samples these files while this runs,
    # and one empty or cut-off read stops its sampler for good
    data = f"{{value}}\n".encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data + b" " * max(0, os.fstat(fd).st_size - len(data)), 0)
    finally:
        os.close(fd)


def number(path):
    return int(path.read_text().split()[0])


def set_status(mode_id):
    # whole or not at all (a new file renamed over it): the jtop service may run `-q` meanwhile,
    # and a `-q` that reads a half-written file fails, which stops its sampler for good
    tmp = STATUS.with_name(f".status.{{os.getpid()}}")
    tmp.write_text(f"pmode:{{mode_id:04d}} fmode:quiet\n")
    os.replace(tmp, STATUS)


def parse(conf):
    """(PARAMs by name: type and paths, POWER_MODELs by id: name and lines, the default id)."""
    params, models, default, cur = {{}}, {{}}, None, None
    for raw in conf.read_text(errors="replace").splitlines():
        line = raw.split("#")[0].strip()
        if line.startswith("<"):
            words = line.strip("<> ").split()
            head = dict(w.split("=", 1) for w in words[1:] if "=" in w)
            cur = None
            if words[0] == "PARAM":
                cur = params.setdefault(head["NAME"], {{"TYPE": head.get("TYPE", "FILE")}})
            elif words[0] == "POWER_MODEL":
                cur = models.setdefault(int(head["ID"]), (head["NAME"], []))[1]
            elif words[0] == "PM_CONFIG":
                default = int(head["DEFAULT"])
        elif isinstance(cur, dict) and len(line.split()) == 2:
            cur[line.split()[0]] = line.split()[1]
        elif isinstance(cur, list) and len(line.split()) == 3:
            cur.append(line.split())
    return params, models, default


def switch(params, lines):
    """Cores on first, then gating and clocks (a legal min/max order), cores off last."""
    online = [(params["CPU_ONLINE"][arg], value) for name, arg, value in lines if name == "CPU_ONLINE"]
    for path, value in online:
        if value == "1":
            put(board(path), 1)
    clocks = {{}}
    for name, arg, value in lines:
        if name != "CPU_ONLINE" and params[name]["TYPE"] == "FILE":
            put(board(params[name][arg]), value)
        elif name != "CPU_ONLINE":
            clocks.setdefault(name, {{}})[arg] = int(value)
    for name, want in clocks.items():
        p = params[name]
        table = sorted(int(x) for x in board(p["FREQ_TABLE"]).read_text().split()) if "FREQ_TABLE" in p \
            else []
        want = {{arg: table[-1] if v < 0 and table else v for arg, v in want.items()}}   # -1: no cap
        order = ["MAX_FREQ", "MIN_FREQ"]
        if "MAX_FREQ" in want and "MAX_FREQ" in p and want["MAX_FREQ"] < number(board(p["MAX_FREQ"])):
            order.reverse()                          # lowering: the minimum first
        for arg in order:
            if arg in want:
                put(board(p[arg]), want[arg])
        if name == "EMC":                            # BPMP runs the memory at its cap (0: no cap)
            cap = want.get("MAX_FREQ", 0)
            put(EMC / "rate", cap if cap > 0 else number(EMC / "max_rate"))
    for path, value in reversed(online):
        if value == "0":
            put(board(path), 0)


def main(args):
    conf = Path(args[args.index("-f") + 1]) if "-f" in args[:-1] else ROOT / "etc/nvpmodel.conf"
    params, models, default = parse(conf)
    if "-q" in args:
        cur = int(STATUS.read_text().split("pmode:")[1].split()[0])
        if cur not in models:
            print(f"NVPM ERROR: power mode {{cur}} of {{STATUS}} is not in {{conf}}")
            return 1
        print(f"NV Power Mode: {{models[cur][0]}}")
        print(cur)
    elif "-p" in args:
        print(f"NVPM VERB: Config file: {{conf}}")
        if default in models:
            print(f"NVPM VERB: PM_CONFIG: DEFAULT={{models[default][0]}}({{default}})")
        for mode_id, (name, _) in models.items():
            print(f"NVPM VERB: POWER_MODEL: ID={{mode_id}} NAME={{name}}")
    elif "-m" in args[:-1]:
        text = args[args.index("-m") + 1]
        if not text.isdigit() or int(text) not in models:
            print(f"NVPM ERROR: Invalid power mode ID {{text}}")
            return 1
        switch(params, models[int(text)][1])
        set_status(int(text))
    else:
        print("usage: nvpmodel -q | -p --verbose | [-f CONF] -m ID   (ptui's emulated board)")
        return 1
    return 0


sys.exit(main(sys.argv[1:]))
'''


def install_nvpmodel(root: str | os.PathLike, bin_dir: str | os.PathLike | None = None) -> Path:
    """Write the nvpmodel stand-in for the tree at `root` (default: root/bin/nvpmodel)."""
    root = Path(root)
    bin_dir = Path(bin_dir) if bin_dir is not None else root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    f = bin_dir / "nvpmodel"
    f.write_text(NVPMODEL.format(python=sys.executable, root=str(root.resolve())))
    f.chmod(0o755)
    return f


# -- ptui emulate ------------------------------------------------------------------------------------
class Emulator:
    """`ptui emulate`: make (or reboot) an emulated board under `root` and drive it, training
    `workload` on the simulator, every `interval` seconds until stopped."""

    def __init__(self, root: str | os.PathLike, device: Device | str, *, workload: str = "resnet18",
                 interval: float = 0.2, seed: int = 0) -> None:
        self.root = Path(root).absolute()
        self.device = get_device(device) if isinstance(device, str) else device
        self.workload = get_workload(workload)
        self.interval = number(interval, "--interval", ge=0.01, le=60)
        self.seed = seed
        self.driver: Driver | None = None
        self._lock: str | None = None

    def open(self) -> str:
        """Make the tree (or reboot the one ptui made there) and start training on it; returns
        what was done, as a phrase.  Refuses a directory ptui did not make (EmulatorError)."""
        root, dev = self.root, self.device
        if root.exists() and not root.is_dir():
            raise EmulatorError(f"--root {root} is not a directory")
        sim = SimJetson(dev, seed=self.seed)
        sim.start_training(self.workload)          # out of memory: said before anything is written
        key = f"emulator-{root}"
        locks.acquire(key, f"emulating a board in {root}")
        self._lock = key
        try:
            m = marker(root)
            if m is None and root.exists() and any(root.iterdir()):
                raise EmulatorError(f"--root {root} is not empty and is not an emulated board ptui made; "
                                    f"give a new or empty directory (ptui never writes into one it did "
                                    f"not make)")
            if m is not None and m.get("device") != dev.name:
                raise EmulatorError(f"{root} holds an emulated {m.get('device')}: start it with --device "
                                    f"{m.get('device')}, or give another --root")
            # a tree an emulator drove before (stopped, or killed while running) boots again too
            reboot = m is not None and m.get("state") in ("ready", "running", "stopped")
            build(root, dev, keep_nvpmodel=reboot)
            nvp = install_nvpmodel(root)
            done = f"made an emulated {dev.name}"
            if reboot:
                done = f"rebooted the emulated {dev.name}" + self._boot(nvp)
            self.driver = Driver(root, dev, sim=sim)
            self.driver.step(0.0)
            # driven from here on: a backend refuses the tree once this process is gone (detect.py)
            import socket
            _write_marker(root, dev, "running", pid=os.getpid(), host=socket.gethostname())
            return done
        except BaseException:
            self.close()
            raise

    def _boot(self, nvp: Path) -> str:
        """At boot the board's nvpmodel service applies the mode in its status file."""
        status = (self.root / NVPMODEL_STATUS).read_text()
        try:
            mode_id = int(status.split("pmode:")[1].split()[0])
        except (IndexError, ValueError):
            mode_id = self.device.default_preset
        r = subprocess.run([str(nvp), "-m", str(mode_id)], capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return f" into nvpmodel mode {mode_id}"
        d = self.device.preset(self.device.default_preset)
        subprocess.run([str(nvp), "-m", str(d.id)], capture_output=True, text=True, timeout=30)
        why = " ".join((r.stdout + r.stderr).split())[:120]
        return f" into its default mode {d.name} (nvpmodel -m {mode_id} failed: {why})"

    def usage(self, done: str) -> str:
        """The one line `ptui emulate` prints once the board is up."""
        r = self.root
        return (f"ptui emulate: {done} (SIMULATED, training {self.workload.name}) in {r}; use it like "
                f"a board: ptui --backend sysfs --sysfs-root {r} ... (it runs {r}/bin/nvpmodel itself; "
                f"for other tools PATH={r}/bin:$PATH); stop with Ctrl-C or SIGTERM")

    def run(self, stop: threading.Event | None = None) -> None:
        """Drive the board every `interval` seconds (the simulator follows the wall clock) until
        `stop` is set, or, without one (`ptui emulate`, main thread), until a stop signal raises
        (board.signals: Terminated, KeyboardInterrupt).  A step is shielded: a signal that arrives
        during one is held until its files are written.  A signal handler must not set an
        Event the main thread waits on: if it arrives while that thread holds the Event's lock,
        set() waits for that lock forever (`ptui emulate` once hung so on SIGTERM)."""
        if self.driver is None:
            raise RuntimeFailure("the emulated board is not open")
        last = time.monotonic()
        while True:
            delay = max(0.0, last + self.interval - time.monotonic())
            if stop is None:
                time.sleep(delay)
            elif stop.wait(delay):
                return
            now = time.monotonic()
            with signals.shielded():
                self.driver.step(min(now - last, 5.0))     # after a pause the board does not race ahead
            last = now

    def close(self) -> None:
        if self.driver is not None:
            try:
                _write_marker(self.root, self.device, "stopped")
            except OSError:
                pass
            self.driver = None
        if self._lock is not None:
            locks.release(self._lock)
            self._lock = None
