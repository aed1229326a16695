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

import re
from pathlib import Path

from ...catalogue.devices import Device
from ...catalogue.modes import Mode, make_mode
from ...catalogue.workloads import WORKLOADS, Workload
from ..csvio import PROFILE_COLS, CSVError, profile_tags, read_csv
from .base import ApplyError
from .sim import SimJetson, _Point

SPREAD_COLS = ("time_ms_p25", "time_ms_p75", "power_w_std")


def load_corpus(path: str | Path, device: Device) -> dict[Mode, dict]:
    """The recorded modes of a corpus CSV and their figures.  A file that cannot be a recording
    (a figure no Jetson can record, a negative spread: csvio.LIMITS) is refused here, before
    anything opens: bad input, exit 2."""
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


def replay_workload(name: str, batch_size: int = 16, corpus: str = "") -> Workload:
    """The workload a replay session profiles: a built-in one by its name, else the recorded
    model under its own name (a real board's corpus of the user's model; its catalog figures are
    unknown and never used: the replay device returns the recorded time and power)."""
    if name in WORKLOADS:
        return WORKLOADS[name].with_batch(batch_size)
    return Workload(name, f"{name} (REPLAYED{f' from {corpus}' if corpus else ''})", "replayed corpus",
                    corpus or "recorded", 0, 0.0, 0.0, 0, 0, "", 0.0, int(batch_size))


def corpus_workload(path: str | Path, batch_size: int | None = None) -> Workload:
    """The corpus is the workload: named by its own workload column, else by its file name, at
    its batch size (else `batch_size`, else 16)."""
    tags = profile_tags(path)
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", tags.get("workload") or Path(path).stem).strip("-.")
    bs = tags.get("batch_size", "")
    size = batch_size or (int(bs) if bs.isdigit() and int(bs) > 0 else 16)
    return replay_workload(name or "replayed", size, Path(path).name)


RECORDED_RAIL = "recorded total"      # the replayed power's name where the board has no total rail


class ReplayJetson(SimJetson):
    kind = "replay"
    simulated = True          # not a live board: labelled REPLAY of recorded data

    def __init__(self, device: Device, corpus: str | Path, *, clock=None, seed: int = 0,
                 sample_interval: float = 0.5) -> None:
        self.corpus_path = Path(corpus)
        self.table = load_corpus(corpus, device)
        self.noisy = any(any(c in v for c in SPREAD_COLS) for v in self.table.values())
        # a board sits in its default nvpmodel mode, when the corpus recorded it; else in the
        # recorded mode drawing the most power (the MAXN-like one)
        default = device.preset(device.default_preset).mode
        start = None if default in self.table else max(self.table,
                                                       key=lambda m: self.table[m]["power_w"])
        # a corpus records the board's total power, no rail's: on a board whose total is no rail
        # (Orin AGX, Xavier AGX) it went into the first rail, read as 'VDD_GPU_SOC 44.55 W'
        self._rail = device.total_rail or RECORDED_RAIL
        super().__init__(device, clock=clock, seed=seed, sample_interval=sample_interval,
                         start_mode=start, noise=self.noisy)
        self.start_mode = self._mode

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
            raise ApplyError(f"preset {p.name} ({p.mode.key}) is not in the replay corpus "
                             f"{self.corpus_path.name} ({len(self.table)} recorded modes), so the "
                             f"replay board cannot go there; like the simulator it lives in one "
                             f"ptui process, starting afresh in {self.start_mode.key} each time",
                             exit_code=2)
        return super().apply_preset(key)

    def _check_memory(self, workload) -> None:
        """The corpus recorded the workload running: nothing to check (its footprint may be
        unknown, a user's model replayed under its own name)."""

