"""Every file and directory ptui keeps for the user, built in one place.

The data directory is ``$PTUI_DATA_DIR``, else ``$XDG_DATA_HOME/ptui``, else ``~/.local/share/ptui``.
Inside it: ``sessions.sqlite`` (profiling sessions), ``profiles/`` (profile CSVs the app writes),
``models/`` (fine-tuned predictors the app writes), ``logs/`` (output of profiled scripts) and
``locks/`` (one lock per profiling session).

What describes a *board* rather than a user lives in board-wide places, so that ptui under ``sudo``
and ptui under the user's account (or two data directories) see the same: the board's lock in
``/run/lock`` (``ptui-<board>.lock``; ``$PTUI_LOCK_DIR`` overrides) and its undo state (the state before
the last apply, the start state of a running profile) in ``/var/lib/ptui`` (``$PTUI_STATE_DIR``
overrides).  Where such a place is not writable ptui falls back to the data directory and says so.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` in one step, durably: a temporary file beside it (made with
    O_EXCL, so no link is followed), fsynced, given `mode` (default: the file's own permissions,
    0o644 for a new one), renamed over it, then the folder fsynced.  On any failure the temporary
    file is removed and `path` is as it was.  One place for the board's undo state, nvpmodel's
    conf and a Flower node's kept overheads (three copies before, each a little different)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            try:
                mode = path.stat().st_mode & 0o7777
            except OSError:
                mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):          # the rename made durable (best effort)
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def data_dir() -> Path:
    env = os.environ.get("PTUI_DATA_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "ptui"


def sessions_db() -> Path:
    return data_dir() / "sessions.sqlite"


def profiles_dir() -> Path:
    return data_dir() / "profiles"


def profile_csv(session: str) -> Path:
    """Where the app writes a session's profile."""
    return profiles_dir() / f"{session}.csv"


def models_dir() -> Path:
    return data_dir() / "models"


def model_dir(name: str) -> Path:
    """Where the app writes a fine-tuned model."""
    return models_dir() / name


def logs_dir() -> Path:
    return data_dir() / "logs"


def script_log(session: str) -> Path:
    """The output of a training script profiled in a session."""
    return logs_dir() / f"{session}.log"


SYSTEM_LOCK_DIRS = ("/run/lock", "/var/lock")
SYSTEM_STATE_DIR = "/var/lib/ptui"


@dataclass(frozen=True)
class Place:
    """A board-wide directory, or the fallback used where it is not writable (`notice` says so)."""
    path: Path
    notice: str = ""


def _usable(d: Path) -> bool:
    return d.is_dir() and os.access(d, os.W_OK | os.X_OK)


def board_lock_dir() -> Place:
    """Where boards' lock files live: ``$PTUI_LOCK_DIR``, else the system's lock directory (shared by
    every user and by root), else the data directory's ``locks/`` (then only ptui processes with this
    data directory see the lock: `notice` says so)."""
    env = os.environ.get("PTUI_LOCK_DIR")
    if env:
        return Place(Path(env))
    for d in SYSTEM_LOCK_DIRS:
        if _usable(Path(d)):
            return Place(Path(d))
    fb = data_dir() / "locks"
    return Place(fb, f"note: {SYSTEM_LOCK_DIRS[0]} is not writable, so the board's lock is kept in "
                     f"{fb}: a ptui run by another user (or under sudo) will not see it")


def board_state_dir() -> Place:
    """Where a board's undo state is written: ``$PTUI_STATE_DIR``, else ``/var/lib/ptui`` when it can
    be written (root), else the data directory (`notice` says that a ptui under sudo will not see
    it there)."""
    env = os.environ.get("PTUI_STATE_DIR")
    if env:
        return Place(Path(env))
    sysd = Path(SYSTEM_STATE_DIR)
    if _usable(sysd) or (not sysd.exists() and _usable(sysd.parent) and os.geteuid() == 0):
        return Place(sysd)
    fb = data_dir()
    return Place(fb, f"note: {SYSTEM_STATE_DIR} is not writable, so the board's undo state is kept in "
                     f"{fb}: ptui restore under another account (or sudo) will not see it")


def board_state_dirs() -> list[Path]:
    """Where a board's undo state may be read: the place it is written, and the system-wide one."""
    first = board_state_dir().path
    return [first] + ([Path(SYSTEM_STATE_DIR)] if not os.environ.get("PTUI_STATE_DIR")
                      and first != Path(SYSTEM_STATE_DIR) else [])


def model_meta(path: Path) -> dict | None:
    """A saved model directory's meta.json (None: not written, or not one ptui can read)."""
    import json
    try:
        meta = json.loads((Path(path) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def model_of(path: Path, device: str) -> bool:
    """A saved model directory (its meta.json written: complete) for `device`."""
    meta = model_meta(path)
    return meta is not None and meta.get("device") == device


def latest_outputs(device: str, complete=None) -> tuple[Path | None, Path | None]:
    """The newest profile CSV (for which complete(path) holds, if given) the app made for this
    device, and the newest model directory in ptui's models folder whose meta.json names this
    device (the app's, `ptui tune`'s: tune-BOARD-... or a --session name; the app opened on an
    older model of its own after a tune), if any."""
    profiles = sorted((p for p in profiles_dir().glob(f"{device}-*.csv") if complete is None or complete(p)),
                      key=lambda p: p.stat().st_mtime)
    # newest first, reading meta.json files only until one is this device's (app start-up)
    newest = next((p for p in reversed(sorted(models_dir().glob("*"), key=lambda p: p.stat().st_mtime))
                   if model_of(p, device)), None)
    return (profiles[-1] if profiles else None), newest
