"""The board's use cases: apply (verified, remembered for restore), roll back, persist,
restore, and the board's status."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..board import undo
from ..board.apply import ApplyResult, Plan, apply_mode, plan, restore_snapshot, select_preset
from ..board.apply import check_persist as _check_persist
from ..board.backends.base import Backend, BackendError, DamagedSnapshot
from ..board.backends.replay import ReplayJetson
from ..board.locks import LockError, board_key, board_lock, holder, lock_problem, pid_alive
from ..board.logs import get as _logger
from ..board.signals import shielded
from ..catalogue.modes import Mode

if TYPE_CHECKING:
    pass


from .profile import check_recorded


class CapabilityError(BackendError):
    """The backend cannot do what was asked (e.g. persist on the simulator): bad input, exit 2."""
    exit_code = 2


# -- apply, roll back, persist, restore --------------------------------------------------------------
def plan_apply(backend: Backend, mode: Mode) -> Plan:
    """The steps of an apply; on the replay device a mode it never recorded is refused here,
    before a dry run shows a plan it could not carry out."""
    if isinstance(backend, ReplayJetson):
        check_recorded([mode], backend.table, backend.corpus_path.name, "mode")
    return plan(backend, mode)


def _applying(backend: Backend, change, notes: list[str] | None = None):
    """Run `change()` (an apply or a preset) under the board's lock, keeping the last-apply record
    right.  It is written before the board is touched (a kill -9 mid-apply still leaves ptui restore
    a way back) and names the state to undo to: the board's own, or, when a killed profile left the
    board in a mode nobody chose, the state before that profile (whose record this consumes; a
    change made says so in `notes`: it said only 'undo with: ptui restore' after a plan from the
    leftover mode, and restore went elsewhere).  A change that failed and left the board where it
    was puts the previous record back."""
    with board_lock(backend):
        stale = undo.load(backend, undo.PROFILE)
        before = undo.load(backend, undo.APPLY)
        killed = undo.load(backend, undo.ROUND)
        if killed is not None and not pid_alive(killed.pid):
            # a mode chosen after a round was killed: that round's record must not undo it later
            undo.clear(backend, undo.ROUND, killed)
        pre = backend.snapshot()
        rec = undo.save(backend, undo.APPLY, stale.state if stale else pre)
        done = False
        try:
            result = change()
            done = True
            if stale is not None and notes is not None:
                notes.append(f"an interrupted profile (session {stale.session}, {stale.when()}) had "
                             f"left the board in {backend.snapshot_mode(pre).key}: ptui restore "
                             f"returns to {stale.mode}, the mode before that profile")
            return result
        finally:
            if rec is not None:
                if not done:
                    _keep_after_failure(backend, before, rec, pre, stale, sys.exc_info()[1])
                elif stale is not None:
                    undo.clear(backend, undo.PROFILE, stale)
                elif done and backend.snapshot_json(backend.snapshot()) == backend.snapshot_json(pre):
                    # nothing changed (the same apply run twice): the way back stays the one the
                    # board had; it named the mode the first apply left, and restore lost the
                    # board's own mode
                    _keep_last_apply(backend, before, rec)


def _keep_after_failure(backend: Backend, before, rec, pre, stale, failed: BaseException | None) -> None:
    """A change that failed (its exception on its way out): where the board is where it was, every
    record as it was, a killed profile's included (it was consumed into the last-apply record, and
    the last apply's way back before it was lost: one `ptui restore` fewer, a user's trial); where
    it moved, the killed profile's record is spent.  The bookkeeping's own error (a state directory
    full meanwhile) must not take the place of the change's: a refused apply said only 'cannot
    save the board's undo state ... nothing was written' (a review), so it is said after it."""
    try:
        if backend.current_mode() == backend.snapshot_mode(pre):
            _keep_last_apply(backend, before, rec)
        elif stale is not None:
            undo.clear(backend, undo.PROFILE, stale)
    except (BackendError, OSError) as e:
        try:
            where = undo.load(backend, undo.APPLY)
        except (BackendError, OSError):
            where = None
        said = (f"; the way back before this apply could not be kept as it was ({e}): ptui "
                f"restore returns to {where.mode if where else 'nothing'}")
        if isinstance(failed, _NotApplied):
            failed.result.message += said
        else:
            _logger(__name__).warning("after a failed change%s", said)


def _keep_last_apply(backend: Backend, before, rec) -> None:
    """Put back the last-apply record `before` (as it was saved: status said by this process, now),
    or with none drop `rec`, the one this apply wrote."""
    if before is not None:
        undo.save(backend, undo.APPLY, before.state, pid=before.pid, created=before.created)
    else:
        undo.clear(backend, undo.APPLY, rec)


def apply(backend: Backend, mode: Mode, expect_from: Mode | None = None) -> ApplyResult:
    """Apply, read back, roll back on a mismatch; a verified apply is remembered for restore.
    expect_from: the mode the plan the user confirmed started from (board.apply.apply_mode)."""
    notes: list[str] = []
    try:
        res = _applying(backend, lambda: _ok_or_raise(apply_mode(backend, mode, expect_from)), notes)
    except _NotApplied as e:
        return e.result
    except (LockError, undo.UnsavedState) as e:     # nothing was touched
        return ApplyResult(False, mode, None, None, f"not applied: {e}")
    res.message = "; ".join([res.message, *notes])
    return res


class _NotApplied(Exception):
    def __init__(self, result: ApplyResult) -> None:
        super().__init__(result.message)
        self.result = result


def _ok_or_raise(res: ApplyResult) -> ApplyResult:
    if not res.ok:
        raise _NotApplied(res)
    return res


def apply_preset(backend: Backend, key, notes: list[str] | None = None) -> Mode:
    """Select an nvpmodel preset (verified, rolled back on a mismatch, under the board's lock);
    remembered for restore.  `notes` receives what the user must hear beside it (_applying)."""
    preset = backend.device.preset(key)
    _applying(backend, lambda: select_preset(backend, preset), notes)
    return backend.current_mode()


def rollback(backend: Backend, snapshot, expect: Mode | None = None) -> Mode:
    """Return to the state before an apply; `ptui restore` then has nothing left to undo.
    expect: the mode that apply left (board.apply.restore_snapshot)."""
    now = restore_snapshot(backend, snapshot, expect)
    rec = undo.load(backend, undo.APPLY)
    if rec is not None and backend.snapshot_json(rec.state) == backend.snapshot_json(snapshot):
        undo.clear(backend, undo.APPLY, rec)
    return now


def restore_record(backend: Backend):
    """`ptui restore`'s way back now (the last-apply record; None when there is none or it is
    damaged: the next apply says what is wrong with it), for put_back_restore_record after a change
    that is made and undone (a Flower round's apply and rollback)."""
    try:
        return undo.load(backend, undo.APPLY)
    except DamagedSnapshot:
        return None


def put_back_restore_record(backend: Backend, record) -> None:
    """After a change made and undone since restore_record: its apply replaced the last-apply
    record with the state it found and its rollback removed that record, so a `ptui apply` made
    before (by the user) would have lost its way back.  When no record is left, `record` is
    written back as it was.  A record left (a rollback that failed, a change kept) stays: it is
    the way back from there."""
    if record is None:
        return
    with board_lock(backend):
        if undo.load(backend, undo.APPLY) is None:
            undo.save(backend, undo.APPLY, record.state, pid=record.pid, created=record.created)


def keep_restore_record(backend: Backend, record) -> None:
    """Put `record` (restore_record's, taken before) back as the last-apply record after a step
    within a change that is undone later (a Flower round's budget hold steps from the round's mode
    to another): the step's apply named the round's mode as the way back, and the round's rollback
    would then leave that record, a way back to a mode nobody chose.  None: the step's record
    goes."""
    with board_lock(backend):
        try:
            now = undo.load(backend, undo.APPLY)
        except DamagedSnapshot:
            now = None
        if record is None:
            if now is not None:
                undo.clear(backend, undo.APPLY, now)
        else:
            undo.save(backend, undo.APPLY, record.state, pid=record.pid, created=record.created)


def begin_round(backend: Backend, snapshot):
    """Before a round (a Flower round) changes the board's mode: record the state it starts in, so
    that a process killed mid-round (kill -9) leaves the way back to it for the node's next round
    (recover_round); `ptui restore` goes back there through the apply's own record.  Returns the
    record (None on a board that keeps none) for end_round."""
    with board_lock(backend):
        return undo.save(backend, undo.ROUND, snapshot)


def end_round(backend: Backend, record) -> None:
    """The round put the board back: its record goes."""
    if record is not None:
        undo.clear(backend, undo.ROUND, record)


def recover_round(backend: Backend):
    """A round whose process was killed before it put the board back left its record: put the board
    back in the state that round started in (read back), drop the record and the last-apply record
    naming that state.  Returns (the record's mode key, when and which pid) or None when no round
    was left unfinished.  Call it with the board's lock held (no live round holds it then)."""
    with board_lock(backend):
        rec = undo.load(backend, undo.ROUND)
        if rec is None:
            return None
        now = rollback(backend, rec.state)
        if now.key != rec.mode:
            raise BackendError(f"the board did not go back to {rec.mode}, the state an unfinished round "
                               f"started in: it reads {now.key} ({rec.path} is kept)")
        undo.clear(backend, undo.ROUND, rec)
        return rec.mode, rec.when(), rec.pid


def check_persist(backend: Backend) -> None:
    """Up front, before anything is applied: keeping a mode across reboots needs nvpmodel."""
    _check_persist(backend)


def persist(backend: Backend, mode: Mode) -> str:
    """Keep `mode` across reboots (nvpmodel.conf, then nvpmodel -m), under the board's lock and
    whole: a stop signal cut it between the conf written and nvpmodel run (or killed nvpmodel
    half-way), and the conf held a mode nvpmodel never selected.  A signal held until it was done
    carries what was said (`persisted`), for the caller to say before stopping."""
    check_persist(backend)
    said = None
    try:
        with board_lock(backend), shielded():
            said = backend.persist(mode)
    except KeyboardInterrupt as e:
        if said is not None:
            e.persisted = said  # type: ignore[attr-defined]
        raise
    return said


class NothingToRestore(BackendError):
    """`ptui restore` with no apply waiting to be undone: the board is left alone (exit 2)."""
    exit_code = 2


def restore(backend: Backend) -> str:
    """Undo what ptui left on the board, made by the CLI or the app: first a profile (or tune) that
    was killed before it could put the board back, else the last apply or preset.  Every record is
    checked against the board before anything is written, and what is reported is what the board
    reads back.  With nothing saved the board stays where it is, on every backend (selecting a
    default mode could move it away from where the user started)."""
    dev = backend.device
    if not undo.keeps_records(backend):
        raise NothingToRestore(f"nothing to restore: a {backend.kind} board starts afresh in "
                               f"{backend.current_mode().describe()} with every ptui run, so no apply is "
                               f"waiting to be undone (choose a preset with ptui apply --preset NAME)")
    said = None
    try:
        # whole, whatever signal comes: the record is dropped with the write, and what was done is
        # said (a SIGTERM mid-restore said only 'stopped by SIGTERM', and the record stayed)
        with board_lock(backend), shielded():
            said = _restore(backend, dev)
    except KeyboardInterrupt as e:
        if said is not None:
            e.restored = said  # type: ignore[attr-defined]
        raise
    return said


def _restore(backend: Backend, dev) -> str:
    """restore()'s work, under the board's lock and shielded."""
    rec = undo.load(backend, undo.PROFILE) or undo.load(backend, undo.APPLY)
    if rec is None:
        raise NothingToRestore(f"nothing to restore: no ptui apply or interrupted profile on this "
                               f"{dev.name} is waiting to be undone (the board stays in "
                               f"{backend.current_mode().describe()}; choose a preset with ptui apply "
                               f"--preset NAME)")
    now = restore_snapshot(backend, rec.state)
    board = backend.labelled("board")        # 'the EMULATED board' on ptui emulate's tree
    if now.key != rec.mode:
        raise BackendError(f"restore wrote the saved state back but the board reads {now.key}, "
                           f"not {rec.mode}; {rec.path} is kept: check the board, then run "
                           f"ptui restore again")
    undo.clear(backend, rec.kind, rec)
    if rec.kind == undo.APPLY:
        # a round killed mid-way is undone too: its record must not move the board again later
        undo.clear(backend, undo.ROUND)
    if rec.kind == undo.PROFILE:
        more = undo.load(backend, undo.APPLY)
        tail = ("; the last ptui apply before it can be undone too: run ptui restore again"
                if more is not None else "")
        return (f"restored the state before the interrupted profile (session {rec.session}, "
                f"{rec.when()}): the {board} reads back {now.describe()}{tail}")
    return f"restored the state before the last ptui apply: the {board} reads back {now.describe()}"


# -- status: the board, its mode, who drives it, what restore would undo ---------------------------------
@dataclass(frozen=True)
class PendingRestore:
    kind: str                             # 'profile' (an interrupted profile or tune) | 'apply'
    mode: str                             # the key of the mode restore would put the board in
    session: str | None                   # the interrupted profiling session
    created: float                        # when the state was saved (seconds since the epoch)
    pid: int                              # the process that saved it
    in_progress: bool = False             # that process still runs (a profile under way, not killed)


@dataclass(frozen=True)
class BoardStatus:
    device: str
    backend: str                          # sim | sysfs | jtop | replay
    simulated: bool                       # figures from the simulator or a recording, not a board
    emulated: bool                        # a tree made by `ptui emulate` (its readings SIMULATED)
    board: str | None                     # the board-wide lock's name (None: a board of this process)
    mode: Mode
    preset: str | None                    # the nvpmodel preset whose mode the board is in
    nvpmodel_id: int | None               # what the board's nvpmodel status says (a real board)
    lock_holder: int | None               # the pid of the process driving the board, if any
    restore: PendingRestore | None        # what `ptui restore` would undo
    restore_problem: str | None = None    # a saved state restore would refuse, in one line
    gpu_tpcs_on: int | None = None        # the GPU's TPCs powered where some are gated (else None)
    lock_problem: str | None = None       # what stands at the lock's path instead of a lock file


def board_status(backend: Backend) -> BoardStatus:
    """What the board is doing, read without writing anything or taking its lock: its mode, the
    preset that mode is, the process driving the board, and what `ptui restore` would undo (the
    same record restore reads first: an interrupted profile, else the last apply)."""
    mode = backend.current_mode()
    nvp = backend.nvpmodel_id()
    same = [p for p in backend.device.presets if p.mode == mode]
    pick = next((p for p in same if p.id == nvp), same[0] if same else None)
    key = board_key(backend)
    pending, problem = None, None
    try:
        rec = undo.load(backend, undo.PROFILE) or undo.load(backend, undo.APPLY)
    except DamagedSnapshot as e:
        rec, problem = None, str(e)
    held_by = holder(key) if key else None
    if rec is not None:
        # under way: its process lives and still drives the board (a profile holds the board's
        # lock to its end; one whose put-back failed let it go, its process living on)
        pending = PendingRestore(rec.kind, rec.mode, rec.session, rec.created, rec.pid,
                                 rec.kind == undo.PROFILE and rec.pid != os.getpid()
                                 and pid_alive(rec.pid) and (key is None or held_by == rec.pid))
    return BoardStatus(backend.device.name, backend.kind, backend.not_live, backend.emulated, key, mode,
                       pick.name if pick else None, nvp, held_by, pending,
                       problem, backend.gated_tpcs(), lock_problem(key) if key else None)
