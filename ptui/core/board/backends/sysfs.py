"""Real Jetson through sysfs/debugfs, under a configurable root (tests use an emulated tree).

Reads: INA3221 rails (hwmon, found by glob), CPU online/cpufreq, GPU devfreq (Orin JetPack 5 and
6 paths, Xavier), EMC (bpmp debugfs), GPU load, thermal zones, the nvpmodel status file.
Writes (root): core hot-plug, cpufreq min/max per cluster policy, GPU devfreq min/max, EMC rate
lock — in a legal order (raise max before min, lower min before max), every value read back.
Telemetry files are kept open and re-read with pread, so a sample costs a few syscalls.
nvpmodel: under a root other than / (an emulated board from `ptui emulate`), ROOT/bin/nvpmodel when
it exists, else `nvpmodel` from PATH.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ...catalogue.devices import Device
from ...catalogue.modes import Mode, fmt_mhz, make_mode
from ...paths import write_atomic
from ..detect import emulator_not_running, is_emulated
from ..logs import get as _logger
from .base import ApplyError, Backend, BackendError, DamagedSnapshot, Telemetry

LOG = _logger(__name__)

GPU_DEVFREQ = ("sys/class/devfreq/17000000.gpu",
               "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu",
               "sys/devices/17000000.ga10b/devfreq/17000000.ga10b",
               "sys/devices/17000000.gv11b/devfreq/17000000.gv11b")
GPU_LOAD = ("sys/devices/platform/gpu.0/load", "sys/devices/gpu.0/load",
            "sys/devices/platform/bus@0/17000000.gpu/load")
EMC_DIR = "sys/kernel/debug/bpmp/debug/clk/emc"
# the GPU's TPC power-gating mask (one bit a TPC, set = off): nvpmodel writes it at boot for modes
# that power fewer TPCs (Orin AGX MODE_15W 248, MODE_30W 240), and only a reboot changes it
TPC_MASK = ("sys/devices/platform/bus@0/17000000.gpu/tpc_pg_mask", "sys/devices/17000000.ga10b/tpc_pg_mask",
            "sys/devices/17000000.gv11b/tpc_pg_mask", "sys/devices/gpu.0/tpc_pg_mask",
            "sys/devices/platform/gpu.0/tpc_pg_mask")
NVPMODEL_STATUS = "var/lib/nvpmodel/status"


def tpcs_on(device: Device, mask: int) -> int:
    """The TPCs a TPC_PG_MASK leaves powered (one bit a TPC, set = gated)."""
    return sum(1 for i in range(device.gpu_tpcs) if not (mask >> i) & 1)


@dataclass
class Write:
    path: Path
    value: str
    why: str

    def __str__(self) -> str:
        return f"echo {self.value} > {self.path}    # {self.why}"


class SysfsBackend(Backend):
    kind = "sysfs"
    simulated = False
    can_persist = True
    can_select_presets = True
    plans_writes = True

    def __init__(self, device: Device, root: str | os.PathLike = "/", nvpmodel_cmd: str | None = None,
                 nvpmodel_conf: str | None = None) -> None:
        super().__init__(device)
        self.root = Path(root)
        self.emulated = is_emulated(self.root)
        self._emulator_seen = -1e9                  # _check_emulator: when it last looked
        self._emulator_stopped: str | None = None  # ... and the error it gave, if it is gone
        self.nvpmodel_cmd = nvpmodel_cmd or own_nvpmodel(self.root) or "nvpmodel"
        self.nvpmodel_conf = Path(nvpmodel_conf) if nvpmodel_conf else self.root / "etc/nvpmodel.conf"
        self._fds: dict[Path, int] = {}
        # one reader of the cached descriptors at a time: a sampler's thread reads while another
        # applies (a Flower round's budget hold), and a descriptor closed by one (its file gone
        # with an offlined core) must not be read, or its number reused, by the other
        self._fd_lock = threading.Lock()
        self.gpu_dir = next((self.root / p for p in GPU_DEVFREQ if (self.root / p).is_dir()), None)
        self.gpu_load = next((self.root / p for p in GPU_LOAD if (self.root / p).exists()), None)
        self.emc_dir = self.root / EMC_DIR if (self.root / EMC_DIR).is_dir() else None
        self.tpc_mask = next((self.root / p for p in TPC_MASK if (self.root / p).is_file()), None)
        self.rails = self._find_rails()
        self.zones = self._find_zones()
        self._online = [(c, self._cpu(c) / "online") for c in range(device.max_cores)
                        if (self._cpu(c) / "online").exists()]
        self._always_on = device.max_cores - len(self._online)     # cpu0 has no 'online' file

    # -- discovery ------------------------------------------------------------------------------
    def _find_rails(self) -> list[tuple[str, Path, Path]]:
        """(label, voltage file, current file) for every INA3221 channel with a real rail.  A
        sensor is reached both through its driver's directory and the bus's device links: each
        hwmon directory is read once (by its real path)."""
        out = []
        dirs = (glob.glob(str(self.root / "sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*"))
                + [d for d in glob.glob(str(self.root / "sys/bus/i2c/devices/*/hwmon/hwmon*"))
                   if _read_text(Path(d).parent.parent / "name") == "ina3221"])
        for d in sorted({os.path.realpath(d): d for d in reversed(dirs)}.values()):
            for label_f in sorted(Path(d).glob("in*_label")):
                k = label_f.name[2:-6]
                label = _read_text(label_f)
                if not label or "NC" in label.split("_") or label.lower().startswith("sum"):
                    continue
                v, c = Path(d) / f"in{k}_input", Path(d) / f"curr{k}_input"
                if v.exists() and c.exists():
                    out.append((label, v, c))
        return out

    def _find_zones(self) -> list[tuple[str, Path]]:
        zones = []
        for z in sorted(glob.glob(str(self.root / "sys/devices/virtual/thermal/thermal_zone*"))):
            name = _read_text(Path(z) / "type")
            if name and (Path(z) / "temp").exists():
                zones.append((name.split("-")[0].split("_")[0], Path(z) / "temp"))
        return zones

    def _cpu(self, n: int) -> Path:
        return self.root / f"sys/devices/system/cpu/cpu{n}"

    # -- reading --------------------------------------------------------------------------------
    def _pread(self, path: Path) -> str | None:
        with self._fd_lock:
            fd = self._fds.get(path)
            try:
                if fd is None:
                    fd = self._fds[path] = os.open(path, os.O_RDONLY)
                return os.pread(fd, 4096, 0).decode().strip()
            except OSError:
                if fd is not None:
                    self._fds.pop(path, None)
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                return None

    def _num(self, path: Path | None) -> float | None:
        if path is None:
            return None
        t = self._pread(path)
        try:
            return float(t.split()[0]) if t else None
        except ValueError:
            return None

    def _freq(self, path: Path) -> float:
        """The number in a frequency file a mode cannot be read without, else BackendError.  An
        empty read is tried again for up to 50 ms: sysfs itself is never empty, but in an
        emulated tree (regular files) another thread's write truncates the file before it writes
        it, and a read in between saw nothing and failed the hold's step (under load)."""
        v = self._num(path)
        for _ in range(25):
            if v is not None:
                return v
            time.sleep(0.002)
            v = self._num(path)
        raise BackendError(f"cannot read the current mode: {path} is missing or not a number")

    def online_cores(self) -> int:
        return self._always_on + sum(1 for _, f in self._online if self._num(f) == 1)

    def _cluster_policy_cpu(self, cluster) -> int | None:
        for c in cluster:
            f = self._cpu(c) / "online"
            if (not f.exists() or self._num(f) == 1) and (self._cpu(c) / "cpufreq").is_dir():
                return c
        return None

    def read(self) -> Telemetry:
        if self.emulated:                  # its emulator stopped: readings that never move, refused
            self._check_emulator(every_s=1.0)
        rails = {}
        for label, vf, cf in self.rails:
            v, c = self._num(vf), self._num(cf)
            if v is not None and c is not None:
                rails[label] = round(v * c / 1e6, 3)
        if not rails:
            total = None
        elif self.device.total_rail and self.device.total_rail in rails:
            total = rails[self.device.total_rail]
        else:
            total = round(sum(rails.values()), 3)
        pc = self._cluster_policy_cpu(self.device.cpu_clusters[0])
        cpu = self._num(self._cpu(pc) / "cpufreq/scaling_cur_freq") if pc is not None else None
        gpu = self._num(self.gpu_dir / "cur_freq") if self.gpu_dir else None
        emc = self._num(self.emc_dir / "rate") if self.emc_dir else None
        load = self._num(self.gpu_load)
        temps = {}
        for name, f in self.zones:
            t = self._num(f)
            if t is not None and t > -256000:
                temps[name] = round(t / 1000.0, 1)
        # a plain file that nvpmodel rewrites (it may replace it): read afresh, never through a
        # kept descriptor, which would go on showing the file it replaced
        status = _read_text(self.root / NVPMODEL_STATUS)
        return Telemetry(
            t=self.clock.now(), power_w=total, rails=rails,
            cpu_mhz=cpu / 1000.0 if cpu else None, gpu_mhz=gpu / 1e6 if gpu else None,
            mem_mhz=emc / 1e6 if emc else None, cores_online=self.online_cores(),
            gpu_load=load / 10.0 if load is not None else None, temps=temps,
            nvpmodel=self._nvp_name(status))

    def _nvp_name(self, status: str | None) -> str | None:
        if not status or "pmode:" not in status:
            return None
        try:
            pid = int(status.split("pmode:")[1].split()[0])
            return self.device.preset(pid).name
        except (ValueError, BackendError, Exception):  # noqa: BLE001 - unknown id: show it raw
            return f"mode {status.split('pmode:')[1].split()[0]}"

    def current_mode(self) -> Mode:
        """The pinned mode: cores online, the cluster minimum (= maximum when pinned) frequencies."""
        dev = self.device
        pc = self._cluster_policy_cpu(dev.cpu_clusters[0])
        if pc is None or self.gpu_dir is None or self.emc_dir is None:
            raise BackendError("cannot read the current mode: cpufreq, GPU devfreq or EMC debugfs "
                               f"missing under {self.root} (debugfs needs root)")
        cpu = self._freq(self._cpu(pc) / "cpufreq/scaling_max_freq")
        gpu = self._freq(self.gpu_dir / "max_freq")
        emc = self._freq(self.emc_dir / "rate")
        return _nearest_mode(dev, self.online_cores(), cpu / 1000.0, gpu / 1e6, emc / 1e6)

    def gated_tpcs(self) -> int | None:
        text = self._pread(self.tpc_mask) if self.tpc_mask is not None else None
        try:
            mask = int(text.split()[0], 0) if text else 0
        except ValueError:
            return None
        on = tpcs_on(self.device, mask)
        return on if on < self.device.gpu_tpcs else None

    def nvpmodel_id(self) -> int | None:
        """The nvpmodel mode in the board's own status file (None where there is none)."""
        status = _read_text(self.root / NVPMODEL_STATUS) or ""
        return int(status.split("pmode:")[1].split()[0]) if "pmode:" in status else None

    # -- writing --------------------------------------------------------------------------------
    def _state(self) -> dict:
        """Everything apply can change, to restore it exactly."""
        st: dict = {"online": {}, "cpufreq": {}, "gpu": None, "emc": None, "nvpmodel": self.nvpmodel_id()}
        for c in range(1, self.device.max_cores):
            f = self._cpu(c) / "online"
            if f.exists():
                st["online"][c] = _read_text(f)
        for cl in self.device.cpu_clusters:
            # an offline cluster keeps its limits for when it comes back: record them too where
            # the kernel lets us read them (apply may bring the cluster online and pin it)
            pc = self._cluster_policy_cpu(cl)
            if pc is None:
                pc = next((c for c in cl if (self._cpu(c) / "cpufreq").is_dir()), None)
            if pc is not None:
                d = self._cpu(pc) / "cpufreq"
                mn, mx = _read_text(d / "scaling_min_freq"), _read_text(d / "scaling_max_freq")
                if mn and mx:
                    st["cpufreq"][pc] = (mn, mx)
        if self.gpu_dir:
            st["gpu"] = (_read_text(self.gpu_dir / "min_freq"), _read_text(self.gpu_dir / "max_freq"))
        if self.emc_dir:
            st["emc"] = (_read_text(self.emc_dir / "mrq_rate_locked"), _read_text(self.emc_dir / "rate"))
        return st

    def snapshot(self):
        return self._state()

    def snapshot_json(self, snap):
        return json.loads(json.dumps(snap))             # int keys and tuples as JSON has them

    def snapshot_from_json(self, obj):
        check_state(self.device, obj)
        return obj

    def snapshot_mode(self, snap) -> Mode:
        """The mode `snap` puts the board in, read as current_mode() reads the board: cores online,
        the first cluster's CPU maximum, the GPU maximum, the EMC rate."""
        dev = self.device
        online = {int(k): v for k, v in snap["online"].items()}
        cores = dev.max_cores - len(online) + sum(1 for v in online.values() if v == "1")
        first = next((pc for pc in sorted(int(k) for k in snap["cpufreq"]) if pc in dev.cpu_clusters[0]),
                     None)
        cpu = (float(snap["cpufreq"][_key(snap["cpufreq"], first)][1]) / 1000.0 if first is not None
               else self._freq(self._cpu(dev.cpu_clusters[0][0]) / "cpufreq/scaling_max_freq") / 1000.0)
        gpu = float(snap["gpu"][1]) / 1e6 if snap.get("gpu") else self.current_mode().gpu_mhz
        emc = float(snap["emc"][1]) / 1e6 if snap.get("emc") else self.current_mode().mem_mhz
        return _nearest_mode(dev, cores, cpu, gpu, emc)

    def holds(self, target: Mode) -> bool:
        """In `target` and pinned there: every file an apply writes already reads its value (a
        board after boot or a preset can read the right maximum clocks with lower minimums, or an
        EMC rate that is not locked)."""
        return self.current_mode() == target and all(_read_text(w.path) == w.value
                                                      for w in self._writes(target))

    def plan_writes(self, target: Mode) -> list[str]:
        return [str(w) for w in self._writes(target)] + [
            "read back every file above and compare; on any mismatch restore the snapshot"]

    def _writes(self, target: Mode) -> list[Write]:
        dev = self.device
        if self.gpu_dir is None or self.emc_dir is None:
            raise BackendError(f"GPU devfreq or EMC debugfs not found under {self.root}")
        w: list[Write] = []
        cur_online = {c for c in range(dev.max_cores)
                      if not (self._cpu(c) / "online").exists() or self._num(self._cpu(c) / "online") == 1}
        want = set(range(target.cores))
        for c in sorted(want - cur_online):
            w.append(Write(self._cpu(c) / "online", "1", f"bring cpu{c} online"))
        khz = int(round(target.cpu_mhz * 1000))
        for cl in dev.cpu_clusters:
            alive = [c for c in cl if c in want]
            if not alive:
                continue
            d = self._cpu(alive[0]) / "cpufreq"
            cur_max = self._num(d / "scaling_max_freq") or 0
            order = (("scaling_max_freq", "scaling_min_freq") if khz > cur_max
                     else ("scaling_min_freq", "scaling_max_freq"))
            for f in order:
                w.append(Write(d / f, str(khz),
                               f"CPU cluster {cl[0]}-{cl[-1]} {f[8:11]} {fmt_mhz(target.cpu_mhz)} MHz"))
        hz = int(round(target.gpu_mhz * 1e6))
        cur_gmax = self._num(self.gpu_dir / "max_freq") or 0
        for f in (("max_freq", "min_freq") if hz > cur_gmax else ("min_freq", "max_freq")):
            w.append(Write(self.gpu_dir / f, str(hz), f"GPU {f[:3]} {fmt_mhz(target.gpu_mhz)} MHz"))
        w.append(Write(self.emc_dir / "mrq_rate_locked", "1", "lock the EMC rate"))
        w.append(Write(self.emc_dir / "rate", str(int(round(target.mem_mhz * 1e6))),
                       f"EMC {fmt_mhz(target.mem_mhz)} MHz"))
        for c in sorted(cur_online - want, reverse=True):
            if c == 0:
                continue
            w.append(Write(self._cpu(c) / "online", "0", f"take cpu{c} offline"))
        return w

    def _write(self, path: Path, value: str) -> None:
        """One sysfs write (tests replace this to inject failures)."""
        with open(path, "w") as fh:
            fh.write(value)

    def _not_read_back(self, writes: list[Write]) -> list[str]:
        """The writes whose file does not read back what was written (the last write to a file
        counts; a core taken offline may lose its online file)."""
        last = {wr.path: wr for wr in writes}
        return [f"{wr.path} reads {_read_text(wr.path)!r}, wrote {wr.value}" for wr in last.values()
                if _read_text(wr.path) != wr.value
                and not (wr.path.name == "online" and wr.value == "0" and not wr.path.exists())]

    def _do(self, writes: list[Write]) -> None:
        for wr in writes:
            LOG.debug("write %s <- %s", wr.path, wr.value)
            try:
                self._write(wr.path, wr.value)
            except PermissionError as e:
                if os.geteuid() != 0:
                    raise BackendError("applying a mode needs root: run it again with sudo, e.g. "
                                       "`sudo $(which ptui) apply ...`") from None
                # root refused: an immutable file (chattr +i), a read-only mount, a security
                # module; said as such, not as a missing sudo (a user's trial)
                raise ApplyError(f"writing {wr.value} to {wr.path} failed: {e.strerror or e} "
                                 f"(as root: an immutable file or a read-only file system?)") from None
            except OSError as e:
                raise ApplyError(f"writing {wr.value} to {wr.path} failed: {e.strerror or e}") from None

    def _do_all(self, writes: list[Write]) -> list[tuple[Path, str]]:
        """A restore's writes, each one tried: a write that fails on a file already holding its
        value is no failure, another is noted and the rest still made (returned: (path, what
        could not be written)).  The rollback of a failed apply stopped at its first failure,
        rewriting a GPU limit it had never changed on a file that refused writes, and left four
        cores online (a user's trial)."""
        failed: list[tuple[Path, str]] = []
        for wr in writes:
            LOG.debug("write %s <- %s", wr.path, wr.value)
            try:
                self._write(wr.path, wr.value)
            except OSError as e:
                if _read_text(wr.path) != wr.value:
                    failed.append((wr.path, f"writing {wr.value} to {wr.path} failed: {e.strerror or e}"))
        return failed

    def _check_emulator(self, every_s: float = 0.0) -> None:
        """An emulated tree whose emulator stopped since the backend opened is only files (nothing
        plays the board): BackendError, naming the command that starts it again.  Looked at no
        more often than every `every_s` seconds (the sampler reads twice a second)."""
        now = time.monotonic()
        if now - self._emulator_seen >= every_s:
            self._emulator_seen = now
            self._emulator_stopped = emulator_not_running(self.root, self.device.name)
        if self._emulator_stopped:
            raise BackendError(self._emulator_stopped)

    def apply_mode(self, mode: Mode) -> Mode:
        mode = make_mode(self.device, *mode.as_tuple())
        if self.emulated:                  # a profile's next mode: nothing would play the board
            self._check_emulator()
        snap = self._state()
        try:
            writes = self._writes(mode)
            self._do(writes)
            bad = self._not_read_back(writes)
            if bad:
                raise ApplyError("read-back mismatch: " + "; ".join(bad[:3]))
            got = self.current_mode()
            if got != mode:
                raise ApplyError(f"device reports {got.key} after applying {mode.key}")
            return got
        except BackendError as e:
            if isinstance(e, ApplyError) or "root" not in str(e):
                try:
                    self.restore(snap)
                except Exception as e2:  # noqa: BLE001
                    raise ApplyError(f"{e}; ROLLBACK FAILED: {e2}") from None
                raise ApplyError(f"{e}; rolled back to the previous state") from None
            raise

    def restore(self, snap) -> None:
        """Write a snapshot back: cores online first, frequencies (legal order), cores offline."""
        if isinstance(snap, Mode):
            self.apply_mode(snap)
            return
        if self.emulated:     # a stopped emulator's files read back as written: no board went back
            self._check_emulator()
        now = _read_text(self.root / NVPMODEL_STATUS) or ""
        if snap.get("nvpmodel") is not None and f"pmode:{snap['nvpmodel']:04d}" not in now:
            self.run_nvpmodel(snap["nvpmodel"])            # back to the preset first, then the exact values
        ws: list[Write] = []
        online = {int(k): v for k, v in snap["online"].items()}
        for c, v in sorted(online.items()):
            if v == "1":
                ws.append(Write(self._cpu(c) / "online", "1", "restore"))
        limits = {int(pc): v for pc, v in snap["cpufreq"].items()}
        first = next(iter(limits.values()), None)
        for cl in self.device.cpu_clusters:
            pc = next((c for c in cl if c in limits), None)
            on = [c for c in cl if c == 0 or not (self._cpu(c) / "online").exists()
                  or online.get(c) == "1" or self._num(self._cpu(c) / "online") == 1]
            if pc is None and on and first is not None and (self._cpu(on[0]) / "cpufreq").is_dir():
                # online now, offline and unreadable at the snapshot (an inactive policy):
                # nvpmodel pins every cluster alike, so give it the first cluster's limits
                limits[on[0]], pc = first, on[0]
            if pc is None or pc not in on:
                continue                             # stays offline: its limits are untouched
            mn, mx = limits[pc]
            d = self._cpu(pc) / "cpufreq"
            cur_max = self._num(d / "scaling_max_freq") or 0
            pairs = [("scaling_max_freq", mx), ("scaling_min_freq", mn)] if float(mx) > cur_max else \
                    [("scaling_min_freq", mn), ("scaling_max_freq", mx)]
            ws += [Write(d / f, v, "restore") for f, v in pairs]
        if snap["gpu"] and self.gpu_dir:
            mn, mx = snap["gpu"]
            cur_max = self._num(self.gpu_dir / "max_freq") or 0
            pairs = [("max_freq", mx), ("min_freq", mn)] if float(mx) > cur_max else \
                    [("min_freq", mn), ("max_freq", mx)]
            ws += [Write(self.gpu_dir / f, v, "restore") for f, v in pairs]
        if snap["emc"] and self.emc_dir:
            locked, rate = snap["emc"]
            ws.append(Write(self.emc_dir / "rate", rate, "restore"))
            ws.append(Write(self.emc_dir / "mrq_rate_locked", locked, "restore"))
        for c, v in sorted(online.items(), reverse=True):
            if v == "0":
                ws.append(Write(self._cpu(c) / "online", "0", "restore"))
        failed = self._do_all(ws)
        gone = {p for p, _ in failed}
        bad = self._not_read_back([w for w in ws if w.path not in gone])
        if failed or bad:
            said = [m for _, m in failed[:3]]
            if bad:
                said.append("did not read back: " + "; ".join(bad[:3]))
            raise ApplyError(("restore: " if failed else "restore ") + "; ".join(said))

    # -- nvpmodel presets and persistence ---------------------------------------------------------
    def run_nvpmodel(self, mode_id: int) -> None:
        """Run `nvpmodel -m mode_id` (also the jtop backend's fallback when its service cannot), in
        a session of its own: Ctrl-C in the terminal went to the whole foreground process group,
        nvpmodel included, and could cut it half-way through a preset while ptui itself held the
        signal until the switch was done (board.signals.shielded)."""
        try:
            r = subprocess.run([self.nvpmodel_cmd, "-m", str(mode_id)], capture_output=True, text=True,
                               timeout=20, input="NO\n", start_new_session=True)
        except FileNotFoundError:
            raise BackendError(f"nvpmodel was not found (looked for {self.nvpmodel_cmd!r}); it comes with "
                               f"JetPack (package nvidia-l4t-nvpmodel)") from None
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BackendError(f"nvpmodel -m {mode_id} failed: {e}") from None
        out = " ".join((r.stdout + r.stderr).split())           # one line
        if r.returncode not in (0, 255) or "NVPM ERROR" in out:
            raise BackendError(f"nvpmodel -m {mode_id} failed: {out[:200]}")
        if "reboot" in out.lower():
            raise BackendError(f"nvpmodel mode {mode_id} needs a reboot (GPU power-gating change); "
                               f"ptui will not reboot the board: run `sudo nvpmodel -m {mode_id}` yourself")

    def apply_preset(self, key) -> Mode:
        """Select an NVIDIA preset with nvpmodel and verify the board reached its caps."""
        p = self.device.preset(key)
        snap = self._state()
        try:
            self.run_nvpmodel(p.id)
        except BackendError as e:
            # nvpmodel can fail (or stop for a reboot) after changing part of the board
            try:
                self.restore(snap)
            except Exception as e2:  # noqa: BLE001
                raise BackendError(f"{e}; ROLLBACK FAILED: {e2}; check the device") from None
            raise BackendError(f"{e}; the previous state was restored") from None
        got = self.current_mode()
        if got != p.mode:
            self.restore(snap)
            raise ApplyError(f"after nvpmodel -m {p.id} the board reports {got.key}, not {p.mode.key}; "
                             f"rolled back")
        return got

    # -- persistence (nvpmodel) -------------------------------------------------------------------
    def persist(self, mode: Mode, mode_id: int = 99, name: str = "PTUI") -> str:
        """Write a custom POWER_MODEL into the nvpmodel conf (backup kept) and select it."""
        conf = self.nvpmodel_conf
        try:
            raw = conf.read_bytes()
        except OSError as e:
            raise BackendError(f"cannot read {conf}: {e.strerror or e}") from None
        text = raw.decode("utf-8", "surrogateescape")       # bytes we do not touch stay as they are
        backup = conf.with_name(conf.name + ".ptui-backup")
        made_backup = not backup.exists()
        try:
            if made_backup:                                 # the first original is the one kept
                write_atomic(backup, raw)
            block = nvpmodel_block(self.device, mode, mode_id, name)
            write_atomic(conf, _replace_power_model(text, mode_id, block).encode("utf-8", "surrogateescape"))
        except OSError as e:
            raise BackendError(f"cannot write {conf}: {e.strerror or e}") from None
        try:
            self.run_nvpmodel(mode_id)
        except BackendError as e:
            try:
                write_atomic(conf, raw)                    # nothing selected: leave the conf as it was
            except OSError as e2:
                # a disk full or a conf made immutable meanwhile: it escaped as a traceback
                raise BackendError(f"{e}; and {conf} could not be put back as it was "
                                   f"({e2.strerror or e2}): it holds ptui's mode {mode_id}, and its "
                                   f"original is in {backup}") from None
            if made_backup:
                try:
                    backup.unlink()
                except OSError:
                    pass                                   # the original's copy, kept
            raise BackendError(f"{e}; {conf} left as it was") from None
        return (f"mode {mode.key} saved as nvpmodel {mode_id} ({name}) in {conf}; backup "
                f"{backup}; it survives a reboot")

    def persisted(self, mode: Mode, mode_id: int = 99, name: str = "PTUI") -> bool:
        """nvpmodel already keeps `mode`: its status file names `mode_id` and nvpmodel.conf holds
        the very block persist would write (so a playbook's --persist converges)."""
        if self.nvpmodel_id() != mode_id:
            return False
        try:
            text = self.nvpmodel_conf.read_text("utf-8", "surrogateescape")
        except OSError:
            return False
        want = nvpmodel_block(self.device, mode, mode_id, name).splitlines()
        return _power_model_lines(text, mode_id) == want

    def close(self) -> None:
        with self._fd_lock:
            for fd in self._fds.values():
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._fds.clear()


