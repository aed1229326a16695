"""The concurrent decision's source of standalone profiles is one parameter (`measure`: modes ->
Standalone), the simulator by default, used by the walk, the exhaustive grid and the baselines."""
import numpy as np

from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload
from ptui.core.decision.concurrent import Standalone
from ptui.core.usecases import colocate as CO

DEV = get_device("orin-agx")
TRAIN = get_workload("resnet18")


class Counting:
    """The simulator's profiles, every call and mode recorded; `slow` scales inference time (a
    board whose physics differ from the simulator's)."""

    def __init__(self, infer: str, slow: float = 1.0):
        self.infer, self.slow, self.calls, self.modes = infer, slow, 0, []

    def __call__(self, modes) -> Standalone:
        self.calls += 1
        self.modes.extend(modes)
        st = CO.standalone(DEV, TRAIN, self.infer, list(modes))
        return Standalone(st.modes, st.train_batch, st.train_ms, st.train_w, st.batches,
                          st.infer_ms * self.slow, st.infer_w)


def test_walk_measures_at_most_15_modes_through_measure_and_picks_one_of_them():
    m = Counting("resnet50")
    pick, n = CO.walk(DEV, None, "resnet50", 20.0, 250.0, 35.0, measure=m)
    assert n == m.calls == len(m.modes) <= CO.WALK_BUDGET
    assert len(set(m.modes)) == len(m.modes)          # no mode measured twice
    assert pick.mode in m.modes


def test_default_source_is_the_simulator_and_gives_the_same_pick():
    a, na = CO.walk(DEV, TRAIN, "resnet50", 20.0, 250.0, 35.0)
    b, nb = CO.walk(DEV, TRAIN, "resnet50", 20.0, 250.0, 35.0, measure=Counting("resnet50"))
    assert (a.mode, a.batch, na) == (b.mode, b.batch, nb)
    assert a.prediction == b.prediction


def test_the_measurements_drive_the_pick_not_the_simulator():
    # inference 3x slower than the simulator says: the walk and the exhaustive grid both see it
    slow = Counting("yolov8n-det", slow=3.0)
    opt, st, n = CO.exhaustive(DEV, None, "yolov8n-det", 5.0, 1000.0, 35.0, measure=slow)
    assert n == len(DEV.pt_grid()) and slow.calls == 1
    assert np.allclose(st.infer_ms, 3.0 * CO.standalone(DEV, TRAIN, "yolov8n-det", st.modes).infer_ms)
    fast, _, _ = CO.exhaustive(DEV, TRAIN, "yolov8n-det", 5.0, 1000.0, 35.0)
    assert opt.prediction.infer_share > fast.prediction.infer_share
    pick, _ = CO.walk(DEV, None, "yolov8n-det", 5.0, 1000.0, 35.0, measure=Counting("yolov8n-det", 3.0))
    assert pick.prediction.train_sps <= opt.prediction.train_sps + 1e-9


def test_baselines_and_the_decision_body_use_the_same_source():
    m = Counting("resnet50")
    base = CO._baselines(DEV, None, "resnet50", 20.0, 250.0, 35.0, measure=m)
    assert m.calls == 2                                # MAXN, then the presets
    assert set(m.modes) == {DEV.maxn} | {p.mode for p in DEV.presets}
    assert base == CO._baselines(DEV, TRAIN, "resnet50", 20.0, 250.0, 35.0)
    m2 = Counting("resnet50")
    body = CO.colocate(DEV, TRAIN, "resnet50", 20.0, 250.0, 35.0, measure=m2)
    assert body == CO.colocate(DEV, TRAIN, "resnet50", 20.0, 250.0, 35.0)
    assert m2.calls == body["profiled_modes"] + 2


def test_the_batch_sizes_and_training_batch_are_the_measurements():
    """A source that profiles inference at fewer batch sizes (and another training batch): the walk,
    the grid and the baselines decide over those (they took the simulator's INFER_BATCHES)."""
    def few(modes):
        st = CO.standalone(DEV, TRAIN, "resnet50", list(modes))
        keep = [0, 2, 4]                               # b = 1, 4, 16
        return Standalone(st.modes, 8, st.train_ms / 2, st.train_w, tuple(st.batches[k] for k in keep),
                          st.infer_ms[:, keep], st.infer_w[:, keep])
    pick, _ = CO.walk(DEV, None, "resnet50", 20.0, 250.0, 35.0, measure=few)
    opt, st, _ = CO.exhaustive(DEV, None, "resnet50", 20.0, 250.0, 35.0, measure=few)
    assert pick.batch in (1, 4, 16) and opt.batch in (1, 4, 16) and st.train_batch == 8
    base = CO._baselines(DEV, None, "resnet50", 20.0, 250.0, 35.0, measure=few)
    assert base["maxn_largest_feasible_batch"]["batch_size"] in (1, 4, 16)


