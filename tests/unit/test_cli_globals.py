"""Global options (--device, --backend, --sysfs-root, --speed) work before or after the subcommand;
a subcommand's own copy never overwrites a value given before it."""
import tempfile

import pytest

from ptui.cli import GLOBAL_OPTIONS, build_parser

VALUES = {"--device": "xavier-agx", "--backend": "sim", "--sysfs-root": tempfile.gettempdir(), "--speed": "60",
          "--corpus": "recorded.csv"}
COMMANDS = [["modes"], ["profile", "--workload", "resnet18", "--out", "x.csv"], ["sessions"],
            ["reference", "build", "--profile", "p.csv", "--out", "m"],
            ["fit", "--profile", "p.csv", "--out", "m"], ["predict", "--model", "m"],
            ["pareto", "--model", "m", "--budget-w", "30"], ["apply", "--preset", "MODE_30W", "--dry-run"],
            ["restore"], ["tune", "--workload", "resnet18", "--budget-w", "30"],
            ["emulate", "--root", "board"]]


def _dest(opt):
    return opt[2:].replace("-", "_")


def _expected(opt):
    return 60.0 if opt == "--speed" else VALUES[opt]


@pytest.mark.parametrize("opt", GLOBAL_OPTIONS)
@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c[0])
def test_global_option_before_or_after_the_command(cmd, opt):
    p = build_parser()
    before = p.parse_args([opt, VALUES[opt], *cmd])
    after = p.parse_args([*cmd, opt, VALUES[opt]])
    assert getattr(before, _dest(opt)) == _expected(opt) == getattr(after, _dest(opt))


def test_global_defaults_survive_a_subcommand():
    a = build_parser().parse_args(["profile", "--workload", "resnet18", "--out", "x.csv"])
    assert (a.device, a.backend, a.sysfs_root, a.speed) == (None, None, "/", 1.0)


def test_device_before_profile_profiles_that_device(tmp_path, cli):
    out = tmp_path / "x.csv"
    rc, _, err = cli("--device", "xavier-agx", "--backend", "sim", "profile", "--workload", "resnet18",
                     "--count", "2", "--out", out)
    assert rc == 0, err
    assert "on xavier-agx (sim)" in err
    from ptui.core.board.csvio import read_modes
    from ptui.core.catalogue.devices import get_device
    assert len(read_modes(out, get_device("xavier-agx"))) == 2   # modes on Xavier's tables


@pytest.mark.parametrize("argv", [["modes"], ["fit", "--profile", "p.csv", "--out", "m"],
                                  ["reference", "build", "--profile", "p.csv", "--out", "m"]])
def test_a_command_that_needs_a_device_says_so_in_one_line(argv, cli):
    rc, out, err = cli(*argv)
    assert rc == 2 and err.strip().count("\n") == 0 and "needs --device" in err


def test_device_given_before_modes_is_enough(cli):
    rc, out, err = cli("--device", "orin-nano", "modes", "--grid", "presets")
    assert rc == 0, err
    assert out.splitlines()[0].startswith("cores,cpu_mhz") and len(out.splitlines()) > 2


def test_sysfs_root_is_documented(capsys):
    """--sysfs-root was hidden; it is how ptui drives an emulated board (ptui emulate)."""
    for argv in (["--help"], ["apply", "--help"], ["profile", "--help"], ["restore", "--help"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)
        out = " ".join(capsys.readouterr().out.split())
        assert "--sysfs-root DIR" in out and "ptui emulate" in out and "DIR/bin/nvpmodel" in out, argv


def test_speed_with_a_command_is_refused_not_ignored(cli):
    """--speed runs the app's simulated clock faster; a command took it and ignored it."""
    rc, out, err = cli("--speed", "60", "modes", "--device", "orin-agx", "--grid", "presets")
    assert rc == 2 and out == "" and err.strip() == \
        "ptui: error: --speed applies to the app (ptui without a command), not to ptui modes"
