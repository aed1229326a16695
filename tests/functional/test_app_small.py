"""The app at 80x24 (issue 10 C1-C3): nothing cut off, nothing covered, pick inputs from lists."""
from ptui.core.devices import get_device
from tests.functional.test_app import make_app, wait_workers

ORIN = get_device("orin-agx")


def _fits(dt) -> bool:
    """Every column of a DataTable is visible without scrolling sideways."""
    return dt.virtual_size.width <= dt.scrollable_content_region.width


async def test_pareto_front_table_fits_80x24():
    """All six columns of the front (cores, CPU, GPU, EMC, epoch time, W) show at 80x24 (only
    'cores CPU GPU EMC ep' did)."""
    from ptui.core.predictor import bundled_reference
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
    from ptui.core.store import Store
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


async def test_no_toast_repeats_a_status_panel():
    """At 80x24 a toast sits over the bottom right: over the profile table and the Apply plot's
    axis.  What a panel already says (profile finished, applied, rolled back) gets no toast."""
    app, sim = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.1)
        app.screen.query_one("#count").value = "3"
        app.screen.query_one("#results").focus()
        await pilot.pause(0.1)
        await pilot.press("s")
        await wait_workers(app, pilot)
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
