"""Code hygiene: ptui.core stays free of the UI and the heavy libraries at import time, the app starts
without torch or scikit-learn, and ruff (configured in pyproject.toml) is clean."""
import json
import pkgutil
import subprocess
import sys

import pytest

import ptui.core
from tests.support.cli import ROOT

HEAVY = ("textual", "torch", "sklearn")
# the one core module whose job is torch (training the networks): imported only by `fit`/`reference`
TORCH_BY_DESIGN = {"ptui.core.prediction.train"}
CORE = sorted(m.name for m in pkgutil.walk_packages(ptui.core.__path__, "ptui.core."))


def _loaded_after_import(*modules: str) -> dict[str, list[str]]:
    """In a fresh interpreter, import `modules` in turn; for each, the heavy libraries loaded so far."""
    code = ("import importlib, json, sys\nout = {}\n"
            f"for m in {list(modules)!r}:\n"
            "    importlib.import_module(m)\n"
            f"    out[m] = sorted({{k.split('.')[0] for k in sys.modules}} & {set(HEAVY)!r})\n"
            "print(json.dumps(out))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_every_core_module_is_listed():
    expected = {"ptui.core.profiling.profiler", "ptui.core.board.backends.sysfs", "ptui.core.errors", *TORCH_BY_DESIGN}
    assert expected <= set(CORE)


def test_core_modules_import_no_ui_and_no_heavy_library():
    # one interpreter, modules in turn: the first one to load a heavy library is named
    plain = [m for m in CORE if m not in TORCH_BY_DESIGN]
    for module, heavy in _loaded_after_import(*plain).items():
        assert not heavy, f"importing {module} loads {heavy}"
    for module in TORCH_BY_DESIGN:
        heavy = set(_loaded_after_import(module)[module]) - {"torch"}
        assert not heavy, f"importing {module} loads {sorted(heavy)}"


@pytest.mark.parametrize("module", ["ptui.cli", "ptui.app"])
def test_the_app_and_the_cli_start_without_torch_or_sklearn(module):
    heavy = set(_loaded_after_import(module)[module]) - {"textual"}
    assert not heavy, f"importing {module} loads {sorted(heavy)}"


def test_ruff_is_clean():
    pytest.importorskip("ruff")  # a test extra: `make test` installs it
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "ptui", "tests", "benchmarks"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
