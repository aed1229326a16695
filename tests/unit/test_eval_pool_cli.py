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


@pytest.mark.parametrize("args, said", [(["--nodes", "0"], "--nodes must be at least 1, got 0"),
                                        (["--spread", "2"], "--spread must be within 0-0.5"),
                                        (["--spread", "nan"], "--spread must be within 0-0.5"),
                                        (["--steps", "0"], "--steps must be at least 1, got 0")])
def test_eval_pool_flower_refuses_a_fleet_it_cannot_run(args, said):
    """eval_pool_flower.py --nodes 0 was a ValueError traceback (no node to grade), --spread 2
    an InputError traceback from the mod in the first node's round (a unit's factor is 0.5-2),
    --steps 0 the same: each is refused with the usage, exit 2, before any node profiles."""
    pytest.importorskip("flwr", reason="eval_pool_flower.py needs flwr")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "eval_pool_flower.py"), *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and said in r.stderr.strip().splitlines()[-1], r.stderr
    assert "Traceback" not in r.stderr