class ReadsLow:
    """A board measured by a profiler whose power readings came out `low` under the truth (the
    simulator), as a noisy reading can; `se`: the relative standard error it states (None: none)."""

    def __init__(self, infer: str, low: float = 0.02, se: float | None = 0.015):
        self.infer, self.low, self.se = infer, low, se

    def __call__(self, modes) -> Standalone:
        st = CO.standalone(DEV, TRAIN, self.infer, list(modes))
        f = np.exp(-self.low)
        return Standalone(st.modes, st.train_batch, st.train_ms, st.train_w * f, st.batches,
                          st.infer_ms, st.infer_w * f,
                          None if self.se is None else np.full(len(st.modes), self.se))


def _truth_power(pick, rate, latency_ms):
    from ptui.core.decision.concurrent import predict
    return predict(CO.standalone(DEV, TRAIN, "resnet50", [pick.mode]), 0, rate, latency_ms, pick.batch).power_w


def test_measured_power_is_held_to_the_budget_by_two_standard_errors():
    """Readings 2 % low (1.3 standard errors of 1.5 %): the decision on them, unmargined, picks at
    the budget's edge and runs over it on the board; held by 2 se, the pick stays within it."""
    from ptui.core.decision.concurrent import POWER_SE_K, decide
    modes = list(DEV.pt_grid())
    rate, lat, budget = 20.0, 250.0, 30.0
    bare = decide(ReadsLow("resnet50", se=None)(modes), rate, lat, budget)
    assert bare.prediction.power_w <= budget < _truth_power(bare, rate, lat)
    held = decide(ReadsLow("resnet50")(modes), rate, lat, budget)
    assert held.prediction.power_w * (1.0 + POWER_SE_K * 0.015) <= budget + 1e-9
    assert _truth_power(held, rate, lat) <= budget
    assert held.prediction.train_sps >= 0.95 * bare.prediction.train_sps


def test_walk_on_readings_low_stays_within_the_budget_on_the_board():
    rate, lat, budget = 20.0, 250.0, 30.0
    bare, _ = CO.walk(DEV, None, "resnet50", rate, lat, budget, measure=ReadsLow("resnet50", se=None))
    assert _truth_power(bare, rate, lat) > budget
    pick, n = CO.walk(DEV, None, "resnet50", rate, lat, budget, measure=ReadsLow("resnet50"))
    assert n <= CO.WALK_BUDGET and _truth_power(pick, rate, lat) <= budget


def test_power_se_travels_through_stack():
    a = ReadsLow("resnet50")([DEV.maxn])
    b = CO.standalone(DEV, TRAIN, "resnet50", [DEV.maxn])
    st = Standalone.stack([a, b])
    assert st.power_se is not None and st.power_se.tolist() == [0.015, 0.0]
    assert np.allclose(st.power_margin(), [1.03, 1.0])
    assert Standalone.stack([b, b]).power_se is None


def test_a_stopped_decision_ends_at_its_next_profile():
    """`stop` is asked before each profile: once it says so the decision ends with Interrupted and
    profiles nothing more (the app's quit waited 10-20 s for a walk that could not be stopped)."""
    import pytest

    from ptui.core.errors import Interrupted
    m = Counting("resnet50")
    with pytest.raises(Interrupted):
        CO.colocate(DEV, TRAIN, "resnet50", 20.0, 250.0, 35.0, measure=m, stop=lambda: m.calls >= 3)
    assert m.calls == 3
    with pytest.raises(Interrupted):
        CO.colocate_view(DEV, TRAIN, "resnet50", 20.0, 250.0, 35.0, stop=lambda: True)


def test_a_latency_nothing_meets_says_what_misses_in_plain_figures():
    """The closest option's line said 'p99 inf ms, 100.0 % late, 100.0 % inside the margin': an
    infinite p99 is a queue that grows, and the second share is of requests later than the budget
    less the tail margin, not inside it."""
    import pytest

    from ptui.core.decision.pareto import InfeasibleError
    with pytest.raises(InfeasibleError) as e:
        CO.colocate(DEV, TRAIN, "resnet50", 200.0, 20.0, 40.0)
    msg = str(e.value)
    assert "inf ms" not in msg and "inside the margin" not in msg
    assert "requests arrive faster than inference serves them" in msg
    assert "% of requests later than 20 ms (the decision allows 0.5 %)" in msg
    assert "later than 20 ms less the tail margin (it allows 2 %)" in msg
    # --json's closest option names that share for what it is (it was 'within_margin': 1.0)
    assert e.value.closest_point["over_margin"] == 1.0 and "within_margin" not in e.value.closest_point
    with pytest.raises(InfeasibleError) as e:
        CO.colocate(DEV, TRAIN, "resnet50", 30.0, 12.0, 40.0)
    assert " ms; " in str(e.value) and "p99 " in str(e.value) and "no p99" not in str(e.value)
