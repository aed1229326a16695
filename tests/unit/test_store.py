"""The session store: what a resumable profile relies on."""
from __future__ import annotations

import json
import random
import sqlite3
import struct
from pathlib import Path

import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.profiling.store import RESULT_FIELDS, Store, StoreError, data_dir

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
    from ptui.core.board.locks import lock_session, unlock_session
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
    from ptui.core.board.locks import lock_session, unlock_session
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
    # every row holds its batch size: the session's, when the save names none
    assert res[0][1] == {**{k: row(0).get(k) if k != "stable" else 1 for k in RESULT_FIELDS},
                         "batch_size": s.get_session("s").batch_size}
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


# -- another process holding the store --------------------------------------------------------
def _hold_store(path, exclusive: bool):
    """A separate process holding the store: a write transaction (BEGIN EXCLUSIVE; readers go on in
    WAL mode), or exclusive locking mode, which keeps readers out too."""
    import subprocess
    import sys
    how = ('db.execute("PRAGMA locking_mode=EXCLUSIVE"); db.execute("BEGIN EXCLUSIVE"); '
           'db.execute("COMMIT")' if exclusive else 'db.execute("BEGIN EXCLUSIVE")')
    code = ("import sqlite3, time\n"
            f"db = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            f"{how}\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.mark.parametrize("exclusive", [False, True], ids=["writing", "exclusive"])
def test_a_busy_store_is_one_line_in_every_command(exclusive, tmp_path, cli, monkeypatch):
    import ptui.core.profiling.store as S
    monkeypatch.setattr(S, "BUSY_TIMEOUT_S", 0.3)
    s = Store()
    make(s, "old")
    s.close()
    S._checked.clear()
    p = _hold_store(s.path, exclusive)
    try:
        for args in (["profile", "--device", "orin-agx", "--workload", "lstm", "--count", "2",
                      "--session", "new", "--out", tmp_path / "p.csv"],
                     ["tune", "--device", "orin-agx", "--workload", "lstm", "--budget-w", "30",
                      "--count", "6", "--out", tmp_path / "t.csv"],
                     ["sessions"]):
            rc, out, err = cli(*args)
            if args == ["sessions"] and not exclusive:         # reading goes on while one writes
                assert rc == 0 and "old" in out, err
                continue
            last = err.strip().splitlines()[-1]
            assert rc == 1 and err.count("ptui: error") == 1 and "Traceback" not in err, (args, err)
            assert last.startswith("ptui: error: the session store is busy: another process holds "
                                   f"{s.path} locked"), (args, err)
        assert not (tmp_path / "p.csv").exists() and not (tmp_path / "t.csv").exists()
    finally:
        p.kill()
        p.wait()
    rc, out, err = cli("sessions")                             # free again: all is as it was
    assert rc == 0 and [ln.split()[0] for ln in out.splitlines()[1:]] == ["old"], err


def test_the_store_waits_a_sane_time_for_another_writer(tmp_path):
    import ptui.core.profiling.store as S
    assert 2 <= S.BUSY_TIMEOUT_S <= 30
    s = Store(tmp_path / "s.db")
    assert s.db.execute("PRAGMA busy_timeout").fetchone()[0] == int(S.BUSY_TIMEOUT_S * 1000)


# -- a damaged store ----------------------------------------------------------------------------
NO_MODES = {5, 9}                                   # sessions that never finished a mode


def _timing(k: int, i: int) -> float:
    return 1000.0 + 100 * k + i + 0.123            # unique, not integral: stored as an 8-byte double


def _fill_store(s: Store, n: int = 12, per: int = 30, first: int = 0) -> dict:
    """Sessions s{first}.. with `per` finished modes each (none for NO_MODES); every third one
    aborted, the others done.  {name: (SessionInfo, results)}."""
    plan = ORIN.pt_grid()[:per]
    for k in range(first, first + n):
        make(s, f"s{k}", plan=plan, params={"marker": f"session-marker-{k:03d}"})
        for i in range(0 if k in NO_MODES else per):
            s.save_result(f"s{k}", i, dict(row(i % 3), **plan[i].as_dict(), time_ms=_timing(k, i)),
                          float(i))
        s.set_status(f"s{k}", "aborted" if k % 3 == 0 or k in NO_MODES else "done", 12.5 + k)
    s.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {f"s{k}": (s.get_session(f"s{k}"), s.results(f"s{k}")) for k in range(first, first + n)}


def _page_of(data: bytes, needle: bytes, size: int) -> int:
    at = data.find(needle)
    assert at >= 0 and data.find(needle, at + 1) < 0, needle
    return at // size


def _garbage(data: bytearray, pages, size: int) -> bytes:
    rng = random.Random(5)
    for p in pages:
        data[p * size:(p + 1) * size] = bytes(rng.randrange(256) for _ in range(size))
    return bytes(data)


# which session row and which finished mode sit on the pages damaged
SCENARIOS = {"middle": ((4, 8, 12), "rows, modes and a session with none in the middle of the file"),
             "edges": ((0, 11, 29), "the first page of sessions, the last page of modes")}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_damaged_store_is_salvaged_session_by_session(scenario, tmp_path, cli, monkeypatch):
    """Garbage over two pages of the file: one holding session rows, one holding finished modes.
    Every session whose row can be read comes back with every finished mode that can be read; the
    sessions on the damaged page are counted as lost (known from the store's index, also those that
    had no finished mode); a finished session that lost modes is marked aborted; the damaged file is
    kept as it was."""
    import ptui.core.profiling.store as S
    monkeypatch.setattr(S, "PROBE_LIMIT", 2000)             # past the last page: stop sooner
    (k_sess, k_res, i_res), _ = SCENARIOS[scenario]
    s = Store()
    orig = _fill_store(s)
    size = s.db.execute("PRAGMA page_size").fetchone()[0]
    s.close()
    data = bytearray(s.path.read_bytes())
    p_sess = _page_of(data, f"session-marker-{k_sess:03d}".encode(), size)
    p_res = _page_of(data, struct.pack(">d", _timing(k_res, i_res)), size)
    assert 0 < p_sess != p_res > 0
    lost = {n for k, n in enumerate(orig) if
            _page_of(data, f"session-marker-{k:03d}".encode(), size) == p_sess}
    gone = {(f"s{k}", i) for k in range(12) if k not in NO_MODES for i in range(30)
            if _page_of(data, struct.pack(">d", _timing(k, i)), size) == p_res}
    damaged = _garbage(data, (p_sess, p_res), size)
    s.path.write_bytes(damaged)
    S._checked.clear()                                       # as a new ptui process would
    rc, out, err = cli("sessions")
    assert rc == 0, err
    saved = [n for n in orig if n not in lost]
    partial = sorted({n for n, _ in gone if n not in lost and orig[n][0].status == "done"})
    assert "was damaged (database disk image is malformed" in err and "it was moved to" in err
    assert (f"a new one started with what could be read: {len(saved)} sessions saved, {len(lost)} "
            f"lost") in err, err
    assert (f"({len(partial)} of the saved miss finished modes" in err) == bool(partial), err
    assert sorted(ln.split()[0] for ln in out.splitlines()[1:]) == sorted(saved)
    aside = [p for p in s.path.parent.iterdir() if ".damaged-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes() == damaged          # kept as it was
    new = Store()
    assert new.notice is None                                # salvaged once, sound since
    for name in orig:
        info, results = orig[name]
        got = new.get_session(name)
        if name in lost:
            assert got is None and new.results(name) == []
            continue
        want = [(i, r) for i, r in results if (name, i) not in gone]
        assert new.results(name) == want, name
        assert (got.plan, got.params, got.device_time_s, got.created, got.seed) == \
            (info.plan, info.params, info.device_time_s, info.created, info.seed)
        assert got.status == ("aborted" if name in partial else info.status), name
    assert partial and gone and lost & {f"s{k}" for k in NO_MODES} if scenario == "middle" else \
        lost and gone                                         # the damage hit each kind of row


def test_the_rows_after_a_damaged_page_are_found_up_to_the_last_one(tmp_path):
    """Session rows of about 1.5 kB, two to a page: garbage over the page before the last one,
    which holds the last session alone; stepping over the damaged page finds it."""
    s = Store(tmp_path / "s.db")
    for k in range(9):
        make(s, f"s{k}", params={"marker": f"session-marker-{k:03d}", "pad": "x" * 1500})
    s.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = s.db.execute("PRAGMA page_size").fetchone()[0]
    s.close()
    data = bytearray(s.path.read_bytes())
    page = [_page_of(data, f"session-marker-{k:03d}".encode(), size) for k in range(9)]
    assert page[6] == page[7] != page[8] and page[5] != page[6]     # ... (s6 s7) (s8)
    new = Store(tmp_path / "new.db")
    from ptui.core.profiling.store import _readable_rows, salvage
    s.path.write_bytes(_garbage(data, [page[6]], size))
    assert salvage(s.path, new) == (7, 2, 0)
    assert {x.name for x in new.list_sessions()} == {f"s{k}" for k in (0, 1, 2, 3, 4, 5, 8)}
    with sqlite3.connect(s.path) as db:                     # each readable row once, in order
        assert _readable_rows(db, "sessions", (("name", str), ("seed", int))) == [
            (f"s{k}", 3) for k in (0, 1, 2, 3, 4, 5, 8)]


def test_a_damaged_index_is_found_by_the_integrity_check_and_costs_no_session(tmp_path):
    """Garbage over the index of session names only: the tables read, so only the integrity check
    finds it (and says what it found); every session and mode is saved."""
    import ptui.core.profiling.store as S
    s = Store()
    orig = _fill_store(s)
    size = s.db.execute("PRAGMA page_size").fetchone()[0]
    (root,) = s.db.execute("SELECT rootpage FROM sqlite_master WHERE "
                           "name='sqlite_autoindex_sessions_1'").fetchone()
    s.close()
    s.path.write_bytes(_garbage(bytearray(s.path.read_bytes()), [root - 1], size))
    S._checked.clear()
    new = Store()
    assert "was damaged (database disk image is malformed: " in new.notice, new.notice
    assert "12 sessions saved, 0 lost (finished" in new.notice
    assert {n: (new.get_session(n).plan, new.results(n)) for n in orig} == \
        {n: (info.plan, res) for n, (info, res) in orig.items()}


def test_the_last_commits_of_a_killed_writer_are_salvaged_too(tmp_path):
    """A store damaged while its last commits are still in the write-ahead log (the writer was
    killed before a checkpoint, and another process still has the store open, so nothing folds the
    log back in): the log goes aside with the store, and the sessions in it are saved."""
    import subprocess
    import sys

    import ptui.core.profiling.store as S
    path = tmp_path / "s.db"
    s = Store(path)
    orig = _fill_store(s, n=4)
    size = s.db.execute("PRAGMA page_size").fetchone()[0]
    s.close()
    code = ("import os, sys\n"
            "sys.path[:0] = [{!r}]\n"
            "from tests.unit.test_store import Store, _fill_store\n"
            "s = Store({!r})\n"
            "s.db.execute('PRAGMA wal_autocheckpoint=0')\n"
            "_fill_store(s, n=1, first=20)\n"
            "s.create_session('late', device='orin-agx', workload='lstm', batch_size=16, seed=0,\n"
            "                 backend='sim', plan=[], params={{}}, original_mode=None)\n"
            "os._exit(0)\n").format(str(Path(__file__).parents[2]), str(path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    wal = Path(f"{path}-wal")
    log = wal.read_bytes()
    assert log                                              # 'late' is only in the log
    data = bytearray(path.read_bytes())
    p = _page_of(data, struct.pack(">d", _timing(0, 3)), size)
    damaged = _garbage(data, [p], size)
    path.write_bytes(damaged)
    other = sqlite3.connect(path)                           # another process's connection
    other.execute("PRAGMA user_version").fetchone()
    try:
        S._checked.clear()
        new = Store(path)
        assert "6 sessions saved, 0 lost (1 of the saved miss finished modes" in new.notice, \
            new.notice
        assert {x.name for x in new.list_sessions()} == {*orig, "s20", "late"}
        assert len(new.results("s20")) == 30 and new.get_session("late").workload == "lstm"
        (aside,) = [x for x in tmp_path.iterdir() if x.name.endswith(".damaged-" + x.name[-15:])]
        assert aside.read_bytes() == damaged and Path(f"{aside}-wal").read_bytes() == log
        assert Path(f"{aside}-shm").exists()                # the log's index went with it
    finally:
        other.close()


def test_salvage_keeps_only_rows_as_ptui_wrote_them(tmp_path, monkeypatch):
    """Damage that still reads (garbage that happens to parse) is not copied: a plan or params
    that are not JSON of the right shape, a text where a number belongs.  A finished session that
    loses a mode this way is marked aborted; an unfinished one keeps its status."""
    import os
    import sqlite3

    from ptui.core.profiling.store import salvage
    old = Store(tmp_path / "old.db")
    for name in ("good", "ok"):
        make(old, name)
        for i in range(3 if name == "good" else 1):
            old.save_result(name, i, row(i), 1.0)
    old.set_status("good", "done", 3.0)
    old.set_status("ok", "aborted", 1.0)
    make(old, "one", plan=PLAN[:1])                          # its one finished mode will not parse
    old.save_result("one", 0, row(0), 1.0)
    old.set_status("one", "done", 1.0)
    bad = {"plan": "plan='[[1, 2, 3]]'", "plan2": "plan='[[\"a\", 1, 2, 3]]'", "plan3": "plan='5'",
           "params": "params='[1]'", "orig": "original_mode='not json'",
           "orig2": "original_mode='[1, 2]'", "batch": "batch_size='sixteen'"}
    for name in (*bad, "name"):
        make(old, name)
        old.save_result(name, 0, row(0), 1.0)
    db = sqlite3.connect(old.path, isolation_level=None)
    for name, change in bad.items():
        db.execute(f"UPDATE sessions SET {change} WHERE name=?", (name,))
    db.execute("UPDATE results SET time_ms='fast' WHERE session='good' AND idx=1")
    db.execute("UPDATE results SET cores=4.5 WHERE session='one'")
    db.execute("UPDATE sessions SET name='' WHERE name='name'")
    db.execute("UPDATE results SET session='' WHERE session='name'")
    db.close()
    old.close()
    new = Store(tmp_path / "new.db")
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    assert salvage(old.path, new) == (3, len(bad) + 1, 2)     # 'good', 'ok', 'one'; others lost
    assert os.listdir(here) == []                              # its working copy is gone
    assert sorted(s.name for s in new.list_sessions()) == ["good", "ok", "one"]
    assert new.get_session("one").status == "aborted" and new.results("one") == []
    assert new.done_indices("good") == {0, 2} and new.done_indices("ok") == {0}
    info = new.get_session("good")
    assert info.plan == PLAN and info.params == {"count": 3} and info.status == "aborted"
    assert info.device_time_s == 3.0 and new.get_session("ok").status == "aborted"
    assert new.results("good")[1][1] == {**{k: row(2).get(k) if k != "stable" else 1 for k in RESULT_FIELDS},
                                         "batch_size": 16}


def test_a_store_that_is_not_a_database_at_all(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    s = Store(bad)
    assert s.notice.startswith(f"warning: the session store {bad} was damaged (file is not a "
                               f"database); it was moved to {bad}.damaged-")
    assert "no session could be read from it" in s.notice and "of the saved" not in s.notice
    assert s.list_sessions() == []
    make(s)
    assert s.get_session("s").n_done == 0


def _damaged(path) -> None:
    s = Store(path)
    make(s)
    s.close()
    path.write_bytes(b"garbage" * 600)


def test_two_damaged_stores_in_one_second_are_kept_apart(tmp_path, monkeypatch):
    import time
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20260101-120000")
    path = tmp_path / "s.db"
    for _ in range(3):
        _damaged(path)
        Store(path).close()
    assert sorted(p.name for p in tmp_path.iterdir() if "damaged" in p.name) == [
        "s.db.damaged-20260101-120000", "s.db.damaged-20260101-120000-2",
        "s.db.damaged-20260101-120000-3"]


def test_a_salvage_that_fails_leaves_an_empty_sound_store(tmp_path, monkeypatch):
    import errno
    import shutil
    import sqlite3

    from ptui.core.profiling.store import salvage
    path = tmp_path / "s.db"
    _damaged(path)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    with monkeypatch.context() as m:
        m.setattr(shutil, "copyfile", full)
        s = Store(path)
    assert "nothing could be copied from it ([Errno 28] No space left on device)" in s.notice
    assert "of the saved" not in s.notice and s.list_sessions() == []
    make(s)                                                  # the new store works
    assert [x.name for x in s.list_sessions()] == ["s"]
    # a write failing half-way through the copy: nothing of it is committed
    old = Store(tmp_path / "old.db")
    make(old, "a")
    make(old, "b")
    old.close()
    new = Store(tmp_path / "new.db")
    real = new.db
    new.db = _Failing(real, 13, "database or disk is full")
    with pytest.raises(sqlite3.OperationalError):
        salvage(old.path, new)
    new.db = real
    assert not real.in_transaction and new.list_sessions() == []


def test_a_store_that_cannot_be_set_aside_is_one_line(tmp_path, monkeypatch):
    import os
    path = tmp_path / "s.db"
    _damaged(path)

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(StoreError, match=f"cannot open session store {path}: .*Permission denied"):
        Store(path)
    assert path.read_bytes() == b"garbage" * 600


def test_the_integrity_check_runs_once_per_store_in_a_process(tmp_path, monkeypatch):
    """quick_check reads every page: once per store per process (the app opens the store often),
    and every store is checked (a sound one first does not excuse the next); a connection that
    failed is closed."""
    import sqlite3

    import ptui.core.profiling.store as S
    checks, conns = [], []
    real = sqlite3.connect

    def connect(path, *a, **k):
        c = real(path, *a, **k)
        conns.append(c)
        c.set_trace_callback(lambda sql: checks.append(str(path)) if "quick_check" in sql else None)
        return c
    monkeypatch.setattr(sqlite3, "connect", connect)
    a, b, c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    for p in (a, a, b, a, b):
        Store(p).close()
    assert checks == [str(a), str(b)]
    _damaged(c)
    S._checked.discard(str(c))
    conns.clear()
    st = Store(c)
    assert st.notice and checks[-1] == str(c)
    for x in conns:
        if x is not st.db:
            with pytest.raises(sqlite3.ProgrammingError):     # closed
                x.execute("SELECT 1")


class _Failing:
    """A connection whose writes fail with an SQLite error of the given code."""

    def __init__(self, db, code: int, msg: str):
        self._db, self.code, self.msg = db, code, msg

    def execute(self, sql, *a):
        if sql.startswith(("INSERT", "UPDATE")):
            e = sqlite3.OperationalError(self.msg)
            if self.code is not None:            # an error raised without an SQLite code
                e.sqlite_errorcode = self.code
            raise e
        return self._db.execute(sql, *a)

    def __getattr__(self, name):
        return getattr(self._db, name)


@pytest.mark.parametrize("code,msg,says", [
    (13, "database or disk is full", "cannot write the session store {}: no space left on the disk"),
    (8, "attempt to write a readonly database", "cannot write the session store {}: it is read-only"),
    (5, "database is locked", "the session store is busy: another process holds {} locked (waited "
                              "10 s); try again when it has finished"),
    (261, "database is locked", "the session store is busy: another process holds {} locked"),
    (6, "database table is locked", "the session store is busy: another process holds {} locked"),
    (11, "database disk image is malformed", "the session store {} is damaged"),
    (26, "file is not a database", "the session store {} is damaged"),
    (1, "something else", "session store {}: something else"),
    (None, "no code", "session store {}: no code")])
def test_a_failing_store_is_one_line_and_keeps_what_was_committed(code, msg, says, tmp_path):
    s = Store(tmp_path / "s.db")
    make(s)
    s.save_result("s", 0, row(0), 1.0)
    real = s.db
    s.db = _Failing(real, code, msg)
    for write in (lambda: s.save_result("s", 1, row(1), 2.0), lambda: s.set_status("s", "done"),
                  lambda: s.extend_plan("s", [ORIN.maxn]), lambda: make(s, "t")):
        with pytest.raises(StoreError) as e:
            write()
        assert str(e.value).startswith(says.format(s.path)) and "\n" not in str(e.value)
        assert not real.in_transaction
    s.db = real
    assert s.done_indices("s") == {0} and s.get_session("s").plan == PLAN
    assert s.get_session("t") is None and s.get_session("s").device_time_s == 1.0


# -- session names --------------------------------------------------------------------------------
@pytest.mark.parametrize("name,why", [
    ("", "it is empty"), ("   ", "it is empty"), (".", "'.' and '..' name folders"),
    ("..", "'.' and '..' name folders"), ("../x", "it holds a path separator"),
    ("a/b", "it holds a path separator"), ("a\\b", "it holds a path separator"),
    ("a\tb", "it holds a control character"), ("a\x00b", "it holds a control character"),
    (" a", "it starts or ends with a space"), ("a ", "it starts or ends with a space"),
    ("x" * 101, "it is longer than 100 characters"),
    ("é" * 75 + "a", "it is longer than 100 characters")])  # 151 bytes: too long as a file name
def test_a_bad_session_name_says_why(name, why):
    from ptui.core.errors import InputError
    from ptui.core.profiling.store import check_session_name
    with pytest.raises(InputError) as e:
        check_session_name(name)
    assert str(e.value) == (f"bad session name {name!r}: {why} (a session name is printable text "
                            f"of at most 100 characters, without / or \\)")
    assert e.value.exit_code == 2


@pytest.mark.parametrize("name", ["x" * 100, "é" * 75, "run 2 (bs16)@home", "a.b", "...", "-x"])
def test_good_session_names(name):
    from ptui.core.profiling.store import check_session_name
    assert check_session_name(name) == name


# -- what active profiling, scripts and the CLI's names rely on ------------------------------------
def test_extend_plan_is_committed_before_the_mode_runs(tmp_path):
    s = Store(tmp_path / "s.db")
    make(s, plan=PLAN[:1])
    make(s, "other", plan=PLAN[:1])
    assert s.extend_plan("s", [PLAN[1]]) == PLAN[:2]
    assert s.extend_plan("s", [PLAN[2], PLAN[0]]) == [*PLAN, PLAN[0]]
    other = Store(tmp_path / "s.db")                        # another process sees it at once
    assert other.get_session("s").plan == [*PLAN, PLAN[0]] and other.get_session("other").plan == PLAN[:1]
    with pytest.raises(StoreError, match="no session named 'nope'"):
        s.extend_plan("nope", [PLAN[1]])
    assert not s.db.in_transaction
    make(s, "t")                                            # the connection still works


def test_merge_params_adds_what_a_probe_learnt(tmp_path):
    s = Store(tmp_path / "s.db")
    make(s)
    s.merge_params("s", {"samples": 24, "timed": "one optimizer step"})
    s.merge_params("s", {"samples": 32})
    s.merge_params("nope", {"x": 1})                        # no such session: nothing happens
    assert s.get_session("s").params == {"count": 3, "samples": 32, "timed": "one optimizer step"}
    assert s.get_session("nope") is None


def test_free_name_counts_up(tmp_path):
    s = Store(tmp_path / "s.db")
    assert s.free_name("run") == "run"
    make(s, "run")
    assert s.free_name("run") == "run-2"
    make(s, "run-2")
    make(s, "run-3")
    assert s.free_name("run") == "run-4" and s.free_name("other") == "other"


def test_a_running_session_whose_process_is_gone_reads_interrupted(tmp_path):
    from ptui.core.board.locks import lock_session, unlock_session
    s = Store(tmp_path / "s.db")
    make(s)                                                  # status running, nobody holds it
    assert s.get_session("s").status == "interrupted"
    assert [x.status for x in s.list_sessions()] == ["interrupted"]
    lock_session("s")
    try:
        assert s.get_session("s").status == "running"
    finally:
        unlock_session("s")
    s.set_status("s", "aborted")
    assert s.get_session("s").status == "aborted"


def test_a_closed_store_is_a_bug_not_a_store_error(tmp_path):
    s = Store(tmp_path / "s.db")
    s.close()
    for call in (lambda: s.get_session("s"), lambda: s.list_sessions(), lambda: make(s)):
        with pytest.raises(sqlite3.ProgrammingError):
            call()


def test_a_store_that_cannot_be_made_is_one_line(tmp_path, monkeypatch):
    import os

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")
    with monkeypatch.context() as m:
        m.setattr(Path, "mkdir", refuse)
        with pytest.raises(StoreError) as e:
            Store(tmp_path / "d" / "s.db")
    assert str(e.value) == f"cannot open session store {tmp_path / 'd' / 's.db'}: permission denied"
    os.mkfifo(tmp_path / "fifo.db")
    with pytest.raises(StoreError) as e:
        Store(tmp_path / "fifo.db")
    assert str(e.value) == (f"cannot open session store: {tmp_path / 'fifo.db'} is a FIFO (named pipe), "
                            f"not a regular file; ptui leaves it alone (never renamed, replaced or "
                            f"read): choose another PTUI_DATA_DIR")


def test_salvage_reads_a_store_written_by_an_older_ptui(tmp_path):
    """A damaged store from before `cycle_ms` and `original_state` were kept: its sessions and
    finished modes are still salvaged (the newer columns read as empty), not all counted lost."""
    import ptui.core.profiling.store as S
    old = Store(tmp_path / "old.sqlite")
    plan = ORIN.pt_grid()[:3]
    make(old, "legacy", plan=plan)
    for i in range(3):
        old.save_result("legacy", i, dict(row(i), **plan[i].as_dict()), float(i))
    old.db.execute("ALTER TABLE results DROP COLUMN cycle_ms")
    old.db.execute("ALTER TABLE sessions DROP COLUMN original_state")
    old.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    old.close()
    new = Store(tmp_path / "new.sqlite")
    assert S.salvage(tmp_path / "old.sqlite", new) == (1, 0, 0)
    got = new.get_session("legacy")
    assert got.n_done == 3 and got.original_state is None
    assert [r["cycle_ms"] for _, r in new.results("legacy")] == [None] * 3


def test_a_sessions_row_is_sound_only_as_ptui_writes_it():
    """The salvage's check of one sessions row answers True or False (never None) for every shape."""
    from ptui.core.profiling.store import _sound_session
    good = ("s", "orin-agx", "lstm", 16, 0, "sim", 1.0, 2.0, "done", None,
            json.dumps([[12, 2201.6, 1300.5, 3199]]), "{}", 3.0, None)
    assert _sound_session(good) is True
    for bad in (("",) + good[1:],                          # no name
                good[:3] + ("16",) + good[4:],             # a batch size as text
                good[:10] + ("[[12, 2201.6]]",) + good[11:],   # a mode of two knobs
                good[:10] + ("not json",) + good[11:],
                good[:11] + ("[]",) + good[12:],           # params not an object
                good[:9] + ('"x"',) + good[10:]):          # an original mode that is no mode
        assert _sound_session(bad) is False, bad


class _InterruptAfterCommit:
    """A connection on which Ctrl-C lands just after COMMIT took effect."""

    def __init__(self, real):
        self.real = real

    def execute(self, sql, *args):
        cur = self.real.execute(sql, *args)
        if sql.strip() == "COMMIT":
            raise KeyboardInterrupt
        return cur

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_ctrl_c_just_after_a_commit_is_an_interrupt_not_a_store_error(tmp_path):
    """Ctrl-C after COMMIT left no transaction to roll back: extend_plan's ROLLBACK failed with
    'cannot rollback - no transaction is active' (an active profile then ended 'failed' with that
    line instead of 'interrupted'); every write keeps the interrupt and what it committed."""
    s = Store(tmp_path / "s.db")
    make(s, plan=PLAN[:1])
    real = s.db
    s.db = _InterruptAfterCommit(real)
    for write in (lambda: s.extend_plan("s", [PLAN[1]]), lambda: s.save_result("s", 0, row(0), 1.0),
                  lambda: s.update_params("s", lambda p: p.update(x=1))):
        with pytest.raises(KeyboardInterrupt):
            write()
        assert not real.in_transaction
    s.db = real
    assert s.get_session("s").plan == PLAN[:2] and s.done_indices("s") == {0}
    assert s.get_session("s").params.get("x") == 1


@pytest.mark.parametrize("params", [{"strategy": "active", "count": 20},
                                    {"pairs": "active", "pairs_count": 20, "batch_sizes": [8, 16]}])
def test_an_interrupted_active_profile_is_resumable_and_says_how_far_it_may_go(params, cli):
    """An active profile plans one point at a time, so an interrupted one has every planned point
    done: it was left out of the app's resume list, and `ptui sessions` said 3/3 for a profile of up
    to 20 points."""
    from ptui import core
    s = Store()
    make(s, "act", params=params)
    make(s, "fixed")
    for name in ("act", "fixed"):
        for i in range(3):
            s.save_result(name, i, row(i), float(i))
        s.set_status(name, "aborted" if name == "act" else "done")
    assert s.get_session("act").resumable and not s.get_session("fixed").resumable
    assert [x.name for x in core.resumable_sessions("orin-agx")] == ["act"]
    rc, out, err = cli("sessions")
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("act "))
    assert "3/<=20" in line and "aborted" in line
    s.set_status("act", "done")
    assert not s.get_session("act").resumable and core.resumable_sessions("orin-agx") == []
    s.close()


def test_a_batch_size_that_has_not_run_yet_has_no_session_part(tmp_path):
    """A profile over sizes 8 and 16: the part of size 16 is no session until its first run
    recorded its params (a resume then plans it afresh rather than reading another size's)."""
    s = Store(tmp_path / "s.db")
    make(s, params={"batch_sizes": [8, 16], "per_size": {"8": {"count": 3}}}, plan_sizes=[8, 8, 16])
    assert s.part("s", 8).get_session("s") is not None and s.part("s", 16).get_session("s") is None
    s.update_params("s", lambda p: p["per_size"].setdefault("16", {"count": 1}))
    got = s.part("s", 16).get_session("s")
    assert got is not None and got.batch_size == 16 and got.plan == PLAN[2:]


def test_one_size_finished_leaves_the_profile_over_sizes_running(tmp_path):
    """A part's run ends with 'done' for its size; the session is done only when the whole run
    says so, and an interruption is the session's."""
    s = Store(tmp_path / "s.db")
    make(s, params={"batch_sizes": [8, 16], "per_size": {"8": {}, "16": {}}}, plan_sizes=[8, 8, 16])
    s.part("s", 8).set_status("s", "done")
    st = s.get_session("s")
    assert st.status != "done" and st.resumable          # running (interrupted once unlocked)
    s.part("s", 16).set_status("s", "aborted")
    assert s.get_session("s").status == "aborted"
    s.close()


def test_sessions_says_a_scripts_unstated_batch_size_as_its_csv_does(cli):
    """`ptui sessions` listed a user's script profiled without --batch-size (and no DataLoader seen)
    at batch 16, and --json said "batch_size": 16, where its profile CSV's batch_size is blank:
    it is unknown ('?', null); one the probe counted (samples per iteration) is said."""
    import json
    s = Store()
    make(s, "scr", workload="script", params={"count": 3, "batch_size_stated": False})
    make(s, "dl", workload="script",
         params={"count": 3, "batch_size_stated": False, "whatif": {"model": {"samples": 32}}})
    make(s, "told", workload="script", params={"count": 3, "batch_size_stated": True})
    s.close()
    rc, out, err = cli("sessions")
    assert rc == 0, err
    lines = {ln.split()[0]: ln.split() for ln in out.splitlines()[1:]}
    assert lines["scr"][3] == "?" and lines["dl"][3] == "32" and lines["told"][3] == "16", out
    rc, out, err = cli("sessions", "--json")
    got = {x["name"]: (x["batch_size"], x["batch_sizes"]) for x in json.loads(out)["sessions"]}
    assert got["scr"] == (None, []) and got["dl"] == (32, [32]) and got["told"] == (16, [16]), got
