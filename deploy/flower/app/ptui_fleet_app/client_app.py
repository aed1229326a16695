"""The ClientApp each SuperNode runs: a tiny torch MLP trained under ptui_power_mod.

The node's board is what its node config names (`flower-supernode --node-config "device='orin-agx'
backend='sysfs' sysfs-root='DIR' data-dir='DIR' model='DIR'"`): ptui applies the mode for the
round's goal on that board, the MLP trains, ptui puts the board back and adds the round's measured
seconds, watts and joules to the reply.

`board_check`, the outermost mod, reads an emulated board's tree itself (the knob files, as
`ptui.core.board.emulator.read_mode` does, not through ptui's backend) before and after the
round, and the training reads it while it trains: the reply's `board-check` ConfigRecord holds
the three, so the server can see that each node trained in the mode ptui applied and ended the
round in the mode it started in.  Off for a real board (a node config without `emulated=true`).
"""
from __future__ import annotations

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from ptui.flower import ptui_power_mod

from . import task

CHECK = "board-check"


def tree_mode(ctx: Context) -> str:
    """The mode an emulated board's tree is set to ('' when the node's board is not emulated)."""
    if not ctx.node_config.get("emulated"):
        return ""
    from ptui.core.board.emulator import read_mode
    return read_mode(str(ctx.node_config["sysfs-root"]), str(ctx.node_config.get("device") or "")
                     or None).key


def board_check(msg: Message, ctx: Context, call_next) -> Message:
    if msg.metadata.message_type != MessageType.TRAIN or msg.has_error():
        return call_next(msg, ctx)
    before = tree_mode(ctx)
    reply = call_next(msg, ctx)
    after = tree_mode(ctx)
    if not reply.has_error():
        rec = reply.content.config_records.get(CHECK)
        if rec is None:
            rec = reply.content[CHECK] = ConfigRecord()
        rec["tree-before"], rec["tree-after"] = before, after
    return reply


power = ptui_power_mod(sample_interval=0.1)
app = ClientApp(mods=[board_check, power])
power.register(app)          # the fleet asks each node its device and model before its first round


@app.train()
def train(msg: Message, ctx: Context) -> Message:
    model = task.net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = task.local_data(int(ctx.node_config.get("seed", ctx.node_id % 2**31)))
    during = tree_mode(ctx)                 # the mode the board is in while this node trains
    loss = task.train(model, x, y, int(ctx.run_config["local-steps"]), float(ctx.run_config["min-train-s"]))
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()),
                               "metrics": MetricRecord({"num-examples": len(x), "train-loss": loss}),
                               CHECK: ConfigRecord({"tree-during": during})}), reply_to=msg)
