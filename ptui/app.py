"""The ptui Textual app: global bindings and screen switching.

Screens (ptui/screens/) call the use cases of ptui.core (the façade) in thread workers; workers post
messages (ptui/messages.py) and handlers on the UI thread update widgets and the shared state
(ptui/state.py).  Core never imports Textual.
"""
from __future__ import annotations

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.widgets import Input
from textual.worker import WorkerCancelled, WorkerFailed

from . import core
from .screens.apply import ApplyScreen
from .screens.colocate import ColocateScreen
from .screens.dashboard import DashboardScreen
from .screens.finetune import FinetuneScreen
from .screens.help import HelpScreen
from .screens.pareto import ParetoScreen
from .screens.profile import ProfileScreen
from .screens.quit import QuitScreen
from .state import AppState, make_state

__all__ = ["AppState", "PtuiApp", "make_state", "run_app"]


MIN_SIZE = (80, 24)
"""The smallest terminal every screen is laid out for."""

AREAS = (("dashboard", "1", "Dashboard"), ("profile", "2", "Profile"), ("finetune", "3", "Fine-tune"),
           ("pareto", "4", "Pareto"), ("apply", "5", "Apply"), ("colocate", "6", "Colocate"))


class _TerminalOutput:
    """The terminal as Textual's output thread writes to it, dropping what is drawn once the
    terminal is gone.  When an SSH session drops, a write can fail (EIO on the hung-up tty) before
    the SIGHUP handler points the output at /dev/null; Textual's output thread died of that error,
    and the app's last frames, queued for it, then blocked its exit forever (the board restored,
    the process never ending, still holding the board's lock)."""

    def __init__(self, file) -> None:
        self._file = file

    def write(self, text: str) -> int:
        try:
            return self._file.write(text)
        except OSError:
            return len(text)

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError:
            pass

    def __getattr__(self, name):
        return getattr(self._file, name)


