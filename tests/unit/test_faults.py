"""Applying a mode when something goes wrong: what the user is told, and where the board ends.

Fault-injecting backends (tests/support/faults.py), a stricter kernel on the emulated sysfs tree
(min above max is EINVAL, files cannot be created), an Orin Nano tree with VDD_IN and its
sub-rails plus the INA3221 sum channel, and an nvpmodel that fails in the ways a real one does.
"""
from __future__ import annotations

import errno
import random

import pytest

from ptui.core.board import emulator
from ptui.core.board.apply import apply_mode, plan, rollback
from ptui.core.board.backends.base import ApplyError, BackendError
from ptui.core.board.backends.sysfs import SysfsBackend
from ptui.core.catalogue.devices import get_device
from tests.support import fakesys, faults
from tests.support.child import holding_lock

ORIN = get_device("orin-agx")
NANO = get_device("orin-nano")
START = ORIN.preset("MODE_30W").mode
TARGET = ORIN.mode(4, 729.6, 318.75, 665.6)


# -- the generic apply path with lying / raising backends --------------------------------------
def test_success_reads_back_and_keeps_the_snapshot():
    be = faults.LyingBackend(ORIN)
    be.armed = False
    res = apply_mode(be, TARGET)
    assert res.ok and res.readback == TARGET and res.target == TARGET
    assert res.message == f"applied and verified: {TARGET.describe()}"
    assert be.current_mode() == TARGET and be.restores == 0
    assert rollback(be, res.snapshot) == START and be.current_mode() == START
    assert be.read().nvpmodel == "MODE_30W"             # the snapshot carried the preset name too


def _apply_logged(be) -> list[str]:
    """apply_mode's log lines at DEBUG, read from the ptui logger itself (it does not propagate
    once the CLI has configured it)."""
    import logging
    got: list[str] = []
    h = logging.Handler(logging.DEBUG)
    h.emit = lambda r: got.append(r.getMessage()) if r.name == "ptui.core.board.apply" else None
    log = logging.getLogger("ptui")
    level = log.level
    log.addHandler(h)
    log.setLevel(logging.DEBUG)
    try:
        apply_mode(be, TARGET)
    finally:
        log.removeHandler(h)
        log.setLevel(level)
    return got


def test_each_step_of_an_apply_is_logged():
    """What `ptui -v` shows of an apply: the change asked for, what the board read back, and the
    rollback when the read-back does not match."""
    be = faults.LyingBackend(ORIN)
    be.armed = False
    assert _apply_logged(be) == [f"apply on orin-agx ({be.kind}): {START.key} -> {TARGET.key}",
                                 f"read back {TARGET.key}"]
    said = _apply_logged(faults.LyingBackend(ORIN))
    assert said[-1] == f"rolling back to {START.key}" and said[-2].startswith("read back ")


def test_backend_lying_on_read_back_is_caught_and_rolled_back():
    be = faults.LyingBackend(ORIN)
    res = apply_mode(be, TARGET)
    assert not res.ok and res.readback is None
    assert res.message.startswith("apply failed: read-back 4c/729.6/216.75/665.6 does not match "
                                  f"{TARGET.key}")
    assert f"rolled back to the previous mode: {START.describe()}" in res.message
    assert be.current_mode() == START and be.restores == 1


def test_backend_raising_mid_apply_is_rolled_back():
    be = faults.RaisingBackend(ORIN)
    res = apply_mode(be, TARGET)
    assert not res.ok
    assert "max_freq failed: Input/output error" in res.message
    assert f"rolled back to the previous mode: {START.describe()}" in res.message
    assert be.current_mode() == START                   # the cores it changed are back too
    assert be.restores == 1


def test_failed_rollback_is_not_reported_as_rolled_back():
    be = faults.RestoreFailsBackend(ORIN)
    res = apply_mode(be, TARGET)
    assert not res.ok and "Input/output error" in res.message
    assert "ROLLBACK FAILED" in res.message and "Device or resource busy" in res.message
    assert "check the device" in res.message
    assert "rolled back to" not in res.message
    assert be.current_mode().cores == TARGET.cores      # really half-applied: the message is true


