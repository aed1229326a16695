"""Dashboard: live power per rail, clocks, cores, GPU load, temperatures, mode, power plot."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from ..core import Mode
from ..widgets.powerplot import PowerPlot


def _na(v, fmt="{:.1f}", unit="") -> str:
    return "n/a" if v is None else fmt.format(v) + unit


class DashboardScreen(Screen):
    TITLE = "ptui · 1 Dashboard"
    def compose(self) -> ComposeResult:
        yield Header()
        st = self.app.state
        be = st.backend
        badge = ("REPLAY" if be.kind == "replay" else "SIMULATED" if be.simulated else
                 "EMULATED (SIMULATED)" if be.emulated else be.kind)
        yield Static(f"[b]{badge}[/b]  {be.device.title} — {st.note}",
                     id="banner", classes="sim" if be.not_live else "panel")
        with Horizontal(id="dash-top"):
            yield Static(id="power", classes="panel")
            yield Static(id="clocks", classes="panel")
            yield Static(id="thermal", classes="panel")
        yield PowerPlot(id="power-plot")
        yield Footer(show_command_palette=False)

    def _set(self, wid: str, text: str) -> None:
        """Update a panel; a layout pass (the costly part) only when its line count changes."""
        lines = text.count("\n")
        layout = self._lines.get(wid) != lines
        self._lines[wid] = lines
        self.query_one(wid, Static).update(text, layout=layout)

    def _preset_words(self, name: str | None, knobs) -> str:
        """nvpmodel's preset, and whether the clocks are still that preset's: a profile or an apply
        changes the clocks and leaves nvpmodel's status as it was (the dashboard said MODE_30W
        over a profiling mode's clocks: a user's trial)."""
        if not name:
            return "a custom mode"
        said = f"nvpmodel {name}"
        try:
            preset = self.app.state.backend.device.preset(name)
        except Exception:  # noqa: BLE001 - a name ptui's tables do not know: shown as read
            return said
        if None in knobs or all(abs(a - b) < 0.5 for a, b in zip(preset.mode.as_tuple(), knobs)):
            return said
        # two lines at 80 columns (three, 'MODE_30W, clocks changed since (a custom mode)', with
        # the emulated board's banner pushed the box's last lines off an 80x24 screen: a trial)
        return f"custom clocks (nvpmodel: {name})"

    @staticmethod
    def _minibatch(mb: float | None, t) -> str:
        """Minibatch times are known only while ptui profiles; otherwise say so, and call the
        board idle only when its GPU is."""
        if mb:
            return f"{mb:.1f} ms"
        if t.gpu_load is not None and t.gpu_load < 5:
            return "idle"
        return "not timed"

    def on_mount(self) -> None:
        self._lines: dict[str, int] = {}
        self._tick = 0
        # TPC power gating is set at boot (nvpmodel's mask), so it is read once: `ptui status`
        # and the apply plan said 'the GPU has 4 of its 8 TPCs powered', the dashboard never did
        be = self.app.state.backend
        on = be.gated_tpcs()
        self._tpcs = "" if on is None else f" · {on}/{be.device.gpu_tpcs} TPCs"
        self.refresh_view()
        self.set_interval(0.5, self.refresh_view)

    def refresh_view(self) -> None:
        if not self.is_current:
            return                                   # hidden screens cost nothing
        self._tick += 1
        st = self.app.state
        t = st.sampler.latest()
        if t is None:
            msg = st.sampler.error or "waiting for the first sample…"
            self._set("#power", f"[b]Power[/b]\n{msg}")
            return
        rails = "\n".join(f"{name[:15]:<15}{_na(w, '{:6.2f}', ' W')}"
                          for name, w in t.rails.items()) or "no rails"
        # a read that fails after the first sample: the figures shown are the last ones read, said
        # so (an emulated board whose emulator stopped kept its last watts on screen as if live)
        stale = (f"\n[b red]NOT LIVE[/b red] (the last figures read): {st.sampler.error}"
                 if st.sampler.error else "")
        self._set("#power", f"[b]Power[/b]  total [b]{_na(t.power_w, '{:.2f}', ' W')}[/b]\n{rails}{stale}")
        mb = st.sampler.minibatch_ms
        # the mode in plain words, a knob a line (as Mode.describe says it)
        knobs = (t.cores_online, t.cpu_mhz, t.gpu_mhz, t.mem_mhz)
        cores, cpu, gpu, mem = (Mode(*knobs).words() if None not in knobs else
                                ("cores n/a", "CPU n/a", "GPU n/a", "memory n/a"))
        self._set("#clocks",
            f"[b]Mode[/b] {self._preset_words(t.nvpmodel, knobs)}\n"
            f"{cores}  GPU load {_na(t.gpu_load, '{:.0f}', '%')}\n"
            f"{cpu}\n{gpu}{self._tpcs}\n{mem}\n"
            f"minibatch {self._minibatch(mb, t)}")
        temps = "\n".join(f"{k[:7]:<7} {_na(v, '{:.1f}', ' °C')}"
                          for k, v in t.temps.items()) or "no thermal zones"
        self._set("#thermal", f"[b]Thermal[/b]\n{temps}")
        if self._tick % 4 == 1:                      # the 60 s plot (the costly part) every 2 s
            self.query_one(PowerPlot).show(st.sampler.history())
