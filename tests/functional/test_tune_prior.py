"""tune --count 0 (issue 25): no mode profiled; the probe counts one iteration of the user's script
(or a --workload-spec, or a catalog workload's counts) and the roofline prior decides, saying so."""
import json
import re
import textwrap

import pytest

from ptui.core.prediction.roofline import WorkloadSpec
from tests.support import fakesys
from tests.support.cli import PY

MLP = textwrap.dedent("""
    import torch
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for i in range(10 ** 6):
        x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
""")


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "train.py"
    p.write_text(MLP)
    return p


def test_count_0_counts_one_iteration_and_decides_from_the_prior(script, cli):
    rc, out, err = cli("tune", "--count", "0", "--budget-w", "30", "--json", "--", PY, script)
    assert rc == 0, err
    d = json.loads(out)
    assert d["profiled"] == 0 and d["source"] == "predicted" and d["profile"] is None
    assert d["simulated"] is True and d["best_measured"] is None and d["feasible"] is True
    assert "probe" in d["prior"]["source"] and d["prior"]["gflop_per_step"] > 0
    assert d["power_w"] <= 30 and "optimizer step" in d["timed"]
    assert "counting one iteration" in err and "rests on no measurement" in err
    # no DataLoader: the batch size is unknown and said so, not an assumed 1 (a user trial)
    assert d["batch_size"] is None and d["prior"]["batch_size"] is None
    assert "batch size is unknown" in err and "--batch-size" in err
    # the model is saved like any other: pareto reads it and decides the same
    rc, out2, err = cli("pareto", "--model", d["model"], "--budget-w", "30", "--json")
    assert rc == 0, err
    assert json.loads(out2)["key"] == d["key"]


def test_count_0_from_a_catalog_workload_or_a_spec_profiles_nothing(tmp_path, cli):
    rc, out, err = cli("tune", "--count", "0", "--workload", "resnet18", "--budget-w", "30", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["profiled"] == 0 and d["prior"]["source"].startswith("catalog")
    assert d["epoch_s"] and d["epoch_s"] > 0               # a catalog workload knows its epoch
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 40.0, "gbytes_per_step": 9.0, "batch_size": 16}))
    rc, out, err = cli("tune", "--count", "0", "--workload-spec", spec, "--objective", "energy")
    assert rc == 0, err
    assert "no mode profiled: predicted by the roofline prior" in out and "Least energy:" in out
    rc, _, err = cli("sessions")
    assert "tune-" not in err                              # no profiling session was opened


