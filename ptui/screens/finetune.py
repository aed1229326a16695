"""Fine-tune: transfer the bundled reference predictors onto a profile, in a worker."""
from __future__ import annotations

import threading
from pathlib import Path

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import (
    Button,
    Footer,
    Header,
    Input,
    Label,
    LoadingIndicator,
    Static,
)

from .. import core
from ..messages import FitFailed, FitFinished, FitProgressed


class FinetuneScreen(Screen):
    TITLE = "ptui · 3 Fine-tune"
    AUTO_FOCUS = "#go"
    BINDINGS = [Binding("t", "train", "Fine-tune")]
    COMMANDS_ = (("Fine-tune predictors", "Transfer the reference NNs onto the profile", "action_train"),)

    def __init__(self) -> None:
        super().__init__()
        self.busy = False
        self.filled = ""
        """The profile the field was filled in with (the newest finished one): replaced by a newer."""
        self.fitted = ""
        """The profile the result panel shows a fit of ("" before one): while the field holds it,
        the introduction gives the result its rows (at 80x24 the from-scratch baseline and the
        notes were below the screen's fold, out of reach of any key)."""
        self.fitting = ""
        """The profile being fitted (the field as t was pressed)."""
        self.cancel = threading.Event()
        """Set to stop a fine-tune under way (the app quits)."""

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(classes="form"):
            yield Label("profile CSV")
            yield Input(id="profile", placeholder="a profile from the Profile screen or ptui profile")
            yield Button("Fine-tune (t)", id="go", variant="primary")
        yield Static(id="info", classes="panel")
        yield Static(id="result", classes="panel")
        yield LoadingIndicator(id="spinner")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#spinner").display = False
        self.on_screen_resume()

    def on_screen_resume(self) -> None:
        st = self.app.state
        inp = self.query_one("#profile", Input)
        # the newest finished profile, also when one finished since it was filled in (a value the
        # user typed stays)
        if st.profile_csv and (not inp.value or inp.value == self.filled):
            inp.value = self.filled = str(st.profile_csv)
        self.show_intro()
        self.show_info()

    @on(Input.Changed, "#profile")
    def profile_changed(self) -> None:
        # the intro names the profile the field was filled with: typed over, it said so still (its
        # text only: shown or hidden as the field is typed in, the screen drew blank for a frame)
        self.show_intro()

    def show_intro(self) -> None:
        """The introduction's text, and the profile the field holds when ptui filled it in."""
        st = self.app.state
        inp = self.query_one("#profile", Input)
        info = ("Fits time and power to your profile: stacked Gaussian processes (no prior, a physical "
                "prior mean, the bundled ResNet-18 reference as an input; power also takes the "
                "predicted time) and PowerTrain's transfer-learned networks (§3.2); 5-fold "
                "cross-validation keeps the best per target, says how often its 90 % interval covered "
                "held-out modes and names any measurement it left out as an outlier.")
        if inp.value and inp.value == self.filled:
            # it was an older profile than the newest, without a word (a user's trial)
            passed = core.unfinished_after(self.app.state.backend.device.name, st.profile_csv)
            info += f"\n\nThe field holds the newest finished profile, {escape(Path(self.filled).name)}."
            if passed:
                names = ", ".join(escape(p.name) for p in passed[-3:])
                info += (f" Newer, but not finished (stopped, failed or still running): {names}; "
                         f"type its path to fine-tune on the modes it measured.")
        self.query_one("#info", Static).update(info)

    def show_info(self) -> None:
        """The introduction, unless the result below is a fit of the profile in the field (said
        as the screen shows and as a fit ends: hidden or shown as the field is typed in, the
        whole screen drew blank for a frame)."""
        inp = self.query_one("#profile", Input)
        self.query_one("#info").display = not self.fitted or inp.value.strip() != self.fitted

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_train()

    @on(Input.Submitted, "#profile")
    def profile_submitted(self) -> None:
        self.action_train()

    def action_train(self) -> None:
        if self.busy:
            return
        path = self.query_one("#profile", Input).value.strip()
        if not path:
            self.app.notify_error("give a profile CSV (run one on the Profile screen first)")
            return
        self.busy = True
        self.query_one("#spinner").display = True
        self.query_one("#result", Static).update("loading the profile…")
        self.fitted, self.fitting = "", path
        self.fit(Path(path))

    @work(thread=True, exclusive=True, group="finetune", exit_on_error=False)
    def fit(self, path: Path) -> None:
        try:           # the profile names its own workload and batch sizes, as with `ptui fit`
            res = core.fit_cancellable(self.app.state.backend.device, path,
                                          progress=lambda m: self.post_message(FitProgressed(str(m))),
                                          cancel=self.cancel)
        except Exception as e:  # noqa: BLE001 - shown in the app
            self.post_message(FitFailed(str(e)))
            return
        self.post_message(FitFinished(res.model.about.metrics, res.fitted_on, res.seconds, res.out))

    @on(FitProgressed)
    def say(self, msg: FitProgressed) -> None:
        self.query_one("#result", Static).update(msg.text + "…")

    @on(FitFinished)
    def finished(self, msg: FitFinished) -> None:
        self.app.state.model_dir = msg.out
        self.done(msg.metrics, msg.fitted_on, msg.seconds, msg.out)

    @on(FitFailed)
    def fit_failed(self, msg: FitFailed) -> None:
        self.failed(msg.error)

    def done(self, metrics: dict, fitted_on: str, seconds: float, out: Path) -> None:
        self.busy = False
        self.query_one("#spinner").display = False
        self.query_one("#result", Static).update("\n".join(result_lines(metrics, fitted_on, seconds, out)))
        self.fitted = self.fitting
        self.show_info()

    def failed(self, msg: str) -> None:
        self.busy = False
        self.query_one("#spinner").display = False
        self.query_one("#result", Static).update(f"[red]fine-tuning failed: {escape(msg)}[/red]")


