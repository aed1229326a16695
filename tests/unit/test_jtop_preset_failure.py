"""jtop backend: a preset the service does not reach is rolled back and reported as an ApplyError
(it raised NameError: ApplyError was never imported in jtop.py)."""
import pytest

from ptui.core.board.backends.base import ApplyError
from ptui.core.board.backends.jtop import JtopBackend
from ptui.core.board.backends.sysfs import SysfsBackend
from ptui.core.catalogue.devices import get_device
from tests.support import fakesys

ORIN = get_device("orin-agx")


def test_preset_not_reached_rolls_back_and_says_so(tmp_path):
    root = fakesys.build(tmp_path / "root")
    be = JtopBackend.__new__(JtopBackend)            # no service here: only the preset logic runs
    be.device = ORIN
    be._sysfs = SysfsBackend(ORIN, root=root)
    _attach(be, _Client())                            # an idle service (restore asks it)
    before = be._sysfs.current_mode()
    be._select_nvpmodel = lambda pid, timeout: "never reported"   # the service never reports it
    with pytest.raises(ApplyError, match="not reached through jtop.*rolled back"):
        be.apply_preset("MAXN", timeout=0.1)
    assert be._sysfs.current_mode() == before


def _backend(tmp_path):
    root = fakesys.build(tmp_path / "root")
    be = JtopBackend.__new__(JtopBackend)
    be.device = ORIN
    be._sysfs = SysfsBackend(ORIN, root=root)
    be._sysfs.nvpmodel_cmd = str(tmp_path / "no-such-nvpmodel")     # only the service has nvpmodel
    _attach(be, _Client())                            # an idle service (restore asks it)
    return be, root


def _attach(be, client, stale_s=0.5):
    import time
    be._j, be._jtop_exc = client, RuntimeError
    be.stale_s, be._last_uptime, be._last_new = stale_s, None, time.monotonic()


def test_jtop_restore_leaves_nvpmodel_to_the_service(tmp_path):
    """The service says it switched back but the board's status file still names the other
    preset (it lags): the restore wrote the exact values through sysfs and then ran the nvpmodel
    command itself, which a jtop user need not have ('nvpmodel was not found', seen in CI)."""
    be, root = _backend(tmp_path)
    snap = be._sysfs.snapshot()
    before = be._sysfs.current_mode()
    (root / "var/lib/nvpmodel/status").write_text("pmode:0001 fmode:quiet\n")
    asked = []
    be._select_nvpmodel = lambda pid, timeout: asked.append(pid)     # None: the service reports it
    be.restore(snap)
    assert asked == [snap["nvpmodel"]]
    assert be._sysfs.current_mode() == before


def test_a_failed_rollback_after_a_preset_keeps_the_first_cause(tmp_path):
    """The preset is not reached and the rollback fails too: the user is told both, the first
    cause first (only the rollback's error was shown)."""
    from ptui.core.board.backends.base import BackendError
    be, _ = _backend(tmp_path)
    be._select_nvpmodel = lambda pid, timeout: "never reported"

    def broken(snap):
        raise BackendError("jtop did not switch back to nvpmodel 2")
    be.restore = broken
    with pytest.raises(ApplyError, match=r"not reached through jtop.*rolling back failed.*switch back"):
        be.apply_preset("MAXN", timeout=0.1)


# -- the service's own reports: a failed nvpmodel run, a sampler that stopped ------------------------
class _Nvp:
    def __init__(self, mode_id):
        self.id = mode_id
        self.status = [True] * len(ORIN.presets)     # the service's success flag per mode
        self.running = False

    def is_running(self):
        return self.running


class _Client:
    """Plays jtop's client: `nvpmodel = N` asks the service, `switch` says what the service does;
    each ok() brings a new sample (a new uptime) unless the sampler is `frozen`."""

    def __init__(self, mode_id=2, switch=None, frozen=False):
        self._nvp = _Nvp(mode_id)
        self.switch = switch or (lambda nvp, n: setattr(nvp, "id", n))
        self.frozen = frozen
        self.up = 100.0
        self.asked = []

    def ok(self, spin=False):
        if not self.frozen:
            self.up += 0.5
        return True

    @property
    def uptime(self):
        return self.up

    @property
    def nvpmodel(self):
        return self._nvp

    @nvpmodel.setter
    def nvpmodel(self, n):
        self.asked.append(n)
        self.switch(self._nvp, n)


