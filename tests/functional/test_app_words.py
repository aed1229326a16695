"""Issue 23 in the app: the command palette, the Pareto Enter key and failed loads, Help, Apply,
the fields, the plan estimate, quitting mid-profile, small terminals, the from-scratch baseline
and modes in plain words."""
import re

import pytest

from ptui.app import AppState, PtuiApp
from ptui.core.board.backends.sim import SimJetson
from ptui.core.board.telemetry import Sampler
from ptui.core.catalogue.devices import get_device
from ptui.core.clock import RealClock
from tests.functional.test_app import footer_keys, make_app, open_pareto, record_notifications, wait_workers

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


# -- Pareto: a failed load, Enter ---------------------------------------------------------------
@pytest.mark.slow
async def test_a_failed_load_clears_the_front_and_enter_sends_nothing(profile_csv, tmp_path):
    """After a failed load nothing of the previous file is left to pick: Enter sent a mode of the
    previous file to Apply."""
    app, _ = make_app(profile_csv=profile_csv)
    seen = record_notifications(app)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        scr = app.screen
        assert scr.table is not None and scr.sel is not None
        bad = tmp_path / "broken.csv"
        bad.write_text("cores,cpu_mhz\n1,2\n")
        scr.query_one("#path").value = str(bad)
        await pilot.press("l")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        assert scr.table is None and scr.sel is None
        assert scr.query_one("#front").row_count == 0
        scr.query_one("#front").focus()
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.state.selected is None and type(app.screen).__name__ == "ParetoScreen"
    assert any("load" in m for m in seen), seen


@pytest.mark.slow
async def test_enter_in_a_goal_field_takes_the_goal_mode_to_apply(profile_csv):
    app, _ = make_app(profile_csv=profile_csv)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        scr = app.screen
        budget = scr.query_one("#budget")
        budget.focus()
        await pilot.press("home", "ctrl+k", "2", "5")     # select all, then type 25
        await pilot.pause(0.2)
        assert budget.value == "25"
        assert "To Apply" in footer_keys(app)
        goal = scr.table.modes[scr.goal_idx]
        assert "fastest within 25 W" in _text(app, "#details")
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert type(app.screen).__name__ == "ApplyScreen" and app.state.selected == goal


async def test_enter_on_the_objective_dropdown_takes_the_mode_to_apply(profile_csv):
    app, _ = make_app(profile_csv=profile_csv)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        scr = app.screen
        chosen = scr.table.modes[scr.sel]
        scr.query_one("#objective").focus()
        await pilot.pause(0.1)
        assert "To Apply" in footer_keys(app)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert type(app.screen).__name__ == "ApplyScreen" and app.state.selected == chosen


@pytest.mark.slow
async def test_enter_in_an_open_dropdown_still_chooses(profile_csv):
    """The pick steps aside in an open dropdown: Enter there chooses the objective."""
    app, _ = make_app(profile_csv=profile_csv)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        sel = app.screen.query_one("#objective")
        sel.focus()
        await pilot.press("space")                          # opens the list
        await pilot.pause(0.2)
        assert sel.expanded
        await pilot.press("down", "enter")
        await pilot.pause(0.2)
        assert sel.value == "deadline" and type(app.screen).__name__ == "ParetoScreen"
        assert app.state.selected is None


async def test_the_footer_says_what_enter_does_on_pareto(profile_csv):
    """On the front table the footer offers Enter (the table's own Enter binding hid it); in the
    path field Enter loads, and the footer says that instead."""
    app, _ = make_app(profile_csv=profile_csv)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        scr = app.screen
        scr.query_one("#front").focus()
        await pilot.pause(0.1)
        assert "To Apply" in footer_keys(app)
        assert app.screen.active_bindings["enter"].binding.description == "To Apply"
        scr.query_one("#path").focus()
        await pilot.pause(0.1)
        keys = footer_keys(app)
        assert "To Apply" not in keys and "Load" in keys, keys
        assert app.screen.active_bindings["enter"].binding.description == "Load"


@pytest.mark.slow
async def test_enter_with_a_bad_goal_field_says_so_and_stays(profile_csv):
    """A goal field that does not hold a number keeps the old pick on screen; Enter does not take
    that stale pick to Apply."""
    app, _ = make_app(profile_csv=profile_csv)
    seen = record_notifications(app)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        budget = app.screen.query_one("#budget")
        budget.focus()
        await pilot.press("home", "ctrl+k", "2", "x")
        await pilot.pause(0.2)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.state.selected is None and type(app.screen).__name__ == "ParetoScreen"
    assert any("budget" in m for m in seen), seen


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


