"""`ptui interleave-demo` on `ptui emulate`'s board (the sysfs backend, wall time, the emulated
board's telemetry): it decides, applies, re-decides on a changed rate, and the board ends in the mode
it started in, after a normal end and after SIGTERM mid-run."""
import json
import signal
import subprocess
import sys
import time

import pytest

from ptui.core.board import emulator
from tests.support.cli import subprocess_env
from tests.support.emulated import Emulated  # noqa: F401 (the emulate fixture's runner)


@pytest.mark.slow
def test_the_demo_runs_on_the_emulated_board_and_leaves_it_in_its_starting_mode(tmp_path, emulate, cli):
    root = tmp_path / "board"
    emulate(root)
    start = emulator.read_mode(root)
    sysfs = ("--backend", "sysfs", "--sysfs-root", root)
    rc, out, err = cli(*sysfs, "interleave-demo", "--seconds", "3", "--then-rate", "40", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["command"] == "interleave-demo" and doc["backend"] == "sysfs"
    assert doc["simulated"] is True and doc["virtual_clock"] is False     # emulated: SIMULATED watts
    assert doc["restored"] is True and doc["start_mode"] == start.key == doc["end_mode"]
    first, second = doc["phases"]
    assert first["profiled_modes"] >= 1 and second["profiled_modes"] == 0
    assert first["key"] != start.key                  # a mode was applied ...
    for ph in doc["phases"]:
        m = ph["measured"]
        assert m["requests"] > 0 and m["train_minibatches"] > 0 and m["batch"] == ph["batch"]
        assert m["power_w"] is not None and m["power_w"] > 0
        assert "emulated" in m["power_from"] and "SIMULATED" in m["power_from"]
    assert emulator.read_mode(root) == start          # ... and the board is back
    rc, out, _ = cli(*sysfs, "status", "--json")
    assert rc == 0 and json.loads(out)["restore"] is None       # nothing left for ptui restore


@pytest.mark.slow
def test_sigterm_mid_run_puts_the_emulated_board_back(tmp_path, emulate):
    root = tmp_path / "board"
    emulate(root)
    start = emulator.read_mode(root)
    p = subprocess.Popen([sys.executable, "-m", "ptui", "--backend", "sysfs", "--sysfs-root", str(root),
                          "interleave-demo", "--seconds", "60"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=subprocess_env(tmp_path))
    try:
        for line in p.stderr:
            if line.startswith("rate 20/s:"):
                break
        time.sleep(1.0)
        assert emulator.read_mode(root) != start      # running in the decided mode
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM" in err
    assert emulator.read_mode(root) == start
