"""Pareto: every predicted mode (epoch time vs power), the front, goals, details; pick a mode.

Works from a fine-tuned model (predicts the device's whole mode space) or a profile CSV (the
measured modes only), without any device.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np
from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import (
    Button,
    DataTable,
    Footer,
    Header,
    Input,
    Label,
    Select,
    Static,
)

from .. import core
from ..core import InputError, Mode, Table, Timed, cpu_ghz, hms, whole_mhz
from ..messages import PredictionsFailed, PredictionsLoaded, ViewReady
from ..widgets.safeplot import SafePlot
from .profile import short_name

# short labels (the goal is spelled out in the details panel), so the form fits 80 columns
OBJECTIVES = [("fastest", "budget"), ("least power", "deadline"), ("least energy", "energy")]
# one colour per batch size on the plot (red, yellow and green mark the selection, the current
# mode and the front)
BATCH_COLOURS = ["blue", "magenta", "cyan", "orange", "white", "gray"]


def _wide_line(value: float, sd: float, unit: str, *, prior: bool = False) -> list[str]:
    """A spread of half the value or more (any, for the roofline prior alone): its 90 % interval
    on a line of its own (core.wide_interval)."""
    words = core.wide_interval(value, sd, unit, always=prior)
    return [f"  {words}"] if words else []


class PathInput(Input):
    """The path field: Enter loads what it names, and the footer says so."""
    BINDINGS = [Binding("enter", "submit", "Load")]


def _knob_cells(m) -> tuple[str, str, str, str]:
    """A mode's knobs as the front table shows them, in Mode.describe's units: cores, CPU GHz,
    GPU and memory MHz."""
    return str(m.cores), cpu_ghz(m.cpu_mhz), whole_mhz(m.gpu_mhz), whole_mhz(m.mem_mhz)


_STAMP = re.compile(r"(.*) (\d\d-\d\d \d\d:\d\d)(:\d\d)(-\d+)?((?: \(other board\))?)")
"""A saved source's label: its kind and name, its time, its seconds, a second save's number in the
same second, and whether it is another board's."""


