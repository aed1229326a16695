"""When the board cannot be put back after profiling, nobody says it was (CLI and app words)."""
import signal

import pytest

from ptui.core.board.backends.base import BackendError
from ptui.core.board.backends.sim import SimJetson
from ptui.core.board.signals import Terminated


def test_cli_does_not_claim_a_restore_that_failed(tmp_path, cli, monkeypatch):
    real = SimJetson.restore
    calls = {"n": 0}

    def failing_restore(self, snap):
        calls["n"] += 1
        raise OSError("EBUSY writing the EMC rate")
    monkeypatch.setattr(SimJetson, "restore", failing_restore)
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "2",
                     "--out", tmp_path / "p.csv")
    monkeypatch.setattr(SimJetson, "restore", real)
    assert rc == 1 and calls["n"] == 1
    assert "NOT back in its original mode" in err
    assert "the device was restored" not in err
    assert err.strip().splitlines()[-1].startswith("ptui: error: could not restore the original mode")



REFUSED = "writing 318750000 to devfreq/min_freq failed: Operation not permitted"


@pytest.mark.parametrize("stop, said", [
    (Terminated(signal.SIGTERM), "profiling was stopped by SIGTERM"),
    (BackendError("writing 522750000 to devfreq/max_freq failed"),
     "profiling failed: writing 522750000 to devfreq/max_freq failed"),
    (BackendError(REFUSED), f"profiling failed: {REFUSED}")])
def test_why_profiling_stopped_is_said_when_the_put_back_fails_too(tmp_path, cli, monkeypatch, stop, said):
    """SIGTERM (or a mode the board refused) stopped a profile whose put-back then failed: ptui said
    only 'could not restore the original mode: ...', neither the signal nor the refused write (an
    emulated board with an immutable GPU clock file)."""
    def failing_restore(self, snap):
        raise BackendError(REFUSED)
    monkeypatch.setattr(SimJetson, "restore", failing_restore)
    real_apply, n = SimJetson.apply_mode, [0]

    def apply_mode(self, mode, **kw):
        n[0] += 1
        if n[0] == 2:
            raise stop
        return real_apply(self, mode, **kw)
    monkeypatch.setattr(SimJetson, "apply_mode", apply_mode)
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "3",
                     "--out", tmp_path / "p.csv")
    assert rc == 1 and "NOT back in its original mode" in err, err
    last = err.strip().splitlines()[-1]
    same = said.endswith(REFUSED)             # one reason (a stopped emulator's): said once
    assert last == (f"ptui: error: {said}; then could not restore the original mode"
                    f"{' either, for the same reason' if same else ': ' + REFUSED}; `ptui restore` "
                    f"tries again"), last


def test_a_profile_that_failed_before_touching_the_board_does_not_say_it_restored_it(tmp_path, cli,
                                                                                      monkeypatch):
    """The board's undo state could not be saved, so the profile wrote nothing to the board; it
    said 'the EMULATED device was restored to its original mode' before the error (an emulated
    board with chattr +i on PTUI_STATE_DIR)."""
    from ptui.core.board.undo import UnsavedState
    from ptui.core.profiling.profiler import Profiler

    def unsaved(self, info):
        raise UnsavedState("cannot save the board's undo state in /x (Operation not permitted): "
                           "nothing was written to the board")
    monkeypatch.setattr(Profiler, "start_state", unsaved)
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "2",
                     "--out", tmp_path / "p.csv")
    assert rc == 1 and "restored" not in err, err
    assert "nothing was written to the SIMULATED device" in err, err
