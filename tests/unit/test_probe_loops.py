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
