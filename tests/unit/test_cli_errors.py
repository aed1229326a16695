"""One error model: bad flag values exit 2 with one line before any work starts; device/runtime
failures exit 1, no feasible mode 3, Ctrl-C 130; the app entry uses the same codes."""
import argparse
import subprocess

import pytest

from ptui.core import errors
from tests.support.cli import PY, subprocess_env

PROFILE = ["profile", "--workload", "resnet18", "--out", "OUT"]
PARETO = ["pareto", "--model", "MODEL"]
BAD = [
    [*PROFILE, "--seed", "99999999999999999999"],
    ["fit", "--device", "orin-agx", "--profile", "p.csv", "--out", "m", "--seed", "-1"],
    ["reference", "build", "--device", "orin-agx", "--profile", "p.csv", "--out", "m", "--seed", "x"],
    ["--speed", "0"], ["--speed", "nan"], ["--speed", "inf"], ["--speed", "-2"],
    [*PROFILE, "--speed", "0"],
    [*PARETO, "--budget-w", "0"], [*PARETO, "--budget-w", "-5"], [*PARETO, "--budget-w", "nan"],
    [*PARETO, "--budget-w", "inf"], [*PARETO, "--budget-w", "-3"],
    [*PARETO, "--budget-w", "30", "--risk", "1.5"], [*PARETO, "--budget-w", "30", "--risk", "2"],
    [*PARETO, "--budget-w", "30", "--risk", "-0.1"], [*PARETO, "--budget-w", "30", "--risk", "nan"],
    [*PARETO, "--deadline-ms", "-1"], [*PARETO, "--deadline-ms", "0"],
    [*PARETO, "--budget-w", "30", "--tolerance-w", "-1"],
    [*PARETO, "--budget-w", "30", "--epochs", "0"], [*PARETO, "--budget-w", "30", "--epochs", "1.5"],
    [*PARETO, "--budget-w", "30", "--batches-per-epoch", "-4"],
    [*PROFILE, "--batch-size", "0"], [*PROFILE, "--batch-size", "100000"], [*PROFILE, "--batch-size", "-1"],
    [*PROFILE, "--sample-interval", "-1"], [*PROFILE, "--sample-interval", "0"],
    [*PROFILE, "--sample-interval", "nan"],
    [*PROFILE, "--count", "0"], [*PROFILE, "--count", "-3"],
    ["apply", "--cores", "0", "--cpu-mhz", "1", "--gpu-mhz", "1", "--mem-mhz", "1", "--dry-run"],
    ["apply", "--cores", "4", "--cpu-mhz", "nan", "--gpu-mhz", "1", "--mem-mhz", "1", "--dry-run"],
    ["--device", "nope"], ["--device", "nope", "modes"], ["modes", "--device", "nope"],
    ["--backend", "nope"],
    [*PROFILE, "--device", "orin-nano", "--batch-size", "4096"],     # B5: more than the board's memory
    # the user's trial (2026-11-27): a catalog workload and a script, a missing root
    ["tune", "--workload", "resnet18", "--budget-w", "30", "--", "python", "x.py"],
    [*PROFILE, "--", "python", "x.py"],
    ["--backend", "sysfs", "--sysfs-root", "/no/such/root", "status"],
    ["--backend", "sysfs", "--sysfs-root", "/no/such/root", *PROFILE],
]


def test_a_batch_that_does_not_fit_the_board_is_refused_up_front(tmp_path, cli):
    """Per board: a size that fits an AGX does not fit a Nano; refused before a session exists,
    also when the board is found rather than named (it failed after opening a session, exit 1)."""
    rc, _, err = cli("profile", "--device", "orin-nano", "--workload", "resnet18", "--batch-size",
                     "64", "--count", "1", "--out", tmp_path / "n.csv")
    assert rc == 2 and "does not fit orin-nano" in err and "largest batch that fits is" in err, err
    rc, _, err = cli("profile", "--workload", "resnet18", "--batch-size", "4096", "--count", "1",
                     "--out", tmp_path / "a.csv")
    assert rc == 2 and "does not fit" in err and "session" not in err, err
    rc, out, err = cli("sessions")
    assert "bs4096" not in out + err
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--batch-size",
                     "64", "--count", "1", "--out", tmp_path / "x.csv")
    assert rc == 0, err