# -- fields ----------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_profile_fields_keep_what_is_typed_and_name_themselves():
    """`1e9` in the batch field became 19 (the field dropped the e); a bad value is said with the
    field's name, never a CLI flag."""
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        batch = app.screen.query_one("#batch")
        batch.focus()
        await pilot.press("home", "ctrl+k", *"1e9")
        await pilot.pause(0.2)
        assert batch.value == "1e9"
        plan = _text(app, "#plan")
        assert "batch size" in plan and "1e9" in plan and "--" not in plan, plan
        assert "Plan" not in plan
        await pilot.press("home", "ctrl+k", *"16")
        app.screen.query_one("#strategy").value = "active"
        count = app.screen.query_one("#count")
        count.value = "1"
        await pilot.pause(0.2)
        plan = _text(app, "#plan")
        assert "modes" in plan and "--count" not in plan and "--" not in plan, plan
        count.value = "999999"
        await pilot.pause(0.2)
        plan = _text(app, "#plan")
        assert "modes" in plan and "--" not in plan, plan


@pytest.mark.slow
async def test_pareto_epochs_field_keeps_1e9_and_names_itself():
    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        ep = app.screen.query_one("#epochs")
        ep.focus()
        await pilot.press("home", "ctrl+k", *"1e9")
        await pilot.pause(0.2)
        assert ep.value == "1e9"
        details = _text(app, "#details")
        assert "number of epochs" in details and "whole number" in details, details
        ep.value = "2.5"
        await pilot.pause(0.2)
        assert "whole number" in _text(app, "#details")


async def test_unused_fields_are_shown_as_unused_on_pareto(profile_csv):
    app, _ = make_app(profile_csv=profile_csv)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        scr = app.screen
        budget, deadline = scr.query_one("#budget"), scr.query_one("#deadline")
        assert not budget.disabled and deadline.disabled and deadline.placeholder == "unused"
        scr.query_one("#objective").value = "deadline"
        await pilot.pause(0.2)
        assert budget.disabled and budget.value == "" and budget.placeholder == "unused"
        assert not deadline.disabled
        assert scr.drawn_budget is None                    # an unused budget is not drawn
        scr.query_one("#objective").value = "energy"
        await pilot.pause(0.2)
        assert not budget.disabled and budget.value == "30" and deadline.disabled


async def test_profile_goal_field_unused_and_cleared_when_the_goal_changes():
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        scr = app.screen
        goal, value = scr.query_one("#goal"), scr.query_one("#goal-value")
        assert goal.disabled and value.disabled            # random: no goal
        scr.query_one("#strategy").value = "active"
        await pilot.pause(0.2)
        assert not goal.disabled and not value.disabled and value.value == "30"
        goal.value = "deadline"
        await pilot.pause(0.2)
        assert value.value == "" and not value.disabled    # 30 W is not 30 ms
        assert "deadline" in _text(app, "#plan")
        goal.value = "energy"
        await pilot.pause(0.2)
        assert value.disabled and value.placeholder == "unused"


# -- the plan estimate -----------------------------------------------------------------------------
def _estimate(plan: str) -> int:
    h, m, s = map(int, re.search(r"≈ (\d+):(\d\d):(\d\d) of device time", plan).groups())
    return 3600 * h + 60 * m + s


async def test_plan_estimate_scales_with_batch_size():
    app, _ = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        small = _estimate(" ".join(_text(app, "#plan").split()))
        app.screen.query_one("#batch").value = "128"
        await pilot.pause(0.2)
        big = _estimate(" ".join(_text(app, "#plan").split()))
        assert big > 1.5 * small, (small, big)


async def test_plan_estimate_shows_wall_time_at_speed():
    sim = SimJetson(ORIN, clock=RealClock(60), seed=3)
    app = PtuiApp(AppState(sim, "SIMULATED device: test", Sampler(sim, interval=0.05)))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        plan = " ".join(_text(app, "#plan").split())
        dev = _estimate(plan)
        m = re.search(r"(\d+):(\d\d):(\d\d) at --speed 60", plan)
        assert m, plan
        wall = 3600 * int(m[1]) + 60 * int(m[2]) + int(m[3])
        assert wall == pytest.approx(dev / 60, abs=1)


# -- quitting mid-profile ---------------------------------------------------------------------------
@pytest.mark.slow
async def test_q_during_a_profile_asks_first(slower_profiler):
    app, sim = make_app()
    original = sim.current_mode()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.1)
        await pilot.press("s")
        prof = app.screen
        await until(pilot, lambda: prof.run is not None and prof.run.progress is not None)
        await pilot.press("q")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "QuitScreen" and prof.running
        await pilot.press("n")                              # no: the profile goes on
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "ProfileScreen" and prof.running
        assert app.is_running
        await pilot.press("q")
        await pilot.pause(0.1)
        await pilot.press("y")                              # yes: abort, restore, then exit
        await until(pilot, lambda: not prof.running and not app.is_running)
    assert sim.current_mode() == original and sim.workload is None


