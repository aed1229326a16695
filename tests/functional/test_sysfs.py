"""The sysfs backend against an emulated Orin AGX tree driven by the simulator."""
import pytest

from ptui.core.board.apply import apply_mode
from ptui.core.board.backends.base import ApplyError, BackendError
from ptui.core.board.backends.sysfs import SysfsBackend
from ptui.core.board.detect import detect
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload
from tests.support import fakesys

ORIN = get_device("orin-agx")


@pytest.fixture
def tree(tmp_path):
    return fakesys.build(tmp_path / "root")


def test_detects_orin_from_device_tree(tree, tmp_path):
    assert detect(tree).device.name == "orin-agx"
    assert detect(tmp_path / "nothing").device is None
    assert "no Jetson found" in detect(tmp_path / "nothing").reason


def test_detects_the_xavier_devkit_whose_model_is_jetson_agx(tmp_path):
    """The AGX Xavier devkit's device tree says only "Jetson-AGX": ptui called it unsupported."""
    (tmp_path / "proc/device-tree").mkdir(parents=True)
    (tmp_path / "proc/device-tree/model").write_bytes(b"Jetson-AGX\0")
    assert detect(tmp_path).device.name == "xavier-agx"


def test_reads_rails_clocks_thermal(tree):
    drv = fakesys.Driver(tree)
    drv.sim.start_training(get_workload("resnet18"))
    for _ in range(10):
        drv.step()
    be = SysfsBackend(ORIN, root=tree)
    assert len(be.rails) == len(ORIN.rails)                   # each channel read once, not twice
    t = be.read()
    assert set(t.rails) == set(ORIN.rails)                    # NC channels skipped
    assert t.power_w == pytest.approx(sum(t.rails.values()), abs=0.01)
    assert t.power_w == pytest.approx(drv.sim.read().power_w, rel=0.05)
    assert (t.cpu_mhz, t.gpu_mhz, t.mem_mhz, t.cores_online) == (1728.0, 624.75, 3199.0, 8)
    assert t.nvpmodel == "MODE_30W"
    assert "CV0" not in t.temps and 30 < t.temps["GPU"] < 90
    assert be.current_mode() == ORIN.preset("MODE_30W").mode
    be.close()