class PtuiApp(App):
    CSS_PATH = "app.tcss"
    MODES = {"dashboard": DashboardScreen, "profile": ProfileScreen, "finetune": FinetuneScreen,
             "pareto": ParetoScreen, "apply": ApplyScreen, "colocate": ColocateScreen}
    SCREENS = {"help": HelpScreen}
    TITLE = "ptui"
    BINDINGS = [
        # one footer entry for the six screens, so the footer fits 80 columns; the header names
        # the screen you are on
        *[Binding(key, f"app.switch_mode('{name}')", "Screens" if key == "1" else label,
                  show=key == "1", key_display="1-6" if key == "1" else None)
          for name, key, label in AREAS],
        Binding("question_mark,f1", "app.push_screen('help')", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False),     # what a terminal user types to stop
        Binding("escape", "leave_field", "Done typing"),
    ]

    def __init__(self, state: AppState) -> None:
        super().__init__()
        self.state = state
        self.stopped_by = ""          # the signal that stopped the app (SIGTERM, SIGHUP), if one did
        self.aborted_profile = False  # shutting down aborted a running profile
        self.board_left = ""          # a profile could not put the board back: why
        dev = state.backend.device
        be = state.backend
        # the label first: at 80 columns the header's end is cut ('[EMULATED, SIM…'), and what a
        # board is must always show; the device's name may lose its end
        label = ("[REPLAY] " if be.kind == "replay" else "[SIMULATED] " if be.simulated
                 else "[EMULATED, SIMULATED] " if be.emulated else "")
        self.base_sub_title = label + dev.title
        self.sub_title = self.base_sub_title

    def get_driver_class(self):
        base = super().get_driver_class()

        class Driver(base):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                if getattr(self, "_file", None) is not None:
                    self._file = _TerminalOutput(self._file)

        Driver.__name__ = Driver.__qualname__ = base.__name__
        return Driver

    def on_mount(self) -> None:
        self.state.sampler.start()
        self.switch_mode("dashboard")
        self._catch_stop_signals()
        self.check_size(self.size)
        self._warn_interrupted_profile()

    def _warn_interrupted_profile(self) -> None:
        """A profile killed before it put the board back (kill -9, a power cut of the host) left the
        board in a mode nobody chose: said when the app opens, with the way back (the app opened
        on it without a word, its dashboard naming the preset the clocks had left: a user's
        trial)."""
        try:
            st = core.board_status(self.state.backend)
        except Exception:  # noqa: BLE001 - a board that cannot say is the dashboard's to show
            return
        r = st.restore
        if r is None or r.kind != "profile" or r.in_progress:
            return
        self.notify(f"a profile (session {r.session}) was stopped before it put the board back: the "
                    f"board is in {st.mode.key}, not the mode before it ({r.mode}). Put it back with: "
                    f"ptui restore", severity="warning", timeout=60)

    def _catch_stop_signals(self) -> None:
        """SIGTERM, SIGHUP and SIGINT (kill, systemd, a closed SSH session, kill -INT) quit the app
        as `q` does: a running profile is aborted and the board's original mode restored before it
        exits.  SIGINT was Python's KeyboardInterrupt, which Textual's loop swallowed: the screen
        went blank, the profile ran on and the board stayed in its mode until kill -9 (a user's
        trial).  (Ctrl-C typed in the app is a key, not a signal: bound to quit, as q.)"""
        import asyncio
        import signal
        try:
            loop = asyncio.get_running_loop()
            for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                loop.add_signal_handler(s, self._on_stop_signal, s)
        except (RuntimeError, NotImplementedError, ValueError):   # not the main thread (tests)
            pass

    def _on_stop_signal(self, signum) -> None:
        import signal
        if self.stopped_by:
            return                                  # already shutting down
        self.stopped_by = signal.Signals(signum).name
        if signum == signal.SIGHUP:
            # the terminal is gone: what the app still draws goes nowhere instead of blocking its
            # exit on a dead tty (Textual's writer would wait for it forever)
            import os
            null = os.open(os.devnull, os.O_WRONLY)
            for fd in (1, 2):
                os.dup2(null, fd)
            os.close(null)
        self.call_later(self.quit_now)

    def on_resize(self, event) -> None:
        self.check_size(event.size)

    def check_size(self, size) -> None:
        """Below MIN_SIZE panels are cut off or crowded: say so when the terminal gets that small
        (and keep saying it at the front of the header, which is cut at its end, while it is)."""
        w, h = size.width, size.height
        small = w < MIN_SIZE[0] or h < MIN_SIZE[1]
        self.sub_title = (f"[{w}x{h} < {MIN_SIZE[0]}x{MIN_SIZE[1]}] " if small else "") + self.base_sub_title
        if small and not getattr(self, "_small", False):
            self.notify(f"the terminal is {w}x{h}; ptui is laid out for at least "
                        f"{MIN_SIZE[0]}x{MIN_SIZE[1]}: some panels are cut off. Enlarge the window.",
                        severity="warning", timeout=10)
        self._small = small

    async def action_switch_mode(self, mode: str) -> None:
        """Toasts belong to the screen that raised them (each screen also shows its outcome in a
        panel): switching screens clears them, so none covers the next screen's plot or table."""
        if mode != self.current_mode:
            self.clear_notifications()
        self.switch_mode(mode)

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "leave_field":
            return self.typing             # shown in the footer (and active) only in a text field
        return True

    @property
    def typing(self) -> bool:
        """A text field has the focus: it takes q, 1-6 and ? as text."""
        return isinstance(self.focused, Input)

    def action_leave_field(self) -> None:
        """Leave a text field so the one-key commands (q, 1-6, ?) work again: focus the screen's
        main control."""
        target = None
        sel = getattr(self.screen, "AUTO_FOCUS", None)
        if sel:
            try:
                target = self.screen.query_one(sel)
            except Exception:  # noqa: BLE001 - no such widget on this screen
                target = None
        if target is None or isinstance(target, Input) or not target.focusable:
            self.screen.set_focus(None)
        else:
            target.focus()

    def on_descendant_focus(self, _event) -> None:
        self.refresh_bindings()

    def on_descendant_blur(self, _event) -> None:
        self.refresh_bindings()

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for name, key, label in AREAS:
            yield SystemCommand(f"Go to {label}", f"Switch to the {label} screen (key {key})",
                                lambda n=name: self.switch_mode(n))
        yield SystemCommand("Help", "Keys and how ptui works", lambda: self.push_screen("help"))
        # `screen` is the screen the palette was opened from (while the palette is open,
        # self.screen is the palette itself, which has no actions of ptui's)
        for title, help_, action in getattr(screen, "COMMANDS_", ()):
            yield SystemCommand(title, help_, getattr(screen, action))

    def notify_error(self, msg: str) -> None:
        self.notify(msg, severity="error", timeout=8)

    async def action_quit(self) -> None:
        """Quit, but never leave the board in a mode the user did not choose.  While a profile
        runs, ask first (QuitScreen; ctrl+q there quits)."""
        scr = self._screen_for("profile")
        if scr is not None and scr.running and not isinstance(self.screen, QuitScreen):
            self.push_screen(QuitScreen(), self._quit_answered)
            return
        await self.quit_now()

    def _quit_answered(self, quit_: bool | None) -> None:
        if quit_:
            self.call_later(self.quit_now)

    async def quit_now(self) -> None:
        """A running profile is aborted and its worker restores the original mode before the app
        exits; a fine-tune stops at its next step; the interleaving demo ends and restores the board; a
        device write under way finishes."""
        import asyncio
        scr = self._screen_for("profile")
        if scr is not None and scr.running:
            self.aborted_profile = True
            self.notify("aborting the profile and restoring the original mode…", timeout=15)
            scr.shutdown()
        ft = self._screen_for("finetune")
        if ft is not None:
            ft.cancel.set()
        co = self._screen_for("colocate")
        if co is not None:
            co.quitting.set()                  # a decision under way ends at its next profile
        if co is not None and co.running:      # the demo ends and its worker restores the board
            co.stop.set()
        try:
            await asyncio.wait_for(self._workers_done(), timeout=20)
        except asyncio.TimeoutError:
            self.notify_error("a device operation did not stop within 20 s; check the device mode")
        self.state.sampler.stop()
        self.exit()

    async def _workers_done(self) -> None:
        """Wait for every worker to end.  One that a newer request replaced (an exclusive group)
        or that failed is over too: Textual's wait_for_complete raised WorkerCancelled for it, and
        quitting then neither waited for a running profile's restore nor exited."""
        for w in list(self.workers):
            try:
                await w.wait()
            except (WorkerCancelled, WorkerFailed):
                pass

    def _screen_for(self, mode: str):
        try:
            stack = self._screen_stacks.get(mode)
        except AttributeError:  # pragma: no cover
            return None
        return stack[0] if stack else None


