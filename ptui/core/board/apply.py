"""Plan, apply, verify, roll back a power mode.

apply_mode(): snapshot the current state, apply, read every value back; on a mismatch or an error
roll back to the snapshot and say what failed.  Backends describe the exact writes in plan().
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..catalogue.modes import Mode, fmt_mhz
from .backends.base import ApplyError, Backend
from .locks import LockError, board_lock
from .logs import get as _logger
from .signals import shielded

LOG = _logger(__name__)


@dataclass
class Plan:
    current: Mode
    target: Mode
    steps: list[str] = field(default_factory=list)   # human-readable, in order

    @property
    def noop(self) -> bool:
        return self.current == self.target


@dataclass
class ApplyResult:
    ok: bool
    target: Mode
    readback: Mode | None
    snapshot: object
    message: str


def plan(backend: Backend, target: Mode) -> Plan:
    """The exact steps, in a legal order (raise max before min, lower min before max)."""
    cur = backend.current_mode()
    if backend.plans_writes:
        return Plan(cur, target, backend.plan_writes(target))
    steps = []
    def cores(a, b):
        return f"core {a}" if a == b else f"cores {a}..{b}"
    if target.cores > cur.cores:
        steps.append(f"bring {cores(cur.cores, target.cores - 1)} online")
    elif target.cores < cur.cores:
        steps.append(f"take {cores(target.cores, cur.cores - 1)} offline")
    for label, a, b in (("CPU", cur.cpu_mhz, target.cpu_mhz), ("GPU", cur.gpu_mhz, target.gpu_mhz),
                        ("EMC", cur.mem_mhz, target.mem_mhz)):
        if b > a:
            steps.append(f"{label}: raise max to {fmt_mhz(b)} MHz, then min to {fmt_mhz(b)} MHz")
        elif b < a:
            steps.append(f"{label}: lower min to {fmt_mhz(b)} MHz, then max to {fmt_mhz(b)} MHz")
    if not steps:
        steps.append("nothing to change: the device is already in this mode")
    steps.append("read every value back and compare; roll back to the snapshot on any mismatch")
    return Plan(cur, target, steps)


class BoardChanged(ApplyError):
    """The board is not in the mode a plan (or a rollback) was made from: someone changed it since;
    nothing was written."""


def apply_mode(backend: Backend, target: Mode, expect_from: Mode | None = None) -> ApplyResult:
    """Apply, verify, roll back on mismatch; holds the board's lock (LockError when another ptui
    process is changing this board's mode).  expect_from: the mode the user's confirmed plan
    started from; under the lock, a board in another mode is not touched (the plan shown is no
    longer what the writes would do: a user's trial, another ptui applied while apply waited at
    its [y/N])."""
    result = None
    try:
        with board_lock(backend), shielded():      # applied and checked whole, whatever signal comes
            if expect_from is not None and (now := backend.current_mode()) != expect_from:
                return ApplyResult(False, target, None, None,
                                   f"not applied: the board changed since the plan was shown (it is "
                                   f"in {now.key} now, the plan started from {expect_from.key}): run "
                                   f"apply again to see the new plan")
            result = _apply_mode(backend, target)
        return result
    except LockError as e:                   # nothing was touched
        return ApplyResult(False, target, None, None, f"not applied: {e}")
    except KeyboardInterrupt as e:
        # a stop signal held until the mode was whole: the exception carries what was done, so
        # that the caller says it before stopping (it said only 'stopped by SIGTERM', and --json
        # printed nothing, while the mode was applied and verified: a user's trial)
        if result is not None:
            e.applied = result  # type: ignore[attr-defined]
        raise


def _apply_mode(backend: Backend, target: Mode) -> ApplyResult:
    snap = backend.snapshot()
    before = backend.current_mode()
    LOG.debug("apply on %s (%s): %s -> %s", backend.device.name, backend.kind, before.key, target.key)
    try:
        got = backend.apply_mode(target)
        rb = backend.current_mode()
        LOG.debug("read back %s", rb.key)
        if got != target or rb != target:
            raise ApplyError(f"read-back {rb.key} does not match {target.key}")
    except Exception as e:  # noqa: BLE001 - any failure means roll back
        # the backend's own rollback is checked and said once, here ('rolled back to the previous
        # state; rolled back to the previous mode: ...' was said twice)
        why = str(e).removesuffix("; rolled back to the previous state")
        return ApplyResult(False, target, None, snap,
                           f"apply failed: {why}; {_roll_back(backend, snap, before)}")
    return ApplyResult(True, target, rb, snap, f"applied and verified: {rb.describe()}")


def _roll_back(backend: Backend, snap, before: Mode) -> str:
    """Restore the snapshot and say what really happened: a rollback is only reported as done
    when the device reads back the mode it was in before."""
    LOG.debug("rolling back to %s", before.key)
    try:
        backend.restore(snap)
        now = backend.current_mode()
    except Exception as e:  # noqa: BLE001
        return f"ROLLBACK FAILED ({e}); check the device"
    if now != before:
        return (f"ROLLBACK FAILED: the device reports {now.key}, not the previous {before.key}; "
                f"check the device")
    return f"rolled back to the previous mode: {before.describe()}"


def rollback(backend: Backend, snapshot) -> Mode:
    return restore_snapshot(backend, snapshot)


class NotSupported(ApplyError):
    """The backend cannot do what was asked (bad input for this board: exit code 2)."""
    exit_code = 2


def check_persist(backend: Backend) -> None:
    """Up front, before anything is applied: --persist needs nvpmodel on a real board."""
    if backend.simulated or not backend.can_persist:
        raise NotSupported(f"--persist needs a real Jetson (nvpmodel); the {backend.kind} backend "
                         f"cannot keep a mode across reboots; nothing applied")


def select_preset(backend: Backend, preset):
    """Select an nvpmodel preset under the board's lock; return the snapshot taken before."""
    if not backend.can_select_presets:
        raise NotSupported(f"the {backend.kind} backend cannot select presets")
    got = snap = None
    try:
        with board_lock(backend), shielded():
            snap = backend.snapshot()
            got = backend.apply_preset(preset.id)
    except KeyboardInterrupt as e:
        # a stop signal held until the preset was selected and read back: said before stopping,
        # as apply_mode's (it said only 'stopped by SIGTERM', and --json printed nothing)
        if got is not None:
            e.applied = ApplyResult(True, preset.mode, got, snap,  # type: ignore[attr-defined]
                                    f"selected {preset.name}: {got}")
        raise
    return snap


