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
    assert res[0][1] == {k: row(0)[k] if k != "stable" else 1 for k in RESULT_FIELDS}
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
    import ptui.core.store as S
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
    import ptui.core.store as S
    assert 2 <= S.BUSY_TIMEOUT_S <= 30
    s = Store(tmp_path / "s.db")
    assert s.db.execute("PRAGMA busy_timeout").fetchone()[0] == int(S.BUSY_TIMEOUT_S * 1000)


# -- a damaged store ----------------------------------------------------------------------------
def _timing(k: int, i: int) -> float:
    return 1000.0 + 100 * k + i + 0.123            # unique, not integral: stored as an 8-byte double


def _fill_store(s: Store, n: int = 12, per: int = 30) -> dict:
    """n sessions s0.. with `per` finished modes each; {name: (SessionInfo, results)}."""
    plan = ORIN.pt_grid()[:per]
    for k in range(n):
        make(s, f"s{k}", plan=plan, params={"marker": f"session-marker-{k:03d}"})
        for i in range(per):
            s.save_result(f"s{k}", i, dict(row(i % 3), **plan[i].as_dict(), time_ms=_timing(k, i)),
                          float(i))
        s.set_status(f"s{k}", "aborted" if k % 3 == 0 else "done", 12.5 + k)
    s.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {f"s{k}": (s.get_session(f"s{k}"), s.results(f"s{k}")) for k in range(n)}


def _page_of(data: bytes, needle: bytes, size: int) -> int:
    at = data.find(needle)
    assert at >= 0 and data.find(needle, at + 1) < 0, needle
    return at // size


def test_a_damaged_store_is_salvaged_session_by_session(tmp_path, cli):
    """Garbage over two pages in the middle of the file: one holding a session's row, one holding
    some finished modes of another session.  Every session whose row can be read comes back with
    every finished mode that can be read; the damaged file is kept as it was."""
    import random
    import struct

    import ptui.core.store as S
    s = Store()
    orig = _fill_store(s)
    size = s.db.execute("PRAGMA page_size").fetchone()[0]
    s.close()
    data = bytearray(s.path.read_bytes())
    p_sess = _page_of(data, b"session-marker-004", size)
    p_res = _page_of(data, struct.pack(">d", _timing(7, 12)), size)
    assert 0 < p_sess != p_res > 0 and (p_res + 1) * size <= len(data)
    on = {name: _page_of(data, f"session-marker-{k:03d}".encode(), size) for k, name in
          enumerate(orig)}
    lost = {n for n, p in on.items() if p == p_sess}
    gone = {(f"s{k}", i) for k in range(12) for i in range(30)
            if _page_of(data, struct.pack(">d", _timing(k, i)), size) == p_res}
    rng = random.Random(5)
    for p in (p_sess, p_res):
        data[p * size:(p + 1) * size] = bytes(rng.randrange(256) for _ in range(size))
    s.path.write_bytes(bytes(data))
    S._checked.clear()                                       # as a new ptui process would
    rc, out, err = cli("sessions")
    assert rc == 0, err
    saved = [n for n in orig if n not in lost]
    partial = sorted({n for n, _ in gone if n not in lost and orig[n][0].status == "done"})
    assert f"{len(saved)} sessions saved, {len(lost)} lost" in err, err
    assert (f"({len(partial)} of the saved miss finished modes" in err) == bool(partial), err
    assert "damaged" in err and "moved to" in err
    assert sorted(ln.split()[0] for ln in out.splitlines()[1:]) == sorted(saved)
    aside = [p for p in s.path.parent.iterdir() if ".damaged-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes() == bytes(data)        # kept as it was
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
    assert lost and partial and gone      # the damage hit each kind of row


def test_salvage_keeps_only_rows_as_ptui_wrote_them(tmp_path):
    """Damage that still reads (garbage that happens to parse) is not copied: a plan or params
    that are not JSON of the right shape, a text where a number belongs."""
    import sqlite3

    from ptui.core.store import salvage
    old = Store(tmp_path / "old.db")
    make(old, "good")
    for i in range(3):
        old.save_result("good", i, row(i), 1.0)
    for name in ("plan", "params", "orig", "batch", "name"):
        make(old, name)
        old.save_result(name, 0, row(0), 1.0)
    db = sqlite3.connect(old.path, isolation_level=None)
    db.execute("UPDATE sessions SET plan='[[1, 2, 3]]' WHERE name='plan'")
    db.execute("UPDATE sessions SET params='[1]' WHERE name='params'")
    db.execute("UPDATE sessions SET original_mode='not json' WHERE name='orig'")
    db.execute("UPDATE sessions SET batch_size='sixteen' WHERE name='batch'")
    db.execute("UPDATE results SET time_ms='fast' WHERE session='good' AND idx=1")
    db.execute("UPDATE sessions SET name='' WHERE name='name'")
    db.execute("UPDATE results SET session='' WHERE session='name'")
    db.close()
    old.close()
    new = Store(tmp_path / "new.db")
    assert salvage(old.path, new) == (1, 5, 0)      # 'good'; the 5 others lost ('' too)
    assert [s.name for s in new.list_sessions()] == ["good"]
    assert new.done_indices("good") == {0, 2}
    info = new.get_session("good")
    assert info.plan == PLAN and info.params == {"count": 3} and info.status == "interrupted"


def test_a_store_that_is_not_a_database_at_all(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    s = Store(bad)
    assert "no session could be read from it" in s.notice and "moved to" in s.notice
    assert s.list_sessions() == []


class _Failing:
    """A connection whose writes fail with an SQLite error of the given code."""

    def __init__(self, db, code: int, msg: str):
        self._db, self.code, self.msg = db, code, msg

    def execute(self, sql, *a):
        if sql.startswith(("INSERT", "UPDATE")):
            e = sqlite3.OperationalError(self.msg)
            e.sqlite_errorcode = self.code
            raise e
        return self._db.execute(sql, *a)

    def __getattr__(self, name):
        return getattr(self._db, name)


@pytest.mark.parametrize("code,msg,says", [
    (13, "database or disk is full", "cannot write the session store {}: no space left on the disk"),
    (8, "attempt to write a readonly database", "cannot write the session store {}: it is read-only"),
    (5, "database is locked", "the session store is busy: another process holds {} locked"),
    (11, "database disk image is malformed", "the session store {} is damaged"),
    (1, "something else", "session store {}: something else")])
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
