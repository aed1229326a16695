"""End to end: the genuine jetson-stats service on an emulated Orin AGX tree driven by the simulator.

ptui's jtop and sysfs backends read what the simulator writes; `ptui apply` through sysfs changes the
tree, the emulated power responds (seen through jtop), and `ptui restore` puts everything back.
"""
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import fakesys
from tests.support.jtop_fixture import JtopService, exclusive, unavailable

# one jtop service per machine (/run/jtop.sock, /fake_sys): under pytest-xdist these tests run on
# one worker (--dist loadgroup), one after another
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("jtop")]

WHY = unavailable()
needs_service = pytest.mark.skipif(WHY is not None, reason=f"jtop end-to-end test: {WHY}")


def ptui(*args, tmp):
    from tests.support.cli import subprocess_env
    r = subprocess.run([sys.executable, "-m", "ptui", *map(str, args)], capture_output=True, text=True,
                       env=subprocess_env(tmp), timeout=300)
    return r.returncode, r.stdout, r.stderr


def service_log(root) -> str:
    """The end of the jtop service's log, for a failure message (what the service saw)."""
    log = Path(root) / "jtop-service.log"
    lines = [ln for ln in (log.read_text(errors="replace") if log.exists() else "").splitlines()
             if "Number of CPU online changed" not in ln]
    return "\n--- jtop service log (end) ---\n" + "\n".join(lines[-25:])


@pytest.fixture
def board(emulated_board, tmp_path):
    root, drv = emulated_board
    svc = JtopService(root, bin_dir=tmp_path / "bin")
    fakesys.install_nvpmodel(tmp_path / "bin", root)
    svc.start()
    yield root, drv
    svc.stop()


@pytest.fixture
def faulty_board(emulated_board, tmp_path):
    """The service's nvpmodel fails for MODE_15W (exit 1 after changing the CPU clocks)."""
    root, drv = emulated_board
    svc = JtopService(root, bin_dir=tmp_path / "bin")
    fakesys.install_faulty_nvpmodel(tmp_path / "bin", root, "exit1", on_ids=(1,))
    svc.start()
    yield root, drv
    svc.stop()


def settle(be, pred, timeout=120.0):
    """The first reading that satisfies pred (the emulated board follows its knobs from a thread
    in this process, slow on a loaded machine), else the last one after `timeout` (generous: a
    reading that comes true returns at once, so only a failing check waits it out)."""
    end = time.time() + timeout
    while time.time() < end:
        t = be.read()
        if pred(t):
            return t
        time.sleep(0.2)
    return be.read()


@pytest.mark.slow
@needs_service
def test_jtop_sysfs_apply_restore(board, tmp_path):
    from ptui.core.board.backends.jtop import JtopBackend
    from ptui.core.board.backends.sysfs import SysfsBackend
    from ptui.core.catalogue.devices import get_device
    root, drv = board
    orin = get_device("orin-agx")
    jt = JtopBackend(orin, interval=0.2, root=root)
    sf = SysfsBackend(orin, root=root)
    try:
        t = settle(jt, lambda t: t.power_w and t.power_w > 22)     # resnet18, MODE_30W (4 TPCs)
        assert set(t.rails) == set(orin.rails)
        assert t.power_w == pytest.approx(drv.sim.read().power_w, rel=0.1)
        assert t.power_w == pytest.approx(sf.read().power_w, rel=0.1)
        assert (t.cores_online, t.cpu_mhz, t.gpu_mhz, t.mem_mhz) == (8, 1728.0, 624.75, 3199.0)
        assert "GPU" in t.temps
        high = t.power_w
        rc, out, err = ptui("apply", "--backend", "jtop", "--sysfs-root", root, "--cores", "4",
                            "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6", "--yes",
                            tmp=tmp_path)
        assert rc == 0, err + service_log(root)
        assert fakesys.read_mode(root) == orin.mode(4, 729.6, 318.75, 665.6)
        low = settle(jt, lambda t: (t.cores_online, t.cpu_mhz, t.gpu_mhz) == (4, 729.6, 318.75)
                     and t.power_w < 0.7 * high)
        assert low.cores_online == 4 and low.cpu_mhz == 729.6 and low.gpu_mhz == 318.75
        assert low.power_w < 0.7 * high                       # the emulated board responds
        rc, out, err = ptui("restore", "--backend", "jtop", "--sysfs-root", root, tmp=tmp_path)
        assert rc == 0 and "restored" in out, err + service_log(root)
        back = settle(jt, lambda t: t.cores_online == 8 and t.cpu_mhz == 1728.0 and t.power_w > 0.9 * high)
        assert (back.cores_online, back.cpu_mhz, back.gpu_mhz, back.mem_mhz) == (8, 1728.0, 624.75, 3199.0)
        # an NVIDIA preset, selected through the jtop service's nvpmodel control
        assert settle(jt, lambda t: t.nvpmodel == "MODE_30W").nvpmodel == "MODE_30W"
        rc, out, err = ptui("apply", "--backend", "jtop", "--sysfs-root", root, "--preset", "MODE_15W",
                            "--yes", tmp=tmp_path)
        assert rc == 0 and "selected MODE_15W" in out, err + service_log(root)
        p15 = settle(jt, lambda t: (t.nvpmodel, t.cores_online, t.cpu_mhz) == ("MODE_15W", 4, 1113.6))
        assert (p15.nvpmodel, p15.cores_online, p15.cpu_mhz) == ("MODE_15W", 4, 1113.6)
        rc, out, err = ptui("restore", "--backend", "jtop", "--sysfs-root", root, tmp=tmp_path)
        assert rc == 0, err + service_log(root)
        again = settle(jt, lambda t: (t.nvpmodel, t.cores_online, t.cpu_mhz) == ("MODE_30W", 8, 1728.0))
        assert (again.nvpmodel, again.cores_online, again.cpu_mhz) == ("MODE_30W", 8, 1728.0)
    finally:
        jt.close()
        sf.close()


