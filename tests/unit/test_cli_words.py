"""Issue 23 in the CLI: the words of its output explained in --help, tune --apply labelled
SIMULATED as apply is, conflicting flags refused."""
import pytest

from ptui.core.catalogue.devices import get_device

ORIN = get_device("orin-agx")


def _help(cli, *cmd) -> str:
    rc, out, err = cli(*cmd, "--help")
    assert rc == 0, err
    return " ".join(out.split())


@pytest.mark.parametrize("cmd,words", [
    ((), ("CV MAPE", "risk", "P(meets the goal)")),
    (("fit",), ("CV MAPE",)),
    (("pareto",), ("risk",)),
    (("tune",), ("CV MAPE", "risk", "P(meets the goal)")),
    (("profile",), ("P(meets the goal)",)),
])
def test_help_explains_the_words_of_the_output(cli, cmd, words):
    text = _help(cli, *cmd)
    explained = {"CV MAPE": "mean absolute percentage error", "risk": "probability that the chosen mode",
                 "P(meets the goal)": "probability that the mode meets the goal"}
    for w in words:
        assert f"{w}:" in text and explained[w] in text, (cmd, w, text)


def test_preset_with_mode_flags_is_refused(cli):
    rc, out, err = cli("apply", "--preset", "MODE_30W", "--cores", "4", "--dry-run")
    assert rc == 2 and err.startswith("ptui: error:") and "--preset" in err and "--cores" in err, err
    assert "plan for" not in out
    assert err.count("\n") == 1


def test_apply_on_the_simulator_says_simulated(cli):
    m = ORIN.mode(4, 729.6, 318.75, 665.6)
    rc, out, err = cli("apply", "--backend", "sim", "--device", "orin-agx", "--cores", "4", "--cpu-mhz",
                       "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6", "--yes")
    assert rc == 0, err
    assert f"applied and verified: {m.describe()} on the SIMULATED board" in out


def test_tune_apply_on_the_simulator_says_simulated(cli, tmp_path):
    rc, out, err = cli("tune", "--device", "orin-agx", "--workload", "lstm", "--budget-w", "25",
                       "--count", "6", "--method", "gp", "--apply", "--out", tmp_path / "t.csv")
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("applied and verified"))
    assert line.endswith("on the SIMULATED board"), out


def test_tunes_lines_say_the_board_is_simulated_without_apply(cli, tmp_path):
    """tune on the simulator printed "measured: ... ms" and "best measured mode" with no word of
    SIMULATED on stdout (only stderr said it; the user's trial).  Its stdout says it first."""
    rc, out, err = cli("tune", "--device", "orin-agx", "--workload", "lstm", "--budget-w", "25",
                       "--count", "6", "--method", "gp", "--out", tmp_path / "t.csv")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[1] == ("board: SIMULATED orin-agx (the figures below are for the simulated board, "
                        "not measured on a Jetson)"), out
    assert lines[3].startswith(("measured: ", "predicted: ")), out


def test_an_active_sessions_header_does_not_count_its_first_design_as_the_plan(cli, tmp_path):
    """tune --count 6 said "4 modes, 0 done, 4 to go" (the initial design) and then profiled 6
    (the user's trial): an active plan grows one mode at a time."""
    rc, out, err = cli("tune", "--device", "orin-agx", "--workload", "lstm", "--budget-w", "25",
                       "--count", "6", "--method", "gp", "--out", tmp_path / "t.csv")
    assert rc == 0, err
    assert "0 modes done, the next chosen one by one" in err and "to go" not in err, err
    assert "up to 6 modes" in err


def test_a_preset_dry_run_reads_the_board_as_every_other_plan_does(cli, tmp_path):
    """`apply --preset MODE_15W --dry-run` printed its plan and exit 0 on a board whose mode cannot
    be read (an empty sysfs tree), where the same dry run with --json and a custom mode's dry run
    fail (exit 1): a playbook's text check passed on a board any apply fails on.  It now reads the
    board first and says the mode it starts from."""
    root = tmp_path / "root"
    root.mkdir()
    base = ("--device", "orin-agx", "--backend", "sysfs", "--sysfs-root", root, "apply")
    for extra in ((), ("--json",)):
        rc, out, err = cli(*base, "--preset", "MODE_15W", "--dry-run", *extra)
        assert rc == 1 and not out and "cannot read the current mode" in err, (extra, out, err)
    rc, out, err = cli("apply", "--preset", "MODE_15W", "--dry-run")
    assert rc == 0, err
    assert f"from {ORIN.preset('MODE_30W').mode}" in out and "dry run: nothing written" in out, out