def test_count_0_from_a_spec_times_a_minibatch_not_a_script_step(tmp_path, script, cli):
    """A spec-only tune said "ms per optimizer step (of the user's script)" and named its model
    tune-<board>-script-...: no script was given (a user trial).  And a script given beside the
    spec was skipped without a word."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 40.0, "gbytes_per_step": 9.0, "batch_size": 16}))
    rc, out, err = cli("tune", "--count", "0", "--workload-spec", spec, "--budget-w", "30", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert "script" not in d["timed"] and d["timed"] == "minibatch"
    assert "-script-" not in d["model"] and "-spec-" in d["model"]
    rc, out, err = cli("tune", "--count", "0", "--workload-spec", spec, "--budget-w", "30", "--",
                       PY, script)
    assert rc == 0, err
    assert "is not run" in err and "counting one iteration" not in err
    assert "user's script" not in out


@pytest.mark.parametrize("args, says", [
    (["--count", "0", "--workload", "resnet18", "--batch-sizes", "8,16", "--budget-w", "30"],
     "--count 0 decides for one batch size"),
    (["--count", "-1", "--workload", "resnet18", "--budget-w", "30"], "at least 0"),
    (["--count", "0", "--budget-w", "30"], "--count 0 needs the workload's counts"),
    # a user's trial: both were ignored without a word
    (["--count", "0", "--workload", "resnet18", "--budget-w", "30", "--out", "x.csv"],
     "no profile CSV for --out"),
    (["--count", "0", "--workload-spec", "SPEC", "--batch-size", "64", "--budget-w", "30"],
     "drop --batch-size"),
    # both were taken: the spec's counts, in a model named after ResNet-18 (its epoch, its label)
    (["--count", "0", "--workload-spec", "SPEC", "--workload", "resnet18", "--budget-w", "30"],
     "--workload resnet18 is a catalog workload"),
])
def test_count_0_bad_input_is_one_line(args, says, cli, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90, "gbytes_per_step": 6, "batch_size": 32}))
    rc, out, err = cli("tune", *[str(spec) if x == "SPEC" else x for x in args])
    assert rc == 2, (out, err)
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_count_0_on_an_emulated_board_counts_there_and_leaves_its_mode(tmp_path, script, cli):
    root = fakesys.build(tmp_path / "root")
    before = fakesys.read_mode(root)
    rc, out, err = cli("tune", "--backend", "sysfs", "--sysfs-root", root, "--count", "0",
                       "--deadline-ms", "50", "--json", "--", PY, script)
    assert rc == 0, err
    d = json.loads(out)
    assert d["profiled"] == 0 and d["simulated"] is True     # an emulated board is not a live one
    assert fakesys.read_mode(root) == before                 # counted, nothing set
    # the board's count ran on the CPU (this machine's torch): said, as profile says it (the
    # user's trial: only profile did)
    assert "warning: the script trains on the CPU" in err
    assert d["trains_on"] == "cpu" and d["notes"][0].startswith("warning: the script trains on the CPU")
    # and that the prior's figures are GPU training's, not this script's (it said "every mode is
    # timed for CPU training", and predicted 62 ms a step on one core at 115 MHz)
    assert "predicts its step as the board's GPU would train it" in d["notes"][0]
    assert "every mode is timed for CPU training" not in err


def test_a_script_that_cannot_be_counted_is_one_line(tmp_path, cli):
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit('no torch here')\n")
    rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--", PY, bad)
    assert rc != 0 and "Traceback" not in err
    assert "before its first optimizer step" in err


def test_probe_counts_without_a_dataloader_load_nothing_and_host_work_follows_the_operators():
    info = {"flops": 2e9, "bytes": 1e9, "samples": 0, "batches": 0, "ops": 100, "workers": 0}
    s = WorkloadSpec.from_probe(info)
    assert s.input_mb == 0.0                   # no DataLoader seen: no loading work
    assert s.host_ms is not None and s.cpu_mhz
    more = WorkloadSpec.from_probe({**info, "ops": 1000})
    assert more.host_ms > 5 * s.host_ms        # ten times the operators: the launches dominate
    seen = WorkloadSpec.from_probe({**info, "batches": 2, "input_bytes": 4e6})
    assert seen.input_mb == pytest.approx(4.0)
    unknown = WorkloadSpec.from_probe({k: v for k, v in info.items() if k != "batches"})
    assert unknown.input_mb is None            # an older probe line: the reference's loading


def test_a_command_that_is_not_there_is_bad_input(cli):
    """`tune --count 0 -- /nonexistent/cmd` exited 1, a runtime failure; a command that is not
    there is bad input: one error line, exit 2 (a user trial)."""
    rc, out, err = cli("tune", "--count", "0", "--budget-w", "30", "--", "/nonexistent/cmd")
    errors = [x for x in err.splitlines() if x.startswith("ptui: error")]
    assert rc == 2 and errors == ["ptui: error: cannot start '/nonexistent/cmd': No such file or "
                                  "directory"] and "Traceback" not in err, err


def test_a_missing_command_is_refused_before_a_board_or_a_log(cli):
    """`tune --count 0 -- no-such-command` opened the board, said it was counting one iteration and
    left an empty script log before the command failed to start (a review): it is now refused
    first, as `ptui profile` refuses it, and nothing is written."""
    from ptui.core.paths import data_dir
    rc, out, err = cli("tune", "--count", "0", "--budget-w", "30", "--", "no-such-command-ptui", "x.py")
    assert rc == 2 and err.strip().splitlines() == [
        "ptui: error: cannot start 'no-such-command-ptui': not found on $PATH"], err
    logs = data_dir() / "logs"
    assert not logs.exists() or not list(logs.iterdir())


def test_profile_of_a_command_that_is_not_there_opens_no_session(cli, tmp_path):
    """`ptui profile --session y -- /nonexistent/cmd` opened session y before it tried the command:
    y stayed, marked failed, with a resume hint that could only fail again (a review).  Now it is
    one line, exit 2, and y is free."""
    for cmd in ("/nonexistent/cmd", "no-such-command-ptui"):
        rc, out, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--count", "3",
                           "--session", "y", "--out", tmp_path / "p.csv", "--", cmd)
        errors = [x for x in err.splitlines() if x.startswith("ptui: error")]
        assert rc == 2 and len(errors) == 1 and "cannot start" in errors[0], err
        assert "resume" not in err and "Traceback" not in err
    rc, out, err = cli("sessions")
    names = [x.split()[0] for x in (out + err).splitlines() if x.split()]
    assert "y" not in names and not (tmp_path / "p.csv").exists()


def test_a_spread_as_wide_as_the_value_says_its_interval(tmp_path, cli):
    """"135.2 ms per minibatch (+-219.8)" read as if the step could take negative time (a user
    trial): a spread of half the value or more says the 90 % interval of the log-normal too."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90.0, "gbytes_per_step": 6.0, "batch_size": 32}))
    rc, out, err = cli("tune", "--count", "0", "--workload-spec", spec, "--budget-w", "30")
    assert rc == 0, err
    line = next(x for x in out.splitlines() if x.startswith("predicted:"))
    ms, sd = (float(v) for v in re.search(r"([\d.]+) ms per minibatch \(±([\d.]+)", line).groups())
    assert sd >= 0.5 * ms and "; 90 % within " in line
    lo, hi = (float(v) for v in re.search(r"90 % within ([\d.]+)-([\d.]+) ms", line).groups())
    assert 0 < lo < ms < hi


