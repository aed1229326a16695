"""Unmodified third-party training code (Lightning Trainer and Fabric, a Hugging Face Trainer with
gradient accumulation, accelerate, torchrun DDP, a nanoGPT-shaped loop) profiled through the probe.

The scripts live in tests/support/thirdparty/.  They need lightning, transformers and accelerate
(the `scripts` extra, installed by `make test`); another interpreter that has them can be named in
PTUI_THIRDPARTY_PYTHON.  Each is profiled on the simulated board, where the profile is a what-if
from the model's measured size: the test checks what was timed, that the time follows the mode,
and that the host step was measured.
"""
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "support" / "thirdparty"
NEEDS = ("torch", "lightning", "transformers", "accelerate")


def _python() -> str | None:
    for cand in (os.environ.get("PTUI_THIRDPARTY_PYTHON"), sys.executable):
        if not cand:
            continue
        probe = "import " + ", ".join(NEEDS)
        if subprocess.run([cand, "-c", probe], capture_output=True).returncode == 0:
            return cand
    return None


PY = _python()
pytestmark = [pytest.mark.thirdparty, pytest.mark.slow,
              pytest.mark.skipif(PY is None, reason="lightning, transformers and accelerate are not installed "
                                 "(pip install -e '.[test,scripts]', or set PTUI_THIRDPARTY_PYTHON)")]


def _profile(tmp_path, cli, *command):
    out = tmp_path / "p.csv"
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--sample-interval", "0.1",
                     "--out", out, "--", *command)
    assert rc == 0, err
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 2
    for r in rows:
        assert r["timed"].startswith("what-if from the model's measured size (SIMULATED)")
        assert float(r["host_step_ms"]) > 0 and int(r["n_minibatches"]) >= 40
    # the two modes differ (10c/883/930/3199 against 10c/1804/420/665): so must the simulated time
    assert abs(float(rows[0]["time_ms"]) / float(rows[1]["time_ms"]) - 1) > 0.05
    return rows, err


def _bin(name):
    exe = Path(PY).with_name(name)
    return str(exe) if exe.exists() else shutil.which(name)


def test_lightning_trainer(tmp_path, cli):
    rows, err = _profile(tmp_path, cli, PY, HERE / "lightning_trainer.py")
    assert rows[0]["timed"].endswith(": one optimizer step")
    assert "32 samples per iteration" in err          # the DataLoader's batch, seen by the probe


def test_lightning_fabric_bf16(tmp_path, cli):
    rows, _ = _profile(tmp_path, cli, PY, HERE / "fabric_bf16.py")
    assert rows[0]["timed"].endswith(": one optimizer step")


def test_hugging_face_trainer_with_accumulation(tmp_path, cli):
    rows, err = _profile(tmp_path, cli, PY, HERE / "hf_trainer_accum.py")
    assert "one optimizer step over 4 micro-batches" in rows[0]["timed"]
    assert "32 samples per iteration" in err          # 8 per micro-batch x 4


def test_nanogpt_shaped_loop_with_grad_scaler(tmp_path, cli):
    rows, _ = _profile(tmp_path, cli, PY, HERE / "nanogpt_style.py")
    assert "one optimizer step over 4 micro-batches" in rows[0]["timed"]


def test_accelerate_launch_with_accumulation(tmp_path, cli):
    launcher = _bin("accelerate")
    if launcher is None:
        pytest.skip("the accelerate launcher is not on this interpreter's path")
    rows, _ = _profile(tmp_path, cli, launcher, "launch", "--cpu", "--num_processes", "1",
                       HERE / "accelerate_accum.py")
    assert "one optimizer step over 2 micro-batches" in rows[0]["timed"]


def test_torchrun_two_ranks(tmp_path, cli):
    launcher = _bin("torchrun")
    if launcher is None:
        pytest.skip("torchrun is not on this interpreter's path")
    # --standalone: the ranks meet on a free port, not on the fixed 29500 that another test run
    # (or another xdist worker) may be using at the same moment
    rows, err = _profile(tmp_path, cli, launcher, "--standalone", "--nproc_per_node=2", HERE / "torchrun_ddp.py")
    assert rows[0]["timed"].endswith(": one optimizer step")