def nvpmodel_block(device: Device, mode: Mode, mode_id: int, name: str) -> str:
    """A POWER_MODEL block pinning the mode (CPU kHz, GPU and EMC Hz); TPC mask unchanged."""
    lines = [f"< POWER_MODEL ID={mode_id} NAME={name} >"]
    for c in range(1, device.max_cores):
        lines.append(f"CPU_ONLINE CORE_{c} {1 if c < mode.cores else 0}")
    prefix = "CPU_DENVER" if device.name == "xavier-agx" else "CPU_A78"
    khz = int(round(mode.cpu_mhz * 1000))
    for i, cl in enumerate(device.cpu_clusters):
        if cl[0] < mode.cores:
            lines += [f"{prefix}_{i} MIN_FREQ {khz}", f"{prefix}_{i} MAX_FREQ {khz}"]
    hz = int(round(mode.gpu_mhz * 1e6))
    lines += [f"GPU MIN_FREQ {hz}", f"GPU MAX_FREQ {hz}",
              f"EMC MAX_FREQ {0 if mode.mem_mhz == device.mem_mhz[-1] else int(round(mode.mem_mhz * 1e6))}"]
    return "\n".join(lines) + "\n"


def _power_model_lines(text: str, mode_id: int) -> list[str]:
    """The POWER_MODEL block `mode_id` of an nvpmodel.conf: its header and lines, stripped, blank
    lines left out (none where the conf has no such block)."""
    out: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("<"):
            if out:
                break
            if s.startswith("< POWER_MODEL") and f"ID={mode_id} " in s + " ":
                out.append(s)
        elif out and s:
            out.append(s)
    return out


