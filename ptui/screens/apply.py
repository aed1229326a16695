"""Apply: the exact plan, a confirmation, the read-back check, then ten seconds of measured power
next to the prediction; roll back or persist on a key.  Every device write runs in a worker."""
from __future__ import annotations

import time

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from .. import core
from ..messages import ApplyFinished, PersistFinished, PlanReady, RollbackFinished
from ..widgets.powerplot import PowerPlot

PLOT_ROWS = 12
"""The power plot's least height: its border, title, axes and labels take 7 rows, five rows of data
are left to read the line by.  The result and plan panels above it scroll in what the plot leaves
(at 80x24 they took all but 8 rows: one row of data, its y-axis read '30.5' for a line from 10 to
28 W)."""
CHROME_ROWS = 2
"""The header and the footer."""


class ApplyScreen(Screen):
    TITLE = "ptui · 5 Apply"
    BINDINGS = [Binding("y", "confirm", "Apply (confirm)"), Binding("r", "rollback", "Roll back"),
                Binding("s", "persist", "Persist")]
    COMMANDS_ = (("Apply the selected mode", "Write the mode to the device and verify it", "action_confirm"),
                 ("Roll back", "Return to the mode before the last apply", "action_rollback"),
                 ("Persist the mode", "Keep the mode across reboots (nvpmodel)", "action_persist"))

    def __init__(self) -> None:
        super().__init__()
        self.snapshot = None
        """The state before the last apply made here (for roll back)."""
        self.result = None
        self.busy: str | None = None
        """What the device worker is doing (applying, rolling back, persisting), or None."""
        self.measure_from: float | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        # the result above the plan: a board's plan of writes runs to 30 lines, and at 80x24 the
        # result of an apply or a roll back below it could not be reached from the keyboard
        with VerticalScroll(id="apply-top"):
            yield Static(id="result", classes="panel")
            yield Static(id="plan", classes="panel")
        yield PowerPlot(id="power-plot")
        yield Footer(show_command_palette=False)

    def _result(self, text: str, *, home: bool = False) -> None:
        """The result panel, shown from the first thing it says (empty, it took three rows).
        `home`: what a key (y, r) did, so the panels scroll back to the top, the result in view (a
        user who scrolled down to read the plan and pressed y saw no result); the measurement's
        updates every half second leave the scroll where the user put it."""
        panel = self.query_one("#result", Static)
        panel.update(text)
        panel.display = bool(text)
        if home:
            self.query_one("#apply-top", VerticalScroll).scroll_home(animate=False)

    def on_mount(self) -> None:
        self.query_one("#result", Static).display = False
        self.fit_panels()
        self.tick()
        self.set_interval(0.5, self.tick)

    def on_screen_resume(self) -> None:
        self.fit_panels()
        self.show_plan()

    def on_resize(self) -> None:
        self.fit_panels()

    def fit_panels(self) -> None:
        """The panels above the plot take what they need up to what leaves the plot PLOT_ROWS;
        beyond that they scroll (the result, above the plan, stays in view)."""
        room = self.app.size.height - CHROME_ROWS - PLOT_ROWS
        self.query_one("#apply-top", VerticalScroll).styles.max_height = max(4, room)

    # -- plan ---------------------------------------------------------------------------------
    def show_plan(self) -> None:
        st = self.app.state
        if st.selected is None:
            self.query_one("#plan", Static).update(
                "No mode selected: pick one on 4 Pareto (enter), then confirm here with y.")
            return
        self.make_plan(st.selected)

    @work(thread=True, exclusive=True, group="apply-plan", exit_on_error=False)
    def make_plan(self, mode) -> None:
        """Reads the device's current state (sysfs on a real board): off the UI thread."""
        try:
            be = self.app.state.backend
            self.post_message(PlanReady(core.plan_apply(be, mode), note=core.tpc_note(be)))
        except Exception as e:  # noqa: BLE001
            self.post_message(PlanReady(None, str(e)))

    @on(PlanReady)
    def plan_ready(self, msg: PlanReady) -> None:
        st = self.app.state
        if msg.plan is None:
            self.query_one("#plan", Static).update(f"[red]cannot plan: {msg.error}[/red]")
            return
        p = msg.plan
        if st.selected is None or p.target != st.selected:
            return                                  # stale: another mode was picked since
        pred = st.selected_pred

        def spread(k: str, fmt: str, unit: str) -> tuple[str, str]:
            """A prediction's spread and, where it is wide (or the prior's alone), its 90 %
            interval, as the Pareto screen says them (Apply said the power's spread alone: a
            prior's '135.2 ms' hid its 20.8-877 ms)."""
            v, sd = pred.get(k, float("nan")), pred.get(f"{k}_std")
            if st.selected_basis != "predicted" or sd is None:
                return "", ""
            wide = core.wide_interval(v, sd, unit, always=st.selected_prior)
            return f" ± {sd:{fmt}}", f" ({wide})" if wide else ""
        t_sd, t_wide = spread("time_ms", ".1f", "ms")
        p_sd, p_wide = spread("power_w", ".2f", "W")
        # '11.1 ± 0.4 ms per iteration': the spread before the unit keeps the unit's words whole
        expect = (f"{self.basis()} {pred.get('time_ms', float('nan')):.1f}{t_sd} ms per {st.selected_unit}"
                  f"{f' of {st.selected_batch}' if st.selected_batch else ''}{t_wide}, "
                  f"{pred.get('power_w', float('nan')):.2f} W{p_sd}{p_wide}")
        if st.selected_prior and st.selected_basis == "predicted":
            expect += "\n(roofline prior alone: no mode profiled, no measurement)"
        # an emulated tree is files the simulator plays: said as on the header (it said nothing)
        sim = (" (simulated device)" if st.backend.simulated else
               " (EMULATED board, SIMULATED)" if st.backend.emulated else "")
        if p.noop:
            # the board runs the mode: applied here (y, read back), or it already did
            done = self.result is not None and self.result.ok and self.result.target == p.target
            # the mode alone on its row: with ' (simulated device)' it wrapped at 80x24
            lines = [f"[b]{'Applied' if done else 'Already running'}[/b] {p.target.describe()}",
                     expect, "",
                     f"applied and read back{sim}: the board runs this mode now; [b]r[/b] rolls back"
                     if done else f"the board{sim} already runs this mode: nothing to apply"]
            self.query_one("#plan", Static).update("\n".join(lines))
            return
        lines = [f"[b]Apply[/b] {p.target.describe()}", f"now:  {p.current.describe()}", expect,
                 f"press [b]y[/b] to apply{sim}, [b]r[/b] to roll back afterwards"]
        if msg.note:
            lines.append(f"[yellow]{escape(msg.note)}[/yellow]")
        lines += [""] + [f"{k + 1}. {s}" for k, s in enumerate(p.steps)]
        self.query_one("#plan", Static).update("\n".join(lines))

    def basis(self) -> str:
        """How the expected figures were obtained, in the words shown next to them."""
        basis = self.app.state.selected_basis
        return ("measured while profiling" if basis == "measured" else
                "SIMULATED, measured while profiling" if basis == "simulated" else "predicted")

    def _device_busy(self) -> bool:
        if self.busy:
            self.app.notify(f"wait: {self.busy} is under way", severity="warning")
            return True
        return False

    # -- apply --------------------------------------------------------------------------------
    def action_confirm(self) -> None:
        st = self.app.state
        if st.selected is None:
            self.app.notify("no mode selected: pick one on 4 Pareto first", severity="warning")
            return
        if self._device_busy():
            return
        self.busy = "applying"
        self._result("applying…", home=True)
        be = st.backend
        # the pick's own workload (the app's stayed resnet18 whatever the model's: a user's trial
        # compared simulated resnet18 training with a mobilenetv3 prediction)
        stand_in = (st.selected_workload or st.workload) if be.simulated and be.workload is None else None
        self.do_apply(st.selected, stand_in)

    @work(thread=True, group="device", exit_on_error=False)
    def do_apply(self, mode, stand_in: str | None) -> None:
        """Apply and verify (remembered for `ptui restore`, as an apply from the CLI is)."""
        be = self.app.state.backend
        try:
            res = core.apply(be, mode)
        except Exception as e:  # noqa: BLE001 - apply_mode reports failures; this is a bug guard
            res = core.ApplyResult(False, mode, None, None, f"apply failed: {e}")
        started = None
        if res.ok and stand_in is not None:
            # a real board runs the user's training job; the simulated board trains the profiled
            # workload in its place, so measured power can be compared with the prediction
            started = stand_in if stand_in in core.WORKLOADS else "resnet18"
            # at the batch size the pick was made for (its prediction is at that size)
            be.start_training(core.get_workload(started, self.app.state.selected_batch or 16))
        self.post_message(ApplyFinished(res, started))

    @on(ApplyFinished)
    def applied(self, msg: ApplyFinished) -> None:
        res = msg.result
        self.busy = None
        self.result = res
        if res.ok:
            self.snapshot = res.snapshot
            self.measure_from = time.monotonic()
            self.app.state.applied = res.readback or res.target
        # said in the result panel only: a toast would sit over the plot's axis
        self._result(("[green]" if res.ok else "[red]") + escape(_mode_apart(res))
                     + ("[/green]" if res.ok else "[/red]"), home=True)
        self.show_plan()

    def tick(self) -> None:
        st = self.app.state
        hist = st.sampler.history()
        self.query_one(PowerPlot).show(hist, "measured total power (W)")
        if self.measure_from is None or self.result is None or not self.result.ok:
            return
        el = time.monotonic() - self.measure_from
        recent = [p for t, p in hist if p is not None and t >= -min(el, 10.0)]
        if not recent:
            return
        meas = sum(recent) / len(recent)
        pred = st.selected_pred.get("power_w")
        # the watts of an emulated board are its emulator's simulator, not a board's rails (they
        # read as a live measurement: 'measured 20.82 W over 10 s', a user trial)
        who = (f" (simulated {st.backend.workload.name} training)"
               if st.backend.simulated and st.backend.workload else
               " (SIMULATED: the emulated board's power)" if st.backend.emulated else "")
        txt = (f"[green]{escape(_mode_apart(self.result))}[/green]\n"
               f"measured {meas:.2f} W over {min(el, 10):.0f} s{who}")
        if pred:
            # a line of its own: after the measured figures it wrapped at 80x24 between the
            # expected watts and their unit ('predicted 28.93' / 'W')
            txt += f"\n{self.basis()} {pred:.2f} W, difference {100 * (meas - pred) / pred:+.1f} %"
        if el >= 10:
            txt += "   (10 s measurement done)"
            self.measure_from = None
        self._result(txt + "\n[dim]r: roll back   s: persist[/dim]")

    # -- roll back, persist -------------------------------------------------------------------
    def action_rollback(self) -> None:
        if self.snapshot is None:
            self.app.notify("nothing to roll back", severity="warning")
            return
        if self._device_busy():
            return
        self.busy = "rolling back"
        self._result("rolling back…", home=True)
        self.do_rollback(self.snapshot, self.result.readback if self.result is not None else None)

    @work(thread=True, group="device", exit_on_error=False)
    def do_rollback(self, snap, expect=None) -> None:
        try:
            self.post_message(RollbackFinished(core.rollback(self.app.state.backend, snap, expect)))
        except core.BoardChanged as e:
            self.post_message(RollbackFinished(None, str(e), changed=True))
        except Exception as e:  # noqa: BLE001
            self.post_message(RollbackFinished(None, str(e)))

    @on(RollbackFinished)
    def rolled_back(self, msg: RollbackFinished) -> None:
        self.busy = None
        if msg.error is not None:
            if msg.changed:
                # the board is no longer in the mode this apply left: the panels stop saying it is
                # (they said 'the board runs this mode now; r rolls back' over another's mode)
                self.snapshot = self.result = self.measure_from = None
                self.app.state.applied = None
                self.show_plan()
            self._result(f"[red]rollback failed: {escape(str(msg.error))}[/red]", home=True)
            return
        self.snapshot = None
        self.result = None
        self.measure_from = None
        self.app.state.applied = None
        self._result(f"rolled back to {msg.mode.describe()}", home=True)
        self.show_plan()

    def action_persist(self) -> None:
        be = self.app.state.backend
        if not be.can_persist:
            who = "the simulated board" if be.simulated else f"the {be.kind} backend"
            self.app.notify(f"keeping a mode across reboots needs a real Jetson (nvpmodel); {who} "
                            f"cannot", severity="warning")
            return
        if self._device_busy():
            return
        self.busy = "persisting"
        self.do_persist()

    @work(thread=True, group="device", exit_on_error=False)
    def do_persist(self) -> None:
        be = self.app.state.backend
        try:
            self.post_message(PersistFinished(core.persist(be, be.current_mode())))
        except Exception as e:  # noqa: BLE001
            self.post_message(PersistFinished(None, str(e)))

    @on(PersistFinished)
    def persisted(self, msg: PersistFinished) -> None:
        self.busy = None
        if msg.error is not None:
            self.app.notify_error(f"persist failed: {msg.error}")
        else:
            self.app.notify(msg.text)

    def shutdown(self) -> None:
        pass


def _mode_apart(res) -> str:
    """An apply's message ('applied and verified: <mode>') with the mode read back on a row of its
    own: the whole was wider than the panel at 80x24 and wrapped a figure away from its unit
    ('memory 3199' / 'MHz')."""
    if res.readback is None:
        return res.message
    words = res.readback.describe()
    return res.message.replace(f": {words}", f":\n{words}", 1)
