"""Files and the session store: nothing the user had is lost, nothing ptui left behind lingers."""
import os
import subprocess
import sys

import pytest

from ptui.core.board.csvio import CSVError, read_modes, read_profile, write_csv
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.modes import Mode
from ptui.core.profiling.store import Store
from tests.support.child import holding_lock

ORIN = get_device("orin-agx")
PROFILE = ["profile", "--device", "orin-agx", "--workload", "mobilenetv3", "--count", "3",
           "--seed", "1"]
M = Mode(4, 729.6, 318.75, 665.6)
ROW = {"cores": 4, "cpu_mhz": 729.6, "gpu_mhz": 318.75, "mem_mhz": 665.6, "time_ms": 1.0,
       "power_w": 1.0}


# -- B7: CSV files ---------------------------------------------------------------------------------
def test_excel_bom_and_semicolons(tmp_path):
    f = tmp_path / "excel.csv"
    f.write_bytes("\ufeffcores,cpu_mhz,gpu_mhz,mem_mhz\r\n4,729.6,318.75,665.6\r\n".encode())
    assert read_modes(f, ORIN) == [M]
    s = tmp_path / "semi.csv"
    s.write_text("cores;cpu_mhz;gpu_mhz;mem_mhz\n4;729,6;318,75;665,6\n")
    with pytest.raises(CSVError, match="separated by semicolons") as e:
        read_modes(s, ORIN)
    assert "comma" in str(e.value)


def _mode_of(path):
    return path.stat().st_mode & 0o777


def test_written_csv_respects_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        write_csv(tmp_path / "a.csv", ("x",), [["1"]])
        assert _mode_of(tmp_path / "a.csv") == 0o644
        os.umask(0o077)
        write_csv(tmp_path / "b.csv", ("x",), [["1"]])
        assert _mode_of(tmp_path / "b.csv") == 0o600
        os.chmod(tmp_path / "a.csv", 0o640)             # an existing file keeps its permissions
        write_csv(tmp_path / "a.csv", ("x",), [["2"]])
        assert _mode_of(tmp_path / "a.csv") == 0o640
    finally:
        os.umask(old)


def test_temporaries_of_a_killed_writer_are_removed(tmp_path):
    dead = 2 ** 22 + 4321                 # above pid_max: no such process
    stale = tmp_path / f".out.csv.ptui-tmp-{dead}-x1y2"
    stale.write_text("half a file")
    live = tmp_path / f".out.csv.ptui-tmp-{os.getpid()}-busy"    # a writer still at work
    live.write_text("in progress")
    other = tmp_path / f".other.csv.ptui-tmp-{dead}-zz"             # another target's
    other.write_text("not mine to judge")
    write_csv(tmp_path / "out.csv", ("x",), [["1"]])
    assert not stale.exists() and live.exists() and other.exists()
    assert (tmp_path / "out.csv").read_text() == "x\n1\n"


def test_kill_9_mid_write_leaves_a_recognisable_temporary_that_the_next_write_removes(tmp_path):
    code = ("import os, signal; from ptui.core.board.csvio import write_csv\n"
            "def rows():\n"
            "    yield ['1']\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
            f"write_csv({str(tmp_path / 'k.csv')!r}, ('x',), rows())\n")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=False)
    assert r.returncode == -9
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".k.csv.ptui-tmp-")]
    assert len(left) == 1
    write_csv(tmp_path / "k.csv", ("x",), [["2"]])
    assert [p.name for p in tmp_path.iterdir()] == ["k.csv"]


