"""The app on a real-board backend (the emulated Orin AGX sysfs tree): it profiles and applies
through the same use cases as the CLI."""
import json

import pytest

from ptui.app import AppState, PtuiApp
from ptui.core.board.backends.sysfs import SysfsBackend
from ptui.core.board.telemetry import Sampler
from ptui.core.catalogue.devices import get_device
from ptui.core.profiling.store import Store
from tests.support import fakesys
from tests.support.cli import run_cli

ORIN = get_device("orin-agx")


def board_app(root) -> tuple[PtuiApp, SysfsBackend]:
    be = SysfsBackend(ORIN, root=root)
    return PtuiApp(AppState(be, "backend sysfs (test)", Sampler(be, interval=0.2))), be


async def apply_in_app(app, pilot) -> None:
    """The selected mode applied from the Apply screen (5, then y), its worker done."""
    await pilot.press("5")
    await pilot.pause(0.2)
    await pilot.press("y")
    await app.workers.wait_for_complete()


async def plan_in_app(app, pilot) -> str:
    """The Apply screen (5) opened on the selected mode; its plan's text."""
    await pilot.press("5")
    await app.workers.wait_for_complete()
    await pilot.pause(0.2)
    return str(app.screen.query_one("#plan").render())


@pytest.mark.slow
async def test_profile_screen_profiles_on_sysfs_like_the_cli(emulated_board):
    """A real board cannot train a catalog workload itself: the app, like `ptui profile`, runs
    ptui's own torch loop for it under the probe, reads power from the INA3221 files, and restores
    the board afterwards."""
    root, _ = emulated_board
    before = fakesys.read_mode(root)
    app, _ = board_app(root)
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        scr = app.screen
        scr.query_one("#workload").value = "mobilenetv3"
        scr.query_one("#batch").value = "1"
        scr.query_one("#count").value = "1"
        await pilot.pause(0.1)
        scr.action_start()
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        status = str(scr.query_one("#status").render())
        assert "profile finished" in status, status
        assert scr.query_one("#results").row_count == 1
        csv = app.state.profile_csv
        assert csv is not None and app.state.workload == "mobilenetv3"
        rows = csv.read_text().splitlines()
        assert len(rows) == 2 and float(rows[1].split(",")[5]) > 5     # power from the rails
    store = Store()
    (s,) = store.list_sessions()
    assert s.backend == "sysfs" and s.workload == "mobilenetv3" and s.n_done == 1 and s.status == "done"
    store.close()
    from ptui.core import paths
    assert paths.script_log(s.name).exists()          # the built-in loop ran under the probe
    assert fakesys.read_mode(root) == before


async def test_apply_in_the_app_is_undone_by_ptui_restore(tmp_path):
    root = fakesys.build(tmp_path / "root")
    app, _ = board_app(root)
    target = ORIN.mode(4, 729.6, 318.75, 665.6)
    app.state.selected = target
    async with app.run_test(size=(100, 32)) as pilot:
        await apply_in_app(app, pilot)
        await pilot.pause(0.1)
        assert "applied and verified" in str(app.screen.query_one("#result").render())
        assert fakesys.read_mode(root) == target
    # quitting said nothing of the mode it leaves (a user's trial): it says it, and the way back
    from ptui.app import quit_words
    said = quit_words(app.state)
    assert target.describe() in said and "ptui restore" in said, said
    rc, out, err = run_cli("restore", "--backend", "sysfs", "--sysfs-root", root)
    assert rc == 0, err
    assert "restored the state before the last ptui apply" in out
    assert fakesys.read_mode(root) == ORIN.preset("MODE_30W").mode


async def test_rollback_in_the_app_leaves_nothing_for_restore(tmp_path):
    root = fakesys.build(tmp_path / "root")
    app, be = board_app(root)
    app.state.selected = ORIN.mode(4, 729.6, 318.75, 665.6)
    from ptui.core.board import undo
    async with app.run_test(size=(100, 32)) as pilot:
        await apply_in_app(app, pilot)
        assert undo.load(app.state.backend, undo.APPLY) is not None
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause(0.1)
        assert "rolled back to" in str(app.screen.query_one("#result").render())
    assert fakesys.read_mode(root) == ORIN.preset("MODE_30W").mode
    assert undo.load(app.state.backend, undo.APPLY) is None
    from ptui.app import quit_words
    assert quit_words(app.state) == ""                  # rolled back: nothing left to say


