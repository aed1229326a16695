"""What ptui must be able to put back on a board, kept where every ptui process sees it.

Two records per board, small JSON files in the board-wide state directory (``paths.board_state_dir``:
``/var/lib/ptui`` when root), written whole (temp file, fsync, rename) before the board is touched:

* ``profile-<board>.json``: the state the board was in when a profile (or a tune) opened.  The
  profile removes it once it has put that state back; after a ``kill -9`` it stays, and
  ``ptui restore`` returns the board to it.
* ``last-apply-<board>.json``: the state before the last ``ptui apply`` or preset (CLI or app), which
  ``ptui restore`` undoes.

A record is checked before anything is written to the board: it must be a regular file of sane
size, for this board, and its state must fit the device's frequency tables and core count
(``Backend.snapshot_from_json``).  A simulated or replayed board lives inside one process and keeps
no record.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ..paths import board_state_dir, board_state_dirs, write_atomic
from .backends.base import Backend, BackendError, DamagedSnapshot
from .locks import board_key, legacy_board_key

FORMAT = 1
PROFILE, APPLY = "profile", "last-apply"
ROUND = "flower-round"               # a Flower round's start state while it trains in ptui's mode
MAX_BYTES = 1 << 20                  # a record is a few hundred bytes; anything near this is not one


class UnsavedState(BackendError):
    """The board-wide state directory cannot be written: nothing is written to the board."""


@dataclass
class Record:
    kind: str                        # PROFILE | APPLY
    path: Path
    state: object                    # the backend's snapshot, checked against the device
    mode: str                        # the key of the mode that state puts the board in
    session: str | None              # PROFILE: the profiling session that wrote it
    pid: int                         # the process that wrote it
    created: float                   # when (seconds since the epoch)

    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))


def keeps_records(backend: Backend) -> bool:
    return board_key(backend) is not None


def _name(kind: str, key: str | None) -> str:
    return f"{kind}-{key}.json"


def _keys(backend: Backend) -> list[str]:
    """The board's keys its records may be written under: its own, then the one an older ptui gave
    an emulated tree (locks.legacy_board_key): such a record was not found after the key changed,
    and status and restore said 'nothing to undo' beside it."""
    old = legacy_board_key(backend)
    return [str(board_key(backend))] + ([old] if old else [])


def save(backend: Backend, kind: str, snap, session: str | None = None, *, pid: int | None = None,
         created: float | None = None) -> Record | None:
    """Write the record `kind` for this board (replacing the one there); None on a simulated board.
    `pid` and `created` (default: this process, now) put back a record as another process wrote it."""
    if not keeps_records(backend):
        return None
    place = board_state_dir()
    path = place.path / _name(kind, board_key(backend))
    body = {"format": FORMAT, "kind": kind, "device": backend.device.name, "board": board_key(backend),
            "state": backend.snapshot_json(snap), "mode": backend.snapshot_mode(snap).key,
            "session": session, "pid": os.getpid() if pid is None else pid,
            "created": time.time() if created is None else created}
    try:
        _write_whole(path, json.dumps(body).encode())
    except OSError as e:
        # it said only '[Errno 1] Operation not permitted: .../.last-apply-....json.123.tmp'
        raise UnsavedState(f"cannot save the board's undo state in {place.path} "
                           f"({e.strerror or e}): nothing was written to the board, which ptui "
                           f"could not put back after a kill -9 without it; free or fix "
                           f"{place.path}, or point PTUI_STATE_DIR at another directory") from None
    for key in _keys(backend)[1:]:            # an older ptui's record is superseded by this one
        with contextlib.suppress(OSError):
            _unlink(place.path / _name(kind, key))
    return Record(kind, path, snap, body["mode"], session, body["pid"], body["created"])


def load(backend: Backend, kind: str) -> Record | None:
    """The record `kind` of this board, checked, or None when there is none.  DamagedSnapshot (one
    line naming the file and what is wrong with it) when one is there but does not fit the board;
    the file is left as it is."""
    if not keeps_records(backend):
        return None
    keys = _keys(backend)
    for d, key in ((d, key) for d in board_state_dirs() for key in keys):
        path = d / _name(kind, key)
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        except OSError as e:
            raise DamagedSnapshot(_damaged(path, f"cannot be read ({e.strerror or e})")) from None
        if not stat.S_ISREG(st.st_mode):
            raise DamagedSnapshot(_damaged(path, "is not a regular file"))
        if st.st_size > MAX_BYTES:
            raise DamagedSnapshot(_damaged(path, f"is {st.st_size} bytes, too large to be ptui's"))
        try:
            with open(path, "rb") as fh:
                body = json.loads(fh.read(MAX_BYTES).decode())
        except (OSError, ValueError) as e:
            raise DamagedSnapshot(_damaged(path, f"is not readable JSON ({str(e)[:60]})")) from None
        try:
            return _record(backend, kind, path, body, key)
        except DamagedSnapshot as e:
            raise DamagedSnapshot(_damaged(path, str(e))) from None
    return None


def _record(backend: Backend, kind: str, path: Path, body, key: str) -> Record:
    if not isinstance(body, dict) or body.get("kind") != kind:
        raise DamagedSnapshot(f"it is not a ptui {kind} record")
    if body.get("format") != FORMAT:
        raise DamagedSnapshot(f"its format {body.get('format')!r} is not {FORMAT}")
    if body.get("device") != backend.device.name or body.get("board") != key:
        raise DamagedSnapshot(f"it describes {body.get('device')!r} ({body.get('board')!r}), "
                              f"not this {backend.device.name}")
    snap = backend.snapshot_from_json(body.get("state"))
    pid, created, session = body.get("pid"), body.get("created"), body.get("session")
    if not isinstance(pid, int) or not isinstance(created, (int, float)) or not (
            session is None or isinstance(session, str)):
        raise DamagedSnapshot("its pid, time or session is missing")
    return Record(kind, path, snap, backend.snapshot_mode(snap).key, session, pid, float(created))


def _damaged(path: Path, why: str) -> str:
    return (f"the saved board state {path} {why}; nothing was written to the board and the file is "
            f"left as it is (remove it to start afresh, or choose a preset with ptui apply --preset NAME)")


def clear(backend: Backend, kind: str, record: Record | None = None) -> None:
    """Remove this board's record `kind` (only the one given, if `record` is: a file someone else
    wrote since stays)."""
    if not keeps_records(backend):
        return
    keys = [] if record is not None else _keys(backend)
    paths = [record.path] if record is not None else [
        d / _name(kind, key) for d in board_state_dirs() for key in keys]
    for p in paths:
        if record is not None and not _same(p, record):
            continue
        try:
            _unlink(p)
        except PermissionError:
            pass                      # the system-wide copy, read by an account that cannot remove it


def _unlink(p: Path) -> None:
    """Remove the record `p` where it is a regular file (anything else there is not ptui's)."""
    try:
        if stat.S_ISREG(p.lstat().st_mode):
            p.unlink()
    except FileNotFoundError:
        pass


def _same(path: Path, record: Record) -> bool:
    try:
        body = json.loads(path.read_bytes()[:MAX_BYTES].decode())
    except (OSError, ValueError):
        body = None
    return isinstance(body, dict) and body.get("pid") == record.pid and body.get("created") == record.created


def _write_whole(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step, durably (paths.write_atomic), its folder made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data, mode=0o644)