def _cut_head(head: str, room: int, diff: int | None) -> str:
    """A label's kind and name in `room` columns: its end cut ('…'), or with `diff` (where it first
    reads otherwise than the label it is most alike to) its middle, so the characters from there
    stay in view ('profile my-lon…ript-v1', not 'profile my-long-train…' twice)."""
    if len(head) <= room:
        return head
    if diff is None:
        return head[:room - 1] + "…"
    lead = min(len(head), max(8, room // 3))         # the kind and the name's start stay
    end = max(len(head) - diff, room // 3)           # what follows the difference, with some before
    if lead + 1 + end <= room:
        return head[:room - 1 - end] + "…" + head[len(head) - end:]
    # the difference far before the end: a window around it between two '…'
    width = room - lead - 2
    start = max(lead, min(diff - width // 2, len(head) - width))
    return head[:lead] + "…" + head[start:start + width] + "…"


def fit_labels(labels: list[str], room: int) -> list[str]:
    """The saved-sources list's labels, each at most `room` columns, so that each reads on one
    line ('model resnet18 bs16 11-27 15:19:08' wrapped over two at 80 columns), and no two alike
    (two names that differed at their ends, saved in the same minute, both read 'profile
    my-long-training… 11-27 15:19').  A label too long loses its seconds and the end of its name
    (the kind and the time stay); where two then read the same, they keep their seconds, then the
    part of their names that tells them apart."""
    parts: list[tuple[str, list[str]]] = []          # the kind and name; the time, short then whole
    for label in labels:
        m = _STAMP.fullmatch(label)
        parts.append((label, [""]) if m is None else
                     (m[1], [f" {m[2]}{m[4] or ''}{m[5]}", label[len(m[1]):]]))
    heads = [head for head, _ in parts]

    def fit(i: int, level: int) -> str:
        label, (head, tails) = labels[i], parts[i]
        if len(label) <= room:
            return label
        tail = tails[min(level, len(tails) - 1)]
        keep = room - len(tail)
        if keep < 9:                                 # too little room for the name: its start
            return label[:max(1, room - 1)] + "…"
        diff = (max(len(os.path.commonprefix([head, h])) for j, h in enumerate(heads) if j != i)
                if level >= 2 and len(heads) > 1 else None)
        return _cut_head(head, keep, diff) + tail

    levels = [0] * len(labels)
    out = [fit(i, 0) for i in range(len(labels))]
    while True:
        seen: dict[str, list[int]] = {}
        for i, text in enumerate(out):
            seen.setdefault(text, []).append(i)
        more = [i for same in seen.values() if len(same) > 1 for i in same
                if len(labels[i]) > room and levels[i] < 2]
        if not more:
            break
        for i in more:
            levels[i] += 1
            out[i] = fit(i, levels[i])
    return out


def _written(src) -> int | None:
    """When a model was last saved (its meta.json, ns); None for a profile CSV (a running profile
    writes it all the time: a source the user loaded stays) or where unreadable."""
    try:
        return (Path(src) / "meta.json").stat().st_mtime_ns if Path(src).is_dir() else None
    except OSError:
        return None


class ParetoScreen(Screen):
    TITLE = "ptui · 4 Pareto"
    AUTO_FOCUS = "#front"
    # Enter takes the selected mode to Apply wherever the focus is (a priority binding: the front
    # table, the goal fields, the dropdowns and the Load button would take it first), except in
    # the path field, where it loads (the footer then says 'enter Load'), and in an open dropdown
    BINDINGS = [Binding("enter", "pick", "To Apply", priority=True), Binding("l", "load", "Load"),
                Binding("g", "goal", "Go to goal"), Binding("b", "batch", "Batch sizes")]
    COMMANDS_ = (("Load predictions", "Load the model or profile in the path box", "action_load"),
                 ("Pick the mode for the goal", "Jump to the mode that meets the goal", "action_goal"),
                 ("Apply the selected mode", "Go to Apply with the selected mode", "action_pick"))

    def __init__(self) -> None:
        super().__init__()
        self.table: Table | None = None
        self.model = None
        self.front: np.ndarray = np.array([], dtype=int)
        self.mb_per_epoch = 3125
        self.sel: int | None = None          # index into self.table
        self.goal_idx: int | None = None
        self.goal_text = ""
        self.what_if = False
        """The predictions are the bundled reference's, not a model of the user's workload."""
        self.foreign = False
        """The model is for another board: a what-if, never applied here."""
        self.goal_error: str | None = None
        # the selected mode is the pick of a goal before this one, which no mode meets: shown, not
        # applied on enter (it offered 'enter: apply this mode' under 'no mode stays within 5 W')
        self.sel_stale = False
        self.source_values: set[str] = set()     # the saved-sources list's paths
        """What is wrong with the goal as typed, shown in the details panel."""
        self.drawn_budget: float | None = None
        self.timed = ""
        """What one time is, as the profile CSV says ('' for a model or an older CSV)."""
        self.unit = "epoch"
        """What the epoch figures count: an epoch, or 1000 optimizer steps of a script whose epoch
        ptui does not know."""
        self.loaded_path: str | None = None
        self.newest_seen: tuple | None = None
        """The app's newest model (else profile) when the screen last opened, and when it was
        written: a newer one, or one written again since, is loaded."""
        self.space = None
        """core.decision.batch.JointSpace when the source holds several batch sizes (else None: one size)."""
        self.pred = None
        """The loaded source (core.usecases.decide.Predictions)."""
        self.view = None
        """The latest core.usecases.decide.View of the source for the goal (candidates, front, decision)."""
        self.view_gen = 0
        self.front_key: tuple | None = None
        self.bs_filter: int | None = None
        """The one batch size the decision is restricted to (None: every size of the source)."""
        self.kept: dict[str, str] = {}
        """What a goal field held before the objective stopped using it (back when it is used)."""

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(classes="form"):
            yield Select([], id="source", prompt="saved models and profiles…")
            yield PathInput(id="path", placeholder="or a model directory / profile CSV path")
            yield Button("Load (l)", id="load")
        with Horizontal(classes="form"):
            yield Label("budget W")
            # text fields: what is typed stays as typed ('1e9' in a number field became '19'), and
            # _field says what is wrong with it, by the field's name
            yield Input("30", id="budget")
            yield Label("deadline s/ep", id="deadline-label")
            yield Input("", id="deadline")
            # several batch sizes: B_noise of E(B) ~ 1 + B / B_noise (empty: throughput only)
            yield Label("noise B", id="noise-label")
            yield Input("", id="noise")
            yield Label("epochs", id="epochs-label")
            yield Input("10", id="epochs")
            yield Select(OBJECTIVES, value="budget", allow_blank=False, id="objective")
        with Horizontal():
            yield SafePlot(id="pareto-plot", redraw=self.redraw)
            with Vertical(id="pareto-side"):
                # scrolls beyond its share of the side (app.tcss): a model of several batch sizes
                # says 13 lines, and at 80x24 the front table below it showed its header alone
                with VerticalScroll(id="details-box"):
                    yield Static(id="details", classes="panel")
                yield DataTable(id="front", cursor_type="row")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        for wid in ("#noise-label", "#noise"):
            self.query_one(wid).display = False
        # short headers (the details panel spells the selected mode out, with units: CPU in GHz, GPU
        # and memory in MHz), so all six columns fit the side panel at 80 columns
        self.query_one("#front", DataTable).add_columns("c", "CPU", "GPU", "mem", "min/ep", "W")
        self.show_used_fields()
        self.on_screen_resume()

    def refresh_sources(self) -> None:
        """The models and profiles ptui saved, newest first, then the bundled reference."""
        dev = self.app.state.backend.device.name
        opts = []
        try:
            for kind, p in core.saved_sources(dev):
                label = f"{kind} {short_name(p.name.removesuffix('.csv'), dev)}"
                # the model's meta.json says its board: by the name, tune's own models
                # (tune-orin-agx-...) were another board's on the board they were made for
                if kind == "model" and not core.model_of(p, dev):
                    label += " (other board)"
                opts.append((label, str(p)))
        except Exception as e:  # noqa: BLE001 - an unreadable store: say so, keep the typed path
            self.app.notify_error(f"cannot list saved models and profiles: {e}")
        ref = core.bundled_reference(dev)
        if (ref / "meta.json").exists():
            opts.append(("ResNet-18 reference (what-if)", str(ref)))     # one line at 80 columns
        sel = self.query_one("#source", Select)
        # the list's text room: its width less its border, padding and arrow (the width the
        # layout gives it at 2/3 of the row beside the Load button, before it is laid out)
        width = sel.size.width or int((self.app.size.width - 12) * 2 / 3)
        opts = list(zip(fit_labels([label for label, _ in opts], max(12, width - 8)),
                        (v for _, v in opts)))
        self.source_values = {v for _, v in opts}
        sel.set_options(opts)

    @on(Select.Changed, "#source")
    def source_chosen(self, event: Select.Changed) -> None:
        # the event's own value: the list may name the loaded source again by the time a blank
        # one (set_options) arrives, which then loaded a file named 'Select.NULL'
        if event.value is Select.NULL or event.select.is_blank() or (
                self.loaded_path is not None
                and Path(str(event.value)).resolve() == Path(self.loaded_path).resolve()):
            return
        self.query_one("#path", Input).value = str(event.value)
        self.action_load()

    def on_screen_resume(self) -> None:
        st = self.app.state
        self.refresh_sources()
        # refresh_sources emptied the list's choice: it names what is loaded again (it read
        # 'saved models and profiles…' over a loaded model after every visit elsewhere)
        self._sync_source(self.loaded_path)
        inp = self.query_one("#path", Input)
        src = st.model_dir or st.profile_csv
        # a model (or profile) made since the last visit is opened: back from Fine-tune, the
        # screen kept the previous source's front as if it were the new fit's (a user's trial);
        # a source the user loaded stays until then
        # (a model saved again since, too: Fine-tune saves a profile's model under the profile's
        # name, so a fit again has the path of the one shown, whose front stayed)
        seen = (src, _written(src)) if src is not None else None
        new = seen is not None and seen != self.newest_seen
        self.newest_seen = seen
        if src and (new or (inp.value != str(src) and (self.table is None or not inp.value))):
            inp.value = str(src)
            self.action_load()
        elif self.table is None and not inp.value:
            ref = core.bundled_reference(st.backend.device.name)
            if (ref / "meta.json").exists():
                # nothing of the user's yet: open on the bundled reference, labelled as a what-if
                inp.value = str(ref)
                self.action_load()
            else:
                self.query_one("#details", Static).update(
                    "Load a fine-tuned model (3 Fine-tune) or a profile CSV, then set a budget.")

    @on(Button.Pressed, "#load")
    def action_load(self) -> None:
        path = self.query_one("#path", Input).value.strip()
        if not path:
            self.app.notify_error("give a model directory or a profile CSV")
            return
        self.query_one("#details", Static).update("predicting every mode…")
        self.loaded_path = path
        self.load(Path(path))

    @work(thread=True, exclusive=True, group="pareto", exit_on_error=False)
    def load(self, path: Path) -> None:
        try:
            be = self.app.state.backend
            # a replay board is set only to its corpus's recorded modes: only those are offered
            # (Apply refused a predicted mode 'not in the replay corpus'), as ptui tune keeps to them
            within = list(be.table) if be.kind == "replay" else None
            pred = core.load_predictions(path, be.device, within=within)
        except Exception as e:  # noqa: BLE001
            self.post_message(PredictionsFailed(path, str(e)))
            return
        self.post_message(PredictionsLoaded(path, pred))

    @on(PredictionsFailed)
    def load_failed(self, msg: PredictionsFailed) -> None:
        """Nothing of the file shown before stays to be picked: its front, its selection and its
        plot go (Enter sent a mode of the previous file to Apply)."""
        self.clear_source()
        self.app.notify_error(msg.error)
        self.query_one("#details", Static).update(f"[red]{escape(msg.error)}[/red]")

    def _sync_source(self, path: str | None) -> None:
        """The saved-sources list names what is loaded (the loaded path among its options), or
        nothing: it kept reading 'bundled ResNet-18 reference (what-if)' over a CSV loaded by
        path, or after a load failed (a user's trial)."""
        sel = self.query_one("#source", Select)
        want = next((v for v in self.source_values if path is not None
                     and Path(v).resolve() == Path(path).resolve()), Select.NULL)
        if sel.value != want:
            with self.prevent(Select.Changed):
                sel.value = want

    def clear_source(self) -> None:
        self._sync_source(None)
        self.table = self.model = self.space = self.view = self.pred = None
        self.front = np.array([], dtype=int)
        self.sel = self.goal_idx = self.front_key = None
        self.loaded_path = None
        self.query_one("#front", DataTable).clear()
        self.show_batch_form(False)
        self.draw_empty()

    def draw_empty(self) -> None:
        plot = self.query_one("#pareto-plot", SafePlot)
        plot.plt.clear_data()
        plot.plt.clear_figure()
        plot.plt.title("nothing loaded")
        plot.refresh()

    @on(PredictionsLoaded)
    def predictions_loaded(self, msg: PredictionsLoaded) -> None:
        p = msg.predictions
        m = p.model
        self.what_if = m is not None and (
            Path(msg.path).resolve() == core.bundled_reference(m.device.name).resolve())
        self.foreign = m is not None and m.device.name != self.app.state.backend.device.name
        self.timed = p.timed or ""
        self.left_out = p.note
        if (p.space is None) != (self.space is None) or (
                self.sel is not None and self.sel >= len(p.space.table if p.space is not None else p.table)):
            self.sel = None                  # an index into the previous source's rows
        self.pred, self.space, self.view, self.front_key = p, p.space, None, None
        self._sync_source(str(msg.path))
        self.show_batch_form(p.space is not None)
        self.loaded(p.table, p.model, p.batches_per_epoch)

    def show_batch_form(self, on: bool) -> None:
        """Several batch sizes: the size filter and the noise scale take the deadline's place (a
        per-minibatch deadline is different work at each size)."""
        for wid in ("#deadline-label", "#deadline"):
            self.query_one(wid).display = not on
        for wid in ("#noise-label", "#noise"):
            self.query_one(wid).display = on
        self.set_class(on, "batch")
        self.bs_filter = None
        self.refresh_bindings()

    def check_action(self, action: str, parameters) -> bool | None:
        # the batch-size filter only exists for a source with several sizes (hidden otherwise)
        if action == "batch":
            return self.space is not None
        if action == "pick":
            # Enter loads in the path field and chooses in an open dropdown: the pick steps aside
            # there (False: the key goes on to the field, and the footer shows its Enter instead)
            f = self.focused
            in_dropdown = (isinstance(f, Select) and f.expanded
                           or isinstance(getattr(f, "parent", None), Select))    # its open list
            return not (isinstance(f, PathInput) or in_dropdown)
        return True

    def action_batch(self) -> None:
        """Cycle the candidate batch sizes: all of them, then each alone."""
        if self.space is None or self.table is None:
            return
        order = [None, *self.space.sizes]
        self.bs_filter = order[(order.index(self.bs_filter) + 1) % len(order)]
        self.action_goal()

    def simulated_rows(self) -> bool:
        """The loaded profile's rows are the simulator's (its `timed` says SIMULATED)."""
        return "SIMULATED" in (self.timed or "")

    def basis(self) -> str:
        """How the figures were obtained, said next to them."""
        if self.model is None:
            if Timed.of(self.timed).what_if:
                return "(what-if from the model's measured size, SIMULATED)"
            # a profile made on the simulator: measured there, not on a board
            return "(measured) SIMULATED, not a board" if self.simulated_rows() else "(measured)"
        if self.foreign:
            return f"(predicted for {self.model.device.name}: what-if only)"
        if self.what_if:
            return "(what-if: bundled ResNet-18 reference)"
        if self.model.about.kind == core.PRIOR_KIND:
            return "(roofline prior alone: no mode profiled, no measurement)"
        # knob values no profiled mode had are not candidates (extrapolations): said, not hidden
        return "(predicted: profiled knobs only)" if getattr(self, "left_out", "") else "(predicted)"

    def step_word(self) -> str:
        """What one time is: a script is timed per optimizer step (or whole iteration)."""
        return Timed.of(self.timed).step_word

    def loaded(self, tab: Table, model, mb) -> None:
        self.table, self.model = tab, model
        # the source's own workload counts epochs (a catalog workload's, or what its profile
        # says); any other's epoch is unknown: 1000 steps (the app's workload's epoch was shown
        # as a spec's or an untagged profile's)
        self.unit = "epoch" if mb else "1k steps"
        self.mb_per_epoch = mb or 1000
        per = "1k" if self.unit != "epoch" else "ep"
        self.query_one("#deadline-label", Label).update(f"deadline s/{per}")
        self.query_one("#epochs-label", Label).update("epochs" if self.unit == "epoch" else "x1k steps")
        if self.space is not None:
            self.table = self.space.table
        self.front = np.array([], dtype=int)
        dt = self.query_one("#front", DataTable)
        dt.clear(columns=True)
        dt.focus()
        self.action_goal()

    # -- goal --------------------------------------------------------------------------------
    FIELDS = {"#budget": "the power budget (W)", "#deadline": "the deadline (s per epoch)",
              "#epochs": "the number of epochs"}
    LABELS = {**FIELDS, "#noise": "the noise scale B"}
    WHOLE = ("#epochs",)
    """Fields that take a whole number."""
    USES = {"budget": ("#budget",), "deadline": ("#deadline",), "energy": ("#budget",)}
    """The goal fields each objective uses (energy: a budget is optional)."""

    def _field(self, wid: str) -> tuple[float | None, str | None]:
        """(value, None), (None, None) when empty or unused, or (None, what is wrong, said with
        the field's name)."""
        inp = self.query_one(wid, Input)
        v = inp.value.strip()
        if not v or inp.disabled:
            return None, None
        whole = wid in self.WHOLE
        try:
            x = int(v) if whole else float(v)
        except ValueError:
            return None, f"{self.LABELS[wid]} must be a {'whole number' if whole else 'number'}, got {v!r}"
        if not math.isfinite(x) or x <= 0:
            return None, f"{self.LABELS[wid]} must be a positive number, got {v}"
        if wid == "#epochs" and x > core.MAX_EPOCHS:
            return None, f"{self.LABELS[wid]} must be at most {core.MAX_EPOCHS}, got {v}"
        return x, None

    def field_error(self) -> str | None:
        """What is wrong with the goal fields in use, else None."""
        wids = ("#budget", "#epochs", "#noise") if self.space is not None else tuple(self.FIELDS)
        return next((e for _, e in map(self._field, wids) if e), None)

    @on(Select.Changed, "#objective")
    def show_used_fields(self, _event=None) -> None:
        """A field the objective does not use is shown as unused (disabled, emptied); its number
        comes back when an objective uses it again."""
        obj = str(self.query_one("#objective", Select).value)
        for wid in ("#budget", "#deadline"):
            inp = self.query_one(wid, Input)
            used = wid in self.USES.get(obj, ())
            if used and inp.disabled:
                inp.disabled, inp.placeholder = False, ""
                inp.value = self.kept.pop(wid, "")
            elif not used and not inp.disabled:
                self.kept[wid] = inp.value
                inp.value, inp.placeholder, inp.disabled = "", "unused", True

    def _num(self, wid: str) -> float | None:
        return self._field(wid)[0]

    @on(Input.Submitted, "#path")
    def path_submitted(self) -> None:
        self.action_load()

    @on(Input.Changed, "#budget, #deadline, #epochs, #noise")
    @on(Input.Submitted, "#budget, #deadline, #epochs, #noise")
    @on(Select.Changed, "#objective")
    def action_goal(self, _event=None) -> None:
        """Ask core for the view of the goal as the fields change (core.view: the decision,
        the candidates' times and energies, the front and the baselines).  A source of several
        batch sizes is decided in a worker; the answer comes back as ViewReady either way.  What is
        wrong with the goal is said in the details panel (no toast, so nothing stale stays on
        screen once the value is fixed)."""
        if self.table is None:
            return
        obj = str(self.query_one("#objective", Select).value)
        error = self.field_error()
        sizes = None if self.bs_filter is None else (self.bs_filter,)
        kw = dict(goal=obj, budget_w=self._num("#budget"), deadline_s=self._num("#deadline"),
                  epochs=int(self._num("#epochs") or 1), mb_per_epoch=self.mb_per_epoch,
                  sizes=sizes, noise_scale=self._num("#noise"))
        self.view_gen += 1
        if self.space is not None:
            self.decide_apart(self.view_gen, self.pred, error, kw)
        else:
            self.view_ready(ViewReady(self.view_gen, *self.decide(self.pred, error, kw)))

    def decide(self, pred, field_error: str | None, kw: dict) -> tuple:
        """(view, None), or (None, what is wrong) for bad input."""
        try:
            if field_error:
                raise InputError(field_error)
            return core.view(pred, **kw), None
        except InputError as e:
            return None, str(e)

    @work(thread=True, exclusive=True, group="pareto-goal", exit_on_error=False)
    def decide_apart(self, gen: int, pred, field_error: str | None, kw: dict) -> None:
        self.post_message(ViewReady(gen, *self.decide(pred, field_error, kw)))

    @on(ViewReady)
    def view_ready(self, msg: ViewReady) -> None:
        if msg.generation != self.view_gen or self.table is None:
            return                                  # stale: the fields or the source changed since
        if msg.view is None:                        # bad input: the candidates stay as they were
            self.goal_idx, self.goal_error = None, msg.error
            if self.view is None and self.space is None:    # nothing drawn yet: the candidates
                self.view = core.view(self.pred, goal=None, mb_per_epoch=self.mb_per_epoch)
                self.fill_front(self.view)
            if self.view is None:
                self.query_one("#details", Static).update(f"[red]{escape(msg.error)}[/red]")
                return
            if self.sel is not None or len(self.front):
                self.select(self.sel if self.sel is not None else int(self.front[-1]))
            return
        v = self.view = msg.view
        self.goal_error = v.error
        self.sel_stale = False
        self.fill_front(v)
        if v.decision is not None:
            self.goal_idx, self.goal_text = v.decision.index, v.decision.goal
            self.select(self.goal_idx)
            return
        self.goal_idx = None
        rows = set(int(r) for r in v.rows)
        keep = self.sel if self.sel in rows else (int(v.front[-1]) if len(v.front) else None)
        self.sel_stale = bool(v.error) and keep is not None
        if keep is None:                            # nothing to choose from: nothing selected
            self.sel = None
            self.query_one("#details", Static).update(f"[red]{escape(v.error or '')}[/red]")
            self.draw()
            return
        self.select(keep)

    def fill_front(self, v) -> None:
        """The front (time per epoch, or to target, against power): rebuilt only when it changed."""
        x = v.x_s[np.searchsorted(v.rows, v.front)] if len(v.front) else np.zeros(0)
        key = (v.per_target, tuple(int(i) for i in v.front), tuple(np.round(x, 6)))
        self.front = np.asarray(v.front, dtype=int)
        if key == self.front_key:
            return
        self.front_key = key
        tab = v.table
        if v.per_target:
            self._fill_front(("bs", "c", "CPU", "GPU", "mem", "h", "W"),
                             ((str(v.batch_of(i)),) + _knob_cells(tab.modes[i])
                              + (f"{xs / 3600:.2f}", f"{tab.power_w[i]:.1f}")
                              for i, xs in zip(self.front, x)))
        else:
            per = "1k" if self.unit != "epoch" else "ep"
            self._fill_front(("c", "CPU", "GPU", "mem", f"min/{per}", "W"),
                             (_knob_cells(tab.modes[i]) + (f"{xs / 60:.2f}", f"{tab.power_w[i]:.1f}")
                              for i, xs in zip(self.front, x)))

    def _fill_front(self, columns, rows) -> DataTable:
        """Refill the front table.  The first row added highlights itself; that must not move the
        selection: a pick off the front (a risk-aware one) would lose it to the front's first row
        (test_b_restricts_...)."""
        dt = self.query_one("#front", DataTable)
        with self.prevent(DataTable.RowHighlighted):
            dt.clear(columns=True)
            dt.add_columns(*columns)
            for row in rows:
                dt.add_row(*row)
        return dt

    def show_details(self, i: int) -> None:
        """The selected point: its knobs, time and power, the whole job's time and energy, and the
        baselines the view compares it with (short lines: the panel is 32 columns at 80x24, so a
        number never wraps away from its unit)."""
        v, tab = self.view, self.table
        d = v.decision
        w = tab.modes[i].words()
        t, p = float(tab.time_ms[i]), float(tab.power_w[i])
        ts, ps = float(tab.time_ms_std[i]), float(tab.power_w_std[i])
        job_s, wh = v.job(i)
        lines = [f"[red]{escape(self.goal_error)}[/red]"] if self.goal_error else []
        goal = self.goal_text if d is not None and i == self.goal_idx else None
        # the least-energy mode against MAXN and the best preset follows the selection's own
        # figures: below the rest it sat under the panel's fold at 80x24 and 100x30, unseen
        width = self.query_one("#details", Static).content_size.width or 40
        energy = [] if v.energy is None else v.energy.panel_lines(width)
        if v.per_target:
            b = v.batch_of(i)
            lines += [f"[b]{goal}[/b]" if goal else "[b]selected pair[/b]",
                      f"{w[0]} · {w[1]}   [b]batch {b}[/b]", f"{w[2]} · {w[3]}",
                      f"step {t:.1f}±{ts:.1f} ms  {p:.1f}±{ps:.1f} W",
                      f"to target {hms(job_s)}  {wh:.1f} Wh", *energy]
        else:
            epochs = int(self._num("#epochs") or 1)
            prior = self.model is not None and self.model.about.kind == core.PRIOR_KIND
            lines += [f"[b]{goal}[/b]" if goal else "[b]the goal before's mode[/b]" if self.sel_stale
                      else "[b]selected mode[/b]",
                      f"{w[0]} · {w[1]}", f"{w[2]} · {w[3]}",
                      f"{self.step_word()} {t:.1f} ms ± {ts:.1f}",
                      *_wide_line(t, ts, "ms", prior=prior),
                      f"power {p:.2f} W ± {ps:.2f}",
                      *_wide_line(p, ps, "W", prior=prior),
                      *energy,
                      f"{self.unit} {_span(float(v.x_s[v.pos(i)]), hours=False)}",
                      f"{epochs} {'epochs' if self.unit == 'epoch' else 'x 1k steps'}: "
                      f"{_span(job_s)}, {_wh(wh)} Wh",
                      self.basis()]
        for q in v.baselines:
            if q.missing:
                lines.append(f"vs {q.tag}: {q.missing}" if q.tag else q.missing)
            elif q.row == i:
                lines.append(f"vs {q.tag}: this pair")
            elif v.per_target:
                lines.append(f"vs {q.tag}: {pct(job_s, q.job_s)} time, {pct(wh, q.energy_wh)} Wh")
            else:
                lines.append(f"vs {q.tag} ({q.time_ms:.0f} ms, {q.power_w:.1f} W):")
                lines.append(f"time {pct(t, q.time_ms)}, energy {pct(wh, q.energy_wh)}")
        if v.per_target:
            if v.dropped:
                lines.append(f"bs {','.join(map(str, v.dropped))}: does not fit in memory")
            rel = v.relation
            lines.append(f"{self.basis()} " + ("throughput only" if rel.throughput_only
                                               else f"noise scale {rel.noise_scale:g}"))
        if v.energy is not None:
            lines += v.energy.panel_ranked(width)
        # the footer says enter applies: the line stays where it adds something (the batch size)
        # or where the energy lines have not taken its row at 80x24
        hint = ("[dim]what-if only: not for this board[/dim]" if self.foreign
                else "[dim]arrows: choose a mode on the front[/dim]" if self.sel_stale
                else f"[dim]enter: apply, train at batch {v.batch_of(i)}[/dim]" if v.per_target
                else None if v.energy is not None else "[dim]enter: apply this mode[/dim]")
        if hint:
            lines.append(hint)
        self.query_one("#details", Static).update("\n".join(lines))

    def draw(self) -> None:
        """Every candidate: time per epoch (one batch size; gray) or to target (several: one colour
        per size) against power, the front, the presets and the current mode (one size), the
        selection and the budget."""
        v, tab = self.view, self.table
        plot = self.query_one("#pareto-plot", SafePlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        k = 1 / 3600.0 if v.per_target else 1 / 60.0        # seconds -> hours, or minutes
        x = v.x_s * k
        pw = tab.power_w[v.rows]
        n = len(v.rows)
        rng = np.random.default_rng(0)
        show = rng.choice(n, 2500, replace=False) if n > 2500 else np.arange(n)
        if v.per_target:
            batch = tab.batch[v.rows]
            for c, b in enumerate(sorted(set(int(b) for b in batch))):
                s = np.sort(show[batch[show] == b])
                if len(s):
                    plt.scatter(x[s].tolist(), pw[s].tolist(), marker="dot",
                                color=BATCH_COLOURS[c % len(BATCH_COLOURS)], label=f"bs {b}")
        else:
            plt.scatter(x[show].tolist(), pw[show].tolist(), marker="dot", color="gray")
        if len(self.front) or not v.per_target:
            f = np.searchsorted(v.rows, self.front)
            plt.plot(x[f].tolist(), pw[f].tolist(), color="green", label="front")
        if not v.per_target:
            if self.model is not None:
                kk = self.mb_per_epoch / 1000.0 / 60.0
                pred = self.model.predict([p.mode for p in self.app.state.backend.device.presets])
                plt.scatter((pred["time_ms"] * kk).tolist(), pred["power_w"].tolist(), marker="P",
                            color="cyan", label="presets")
            cur = self.current_mode()
            if cur is not None and cur in set(tab.modes):
                ci = v.pos(tab.modes.index(cur))
                plt.scatter([float(x[ci])], [float(pw[ci])], marker="C", color="yellow", label="current")
        if self.sel is not None:
            j = v.pos(self.sel)
            plt.scatter([float(x[j])], [float(pw[j])], marker="@", color="red", label="selected")
        self.drawn_budget = self._num("#budget")        # only a valid budget is drawn
        if self.drawn_budget is not None:
            plt.hline(self.drawn_budget, "red")
        if n:
            plt.xscale("log")                       # (plotext cannot draw an empty log axis)
        if v.per_target:
            plt.xlabel("time to target (h)")
            plt.title(("measured" if self.model is None else "what-if" if self.what_if or self.foreign
                       else "predicted") + (", all batch sizes" if self.bs_filter is None
                                            else f", batch {self.bs_filter} only"))
        else:
            plt.xlabel("epoch time (min)" if self.unit == "epoch" else "time per 1000 steps (min)")
            plt.title(("what-if modes" if Timed.of(self.timed).what_if else
                       "measured modes (SIMULATED)" if self.simulated_rows() else "measured modes")
                      if self.model is None else
                      "what-if predictions" if self.what_if or self.foreign else "predicted modes")
        plt.ylabel("W")
        plot.refresh()

    def select(self, i: int) -> None:
        self.sel = i
        pos = np.flatnonzero(self.front == i)
        dt = self.query_one("#front", DataTable)
        if len(pos):
            if dt.cursor_row != int(pos[0]):
                dt.move_cursor(row=int(pos[0]))
        elif len(self.front) and self.table is not None:
            # a pick off the front (risk-aware): the cursor waits on the front row of nearest
            # power, so the arrows go to its neighbours, not to the top of the table
            near = int(np.argmin(np.abs(self.table.power_w[self.front] - self.table.power_w[i])))
            if dt.cursor_row != near:
                with self.prevent(DataTable.RowHighlighted):
                    dt.move_cursor(row=near)
        self.show_details(i)
        self.draw()

    @on(DataTable.RowHighlighted, "#front")
    def row_moved(self, event: DataTable.RowHighlighted) -> None:
        if self.table is None or not 0 <= event.cursor_row < len(self.front):
            return
        if event.cursor_row != event.data_table.cursor_row:
            return          # stale: the table was rebuilt or moved to the goal since this was sent
        i = int(self.front[event.cursor_row])
        if i != self.sel:
            self.sel_stale = False          # the user's own choice on the front
            self.select(i)

    def redraw(self) -> None:
        if self.view is not None and self.table is not None:
            self.draw()
        else:
            self.draw_empty()

    def current_mode(self) -> Mode | None:
        """The device's mode from the latest telemetry sample (no device read on the UI thread)."""
        t = self.app.state.sampler.latest()
        if t is None or None in (t.cores_online, t.cpu_mhz, t.gpu_mhz, t.mem_mhz):
            return None
        return Mode(t.cores_online, t.cpu_mhz, t.gpu_mhz, t.mem_mhz)

    def action_pick(self) -> None:
        if self.table is None or self.sel is None:
            self.app.notify_error("load a model or a profile and select a mode first")
            return
        err = self.field_error()
        if err:                      # the pick on screen is for the goal before this typing
            self.app.notify_error(f"{err}: fix it first (the selected mode is for the goal before)")
            return
        if self.sel_stale:
            self.app.notify_error("no mode meets this goal: the mode shown is the goal before's; "
                                  "choose one on the front with the arrows, or change the goal")
            return
        if self.foreign:
            self.app.notify(f"this model predicts {self.model.device.name}, not this board "
                            f"({self.app.state.backend.device.name}): a what-if only, not applied",
                            severity="warning")
            return
        i = self.sel
        st = self.app.state
        st.selected = self.table.modes[i]
        st.selected_basis = ("predicted" if self.model is not None else
                             "simulated" if self.simulated_rows() else "measured")
        st.selected_unit = Timed.of(self.timed).unit
        st.selected_pred = {"time_ms": float(self.table.time_ms[i]), "power_w": float(self.table.power_w[i]),
                            "time_ms_std": float(self.table.time_ms_std[i]),
                            "power_w_std": float(self.table.power_w_std[i])}
        st.selected_prior = self.model is not None and self.model.about.kind == core.PRIOR_KIND
        st.selected_batch = self.view.batch_of(i) if self.view is not None else None
        st.selected_workload = self.pred.workload if self.pred is not None else None
        self.app.switch_mode("apply")

    @on(DataTable.RowSelected, "#front")
    def row_selected(self, event: DataTable.RowSelected) -> None:
        # the selection follows the cursor (row_moved); a goal mode off the front stays selected
        self.action_pick()


def _span(s: float, hours: bool = True) -> str:
    """A duration in the details: hours from 6 minutes (where `hours`), minutes from one, else
    seconds (a script's 10 x 1k steps of 4 ms read '0.01 h', its 1k steps '0.07 min')."""
    return (f"{s / 3600:.2f} h" if hours and s >= 360 else f"{s / 60:.2f} min" if s >= 60
            else f"{s:.3g} s")


def _wh(wh: float) -> str:
    """Watt-hours: whole from 10, else to three significant digits (it read '0 Wh' for 0.16)."""
    return f"{wh:.0f}" if wh >= 10 else f"{wh:.3g}"


def pct(x: float, base: float) -> str:
    """x against base, signed per cent (negative: less than base)."""
    return f"{100 * (x - base) / base:+.0f}%" if base > 0 else "n/a"
