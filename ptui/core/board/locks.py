"""Advisory locks between ptui processes: one driver per board, one runner per session.

A lock is an ``flock`` on a file; the kernel drops it when the process ends, so a ``kill -9`` never
leaves a board or a session locked.  The holder writes its pid into the file so the next process can
say who holds it.  Locks are re-entrant within a process.

A board's lock describes the board, not the user: it lives in the system's lock directory
(``/run/lock/ptui-<board>.lock``, see ``paths.board_lock_dir``), made writable by every account, so
ptui under ``sudo`` and ptui under the user's account, or with two data directories, exclude each
other.  A session's lock lives with its session store, under ``<data dir>/locks``.
"""
from __future__ import annotations

import os
import re
import stat
import threading
from pathlib import Path

from ..errors import RuntimeFailure
from ..paths import board_lock_dir, data_dir
from .logs import get as _logger

LOG = _logger(__name__)


class LockError(RuntimeFailure):
    """Another process holds the lock (exit code 1: try again when it has finished)."""
    exit_code = 1


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def current_umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def lock_dir() -> Path:
    """Where session locks live (with the session store they guard)."""
    return data_dir() / "locks"


def _readable(text: str) -> str:
    """`text` with each run of characters a file name should not hold as one '_'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _safe(key: str) -> str:
    return _readable(key)[:120] or "_"


_held: dict[str, tuple[int, int]] = {}          # key -> (fd, count)
_mu = threading.Lock()


def lock_path(key: str) -> Path:
    if key.startswith(BOARD_PREFIX):
        return board_lock_dir().path / f"{_safe(key)}.lock"
    return lock_dir() / f"{_safe(key)}.lock"


class _NotOurs(OSError):
    """What is at a lock's path is not a lock file ptui may write (a link, a device, a file with
    other names too)."""


def _open_lock_file(p: Path) -> int:
    """A descriptor to flock: the file another account made is opened, not re-created (a sticky
    directory's protected_regular refuses O_CREAT on it); a new one is made writable by every
    account, so whoever comes next can record its pid; read-only where that is all we may do
    (flock works on it).  A symbolic link there is never followed, and only a regular file with
    no other name is used: its pid is written over what it holds (a link planted at a board's
    lock path had the file it pointed to truncated and overwritten: a user's trial)."""
    try:
        fd = os.open(p, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)   # a named pipe: no wait
    except FileNotFoundError:
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        except FileExistsError:
            return _open_lock_file(p)
        try:
            os.fchmod(fd, 0o666 if p.name.startswith(BOARD_PREFIX) else 0o644)
        except OSError:
            pass
        return fd
    except PermissionError:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if p.is_symlink():
            raise _NotOurs("it is a symbolic link") from None
        raise e
    why = _not_ours(os.fstat(fd))
    if why:
        os.close(fd)
        raise _NotOurs(why)
    return fd


def _not_ours(st: os.stat_result) -> str | None:
    """Why what has this status is not a lock file ptui may use, or None when it may."""
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_nlink != 1:
        return "it is a file with other names (hard links)"
    return None


def lock_problem(key: str) -> str | None:
    """Why `key`'s lock could not be taken, in words with the path and what stays refused until
    when: what stands at its path in place of a lock file ptui may take (a symbolic link, a device,
    a file with other names), or, with nothing there, why no lock file can be made there; None when
    it can be taken.  Read only (ptui status): it said 'lock: free' beside a link that apply
    refused, and beside a lock directory that could not be written (made immutable, on a read-only
    file system, a file where a folder of its path should be)."""
    p = lock_path(key)
    refused = "apply, restore and profile are refused until"
    try:
        why = _not_ours(os.lstat(p))
    except (FileNotFoundError, NotADirectoryError):
        unmade = _unmakeable(p.parent)
        return (f"{p} cannot be made: {unmade}; {refused} it can be, or PTUI_LOCK_DIR names a "
                f"directory ptui may write" if unmade else None)
    except OSError:
        return None
    return f"{p}: {why}, not ptui's lock file; {refused} it is removed" if why else None


def _unmakeable(d: Path) -> str | None:
    """Why a file cannot be made in the directory `d` (made first, with the folders it lacks, as
    `_open_lock_file` does), in words with the path at fault; None when it can.  Writes nothing."""
    while True:
        try:
            st = os.stat(d)
        except (FileNotFoundError, NotADirectoryError):
            if d.parent == d:
                return None
            d = d.parent                       # made with its folders: the nearest that is counts
            continue
        except OSError as e:
            return f"{d} cannot be read ({e.strerror or e})"
        if not stat.S_ISDIR(st.st_mode):
            return f"{d} is not a directory"
        try:
            # access() asks the kernel: modes, an immutable directory, a read-only file system
            ok = os.access(d, os.W_OK | os.X_OK)
        except OSError:
            ok = True
        return None if ok else f"{d} cannot be written"


def acquire(key: str, what: str) -> None:
    """Take the lock `key` or raise LockError naming the holder; `what` completes the sentence
    'another ptui process (pid N) is <what>'."""
    import fcntl
    with _mu:
        if key in _held:
            fd, n = _held[key]
            _held[key] = (fd, n + 1)
            return
        p = lock_path(key)
        try:
            fd = _open_lock_file(p)
        except _NotOurs as e:
            raise LockError(f"cannot take the lock {p}: {e}, not ptui's lock file; nothing was "
                            f"written there (remove it, then try again)") from None
        except OSError as e:
            raise LockError(f"cannot take the lock {p}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "another process"
            raise LockError(f"another ptui process ({who}) is {what}; wait for it to finish "
                            f"or stop it, then try again") from None
        except OSError:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass                               # a read-only lock file: held all the same
        _held[key] = (fd, 1)
        LOG.debug("took the lock %s", p)


def release(key: str) -> None:
    with _mu:
        if key not in _held:
            return
        fd, n = _held[key]
        if n > 1:
            _held[key] = (fd, n - 1)
            return
        del _held[key]
        os.close(fd)                       # drops the flock
        LOG.debug("released the lock %s", key)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text.isdigit() else None
    except (OSError, ValueError):
        return None


def holder(key: str) -> int | None:
    """The pid holding `key` (this process included), or None when nobody holds it."""
    import fcntl
    if key in _held:
        return os.getpid()
    p = lock_path(key)
    try:
        # O_NONBLOCK: a named pipe planted there made ptui status wait for a writer for ever
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None                        # no lock file: nobody holds it (lock_problem says why)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd) or -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class held:
    """Context manager: ``with held(key, what): ...``."""

    def __init__(self, key: str, what: str) -> None:
        self.key, self.what = key, what

    def __enter__(self):
        acquire(self.key, self.what)
        return self

    def __exit__(self, *exc) -> None:
        release(self.key)


# -- the two kinds of lock ptui takes -------------------------------------------------------------
BOARD_PREFIX = "ptui-"


def board_root(backend) -> str:
    """The real path (symbolic links resolved) of the tree a sysfs or jtop backend drives: '/' on
    a board, an emulated tree's own path otherwise."""
    root = getattr(backend, "root", None) or getattr(getattr(backend, "_sysfs", None), "root", "/")
    return os.path.realpath(str(root or "/"))


def board_key(backend) -> str | None:
    """One key per physical board (sysfs and jtop drive the same one): ``ptui-<board>``, with the
    tree's path for an emulated board under another root; None for the simulator, whose board lives
    inside one process.  The path is the tree's real one (symbolic links resolved): a link to the
    tree was another key, and a second ptui drove the board through it while the first held the
    lock (a user's trial)."""
    if getattr(backend, "simulated", False):
        return None
    real = board_root(backend)
    return f"{BOARD_PREFIX}{backend.device.name}{'' if real == '/' else _tree_tag(real)}"


def legacy_board_key(backend) -> str | None:
    """The key an older ptui gave an emulated tree's board (its path alone, cut: ``_tree_tag``
    says why it changed), where that key held the whole path, so that undo records it wrote are
    still found (undo.load); None on a board (root '/', whose key did not change) and where the
    path was cut (then it named other trees too)."""
    real = None if getattr(backend, "simulated", False) else board_root(backend)
    if real is None or real == "/":
        return None
    tag = _safe(real).strip("_")
    return f"{BOARD_PREFIX}{backend.device.name}-{tag}" if len(tag) <= 60 else None


def _tree_tag(real: str) -> str:
    """A tree's part of its board's key: the end of its path, readable, and a digest of the whole
    path.  The path alone, cut to 120 characters then to its last 60, with '/' and '_' alike, made
    two trees one board (one lock, one undo record: one board's restore offered the other's
    apply) when they differed only past those characters or by '/' for '_'."""
    import hashlib
    readable = _readable(real).strip("_")[-40:]
    return f"-{readable}-{hashlib.sha256(real.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}"


def board_lock(backend) -> held | _Null:
    key = board_key(backend)
    if key is None:
        return _Null()
    return held(key, f"changing the power mode of this {backend.device.name}")


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def session_key(name: str) -> str:
    return f"session-{name}"


def lock_session(name: str) -> None:
    acquire(session_key(name), f"running profiling session {name!r}")


def unlock_session(name: str) -> None:
    release(session_key(name))