def test_rollback_that_silently_does_nothing_is_caught():
    be = faults.SilentRestoreBackend(ORIN)
    res = apply_mode(be, TARGET)
    assert not res.ok and be.restores == 1
    assert "ROLLBACK FAILED" in res.message and "rolled back to" not in res.message
    assert f"the device reports {be.current_mode().key}, not the previous {START.key}" in res.message


def test_generic_plan_orders_steps_and_names_them():
    be = faults.LyingBackend(ORIN)
    p = plan(be, ORIN.maxn)
    assert p.current == START and p.target == ORIN.maxn and not p.noop
    assert p.steps == ["bring cores 8..11 online",
                       "CPU: raise max to 2201.6 MHz, then min to 2201.6 MHz",
                       "GPU: raise max to 1300.5 MHz, then min to 1300.5 MHz",
                       "read every value back and compare; roll back to the snapshot on any mismatch"]
    low = plan(be, ORIN.mode(7, 1728, 114.75, 204))
    assert low.steps[:3] == ["take core 7 offline",
                             "GPU: lower min to 114.75 MHz, then max to 114.75 MHz",
                             "EMC: lower min to 204 MHz, then max to 204 MHz"]
    same = plan(be, START)
    assert same.noop and same.steps[0].startswith("nothing to change")
    assert plan(be, ORIN.mode(9, 1728, 624.75, 3199)).steps[0] == "bring core 8 online"
    assert plan(be, ORIN.mode(4, 1728, 624.75, 3199)).steps[0] == "take cores 4..7 offline"


# -- sysfs under a strict kernel ---------------------------------------------------------------
@pytest.fixture
def tree(tmp_path):
    return fakesys.build(tmp_path / "root")


def unpin(root):
    """The state a board boots in: governors free between the hardware limits."""
    for c in range(12):
        d = root / f"sys/devices/system/cpu/cpu{c}/cpufreq"
        (d / "scaling_min_freq").write_text("115200\n")
        (d / "scaling_max_freq").write_text("2201600\n")
    g = root / "sys/class/devfreq/17000000.gpu"
    (g / "min_freq").write_text("114750000\n")
    (g / "max_freq").write_text("1300500000\n")


def strict(root, **kw):
    be = SysfsBackend(ORIN, root=root)
    k = fakesys.Kernel(root, **kw)
    be._write = k.write
    return be, k


def test_kernel_refuses_min_above_max(tree):
    k = fakesys.Kernel(tree)
    d = tree / "sys/devices/system/cpu/cpu0/cpufreq"
    with pytest.raises(OSError) as ei:
        k.write(d / "scaling_min_freq", "2201600")
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(OSError):
        k.write(d / "scaling_max_freq", "115200")
    with pytest.raises(OSError) as ei:
        k.write(tree / "sys/devices/system/cpu/cpu0/online", "0")
    assert ei.value.errno == errno.ENOENT                  # cpu0 has no online file
    with pytest.raises(OSError):
        k.write(d / "scaling_max_freq", "fast")
    k.write(d / "scaling_max_freq", "2201600")
    k.write(d / "scaling_min_freq", "2201600")
    assert k.log == [("sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq", "2201600"),
                     ("sys/devices/system/cpu/cpu0/cpufreq/scaling_min_freq", "2201600")]


def test_restore_after_several_applies_returns_to_the_first_state(tree):
    unpin(tree)
    be, k = strict(tree)
    snap = be.snapshot()
    before, start = fakesys.board_files(tree), fakesys.read_mode(tree)
    for target in (ORIN.maxn, ORIN.mode(1, 115.2, 114.75, 204), ORIN.mode(6, 1113.6, 1300.5, 665.6)):
        assert apply_mode(be, target).ok, k.rejected
    be.restore(snap)
    assert k.rejected == [] and fakesys.read_mode(tree) == start
    after = fakesys.board_files(tree)
    # cluster 8-11 is offline at both ends; its limits were last set by the MAXN step
    assert {p: v for p, v in after.items() if "policy8" not in p} == \
           {p: v for p, v in before.items() if "policy8" not in p}