def test_missing_sensors_are_none_not_errors(tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    t = SysfsBackend(ORIN, root=root).read()
    assert t.power_w is None and t.rails == {} and t.gpu_mhz is None and t.temps == {}
    with pytest.raises(BackendError, match="debugfs needs root"):
        SysfsBackend(ORIN, root=root).current_mode()


def test_plan_order_is_legal(tree):
    be = SysfsBackend(ORIN, root=tree)
    up = be.plan_writes(ORIN.maxn)                      # from 8c/1728/624.75 to 12c/2201.6/1300.5
    assert up[0].endswith("# bring cpu8 online")
    i_max, i_min = (next(i for i, s in enumerate(up) if f"cpu0/cpufreq/{f}" in s)
                    for f in ("scaling_max_freq", "scaling_min_freq"))
    assert i_max < i_min                                # raising: max before min
    low = be.plan_writes(ORIN.mode(2, 268.8, 114.75, 204))
    i_max, i_min = (next(i for i, s in enumerate(low) if f"devfreq/17000000.gpu/{f}" in s)
                    for f in ("max_freq", "min_freq"))
    assert i_min < i_max                                # lowering: min before max
    offline = [i for i, s in enumerate(low) if "offline" in s]
    assert len(offline) == 6 and min(offline) > i_max    # cores go offline after the clocks
    assert "mrq_rate_locked" in " ".join(low)
    assert "read back" in low[-1]


def test_apply_verify_restore_and_power_responds(tree):
    drv = fakesys.Driver(tree)
    drv.sim.start_training(get_workload("resnet18"))
    be = SysfsBackend(ORIN, root=tree)
    for _ in range(8):
        drv.step()
    before_files = {p: p.read_text().strip() for p in tree.rglob("*") if p.is_file() and "online" in p.name}
    p_before = be.read().power_w
    res = apply_mode(be, ORIN.mode(4, 729.6, 318.75, 665.6))
    assert res.ok, res.message
    assert fakesys.read_mode(tree) == ORIN.mode(4, 729.6, 318.75, 665.6)
    for _ in range(10):
        drv.step()
    assert be.read().power_w < 0.7 * p_before           # the emulated board responds
    be.restore(res.snapshot)
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_30W").mode
    assert {p: p.read_text().strip() for p in before_files} == before_files


def test_failing_write_rolls_back(tree, monkeypatch):
    be = SysfsBackend(ORIN, root=tree)
    orig = be._write

    def flaky(path, value):
        if path.name == "max_freq" and "devfreq" in str(path) and value == "1300500000":
            raise OSError(22, "Invalid argument")
        orig(path, value)

    monkeypatch.setattr(be, "_write", flaky)
    res = apply_mode(be, ORIN.maxn)
    assert not res.ok and "Invalid argument" in res.message and "rolled back" in res.message
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_30W").mode     # cores 8..11 offline again


def test_kernel_rounding_is_caught(tree, monkeypatch):
    be = SysfsBackend(ORIN, root=tree)
    orig = be._write

    def rounding(path, value):
        orig(path, "2133000000" if path.name == "rate" and value == "204000000" else value)

    monkeypatch.setattr(be, "_write", rounding)
    with pytest.raises(ApplyError, match="read-back mismatch.*rate"):
        be.apply_mode(ORIN.mode(8, 1728, 624.75, 204))
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_30W").mode


def test_no_root_says_sudo(tree, monkeypatch):
    be = SysfsBackend(ORIN, root=tree)

    def denied(path, value):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(be, "_write", denied)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(BackendError, match="needs root.*sudo"):
        be.apply_mode(ORIN.maxn)


def test_a_file_that_refuses_root_is_said_so_and_the_rollback_goes_on_past_it(tree, monkeypatch):
    """As root, the GPU's max_freq made immutable (chattr +i): ptui said 'needs root: run it again
    with sudo', and its rollback rewrote that file (never changed) first, failed, and stopped with
    cores 8-11 still online (a user's trial).  Now: said as what it is, a file already at its
    value is not rewritten, and a failed write does not stop the rest."""
    before = fakesys.read_mode(tree)                     # MODE_30W: 8 cores
    be = SysfsBackend(ORIN, root=tree)
    fakesys.immutable_gpu_max(be, monkeypatch)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    res = apply_mode(be, ORIN.mode(12, 1728, 1300.5, 3199))
    assert not res.ok and "immutable file" in res.message and "sudo" not in res.message
    assert res.message.count("rolled back") == 1, res.message      # said once
    assert fakesys.read_mode(tree) == before            # the four cores offline again
    # a restore that cannot write a file it must change goes on with the others and names it
    be2 = SysfsBackend(ORIN, root=tree)
    snap = be2._state()
    be2.apply_mode(ORIN.mode(12, 1728, 1300.5, 3199))
    fakesys.immutable_gpu_max(be2, monkeypatch)
    with pytest.raises(ApplyError, match="restore: writing .*max_freq failed"):
        be2.restore(snap)
    assert fakesys.read_mode(tree).cores == 8            # the cores went back all the same


def test_persist_writes_nvpmodel_conf(tree, tmp_path):
    conf = tree / "etc/nvpmodel.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)   # the tree has its own conf: replaced
    conf.write_text("< POWER_MODEL ID=0 NAME=MAXN >\nCPU_ONLINE CORE_1 1\n\n< PM_CONFIG DEFAULT=2 >\n")
    log = tmp_path / "nvp.log"
    fake = tmp_path / "nvpmodel"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")
    fake.chmod(0o755)
    be = SysfsBackend(ORIN, root=tree, nvpmodel_cmd=str(fake))
    msg = be.persist(ORIN.mode(4, 729.6, 318.75, 665.6))
    text = conf.read_text()
    assert "< POWER_MODEL ID=99 NAME=PTUI >" in text and "GPU MAX_FREQ 318750000" in text
    assert "CPU_A78_0 MIN_FREQ 729600" in text and "CPU_A78_1" not in text   # cluster 1 offline
    assert "EMC MAX_FREQ 665600000" in text and "CPU_ONLINE CORE_4 0" in text
    assert text.index("ID=99") < text.index("< PM_CONFIG")
    assert (tree / "etc/nvpmodel.conf.ptui-backup").read_text().startswith("< POWER_MODEL ID=0")
    assert log.read_text().strip() == "-m 99" and "survives a reboot" in msg
    be.persist(ORIN.maxn)                                  # replaces, does not duplicate
    assert conf.read_text().count("ID=99") == 1 and "EMC MAX_FREQ 0" in conf.read_text()


def test_cli_apply_dry_run_apply_restore(tree, cli):
    args = ["--backend", "sysfs", "--sysfs-root", tree, "--cores", "4", "--cpu-mhz", "729.6",
            "--gpu-mhz", "318.75", "--mem-mhz", "665.6"]
    rc, out, err = cli("apply", *args, "--dry-run")
    assert rc == 0 and "dry run: nothing written" in out and "scaling_min_freq" in out
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_30W").mode
    rc, out, err = cli("apply", *args)
    assert rc == 2 and "--yes" in err                            # no tty: never silently applies
    rc, out, err = cli("apply", *args, "--yes")
    assert rc == 0, err
    assert f"applied and verified: {ORIN.mode(4, 729.6, 318.75, 665.6).describe()}" in out
    assert fakesys.read_mode(tree) == ORIN.mode(4, 729.6, 318.75, 665.6)
    rc, out, err = cli("restore", "--backend", "sysfs", "--sysfs-root", tree)
    assert rc == 0 and "restored" in out
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_30W").mode


def test_cli_apply_rejects_off_table_and_wrong_device(tree, cli):
    rc, _, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, "--cores", "4",
                     "--cpu-mhz", "1000", "--gpu-mhz", "318.75", "--mem-mhz", "665.6", "--yes")
    assert rc == 2 and "valid values" in err
    rc, _, err = cli("apply", "--backend", "sim", "--device", "orin-nano", "--cores", "12",
                     "--cpu-mhz", "2201.6", "--gpu-mhz", "1300.5", "--mem-mhz", "3199", "--yes")
    assert rc == 2 and "not available on orin-nano" in err


