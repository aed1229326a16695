"""Training code shaped in ways ptui did not time well (issue 23), reproduced with plain torch by
the scripts in tests/support/thirdparty/: LBFGS with a closure, a manual parameter update (no
torch.optim step), a compiled optimizer step, and a PPO-like loop whose wall time goes mostly into
CPU rollouts between short optimizer steps."""
import csv
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

HERE = Path(__file__).resolve().parents[1] / "support" / "thirdparty"


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_lbfgs_closure_evaluations_are_not_gradient_accumulation(tmp_path, cli):
    """LBFGS's step(closure) evaluates the closure (forward + backward) up to max_iter times: that
    was labelled 'gradient accumulation: 5 backward passes per step'."""
    out = tmp_path / "l.csv"
    rc, _, err = cli("profile", "--device", "orin-agx", "--count", "2", "--sample-interval", "0.1",
                     "--out", out, "--", sys.executable, HERE / "lbfgs_closure.py")
    assert rc == 0, err
    assert "accumulation" not in err and "micro-batches" not in err, err
    assert "timing one optimizer step with a closure (5 closure evaluations per step" in err, err
    for r in _rows(out):
        assert "accumulation" not in r["timed"]
        assert r["timed"].endswith("one optimizer step with a closure (5 closure evaluations per step: "
                                   "the optimizer's own forward and backward passes)"), r["timed"]


def test_closure_words_in_time_unit():
    from ptui.core.profiler import time_unit
    from ptui.core.userscript import _Iterations
    it = _Iterations()
    for k in range(4):                       # opt 0, no backward before the step, 5 inside it
        it.step(float(k), 0, 0, False, 5)
    assert it.timed() == ("optimizer step with a closure (5 closure evaluations per step: the "
                          "optimizer's own forward and backward passes)")
    assert time_unit("one " + it.timed()).startswith("optimizer step with a closure (5 closure")


@pytest.mark.parametrize("board", ["simulated", "emulated"])
def test_a_manual_update_without_an_optimizer_step_is_named_quickly(tmp_path, cli, monkeypatch,
                                                                    request, board):
    """A script that calls backward() but updates its parameters by hand (Keras 3 on torch, a
    textbook SGD loop) was reported as 'still starting' for the whole start-up timeout (600 s).
    Now, once it has called backward() for NO_STEP_S seconds without stepping, ptui stops it and
    says what it times and how to make the script timeable; exit 1, one error line, the board back."""
    import time
    monkeypatch.setattr("ptui.core.userscript.NO_STEP_S", 3.0)
    args = ["--device", "orin-agx"]
    if board == "emulated":
        from tests.support import fakesys
        root, _ = request.getfixturevalue("emulated_board")
        before = fakesys.read_mode(root)
        args = ["--backend", "sysfs", "--sysfs-root", root]
    t0 = time.monotonic()
    rc, _, err = cli("profile", *args, "--count", "1", "--sample-interval", "0.1",
                     "--out", tmp_path / "m.csv", "--", sys.executable, HERE / "manual_update.py")
    took = time.monotonic() - t0
    assert rc == 1, err
    errors = [x for x in err.splitlines() if x.startswith("ptui: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    e = errors[0]
    assert "called backward()" in e and "no torch.optim optimizer" in e, e
    assert "ptui times torch.optim optimizer steps" in e and "use a torch.optim optimizer" in e, e
    assert "last output: iteration" in e and "full log:" in e, e
    assert took < 45, took                            # not the 600 s start-up timeout
    assert "restored to its original mode" in err
    if board == "emulated":
        assert fakesys.read_mode(root) == before


def test_an_explicit_startup_timeout_waits_that_long_for_the_first_step(tmp_path, monkeypatch):
    """--startup-timeout given: a script still calling backward() without a step is waited for that
    long (gradient accumulation over very many micro-batches), then named as above."""
    import time

    from ptui.core.backends.sim import SimJetson
    from ptui.core.clock import RealClock
    from ptui.core.devices import get_device
    from ptui.core.profiler import ProfileError
    from ptui.core.userscript import ScriptSource
    monkeypatch.setattr("ptui.core.userscript.NO_STEP_S", 1.0)
    sim = SimJetson(get_device("orin-agx"), clock=RealClock())
    src = ScriptSource(sim, [sys.executable, str(HERE / "manual_update.py")], tmp_path / "log",
                       first_step_timeout=6.0, whatif=False)       # as --startup-timeout 6 passes it
    t0 = time.monotonic()
    src.start()
    try:
        with pytest.raises(ProfileError, match=r"called backward\(\) \d+ times in \d+ s but stepped no"):
            for _ in src.events(0.1):
                pass
    finally:
        src.stop()
    assert time.monotonic() - t0 >= 5.5              # the 6 s asked for, not NO_STEP_S
