"""The session store: what a resumable profile relies on."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ptui.core.devices import get_device
from ptui.core.store import RESULT_FIELDS, Store, StoreError, data_dir

ORIN = get_device("orin-agx")
PLAN = [ORIN.mode(4, 729.6, 318.75, 665.6), ORIN.mode(8, 1113.6, 624.75, 2133), ORIN.maxn]


def row(i: int) -> dict:
    m = PLAN[i]
    return {**m.as_dict(), "time_ms": 100.0 + i, "power_w": 20.0 + i, "time_ms_p25": 99.0,
            "time_ms_p75": 101.5, "power_w_std": 0.25, "n_minibatches": 40 + i, "n_power": 6,
            "settle_s": 2.5, "mode_s": 9.0, "stable": i != 1}


def make(store: Store, name="s", **kw):
    args = {"device": "orin-agx", "workload": "resnet18", "batch_size": 16, "seed": 3, "backend": "sim",
                "plan": PLAN, "params": {"count": 3}, "original_mode": ORIN.preset("MODE_30W").mode}
    args.update(kw)
    store.create_session(name, **args)


def test_data_dir_order(monkeypatch, tmp_path):
    monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert data_dir() == tmp_path / "a"
    monkeypatch.delenv("PTUI_DATA_DIR")
    assert data_dir() == tmp_path / "x" / "ptui"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".local" / "share" / "ptui"


def test_default_path_is_in_the_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / "d"))
    s = Store()
    assert s.path == tmp_path / "d" / "sessions.sqlite" and s.path.exists()
    s.close()


def test_creates_missing_parent_directories(tmp_path):
    s = Store(tmp_path / "a" / "b" / "s.db")
    make(s)
    assert s.get_session("s").n_done == 0 and (tmp_path / "a" / "b" / "s.db").exists()


def test_cannot_open_is_one_clear_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreError, match="cannot open session store"):
        Store(f / "sub" / "s.db")
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    s = Store(bad)                       # a damaged store is set aside (and said), never a crash
    assert s.notice and "set aside" in s.notice or "moved" in (s.notice or "")
    assert s.list_sessions() == []


def test_durability_pragmas(tmp_path):
    s = Store(tmp_path / "s.db")
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s.db.execute("PRAGMA synchronous").fetchone()[0] == 2          # FULL
    assert s.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_session_round_trip(tmp_path):
    from ptui.core.locks import lock_session, unlock_session
    s = Store(tmp_path / "s.db")
    make(s)
    lock_session("s")
    info = s.get_session("s")
    assert (info.name, info.device, info.workload, info.batch_size, info.seed, info.backend) == \
           ("s", "orin-agx", "resnet18", 16, 3, "sim")
    assert info.status == "running" and info.plan == PLAN and info.params == {"count": 3}
    assert info.original_mode == ORIN.preset("MODE_30W").mode
    assert info.device_time_s == 0 and info.n_done == 0 and info.created > 0
    unlock_session("s")
    make(s, "t", original_mode=None)
    assert s.get_session("t").original_mode is None
    assert s.get_session("nope") is None


def test_duplicate_session_is_refused(tmp_path):
    s = Store(tmp_path / "s.db")
    make(s)
    with pytest.raises(StoreError, match="session 's' already exists; resume it with --resume"):
        make(s, workload="lstm")
    assert s.get_session("s").workload == "resnet18"


def test_status_transitions_and_device_time(tmp_path):
    s = Store(tmp_path / "s.db")
    make(s)
    s.set_status("s", "aborted", 12.5)
    info = s.get_session("s")
    assert info.status == "aborted" and info.device_time_s == 12.5
    s.set_status("s", "running")
    from ptui.core.locks import lock_session, unlock_session
    lock_session("s")
    info = s.get_session("s")
    assert info.status == "running" and info.device_time_s == 12.5      # kept when not given
    unlock_session("s")
    s.set_status("s", "done", 30.0)
    assert (s.get_session("s").status, s.get_session("s").device_time_s) == ("done", 30.0)


def test_results_and_resume_bookkeeping(tmp_path):
    s = Store(tmp_path / "s.db")
    make(s)
    make(s, "other")
    s.save_result("s", 2, row(2), 40.0)
    s.save_result("s", 0, row(0), 50.0)
    s.save_result("other", 1, row(1), 7.0)
    assert s.done_indices("s") == {0, 2} and s.done_indices("other") == {1}
    res = s.results("s")
    assert [i for i, _ in res] == [0, 2]                                  # plan order
    assert res[0][1] == {k: row(0).get(k) if k != "stable" else 1 for k in RESULT_FIELDS}
    assert res[1][1]["stable"] == 1 and s.results("other")[0][1]["stable"] == 0
    info = s.get_session("s")
    assert info.n_done == 2 and info.device_time_s == 50.0
    assert [x.name for x in s.list_sessions()] == ["other", "s"]        # newest first


def test_a_failed_save_changes_nothing(tmp_path):
    s = Store(tmp_path / "s.db")
    make(s)
    s.save_result("s", 0, row(0), 10.0)
    with pytest.raises(sqlite3.IntegrityError):
        s.save_result("s", 0, row(0), 99.0)                               # same index twice
    assert s.get_session("s").device_time_s == 10.0 and len(s.results("s")) == 1
    bad = row(1)
    bad["time_ms"] = None
    with pytest.raises(sqlite3.IntegrityError):
        s.save_result("s", 1, bad, 99.0)
    assert s.get_session("s").device_time_s == 10.0 and s.done_indices("s") == {0}
    s.save_result("s", 1, row(1), 20.0)                                   # the connection still works
    assert s.done_indices("s") == {0, 1}


def test_delete_removes_results_too(tmp_path):
    s = Store(tmp_path / "s.db")
    make(s)
    s.save_result("s", 0, row(0), 1.0)
    s.delete_session("s")
    assert s.get_session("s") is None and s.results("s") == [] and s.done_indices("s") == set()
    make(s)                                                               # the name is free again
    assert s.get_session("s").n_done == 0


def test_a_second_process_sees_every_committed_mode(tmp_path):
    a = Store(tmp_path / "s.db")
    make(a)
    a.save_result("s", 0, row(0), 5.0)
    b = Store(Path(tmp_path / "s.db"))
    assert b.done_indices("s") == {0} and b.get_session("s").device_time_s == 5.0
    a.close()
    assert b.results("s")[0][1]["time_ms"] == 100.0


def test_close_releases_the_connection(tmp_path):
    s = Store(tmp_path / "s.db")
    s.close()
    with pytest.raises(sqlite3.ProgrammingError):
        s.db.execute("SELECT 1")