async def test_q_when_idle_quits_at_once():
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("q")
        await pilot.pause(0.3)
        assert not app.is_running


# -- small terminal -----------------------------------------------------------------------------------
async def test_a_terminal_below_80x24_gets_a_notice():
    app, _ = make_app()
    seen = record_notifications(app)
    async with app.run_test(size=(70, 20)) as pilot:
        await pilot.pause(0.3)
        assert app.sub_title.startswith("[70x20 < 80x24]")
    assert any("80x24" in m and "70x20" in m for m in seen), seen


async def test_no_size_notice_at_80x24():
    app, _ = make_app()
    seen = record_notifications(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
    assert not any("80x24" in m for m in seen), seen


# -- Fine-tune: the from-scratch baseline -------------------------------------------------------------
def test_finetune_shows_the_from_scratch_baseline():
    """README: Fine-tune 'shows cross-validated MAPE next to the from-scratch baseline'; the
    screen now does, from the fit's own cross-validation of PowerTrain's scratch recipe."""
    from ptui.screens.finetune import result_lines
    metrics = {t: {"choice": "gp-stack", "cv_mape": 2.5, "cv_coverage90": 92.0,
                   "candidates_cv_mape": {"gp-stack": 2.5, "transfer": 4.0, "scratch": 11.25}}
               for t in ("time", "power")}
    text = "\n".join(result_lines(metrics, "50 profiled modes", 3.0, "m"))
    assert "from scratch" in text and "11.2%" in text
    for m in metrics.values():                     # without torch: no network recipe at all
        m["candidates_cv_mape"].pop("scratch")
        m["note"] = "PowerTrain network recipes skipped: torch is not installed"
    text = "\n".join(result_lines(metrics, "50 profiled modes", 3.0, "m"))
    assert "not run" in text and "torch is not installed" in text


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



KEY = re.compile(r"\d+c/[\d.]+/[\d.]+/[\d.]+")
"""A compact mode key, '6c/2112/522.75/3199': for files and JSON, not for people."""


async def test_pareto_and_colocate_details_say_modes_in_plain_words():
    """Pareto's details said 'least energy: 6c/2112/522.75/3199' and Colocate's 'pick
    6c/2201.6/726.75/3199' (a user's trial), where the README and the CLI say a mode in words.
    Both say Mode.describe()'s words, on lines that fit their panels at 80x24."""
    from rich.text import Text

    from ptui.core import Mode
    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.3)
        scr = app.screen
        details = scr.query_one("#details")
        text = str(details.render())
        assert not KEY.search(text), text
        w = scr.view.energy.least.mode.words()
        lines = text.splitlines()
        k = next(i for i, ln in enumerate(lines) if ln.startswith("least energy: "))
        assert all(x in " ".join(lines[k:k + 2]) for x in w), lines[k:k + 2]
        assert all(Text.from_markup(ln).cell_len <= details.content_size.width for ln in lines)
        await pilot.press("6")
        await pilot.pause(0.1)
        scr = app.screen
        scr.query_one("#go").focus()
        await pilot.press("d")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        colo = scr.query_one("#colo-details")
        text = str(colo.render())
        pick = Mode.from_key(scr.view.body["pick"]["key"])
        assert not KEY.search(text), text
        lines = text.splitlines()
        k = next(i for i, ln in enumerate(lines) if ln.startswith("pick "))
        assert all(x in " ".join(lines[k:k + 2]) for x in pick.words()), lines[k:k + 2]
        assert all(Text.from_markup(ln).cell_len <= colo.content_size.width for ln in lines[k:k + 3])

def test_tunes_automatic_names_are_shortened_like_profiles():
    """The Pareto screen's list wrapped 'tune-orin-agx-spec-20261127-131013' over three rows at 80
    columns: only '<device>-...' names were shortened (a user's trial)."""
    from ptui.screens.profile import short_name
    assert short_name("tune-orin-agx-spec-20261127-131013", "orin-agx") == "tune spec 11-27 13:10:13"
    assert short_name("tune-auto-script-20261127-131013-2", "orin-agx") == "tune script 11-27 13:10:13-2"
    assert short_name("orin-agx-resnet18-bs8-16-20261127-131013", "orin-agx") == "resnet18 bs8,16 11-27 13:10:13"
    assert short_name("tune-xavier-agx-spec-20261127-131013", "orin-agx") == "tune-xavier-agx-spec-20261127-131013"
    assert short_name("mine", "orin-agx") == "mine"


