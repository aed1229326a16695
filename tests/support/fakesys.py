"""An emulated Jetson AGX Orin sysfs/debugfs tree, driven by the simulator.

build(root) writes the files ptui's sysfs backend (and jtop) read; Driver.step() plays the kernel
and the board: it reads the knobs ptui wrote, puts the simulated Jetson in that mode, and writes the
simulated rails, clocks, load and temperatures back into the tree.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

from ptui.core.backends.sim import SimJetson
from ptui.core.devices import get_device
from ptui.core.modes import Mode

ORIN = get_device("orin-agx")
RAIL_VOLTS = {"VDD_GPU_SOC": 5000, "VDD_CPU_CV": 5000, "VIN_SYS_5V0": 5000, "VDDQ_VDD2_1V8AO": 5000}


def w(path: Path, text) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")


def wp(path: Path, text) -> None:
    """Rewrite a sensor file in place, as sysfs appears to readers: never empty, never truncated
    mid-read.  The new text is padded with spaces to the old length instead of truncating."""
    data = f"{text}\n".encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        old = os.fstat(fd).st_size
        os.pwrite(fd, data + b" " * max(0, old - len(data)), 0)
    finally:
        os.close(fd)


def build(root: Path, mode: Mode | None = None, nvp_id: int = 2) -> Path:
    mode = mode or ORIN.preset(nvp_id).mode
    cpu = root / "sys/devices/system/cpu"
    khz = " ".join(str(int(round(f * 1000))) for f in ORIN.cpu_mhz)
    for c in range(1, 12):
        w(cpu / f"cpu{c}" / "online", 1 if c < mode.cores else 0)
    f = int(round(mode.cpu_mhz * 1000))
    policies(root, ORIN, (("scaling_min_freq", f), ("scaling_max_freq", f), ("scaling_cur_freq", f),
                          ("cpuinfo_min_freq", 115200), ("cpuinfo_max_freq", 2201600),
                          ("scaling_available_frequencies", khz), ("scaling_governor", "schedutil")))
    # JetPack 6 layout: class/devfreq/17000000.gpu -> the GPU device's devfreq dir, device -> ../..
    gdev = root / "sys/devices/platform/bus@0/17000000.gpu"
    gpu = gdev / "devfreq/17000000.gpu"
    gpu.mkdir(parents=True, exist_ok=True)
    (root / "sys/class/devfreq").mkdir(parents=True, exist_ok=True)
    if not (root / "sys/class/devfreq/17000000.gpu").exists():
        (root / "sys/class/devfreq/17000000.gpu").symlink_to(
            "../../devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu")
        (gpu / "device").symlink_to("../..")
    for name, v in (("of_node/name", "gpu"), ("load", 0), ("railgate_enable", 0), ("tpc_pg_mask", 0),
                    ("enable_3d_scaling", 1), ("power/control", "auto")):
        w(gdev / name, v)
    g = int(round(mode.gpu_mhz * 1e6))
    for name, v in (("min_freq", g), ("max_freq", g), ("cur_freq", g), ("governor", "nvhost_podgov"),
                    ("available_frequencies", " ".join(str(int(round(x * 1e6))) for x in ORIN.gpu_mhz))):
        w(gpu / name, v)
    w(root / "sys/devices/platform/gpu.0/load", 0)
    emc = root / "sys/kernel/debug/bpmp/debug/clk/emc"
    for name, v in (("rate", int(mode.mem_mhz * 1e6)), ("min_rate", 204000000), ("max_rate", 3199000000),
                    ("mrq_rate_locked", 0), ("state", 1)):
        w(emc / name, v)
    w(root / "sys/kernel/debug/bpmp/debug/emc/possible_rates",
      " ".join(str(int(x * 1000)) for x in ORIN.mem_mhz))
    for addr, chans in (("1-0040", ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")),
                        ("1-0041", ("NC", "VDDQ_VDD2_1V8AO", "NC"))):
        dev = root / "sys/bus/i2c/devices" / addr
        w(dev / "name", "ina3221")
        hw = dev / "hwmon/hwmon3"
        for k, label in enumerate(chans, start=1):
            w(hw / f"in{k}_label", label)
            w(hw / f"in{k}_input", 5000)
            w(hw / f"curr{k}_input", 0)
            w(hw / f"curr{k}_max", 20000)
            w(hw / f"curr{k}_crit", 30000)
        drv = root / "sys/bus/i2c/drivers/ina3221"
        drv.mkdir(parents=True, exist_ok=True)
        link = drv / addr
        if not link.exists():
            link.symlink_to(dev)
    for i, name in enumerate(("CPU-therm", "GPU-therm", "SOC0-therm", "tj-therm", "CV0-therm")):
        z = root / f"sys/devices/virtual/thermal/thermal_zone{i}"
        w(z / "type", name)
        w(z / "temp", -256000 if name.startswith("CV0") else 40000)
    w(root / "var/lib/nvpmodel/status", f"pmode:{nvp_id:04d} fmode:quiet")
    # what the genuine jtop service also reads (its JTOP_TESTING tree is this sys/ directory)
    w(root / "sys/kernel/actmon_avg_activity/mc_all", 0)
    w(root / "sys/kernel/debug/nvmap/iovmm/maps", "total 0K")
    (root / "sys/kernel/debug/clk").mkdir(parents=True, exist_ok=True)
    (root / "sys/class/power_supply").mkdir(parents=True, exist_ok=True)
    for name, v in (("product_name", "Jetson AGX Orin (emulated by ptui tests)"), ("sys_vendor", "NVIDIA"),
                    ("board_name", "p3701-0000")):
        w(root / "sys/devices/virtual/dmi/id" / name, v)
    write_stat(root, mode.cores, 0)
    w(root / "proc/device-tree/model", "NVIDIA Jetson AGX Orin Developer Kit")
    return root


def policies(root: Path, device, files) -> None:
    """cpufreq as the kernel lays it out: one policy per cluster (cpu/cpufreq/policyN) shared by its
    CPUs, each cpuK/cpufreq a link to it, so writing cpu0's limits sets cpu1..3's as well."""
    base = root / "sys/devices/system/cpu"
    for cl in device.cpu_clusters:
        pol = base / "cpufreq" / f"policy{cl[0]}"
        for name, v in files:
            w(pol / name, v)
        for c in cl:
            link = base / f"cpu{c}" / "cpufreq"
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists() and not link.is_symlink():
                link.symlink_to(f"../cpufreq/policy{cl[0]}")


def write_stat(root: Path, cores: int, tick: int) -> None:
    """/proc/stat for jtop: counters that keep growing, about 50 % busy."""
    u, idle = 100 + 50 * tick, 100 + 50 * tick
    lines = [f"cpu  {u * cores} 0 0 {idle * cores} 0 0 0 0 0 0"]
    lines += [f"cpu{c} {u} 0 0 {idle} 0 0 0 0 0 0" for c in range(cores)]
    wp(root / "sys/stat", "\n".join(lines + ["intr 0"]))


def read_mode(root: Path) -> Mode:
    cores = 1 + sum(int((root / f"sys/devices/system/cpu/cpu{c}/online").read_text()) for c in range(1, 12))
    cpu = int((root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq").read_text()) / 1000
    gpu = int((root / "sys/class/devfreq/17000000.gpu/max_freq").read_text()) / 1e6
    emc = int((root / "sys/kernel/debug/bpmp/debug/clk/emc/rate").read_text()) / 1e6
    return ORIN.mode(cores, cpu, gpu, emc)


class Driver:
    """The board: follows the knobs in the tree and writes the simulator's sensors into it."""

    def __init__(self, root: Path, sim: SimJetson | None = None) -> None:
        self.root = root
        self.sim = sim or SimJetson(ORIN, start_mode=read_mode(root))
        self.tick = 0

    def step(self, dt: float = 0.5) -> None:
        root = self.root
        try:
            mode = read_mode(root)
        except (ValueError, OSError):      # ptui is writing a knob right now
            return
        if mode != self.sim.current_mode():
            self.sim.apply_mode(mode)
        self.sim.clock.sleep(dt)
        t = self.sim.read()
        hw = {"1-0040": root / "sys/bus/i2c/devices/1-0040/hwmon/hwmon3",
              "1-0041": root / "sys/bus/i2c/devices/1-0041/hwmon/hwmon3"}
        for addr, k, rail in (("1-0040", 1, "VDD_GPU_SOC"), ("1-0040", 2, "VDD_CPU_CV"),
                              ("1-0040", 3, "VIN_SYS_5V0"), ("1-0041", 2, "VDDQ_VDD2_1V8AO")):
            mv = RAIL_VOLTS[rail]
            wp(hw[addr] / f"in{k}_input", mv)
            wp(hw[addr] / f"curr{k}_input", int(round(t.rails[rail] * 1e6 / mv)))
        for c in range(12):
            d = root / f"sys/devices/system/cpu/cpu{c}/cpufreq"
            wp(d / "scaling_cur_freq", (d / "scaling_max_freq").read_text().strip())
        gpu = root / "sys/class/devfreq/17000000.gpu"
        wp(gpu / "cur_freq", (gpu / "max_freq").read_text().strip())
        wp(root / "sys/devices/platform/gpu.0/load", int((t.gpu_load or 0) * 10))
        wp(root / "sys/devices/platform/bus@0/17000000.gpu/load", int((t.gpu_load or 0) * 10))
        self.tick += 1
        write_stat(root, mode.cores, self.tick)
        for i, name in enumerate(("CPU", "GPU", "SOC", "tj")):
            wp(root / f"sys/devices/virtual/thermal/thermal_zone{i}/temp", int(t.temps[name] * 1000))


