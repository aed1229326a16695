"""The session store's layout version: a new store records it, an older store is upgraded in place
(in one transaction, idempotent, safe against a kill), a newer one is refused untouched; and a
profile over several batch sizes is one session whose rows hold their size."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.profiling.store import SCHEMA_VERSION, Store, StoreError, upgrade_rows

ORIN = get_device("orin-agx")
GRID = ORIN.pt_grid()

# the layout every ptui before store versions wrote (user_version 0)
OLD_SCHEMA = """
CREATE TABLE sessions (
    name TEXT PRIMARY KEY, device TEXT NOT NULL, workload TEXT NOT NULL,
    batch_size INTEGER NOT NULL, seed INTEGER NOT NULL, backend TEXT NOT NULL,
    created REAL NOT NULL, updated REAL NOT NULL, status TEXT NOT NULL, original_mode TEXT,
    plan TEXT NOT NULL, params TEXT NOT NULL, device_time_s REAL NOT NULL DEFAULT 0,
    original_state TEXT
);
CREATE TABLE results (
    session TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    cores INTEGER NOT NULL, cpu_mhz REAL NOT NULL, gpu_mhz REAL NOT NULL, mem_mhz REAL NOT NULL,
    time_ms REAL NOT NULL, power_w REAL NOT NULL,
    time_ms_p25 REAL, time_ms_p75 REAL, power_w_std REAL,
    n_minibatches INTEGER, n_power INTEGER, settle_s REAL, mode_s REAL, stable INTEGER,
    cycle_ms REAL,
    PRIMARY KEY (session, idx)
);
"""


def old_session(db, name, size, plan, done, *, status="done", created=1.0, params=None,
                device_time_s=10.0):
    """A session as an older ptui wrote it, with `done` of its plan's modes finished."""
    db.execute("INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
               (name, "orin-agx", "resnet18", size, 3, "sim", created, created + 1, status,
                json.dumps(ORIN.maxn.as_tuple()), json.dumps([m.as_tuple() for m in plan]),
                json.dumps(params or {}), device_time_s, None))
    for i in done:
        m = plan[i]
        db.execute("INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   (name, i, m.cores, m.cpu_mhz, m.gpu_mhz, m.mem_mhz, 100.0 + size + i,
                    20.0 + i, 99.0, 101.0, 0.2, 40, 6, 2.0, 9.0, 1, 101.0))


def group_params(group, sizes, **kw):
    return {"out": f"/x/{group}.csv", "strategy": "random", "count": None, "goal": None,
            "batch_sizes": sizes, "group": group, "pairs": "random", "pairs_count": 7, **kw}


