"""`ptui emulate`: the real command, started as a subprocess, is the board that ptui's sysfs backend
drives (apply, restore, presets through the tree's own nvpmodel, --persist, a profile); it stops
cleanly on SIGTERM, SIGINT and SIGHUP; it never writes into a directory it did not make."""
import signal
import subprocess
import sys
import time

import pytest

from ptui import core
from ptui.core.board import emulator
from ptui.core.board.backends import open_backend
from ptui.core.board.backends.sysfs import SysfsBackend
from ptui.core.board.detect import detect
from ptui.core.catalogue.devices import DEVICES, get_device
from tests.support.emulated import Emulated  # noqa: F401 (the emulate fixture's runner)

ORIN = get_device("orin-agx")


def settle(be, pred, timeout=30.0):
    """The first reading that satisfies pred (the emulator follows the knobs a tick later; slower on
    a busy machine), else the last one after `timeout`."""
    end = time.time() + timeout
    while time.time() < end:
        t = be.read()
        if pred(t):
            return t
        time.sleep(0.1)
    return be.read()


def status(root):
    return (root / "var/lib/nvpmodel/status").read_text().split()[0]


@pytest.mark.slow
def test_apply_restore_preset_persist_against_the_emulator_then_sigterm(tmp_path, emulate, cli, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")        # no nvpmodel on PATH: the tree's own is used
    root = tmp_path / "board"
    emu = emulate(root)
    assert "SIMULATED" in emu.line and "emulated orin-agx" in emu.line
    assert f"ptui --backend sysfs --sysfs-root {root}" in emu.line
    assert f"PATH={root}/bin:$PATH" in emu.line
    assert (root / "bin/nvpmodel").is_file()
    sysfs = ("--backend", "sysfs", "--sysfs-root", root)
    be = SysfsBackend(ORIN, root=root)
    try:
        high = settle(be, lambda t: t.power_w and t.power_w > 20).power_w   # resnet18 in MODE_30W: 23 W
        assert high > 20 and be.read().nvpmodel == "MODE_30W"
        rc, out, err = cli(*sysfs, "apply", "--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75",
                           "--mem-mhz", "665.6", "--yes")
        assert rc == 0, err
        assert f"applied and verified: {ORIN.mode(4, 729.6, 318.75, 665.6).describe()}" in out
        assert "emulated orin-agx" in err and "SIMULATED" in err             # the note says what it is
        assert emulator.read_mode(root) == ORIN.mode(4, 729.6, 318.75, 665.6)
        low = settle(be, lambda t: (t.cores_online, t.cpu_mhz, t.gpu_mhz, t.mem_mhz) == (4, 729.6, 318.75, 665.6)
                     and t.power_w < 0.7 * high)
        assert (low.cores_online, low.cpu_mhz, low.gpu_mhz, low.mem_mhz) == (4, 729.6, 318.75, 665.6)
        assert low.power_w < 0.7 * high                                      # the emulated board follows
        rc, out, err = cli(*sysfs, "restore")
        assert rc == 0 and "restored" in out, err
        assert emulator.read_mode(root) == ORIN.preset("MODE_30W").mode
        # a preset through DIR/bin/nvpmodel (found by --sysfs-root, nothing on PATH)
        rc, out, err = cli(*sysfs, "apply", "--preset", "MODE_15W", "--yes")
        assert rc == 0 and "selected MODE_15W" in out, err
        assert status(root) == "pmode:0001" and emulator.read_mode(root) == ORIN.preset("MODE_15W").mode
        q = subprocess.run([root / "bin/nvpmodel", "-q"], capture_output=True, text=True)
        assert q.stdout.split("\n")[:2] == ["NV Power Mode: MODE_15W", "1"]
        assert settle(be, lambda t: t.cpu_mhz == 1113.6).cpu_mhz == 1113.6
        rc, out, err = cli(*sysfs, "restore")
        assert rc == 0, err
        assert status(root) == "pmode:0002" and emulator.read_mode(root) == ORIN.preset("MODE_30W").mode
        # --persist: a custom mode in the tree's nvpmodel.conf, selected by its nvpmodel
        kept = ORIN.mode(6, 1497.6, 522.75, 2133)
        rc, out, err = cli(*sysfs, "apply", "--cores", "6", "--cpu-mhz", "1497.6", "--gpu-mhz", "522.75",
                           "--mem-mhz", "2133", "--yes", "--persist")
        assert rc == 0 and "saved as nvpmodel 99" in out, err
        assert status(root) == "pmode:0099" and emulator.read_mode(root) == kept
        assert "< POWER_MODEL ID=99 NAME=PTUI >" in (root / "etc/nvpmodel.conf").read_text()
    finally:
        be.close()
        rc, out, err = emu.stop(signal.SIGTERM)
    assert rc == 0, err
    assert "Traceback" not in err and "stopped" in err
    # started again on its own tree: a reboot, into the nvpmodel mode the status file names
    emu = emulate(root)
    assert "SIMULATED" in emu.line and "rebooted" in emu.line and "nvpmodel mode 99" in emu.line
    assert emulator.read_mode(root) == kept and status(root) == "pmode:0099"
    rc, _, err = emu.stop(signal.SIGTERM)
    assert rc == 0, err


@pytest.mark.slow
def test_profile_against_the_emulator(tmp_path, emulate, cli):
    pytest.importorskip("torch")
    from tests.functional.test_userscript import TRAIN
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    root = tmp_path / "board"
    emu = emulate(root)
    before = emulator.read_mode(root)
    rc, _, err = cli("--backend", "sysfs", "--sysfs-root", root, "profile", "--count", "2",
                     "--sample-interval", "0.1", "--out", tmp_path / "p.csv", "--", sys.executable,
                     script, "100000")
    assert rc == 0, err
    rows = (tmp_path / "p.csv").read_text().splitlines()[1:]
    assert len(rows) == 2 and all(float(r.split(",")[5]) > 5 for r in rows)   # watts from the tree
    assert "emulated" in err and "SIMULATED" in err
    # where the times come from, and the GPU's gated TPCs (MODE_30W's), said before it starts
    # (nothing said either: a user's trial)
    assert "the training runs on this machine, so each mode's step times are this machine's" in err
    assert "the GPU has 4 of its 8 TPCs powered" in err, err
    assert emulator.read_mode(root) == before                                 # restored
    rc, _, err = emu.stop(signal.SIGTERM)
    assert rc == 0, err


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_each_board_is_detected_read_and_applied(tmp_path, emulate, name):
    dev = get_device(name)
    root = tmp_path / name
    emu = emulate(root, name)
    try:
        det = detect(root)
        assert det.device is dev and det.emulated, det.reason
        be, note = open_backend("sysfs", None, root=str(root))              # the device is detected
        assert be.device is dev and "SIMULATED" in note
        default = dev.preset(dev.default_preset)
        t = settle(be, lambda t: t.power_w and t.gpu_load)
        assert set(t.rails) == set(dev.rails)
        if dev.total_rail:
            assert t.power_w == t.rails[dev.total_rail] and t.power_w < sum(t.rails.values())
        else:
            assert t.power_w == pytest.approx(sum(t.rails.values()), abs=0.01)
        assert (t.cores_online, t.cpu_mhz, t.gpu_mhz, t.mem_mhz) == default.mode.as_tuple()
        assert t.nvpmodel == default.name and t.gpu_load > 0
        assert t.temps and all(20 < c < 85 for c in t.temps.values()), t.temps
        assert be.current_mode() == default.mode
        mode = dev.mode(2, dev.cpu_mhz[8], dev.gpu_mhz[0], dev.mem_mhz[0])
        res = core.apply(be, mode)
        assert res.ok, res.message
        assert emulator.read_mode(root) == mode
        t = settle(be, lambda t: (t.cores_online, t.cpu_mhz, t.gpu_mhz) == mode.as_tuple()[:3])
        assert (t.cores_online, t.cpu_mhz, t.gpu_mhz, t.mem_mhz) == mode.as_tuple()
        assert core.restore(be).startswith("restored")
        assert emulator.read_mode(root) == default.mode
        other = next(p for p in dev.presets if p.id != default.id)
        assert core.apply_preset(be, other.id) == other.mode
        assert status(root) == f"pmode:{other.id:04d}"
        core.restore(be)
        assert status(root) == f"pmode:{default.id:04d}" and emulator.read_mode(root) == default.mode
        be.close()
    finally:
        rc, _, err = emu.stop(signal.SIGTERM)
    assert rc == 0, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_stops_cleanly_on_sigint_and_sighup(tmp_path, emulate, sig):
    emu = emulate(tmp_path / "board")
    rc, _, err = emu.stop(sig)
    assert rc == 0, err
    assert "Traceback" not in err and "stopped" in err


def test_refuses_a_directory_it_did_not_make(tmp_path, cli):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes\n")
    rc, out, err = cli("emulate", "--device", "orin-agx", "--root", mine)
    assert rc == 2
    assert err.startswith("ptui: error: ") and err.count("\n") == 1
    assert "not an emulated board ptui made" in err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert (mine / "notes.txt").read_text() == "my notes\n"
    afile = tmp_path / "afile"
    afile.write_text("x")
    rc, _, err = cli("emulate", "--device", "orin-agx", "--root", afile)
    assert rc == 2 and "not a directory" in err and afile.read_text() == "x"


def test_reuse_checks_the_device_and_one_emulator_per_tree(tmp_path, emulate, cli):
    root = tmp_path / "board"
    emu = emulate(root, "orin-nano")
    try:
        rc, _, err = cli("emulate", "--device", "orin-nano", "--root", root)
        assert rc == 1 and f"pid {emu.proc.pid}" in err and "emulating" in err
    finally:
        rc, _, err = emu.stop()
    assert rc == 0, err
    rc, _, err = cli("emulate", "--device", "xavier-agx", "--root", root)
    assert rc == 2 and "emulated orin-nano" in err and "--device orin-nano" in err
    assert detect(root).device.name == "orin-nano"


def test_bad_options_are_one_line(tmp_path, cli):
    rc, _, err = cli("emulate", "--device", "orin-agx", "--root", tmp_path / "b", "--workload", "nope")
    assert rc == 2 and "unknown workload" in err and not (tmp_path / "b").exists()
    rc, _, err = cli("emulate", "--device", "orin-agx", "--root", tmp_path / "b", "--interval", "0")
    assert rc == 2 and "--interval" in err and not (tmp_path / "b").exists()
    rc, _, err = cli("emulate", "--root", tmp_path / "b")
    assert rc == 2 and "--device" in err
    rc, _, err = cli("emulate", "--device", "orin-nano", "--root", tmp_path / "b", "--workload", "bert-base")
    assert rc == 2 and "does not fit orin-nano" in err and not (tmp_path / "b").exists()


HELD_LOCK_SIGNAL = """
import os, signal, sys, threading, time
from ptui.cli import main
from ptui.core.board.emulator import Emulator
armed = []
plain_wait, plain_sleep, plain_usage = threading.Event.wait, time.sleep, Emulator.usage

def usage(self, done):                 # the board is up: the next wait of the loop gets the signal
    armed.append(1)
    return plain_usage(self, done)

def wait(self, timeout=None):
    # SIGTERM lands while this thread holds the Event's own lock (in wait's first lines, as it can
    # on a busy machine): a handler that calls set() there waits for that lock forever
    if armed and threading.current_thread() is threading.main_thread():
        armed.clear()
        with self._cond:
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))
    return plain_wait(self, timeout)

def sleep(s):
    if armed and threading.current_thread() is threading.main_thread():
        armed.clear()
        os.kill(os.getpid(), signal.SIGTERM)
    return plain_sleep(s)

threading.Event.wait, time.sleep, Emulator.usage = wait, sleep, usage
sys.exit(main(sys.argv[1:]))
"""


def test_a_stop_signal_at_any_instant_of_the_loop_stops_it(tmp_path):
    """CI once saw `ptui emulate` ignore SIGTERM for 30 s: its handler set a threading.Event the main
    thread was waiting on, which deadlocks when the signal lands while that thread holds the Event's
    lock.  Here the signal is made to land exactly there; the emulator must still stop, rc 0."""
    from tests.support.cli import subprocess_env
    root = tmp_path / "root"
    p = subprocess.run([sys.executable, "-c", HELD_LOCK_SIGNAL, "emulate", "--device", "orin-agx",
                        "--root", str(root), "--interval", "0.05"],
                       capture_output=True, text=True, timeout=30, env=subprocess_env(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "stopped (SIGTERM)" in p.stderr and "Traceback" not in p.stderr
    assert emulator.marker(root)["state"] == "stopped"          # the tree says nothing drives it now


def test_sigint_stops_it_also_when_started_with_sigint_ignored(tmp_path):
    """A shell starts a background job with SIGINT ignored, and Python then leaves it ignored:
    `ptui emulate` routed only a SIGINT Python handled, so in CI run in the background it ignored
    SIGINT and was killed after 30 s.  It must stop on SIGINT whatever it inherited."""
    import signal as sig

    from tests.support.cli import subprocess_env
    root = tmp_path / "root"
    p = subprocess.Popen([sys.executable, "-m", "ptui", "emulate", "--device", "orin-agx", "--root", str(root),
                          "--interval", "0.05"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=subprocess_env(tmp_path), preexec_fn=lambda: sig.signal(sig.SIGINT, sig.SIG_IGN))
    try:
        assert p.stdout.readline().startswith("ptui emulate:")
        p.send_signal(sig.SIGINT)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0 and "stopped (SIGINT)" in err, err