NVPMODEL = r'''#!{python} -IS
# Emulated nvpmodel for ptui's tests: -p --verbose, -q, -m N on the emulated tree {root}
# (-IS: no site packages, it starts in half the time; the jtop service runs `-q` every sample)
import json, os, sys
from pathlib import Path
ROOT = Path({root!r})
PRESETS = json.loads({presets!r})
status = ROOT / "var/lib/nvpmodel/status"
def put(rel, v):
    # in place, padded to the old length (as fakesys.wp does): the jtop service samples these files
    # while this runs, and one empty or cut-off read stops its sampler for good
    data = f"{{v}}\n".encode()
    fd = os.open(ROOT / rel, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data + b" " * max(0, os.fstat(fd).st_size - len(data)), 0)
    finally:
        os.close(fd)
def set_status(mode_id):
    # whole or not at all (a new file renamed over it): the jtop service may run `-q` meanwhile,
    # and a `-q` that reads a half-written file fails, which stops its sampler for good
    tmp = status.with_name(f".status.{{os.getpid()}}")
    tmp.write_text(f"pmode:{{mode_id:04d}} fmode:quiet\n")
    os.replace(tmp, status)
args = sys.argv[1:]
if args[:1] == ["-p"]:
    print("NVPM VERB: Config file: /etc/nvpmodel.conf")
    print("NVPM VERB: PM_CONFIG: DEFAULT=MODE_30W(2)")
    for p in PRESETS:
        print(f"NVPM VERB: POWER_MODEL: ID={{p['id']}} NAME={{p['name']}}")
        print("NVPM VERB: PARAM TPC_POWER_GATING TPC_PG_MASK 0")
elif args[:1] == ["-q"]:
    cur = int(status.read_text().split("pmode:")[1].split()[0])
    name = next(p["name"] for p in PRESETS if p["id"] == cur)
    print(f"NV Power Mode: {{name}}")
    print(cur)
elif args[:1] == ["-m"]:
    p = next((p for p in PRESETS if p["id"] == int(args[1])), None)
    if p is None:
        print("NVPM ERROR: invalid power mode"); sys.exit(1)
    c, f, g, m = p["mode"]
    for core in range(1, 12):
        if core < c:
            put(f"sys/devices/system/cpu/cpu{{core}}/online", 1)
    for core in range(12):
        for k in ("scaling_max_freq", "scaling_min_freq"):
            put(f"sys/devices/system/cpu/cpu{{core}}/cpufreq/{{k}}", int(round(f * 1000)))
    for k in ("max_freq", "min_freq"):
        put(f"sys/class/devfreq/17000000.gpu/{{k}}", int(round(g * 1e6)))
    put("sys/kernel/debug/bpmp/debug/clk/emc/rate", int(round(m * 1e6)))
    for core in range(11, 0, -1):
        if core >= c:
            put(f"sys/devices/system/cpu/cpu{{core}}/online", 0)
    set_status(p["id"])
'''