def test_restore_raises_max_before_min_when_going_up(tree):
    """Restore to an unpinned state from a low pinned mode: max first, else min > max (EINVAL)."""
    unpin(tree)
    before = fakesys.board_files(tree)
    be, k = strict(tree)
    snap = be.snapshot()
    assert apply_mode(be, ORIN.mode(12, 268.8, 114.75, 204)).ok
    k.log.clear()
    be.restore(snap)
    assert k.rejected == []
    cpu0 = [p.rsplit("/", 1)[1] for p, _ in k.log if "cpu0/cpufreq" in p]
    assert cpu0 == ["scaling_max_freq", "scaling_min_freq"]
    assert fakesys.board_files(tree) == before
    gpu = [p.rsplit("/", 1)[1] for p, _ in k.log if "gpu" in p]
    assert gpu == ["max_freq", "min_freq"]
    # and going down (from MAXN back to a pinned low mode): min first
    root2 = fakesys.build(tree.parent / "low", mode=ORIN.mode(4, 268.8, 114.75, 204))
    be2, k2 = strict(root2)
    snap2 = be2.snapshot()
    assert apply_mode(be2, ORIN.maxn).ok
    k2.log.clear()
    be2.restore(snap2)
    assert [p.rsplit("/", 1)[1] for p, _ in k2.log if "gpu" in p] == ["min_freq", "max_freq"]
    cpu0 = [p.rsplit("/", 1)[1] for p, _ in k2.log if "cpu0/cpufreq" in p]
    assert cpu0 == ["scaling_min_freq", "scaling_max_freq"]
    online = [(p, v) for p, v in k2.log if p.endswith("online") and v == "0"]
    assert online == [(f"sys/devices/system/cpu/cpu{c}/online", "0") for c in range(11, 3, -1)]
    assert k2.rejected == [] and fakesys.read_mode(root2) == ORIN.mode(4, 268.8, 114.75, 204)


def test_restore_when_an_offline_cluster_was_unreadable(tree):
    """On a real kernel an offline policy cannot be read (EBUSY): the snapshot then lacks that
    cluster, and restore gives it the first cluster's limits before taking it offline again."""
    be, k = strict(tree)
    snap = be.snapshot()
    assert set(snap["cpufreq"]) == {0, 4, 8}
    del snap["cpufreq"][8]
    assert apply_mode(be, ORIN.mode(12, 729.6, 318.75, 665.6)).ok
    be.restore(snap)
    pol = tree / "sys/devices/system/cpu/cpufreq"
    assert (pol / "policy8/scaling_max_freq").read_text().strip() == "1728000"
    assert (pol / "policy8/scaling_min_freq").read_text().strip() == "1728000"
    assert k.rejected == [] and fakesys.read_mode(tree) == START


def test_write_failing_mid_apply_rolls_back_exactly(tree):
    unpin(tree)
    before = fakesys.board_files(tree)
    be, _k = strict(tree, fail_once={("17000000.gpu/max_freq", "1300500000"): errno.EIO})
    res = apply_mode(be, ORIN.maxn)
    assert not res.ok
    assert "1300500000" in res.message and "Input/output error" in res.message
    assert "rolled back" in res.message and "ROLLBACK FAILED" not in res.message
    assert fakesys.board_files(tree) == before          # cores 8..11 offline again, clocks unpinned


def test_write_failing_during_rollback_is_reported(tree):
    be, _k = strict(tree, fail_once={("17000000.gpu/max_freq", "1300500000"): errno.EIO},
                   fail={("cpu8/online", "0"): errno.EBUSY})
    res = apply_mode(be, ORIN.maxn)
    assert not res.ok and "ROLLBACK FAILED" in res.message
    assert "Device or resource busy" in res.message and "rolled back to the previous" not in res.message


def test_kernel_rounding_a_gpu_clock_is_caught(tree):
    be = SysfsBackend(ORIN, root=tree)
    k = fakesys.Kernel(tree)

    def rounding(path, value):
        k.write(path, "828750000" if path.name.endswith("_freq") and value == "930750000" else value)

    be._write = rounding
    before = fakesys.board_files(tree)
    with pytest.raises(ApplyError, match=r"read-back mismatch.*max_freq reads '828750000', wrote 930750000"
                                         r".*rolled back"):
        be.apply_mode(ORIN.mode(8, 1728, 930.75, 3199))
    assert fakesys.board_files(tree) == before


