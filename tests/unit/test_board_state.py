"""What ptui keeps to put a board back: checked before use, board-wide, honest about what it did.

Emulated Orin AGX sysfs trees (no training needed: apply and restore only) and simulated boards.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ptui.core import paths
from ptui.core.board import undo
from ptui.core.board.backends.sysfs import SysfsBackend
from ptui.core.catalogue.devices import get_device
from tests.support import fakesys

ORIN = get_device("orin-agx")
START = ORIN.preset("MODE_30W").mode
TARGET = ORIN.mode(4, 729.6, 318.75, 665.6)
MODE = ["--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6"]


@pytest.fixture
def tree(tmp_path):
    return fakesys.build(tmp_path / "root")


def _sysfs(tree):
    return ["--backend", "sysfs", "--sysfs-root", tree]


def _apply(cli, tree):
    rc, out, err = cli("apply", *_sysfs(tree), *MODE, "--yes")
    assert rc == 0, err
    assert fakesys.read_mode(tree) == TARGET
    (rec,) = list((paths.board_state_dir().path).glob("last-apply-*.json"))
    return rec


def _edit(path, fn):
    body = json.loads(path.read_text())
    fn(body)
    path.write_text(json.dumps(body))


DAMAGE = {
    "not json": lambda p: p.write_text('{"format": 1, "kind": "last-'),
    "cpu frequency off the table": lambda p: _edit(
        p, lambda b: b["state"]["cpufreq"].update({"0": ["729600", "72960000"]})),
    "a core the board lacks": lambda p: _edit(p, lambda b: b["state"]["online"].update({"40": "1"})),
    "online flag": lambda p: _edit(p, lambda b: b["state"]["online"].update({"3": "yes"})),
    "gpu min above max": lambda p: _edit(p, lambda b: b["state"].update(gpu=["1300500000", "114750000"])),
    "another device": lambda p: _edit(p, lambda b: b.update(device="orin-nano")),
    "emc rate": lambda p: _edit(p, lambda b: b["state"].update(emc=["0", "-5"])),
    "another kind of record": lambda p: _edit(p, lambda b: b.update(kind="profile")),
    "another format": lambda p: _edit(p, lambda b: b.update(format=99)),
}


SAID = {"not json": "is not readable JSON", "cpu frequency off the table": "cpu0's CPU maximum 72960 MHz",
        "a core the board lacks": "names cpu40", "online flag": "cpu3 online is 'yes'",
        "gpu min above max": "the GPU minimum 1300500000 is above its maximum",
        "another device": "it describes 'orin-nano'", "emc rate": "the EMC rate '-5' is not a whole number",
        "another kind of record": "it is not a ptui last-apply record", "another format": "its format 99 is not"}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_record_is_refused_and_left_alone(tree, cli, how):
    rec = _apply(cli, tree)
    DAMAGE[how](rec)
    before = rec.read_bytes()
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 1, (out, err)
    lines = err.strip().splitlines()
    assert lines[-1].startswith(f"ptui: error: the saved board state {rec}")
    assert "nothing was written to the board" in lines[-1] and "Traceback" not in err
    assert SAID[how] in lines[-1]
    assert fakesys.read_mode(tree) == TARGET                    # untouched
    assert rec.read_bytes() == before                            # kept as it was


def test_a_record_that_is_not_a_regular_file_is_not_read(tree, cli):
    rec = _apply(cli, tree)
    rec.unlink()
    os.mkfifo(rec)                                               # reading it would block forever
    rc, _, err = cli("restore", *_sysfs(tree))
    assert rc == 1 and "is not a regular file" in err
    assert stat.S_ISFIFO(rec.lstat().st_mode)


def test_restore_reports_what_the_board_reads_back(tree, cli, monkeypatch):
    """A restore whose GPU write does not take is not called a restore; the record stays for another
    try."""
    rec = _apply(cli, tree)
    real = SysfsBackend._write

    def gpu_write_ignored(self, path, value):
        if path.parent.name == "17000000.gpu" and path.name == "max_freq":
            return
        real(self, path, value)
    monkeypatch.setattr(SysfsBackend, "_write", gpu_write_ignored)
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 1 and "restored" not in out
    assert "did not read back" in err and "17000000.gpu/max_freq reads '318750000'" in err
    assert rec.exists()
    monkeypatch.setattr(SysfsBackend, "_write", real)
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 0 and f"reads back {START.describe()}" in out
    assert fakesys.read_mode(tree) == START and not rec.exists()


def test_undo_state_is_board_wide_not_per_user(tree, cli, monkeypatch, tmp_path):
    """An apply made with one data directory (the user's) is undone from another (sudo's)."""
    _apply(cli, tree)
    monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / "root-data"))
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 0 and "restored the state before the last ptui apply" in out, err
    assert fakesys.read_mode(tree) == START


def test_board_wide_places_and_their_fallback(tree, cli, monkeypatch, tmp_path):
    """The lock goes to the system's lock directory, writable by every account; without one ptui uses
    the data directory and says that other accounts will not see it."""
    from ptui.core.board import locks
    monkeypatch.delenv("PTUI_LOCK_DIR")
    monkeypatch.delenv("PTUI_STATE_DIR")
    runlock, varlib = tmp_path / "run-lock", tmp_path / "var-lib-ptui"
    runlock.mkdir()
    varlib.mkdir()
    monkeypatch.setattr(paths, "SYSTEM_LOCK_DIRS", (str(runlock),))
    monkeypatch.setattr(paths, "SYSTEM_STATE_DIR", str(varlib))
    be = SysfsBackend(ORIN, root=tree)
    with locks.board_lock(be):
        (lock,) = runlock.glob("ptui-orin-agx*.lock")
        assert stat.S_IMODE(lock.stat().st_mode) == 0o666
    rc, out, err = cli("apply", *_sysfs(tree), *MODE, "--yes")
    assert rc == 0 and "not writable" not in err
    assert list(varlib.glob("last-apply-ptui-orin-agx*.json"))
    monkeypatch.setattr(paths, "SYSTEM_LOCK_DIRS", (str(tmp_path / "none"),))
    monkeypatch.setattr(paths, "SYSTEM_STATE_DIR", str(tmp_path / "none" / "ptui"))
    assert paths.board_lock_dir().path == paths.data_dir() / "locks"
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 2                                 # nothing in the fallback place
    assert f"{tmp_path / 'none'} is not writable" in err and "will not see it" in err


def test_nothing_to_restore_exits_the_same_on_every_backend(tree, cli):
    rc, _, err = cli("restore", *_sysfs(tree))
    assert rc == 2 and "nothing to restore" in err
    rc, out, err = cli("restore", "--backend", "sim", "--device", "orin-agx")
    assert rc == 2 and "nothing to restore" in err and "starts afresh" in err, (out, err)


def test_an_apply_after_a_killed_profile_undoes_to_the_state_before_that_profile(tree, cli):
    """A kill -9 left the board in a profiled mode nobody chose; the user applies a mode: restore
    then returns to the mode before the profile, not to the profile's leftover."""
    be = SysfsBackend(ORIN, root=tree)
    undo.save(be, undo.PROFILE, be.snapshot(), session="killed")
    left = ORIN.mode(8, 1497.6, 828.75, 3199)
    be.apply_mode(left)                               # where the killed profile left the board
    rc, out, err = cli("apply", *_sysfs(tree), *MODE, "--yes")
    assert rc == 0, err
    assert undo.load(be, undo.PROFILE) is None
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 0 and f"reads back {START.describe()}" in out, err
    assert fakesys.read_mode(tree) == START