@needs_service
def test_jtop_nvpmodel_failure_is_reported_at_once_and_rolled_back(faulty_board, tmp_path):
    """The service's nvpmodel run fails: ptui waited the whole 30 s and said the preset was 'not
    reached within 30 s'; the service's own failure flag now ends the wait with the reason."""
    from ptui.core.catalogue.devices import get_device
    root, _ = faulty_board
    orin = get_device("orin-agx")
    before = fakesys.read_mode(root)
    assert before == orin.mode(8, 1728.0, 624.75, 3199.0)
    t0 = time.monotonic()
    rc, out, err = ptui("apply", "--backend", "jtop", "--sysfs-root", root, "--preset", "MODE_15W",
                        "--yes", tmp=tmp_path)
    took = time.monotonic() - t0
    assert rc != 0 and "ran nvpmodel -m 1 and it failed" in err and "rolled back" in err, \
        err + service_log(root)
    assert [ln for ln in err.splitlines() if ln.startswith("ptui: error")] == [err.splitlines()[-1]]
    assert "Traceback" not in err
    # ended by the service's failure flag, not by the 30 s wait for the preset (the message above
    # says so too): a wait that ran out could not take less than 30 s, whatever the load
    assert took < 30, f"{took:.1f} s"
    assert "within 30 s" not in err
    assert fakesys.read_mode(root) == before                      # the CPU clocks it changed are back
    assert "pmode:0002" in (root / "var/lib/nvpmodel/status").read_text()


@needs_service
def test_jtop_service_whose_sampler_stopped_is_refused(board, tmp_path):
    """One failed `nvpmodel -q` stops the genuine service's sampler; its clients keep its last
    sample forever.  ptui's reads went on returning that sample (a profile would have measured
    the same watts in every mode); now they stop with one line saying so."""
    from ptui.core.board.backends.base import BackendError
    from ptui.core.board.backends.jtop import JtopBackend
    from ptui.core.catalogue.devices import get_device
    root, _ = board
    nvp = tmp_path / "bin" / "nvpmodel"
    text, query = nvp.read_text(), '    if "-q" in args:\n'
    assert query in text
    nvp.write_text(text.replace(query, query + '        if (ROOT / "q-fails").exists():\n            return 1\n'))
    jt = JtopBackend(get_device("orin-agx"), interval=0.2, root=root)
    jt.stale_s = 3.0
    try:
        assert settle(jt, lambda t: t.power_w and t.power_w > 20).power_w > 20
        (root / "q-fails").write_text("")
        end = time.monotonic() + 30
        with pytest.raises(BackendError, match=r"jtop service has sent no new sample for \d+ s"):
            while time.monotonic() < end:
                jt.read()
                time.sleep(0.2)
        assert "nvpmodel command unavailable" in service_log(root)    # the service's side of it
    finally:
        jt.close()


def test_jtop_service_down_message():
    import os

    from ptui.core.board.backends.base import BackendError
    from ptui.core.board.backends.jtop import JtopBackend
    from ptui.core.catalogue.devices import get_device
    from tests.support.jtop_fixture import _answers
    with exclusive():                     # no test's service starts while this one looks
        if os.path.exists("/run/jtop.sock") and _answers(Path("/run/jtop.sock")):
            pytest.skip("a jtop service is running")
        with pytest.raises(BackendError, match="jtop service is not running"):
            JtopBackend(get_device("orin-agx"))