def install_nvpmodel(bin_dir: Path, root: Path) -> Path:
    import json
    import sys
    bin_dir.mkdir(parents=True, exist_ok=True)
    presets = json.dumps([{"id": p.id, "name": p.name, "mode": list(p.mode.as_tuple())}
                          for p in ORIN.presets])
    f = bin_dir / "nvpmodel"
    f.write_text(NVPMODEL.format(python=sys.executable, root=str(root), presets=presets))
    f.chmod(0o755)
    return f


# -- a stricter kernel, other boards, failing nvpmodel ----------------------------------------------
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
    hw = root / "sys/bus/i2c/devices" / addr / "hwmon/hwmon3"
    if not hw.exists():
        hw = next((root / "sys/bus/i2c/devices" / addr / "hwmon").glob("hwmon*"))
    w(hw / f"in{k}_label", "Sum of shunt voltages")
    w(hw / f"in{k}_input", mv)
    w(hw / f"curr{k}_input", ma)


NANO = get_device("orin-nano")
# mV, mA per channel: VDD_IN is the module input, the other two are parts of it
NANO_RAILS = (("VDD_IN", 5000, 1400), ("VDD_CPU_GPU_CV", 5000, 500), ("VDD_SOC", 5000, 300))


def build_nano(root: Path, mode: Mode | None = None, nvp_id: int = 0, sum_channel: bool = True) -> Path:
    """An Orin Nano 8GB tree: 6 cores in two clusters, VDD_IN (the module input) plus its sub-rails
    on one INA3221 (and its sum channel), GPU devfreq, EMC debugfs, nvpmodel status."""
    mode = mode or NANO.preset(nvp_id).mode
    cpu = root / "sys/devices/system/cpu"
    for c in range(1, NANO.max_cores):
        w(cpu / f"cpu{c}" / "online", 1 if c < mode.cores else 0)
    f = int(round(mode.cpu_mhz * 1000))
    policies(root, NANO, (("scaling_min_freq", f), ("scaling_max_freq", f), ("scaling_cur_freq", f)))
    gpu = root / "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu"
    g = int(round(mode.gpu_mhz * 1e6))
    for name, v in (("min_freq", g), ("max_freq", g), ("cur_freq", g)):
        w(gpu / name, v)
    (root / "sys/class/devfreq").mkdir(parents=True, exist_ok=True)
    link = root / "sys/class/devfreq/17000000.gpu"
    if not link.exists():
        link.symlink_to("../../devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu")
    w(root / "sys/devices/platform/bus@0/17000000.gpu/load", 500)
    emc = root / "sys/kernel/debug/bpmp/debug/clk/emc"
    for name, v in (("rate", int(mode.mem_mhz * 1e6)), ("mrq_rate_locked", 0)):
        w(emc / name, v)
    dev = root / "sys/bus/i2c/devices/1-0040"
    w(dev / "name", "ina3221")
    hw = dev / "hwmon/hwmon1"
    for k, (label, mv, ma) in enumerate(NANO_RAILS, start=1):
        w(hw / f"in{k}_label", label)
        w(hw / f"in{k}_input", mv)
        w(hw / f"curr{k}_input", ma)
    if sum_channel:
        w(hw / "in4_label", "Sum of shunt voltages")
        w(hw / "in4_input", 5000)
        w(hw / "curr4_input", sum(ma for _, _, ma in NANO_RAILS))
    for i, name in enumerate(("cpu-thermal", "gpu-thermal", "tj-thermal")):
        z = root / f"sys/devices/virtual/thermal/thermal_zone{i}"
        w(z / "type", name)
        w(z / "temp", 45500 + 1000 * i)
    w(root / "var/lib/nvpmodel/status", f"pmode:{nvp_id:04d} fmode:quiet")
    w(root / "proc/device-tree/model", "NVIDIA Jetson Orin Nano Developer Kit")
    return root