@pytest.mark.parametrize("how", [MODE, ["--preset", "MODE_15W"]], ids=["mode", "preset"])
@pytest.mark.parametrize("json_", [False, True])
def test_an_apply_after_a_killed_profile_says_where_restore_returns(tree, cli, tmp_path, monkeypatch,
                                                                    how, json_):
    """The README promises that an apply finding a killed profile's record says it treats the mode
    before that profile as the way back.  It said only 'undo with: ptui restore' after a plan 'from'
    the profile's leftover, and restore then went to another mode (a user's trial)."""
    nvp = fakesys.install_nvpmodel(tmp_path / "bin", tree)
    monkeypatch.setenv("PATH", f"{nvp.parent}:/usr/bin:/bin")
    be = SysfsBackend(ORIN, root=tree)
    undo.save(be, undo.PROFILE, be.snapshot(), session="killed")
    left = ORIN.mode(8, 1497.6, 828.75, 3199)
    be.apply_mode(left)                               # where the killed profile left the board
    rc, out, err = cli("apply", *_sysfs(tree), *how, "--yes", *(["--json"] if json_ else []))
    assert rc == 0, err
    said = json.loads(out)["message"] if json_ else out
    assert ("an interrupted profile (session killed, " in said and f"left the board in {left.key}"
            in said and f"ptui restore returns to {START.key}, the mode before that profile" in said), said


