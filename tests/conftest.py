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
    """An emulated Orin AGX training ResNet-18: what `ptui emulate --device orin-agx --root R
    --interval 0.1` runs, its driver loop in a background thread; yields (root, driver)."""
    import threading

    from ptui.core.emulator import Emulator
    emu = Emulator(tmp_path / "root", "orin-agx", interval=0.1)
    emu.open()
    stop = threading.Event()
    th = threading.Thread(target=emu.run, args=(stop,), daemon=True)
    th.start()
    yield emu.root, emu.driver
    stop.set()
    th.join(5)
    emu.close()


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
