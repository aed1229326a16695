"""benchmarks/eval_fleet_cap.py refuses what it cannot run before any fleet starts: a --seeds that
is no seed list was a ValueError traceback, a reversed or empty range reported "0 of 0 rounds over
the cap ... -100.00 % of the cap" as if measured, and an --python that is no interpreter a
FileNotFoundError traceback."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, said", [
    (["--seeds", "x"], "'x' is no seed nor range of seeds"),
    (["--seeds", "3-1", "--fresh-seeds", ""], "'3-1' is no seed nor range of seeds"),
    (["--seeds", "0-", "--fresh-seeds", ""], "'0-' is no seed nor range of seeds"),    # was run as seed 0
    (["--seeds", "", "--fresh-seeds", ""], "no seeds to run"),
    (["--seeds", "0", "--rounds", "0"], "--rounds must be >= 1"),
    (["--seeds", "0", "--cap-w", "nan"], "--cap-w a finite number of watts"),
    (["--seeds", "0", "--python", "/no/such/python"], "/no/such/python is no interpreter"),
])
def test_input_it_cannot_run_is_one_line_exit_2(args, said):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "eval_fleet_cap.py"), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr and "rounds over the cap" not in r.stdout