def test_a_failed_apply_keeps_the_way_back_as_it_was_saved(tree, monkeypatch):
    """An apply the board refused (an immutable GPU clock file) put the previous last-apply record
    back under its own pid and time: ptui status then said the way back was saved by that failed
    apply, now, not by the apply that made it."""
    from ptui.core.usecases.board import apply

    be = SysfsBackend(ORIN, root=tree)
    assert apply(be, TARGET).ok
    first = undo.load(be, undo.APPLY)
    fakesys.immutable_gpu_max(be, monkeypatch)
    undo.save(be, undo.APPLY, first.state, pid=first.pid, created=first.created - 60)
    res = apply(be, ORIN.mode(12, 1728, 1300.5, 3199))
    assert not res.ok and fakesys.read_mode(tree) == TARGET, res.message
    kept = undo.load(be, undo.APPLY)
    assert (kept.mode, kept.pid, kept.created) == (START.key, first.pid, first.created - 60)


def test_a_failed_apply_after_a_killed_profile_keeps_both_ways_back(tree, monkeypatch):
    """apply X, kill -9 a profile mid-run, then an apply the board refuses (an immutable GPU clock
    file): the killed profile's record became the last-apply record though the apply failed, so
    the older last-apply record was lost and a second `ptui restore` found nothing."""
    from ptui.core.usecases.board import apply, restore

    be = SysfsBackend(ORIN, root=tree)
    fifteen = ORIN.preset("MODE_15W").mode
    assert apply(be, fifteen).ok
    undo.save(be, undo.PROFILE, be.snapshot(), "killed", pid=1 << 22)      # then kill -9
    be.apply_mode(TARGET)                                                   # where it left the board
    real = be._write
    fakesys.immutable_gpu_max(be, monkeypatch)
    res = apply(be, ORIN.mode(12, 1728, 1300.5, 3199))
    assert not res.ok and fakesys.read_mode(tree) == TARGET, res.message
    assert undo.load(be, undo.PROFILE).session == "killed"
    assert undo.load(be, undo.APPLY).mode == START.key
    monkeypatch.setattr(be, "_write", real)
    restore(be)
    assert fakesys.read_mode(tree) == fifteen
    restore(be)
    assert fakesys.read_mode(tree) == START


def test_a_failed_apply_says_why_it_failed_when_its_way_back_cannot_be_put_back(tree, monkeypatch):
    """An apply the board refused, whose last-apply record could then not be put back as it was
    (the state directory filled up meanwhile), said only 'cannot save the board's undo state ...
    nothing was written': the bookkeeping's error replaced the apply's own (a review).  The apply's
    reason is said, the board is where it was, and the way back still returns there."""
    from ptui.core.usecases import board as uc

    be = SysfsBackend(ORIN, root=tree)
    assert uc.apply(be, ORIN.preset("MODE_15W").mode).ok
    fakesys.immutable_gpu_max(be, monkeypatch)

    def full(*a, **k):
        raise undo.UnsavedState("cannot save the board's undo state in X (No space left on device)")
    monkeypatch.setattr(uc, "_keep_last_apply", full)
    res = uc.apply(be, ORIN.mode(12, 1728, 1300.5, 3199))
    assert not res.ok and fakesys.read_mode(tree) == ORIN.preset("MODE_15W").mode, res.message
    assert "cannot save the board's undo state" not in res.message.split(";")[0], res.message
    assert "the way back" in res.message and "No space left" in res.message, res.message