def test_the_app_opens_the_board_under_sysfs_root(tmp_path, monkeypatch):
    """`ptui --backend sysfs --sysfs-root DIR` opens the app on the board under DIR (it read the
    machine's own / instead: no rails, no mode)."""
    from ptui import app as app_mod
    from ptui.cli import build_parser
    root = fakesys.build(tmp_path / "root")
    seen = {}
    monkeypatch.setattr(app_mod.PtuiApp, "run", lambda self: seen.setdefault("be", self.state.backend))
    args = build_parser().parse_args(["--backend", "sysfs", "--sysfs-root", str(root), "--device", "orin-agx"])
    assert app_mod.run_app(args) == 0
    assert str(seen["be"].root) == str(root)
    assert seen["be"].current_mode() == ORIN.preset("MODE_30W").mode


async def test_an_emulated_board_is_labelled_on_screen(tmp_path):
    """The app on an emulated tree showed the plain `sysfs` badge of a real board."""
    from ptui.core.board import emulator
    from ptui.core.board.backends import open_backend
    root = emulator.build(tmp_path / "root", "orin-agx")
    be, note = open_backend("sysfs", None, root=str(root))
    app = PtuiApp(AppState(be, note, Sampler(be, interval=0.2)))
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.pause(0.2)
        banner = str(app.screen.query_one("#banner").render())
        assert banner.startswith("EMULATED (SIMULATED)") and "made by ptui emulate" in banner
        # the label leads: at 80 columns the header's end is cut ('[EMULATED, SIM…')
        assert app.sub_title.startswith("[EMULATED, SIMULATED] Jetson AGX Orin")


async def test_the_app_opened_after_a_killed_profile_says_the_board_was_left_and_how_back(tmp_path):
    """kill -9 of the app mid-profile, then the app again: it opened without a word, and its
    dashboard said 'nvpmodel MODE_30W' over a profiling mode's clocks (a user's trial)."""
    from ptui.core.board import undo
    from ptui.core.usecases.board import apply
    root = fakesys.build(tmp_path / "root")              # MODE_30W
    be = SysfsBackend(ORIN, root=root)
    before = be.snapshot()
    assert apply(be, ORIN.mode(4, 729.6, 318.75, 665.6)).ok     # the killed profile's last mode
    undo.clear(be, undo.APPLY)
    undo.save(be, undo.PROFILE, before, session="killed", pid=2 ** 22 + 7)    # no such process
    app, _ = board_app(root)
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.pause(0.8)
        said = " ".join(str(n.message) for n in app._notifications)
        assert "a profile (session killed) was stopped before it put the board back" in said, said
        assert "ptui restore" in said
        clocks = str(app.screen.query_one("#clocks").render())
        assert "custom clocks (nvpmodel: MODE_30W)" in clocks, clocks
    rc, out, err = run_cli("restore", "--backend", "sysfs", "--sysfs-root", root)
    assert rc == 0 and fakesys.read_mode(root) == ORIN.preset("MODE_30W").mode, err


async def test_a_rollback_refused_because_the_board_changed_leaves_no_claim_behind(tmp_path):
    """Another ptui applied after the app: `r` is refused (nothing written), and the panels no
    longer say 'the board runs this mode now; r rolls back' over the other's mode (a
    verification of the user's trial)."""
    from ptui.core.usecases.board import apply
    root = fakesys.build(tmp_path / "root")
    app, be = board_app(root)
    app.state.selected = ORIN.mode(4, 729.6, 318.75, 665.6)
    async with app.run_test(size=(100, 32)) as pilot:
        await apply_in_app(app, pilot)
        assert apply(SysfsBackend(ORIN, root=root), ORIN.preset("MODE_50W").mode).ok   # another ptui
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause(0.3)
        said = str(app.screen.query_one("#result").render())
        assert "rollback failed" in said and "nothing written" in said, said
        assert app.screen.result is None and app.screen.snapshot is None
        plan = str(app.screen.query_one("#plan").render())
        assert "runs this mode now" not in plan, plan
    assert fakesys.read_mode(root) == ORIN.preset("MODE_50W").mode


