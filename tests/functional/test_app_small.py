"""The app at 80x24 (issue 10 C1-C3): nothing cut off, nothing covered, pick inputs from lists."""
import pytest

from ptui.core.catalogue.devices import get_device
from tests.functional.test_app import make_app, on_screen, open_pareto, pick_to_apply, wait_workers

ORIN = get_device("orin-agx")


def _fits(dt) -> bool:
    """Every column of a DataTable is visible without scrolling sideways."""
    return dt.virtual_size.width <= dt.scrollable_content_region.width


async def test_pareto_front_table_fits_80x24():
    """All six columns of the front (cores, CPU, GPU, EMC, epoch time, W) show at 80x24 (only
    'cores CPU GPU EMC ep' did)."""
    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.3)
        dt = app.screen.query_one("#front")
        assert dt.row_count > 3
        assert _fits(dt), (dt.virtual_size, dt.scrollable_content_region)
        plot = app.screen.query_one("#pareto-plot")
        assert plot.region.width >= 34                       # the plot keeps a readable width


async def test_help_fits_24_rows():
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        box = app.screen.query_one("VerticalScroll")
        assert box.region.bottom <= 24, box.region
        assert box.virtual_size.height <= box.scrollable_content_region.height, \
            (box.virtual_size, box.scrollable_content_region)      # all of it shows, no scrolling


async def test_resume_choices_fit_on_one_line():
    """A long session name in the resume dropdown stays on one line (it wrapped over 4)."""
    from ptui.core.profiling.store import Store
    st = Store()
    name = "orin-agx-resnet18-bs16-20261122-155458"
    st.create_session(name, device="orin-agx", workload="resnet18", batch_size=16, seed=0,
                      backend="sim", plan=ORIN.pt_grid()[:50], params={}, original_mode=None)
    st.set_status(name, "aborted")
    st.close()
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.3)
        sel = app.screen.query_one("#resume")
        opts = sel._options
        assert len(opts) == 2                                  # the prompt and the session
        label = str(opts[1][0])
        assert "15:54:58" in label and "resnet18 bs16" in label and "0/50" in label and "aborted" in label
        sel.focus()
        await pilot.pause(0.1)
        await pilot.press("enter")                             # open the dropdown
        await pilot.pause(0.3)
        overlay = sel.query_one("SelectOverlay")
        assert overlay.display and overlay.option_count == 2
        # one line per choice: the list's content is as tall as its choices
        assert overlay.virtual_size.height == 2, (label, overlay.virtual_size, overlay.region)


async def test_resume_choices_are_those_that_resume_on_this_board():
    """The app's resume list offered every unfinished session of the device, a board's and a
    replayed one on the simulator too, which Resume then refused (their rows are measured or
    replayed, not simulated): it lists those that resume on the app's board."""
    from ptui.core.profiling.store import Store
    st = Store()
    for kind in ("sim", "sysfs", "replay"):
        st.create_session(f"made-on-{kind}", device="orin-agx", workload="resnet18", batch_size=16,
                          seed=0, backend=kind, plan=ORIN.pt_grid()[:5], params={}, original_mode=None)
        st.set_status(f"made-on-{kind}", "interrupted")
    st.close()
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.3)
        values = [o[1] for o in app.screen.query_one("#resume")._options[1:]]
        assert values == ["made-on-sim"], values


@pytest.mark.slow
async def test_no_toast_repeats_a_status_panel():
    """At 80x24 a toast sits over the bottom right: over the profile table and the Apply plot's
    axis.  What a panel already says (profile finished, applied, rolled back) gets no toast."""
    app, sim = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _profile(app, pilot, 3)
        assert "profile finished" in str(app.screen.query_one("#status").render())
        assert len(app._notifications) == 0, [n.message for n in app._notifications]
        app.state.selected = ORIN.presets[0].mode
        app.state.selected_basis, app.state.selected_pred = "predicted", {"power_w": 40.0}
        await pilot.press("5")
        await pilot.pause(0.2)
        await pilot.press("y")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        assert "applied and verified" in str(app.screen.query_one("#result").render())
        assert len(app._notifications) == 0, [n.message for n in app._notifications]
        await pilot.press("r")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        assert "rolled back to" in str(app.screen.query_one("#result").render())
        assert len(app._notifications) == 0, [n.message for n in app._notifications]


