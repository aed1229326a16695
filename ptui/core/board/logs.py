"""ptui's log: the standard `logging` module under the logger named "ptui".

The CLI says what it does on stderr through it: -q keeps warnings and errors only, -v adds what
ptui does step by step (every write to the board and its read-back, each lock, each mode profiled).
The app draws on the terminal, so it logs to a file instead (``ptui-app.log`` in the data
directory, kept to three files of 1 MB), where a user can follow it with ``tail -f`` from another
shell.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from .files import PathError, existing

LOG = logging.getLogger("ptui")
APP_LOG = "ptui-app.log"


def get(name: str) -> logging.Logger:
    """The logger of one part of ptui: get(__name__) in a module of the package."""
    return logging.getLogger(name if name.startswith("ptui") else f"ptui.{name}")


class _Stderr(logging.Handler):
    """Each record as one line on the stderr of the moment (tests and the CLI redirect it); a
    terminal that is gone (SSH closed) does not stop ptui from finishing, such as putting the
    board back."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.format(record), file=sys.stderr, flush=True)
        except OSError:
            pass


def _reset() -> None:
    for h in list(LOG.handlers):
        LOG.removeHandler(h)
        h.close()
    LOG.propagate = False


def for_cli(verbose: int = 0, quiet: bool = False) -> None:
    """stderr, one plain line a record: warnings and errors with -q, what ptui says by default,
    each step with -v (those lines start with 'debug: ')."""
    _reset()
    h = _Stderr()
    h.setFormatter(_Plain())
    LOG.addHandler(h)
    LOG.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)


def for_app(directory: Path, verbose: int = 0) -> Path | None:
    """The app's log file (rotating), or None when it cannot be written (the app runs without)."""
    from logging.handlers import RotatingFileHandler

    _reset()
    path = Path(directory) / APP_LOG
    try:
        existing(path, "log file")
        path.parent.mkdir(parents=True, exist_ok=True)
        h = RotatingFileHandler(path, maxBytes=1_000_000, backupCount=2, encoding="utf-8")
    except (OSError, PathError):
        LOG.addHandler(logging.NullHandler())
        return None
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    LOG.addHandler(h)
    LOG.setLevel(logging.DEBUG if verbose else logging.INFO)
    return path


class _Plain(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.levelno >= logging.WARNING and not msg.startswith(("warning:", "ptui: error")):
            return f"warning: {msg}" if record.levelno == logging.WARNING else msg
        return f"debug: {msg}" if record.levelno < logging.INFO else msg
