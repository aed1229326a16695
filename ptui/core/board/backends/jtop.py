"""Real Jetson through the jetson-stats (jtop) service: telemetry and nvpmodel.

jetson-stats is AGPL and optional: it is imported only when its service socket exists.  jtop cannot
set frequencies or cores, so applying a mode goes through the sysfs backend (root).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from ...catalogue.devices import Device
from ...catalogue.modes import Mode
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
        _forget_old_connection()
        try:
            self._j = jtop(interval=interval)
            self._j.start()
        except Exception as e:  # noqa: BLE001 - JtopException, EOFError, OSError...: all one line
            msg = (str(e).splitlines() or [type(e).__name__])[0]
            raise BackendError(f"cannot connect to the jtop service: {msg}") from None
        self._sysfs = SysfsBackend(device, root=root)
        self.emulated = self._sysfs.emulated
        # a service whose sampler died (one failed `nvpmodel -q` is enough) keeps serving its last
        # sample forever: a sample whose uptime has not moved for this long is refused (the service
        # samples at the interval its first client asked for, which may be slower than ours)
        try:
            served = float(self._j.interval or 0.0)
        except (TypeError, ValueError, AttributeError):
            served = 0.0
        self.stale_s = max(10.0, 20 * max(interval, served))
        self._last_uptime: object = None
        self._last_new = time.monotonic()

    def _sample(self) -> None:
        """Let the client take the service's latest sample; BackendError if the connection is gone
        or the service has stopped sampling (the board's uptime in its samples has not moved for
        `stale_s`; not judged before a first uptime is in)."""
        try:
            self._j.ok(spin=True)
        except (self._jtop_exc, EOFError, OSError) as e:   # a dead service's pipe: OSError, EOFError
            raise BackendError(f"jtop: {_one_line(e)}") from None
        try:
            up = self._j.uptime
        except Exception:  # noqa: BLE001 - no sample in yet, or a jetson-stats without uptime
            up = None
        now = time.monotonic()
        if up is not None and up != self._last_uptime:
            self._last_uptime, self._last_new = up, now
        elif self._last_uptime is not None and now - self._last_new > self.stale_s:
            raise BackendError(f"the jtop service has sent no new sample for {now - self._last_new:.0f} s "
                               "(its sampler stopped; `journalctl -u jtop` says why): "
                               "sudo systemctl restart jtop, or use --backend sysfs")

    def read(self) -> Telemetry:
        j = self._j
        self._sample()
        try:
            power = j.power or {}
            cpu = j.cpu or {}
            gpu = dict(j.gpu) if j.gpu else {}
            mem = j.memory or {}
            temps_raw = j.temperature or {}
            nvp = j.nvpmodel
        except (self._jtop_exc, EOFError, OSError) as e:
            raise BackendError(f"jtop: {_one_line(e)}") from None
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

    def snapshot_json(self, snap):
        return self._sysfs.snapshot_json(snap)

    def snapshot_from_json(self, obj):
        return self._sysfs.snapshot_from_json(obj)

    def snapshot_mode(self, snap) -> Mode:
        return self._sysfs.snapshot_mode(snap)

    def restore(self, snap) -> None:
        """The nvpmodel mode goes back through the service, then the exact values through sysfs.
        If the service cannot switch back, ptui runs nvpmodel itself (it is root for the sysfs
        writes anyway); if that fails too, the exact values still go back and the error says what
        the board's nvpmodel status is left at."""
        nvp = snap.get("nvpmodel") if isinstance(snap, dict) else None
        if nvp is not None:
            # a switch the service is still running would land after this restore: let it finish
            self._service_idle(40.0)
        if nvp is None or self._sysfs.nvpmodel_id() == nvp:
            # the service owns nvpmodel (it runs it as root): sysfs writes only the exact values
            self._sysfs.restore(dict(snap, nvpmodel=None) if isinstance(snap, dict) else snap)
            return
        # a restore is the safety path: wait longer than an apply (nvpmodel on a busy board can take
        # a while) and trust the board's own status file if the service lags behind it
        try:
            why = self._select_nvpmodel(nvp, timeout=40.0)
        except Exception as e:  # noqa: BLE001 - whatever the client raised, the board goes back
            why = _one_line(e)
        ran = None
        if why is not None and self._sysfs.nvpmodel_id() != nvp:
            try:
                self._sysfs.run_nvpmodel(nvp)         # ptui runs it itself, then the exact values
            except BackendError as e:
                ran = _one_line(e)
        try:
            self._sysfs.restore(dict(snap, nvpmodel=None))
        except BackendError as e:
            if why is None:
                raise
            raise BackendError(f"nvpmodel {nvp} could not be restored through jtop ({why}); putting "
                               f"the exact values back failed: {_one_line(e)}") from None
        if ran is not None:
            raise BackendError(f"nvpmodel {nvp} could not be restored: {why}; running nvpmodel here "
                               f"failed too ({ran}); the clocks, cores and memory rate are back, the "
                               f"board's nvpmodel status says {self._sysfs.nvpmodel_id()}")

    def _service_idle(self, timeout: float) -> bool:
        """Wait until the service runs no nvpmodel switch (it drops new requests meanwhile, and
        reports the mode from before the switch); True once idle."""
        end = time.monotonic() + timeout
        while True:
            nvp = self._j.nvpmodel
            if nvp is None or not nvp.is_running():
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.1)
            try:
                self._sample()
            except BackendError:
                return False

    def plan_writes(self, target: Mode) -> list[str]:
        return self._sysfs.plan_writes(target)

    def holds(self, target: Mode) -> bool:
        return self._sysfs.holds(target)

    def nvpmodel_id(self) -> int | None:
        return self._sysfs.nvpmodel_id()

    def _select_nvpmodel(self, mode_id: int, timeout: float = 15.0) -> str | None:
        """Ask the service to switch nvpmodel mode: None once it reports the new mode, else why
        not.  A switch the service reports as failed ends the wait at once; a service that stopped
        sampling raises BackendError (its reports would never change)."""
        t0 = time.monotonic()
        end = t0 + 5.0
        while self._j.nvpmodel is None and time.monotonic() < end:   # first sample not in yet
            self._sample()
            time.sleep(0.05)
        if self._j.nvpmodel is None:
            raise BackendError("the jtop service reports no nvpmodel on this board")
        self._sample()
        end = t0 + timeout
        if not self._service_idle(end - time.monotonic()):
            return f"the jtop service was still running an earlier nvpmodel switch after {timeout:.0f} s"
        if self._j.nvpmodel.id == mode_id:
            return None
        # the service keeps one success flag per mode: a flag that was set before this request and
        # is clear once its nvpmodel run is over means this run failed
        was_ok = _switch_ok(self._j.nvpmodel, mode_id)
        try:
            self._j.nvpmodel = mode_id
        except (self._jtop_exc, EOFError, OSError) as e:
            raise BackendError(f"jtop refused nvpmodel {mode_id}: {_one_line(e)}") from None
        seen_running = running = False
        while time.monotonic() < end:
            self._sample()
            nvp = self._j.nvpmodel
            running = bool(nvp.is_running())         # while it runs, the service reports the old mode
            seen_running = seen_running or running
            if not running and nvp.id == mode_id:
                return None
            if not running and (was_ok or seen_running) and not _switch_ok(nvp, mode_id):
                return (f"the jtop service ran nvpmodel -m {mode_id} and it failed "
                        "(`journalctl -u jtop` says why)")
            time.sleep(0.1)
        if running:
            return f"the jtop service was still running nvpmodel -m {mode_id} after {timeout:.0f} s"
        return f"the jtop service did not report nvpmodel {mode_id} within {timeout:.0f} s"

    def apply_preset(self, key, timeout: float = 30.0) -> Mode:
        """Select an NVIDIA preset through the jtop service (it runs nvpmodel as root), wait for
        it, and verify the board's clocks through sysfs; roll back on a mismatch.  A service that
        stopped sampling or a client that failed is reported the same way (the board put back)."""
        p = self.device.preset(key)
        snap = self._sysfs.snapshot()
        try:
            why = self._select_nvpmodel(p.id, timeout)
        except Exception as e:  # noqa: BLE001 - the request may be out: roll back all the same
            why = _one_line(e)
        if why is None and self.current_mode() == p.mode:
            return p.mode
        why = (f"nvpmodel {p.name} not reached through jtop: "
               f"{why or 'the board is not in its mode'} (board reports {self.current_mode().key})")
        try:
            self.restore(snap)
        except BackendError as e:                # the first cause first, then the failed rollback
            raise ApplyError(f"{why}; rolling back failed: {e}") from None
        raise ApplyError(f"{why}; rolled back")

    def persist(self, mode: Mode) -> str:
        return self._sysfs.persist(mode)

    def persisted(self, mode: Mode) -> bool:
        return self._sysfs.persisted(mode)

    def close(self) -> None:
        try:
            self._j.close()
        except Exception:  # noqa: BLE001 - closing a dead connection
            pass
        self._sysfs.close()


def _forget_old_connection() -> None:
    """jtop's client talks through multiprocessing proxies, which keep one connection per socket
    address for the life of the process: after the service restarts, a new client in the same
    process would reuse the dead one ('Broken pipe').  Proxies made earlier keep their own."""
    try:
        from multiprocessing.managers import BaseProxy
        BaseProxy._address_to_local.pop(JTOP_SOCKET, None)
    except (ImportError, AttributeError):      # another Python's multiprocessing: nothing cached
        pass


def _one_line(e) -> str:
    """An exception (or text) as one line: its words joined by spaces, or its type's name."""
    return " ".join(str(e).split()) or type(e).__name__


def _switch_ok(nvp, mode_id: int) -> bool:
    """The service's flag for its last nvpmodel run to `mode_id` (True where it keeps none)."""
    try:
        return bool(nvp.status[mode_id])
    except (IndexError, KeyError, TypeError, AttributeError):
        return True


__all__ = ["JtopBackend", "jtop_available", "Path"]
