"""SIGTERM and SIGHUP stop ptui the way Ctrl-C does, and nothing stops a board write half-way.

``timeout``, ``kill``, systemd and a closed SSH session send SIGTERM or SIGHUP.  With
``install()`` (the CLI calls it) either one raises ``Terminated`` (a KeyboardInterrupt) in the main
thread, so a profile stops, restores the board's original mode in its ``finally`` and says so, as
after Ctrl-C.  Code that writes to the board runs inside ``shielded()``: a signal that arrives
there (Ctrl-C too) is held until the block ends, so a mode is never left half-applied and a
restore is never cut short; a second signal while the first is being handled is held likewise.
"""
from __future__ import annotations

import contextlib
import signal
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The process was asked to stop by a signal (SIGTERM, SIGHUP)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def exit_code_for(name: str) -> int:
    """The exit status of a command stopped by the signal `name` (e.g. 143 for SIGTERM)."""
    return 128 + signal.Signals[name].value


_pending: list[int] = []             # signals held while a shielded block runs (main thread only)
_depth = [0]


def _raise_for(signum: int):
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def _handler(signum, _frame) -> None:
    if _depth[0] > 0:
        _pending.append(signum)          # a board write is under way: stop once it is done
        return
    _raise_for(signum)


def install(interrupt: bool = False) -> None:
    """Route SIGTERM and SIGHUP (and, inside shielded blocks, SIGINT) through ptui's handler.
    SIGINT is routed only where Python's own handler has it; a process started in the background
    by a shell inherits SIGINT ignored and keeps it so, unless `interrupt` (a command that must
    stop on SIGINT whatever it inherited: `ptui emulate`).  Only the main thread can install
    handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in STOP_SIGNALS:
        signal.signal(s, _handler)
    if interrupt or signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _handler)


@contextlib.contextmanager
def shielded():
    """Hold stop signals (those routed through install()) until the block ends, then act on the
    first one.  Re-entrant; a no-op off the main thread (signals are delivered to the main thread
    only, so a worker thread's writes cannot be cut by them anyway)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        if _depth[0] == 0 and _pending:
            signum = _pending[0]
            _pending.clear()
            _raise_for(signum)
