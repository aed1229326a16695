"""The app's Colocate screen (issue 27): training beside inference decided on the simulated board,
the region whose latency holds drawn with the pick and the budget, the figures against the budgets
in the details, a budget nothing meets named with its closest option, and bad fields in one line."""
import re

import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.modes import Mode
from ptui.core.catalogue.workloads import get_workload
from ptui.core.usecases.colocate import colocate
from tests.functional.test_app import make_app, on_screen, wait_workers

AGX = get_device("orin-agx")


async def _decide(app, pilot, rate, latency, budget):
    await pilot.press("6")
    await pilot.pause(0.1)
    scr = app.screen
    for wid, v in (("#rate", rate), ("#latency", latency), ("#budget", budget)):
        scr.query_one(wid).value = v
    scr.query_one("#go").focus()
    await pilot.press("d")
    await wait_workers(app, pilot)
    await pilot.pause(0.2)
    return scr


async def test_decides_like_the_cli_and_draws_the_region_with_the_pick():
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await _decide(app, pilot, "20", "250", "35")
        assert app.screen.TITLE == "ptui · 6 Colocate"
        body = scr.view.body
        cli = colocate(AGX, get_workload("resnet18"), "resnet50", 20.0, 250.0, 35.0)
        assert body["pick"] == cli["pick"] and body["feasible"] is True   # the CLI's decision
        text = str(scr.query_one("#colo-details").render())
        p = body["pick"]
        assert "SIMULATED" in text and f"inference batch {p['batch_size']}" in text
        assert all(w in text for w in Mode.from_key(p["key"]).words())           # in words
        assert f"{p['power_w']:.1f} W (budget 35)" in text and "(budget 250)" in text
        assert "MAXN" in text and "best preset" in text and "training alone" in text
        # the region: per inference batch, an edge that rises with power; the pick lies on or under
        # its batch's edge (the edge is the grid's best whose latency holds)
        edges = scr.view.edges
        assert p["batch_size"] in edges and len(edges) >= 3
        for w, sps in edges.values():
            assert (w[1:] >= w[:-1]).all() and (sps[1:] > sps[:-1]).all()
        w, sps = edges[p["batch_size"]]
        under = sps[w <= p["power_w"] + 1e-3]         # the body's figures are rounded to 1 mW
        assert len(under) and under.max() >= p["train_samples_per_s"] * 0.999
        plot = str(scr.query_one("#colo-plot").render())
        assert "SIMULATED" in plot and f"b{p['batch_size']} edge" in plot and "b1 " not in plot


async def test_a_budget_nothing_meets_names_the_binding_budget_and_the_closest_option():
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _decide(app, pilot, "20", "250", "4")
        body = scr.view.body
        assert body["feasible"] is False and body["closest"]["meets_latency"] is True
        text = str(scr.query_one("#colo-details").render())
        assert "no mode within 4 W" in text and "closest:" in text
        assert all(w in text for w in Mode.from_key(body["closest"]["key"]).words())


async def test_a_bad_field_is_one_line_and_decides_nothing():
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _decide(app, pilot, "fast", "250", "35")
        assert scr.view is None and not scr.busy
        notes = [n.message for n in app._notifications]
        assert any("requests/s: give a number, got 'fast'" in m for m in notes), notes
        scr.query_one("#rate").value = "20"
        scr.query_one("#budget").value = "-3"
        await pilot.press("d")
        await wait_workers(app, pilot)
        assert scr.view is None
        assert any("budget W must be a positive number" in n.message for n in app._notifications)


def _hold_after(scr, n: int) -> None:
    """The demo's worker waits (in its progress callback) after its n-th snapshot until the demo
    is told to stop: on the simulated clock its whole minute takes ~0.4 s of wall time, so a test
    that looked for it running could find it already over."""
    import threading

    from ptui.messages import ColocateLive
    post, seen = scr.post_message, [0]

    def held(msg):
        posted = post(msg)
        if isinstance(msg, ColocateLive) and threading.current_thread() is not threading.main_thread():
            seen[0] += 1
            if seen[0] >= n:
                scr.stop.wait(60)
        return posted
    scr.post_message = held


