"""The whole cycle beside the median step (issue 23): a profile records the wall time per optimizer
step over each mode's window (cycle_ms) and the share of it outside the steps; decisions take the
whole cycle through one switch (--time), by themselves when that share is large."""
from __future__ import annotations

import sqlite3

import pytest

from ptui.core.board.csvio import CSVError, profile_time, read_batch_profile, read_profile_measured
from ptui.core.catalogue.devices import get_device

ORIN = get_device("orin-agx")
MODES = ["4,729.6,318.75,665.6", "8,1113.6,624.75,2133", "12,2201.6,1300.5,3199",
         "2,1190.4,522.75,2133", "6,1728,930.75,3199", "10,883.2,420.75,665.6"]
HEAD = ("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w,time_ms_p25,time_ms_p75,power_w_std,"
        "n_minibatches,n_power,timed,workload,batch_size,session")


def _profile(tmp_path, share: float | None, name="p.csv", basis=""):
    """A script's profile whose steps take 2 ms and whose cycle is 2 / (1 - share) ms."""
    head = HEAD + (",cycle_ms,outside_pct,time_basis" if share is not None else "")
    lines = [head]
    for i, m in enumerate(MODES):
        t = 2.0 + 0.1 * i
        row = f"{m},{t},{20 + i},{0.98 * t},{1.02 * t},0.1,40,5,one optimizer step,script,,s"
        if share is not None:
            c = t / (1 - share)
            row += f",{c:.4f},{100 * share:.1f},{basis}"
        lines.append(row)
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_large_share_outside_the_steps_decides_on_the_whole_cycle(tmp_path):
    p = _profile(tmp_path, 0.7)
    choice = profile_time(p, "auto")
    assert choice.basis == "cycle" and abs(choice.share - 0.7) < 1e-6
    assert "70 % of the wall time is outside the optimizer steps" in choice.note
    assert "--time step" in choice.note
    _, t, _, ms = read_profile_measured(p, ORIN, min_modes=1, time="cycle")
    assert t[0] == pytest.approx(2.0 / 0.3, rel=1e-3) and ms["time_ms"][0] == pytest.approx(t[0])
    _, ts, _, _ = read_profile_measured(p, ORIN, min_modes=1, time="step")
    assert ts[0] == 2.0
    # the spread scales with the time: a cycle is as uncertain, relatively, as its step
    _, _, _, mstep = read_profile_measured(p, ORIN, min_modes=1, time="step")
    assert ms["time_ms_std"][0] / t[0] == pytest.approx(mstep["time_ms_std"][0] / ts[0], rel=1e-6)
    assert profile_time(p, "step").basis == "step"


def test_a_small_share_keeps_the_median_step_and_an_old_csv_reads_as_before(tmp_path):
    small = _profile(tmp_path, 0.1)
    assert profile_time(small, "auto").basis == "step"
    assert profile_time(small, "cycle").basis == "cycle"          # asked for: taken
    old = _profile(tmp_path, None, name="old.csv")
    c = profile_time(old, "auto")
    assert c.basis == "step" and c.share is None and c.note == ""
    modes, t, _, _ = read_profile_measured(old, ORIN, min_modes=1)
    assert len(modes) == 6 and t[0] == 2.0
    with pytest.raises(CSVError, match="no cycle_ms column .* --time step"):
        profile_time(old, "cycle")


def test_the_basis_the_profile_was_asked_for_is_kept(tmp_path):
    """`ptui profile --time step` (or cycle) is written into the CSV; a later fit or tune with the
    default --time auto keeps it; --time on the command line still overrides it."""
    p = _profile(tmp_path, 0.7, basis="step")
    assert profile_time(p, "auto").basis == "step"
    assert profile_time(p, "cycle").basis == "cycle"
    q = _profile(tmp_path, 0.05, name="q.csv", basis="cycle")
    assert profile_time(q, "auto").basis == "cycle"


def test_a_batch_profile_takes_the_same_switch(tmp_path):
    p = _profile(tmp_path, 0.7)
    rows = p.read_text().splitlines()
    rows[0] = rows[0].replace("batch_size", "bs_old") + ",batch_size"
    rows[1:] = [r + f",{8 if i % 2 else 16}" for i, r in enumerate(rows[1:])]
    p.write_text("\n".join(rows) + "\n")
    step = read_batch_profile(p, ORIN, min_rows=1)
    cyc = read_batch_profile(p, ORIN, min_rows=1, time="cycle")
    assert cyc["time_ms"][0] == pytest.approx(step["time_ms"][0] / 0.3, rel=1e-3)