async def test_a_gpu_whose_tpcs_are_gated_is_said_where_a_mode_is_applied(tmp_path):
    """MODE_30W gates 4 of an Orin AGX's 8 TPCs (tpc_pg_mask 240), a mask set at boot that no
    apply changes: the app applied a mode, verified it and compared 16.3 W measured with 19.3 W
    predicted for all 8 TPCs, and nothing said half the GPU was off (a user's trial on an emulated
    board).  The plan, the dashboard, ptui apply and ptui status say it; MAXN's mask (0) says
    nothing."""
    root = fakesys.build(tmp_path / "root")                     # MODE_30W: 4 of 8 TPCs
    app, be = board_app(root)
    assert be.gated_tpcs() == 4
    app.state.selected = ORIN.mode(4, 729.6, 318.75, 665.6)
    async with app.run_test(size=(80, 24)) as pilot:
        plan = await plan_in_app(app, pilot)
        assert "the GPU has 4 of its 8 TPCs powered" in plan and "press y to apply" in plan, plan
        await pilot.press("1")                   # the dashboard's GPU line says it too
        await pilot.pause(0.7)
        clocks = app.screen.query_one("#clocks")
        said = str(clocks.render())
        assert " · 4/8 TPCs" in said and "GPU " in said, said
        assert all(len(ln) <= clocks.content_size.width for ln in said.splitlines()), said
    sysfs = ("--backend", "sysfs", "--sysfs-root", root)
    rc, out, err = run_cli(*sysfs, "apply", "--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75",
                           "--mem-mhz", "665.6", "--dry-run")
    assert rc == 0 and "the GPU has 4 of its 8 TPCs powered" in err and "MAXN" in err, err
    rc, out, _ = run_cli(*sysfs, "status")
    assert rc == 0 and "GPU: 4 of its 8 TPCs powered" in out, out
    rc, out, _ = run_cli(*sysfs, "status", "--json")
    assert json.loads(out)["gpu_tpcs_on"] == 4
    maxn = fakesys.build(tmp_path / "maxn", nvp_id=0)            # all 8 powered
    assert SysfsBackend(ORIN, root=maxn).gated_tpcs() is None
    rc, out, err = run_cli("--backend", "sysfs", "--sysfs-root", maxn, "apply", "--cores", "4",
                           "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6", "--dry-run")
    assert rc == 0 and "TPCs" not in err and "GPU:" not in run_cli("--backend", "sysfs", "--sysfs-root",
                                                                    maxn, "status")[1]


async def test_the_apply_screen_labels_an_emulated_boards_watts_simulated(emulated_board):
    """On `ptui emulate`'s board the Apply screen said 'press y to apply' and 'measured 20.82 W
    over 10 s' as on a real board, where the simulated board says it is simulated (a user trial):
    those watts are the emulator's simulator.  The plan and the measured line say so, at 80x24."""
    root, _ = emulated_board
    app, be = board_app(root)
    assert be.emulated
    app.state.selected = ORIN.mode(4, 729.6, 318.75, 665.6)
    async with app.run_test(size=(80, 24)) as pilot:
        plan = await plan_in_app(app, pilot)
        assert "press y to apply (EMULATED board, SIMULATED)" in plan, plan
        await pilot.press("y")
        await app.workers.wait_for_complete()
        said = ""
        for _ in range(30):
            await pilot.pause(0.1)
            said = str(app.screen.query_one("#result").render())
            if "measured" in said:
                break
        assert "applied and verified" in said, said
        measured = next(ln for ln in said.splitlines() if ln.startswith("measured"))
        assert "SIMULATED" in measured, said
        await pilot.press("r")                             # the board as it was
        await app.workers.wait_for_complete()