async def _start_demo(app, pilot, n: int):
    """Open Colocate, run the demo (r) held after its n-th snapshot, and wait for n of them."""
    await pilot.press("6")
    await pilot.pause(0.1)
    return await _run_demo(app.screen, pilot, n)


async def _run_demo(scr, pilot, n: int):
    """Run the demo (r) on the Colocate screen `scr`, held after its n-th snapshot, and wait for
    n of them."""
    _hold_after(scr, n)
    scr.query_one("#go").focus()
    await pilot.press("r")
    for _ in range(600):
        await pilot.pause(0.1)
        if len(scr.live) >= n:
            break
    return scr


async def _stop_demo(scr, pilot) -> None:
    """r again: the demo stops; wait until it has."""
    await pilot.press("r")
    for _ in range(600):
        await pilot.pause(0.1)
        if not scr.running:
            break


async def test_the_demo_runs_live_and_r_stops_it_with_the_board_restored():
    """r runs the demo pair under the interleaving: snapshots arrive as the board's clock runs (the
    phase's p99, throughput and power so far), r again stops it at the next training minibatch and
    the board is back in its starting mode; the app's own simulated board is left alone."""
    app, sim = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        before = sim.current_mode()
        scr = await _start_demo(app, pilot, 3)
        assert len(scr.live) >= 3 and scr.running
        snap = scr.live[-1]
        assert snap["measured"]["simulated"] is True and snap["measured"]["requests"] > 0
        assert [s["clock_s"] for s in scr.live] == sorted(s["clock_s"] for s in scr.live)
        text = str(scr.query_one("#colo-details").render())
        assert "demo running" in text and "(budget 250)" in text
        assert all(w in text for w in Mode.from_key(snap["key"]).words())
        assert "running p99" in str(scr.query_one("#colo-plot").render())
        await _stop_demo(scr, pilot)                    # stop
        assert not scr.running and scr.ran is not None
        assert scr.ran["stopped"] is True and scr.ran["restored"] is True
        assert scr.ran["phases"][0]["measured"]["span_s"] < 60       # it did not run its whole minute
        text = str(scr.query_one("#colo-details").render())
        assert "demo stopped" in text and "board back in its starting mode" in text
        assert sim.current_mode() == before
        # a bad field now says the plot is the demo's run, not a decision (a review's trial)
        scr.query_one("#rate").value = "x"
        await pilot.press("d")
        text = str(scr.query_one("#colo-details").render())
        assert "the plot is the demo run for the fields before" in text, text


async def test_quitting_while_the_demo_runs_stops_it_first():
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await _start_demo(app, pilot, 1)
        assert scr.running
        run = [w for w in app.workers if w.group == "colocate-run"][0]
        await app.quit_now()
        # quitting waited for the demo's worker: it stopped early, its board back where it started
        # (the screen's own message about it may never be handled: the app is exiting)
        assert scr.stop.is_set() and run.is_finished and run.result is not None
        assert run.result["stopped"] is True and run.result["restored"] is True


async def test_quitting_while_a_decision_runs_ends_it_at_its_next_profile(monkeypatch):
    """q during a decision: the walk stops before its next profile, where quitting (and the app's
    process, after its terminal closed) waited for the whole walk, 10-20 s."""
    import threading
    import time

    from ptui.core.usecases import colocate as CO
    calls, second = [0], threading.Event()
    real = CO.standalone

    def profiled(*a, **k):
        calls[0] += 1
        if calls[0] == 2:                       # the decision is under way: hold it until the quit
            second.set()
            end = time.monotonic() + 5
            while time.monotonic() < end and not getattr(scr, "quitting", threading.Event()).is_set():
                time.sleep(0.01)
        return real(*a, **k)
    monkeypatch.setattr(CO, "standalone", profiled)
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("6")
        await pilot.pause(0.1)
        scr = app.screen
        scr.query_one("#go").focus()
        await pilot.press("d")
        for _ in range(600):
            await pilot.pause(0.05)
            if second.is_set():
                break
        assert second.is_set()
        decide = [w for w in app.workers if w.group == "colocate"][0]
        await app.quit_now()
        assert decide.is_finished and calls[0] == 2


