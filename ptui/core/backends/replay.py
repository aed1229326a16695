"""The replay device: a recorded profile CSV acts as the board (trace-driven what-if).

Applying a mode and training on it returns the recorded minibatch time and power: exactly, when
the CSV has no spread columns; with the recorded spread as noise when it has them (time: log-normal
with sd from the interquartile range, power: the recorded sample sd).  Only recorded modes can be
applied; device time passes as the recorded minibatches would take (a virtual clock), so a profile
or an active search on the replay device reports what it would have cost on the board.

Everything else (switch latency, the first slow minibatch after a switch, power relaxing to its new
level) is the simulator's measurement behaviour, so the profiler's protocol runs unchanged.
"""
from __future__ import annotations

from pathlib import Path

from ..devices import Device
from ..modes import Mode, make_mode
from .base import ApplyError
from .sim import SimJetson, _Point

SPREAD_COLS = ("time_ms_p25", "time_ms_p75", "power_w_std")


def load_corpus(path: str | Path, device: Device) -> dict[Mode, dict]:
    """The recorded modes of a corpus CSV and their figures.  A file that cannot be a recording
    (a figure no Jetson can record, a negative spread: csvio.LIMITS) is refused here, before
    anything opens: bad input, exit 2."""
    from ..csvio import PROFILE_COLS, CSVError, read_csv
    try:
        rows = read_csv(path, device, need=PROFILE_COLS, extras=SPREAD_COLS)
    except CSVError as e:
        raise CSVError(f"replay corpus: {e}") from None
    table: dict[Mode, dict] = {}
    for m, v in rows:
        table.setdefault(m, v)
    if not table:
        raise CSVError(f"replay corpus {path}: no recorded modes")
    return table


class ReplayJetson(SimJetson):
    kind = "replay"
    simulated = True          # not a live board: labelled REPLAY of recorded data

    def __init__(self, device: Device, corpus: str | Path, *, clock=None, seed: int = 0,
                 sample_interval: float = 0.5) -> None:
        self.corpus_path = Path(corpus)
        self.table = load_corpus(corpus, device)
        self.noisy = any(any(c in v for c in SPREAD_COLS) for v in self.table.values())
        start = max(self.table, key=lambda m: self.table[m]["power_w"])   # the MAXN-like mode
        self._rail = device.total_rail or device.rails[0]
        super().__init__(device, clock=clock, seed=seed, sample_interval=sample_interval,
                         start_mode=start, noise=self.noisy)

    @property
    def label(self) -> str:
        return f"REPLAY of {self.corpus_path.name} ({len(self.table)} recorded modes)"

    def candidates(self) -> list[Mode]:
        """The modes a strategy may choose: only recorded ones."""
        return list(self.table)

    def _rec(self, mode: Mode | None = None) -> dict:
        return self.table[mode or self._mode]

    def _point(self, mode: Mode | None = None, workload=...) -> _Point:
        v = self._rec(mode)
        return _Point(v["time_ms"], v["power_w"], {self._rail: v["power_w"]}, 0.95, 50.0)

    def _time_sd(self) -> float:
        v = self._rec()
        if "time_ms_p25" in v and "time_ms_p75" in v and v["time_ms"] > 0:
            return max(0.0, (v["time_ms_p75"] - v["time_ms_p25"]) / 1.349 / v["time_ms"])
        return 0.0

    def _rail_sd(self) -> float:
        v = self._rec()
        return max(0.0, v.get("power_w_std", 0.0) / v["power_w"]) if v["power_w"] > 0 else 0.0

    hiccup_p = 0.0

    def _first_batch_factor(self) -> float:
        return 1.0

    def apply_mode(self, mode: Mode, *, tpc: int | None = None, nvpmodel: str | None = None) -> Mode:
        m = make_mode(self.device, *mode.as_tuple())
        if m not in self.table:
            raise ApplyError(f"mode {m.key} is not in the replay corpus {self.corpus_path.name} "
                             f"({len(self.table)} recorded modes); the replay device stays in "
                             f"{self._mode.key}")
        return super().apply_mode(m, tpc=tpc, nvpmodel=nvpmodel)

    def apply_preset(self, key) -> Mode:
        p = self.device.preset(key)
        if p.mode not in self.table:
            raise ApplyError(f"preset {p.name} ({p.mode.key}) is not in the replay corpus")
        return super().apply_preset(key)