@pytest.mark.parametrize("argv", BAD, ids=" ".join)
def test_bad_value_is_one_line_and_exit_2_before_any_work(argv, tmp_path, cli):
    argv = [str(tmp_path / "out.csv") if x == "OUT" else str(tmp_path / "m") if x == "MODEL" else x
            for x in argv]
    rc, out, err = cli(*argv)
    assert rc == 2, err
    assert err.startswith("ptui: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "data").exists()


def test_every_numeric_option_is_validated():
    from ptui.cli import _subparsers, build_parser
    p = build_parser()
    for parser in (p, *_subparsers(p)):
        for act in parser._actions:
            assert act.type not in (int, float), f"{parser.prog} {act.option_strings}: unvalidated number"


def test_sample_interval_minus_one_no_longer_hangs(tmp_path):
    r = subprocess.run([PY, "-m", "ptui", "profile", "--workload", "resnet18", "--count", "2",
                        "--sample-interval", "-1", "--out", tmp_path / "x.csv"],
                       capture_output=True, text=True, timeout=60, env=subprocess_env(tmp_path))
    assert r.returncode == 2 and "--sample-interval" in r.stderr and r.stderr.count("\n") == 1


def test_the_app_does_not_start_without_a_terminal(tmp_path):
    with open(tmp_path / "screen.txt", "w") as out:
        r = subprocess.run([PY, "-m", "ptui"], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE,
                           text=True, timeout=60, env=subprocess_env(tmp_path))
    assert r.returncode == 2
    assert r.stderr.startswith("ptui: error: the app needs a terminal") and r.stderr.count("\n") == 1
    assert (tmp_path / "screen.txt").read_text() == ""


def test_runtime_failure_exits_1(tmp_path, cli):
    (tmp_path / "empty").mkdir()
    rc, _, err = cli("--backend", "sysfs", "--sysfs-root", tmp_path / "empty", "restore")
    assert rc == 1 and err.strip().splitlines()[-1].startswith("ptui: error: "), err


def test_no_feasible_mode_exits_3(cli):
    from ptui.core.prediction.predictor import bundled_reference
    rc, out, err = cli("pareto", "--model", bundled_reference(), "--budget-w", "0.5")
    assert rc == 3 and err.startswith("ptui: error: ") and err.count("\n") == 1, err


def test_interrupted_exits_130(monkeypatch, cli):
    import ptui.cli

    def boom(a):
        raise KeyboardInterrupt
    monkeypatch.setattr(ptui.cli, "cmd_sessions", boom)
    rc, _, err = cli("sessions")
    assert rc == 130 and err == "ptui: error: interrupted\n"


def test_core_errors_share_one_root_with_their_exit_codes():
    from ptui.core.board.backends.base import ApplyError, BackendError
    from ptui.core.board.csvio import CSVError
    from ptui.core.catalogue.devices import DeviceError
    from ptui.core.catalogue.modes import ModeError
    from ptui.core.catalogue.workloads import WorkloadError
    from ptui.core.decision.pareto import InfeasibleError
    from ptui.core.prediction.predictor import ModelError
    from ptui.core.profiling.profiler import ProfileError, SessionError, ThermalLimit
    from ptui.core.profiling.store import StoreError
    codes = {CSVError: 2, DeviceError: 2, ModeError: 2, ModelError: 2, WorkloadError: 2, SessionError: 2,
             BackendError: 1, ApplyError: 1, ProfileError: 1, ThermalLimit: 1, StoreError: 1,
             InfeasibleError: 3}
    for cls, code in codes.items():
        assert issubclass(cls, errors.PtuiError), cls
        assert errors.exit_code(cls("x")) == code, cls
    assert errors.exit_code(KeyboardInterrupt()) == 130
    assert errors.exit_code(errors.PtuiError("x", 130)) == 130


@pytest.mark.parametrize("value,kw,ok", [
    ("3", dict(integer=True, ge=1), 3), ("1e3", dict(gt=0), 1000.0), (2.0, dict(integer=True), 2),
    ("nan", dict(), None), ("-inf", dict(), None), ("1.5", dict(integer=True), None),
    ("0", dict(gt=0), None), ("1", dict(lt=1), None), ("5", dict(le=4), None), ("x", dict(), None),
])
def test_number(value, kw, ok):
    if ok is None:
        with pytest.raises(errors.InputError):
            errors.number(value, "--x", **kw)
    else:
        assert errors.number(value, "--x", **kw) == ok


def test_parser_errors_are_one_line(capsys):
    from ptui.cli import build_parser
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["pareto", "--nope"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("ptui: error: ") and err.count("\n") == 1
    assert isinstance(build_parser(), argparse.ArgumentParser)


def test_jtop_preset_that_does_not_read_back_raises_apply_error():
    """It raised NameError (ApplyError was never imported in jtop.py; ruff F821 found it)."""
    from ptui.core.board.backends.base import ApplyError
    from ptui.core.board.backends.jtop import JtopBackend
    from ptui.core.catalogue.devices import get_device

    class Stuck(JtopBackend):            # the service accepts nvpmodel but the board never gets there
        def __init__(self):
            self.device = get_device("orin-agx")
            self.restored = []
            self._sysfs = type("S", (), {"snapshot": lambda s: {"mode": "before"}})()

        def _select_nvpmodel(self, mode_id, timeout):
            return False

        def current_mode(self):
            return self.device.slowest_grid_mode

        def restore(self, snap):
            self.restored.append(snap)

    b = Stuck()
    with pytest.raises(ApplyError, match="not reached through jtop") as e:
        b.apply_preset("MODE_30W", timeout=0.1)
    assert errors.exit_code(e.value) == 1 and b.restored == [{"mode": "before"}]


@pytest.mark.parametrize("value", ["0", "1", "0.0", "1e0"])
@pytest.mark.parametrize("cmd", ["pareto", "tune"])
def test_risk_0_or_1_is_refused_pointing_to_risk_mean(cmd, value, tmp_path, cli):
    """--risk is the allowed probability of exceeding the budget, strictly between 0 and 1.
    --risk 0 silently meant 'decide on the mean' (the least cautious answer; tune profiled and
    decided with it) and --risk 1 was refused without saying how to decide on the mean."""
    from ptui.core.prediction.predictor import bundled_reference
    where = (["--model", bundled_reference()] if cmd == "pareto" else
             ["--device", "orin-agx", "--workload", "resnet18", "--count", "6"])
    rc, out, err = cli(cmd, *where, "--budget-w", "30", "--risk", value)
    assert rc == 2 and err.startswith("ptui: error: ") and err.count("\n") == 1, err
    assert "--risk mean" in err and "between 0 and 1" in err, err
    assert out == "" and not (tmp_path / "data" / "tune").exists()


def test_risk_mean_decides_on_the_mean_and_help_says_what_risk_is(cli, capsys):
    """`--risk mean` is the explicit way to decide on the predicted value alone (no risk rule)."""
    import json

    from ptui.cli import build_parser
    from ptui.core.decision.pareto import Table, choose
    from ptui.core.prediction.predictor import bundled_reference, load_model
    model = load_model(bundled_reference())
    modes, _ = model.decision_space()
    tab = Table.from_prediction(modes, model.predict(modes))
    plain, safe = choose(tab, budget_w=30, risk=None), choose(tab, budget_w=30, risk=0.05)
    assert plain.index != safe.index               # the test tells them apart
    rc, out, err = cli("pareto", "--model", bundled_reference(), "--budget-w", "30", "--risk", "mean",
                       "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["mode"] == plain.mode.as_dict() and "risk" not in res["goal"]
    rc, out, err = cli("pareto", "--model", bundled_reference(), "--budget-w", "30", "--json")
    assert rc == 0 and json.loads(out)["mode"] == safe.mode.as_dict(), err
    for cmd in ("pareto", "tune"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([cmd, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "probability of exceeding" in text and "mean" in text and "0.05" in text, text


@pytest.mark.parametrize("risk,want", [(None, ["--risk", "mean"]), (0.2, ["--risk", "0.2"]), (0.05, [])])
def test_an_interrupted_tune_resumes_with_its_own_risk(risk, want):
    """The resume command an interrupted tune prints decides with the risk it was started with
    (it dropped --risk: a resumed `--risk mean` tune then decided at 0.05)."""
    import shlex

    from ptui.cli import _tune_hint
    a = argparse.Namespace(budget_w=30.0, deadline_ms=None, objective=None, method="auto",
                           apply=False, json=False, session="s", out="t.csv", command_line=[],
                           risk=risk, corpus=None)
    argv = shlex.split(_tune_hint(a))
    got = argv[argv.index("--risk"):argv.index("--risk") + 2] if "--risk" in argv else []
    assert got == want, argv


@pytest.mark.parametrize("argv, want", [
    (["tune", "--budget-w", "30"], "--count must be 0 (no profile) or between 6 and 18096 here"),
    (["profile", "--strategy", "active", "--budget-w", "30"], "--count must be between 3 and 18096 here"),
    (["profile", "--strategy", "random"], "--count must be between 1 and 4368 here"),
])
def test_a_count_out_of_range_names_the_range_the_command_accepts(argv, want, tmp_path, cli):
    """tune refuses --count 1..5 (its fit needs 6) and active profiling fewer than 3: the message
    for --count 99999 said 'between 1 and N' for both."""
    rc, out, err = cli("--device", "orin-agx", "--backend", "sim", *argv, "--workload", "resnet18",
                       "--count", "99999", "--out", tmp_path / "p.csv")
    assert rc == 2 and f"ptui: error: {want}, got 99999\n" in err and out == "", err
