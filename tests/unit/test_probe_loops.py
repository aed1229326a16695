"""The probe's built-in training loops (`ptui profile --workload W` on a real board runs
`python -m ptui.probe.loops W`): each builds and trains one minibatch.  The end-to-end test of the
probe on a board runs one of them (tests/functional/test_userscript.py); this runs every one."""
import time

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
        label, n_iter, uneven = "optimizer step with a closure (5 closure evaluations per step)", 0, False

        def timed(self):
            return self.label

    run = ScriptSource.__new__(ScriptSource)
    said, info = [], []
    run.it, run.steps_per_mode, run.whatif, run.backend = It(), 42, False, None
    run.notify, run.on_info = said.append, info.append
    run._timed_said, run._timed_changed = None, ""
    run._timed_unsaved, run._timed_saved_at = None, float("-inf")
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
    run._save_timed(force=True)                # the store has the last one (at most once a second)
    assert info[-1]["timed"] == ("one optimizer step (changed during the profile, from one optimizer "
                                 "step with a closure (4 closure evaluations per step))")


class _Board:
    """A board whose script's steps are fed by hand (ScriptSource on a board, not a what-if)."""
    simulated = False

    class clock:                                 # noqa: N801 - a backend's clock attribute
        now = staticmethod(time.monotonic)

    def read(self):
        return None


class _Proc:
    """The script, running."""
    pid = 0

    def poll(self):
        return None


def _fed_source(tmp_path, closures, **kw):
    """A ScriptSource on a board whose probe has sent one step 0.2 ms long per closure count."""
    from ptui.core.profiling.userscript import ScriptSource
    src = ScriptSource(_Board(), ["python", "train.py"], tmp_path / "log", whatif=False,
                       steps_per_mode=42, **kw)
    src.proc, src.t_start = _Proc(), time.monotonic()
    for k, ncl in enumerate(closures):
        src.q.put((1, f"S {k * 0.0002:.6f} 0 0 {ncl} c0.0"))
    return src


def _take(src, n):
    """The minibatch events of the first n iterations the source reads."""
    from ptui.core.board.backends.base import MinibatchEvent
    events, got = src._board_events(0.5), 0
    for ev in events:
        got += isinstance(ev, MinibatchEvent)
        if got == n:
            break
    events.close()


def test_a_step_label_that_flickers_is_not_written_to_the_store_at_every_step(tmp_path):
    """A step whose closure evaluations vary (1 or 2 a step) changes its label, a median over the
    last 20 steps, at about a fifth of its steps; each change was a durable session-store write
    on the thread that reads the probe (7800 writes, 17.7 of 22 s, in a 3-mode profile of a
    0.2 ms step on an emulated board: the reader fell behind, each mode slower than the last).
    Now the label goes to the store at most once a TIMED_SAVE_S, and its last change at stop."""
    import random

    from ptui.core.profiling import userscript
    writes = []
    rng, n = random.Random(0), 3000
    src = _fed_source(tmp_path, [rng.choice((1, 2)) for _ in range(n)], on_info=writes.append)
    t0 = time.monotonic()
    _take(src, n - 1)
    elapsed = time.monotonic() - t0
    assert len(writes) <= 2 + elapsed / getattr(userscript, "TIMED_SAVE_S", 1.0), (len(writes), elapsed)
    src.proc = None
    src.stop()
    assert writes[-1]["timed"].startswith("one " + src.it.timed() + " (changed during the profile")


def test_the_first_estimate_counts_each_mode_s_settling(tmp_path):
    """'one iteration took 0.00 s: a mode needs at least 42 iterations, about 0 s plus settling;
    about 0 s for 3 modes', then 5 s a mode in the ETA: the settling (and the power samples a
    mode records) was left out of the sum."""
    said = []
    src = _fed_source(tmp_path, [1] * 100, notify=said.append, modes_todo=3)
    _take(src, 50)
    [est] = [s for s in said if s.startswith("one iteration took")]
    total = est.rsplit("about ", 1)[1]
    assert total.endswith(" s for 3 modes") and 12 <= float(total.split()[0]) <= 20, est


def test_a_modes_time_limit_does_not_grow_with_the_profiles_age(tmp_path):
    """Each step set a mode's time limit to 3x its iterations at that pace plus the time since the
    script started: 2 h into a profile a hung script held its profiling mode over 2 h before the
    one-line error and the restore.  The start-up counts once: the time to the first step."""
    src = _fed_source(tmp_path, [1] * 50)
    _take(src, 1)                                    # the script stepped at once (start-up ~0)
    src.t_start = time.monotonic() - 7200.0           # ... and has run for 2 h since
    _take(src, 40)
    assert src.mode_timeout_s < 60.0, src.mode_timeout_s


def test_the_first_estimate_is_not_the_warm_up_iteration(tmp_path):
    """The first iteration warms up (0.25 s of a script whose steps take 16 ms): the estimate
    was taken from it, and overstated the profile by the warm-up x the iterations of each mode."""
    from ptui.core.profiling.userscript import ScriptSource
    said = []
    src = ScriptSource(_Board(), ["python", "train.py"], tmp_path / "log", whatif=False,
                       steps_per_mode=400, notify=said.append, modes_todo=3)
    src.proc, src.t_start = _Proc(), time.monotonic()
    t = [0.0, 0.25] + [0.25 + 0.016 * k for k in range(1, 40)]
    for x in t:
        src.q.put((1, f"S {x:.6f} 0 0 1 c0.0"))
    _take(src, 20)
    [est] = [s for s in said if s.startswith("one iteration took")]
    assert est.startswith("one iteration took 0.02 s"), est
