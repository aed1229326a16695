"""Paths the user names for ptui to write, and how ptui looks at what is already there.

Every path ptui writes for the user (a profile or prediction CSV, a model directory, the session
store) is checked here: nothing there, or the kind of thing ptui writes (a regular file; a directory
for a model).  A device node, a FIFO or a socket is refused in one line, before any work, and is
never renamed, replaced or opened.  To see whether an existing file is ptui's own, ptui reads it only
when stat and then fstat on the open descriptor say it is a regular file, and then at most
READ_CAP bytes of it.  A failure at write time (disk full, a read-only file system, no permission, a
name too long) is one line naming the path and the cause.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..errors import EXIT_INPUT, InputError, RuntimeFailure

READ_CAP = 16 << 20      # bytes of an existing file read to tell whether it is ptui's (a ptui
#                          profile of every mode of the largest board is about 6 MB)
NAME_ROOM = 32           # how much longer than the target's name a temporary or backup name gets

CAUSES = {errno.ENOSPC: "no space left on the disk", errno.EDQUOT: "disk quota exceeded",
          errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
          errno.EPERM: "operation not permitted", errno.ENAMETOOLONG: "the file name is too long",
          errno.ENOENT: "no such file or folder", errno.ENOTDIR: "a part of the path is not a folder",
          errno.EISDIR: "it is a directory", errno.ELOOP: "too many levels of symbolic links",
          errno.EIO: "input/output error"}
# causes that are the path's fault, not the machine's: bad input (exit 2)
INPUT_CAUSES = {errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP}


class PathError(InputError):
    """A path ptui may not write (refused before any work, exit 2)."""


class WriteError(RuntimeFailure):
    """Writing failed (exit 1; 2 when the path itself is at fault)."""


def cause(e: OSError) -> str:
    """An operating-system error in a few words."""
    return (CAUSES.get(e.errno) if e.errno is not None else None) or e.strerror or str(e)


def write_error(path, e: OSError) -> WriteError:
    """One line for an OSError raised while writing `path`."""
    return WriteError(f"cannot write {path}: {cause(e)}",
                      exit_code=EXIT_INPUT if e.errno in INPUT_CAUSES else None)


def kind_name(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def existing(path, what: str = "--out", want: str = "a regular file") -> os.stat_result | None:
    """What is at `path` (following symbolic links): None when nothing is there, the stat of a
    regular file or a directory; PathError for a device node, FIFO or socket, and for a path that
    cannot even be looked at (a name too long, a loop of links).  `want` names what belongs there."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PathError(f"{path}: {cause(e)}") from None
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return st
    raise PathError(f"{path} is {kind_name(st.st_mode)}, not {want}; ptui leaves it alone "
                    f"(never renamed, replaced or read): choose another {what}")


def check_input(path, want: str = "a regular file") -> None:
    """Before ptui opens `path` to read it: PathError unless it is a regular file or a directory
    (the open's own error says what is wrong there) or nothing (likewise).  A device node or a
    socket would be read without end (--workload-spec /dev/zero grew ptui to 24 GB before the
    kernel killed it; --profile /dev/zero never returned), a FIFO blocks until someone writes."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return
    raise PathError(f"{path} is {kind_name(st.st_mode)}, not {want}; ptui reads only regular files")


def check_name_length(path, room: int = NAME_ROOM) -> None:
    """PathError when the file name leaves no room for ptui's temporary and backup names, which
    are up to `room` bytes longer, on the file system of its folder."""
    p = Path(path)
    d = p.parent if str(p.parent) else Path(".")
    try:
        limit = os.pathconf(d, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    n = len(os.fsencode(p.name))
    if n + room > limit:
        raise PathError(f"{path}: the file name is too long ({n} bytes; at most {limit - room} "
                        f"here, to leave room for ptui's temporary and backup names)")


def read_head(path, cap: int | None = None) -> tuple[bytes, bool] | None:
    """(at most `cap` bytes from the start of `path`, whether that is the whole file), or None when
    `path` is not a regular file or cannot be read.  Anything but a regular file is never opened:
    stat first, then an open that cannot block (a FIFO swapped in meanwhile) and fstat on it."""
    cap = READ_CAP if cap is None else cap
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, n = [], 0
        while n <= cap:
            b = os.read(fd, min(1 << 20, cap + 1 - n))
            if not b:
                break
            chunks.append(b)
            n += len(b)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:cap], len(data) <= cap