def result_lines(metrics: dict, fitted_on: str, seconds: float, out) -> list[str]:
    """What the Fine-tune screen says about a fit: per target its cross-validated MAPE, interval
    coverage and method, then PowerTrain's from-scratch baseline (its network trained on the
    profile alone, no reference), cross-validated on the same folds, and any outliers."""
    # the next step right under the headline: below the notes it scrolled out of a 30-row
    # terminal when the model's path took two lines and a mode was left out (tmux journey, CI)
    lines = [f"[b]Fitted on {escape(fitted_on)} in {seconds:.1f} s[/b] → {escape(str(out))}",
             "Next: 4 Pareto to pick a mode.", "",
             f"{'':7}{'CV MAPE':>9}{'90 % interval covered':>23}   method (by cross-validation)"]
    notes, scratch, why = [escape(n) for n in [core.subset_note(metrics)] if n], [], ""
    for tgt in ("time", "power"):
        m = metrics[tgt]
        cov = m.get("cv_coverage90")
        lines.append(f"{tgt:<7}{m.get('cv_mape', float('nan')):>8.1f}%"
                     f"{(f'{cov:.0f}%' if cov is not None else 'n/a'):>23}   {m.get('choice')}")
        notes += [escape(n) for n in [core.outlier_note(tgt, m)] if n]
        base = m.get("candidates_cv_mape", {}).get("scratch")
        if base is None:
            why = why or m.get("note", "")
            scratch.append(f"{tgt} not run")
        else:
            # a recipe the screen stopped was scored on the screening folds only
            scratch.append(f"{tgt} {base:.1f}%" + ("*" if "scratch" in m.get("screened_out", ()) else ""))
    why = f" ({escape(why)})" if why else ""
    if all(s.endswith("not run") for s in scratch):
        lines.append(f"baseline from scratch: not run{why}")
    else:
        lines.append(f"baseline from scratch (PowerTrain's network, no reference), CV MAPE: "
                     f"{', '.join(scratch)}" + ("  (*on the screening folds only)"
                                                if any(s.endswith("*") for s in scratch) else "")
                     + (why if any(s.endswith("not run") for s in scratch) else ""))
    return lines + ([""] + notes if notes else [])
