"""Profile: pick a workload, see the plan, run it with progress; pause, abort, resume."""
from __future__ import annotations

import time

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, Label, ProgressBar, Select, Static

from ..core.clock import hms
from ..core.csvio import write_csv
from ..core.profiler import PROFILE_HEADER, ProfileAborted, Profiler, choose_modes, open_session, profile_rows
from ..core.store import Store, data_dir
from ..core.workloads import WORKLOADS, get_workload


def estimate_device_s(device, modes, sample_interval: float = 0.5) -> float | None:
    """Rough device time of a plan, from the bundled reference's minibatch times."""
    try:
        from ..core.predictor import load_bundled
        ref = load_bundled(device.name)
    except Exception:  # noqa: BLE001 - no reference for this device: no estimate
        return None
    t = ref.predict(modes)["time_ms"] / 1000.0
    return float(sum(3.8 + max(42 * x, 5 * sample_interval) for x in t))


class ProfileScreen(Screen):
    AUTO_FOCUS = "#start"
    BINDINGS = [Binding("s", "start", "Start"), Binding("space", "pause", "Pause/resume"),
                Binding("x", "abort", "Abort")]
    COMMANDS_ = (("Start profiling", "Profile the planned modes", "action_start"),
                 ("Pause or resume profiling", "Hold the run between measurements", "action_pause"),
                 ("Abort profiling", "Stop and restore the original mode", "action_abort"))

    def __init__(self) -> None:
        super().__init__()
        self.profiler: Profiler | None = None
        self.session: str | None = None
        self.started = 0.0
        self._done0 = 0

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(classes="form"):
            yield Label("workload")
            yield Select([(w.model, w.name) for w in WORKLOADS.values()], value="resnet18",
                         allow_blank=False, id="workload")
            yield Label("batch")
            yield Input("16", id="batch", type="integer")
            yield Label("modes")
            yield Input("50", id="count", type="integer")
            yield Label("seed")
            yield Input("0", id="seed", type="integer")
        with Horizontal(classes="form"):
            yield Button("Start (s)", id="start", variant="primary")
            yield Select([], id="resume", prompt="resume…")
            yield Button("Resume", id="resume-btn")
        yield Static(id="plan", classes="panel")
        yield ProgressBar(id="progress", show_eta=False)
        yield Static("idle", id="status", classes="panel")
        yield DataTable(id="results", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        t = self.query_one("#results", DataTable)
        t.add_columns("#", "mode", "time ms", "power W", "minibatches", "samples", "settle s")
        self.query_one("#progress", ProgressBar).display = False
        self.refresh_sessions()
        self.update_plan()
        self.set_interval(0.5, self.poll)

    # -- plan ---------------------------------------------------------------------------------
    def _params(self):
        try:
            bs = int(self.query_one("#batch", Input).value)
            n = int(self.query_one("#count", Input).value)
            seed = int(self.query_one("#seed", Input).value or 0)
        except ValueError:
            raise ValueError("batch size, modes and seed must be whole numbers") from None
        wl = get_workload(str(self.query_one("#workload", Select).value), bs)
        return wl, n, seed

    def on_input_changed(self, _event) -> None:
        self.update_plan()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "workload":
            self.update_plan()

    def update_plan(self) -> None:
        dev = self.app.state.backend.device
        try:
            wl, n, seed = self._params()
            modes = choose_modes(dev, count=n, seed=seed)
        except (ValueError, RuntimeError) as e:
            self.query_one("#plan", Static).update(f"[red]{e}[/red]")
            return
        est = estimate_device_s(dev, modes)
        emc = sum(1 for a, b in zip(modes, modes[1:]) if a.mem_mhz != b.mem_mhz)
        est_txt = f"≈ {hms(est)} of device time (estimated from the ResNet-18 reference)" if est else ""
        self.query_one("#plan", Static).update(
            f"[b]Plan[/b] {wl.model} bs{wl.batch_size}: {len(modes)} random PowerTrain-grid modes "
            f"(seed {seed}) on {dev.name}, ordered high to low ({emc} EMC changes); {est_txt}")

    def refresh_sessions(self) -> None:
        try:
            store = Store()
            opts = [(f"{s.name}  {s.n_done}/{len(s.plan)} {s.status}", s.name)
                    for s in store.list_sessions()
                    if s.n_done < len(s.plan) and s.device == self.app.state.backend.device.name]
            store.close()
        except Exception as e:  # noqa: BLE001
            self.app.notify_error(str(e))
            return
        self.query_one("#resume", Select).set_options(opts)

    # -- run ----------------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()
        elif event.button.id == "resume-btn":
            name = self.query_one("#resume", Select).value
            if isinstance(name, str):
                self.start_run(name, resume=True)

    def action_start(self) -> None:
        dev = self.app.state.backend.device
        try:
            wl, n, seed = self._params()
        except ValueError as e:
            self.app.notify_error(str(e))
            return
        self.start_run(f"{dev.name}-{wl.name}-bs{wl.batch_size}-{time.strftime('%Y%m%d-%H%M%S')}",
                       resume=False, wl=wl, n=n, seed=seed)

    def start_run(self, name: str, *, resume: bool, wl=None, n=50, seed=0) -> None:
        if self.profiler is not None:
            self.app.notify("a profile is already running", severity="warning")
            return
        self.query_one("#results", DataTable).clear()
        self.session = name
        self.started = time.monotonic()
        bar = self.query_one("#progress", ProgressBar)
        bar.display = True
        bar.update(total=n if not resume else None, progress=0)
        self.query_one("#status", Static).update(f"starting session {name}…")
        self.run_profile(name, resume, wl, n, seed)

    @work(thread=True, exclusive=True, group="profile", exit_on_error=False)
    def run_profile(self, name, resume, wl, n, seed) -> None:
        st = self.app.state
        backend = st.backend
        store = Store()
        out = data_dir() / "profiles" / f"{name}.csv"
        status = "failed"
        try:
            if resume:
                info = store.get_session(name)
                wl = get_workload(info.workload, info.batch_size)
                seed = info.seed
            info = open_session(store, name, resume=resume, device=backend.device, workload=wl,
                                seed=seed, backend_kind=backend.kind,
                                plan_fn=lambda: choose_modes(backend.device, count=n, seed=seed),
                                original_mode=backend.current_mode(), params={"app": True})
            self.profiler = Profiler(backend, wl, store, name)
            self.app.call_from_thread(self.show_existing, store.results(name), len(info.plan))
            self.profiler.run(info, lambda p: self.app.call_from_thread(self.mode_done, p))
            status = "done"
        except ProfileAborted:
            status = "aborted"
        except Exception as e:  # noqa: BLE001 - shown in the app, never a traceback
            self.app.call_from_thread(self.app.notify_error, f"profile failed: {e}")
        finally:
            rows = profile_rows(store, name)
            if rows:
                out.parent.mkdir(parents=True, exist_ok=True)
                write_csv(out, PROFILE_HEADER, rows)
                st.profile_csv, st.workload = out, (wl.name if wl else st.workload)
            store.close()
            st.sampler.minibatch_ms = None
            self.profiler = None
            self.app.call_from_thread(self.run_finished, status, out if rows else None, len(rows))

    def show_existing(self, results, total: int) -> None:
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=total, progress=len(results))
        self._done0 = len(results)
        for idx, r in results:
            self._add_row(idx + 1, r)

    def _add_row(self, i, r) -> None:
        from ..core.modes import Mode
        m = Mode(r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"])
        self.query_one("#results", DataTable).add_row(
            str(i), m.key, f"{r['time_ms']:.1f}", f"{r['power_w']:.2f}", str(r["n_minibatches"]),
            str(r["n_power"]), f"{r['settle_s']:.1f}")

    def mode_done(self, p) -> None:
        self.query_one("#progress", ProgressBar).update(total=p.total, progress=p.done)
        self._add_row(p.done, p.last.row())
        self.query_one("#results", DataTable).move_cursor(row=p.done - 1)

    def run_finished(self, status: str, out, n: int) -> None:
        msg = {"done": "profile finished", "aborted": "profile aborted; the original mode is restored",
               "failed": "profile failed; the original mode is restored"}[status]
        where = f" — {n} modes saved to {out}" if out else ""
        self.query_one("#status", Static).update(f"[b]{msg}[/b]{where}. Next: 3 Fine-tune.")
        self.app.notify(msg + where, severity="information" if status == "done" else "warning")
        self.refresh_sessions()

    def poll(self) -> None:
        prof = self.profiler
        if prof is None or prof.progress is None:
            return
        p = prof.progress
        self.app.state.sampler.minibatch_ms = p.live_minibatch_ms
        eta = ""
        if p.done and p.total > p.done:
            per = (time.monotonic() - self.started) / max(1, p.done - self._done0)
            eta = f"  ETA {hms(per * (p.total - p.done))}"
        paused = "  [b]PAUSED[/b]" if prof.control.paused else ""
        mode = p.mode.key if p.mode else "-"
        pw = f"{p.live_power_w:.2f} W" if p.live_power_w else "-"
        mb = f"{p.live_minibatch_ms:.1f} ms" if p.live_minibatch_ms else "-"
        self.query_one("#status", Static).update(
            f"[b]{p.done}/{p.total}[/b] {p.phase} {mode}   power {pw}   minibatch {mb}   "
            f"device time {hms(p.device_time_s)}{eta}{paused}")

    def action_pause(self) -> None:
        prof = self.profiler
        if prof is None:
            return
        if prof.control.paused:
            prof.control.resume()
            self.app.notify("profile resumed")
        else:
            prof.control.pause()
            self.app.notify("profile paused (the workload keeps running in the current mode)")

    def action_abort(self) -> None:
        if self.profiler is not None:
            self.profiler.control.abort()
            self.query_one("#status", Static).update("aborting — restoring the original mode…")

    def shutdown(self) -> None:
        if self.profiler is not None:
            self.profiler.control.abort()