def test_preset_through_nvpmodel_and_restore(tree, tmp_path, cli):
    nvp = fakesys.install_nvpmodel(tmp_path / "bin", tree)
    be = SysfsBackend(ORIN, root=tree, nvpmodel_cmd=str(nvp))
    snap = be.snapshot()
    assert be.apply_preset("MODE_15W") == ORIN.preset("MODE_15W").mode
    assert be.read().nvpmodel == "MODE_15W" and fakesys.read_mode(tree).cores == 4
    be.restore(snap)
    assert be.read().nvpmodel == "MODE_30W"
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_30W").mode


def test_apply_persist_json_changes_nothing_once_nvpmodel_keeps_that_mode(emulated_board, cli):
    """A playbook runs `apply --persist --dry-run --json` on every run: once nvpmodel already keeps
    the mode (its status file names ptui's custom mode, and nvpmodel.conf holds this very mode) and
    the board is held in it, nothing would change; a custom --persist counted as a change always,
    so a fleet never converged."""
    import json
    root, _ = emulated_board
    args = ["apply", "--backend", "sysfs", "--sysfs-root", root, "--cores", "4", "--cpu-mhz", "729.6",
            "--gpu-mhz", "318.75", "--mem-mhz", "665.6", "--persist", "--json"]

    def run(*more):
        rc, out, err = cli(*args, *more)
        assert rc == 0, err
        return json.loads(out)
    assert run("--dry-run")["changed"]
    first = run("--yes")
    assert first["changed"] and first["applied"] and "saved as nvpmodel 99" in first["persist"]
    conf = root / "etc/nvpmodel.conf"
    kept = conf.stat().st_mtime_ns
    assert run("--dry-run")["changed"] is False
    again = run("--yes")
    assert again["changed"] is False and again["applied"] is False and "already keeps" in again["persist"]
    assert conf.stat().st_mtime_ns == kept                            # not rewritten
    # nvpmodel keeps another mode under ptui's id: a change again
    conf.write_text(conf.read_text().replace("GPU MAX_FREQ 318750000", "GPU MAX_FREQ 420750000"))
    assert run("--dry-run")["changed"]
    # the mode itself, persisted, but the board read in another one: a change (the apply)
    rc, _, err = cli("apply", "--backend", "sysfs", "--sysfs-root", root, "--cores", "4", "--cpu-mhz",
                     "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6", "--persist", "--yes")
    assert rc == 0, err
    rc, _, err = cli("apply", "--backend", "sysfs", "--sysfs-root", root, "--cores", "4", "--cpu-mhz",
                     "729.6", "--gpu-mhz", "420.75", "--mem-mhz", "665.6", "--yes")
    assert rc == 0, err
    assert run("--dry-run")["changed"]