def test_an_undo_state_that_cannot_be_saved_is_said_and_nothing_is_written(tree, cli, monkeypatch):
    """The board-wide state directory cannot be written (immutable, a read-only file system): apply
    said only '[Errno 1] Operation not permitted: .../.last-apply-....json.123.tmp' (an emulated
    board with chattr +i on PTUI_STATE_DIR)."""
    def refused(path, data):
        raise PermissionError(1, "Operation not permitted", str(path))
    monkeypatch.setattr(undo, "_write_whole", refused)
    rc, out, err = cli("apply", *_sysfs(tree), *MODE, "--yes")
    assert rc == 1 and "applied" not in out, out
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"ptui: error: not applied: cannot save the board's undo state in "
                           f"{paths.board_state_dir().path} (Operation not permitted)"), last
    assert "Errno" not in err and fakesys.read_mode(tree) == START


def test_a_mode_changed_under_a_measurement_is_measured_again(tmp_path):
    """Another program sets a clock while a mode is measured: that measurement is thrown away and the
    mode measured again; if it keeps happening, profiling stops, no row saved for it, the board
    restored."""
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.workloads import get_workload
    from ptui.core.profiling.profiler import ModeDisturbed, Profiler, choose_modes, open_session
    from ptui.core.profiling.store import Store

    class Meddled(SimJetson):
        """Another tool writes the GPU clock during the next `times` measurements."""
        times = 0

        def events(self, interval=None):
            n = 0
            for ev in super().events(interval):
                n += 1
                if n % 60 == 30 and self.times > 0:
                    self.times -= 1
                    m = self.current_mode()
                    g = ORIN.gpu_mhz[0] if m.gpu_mhz != ORIN.gpu_mhz[0] else ORIN.gpu_mhz[1]
                    SimJetson.apply_mode(self, ORIN.mode(m.cores, m.cpu_mhz, g, m.mem_mhz))
                yield ev

    wl = get_workload("mobilenetv3")
    plan = choose_modes(ORIN, count=2, seed=3)
    notes = []
    for times, ok in ((1, True), (99, False)):
        be = Meddled(ORIN, seed=0)
        be.times = times
        store = Store(tmp_path / f"s{times}.sqlite")
        info = open_session(store, "m", resume=False, device=ORIN, workload=wl, seed=0,
                            backend_kind="sim", plan_fn=lambda: plan, original_mode=be.current_mode(),
                            params={})
        prof = Profiler(be, wl, store, "m")
        prof.notify = notes.append
        if ok:
            rows = prof.run(info)
            assert [r.mode for r in rows] == list(info.plan)
            assert any("changed from" in n and "measuring" in n for n in notes)
        else:
            with pytest.raises(ModeDisturbed, match="3 times in a row: no row was saved"):
                prof.run(info)
            assert store.done_indices("m") == set()
        assert be.current_mode() == START
        store.close()


def test_restore_reads_every_write_back(tree):
    """A restore write that does not take (here the GPU minimum) is an error, not a restore: the
    mode alone (read from the maxima) would not show it."""
    be = SysfsBackend(ORIN, root=tree)
    snap = be.snapshot()
    be.apply_mode(TARGET)
    real = be._write

    def gpu_min_ignored(path, value):
        if path.name == "min_freq" and "gpu" in str(path):
            return
        real(path, value)
    be._write = gpu_min_ignored
    with pytest.raises(Exception, match="restore did not read back: .*min_freq"):
        be.restore(snap)


def test_a_record_missing_its_pid_or_time_is_named(tree, cli):
    rec = _apply(cli, tree)
    _edit(rec, lambda b: b.pop("pid"))
    rc, _, err = cli("restore", *_sysfs(tree))
    assert rc == 1 and "its pid, time or session is missing" in err


def test_a_record_that_cannot_be_read_says_why(tree, cli, monkeypatch):
    from pathlib import Path
    rec = _apply(cli, tree)
    real = Path.lstat

    def refused(self, *a, **k):
        if self == rec:
            raise PermissionError(13, "Permission denied")
        return real(self, *a, **k)
    monkeypatch.setattr(Path, "lstat", refused)
    rc, _, err = cli("restore", *_sysfs(tree))
    assert rc == 1 and f"{rec} cannot be read (Permission denied)" in err
    assert fakesys.read_mode(tree) == TARGET


