"""Benchmark: ptui.flower's client mod, its time per round beside the ClientApp's own (a no-op
train function), on the simulated board (one epoch of simulated minibatches, and 10) and on an
emulated Orin AGX through sysfs (apply, sampler, restore).  Needs flwr: pip install -e ".[flower]".
Run: python benchmarks/bench_flower.py
"""
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from flwr.app import (  # noqa: E402
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    Metadata,
    MetricRecord,
    RecordDict,
)

from ptui import core, flower  # noqa: E402


def instruction(config: dict) -> Message:
    md = Metadata(run_id=1, message_id="m", src_node_id=0, dst_node_id=7, reply_to_message_id="",
                  group_id="1", created_at=time.time(), ttl=3600.0, message_type=MessageType.TRAIN)
    return Message(content=RecordDict({"arrays": ArrayRecord([np.zeros(3)]),
                                       "config": ConfigRecord(config)}), metadata=md)


def train(msg, ctx):
    return Message(RecordDict({"arrays": ArrayRecord([np.ones(3)]),
                               "metrics": MetricRecord({"num-examples": 10})}), reply_to=msg)


def per_round(mod, ctx, config: dict, n: int) -> list[float]:
    mod(instruction(config), ctx, train)              # opens the board, loads (or fits) the model
    bare, ts = [], []
    for _ in range(n):
        t = time.perf_counter()
        train(instruction(config), ctx)
        bare.append(time.perf_counter() - t)
        t = time.perf_counter()
        mod(instruction(config), ctx, train)
        ts.append(time.perf_counter() - t)
    return [1000 * (a - b) for a, b in zip(ts, bare)]


def line(what: str, ms: list[float]) -> None:
    print(f"{what:<58} median {statistics.median(ms):7.2f} ms, p95 {sorted(ms)[int(0.95 * len(ms))]:7.2f} ms "
          f"over {len(ms)} rounds")


def main(n: int = 30) -> None:
    with tempfile.TemporaryDirectory() as d:
        mod = flower.ptui_power_mod(data_dir=d)
        ctx = Context(run_id=1, node_id=7, node_config={"device": "orin-agx"}, state=RecordDict(),
                      run_config={})
        t = time.perf_counter()
        mod(instruction({"power-budget-w": 20.0}), ctx, train)
        print(f"first round, model fitted on the simulated board: {time.perf_counter() - t:.1f} s")
        line("sim, 20 W, one epoch simulated (3125 minibatches)", per_round(mod, ctx, {"power-budget-w": 20.0}, n))
        line("sim, 20 W, 10 minibatches simulated", per_round(mod, ctx, {"power-budget-w": 20.0,
                                                                             "ptui-steps": 10}, n))
        line("sim, no goal, 10 minibatches simulated", per_round(mod, ctx, {"ptui-steps": 10}, n))
        emu = core.Emulator(Path(d) / "root", "orin-agx", interval=0.1)
        emu.open()
        stop = threading.Event()
        th = threading.Thread(target=emu.run, args=(stop,), daemon=True)
        th.start()
        try:
            ectx = Context(run_id=1, node_id=8, node_config={
                "device": "orin-agx", "backend": "sysfs", "sysfs-root": str(emu.root),
                "model": str(next(iter(mod.nodes.values())).model_dir)}, state=RecordDict(), run_config={})
            line("emulated orin-agx via sysfs, 20 W (apply, sampler, restore)",
                 per_round(flower.ptui_power_mod(data_dir=d), ectx, {"power-budget-w": 20.0}, n))
        finally:
            stop.set()
            th.join(5)
            emu.close()


if __name__ == "__main__":
    main()