NVPM_FAULTS = ("exit1", "nvpm-error", "reboot", "wrong")


def install_faulty_nvpmodel(bin_dir: Path, root: Path, fault: str, on_ids=(1,)) -> Path:
    """The emulated nvpmodel, failing when asked for one of `on_ids` after changing part of the
    board (the CPU clocks), as a real one can: exit 1 with a message, print `NVPM ERROR` and exit 0,
    or ask for a reboot (answered NO) after switching its status file; "wrong" exits 0 silently
    with the board not in the preset's mode."""
    assert fault in NVPM_FAULTS, fault
    f = install_nvpmodel(bin_dir, root)
    text = f.read_text()
    hook = f'''    if int(args[1]) in {tuple(on_ids)!r}:
        for core in range(12):
            on = ROOT / f"sys/devices/system/cpu/cpu{{core}}/online"
            if core and on.read_text().strip() != "1":
                continue                     # an offline policy cannot be written (EBUSY)
            for k in ("scaling_min_freq", "scaling_max_freq"):
                put(f"sys/devices/system/cpu/cpu{{core}}/cpufreq/{{k}}", 1113600)
        if {fault!r} == "exit1":
            print("NVPM ERROR: failed to write CPU frequency", file=sys.stderr); sys.exit(1)
        if {fault!r} == "nvpm-error":
            print("NVPM ERROR: optMask is 1, no request for power mode"); sys.exit(0)
        if {fault!r} == "wrong":            # says nothing, exits 0, but the GPU cap is not set
            set_status(int(args[1]))
            sys.exit(0)
        if {fault!r} == "reboot":
            (ROOT / "nvpmodel-answer").write_text(sys.stdin.readline().strip())
            set_status(int(args[1]))
            print("NVPM WARN: Reboot required for changing to this power mode: " + args[1])
            print("NVPM WARN: DO YOU WANT TO REBOOT NOW? enter YES/yes to confirm:")
            sys.exit(0)
'''
    marker = '    p = next((p for p in PRESETS if p["id"] == int(args[1])), None)\n'
    assert marker in text
    f.write_text(text.replace(marker, hook + marker))
    return f


def board_files(root: Path) -> dict[str, str]:
    """Every knob a mode change can touch, as text (to compare a board before and after)."""
    out = {}
    pats = ("sys/devices/system/cpu/cpu*/online", "sys/devices/system/cpu/cpufreq/policy*/scaling_m*_freq",
            "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu/m*_freq",
            "sys/kernel/debug/bpmp/debug/clk/emc/rate", "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked",
            "var/lib/nvpmodel/status")
    for pat in pats:
        for p in sorted(root.glob(pat)):
            out[str(p.relative_to(root))] = p.read_text().strip()
    return out
