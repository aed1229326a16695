"""ptui colocate with the user's own training script after -- (issue 27, deliverable 3): the probe
counts one iteration on this machine, the what-if's workload is decided for on the simulated board,
and everything says it is SIMULATED and what was counted."""
import json
import os
import textwrap
import time

import pytest

from tests.functional.test_tune_prior import MLP  # the same small MLP script
from tests.support.cli import PY

GOAL = ["colocate", "--device", "orin-agx", "--infer-workload", "resnet50", "--rate", "20",
        "--latency-ms", "250"]

CNN = textwrap.dedent("""
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    data = TensorDataset(torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,)))
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for epoch in range(1000):
        for x, y in DataLoader(data, batch_size=32, shuffle=True):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
""")



@pytest.fixture
def cnn(tmp_path):
    p = tmp_path / "train.py"
    p.write_text(CNN)
    return p


def test_a_script_is_counted_and_the_pick_is_within_both_budgets_and_labelled(cnn, cli):
    """14 W binds for this small CNN (MAXN draws about 19 W beside ResNet-50 at 20 req/s)."""
    rc, out, err = cli(*GOAL, "--budget-w", "14", "--json", "--", PY, cnn)
    assert rc == 0, err
    d = json.loads(out)
    assert d["command"] == "colocate" and d["feasible"] is True and d["simulated"] is True
    p = d["pick"]
    assert p["power_w"] <= 14 and p["latency_p99_ms"] <= 250 and p["over_budget"] <= 0.01
    assert d["profiled_modes"] <= 15 and d["train_workload"] == "script"
    s = d["train_script"]
    assert "SIMULATED" in s["label"] and "SIMULATED" in s["whatif"]
    assert s["command"].endswith("train.py") and s["gflop_per_iteration"] > 0 and s["parameters"] > 0
    assert s["batch_size"] == 32 == d["train_batch_size"] and s["unit"] == "sample"
    assert "DataLoader" in s["batch_size_from"] and s["timed"] == "optimizer step"
    # the throughput is the counted batch over the simulated iteration
    assert p["time_ms"] == pytest.approx(32 / p["train_samples_per_s"] * 1000.0, rel=1e-3)
    assert "counting one iteration" in err and "Traceback" not in err
    # budgets nothing meets: exit 3, the document names the closest option and what was counted
    rc, out, err = cli(*GOAL, "--budget-w", "9", "--json", "--", PY, cnn)
    assert rc == 3 and "SIMULATED" in err.strip().splitlines()[-1]
    d = json.loads(out)
    assert d["feasible"] is False and d["simulated"] is True and d["closest"]["power_w"] > 9
    assert d["train_script"]["batch_size"] == 32


def test_the_text_says_what_was_counted_and_an_unknown_batch(tmp_path, cli):
    """No DataLoader: the batch is unknown, one iteration is the unit, throughputs are iterations/s
    (--batch-size names the samples an iteration holds)."""
    mlp = tmp_path / "mlp.py"
    mlp.write_text(MLP)
    rc, out, err = cli(*GOAL, "--budget-w", "35", "--", PY, mlp)
    assert rc == 0, err
    first, counted, pick, figures = out.splitlines()[:4]
    assert first.startswith("SIMULATED orin-agx: train the script's counted model of")
    assert "mlp.py" in first and "batch: unknown: one iteration is the unit" in first
    assert counted.startswith("counted by the probe (one iteration, optimizer step):")
    assert "GFLOP" in counted and "9,610 parameters" in counted and "not measured" in counted
    assert pick.startswith("pick:") and "training iterations/s" in figures
    assert "--batch-size N" in err
    # the profiles it took keep what was counted: a re-decision says it too, profiling nothing
    saved = tmp_path / "p.json"
    rc, out, err = cli(*GOAL, "--budget-w", "35", "--batch-size", "32", "--json",
                       "--save-profiles", saved, "--", PY, mlp)
    assert rc == 0, err
    s = json.loads(out)["train_script"]
    assert s["batch_size"] == 32 and s["unit"] == "sample" and "--batch-size 32" in s["batch_size_from"]
    rc, out, err = cli("colocate", "--device", "orin-agx", "--profiles", saved, "--rate", "10",
                       "--latency-ms", "250", "--budget-w", "35")
    assert rc == 0, err
    assert out.startswith("SIMULATED orin-agx: train the script's counted model of") and "mlp.py" in out
    assert "0 modes profiled" in out and "batch: 32 samples per iteration" in out


def test_a_script_and_a_catalogue_workload_or_profiles_are_one_line_exit_2(cnn, tmp_path, cli):
    for extra in (["--train-workload", "resnet18"], ["--profiles", tmp_path / "p.json"]):
        rc, out, err = cli(*GOAL, "--budget-w", "35", *extra, "--", PY, cnn)
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert "or your training command after --, not both" in err
    rc, out, err = cli(*GOAL, "--budget-w", "35")
    assert rc == 2 and "--train-workload or your training command after --" in err
    # bad budgets and names are refused before the script runs
    rc, out, err = cli(*[a if a != "resnet50" else "nope" for a in GOAL], "--budget-w", "35",
                       "--", PY, cnn)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "counting" not in err
    rc, out, err = cli(*GOAL, "--budget-w", "-1", "--", PY, cnn)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "counting" not in err


def test_a_script_that_fails_or_never_steps_is_one_line_and_is_stopped(tmp_path, cli):
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit('no data here')\n")
    rc, out, err = cli(*GOAL, "--budget-w", "35", "--json", "--", PY, bad)
    assert rc != 0 and out == "" and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("ptui: error: the training script crashed")
    assert "no data here" in err
    # a script that never steps (and started a child): stopped after --startup-timeout, its
    # process group with it
    slow = tmp_path / "slow.py"
    pids = tmp_path / "pids"
    slow.write_text(textwrap.dedent(f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(120)
    """))
    t0 = time.monotonic()
    rc, out, err = cli(*GOAL, "--budget-w", "35", "--startup-timeout", "3", "--", PY, slow)
    assert rc != 0 and out == "" and "Traceback" not in err
    assert "has taken no optimizer step in 3 s" in err and time.monotonic() - t0 < 30
    for pid in map(int, pids.read_text().split()):
        for _ in range(50):
            if not _alive(pid):
                break
            time.sleep(0.1)
        assert not _alive(pid), f"process {pid} of the script is still running"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                                   # a zombie (exited, not yet reaped) is not running
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