async def _profile(app, pilot, count: int) -> None:
    """A profile of `count` modes from the Profile screen (2, the count, s), run to its end; the
    keys go to the results table, not to a field."""
    await pilot.press("2")
    await pilot.pause(0.1)
    app.screen.query_one("#count").value = str(count)
    app.screen.query_one("#results").focus()
    await pilot.pause(0.1)
    await pilot.press("s")
    await wait_workers(app, pilot)


def _lstm_profile(path, count=20):
    from tests.support.cli import run_cli
    rc, _, err = run_cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", str(count),
                         "--out", path)
    assert rc == 0, err
    return path


async def test_a_profile_csv_counts_epochs_with_its_own_workload(tmp_path):
    """A profile of the LSTM is turned into epochs with the LSTM's minibatches per epoch, not with
    those of the workload the app happens to be set to (ResNet-18)."""
    from ptui.core.catalogue.workloads import WORKLOADS
    csv = _lstm_profile(tmp_path / "p.csv")
    app, _ = make_app(profile_csv=csv)
    assert app.state.workload != "lstm"
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        scr = app.screen
        assert scr.table is not None and len(scr.table) == 20
        want = WORKLOADS["lstm"].with_batch(16).minibatches_per_epoch
        assert want != WORKLOADS[app.state.workload].minibatches_per_epoch
        assert scr.mb_per_epoch == want


async def test_pareto_labels_a_script_whatif_profile(tmp_path):
    """A profile of the user's script on the simulator is a what-if from the model's measured size:
    the Pareto screen says so (it said 'measured'), and counts optimizer steps, not epochs of a
    catalogued workload it knows nothing about."""
    import csv as _csv
    src = _lstm_profile(tmp_path / "p.csv")
    rows = list(_csv.reader(src.open()))
    h = rows[0]
    for r in rows[1:]:
        r[h.index("timed")] = "what-if from the model's measured size (SIMULATED): one optimizer step"
        r[h.index("workload")] = "script"
    whatif = tmp_path / "script.csv"
    with whatif.open("w", newline="") as f:
        _csv.writer(f).writerows(rows)
    app, _ = make_app(profile_csv=whatif)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        scr = app.screen
        assert scr.table is not None
        details = str(scr.query_one("#details").render())
        assert "what-if from the model's measured size" in details, details
        assert "(measured)" not in details
        assert "step" in details and "minibatch" not in details, details


async def test_pareto_picks_saved_models_and_profiles_from_a_list():
    """The models and profiles ptui saved (and the bundled reference) are offered in a list;
    choosing one loads it, no path typed."""
    from ptui.core import paths
    paths.profiles_dir().mkdir(parents=True, exist_ok=True)
    csv = _lstm_profile(paths.profiles_dir() / "orin-agx-lstm-bs16-20261122-101010.csv")
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        scr = app.screen
        sel = scr.query_one("#source")
        values = [v for _, v in sel._options if v is not sel.BLANK]
        assert str(csv) in values and any("reference" in str(p) for p, _ in sel._options)
        sel.value = str(csv)
        await pilot.pause(0.1)
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        assert scr.table is not None and len(scr.table) == 20
        assert scr.query_one("#path").value == str(csv)
        assert sel.region.right <= 80 and sel.region.height == 3


@pytest.mark.slow
async def test_resizing_the_terminal_keeps_every_plot():
    """Shrinking the terminal under a drawn plot crashed the app (plotext kept the last build's
    geometry: IndexError in its legend); the plot is redrawn at its new size instead."""
    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=(100, 30)) as pilot:
        for key in ("4", "1", "5"):
            await pilot.press(key)
            await wait_workers(app, pilot)
            await pilot.pause(0.3)
            for size in ((100, 29), (90, 28), (80, 24), (100, 30)):
                await pilot.resize_terminal(*size)
                await pilot.pause(0.3)
            plot = app.screen.query_one("#pareto-plot" if key == "4" else "#power-plot")
            assert plot.size.width > 0
        scr = app.screen
        assert app.is_running and type(scr).__name__ == "ApplyScreen"


async def test_pareto_decides_among_profiled_knob_values_only(tmp_path):
    """A model fitted on even core counts and CPU >= 1036.8 MHz: the Pareto screen's table holds
    only modes whose knob values were profiled, the pick is one of them, and the panel says so."""
    import numpy as np

    from ptui.core.prediction.gp import raw_modes
    from tests.unit.test_decision_space import _model
    model, modes = _model(tmp_path)
    P = raw_modes(modes)
    app, _ = make_app(model_dir=tmp_path / "m")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.3)
        scr = app.screen
        kept, _ = model.decision_space()
        assert scr.table is not None and len(scr.table) == len(kept)
        A = raw_modes(scr.table.modes)
        for k in range(4):
            assert set(A[:, k]) <= set(P[:, k])
        details = str(scr.query_one("#details").render())
        assert "profiled knobs only" in details, details
        assert np.isfinite(scr.table.power_w).all()


