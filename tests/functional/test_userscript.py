"""Profiling the user's own, unmodified training script under the probe."""
import sys
import textwrap

import pytest

pytest.importorskip("torch")

TRAIN = textwrap.dedent("""
    import sys, time, torch
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    for i in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        time.sleep(0.02)                       # a 20 ms data pipeline
        opt.step()
    if len(sys.argv) > 2:
        raise RuntimeError("CUDA out of memory (pretend)")
""")


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "train.py"
    p.write_text(TRAIN)
    return p


def test_profiles_a_real_script_and_restores(tmp_path, script, cli):
    rc, out, err = cli("profile", "--device", "orin-agx", "--count", "2", "--sample-interval", "0.1",
                       "--out", tmp_path / "s.csv", "--", sys.executable, script, "100000")
    assert rc == 0, err
    rows = (tmp_path / "s.csv").read_text().splitlines()
    assert rows[0].startswith("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w") and len(rows) == 3
    for r in rows[1:]:
        t = float(r.split(",")[4])
        assert 20.0 <= t < 500.0           # the script real minibatch: 20 ms sleep + a tiny step
        assert int(r.split(",")[9]) >= 40
    assert "under the minibatch probe" in err


def test_script_that_ends_early_is_reported(tmp_path, script, cli):
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "3", "--sample-interval", "0.1",
                     "--out", tmp_path / "s.csv", "--", sys.executable, script, "25")
    assert rc == 1 and "the training script ended (exit code 0) after" in err
    assert "restored to its original mode" in err


def test_script_that_crashes_is_reported(tmp_path, script, cli):
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "3", "--sample-interval", "0.1",
                     "--out", tmp_path / "s.csv", "--", sys.executable, script, "30", "crash")
    assert rc == 1 and "crashed (exit code 1)" in err and "CUDA out of memory (pretend)" in err


def test_script_that_never_steps(tmp_path):
    from ptui.core.backends.sim import SimJetson
    from ptui.core.clock import RealClock
    from ptui.core.devices import get_device
    from ptui.core.profiler import ProfileError
    from ptui.core.userscript import ScriptSource
    idle = tmp_path / "idle.py"
    idle.write_text("import time\ntime.sleep(30)\n")
    sim = SimJetson(get_device("orin-agx"), clock=RealClock())
    src = ScriptSource(sim, [sys.executable, str(idle)], tmp_path / "log", first_step_timeout=1.5)
    src.start()
    try:
        with pytest.raises(ProfileError, match="does it call optimizer.step"):
            for _ in src.events(0.1):
                pass
    finally:
        src.stop()
    assert src.proc.poll() is not None


def test_profiles_a_script_on_the_emulated_board_and_restores(tmp_path, script, emulated_board, cli):
    from tests.support import fakesys
    root, _ = emulated_board
    before = fakesys.read_mode(root)
    rc, out, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--count", "2",
                       "--sample-interval", "0.1", "--out", tmp_path / "s.csv", "--", sys.executable,
                       script, "100000")
    assert rc == 0, err
    rows = (tmp_path / "s.csv").read_text().splitlines()[1:]
    assert len(rows) == 2 and all(20.0 <= float(r.split(",")[4]) < 500 for r in rows)
    assert all(float(r.split(",")[5]) > 5 for r in rows)          # power read from the INA3221 files
    assert fakesys.read_mode(root) == before                       # restored


def test_builtin_torch_loop_on_a_real_backend(tmp_path, emulated_board, cli):
    root, _ = emulated_board
    rc, out, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--workload", "lstm",
                       "--batch-size", "1", "--count", "1", "--sample-interval", "0.1",
                       "--out", tmp_path / "l.csv")
    assert rc == 0, err
    assert "ptui.workloads_torch lstm" in err
    assert len((tmp_path / "l.csv").read_text().splitlines()) == 2
    rc, _, err = cli("profile", "--backend", "sysfs", "--sysfs-root", root, "--workload", "yolov8n",
                     "--out", tmp_path / "y.csv")
    assert rc == 2 and "no built-in training loop for yolov8n" in err
