"""The JSON contract (ptui.core.contract): status, apply --dry-run/--json and restore --json on an
emulated sysfs tree and on the simulator; every document has schema_version and command."""
import json

import pytest

from ptui.core import contract, locks
from ptui.core.backends.sysfs import SysfsBackend
from ptui.core.devices import get_device
from tests.support import fakesys

ORIN = get_device("orin-agx")
TARGET = ORIN.mode(4, 729.6, 318.75, 665.6)
MODE = ["--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6"]


@pytest.fixture
def tree(tmp_path):
    return fakesys.build(tmp_path / "root")


def _doc(out, command):
    d = json.loads(out)
    assert d["schema_version"] == contract.SCHEMA_VERSION and d["command"] == command
    return d


def test_status_on_a_board_says_mode_preset_lock_and_what_restore_would_undo(tree, cli):
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    rc, out, err = cli("status", *sysfs, "--json")
    assert rc == 0, err
    d = _doc(out, "status")
    start = fakesys.read_mode(tree)
    assert d["key"] == start.key and d["preset"] == "MODE_30W" and d["nvpmodel_id"] is not None
    assert d["emulated"] is True and d["simulated"] is True and d["board"].startswith("ptui-orin-agx")
    assert d["lock_holder"] is None and d["restore"] is None and d["restore_problem"] is None
    rc, _, err = cli("apply", *sysfs, *MODE, "--yes")
    assert rc == 0, err
    d = _doc(cli("status", *sysfs, "--json")[1], "status")
    assert d["key"] == TARGET.key and d["preset"] is None
    assert d["restore"]["kind"] == "last-apply" and d["restore"]["mode"] == start.key
    rc, out, _ = cli("status", *sysfs)
    assert rc == 0 and "would put back the state before the last ptui apply" in out
    assert "not an nvpmodel preset" in out and "lock: free" in out
    # while another process drives the board, status names it (and writes nothing)
    be = SysfsBackend(ORIN, root=tree)
    with locks.board_lock(be):
        d = _doc(cli("status", *sysfs, "--json")[1], "status")
    assert d["lock_holder"] is not None


def test_apply_dry_run_json_says_whether_anything_would_change(tree, cli):
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    rc, out, err = cli("apply", *sysfs, *MODE, "--dry-run", "--json")
    assert rc == 0, err
    d = _doc(out, "apply")
    assert d["changed"] is True and d["dry_run"] is True and d["applied"] is False
    assert d["to_key"] == TARGET.key and fakesys.read_mode(tree) != TARGET      # nothing written
    rc, out, err = cli("apply", *sysfs, *MODE, "--yes", "--json")
    d = _doc(out, "apply")
    assert rc == 0 and d["applied"] is True and d["readback_key"] == TARGET.key, err
    assert fakesys.read_mode(tree) == TARGET
    # a second run changes nothing and says so: automation reports changed=0
    d = _doc(cli("apply", *sysfs, *MODE, "--dry-run", "--json")[1], "apply")
    assert d["changed"] is False
    rc, out, _ = cli("apply", *sysfs, *MODE, "--yes", "--json")
    d = _doc(out, "apply")
    assert rc == 0 and d["changed"] is False and d["applied"] is False and d["readback_key"] == TARGET.key
    # the apply that did nothing left the first apply's record: restore goes back to the start
    rc, out, err = cli("restore", *sysfs, "--json")
    d = _doc(out, "restore")
    assert rc == 0 and d["restored"] is True and d["key"] == fakesys.read_mode(tree).key != TARGET.key


def test_a_preset_the_board_is_in_would_change_nothing(tree, cli):
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    d = _doc(cli("apply", *sysfs, "--preset", "MODE_30W", "--dry-run", "--json")[1], "apply")
    assert d["changed"] is False and d["preset"] == "MODE_30W"
    d = _doc(cli("apply", *sysfs, "--preset", "MODE_15W", "--dry-run", "--json")[1], "apply")
    assert d["changed"] is True


def test_apply_json_without_yes_or_dry_run_is_refused_in_one_line(tree, cli):
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, *MODE, "--json")
    assert rc == 2 and out == "" and "add --yes" in err and "Traceback" not in err
    assert fakesys.read_mode(tree) != TARGET


def test_status_on_the_simulator_is_labelled(cli):
    rc, out, err = cli("status", "--backend", "sim", "--device", "orin-nano", "--json")
    d = _doc(out, "status")
    assert rc == 0 and d["simulated"] is True and d["board"] is None and d["device"] == "orin-nano"
