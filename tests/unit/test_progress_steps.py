"""Progress as typed values (issue 24 item 3): a face reads a step's kind, never its words."""
import pytest

from ptui.core.progress import NOTE, SAVING, STAGE, Step, stage


def test_a_step_is_its_words_and_carries_its_kind():
    s = stage("fitting time (gp)\non 12 modes")
    assert s == "fitting time (gp) on 12 modes" and s.kind == STAGE      # one line
    assert Step.of("anything").kind == NOTE and Step.of(s) is s
    with pytest.raises(ValueError):
        Step("x", "done")


@pytest.mark.parametrize("kind", [STAGE, NOTE, SAVING])
def test_a_step_crosses_a_pipe_with_its_kind(kind):
    s = Step("training the chosen network recipe (time: gp) on all 40 modes", kind)
    back = Step.from_line(s.line())
    assert back == s and back.kind == kind


def test_the_fit_progress_bar_counts_stages_by_kind_not_by_words(monkeypatch, tmp_path):
    """`ptui fit` starts a stage for a STAGE step whatever its words (it matched 'fitting',
    'training', 'fine-tuning' at the start and 'chosen' anywhere), and never shows 'saving'."""
    from ptui import cli, core
    stages, shown = [], []

    class Bar:
        done = 0

        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def stage(self, text):
            stages.append(str(text))

        def update(self, done, text, line):
            shown.append(str(text))

    def fake_fit(dev, profile, progress, **kw):
        progress(stage("choosing the training recipe"))          # a stage, though not 'fitting'
        progress(Step("fitting is what this note is about"))     # a note, though it says 'fitting'
        progress(Step("saving", SAVING))
        raise SystemExit(0)
    monkeypatch.setattr("ptui.cli.Steps", Bar)          # where the CLI looks it up
    monkeypatch.setattr(core, "fit", fake_fit)
    with pytest.raises(SystemExit):
        cli.main(["fit", "--device", "orin-agx", "--profile", "p.csv", "--out", str(tmp_path / "m")])
    assert stages == ["choosing the training recipe"]
    assert shown == ["fitting is what this note is about"]
