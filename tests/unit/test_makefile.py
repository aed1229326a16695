"""`make run` / `make test` plans (make -n: printed, not run): a Jetson's venv sees NVIDIA's torch and
never installs one; elsewhere exactly torch==2.13.0; nothing is reinstalled once .venv is up to date."""
import os
import shlex
import shutil
import subprocess

import pytest

from tests.support.cli import ROOT

pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")


def _env():
    """This environment less what a `make test JOBS=2 PYTEST_ARGS=...` around this test passes
    down (MAKEFLAGS carries its command-line variables into every make below it)."""
    drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "JOBS", "PYTEST_ARGS", "VENV", "PYTHON"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def plan(tmp_path, target, *, jetson: bool, venv=None):
    rel = tmp_path / "nv_tegra_release"
    if jetson:
        rel.write_text("# R36 (release), REVISION: 4.0\n")
    r = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), target,
                        f"VENV={venv or tmp_path / 'venv'}", f"TEGRA_RELEASE={rel}",
                        f"DT_COMPATIBLE={tmp_path / 'no-device-tree'}"],
                       capture_output=True, text=True, timeout=60, env=_env())
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("target", ["run", "test", "test-quick"])
def test_elsewhere_the_venv_gets_the_pinned_cpu_torch(tmp_path, target):
    out = plan(tmp_path, target, jetson=False)
    assert "-m venv" in out and "--system-site-packages" not in out
    installs = [ln for ln in out.splitlines() if "pip install" in ln]
    assert installs and all("torch==2.13.0" in ln for ln in installs)
    assert "torch>" not in out and " torch " not in out


@pytest.mark.parametrize("target", ["run", "test", "test-quick"])
def test_on_a_jetson_the_venv_sees_nvidia_torch_and_installs_none(tmp_path, target):
    out = plan(tmp_path, target, jetson=True)
    assert "-m venv --system-site-packages" in out
    assert "torch" not in out and "[train]" not in out


def _up_to_date_venv(tmp_path):
    """A venv whose install stamps are newer than pyproject.toml and the Makefile: (venv, their time)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    later = max(os.path.getmtime(ROOT / f) for f in ("pyproject.toml", "Makefile")) + 10
    for stamp in (".ptui-run", ".ptui-test"):
        (venv / stamp).touch()
        os.utime(venv / stamp, (later, later))
    return venv, later


def test_up_to_date_venv_goes_straight_to_work(tmp_path):
    venv, later = _up_to_date_venv(tmp_path)
    assert plan(tmp_path, "run", jetson=False, venv=venv).split() == [f"{venv}/bin/ptui"]
    pytest_cmd = [f"{venv}/bin/python", "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup"]
    assert shlex.split(plan(tmp_path, "test", jetson=False, venv=venv)) == pytest_cmd
    # the inner loop: the same suite less the slow, realtime, third-party and end-to-end tests
    assert shlex.split(plan(tmp_path, "test-quick", jetson=False, venv=venv)) == \
        pytest_cmd + ["-m", "not slow and not realtime and not thirdparty and not e2e"]
    # pyproject.toml changed since: the install runs again, the venv is not recreated
    os.utime(venv / ".ptui-test", (later - 3600 * 24 * 365, later - 3600 * 24 * 365))
    out = plan(tmp_path, "test", jetson=False, venv=venv)
    assert "pip install" in out and "-m venv" not in out


def test_jobs_spreads_the_suite_over_xdist_workers(tmp_path):
    venv, later = _up_to_date_venv(tmp_path)
    r = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), "test", f"VENV={venv}",
                        "JOBS=auto"], capture_output=True, text=True, timeout=60,
                       env=_env())
    assert r.returncode == 0, r.stderr
    assert shlex.split(r.stdout)[4:] == ["-n", "auto", "--dist", "loadgroup"]
