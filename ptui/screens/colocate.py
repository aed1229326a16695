"""Colocate: training beside inference on one board (the managed interleaving, docs/concurrent.md).

The user names the training workload, the inference workload, the request rate and the two
budgets; a worker runs the concurrent decision (core.colocate_view: the walk, its baselines and
the feasible region over PowerTrain's grid x every inference batch) and the screen draws the region
(training samples/s against mean power, one line per inference batch) with the pick, the budget
and the baselines.  Every figure is SIMULATED, and the screen says so.

`r` runs the built-in demo pair under the managed interleaving (core.run_demo: the decision applied
verified, the board restored at the end, on `r` again or when the app quits) and shows it live: the
running p99 against its budget over the board's clock, throughput, power.  On a Jetson or an
emulated board it runs there, in wall time; with the simulated board, on a simulated board of its
own with a virtual clock (the catalogue workloads' simulated times and power, SIMULATED).
"""
from __future__ import annotations

import threading

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Label, LoadingIndicator, Select, Static

from .. import core
from ..core import INFERENCE, WORKLOADS
from ..messages import ColocateDecided, ColocateLive, ColocateRunEnded
from ..widgets.safeplot import SafePlot

FIELDS = (("#rate", "requests/s"), ("#latency", "p99 ms"), ("#budget", "budget W"))
BASELINES = (("maxn_largest_feasible_batch", "MAXN"), ("best_preset", "preset"),
             ("training_alone", "training alone"))
"""The decision's baselines (keys of its body's "baselines") and their names in the details."""


