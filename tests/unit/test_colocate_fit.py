"""The walk's probes (usecases/colocate.py): the cheaper neighbours of a pick whose power budget
binds, exploration among the modes that may meet the latency budget."""
import numpy as np
import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.decision.concurrent import Pick, Prediction
from ptui.core.usecases import colocate as CO

DEV = get_device("orin-agx")
GRID = list(DEV.pt_grid())
XS = np.array([m.as_tuple() for m in GRID], float)
U = XS / XS.max(0)
TOP = GRID.index(DEV.maxn)


def _pick(mode, power_w):
    return Pick(0, mode, 8, Prediction(0.0, 0.0, 0.0, 100.0, power_w, 0.1, 4.0))


def test_probe_is_the_picks_cheaper_neighbour_when_the_budget_binds():
    m = DEV.mode(12, 2201.6, 726.75, 3199.0)
    assert CO._probe(GRID, _pick(m, 34.0), {}, 35.0, "mem") == GRID.index(DEV.mode(12, 2201.6, 726.75, 2133.0))
    assert CO._probe(GRID, _pick(m, 34.0), {}, 35.0, "cores") == GRID.index(DEV.mode(6, 2201.6, 726.75, 3199.0))
    assert CO._probe(GRID, _pick(m, 25.0), {}, 35.0, "mem") is None          # the budget does not bind
    assert CO._probe(GRID, None, {}, 35.0, "mem") is None
    low = DEV.mode(12, 2201.6, 726.75, 2133.0)                               # 665.6 is under SEED_FLOOR
    assert CO._probe(GRID, _pick(low, 34.0), {}, 35.0, "mem") is None
    j = GRID.index(DEV.mode(12, 2201.6, 726.75, 2133.0))
    assert CO._probe(GRID, _pick(m, 34.0), {j: None}, 35.0, "mem") is None   # already profiled


@pytest.mark.parametrize("allowed", [True, False])
def test_spread_explores_among_the_allowed_modes(allowed):
    allow = np.zeros(len(GRID), bool)
    if allowed:
        allow[(U[:, 2] > 0.8) & (U[:, 3] > 0.9)] = True
    (j,) = CO._spread(U, [TOP], 1, allow)
    assert (allow[j] if allowed else (U[j, 1:] >= CO.SEED_FLOOR).all())
    if allowed:
        assert j != TOP


def test_colocate_and_its_demo_pick_one_mode_from_the_same_profiles():
    """ResNet-18 beside ResNet-50 at 20 requests/s, 250 ms, 35 W: colocate picked 12 cores at
    208.8 samples/s and 34.6 W, its demo (the same walk's profiles, decided together) 6 cores at
    the same 208.8 and 34.3 W: the walk took the first of the equally fast picks (a user's trial).
    Both now keep the decisions' tie rule: the least power."""
    from ptui.core.catalogue.devices import get_device
    from ptui.core.catalogue.workloads import get_workload
    from ptui.core.decision.concurrent import decide
    from ptui.core.usecases.colocate import colocate
    from ptui.core.usecases.interleave import walk_profiles
    dev, train = get_device("orin-agx"), get_workload("resnet18")
    body = colocate(dev, train, "resnet50", 20.0, 250.0, 35.0)
    st, _ = walk_profiles(dev, train, "resnet50", 20.0, 250.0, 35.0)
    demo = decide(st, 20.0, 250.0, 35.0)
    assert body["pick"]["key"] == demo.mode.key, (body["pick"]["key"], demo.mode.key)
