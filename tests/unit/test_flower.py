"""ptui.flower: the client mod and the fleet strategy with real flwr 1.42 Message/Context objects on
simulated boards (and one emulated board through the sysfs backend)."""
import math
import time

import numpy as np
import pytest

pytest.importorskip("flwr", reason="flwr is not installed: pip install 'ptui[flower]' (or the test extra)")

from flwr.app import (  # noqa: E402
    ArrayRecord,
    ConfigRecord,
    Context,
    Error,
    Message,
    MessageType,
    Metadata,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.serverapp.strategy.strategy_utils import validate_message_reply_consistency  # noqa: E402

from ptui import core, flower  # noqa: E402

DEVICES = {1: "orin-agx", 2: "xavier-agx", 3: "orin-nano"}


@pytest.fixture(scope="module")
def node_data(tmp_path_factory):
    """The nodes' data directory, shared by the module's tests: each device's model is fitted once
    (20 simulated modes, 3-8 s) and then read from the cache, as on a node across runs."""
    return str(tmp_path_factory.mktemp("nodes"))


@pytest.fixture
def task_identity(monkeypatch):
    """FedAvg builds its messages with the ServerApp process's identity: set it as flwr's run does."""
    from flwr.supercore.task_identity import TaskIdentity
    for attr, v in (("_run_id", 1), ("_node_id", 0), ("_task_id", 0)):
        monkeypatch.setattr(TaskIdentity, attr, v)


def instruction(config: dict, node_id: int = 7, mtype: str = MessageType.TRAIN) -> Message:
    md = Metadata(run_id=1, message_id=f"m{node_id}", src_node_id=0, dst_node_id=node_id,
                  reply_to_message_id="", group_id="1", created_at=time.time(), ttl=3600.0,
                  message_type=mtype)
    content = RecordDict({"arrays": ArrayRecord([np.zeros(3)]), "config": ConfigRecord(config)})
    return Message(content=content, metadata=md)


def context(node_id: int, **node_config) -> Context:
    return Context(run_id=1, node_id=node_id, node_config=node_config, state=RecordDict(), run_config={})


def trainer(seen: list, board=None, fail: bool = False):
    """A ClientApp's train function: records the board's mode while it trains; replies as a
    ClientApp does for FedAvg (one ArrayRecord, one MetricRecord with num-examples)."""
    def train(msg: Message, ctx: Context) -> Message:
        if board is not None:
            seen.append(board().current_mode().key)
        if fail:
            raise RuntimeError("training blew up")
        arrays = ArrayRecord([np.ones(3) * ctx.node_id])
        return Message(RecordDict({"arrays": arrays,
                                   "metrics": MetricRecord({"num-examples": 10, "loss": 0.5})}),
                       reply_to=msg)
    return train


def board_of(mod):
    return lambda: next(iter(mod.nodes.values())).backend


@pytest.mark.slow               # fits a node's model (20 simulated modes) the first time
def test_the_mod_trains_in_the_mode_for_the_budget_and_puts_the_board_back(node_data):
    mod = flower.ptui_power_mod(data_dir=node_data)
    ctx = context(7, device="xavier-agx")
    seen: list = []
    reply = mod(instruction({"server-round": 1, "power-budget-w": 15.0}), ctx, trainer(seen, board_of(mod)))
    node = next(iter(mod.nodes.values()))
    info, met = reply.content["ptui"], reply.content["metrics"]
    assert "model" in info["model"] and node.backend.kind == "sim"
    # trained in the picked mode, predicted within the budget by the node's model
    assert seen == [info["mode"]] and info["mode"] != info["start-mode"]
    pred = node.predictions.model.predict([node.backend.device.mode(*_tuple(info["mode"]))])
    assert float(pred["power_w"][0]) <= 15.0 and met["ptui-predicted-w"] <= 15.0
    assert met["ptui-feasible"] == 1.0 and met["ptui-applied"] == 1.0
    # the board is back where it started
    assert node.backend.current_mode().key == info["start-mode"]
    # figures: numbers in the MetricRecord beside the ClientApp's own, SIMULATED said so
    assert met["num-examples"] == 10 and met["loss"] == 0.5
    assert met["ptui-s"] > 0 and met["ptui-w"] > 0 and math.isclose(met["ptui-j"], met["ptui-w"] * met["ptui-s"])
    assert met["ptui-simulated"] == 1.0 and info["simulated"] is True
    assert "SIMULATED" in info["watts-from"] and "SIMULATED" in info["seconds-from"]
    # on the simulator the round's seconds and watts are the board's, for one epoch of minibatches
    # in the picked mode: as the model predicts them, within the simulator's noise
    assert info["steps"] == 3125 and met["ptui-host-s"] < met["ptui-s"]
    assert met["ptui-s"] == pytest.approx(met["ptui-predicted-s"], rel=0.1)
    assert met["ptui-w"] == pytest.approx(met["ptui-predicted-w"], rel=0.1)
    assert all(isinstance(met[k], float) for k in flower.METRICS)
    # how sure the model was of the pick's power, the strategy's weight on its reading (log-sd):
    # the decision table's (a profiled mode's figure is its measurement)
    tab = node.predictions.table
    i = next(k for k, m in enumerate(tab.modes) if m.key == info["mode"])
    p, sd = float(tab.power_w[i]), float(tab.power_w_std[i])
    assert met["ptui-power-log-sd"] == pytest.approx(math.sqrt(math.log1p((sd / p) ** 2)), rel=1e-6)
    assert info["own-unit"] is True                     # a SIMULATED typical unit, its model fitted on it


def _tuple(key: str):
    c, cpu, gpu, mem = key.split("/")
    return int(c.rstrip("c")), float(cpu), float(gpu), float(mem)


@pytest.mark.slow               # fits a node's model (20 simulated modes) the first time
def test_the_first_round_without_a_model_says_so_and_fits_one_then_the_cache_is_used(tmp_path):
    said: list[str] = []
    mod = flower.ptui_power_mod(data_dir=str(tmp_path / "n"), fit_modes=6, say=said.append)
    mod(instruction({"power-budget-w": 9.0}), context(3, device="orin-nano"), trainer([]))
    assert any("no model for resnet18 bs16 on this orin-nano" in s and "SIMULATED" in s for s in said)
    node = next(iter(mod.nodes.values()))
    assert (node.model_dir / "meta.json").exists() and str(tmp_path / "n") in str(node.model_dir)
    said.clear()
    again = flower.ptui_power_mod(data_dir=str(tmp_path / "n"), say=said.append)
    again(instruction({"power-budget-w": 9.0}), context(3, device="orin-nano"), trainer([]))
    assert not any("no model" in s for s in said) and any("fitted before" in s for s in said)


def test_the_board_goes_back_when_training_raises(node_data):
    mod = flower.ptui_power_mod(data_dir=node_data)
    seen: list = []
    with pytest.raises(RuntimeError, match="blew up"):
        mod(instruction({"power-budget-w": 12.0}), context(7, device="xavier-agx"),
            trainer(seen, board_of(mod), fail=True))
    be = board_of(mod)()
    start = be.device.preset(be.device.default_preset).mode
    assert seen and seen[0] != start.key          # it was in another mode while training
    assert be.current_mode() == start


def test_an_apply_that_fails_trains_in_the_start_mode_and_says_so(node_data):
    mod = flower.ptui_power_mod(data_dir=node_data)
    ctx = context(7, device="xavier-agx")
    mod(instruction({}), ctx, trainer([]))                  # opens the node's board
    be = board_of(mod)()
    be.fail_next_apply = "clock did not lock"
    seen: list = []
    r = mod(instruction({"power-budget-w": 15.0}), ctx, trainer(seen, board_of(mod)))
    info, met = r.content["ptui"], r.content["metrics"]
    assert met["ptui-applied"] == 0.0 and "clock did not lock" in info["notes"]
    assert seen == [info["start-mode"]] == [info["mode"]] == [be.current_mode().key]


def test_a_deadline_and_the_energy_objective_are_goals_too(node_data):
    mod = flower.ptui_power_mod(data_dir=node_data)
    r = mod(instruction({"deadline-s": 2000.0}), context(7, device="xavier-agx"), trainer([]))
    m = r.content["metrics"]
    # the round's steps (one epoch by default) at the picked mode's predicted time meet the deadline
    assert m["ptui-predicted-s"] <= 2000.0 and r.content["ptui"]["goal"].startswith("lowest power")
    r = mod(instruction({"objective": "energy", "ptui-steps": 10}), context(7, device="xavier-agx"), trainer([]))
    assert r.content["ptui"]["steps"] == 10 and "energy" in r.content["ptui"]["goal"]


def test_replies_keep_fedavg_invariants_whatever_the_goal(node_data):
    """Nodes with a goal, without one, and with one nothing meets reply with the same MetricRecord
    keys and one ArrayRecord each: FedAvg validates and aggregates them."""
    mod = flower.ptui_power_mod(data_dir=node_data)
    replies = [mod(instruction(cfg, n), context(n, device=dev), trainer([]))
               for n, dev, cfg in ((1, "xavier-agx", {"power-budget-w": 15.0}),
                                   (2, "xavier-agx", {}),
                                   (3, "xavier-agx", {"power-budget-w": 1.0}))]
    validate_message_reply_consistency([r.content for r in replies], "num-examples", True)
    assert replies[1].content["ptui"]["mode"] == replies[1].content["ptui"]["start-mode"]
    # the mode read back after the round: put back by the mod where it changed it, untouched without a goal
    for r, restored in zip(replies, (True, False, True)):
        info = r.content["ptui"]
        assert info["end-mode"] == info["start-mode"] and info["restored"] is restored
    assert replies[2].content["metrics"]["ptui-feasible"] == 0.0
    arrays, metrics = FedAvg().aggregate_train(1, replies)
    assert arrays is not None and "ptui-w" in metrics


def test_the_mod_pickles_without_its_boards_as_flowers_simulation_ships_it(node_data):
    import pickle
    mod = flower.ptui_power_mod(data_dir=node_data, devices=["xavier-agx"])
    mod(instruction({"power-budget-w": 15.0}), context(7, **{"partition-id": 0}), trainer([]))
    assert next(iter(mod.nodes.values())).spec.device == "xavier-agx"      # partition 0's device
    copy = pickle.loads(pickle.dumps(mod))
    assert copy.nodes == {} and len(mod.nodes) == 1
    r = copy(instruction({"power-budget-w": 15.0}), context(7, **{"partition-id": 0}), trainer([]))
    assert r.content["ptui"]["device"] == "xavier-agx"


def test_other_messages_pass_through_untouched(node_data):
    mod = flower.ptui_power_mod(data_dir=node_data)
    r = mod(instruction({"power-budget-w": 15.0}, mtype=MessageType.EVALUATE), context(7, device="xavier-agx"),
            trainer([]))
    assert "ptui" not in r.content and "ptui-w" not in r.content["metrics"] and not mod.nodes


class FakeGrid:
    def get_node_ids(self):
        return list(DEVICES)


@pytest.mark.slow               # fits a node's model (20 simulated modes) the first time
def test_the_fleet_splits_a_cap_across_three_heterogeneous_nodes(node_data, task_identity):
    logs: list[str] = []
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0, devices=DEVICES,
                             log=logs.append)
    arrays = ArrayRecord([np.zeros(3)])
    msgs = list(fleet.configure_train(1, arrays, ConfigRecord({"lr": 0.1}), FakeGrid()))
    assert sorted(m.metadata.dst_node_id for m in msgs) == [1, 2, 3]
    # one RecordDict (and config) per node, the wrapped strategy's config kept
    assert len({id(m.content) for m in msgs}) == 3 and len({id(m.content["config"]) for m in msgs}) == 3
    budgets = {m.metadata.dst_node_id: m.content["config"]["power-budget-w"] for m in msgs}
    assert all(m.content["config"]["lr"] == 0.1 and m.content["config"]["server-round"] == 1 for m in msgs)
    assert sum(budgets.values()) <= 40.0 + 1e-9 and len(set(budgets.values())) == 3
    assert budgets[3] < budgets[1]                # the Orin Nano draws least
    # each node's least predicted power fits in its share
    for n, w in budgets.items():
        assert fleet.prior_curve(DEVICES[n])[0][0] <= w

    # the nodes train (each its own simulated board and fitted model) and the fleet reports each
    mod = flower.ptui_power_mod(data_dir=node_data)
    replies = [mod(m, context(m.metadata.dst_node_id, device=DEVICES[m.metadata.dst_node_id]), trainer([]))
               for m in msgs]
    assert sum(r.content["metrics"]["ptui-predicted-w"] for r in replies) <= 40.0
    arrays_out, metrics = fleet.aggregate_train(1, replies)
    assert arrays_out is not None and metrics is not None
    rnd = fleet.history[-1]
    assert rnd["round"] == 1 and len(rnd["nodes"]) == 3
    for row in rnd["nodes"]:
        assert row["device"] == DEVICES[row["node"]] and row["w"] > 0 and row["s"] > 0 and row["j"] > 0
        assert row["predicted_w"] <= row["budget_w"] and row["simulated"]
        assert row["end_mode"] == row["start_mode"] != row["mode"] and row["restored"]
        assert row["notes"] == replies[row["node"] - 1].content["ptui"].get("notes", "")
    assert math.isclose(rnd["fleet"]["w"], sum(r["w"] for r in rnd["nodes"]))
    assert math.isclose(rnd["fleet"]["j"], sum(r["j"] for r in rnd["nodes"]))
    assert any("node 3 orin-nano" in s and "SIMULATED" in s for s in logs)
    # round 2 splits by the fronts the nodes sent back, not the prior
    assert set(fleet.curves) == {1, 2, 3}
    msgs2 = list(fleet.configure_train(2, arrays, ConfigRecord(), FakeGrid()))
    assert sum(m.content["config"]["power-budget-w"] for m in msgs2) <= 40.0 + 1e-9