def old_store(path: Path, *, clash: bool = False) -> Path:
    """A version-0 store: a plain session, a user's session whose name only looks like a batch
    size's, and a batch-size profile 'g' kept as g@bs8 (finished) and g@bs16 (interrupted)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(OLD_SCHEMA)
    old_session(db, "plain", 32, GRID[:3], [0, 2])
    old_session(db, "mine@bs8", 8, GRID[:2], [0])                 # not a profile's part
    old_session(db, "g@bs8", 8, GRID[3:5], [0, 1], created=5.0,
                params=group_params("g", [8, 16], group_done=False))
    old_session(db, "g@bs16", 16, GRID[5:8], [0], status="aborted", created=6.0,
                params=group_params("g", [8, 16], host_step_ms=3.5))
    if clash:
        old_session(db, "g", 64, GRID[:1], [0])
    db.close()
    return path


def dump(path: Path) -> tuple:
    db = sqlite3.connect(path)
    try:
        return (db.execute("PRAGMA user_version").fetchone()[0],
                db.execute("SELECT * FROM sessions ORDER BY name").fetchall(),
                db.execute("SELECT * FROM results ORDER BY session, idx").fetchall())
    finally:
        db.close()


def test_a_new_store_records_its_version(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    assert s.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 1
    cols = {r[1] for r in s.db.execute("PRAGMA table_info(results)")}
    assert "batch_size" in cols


def test_an_old_store_is_upgraded_in_place(tmp_path):
    path = old_store(tmp_path / "sessions.sqlite")
    s = Store(path)
    assert s.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert s.notice is None
    assert sorted(x.name for x in s.list_sessions()) == ["g", "mine@bs8", "plain"]
    # a session of one size: its rows get its batch size, nothing else changes
    plain = s.get_session("plain")
    assert [(i, r["batch_size"]) for i, r in s.results("plain")] == [(0, 32), (2, 32)]
    assert plain.plan == GRID[:3] and plain.plan_sizes == [32] * 3 and plain.batch_sizes is None
    assert [r["batch_size"] for _, r in s.results("mine@bs8")] == [8]
    # the profile's parts: one session, its plan and rows tagged with their size, re-indexed
    g = s.get_session("g")
    assert g.plan == GRID[3:8] and g.plan_sizes == [8, 8, 16, 16, 16]
    assert g.batch_sizes == (8, 16) and g.batch_size == 8 and g.n_done == 3
    assert [(i, r["batch_size"], r["time_ms"]) for i, r in s.results("g")] == [
        (0, 8, 108.0), (1, 8, 109.0), (2, 16, 116.0)]
    assert g.status == "aborted" and g.device_time_s == 20.0 and g.created == 5.0
    assert "group" not in g.params and g.params["pairs"] == "random"
    # what each size's run learnt is kept with its size
    part = s.part("g", 16).get_session("g")
    assert part.params["host_step_ms"] == 3.5 and part.plan == GRID[5:8] and part.n_done == 1
    assert s.part("g", 16).done_indices("g") == {0}
    assert "host_step_ms" not in s.part("g", 8).get_session("g").params
    s.close()


def test_an_old_profile_whose_sizes_all_finished_is_one_finished_session(tmp_path):
    """Every size done (and the active pairs' run said so): the merged session is done, not left
    resumable."""
    path = tmp_path / "sessions.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(OLD_SCHEMA)
    old_session(db, "h@bs8", 8, GRID[:2], [0, 1], params=group_params("h", [8, 16]))
    old_session(db, "h@bs16", 16, GRID[2:4], [0, 1], created=2.0, params=group_params("h", [8, 16]))
    db.close()
    s = Store(path)
    h = s.get_session("h")
    assert h.status == "done" and h.n_done == 4 and h.batch_sizes == (8, 16)
    s.close()


def test_upgrading_twice_changes_nothing(tmp_path):
    path = old_store(tmp_path / "sessions.sqlite")
    Store(path).close()
    once = dump(path)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    assert upgrade_rows(db) == []                     # the rows' upgrade run again: nothing to do
    db.execute("PRAGMA user_version = 0")             # and the whole upgrade on the next open
    db.execute("COMMIT")
    db.close()
    Store(path).close()
    assert dump(path) == once


def test_a_profile_beside_a_session_of_its_name_keeps_both(tmp_path):
    path = old_store(tmp_path / "sessions.sqlite", clash=True)
    s = Store(path)
    assert sorted(x.name for x in s.list_sessions()) == ["g", "g-2", "mine@bs8", "plain"]
    assert s.get_session("g").plan == GRID[:1] and s.get_session("g").batch_sizes is None
    assert [r["batch_size"] for _, r in s.results("g")] == [64]
    assert s.get_session("g-2").plan_sizes == [8, 8, 16, 16, 16] and s.get_session("g-2").n_done == 3
    assert "'g-2'" in s.notice and "g@bs8" in s.notice and "kept" in s.notice
    s.close()


def test_the_command_that_upgraded_a_store_says_where_a_profile_went(tmp_path, cli):
    (tmp_path / "data").mkdir()
    old_store(tmp_path / "data" / "sessions.sqlite", clash=True)
    rc, out, err = cli("sessions")
    assert rc == 0 and "is now the one session 'g-2'" in err
    assert sorted(x.split()[0] for x in out.splitlines()[1:]) == ["g", "g-2", "mine@bs8", "plain"]


def test_a_store_of_a_newer_ptui_is_one_line_and_left_untouched(tmp_path, cli):
    path = tmp_path / "data" / "sessions.sqlite"
    path.parent.mkdir()
    db = sqlite3.connect(path)
    db.executescript(OLD_SCHEMA)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StoreError, match="newer ptui"):
        Store(path)
    rc, _, err = cli("sessions")
    assert rc == 1 and "written by a newer ptui" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["sessions.sqlite"]


def test_a_kill_during_the_upgrade_leaves_the_old_store(tmp_path):
    """kill -9 after the profile's parts were merged, before the upgrade committed: the store is
    still the old one (version 0, the parts as they were) and the next open upgrades it."""
    path = old_store(tmp_path / "sessions.sqlite")
    before = dump(path)
    code = ("import os, ptui.core.profiling.store as S\n"
            "real = S._merge_group\n"
            "def merge(*a):\n"
            "    real(*a)\n"
            "    os.kill(os.getpid(), 9)\n"
            "S._merge_group = merge\n"
            f"S.Store({str(path)!r})\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == -9, p.stderr
    assert dump(path) == before
    s = Store(path)
    assert sorted(x.name for x in s.list_sessions()) == ["g", "mine@bs8", "plain"]
    assert s.get_session("g").n_done == 3


def test_an_upgraded_profile_resumes_its_remaining_pairs(tmp_path, cli):
    """An older ptui's batch-size profile, interrupted at batch 16, is resumed by name: the pairs
    left at 16 are profiled, and the CSV holds every pair with its size."""
    (tmp_path / "data").mkdir()
    old_store(tmp_path / "data" / "sessions.sqlite")
    out = tmp_path / "g.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--session", "g", "--resume", "--out", out)
    assert rc == 0, err
    assert "3 done, 2 to go" in err
    s = Store()
    g = s.get_session("g")
    assert g.status == "done" and g.n_done == 5 and g.plan_sizes == [8, 8, 16, 16, 16]
    assert [(i, r["batch_size"]) for i, r in s.results("g")] == [(0, 8), (1, 8), (2, 16), (3, 16),
                                                                  (4, 16)]
    assert sorted(x.name for x in s.list_sessions()) == ["g", "mine@bs8", "plain"]
    s.close()
    lines = out.read_text().splitlines()
    head = lines[0].split(",")
    assert len(lines) == 6 and sorted(x.split(",")[head.index("batch_size")] for x in lines[1:]) == [
        "16", "16", "16", "8", "8"]
    rc, outp, _ = cli("sessions")
    assert rc == 0 and len([x for x in outp.splitlines() if x.startswith("g ")]) == 1


def test_a_damaged_old_store_is_salvaged_into_the_new_layout(tmp_path):
    """What a salvage copies out of a store of version 0 lands upgraded: rows with their batch
    size, a batch-size profile as one session."""
    import ptui.core.profiling.store as S
    old = old_store(tmp_path / "old.sqlite")
    new = Store(tmp_path / "new.sqlite")
    # 'plain' and 'mine@bs8' read done with modes missing: marked aborted, as any salvage does
    assert S.salvage(old, new) == (4, 0, 2)
    assert sorted(x.name for x in new.list_sessions()) == ["g", "mine@bs8", "plain"]
    assert new.get_session("g").plan_sizes == [8, 8, 16, 16, 16]
    assert [(i, r["batch_size"]) for i, r in new.results("g")] == [(0, 8), (1, 8), (2, 16)]
    assert [r["batch_size"] for _, r in new.results("plain")] == [32, 32]
