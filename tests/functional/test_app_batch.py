"""The Pareto screen with several batch sizes (issue 11 item 6): the sizes shown, the joint pick as
core decides it, memory-infeasible pairs never picked, the change against batch 16 shown."""
import csv

import pytest
from textual_plotext import PlotextPlot

from ptui.core.clock import hms
from ptui.core.decision import batch as bt
from ptui.core.prediction.predictor import load_model
from tests.functional.test_app import make_app, wait_workers
from tests.support.cli import run_cli

SIZES = (8, 16, 32)


@pytest.fixture(scope="module")
def batch_files(tmp_path_factory):
    """A simulated ResNet-18 profile over batch sizes 8,16,32 (30 pairs), its model, and the same
    profile claiming 80 GB of peak memory at batch 32 (more than the board has), with its model."""
    d = tmp_path_factory.mktemp("bsapp")
    mp = pytest.MonkeyPatch()
    mp.setenv("PTUI_DATA_DIR", str(d / "data"))
    try:
        csv_path = d / "rb.csv"
        rc, _, err = run_cli("profile", "--device", "orin-agx", "--workload", "resnet18",
                             "--batch-sizes", ",".join(map(str, SIZES)), "--count", "30",
                             "--out", csv_path)
        assert rc == 0, err
        rc, _, err = run_cli("fit", "--device", "orin-agx", "--profile", csv_path, "--out", d / "m")
        assert rc == 0, err
        with open(csv_path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        for r in rows:
            if r["batch_size"] == "32":
                r["peak_mem_gb"] = "80"
        big = d / "rb-oom.csv"
        with open(big, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        rc, _, err = run_cli("fit", "--device", "orin-agx", "--profile", big, "--out", d / "m-oom")
        assert rc == 0, err
    finally:
        mp.undo()
    return {"csv": csv_path, "model": d / "m", "oom_model": d / "m-oom"}


def _fits(dt) -> bool:
    return dt.virtual_size.width <= dt.scrollable_content_region.width


async def _open(app, pilot):
    await pilot.press("4")
    await wait_workers(app, pilot)
    await pilot.pause(0.2)
    await wait_workers(app, pilot)
    return app.screen


async def _set(app, pilot, wid, value):
    app.screen.query_one(wid).value = value
    await pilot.pause(0.1)
    await wait_workers(app, pilot)
    await pilot.pause(0.1)


def _picked(scr):
    i = scr.sel
    return scr.table.modes[i], scr.view.batch_of(i)


@pytest.mark.slow
async def test_batch_model_shows_sizes_core_pick_and_batch_16_saving(batch_files):
    """At 80x24: the sizes are shown (plot legend, a bs column on the front), the pick is
    batch.decide's for the same inputs (throughput only, then with a noise scale), and the details
    give time and energy to target and the change against the best mode at batch 16."""
    model = load_model(batch_files["model"])
    app, _ = make_app(model_dir=batch_files["model"])
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        assert scr.space is not None and scr.space.sizes == SIZES
        dt = scr.query_one("#front")
        assert [str(c.label) for c in dt.columns.values()][0] == "bs"
        assert {int(dt.get_row_at(r)[0]) for r in range(dt.row_count)} <= set(SIZES)
        assert _fits(dt), (dt.virtual_size, dt.scrollable_content_region)
        assert scr.query_one("#noise").display and not scr.query_one("#deadline").display
        for noise in (None, 64.0):
            if noise is not None:
                await _set(app, pilot, "#noise", "64")
            want = bt.decide(model, SIZES, noise_scale=noise, budget_w=30.0, risk=0.05, epochs=10)
            assert _picked(scr) == (want.pick.mode, want.pick.batch_size)
            text = str(scr.query_one("#details").render())
            assert f"batch {want.pick.batch_size}" in text
            assert f"to target {hms(want.pick.target_s)}  {want.pick.energy_wh:.1f} Wh" in text
            assert want.default.batch_size == 16
            if want.default.index != want.pick.index:
                pct = 100 * (want.pick.target_s - want.default.target_s) / want.default.target_s
                assert f"vs bs16 best mode: {pct:+.0f}% time" in text, text
            assert ("throughput only" in text) == (noise is None)
            scr.draw()                   # plotext builds a log-scale figure once per draw
            legend = str(PlotextPlot.render(scr.query_one("#pareto-plot")))
            assert all(f"bs {b}" in legend for b in SIZES), legend
        # above the table, the rest of it reached by scrolling (it took the table's rows: the
        # test below)
        assert scr.query_one("#details-box").region.bottom <= dt.region.y
        assert scr.query_one("#pareto-plot").region.width >= 32



async def test_the_front_shows_rows_beside_a_batch_models_details_at_80x24(batch_files):
    """A model of several batch sizes: its details took 15 of the side's 16 rows at 80x24 and the
    front table showed its header alone (a user's trial).  The details take at most their share and
    scroll (from the keyboard: tab to them, then the arrows); the table shows several rows."""
    app, _ = make_app(model_dir=batch_files["model"])
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        assert scr.space is not None
        dt = scr.query_one("#front")
        assert dt.row_count >= 5
        assert dt.region.bottom <= 23, dt.region                   # above the footer
        shown = dt.scrollable_content_region.height - dt.header_height
        assert shown >= 4, (shown, dt.region)
        box = scr.query_one("#details-box")
        assert box.region.bottom <= dt.region.y, (box.region, dt.region)
        # the pick's first lines in view, the rest reached by scrolling
        details = scr.query_one("#details")
        assert details.region.y == box.region.y and box.max_scroll_y > 0
        assert box.virtual_size.height >= details.outer_size.height
        box.focus()
        await pilot.press("end")
        await pilot.pause(0.2)
        assert box.scroll_y == box.max_scroll_y

async def test_b_restricts_to_one_batch_size(batch_files):
    """b cycles all sizes -> 8 -> 16 -> 32 -> all; with one size the pick is decide's over that size
    alone and the front holds only that size."""
    model = load_model(batch_files["model"])
    app, _ = make_app(model_dir=batch_files["model"])
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await _open(app, pilot)
        await _set(app, pilot, "#noise", "32")
        for b in SIZES:
            await pilot.press("b")
            await wait_workers(app, pilot)
            await pilot.pause(0.1)
            assert scr.bs_filter == b
            want = bt.decide(model, (b,), noise_scale=32.0, budget_w=30.0, risk=0.05, epochs=10)
            assert _picked(scr) == (want.pick.mode, b)
            assert {scr.view.batch_of(i) for i in scr.front} == {b}
        await pilot.press("b")
        await wait_workers(app, pilot)
        assert scr.bs_filter is None


@pytest.mark.slow
async def test_pairs_that_do_not_fit_are_never_picked(batch_files):
    """Throughput only at 30 W the largest batch (32) is picked; when the profile says batch 32
    needs 80 GB (the board has 61.5 for training), no pair at 32 is drawn or picked, the details
    say it does not fit, and asking for 32 alone says none fits."""
    app, _ = make_app(model_dir=batch_files["model"])
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await _open(app, pilot)
        await _set(app, pilot, "#budget", "30")
        assert _picked(scr)[1] == 32                          # the case the test is about
    model = load_model(batch_files["oom_model"])
    assert not bt.model_memory(model).fits(32)[0]
    app, _ = make_app(model_dir=batch_files["oom_model"])
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await _open(app, pilot)
        await _set(app, pilot, "#budget", "30")
        mode, b = _picked(scr)
        want = bt.decide(model, SIZES, budget_w=30.0, risk=0.05, epochs=10)
        assert b != 32 and (mode, b) == (want.pick.mode, want.pick.batch_size)
        assert 32 not in {scr.view.batch_of(i) for i in scr.view.rows}
        assert "bs 32: does not fit in memory" in str(scr.query_one("#details").render())
        for _ in range(3):
            await pilot.press("b")
            await wait_workers(app, pilot)
        assert scr.bs_filter == 32
        await pilot.pause(0.1)
        text = str(scr.query_one("#details").render())
        assert "none of the batch sizes 32 fits" in text, text
        assert scr.sel is None                                # nothing to pick from


async def test_batch_profile_csv_picks_among_measured_pairs(batch_files):
    """A profile CSV over several sizes (no model): the pick is the measured pair with the least
    time per sample within the budget (throughput only), found here from the CSV itself; the
    screen no longer mixes the sizes up as one batch."""
    with open(batch_files["csv"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    ok = [r for r in rows if float(r["power_w"]) <= 25.0]
    best = min(ok, key=lambda r: float(r["time_ms"]) / int(r["batch_size"]))
    app, _ = make_app(profile_csv=batch_files["csv"])
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        assert scr.space is not None and scr.space.sizes == SIZES and scr.model is None
        await _set(app, pilot, "#budget", "25")
        mode, b = _picked(scr)
        want = tuple(float(best[k]) for k in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"))
        assert (mode.as_tuple(), b) == (want, int(best["batch_size"]))
        assert "(measured)" in str(scr.query_one("#details").render())


async def test_one_size_source_after_a_batch_one(batch_files):
    """Loading a one-size source after a batch one brings the deadline field and the one-size
    front back (no batch column, no noise field, b hidden)."""
    from ptui.core.prediction.predictor import bundled_reference
    app, _ = make_app(model_dir=batch_files["model"])
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await _open(app, pilot)
        assert scr.space is not None
        scr.query_one("#path").value = str(bundled_reference())
        scr.action_load()
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        assert scr.space is None and scr.query_one("#deadline").display
        assert not scr.query_one("#noise").display
        dt = scr.query_one("#front")
        assert [str(c.label) for c in dt.columns.values()][0] == "c"
        assert scr.sel is not None and scr.sel < len(scr.table)
        assert not scr.check_action("batch", ())


async def test_batch_footer_fits_80_columns(batch_files):
    """With several batch sizes the Pareto footer also offers b; Enter's entry (shown since the
    table stopped hiding it) must not push Quit off an 80-column footer."""
    from textual.widgets._footer import FooterKey
    app, _ = make_app(model_dir=batch_files["model"])
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        assert scr.space is not None
        scr.query_one("#front").focus()
        for _ in range(50):
            await pilot.pause(0.05)
            keys = list(scr.query(FooterKey))
            if keys and all(k.region.width for k in keys if k.region.x < 80):
                break
        assert {"To Apply", "Batch sizes", "Quit"} <= {k.description for k in keys}
        for k in keys:
            assert k.region.right <= 80 and k.region.width >= len(k.description), (k.description, k.region)


async def test_the_app_resumes_a_profile_over_batch_sizes(tmp_path, monkeypatch):
    """An interrupted `ptui profile --batch-sizes` is one entry in the Profile screen's resume list
    (its sizes in the label) and resumes there as a profile over batch sizes: each remaining pair
    at its own size, into the same session."""
    import ptui.core.profiling.profiler as P
    from ptui.core.profiling.store import Store
    real, calls = P.Profiler.measure, []

    def interrupted(self, events, mode, record=True):
        if record:
            calls.append(1)
            if len(calls) == 4:
                raise KeyboardInterrupt
        return real(self, events, mode, record=record)
    monkeypatch.setattr(P.Profiler, "measure", interrupted)
    rc, _, err = run_cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload",
                         "resnet18", "--batch-sizes", "8,16", "--count", "6",
                         "--out", tmp_path / "p.csv")
    assert rc == 130, err
    monkeypatch.setattr(P.Profiler, "measure", real)
    store = Store()
    [s] = store.list_sessions()
    assert s.n_done == 3 and len(s.plan) == 6 and s.status == "interrupted"
    store.close()
    app, sim = make_app()
    original = sim.current_mode()
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.3)
        scr = app.screen
        sel = scr.query_one("#resume")
        labels = [str(o[0]) for o in sel._options[1:]]
        assert len(labels) == 1 and "resnet18 bs8,16" in labels[0] and "3/6" in labels[0], labels
        sel.value = s.name
        await pilot.click("#resume-btn")
        await pilot.pause(0.2)
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        assert "profile finished" in str(scr.query_one("#status").render())
        assert scr.query_one("#results").row_count == 6
        assert sim.current_mode() == original
    store = Store()
    [g] = store.list_sessions()
    assert g.name == s.name and g.status == "done" and g.n_done == 6
    assert sorted(r["batch_size"] for _, r in store.results(g.name)) == sorted(g.plan_sizes)
    store.close()


async def test_the_profile_screen_profiles_batch_sizes_as_one_session(tmp_path):
    """Batch sizes typed in the Profile screen's batch field: the plan names the sizes that fit, Start profiles
    the (mode, batch size) pairs as `ptui profile --batch-sizes` does, into one session, and the
    CSV it leaves (with its batch_size column) becomes the profile to fine-tune on."""
    from ptui.core.profiling.store import Store
    app, sim = make_app()
    original = sim.current_mode()
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        scr = app.screen
        scr.query_one("#batch").value = "8,16,1024"
        scr.query_one("#count").value = "6"
        await pilot.pause(0.2)
        plan = str(scr.query_one("#plan").render())
        assert "batch sizes 8,16 " in plan and "6 random (mode, batch size) pairs" in plan, plan
        assert "not profiled: 1024" in plan
        assert "of device time" in plan                    # an estimate, as a plan of one size has
        await pilot.press("s")
        await pilot.pause(0.2)
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        status = str(scr.query_one("#status").render())
        assert "profile finished" in status and "6 (mode, batch size) pairs saved" in status, status
        t = scr.query_one("#results")
        assert t.row_count == 6 and [str(c.label) for c in t.columns.values()][:2] == ["#", "bs"]
        assert {t.get_row_at(r)[1] for r in range(6)} <= {"8", "16"}      # each row says its batch
        assert sim.current_mode() == original
        out = app.state.profile_csv
        assert out is not None and out.exists()
    store = Store()
    [s] = store.list_sessions()
    assert s.batch_sizes == (8, 16, 1024) and s.status == "done" and s.n_done == 6
    assert set(s.plan_sizes) <= {8, 16}
    store.close()
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(int(r["batch_size"]) for r in rows) == sorted(s.plan_sizes)


@pytest.mark.parametrize("sizes,strategy,goal,why", [
    ("8,x", "random", None, "batch sizes: 'x' is not a batch size"),
    ("8,16", "space-filling", None, "space-filling is not supported"),
    ("8,16", "active", ("deadline", "100"), "a deadline is per minibatch"),
    ("8,16", "active", ("budget", "30"), None),
])
async def test_bad_batch_sizes_on_the_profile_screen_say_why_and_start_nothing(sizes, strategy, goal,
                                                                               why):
    app, sim = make_app()
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        scr = app.screen
        scr.query_one("#strategy").value = strategy
        await pilot.pause(0.1)
        if goal:
            scr.query_one("#goal").value = goal[0]
            await pilot.pause(0.1)
            scr.query_one("#goal-value").value = goal[1]
        scr.query_one("#count").value = "12"
        scr.query_one("#batch").value = sizes
        await pilot.pause(0.2)
        plan = str(scr.query_one("#plan").render())
        if why is None:                 # the same fields, sound: an active search is planned
            assert "active search for 'least time to target within 30 W'" in plan and "up to 12 (mode, batch size)" in plan, plan
            return
        assert why in plan, plan
        scr.action_start()                              # what Start does
        await pilot.pause(0.2)
        assert scr.control is None and sim.workload is None


async def test_apply_checks_a_pick_at_the_batch_size_it_was_made_for(batch_files):
    """On the simulated board, the Apply screen trains the workload at the picked pair's batch size
    (batch 8 here) to measure its power against the prediction; it trained at batch 16 whatever
    the pick, so a batch-8 pick was checked against a batch-16 measurement."""
    app, sim = make_app(model_dir=batch_files["model"])
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await _open(app, pilot)
        await pilot.press("b")                          # all sizes -> 8 only
        await wait_workers(app, pilot)
        await pilot.pause(0.1)
        assert scr.bs_filter == 8 and _picked(scr)[1] == 8
        await pilot.press("enter")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        assert app.state.selected_batch == 8
        await pilot.press("y")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        assert sim.workload is not None and sim.workload.batch_size == 8


async def test_the_arrows_go_from_an_off_front_pick_to_its_neighbours(batch_files):
    """A risk-aware pick off the front: the front table's cursor waits on the front row of nearest
    power, so Down goes to its neighbour (it went to the table's second row, far from the pick), and
    the pick stays selected until an arrow is pressed."""
    app, _ = make_app(model_dir=batch_files["model"])
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await _open(app, pilot)
        await pilot.press("b")                          # batch 8 alone
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        pick = scr.goal_idx
        front = [int(i) for i in scr.front]
        assert pick is not None and pick not in front      # the case the test is about
        assert scr.sel == pick
        p = scr.table.power_w
        near = min(range(len(front)), key=lambda k: abs(p[front[k]] - p[pick]))
        dt = scr.query_one("#front")
        assert dt.cursor_row == near
        await pilot.press("down")
        await pilot.pause(0.2)
        assert scr.sel == front[min(near + 1, len(front) - 1)]