def _replace_power_model(text: str, mode_id: int, block: str) -> str:
    out, skip = [], False
    for line in text.splitlines(keepends=True):
        s = line.strip()
        if s.startswith("< POWER_MODEL") and f"ID={mode_id} " in s + " ":
            skip = True
            continue
        if skip and s.startswith("<"):
            skip = False
        if not skip:
            out.append(line)
    body = "".join(out)
    i = body.find("< PM_CONFIG")
    return body[:i] + block + "\n" + body[i:] if i >= 0 else body + "\n" + block


def _key(d: dict, k: int):
    """`d`'s key for the number k (an int in memory, its text once read back from JSON)."""
    return k if k in d else str(k)


# how far a saved frequency may lie outside the device's table (a governor's range on an unpinned
# board is within it; a typo or a corrupted digit is not)
_SLACK = 0.02


def _mhz_in_table(dev: Device, v, table_mhz, scale, what) -> float:
    """The saved frequency `v` (a string of digits, in 1/`scale` MHz) in MHz, refused unless it
    lies within `table_mhz` give or take _SLACK."""
    if not (isinstance(v, str) and v.isascii() and v.isdigit()):   # the kernel reads 0-9 only
        raise DamagedSnapshot(f"{what} {v!r} is not a whole number")
    mhz = int(v) / scale
    lo, hi = min(table_mhz) * (1 - _SLACK), max(table_mhz) * (1 + _SLACK)
    if not lo <= mhz <= hi:
        raise DamagedSnapshot(f"{what} {mhz:g} MHz is outside {dev.name}'s range "
                              f"{min(table_mhz):g}-{max(table_mhz):g} MHz")
    return mhz