def test_a_simulated_board_keeps_no_record_and_touches_none(tmp_path):
    """A simulated board lives in one process: nothing is written, and a file in the state
    directory that merely looks like a record is neither read nor removed."""
    from ptui.core.board.backends.sim import SimJetson
    sim = SimJetson(ORIN)
    assert undo.save(sim, undo.APPLY, sim.snapshot()) is None
    d = paths.board_state_dir().path
    assert not d.exists() or not list(d.iterdir())
    d.mkdir(parents=True, exist_ok=True)
    for kind in (undo.APPLY, undo.PROFILE):
        (d / f"{kind}-None.json").write_text("not ptui's")
        assert undo.load(sim, kind) is None
        undo.clear(sim, kind)
        assert (d / f"{kind}-None.json").read_text() == "not ptui's"


def test_a_record_that_cannot_be_renamed_into_place_leaves_no_temporary_file(tree, monkeypatch):
    be = SysfsBackend(ORIN, root=tree)

    def full(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(undo.os, "replace", full)
    with pytest.raises(undo.UnsavedState, match="undo state in .* \\(No space left on device\\): "
                                                "nothing was written to the board"):
        undo.save(be, undo.APPLY, be.snapshot())
    d = paths.board_state_dir().path
    assert list(d.iterdir()) == []


def test_clearing_a_record_leaves_one_written_since(tree):
    """A process clears the record it wrote; one another process wrote over it since stays."""
    be = SysfsBackend(ORIN, root=tree)
    first = undo.save(be, undo.APPLY, be.snapshot())
    second = undo.save(be, undo.APPLY, be.snapshot())
    undo.clear(be, undo.APPLY, first)
    assert undo.load(be, undo.APPLY).created == second.created
    undo.clear(be, undo.APPLY, second)
    assert undo.load(be, undo.APPLY) is None


def test_saving_a_record_leaves_no_descriptor_open(tree):
    be = SysfsBackend(ORIN, root=tree)
    be.snapshot()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        undo.save(be, undo.APPLY, be.snapshot())
    assert len(os.listdir("/proc/self/fd")) == before


def _recording_sim(tmp_path):
    """A simulated Orin AGX that keeps undo records as a real board does, the lstm workload and a
    session store: (backend, workload, store)."""
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.workloads import get_workload
    from ptui.core.profiling.store import Store

    class Board(SimJetson):                 # a real board as far as records go
        simulated = False
        kind = "sysfs"
        root = str(tmp_path / "board")

    return Board(ORIN), get_workload("lstm"), Store(tmp_path / "s.db")


def test_a_profile_records_its_start_state_and_session_before_touching_the_board(tmp_path):
    """What `ptui restore` needs after a kill -9: the board-wide record names the session and the
    start mode, and the session store keeps the start state for --resume."""
    from ptui.core.profiling.profiler import Profiler, choose_modes, open_session

    be, wl, store = _recording_sim(tmp_path)
    info = open_session(store, "rec", resume=False, device=ORIN, workload=wl, seed=0,
                        backend_kind="sysfs", plan_fn=lambda: choose_modes(ORIN, count=2, seed=0),
                        original_mode=be.current_mode(), params={})
    prof = Profiler(be, wl, store, "rec")
    prof.start_state(info)
    rec = undo.load(be, undo.PROFILE)
    assert rec.session == "rec" and rec.mode == START.key and rec.pid == os.getpid()
    assert store.get_session("rec").original_state == be.snapshot_json(be.snapshot())


def test_a_resume_ends_in_the_state_before_a_profile_killed_since(tmp_path):
    """Session b was cut in TARGET's state (its start); since then the board was put in START, and
    another profile, killed (kill -9), left its record for START.  The resume of b ended in TARGET,
    its first run's start, and its record replaced the killed one's: START, the state before the
    killed profile, was lost (the notice even named TARGET as the mode before it)."""
    from ptui.core.profiling.profiler import Profiler, choose_modes, open_session

    be, wl, store = _recording_sim(tmp_path)
    open_session(store, "b", resume=False, device=ORIN, workload=wl, seed=0,
                    backend_kind="sysfs", plan_fn=lambda: choose_modes(ORIN, count=2, seed=0),
                    original_mode=TARGET, params={})
    be.apply_mode(TARGET)
    store.set_original_state("b", be.snapshot_json(be.snapshot()), TARGET)
    be.apply_mode(START)
    undo.save(be, undo.PROFILE, be.snapshot(), "killed", pid=1 << 22)
    be.apply_mode(ORIN.mode(2, 729.6, 318.75, 665.6))        # where the killed profile left it
    said = []
    prof = Profiler(be, wl, store, "b")
    prof.notify = said.append
    snap = prof.start_state(store.get_session("b"))
    assert be.snapshot_mode(snap) == START
    assert undo.load(be, undo.PROFILE).mode == START.key
    assert START.key in said[0] and "session killed" in said[0]


def test_a_resume_on_another_board_does_not_end_in_the_first_boards_state(tmp_path):
    """A session killed (kill -9) on one emulated board, then resumed with --sysfs-root naming
    another: the resume ended the second board in the first one's start mode (MODE_30W), though
    the second was in MODE_15W."""
    from ptui.core.profiling.profiler import Profiler, choose_modes, open_session

    first, wl, store = _recording_sim(tmp_path)
    second, _, _ = _recording_sim(tmp_path / "b")
    open_session(store, "x", resume=False, device=ORIN, workload=wl, seed=0, backend_kind="sysfs",
                 plan_fn=lambda: choose_modes(ORIN, count=2, seed=0), original_mode=START, params={})
    Profiler(first, wl, store, "x").start_state(store.get_session("x"))   # then killed
    first.apply_mode(TARGET)
    fifteen = ORIN.preset("MODE_15W").mode
    second.apply_mode(fifteen)
    snap = Profiler(second, wl, store, "x").start_state(store.get_session("x"))
    assert second.snapshot_mode(snap) == fifteen
    assert undo.load(first, undo.PROFILE).mode == START.key        # the first board's way back stays


def test_a_resume_on_another_board_is_refused(tmp_path, monkeypatch):
    """kill -9 a profile on emulated board A, then --resume it with --sysfs-root naming B: the
    resume ran on B, one session with two boards' rows.  Refused (exit 2), naming A, before
    anything is written; a session with no board recorded (an older ptui's) still resumes on a
    board, but not on the simulator, where it mixed measured and simulated rows."""
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.board.locks import unlock_session
    from ptui.core.profiling.profiler import Profiler, SessionError, choose_modes, open_session
    from ptui.core.usecases.profile import ProfileRequest, ProfileRun

    first, wl, store = _recording_sim(tmp_path)
    second, _, _ = _recording_sim(tmp_path / "b")
    for name in ("x", "old"):
        open_session(store, name, resume=False, device=ORIN, workload=wl, seed=0,
                     backend_kind="sysfs", plan_fn=lambda: choose_modes(ORIN, count=2, seed=0),
                     original_mode=START, params={})
        unlock_session(name)
    Profiler(first, wl, store, "x").start_state(store.get_session("x"))   # then killed
    before = store.get_session("x")

    def resume(name):
        req = ProfileRequest(workload="lstm", session=name, resume=True, out=tmp_path / "p.csv")
        return ProfileRun(req, store=store).prepare(second)

    with pytest.raises(SessionError) as e:
        resume("x")
    assert e.value.exit_code == 2
    assert str(tmp_path / "board") in str(e.value) and "resume it there" in str(e.value)
    assert store.get_session("x") == before and undo.load(second, undo.PROFILE) is None
    assert undo.load(first, undo.PROFILE).session == "x"
    req = ProfileRequest(workload="lstm", session="old", resume=True, out=tmp_path / "p.csv")
    with pytest.raises(SessionError) as e:                # nor on the simulator: a board's rows
        ProfileRun(req, store=store).prepare(SimJetson(ORIN))
    assert str(e.value).startswith("session 'old' was profiled on a board (orin-agx, sysfs backend), "
                                   "not on the simulator: resume it there"), e.value
    assert resume("old").name == "old"                    # no board recorded: resumes here
    unlock_session("old")


def test_a_resume_after_a_kill_ends_in_the_mode_applied_since(tmp_path, monkeypatch):
    """kill -9 mid-profile, then `ptui apply` of MODE_15W (which takes the killed profile's record
    as its way back), then --resume: the resume ended in the mode before the killed run, not in
    MODE_15W, chosen since.  Where the record cannot be seen (another PTUI_STATE_DIR) the resume
    still goes back to the state the cut run started from."""
    from ptui.core.profiling.profiler import Profiler, choose_modes, open_session
    from ptui.core.usecases.board import apply

    be, wl, store = _recording_sim(tmp_path)
    for name in ("x", "y"):
        open_session(store, name, resume=False, device=ORIN, workload=wl, seed=0,
                     backend_kind="sysfs", plan_fn=lambda: choose_modes(ORIN, count=2, seed=0),
                     original_mode=START, params={})
    Profiler(be, wl, store, "x").start_state(store.get_session("x"))     # then killed
    be.apply_mode(TARGET)
    fifteen = ORIN.preset("MODE_15W").mode
    assert apply(be, fifteen).ok and undo.load(be, undo.PROFILE) is None
    snap = Profiler(be, wl, store, "x").start_state(store.get_session("x"))
    assert be.snapshot_mode(snap) == fifteen
    Profiler(be, wl, store, "y").start_state(store.get_session("y"))     # killed too
    undo.clear(be, undo.PROFILE)
    be.apply_mode(TARGET)
    monkeypatch.setenv("PTUI_STATE_DIR", str(tmp_path / "elsewhere"))
    snap = Profiler(be, wl, store, "y").start_state(store.get_session("y"))
    assert be.snapshot_mode(snap) == fifteen                              # y's own start


def test_a_resume_at_the_next_batch_size_ends_in_the_mode_applied_since(tmp_path):
    """Over several batch sizes: kill -9 while the first size's run puts the board back (its rows
    all saved), then `ptui apply` of MODE_15W (which takes the killed profile's record as its way
    back), then --resume, which goes on at the next size: that size had no board nor state
    directory recorded (they were the first size's), so the resume ended in the mode before the
    killed run (MODE_30W), over MODE_15W chosen since."""
    from ptui.core.profiling.profiler import Profiler, choose_modes
    from ptui.core.profiling.store import BatchPart
    from ptui.core.usecases.board import apply

    be, wl, store = _recording_sim(tmp_path)
    modes = choose_modes(ORIN, count=2, seed=0)
    store.create_session("m", device=ORIN.name, workload=wl.name, batch_size=8, seed=0,
                         backend="sysfs", plan=modes * 2, plan_sizes=[8, 8, 16, 16],
                         params={"per_size": {}}, original_mode=START)

    def part(b):
        p = BatchPart(store, "m", b)
        p.create_session("m", device=ORIN.name, workload=wl.name, batch_size=b, seed=0,
                         backend="sysfs", plan=modes, params={}, original_mode=START)
        return p

    eight = part(8)
    Profiler(be, wl, eight, "m").start_state(eight.get_session("m"))    # then killed
    be.apply_mode(TARGET)
    fifteen = ORIN.preset("MODE_15W").mode
    assert apply(be, fifteen).ok and undo.load(be, undo.PROFILE) is None
    sixteen = part(16)                                                   # the resume's next size
    snap = Profiler(be, wl, sixteen, "m").start_state(sixteen.get_session("m"))
    assert be.snapshot_mode(snap) == fifteen


def test_clearing_without_a_record_removes_this_boards_file_only(tree, tmp_path):
    """restore (no record in hand) clears this board's file; another board's stays."""
    be = SysfsBackend(ORIN, root=tree)
    other = SysfsBackend(ORIN, root=fakesys.build(tmp_path / "other"))
    mine = undo.save(be, undo.APPLY, be.snapshot())
    theirs = undo.save(other, undo.APPLY, other.snapshot())
    undo.clear(be, undo.APPLY)
    assert not mine.path.exists() and theirs.path.exists()
    assert undo.load(be, undo.APPLY) is None and undo.load(other, undo.APPLY).created == theirs.created


def test_a_record_overwritten_by_something_else_is_not_ours_to_clear(tree):
    """A record file replaced since by text that is not ptui's (or JSON that is no object) is left."""
    be = SysfsBackend(ORIN, root=tree)
    rec = undo.save(be, undo.APPLY, be.snapshot())
    for other in ("[1, 2]", "not json", '"text"'):
        rec.path.write_text(other)
        assert undo._same(rec.path, rec) is False
        undo.clear(be, undo.APPLY, rec)
        assert rec.path.read_text() == other


def test_a_records_time_is_when_it_was_written_not_now():
    """`ptui status` says when the state it would restore was saved."""
    import time as _time
    from pathlib import Path

    from ptui.core.board.undo import PROFILE, Record
    t = _time.mktime((2026, 1, 2, 3, 4, 5, 0, 0, -1))
    r = Record(PROFILE, Path("/x"), None, "4c/1/2/3", "s", 1, t)
    assert r.when() == "2026-01-02 03:04:05"


@pytest.fixture
def short_tree():
    """A tree whose path is short enough that an older ptui's key for it held it whole (a
    pytest tmp_path is not)."""
    import shutil
    import tempfile
    where = tempfile.mkdtemp(prefix="pt", dir="/tmp")
    yield fakesys.build(Path(where) / "root")
    shutil.rmtree(where)


def test_an_older_ptuis_undo_record_on_an_emulated_tree_is_still_found(short_tree, cli):
    """An emulated tree's board key gained a digest of its path (two trees whose paths were alike
    were one board); the last-apply record an older ptui wrote under the key before (its path
    alone, named so) was then not found: ptui status said 'restore: nothing to undo' and restore
    refused, the way back lost.  It is found, restored and removed now; a new apply supersedes it."""
    from ptui.core.board.locks import _safe
    tree = short_tree
    old_key = f"ptui-orin-agx-{_safe(os.path.realpath(tree)).strip('_')}"
    assert len(old_key) < 70
    rec = _apply(cli, tree)
    old = rec.with_name(f"last-apply-{old_key}.json")      # as an older ptui wrote it
    _edit(rec, lambda b: b.update(board=old_key))
    rec.rename(old)
    rc, out, err = cli("status", *_sysfs(tree))
    assert rc == 0 and "the state before the last ptui apply, saved" in out and START.describe() in out, out
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 0 and "restored" in out and fakesys.read_mode(tree) == START, (out, err)
    assert not old.exists()
    rec = _apply(cli, tree)                                # no record left: one written anew
    _edit(rec, lambda b: b.update(board=old_key))
    rec.rename(old)
    rec = _apply(cli, tree)                                # the same mode again: the way back kept
    assert not old.exists() and json.loads(rec.read_text())["board"] != old_key
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 0 and fakesys.read_mode(tree) == START, (out, err)


def test_status_and_restore_say_the_mode_in_words(tree, cli):
    """A field technician read 'restore: would put back ..., saved ...: 8c/1728/624.75/3199' and
    'the board reads back 8c/1728/624.75/3199' beside status's 'mode: 8 cores · CPU 1.73 GHz ...'
    (a user trial): the CLI's text says modes in words (README); --json keeps the key."""
    _apply(cli, tree)
    rc, out, err = cli("status", *_sysfs(tree))
    assert rc == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("restore:")]
    assert line.endswith(START.describe()) and START.key not in line, line
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 0 and out.strip().endswith(f"reads back {START.describe()}") and START.key not in out, out
    rc, out, err = cli("restore", *_sysfs(tree))
    assert rc == 2 and f"stays in {START.describe()};" in err and START.key not in err, err
    rc, out, err = cli("restore", *_sysfs(tree), "--json")
    assert rc == 2 and out == ""
    _apply(cli, tree)
    rc, out, err = cli("restore", *_sysfs(tree), "--json")
    assert rc == 0 and json.loads(out)["key"] == START.key