def _with_client(tmp_path, client, stale_s=0.5):
    be, root = _backend(tmp_path)
    _attach(be, client, stale_s)
    return be, root


def _fails(nvp, n):
    """The service runs nvpmodel -m n in its thread, the command fails: the flag goes down."""
    nvp.status[n] = False


def test_a_switch_the_service_reports_failed_ends_the_wait_at_once(tmp_path):
    """jtop's nvpmodel -m failed: ptui said so only after waiting the whole 30 s, as 'not reached
    within 30 s' (CI showed that message); now the service's failure flag ends the wait."""
    import time
    be, _ = _with_client(tmp_path, _Client(switch=_fails))
    before = be._sysfs.current_mode()
    t0 = time.monotonic()
    with pytest.raises(ApplyError, match=r"MODE_15W not reached through jtop: the jtop service ran "
                                         r"nvpmodel -m 1 and it failed.*rolled back"):
        be.apply_preset("MODE_15W", timeout=20.0)
    assert time.monotonic() - t0 < 3.0
    assert be._sysfs.current_mode() == before


def test_an_old_failure_flag_is_not_taken_for_this_request(tmp_path):
    """The flag was already down from an earlier failed run and the service has not run this
    request yet: no early failure; the switch succeeds a moment later."""
    calls = []

    def later(nvp, n):
        calls.append(n)
    client = _Client(switch=later)
    client._nvp.status[1] = False
    be, _ = _with_client(tmp_path, client, stale_s=5.0)
    import threading
    threading.Timer(0.4, lambda: (setattr(client._nvp, "id", 1), client._nvp.status.__setitem__(1, True))).start()
    assert be._select_nvpmodel(1, timeout=3.0) is None
    assert calls == [1]


def test_a_service_that_stopped_sampling_is_refused(tmp_path):
    """One failed `nvpmodel -q` stops the genuine service's sampler and its clients keep the last
    sample forever (measured with jetson-stats against the emulated board): ptui read the frozen
    power as if it were live."""
    import time

    from ptui.core.board.backends.base import BackendError
    be, _ = _with_client(tmp_path, _Client(frozen=True), stale_s=0.3)
    be._sample()                                       # the last sample, not yet known to be old
    time.sleep(0.4)
    with pytest.raises(BackendError, match=r"jtop service has sent no new sample for \d+ s"):
        be._sample()


def test_a_frozen_service_during_a_preset_rolls_the_board_back(tmp_path):
    """The sampler stops after the request is out (the service switched the board): ptui stops
    waiting, puts the board back and says why."""
    be, root = _with_client(tmp_path, None, stale_s=0.3)

    def switch_then_freeze(nvp, n):
        p = ORIN.presets[n]
        be._sysfs.apply_mode(p.mode)                       # the service's nvpmodel ran...
        (root / "var/lib/nvpmodel/status").write_text(f"pmode:{n:04d} fmode:quiet\n")
        be._j.frozen = True                                # ...and its next `nvpmodel -q` failed
    be._j = _Client(switch=switch_then_freeze)
    before = be._sysfs.current_mode()
    be._sysfs.nvpmodel_cmd = str(fakesys.install_nvpmodel(tmp_path / "bin", root))   # ptui runs it
    with pytest.raises(ApplyError, match=r"not reached through jtop: the jtop service has sent no new "
                                         r"sample.*rolled back"):
        be.apply_preset("MODE_15W", timeout=10.0)
    assert be._sysfs.current_mode() == before
    assert "pmode:0002" in (root / "var/lib/nvpmodel/status").read_text()


