"""The ServerApp: FedAvg wrapped in PtuiFleet, which splits the run config's fleet power cap
(`cap-w`) across the nodes by their predicted power curves and logs each node's W, s, J and mode.
With `result-file` set it writes each round's per-node figures there as JSON, after every round
(the launcher and the test read it)."""
from __future__ import annotations

import json
from pathlib import Path

from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from ptui.flower import PtuiFleet

from . import task

CHECK = "board-check"


class RecordedFleet(PtuiFleet):
    """PtuiFleet that keeps each reply's board-check record beside its row and writes the
    history to `path` after each round."""

    def __init__(self, *a, path: str = "", **k) -> None:
        super().__init__(*a, **k)
        self.path = path

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        checks = {r.metadata.src_node_id: dict(r.content[CHECK]) for r in replies
                  if not r.has_error() and CHECK in r.content}
        out = super().aggregate_train(server_round, replies)
        for row in self.history[-1]["nodes"]:
            row["check"] = checks.get(row["node"], {})
        self.save()
        return out

    def save(self, **extra) -> None:
        if self.path:
            tmp = Path(self.path + ".tmp")
            tmp.write_text(json.dumps({"rounds": self.history, **extra}, indent=1, default=str))
            tmp.replace(self.path)


app = ServerApp()


@app.main()
def main(grid: Grid, ctx: Context) -> None:
    rc = ctx.run_config
    n = int(rc["num-nodes"])
    fleet = RecordedFleet(FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=n,
                                 min_available_nodes=n),
                          cap_w=float(rc["cap-w"]), steps=int(rc["local-steps"]), log=print,
                          path=str(rc.get("result-file") or ""))
    result = fleet.start(grid=grid, initial_arrays=ArrayRecord(task.net().state_dict()),
                         train_config=ConfigRecord({"ptui-steps": int(rc["local-steps"])}),
                         num_rounds=int(rc["num-server-rounds"]))
    fleet.save(done=True, train_metrics={r: dict(m) for r, m in result.train_metrics_clientapp.items()})
