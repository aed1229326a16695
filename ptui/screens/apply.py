"""Apply: the exact plan, a confirmation, the read-back check, then ten seconds of measured power
next to the prediction; roll back on a key."""
from __future__ import annotations

import time

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from ..core import apply as core_apply
from ..widgets.powerplot import PowerPlot


class ApplyScreen(Screen):
    BINDINGS = [Binding("y", "confirm", "Apply (confirm)"), Binding("r", "rollback", "Roll back"),
                Binding("s", "persist", "Persist")]
    COMMANDS_ = (("Apply the selected mode", "Write the mode to the device and verify it", "action_confirm"),
                 ("Roll back", "Return to the mode before the last apply", "action_rollback"),
                 ("Persist the mode", "Keep the mode across reboots (nvpmodel)", "action_persist"))

    def __init__(self) -> None:
        super().__init__()
        self.snapshot = None
        self.result = None
        self.busy = False
        self.measure_from: float | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="plan", classes="panel")
        yield Static(id="result", classes="panel")
        yield PowerPlot(id="power-plot")
        yield Footer()

    def on_mount(self) -> None:
        self.tick()
        self.set_interval(0.5, self.tick)

    def on_screen_resume(self) -> None:
        self.show_plan()

    def show_plan(self) -> None:
        st = self.app.state
        if st.selected is None:
            self.query_one("#plan", Static).update(
                "No mode selected: pick one on 4 Pareto (enter), then confirm here with y.")
            return
        try:
            p = core_apply.plan(st.backend, st.selected)
        except Exception as e:  # noqa: BLE001
            self.query_one("#plan", Static).update(f"[red]cannot plan: {e}[/red]")
            return
        pred = st.selected_pred
        lines = [f"[b]Apply[/b] {p.target}   (now: {p.current.key})",
                 f"predicted {pred.get('time_ms', float('nan')):.1f} ms per minibatch, "
                 f"{pred.get('power_w', float('nan')):.2f} W ± {pred.get('power_w_std', 0):.2f}", ""]
        lines += [f"{k + 1}. {s}" for k, s in enumerate(p.steps)]
        sim = " (simulated device)" if st.backend.simulated else ""
        lines += ["", f"press [b]y[/b] to apply{sim}, [b]r[/b] to roll back afterwards"]
        self.query_one("#plan", Static).update("\n".join(lines))

    def action_confirm(self) -> None:
        st = self.app.state
        if st.selected is None or self.busy:
            return
        self.busy = True
        self.query_one("#result", Static).update("applying…")
        self.do_apply(st.selected)

    @work(thread=True, exclusive=True, group="apply", exit_on_error=False)
    def do_apply(self, mode) -> None:
        res = core_apply.apply_mode(self.app.state.backend, mode)
        self.app.call_from_thread(self.applied, res)

    def applied(self, res) -> None:
        self.busy = False
        self.result = res
        if res.ok:
            self.snapshot = res.snapshot
            self.measure_from = time.monotonic()
            self.app.notify(res.message)
            be = self.app.state.backend
            if be.simulated and be.workload is None:
                # on a real board the user's training job is running; the simulated board runs the
                # profiled workload in its place, so measured power can be compared with the prediction
                from ..core.workloads import WORKLOADS, get_workload
                name = self.app.state.workload if self.app.state.workload in WORKLOADS else "resnet18"
                be.start_training(get_workload(name))
                self.app.notify(f"simulated board now trains {name} as your training job")
        else:
            self.app.notify_error(res.message)
        self.query_one("#result", Static).update(("[green]" if res.ok else "[red]") + res.message
                                                 + ("[/green]" if res.ok else "[/red]"))
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
        who = (f" (simulated {st.backend.workload.name} training)"
               if st.backend.simulated and st.backend.workload else "")
        txt = f"[green]{self.result.message}[/green]\nmeasured {meas:.2f} W over {min(el, 10):.0f} s{who}"
        if pred:
            txt += f"   predicted {pred:.2f} W   difference {100 * (meas - pred) / pred:+.1f} %"
        if el >= 10:
            txt += "   (10 s measurement done)"
            self.measure_from = None
        self.query_one("#result", Static).update(txt + "\n[dim]r: roll back   s: persist[/dim]")

    def action_rollback(self) -> None:
        if self.snapshot is None:
            self.app.notify("nothing to roll back", severity="warning")
            return
        try:
            m = core_apply.rollback(self.app.state.backend, self.snapshot)
        except Exception as e:  # noqa: BLE001
            self.app.notify_error(f"rollback failed: {e}")
            return
        self.snapshot = None
        self.result = None
        self.query_one("#result", Static).update(f"rolled back to {m.key}")
        self.app.notify(f"rolled back to {m.key}")
        self.show_plan()

    def action_persist(self) -> None:
        be = self.app.state.backend
        if not hasattr(be, "persist"):
            self.app.notify("persisting a mode needs a real Jetson (nvpmodel); the simulator cannot",
                            severity="warning")
            return
        try:
            msg = be.persist(be.current_mode())
        except Exception as e:  # noqa: BLE001
            self.app.notify_error(f"persist failed: {e}")
            return
        self.app.notify(msg)

    def shutdown(self) -> None:
        pass
