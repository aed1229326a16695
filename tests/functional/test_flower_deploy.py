"""Flower on real processes (deploy/flower/local_fleet.py): one SuperLink and three SuperNodes
(flwr 1.42, --insecure, 127.0.0.1, free ports), each SuperNode with its own `ptui emulate` board
(Orin AGX, AGX Xavier, Orin Nano: SIMULATED) named in its node config, its own ptui data, lock and
state directories and its own FLWR_HOME; `flwr run` of deploy/flower/app for two rounds under a
45 W fleet cap.  Each node's board is read from its tree (ptui.core.board.emulator.read_mode, not
through ptui's backend) before, while and after each round, by the app's outermost mod and by the
test: every node ends every round in the mode it started in, having trained in the mode ptui
applied; round 1 already splits the cap by each node's own device and model (the fleet asks each
node before its first round, a query.ptui message); the replies carry the measured seconds, watts
(once settled in the round's mode) and joules; every process the fleet started, and their children (Flower's SuperExecs and ClientApps), is gone at the end, stopped by SIGTERM.
Skipped, saying so, without Flower's commands (pip install -e '.[flower]') or torch (the app's
model).  The test's wall time is printed (no limit asserted: a loaded machine)."""
import importlib.util
import math
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from ptui.core.board.emulator import read_mode
from ptui.core.catalogue.devices import get_device
from tests.support.cli import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

