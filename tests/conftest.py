import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    """Every test gets its own session store."""
    monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / "data"))
    yield


def run_cli(*args):
    """Run the CLI in-process and return (rc, stdout, stderr) via capsys-free capture."""
    import contextlib
    import io
    from ptui.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(map(str, args)))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def cli():
    return run_cli


def subprocess_env(tmp_path):
    env = dict(os.environ)
    env["PTUI_DATA_DIR"] = str(tmp_path / "data")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


PY = sys.executable