def test_a_cap_below_the_fleets_least_power_gives_each_node_its_least(task_identity):
    logs: list[str] = []
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=5.0, devices=DEVICES,
                             log=logs.append)
    msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
    for m in msgs:
        n = m.metadata.dst_node_id
        assert m.content["config"]["power-budget-w"] == pytest.approx(fleet.prior_curve(DEVICES[n])[0][0])
    assert any("below the fleet's least predicted power" in s for s in logs)


def test_a_round_deadline_goes_to_every_node(task_identity):
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), deadline_s=600.0, steps=100)
    msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
    assert all(m.content["config"]["deadline-s"] == 600.0 and m.content["config"]["ptui-steps"] == 100
               and "power-budget-w" not in m.content["config"] for m in msgs)
    with pytest.raises(core.InputError):
        flower.PtuiFleet(FedAvg(), cap_w=10.0, deadline_s=5.0)


def test_split_cap_finds_the_least_round_time_within_the_cap():
    curves = {1: ([5.0, 10.0, 20.0], [30.0, 20.0, 10.0]), 2: ([2.0, 4.0], [40.0, 15.0])}
    b, ok = flower.split_cap(curves, 30.0)
    # T = 15 s is the least both meet within 30 W: node 1 at 20 W (10 s), node 2 at 4 W (15 s);
    # the 6 W left could not make node 2 faster, so they stay unspent
    assert ok and b == {1: 20.0, 2: 4.0}
    b, ok = flower.split_cap(curves, 20.0)         # T = 20 s: node 1 at 10 W, node 2 at 4 W
    assert ok and b == {1: 10.0, 2: 4.0}
    assert flower.split_cap(curves, 6.0) == ({1: 5.0, 2: 2.0}, False)


def sysfs_node(root, tmp_path):
    """The mod and a node's context for `ptui emulate`'s Orin AGX tree through the sysfs backend,
    with a model from the roofline prior of ResNet-18 (no profiling)."""
    prior = core.fit_prior(core.get_device("orin-agx"), core.workload_spec(workload="resnet18", batch_size=16),
                           out=tmp_path / "prior", workload="resnet18")
    ctx = context(5, device="orin-agx", backend="sysfs", **{"sysfs-root": str(root),
                                                             "data-dir": str(tmp_path / "d"),
                                                             "model": str(prior.out)})
    return flower.ptui_power_mod(sample_interval=0.1), ctx


def test_the_mod_on_an_emulated_board_through_sysfs(emulated_board, tmp_path):
    """`ptui emulate`'s tree through the sysfs backend: the mode is written to the tree while the
    round trains, read back from it, put back after; watts from the tree's rails (SIMULATED)."""
    root, _ = emulated_board
    mod, ctx = sysfs_node(root, tmp_path)
    seen: list = []

    def train(msg, c):
        time.sleep(0.6)                           # a few samples of the tree's rails
        return trainer(seen, board_of(mod))(msg, c)
    r = mod(instruction({"power-budget-w": 25.0}), ctx, train)
    info, met = r.content["ptui"], r.content["metrics"]
    be = board_of(mod)()
    assert be.kind == "sysfs" and info["backend"] == "sysfs"
    assert seen == [info["mode"]] != [info["start-mode"]]
    assert be.current_mode().key == info["start-mode"] == info["end-mode"] and info["restored"] is True
    assert met["ptui-predicted-w"] <= 25.0 and met["ptui-w"] > 0 and met["ptui-simulated"] == 1.0
    assert met["ptui-s"] >= 0.6 and met["ptui-s"] == met["ptui-host-s"]       # wall time on a live clock
    assert info["seconds-from"] == "the round's wall time on this host"


def _a_users_apply(root):
    """A user's `ptui apply` on the emulated board: (device, backend, the preset it left, the
    user's mode), `ptui restore`'s way back naming the preset."""
    dev = core.get_device("orin-agx")
    be, _ = core.open_backend("sysfs", "orin-agx", root=str(root))
    preset = be.current_mode()
    user = dev.mode(6, 1497.6, 522.75, 2133)
    assert core.apply(be, user).ok and core.board_status(be).restore.mode == preset.key
    return dev, be, preset, user


def test_a_round_keeps_the_way_back_that_a_users_ptui_apply_left(emulated_board, tmp_path):
    """A `ptui apply` before the run leaves `ptui restore` a way back to the board's preset.  A
    round applies its mode and rolls it back: the board ends in the user's mode, and `ptui
    restore` still goes back to the preset (the round's apply replaced the record with the state
    it found and its rollback removed it: restore had nothing left to undo)."""
    root, _ = emulated_board
    dev, be, preset, user = _a_users_apply(root)
    made = core.board_status(be).restore.created
    prior = core.fit_prior(dev, core.workload_spec(workload="resnet18", batch_size=16),
                           out=tmp_path / "prior", workload="resnet18")
    mod = flower.ptui_power_mod(sample_interval=0.1)
    ctx = context(5, device="orin-agx", backend="sysfs", **{"sysfs-root": str(root), "model": str(prior.out),
                                                             "data-dir": str(tmp_path / "d")})
    r = mod(instruction({"power-budget-w": 12.0}), ctx, trainer([]))
    info = r.content["ptui"]
    assert info["start-mode"] == info["end-mode"] == user.key != info["mode"] and info["restored"]
    assert be.current_mode() == user
    assert core.board_status(be).restore is not None, "the round took ptui restore's way back"
    assert core.board_status(be).restore.mode == preset.key
    assert core.board_status(be).restore.created == made              # the user's record, as it was
    assert "restored" in core.restore(be) and be.current_mode() == preset