_spec = importlib.util.spec_from_file_location("local_fleet", ROOT / "deploy" / "flower" / "local_fleet.py")
local_fleet = sys.modules["local_fleet"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(local_fleet)

try:
    local_fleet.find_binaries()
except FileNotFoundError as e:
    pytestmark.append(pytest.mark.skip(reason=str(e)))

DEVICES = ("orin-agx", "xavier-agx", "orin-nano")


def test_a_superlink_and_three_supernodes_each_board_ends_every_round_in_its_start_mode(tmp_path):
    pytest.importorskip("torch", reason="the Flower app's ClientApp trains a torch model: pip install torch "
                                        "(the CPU build, README)")
    t0 = time.monotonic()
    fleet = local_fleet.LocalFleet(tmp_path / "fleet", DEVICES, rounds=2, cap_w=45.0, steps=1000)
    try:
        fleet.start()
        t_up = time.monotonic()
        start = {n.device: read_mode(n.root, n.device) for n in fleet.nodes}
        for d, mode in start.items():                           # each board in its default preset
            dev = get_device(d)
            assert mode == dev.preset(dev.default_preset).mode
        doc = fleet.run(timeout=300)
        t_run = time.monotonic()
        final = {n.device: read_mode(n.root, n.device) for n in fleet.nodes}
    finally:
        fleet.stop()
    t_end = time.monotonic()
    print(f"\nflower deploy: up {t_up - t0:.1f} s, run {t_run - t_up:.1f} s, stop {t_end - t_run:.1f} s, "
          f"total {t_end - t0:.1f} s")

    # every process started, and every child seen (SuperExecs, ClientApps), is gone; none was killed
    assert fleet.seen and not [p for p in fleet.seen if local_fleet.alive(p)]
    assert fleet.killed == [], fleet.killed
    # the boards exit 0 on SIGTERM; Flower's SuperLink too, or by the SIGTERM uvicorn re-raises once
    # it has shut down gracefully (uvicorn >= 0.29)
    codes = [(p.args[0], p.returncode) for p in fleet.started]
    assert all(rc == 0 or (rc == -signal.SIGTERM and "flower-superlink" in cmd) for cmd, rc in codes), codes
    assert "Application shutdown complete" in (tmp_path / "fleet" / "superlink.log").read_text()

    # every round completed on every node
    assert doc["done"] and [r["round"] for r in doc["rounds"]] == [1, 2]
    for rnd in doc["rounds"]:
        rows = rnd["nodes"]
        assert not [x for x in rows if "error" in x], rows
        assert sorted(x["device"] for x in rows) == sorted(DEVICES)      # the node configs' devices
        for x in rows:
            c, begin = x["check"], start[x["device"]].key
            # the board read from its tree: in its start mode before the round, in the mode ptui
            # applied (another one: the cap's share) while it trained, back in its start mode after
            assert c["tree-before"] == begin == x["start_mode"], (rnd["round"], x)
            assert c["tree-during"] == x["mode"] != begin, (rnd["round"], x)
            assert c["tree-after"] == begin == x["end_mode"] and x["restored"], (rnd["round"], x)
            # measured figures: the round's wall seconds on the host (the app trains >= 4 s), the
            # emulated rails' mean watts once settled in the round's mode (~2.5 s after the switch)
            assert x["s"] >= 4.0 and x["w"] > 0 and math.isclose(x["j"], x["w"] * x["s"], rel_tol=1e-9)
            assert x["w_settled"] and x["w_n"] >= 3, (rnd["round"], x)
            # every round, the first included, splits the cap by each node's own device and model:
            # the fleet asked each node (a query.ptui message) before its first round
            assert x["split_device"] == x["device"] and x["split_by"] == "its model's front", (rnd["round"], x)
            assert x["simulated"] and x["predicted_w"] <= x["budget_w"] + 1e-9
        assert rnd["fleet"]["predicted_w"] <= 45.0 + 1e-9
        assert math.isclose(rnd["fleet"]["j"], sum(x["j"] for x in rows))
    # the reply metrics carry them too (FedAvg's averages, one per round)
    for r in ("1", "2"):
        m = doc["train_metrics"][r]
        assert m["ptui-s"] > 0 and m["ptui-w"] > 0 and m["ptui-j"] > 0 and m["ptui-applied"] == 1.0
    # the boards end the run where they started; each node had its own Flower home and ptui dirs
    assert final == start
    for n in fleet.nodes:
        assert (n.dir / "flwr" / "apps").is_dir(), n.dir


def test_a_node_killed_mid_round_fails_the_run_and_ptui_restore_puts_its_board_back(tmp_path):
    """A SuperNode killed mid-round with everything under it (kill -9 to the SuperNode, its
    SuperExec and the ClientApp that is training: a node losing its processes at once): the
    launcher fails the run at once, saying which process exited, instead of waiting for the
    ServerApp's node count; the board stays in the round's mode (no process was left to put it
    back); `ptui restore` with the node's own directories (what its operator runs) finds the round's
    record and puts the board back in the mode the round started in.  The fleet's other processes
    are stopped."""
    pytest.importorskip("torch", reason="the Flower app's ClientApp trains a torch model: pip install torch "
                                        "(the CPU build, README)")
    fleet = local_fleet.LocalFleet(tmp_path / "fleet", ("orin-nano",), rounds=1, cap_w=10.0)
    try:
        fleet.start()
        node = fleet.nodes[0]
        start_mode = read_mode(node.root, node.device)
        start = start_mode.key
        failed: list = []

        def run():
            try:
                fleet.run(timeout=300)
            except RuntimeError as e:
                failed.append(str(e))
        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        # mid-round: ptui has applied the round's mode (a loaded machine takes a while to get there)
        end = time.monotonic() + 300
        while read_mode(node.root, node.device).key == start:
            assert runner.is_alive() and time.monotonic() < end, failed
            time.sleep(0.05)
        killed = fleet.kill_node(0)
        assert len(killed) >= 3, killed                        # SuperNode, SuperExec, ClientApp
        t0 = time.monotonic()
        runner.join(120)
        assert not runner.is_alive() and time.monotonic() - t0 < 30
        assert failed and re.search(r"flower-supernode .* exited with -9", failed[0]), failed
        mode = read_mode(node.root, node.device).key
        assert mode != start                                   # left in the round's mode
        r = subprocess.run([sys.executable, "-m", "ptui", "restore", "--device", node.device,
                            "--backend", "sysfs", "--sysfs-root", str(node.root)],
                           env=node.env(fleet.base_env), cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0 and start_mode.describe() in r.stdout, (r.stdout, r.stderr)
        assert read_mode(node.root, node.device).key == start
    finally:
        fleet.stop()
    # nothing left running; a child still there after its SuperNode's group stopped may have been
    # killed by stop() (a SuperExec polls for its parent: more than 10 s at a load of 8)
    assert not [p for p in fleet.seen if local_fleet.alive(p)]
    assert all(k.endswith("(a child)") for k in fleet.killed), fleet.killed
