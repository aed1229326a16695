"""Colocate: training beside inference on one board (the managed interleaving, docs/concurrent.md).

The user names the training workload, the inference workload, the request rate and the two
budgets; a worker runs the concurrent decision (core.colocate_view: the walk, its baselines and
the feasible region over PowerTrain's grid x every inference batch) and the screen draws the region
(training samples/s against mean power, one line per inference batch) with the pick, the budget
and the baselines.  Every figure is SIMULATED, and the screen says so.
"""
from __future__ import annotations

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Label, LoadingIndicator, Select, Static

from .. import core
from ..core import INFERENCE, WORKLOADS
from ..messages import ColocateDecided
from ..widgets.safeplot import SafePlot

FIELDS = (("#rate", "requests/s"), ("#latency", "p99 ms"), ("#budget", "budget W"))


class ColocateScreen(Screen):
    TITLE = "ptui · 6 Colocate"
    AUTO_FOCUS = "#go"
    BINDINGS = [Binding("d", "decide", "Decide")]
    COMMANDS_ = (("Decide training beside inference",
                  "The mode and inference batch for the rate and budgets", "action_decide"),)

    def __init__(self) -> None:
        super().__init__()
        self.busy = False
        self.view = None
        """The latest core.ColocateView (None before the first decision)."""
        self.asked: tuple | None = None
        """The goal the view answers: (train, infer, rate, latency ms, budget W)."""

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(classes="form"):
            yield Label("train")
            yield Select([(n, n) for n in WORKLOADS], value="resnet18", allow_blank=False, id="train")
            yield Label("serve")
            yield Select([(n, n) for n in INFERENCE], value="resnet50", allow_blank=False, id="infer")
            yield Button("Decide (d)", id="go", variant="primary")
        with Horizontal(classes="form"):
            yield Label("requests/s")
            yield Input("20", id="rate")
            yield Label("p99 ms")
            yield Input("250", id="latency")
            yield Label("budget W")
            yield Input("35", id="budget")
        with Horizontal():
            yield SafePlot(id="colo-plot", redraw=self.redraw)
            with Vertical(id="colo-side"):
                yield Static(id="colo-details", classes="panel")
                yield LoadingIndicator(id="colo-spinner")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#colo-spinner").display = False
        self.query_one("#colo-details", Static).update(
            "[b]SIMULATED[/b]: the power mode and inference batch that give training the most "
            "samples/s while requests keep their p99 latency and the board its power budget. One "
            "minibatch runs at a time, training or inference, never pre-empted. Press d.")
        self.draw_empty()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_decide()

    @on(Input.Submitted)
    def submitted(self) -> None:
        self.action_decide()

    def goal(self) -> tuple[str, str, float, float, float]:
        """The form as (train, infer, rate, latency ms, budget W); InputError names a bad field."""
        vals = []
        for wid, name in FIELDS:
            text = self.query_one(wid, Input).value.strip()
            try:
                v = float(text)
            except ValueError:
                raise core.InputError(f"{name}: give a number, got {text!r}") from None
            if not (v > 0 and v < float("inf")):
                raise core.InputError(f"{name} must be a positive number, got {text!r}")
            vals.append(v)
        return (str(self.query_one("#train", Select).value), str(self.query_one("#infer", Select).value),
                vals[0], vals[1], vals[2])

    def action_decide(self) -> None:
        if self.busy:
            return
        try:
            goal = self.goal()
        except core.InputError as e:
            self.app.notify_error(str(e))
            return
        self.busy = True
        self.query_one("#colo-spinner").display = True
        self.query_one("#colo-details", Static).update(
            "deciding: profiling up to 15 modes on the simulated board, then the feasible region…")
        self.decide(goal)

    @work(thread=True, exclusive=True, group="colocate", exit_on_error=False)
    def decide(self, goal: tuple) -> None:
        train, infer, rate, latency, budget = goal
        try:
            view = core.colocate_view(self.app.state.backend.device, core.get_workload(train), infer,
                                      rate, latency, budget)
        except Exception as e:  # noqa: BLE001 - shown in the app
            self.post_message(ColocateDecided(goal, None, str(e)))
            return
        self.post_message(ColocateDecided(goal, view))

    @on(ColocateDecided)
    def decided(self, msg: ColocateDecided) -> None:
        self.busy = False
        self.query_one("#colo-spinner").display = False
        if msg.view is None:
            self.query_one("#colo-details", Static).update(f"[red]{escape(msg.error or '')}[/red]")
            return
        self.view, self.asked = msg.view, msg.goal
        self.query_one("#colo-details", Static).update("\n".join(details(msg.view.body, msg.goal)))
        self.draw()

    # -- the plot -------------------------------------------------------------------------------
    def redraw(self) -> None:
        if self.view is not None:
            self.draw()
        else:
            self.draw_empty()

    def draw_empty(self) -> None:
        plt = self.query_one("#colo-plot", SafePlot).plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("SIMULATED: training samples/s vs mean power W")

    def draw(self) -> None:
        assert self.view is not None and self.asked is not None
        widget = self.query_one("#colo-plot", SafePlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        _, _, rate, latency, budget = self.asked
        plt.title(f"SIMULATED: p99 <= {latency:g} ms at {rate:g}/s")
        plt.xlabel("mean power W")
        plt.ylabel("train samples/s")
        body = self.view.body
        # the pick's batch in colour and named; the other batches' edges in gray, unnamed (a
        # legend of seven sizes covered half the plot at 80x24)
        chosen = (body.get("pick") or body.get("closest") or {}).get("batch_size")
        for b, (w, sps) in sorted(self.view.edges.items(), key=lambda kv: kv[0] == chosen):
            if b == chosen:
                plt.plot(list(w), list(sps), color="cyan", label=f"b{b} edge")
            else:
                plt.plot(list(w), list(sps), color="gray")
        plt.vline(budget, "red")
        marks = [(body.get("pick"), "red", "pick")]
        base = body.get("baselines") or {}
        marks += [(base.get("maxn_largest_feasible_batch"), "yellow", "MAXN"),
                  (base.get("best_preset"), "green", "preset")]
        if not body.get("feasible"):
            marks = [(body.get("closest"), "red", "closest")]
        for p, colour, label in marks:
            if p:
                plt.scatter([p["power_w"]], [p["train_samples_per_s"]], color=colour, marker="x",
                            label=label)
        widget.refresh()


def details(body: dict, goal: tuple) -> list[str]:
    """The details panel: the pick (or why nothing meets the budgets, and the closest option) and
    the baselines, each with its figures against the budgets."""
    train, infer, rate, latency, budget = goal
    head = [f"[b]SIMULATED[/b] {escape(train)} training beside {escape(infer)} at {rate:g} req/s"]
    if not body.get("feasible"):
        lines = head + [f"[red]{escape(body.get('reason') or 'nothing meets the budgets')}[/red]"]
        c = body.get("closest")
        if c:
            lines.append(f"closest: {escape(c['key'])} b{c['batch_size']}: p99 "
                         f"{c['latency_p99_ms']:.0f} ms, {c['power_w']:.1f} W")
        return lines
    p = body["pick"]
    late = 100 * p["over_budget"]
    lines = head + [
        f"[b]pick[/b] {escape(p['key'])}, inference batch {p['batch_size']}",
        f"  training {p['train_samples_per_s']:.1f} samples/s",
        f"  latency p50 {p['latency_p50_ms']:.0f} / p99 {p['latency_p99_ms']:.0f} ms "
        f"(budget {latency:g}), {late:.2f} % late",
        f"  power {p['power_w']:.1f} W (budget {budget:g}); GPU {100 * p['inference_share']:.0f} % "
        f"on inference",
        f"  {body['profiled_modes']} modes profiled ({body['strategy']})"]
    names = {"maxn_largest_feasible_batch": "MAXN", "best_preset": "best preset",
             "training_alone": "training alone"}
    for key, name in names.items():
        b = body["baselines"].get(key)
        if b is None:
            lines.append(f"{name}: none meets the budgets")
            continue
        over = "" if b.get("within_power_budget", True) else " [red]over budget[/red]"
        batch = f" b{b['batch_size']}" if "batch_size" in b else ""
        named = f" {b['preset']}" if b.get("preset") else ""
        lines.append(f"{name}{named}{batch}: {b['train_samples_per_s']:.1f}/s, {b['power_w']:.1f} W{over}")
    lines.append("[dim]lines: per inference batch, the most training at each power whose latency "
                 "holds (cyan: the pick's batch)[/dim]")
    return lines