@pytest.mark.parametrize("where", ["tune_decide", "tune_decide_batches"])
def test_a_tune_stopped_while_it_fits_says_how_to_finish_it(cli, monkeypatch, tmp_path, where):
    """Ctrl-C once tune's profile was done, while it fitted, said 'ptui: error: interrupted' and
    nothing more (the README: an interrupted tune prints the command that finishes it); now the
    resume command follows, and it finishes the tune without profiling again."""
    import ptui.core as core

    def stop(*a, **k):
        raise KeyboardInterrupt
    real = getattr(core, where)
    monkeypatch.setattr(core, where, stop)
    sizes = ["--batch-sizes", "8,16", "--count", "10"] if where.endswith("batches") else ["--count", "6"]
    rc, out, err = cli("tune", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                       "--budget-w", "30", "--session", "t", *sizes)
    assert rc == 130 and not out, err
    hint = "ptui tune --session t --resume --budget-w 30 --out "
    assert hint in err and err.rstrip().endswith("ptui: error: interrupted"), err
    monkeypatch.setattr(core, where, real)
    cmd = err[err.index(hint):].split("\n")[0].split()[1:]
    rc, out, err = cli(*cmd)
    assert rc == 0 and "goal: " in out and "nothing left to profile" in err and "[    1/" not in err, err


def test_pareto_says_a_model_rests_on_a_simulated_or_replayed_profile(cli, tmp_path):
    """`ptui pareto` on a model of a simulated profile printed its figures and 'N profiled modes
    count with their measurements' with no word that those measurements were the simulator's (tune
    says 'board: SIMULATED'); a model of a board's profile has no such line."""
    prof = tmp_path / "p.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "10", "--session", "p", "--out", prof)
    assert rc == 0, err
    board = tmp_path / "board.csv"
    board.write_text(prof.read_text().replace("minibatch (SIMULATED built-in workload)", "minibatch"))
    for csv_, words in ((prof, "profile: SIMULATED"), (board, None)):
        m = tmp_path / f"m-{csv_.stem}"
        rc, _, err = cli("fit", "--device", "orin-agx", "--profile", csv_, "--method", "gp", "--out", m)
        assert rc == 0, err
        rc, out, err = cli("pareto", "--model", m, "--budget-w", "30", "--extrapolate")
        assert rc == 0, err
        assert (words in out) if words else ("SIMULATED" not in out), out


def test_pareto_over_batch_sizes_says_a_simulated_profile_too(cli, tmp_path):
    prof = tmp_path / "b.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--batch-sizes", "8,16", "--count", "12", "--session", "b", "--out", prof)
    assert rc == 0, err
    rc, _, err = cli("fit", "--device", "orin-agx", "--profile", prof, "--method", "gp", "--out", tmp_path / "m")
    assert rc == 0, err
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--batch-sizes", "8,16",
                       "--extrapolate")
    assert rc == 0, err
    assert out.splitlines()[1].startswith("profile: SIMULATED"), out


def test_a_profile_of_one_mode_says_mode_not_modes(cli, tmp_path):
    """A user's trial: `ptui profile --count 1` said '1 modes, 0 done, 1 to go' and '1 finished
    modes saved to ...'; a count of one takes the singular (core.plural), others the plural."""
    rc, out, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "mobilenetv3",
                       "--count", "1", "--session", "one", "--out", tmp_path / "one.csv")
    assert rc == 0, err
    text = out + err
    assert "1 modes" not in text, text
    assert "; 1 mode, 0 done, 1 to go" in text and "1 finished mode saved to" in text, text
    rc, out, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "mobilenetv3",
                       "--count", "2", "--session", "two", "--out", tmp_path / "two.csv")
    assert rc == 0, err
    assert "; 2 modes, 0 done, 2 to go" in out + err and "2 finished modes saved to" in out + err
