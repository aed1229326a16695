"""The inference calibration carried across modes (issue 27): over PowerTrain's grid of Orin AGX
modes, the simulator's time and power for every inference model and batch stay physically sensible,
and the fit carries to a batch size it was not fitted on."""
import numpy as np
import pytest

from ptui.core.board.inference import _as_workload, calibrate, leave_one_out
from ptui.core.board.physics import steady_state
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.inference import INFER_BATCHES, INFERENCE

DEV = get_device("orin-agx")
GRID = np.array([m.as_tuple() for m in DEV.pt_grid()], float)


def _steps(k: int):
    """Pairs of grid modes that differ only in coordinate k (cores, CPU, GPU, EMC), lower first."""
    others = [j for j in range(4) if j != k]
    order = np.lexsort((GRID[:, k],) + tuple(GRID[:, j] for j in others))
    same = np.all(GRID[order][1:, others] == GRID[order][:-1, others], axis=1)
    return order[:-1][same], order[1:][same]


@pytest.mark.parametrize("name", sorted(INFERENCE))
def test_time_and_power_stay_monotone_in_the_clocks(name):
    """Every clock (and core count) up: the minibatch is never slower; MAXN is the fastest mode.
    Power never falls with the CPU clock, nor with the GPU or memory clock where the GPU is the
    bottleneck at both modes (where the host bounds the step, a faster GPU idles longer and may
    draw a little less: physical)."""
    for b in INFER_BATCHES:
        op = steady_state(DEV, _as_workload(INFERENCE[name], calibrate(name).physics, b), *GRID.T)
        t, p, u = (np.asarray(x, float) for x in (op.time_ms, op.power_w, op.gpu_util))
        t_maxn = float(steady_state(DEV, _as_workload(INFERENCE[name], calibrate(name).physics, b),
                                    *DEV.maxn.as_tuple()).time_ms)
        assert t_maxn <= t.min() * (1 + 1e-9), (name, b)
        for k in range(4):
            lo, hi = _steps(k)
            assert (t[hi] <= t[lo] * (1 + 1e-9)).all(), (name, b, k)
        lo, hi = _steps(1)
        assert (p[hi] >= p[lo] - 1e-9).all(), (name, b, "CPU")
        for k in (2, 3):
            lo, hi = _steps(k)
            busy = (u[lo] >= 0.95) & (u[hi] >= 0.95)
            assert (p[hi][busy] >= p[lo][busy] - 1e-9).all(), (name, b, k)


def test_power_follows_the_occupancy_of_small_batches():
    """The bug of issue 27: the training model's GPU activity does not depend on the batch, so a
    batch-1 ResNet-50 (a GPU a third full) was predicted at 35 W against 26.9 W measured (30 %
    over).  The fitted activity is now partly occupancy-scaled, and batch 1 draws far less than
    batch 64 at MAXN, as measured (26.9 W vs 55.4 W)."""
    c = calibrate("resnet50")
    assert 0.0 <= c.physics.act_floor < 1.0
    rows = {r[0]: r for r in c.rows}
    assert abs(rows[1][4] - 26.929) / 26.929 <= 0.05
    assert rows[64][4] - rows[1][4] > 20.0


# leave-one-batch-size-out: mean error on the point left out, % (time, power); docs/concurrent.md
LOO = {"resnet50": (7, 7), "mobilenetv3-l": (7, 3.5), "yolov8n-det": (13, 8),
       "bert-large": (12, 5.5), "lstm-lm": (10, 10)}


@pytest.mark.parametrize("name", sorted(INFERENCE))
def test_leave_one_batch_size_out(name):
    lo = leave_one_out(name)
    t = np.mean([h.time_err for h in lo])
    p = np.mean([h.power_err for h in lo if h.power_err is not None])
    assert t <= LOO[name][0] and p <= LOO[name][1]
