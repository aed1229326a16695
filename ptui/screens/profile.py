"""Profile: pick a workload, see the plan, run it with progress; pause, abort, resume."""
from __future__ import annotations

import time

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import (
    Button,
    DataTable,
    Footer,
    Header,
    Input,
    Label,
    ProgressBar,
    Select,
    Static,
)

from .. import core
from ..core import (
    WORKLOADS,
    Control,
    ProfileRequest,
    ProfileRun,
    estimate_device_s,
    get_workload,
    hms,
    resumable_sessions,
)
from ..messages import ModeProfiled, ProfileFinished, ProfileStarted


def wall_text(clock, device_s: float) -> str:
    """', H:MM:SS at --speed S' where the clock runs faster than real time (the simulator's
    --speed), else ''."""
    speed = getattr(clock, "speed", 1.0)
    if getattr(clock, "virtual", False) or speed == 1.0:
        return ""
    return f", {hms(device_s / speed)} at --speed {speed:g}"


def best_text(best) -> str:
    """The best measured mode, or (mode, batch size) pair of a profile over batch sizes, in words."""
    if isinstance(best, tuple):
        mode, b = best
        return f"pair {mode.describe()} · batch {b}"
    return f"mode {best.describe()}"


def short_name(name: str, device: str) -> str:
    """'resnet18 bs16 11-22 15:54:58' for ptui's automatic names ('<device>-resnet18-bs16-<date>-<time>',
    'resnet18 bs8,16 ...' for '...-bs8-16-...' over batch sizes), 'tune spec 11-22 15:54:58' for
    tune's ('tune-<device or auto>-spec-<date>-<time>': it wrapped over three rows at 80 columns);
    any other name as it is."""
    import re
    stamp = r"(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})(-\d+)?"      # auto names end in a time
    m = re.fullmatch(rf"(tune-(?:{re.escape(device)}|auto)-|{re.escape(device)}-)(.+)-{stamp}", name)
    if not m:
        return name
    what = re.sub(r"-bs(\d+(?:-\d+)*)$", lambda b: " bs" + b[1].replace("-", ","), m[2])
    tune = "tune " if m[1].startswith("tune-") else ""
    return f"{tune}{what} {m[4]}-{m[5]} {m[6]}:{m[7]}:{m[8]}{m[9] or ''}"


def session_label(s, width: int = 42) -> str:
    """One line for the resume list: 'resnet18 bs16 11-22 15:54 17/50 aborted' (the full session
    name wrapped over four lines in the dropdown at 80 columns); a name the user chose is kept,
    shortened with '…' where it would not fit."""
    planned = len(s.plan) if s.up_to is None else f"<={s.up_to}"      # active: its plan grows
    tail = f" {s.n_done}/{planned} {s.status}"
    head = short_name(s.name, s.device)
    room = max(8, width - len(tail))
    if len(head) > room:
        head = head[:room - 1] + "…"
    return head + tail


def _default_seed() -> int:
    """The seed field's default: ptui profile's (core.default_seed), 0 when the board's id is bad
    (the profile then says so when it sends its rows)."""
    try:
        return core.default_seed()
    except core.PtuiError:
        return 0