def _pair(v, what):
    if not (isinstance(v, (list, tuple)) and len(v) == 2):
        raise DamagedSnapshot(f"{what} is not a (min, max) pair: {str(v)[:60]}")
    return v


def _core(dev: Device, k, what) -> int:
    try:
        c = int(k)
    except (TypeError, ValueError):
        c = -1
    if not 0 <= c < dev.max_cores:
        raise DamagedSnapshot(f"{what} names cpu{k}, which {dev.name} (cpu0-{dev.max_cores - 1}) "
                              f"does not have")
    return c


def _check_limits(dev: Device, v, table_mhz, scale, what: str) -> None:
    """A saved (min, max) frequency pair: both within the table, the minimum not above the maximum."""
    mn, mx = _pair(v, f"{what} limits")
    if _mhz_in_table(dev, mn, table_mhz, scale, f"{what} minimum") > _mhz_in_table(
            dev, mx, table_mhz, scale, f"{what} maximum"):
        raise DamagedSnapshot(f"{what} minimum {mn} is above its maximum {mx}")


def _check_cpus(dev: Device, online: dict, cpufreq: dict) -> None:
    for k, v in online.items():
        if _core(dev, k, "the online table") == 0:
            raise DamagedSnapshot("the online table names cpu0, which cannot go offline")
        if v not in ("0", "1"):
            raise DamagedSnapshot(f"cpu{k} online is {v!r}, not 0 or 1")
    for k, v in cpufreq.items():
        _core(dev, k, "the cpufreq table")
        _check_limits(dev, v, dev.cpu_mhz, 1e3, f"cpu{k}'s CPU")