@pytest.mark.slow
def test_ten_virtual_jetsons_in_flowers_simulation(tmp_path):
    """deploy/flower/fleet_sim.py: run_simulation with 10 heterogeneous simulated boards under a
    150 W cap, 2 rounds; every node reports, the fleet's predicted total stays within the cap."""
    pytest.importorskip("ray", reason="Flower's simulation engine needs ray: pip install 'flwr[simulation]==1.42.0'")
    import json
    import subprocess
    import sys

    from tests.support.cli import ROOT, subprocess_env
    out = tmp_path / "fleet.json"
    r = subprocess.run([sys.executable, str(ROOT / "deploy/flower/fleet_sim.py"), "--cap-w", "150",
                        "--rounds", "2", "--data-dir", str(tmp_path / "nodes"), "--json", str(out)],
                       capture_output=True, text=True, timeout=300, env=subprocess_env(tmp_path), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert [x["round"] for x in doc["rounds"]] == [1, 2]
    base = doc["baselines"]                   # the same fleet without ptui, for one round
    assert base["maxn"]["w"] > 150 and not base["maxn"]["within_cap"]
    assert base["preset"]["s"] > doc["rounds"][-1]["fleet"]["s"]    # ptui's split is the faster
    for rnd in doc["rounds"]:
        rows = rnd["nodes"]
        assert len(rows) == 10 and not [x for x in rows if "error" in x]
        assert {x["device"] for x in rows} == {"orin-agx", "xavier-agx", "orin-nano"}
        assert rnd["fleet"]["predicted_w"] <= 150.0 and all(x["simulated"] for x in rows)
    # round 1 is split by each node's device (asked before the round: a fresh data directory, no
    # model yet, so its device's prior), round 2 by the fronts they sent: round 1's picks are a
    # feasible split of round 2's, so it is no slower
    for x in doc["rounds"][0]["nodes"]:
        assert x["split_device"] == x["device"] and x["split_by"] == "its device's prior", x
    first, second = (rnd["fleet"]["predicted_s"] for rnd in doc["rounds"])
    assert second <= first


# -- the round's watts: the settled mode's, not a blend with the transient after the switch ----------
def test_settled_power_leaves_out_the_readings_before_the_power_settles():
    # 40 W falling to 15 W (tau 0.6 s) from t = 0, read every 0.1 s for 5 s
    rs = [(0.1 * k, 15.0 + 25.0 * math.exp(-0.1 * k / 0.6)) for k in range(51)]
    w = flower.settled_power(rs, 0.0)
    blend = sum(p for _, p in rs) / len(rs)
    assert blend > 17.5                                     # what the mod reported before
    assert w.settled and w.mean == pytest.approx(15.0, rel=0.02)
    assert 1.0 <= w.settle_s <= 4.0 and w.dropped > 0 and w.n + w.dropped == len(rs)
    assert w.span_s == pytest.approx(5.0 - w.settle_s)
    # readings before the mode read back are left out too; a flat board settles after min_s
    flat = [(t, 20.0) for t in np.arange(-1.0, 3.0, 0.25)]
    w = flower.settled_power(flat, 0.0)
    assert w.settled and w.mean == 20.0 and w.settle_s == pytest.approx(1.0) and w.dropped == 4
    # a round too short to settle: its last window_s seconds, said so
    w = flower.settled_power(rs[:12], 0.0)
    assert not w.settled and math.isnan(w.settle_s) and w.n == 11 and w.span_s == pytest.approx(1.0)
    assert flower.settled_power([], 0.0).n == 0


def test_a_short_round_reports_the_settled_modes_power_not_a_blend(node_data):
    """The simulated board's power relaxes to a new level over ~3 s (tau 0.6 s) from the level it
    had (the board idle in its start mode, before the round trains): a round of ~4.5 s reports the
    round's mode's steady power, not a blend with the climb, and the readings it averaged."""
    mod = flower.ptui_power_mod(data_dir=node_data, sample_interval=0.1)
    ctx = context(7, device="xavier-agx")
    pilot = mod(instruction({"power-budget-w": 15.0, "ptui-steps": 10}), ctx, trainer([]))
    steps = max(10, int(4.5 / (pilot.content["metrics"]["ptui-s"] / 10)))
    r = mod(instruction({"power-budget-w": 15.0, "ptui-steps": steps}), ctx, trainer([]))
    info, met = r.content["ptui"], r.content["metrics"]
    be = board_of(mod)()
    steady = be._point(be.device.mode(*_tuple(info["mode"])), core.get_workload("resnet18", 16)).power_w
    assert 3.5 <= met["ptui-s"] <= 10.0, met
    assert met["ptui-w"] == pytest.approx(steady, rel=0.015)
    assert met["ptui-w-settled"] == 1.0 and 1.0 <= met["ptui-settle-s"] <= 3.5
    assert met["ptui-w-n"] >= 5 and met["ptui-w-span-s"] == pytest.approx(met["ptui-s"] - met["ptui-settle-s"],
                                                                          abs=0.3)
    assert "once the power settled" in info["watts-from"]
    assert math.isclose(met["ptui-j"], met["ptui-w"] * met["ptui-s"])


# -- round 1: the strategy asks each node its device (and model) before splitting the cap -------------
class AppGrid:
    """A grid whose nodes run real ClientApps: send_and_receive hands each message to its node's app
    with the node's Context and turns what the app raises into an error reply, as a SuperNode's
    ClientApp process does (flwr/supernode/runtime/run_clientapp.py)."""

    def __init__(self, apps: dict):
        self.apps, self.sent = apps, []          # node -> (ClientApp, Context)

    def get_node_ids(self):
        return list(self.apps)

    def send_and_receive(self, messages, *, timeout=None):
        from flwr.app import Error
        out = []
        for m in messages:
            self.sent.append(m)
            app, ctx = self.apps[m.metadata.dst_node_id]
            try:
                out.append(app(m, ctx))
            except Exception as ex:  # noqa: BLE001 - as Flower's ClientApp runner
                out.append(Message(Error(code=2, reason=f"{type(ex)}:<'{ex}'>"), reply_to=m))
        return out


def _client_app(mod=None, register=True):
    from flwr.clientapp import ClientApp
    app = ClientApp(mods=[mod] if mod is not None else [])
    if mod is not None and register:
        mod.register(app)
    app.train()(trainer([]))
    return app


def test_round_one_splits_the_cap_by_each_nodes_device_asked_before_it_trains(task_identity, tmp_path):
    """Node ids are random: before a node's first round the fleet sends it a QUERY (a real flwr
    Message through the grid) that the mod answers from the node's config without opening its
    board: node 1, an AGX Xavier with a model, answers its model's front; node 2, an Orin Nano
    without one, its device (split by that device's prior); node 3's ClientApp has no ptui query
    (an error reply): split as before, by the default device, said in the log.  Each node is
    asked once."""
    xavier = core.get_device("xavier-agx")
    prior = core.fit_prior(xavier, core.workload_spec(workload="resnet18", batch_size=16),
                           out=tmp_path / "xavier-model", workload="resnet18")
    mod = flower.ptui_power_mod(data_dir=str(tmp_path / "nodes"))
    grid = AppGrid({1: (_client_app(mod), context(1, device="xavier-agx", model=str(prior.out))),
                    2: (_client_app(mod), context(2, device="orin-nano")),
                    3: (_client_app(), context(3, device="xavier-agx"))})
    logs: list[str] = []
    # (no reserve for the units not measured yet: the curves are the fronts and priors as sent)
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0, steps=100,
                             log=logs.append, unit_spread=0.0)
    msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), grid))
    queries = [m for m in grid.sent if m.metadata.message_type == flower.QUERY]
    assert sorted(m.metadata.dst_node_id for m in queries) == [1, 2, 3]
    assert all(m.content["config"]["ptui-steps"] == 100 for m in queries)
    assert not mod.nodes                                     # answered from the node config: no board opened
    assert fleet.node_device == {1: "xavier-agx", 2: "orin-nano"} and fleet.node_model == {1: True, 2: False}
    # node 1 split by its model's front (for the round's 100 steps), node 2 by the Orin Nano's prior
    pred = core.load_predictions(prior.out, xavier)
    fw, fms = flower.front_of(pred.table, core.DEFAULT_RISK)
    assert fleet.curves[1] == (fw, [t * 100 / 1000.0 for t in fms]) and 2 not in fleet.curves
    assert fleet.curve(2) == fleet.prior_curve("orin-nano") and fleet.curve(3) == fleet.prior_curve("orin-agx")
    budgets = {m.metadata.dst_node_id: m.content["config"]["power-budget-w"] for m in msgs}
    want, ok = flower.split_cap({1: fleet.curves[1], 2: fleet.prior_curve("orin-nano"),
                                 3: fleet.prior_curve("orin-agx")}, 40.0)
    assert ok and budgets == pytest.approx(want)
    # without the query (before): every node split as the default device
    blind = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0, steps=100,
                             query=False, log=[].append)
    before = {m.metadata.dst_node_id: m.content["config"]["power-budget-w"]
              for m in blind.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), grid)}
    assert before[1] == before[2] == before[3] and budgets[2] != before[2]
    text = "\n".join(logs)
    assert "node 1 xavier-agx (its model's front)" in text and "node 2 orin-nano (no model yet" in text
    assert "node 3 did not answer ptui's query" in text and "1 did not answer (3): split as before" in text
    assert "node 2 (orin-nano, its device's prior)" in text
    # round 2: nobody is asked again (node 3 neither: it did not answer once)
    n = len(grid.sent)
    list(fleet.configure_train(2, ArrayRecord([np.zeros(3)]), ConfigRecord(), grid))
    assert len(grid.sent) == n


def test_the_mod_answers_a_query_without_training_or_opening_the_board(node_data):
    mod = flower.ptui_power_mod(data_dir=node_data, devices=["orin-nano"])
    called: list = []
    r = mod(instruction({}, mtype=flower.QUERY), context(7, **{"partition-id": 0}),
            lambda m, c: called.append(m))
    info = r.content["ptui"]
    assert not called and not mod.nodes and info["device"] == "orin-nano" and info["backend"] == "sim"
    assert r.metadata.reply_to_message_id == "m7" and not r.has_error()


@pytest.mark.parametrize("steps, said", [(-1, "ptui-steps must be at least 1, got -1"),
                                         (2.5, "ptui-steps must be a whole number, got '2.5'"),
                                         ("x", "ptui-steps must be a whole number, got 'x'")])
@pytest.mark.parametrize("with_model", [True, False])
def test_a_query_with_a_bad_ptui_steps_is_answered_naming_it(tmp_path, steps, said, with_model):
    """A custom strategy's QUERY with ptui-steps=-1 was answered "the node's model could not be
    read: ptui-steps must be at least 1, got -1" and has-model False from a node whose model read
    fine (and without a word from a node without one).  The answer names the bad key and value,
    says whether the node has a model, and sends no front (its seconds are for the steps asked)."""
    node: dict = {"device": "orin-agx"}
    if with_model:
        prior = core.fit_prior(core.get_device("orin-agx"), core.workload_spec(workload="resnet18", batch_size=16),
                               out=tmp_path / "model", workload="resnet18")
        node["model"] = str(prior.out)
    mod = flower.ptui_power_mod(data_dir=str(tmp_path / "nodes"))
    called: list = []
    r = mod(instruction({"ptui-steps": steps}, mtype=flower.QUERY), context(7, **node),
            lambda m, c: called.append(m))
    info = r.content["ptui"]
    assert not called and not mod.nodes and not r.has_error() and info["device"] == "orin-agx"
    assert said in info.get("notes", "") and "could not be read" not in info.get("notes", "")
    assert info["has-model"] is with_model and "front-w" not in info and "front-s" not in info
    # the same node asked for whole steps answers its front as before
    r = mod(instruction({"ptui-steps": 50}, mtype=flower.QUERY), context(7, **node), lambda m, c: None)
    info = r.content["ptui"]
    assert not info.get("notes") and info["has-model"] is with_model and ("front-w" in info) is with_model


def test_a_grid_that_cannot_be_asked_falls_back_to_the_split_of_before(task_identity):
    logs: list[str] = []
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0, devices=DEVICES,
                             log=logs.append)
    msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
    assert len(msgs) == 3 and any("could not ask the nodes their device" in s for s in logs)
    assert {fleet.device_of(n) for n in DEVICES} == set(DEVICES.values())


def test_on_an_emulated_board_the_watts_are_the_settled_modes(emulated_board, tmp_path):
    """The live path (core.Sampler on the host's clock): an emulated Orin AGX switched from MAXN
    to a 20 W mode; a 4 s round reports the mode's settled power from the readings after it
    settled, with their count and span, and a 0.6 s round (its readings still falling from
    MAXN's 23 W: their mean ~18 W for a 14.8 W mode) says its power had not settled.  (Here most
    of the first switch's transient passes while core.apply waits for the mode to read back, so
    the old mean of every reading was only 0.6-2.3 % high on the 4 s round: the simulated test
    above is the one the old figure fails.)"""
    root, driver = emulated_board
    dev = core.get_device("orin-agx")
    prior = core.fit_prior(dev, core.workload_spec(workload="resnet18", batch_size=16),
                           out=tmp_path / "prior", workload="resnet18")
    mod = flower.ptui_power_mod(sample_interval=0.1)
    ctx = context(5, device="orin-agx", backend="sysfs", **{"sysfs-root": str(root), "model": str(prior.out),
                                                             "data-dir": str(tmp_path / "d")})

    def train_for(s):
        def train(msg, c):
            time.sleep(s)
            return trainer([])(msg, c)
        return train
    r = mod(instruction({"power-budget-w": 20.0}), ctx, train_for(4.0))
    info, met = r.content["ptui"], r.content["metrics"]
    steady = driver.sim._point(dev.mode(*_tuple(info["mode"]))).power_w
    start = driver.sim._point(dev.mode(*_tuple(info["start-mode"]))).power_w
    assert start > steady * 1.3                             # a transient worth leaving out
    assert met["ptui-w-settled"] == 1.0 and met["ptui-w"] == pytest.approx(steady, rel=0.03)
    assert 1.0 <= met["ptui-settle-s"] <= 3.5 and met["ptui-w-n"] >= 5 and met["ptui-w-span-s"] >= 0.4
    time.sleep(3.5)                                         # the board settles back in its start mode
    r = mod(instruction({"power-budget-w": 20.0}), ctx, train_for(0.6))
    met, info = r.content["metrics"], r.content["ptui"]
    assert met["ptui-w-settled"] == 0.0 and math.isnan(met["ptui-settle-s"]) and met["ptui-w-n"] >= 1
    assert "had not settled" in info["notes"] and "had not settled" in info["watts-from"]


def test_another_ptui_may_not_drive_the_board_during_a_round(emulated_board, tmp_path):
    """One process drives a board at a time: while a round trained in its mode, another ptui's
    apply was free to change it under the training (and the round's rollback then undid that);
    now it is refused, naming the node's process, and the board is free once the round is over."""
    import os
    import subprocess
    import sys

    from tests.support.cli import subprocess_env
    root, _ = emulated_board
    mod, ctx = sysfs_node(root, tmp_path)
    other = [sys.executable, "-m", "ptui", "apply", "--backend", "sysfs", "--sysfs-root", str(root),
             "--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6", "--yes"]
    env = subprocess_env(tmp_path)
    got: list = []

    def train(msg, c):
        got.append(subprocess.run(other, capture_output=True, text=True, env=env, timeout=120))
        return trainer([])(msg, c)
    r = mod(instruction({"power-budget-w": 25.0}), ctx, train)
    info = r.content["ptui"]
    assert got[0].returncode == 1 and "changing the power mode" in got[0].stderr, got[0].stderr
    assert f"pid {os.getpid()}" in got[0].stderr
    assert info["start-mode"] == info["end-mode"] and info["restored"] is True
    after = subprocess.run(other, capture_output=True, text=True, env=env, timeout=120)
    assert after.returncode == 0, after.stderr             # the board is free once the round is over


