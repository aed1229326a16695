import pytest

from tests.support.cli import PY, ROOT, run_cli, subprocess_env  # noqa: F401 (re-exported)


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    """Every test gets its own session store."""
    monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / "data"))
    yield


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def emulated_board(tmp_path):
    """An emulated Orin AGX tree whose sensors the simulator keeps updating (training ResNet-18)
    in a background thread; yields (root, driver)."""
    import threading
    import time as _time

    from ptui.core.workloads import get_workload
    from tests.support import fakesys
    root = fakesys.build(tmp_path / "root")
    drv = fakesys.Driver(root)
    drv.sim.start_training(get_workload("resnet18"))
    stop = threading.Event()

    def run():
        while not stop.is_set():
            drv.step(0.1)
            _time.sleep(0.05)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    yield root, drv
    stop.set()
    th.join(5)


@pytest.fixture
def slow_profiler(monkeypatch):
    """Each measured mode takes 50 ms of wall time, so an app test can act mid-profile."""
    import time as _time

    import ptui.core.profiler as P
    real = P.Profiler.measure

    def slow(self, *a, **k):
        _time.sleep(0.05)
        return real(self, *a, **k)

    monkeypatch.setattr(P.Profiler, "measure", slow)


@pytest.fixture
def slower_profiler(monkeypatch):
    """Each measured mode takes 0.2 s of wall time: a test that acts mid-profile still finds the
    profile running on a loaded machine (the run is aborted early, so this costs little)."""
    import time as _time

    import ptui.core.profiler as P
    real = P.Profiler.measure

    def slow(self, *a, **k):
        _time.sleep(0.2)
        return real(self, *a, **k)

    monkeypatch.setattr(P.Profiler, "measure", slow)
