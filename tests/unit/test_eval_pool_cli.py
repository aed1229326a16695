"""benchmarks/eval_pool.py --methods naming no method it runs (a typo: pooled-x) was a KeyError
traceback after the fleets were profiled; it is refused with the usage, exit 2, before."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("methods", ["nope", "pooled-5,pooled-x", ""])
def test_a_method_it_does_not_run_is_refused_before_any_fleet(methods):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "eval_pool.py"), "--methods", methods],
                       capture_output=True, text=True, timeout=60)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "--methods takes some of pooled-5, alone-5, alone-6, alone-50" in last, r.stderr
    assert "Traceback" not in r.stderr
