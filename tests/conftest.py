import os
from pathlib import Path

# torch's CPU thread pool spins: with two threads per process on a machine whose cores are busy
# (xdist workers, a training subprocess beside its test, other jobs) a built-in LSTM step took 10x
# longer (4.5 s instead of 0.4 s under a load of 9 on 2 cores).  One thread per process, set before
# torch is imported, here and in every subprocess the tests start (they inherit the environment).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402

from tests.support.cli import PY, ROOT, run_cli, subprocess_env  # noqa: F401, E402 (re-exported)

_FIRST = ("e2e", "slow", "thirdparty", "realtime")
# the suite's longest tests, longest first (from `--durations`); a stale list only orders worse
_LONGEST = {name.split("@")[0]: i for i, name in enumerate(
    (Path(__file__).parent / "support" / "longest.txt").read_text().split())}


def _rank(item) -> tuple[int, int]:
    if item.nodeid in _LONGEST:
        return 0, _LONGEST[item.nodeid]
    marks = {m.name for m in item.iter_markers()}
    return 1, next((i for i, name in enumerate(_FIRST) if name in marks), len(_FIRST))


def pytest_collection_modifyitems(items):
    """A test that starts `ptui emulate` as a subprocess (the emulate fixture) is end to end,
    wherever it lives: marked e2e here rather than one by one.

    Then the modules with long tests go first (those of tests/support/longest.txt, longest first,
    then the e2e, slow, ... ones; a stable sort keeps the order otherwise): xdist hands the
    workers their tests in this order, so the short ones fill the end and no worker sits idle
    while the other finishes a 90 s end-to-end test it was given last."""
    for item in items:
        if "emulate" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)
    # a module's tests stay together, in their order (a module-scoped fixture is set up once per
    # worker, not again for each test sorted away from the rest), its place that of its longest
    first: dict[str, tuple[int, int]] = {}
    for item in items:
        mod = item.nodeid.split("::")[0]
        first[mod] = min(first.get(mod, (9, 0)), _rank(item))
    items.sort(key=lambda item: first[item.nodeid.split("::")[0]])


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    """Every test gets its own session store, and its own board-wide places (the boards' locks and
    undo state, which a real ptui keeps in /run/lock and /var/lib/ptui): a test's subprocesses share
    them whatever their data directory, as processes on one board do."""
    monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PTUI_LOCK_DIR", str(tmp_path / "board-locks"))
    monkeypatch.setenv("PTUI_STATE_DIR", str(tmp_path / "board-state"))
    # a developer's fleet pool and board name must not reach the tests (nor their rows the pool)
    monkeypatch.delenv("PTUI_POOL", raising=False)
    monkeypatch.delenv("PTUI_STORE", raising=False)
    monkeypatch.delenv("PTUI_BOARD_ID", raising=False)
    yield
    # each test stands for one ptui process: a lock a test took and left (opening a session
    # without running it) belongs to its own data directory and must not follow the next test,
    # whose session of the same name would read as running
    from ptui.core.board import locks
    for key in list(locks._held):
        while key in locks._held:
            locks.release(key)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def emulated_board(tmp_path):
    """An emulated Orin AGX training ResNet-18: what `ptui emulate --device orin-agx --root R
    --interval 0.1` runs, its driver loop in a background thread; yields (root, driver)."""
    import threading

    from ptui.core.board.emulator import Emulator
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
def emulate(tmp_path):
    running = []

    def start(root, device="orin-agx", *extra):
        from tests.support.emulated import Emulated
        e = Emulated(tmp_path, root, device, "--interval", "0.1", *extra)
        running.append(e)
        return e
    yield start
    for e in running:
        e.kill()


@pytest.fixture
def slow_profiler(monkeypatch):
    """Each measured mode takes 50 ms of wall time, so an app test can act mid-profile."""
    import time as _time

    import ptui.core.profiling.profiler as P
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

    import ptui.core.profiling.profiler as P
    real = P.Profiler.measure

    def slow(self, *a, **k):
        _time.sleep(0.2)
        return real(self, *a, **k)

    monkeypatch.setattr(P.Profiler, "measure", slow)