# -- unit-to-unit variation: each board draws its own share of its kind's typical power ----------------
def _fleet_rounds(node_data, cap_w: float, unit: float, rounds: int, **kw) -> list[float]:
    """The fleet's measured watts per round: three SIMULATED nodes whose units all draw `unit` x
    the typical unit's power (their models are the typical unit's)."""
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=cap_w, devices=DEVICES,
                             query=False, log=[].append, **kw)
    mod = flower.ptui_power_mod(data_dir=node_data)
    out = []
    for r in range(1, rounds + 1):
        msgs = list(fleet.configure_train(r, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
        replies = [mod(m, context(m.metadata.dst_node_id, device=DEVICES[m.metadata.dst_node_id],
                                  **{"sim-unit-power": unit}), trainer([])) for m in msgs]
        fleet.aggregate_train(r, replies)
        out.append(fleet.history[-1]["fleet"]["w"])
        assert all(x["unit_power"] == unit and x["simulated"] for x in fleet.history[-1]["nodes"])
    return out


@pytest.mark.slow               # fits the nodes' models (20 simulated modes each) the first time
def test_units_drawing_more_than_their_models_hold_the_cap_with_the_power_correction(node_data, task_identity):
    """Units drawing 35 % more than the typical unit their models describe: split by the models
    alone (rounds 2 on; round 1 is split by the devices' roofline priors, query off) the fleet
    measures over its cap every round; with the per-node power correction (its unit's factor
    and the reserve for what is not known of it) it holds the cap from round 2 on; a margin of the
    units' excess holds round 1 and spends less.  (Units drawing 10 % more went over blind, 61.4 W
    for 60, until the refit of the prior got a scale for the bytes; 20 % more then took it over,
    61.2 W, until the refitted prior became the median over what the profiled modes leave unknown
    of its scales: the AGX Xavier's model then put its 31.4 W share's former pick at 26.3 W
    (25.2 before; it draws 27.8 on the typical unit), which the risk rule no longer takes, and the
    blind fleet of 20 % units measured 54.8 W.)"""
    cap, unit = 60.0, 1.35
    blind = _fleet_rounds(node_data, cap, unit, 3, correct=False)
    assert all(w > cap for w in blind[1:]), blind
    corrected = _fleet_rounds(node_data, cap, unit, 3)
    assert corrected[0] == pytest.approx(blind[0], rel=0.02), (corrected, blind)   # nothing measured yet
    assert all(w <= cap for w in corrected[1:]), corrected
    padded = _fleet_rounds(node_data, cap, unit, 1, margin=unit - 1)  # round 1, nothing measured yet
    assert padded[0] <= cap and padded[0] < blind[0], (padded, blind)   # the margin leaves power unspent


@pytest.mark.slow               # fits the Orin Nano's model (20 simulated modes) when run alone
def test_a_units_power_factor_is_what_its_board_draws_not_what_its_model_predicts(node_data):
    """sim-unit-power scales the SIMULATED board's watts; the node's prediction stays its model's."""
    figures = {}
    for unit in (1.0, 1.2):
        mod = flower.ptui_power_mod(data_dir=node_data)
        r = mod(instruction({"power-budget-w": 20.0}), context(3, device="orin-nano", **{"sim-unit-power": unit}),
                trainer([]))
        figures[unit] = r.content["metrics"]
    assert figures[1.2]["ptui-predicted-w"] == figures[1.0]["ptui-predicted-w"]
    assert figures[1.2]["ptui-w"] == pytest.approx(1.2 * figures[1.0]["ptui-w"], rel=0.03)
    with pytest.raises(core.InputError, match="sim-unit-power"):
        flower.NodeSpec.of({"sim-unit-power": "lots"}, flower.NodeSpec())


@pytest.mark.slow               # profiles 8 + 3 simulated modes and fits twice (~6 s)
def test_nodes_sharing_a_pool_profile_a_few_modes_each_and_fit_their_own_units_model(tmp_path, monkeypatch):
    """With the fleet's pool, the first node of a type profiles fit_modes alone (its rows go to the
    pool); the next profiles pool_modes and fits its unit's model on them and the fleet's rows,
    its power factor against the first unit's from its own rows; each board goes back."""
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    said: list[str] = []
    mod = flower.ptui_power_mod(data_dir=str(tmp_path / "n"), pool=url, fit_modes=8, pool_modes=3,
                                say=said.append)
    infos = {}
    for nid, board, unit in ((1, "unit-a", 1.0), (2, "unit-b", 1.1)):
        said.clear()
        r = mod(instruction({"power-budget-w": 30.0}, nid),
                context(nid, **{"board-id": board, "sim-unit-power": unit}), trainer([]))
        node = next(n for n in mod.nodes.values() if n.spec.board == board)
        infos[board] = (r.content["ptui"], node, list(said))
        assert node.backend.current_mode().key == r.content["ptui"]["start-mode"]
        assert node.model_dir.name.endswith(f"-board-{board}-unit{unit:g}")     # its unit's model
    first, second = infos["unit-a"], infos["unit-b"]
    assert any("holds 0 rows" in s and "profiling 8 modes" in s and "alone" in s for s in first[2])
    assert "pooled" not in first[1].predictions.model.about.trained_on
    assert any("holds 8 rows of 1 other board" in s and "profiling 3 modes" in s for s in second[2])
    pooled = second[1].predictions.model.about.trained_on["pooled"]
    assert (pooled["own_rows"], pooled["fleet_rows"]) == (3, 8)
    assert pooled["power_factor"] == pytest.approx(1.1, abs=0.05)
    assert any("a pooled model: 3 modes of this board" in s for s in second[2])
    rows, _ = core.pull_rows(core.get_device("orin-agx"), "resnet18", 16, url=url)
    assert sorted({r.board for r in rows}) == ["unit-a", "unit-b"] and len(rows) == 11
    # the model is the board's: a node started again reads it, profiles nothing
    said.clear()
    again = flower.ptui_power_mod(data_dir=str(tmp_path / "n"), pool=url, say=said.append)
    again(instruction({"power-budget-w": 30.0}, 2), context(2, **{"board-id": "unit-b", "sim-unit-power": 1.1}),
          trainer([]))
    assert any("fitted before" in s for s in said) and not any("profiling" in s for s in said)
    # the mod's default pool is $PTUI_POOL, and a simulation's partitions are boards of their own
    monkeypatch.setenv("PTUI_POOL", url)
    spec = flower.ptui_power_mod().spec_for(context(9, **{"partition-id": 3}))
    assert spec.pool == url and spec.board.endswith("-partition-3")
    assert flower.ptui_power_mod(pool="").spec_for(context(9)).pool == ""


@pytest.mark.slow               # profiles 6 simulated modes and fits (~3 s)
def test_a_pool_that_cannot_be_reached_leaves_the_node_profiling_alone(tmp_path):
    """A pool server that does not answer is a warning: the node profiles fit_modes modes of its own
    and decides; a URL that names no pool is one clear error."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (the fleet extra)")
    said: list[str] = []
    mod = flower.ptui_power_mod(data_dir=str(tmp_path / "n"), pool="postgresql://ptui@127.0.0.1:1/ptui",
                                fit_modes=6, say=said.append)
    r = mod(instruction({"power-budget-w": 30.0}), context(4, **{"board-id": "lonely"}), trainer([]))
    assert r.content["metrics"]["ptui-feasible"] == 1.0
    assert any("warning" in s and "cannot reach the pool" in s and "profiles 6 modes alone" in s for s in said)
    with pytest.raises(core.InputError, match="bad pool URL 'ftp://nowhere'"):   # when the mod is made
        flower.ptui_power_mod(data_dir=str(tmp_path / "m"), pool="ftp://nowhere", fit_modes=6)


@pytest.mark.slow               # profiles 8 + 3 + 8 simulated modes and fits (~8 s)
def test_a_pool_lost_between_the_count_and_the_fit_leaves_the_node_fitting_alone(tmp_path, monkeypatch):
    """The pool held the fleet's rows when the node asked, and is gone when it fits: a warning, and
    the node profiles fit_modes of its own and fits alone, rather than failing its round.  A board
    id read from TOML as a number is a name like any other."""
    from ptui.core.profiling.pool import PoolError
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    said: list[str] = []
    mod = flower.ptui_power_mod(data_dir=str(tmp_path / "n"), pool=url, fit_modes=8, pool_modes=3,
                                say=said.append)
    mod(instruction({"power-budget-w": 30.0}, 1), context(1, **{"board-id": 7}), trainer([]))
    assert next(iter(mod.nodes.values())).spec.board == "7"

    def gone(*a, **k):
        raise PoolError("cannot reach the pool: the server went away")
    monkeypatch.setattr(flower.core, "fit_with_pool", gone)
    said.clear()
    r = mod(instruction({"power-budget-w": 30.0}, 2), context(2, **{"board-id": "b"}), trainer([]))
    assert r.content["metrics"]["ptui-feasible"] == 1.0
    assert any("profiling 3 modes" in s for s in said)
    assert any("warning" in s and "went away" in s and "profiles 8 modes and fits alone" in s for s in said)
    node = next(n for n in mod.nodes.values() if n.spec.board == "b")
    assert "pooled" not in node.predictions.model.about.trained_on and "alone" in node.model_note


# -- kill -9 mid-round: the board goes back to the mode the round started in ---------------------------
_HOLDS_THE_MODE = """
import pathlib, sys, time
from ptui import flower
from tests.unit.test_flower import context, instruction
root, model, data, marker = sys.argv[1:5]
mod = flower.ptui_power_mod(sample_interval=0.1)
ctx = context(5, device="orin-agx", backend="sysfs", **{"sysfs-root": root, "data-dir": data, "model": model})

def train(msg, c):
    be = next(iter(mod.nodes.values())).backend
    pathlib.Path(marker).write_text(be.current_mode().key)     # training in ptui's mode now
    time.sleep(600)                                            # until it is killed

mod(instruction({"power-budget-w": 12.0}), ctx, train)
"""


def _kill_mid_round(root, tmp_path) -> tuple[str, str]:
    """A process (as a node's ClientApp process) runs a round of the mod on the emulated board and is
    killed with SIGKILL while it trains in ptui's mode; returns (the start mode, the round's mode)."""
    import signal
    import subprocess
    import sys

    from tests.support.cli import ROOT, subprocess_env
    prior = core.fit_prior(core.get_device("orin-agx"), core.workload_spec(workload="resnet18", batch_size=16),
                           out=tmp_path / "prior", workload="resnet18")
    be, _ = core.open_backend("sysfs", "orin-agx", root=str(root))
    start = be.current_mode().key
    marker = tmp_path / "training"
    p = subprocess.Popen([sys.executable, "-c", _HOLDS_THE_MODE, str(root), str(prior.out),
                          str(tmp_path / "d"), str(marker)], env=subprocess_env(tmp_path), cwd=ROOT,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120.0                    # generous: a loaded host imports slowly
        while not marker.exists() or not marker.read_text():
            assert p.poll() is None, p.stderr.read()[-2000:]
            assert time.monotonic() < deadline, "the round never started training"
            time.sleep(0.05)
        mode = marker.read_text()
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(60)
        p.stderr.close()
    assert p.returncode == -signal.SIGKILL
    assert mode != start and be.current_mode().key == mode     # the kill left the board in ptui's mode
    return start, mode


def _a_users_mode_stays_through_a_round(be, root, tmp_path) -> None:
    """A mode the user applies now: the node's next round starts and ends in it."""
    user = core.get_device("orin-agx").mode(6, 1497.6, 522.75, 2133)
    assert core.apply(be, user).ok
    mod, ctx = sysfs_node(root, tmp_path)
    info = mod(instruction({"power-budget-w": 25.0}), ctx, trainer([])).content["ptui"]
    assert info["start-mode"] == info["end-mode"] == user.key and "killed" not in info["notes"]
    assert be.current_mode() == user


def test_a_round_killed_mid_way_is_undone_by_ptui_restore(emulated_board, tmp_path):
    root, _ = emulated_board
    start, mode = _kill_mid_round(root, tmp_path)
    be, _ = core.open_backend("sysfs", "orin-agx", root=str(root))
    assert core.board_status(be).restore.mode == start
    said = core.restore(be)
    assert be.current_mode().key == start and be.current_mode().describe() in said, said
    # the killed round is undone for good: a mode chosen after the restore stays through a round
    _a_users_mode_stays_through_a_round(be, root, tmp_path)


def test_a_round_killed_mid_way_is_undone_by_the_nodes_next_round(emulated_board, tmp_path):
    """The node's next round (a new ClientApp process) finds the killed round's record: it puts the
    board back in the mode that round started in before it decides, says so, and ends there."""
    root, _ = emulated_board
    start, mode = _kill_mid_round(root, tmp_path)
    mod, ctx = sysfs_node(root, tmp_path)
    seen: list = []
    r = mod(instruction({"power-budget-w": 25.0}), ctx, trainer(seen, board_of(mod)))
    info = r.content["ptui"]
    assert info["start-mode"] == info["end-mode"] == start and info["restored"]
    assert "a round killed before it put the board back" in info["notes"] and start in info["notes"]
    be, _ = core.open_backend("sysfs", "orin-agx", root=str(root))
    assert be.current_mode().key == start
    st = core.board_status(be)
    assert st.restore is None, st.restore                      # nothing of the killed round is left
    # the fleet's owner sees it: the strategy's row and log carry the node's notes
    logs: list[str] = []
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=1), cap_w=40.0, log=logs.append)
    fleet.aggregate_train(1, [r])
    assert fleet.history[-1]["nodes"][0]["notes"] == info["notes"]
    assert any("says: a round killed before it put the board back" in s for s in logs), logs


