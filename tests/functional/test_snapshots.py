"""Snapshot tests: what each screen looks like (SVG snapshots under tests/functional/__snapshots__)."""
import os
from pathlib import Path

import pytest

from ptui.app import AppState, PtuiApp
from ptui.core.board.backends.sim import SimJetson
from ptui.core.board.telemetry import Sampler
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload
from ptui.core.clock import VirtualClock
from ptui.core.prediction.predictor import bundled_reference

# each snapshot draws the whole app in a headless terminal: several seconds apiece
pytestmark = pytest.mark.slow

ORIN = get_device("orin-agx")
SIZE = (100, 32)
ROOT = Path(__file__).resolve().parents[2]


def deterministic_app(**kw) -> PtuiApp:
    """A simulated Orin AGX training ResNet-18 at MAXN, with 30 s of pre-recorded samples."""
    sim = SimJetson(ORIN, clock=VirtualClock(), seed=1)
    sampler = Sampler(sim, interval=0.5, now=sim.clock.now)
    sim.apply_mode(ORIN.maxn)
    sim.start_training(get_workload("resnet18"))
    events = sim.events(0.5)
    for ev in events:
        if hasattr(ev, "rails"):
            sampler._buf.append((ev.t, ev))
        if sim.clock.now() > 30:
            break
    sampler.start = lambda: sampler          # no background thread: the picture must not move
    sampler.minibatch_ms = 59.8
    return PtuiApp(AppState(sim, "SIMULATED device: snapshot test", sampler, **kw))


def test_dashboard(snap_compare):
    assert snap_compare(deterministic_app(), terminal_size=SIZE)


def test_dashboard_80x24(snap_compare):
    assert snap_compare(deterministic_app(), terminal_size=(80, 24))


def test_profile_screen(snap_compare):
    assert snap_compare(deterministic_app(), press=["2"], terminal_size=SIZE)


def test_finetune_screen(snap_compare):
    assert snap_compare(deterministic_app(), press=["3"], terminal_size=SIZE)


def test_pareto_screen(snap_compare, monkeypatch):
    async def run_before(pilot):
        await pilot.press("4")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.3)
    # a relative path, so the picture does not depend on where the repository is checked out
    model = Path(os.path.relpath(bundled_reference(), ROOT))
    monkeypatch.chdir(ROOT)
    assert snap_compare(deterministic_app(model_dir=model), run_before=run_before,
                        terminal_size=(110, 36))


def test_apply_screen(snap_compare):
    app = deterministic_app(selected=ORIN.mode(8, 1497.6, 828.75, 3199),
                            selected_pred={"time_ms": 71.2, "power_w": 29.4, "power_w_std": 1.1})
    assert snap_compare(app, press=["5"], terminal_size=SIZE)


def test_help_screen(snap_compare):
    assert snap_compare(deterministic_app(), press=["question_mark"], terminal_size=SIZE)