def test_a_prediction_from_the_prior_alone_always_says_its_intervals(tmp_path, cli):
    """The prior's 90 % interval was said only where its spread was half the value or more: the
    power of the pick (+-4.02 W of 22.2 W) came without one.  A prediction from the prior alone
    says both, in the text and in --json (interval90), as tune and pareto on its model."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 120.0, "gbytes_per_step": 6.0, "batch_size": 32}))
    argv = ("tune", "--count", "0", "--workload-spec", spec, "--budget-w", "30", "--device",
            "orin-agx", "--backend", "sim")
    rc, out, err = cli(*argv)
    assert rc == 0, err
    line = next(x for x in out.splitlines() if x.startswith("predicted:"))
    w, sd = (float(v) for v in re.search(r"([\d.]+) W \(±([\d.]+)", line).groups())
    assert sd < 0.5 * w, line                   # not wide: said because the prior alone decided
    lo, hi = (float(v) for v in re.search(r"90 % within ([\d.]+)-([\d.]+) W\)$", line).groups())
    assert 0 < lo < w < hi, line
    rc, out, err = cli(*argv, "--json")
    d = json.loads(out)
    for k in ("time_ms", "power_w"):
        lo, hi = d["interval90"][k]
        assert 0 < lo < d[k] < hi, d["interval90"]
    rc, out, err = cli("pareto", "--model", d["model"], "--budget-w", "30", "--json")
    assert rc == 0 and json.loads(out)["interval90"] == d["interval90"], err


def test_a_python_script_that_is_not_there_is_bad_input(cli, tmp_path):
    """`ptui profile -- python nosuch.py` started python, which exited 2 at once: ptui said the
    training script crashed, exited 1 and offered to resume a session that could only fail again
    (the user's trial).  The script is looked for first."""
    for cmd in ([PY, str(tmp_path / "nosuch.py")], [PY, "-u", str(tmp_path / "nosuch.py"), "--lr", "1"]):
        rc, out, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--count", "3",
                           "--session", "y", "--out", tmp_path / "p.csv", "--", *cmd)
        errors = [x for x in err.splitlines() if x.startswith("ptui: error")]
        assert rc == 2 and len(errors) == 1 and "nosuch.py' does not exist" in errors[0], err
        assert "resume" not in err
        rc, out, err = cli("tune", "--count", "0", "--budget-w", "30", "--", *cmd)
        assert rc == 2 and "does not exist" in err, err
        rc, out, err = cli("colocate", "--device", "orin-agx", "--infer-workload", "resnet50", "--rate",
                           "20", "--latency-ms", "250", "--budget-w", "14", "--", *cmd)
        assert rc == 2 and "does not exist" in err and "Traceback" not in err, err
    from ptui.core.profiling.userscript import _python_script
    assert _python_script(["python3", "-m", "torch.distributed.run", "x.py"]) is None
    assert _python_script(["python3", "-c", "print(1)"]) is None
    assert _python_script(["python3.11", "-X", "dev", "t.py", "a.py"]) == "t.py"
    assert _python_script(["torchrun", "t.py"]) is None