def test_a_mode_applied_after_a_killed_round_is_not_undone_by_the_next_round(emulated_board, tmp_path):
    """A user's `ptui apply` after the kill (no restore): the next round starts and ends in it."""
    root, _ = emulated_board
    _kill_mid_round(root, tmp_path)
    be, _ = core.open_backend("sysfs", "orin-agx", root=str(root))
    _a_users_mode_stays_through_a_round(be, root, tmp_path)


def test_the_fleets_lines_go_to_flowers_log_by_default():
    """With no log= (the README's ten lines), PtuiFleet's lines went to ptui's logger, which has no
    handler: a user saw none of them.  They now go to Flower's own log, beside FedAvg's."""
    import logging

    from flwr.common.logger import FLOWER_LOGGER
    seen: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())
    h = Catch(level=logging.INFO)
    FLOWER_LOGGER.addHandler(h)
    try:
        flower.PtuiFleet(FedAvg(), cap_w=40.0).summary()
    finally:
        FLOWER_LOGGER.removeHandler(h)
    assert any("PtuiFleet: fleet cap 40 W" in m for m in seen), seen


# -- a node holds its budget as measured ---------------------------------------------------------------
def _round_on_unit(node_data, unit: float, config: dict, **mod_kw):
    mod = flower.ptui_power_mod(data_dir=node_data, **mod_kw)
    r = mod(instruction(config, node_id=11), context(11, device="orin-agx", **{"sim-unit-power": unit}),
            trainer([]))
    return r.content["ptui"], r.content["metrics"]


@pytest.mark.slow               # fits the Orin AGX's model (20 simulated modes) when run alone
def test_a_unit_drawing_more_than_its_model_steps_down_to_hold_its_budget(node_data):
    """A unit drawing 25 % more than the typical unit its model describes, given 20 W: its pick
    (predicted within 20 W) drew 23 W for the whole round.  The node now steps down once the power
    settled, as often as it takes (the model's error differs from mode to mode), and reports the
    watts of the mode it trained in; the board ends in the mode it started in."""
    info, met = _round_on_unit(node_data, 1.25, {"power-budget-w": 20.0}, hold_budget=False)
    assert met["ptui-w"] > 21.0 and not info["notes"]                      # what it did before
    info, met = _round_on_unit(node_data, 1.25, {"power-budget-w": 20.0})
    assert met["ptui-w"] <= 20.0, (met["ptui-w"], info["notes"])
    assert "stepped down to" in info["notes"] and info["mode"] in info["notes"]
    assert info["start-mode"] == info["end-mode"] != info["mode"] and info["restored"] is True
    # the reply's predicted figures are the mode it trained in: the bound it picked that mode by
    assert met["ptui-predicted-w"] < met["ptui-bound-w"] < 20.0 / 1.05
    # a budget it already meets as measured: no step
    info, met = _round_on_unit(node_data, 1.0, {"power-budget-w": 20.0})
    assert met["ptui-w"] <= 20.0 and "stepped" not in info["notes"]


@pytest.mark.slow
def test_a_fleet_holds_its_cap_by_its_split_unless_told_to_hold_the_shares(node_data, task_identity):
    """PtuiFleet sends each node its budget in the node's model's watts (its share over its measured
    factor), so the node must not hold that budget as measured: the fleet sends ptui-hold-w 0 (none),
    or with hold_shares=True the share itself, which the node then holds as measured."""
    info, met = _round_on_unit(node_data, 1.25, {"power-budget-w": 20.0, flower.HOLD_KEY: 0.0})
    assert met["ptui-w"] > 21.0 and "stepped" not in info["notes"]
    info, met = _round_on_unit(node_data, 1.25, {"power-budget-w": 18.0, flower.HOLD_KEY: 20.0})
    assert met["ptui-w"] <= 20.0 and "over its 20.00 W" in info["notes"]
    for hold, want in ((False, [0.0] * 3), (True, None)):
        fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0,
                                 devices=DEVICES, query=False, log=[].append, hold_shares=hold)
        msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
        sent = [m.content["config"][flower.HOLD_KEY] for m in msgs]
        shares = [fleet.last_budgets[m.metadata.dst_node_id] for m in msgs]
        assert sent == (want if want is not None else shares), (hold, sent, shares)


def test_the_hold_steps_down_on_a_live_board_while_it_trains(emulated_board, tmp_path):
    """The same on `ptui emulate`'s tree through sysfs (the hold watches the sampler beside the
    training): a model that predicts half the power picks a mode the board draws more than
    its budget in; the node steps down while the script trains and ends in its start mode."""
    root, _ = emulated_board
    mod, ctx = sysfs_node(root, tmp_path)
    node = mod.node_for(ctx)
    tab = node.predictions.table
    tab.power_w *= 0.5
    tab.power_w_std *= 0.5
    seen: list = []

    def train(msg, c):
        t0, stepped = time.monotonic(), None
        while time.monotonic() - t0 < 25.0:            # until 5 s after the hold stepped down
            seen.append(board_of(mod)().current_mode().key)
            if stepped is None and len(set(seen)) > 1:
                stepped = time.monotonic()
            if stepped is not None and time.monotonic() - stepped > 5.0:
                break
            time.sleep(0.1)
        return trainer([])(msg, c)
    r = mod(instruction({"power-budget-w": 20.0}), ctx, train)
    info, met = r.content["ptui"], r.content["metrics"]
    assert "stepped down to" in info["notes"]
    assert len(set(seen)) > 1 and seen[-1] == info["mode"]          # stepped while it trained
    assert info["start-mode"] == info["end-mode"] and info["restored"] is True
    assert board_of(mod)().current_mode().key == info["start-mode"]
    assert met["ptui-w"] <= 20.0 and met["ptui-w-settled"] == 1.0, (met["ptui-w"], info["notes"])


def _halved_node(root, tmp_path):
    """sysfs_node with its model's power halved: its pick for 20 W draws well over 20 W."""
    mod, ctx = sysfs_node(root, tmp_path)
    tab = mod.node_for(ctx).predictions.table
    tab.power_w *= 0.5
    tab.power_w_std *= 0.5
    return mod, ctx


def _train_until_stepped(mod, seen: list, after_s: float = 2.0):
    def train(msg, c):
        t0, stepped = time.monotonic(), None
        while time.monotonic() - t0 < 25.0:
            seen.append(board_of(mod)().current_mode().key)
            if stepped is None and len(set(seen)) > 1:
                stepped = time.monotonic()
            if stepped is not None and time.monotonic() - stepped > after_s:
                break
            time.sleep(0.1)
        return trainer([])(msg, c)
    return train


def test_a_step_down_keeps_ptui_restores_way_back_and_the_rounds_record(emulated_board, tmp_path):
    """The hold's step is an apply: it rewrote `ptui restore`'s record with the round's first mode,
    the round's rollback left that record, and `ptui restore` then put the board in that
    over-budget mode (a review).  And a round that started in its pick had no round record, so a
    kill -9 after a step left the board stepped down for good.  Now the step keeps the way back
    and opens the round's record when the round had not."""
    from ptui.core.board import undo
    root, _ = emulated_board
    dev, be, preset, user = _a_users_apply(root)
    mod, ctx = _halved_node(root, tmp_path)
    r = mod(instruction({"power-budget-w": 20.0}), ctx, _train_until_stepped(mod, []))
    info = r.content["ptui"]
    assert "stepped down to" in info["notes"] and info["start-mode"] == info["end-mode"] == user.key
    assert be.current_mode() == user and core.board_status(be).restore.mode == preset.key
    assert "restored" in core.restore(be) and be.current_mode() == preset
    # a round that starts in its own pick: no apply of its own, yet its step is recoverable
    first = info["notes"].split(" drew ")[0]
    pick = next(m for m in dev.full_space() if m.key == first)
    assert core.apply(be, pick).ok
    records: list = []
    seen: list = []

    def train(msg, c):
        out = _train_until_stepped(mod, seen, 0.5)(msg, c)
        records.append(undo.load(board_of(mod)(), undo.ROUND))
        return out
    r = mod(instruction({"power-budget-w": 20.0}), ctx, train)
    info = r.content["ptui"]
    assert info["start-mode"] == pick.key == info["end-mode"] and "stepped down to" in info["notes"]
    assert records[0] is not None and records[0].mode == pick.key      # the step opened it
    assert undo.load(be, undo.ROUND) is None and be.current_mode() == pick   # and the round closed it


def test_a_failing_step_down_is_said_and_the_board_still_goes_back(emulated_board, tmp_path, monkeypatch):
    """An exception in the hold's thread (an apply that raised) died with the thread: the reply said
    nothing and could name a mode the board was not in.  Now it is in the notes, the reply's mode
    is read back, and the board ends in its start mode."""
    root, _ = emulated_board
    mod, ctx = _halved_node(root, tmp_path)
    real, calls = core.apply, []

    def apply(be, mode):
        calls.append(mode)
        if len(calls) > 1:
            raise core.PtuiError("nvpmodel blew up")
        return real(be, mode)
    monkeypatch.setattr(flower.core, "apply", apply)

    def train(msg, c):
        time.sleep(4.0)
        return trainer([])(msg, c)
    r = mod(instruction({"power-budget-w": 20.0}), ctx, train)
    info = r.content["ptui"]
    assert len(calls) == 2 and "budget hold failed (PtuiError: nvpmodel blew up)" in info["notes"]
    assert info["mode"] == calls[0].key and info["restored"] is True
    assert board_of(mod)().current_mode().key == info["start-mode"] == info["end-mode"]


@pytest.mark.parametrize("bad", ["abc", -1.0, "nan"])
def test_a_bad_hold_value_is_refused_before_the_board_is_touched(emulated_board, tmp_path, bad,
                                                                 monkeypatch):
    """ptui-hold-w was read after the round had applied its mode (and written its records)."""
    from ptui.core.board import undo
    root, _ = emulated_board
    mod, ctx = sysfs_node(root, tmp_path)
    be = mod.node_for(ctx).backend
    start = be.current_mode()
    applied: list = []
    monkeypatch.setattr(flower.core, "apply", lambda b, m: applied.append(m))
    with pytest.raises(core.InputError, match=flower.HOLD_KEY):
        mod(instruction({"power-budget-w": 20.0, flower.HOLD_KEY: bad}), ctx, trainer([]))
    assert applied == [] and be.current_mode() == start and undo.load(be, undo.ROUND) is None
    assert undo.load(be, undo.APPLY) is None