async def test_help_names_every_key_a_screen_binds():
    """Help (`?`) left out Pareto's `l` and `g`, Apply's `s` and Colocate's `r`, which only the
    footers showed (an app trial).  Every key a screen binds is now in that screen's item."""
    import importlib

    from ptui.app import AREAS
    from ptui.screens.help import HELP
    items = dict(re.findall(r"^(\d)\. (.*?)(?=^\d\. |^\s*$)", HELP, flags=re.M | re.S))
    missing = []
    for module, number, _ in AREAS:
        mod = importlib.import_module(f"ptui.screens.{module}")
        said = " ".join(items[number].split())
        for cls in vars(mod).values():
            if not (isinstance(cls, type) and cls.__module__ == mod.__name__):
                continue
            for b in getattr(cls, "BINDINGS", []):
                if getattr(b, "show", True) and b.key not in ("enter", "escape") and \
                        not any(f"`{k}`" in said for k in b.key.split(",")):
                    missing.append((module, b.key))
    assert not missing, missing


async def test_pareto_says_a_spread_with_one_sign_when_nothing_meets_the_goal():
    """Pareto's details say a spread as '± 0.69'; where no mode met the budget its message said
    the lowest-power mode's as '(+-0.2)', another sign for the same thing on the same panel.
    The CLI's figures and its 'no mode stays within' line say '±' alike."""
    from ptui.core.prediction.predictor import bundled_reference
    from tests.support.cli import run_cli
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await open_pareto(app, pilot)
        scr.query_one("#budget").value = "3"
        await wait_workers(app, pilot)
        await pilot.pause(0.3)
        text = str(scr.query_one("#details").render())
        assert "no mode stays within 3 W" in text and re.search(r"W \(±[\d.]+\)", text), text
        assert "+-" not in text, text
    model = str(bundled_reference())
    rc, out, err = run_cli("pareto", "--model", model, "--budget-w", "3")
    assert rc == 3 and "no mode stays within 3 W" in err and "(±" in err and "+-" not in err, err
    rc, out, err = run_cli("pareto", "--model", model, "--budget-w", "30")
    assert rc == 0 and re.search(r"ms per minibatch \(±[\d.]+\), [\d.]+ W \(±[\d.]+\)", out), out
    assert "+-" not in out, out


async def test_a_profiles_modes_are_said_measured_not_predicted(profile_csv):
    """A profile CSV on Pareto: the plot said 'measured modes' and the panel '(measured)', but
    its least-energy line and its reasons said 'predicted' ('its predicted power is over 30 W',
    'no mode stays within 12 W; ... (predicted)'): the profile's rows were not marked measured
    (a profile over several batch sizes was).  Every row of a profile is a measurement."""
    app, _ = make_app(profile_csv=profile_csv)
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await open_pareto(app, pilot)
        assert scr.model is None and scr.table.measured.all()
        assert scr.view.energy is not None and scr.view.energy.source == "measured"
        scr.query_one("#budget").value = "1"
        await wait_workers(app, pilot)
        await pilot.pause(0.3)
        text = _text(app, "#details")
        assert "no mode stays within 1 W" in text and "(measured)" in text, text
        assert "predicted" not in text, text


async def test_a_simulated_profile_is_not_said_measured_alone(profile_csv):
    """A profile made on the simulator (its `timed` says SIMULATED) loaded on Pareto: the panel
    said '(measured)' and the plot 'measured modes', with no word that no board measured them (a
    technician took its figures for a board's).  Both now say SIMULATED; a board's profile does not."""
    import csv
    rows = list(csv.DictReader(profile_csv.open()))
    assert all("SIMULATED" in r["timed"] for r in rows)
    app, _ = make_app(profile_csv=profile_csv)
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await open_pareto(app, pilot)
        assert scr.model is None
        text = _text(app, "#details")
        assert "(measured)" in text and "SIMULATED" in text, text
    # the same rows said measured on a board (timed 'minibatch'): no SIMULATED word
    board = profile_csv.with_name("board.csv")
    with board.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({**r, "timed": "minibatch"} for r in rows)
    app, _ = make_app(profile_csv=board)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_pareto(app, pilot)
        text = _text(app, "#details")
        assert "(measured)" in text and "SIMULATED" not in text, text


async def test_apply_of_a_simulated_profiles_mode_says_simulated(profile_csv):
    """A mode picked on Pareto from a profile made on the simulator: Apply said 'measured while
    profiling 133.0 ms per minibatch, 10.36 W' with no word that the simulator made the figures
    (and compared the board's watts with them as if a board had).  It says SIMULATED now."""
    app, _ = make_app(profile_csv=profile_csv)
    async with app.run_test(size=(100, 32)) as pilot:
        await open_pareto(app, pilot)
        await pilot.press("enter")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        plan = _text(app, "#plan")
        assert "SIMULATED, measured while profiling" in plan and "predicted" not in plan, plan
