"""mypy (configured in pyproject.toml, [tool.mypy]) finds no type error in ptui/core, and it is a check
that can fail: the same configuration on a copy of ptui with one error planted reports that error."""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (a test extra: `make test` installs it)")


def _mypy(cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    # a fresh cache per run (a cold run takes seconds): one shared between checkouts or concurrent
    # runs could be read stale or half written, and none is left in the work tree
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(cwd / "pyproject.toml"),
                           "--cache-dir", str(cache), "--no-error-summary", "ptui/core"],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def test_ptui_core_has_no_type_error(tmp_path):
    r = _mypy(ROOT, tmp_path / "cache")
    assert r.returncode == 0, r.stdout + r.stderr


# planted in a function without annotations: a check that skipped such bodies (mypy's default) would
# miss it; Optional[float] used as a float is the kind of mistake the checker is here for
PLANTED = '''

def _planted(budget):
    return Goal(budget_w=budget).deadline_ms + 1
'''


def test_a_planted_type_error_is_reported(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "ptui", tree / "ptui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    target = tree / "ptui" / "core" / "decision" / "goals.py"
    line = len(target.read_text().splitlines()) + len(PLANTED.splitlines())
    target.write_text(target.read_text() + PLANTED)
    r = _mypy(tree, tmp_path / "cache")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"ptui/core/decision/goals.py:{line}: error" in r.stdout, r.stdout
    assert r.stdout.count(": error") == 1, r.stdout