@pytest.mark.slow               # fits the Orin AGX's model (20 simulated modes) when run alone
def test_the_hold_watches_the_whole_round_and_says_a_unit_still_over(node_data):
    """The hold decided once, on the first settled second of each mode: a draw a hair under the
    share then (16.2 W) that settled over it (16.34 W against 16.24 W) passed, and after the third
    step nothing was checked, so a unit still over said nothing (a user's trial).  It now watches
    the mean from the settled point on, and a mode still over after HOLD_STEPS steps is said."""
    info, met = _round_on_unit(node_data, 1.074, {"power-budget-w": 16.244})
    assert met["ptui-w"] <= 16.244, (met["ptui-w"], info["notes"])
    info, met = _round_on_unit(node_data, 1.75, {"power-budget-w": 20.0})
    assert info["notes"].count("stepped down to") == flower.HOLD_STEPS
    assert met["ptui-w"] <= 20.0 or f"after {flower.HOLD_STEPS} steps down" in info["notes"], info["notes"]
    assert "SIMULATED once settled" in info["notes"]                # the watts it names are simulated
    with pytest.raises(core.InputError, match="sim-unit-power must be at most 2"):
        flower.NodeSpec.of({"sim-unit-power": 2.5}, flower.NodeSpec())


# -- the power correction's factor and the reserve for units not measured yet -------------------------
Z05, PRIOR = 1.6448536, 0.10 / math.sqrt(3)


def _reply(msg: Message, w: float, predicted_w: float, bound_w: float, device: str, mode: str = "m",
           own_unit: bool | None = None, log_sd: float | None = None) -> Message:
    """A node's reply as the mod sends it, with the figures the strategy learns each unit's factor
    from: its measured watts, its model's median, log-sd (default: its bound's at risk 0.05) and
    upper bound for the mode it trained in."""
    sd = math.log(bound_w / predicted_w) / Z05 if log_sd is None else log_sd
    metrics = MetricRecord({"num-examples": 10, "ptui-w": w, "ptui-s": 100.0, "ptui-j": 100.0 * w,
                            "ptui-predicted-w": predicted_w, "ptui-predicted-s": 100.0,
                            "ptui-bound-w": bound_w, "ptui-power-log-sd": sd, "ptui-applied": 1.0,
                            "ptui-simulated": 1.0, "ptui-feasible": 1.0, "ptui-w-settled": 1.0})
    info = ConfigRecord({"device": device, "mode": mode, "start-mode": "s", "end-mode": "s",
                         "restored": True, "notes": "",
                         **({} if own_unit is None else {"own-unit": own_unit})})
    return Message(RecordDict({"arrays": ArrayRecord([np.zeros(3)]), "metrics": metrics, "ptui": info}),
                   reply_to=msg)


def _posterior(obs):
    """The unit factor's log mean and sd from (log ratio, log sd) readings, as unit_factor says."""
    prec, num = 1 / PRIOR ** 2, 0.0
    for lr, sd in obs:
        v = sd ** 2 + flower.WATTS_LOG_SD ** 2
        prec, num = prec + 1 / v, num + lr / v
    return num / prec, math.sqrt(1 / prec)


def test_a_units_factor_weighs_each_round_by_how_sure_its_model_was(task_identity):
    """The factor of a unit against its model, from its measured/predicted watts, each mode's
    reading weighed by the model's sd there against a prior of units within +-10 %.
    Before: the largest measured/bound ratio of the last rounds.  A unit drawing 8 % over its
    model's median in a mode whose bound was 15 % above it (a pick under the devices' priors) read
    0.94, so 1, and the next round went over the cap (fleet_sim.py, seed 9, models fitted in round
    1: 150.6 W under 150 W).  Then (a first mend) the largest measured/median ratio: a unit of
    1.10 in a mode its model under-predicted by 13 % read 1.24 (the posterior reads 1.045)."""
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0, devices=DEVICES,
                             query=False, log=[].append)
    msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
    assert all(fleet.unit_factor(n) == (0.0, pytest.approx(PRIOR)) for n in DEVICES)
    m0 = fleet.unmeasured
    figures = {1: (10.8, 10.0, 11.5), 2: (12.43, 10.0, 12.22), 3: (9.5, 10.0, 11.5)}
    sds = {1: math.log(1.15) / Z05, 2: 0.15, 3: math.log(1.15) / Z05}      # node 2's sd is the reply's
    fleet.aggregate_train(1, [_reply(m, *figures[m.metadata.dst_node_id], DEVICES[m.metadata.dst_node_id],
                                     log_sd=sds[m.metadata.dst_node_id]) for m in msgs])
    for n, (w, p, _b) in figures.items():
        mu, sd = _posterior([(math.log(w / p), sds[n])])
        assert fleet.unit_factor(n) == (pytest.approx(mu), pytest.approx(sd)) and 0 < sd < PRIOR
    assert math.exp(fleet.unit_factor(1)[0]) == pytest.approx(1.025, abs=0.003)   # 8 % over, unsure
    assert math.exp(fleet.unit_factor(2)[0]) < 1.06                                # 24 % over, very unsure
    msgs = list(fleet.configure_train(2, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
    assert 0 < fleet.unmeasured < m0                                # less is unknown than before
    assert fleet.power_factor(3) == pytest.approx(1 + fleet.unmeasured)   # drew less: never below 1
    f1 = fleet.power_factor(1)
    assert f1 == pytest.approx(math.exp(fleet.unit_factor(1)[0]) * (1 + fleet.unmeasured))
    sent = {m.metadata.dst_node_id: m.content["config"]["power-budget-w"] for m in msgs}
    assert sent[1] == pytest.approx(fleet.last_budgets[1] / f1)
    # a second mode where the model was sure: the factor moves close to what the unit drew there
    fleet.aggregate_train(2, [_reply(m, 10.8, 10.0, 10.3, DEVICES[1], mode="m2") for m in msgs
                              if m.metadata.dst_node_id == 1])
    mu, sd = fleet.unit_factor(1)
    assert (mu, sd) == (pytest.approx(_posterior([(math.log(1.08), math.log(1.15) / Z05),
                                                  (math.log(1.08), math.log(1.03) / Z05)])[0]),
                        pytest.approx(_posterior([(0, math.log(1.15) / Z05), (0, math.log(1.03) / Z05)])[1]))
    assert 1.06 < math.exp(mu) < 1.08 and sd < 0.02
    # a model's bound broken counts on its own (the unit drew 12.43 W over a 12.22 W bound)
    assert fleet.power_factor(2) >= 12.43 / 12.22
    # a round whose watts never settled, whose mode was not applied, with no prediction (no goal),
    # or from a node that says nothing of how sure its model was (an older mod deciding on the
    # median: its bound is its median) teaches nothing; before, the last read as certain, a factor
    # of 2.0 here (a review)
    before, ratios = fleet.unit_factor(3), list(fleet.ratios[3])
    m3 = next(m for m in msgs if m.metadata.dst_node_id == 3)
    unsettled = _reply(m3, 20.0, 10.0, 11.5, DEVICES[3], mode="m3")
    unsettled.content["metrics"]["ptui-w-settled"] = 0.0
    not_applied = _reply(m3, 20.0, 10.0, 11.5, DEVICES[3], mode="m5")
    not_applied.content["metrics"]["ptui-applied"] = 0.0
    no_goal = _reply(m3, 20.0, 10.0, 11.5, DEVICES[3], mode="m4")
    no_goal.content["metrics"]["ptui-power-log-sd"] = math.nan
    no_goal.content["metrics"]["ptui-bound-w"] = math.nan
    older = _reply(m3, 20.0, 10.0, 10.0, DEVICES[3], mode="m6", log_sd=0.1)
    del older.content["metrics"]["ptui-power-log-sd"]
    for r in (unsettled, not_applied, no_goal, older):
        fleet.aggregate_train(3, [r])
        assert fleet.unit_factor(3) == before and fleet.ratios[3] == ratios
    # a risk over one half reserves nothing, not a negative share
    assert flower.PtuiFleet(FedAvg(), cap_w=40.0, risk=0.7).reserve([1, 2, 3]) == 0.0


def test_the_nodes_whose_factor_is_unknown_share_a_reserve_for_unit_to_unit_variation(task_identity):
    """Before a node was measured its unit may draw up to 10 % more or less than its model's typical
    unit: a fleet split by the models alone went over its cap in round 1 (fleet_sim.py, seed 9,
    models cached: 150.1 W under 150 W).  The nodes now carry a reserve, the fleet's spread over the
    units' factors at the risk's bound shared by their shares (z sqrt(sum (s_i w_i)^2) / sum w_i);
    none for a node whose model is its own unit's, with hold_shares, without a risk or correction."""
    logs: list[str] = []
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0, devices=DEVICES,
                             query=False, log=logs.append)
    msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
    shares = np.array([fleet.last_budgets[n] for n in DEVICES])
    want = Z05 * PRIOR * math.sqrt(np.sum(shares ** 2)) / shares.sum()
    assert fleet.unmeasured == pytest.approx(want, rel=0.02) and 0.05 < want < 0.07
    m1 = fleet.unmeasured
    assert all(fleet.power_factor(n) == pytest.approx(1 + fleet.unmeasured) for n in DEVICES)
    assert sum(fleet.last_budgets.values()) <= 40.0 + 1e-9
    sent = {m.metadata.dst_node_id: m.content["config"]["power-budget-w"] for m in msgs}
    assert all(sent[n] == pytest.approx(fleet.last_budgets[n] / (1 + fleet.unmeasured)) for n in DEVICES)
    assert any("the reserve: " in s and "not known yet" in s for s in logs)
    # the reserve shrinks as 1 / sqrt(n): 100 equal nodes need a third of 10's
    ten, hundred = (fleet.reserve(list(range(k))) for k in (10, 100))
    assert ten == pytest.approx(0.0300, abs=5e-4) and hundred == pytest.approx(ten / math.sqrt(10))
    # node 1 says its model is its own unit's: no prior on its factor, the reserve is the others'
    fleet.aggregate_train(1, [_reply(m, 10.0, 10.0, 11.0, DEVICES[1], own_unit=True) for m in msgs
                              if m.metadata.dst_node_id == 1])
    fleet.configure_train(2, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid())
    assert fleet.unit_factor(1) == (0.0, 0.0) and fleet.power_factor(1) == 1.0
    # its row says the factor its budget was sent with (before it said it was its own), not today's
    row = next(x for x in fleet.history[-1]["nodes"] if x["node"] == 1)
    assert row["power_factor"] == pytest.approx(1 + m1) and m1 > 0
    assert fleet.power_factor(2) == pytest.approx(1 + fleet.unmeasured)
    w = np.array([fleet.last_budgets[2], fleet.last_budgets[3]])
    assert fleet.unmeasured == pytest.approx(Z05 * PRIOR * math.sqrt(np.sum(w ** 2)) / w.sum(), rel=0.05)
    # none without a risk, without the correction, with unit_spread 0 or with hold_shares
    for kw in ({"risk": None}, {"correct": False}, {"unit_spread": 0.0}, {"hold_shares": True}):
        f = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0, devices=DEVICES,
                             query=False, log=[].append, **kw)
        f.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid())
        assert f.unmeasured == 0.0 and all(f.power_factor(n) == 1.0 for n in DEVICES), kw
    with pytest.raises(core.InputError):
        flower.PtuiFleet(FedAvg(), cap_w=40.0, unit_spread=2.0)