async def test_a_bad_field_after_a_decision_says_the_plot_is_the_decision_before():
    """A bad field flashed a toast while the decision before stayed in the panel, as if it answered
    the fields on screen; the panel now says the error and whose decision the plot is.  A closest
    option whose queue grows says so (it read 'p99 inf ms')."""
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await _decide(app, pilot, "200", "20", "40")
        text = str(scr.query_one("#colo-details").render())
        assert "inf ms" not in text and "no p99 (a growing queue)" in text, text
        view = scr.view
        scr.query_one("#rate").value = "lots"
        scr.query_one("#go").focus()
        await pilot.press("d")
        await wait_workers(app, pilot)
        text = str(scr.query_one("#colo-details").render())
        assert "requests/s: give a number, got 'lots'" in text
        assert "the plot is the decision for the fields before" in text and "at 200 req/s" in text
        assert scr.view is view


async def test_the_details_can_be_read_to_their_end_at_80x24():
    """At 80x24 the details of a decision ran past the bottom of the screen: the training-alone
    baseline's 'over budget' and the plot's legend were cut off, and nothing scrolled to them (a
    user's trial).  The side panel scrolls (mouse, or Tab to it and the arrow keys)."""
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _decide(app, pilot, "20", "250", "35")
        details, side = scr.query_one("#colo-details"), scr.query_one("#colo-side")
        assert "lines: per inference batch" in str(details.render())
        hidden = details.outer_size.height - side.scrollable_content_region.height
        assert hidden > 0                                        # taller than the screen's room
        assert side.focusable and side.max_scroll_y >= hidden, (side.max_scroll_y, hidden)
        side.focus()
        await pilot.press("end")
        await pilot.pause(0.2)
        assert side.scroll_y >= hidden


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_the_baselines_show_without_scrolling(size):
    """A user's trial: at 80x24 the decision's baselines (MAXN's, the best preset's, training
    alone) were below the fold of the details panel, a line of figures each wrapped over two, and
    nothing said to scroll.  The pick and the baselines are now rows of one table, all on screen
    with the best preset named, as the CLI gives them."""
    app, _ = make_app()
    async with app.run_test(size=size) as pilot:
        scr = await _decide(app, pilot, "20", "250", "35")
        base = scr.view.body["baselines"]
        seen = on_screen(app)
        maxn, preset, alone = (base[k] for k in ("maxn_largest_feasible_batch", "best_preset",
                                                 "training_alone"))
        for label, b in ((f"MAXN b{maxn['batch_size']}", maxn), (f"preset b{preset['batch_size']}", preset),
                         ("training alone", alone)):
            row = f"{label} +{b['train_samples_per_s']:.1f} +{b['power_w']:.1f}"
            assert re.search(row, seen), (row, seen)
        assert f"(best preset: {preset['preset']})" in seen, seen
        assert re.search(r"MAXN b\d+ +[\d.]+ +[\d.]+ > 35", seen), seen        # over the budget


