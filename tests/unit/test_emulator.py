"""The emulated Jetson trees (ptui.core.board.emulator): every catalogued board's layout, its nvpmodel
stand-in and conf, the driver that plays the board, and --sysfs-root finding the tree's nvpmodel."""
import subprocess

import pytest

from ptui.core.board import emulator
from ptui.core.board.backends import open_backend
from ptui.core.board.backends.sysfs import SysfsBackend
from ptui.core.board.detect import detect
from ptui.core.catalogue.devices import DEVICES, get_device
from ptui.core.catalogue.workloads import get_workload

ORIN = get_device("orin-agx")


@pytest.fixture(params=sorted(DEVICES))
def board(request, tmp_path):
    dev = get_device(request.param)
    root = emulator.build(tmp_path / dev.name, dev.name)
    return dev, root, emulator.install_nvpmodel(root)


def test_every_board_has_its_real_layout(board):
    dev, root, _ = board
    det = detect(root)
    assert det.device is dev and det.emulated and "SIMULATED" in det.reason
    be = SysfsBackend(dev, root=root)
    gpu = {"orin-agx": "17000000.gpu", "xavier-agx": "17000000.gv11b", "orin-nano": "17000000.ga10b"}[dev.name]
    assert be.gpu_dir is not None and be.gpu_dir.name == gpu
    assert be.gpu_load is not None and be.emc_dir is not None
    assert sorted(label for label, _, _ in be.rails) == sorted(dev.rails)   # NC channels are no rails
    t = be.read()
    assert (t.cores_online, t.cpu_mhz, t.gpu_mhz, t.mem_mhz) == dev.preset(dev.default_preset).mode.as_tuple()
    assert t.power_w and t.nvpmodel == dev.preset(dev.default_preset).name
    assert {"CPU", "GPU"} <= set(t.temps)
    for c in range(dev.max_cores):                           # one cpufreq policy per cluster
        pol = next(cl[0] for cl in dev.cpu_clusters if c in cl)
        assert (root / f"sys/devices/system/cpu/cpu{c}/cpufreq").resolve().name == f"policy{pol}"
    khz = (root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_available_frequencies").read_text().split()
    assert [int(k) / 1000 for k in khz] == list(dev.cpu_mhz)
    be.close()


def test_nvpmodel_stand_in_selects_every_preset_from_the_conf(board):
    dev, root, nvp = board
    conf = (root / "etc/nvpmodel.conf").read_text()
    assert f"< PM_CONFIG DEFAULT={dev.default_preset} >" in conf and "SIMULATED" in conf
    p = subprocess.run([nvp, "-p", "--verbose"], capture_output=True, text=True)
    assert p.returncode == 0
    d = dev.preset(dev.default_preset)
    assert f"NVPM VERB: PM_CONFIG: DEFAULT={d.name}({d.id})" in p.stdout
    assert [ln.split("POWER_MODEL: ")[1] for ln in p.stdout.splitlines() if "POWER_MODEL:" in ln] == \
        [f"ID={x.id} NAME={x.name}" for x in dev.presets]
    for preset in (*dev.presets[1:], dev.presets[0]):
        r = subprocess.run([nvp, "-m", str(preset.id)], capture_output=True, text=True)
        assert r.returncode == 0 and "NVPM ERROR" not in r.stdout, r.stdout + r.stderr
        assert emulator.read_mode(root) == preset.mode, preset.name
        assert (root / "var/lib/nvpmodel/status").read_text() == f"pmode:{preset.id:04d} fmode:quiet\n"
        q = subprocess.run([nvp, "-q"], capture_output=True, text=True)
        assert q.stdout.splitlines()[:2] == [f"NV Power Mode: {preset.name}", str(preset.id)]
    r = subprocess.run([nvp, "-m", "42"], capture_output=True, text=True)
    assert r.returncode == 1 and "NVPM ERROR" in r.stdout
    assert emulator.read_mode(root) == dev.presets[0].mode


def test_persist_on_the_emulated_tree_is_selected_by_its_nvpmodel(tmp_path):
    root = emulator.build(tmp_path / "b", "xavier-agx")
    emulator.install_nvpmodel(root)
    xavier = get_device("xavier-agx")
    be = SysfsBackend(xavier, root=root)                     # finds DIR/bin/nvpmodel itself
    mode = xavier.mode(6, 1420.8, 675.75, 1331.2)
    assert "saved as nvpmodel 99" in be.persist(mode)
    assert emulator.read_mode(root) == mode and be.read().nvpmodel == "mode 0099"
    assert "CPU_DENVER_2 MAX_FREQ 1420800" in (root / "etc/nvpmodel.conf").read_text()


def test_sysfs_root_finds_the_trees_own_nvpmodel(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    root = emulator.build(tmp_path / "b", "orin-agx")
    assert SysfsBackend(ORIN, root=root).nvpmodel_cmd == "nvpmodel"          # none in the tree: PATH
    nvp = emulator.install_nvpmodel(root)
    assert SysfsBackend(ORIN, root=root).nvpmodel_cmd == str(nvp)
    assert SysfsBackend(ORIN).nvpmodel_cmd == "nvpmodel"                     # a real board: PATH
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", root, "--preset", "MODE_15W", "--yes")
    assert rc == 0 and "selected MODE_15W" in out, err
    assert emulator.read_mode(root) == ORIN.preset("MODE_15W").mode


def test_driver_follows_knobs_and_tpc_gating(tmp_path):
    root = emulator.build(tmp_path / "b", "orin-agx")
    nvp = emulator.install_nvpmodel(root)
    drv = emulator.Driver(root)
    drv.sim.start_training(get_workload("resnet18"))
    assert drv.sim.tpc == 4                                   # MODE_30W gates half the TPCs
    subprocess.run([nvp, "-m", "0"], check=True)
    drv.step(0.5)
    assert drv.sim.current_mode() == ORIN.maxn and drv.sim.tpc == 8
    for _ in range(20):
        drv.step(0.5)
    be = SysfsBackend(ORIN, root=root)
    t = be.read()
    assert t.power_w == pytest.approx(drv.sim.read().power_w, rel=0.05) and t.power_w > 40
    assert t.gpu_load > 50 and t.cpu_mhz == 2201.6
    be.close()


def test_the_emulated_board_is_said_so(tmp_path):
    root = emulator.build(tmp_path / "b", "orin-nano")
    be, note = open_backend("sysfs", None, root=str(root))
    assert be.device.name == "orin-nano" and be.emulated
    assert "emulated orin-nano" in note and "SIMULATED" in note
    plain = tmp_path / "plain"
    (plain / "proc/device-tree").mkdir(parents=True)
    (plain / "proc/device-tree/model").write_text("NVIDIA Jetson Orin Nano Developer Kit\0")
    be, note = open_backend("sysfs", None, root=str(plain))
    assert not be.emulated and "emulated" not in note


def test_a_device_other_than_the_board_found_is_refused(tmp_path):
    """--device orin-agx on an Orin Nano's tree decided among the AGX's modes and wrote one (cpu11
    online) to a 6-core board; the device named must be the device found."""
    from ptui.core.errors import InputError
    plain = tmp_path / "plain"
    (plain / "proc/device-tree").mkdir(parents=True)
    (plain / "proc/device-tree/model").write_text("NVIDIA Jetson Orin Nano Developer Kit\0")
    for kind in ("sysfs", "auto", None):
        with pytest.raises(InputError, match="--device orin-agx, but the board at .* is orin-nano"):
            open_backend(kind, "orin-agx", root=str(plain))
    be, _ = open_backend("sysfs", "orin-nano", root=str(plain))     # the same device: fine
    assert be.device.name == "orin-nano"
    be, _ = open_backend("sim", "orin-agx", root=str(plain))        # a what-if: the simulator
    assert be.device.name == "orin-agx"



def test_driver_survives_a_knob_caught_mid_write(tmp_path):
    """ptui writes a knob by truncating then writing: the driver once read the empty file, died
    (IndexError) and the emulated board stopped following."""
    root = emulator.build(tmp_path / "b", "orin-agx")
    drv = emulator.Driver(root)
    pol = root / "sys/devices/system/cpu/cpufreq/policy0"
    gpu = root / "sys/class/devfreq/17000000.gpu"
    (pol / "scaling_max_freq").write_text("")
    (gpu / "max_freq").write_text("")
    drv.step(0.5)                                           # no error; the board stays as it was
    assert drv.sim.current_mode() == ORIN.preset("MODE_30W").mode
    assert (pol / "scaling_cur_freq").read_text().split() == ["1728000"]
    (pol / "scaling_max_freq").write_text("1728000\n")
    (gpu / "max_freq").write_text("624750000\n")
    drv.step(0.5)
    assert SysfsBackend(ORIN, root=root).read().gpu_mhz == 624.75


def test_a_knob_its_writer_left_empty_is_healed(tmp_path, cli):
    """A writer killed (kill -9) between truncating a knob and writing it left the file empty for
    good: ptui status said 'cannot read the current mode', and ptui restore, the documented way
    back, failed in the tree's nvpmodel with a traceback.  A real kernel never shows an empty knob:
    the board writes back its value once it has stayed empty over two steps."""
    root = emulator.build(tmp_path / "b", "orin-agx")
    drv = emulator.Driver(root)
    knobs = [root / "sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq",
             root / "sys/class/devfreq/17000000.gpu/min_freq",
             root / emulator.EMC_DIR / "rate", root / "sys/devices/system/cpu/cpu7/online"]
    before = [k.read_text() for k in knobs]
    drv.step(0.1)
    for k in knobs:
        k.write_text("")
    drv.step(0.1)                                          # one step: maybe a writer mid-write
    assert all(k.read_text() == "" for k in knobs)
    drv.step(0.1)
    assert [k.read_text().split() for k in knobs] == [b.split() for b in before]
    assert emulator.read_mode(root, wait_s=0.0) == ORIN.preset("MODE_30W").mode


def test_a_knob_caught_mid_write_is_read_again(tmp_path):
    """A writer truncates a knob file, then writes it: read_mode then read '' and raised (a flaky
    Flower e2e test polled the tree while ptui applied the round's mode).  It reads again."""
    import threading
    import time

    root = emulator.build(tmp_path / "b", "orin-nano")
    want = emulator.read_mode(root)
    knob = root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq"
    value = knob.read_text()
    knob.write_text("")                                     # caught between truncate and write
    t = threading.Timer(0.1, lambda: knob.write_text(value))
    t.start()
    t0 = time.monotonic()
    assert emulator.read_mode(root) == want and time.monotonic() - t0 < 0.9
    t.join()
    knob.write_text("")
    with pytest.raises(ValueError):
        emulator.read_mode(root, wait_s=0.0)


def test_a_tree_whose_emulator_stopped_or_was_killed_is_refused(tmp_path, monkeypatch):
    """With its emulator stopped, an emulated tree is only files: `ptui apply` on it wrote the mode
    and read it back as written, 'applied and verified', and its sensors never moved (a user's
    trial).  The emulator marks the tree running (its pid) and stopped; a backend refuses a tree
    whose emulator stopped or whose pid is gone, naming the command that starts it again; a tree
    built without a driver (a test's) is taken as it is."""
    import json
    import os
    import subprocess
    import sys

    from ptui.core.board.backends import BackendError, open_backend
    from ptui.core.board.detect import EMULATED_MARKER, emulator_gone
    from ptui.core.board.emulator import Emulator, build
    monkeypatch.setenv("PTUI_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("PTUI_STATE_DIR", str(tmp_path / "state"))
    emu = Emulator(tmp_path / "board", "orin-nano", interval=0.1)
    emu.open()
    m = json.loads((emu.root / EMULATED_MARKER).read_text())
    assert m["state"] == "running" and m["pid"] == os.getpid()
    be, _ = open_backend("sysfs", None, root=str(emu.root))         # driven: a board
    assert be.emulated
    emu.close()
    assert emulator_gone(emu.root) == "its emulator (ptui emulate) has stopped"
    with pytest.raises(BackendError, match=r"is not running: its emulator \(ptui emulate\) has stopped; "
                                           r"start it again with: ptui emulate --device orin-nano"):
        open_backend("sysfs", None, root=str(emu.root))
    # a backend opened while it ran (a profile's next mode) writes nothing once it stopped
    before = be.current_mode()
    other = next(m for m in be.device.full_space() if m != before)
    with pytest.raises(BackendError, match="is not running"):
        be.apply_mode(other)
    assert be.current_mode() == before
    with pytest.raises(BackendError, match="is not running"):   # the app's sampler shows it, not stale W
        be.read()
    # killed (kill -9): still marked running, its pid gone
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    m = json.loads((emu.root / EMULATED_MARKER).read_text())
    (emu.root / EMULATED_MARKER).write_text(json.dumps({**m, "state": "running", "pid": int(dead),
                                                        "host": __import__("socket").gethostname()}))
    with pytest.raises(BackendError, match=f"pid {dead}\\) is gone"):
        open_backend("sysfs", None, root=str(emu.root))
    # started again: the same tree boots and is a board again
    again = Emulator(emu.root, "orin-nano", interval=0.1)
    assert again.open().startswith("rebooted the emulated orin-nano")
    assert emulator_gone(again.root) is None
    again.close()
    # a tree built without a driver is taken as it is
    build(tmp_path / "static", "orin-nano")
    assert emulator_gone(tmp_path / "static") is None
    open_backend("sysfs", None, root=str(tmp_path / "static"))


def test_a_profile_put_back_on_a_stopped_emulator_is_not_said_restored(tmp_path, monkeypatch):
    """The emulator stopped mid-profile: the profile's put-back wrote its snapshot into the bare
    files, read them back as written and the app said 'profile failed; the original mode is
    restored' of a board nothing drove (on restart it reboots in its default mode).  A snapshot
    restore on a tree whose emulator stopped now raises, as apply_mode does, writing nothing."""
    from ptui.core.board.backends import BackendError, open_backend
    from ptui.core.board.emulator import Emulator
    monkeypatch.setenv("PTUI_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("PTUI_STATE_DIR", str(tmp_path / "state"))
    emu = Emulator(tmp_path / "board", "orin-nano", interval=0.1)
    emu.open()
    be, _ = open_backend("sysfs", None, root=str(emu.root))
    snap = be.snapshot()
    start = be.current_mode()
    other = next(m for m in be.device.full_space() if m != start)
    be.apply_mode(other)                     # a profile's mode
    emu.close()                              # the emulator stops mid-profile
    with pytest.raises(BackendError, match="is not running"):
        be.restore(snap)
    assert be.current_mode() == other        # nothing written into the bare files
