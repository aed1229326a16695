"""The replay board's power: a recorded corpus holds the board's total alone, never a rail's."""
import pytest

from ptui.core.board.backends.replay import RECORDED_RAIL, ReplayJetson
from ptui.core.board.csvio import mode_cells
from ptui.core.catalogue.devices import get_device
from ptui.core.clock import VirtualClock


def _corpus(tmp_path, dev):
    rows = [",".join(mode_cells(m)) + f",{100 + k},{15 + k}" for k, m in enumerate(dev.pt_grid()[::500])]
    p = tmp_path / "corpus.csv"
    p.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n" + "\n".join(rows) + "\n")
    return p


@pytest.mark.parametrize("name", ["orin-agx", "xavier-agx", "orin-nano"])
def test_the_recorded_total_is_not_shown_as_a_rail_it_never_measured(tmp_path, name):
    """On a board without a module-input rail (Orin AGX, Xavier AGX) the replay put the recorded
    total into the first rail: the dashboard read 'VDD_GPU_SOC 44.55 W', a GPU rail reading no
    corpus holds.  It is the recorded total, named so; a board whose total is a rail (the Orin
    Nano's VDD_IN, the module input) keeps that rail's name."""
    dev = get_device(name)
    rp = ReplayJetson(dev, _corpus(tmp_path, dev), clock=VirtualClock())
    t = rp.read()
    want = dev.total_rail or RECORDED_RAIL
    assert list(t.rails) == [want], t.rails
    assert t.rails[want] == pytest.approx(t.power_w)
    if dev.total_rail is None:
        assert not set(t.rails) & set(dev.rails)


def test_the_replay_board_is_called_a_replay_not_simulated(tmp_path, cli):
    """A replay of a real board's corpus replays measurements: apply said 'on the REPLAY board' and
    tune 'board: REPLAYED', but `ptui status` said '(SIMULATED)' and the app's header '[SIMULATED]'
    beside a banner reading REPLAY."""
    from ptui.app import AppState, PtuiApp
    from ptui.core.board.telemetry import Sampler
    dev = get_device("orin-agx")
    corpus = _corpus(tmp_path, dev)
    rc, out, err = cli("--backend", "replay", "--corpus", corpus, "status")
    assert rc == 0, err
    assert "replay backend (REPLAY of recorded measurements)" in out and "SIMULATED" not in out, out
    rp = ReplayJetson(dev, corpus, clock=VirtualClock())
    app = PtuiApp(AppState(rp, rp.label, Sampler(rp, interval=0.05, now=rp.clock.now)))
    assert app.base_sub_title.startswith("[REPLAY] ") and "SIMULATED" not in app.base_sub_title


def test_a_replay_board_starting_in_a_presets_clocks_is_that_preset_on_the_dashboard_too(tmp_path, cli):
    """A replay of a PowerTrain-grid corpus starts in its highest-power recorded mode, MAXN's
    clocks: `ptui status` said '(MAXN)', the app's dashboard 'Mode a custom mode' (a user trial).
    The board's nvpmodel reading names the preset whose clocks (and TPCs) it starts in."""
    dev = get_device("orin-agx")
    maxn = dev.preset("MAXN")
    p = tmp_path / "corpus.csv"
    rows = [",".join(mode_cells(m)) + f",{100 + k},{15 + k}" for k, m in enumerate(dev.pt_grid()[::700])]
    rows.append(",".join(mode_cells(maxn.mode)) + ",50,55")           # the most power: the start
    p.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n" + "\n".join(rows) + "\n")
    rp = ReplayJetson(dev, p, clock=VirtualClock())
    assert rp.current_mode() == maxn.mode and rp.read().nvpmodel == "MAXN"
    rc, out, err = cli("--backend", "replay", "--corpus", p, "status")
    assert rc == 0 and "(MAXN)" in out, out + err
    # a start in clocks no preset has stays a custom mode
    rows[-1] = ",".join(mode_cells(dev.mode(12, 2201.6, 1300.5, 2133))) + ",50,55"
    p.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n" + "\n".join(rows) + "\n")
    assert ReplayJetson(dev, p, clock=VirtualClock()).read().nvpmodel is None
