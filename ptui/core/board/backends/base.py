"""The interface every device backend implements: the simulator, sysfs and jtop."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...catalogue.devices import Device
from ...catalogue.modes import Mode, ModeError, make_mode
from ...clock import RealClock
from ...errors import RuntimeFailure

if TYPE_CHECKING:
    from ...clock import Clock


class BackendError(RuntimeFailure):
    """A device operation failed (no permission, no sensor, service down...)."""


class ApplyError(BackendError):
    """Applying a mode failed or did not read back; the backend rolled back."""


class DamagedSnapshot(BackendError):
    """A saved board state that does not describe this board (unreadable, another device, values
    off its frequency tables or core count): refused before anything is written."""


@dataclass(frozen=True)
class Telemetry:
    """One snapshot of the device.  Any field may be None when its sensor is missing."""
    t: float                              # seconds on the backend's clock
    power_w: float | None                 # module total (sum of rails or the input rail)
    rails: dict[str, float] = field(default_factory=dict)   # W per INA3221 rail
    cpu_mhz: float | None = None
    gpu_mhz: float | None = None
    mem_mhz: float | None = None
    cores_online: int | None = None
    gpu_load: float | None = None         # percent
    temps: dict[str, float] = field(default_factory=dict)   # degrees C per thermal zone
    nvpmodel: str | None = None


@dataclass(frozen=True)
class MinibatchEvent:
    t_end: float        # when the minibatch finished (backend clock)
    ms: float           # its duration
    index: int          # index since the training run started


class Backend(ABC):
    """A device.  What a backend can do beyond reading and applying modes is declared by the
    capability flags below; callers test the flags, never hasattr."""
    kind: str = "?"
    simulated: bool = False
    can_persist: bool = False
    """persist(mode) keeps a mode across reboots (nvpmodel)."""
    can_select_presets: bool = False
    """apply_preset(key) selects one of NVIDIA's nvpmodel presets."""
    plans_writes: bool = False
    """plan_writes(target) lists the exact writes apply_mode() will make."""
    emulated: bool = False
    """the board is an emulated tree made by `ptui emulate` (its readings are SIMULATED)."""
    trains_builtin: bool = False
    """start_training(workload) trains a catalog workload inside the backend (the simulator); on
    other backends ptui profiles its own torch training loop (or the user's script) under the probe."""

    def __init__(self, device: Device) -> None:
        self.device = device

    @property
    def not_live(self) -> bool:
        """Its figures are not a live board's: the simulator, a recording or an emulated tree
        (labelled SIMULATED wherever they are shown or written)."""
        return bool(self.simulated or self.emulated)

    def labelled(self, noun: str = "device") -> str:
        """The device named as ptui's other messages name it where it is not a live board: a
        restore of the SIMULATED (or REPLAY) board changes nothing on this machine, one of an
        EMULATED tree only its files."""
        label = ("REPLAY" if self.kind == "replay" else "SIMULATED" if self.simulated else
                 "EMULATED" if self.emulated else "")
        return f"{label} {noun}".strip()

    @abstractmethod
    def read(self) -> Telemetry:
        """Sample all sensors once."""

    @abstractmethod
    def current_mode(self) -> Mode:
        """The mode the device is in now, read from the device."""

    @abstractmethod
    def apply_mode(self, mode: Mode) -> Mode:
        """Apply and verify a mode; return the read-back.  Raises ApplyError after rolling back."""

    def snapshot(self):
        """Opaque state to return to later with restore() (the mode before ptui touched it)."""
        return self.current_mode()

    def restore(self, snap) -> None:
        self.apply_mode(snap)

    # A snapshot kept on disk (ptui restore, a profile's start state) goes through these three: the
    # JSON form, the checked way back, and the mode the state puts the board in.
    def snapshot_json(self, snap):
        """`snap` as plain JSON values."""
        return list(snap.as_tuple())

    def snapshot_from_json(self, obj):
        """The snapshot `obj` (from snapshot_json, read back from disk) describes, checked against
        this device's tables and core count; DamagedSnapshot when it does not fit."""
        return _json_mode(self.device, obj, "the saved mode")

    def snapshot_mode(self, snap) -> Mode:
        """The mode the board reads back once `snap` is restored."""
        return snap

    def persist(self, mode: Mode) -> str:
        raise BackendError(f"keeping a mode across reboots needs a real Jetson (nvpmodel); "
                           f"the {self.kind} backend cannot")

    def persisted(self, mode: Mode) -> bool:
        """nvpmodel already keeps `mode` across reboots: a persist would write nothing new."""
        return False

    def apply_preset(self, key) -> Mode:
        raise BackendError(f"the {self.kind} backend cannot select nvpmodel presets")

    def plan_writes(self, target: Mode) -> list[str]:
        raise BackendError(f"the {self.kind} backend cannot list its writes")

    def nvpmodel_id(self) -> int | None:
        """The nvpmodel mode the board's status file names (None: no nvpmodel here)."""
        return None

    def gated_tpcs(self) -> int | None:
        """How many of the GPU's TPCs are powered while the board's power gating (nvpmodel's
        TPC_PG_MASK, set at boot: a reboot-level knob) holds them off, which no apply changes;
        None when none is gated or it cannot be read (the simulator, whose custom modes power
        them all)."""
        return None

    def holds(self, target: Mode) -> bool:
        """The board is in `target` and held there: applying it would change nothing."""
        return self.current_mode() == target

    # Profiling needs a training workload that reports minibatches: the simulator runs its own,
    # real boards run a probe inside a training script.
    def start_training(self, workload) -> None:
        raise BackendError(f"the {self.kind} backend cannot run a built-in workload")

    def stop_training(self) -> None:
        pass

    def events(self, interval: float | None = None):
        """Yield MinibatchEvent and Telemetry objects in time order."""
        raise BackendError(f"the {self.kind} backend cannot stream measurements")

    def close(self) -> None:
        pass

    _clock: Clock       # a backend's own (the simulator's virtual clock), else a real one on first use

    @property
    def clock(self) -> Clock:
        c: Clock | None = getattr(self, "_clock", None)
        if c is None:
            c = self._clock = RealClock()
        return c


def _json_mode(device: Device, obj, what: str) -> Mode:
    """A Mode from its JSON list, on this device's tables, else DamagedSnapshot."""
    if not (isinstance(obj, (list, tuple)) and len(obj) == 4
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in obj)):
        raise DamagedSnapshot(f"{what} is not a (cores, CPU, GPU, EMC) mode: {str(obj)[:80]}")
    try:
        return make_mode(device, *obj)
    except ModeError as e:
        raise DamagedSnapshot(f"{what} is not a mode of {device.name}: {e}") from None
