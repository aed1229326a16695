"""The simulator against published measurements (PowerTrain paper; shared/seeds/README.md)."""
import numpy as np
import pytest

from ptui.core.board.physics import steady_state
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload

ORIN = get_device("orin-agx")


def epoch(dev, wl_name, mode, **kw):
    wl = get_workload(wl_name)
    op = steady_state(dev, wl, *mode.as_tuple(), **kw)
    return float(op.time_ms) * wl.minibatches_per_epoch / 60000.0, float(op.power_w)


def close(value, target, tol):
    return abs(value - target) <= tol * target


@pytest.mark.parametrize("wl,minutes,watts", [
    ("resnet18", 3.1, 51.1), ("bert-base", 68.7, 57.0), ("mobilenetv3", 2.3, None),
    ("yolov8n", 4.9, None), ("lstm", 0.4, None)])
def test_orin_maxn(wl, minutes, watts):
    m, w = epoch(ORIN, wl, ORIN.maxn)
    assert close(m, minutes, 0.15), m
    if watts:
        assert close(w, watts, 0.15), w


def test_orin_slowest_grid_mode():
    m, w = epoch(ORIN, "resnet18", ORIN.slowest_grid_mode)
    assert close(m, 112, 0.35), m
    assert close(w, 11.8, 0.20), w


def test_xavier_maxn():
    x = get_device("xavier-agx")
    m, w = epoch(x, "resnet18", x.maxn)
    assert close(m, 8.47, 0.15), m
    assert close(w, 36.4, 0.15), w


def _grid(dev, wl):
    a = np.array([m.as_tuple() for m in dev.pt_grid()])
    return steady_state(dev, get_workload(wl), a[:, 0], a[:, 1], a[:, 2], a[:, 3])


def test_mobilenet_best_under_30w():
    op = _grid(ORIN, "mobilenetv3")
    best = op.time_ms[op.power_w <= 30.0].min() * get_workload("mobilenetv3").minibatches_per_epoch / 1000
    assert close(best, 186, 0.15), best


def test_spread_over_grid():
    t_spread = max(_grid(ORIN, w).time_ms.max() / _grid(ORIN, w).time_ms.min()
                   for w in ("resnet18", "mobilenetv3", "yolov8n", "bert-base", "lstm"))
    p_spread = max(_grid(ORIN, w).power_w.max() / _grid(ORIN, w).power_w.min()
                   for w in ("resnet18", "mobilenetv3", "yolov8n", "bert-base", "lstm"))
    assert close(t_spread, 36, 0.15), t_spread
    assert close(p_spread, 4.3, 0.15), p_spread


def test_idle_power_matches_measured_floor():
    # IISWC artifact: AGX Orin idle with MAXN clocks locked, 4-rail sum 11.2 W
    idle = steady_state(ORIN, None, *ORIN.maxn.as_tuple())
    assert close(float(idle.power_w), 11.2, 0.15)


def test_physics_monotonic_in_frequency():
    """More GPU clock never slows a minibatch down, and always costs power."""
    wl = get_workload("resnet18")
    f = np.array(ORIN.gpu_mhz)
    op = steady_state(ORIN, wl, 12, 2201.6, f, 3199.0)
    assert np.all(np.diff(op.time_ms) <= 1e-9)
    assert np.all(np.diff(op.power_w) > 0)