async def test_the_plot_says_simulated_at_80x24():
    """At 80x24 the plot is 40 columns, and plotext leaves out a title longer than that room
    without a word: before a decision ('SIMULATED: training samples/s vs mean power W') and while
    the demo ran ('demo: running p99 ms (SIMULATED board)') the plot had no title, nothing on it
    said SIMULATED.  And its axis labels ran together ('train samples/s mean power W')."""
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        await pilot.pause(0.2)
        scr = app.screen
        plot = scr.query_one("#colo-plot")
        assert "SIMULATED" in str(plot.render())
        scr = await _decide(app, pilot, "20", "250", "35")
        drawn = str(plot.render())
        assert "SIMULATED" in drawn and "samples/s mean power" not in drawn, drawn
        await _run_demo(scr, pilot, 2)
        assert scr.running
        await pilot.pause(0.2)
        assert "SIMULATED" in str(plot.render()), str(plot.render())
        await pilot.press("r")
        await wait_workers(app, pilot)
        assert not scr.running and scr.ran is not None
        assert "SIMULATED" in str(plot.render())


@pytest.mark.parametrize("goal", [("20", "250", "4"), ("200", "5", "40")])
async def test_a_budget_nothing_meets_names_the_closest_option_in_words_on_screen(goal):
    """A user's trial: where nothing met the budgets the panel gave the core's whole reason, the
    closest option by its compact key ('4c/1344/522.75/2133 with inference batch 1') and, for a
    latency nothing keeps, 13 lines at 80x24, the closest option in words below the fold.  Now
    the budget that binds, then the closest option in words with its figures, all on screen."""
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _decide(app, pilot, *goal)
        c = scr.view.body["closest"]
        seen = on_screen(app)
        assert c["key"] not in str(scr.query_one("#colo-details").render())
        w = Mode.from_key(c["key"]).words()
        assert f"closest: {w[0]} · {w[1]}" in seen and f"{w[2]} · {w[3]}" in seen, seen
        assert f"inference batch {c['batch_size']}: " in seen and f"{c['power_w']:.1f} W" in seen, seen
        assert f"% of requests over {goal[1]} ms" in seen, seen


def _units_apart(seen: str) -> list[str]:
    """Rows of the screen that start with a unit its number was wrapped away from."""
    return [r for r in seen.splitlines()
            if re.search(r"│ +(samples/s|W|ms)\b", r) or re.search(r"│ +\d[\d.]* *│", r)]


async def test_the_demo_keeps_each_figure_with_its_unit_at_80x24():
    """While the demo ran and after it stopped, its lines wrapped at 80x24 between a number and
    its unit ('209.8' / 'samples/s'), or left a number alone on a row ('3.33')."""
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _start_demo(app, pilot, 3)
        await pilot.pause(0.3)
        running = on_screen(app)
        # stopped before any check: a failing one left the demo's worker held, and the test hung
        await _stop_demo(scr, pilot)
        await pilot.pause(0.3)
        assert "demo running" in running and not _units_apart(running), running
        seen = on_screen(app)
        assert "demo stopped" in seen and re.search(r"[\d.]+ samples/s, [\d.]+ W", seen), seen
        assert not _units_apart(seen), seen


@pytest.mark.parametrize("goal", [("20", "250", "4"), ("200", "5", "40")])
async def test_the_closest_option_keeps_each_line_whole_at_80x24(goal):
    """Where nothing met the budgets, the closest option's 'inference batch 1: p99 179 ms, 17.6 W'
    was wider than the panel at 80x24: its watts wrapped to a row of their own, out of the
    indented block.  Each of its lines fits the panel."""
    from rich.text import Text
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _decide(app, pilot, *goal)
        c = scr.view.body["closest"]
        details = scr.query_one("#colo-details")
        lines = str(details.render()).splitlines()
        k = next(i for i, ln in enumerate(lines) if ln.startswith("closest: "))
        wide = [ln for ln in lines[k:] if Text.from_markup(ln).cell_len > details.content_size.width]
        assert not wide, (details.content_size.width, wide)
        seen = on_screen(app)
        assert re.search(rf"│ +{c['power_w']:.1f} W, {c['train_samples_per_s']:.1f} training "
                         r"samples/s", seen), seen
