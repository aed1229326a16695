"""jtop backend: a preset the service does not reach is rolled back and reported as an ApplyError
(it raised NameError: ApplyError was never imported in jtop.py)."""
import pytest

from ptui.core.backends.base import ApplyError
from ptui.core.backends.jtop import JtopBackend
from ptui.core.backends.sysfs import SysfsBackend
from ptui.core.devices import get_device
from tests.support import fakesys

ORIN = get_device("orin-agx")


def test_preset_not_reached_rolls_back_and_says_so(tmp_path):
    root = fakesys.build(tmp_path / "root")
    be = JtopBackend.__new__(JtopBackend)            # no service here: only the preset logic runs
    be.device = ORIN
    be._sysfs = SysfsBackend(ORIN, root=root)
    before = be._sysfs.current_mode()
    be._select_nvpmodel = lambda pid, timeout: False   # the service never reports the new mode
    with pytest.raises(ApplyError, match="not reached through jtop.*rolled back"):
        be.apply_preset("MAXN", timeout=0.1)
    assert be._sysfs.current_mode() == before


def _backend(tmp_path):
    root = fakesys.build(tmp_path / "root")
    be = JtopBackend.__new__(JtopBackend)
    be.device = ORIN
    be._sysfs = SysfsBackend(ORIN, root=root)
    be._sysfs.nvpmodel_cmd = str(tmp_path / "no-such-nvpmodel")     # only the service has nvpmodel
    return be, root


def test_jtop_restore_leaves_nvpmodel_to_the_service(tmp_path):
    """The service says it switched back but the board's status file still names the other
    preset (it lags): the restore wrote the exact values through sysfs and then ran the nvpmodel
    command itself, which a jtop user need not have ('nvpmodel was not found', seen in CI)."""
    be, root = _backend(tmp_path)
    snap = be._sysfs.snapshot()
    before = be._sysfs.current_mode()
    (root / "var/lib/nvpmodel/status").write_text("pmode:0001 fmode:quiet\n")
    asked = []
    be._select_nvpmodel = lambda pid, timeout: asked.append(pid) or True
    be.restore(snap)
    assert asked == [snap["nvpmodel"]]
    assert be._sysfs.current_mode() == before


def test_a_failed_rollback_after_a_preset_keeps_the_first_cause(tmp_path):
    """The preset is not reached and the rollback fails too: the user is told both, the first
    cause first (only the rollback's error was shown)."""
    from ptui.core.backends.base import BackendError
    be, _ = _backend(tmp_path)
    be._select_nvpmodel = lambda pid, timeout: False

    def broken(snap):
        raise BackendError("jtop did not switch back to nvpmodel 2")
    be.restore = broken
    with pytest.raises(ApplyError, match=r"not reached through jtop.*rolling back failed.*switch back"):
        be.apply_preset("MAXN", timeout=0.1)
