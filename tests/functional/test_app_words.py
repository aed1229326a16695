"""Issue 23 in the app: the command palette, the Pareto Enter key and failed loads, Help, Apply,
the fields, the plan estimate, quitting mid-profile, small terminals, the from-scratch baseline
and modes in plain words."""
import re

import pytest

from ptui.core.devices import get_device
from tests.functional.test_app import make_app, wait_workers

ORIN = get_device("orin-agx")


async def until(pilot, cond, tries: int = 400, step: float = 0.02) -> None:
    for _ in range(tries):
        if cond():
            return
        await pilot.pause(step)
    raise AssertionError("timed out")


@pytest.fixture
def profile_csv(tmp_path):
    from tests.support.cli import run_cli
    out = tmp_path / "p.csv"
    rc, _, err = run_cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "20",
                         "--out", out)
    assert rc == 0, err
    return out


def _text(app, wid: str) -> str:
    return str(app.screen.query_one(wid).render())


# -- ctrl+p ---------------------------------------------------------------------------------------
async def test_palette_lists_the_current_screens_actions():
    """ctrl+p on Profile lists Profile's actions (it listed only navigation: the provider was
    asked for `app.screen`, the palette itself)."""
    from textual.command import CommandList
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        lst = app.screen.query_one(CommandList)
        await until(pilot, lambda: lst.option_count >= 6)
        await pilot.pause(0.2)
        titles = [str(lst.get_option_at_index(i).prompt) for i in range(lst.option_count)]
        assert any("Start profiling" in t for t in titles), titles
        assert any("Abort profiling" in t for t in titles), titles


# -- Help ------------------------------------------------------------------------------------------
async def test_help_numbers_match_the_screen_keys():
    from ptui.app import AREAS
    from ptui.screens.help import HELP
    listed = dict(re.findall(r"^(\d)\. \*\*([\w-]+)", HELP, flags=re.M))
    assert listed == {key: label for _, key, label in AREAS}, listed


async def test_help_explains_the_words_on_screen():
    from ptui.screens.help import HELP
    flat = " ".join(HELP.split())
    for word in ("CV MAPE", "risk", "P(meets the goal)"):
        assert word in flat, word
    assert "mean absolute percentage error" in flat and "held out" in flat
    assert "probability" in flat


# -- Apply -----------------------------------------------------------------------------------------
async def test_apply_says_applied_after_y():
    app, sim = make_app()
    app.state.selected = ORIN.maxn
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("5")
        await pilot.pause(0.2)
        assert "press y to apply" in _text(app, "#plan")
        await pilot.press("y")
        await wait_workers(app, pilot)
        await pilot.pause(0.3)
        plan = _text(app, "#plan")
        assert "Applied" in plan and "press y to apply" not in plan, plan
        assert sim.current_mode() == ORIN.maxn


# -- the plan estimate -----------------------------------------------------------------------------
def _estimate(plan: str) -> int:
    h, m, s = map(int, re.search(r"≈ (\d+):(\d\d):(\d\d) of device time", plan).groups())
    return 3600 * h + 60 * m + s


# -- plain words ------------------------------------------------------------------------------------------
async def test_screens_show_modes_in_plain_words():
    app, sim = make_app()
    app.state.selected = ORIN.mode(6, 1497.6, 522.75, 2133)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.pause(0.3)
        clocks = " ".join(_text(app, "#clocks").split())
        assert "CPU 1.73 GHz" in clocks and "GPU 625 MHz" in clocks and "memory 3199 MHz" in clocks
        assert "8c/1728" not in clocks
        await pilot.press("5")
        await pilot.pause(0.3)
        plan = " ".join(_text(app, "#plan").split())
        assert "6 cores · CPU 1.50 GHz · GPU 523 MHz · memory 2133 MHz" in plan, plan
        assert "8 cores · CPU 1.73 GHz · GPU 625 MHz · memory 3199 MHz" in plan, plan
        await pilot.press("y")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        assert "6 cores · CPU 1.50 GHz" in " ".join(_text(app, "#result").split())