class ColocateScreen(Screen):
    TITLE = "ptui · 6 Colocate"
    AUTO_FOCUS = "#go"
    BINDINGS = [Binding("d", "decide", "Decide"), Binding("r", "run", "Run/stop demo")]
    COMMANDS_ = (("Decide training beside inference",
                  "The mode and inference batch for the rate and budgets", "action_decide"),
                 ("Run the interleaving demo", "The demo pair under the decision, live", "action_run"))

    def __init__(self) -> None:
        super().__init__()
        self.busy = False
        self.view = None
        """The latest core.ColocateView (None before the first decision)."""
        self.asked: tuple | None = None
        """The goal the view answers: (train, infer, rate, latency ms, budget W)."""
        self.running = False
        """The demo pair runs (a worker drives the board)."""
        self.stop = threading.Event()
        """Set to end the running demo (r again, or the app quits); the board is then restored."""
        self.quitting = threading.Event()
        """Set when the app quits: a decision under way ends at its next profile (core.colocate's
        stop) instead of keeping the app's process alive for its 10-20 s."""
        self.live: list[dict] = []
        """The running demo's snapshots (core.live_snapshot), oldest first."""
        self.ran: dict | None = None
        """The last demo's result (core.run_demo)."""

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
            # scrolls: at 80x24 a decision's details run past the screen's bottom (the last
            # baseline and the plot's legend were cut off, out of reach)
            with VerticalScroll(id="colo-side"):
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
        if self.busy or self.running:
            return
        goal = self.begin("deciding: profiling up to 15 modes on the simulated board, then the "
                          "feasible region…")
        if goal is not None:
            self.busy = True
            self.decide(goal)

    def begin(self, doing: str) -> tuple | None:
        """The form's goal with the spinner on and `doing` in the details; None (said in one
        line) when a field is bad."""
        try:
            goal = self.goal()
        except core.InputError as e:
            self.app.notify_error(str(e))
            # the panel says it too: the toast went and the decision before stayed, as if it
            # answered the fields now on screen
            shown = "the demo run" if self.ran is not None or self.running else "the decision"
            before = ("" if self.asked is None else
                      f"\n[dim]the plot is {shown} for the fields before: "
                      f"{escape(core.goal_text(*self.asked[2:]))}[/dim]")
            self.query_one("#colo-details", Static).update(f"[red]{escape(str(e))}[/red]{before}")
            return None
        self.query_one("#colo-spinner").display = True
        self.query_one("#colo-details", Static).update(doing)
        return goal

    @work(thread=True, exclusive=True, group="colocate", exit_on_error=False)
    def decide(self, goal: tuple) -> None:
        train, infer, rate, latency, budget = goal
        try:
            view = core.colocate_view(self.app.state.backend.device, core.get_workload(train), infer,
                                      rate, latency, budget, stop=self.quitting.is_set)
        except core.Interrupted:
            return                                  # the app is quitting (quit_now)
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
        self.view, self.asked, self.ran, self.live = msg.view, msg.goal, None, []
        self.query_one("#colo-details", Static).update("\n".join(details(msg.view.body, msg.goal)))
        self.draw()

    # -- the live demo ----------------------------------------------------------------------------
    def action_run(self) -> None:
        if self.running:
            self.stop.set()
            self.query_one("#colo-details", Static).update("stopping the demo and restoring the board…")
            return
        if self.busy:
            return
        goal = self.begin("deciding (up to 15 simulated modes), then running the demo pair under "
                          "the interleaving…")
        if goal is not None:
            self.running, self.live, self.ran, self.asked = True, [], None, goal
            self.stop.clear()
            self.run_live(goal)

    @work(thread=True, exclusive=True, group="colocate-run", exit_on_error=False)
    def run_live(self, goal: tuple) -> dict | None:
        train, infer, rate, latency, budget = goal
        be = self.app.state.backend
        if be.kind == "sim":
            # the app's simulated board follows the wall clock, so the demo would measure this
            # host's small MLPs beside the simulator's idle power; a simulated board of its own, on
            # a virtual clock, runs the catalogue workloads' times and power (as `ptui
            # interleave-demo` does), and the dashboard's board is left alone
            be, _ = core.open_backend("sim", be.device.name)
        try:
            res = core.run_demo(be, train_workload=train, infer_workload=infer,
                                rate=rate, latency_ms=latency, budget_w=budget,
                                progress=lambda snap: self.post_message(ColocateLive(snap)), stop=self.stop)
        except Exception as e:  # noqa: BLE001 - shown in the app
            self.post_message(ColocateRunEnded(None, str(e)))
            return None
        self.post_message(ColocateRunEnded(res))
        return res                     # the worker's result: what quitting waited for

    @on(ColocateLive)
    def live_figures(self, msg: ColocateLive) -> None:
        self.query_one("#colo-spinner").display = False
        self.live.append(msg.snapshot)
        self.query_one("#colo-details", Static).update("\n".join(live_lines(msg.snapshot, self.asked)))
        self.draw_live()

    @on(ColocateRunEnded)
    def run_ended(self, msg: ColocateRunEnded) -> None:
        self.running = False
        self.query_one("#colo-spinner").display = False
        if msg.result is None:
            why = escape(msg.error or "")
            self.query_one("#colo-details", Static).update(f"[red]the demo failed: {why}[/red]")
            return
        self.ran = msg.result
        self.query_one("#colo-details", Static).update("\n".join(ran_lines(msg.result)))
        self.draw_live()

    def draw_live(self) -> None:
        """The running p99 (each snapshot: the phase so far) against the budget, over the clock."""
        assert self.asked is not None
        widget = self.query_one("#colo-plot", SafePlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        latency = self.asked[3]
        live = [s for s in self.live if s["measured"]["p99_ms"] is not None]
        # titles within 36 columns: the plot is 40 at 80x24, and plotext leaves out a longer one
        plt.title("SIMULATED demo: running p99 ms" if self.app.state.backend.not_live
                  else "demo: running p99 ms")
        plt.xlabel("board clock s")
        if live:
            plt.plot([s["clock_s"] for s in live], [s["measured"]["p99_ms"] for s in live], color="cyan",
                     label="p99")
        plt.hline(latency, "red")
        widget.refresh()

    # -- the plot -------------------------------------------------------------------------------
    def redraw(self) -> None:
        if self.running or self.ran is not None:
            self.draw_live()
        elif self.view is not None:
            self.draw()
        else:
            self.draw_empty()

    def draw_empty(self) -> None:
        plt = self.query_one("#colo-plot", SafePlot).plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("SIMULATED: train samples/s vs W")

    def draw(self) -> None:
        assert self.view is not None and self.asked is not None
        widget = self.query_one("#colo-plot", SafePlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        _, _, rate, latency, budget = self.asked
        plt.title(f"SIMULATED: p99 <= {latency:g} ms at {rate:g}/s")
        plt.xlabel("mean power W")
        plt.ylabel("samples/s")     # beside the x label: "train samples/s mean power W" read as one
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
        reason = body.get("reason") or "nothing meets the budgets"
        c = body.get("closest")
        if not c:
            return head + [f"[red]{escape(reason)}[/red]"]
        # the reason's first clause says the budget that binds; the rest named the closest option
        # by its compact key ('4c/1344/522.75/2133') and its figures, as the lines below do in
        # words (the whole ran to 13 lines at 80x24, the closest option below the fold)
        p99 = c["latency_p99_ms"]
        # the watts with the training, and a queue that grows on a line of its own (36 columns at
        # 80x24: 'inference batch 1: p99 179 ms, 17.6 W' wrapped its watts to a row of their own)
        tail = ([f" p99 {p99:.0f} ms"] if p99 is not None and p99 < float("inf")
                else ["", "    no p99 (a growing queue)"])
        which = ("the least power whose p99 holds" if c.get("meets_latency")
                 else "the least over its latency budget")
        return head + [f"[red]{escape(reason.split('; ')[0])}[/red]",
                       f"closest: {_knobs(c['key'])}",
                       f"  inference batch {c['batch_size']}:{tail[0]}", *tail[1:],
                       f"  {c['power_w']:.1f} W, {c['train_samples_per_s']:.1f} training samples/s",
                       f"  {100 * c['over_budget']:.1f} % of requests over {latency:g} ms",
                       f"[dim]({which})[/dim]"]
    p = body["pick"]
    late = 100 * p["over_budget"]
    lines = head + [
        f"[b]pick[/b] {_knobs(p['key'])}",
        f"  inference batch {p['batch_size']}, {100 * p['inference_share']:.0f} % of GPU",
        f"  p99 {p['latency_p99_ms']:.0f} ms (budget {latency:g}), p50 {p['latency_p50_ms']:.0f}",
        f"  {p['power_w']:.1f} W (budget {budget:g}), {late:.2f} % late",
        # the pick against the baselines in one table, each row a line: at 80x24 the panel
        # holds 14 lines, and a line per figure put the baselines below its fold
        f"{'':5}{'training samples/s':>18}{'W':>6}",
        _row(f"pick b{p['batch_size']}", p, budget)]
    for key, name in BASELINES:
        b = body["baselines"].get(key)
        if b is None:
            lines.append(f"  {name:<14} [dim]none meets both[/dim]")
            continue
        lines.append(_row(f"{name} b{b['batch_size']}" if "batch_size" in b else name, b, budget))
    preset = (body["baselines"].get("best_preset") or {}).get("preset")
    if preset:
        lines.append(f"  [dim](best preset: {escape(preset)})[/dim]")
    lines += [f"{body['profiled_modes']} modes profiled ({body['strategy']})",
              "[dim]lines: per inference batch, the most training at each power whose latency "
              "holds (cyan: the pick's batch)[/dim]"]
    return lines


def _row(label: str, point: dict, budget: float) -> str:
    """One row of the details' table: its training samples/s and mean W, '> budget' in red where
    the watts are over the power budget (35 columns: the panel's width at 80x24 with its scrollbar)."""
    over = "" if point.get("within_power_budget", True) else f" [red]> {budget:g}[/red]"
    return f"  {label:<14}{point['train_samples_per_s']:>7.1f}{point['power_w']:>6.1f}{over}"


def live_lines(snap: dict, goal: tuple | None) -> list[str]:
    """The details panel while the demo runs: the phase's decision and its figures so far."""
    m = snap["measured"]
    label = "SIMULATED" if m.get("simulated") else "measured"
    # a figure a line (the panel is 36 columns at 80x24): longer lines wrapped between a number
    # and its unit ('209.8' / 'samples/s')
    lines = [f"[b]demo running[/b] ({label}; r stops it and restores the board)",
             f"{snap['clock_s']:.0f} s of the board's clock at {snap['rate_per_s']:g} req/s",
             f"mode {_knobs(snap['key'])}", f"  inference batch {snap['batch']}",
             f"  requests {m['requests']}, {100 * m['over_budget']:.2f} % late",
             f"  p50 {_ms(m['p50_ms'])} / p99 {_ms(m['p99_ms'])} ms"
             + (f" (budget {goal[3]:g})" if goal else ""),
             f"  mean inference batch {m['mean_batch']:.2f}",
             f"  training {m['train_sps']:.1f} samples/s",
             f"  power {_w(m['power_w'])}" + (f" (budget {goal[4]:g})" if goal else ""),
             f"  predicted p99 {snap['predicted_p99_ms']:.0f} ms, {snap['predicted_power_w']:.1f} W",
             f"  predicted training {snap['predicted_train_sps']:.1f}/s"]
    return lines


def ran_lines(res: dict) -> list[str]:
    """The details panel after the demo: each phase's measured figures and where the board is."""
    label = "SIMULATED " if res["simulated"] else ""
    how = "stopped" if res.get("stopped") else "done"
    lines = [f"[b]demo {how}[/b]: {label}{res['device']}, torch on {res['torch_device']}"]
    for ph in res["phases"]:
        m = ph["measured"]
        lines += [f"{ph['rate_per_s']:g} req/s: {_knobs(ph['key'])}", f"  inference batch {ph['batch']}",
                  f"  p99 {_ms(m['p99_ms'])} ms, {100 * m['over_budget']:.2f} % late",
                  f"  {m['train_sps']:.1f} samples/s, {_w(m['power_w'])}"]
    back = ("board back in its starting mode" if res["restored"]
            else f"[red]the board is in {escape(_words(res['end_mode']))}, not its starting mode[/red]")
    return lines + [back]


def _words(key: str) -> str:
    """A mode key of the decision's document ('6c/2201.6/726.75/3199') as the README and the CLI
    say a mode: '6 cores · CPU 2.20 GHz · GPU 727 MHz · memory 3199 MHz' (the key itself where it
    is not one)."""
    try:
        return core.Mode.from_key(key).describe()
    except ValueError:
        return key


def _knobs(key: str) -> str:
    """The mode in words over two lines, its clocks indented under its cores and CPU: the panel is
    36 columns at 80x24, and the whole description wrapped anywhere."""
    try:
        w = core.Mode.from_key(key).words()
    except ValueError:
        return escape(key)
    return f"{w[0]} · {w[1]}\n  {w[2]} · {w[3]}"


def _ms(v) -> str:
    return "-" if v is None else f"{v:.0f}"


def _w(v) -> str:
    return "- W" if v is None else f"{v:.1f} W"