# -- B2: profile --out ---------------------------------------------------------------------------
def test_profile_refuses_the_users_file_and_never_renames_it(tmp_path, cli):
    """A file at --out that ptui did not write was renamed to F.~1~ (and another CSV written in its
    place): ptui never renames what it did not write.  It is refused before any work (exit 2),
    and kept as it was; ptui's own profiles are replaced (this session's) or kept aside (another
    session's, a file ptui wrote)."""
    out = tmp_path / "results.csv"
    out.write_text("my,own\ndata,1\n")
    rc, _, err = cli(*PROFILE, "--session", "a", "--out", out)
    assert rc == 2 and "is not a profile ptui wrote" in err and err.count("\n") == 1
    assert out.read_text() == "my,own\ndata,1\n" and not list(tmp_path.glob("results.csv.~*"))
    assert Store().list_sessions() == []                      # refused before any work
    # a CSV of the six figures ptui reads, written by hand, is the user's too
    out.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n12,2201.6,1300.5,3199,60,50\n")
    rc, _, err = cli(*PROFILE, "--session", "a", "--out", out)
    assert rc == 2 and out.read_text().startswith("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n12")
    out.unlink()
    rc, _, err = cli(*PROFILE, "--session", "a", "--out", out)
    assert rc == 0, err
    assert read_profile(out, ORIN, min_modes=3)
    # the same session written again (resume) replaces its own profile, keeps no copy
    rc, _, err = cli("profile", "--session", "a", "--resume", "--out", out)
    assert rc == 0, err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("results")) == ["results.csv"]
    # another session's profile (ptui's own file) is kept aside, never overwritten
    before = out.read_text()
    rc, _, err = cli(*PROFILE, "--session", "b", "--out", out)
    assert rc == 0, err
    assert (tmp_path / "results.csv.~1~").read_text() == before


def test_ctrl_c_before_the_first_mode_writes_nothing(tmp_path, cli, monkeypatch):
    import ptui.core.profiling.profiler as P
    out = tmp_path / "results.csv"
    out.write_text("precious\n")

    def interrupted(self, *a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(P.Profiler, "measure", interrupted)
    rc, _, err = cli(*PROFILE, "--session", "c", "--out", out)
    assert rc == 2 and "is not a profile ptui wrote" in err      # refused before any work
    assert out.read_text() == "precious\n" and not list(tmp_path.glob("results.csv.~*"))
    out = tmp_path / "mine.csv"
    rc, _, err = cli(*PROFILE, "--session", "c", "--out", out)
    assert rc == 130 and not out.exists()
    assert "not written" in err
    fresh = tmp_path / "fresh.csv"
    rc, _, err = cli(*PROFILE, "--session", "d", "--out", fresh)
    assert rc == 130 and not fresh.exists()                 # no header-only file


def test_profile_out_checked_before_the_device_is_touched(tmp_path, cli):
    rc, _, err = cli(*PROFILE, "--out", tmp_path)
    assert rc == 2 and "is a directory" in err and err.count("\n") == 1
    rc, _, err = cli(*PROFILE, "--out", tmp_path / "no" / "such" / "dir" / "p.csv")
    assert rc == 2 and "does not exist" in err
    assert Store().list_sessions() == []


# -- B9: auto session names, the workload travels with the profile --------------------------------
def test_back_to_back_profiles_get_distinct_names(tmp_path, cli, monkeypatch):
    import time
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20260101-120000")
    for k in range(3):
        rc, _, err = cli(*PROFILE, "--out", tmp_path / f"p{k}.csv")
        assert rc == 0, err
    names = sorted(s.name for s in Store().list_sessions())
    assert names == ["orin-agx-mobilenetv3-bs16-20260101-120000",
                     "orin-agx-mobilenetv3-bs16-20260101-120000-2",
                     "orin-agx-mobilenetv3-bs16-20260101-120000-3"]


def test_fit_takes_the_workload_from_the_profile_so_epochs_count(tmp_path, cli, monkeypatch):
    from ptui.core.prediction.predictor import Model, load_bundled
    from ptui.core.usecases import fit  # the fit use case, where fit_model is looked up
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "mobilenetv3", "--count", "12",
                     "--batch-size", "32", "--out", tmp_path / "p.csv")
    assert rc == 0, err
    seen = {}

    def fit_model(ref, dev, modes, t, p, *, workload, **kw):    # fast: the bundled NN as the fit
        seen["workload"] = workload
        m = {"cv_mape": 1.0}
        return Model(ref.device, ref.time, ref.power,
                     dict(ref.meta, workload=workload, metrics={"time": m, "power": m}))
    monkeypatch.setattr(fit, "fit_model", fit_model)
    assert load_bundled()
    rc, _, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "p.csv",
                     "--out", tmp_path / "m")
    assert rc == 0, err
    assert seen["workload"] == "mobilenetv3"
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--epochs", "10")
    assert rc == 0, err
    assert "10 epochs:" in out and "Wh" in out
    import json
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert meta["batch_size"] == 32 and meta["batches_per_epoch"] == 722      # 23,080 / 32


