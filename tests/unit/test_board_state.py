"""What ptui keeps to put a board back: checked before use, board-wide, honest about what it did.

Emulated Orin AGX sysfs trees (no training needed: apply and restore only) and simulated boards.
"""
from __future__ import annotations

import json
import os
import stat

import pytest

from ptui.core import paths, undo
from ptui.core.backends.sysfs import SysfsBackend
from ptui.core.devices import get_device
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
}


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
    assert rc == 0 and f"reads back {START.key}" in out
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
    from ptui.core import locks
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
    assert rc == 0 and f"reads back {START.key}" in out, err
    assert fakesys.read_mode(tree) == START


def test_a_mode_changed_under_a_measurement_is_measured_again(tmp_path):
    """Another program sets a clock while a mode is measured: that measurement is thrown away and the
    mode measured again; if it keeps happening, profiling stops, no row saved for it, the board
    restored."""
    from ptui.core.backends.sim import SimJetson
    from ptui.core.profiler import ModeDisturbed, Profiler, choose_modes, open_session
    from ptui.core.store import Store
    from ptui.core.workloads import get_workload

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
