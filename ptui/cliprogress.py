"""Progress of the CLI's long runs: a rich bar with an ETA on a terminal, plain lines otherwise.

Only the CLI uses this (the app has its own widgets); rich is imported only when stderr is a
terminal, so a run piped to a file or a log prints exactly the plain lines it always did.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Self

from .core import hms


def _tty() -> bool:
    try:
        return sys.stderr.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        return False


class Steps:
    """`total` steps (modes to profile, networks to train), `done` of them finished already.

    update(done, text, line): on a terminal move the bar and show `text` beside it; otherwise
    print `line` (when given) with the estimated time left appended."""

    def __init__(self, label: str, total: int, say: Callable[[str], None], done: int = 0,
                 tty: bool | None = None) -> None:
        self.label, self.total, self.say = label, max(1, total), say
        self.start_done = self.done = done
        self.t0 = time.monotonic()
        self.tty = _tty() if tty is None else tty
        self._bar = None

    def __enter__(self) -> Self:
        if self.tty:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.table import Column
            # the bar and the text beside it share what the fixed columns leave; the text (a mode
            # in plain words is long) is cut at its end rather than squeezing the counts and ETA
            self._bar = Progress(TextColumn("{task.description}"),
                                 BarColumn(bar_width=None, table_column=Column(ratio=1)),
                                 MofNCompleteColumn(), TextColumn("elapsed"), TimeElapsedColumn(),
                                 TextColumn("ETA"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[text]}", table_column=Column(
                                     ratio=3, no_wrap=True, overflow="ellipsis")),
                                 console=Console(stderr=True), transient=False, expand=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.done, text="")
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if self._bar is not None:
            if exc_type is None:
                self._bar.update(self._task, completed=self.total)
            self._bar.stop()
            self._bar = None

    def eta_s(self) -> float | None:
        """Seconds left at the pace of this run so far (None before the first step is done)."""
        ran = self.done - self.start_done
        if ran <= 0:
            return None
        return (time.monotonic() - self.t0) / ran * max(0, self.total - self.done)

    def update(self, done: int, text: str, line: str | None = None) -> None:
        self.done = done
        if self._bar is not None:
            self._bar.update(self._task, completed=done, text=text)
            return
        if line is not None:
            eta = self.eta_s()
            left = f"   ETA {hms(eta)}" if eta is not None and done < self.total else ""
            self.say(line + left)

    def stage(self, text: str) -> None:
        """A progress message that starts the next step (e.g. 'fine-tuning power network')."""
        self._stages = getattr(self, "_stages", 0) + 1
        self.update(min(self._stages - 1, self.total), text, text)
