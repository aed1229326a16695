import statistics

import pytest

from ptui.core.board.backends.base import ApplyError, MinibatchEvent, Telemetry
from ptui.core.board.backends.sim import SimJetson
from ptui.core.board.physics import steady_state
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload

ORIN = get_device("orin-agx")


def collect(sim, seconds):
    mbs, samples = [], []
    end = sim.clock.now() + seconds
    for ev in sim.events():
        (mbs if isinstance(ev, MinibatchEvent) else samples).append(ev)
        if sim.clock.now() >= end:
            return mbs, samples


def test_idle_read_has_real_rail_names_and_default_preset():
    sim = SimJetson(ORIN)
    t = sim.read()
    assert set(t.rails) == set(ORIN.rails)
    assert t.nvpmodel == "MODE_30W" and t.cores_online == 8
    assert t.power_w == pytest.approx(sum(t.rails.values()), abs=1e-6)
    assert 6.0 < t.power_w < 13.0


def test_first_minibatch_slow_then_jitter_around_model():
    sim = SimJetson(ORIN)
    wl = get_workload("resnet18")
    sim.apply_mode(ORIN.maxn)
    sim.start_training(wl)
    mbs, _ = collect(sim, 10)
    ideal = float(steady_state(ORIN, wl, *ORIN.maxn.as_tuple()).time_ms)
    assert mbs[0].ms > 5 * ideal
    rest = [m.ms for m in mbs[1:]]
    assert statistics.median(rest) == pytest.approx(ideal, rel=0.02)
    assert 0.005 < statistics.pstdev(rest) / ideal < 0.1


def test_power_settles_over_seconds_after_mode_change():
    sim = SimJetson(ORIN)
    sim.apply_mode(ORIN.maxn)
    sim.start_training(get_workload("resnet18"))
    collect(sim, 10)
    high = sim.read().power_w
    sim.apply_mode(ORIN.slowest_grid_mode)
    _, samples = collect(sim, 6)
    p = [s.power_w for s in samples]
    assert p[0] > 0.3 * high            # still falling half a second later
    assert abs(p[-1] - p[-2]) < 0.05 * p[-1]
    settled = next(s.t for s, nxt in zip(samples, samples[1:])
                   if abs(s.power_w - samples[-1].power_w) < 0.05 * samples[-1].power_w)
    assert 1.0 < settled - samples[0].t + 0.5 < 4.0


def test_samples_every_interval():
    sim = SimJetson(ORIN, sample_interval=0.25)
    _, samples = collect(sim, 3)
    gaps = {round(b.t - a.t, 6) for a, b in zip(samples, samples[1:])}
    assert gaps == {0.25}


def test_apply_failure_leaves_previous_mode():
    sim = SimJetson(ORIN)
    before = sim.current_mode()
    sim.fail_next_apply = "EMC write rejected"
    with pytest.raises(ApplyError, match="EMC write rejected"):
        sim.apply_mode(ORIN.maxn)
    assert sim.current_mode() == before


def test_presets_power_gate_tpcs():
    sim = SimJetson(ORIN)
    sim.apply_preset("MODE_15W")
    assert sim.tpc == 3 and sim.read().nvpmodel == "MODE_15W"
    sim.apply_mode(sim.current_mode())
    assert sim.tpc == 8 and sim.read().nvpmodel is None


def test_other_devices_have_their_rails():
    nano = get_device("orin-nano")
    t = SimJetson(nano).read()
    assert set(t.rails) == {"VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"}
    assert t.power_w == t.rails["VDD_IN"]
    assert isinstance(t, Telemetry)