def run_app(args) -> int:
    try:
        state = make_state(args.backend, args.device, args.speed,
                           corpus=getattr(args, "corpus", None), root=getattr(args, "sysfs_root", "/"))
    except core.known_errors() as e:
        import sys
        print(f"ptui: error: {e}", file=sys.stderr)
        return core.exit_code(e)
    app = PtuiApp(state)
    app.run()
    said = exit_words(app, state)
    if said:
        import sys
        try:
            print(said, file=sys.stderr, flush=True)
        except OSError:
            pass
    return core.exit_code_for(app.stopped_by) if app.stopped_by else 0


def exit_words(app: PtuiApp, state) -> str:
    """The line the app leaves on the terminal when it ends: the signal that stopped it, a profile
    it aborted and whether the board went back (said for `q` too: it said nothing there), and a
    mode applied in the app that stays."""
    aborted = ("" if not app.aborted_profile else
               f"the board is NOT back in its original mode: {app.board_left}" if app.board_left else
               f"the running profile was aborted and the {state.backend.labelled('board')} "
               f"restored to its original mode")
    if app.stopped_by:
        return f"ptui: stopped by {app.stopped_by}" + (f"; {aborted}" if aborted else "")
    return "\n".join(x for x in (aborted and f"ptui: {aborted}", quit_words(state)) if x)


def quit_words(state) -> str:
    """What the app leaves on a board it applied a mode to (the user's choice: it stays, said with
    the way back); "" on the simulated board, which ends with the app."""
    if state.applied is None or state.backend.kind in ("sim", "replay"):
        return ""
    return (f"ptui: the board stays in {state.applied.describe()}, applied in the app; "
            f"ptui restore puts back the mode before it")
