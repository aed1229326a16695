"""Automatic session names (profile's and tune's): unique when runs start within the same second,
and named after the board used; a name given with --session is still refused when taken."""
import contextlib
import subprocess
import time

import pytest

from tests.support.cli import PY, run_cli, subprocess_env

STAMP = "20261128-001500"


@pytest.fixture
def same_second(monkeypatch):
    """Every automatic name is stamped with the same second."""
    real = time.strftime
    monkeypatch.setattr(time, "strftime",
                        lambda fmt, *a: STAMP if fmt == "%Y%m%d-%H%M%S" else real(fmt, *a))


@contextlib.contextmanager
def chosen_by_another_run(tmp_path, name):
    """Another process holding session `name`'s lock: a run started in the same second that chose
    the name and has not stored its session yet (a run takes the lock before it creates it)."""
    code = ("import sys; from ptui.core.board.locks import lock_session; lock_session(sys.argv[1]); "
            "print('held', flush=True); sys.stdin.read()")
    p = subprocess.Popen([PY, "-c", code, name], env=subprocess_env(tmp_path), text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == "held"
        yield
    finally:
        p.stdin.close()
        p.wait(10)


@pytest.mark.parametrize("sizes, stem", [((), "orin-agx-resnet18-bs16"),
                                         (("--batch-sizes", "8,16"), "orin-agx-resnet18-bs8-16")])
def test_a_profile_started_in_the_same_second_as_another_gets_a_name_of_its_own(
        tmp_path, same_second, sizes, stem):
    """Two `ptui profile` runs started within the same second both chose the free name STEM-TIME,
    and the second was refused ('another ptui process (pid N) is running profiling session ...',
    or 'already exists' once the first had stored it).  The second is now STEM-TIME-2."""
    with chosen_by_another_run(tmp_path, f"{stem}-{STAMP}"):
        rc, _, err = run_cli("profile", "--workload", "resnet18", *sizes, "--count", "2",
                             "--out", tmp_path / "a.csv")
    assert rc == 0, err
    assert f"session {stem}-{STAMP}-2:" in err
    rc, _, err = run_cli("profile", "--workload", "resnet18", *sizes, "--count", "2",
                         "--out", tmp_path / "b.csv")
    assert rc == 0, err
    assert f"session {stem}-{STAMP}:" in err                # the other run never stored it


def test_a_session_named_with_session_is_still_refused_when_it_exists(tmp_path):
    rc, _, err = run_cli("profile", "--workload", "resnet18", "--count", "2", "--session", "mine",
                         "--out", tmp_path / "a.csv")
    assert rc == 0, err
    rc, _, err = run_cli("profile", "--workload", "resnet18", "--count", "2", "--session", "mine",
                         "--out", tmp_path / "b.csv")
    assert rc == 2 and "session 'mine' already exists" in err
    assert not (tmp_path / "b.csv").exists()


def _tune(tmp_path, *args):
    return run_cli("tune", "--budget-w", "20", "--workload", "resnet18", "--count", "6", *args)


def test_a_tune_started_in_the_same_second_as_another_gets_a_name_of_its_own(tmp_path, same_second):
    """A second tune within the same second had the first's name and was refused: 'session ...
    already exists'.  It is now NAME-2, and so are its CSV and model."""
    rc, out, err = _tune(tmp_path, "--device", "orin-agx")
    assert rc == 0, err
    assert f"session tune-orin-agx-resnet18-{STAMP}:" in err
    rc, out, err = _tune(tmp_path, "--device", "orin-agx")
    assert rc == 0, err
    assert f"session tune-orin-agx-resnet18-{STAMP}-2:" in err
    assert f"models/tune-orin-agx-resnet18-{STAMP}-2" in out


def test_tune_without_device_names_its_session_after_the_board_it_used(tmp_path, same_second):
    """Without --device a tune's session, CSV and model were tune-auto-resnet18-TIME, where
    profile's name the board it ran on (here the simulated Orin AGX, the board when none is found)."""
    rc, out, err = _tune(tmp_path)
    assert rc == 0, err
    assert f"session tune-orin-agx-resnet18-{STAMP}:" in err
    assert f"models/tune-orin-agx-resnet18-{STAMP}" in out
    assert (tmp_path / "data" / "tune" / f"tune-orin-agx-resnet18-{STAMP}.csv").exists()
    rc, _, err = _tune(tmp_path, "--backend", "sim", "--device", "orin-nano")
    assert rc == 0, err
    assert f"session tune-orin-nano-resnet18-{STAMP}:" in err


def test_tune_count_0_names_a_model_of_its_own_in_the_same_second(tmp_path, same_second):
    """Two tune --count 0 runs within the same second (or one and a profiled tune) named the same
    model directory, tune-orin-agx-spec-TIME: the second replaced the first's model, which the
    first had just reported.  Each now has its own; the first is left as it was written."""
    import json
    models = tmp_path / "data" / "models"
    spec = tmp_path / "a.json"
    spec.write_text(json.dumps({"gflop_per_step": 90, "gbytes_per_step": 6, "batch_size": 32}))
    other = tmp_path / "b.json"
    other.write_text(json.dumps({"gflop_per_step": 20, "gbytes_per_step": 2, "batch_size": 16}))
    rc, out, err = run_cli("tune", "--count", "0", "--budget-w", "30", "--workload-spec", spec)
    assert rc == 0, err
    first = models / f"tune-orin-agx-spec-{STAMP}"
    assert f"model: {first}" in out
    written = (first / "meta.json").read_text()
    with chosen_by_another_run(tmp_path, f"tune-orin-agx-spec-{STAMP}-2"):
        rc, out, err = run_cli("tune", "--count", "0", "--budget-w", "30", "--workload-spec", other)
    assert rc == 0, err
    assert f"model: {models / f'tune-orin-agx-spec-{STAMP}-3'}" in out
    assert (first / "meta.json").read_text() == written
    rc, out, err = run_cli("tune", "--count", "0", "--budget-w", "20", "--workload", "resnet18")
    assert rc == 0, err
    rc, out, err = _tune(tmp_path)
    assert rc == 0, err
    assert f"session tune-orin-agx-resnet18-{STAMP}-2:" in err       # the prior's model has the first