def test_cli_apply_failure_tells_the_user_and_leaves_the_board(tree, cli, monkeypatch):
    before = fakesys.board_files(tree)
    k = fakesys.Kernel(tree, fail_once={("17000000.gpu/max_freq", "318750000"): errno.EIO})

    def write(self, path, value):
        k.write(path, value)

    monkeypatch.setattr(SysfsBackend, "_write", write)
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, "--cores", "4",
                       "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6", "--yes")
    assert rc == 1
    assert "max_freq failed: Input/output error" in err and "rolled back" in err
    assert "applied and verified" not in out
    assert fakesys.board_files(tree) == before


# -- power on other boards -------------------------------------------------------------------
def test_nano_power_is_vdd_in_not_the_sum_of_its_parts(tmp_path):
    root = emulator.build(tmp_path / "nano", "orin-nano")
    fakesys.add_sum_channel(root, ma=9999)
    be = SysfsBackend(NANO, root=root)
    t = be.read()
    assert set(t.rails) == {"VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"}     # the sum channel is no rail
    assert t.rails["VDD_IN"] > t.rails["VDD_CPU_GPU_CV"] + t.rails["VDD_SOC"] > 0
    assert t.power_w == t.rails["VDD_IN"]
    assert be.current_mode() == NANO.preset("15W").mode and t.cores_online == 6
    assert t.nvpmodel == "15W"


def test_nano_apply_and_restore_under_a_strict_kernel(tmp_path):
    root = emulator.build(tmp_path / "nano", "orin-nano")
    before = fakesys.board_files(root)
    be = SysfsBackend(NANO, root=root)
    k = fakesys.Kernel(root)
    be._write = k.write
    seven = NANO.preset("7W").mode
    res = apply_mode(be, seven)
    assert res.ok, res.message
    assert be.current_mode() == seven and be.online_cores() == 4
    be.restore(res.snapshot)
    assert k.rejected == [] and fakesys.board_files(root) == before


def test_sum_channel_is_not_counted_on_agx(tree):
    fakesys.add_sum_channel(tree)
    drv = fakesys.Driver(tree)
    for _ in range(3):
        drv.step()
    t = SysfsBackend(ORIN, root=tree).read()
    assert set(t.rails) == set(ORIN.rails)
    assert t.power_w == pytest.approx(sum(t.rails.values()), abs=0.002)
    assert t.power_w == pytest.approx(drv.sim.read().power_w, rel=0.05)


# -- nvpmodel failing -----------------------------------------------------------------------
@pytest.mark.parametrize("fault, said", [
    ("exit1", "nvpmodel -m 1 failed: NVPM ERROR: failed to write CPU frequency"),
    ("nvpm-error", "nvpmodel -m 1 failed: NVPM ERROR: optMask"),
    ("reboot", "nvpmodel mode 1 needs a reboot"),
])
def test_failing_nvpmodel_leaves_the_board_where_it_was(tree, tmp_path, fault, said):
    nvp = fakesys.install_faulty_nvpmodel(tmp_path / "bin", tree, fault, on_ids=(1,))
    before = fakesys.board_files(tree)
    be = SysfsBackend(ORIN, root=tree, nvpmodel_cmd=str(nvp))
    with pytest.raises(BackendError) as ei:
        be.apply_preset("MODE_15W")
    assert said in str(ei.value)
    if fault == "reboot":
        assert "will not reboot" in str(ei.value) and "sudo nvpmodel -m 1" in str(ei.value)
        assert (tree / "nvpmodel-answer").read_text() == "NO"        # the prompt was answered no
    assert "restored" in str(ei.value)
    assert fakesys.board_files(tree) == before
    assert be.read().nvpmodel == "MODE_30W"


def test_nvpmodel_not_reaching_the_preset_is_rolled_back(tree, tmp_path):
    nvp = fakesys.install_faulty_nvpmodel(tmp_path / "bin", tree, "wrong", on_ids=(1,))
    before = fakesys.board_files(tree)
    be = SysfsBackend(ORIN, root=tree, nvpmodel_cmd=str(nvp))
    with pytest.raises(ApplyError, match=r"after nvpmodel -m 1 the board reports 8c/1113.6/624.75/3199, "
                                         r"not 4c/1113.6/420.75/2133; rolled back"):
        be.apply_preset("MODE_15W")
    assert fakesys.board_files(tree) == before