def test_a_frequency_file_caught_mid_write_is_read_again(tree, monkeypatch):
    """In an emulated tree (regular files) a write from another thread truncates the file before
    it writes it: a read in between got nothing, and the Flower hold's step failed with 'cannot
    read the current mode' under load.  An empty read is tried again; a file that stays empty is
    still an error."""
    be = SysfsBackend(ORIN, root=tree)
    real = be._pread
    empty_reads = {"n": 2}

    def pread(path):
        if path.name == "max_freq" and empty_reads["n"] > 0:
            empty_reads["n"] -= 1
            return ""                                  # caught between the truncate and the write
        return real(path)
    monkeypatch.setattr(be, "_pread", pread)
    assert be.current_mode() == ORIN.preset("MODE_30W").mode
    monkeypatch.setattr(be, "_pread", lambda path: "" if path.name == "max_freq" else real(path))
    with pytest.raises(BackendError, match="max_freq is missing or not a number"):
        be.current_mode()
    be.close()


def test_nvpmodel_runs_in_a_session_of_its_own(tmp_path):
    """Ctrl-C in the terminal reaches the whole foreground process group: nvpmodel, run in ptui's,
    could be cut half-way through a preset while ptui held the signal until the switch was done.
    It now runs in a session of its own, out of the terminal's reach."""
    import os
    import stat
    root = fakesys.build(tmp_path / "root")
    seen = tmp_path / "sid"
    fake = tmp_path / "nvpmodel"
    # the session id is /proc/PID/stat's sixth field (read with the shell's builtin alone)
    fake.write_text(f"#!/bin/sh\nread -r _ _ _ _ _ sid _ < /proc/$$/stat\necho $sid > {seen}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    SysfsBackend(get_device("orin-agx"), root=root, nvpmodel_cmd=str(fake)).run_nvpmodel(2)
    sid = int(seen.read_text().split()[0])
    assert sid != os.getsid(0) and sid > 0


def test_an_apply_on_the_emulated_board_says_emulated_even_under_q(emulated_board, cli):
    """`ptui -q --backend sysfs --sysfs-root DIR apply ... --yes` on ptui emulate's tree said
    'applied and verified: ...; undo with: ptui restore' as on a Jetson: -q hides the line naming
    the emulated board, and the simulator's board says 'on the SIMULATED board' (a user trial).
    A preset's line too; --json says simulated."""
    import json
    root, _ = emulated_board
    on = ("-q", "--backend", "sysfs", "--sysfs-root", root)
    rc, out, err = cli(*on, "apply", "--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75",
                       "--mem-mhz", "665.6", "--yes")
    assert rc == 0, err
    said = out.strip().splitlines()[-1]
    assert said.startswith("applied and verified") and "on the EMULATED board (SIMULATED)" in said, out
    assert said.endswith("undo with: ptui restore")
    rc, out, err = cli(*on, "apply", "--preset", "MODE_15W", "--yes")
    assert rc == 0 and "MODE_15W" in out and "on the EMULATED board (SIMULATED)" in out, out + err
    rc, out, err = cli(*on, "apply", "--preset", "MODE_30W", "--yes", "--json")
    assert rc == 0 and json.loads(out)["simulated"] is True


def test_a_restore_on_the_emulated_board_says_emulated_even_under_q(emulated_board, cli):
    """restore on ptui emulate's tree said 'the board reads back ...' as on a Jetson (-q hides
    the line naming the emulated board): it says 'the EMULATED board reads back ...'."""
    root, _ = emulated_board
    on = ("-q", "--backend", "sysfs", "--sysfs-root", root)
    rc, out, err = cli(*on, "apply", "--preset", "MODE_15W", "--yes")
    assert rc == 0, err
    rc, out, err = cli(*on, "restore")
    assert rc == 0 and "the EMULATED board reads back" in out, out + err