def test_the_reserve_holds_the_cap_at_the_risk_for_units_within_the_spread(task_identity):
    """The reserve's promise checked by drawing units: 10 nodes of three kinds split a 150 W cap
    by their fronts with the reserve, each unit uniform within +-10 % of its model (exact here): the
    fleet draws over the cap in about the risk's share of the draws (5 %), not more."""
    fleet = flower.PtuiFleet(FedAvg(), cap_w=150.0, query=False, log=[].append)
    kinds = ["orin-agx", "xavier-agx", "orin-nano"]
    nodes = list(range(10))
    fleet.devices = {n: kinds[n % 3] for n in nodes}
    fleet.unmeasured = fleet.reserve(nodes)
    budgets, ok = flower.split_cap({n: fleet.curve(n) for n in nodes}, 150.0)
    fleet.unmeasured = max(fleet.unmeasured, fleet.reserve(nodes, budgets))
    budgets, ok = flower.split_cap({n: fleet.curve(n) for n in nodes}, 150.0)
    assert ok
    draw = np.array([budgets[n] / (1 + fleet.unmeasured) for n in nodes])   # each at its model's watts
    rng = np.random.default_rng(0)
    units = rng.uniform(0.9, 1.1, size=(20000, len(nodes)))
    over = float(np.mean(units @ draw > 150.0))
    assert over <= 0.06, over


# -- the deploy scripts refuse bad input before they start anything (a user's trial) ------------------
def _script(name: str, *args: str, env: dict | None = None):
    import os
    import subprocess
    import sys

    from tests.support.cli import ROOT
    return subprocess.run([sys.executable, str(ROOT / "deploy" / "flower" / name), *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args, said", [
    (("--pool", "mysql://x/y"), "--pool: bad pool URL 'mysql://x/y'"),
    (("--json", "/nonexistent-ptui-dir/f.json"), "--json: no folder /nonexistent-ptui-dir"),
    (("--cap-w", "0"), "--cap-w > 0"),
])
def test_fleet_sim_refuses_bad_input_before_flower_starts(args, said):
    """A bad --pool ran the whole simulation, each node raising, and exited 0 with 'fleet 0.0 W';
    --json to a missing folder failed with a traceback after the whole run."""
    r = _script("fleet_sim.py", "--rounds", "1", *args)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout


@pytest.mark.parametrize("fit_modes", [0, 2, -1])
def test_a_mod_asked_to_fit_on_too_few_modes_is_refused_when_made(fit_modes):
    """`fleet_sim.py --fit-modes 0` started Ray and every node's round raised ("--count must be
    between 1 and 4368 here, got 0", a traceback a node), exit 1; 2 would profile 2 modes a node
    and fail the fit.  The mod refuses it when made, and fleet_sim.py before Flower starts."""
    with pytest.raises(flower.core.InputError, match="fit_modes must be at least 3"):
        flower.ptui_power_mod(fit_modes=fit_modes)
    r = _script("fleet_sim.py", "--rounds", "1", "--fit-modes", str(fit_modes))
    assert r.returncode == 2 and "--fit-modes must be at least 3" in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout


@pytest.mark.parametrize("kw, said", [
    ({"steps": -3}, "steps must be at least 1, got -3"),
    ({"steps": 0}, "steps must be at least 1, got 0"),
    ({"steps": 2.5}, "steps must be a whole number, got '2.5'"),
    ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
    ({"batch_size": 2.5}, "batch_size must be a whole number, got '2.5'"),
    ({"batch_size": "x"}, "batch_size must be a whole number, got 'x'"),
])
def test_a_mod_made_with_steps_or_batch_size_that_is_no_count_is_refused_when_made(kw, said):
    """ptui_power_mod(steps=-3) or batch_size=0 / 2.5 / 'x' was made without a word, and every
    node's every round then raised (naming the node config's key, not the argument).  The mod
    refuses it when made, naming the argument, as it does fit_modes."""
    with pytest.raises(core.InputError, match=f"^{said}"):
        flower.ptui_power_mod(**kw)
    d = flower.ptui_power_mod(steps="4", batch_size=8.0).defaults       # whole numbers, as a node config's
    assert (d.steps, d.batch_size) == (4, 8)


@pytest.mark.parametrize("kw, said", [
    ({"device": "orin-agxx"}, "unknown device 'orin-agxx'; known devices: orin-agx, xavier-agx, orin-nano"),
    ({"devices": ["orin-agx", "tx2"]}, "unknown device 'tx2'"),
    ({"backend": "sysf"}, "backend must be sim, sysfs or jtop, got 'sysf'"),
    ({"unit_power": [1.0, 5.0]}, "unit_power must be at most 2, got 5.0"),
    ({"risk": 2}, r"risk \(None: decide on the mean\) must be below 1, got 2"),
    ({"risk": 0}, r"risk \(None: decide on the mean\) must be above 0"),
    ({"pool": "mysql://fleet"}, "bad pool URL 'mysql://fleet'"),
    # a lone name or factor, not a list (review: "unknown device 'o'", a TypeError)
    ({"devices": "orin-agx"}, r"devices must be a list, an item for each partition in turn "
                              r"\(devices=\['orin-agx', 'orin-nano'\]\), got 'orin-agx'"),
    ({"unit_power": 1.05}, r"unit_power must be a list, .* got 1.05"),
])
def test_a_mod_made_with_a_board_risk_or_pool_no_node_can_use_is_refused_when_made(kw, said):
    """ptui_power_mod(device="orin-agxx") (or devices=["tx2"], backend="sysf", unit_power=[5.0],
    risk=2, pool="mysql://fleet") was made without a word, and every node's every round then
    raised ("unknown device", "unit factors must be within 0.5-2", "--risk must be between 0 and
    1", naming a command-line flag the mod has not) (a fleet trial).  The mod refuses it when made,
    as it does steps and batch_size."""
    with pytest.raises(core.InputError, match=f"^{said}"):
        flower.ptui_power_mod(**kw)
    mod = flower.ptui_power_mod(devices=["xavier-agx"], backend="sysfs", unit_power=["1.1"], risk=None,
                                pool="sqlite:////nonexistent/pool.sqlite")
    assert (mod.unit_power, mod.risk, mod.defaults.backend) == ([1.1], None, "sysfs")


@pytest.mark.parametrize("kw, said", [
    ({"default_device": "nano9"}, "unknown device 'nano9'"),
    ({"devices": {1: "orin-agx", 2: "tx2"}}, "unknown device 'tx2'"),
    # the mod's list, which matched no node id: every node was split as default_device (review)
    ({"devices": ["orin-nano", "orin-agx"]}, r"devices must map node ids to devices \({node_id: 'orin-nano'}\) "
                                             r"or be a function of the node id, got \['orin-nano', 'orin-agx'\]"),
    ({"workload": "resnet99"}, "unknown workload 'resnet99'; built-in workloads: resnet18"),
    ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
    ({"risk": 2}, r"risk \(None: decide on the mean\) must be below 1, got 2"),
])
def test_a_fleet_made_with_a_device_workload_or_risk_it_cannot_split_by_is_refused_when_made(kw, said):
    """PtuiFleet(..., default_device="nano9") (or devices naming "tx2", workload="resnet99",
    risk=2) was made without a word, and the ServerApp then raised in the round that split a node
    by its device's prior ("unknown device", "'NoneType' object has no attribute
    'bytes_estimated'", "p must be in the range 0.0 < p < 1.0"); batch_size=0 was taken as the
    workload's default (a fleet trial).  The strategy refuses each when made, as it does steps."""
    with pytest.raises(core.InputError, match=f"^{said}"):
        flower.PtuiFleet(FedAvg(fraction_train=1.0), cap_w=100, **kw)
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0), cap_w=100, devices=lambda n: "tx2", risk=None,
                             batch_size="32")
    assert (fleet.risk, fleet.batch_size) == (None, 32)


@pytest.mark.parametrize("node_config, config, said", [
    ({"steps": -3}, {}, "steps must be at least 1"),
    ({"steps": "abc"}, {}, "steps must be a whole number"),
    ({"batch-size": "x"}, {}, "batch-size must be a whole number"),
    ({"batch-size": 0}, {}, "batch-size must be at least 1"),
    ({}, {"ptui-steps": -1}, "ptui-steps must be at least 1"),
    ({}, {"ptui-steps": 0}, "ptui-steps must be at least 1"),
    ({}, {"ptui-steps": 2.5}, "ptui-steps must be a whole number"),
])
def test_a_rounds_steps_or_batch_size_that_is_no_count_is_refused(node_data, node_config, config, said):
    """Node config steps=-3 and a round's ptui-steps=-1 trained 1 minibatch and 0 one epoch, 2.5
    trained 2, all without a word; batch-size='x' failed with "invalid literal for int() with base
    10: 'x'" (naming no key) and 0 with "the model ...-bs0 is for batch size 16, not 0".  Each is
    now refused naming its key, before the round applies anything; PtuiFleet(steps=-1) is refused
    when made."""
    mod = flower.ptui_power_mod(data_dir=node_data)
    with pytest.raises(core.InputError, match=said):
        mod(instruction({"power-budget-w": 15.0, **config}), context(7, device="orin-agx", **node_config),
            trainer([]))
    with pytest.raises(core.InputError, match="steps must be at least 1"):
        flower.PtuiFleet(FedAvg(fraction_train=1.0), cap_w=100, steps=-1)


@pytest.mark.parametrize("kw, said", [
    ({"cap_w": float("nan")}, "cap_w must be a finite number"),
    ({"cap_w": float("inf")}, "cap_w must be a finite number"),
    ({"cap_w": 0}, "cap_w must be above 0"),
    ({"cap_w": -150}, "cap_w must be above 0"),
    ({"cap_w": "150 W"}, "cap_w must be a number"),
    ({"deadline_s": 0}, "deadline_s must be above 0"),
    ({"objective": "enrgy"}, "objective must be 'energy'"),
])
def test_a_fleet_goal_that_is_no_goal_is_refused_when_the_strategy_is_made(kw, said):
    """PtuiFleet(cap_w=nan) split a nan cap and sent every node 'power-budget-w' nan; -150 gave every
    node its least mode; objective='enrgy' went to every node, whose round then raised.  The
    strategy now refuses them when made, in one line."""
    with pytest.raises(core.InputError, match=said):
        flower.PtuiFleet(FedAvg(fraction_train=1.0), **kw)


@pytest.mark.parametrize("cap", ["nan", "inf"])
def test_fleet_sim_refuses_a_cap_that_is_no_number_of_watts(cap):
    """`--cap-w nan` ran the fleet and exited 0 with 'nan W share each'; `--cap-w inf` put every
    node at its fastest and called MAXN's 348.6 W 'within the cap'."""
    r = _script("fleet_sim.py", "--rounds", "1", "--cap-w", cap)
    assert r.returncode == 2 and "--cap-w" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout


@pytest.mark.parametrize("what", ["json-folder", "data-dir-file", "pool-not-a-pool"])
def test_fleet_sim_refuses_paths_that_fail_only_in_the_run(tmp_path, what):
    """`--json DIR` (a folder) ran the whole simulation and then ended in a traceback
    (IsADirectoryError), exit 1; `--data-dir FILE` and `--pool sqlite:///FILE` (a file that is no
    ptui pool) ran every round with every node raising, exit 1.  Each is one line, exit 2, before
    Flower starts, and the file is left as it was."""
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    args = {"json-folder": ("--json", str(tmp_path)),
            "data-dir-file": ("--data-dir", str(afile)),
            "pool-not-a-pool": ("--pool", f"sqlite:///{afile}")}[what]
    r = _script("fleet_sim.py", "--rounds", "1", *args)
    assert r.returncode == 2 and args[0] in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout
    assert afile.read_text() == "mine\n"


