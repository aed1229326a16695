"""The ptui Textual app: global bindings, shared state, screen switching.

Screens (ptui/screens/) only talk to ptui.core through plain calls in thread workers; core never
imports Textual.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding

from .core.backends.base import Backend
from .core.telemetry import Sampler
from .screens.apply import ApplyScreen
from .screens.dashboard import DashboardScreen
from .screens.finetune import FinetuneScreen
from .screens.help import HelpScreen
from .screens.pareto import ParetoScreen
from .screens.profile import ProfileScreen


@dataclass
class AppState:
    """What the screens share: the device, and what the user has produced so far."""
    backend: Backend
    note: str
    sampler: Sampler
    profile_csv: Path | None = None
    workload: str = "resnet18"
    model_dir: Path | None = None
    selected: object | None = None          # pareto.Decision-like: the mode picked for Apply
    selected_pred: dict = field(default_factory=dict)
    log: list[str] = field(default_factory=list)


AREAS = (("dashboard", "1", "Dashboard"), ("profile", "2", "Profile"), ("finetune", "3", "Fine-tune"),
           ("pareto", "4", "Pareto"), ("apply", "5", "Apply"))


class PtuiApp(App):
    CSS_PATH = "app.tcss"
    MODES = {"dashboard": DashboardScreen, "profile": ProfileScreen, "finetune": FinetuneScreen,
             "pareto": ParetoScreen, "apply": ApplyScreen}
    SCREENS = {"help": HelpScreen}
    TITLE = "ptui"
    BINDINGS = [
        *[Binding(key, f"app.switch_mode('{name}')", label, show=True) for name, key, label in AREAS],
        Binding("question_mark,f1", "app.push_screen('help')", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, state: AppState) -> None:
        super().__init__()
        self.state = state
        dev = state.backend.device
        self.sub_title = f"{dev.title}{'  [SIMULATED]' if state.backend.simulated else ''}"

    def on_mount(self) -> None:
        self.state.sampler.start()
        self.switch_mode("dashboard")

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for name, key, label in AREAS:
            yield SystemCommand(f"Go to {label}", f"Switch to the {label} screen (key {key})",
                                lambda n=name: self.switch_mode(n))
        yield SystemCommand("Help", "Keys and how ptui works", lambda: self.push_screen("help"))
        for title, help_, action in getattr(self.screen, "COMMANDS_", ()):
            yield SystemCommand(title, help_, getattr(self.screen, action))

    def notify_error(self, msg: str) -> None:
        self.notify(msg, severity="error", timeout=8)

    async def action_quit(self) -> None:
        """Quit, but never leave the board in a mode the user did not choose: a running profile is
        aborted and its worker restores the original mode before the app exits."""
        import asyncio
        scr = self._screen_for("profile")
        if scr is not None and getattr(scr, "profiler", None) is not None:
            self.notify("aborting the profile and restoring the original mode…", timeout=15)
            scr.shutdown()
            try:
                await asyncio.wait_for(self.workers.wait_for_complete(), timeout=20)
            except asyncio.TimeoutError:
                self.notify_error("the profile did not stop within 20 s; check the device mode")
        self.state.sampler.stop()
        self.exit()

    def _screen_for(self, mode: str):
        try:
            stack = self._screen_stacks.get(mode)
        except AttributeError:  # pragma: no cover
            return None
        return stack[0] if stack else None


def make_state(backend_kind=None, device=None, speed: float = 1.0, clock=None) -> AppState:
    from .core.backends import open_backend
    from .core.clock import RealClock
    backend, note = open_backend(backend_kind, device, clock=clock or RealClock(speed))
    st = AppState(backend, note, Sampler(backend, interval=0.5))
    st.profile_csv, st.model_dir = _latest(backend.device.name)
    return st


def _latest(device: str):
    """The newest profile CSV and model directory this user made for this device, if any."""
    from .core.store import data_dir
    d = data_dir()
    profiles = sorted((d / "profiles").glob(f"{device}-*.csv"), key=lambda p: p.stat().st_mtime)
    models = sorted((p for p in (d / "models").glob(f"{device}-*") if (p / "meta.json").exists()),
                    key=lambda p: p.stat().st_mtime)
    return (profiles[-1] if profiles else None), (models[-1] if models else None)


def run_app(args) -> int:
    from .core.errors import exit_code, known_errors
    try:
        state = make_state(args.backend, args.device, args.speed)
    except known_errors() as e:
        import sys
        print(f"ptui: error: {e}", file=sys.stderr)
        return exit_code(e)
    PtuiApp(state).run()
    return 0