@pytest.mark.parametrize("left", [True, False])
async def test_the_profile_screen_says_the_board_was_left_by_the_error_type(left):
    """A profile whose restore failed says the board is NOT back by the outcome's type
    (profiler.RestoreFailed), not by finding a phrase in the error's words."""
    from ptui.messages import ProfileFinished
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        app.screen.post_message(ProfileFinished("failed", None, 0, None, "EBUSY writing the GPU clock",
                                                board_left=left))
        await pilot.pause(0.2)
        text = str(app.screen.query_one("#status").render())
        assert ("NOT back in its original mode" in text) == left, text


async def test_while_a_profile_runs_the_plan_panel_says_which_one():
    """A resumed profile runs its own plan: the panel showed the form's plan (another workload,
    size and count) the whole time; it names the session while it runs and the form's plan after."""
    from ptui.messages import ProfileFinished, ProfileStarted
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        scr = app.screen
        scr.post_message(ProfileStarted(None, "old-run", 6, [], ["session old-run: resnet18 ..."]))
        await pilot.pause(0.2)
        plan = str(scr.query_one("#plan").render())
        assert "Running session old-run" in plan and "form is for the next profile" in plan, plan
        scr.post_message(ProfileFinished("done", None, 6, "resnet18"))
        await pilot.pause(0.2)
        assert str(scr.query_one("#plan").render()).startswith("Plan "), scr.query_one("#plan").render()


async def test_saved_sources_fit_on_one_line_at_80_columns(tmp_path):
    """The Pareto screen's saved models and profiles read on one line each at 80 columns: 'model
    resnet18 bs16 11-27 15:19:08' wrapped over two, the closed list took a fourth row and the front
    table lost its only row on screen (a user's trial).  Labels that must shorten stay apart."""
    import os
    import shutil
    from pathlib import Path

    from textual.widgets import Select

    from ptui.core.prediction.predictor import bundled_reference
    models = Path(os.environ["PTUI_DATA_DIR"]) / "models"
    names = ["orin-agx-resnet18-bs16-20261127-151908", "orin-agx-resnet18-bs16-20261127-151951",
             "orin-agx-resnet18-bs8-16-32-20261127-152134"]
    for n in names:
        shutil.copytree(bundled_reference(), models / n)
    app, _ = make_app(model_dir=models / names[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.3)
        scr = app.screen
        sel = scr.query_one("#source", Select)
        assert sel.value == str(models / names[0])
        labels = [str(label) for label, _ in sel._options[1:]]
        assert len(labels) == 4 and len(set(labels)) == 4, labels
        assert all("resnet18 bs" in label and "11-27" in label for label in labels[:3]), labels
        assert sel.region.height == 3, sel.region                # one line of text
        front = scr.query_one("#front")
        assert front.region.y + 2 <= app.size.height - 1, front.region   # its header and a row
        await pilot.click("#source")
        await pilot.pause(0.3)
        overlay = sel.query_one("SelectOverlay")
        assert overlay.virtual_size.height == 5, overlay.virtual_size    # one line per choice


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_apply_leaves_the_power_plot_rows_to_read(size):
    """After y on Apply, the result and plan panels took all but 8 rows at 80x24: the measured
    power plot had one row of data and its y-axis read '30.5' for a line from 10 to 28 W (a user's
    trial).  The plot keeps five rows of data, whole on screen; the panels above it scroll, the
    result first."""
    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=size) as pilot:
        await pick_to_apply(app, pilot, confirm=True)
        scr = app.screen
        scr.measure_from -= 10                       # the 10 s measurement done: its longest text
        await pilot.pause(0.8)
        result = scr.query_one("#result")
        assert "10 s measurement done" in str(result.render())
        plot = scr.query_one("#power-plot")
        ticks = [line for line in str(plot.render()).splitlines() if "┤" in line]
        assert len(ticks) >= 4, (plot.region, ticks)
        assert plot.region.bottom <= size[1] - 1, plot.region          # above the footer
        assert result.region.y == 1 and result.region.height >= 5, result.region   # in view
        top = scr.query_one("#apply-top")
        plan = scr.query_one("#plan")
        # the plan below it is reached by scrolling, not cut off
        assert top.virtual_size.height >= result.outer_size.height + plan.outer_size.height