def test_count_0_with_no_mode_for_the_goal_says_where_its_model_is(tmp_path, cli):
    """An infeasible zero-profile tune saved the prior as a model and named it nowhere (a user's
    trial): pareto could not decide again from it."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90, "gbytes_per_step": 6, "batch_size": 32}))
    rc, out, err = cli("tune", "--count", "0", "--workload-spec", spec, "--deadline-ms", "1",
                       "--json")
    assert rc == 3, err
    d = json.loads(out)
    assert d["feasible"] is False and d["simulated"] is True and d["profiled"] == 0
    rc, out2, err = cli("pareto", "--model", d["model"], "--deadline-ms", "100000")
    assert rc == 0, err
    rc, out, err = cli("tune", "--count", "0", "--workload-spec", spec, "--deadline-ms", "1")
    assert rc == 3 and "pareto --model" in err


def test_fit_without_a_profile_refuses_the_flags_of_a_fit_on_one(tmp_path, cli):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90, "gbytes_per_step": 6, "batch_size": 32}))
    for flags in (["--time", "cycle"], ["--method", "gp"], ["--scratch"]):
        rc, out, err = cli("fit", "--device", "orin-agx", "--workload-spec", spec, "--out",
                           tmp_path / "m", *flags)
        assert rc == 2 and "without --profile the model is the roofline prior alone" in err, flags
        assert not (tmp_path / "m").exists()


def test_a_prior_model_takes_its_counts_from_one_source(tmp_path, cli):
    """`fit --workload resnet18 --workload-spec spec.json` saved the spec's prior as a model of
    ResNet-18; another name only names the spec's model."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90, "gbytes_per_step": 6, "batch_size": 32}))
    rc, _, err = cli("fit", "--device", "orin-agx", "--workload", "resnet18", "--workload-spec", spec,
                     "--out", tmp_path / "m")
    assert rc == 2 and "--workload resnet18 is a catalog workload" in err, err
    assert not (tmp_path / "m").exists()
    rc, _, err = cli("fit", "--device", "orin-agx", "--workload", "my-model", "--workload-spec", spec,
                     "--out", tmp_path / "m")
    assert rc == 0, err
    assert json.loads((tmp_path / "m" / "meta.json").read_text())["workload"] == "my-model"


def test_count_0_keeps_a_profiled_sessions_model(tmp_path, cli):
    """tune --count 0 --session bar, where bar was a profiled tune, replaced bar's model (its 6
    measured modes) with the roofline prior's, silently (a user trial): a profiled tune refuses
    the name of a session that exists, and so does --count 0 now.  Its own prior model of a name
    it made before is replaced, as asked."""
    import os
    from pathlib import Path
    models = Path(os.environ["PTUI_DATA_DIR"]) / "models"
    rc, _, err = cli("tune", "--count", "6", "--budget-w", "30", "--workload", "resnet18",
                     "--session", "bar")
    assert rc == 0, err
    meta = (models / "bar" / "meta.json").read_text()
    rc, out, err = cli("tune", "--count", "0", "--budget-w", "30", "--workload", "resnet18",
                       "--session", "bar")
    assert rc == 2 and not out and len(err.strip().splitlines()) == 1, (rc, err)
    assert "--session bar: a profiling session of that name exists" in err, err
    assert (models / "bar" / "meta.json").read_text() == meta
    # a fitted model of that name with no session (fit --out into the models folder) says so
    import shutil
    shutil.copytree(models / "bar", models / "fitted")
    rc, out, err = cli("tune", "--count", "0", "--budget-w", "30", "--workload", "resnet18",
                       "--session", "fitted")
    assert rc == 2 and "holds a fitted model, which --count 0 would replace" in err, err
    for _ in range(2):
        rc, _, err = cli("tune", "--count", "0", "--budget-w", "30", "--workload", "resnet18",
                         "--session", "mine")
        assert rc == 0, err


