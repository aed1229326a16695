"""Real Jetson through the jetson-stats (jtop) service: telemetry and nvpmodel.

jetson-stats is AGPL and optional: it is imported only when its service socket exists.  jtop cannot
set frequencies or cores, so applying a mode goes through the sysfs backend (root).
"""
from __future__ import annotations

import os
from pathlib import Path

from ..devices import Device
from ..modes import Mode
from .base import ApplyError, Backend, BackendError, Telemetry
from .sysfs import SysfsBackend

JTOP_SOCKET = "/run/jtop.sock"


def jtop_available() -> bool:
    if not os.path.exists(JTOP_SOCKET):
        return False
    try:
        import importlib.util
        return importlib.util.find_spec("jtop") is not None
    except ValueError:
        return False


class JtopBackend(Backend):
    kind = "jtop"
    simulated = False
    can_persist = True
    can_select_presets = True
    plans_writes = True

    def __init__(self, device: Device, interval: float = 0.5, root: str | os.PathLike = "/") -> None:
        super().__init__(device)
        if not os.path.exists(JTOP_SOCKET):
            raise BackendError("the jtop service is not running (no /run/jtop.sock): "
                               "sudo systemctl restart jtop, or use --backend sysfs")
        try:
            from jtop import JtopException, jtop
        except ImportError:
            raise BackendError("the jtop service runs but jetson-stats is not installed here: "
                               "pip install jetson-stats (same version as the service)") from None
        self._jtop_exc = JtopException
        try:
            self._j = jtop(interval=interval)
            self._j.start()
        except Exception as e:  # noqa: BLE001 - JtopException, EOFError, OSError...: all one line
            msg = (str(e).splitlines() or [type(e).__name__])[0]
            raise BackendError(f"cannot connect to the jtop service: {msg}") from None
        self._sysfs = SysfsBackend(device, root=root)

    def read(self) -> Telemetry:
        j = self._j
        try:
            j.ok(spin=True)
            power = j.power or {}
            cpu = j.cpu or {}
            gpu = dict(j.gpu) if j.gpu else {}
            mem = j.memory or {}
            temps_raw = j.temperature or {}
            nvp = j.nvpmodel
        except self._jtop_exc as e:
            raise BackendError(f"jtop: {str(e).splitlines()[0]}") from None
        rails = {name: round(r.get("power", 0) / 1000.0, 3) for name, r in power.get("rail", {}).items()
                 if r.get("online", True)}
        tot = power.get("tot", {}).get("power")
        cores = [c for c in cpu.get("cpu", []) if c.get("online")]
        cpu_khz = next((c["freq"]["cur"] for c in cores if c.get("freq")), None)
        g = next(iter(gpu.values()), None)
        gpu_khz = g["freq"]["cur"] if g and g.get("freq") else None
        load = g["status"].get("load") if g and g.get("status") else None
        emc = mem.get("EMC", {})
        temps = {k: round(v["temp"], 1) for k, v in temps_raw.items()
                 if v.get("online", True) and v.get("temp", -256) > -256}
        return Telemetry(
            t=self.clock.now(), power_w=round(tot / 1000.0, 3) if tot is not None else None,
            rails=rails, cpu_mhz=cpu_khz / 1000.0 if cpu_khz else None,
            gpu_mhz=gpu_khz / 1000.0 if gpu_khz else None,
            mem_mhz=emc.get("cur") / 1000.0 if emc.get("cur") else None,
            cores_online=len(cores) if cores else None, gpu_load=load, temps=temps,
            nvpmodel=str(nvp) if nvp is not None else None)

    # applying goes through sysfs: jtop has no frequency or core controls
    def current_mode(self) -> Mode:
        return self._sysfs.current_mode()

    def apply_mode(self, mode: Mode) -> Mode:
        return self._sysfs.apply_mode(mode)

    def snapshot(self):
        return self._sysfs.snapshot()

    def restore(self, snap) -> None:
        """The nvpmodel mode goes back through the service, then the exact values through sysfs."""
        nvp = snap.get("nvpmodel") if isinstance(snap, dict) else None
        cur = self._sysfs.snapshot().get("nvpmodel")            # the board's own status file
        # a restore is the safety path: wait longer than an apply (nvpmodel on a busy board can
        # take a while) and trust the board's own status file if the service lags behind it
        if nvp is not None and cur != nvp and not self._select_nvpmodel(nvp, timeout=40.0) \
                and self._sysfs.snapshot().get("nvpmodel") != nvp:
            raise BackendError(f"jtop did not switch back to nvpmodel {nvp}")
        # the service owns nvpmodel (it runs it as root): sysfs writes only the exact values, and
        # never runs the nvpmodel command because the board's status file lags behind the service
        self._sysfs.restore(dict(snap, nvpmodel=None) if isinstance(snap, dict) else snap)

    def plan_writes(self, target: Mode) -> list[str]:
        return self._sysfs.plan_writes(target)

    def _select_nvpmodel(self, mode_id: int, timeout: float = 15.0) -> bool:
        """Ask the service to switch nvpmodel mode; True once it reports the new mode."""
        import time
        end = time.monotonic() + 5.0
        while self._j.nvpmodel is None and time.monotonic() < end:   # first sample not in yet
            self._j.ok(spin=True)
            time.sleep(0.05)
        if self._j.nvpmodel is None:
            raise BackendError("the jtop service reports no nvpmodel on this board")
        try:
            self._j.nvpmodel = mode_id
        except self._jtop_exc as e:
            raise BackendError(f"jtop refused nvpmodel {mode_id}: {str(e).splitlines()[0]}") from None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self._j.ok(spin=True)
            if self._j.nvpmodel is not None and self._j.nvpmodel.id == mode_id:
                return True
            time.sleep(0.1)
        return False

    def apply_preset(self, key, timeout: float = 30.0) -> Mode:
        """Select an NVIDIA preset through the jtop service (it runs nvpmodel as root), wait for
        it, and verify the board's clocks through sysfs; roll back on a mismatch."""
        p = self.device.preset(key)
        snap = self._sysfs.snapshot()
        if self._select_nvpmodel(p.id, timeout) and self.current_mode() == p.mode:
            return p.mode
        why = (f"nvpmodel {p.name} not reached through jtop within {timeout:.0f} s "
               f"(board reports {self.current_mode().key})")
        try:
            self.restore(snap)
        except BackendError as e:                # the first cause first, then the failed rollback
            raise ApplyError(f"{why}; rolling back failed: {e}") from None
        raise ApplyError(f"{why}; rolled back")

    def persist(self, mode: Mode) -> str:
        return self._sysfs.persist(mode)

    def close(self) -> None:
        try:
            self._j.close()
        except Exception:  # noqa: BLE001 - closing a dead connection
            pass
        self._sysfs.close()


__all__ = ["JtopBackend", "jtop_available", "Path"]