def test_fleet_sims_nodes_send_nothing_to_the_users_pool_unless_named():
    """$PTUI_POOL left set by the pool's README section sent the SIMULATED nodes' rows to that pool."""
    import importlib.util
    import os

    from tests.support.cli import ROOT
    old = os.environ.get("PTUI_POOL")
    os.environ["PTUI_POOL"] = "sqlite:////tmp/ptui-users-real-pool.sqlite"
    try:
        spec = importlib.util.spec_from_file_location("fleet_sim_mod", ROOT / "deploy/flower/fleet_sim.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)                 # as `flwr run` imports it: no command line
    finally:
        if old is None:
            os.environ.pop("PTUI_POOL", None)
        else:
            os.environ["PTUI_POOL"] = old
    assert not mod.power.defaults.pool


@pytest.mark.parametrize("args, said", [
    (("--devices", "orin-agx,tx2"), "--devices: unknown device 'tx2'"),
    (("--cap-w", "0"), "--cap-w and --timeout > 0"),
    (("--json", "/nonexistent-ptui-dir/f.json"), "--json: no folder /nonexistent-ptui-dir"),
    (("--cap-w", "nan"), "--cap-w and --timeout > 0"),
    (("--timeout", "nan"), "--cap-w and --timeout > 0"),
    (("--json", "/"), "--json: / is a folder"),
    (("--work", __file__), "--work: "),
])
def test_local_fleet_refuses_bad_input_before_any_process_starts(args, said):
    """An unknown device ended in a traceback; --cap-w 0 ran a fleet 'within' a 0 W cap; --json to a
    missing folder failed only after the run.  --cap-w nan started the boards, SuperLink and
    SuperNodes and then the ServerApp's traceback; --timeout nan never timed out; --json naming a
    folder ran the whole fleet, then IsADirectoryError; --work naming a file, FileExistsError (a
    fleet trial)."""
    r = _script("local_fleet.py", *args)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_round_no_node_reported_says_so_not_zero_watts(task_identity):
    """Every node's round failed (a model path that does not exist): the fleet logged 'fleet 0.00 W,
    round 0.00 s' as if it had measured an idle fleet."""
    logs: list[str] = []
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0, devices=DEVICES,
                             query=False, log=logs.append)
    msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
    replies = [Message(Error(code=0, reason="CSVError: nomodel: cannot read"), reply_to=m) for m in msgs]
    fleet.aggregate_train(1, replies)
    assert any("no node reported ptui's figures" in s for s in logs), logs
    assert not any("fleet 0.00 W" in s for s in logs)


def test_fleet_sims_preset_baseline_says_a_share_under_one_watt():
    """`fleet_sim.py --cap-w 5` printed "one NVIDIA preset for all (0 W share each: 7W, MODE_10W,
    MODE_15W)": its 0.5 W share rounded to 0 (a fleet trial).  The share is said to three
    figures (15 W at the README's 150 W cap, as before)."""
    import importlib.util

    from tests.support.cli import ROOT
    spec = importlib.util.spec_from_file_location("fleet_sim", ROOT / "deploy" / "flower" / "fleet_sim.py")
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    assert "(0.5 W share each: " in sim.baseline_lines(sim.baselines(5.0))[2]
    assert "(15 W share each: " in sim.baseline_lines(sim.baselines(150.0))[2]


def test_a_node_that_sends_no_reply_is_said_in_the_round(task_identity):
    """A node killed mid-round (kill -9 of its SuperNode) sends no reply: the round's log said
    "fleet 20.00 W (cap 40 W), ..." over the two nodes left, as if the fleet were two, and
    `fleet.history` had no row for the third (a fleet trial).  It is now a row with an error, said
    in the log, and the round says how many nodes gave no figures."""
    logs: list[str] = []
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), cap_w=40.0, devices=DEVICES,
                             query=False, log=logs.append)
    msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
    fleet.aggregate_train(1, [_reply(m, 10.0, 10.0, 11.0, DEVICES[m.metadata.dst_node_id]) for m in msgs
                              if m.metadata.dst_node_id != 3])
    rows = {x["node"]: x for x in fleet.history[-1]["nodes"]}
    assert set(rows) == {1, 2, 3} and rows[3]["error"].startswith("no reply: a node killed mid-round")
    assert fleet.history[-1]["fleet"]["w"] == pytest.approx(20.0)
    assert any("node 3: no reply" in s for s in logs) and any("(1 of 3 nodes without figures)" in s for s in logs)


def test_a_node_that_could_not_meet_its_goal_is_said_in_the_round(task_identity):
    """PtuiFleet(deadline_s=1.0, steps=5) on an Orin AGX, an AGX Xavier and an Orin Nano: the
    Xavier's fastest mode is predicted 156 ms a minibatch, over the 200 ms due, so it trained in
    the closest mode and said ptui-feasible 0, but the round's log gave its watts and seconds
    as the others' and nothing said a node missed the deadline (a fleet trial).  The log now
    says which node did not meet its goal, with the node's reason, and the round how many."""
    logs: list[str] = []
    fleet = flower.PtuiFleet(FedAvg(fraction_train=1.0, min_available_nodes=3), deadline_s=1.0, steps=5,
                             query=False, log=logs.append)
    msgs = list(fleet.configure_train(1, ArrayRecord([np.zeros(3)]), ConfigRecord(), FakeGrid()))
    replies = [_reply(m, 10.0, 10.0, 11.0, DEVICES[m.metadata.dst_node_id]) for m in msgs]
    late = next(r for r in replies if r.content["ptui"]["device"] == "xavier-agx")
    late.content["metrics"]["ptui-feasible"] = 0.0
    late.content["ptui"]["goal"] = "infeasible, closest mode: no mode meets 200 ms per minibatch"
    fleet.aggregate_train(1, replies)
    assert any("node 2 did not meet its goal: infeasible, closest mode: no mode meets 200 ms" in s for s in logs)
    assert not any("node 1 did not" in s or "node 3 did not" in s for s in logs)
    assert "1 of 3 nodes could not meet their goal" in logs[-1], logs[-1]
    assert {x["node"]: x["goal"] for x in fleet.history[-1]["nodes"]}[2].startswith("infeasible")


@pytest.mark.slow               # fits a node's model (20 simulated modes) the first time
def test_a_deadline_holds_the_rounds_overhead_the_node_measured(node_data, tmp_path):
    """A round on the simulator trains afresh: its first minibatch autotunes (12 x a steady one for
    ResNet-18), so 5 minibatches take about 3 x their steady seconds.  The reply says the round's
    seconds, its training's and its overhead apart; a round over its deadline is not feasible, and
    the node's next rounds pick (and predict) for their minibatches and the overhead it measured."""
    made = flower.ptui_power_mod(data_dir=node_data)
    made(instruction({}), context(7, device="xavier-agx"), trainer([]))     # the module's model
    model = str(next(iter(made.nodes.values())).model_dir)
    mod = flower.ptui_power_mod(data_dir=str(tmp_path / "n"))                # no round measured yet
    ctx = context(7, device="xavier-agx", model=model)
    goal = {"deadline-s": 4.0, "ptui-steps": 5}
    first = mod(instruction(goal), ctx, trainer([]))
    m, info = first.content["metrics"], first.content["ptui"]
    assert m["ptui-s"] > 4.0 and m["ptui-feasible"] == 0.0 and "overran its deadline" in info["goal"]
    assert "not known before the node's first round" in info["notes"]
    assert m["ptui-overhead-s"] > m["ptui-train-s"] > 0
    assert m["ptui-train-s"] + m["ptui-overhead-s"] == pytest.approx(m["ptui-s"])
    assert m["ptui-train-s"] == pytest.approx(m["ptui-predicted-s"], rel=0.1)   # no overhead known yet
    for _ in range(2):
        r = mod(instruction(goal), ctx, trainer([]))
        m = r.content["metrics"]
        assert m["ptui-s"] == pytest.approx(m["ptui-predicted-s"], rel=0.1)    # the overhead predicted too
        assert m["ptui-s"] <= 4.0 * 1.1 and (m["ptui-feasible"] == 0.0 or m["ptui-s"] <= 4.0)
    # the front the node sends (its replies and its answer to a query) is for the rounds it takes
    q = mod.answer(instruction({"ptui-steps": 5}, mtype=flower.QUERY), ctx).content["ptui"]
    assert list(q["front-s"]) == pytest.approx(list(r.content["ptui"]["front-s"]), rel=0.05)
    tab = next(iter(mod.nodes.values())).predictions.table
    fastest = min(float(t) for t in tab.time_ms) * 5 / 1000.0
    assert min(q["front-s"]) > 2 * fastest


@pytest.mark.slow               # fits a node's model (6 simulated modes) once
def test_a_workload_however_written_is_one_model_of_the_node(tmp_path):
    """Node config workload 'RESNET18' and then 'resnet' profiled and fitted a model each
    (models/flower-...-RESNET18-bs16 and -resnet-bs16: 20 modes each by default), and a query
    naming 'ResNet-18' answered "no model" beside them.  A built-in workload is the catalogue's
    one name (as `ptui profile` reads it): one model, fitted once, found by the query."""
    said: list[str] = []
    mod = flower.ptui_power_mod(data_dir=str(tmp_path / "n"), fit_modes=6, say=said.append)
    for wl in ("RESNET18", "resnet"):
        r = mod(instruction({"power-budget-w": 20.0, "ptui-steps": 5}), context(7, device="orin-agx", workload=wl),
                trainer([]))
        assert r.content["ptui"]["workload"] == "resnet18"
    assert sum("no model for" in s for s in said) == 1, said
    assert [p.name for p in (tmp_path / "n" / "models").iterdir() if not p.name.startswith(".")] == \
        ["flower-orin-agx-sim-resnet18-bs16"]
    fresh = flower.ptui_power_mod(data_dir=str(tmp_path / "n"))
    q = fresh.answer(instruction({"ptui-steps": 5}, mtype=flower.QUERY),
                     context(7, device="orin-agx", workload="ResNet-18")).content["ptui"]
    assert q["workload"] == "resnet18" and q["has-model"] is True


@pytest.mark.slow               # fits a node's model (20 simulated modes) the first time
def test_a_round_whose_overhead_cannot_be_kept_still_replies(node_data, tmp_path):
    """A node given its model (model=...) whose data directory it cannot write to trained its
    rounds; keeping each round's overhead there then raised (FileExistsError, a full disk, a
    read-only mount) after the round had trained, and the round failed.  The round replies, its
    notes saying the overhead was not kept."""
    made = flower.ptui_power_mod(data_dir=node_data)
    made(instruction({}), context(7, device="xavier-agx"), trainer([]))     # the module's model
    model = str(next(iter(made.nodes.values())).model_dir)
    data = tmp_path / "n"
    data.mkdir()
    (data / "models").write_text("a file where the node's models folder would be")
    mod = flower.ptui_power_mod(data_dir=str(data))
    r = mod(instruction({"power-budget-w": 20.0, "ptui-steps": 5}), context(7, device="xavier-agx", model=model),
            trainer([]))
    assert not r.has_error()
    m, info = r.content["metrics"], r.content["ptui"]
    assert m["ptui-s"] > 0 and m["ptui-overhead-s"] >= 0
    assert "this round's overhead could not be kept in" in info["notes"], info["notes"]


@pytest.mark.slow               # fits a node's model (20 simulated modes) the first time
@pytest.mark.parametrize("kept", ['{"minibatches": 5}', '{"minibatches": {"a": 1}}', '{"minibatches": [1, "x", null, -2]}'])
def test_an_overhead_file_of_other_content_fails_no_round(node_data, tmp_path, kept):
    """The file where a node keeps its rounds' overhead, holding a number (or anything but a list)
    where its list goes (edited by hand, another version's), failed every round with a TypeError
    traceback: the node now reads no overhead from it (what is not a count of minibatches is left
    out) and keeps the round's."""
    import json
    made = flower.ptui_power_mod(data_dir=node_data)
    made(instruction({}), context(7, device="xavier-agx"), trainer([]))     # the module's model
    model = str(next(iter(made.nodes.values())).model_dir)
    mod = flower.ptui_power_mod(data_dir=str(tmp_path / "n"))
    ctx = context(7, device="xavier-agx", model=model)
    mod(instruction({"ptui-steps": 5}), ctx, trainer([]))                   # the file is made
    f = next((tmp_path / "n" / "models").glob(".*.round-overhead.json"))
    f.write_text(kept)
    r = mod(instruction({"deadline-s": 4.0, "ptui-steps": 5}), ctx, trainer([]))
    assert not r.has_error() and r.content["metrics"]["ptui-overhead-s"] > 0
    got = json.loads(f.read_text())["minibatches"]
    assert len(got) in (1, 2) and all(isinstance(k, float) and k >= 0 for k in got), got