@pytest.mark.parametrize("key", ["y", "r"])
async def test_apply_shows_the_result_after_a_key_read_below_it(key):
    """On Apply at 80x24 the result and plan panels scroll above the power plot: a user who
    scrolled down to read the plan and pressed y (or r) saw no result, it was out of view above.
    After y and r the panels go back to the top, the result's first line on screen."""
    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=(80, 24)) as pilot:
        await pick_to_apply(app, pilot)
        scr = app.screen
        top = scr.query_one("#apply-top")
        if key == "r":
            await pilot.press("y")
            await wait_workers(app, pilot)
            await pilot.pause(0.6)
        top.scroll_end(animate=False)                 # read the plan, below the result
        await pilot.pause(0.2)
        assert top.scroll_y > 0, (top.virtual_size, top.region)
        await pilot.press(key)
        await wait_workers(app, pilot)
        await pilot.pause(0.6)
        result = scr.query_one("#result")
        words = "rolled back to" if key == "r" else "measured"
        assert words in str(result.render()), result.render()
        assert top.scroll_y == 0, top.scroll_y
        assert result.region.height > 0 and result.region.y >= top.region.y, (result.region, top.region)


def test_saved_source_labels_that_must_shorten_stay_apart():
    """Two long labels that differ only at the end of their names, saved in the same minute, were
    cut to the same text at 80 columns ('profile my-long-training-scr… 11-27 15:19' twice): the
    list could not tell them apart.  Every label stays distinct and fits its room."""
    from ptui.screens.pareto import fit_labels
    room = 37                                     # the list's text room at 80 columns
    cases = [
        # same minute, other seconds
        ["profile my-long-training-script-v1 11-27 15:19:08",
         "profile my-long-training-script-v2 11-27 15:19:51"],
        # same second: the names' ends tell them apart
        ["profile my-long-training-script-v1 11-27 15:19:08",
         "profile my-long-training-script-v2 11-27 15:19:08"],
        # a name that differs in its middle, and one that fits beside them
        ["model resnet18-alpha-finetuned-large bs8,16,32 11-27 15:21:34",
         "model resnet18-omega-finetuned-large bs8,16,32 11-27 15:21:34",
         "model resnet18 bs16 11-27 15:19:08", "ResNet-18 reference (what-if)"],
        # same second, names that differ far from their ends
        ["model resnet18-finetuned-large-alpha bs8,16,32 11-27 15:21:34",
         "model resnet18-finetuned-large-omega bs8,16,32 11-27 15:21:34"],
        # no time stamp at all
        ["profile a-name-the-user-chose-for-this-one-run-v1",
         "profile a-name-the-user-chose-for-this-one-run-v2"],
    ]
    for labels in cases:
        out = fit_labels(labels, room)
        assert len(set(out)) == len(labels), out
        assert all(len(label) <= room for label in out), out
        # what fits stays as it is; a stamped label keeps its kind and its date
        assert all(o == label for o, label in zip(out, labels) if len(label) <= room), out
        assert all(o.split()[0] == label.split()[0] for o, label in zip(out, labels)), out
        assert all("11-27 15:" in o for o, label in zip(out, labels) if "11-27" in label), out
    # where nothing collides the seconds still go first ('... 11-27 15:19', as before)
    out = fit_labels(["profile my-long-training-script-v1 11-27 15:19:08",
                      "profile my-long-training-script-v2 11-28 09:02:51"], room)
    assert out[0].endswith(" 11-27 15:19") and out[1].endswith(" 11-28 09:02"), out