def test_cli_preset_with_failing_nvpmodel(tree, tmp_path, cli, monkeypatch):
    nvp = fakesys.install_faulty_nvpmodel(tmp_path / "bin", tree, "exit1", on_ids=(1,))
    monkeypatch.setenv("PATH", f"{nvp.parent}:{__import__('os').environ['PATH']}")
    before = fakesys.board_files(tree)
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, "--preset", "MODE_15W", "--yes")
    assert rc != 0 and "NVPM ERROR: failed to write CPU frequency" in err
    assert "selected" not in out
    assert fakesys.board_files(tree) == before


def test_nvpmodel_missing_or_hanging(tree, tmp_path):
    be = SysfsBackend(ORIN, root=tree, nvpmodel_cmd=str(tmp_path / "no-such-nvpmodel"))
    before = fakesys.board_files(tree)
    with pytest.raises(BackendError, match="nvpmodel was not found .*previous state was restored"):
        be.apply_preset(1)
    assert fakesys.board_files(tree) == before


@pytest.mark.parametrize("pinned", [True, False])
def test_apply_then_restore_gives_back_every_knob(tmp_path, pinned):
    """From random start states (pinned by nvpmodel or free between the hardware limits), apply a
    random mode and restore its snapshot: the strict kernel never refuses a write and every knob
    -- the limits of a cluster apply brought online included -- is back as it was."""
    rng = random.Random(5 if pinned else 6)
    grid = ORIN.pt_grid()
    starts = [ORIN.mode(2, 268.8, 114.75, 204), ORIN.maxn, rng.choice(grid)]
    for n, start in enumerate(starts):
        root = fakesys.build(tmp_path / f"r{n}", mode=start)
        if not pinned:
            unpin(root)
        be, k = strict(root)
        for target in [rng.choice(grid) for _ in range(2)] + [ORIN.maxn, ORIN.mode(1, 115.2, 114.75, 204)]:
            before = fakesys.board_files(root)
            res = apply_mode(be, target)
            assert res.ok, (res.message, k.rejected)
            assert fakesys.read_mode(root) == target
            be.restore(res.snapshot)
            assert k.rejected == []
            assert fakesys.board_files(root) == before, (start.key, target.key)


# -- another process at the board; --persist where nothing can persist -------------------------------
def test_apply_while_another_process_changes_the_board_touches_nothing(tree):

    from ptui.core.board.locks import board_key, lock_path
    be = SysfsBackend(ORIN, root=tree)
    before = be.current_mode()
    p = holding_lock(lock_path(board_key(be)))
    try:
        res = apply_mode(be, TARGET)
    finally:
        p.kill()
        p.wait()
    assert (res.ok, res.target, res.readback, res.snapshot) == (False, TARGET, None, None)
    assert res.message.startswith("not applied: ") and f"pid {p.pid}" in res.message, res.message
    assert be.current_mode() == before
    assert apply_mode(be, TARGET).ok                      # free again


def test_persist_needs_a_real_board_with_nvpmodel(tree):
    from ptui.core.board.apply import NotSupported, check_persist
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.errors import exit_code

    class NoNvpmodel(SysfsBackend):
        can_persist = False
    for be in (SimJetson(ORIN), NoNvpmodel(ORIN, root=tree)):
        with pytest.raises(NotSupported) as e:
            check_persist(be)
        assert str(e.value) == (f"--persist needs a real Jetson (nvpmodel); the {be.kind} backend "
                                f"cannot keep a mode across reboots; nothing applied")
        assert exit_code(e.value) == 2
    check_persist(SysfsBackend(ORIN, root=tree))          # a board with nvpmodel: nothing said


def test_select_preset_gives_the_state_before_and_is_refused_without_presets():
    from ptui.core.board.apply import NotSupported, restore_snapshot, select_preset
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.errors import exit_code
    be = SimJetson(ORIN, start_mode=TARGET)
    p = ORIN.preset("MODE_15W")
    snap = select_preset(be, p)
    assert be.current_mode() == p.mode and be.read().nvpmodel == "MODE_15W"
    assert restore_snapshot(be, snap) == TARGET and be.current_mode() == TARGET

    class NoPresets(SimJetson):
        can_select_presets = False
    be = NoPresets(ORIN, start_mode=TARGET)
    with pytest.raises(NotSupported) as e:
        select_preset(be, p)
    assert str(e.value) == "the sim backend cannot select presets" and exit_code(e.value) == 2
    assert be.current_mode() == TARGET
