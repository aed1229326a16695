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