def restore_snapshot(backend: Backend, snap, expect: Mode | None = None) -> Mode:
    """Return the board to a saved state under the board's lock; the mode it is in after.
    expect: the mode the board must be in (the one an apply left, for the app's rollback); in
    another, someone changed it since and BoardChanged is raised, nothing written (the app's `r`
    undid another ptui's later apply without a word: a user's trial)."""
    with board_lock(backend), shielded():
        if expect is not None and (now := backend.current_mode()) != expect:
            raise BoardChanged(f"the board is in {now.describe()} now, not the mode this apply left "
                               f"({expect.describe()}): it was changed since, and rolling back would "
                               f"undo that change; nothing written (ptui restore undoes the last "
                               f"apply, whoever made it)")
        backend.restore(snap)
        return backend.current_mode()


def tpc_note(backend: Backend) -> str | None:
    """A board whose nvpmodel mode gates some of the GPU's TPCs (Orin AGX MODE_30W: 4 of 8) keeps
    them off in every mode ptui applies: the mask is set at boot, and only a reboot into a mode
    that powers them changes it.  An apply there was verified at its clocks while half the GPU
    was off (16.3 W measured against 19.3 W predicted for all 8: a user's trial on an emulated
    board), and nothing said so.  None when every TPC is powered or it cannot be read."""
    on = backend.gated_tpcs()
    if on is None:
        return None
    dev = backend.device
    full = [p.name for p in dev.presets if p.tpc == dev.gpu_tpcs]
    return (f"the GPU has {on} of its {dev.gpu_tpcs} TPCs powered (the TPC power gating of the "
            f"nvpmodel mode the board booted in): every mode ptui applies runs on {on} until a reboot "
            f"into a mode that powers all {dev.gpu_tpcs} ({' or '.join(full) or 'MAXN'}); ptui's "
            f"predictions without a profile of this board assume all {dev.gpu_tpcs}, and a profile "
            f"measured now holds for {on}")
