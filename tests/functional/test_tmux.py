"""The real app in a real terminal (tmux): the whole journey, checked on screen.

The driver only waits for each screen; the checks here are on what those screens say: the mode the
Pareto screen picks is the one planned, applied and verified; it is predicted within the budget;
the fit is accurate; the measured power agrees with the prediction; the rollback lands on the
mode the board started in."""
import re
import shutil

import pytest

from tests.support.tmux_drive import START, _flat, journey

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _panel(screen: str, anchor: str, height: int = 14) -> str:
    """The text of the boxed panel whose first line holds `anchor`, lines joined, borders dropped
    (the app puts panels side by side, so flattening the whole screen would interleave them)."""
    lines = screen.splitlines()
    i = next(k for k, line in enumerate(lines) if anchor in line)
    c = lines[i].index(anchor)
    out = []
    for line in lines[i:i + height]:
        part = line[c:].split("│")[0]
        if "╰" in line[max(0, c - 2):c + 1]:
            break
        out.append(part)
    return _flat(" ".join(out))


def _pick(caps):
    """The mode the Pareto screen picked, as its details panel says it (over two lines)."""
    text = _panel(caps["pareto"], "fastest within 30 W")
    m = re.search(r"(\d+ cores? · CPU [\d.]+ GHz) (GPU \d+ MHz · memory \d+ MHz)", text)
    assert m, text
    return f"{m[1]} · {m[2]}", text


@pytest.mark.skipif(not shutil.which("tmux"), reason="tmux is not installed on this machine")
@pytest.mark.parametrize("cols,rows", [(80, 24), (100, 30)])
def test_user_journey_in_tmux(cols, rows):
    caps = journey(cols=cols, rows=rows)
    for name, screen in caps.items():        # the footer is whole: no key label cut off
        footer = screen.rstrip("\n").splitlines()[-1]
        assert "Quit" in footer and "Screens" in footer, (name, footer)
        assert len(screen.splitlines()) <= rows, name
    mode, pareto = _pick(caps)
    power = float(re.search(r"power ([\d.]+) W ± [\d.]+", pareto)[1])
    assert power <= 30.0                                          # predicted within the budget
    plan = _flat(caps["apply-plan"])
    assert f"Apply {mode}" in plan and f"now: {START}" in plan
    done = _flat(caps["apply-done"])
    assert f"applied and verified: {mode}" in done and f"Applied {mode}" in done, done
    # the pick's figure is a prediction or, for a profiled mode, its measurement while profiling
    got = re.search(r"measured ([\d.]+) W over 10 s .*? (?:predicted|measured while profiling) "
                    r"([\d.]+) W", done)
    assert got, done
    measured, expected = map(float, got.groups())
    assert expected == pytest.approx(power, abs=0.01)
    assert measured == pytest.approx(expected, rel=0.15)
    fit = _flat(caps["finetune"])
    mape = re.search(r"time +([\d.]+)% +(\d+)% .*? power +([\d.]+)% +(\d+)%", fit)
    assert mape, fit
    assert float(mape[1]) < 20 and float(mape[3]) < 20          # cross-validated MAPE
    assert 50 <= int(mape[2]) <= 100 and 50 <= int(mape[4]) <= 100   # 90 % interval coverage
    assert f"now: {START}" in _flat(caps["rolled-back"])
    assert "nvpmodel MODE_30W" in _flat(caps["dashboard-after"])
