"""Pilot tests: every screen flow of the app, on the simulator's virtual clock."""


from ptui.app import AppState, PtuiApp
from ptui.core.backends.sim import SimJetson
from ptui.core.clock import VirtualClock
from ptui.core.devices import get_device
from ptui.core.telemetry import Sampler

ORIN = get_device("orin-agx")


def make_app(**kw):
    sim = SimJetson(ORIN, clock=VirtualClock(), seed=3)
    state = AppState(sim, "SIMULATED device: test", Sampler(sim, interval=0.05, now=sim.clock.now), **kw)
    return PtuiApp(state), sim


async def wait_workers(app, pilot):
    await app.workers.wait_for_complete()
    await pilot.pause(0.1)


async def test_dashboard_shows_live_telemetry():
    app, sim = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.pause(0.3)
        power = str(app.screen.query_one("#power").render())
        assert "total" in power and "VDD_GPU_SOC" in power and "VDDQ_VDD2_1V8AO" in power
        clocks = str(app.screen.query_one("#clocks").render())
        assert "8c/1728/624.75/3199" in clocks and "MODE_30W" in clocks
        assert "SIMULATED" in str(app.screen.query_one("#banner").render())
        n1 = len(app.state.sampler.history())
        await pilot.pause(0.3)
        assert len(app.state.sampler.history()) > n1      # keeps sampling


async def test_dashboard_survives_missing_sensors():
    app, sim = make_app()

    def broken():
        raise OSError("INA3221 not found")
    sim.read = broken
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.pause(0.3)
        assert "INA3221 not found" in str(app.screen.query_one("#power").render())


async def test_profile_50_modes_then_finetune_pareto_apply(tmp_path):
    app, sim = make_app()
    original = sim.current_mode()
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        await pilot.press("s")
        await wait_workers(app, pilot)
        table = app.screen.query_one("#results")
        assert table.row_count == 50
        assert "profile finished" in str(app.screen.query_one("#status").render())
        assert app.state.profile_csv is not None and app.state.profile_csv.exists()
        assert sim.current_mode() == original and sim.workload is None
        # fine-tune
        await pilot.press("3")
        await pilot.pause(0.2)
        await pilot.press("t")
        await wait_workers(app, pilot)
        res = str(app.screen.query_one("#result").render())
        assert "cross-validated MAPE" in res and "from scratch" in res
        assert app.state.model_dir is not None
        # pareto with a 30 W budget
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.3)
        scr = app.screen
        assert scr.table is not None and len(scr.table) == 18096
        assert "fastest within 30 W" in str(scr.query_one("#details").render())
        i = scr.goal_idx
        assert scr.table.power_w[i] <= 30
        chosen = scr.table.modes[i]
        # arrow keys move along the front and the table follows
        before = scr.sel
        await pilot.press("up")
        await pilot.pause(0.1)
        assert scr.sel != before and scr.sel in set(scr.front.tolist())
        await pilot.press("down")
        await pilot.pause(0.1)
        assert scr.sel == before
        # apply: plan, confirm, read-back, then roll back
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.state.selected == chosen
        plan = str(app.screen.query_one("#plan").render())
        assert str(chosen) in plan and "read every value back" in plan
        assert sim.current_mode() == original          # nothing applied before confirming
        await pilot.press("y")
        await wait_workers(app, pilot)
        assert sim.current_mode() == chosen
        assert "applied and verified" in str(app.screen.query_one("#result").render())
        await pilot.press("r")
        await pilot.pause(0.1)
        assert sim.current_mode() == original


async def test_apply_failure_rolls_back():
    app, sim = make_app()
    app.state.selected = ORIN.maxn
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("5")
        await pilot.pause(0.1)
        sim.fail_next_apply = "GPU devfreq write refused"
        await pilot.press("y")
        await wait_workers(app, pilot)
        assert "GPU devfreq write refused" in str(app.screen.query_one("#result").render())
        assert "rolled back" in str(app.screen.query_one("#result").render())
        assert sim.current_mode() == ORIN.preset("MODE_30W").mode


async def test_abort_mid_profile_restores_mode(slow_profiler):
    app, sim = make_app()
    original = sim.current_mode()
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.1)
        await pilot.press("s")
        await pilot.pause(0.5)
        await pilot.press("space")                       # pause
        await pilot.pause(0.2)
        assert app.screen.profiler.control.paused
        await pilot.press("space")                       # resume
        await pilot.pause(0.2)
        await pilot.press("x")
        await wait_workers(app, pilot)
        rows = app.screen.query_one("#results").row_count
        assert 0 < rows < 50
        assert "aborted" in str(app.screen.query_one("#status").render())
        assert sim.current_mode() == original and sim.workload is None


async def test_help_and_palette_commands():
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for t in ("Go to Dashboard", "Go to Profile", "Go to Fine-tune", "Go to Pareto", "Go to Apply"):
            assert t in titles


async def test_pareto_from_profile_without_device(tmp_path):
    from tests.support.cli import run_cli
    rc, _, err = run_cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "20",
                         "--out", tmp_path / "p.csv")
    assert rc == 0, err
    app, _ = make_app(profile_csv=tmp_path / "p.csv")
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        scr = app.screen
        assert len(scr.table) == 20 and scr.model is None
        assert "(measured)" in str(scr.query_one("#details").render())


async def test_quit_mid_profile_restores_mode(slow_profiler):
    app, sim = make_app()
    original = sim.current_mode()
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.1)
        await pilot.press("s")
        await pilot.pause(0.4)
        assert sim.workload is not None                 # profiling is under way
        await pilot.press("q")
        await pilot.pause(0.2)
    assert sim.current_mode() == original and sim.workload is None
