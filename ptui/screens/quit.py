"""Asked before quitting while a profile runs: quitting aborts it (the original mode comes back)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class QuitScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    QuitScreen { align: center middle; }
    QuitScreen > Vertical { width: 60; height: auto; }
    """
    BINDINGS = [Binding("y", "answer(True)", "Quit"), Binding("n,escape", "answer(False)", "Keep profiling")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="panel"):
            yield Static("[b]A profile is running.[/b] Quitting aborts it and puts the board back in "
                         "its original mode; the modes measured so far are kept (resume the session "
                         "later).\n\n[b]y[/b] quit   [b]n[/b] keep profiling")

    def action_answer(self, quit_: bool) -> None:
        self.dismiss(quit_)