class ProfileScreen(Screen):
    TITLE = "ptui · 2 Profile"
    AUTO_FOCUS = "#start"
    BINDINGS = [Binding("s", "start", "Start"), Binding("space", "pause", "Pause/resume"),
                Binding("x", "abort", "Abort")]
    COMMANDS_ = (("Start profiling", "Profile the planned modes", "action_start"),
                 ("Pause or resume profiling", "Hold the run between measurements", "action_pause"),
                 ("Abort profiling", "Stop and restore the original mode", "action_abort"))

    def __init__(self) -> None:
        super().__init__()
        self.control: Control | None = None
        """Pause/abort switches of the run under way; None when idle."""
        self.run: ProfileRun | None = None
        """The run under way, once its worker has started it (read-only here: live progress)."""
        self.session: str | None = None
        self.over_sizes = False
        """The run under way profiles several batch sizes (its rows say their batch)."""
        self.started = 0.0
        self._done0 = 0
        self._paused_s = 0.0
        """Time spent paused in this run (left out of the ETA)."""
        self._paused_at: float | None = None
        self.value_kind = "budget"
        """What the goal field's number is for: budget or deadline."""
        self.kept: tuple[str, str] = ("budget", "")
        """(kind, number) of the goal field while it is unused."""

    @property
    def running(self) -> bool:
        return self.control is not None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(classes="form"):
            yield Label("workload")
            yield Select([(w.model, w.name) for w in WORKLOADS.values()], value="resnet18",
                         allow_blank=False, id="workload")
            # text fields: what is typed stays as typed ('1e9' in an integer field became '19');
            # the plan panel says what is wrong with it, by the field's name
            yield Label("batch")
            # one size, or several (8,16,32): (mode, batch size) pairs, as ptui profile --batch-sizes
            yield Input("16", id="batch")
            yield Label("modes")
            yield Input("50", id="count")
            yield Label("seed")
            # 0, or with a fleet's pool the board's own (its modes differ from the other boards')
            yield Input(str(_default_seed()), id="seed")
        with Horizontal(classes="form"):
            yield Label("strategy")
            yield Select([("random", "random"), ("space-filling", "space-filling"),
                          ("active", "active")], value="random", allow_blank=False, id="strategy")
            yield Label("goal (active)")
            yield Select([("budget W", "budget"), ("deadline ms", "deadline"),
                          ("least energy", "energy")], value="budget", allow_blank=False, id="goal")
            yield Input("30", id="goal-value")
        # hidden while a profile runs: at 80x24 the run's notes and its results need its rows
        with Horizontal(classes="form", id="start-row"):
            yield Button("Start (s)", id="start", variant="primary")
            yield Select([], id="resume", prompt="resume a session…")
            yield Button("Resume", id="resume-btn")
        yield Static(id="plan", classes="panel")
        yield ProgressBar(id="progress", show_eta=False)
        yield Static("idle", id="status", classes="panel")
        yield DataTable(id="results", cursor_type="row")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        t = self.query_one("#results", DataTable)
        # the mode's knobs in Mode.describe's units (the CSV keeps the exact values)
        t.add_columns(*self.COLUMNS)
        self.query_one("#progress", ProgressBar).display = False
        self.refresh_sessions()
        self.show_used_fields()
        self.update_plan()
        self.set_interval(0.5, self.poll)

    # -- plan ---------------------------------------------------------------------------------
    def _params(self, strategy: str):
        """(workload at its batch size, modes, seed) from the fields; InputError naming the field
        that is wrong (as its label says it, never a CLI flag)."""
        be = self.app.state.backend

        def field(wid: str, what: str, **bounds):
            return core.number(self.query_one(wid, Input).value or "", what, integer=True, **bounds)
        bs = field("#batch", "batch size", ge=1, le=core.MAX_BATCH)
        wl = get_workload(str(self.query_one("#workload", Select).value), bs)
        core.check_memory(be.device, wl, bs)
        cands = core.plan_candidates(be.device, strategy, be.candidates() if be.kind == "replay" else None)
        n = field("#count", "modes", ge=core.ACTIVE_MIN_COUNT if strategy == "active" else 1, le=len(cands))
        seed = field("#seed", "seed", ge=0, le=2**32 - 1)
        return wl, n, seed

    def _batch_sizes(self) -> tuple[int, ...] | None:
        """The sizes of a profile over several batch sizes (the batch field holds a list);
        None for one size."""
        text = self.query_one("#batch", Input).value.strip()
        if "," not in text:
            return None
        return core.parse_batch_sizes(text, "batch sizes")

    def _batch_params(self, strategy: str, goal: dict, sizes: tuple[int, ...]):
        """(workload, pairs, seed) of a profile over batch sizes, refused as ProfileRun over
        several sizes would refuse it, by the field's name."""
        if strategy == "space-filling":
            raise core.BatchError("with batch sizes the pairs are drawn at random or chosen by an "
                                  "active search; space-filling is not supported")
        if "deadline_ms" in goal:
            raise core.BatchError("a deadline is per minibatch, which means different work at each "
                                  "batch size: over batch sizes choose a power budget or least energy")
        if self.app.state.backend.kind == "replay":
            raise core.BatchError("the replay device replays one batch size; profiling batch sizes "
                                  "needs the simulator or a board")

        def field(wid: str, what: str, **bounds):
            return core.number(self.query_one(wid, Input).value or "", what, integer=True, **bounds)
        space = len(sizes) * len(self.app.state.backend.device.pt_grid())
        n = field("#count", "modes (pairs)", ge=core.ACTIVE_MIN if strategy == "active" else 1, le=space)
        seed = field("#seed", "seed", ge=0, le=2**32 - 1)
        return get_workload(str(self.query_one("#workload", Select).value)), n, seed

    def _strategy(self) -> tuple[str, dict]:
        """The strategy and, for active profiling, its goal in ProfileRequest's terms."""
        strategy = str(self.query_one("#strategy", Select).value)
        if strategy != "active":
            return strategy, {}
        kind = str(self.query_one("#goal", Select).value)
        if kind == "energy":
            return strategy, {"objective": "energy"}
        text = self.query_one("#goal-value", Input).value.strip()
        try:
            v = float(text)
        except ValueError:
            v = float("nan")
        if not (v > 0 and v != float("inf")):
            unit = "W" if kind == "budget" else "ms"
            raise ValueError(f"the {'power budget' if kind == 'budget' else 'deadline'} must be a "
                             f"positive number of {unit}" + (f", got {text!r}" if text else ""))
        return strategy, {"budget_w": v} if kind == "budget" else {"deadline_ms": v}

    def on_input_changed(self, _event) -> None:
        self.update_plan()
        self._show_plan()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id in ("strategy", "goal"):
            self.show_used_fields()
        if event.select.id in ("workload", "strategy", "goal"):
            self.update_plan()
            self._show_plan()

    def _show_plan(self) -> None:
        """The plan panel back (a run's end hid it): only where it is hidden, so an edit does not
        redraw the screen."""
        plan = self.query_one("#plan", Static)
        if not plan.display:
            plan.display = True

    def show_used_fields(self) -> None:
        """The goal is used by an active search only, and its number by a budget or a deadline:
        an unused one is disabled and reads 'unused'.  Switching between a budget and a deadline
        clears the number (30 W is not 30 ms); leaving active profiling and coming back keeps it."""
        active = str(self.query_one("#strategy", Select).value) == "active"
        goal = self.query_one("#goal", Select)
        goal.disabled = not active
        kind = str(goal.value)
        inp = self.query_one("#goal-value", Input)
        used = active and kind != "energy"
        unit = "W" if kind == "budget" else "ms"
        if not used:
            if not inp.disabled:
                self.kept = (self.value_kind, inp.value)
                inp.value, inp.placeholder, inp.disabled = "", "unused", True
        else:
            if inp.disabled:
                was, value = self.kept
                inp.disabled = False
                inp.value = value if was == kind else ""
            elif kind != self.value_kind:
                inp.value = ""                       # the goal changed: its number means another thing
            inp.placeholder = unit
        self.value_kind = kind

    def update_plan(self) -> None:
        be = self.app.state.backend
        dev = be.device
        try:
            strategy, goal = self._strategy()
            sizes = self._batch_sizes()
            if sizes is not None:
                wl, n, seed = self._batch_params(strategy, goal, sizes)
                self._batch_plan(wl, n, seed, strategy, sizes)
                return
            wl, n, seed = self._params(strategy)
            cands = be.candidates() if be.kind == "replay" else None
            modes, planner = core.make_plan(dev, strategy, count=n, seed=seed, candidates=cands,
                                            goal=core.Goal(**goal) if goal else None)
        except (ValueError, RuntimeError) as e:
            self.query_one("#plan", Static).update(f"[red]{e}[/red]")
            return
        where = "recorded modes" if cands is not None else "PowerTrain-grid modes"
        est = estimate_device_s(dev, wl, modes)
        est_txt = (f"≈ {hms(est)} of device time{wall_text(be.clock, est)} (estimated with ptui's "
                   f"model of {wl.model} at batch {wl.batch_size})")
        if planner is not None:
            self.query_one("#plan", Static).update(
                f"[b]Plan[/b] {wl.model} bs{wl.batch_size}: active search for "
                f"'{planner.goal.describe()}' on {dev.name}: up to {core.plural(n, 'mode')}, stopping "
                f"early once the decision is confident; the first {len(modes)} {est_txt}")
            return
        emc = sum(1 for a, b in zip(modes, modes[1:]) if a.mem_mhz != b.mem_mhz)
        self.query_one("#plan", Static).update(
            f"[b]Plan[/b] {wl.model} bs{wl.batch_size}: {len(modes)} {strategy} {where} "
            f"(seed {seed}) on {dev.name}, ordered high to low ({emc} memory-clock changes); "
            f"{est_txt}")

    def _batch_plan(self, wl, n: int, seed: int, strategy: str, sizes: tuple[int, ...]) -> None:
        dev = self.app.state.backend.device
        big = core.largest_batch(dev, wl)
        fit = [b for b in sizes if b <= big]
        left = [b for b in sizes if b > big]
        how = (f"an active search for '{self._goal_text()}' over up to {n} (mode, batch size) pairs, "
               f"stopping early once the decision is confident" if strategy == "active" else
               f"{n} random (mode, batch size) pairs over the PowerTrain grid x the sizes (seed {seed})")
        fits = (f"largest {wl.model} batch that fits: {big} (modelled)"
                + (f"; not profiled: {','.join(map(str, left))}" if left else ""))
        if not fit:
            self.query_one("#plan", Static).update(
                f"[red]none of the batch sizes {','.join(map(str, sizes))} fits: {fits}[/red]")
            return
        be = self.app.state.backend
        # an active search draws its pairs as it goes: the estimate is for as many random ones
        pairs = core.random_pairs(dev, fit, min(n, len(fit) * len(dev.pt_grid())), seed)
        est = core.estimate_pairs_device_s(dev, wl, pairs)
        est_txt = (f"{'up to ' if strategy == 'active' else ''}≈ {hms(est)} of device time"
                   f"{wall_text(be.clock, est)}")
        self.query_one("#plan", Static).update(
            f"[b]Plan[/b] {wl.model} at batch sizes {','.join(map(str, fit))} on {dev.name}: "
            f"{how}; {est_txt}; {fits}")

    def _goal_text(self) -> str:
        return core.Goal(**self._strategy()[1]).describe_per_target()

    def refresh_sessions(self) -> None:
        try:
            be = self.app.state.backend
            found = resumable_sessions(be.device.name, be)      # those that resume on this board
        except Exception as e:  # noqa: BLE001
            self.app.notify_error(str(e))
            return
        opts = [(session_label(s), s.name) for s in found]
        self.query_one("#resume", Select).set_options(opts)

    # -- run ----------------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()
        elif event.button.id == "resume-btn":
            name = self.query_one("#resume", Select).value
            if isinstance(name, str):
                self.start_run(ProfileRequest(session=name, resume=True, params={"app": True}), None)

    def action_start(self) -> None:
        try:
            strategy, goal = self._strategy()
            sizes = self._batch_sizes()
            if sizes is not None:
                wl, n, seed = self._batch_params(strategy, goal, sizes)
            else:
                wl, n, seed = self._params(strategy)
        except ValueError as e:
            self.app.notify_error(str(e))
            return
        if sizes is not None:
            self.start_run(ProfileRequest(workload=wl.name, count=n, seed=seed, strategy=strategy,
                                          params={"app": True}, **goal), n, sizes=sizes)
            return
        self.start_run(ProfileRequest(workload=wl.name, batch_size=wl.batch_size, count=n, seed=seed,
                                      strategy=strategy, params={"app": True}, **goal), n)

    def start_run(self, req: ProfileRequest, total: int | None,
                  sizes: tuple[int, ...] | None = None) -> None:
        """sizes: start a profile over several batch sizes (a resumed one is known by its session)."""
        if self.running:
            self.app.notify("a profile is already running", severity="warning")
            return
        self.query_one("#results", DataTable).clear()
        self.control = Control()
        self.started = time.monotonic()
        self._paused_s, self._paused_at = 0.0, None
        bar = self.query_one("#progress", ProgressBar)
        bar.display = True
        bar.update(total=total, progress=0)
        self.query_one("#status", Static).update("starting…")
        self.run_profile(req, self.control, sizes)

    @work(thread=True, exclusive=True, group="profile", exit_on_error=False)
    def run_profile(self, req: ProfileRequest, control: Control,
                    sizes: tuple[int, ...] | None = None) -> None:
        """The same use case as `ptui profile` (with --batch-sizes when `sizes`, or resuming a
        profile over several batch sizes: core.profile_run chooses): on a real board
        it runs ptui's torch loop for the workload under the probe; every finished mode is
        committed; the mode is restored after."""
        run = None
        try:
            run = core.profile_run(req, sizes, control=control)
            info = run.prepare(self.app.state.backend)
            self.post_message(ProfileStarted(run, run.name, len(info.plan), run.done_results(),
                                             list(run.notes)))
            res = run.run(lambda p: self.post_message(ModeProfiled(p.done, p.total, p.last.row(),
                                                                   p.batch_size)))
        except Exception as e:  # noqa: BLE001 - shown in the app, never a traceback
            if run is not None:
                run.close()
            self.post_message(ProfileFinished("failed", None, 0, None, str(e)))
            return
        if isinstance(res.error, core.RestoreFailed):
            self.app.board_left = str(res.error)        # said again when a signal ends the app
        note = f"stopped: {res.stop_reason}" if res.stop_reason else ""
        if res.best:
            note += (f"; best measured {best_text(res.best[0])} (P(meets the goal) "
                     f"{res.best[1]:.0%} by the model)")
        if res.time_note:                   # much of the wall time outside the timed steps
            note = f"{note}; {res.time_note}" if note else res.time_note
        wl = run.workload
        self.post_message(ProfileFinished(res.status, res.out, res.n_rows, wl.name if wl else None,
                                          None if res.error is None else str(res.error), note,
                                          board_left=isinstance(res.error, core.RestoreFailed)))

    COLUMNS = ("#", "cores", "CPU GHz", "GPU MHz", "mem MHz", "time ms", "power W", "minibatches",
               "samples", "settle s")

    @on(ProfileStarted)
    def started_run(self, msg: ProfileStarted) -> None:
        self.run, self.session = msg.run, msg.session
        # a profile over several batch sizes: each row says its batch (a bs column after #)
        self.over_sizes = getattr(msg.run, "batch_sizes", None) is not None
        t = self.query_one("#results", DataTable)
        t.clear(columns=True)
        t.add_columns(*(self.COLUMNS[:1] + (("bs",) if self.over_sizes else ()) + self.COLUMNS[1:]))
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=msg.total, progress=len(msg.finished))
        self._done0 = len(msg.finished)
        for idx, r in msg.finished:
            self._add_row(idx + 1, r, r.get("batch_size"))
        # the run's plan and warnings stay in the plan panel while it runs: the status below is
        # its progress, which replaced them at the first poll (a gated GPU's warning flashed)
        self.query_one("#start-row").display = False
        self._show_plan()
        # the focus leaves the hidden row for the results, not for a field that would take the
        # keys (space pauses, x aborts)
        self.query_one("#results", DataTable).focus()
        self.query_one("#status", Static).update("starting…")
        notes = "\n".join(escape(n) if not n.startswith("warning:") else f"[yellow]{escape(n)}[/yellow]"
                          for n in msg.notes)
        self.query_one("#plan", Static).update(
            f"[b]Running[/b] session {msg.session} (the form is for the next profile)\n{notes}")

    def _add_row(self, i, r, batch: int | None = None) -> None:
        bs = (str(batch or ""),) if self.over_sizes else ()
        self.query_one("#results", DataTable).add_row(
            str(i), *bs, str(r["cores"]), core.cpu_ghz(r["cpu_mhz"]), core.whole_mhz(r["gpu_mhz"]),
            core.whole_mhz(r["mem_mhz"]), f"{r['time_ms']:.1f}", f"{r['power_w']:.2f}",
            str(r["n_minibatches"]), str(r["n_power"]), f"{r['settle_s']:.1f}")

    @on(ModeProfiled)
    def mode_done(self, msg: ModeProfiled) -> None:
        self.query_one("#progress", ProgressBar).update(total=msg.total, progress=msg.done)
        self._add_row(msg.done, msg.row, msg.batch_size)
        self.query_one("#results", DataTable).move_cursor(row=msg.done - 1)

    @on(ProfileFinished)
    def run_finished(self, msg: ProfileFinished) -> None:
        st = self.app.state
        self.control = self.run = None
        self.query_one("#start-row").display = True
        st.sampler.minibatch_ms = None
        if msg.out is not None and msg.status == "done" and not msg.error:
            # only a complete profile becomes the one to fine-tune on; a partial one stays on disk
            # (resume it from the list)
            st.profile_csv = msg.out
            st.workload = msg.workload or st.workload
        # said in the status panel only: a toast would sit over the results table
        status = "failed" if msg.error else msg.status
        text = {"done": "profile finished", "aborted": "profile aborted; the original mode is restored",
                "failed": "profile failed; the original mode is restored"}[status]
        if msg.board_left:
            text = "profile failed and the board is NOT back in its original mode"
        what = "(mode, batch size) pairs" if self.over_sizes else "modes"
        where = f" — {msg.n_rows} {what} saved to {msg.out}" if msg.out else ""
        nxt = ("Next: 3 Fine-tune." if status == "done" else
               "Resume it from the list to finish it." if msg.n_rows else "")
        note = f"\n{msg.note}" if msg.note else ""
        err = f"\n[red]{escape(msg.error)}[/red]" if msg.error else ""
        self.query_one("#status", Static).update(f"[b]{text}[/b]{where}. {nxt}{err}{note}")
        self.refresh_sessions()
        self.update_plan()
        # at 80x24 the next profile's plan left the results table its header alone: the plan
        # gives way to the results until the form is edited (or a profile starts)
        self.query_one("#plan", Static).display = False

    def poll(self) -> None:
        run, control = self.run, self.control
        if run is None or control is None or run.progress is None:
            return
        p = run.progress
        self.app.state.sampler.minibatch_ms = p.live_minibatch_ms
        eta = ""
        if p.done and p.total > p.done:
            until = self._paused_at if self._paused_at is not None else time.monotonic()
            per = (until - self.started - self._paused_s) / max(1, p.done - self._done0)
            eta = f"  ETA {hms(per * (p.total - p.done))}"
        paused = "  [b]PAUSED[/b]" if control.paused else ""
        mode = p.mode.describe() if p.mode else "-"
        # the mode being measured is the (done + 1)-th, the row ptui profile's [k/N] line names:
        # "38/50 recording M" named M the 38th while the table's row 38 was another mode
        nth = p.done + 1 if p.mode is not None and p.done < p.total else p.done
        pw = f"{p.live_power_w:.2f} W" if p.live_power_w else "-"
        mb = f"{p.live_minibatch_ms:.1f} ms" if p.live_minibatch_ms else "-"
        best = ""
        planner = run.planner
        if planner is not None:
            b = planner.best()           # the planner's last answer (a plain read of its result)
            best = (f"\nbest measured so far for '{planner.goal.describe()}': {best_text(b[0])}, "
                    f"P(meets the goal) {b[1]:.0%}" if b else
                    f"\nactive search for '{planner.goal.describe()}': no measured mode meets it yet")
        self.query_one("#status", Static).update(
            f"[b]{nth}/{p.total}[/b] {p.phase} {mode}   power {pw}   minibatch {mb}   "
            f"device time {hms(p.device_time_s)}{eta}{paused}{best}")

    def _no_run(self) -> bool:
        """Nothing to pause or abort: said, as Apply's r says 'nothing to roll back' (x and space
        did nothing at all while the footer offered them)."""
        if self.control is None:
            self.app.notify("no profile is running: s starts one", severity="warning")
            return True
        return False

    def action_pause(self) -> None:
        if self._no_run():
            return
        control = self.control
        assert control is not None
        if control.paused:
            control.resume()
            if self._paused_at is not None:
                self._paused_s += time.monotonic() - self._paused_at
                self._paused_at = None
            self.app.notify("profile resumed")
        else:
            control.pause()
            self._paused_at = time.monotonic()
            self.app.notify("profile paused (the workload keeps running in the current mode)")

    def action_abort(self) -> None:
        if self._no_run():
            return
        assert self.control is not None
        self.control.abort()
        self.query_one("#status", Static).update("aborting — restoring the original mode…")

    def shutdown(self) -> None:
        if self.control is not None:
            self.control.abort()