# -- B4: the session store -----------------------------------------------------------------------
class _InterruptAfterCommit:
    """A connection whose COMMIT succeeds and then Ctrl-C arrives (the window that crashed)."""

    def __init__(self, db):
        self._db = db

    def execute(self, sql, *a):
        r = self._db.execute(sql, *a)
        if sql == "COMMIT":
            raise KeyboardInterrupt
        return r

    def __getattr__(self, name):
        return getattr(self._db, name)


def test_ctrl_c_right_after_commit_is_a_plain_interrupt(tmp_path):
    s = Store()
    s.create_session("x", device="orin-agx", workload="resnet18", batch_size=16, seed=0,
                     backend="sim", plan=[M], params={}, original_mode=M)
    s.db = _InterruptAfterCommit(s.db)
    with pytest.raises(KeyboardInterrupt):
        s.save_result("x", 0, ROW, 1.0)
    assert s.done_indices("x") == {0}                       # the committed mode is kept


def _fill(store, n=30):
    for k in range(n):
        store.create_session(f"s{k}", device="orin-agx", workload="resnet18", batch_size=16, seed=0,
                             backend="sim", plan=[M] * 200, params={}, original_mode=M)
        for i in range(20):
            store.save_result(f"s{k}", i, ROW, 1.0)
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def test_damaged_store_is_set_aside_and_work_goes_on(tmp_path, cli):
    s = Store()
    _fill(s)
    with open(s.path, "r+b") as f:                          # damage a few pages in the middle
        f.seek(4096 * 3)
        f.write(b"\x5a" * 8192)
    damaged = s.path.read_bytes()
    import ptui.core.profiling.store as S
    S._checked.clear()                                       # as a new ptui process would
    rc, _, err = cli("sessions")
    assert rc == 0, err
    assert "damaged" in err and "moved" in err
    aside = [p for p in s.path.parent.iterdir() if ".damaged-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].read_bytes() == damaged
    rc, _, err = cli(*PROFILE, "--out", tmp_path / "p.csv")
    assert rc == 0, err
    s.path.write_bytes(b"this is not a database at all" * 100)
    rc, _, err = cli(*PROFILE, "--out", tmp_path / "q.csv")
    assert rc == 0 and "damaged" in err, err


def _hold(key_path):
    """A separate process holding an flock on key_path until killed."""
    return holding_lock(key_path)


def test_killed_sessions_show_as_interrupted_and_live_ones_as_running(tmp_path, cli):
    from ptui.core.board.locks import lock_path, session_key
    s = Store()
    for name in ("killed", "live"):
        s.create_session(name, device="orin-agx", workload="resnet18", batch_size=16, seed=0,
                         backend="sim", plan=[M], params={}, original_mode=M)
    p = _hold(lock_path(session_key("live")))
    try:
        assert s.get_session("killed").status == "interrupted"
        assert s.get_session("live").status == "running"
        rc, out, _ = cli("sessions")
        assert rc == 0
        lines = {ln.split()[0]: ln for ln in out.splitlines()[1:]}
        assert "interrupted" in lines["killed"] and "running" in lines["live"]
    finally:
        p.kill()
        p.wait()
    assert s.get_session("live").status == "interrupted"      # its process is gone


@pytest.mark.parametrize("stop", ["ctrl-c", "SIGTERM"])
def test_a_profile_stopped_by_ctrl_c_or_a_signal_is_listed_as_interrupted(tmp_path, cli, monkeypatch, stop):
    """Ctrl-C (and SIGTERM) left the session 'aborted' in `ptui sessions`, while the CLI said
    'interrupted ... resume with:' and --resume resumed it; a kill -9 reads 'interrupted'.  Now it
    is listed as interrupted (its JSON too), and --resume still finishes it."""
    import signal

    import ptui.core.profiling.profiler as P
    from ptui.core.board.signals import Terminated
    real, calls = P.Profiler.measure, []

    def measure(self, events, mode, record=True):
        if record:
            calls.append(1)
            if len(calls) == 3:
                raise KeyboardInterrupt if stop == "ctrl-c" else Terminated(signal.SIGTERM)
        return real(self, events, mode, record=record)
    monkeypatch.setattr(P.Profiler, "measure", measure)
    rc, _, err = cli(*PROFILE, "--session", "cut", "--out", tmp_path / "p.csv")
    assert rc == (130 if stop == "ctrl-c" else 143), err
    assert "resume with: ptui profile --session cut --resume" in err
    monkeypatch.setattr(P.Profiler, "measure", real)
    rc, out, _ = cli("sessions")
    assert rc == 0 and out.splitlines()[1].split()[:1] == ["cut"] and " interrupted " in out
    rc, out, _ = cli("sessions", "--json")
    import json
    assert [x["status"] for x in json.loads(out)["sessions"]] == ["interrupted"]
    rc, _, err = cli(*PROFILE, "--session", "cut", "--resume", "--out", tmp_path / "p.csv")
    assert rc == 0, err
    assert Store().get_session("cut").status == "done"


# -- B3: one process per session ----------------------------------------------------------------
def test_second_run_of_a_session_is_refused(tmp_path, cli):
    from ptui.core.board.locks import lock_path, session_key
    rc, _, err = cli(*PROFILE, "--session", "s", "--out", tmp_path / "s.csv")
    assert rc == 0, err
    p = _hold(lock_path(session_key("s")))
    try:
        rc, _, err = cli("profile", "--session", "s", "--resume", "--out", tmp_path / "s.csv")
        assert rc == 1 and f"pid {p.pid}" in err and "running profiling session 's'" in err
        assert err.count("ptui: error") == 1 and "Traceback" not in err
    finally:
        p.kill()
        p.wait()
    rc, _, err = cli("profile", "--session", "s", "--resume", "--out", tmp_path / "s.csv")
    assert rc == 0, err


def test_predict_and_modes_never_overwrite_another_file(tmp_path, cli):
    mine = tmp_path / "modes.csv"
    mine.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz\n4,729.6,318.75,665.6\n")
    notes = tmp_path / "notes.csv"
    notes.write_text("a,b\n1,2\n")
    from ptui.core.prediction.predictor import bundled_reference
    for args in (["predict", "--model", bundled_reference(), "--modes", mine, "--out", mine],
                 ["modes", "--device", "orin-agx", "--grid", "presets", "--out", notes]):
        rc, _, err = cli(*args)
        assert rc == 2 and "is not a ptui CSV of this kind" in err, err
    assert mine.read_text() == "cores,cpu_mhz,gpu_mhz,mem_mhz\n4,729.6,318.75,665.6\n"
    assert notes.read_text() == "a,b\n1,2\n"
    out = tmp_path / "pred.csv"
    for _ in range(2):                       # its own output is replaced
        rc, _, err = cli("predict", "--model", bundled_reference(), "--modes", mine, "--out", out)
        assert rc == 0, err
    assert len(out.read_text().splitlines()) == 2