OLD_SCHEMA = """
CREATE TABLE sessions (name TEXT PRIMARY KEY, device TEXT NOT NULL, workload TEXT NOT NULL,
    batch_size INTEGER NOT NULL, seed INTEGER NOT NULL, backend TEXT NOT NULL, created REAL NOT NULL,
    updated REAL NOT NULL, status TEXT NOT NULL, original_mode TEXT, plan TEXT NOT NULL,
    params TEXT NOT NULL, device_time_s REAL NOT NULL DEFAULT 0);
CREATE TABLE results (session TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE,
    idx INTEGER NOT NULL, cores INTEGER NOT NULL, cpu_mhz REAL NOT NULL, gpu_mhz REAL NOT NULL,
    mem_mhz REAL NOT NULL, time_ms REAL NOT NULL, power_w REAL NOT NULL, time_ms_p25 REAL,
    time_ms_p75 REAL, power_w_std REAL, n_minibatches INTEGER, n_power INTEGER, settle_s REAL,
    mode_s REAL, stable INTEGER, PRIMARY KEY (session, idx));
INSERT INTO sessions VALUES ('old', 'orin-agx', 'resnet18', 16, 0, 'sim', 1, 1, 'done', NULL,
    '[[4, 729.6, 318.75, 665.6], [12, 2201.6, 1300.5, 3199]]', '{}', 12.5);
INSERT INTO results VALUES ('old', 0, 4, 729.6, 318.75, 665.6, 120.5, 14.25, 119, 122, 0.1, 40, 5,
    2.5, 9.0, 1);
"""


def test_a_store_from_before_the_cycle_column_still_opens_and_resumes(tmp_path):
    """The results table gained cycle_ms: a store written by an older ptui is migrated in place
    (ALTER TABLE ... ADD COLUMN), its finished modes read as before (no cycle), new ones keep it."""
    from ptui.core.profiling.profiler import PROFILE_HEADER, profile_rows
    from ptui.core.profiling.store import Store
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.executescript(OLD_SCHEMA)
    con.commit()
    con.close()
    s = Store(db)
    (i, r), = s.results("old")
    assert i == 0 and r["time_ms"] == 120.5 and r["cycle_ms"] is None
    s.save_result("old", 1, {"cores": 12, "cpu_mhz": 2201.6, "gpu_mhz": 1300.5, "mem_mhz": 3199,
                             "time_ms": 40.0, "power_w": 50.0, "cycle_ms": 41.0}, 20.0)
    rows = profile_rows(s, "old")
    h = list(PROFILE_HEADER)
    assert rows[0][h.index("cycle_ms")] == "" and rows[0][h.index("outside_pct")] == ""
    assert rows[1][h.index("cycle_ms")] == "41" and rows[1][h.index("outside_pct")] == "2.4"
    s.close()
    assert Store(db).results("old")[1][1]["cycle_ms"] == 41.0          # opens again, migrated once


def test_the_cycle_of_a_window_is_its_wall_time_per_step():
    """Profiler.summarise: the median of the step intervals and, beside it, their mean (the
    window's wall time per step), plus what the source adds that the board's events do not hold
    (a what-if's work outside the steps)."""
    from ptui.core.profiling.profiler import summarise
    mode = ORIN.mode(4, 729.6, 318.75, 665.6)
    mbs = [2.0] * 7 + [58.0]                    # 7 short steps, then one that waited for a rollout
    r = summarise(mode, mbs, [20.0, 21.0], 1.0, 5.0, True)
    assert r.time_ms == 2.0 and r.cycle_ms == pytest.approx(9.0)
    r = summarise(mode, mbs, [20.0], 1.0, 5.0, True, extra_ms=3.0)
    assert r.cycle_ms == pytest.approx(12.0)


def test_what_one_time_is_says_whole_cycle():
    from ptui.core.profiling.profiler import cycle_timed, time_unit
    t = cycle_timed("what-if from the model's measured size (SIMULATED): one optimizer step")
    assert time_unit(t) == "optimizer step over the whole cycle (its wall time, the work in between included)"
    assert cycle_timed(t) == t                                   # said once
    assert time_unit(cycle_timed("minibatch (SIMULATED built-in workload)")).startswith(
        "minibatch over the whole cycle")
    assert "step" not in cycle_timed("")                          # the app's unit stays a minibatch


def test_a_scripts_optimizer_step_is_a_step_not_a_minibatch():
    from ptui.core.profiling.profiler import Timed
    for text in ("one optimizer step", "optimizer step over 4 micro-batches (gradient accumulation)",
                 "what-if from the model's measured size (SIMULATED): one optimizer step",
                 "iteration of 2 optimizers (2 optimizer steps, 2 backward passes)"):
        assert Timed.of(text).per_step, text
    assert not Timed.of("minibatch").per_step and not Timed.of("").per_step


def test_the_outside_warning_gives_one_modes_figures_that_agree_with_its_share():
    """'48 % of the wall time is outside the optimizer steps (median step 18.5 ms, whole cycle
    19.2 ms per step)': the share is the median of the modes' shares, the two times were medians
    taken apart, from different modes (a helper's trial).  The figures are now those of the mode
    whose share is the median, and say so."""
    import re

    from ptui.core.board.csvio import outside_warning
    rows = [{"time_ms": t, "cycle_ms": c} for t, c in
            ((10.0, 20.0), (12.0, 24.0), (18.5, 19.2), (100.0, 101.0), (200.0, 400.0))]
    w = outside_warning(rows)
    share = int(re.search(r"(\d+) % of the wall time", w).group(1))
    step, cyc = map(float, re.search(r"median step ([\d.]+) ms, whole cycle ([\d.]+) ms", w).groups())
    assert share == 50 and abs(100 * (1 - step / cyc) - share) < 1, w
    assert "in the median mode" in w
