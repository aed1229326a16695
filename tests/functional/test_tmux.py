"""The real app in a real terminal (tmux): the whole journey, checked on screen."""
import shutil

import pytest

from tests.support.tmux_drive import journey


@pytest.mark.skipif(not shutil.which("tmux"), reason="tmux is not installed on this machine")
def test_user_journey_in_tmux():
    caps = journey()
    assert "SIMULATED" in caps["dashboard"]
    assert "cross-validated MAPE" in caps["finetune"]
    assert "rolled back" in caps["rolled-back"]
