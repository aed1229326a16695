"""The probe's built-in training loops (`ptui profile --workload W` on a real board runs
`python -m ptui.probe.loops W`): each builds and trains one minibatch.  The end-to-end test of the
probe on a board runs one of them (tests/functional/test_userscript.py); this runs every one."""
import pytest

from ptui.probe.names import BUILTIN


@pytest.mark.parametrize("name", BUILTIN)
def test_each_builtin_loop_trains_a_minibatch(name, capsys):
    pytest.importorskip("torch")
    from ptui.probe import loops
    assert loops.main([name, "--batch-size", "1", "--steps", "1"]) == 0
    assert capsys.readouterr().out.startswith(f"training {name} bs1 on ")


def test_an_unknown_loop_says_which_are_built_in():
    pytest.importorskip("torch")
    from ptui.probe import loops
    with pytest.raises(SystemExit, match="built in: resnet18, mobilenetv3, lstm, bert-base"):
        loops.main(["yolov8n", "--steps", "1"])


def test_a_step_whose_work_changes_mid_profile_is_warned_once_and_labelled():
    """LBFGS whose line search needs fewer closure evaluations as it converges (5, then 1 per
    step): the modes read 18.6, 19.6 and 3.8 ms, every row labelled 'one optimizer step', and no
    warning (a user's trial).  Now a warning, once, and the rows' timed says it changed."""
    from ptui.core.profiling.userscript import ScriptSource

    class It:
        label, n_iter = "optimizer step with a closure (5 closure evaluations per step)", 0

        def timed(self):
            return self.label

    run = ScriptSource.__new__(ScriptSource)
    said, info = [], []
    run.it, run.steps_per_mode, run.whatif = It(), 42, False
    run.notify, run.on_info = said.append, info.append
    run._timed_said, run._timed_changed = None, ""
    run._say_timed()
    run.it.label = "optimizer step with a closure (4 closure evaluations per step)"
    run._say_timed()                           # before a mode's worth of steps: a warm-up, no warning
    assert not any(s.startswith("warning") for s in said)
    run.it.n_iter = 100
    for label in ("optimizer step with a closure (3 closure evaluations per step)", "optimizer step"):
        run.it.label = label
        run._say_timed()
    warnings = [s for s in said if s.startswith("warning")]
    assert len(warnings) == 1 and "cannot be compared" in warnings[0]
    assert info[-1]["timed"] == ("one optimizer step (changed during the profile, from one optimizer "
                                 "step with a closure (4 closure evaluations per step))")