async def test_finetune_shows_its_whole_result_at_80x24(tmp_path):
    """A user's trial: after a fit at 80x24 the introduction kept its nine lines above the result,
    and the from-scratch baseline (and any outlier note) lay below the screen's fold, where no key
    reached.  While the result is a fit of the profile in the field, the introduction gives way to
    it; a newer profile filled in brings it back."""
    app, _ = make_app()
    app.state.profile_csv = tmp_path / "orin-agx-resnet18-bs16.csv"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await pilot.pause(0.2)
        scr = app.screen
        assert "Fits time and power to your profile" in on_screen(app)
        scr.fitting = str(app.state.profile_csv)           # as t sets it; the fit's figures below
        fit = {"cv_mape": 1.7, "cv_coverage90": 100.0, "choice": "gp-stack",
               "candidates_cv_mape": {"scratch": 9.4}}
        scr.done({"time": fit, "power": {**fit, "candidates_cv_mape": {"scratch": 12.5}}}, "50 profiled modes", 31.2,
                 tmp_path / "models" / "orin-agx-resnet18-bs16-20261127-180332")
        await pilot.pause(0.2)
        seen = on_screen(app)
        assert "baseline from scratch" in seen and "power 12.5%" in seen, seen
        assert "Fits time and power" not in seen
        # a newer profile finished since: the field holds it, and the introduction names it
        app.state.profile_csv = tmp_path / "orin-agx-resnet18-bs16-newer.csv"
        await pilot.press("1")
        await pilot.pause(0.1)
        await pilot.press("3")
        await pilot.pause(0.2)
        seen = on_screen(app)
        assert "Fits time and power to your profile" in seen and "bs16-newer.csv" in seen, seen


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_apply_says_each_figure_with_its_unit_on_one_row(size):
    """After y on Apply the measured and the expected watts were one line, which wrapped at 80x24
    between the prediction and its unit ('predicted 28.93' / 'W   difference -0.7 %').  The
    expected watts and the difference are a line of their own."""
    import re

    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=size) as pilot:
        await pick_to_apply(app, pilot, confirm=True)
        app.screen.measure_from -= 10                # the 10 s measurement done: its longest text
        await pilot.pause(0.8)
        rows = on_screen(app).splitlines()
        assert any("10 s measurement done" in r for r in rows), rows
        assert any(re.search(r"measured [\d.]+ W over 10 s", r) for r in rows), rows
        assert any(re.search(r"predicted [\d.]+ W, difference [-+][\d.]+ %", r) for r in rows), rows


@pytest.mark.slow
async def test_a_finished_profile_leaves_its_results_on_screen_at_80x24():
    """At 80x24 a finished profile's results table showed its header alone: the next profile's
    plan, the status and the form took the rows (an app trial).  The plan now gives way to the
    results until the form is edited, and comes back with the edit."""
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _profile(app, pilot, 4)
        await pilot.pause(0.3)
        assert "profile finished" in str(app.screen.query_one("#status").render())
        shown = on_screen(app)
        rows = [line for line in shown.splitlines() if line.split()[:1] in (["1"], ["2"], ["3"])]
        assert len(rows) >= 3, shown                     # the first three modes' rows, not the header alone
        app.screen.query_one("#count").value = "6"       # the next profile: its plan comes back
        await pilot.pause(0.2)
        assert app.screen.query_one("#plan").display and "Plan" in on_screen(app), on_screen(app)


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_pareto_shows_the_pick_and_its_energy_savings_without_scrolling(size):
    """At 80x24 (and 100x30) the savings line, the least-energy mode against MAXN and the best
    preset ('2.06 J/step; MAXN +44%, MODE_15W +43%'), sat below the details panel's fold, and
    nothing on screen said it was there.  Now it shows with the pick: its goal, its mode in words,
    its time and power."""
    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=size) as pilot:
        scr = await open_pareto(app, pilot)
        en, d = scr.view.energy, scr.view.decision
        seen = on_screen(app)
        savings = (f"{en.least.energy:.3g} J/step; MAXN {en.more_pct(en.maxn):+.0f}%, "
                   f"{en.best_preset.tag} {en.more_pct(en.best_preset):+.0f}%")
        assert savings in seen, seen
        w = scr.table.modes[d.index].words()
        assert d.goal in seen and f"{w[0]} · {w[1]}" in seen and f"{w[2]} · {w[3]}" in seen, seen
        assert f"power {scr.table.power_w[d.index]:.2f} W ±" in seen, seen
        assert "least energy: " in seen, seen
        dt = scr.query_one("#front")                  # the front keeps rows to choose from
        assert dt.scrollable_content_region.height - dt.header_height >= 4, dt.region


async def test_apply_keeps_each_mode_figure_with_its_unit_at_80x24():
    """After y at 80x24 the result said 'applied and verified: 5 cores · CPU 1.96 GHz · GPU 625 MHz
    · memory 3199' with its 'MHz' alone on the next row, and the plan 'Applied ... (simulated' with
    'device)' below.  The applied mode is on a row of its own, whole."""
    import re

    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=bundled_reference())
    async with app.run_test(size=(80, 24)) as pilot:
        await pick_to_apply(app, pilot, confirm=True)
        mode = app.state.selected.describe()
        rows = on_screen(app).splitlines()
        assert any("applied and verified" in r for r in rows), rows
        assert sum(mode in r for r in rows) >= 2, rows         # in the result and in the plan
        alone = [r for r in rows if re.match(r"│ +(MHz|GHz|W|ms|device\))\b", r)]
        assert not alone, rows