def _prior_model(tmp_path, cli):
    """`ptui fit --workload-spec` without a profile (the roofline prior alone) into tmp_path/m."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90, "gbytes_per_step": 6, "batch_size": 32}))
    rc, _, err = cli("fit", "--device", "orin-agx", "--workload-spec", spec, "--out", tmp_path / "m")
    assert rc == 0, err


def test_pareto_time_cycle_on_a_prior_model_says_what_would_work(tmp_path, cli):
    """pareto --time cycle on a model of the prior alone said 'refit it with: ptui fit ... --time
    cycle', which fit refuses without a profile (a user trial): the advice is a fit on a profile."""
    _prior_model(tmp_path, cli)
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--time", "cycle")
    assert rc == 2 and not out, err
    line = err.strip().splitlines()[-1]
    assert "roofline prior alone" in line and "--profile" in line, line


def test_pareto_batch_sizes_on_a_prior_model_does_not_call_it_a_profiles_fit(tmp_path, cli):
    """pareto --batch-sizes on a model of the prior alone said 'the model was fitted on a profile
    at batch size 32 only', where no mode was profiled (a user trial)."""
    _prior_model(tmp_path, cli)
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--batch-sizes", "16,32")
    assert rc == 2 and not out, err
    line = err.strip().splitlines()[-1]
    assert "fitted on a profile" not in line and "roofline prior" in line and "32" in line, line


def test_predict_another_batch_size_on_a_prior_model_says_it_is_the_prior_alone(tmp_path, cli):
    """predict --modes F.csv whose batch_size column asks 64 of a model of the prior alone said
    'this model was fitted at batch size 32 only', where nothing was profiled or fitted (a user's
    trial); it says what pareto --batch-sizes says.  A fitted model still says it was fitted."""
    _prior_model(tmp_path, cli)
    modes = tmp_path / "m64.csv"
    modes.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,batch_size\n12,2201.6,1300.5,3199,64\n")
    rc, out, err = cli("predict", "--model", tmp_path / "m", "--modes", modes)
    assert rc == 2 and not out, err
    line = err.strip().splitlines()[-1]
    assert line == ("ptui: error: the model is the roofline prior alone, of batch size 32 only (no "
                    "mode profiled); to predict other sizes profile them (ptui profile --batch-sizes "
                    "...) and fit that profile"), line
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "8",
                     "--out", tmp_path / "p.csv")
    assert rc == 0, err
    rc, _, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "p.csv", "--method", "gp",
                     "--out", tmp_path / "f")
    assert rc == 0, err
    rc, out, err = cli("predict", "--model", tmp_path / "f", "--modes", modes)
    assert rc == 2 and not out, err
    assert "the model was fitted on a profile at batch size 16 only" in err


def test_count_0_refuses_the_flags_it_would_ignore_and_resume_needs_a_session(cli):
    """tune --count 0 accepted --seed, --method and --sample-interval and did nothing with them;
    tune --resume without --session looked for a session named after the moment it ran (a user's
    trial)."""
    rc, out, err = cli("tune", "--device", "orin-agx", "--workload", "resnet18", "--budget-w", "30",
                       "--count", "0", "--seed", "5", "--method", "gp", "--sample-interval", "0.1")
    assert rc == 2 and not out, err
    assert err.strip().splitlines()[-1].endswith(
        "--count 0 profiles and fits nothing, so --seed, --method, --sample-interval would do "
        "nothing; drop them")
    rc, out, err = cli("tune", "--device", "orin-agx", "--workload", "resnet18", "--budget-w", "30",
                       "--resume")
    assert rc == 2 and "--resume needs --session NAME" in err, err
    rc, _, err = cli("tune", "--device", "orin-agx", "--workload", "resnet18", "--budget-w", "30",
                     "--count", "0", "--method", "auto")      # the default: it changes nothing
    assert rc == 0, err


def test_pareto_json_on_a_prior_model_carries_its_counts_as_tune_does(tmp_path, cli):
    """tune --count 0 --json said the counts under `prior`; pareto --json on the same kind of model
    said its intervals but not the counts it rests on (a user's trial)."""
    import json as js
    _prior_model(tmp_path, cli)
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--json")
    assert rc == 0, err
    d = js.loads(out)
    assert d["profiled"] == 0 and d["interval90"]
    assert d["prior"] == {"source": str(tmp_path / "spec.json"), "gflop_per_step": 90.0,
                          "gbytes_per_step": 6.0, "batch_size": 32}