def _check_emc(dev: Device, emc) -> None:
    locked, rate = _pair(emc, "the EMC state")
    if locked not in ("0", "1"):
        raise DamagedSnapshot(f"the EMC lock flag is {locked!r}, not 0 or 1")
    _mhz_in_table(dev, rate, dev.mem_mhz, 1e6, "the EMC rate")


def check_state(dev: Device, st) -> None:
    """Refuse a saved sysfs state that does not fit this board: its structure, core numbers,
    on/off flags, and every frequency within the device's table range.  DamagedSnapshot says
    the first thing wrong."""
    if not isinstance(st, dict) or not {"online", "cpufreq", "gpu", "emc"} <= set(st):
        raise DamagedSnapshot("it is not a saved sysfs state (online, cpufreq, gpu, emc)")
    if not isinstance(st["online"], dict) or not isinstance(st["cpufreq"], dict):
        raise DamagedSnapshot("its online or cpufreq part is not a table")
    _check_cpus(dev, st["online"], st["cpufreq"])
    if st["gpu"] is not None:
        _check_limits(dev, st["gpu"], dev.gpu_mhz, 1e6, "the GPU")
    if st["emc"] is not None:
        _check_emc(dev, st["emc"])
    nvp = st.get("nvpmodel")
    if nvp is not None and not (isinstance(nvp, int) and not isinstance(nvp, bool) and 0 <= nvp < 1000):
        raise DamagedSnapshot(f"the nvpmodel mode {nvp!r} is not a mode number")


def own_nvpmodel(root: Path) -> str | None:
    """The tree's own nvpmodel, ROOT/bin/nvpmodel, under a root other than / (None: use PATH's)."""
    f = Path(root) / "bin/nvpmodel"
    if os.path.abspath(root) != "/" and f.is_file() and os.access(f, os.X_OK):
        return str(f)
    return None


def _read_text(path: Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _nearest_mode(dev: Device, cores: int, cpu, gpu, emc) -> Mode:
    def snap(v, table):
        return min(table, key=lambda x: abs(x - v))
    return Mode(max(1, cores), snap(cpu, dev.cpu_mhz), snap(gpu, dev.gpu_mhz), snap(emc, dev.mem_mhz))