def test_restore_runs_nvpmodel_itself_when_the_service_cannot(tmp_path):
    """The service fails to switch back: the board was left with the other preset in its status
    file ('rolled back' all the same); now ptui runs nvpmodel itself, then the exact values."""
    be, root = _with_client(tmp_path, _Client(mode_id=1, switch=_fails))
    snap = be._sysfs.snapshot()
    before = be._sysfs.current_mode()
    be._sysfs.nvpmodel_cmd = str(fakesys.install_nvpmodel(tmp_path / "bin", root))
    be._sysfs.apply_mode(ORIN.presets[1].mode)
    (root / "var/lib/nvpmodel/status").write_text("pmode:0001 fmode:quiet\n")
    be.restore(snap)
    assert be._sysfs.current_mode() == before
    assert "pmode:0002" in (root / "var/lib/nvpmodel/status").read_text()


def test_restore_without_any_nvpmodel_still_puts_the_values_back_and_says_so(tmp_path):
    from ptui.core.board.backends.base import BackendError
    be, root = _with_client(tmp_path, _Client(mode_id=1, switch=_fails))   # no nvpmodel for ptui
    snap = be._sysfs.snapshot()
    before = be._sysfs.current_mode()
    be._sysfs.apply_mode(ORIN.presets[1].mode)
    (root / "var/lib/nvpmodel/status").write_text("pmode:0001 fmode:quiet\n")
    with pytest.raises(BackendError, match=r"nvpmodel 2 could not be restored: the jtop service ran "
                                           r"nvpmodel -m 2 and it failed.*; running nvpmodel here failed "
                                           r"too \(nvpmodel was not found.*status says 1"):
        be.restore(snap)
    assert be._sysfs.current_mode() == before


def _slow_switch(be, root, secs):
    """The service's nvpmodel run takes `secs`: meanwhile it reports the old mode and is running;
    then the board, its status file and the report change together."""
    import threading

    def switch(nvp, n):
        nvp.running = True

        def done():
            be._sysfs.apply_mode(ORIN.presets[n].mode)
            (root / "var/lib/nvpmodel/status").write_text(f"pmode:{n:04d} fmode:quiet\n")
            nvp.id, nvp.running = n, False
        threading.Timer(secs, done).start()
    return switch


def test_a_rollback_waits_for_a_switch_still_running(tmp_path):
    """The preset timed out while the service was still running its nvpmodel switch: the restore
    saw the old status file, wrote the old values and said 'rolled back', and then the switch
    landed, leaving the board in the preset the user had rolled back from (found by review)."""
    import time
    be, root = _with_client(tmp_path, None, stale_s=5.0)
    be._j = _Client(switch=_slow_switch(be, root, 0.8))
    before = be._sysfs.current_mode()
    with pytest.raises(ApplyError, match=r"MODE_15W not reached through jtop.*rolled back") as e:
        be.apply_preset("MODE_15W", timeout=0.3)
    time.sleep(1.2)                                   # any switch still in flight has landed
    assert "pmode:0002" in (root / "var/lib/nvpmodel/status").read_text()
    assert be._sysfs.current_mode() == before
    assert be._j.asked == [1, 2]
    assert "still running nvpmodel -m 1 after 0 s" in str(e.value)


def test_a_lost_connection_mid_preset_rolls_back_with_one_line(tmp_path):
    """The service died after the request was out: the client's pipe raised BrokenPipeError, which
    went past the rollback as a traceback (found by review)."""
    be, root = _with_client(tmp_path, None)

    def switch_then_die(nvp, n):
        be._sysfs.apply_mode(ORIN.presets[n].mode)       # the switch landed on the board...

        def dead(spin=False):
            raise BrokenPipeError(32, "Broken pipe")     # ...and the service went away
        be._j.ok = dead
    be._j = _Client(switch=switch_then_die)
    before = be._sysfs.current_mode()
    with pytest.raises(ApplyError, match=r"not reached through jtop: jtop: \[Errno 32\] Broken pipe") as e:
        be.apply_preset("MODE_15W", timeout=5.0)
    assert "\n" not in str(e.value)
    assert be._sysfs.current_mode() == before
