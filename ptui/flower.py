"""Flower (flwr 1.42): a client mod that trains each round in the power mode for the round's goal,
and a server strategy wrapper that gives each node its own goal (README: Fleets).

A face like the CLI: it uses ptui.core through its façade only, and it is the one module that
imports flwr (install with ``pip install 'ptui[flower]'``).

Client side, ``ClientApp(mods=[ptui_power_mod()])``: for a train message the mod reads the goal from
the round's ConfigRecord (``power-budget-w`` W, ``deadline-s`` seconds for the round's local
training, ``objective`` 'energy'), picks the mode for it from the node's model of its workload
(profiling a few modes on the node's board and fitting one, once, when the node has none), applies
it verified as ``ptui apply`` does, runs the ClientApp, puts the board back in the mode it started
in (also when training raises), and merges into the reply's MetricRecord the round's seconds, mean
watts and joules from the board's telemetry, plus a ``ptui`` ConfigRecord naming the mode.  The
same keys on every node and every round, whatever happens, so FedAvg's checks hold.

Server side, ``PtuiFleet(FedAvg(...), cap_w=...)``: each node gets its share of a fleet power cap
(split by the nodes' predicted power curves so that the slowest node is as fast as the cap allows),
or a round deadline, in its own RecordDict; the per-node W, s, J and mode are logged each round,
not averaged, and the model aggregation is the wrapped strategy's.
"""
from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.common.logger import log as flwr_log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from . import core

# -- the round's goal and the reply's figures ------------------------------------------------------------
BUDGET_KEY, DEADLINE_KEY, OBJECTIVE_KEY = "power-budget-w", "deadline-s", "objective"
STEPS_KEY = "ptui-steps"          # minibatches the round trains (round config or node config 'steps')
HOLD_KEY = "ptui-hold-w"          # the watts the node may draw as measured, held by stepping down (_Hold):
                                  # absent, the budget; 0, none (PtuiFleet holds the cap by its split,
                                  # sending each budget in the node's model's watts)
RECORD = "ptui"                   # the reply's ConfigRecord: mode, device, backend, goal, model, notes
MOD_BACKENDS = ("sim", "sysfs", "jtop")   # the boards a node opens (node config backend)
QUERY = "query.ptui"              # the message type the strategy asks each node's board and model with
QUERY_TIMEOUT_S = 120.0           # how long the strategy waits for the nodes' answers (a SuperNode of
                                  # the Deployment Engine starts a ClientApp process per message: ~10 s)
# the numbers merged into the reply's MetricRecord (the same keys on every node, every round)
METRICS = ("ptui-s", "ptui-w", "ptui-j", "ptui-simulated", "ptui-predicted-w", "ptui-predicted-s",
           "ptui-feasible", "ptui-applied", "ptui-host-s", "ptui-w-n", "ptui-w-span-s", "ptui-w-settled",
           "ptui-settle-s", "ptui-bound-w", "ptui-power-log-sd", "ptui-train-s", "ptui-overhead-s")
# A round pays more than its minibatches at the mode's steady pace: its training starts afresh (the
# first minibatch autotunes: cuDNN, 4-15 x a steady one on the simulator), and a step down stalls
# one.  Each node measures that overhead of its rounds (ptui-overhead-s) and keeps it, in steady
# minibatches of the round's mode, in its data directory: a deadline and the front it sends are for
# its steps plus that many.  OVERHEAD_ROUNDS: the rounds it looks back on
OVERHEAD_ROUNDS = 5
# the round's watts are the mean of the readings taken once the board's power settled in the round's
# mode: the last SETTLE_WINDOW_S seconds of readings within SETTLE_TOL of their mean, no sooner than
# SETTLE_MIN_S after the mode read back (the profiler's rule, over a time window so that it does not
# depend on the sampling interval).  A board settles over ~2-3 s (the simulator's and the
# emulator's tau 0.6 s; a real board's DVFS and the INA3221's own averaging)
SETTLE_WINDOW_S, SETTLE_TOL, SETTLE_MIN_S = 1.0, 0.03, 1.0
FIT_MODES = 20                    # modes profiled for a node's first model of a workload (tune's
                                  # default count; 12 left the split's round times 20 % off)
MIN_FIT_MODES = 3                 # the fewest a node's fit takes: its catalog workload's roofline prior
                                  # and 3 modes (ptui fit --workload-spec's minimum)
POOL_MODES = 5                    # modes a node profiles when the fleet's pool holds FIT_MODES rows or
                                  # more of its type (benchmarks/eval_pool.py: 5 a board + the fleet's)
HOLD_STEPS = 3                    # the most a round steps down to hold its watts (_Hold)
RATIO_ROUNDS = 3                  # rounds of measured/bound watts a node's power factor looks back
RATIO_MODES = 5                   # distinct modes whose measured/predicted watts estimate a unit's factor
# How much identical units of one type may differ in power before any was measured: uniform within
# +-10 % (fleet.md: identical AGX Xavier and Orin Nano units differ significantly, an Orin AGX
# MLPerf rerun drew 27-32 % more at equal throughput).  PtuiFleet's prior on the factor of a unit
# whose model is not its own (unit_factor)
UNIT_SPREAD = 0.10
WATTS_LOG_SD = 0.01               # a round's settled watts against the mode's true draw (log sd)
FRONT_POINTS = 200                # the most points of a predicted front sent to the server (fronts of a
                                  # fitted model: 25-46 on the simulated boards)


def say_in_flowers_log(text: str) -> None:
    """The mod's and PtuiFleet's lines by default: Flower's own log (its console handler prints
    them beside FedAvg's in `flwr run` and the SuperNodes' output), and ptui's logger.  On ptui's
    logger alone, which has no handler, the README's ten lines printed none of them."""
    flwr_log(logging.INFO, text)
    core.LOG.debug(text)


_ENV_LOCK = threading.RLock()     # PTUI_DATA_DIR is per process: one node's ptui work at a time


@contextlib.contextmanager
def _node_env(spec: NodeSpec):
    """ptui's data directory ($PTUI_DATA_DIR), the fleet's pool ($PTUI_POOL) and the board's name
    in it ($PTUI_BOARD_ID) are per process: the node's own while its ptui work runs (a node
    without a pool has none, so its profile sends nothing)."""
    want = {"PTUI_POOL": spec.pool or None, "PTUI_BOARD_ID": spec.board if spec.pool else None,
            "PTUI_STORE": None}        # its other name: the node's pool is PTUI_POOL alone
    if spec.data_dir:
        want["PTUI_DATA_DIR"] = str(spec.data_dir)
    with _ENV_LOCK:
        old = {k: os.environ.get(k) for k in want}
        try:
            for k, v in want.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = str(v)
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def round_steps(config: Mapping) -> int | None:
    """The minibatches a round's config asks for (ptui-steps), None when it names none; a value that
    is no count of minibatches is refused (it was clamped to 1, or 0 read as one epoch)."""
    v = config.get(STEPS_KEY)
    return None if v is None else core.number(v, STEPS_KEY, integer=True, ge=1)


def round_goal(config: Mapping) -> dict:
    """The goal in a round's config as ptui.core.choose takes it ({} when it sets none); deadline-s
    stays in seconds (the mod turns it into ms per minibatch with the round's steps)."""
    goal: dict = {}
    if config.get(BUDGET_KEY) is not None:
        goal["budget_w"] = core.number(config[BUDGET_KEY], BUDGET_KEY, gt=0)
    if config.get(DEADLINE_KEY) is not None:
        goal["deadline_s"] = core.number(config[DEADLINE_KEY], DEADLINE_KEY, gt=0)
    if config.get(OBJECTIVE_KEY) is not None:
        obj = str(config[OBJECTIVE_KEY])
        if obj != "energy":
            raise core.InputError(f"{OBJECTIVE_KEY} must be 'energy', got {obj!r}")
        goal["objective"] = obj
    return goal


# -- one node: its board, its model ------------------------------------------------------------------
@dataclass
class NodeSpec:
    """What a node runs on, from its node config (``flower-supernode --node-config``) over the mod's
    defaults: ``device``, ``backend`` (sim | sysfs | jtop), ``sysfs-root``, ``data-dir``,
    ``workload``, ``batch-size``, ``model`` (a model directory to use instead of fitting one),
    ``steps`` (minibatches a round trains), ``sim-unit-power`` (a SIMULATED board's unit factor: what
    this unit draws against the typical one its model describes), ``pool-url`` (the fleet's pool
    of profiles, README: Fleets; default $PTUI_POOL, '' none) and ``board-id`` (this board's name in
    it; default $PTUI_BOARD_ID or the host name, and in a simulation the host name and the
    partition)."""
    device: str = "orin-agx"
    backend: str = "sim"
    sysfs_root: str | None = None
    data_dir: str | None = None
    workload: str = "resnet18"
    batch_size: int = 16
    model: str | None = None
    steps: int | None = None
    unit_power: float | None = None
    pool: str | None = None               # the fleet's pool URL ('' or None: none)
    board: str | None = None              # this board's name in the pool

    @classmethod
    def of(cls, node_config: Mapping, defaults: NodeSpec) -> NodeSpec:
        def get(key: str, default):
            v = node_config.get(key)
            return default if v is None or v == "" else v
        steps = get("steps", defaults.steps)
        unit = get("sim-unit-power", defaults.unit_power)
        return cls(str(get("device", defaults.device)), str(get("backend", defaults.backend)),
                   get("sysfs-root", defaults.sysfs_root), get("data-dir", defaults.data_dir),
                   core.workload_name(str(get("workload", defaults.workload))),
                   core.number(get("batch-size", defaults.batch_size), "batch-size", integer=True, ge=1),
                   get("model", defaults.model),
                   None if steps is None else core.number(steps, "steps", integer=True, ge=1),
                   None if unit is None else core.number(unit, "sim-unit-power", ge=0.5, le=2),
                   _text(node_config.get("pool-url", defaults.pool)),
                   _text(get("board-id", defaults.board)))

    @property
    def own_unit(self) -> bool:
        """Whether the model the node decides with is its own unit's, so that the strategy need not
        allow for unit-to-unit variation: a model the mod fits on the node's own board, or pools for
        it; not a model named in the node config (fitted anywhere), nor a SIMULATED unit's
        (sim-unit-power) without a pool, whose model is the typical unit's.  (Live boards that share
        one data directory without a pool share the first board's model and each says it is its
        own: give each board its own data directory, or a pool.)"""
        return not self.model and (bool(self.pool) or self.unit_power is None)

    @property
    def key(self) -> tuple:
        return (self.device, self.backend, self.sysfs_root, self.data_dir, self.workload,
                self.batch_size, self.model, self.unit_power, self.pool, self.board)


def _text(v) -> str | None:
    """A node config's value as text (Flower reads node config as TOML: board-id=7 is the int 7)."""
    return None if v is None else str(v)


@dataclass
class Node:
    spec: NodeSpec
    backend: object
    predictions: object                   # core.load_predictions' Predictions
    model_dir: Path
    model_note: str                       # where the model came from, in words
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def simulated(self) -> bool:
        return bool(self.backend.not_live)

    def steps(self, config: Mapping) -> int:
        return steps_for(round_steps(config), self.spec, self.predictions)


def steps_for(asked: int | None, spec: NodeSpec, predictions) -> int:
    """The minibatches a node's round trains (or a query's front is for): those `asked` (a round's
    or a query's ptui-steps), else the node's steps, else one epoch of its model's workload, else 1."""
    return max(1, int(asked or spec.steps or predictions.batches_per_epoch or 1))


def model_dir_for(spec: NodeSpec, backend_kind: str) -> Path:
    """Where a node keeps the model the mod fitted for its workload (in its data directory); a
    simulated board's model is kept apart from a live board's."""
    live = "sim" if backend_kind == "sim" else "board"
    name = f"flower-{spec.device}-{live}-{spec.workload}-bs{spec.batch_size}"
    if spec.pool:                       # a board of a pooling fleet: a model of its own unit
        name += "-board-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in str(spec.board))
        if spec.unit_power is not None:   # a SIMULATED unit's factor is in its rows and its model
            name += f"-unit{spec.unit_power:g}"
    return core.data_dir() / "models" / name


def fit_node_model(backend, spec: NodeSpec, out: Path, count: int = FIT_MODES,
                   say: Callable[[str], None] = core.LOG.info, *, pooled: bool = False) -> None:
    """No model for this workload on this node: profile `count` modes (space-filling, for every
    goal to come) on the node's board, as `ptui profile` does (with a pool, each row also goes
    there), and fit one into `out`; `pooled`: on them and the pool's rows of other boards of its
    type (`ptui fit --pool`), each board profiling its own draw of modes."""
    session = (f"flower-{spec.device}-{spec.workload}-bs{spec.batch_size}-{'pooled' if pooled else 'own'}"
               f"-{time.strftime('%Y%m%d-%H%M%S')}")
    csv = out.parent.parent / "profiles" / f"{session}.csv"
    csv.parent.mkdir(parents=True, exist_ok=True)
    seed = core.board_seed(spec.board) if spec.pool else None
    req = core.ProfileRequest(workload=spec.workload, batch_size=spec.batch_size, count=count,
                              strategy="space-filling", session=session, out=csv, seed=seed)
    run = core.ProfileRun(req, notify=say)
    run.prepare(backend)
    res = run.run()
    if res.error is not None:
        raise res.error
    if res.status != "done":
        raise core.PtuiError(f"profiling for the node's model stopped: {res.status}")
    # a catalog workload's published counts: their roofline prior is one more candidate of the
    # fit.  20 space-filling modes sit in the space's corners, and without it one node's model put
    # a 53 W mode at 31 W (benchmarks/eval_pool_flower.py, seed 0: over budget + 1 W 6 -> 2 of 80
    # alone, 4 -> 0 pooled)
    counts = core.workload_spec(None, spec.workload, spec.batch_size)
    if pooled:
        try:
            core.fit_with_pool(backend.device, csv, url=spec.pool, board=spec.board, workload=spec.workload,
                               out=out, method="gp", progress=say, spec=counts)
        except core.InputError:
            raise
        except core.PtuiError as e:          # the pool could not be read (PoolError)
            raise _PoolLost() from e
    else:
        core.fit(backend.device, csv, workload=spec.workload, out=out, min_modes=6, note=say, spec=counts)


class _PoolLost(Exception):
    """The pool answered before the profile and not at the fit (its cause says why)."""


# -- the client mod ------------------------------------------------------------------------------------
def ptui_power_mod(*, device: str = "orin-agx", backend: str = "sim", sysfs_root: str | None = None,
                   data_dir: str | None = None, workload: str = "resnet18", batch_size: int = 16,
                   model: str | None = None, steps: int | None = None,
                   devices: list[str] | None = None, unit_power: list[float] | None = None,
                   risk: float | None = core.DEFAULT_RISK,
                   fit_modes: int = FIT_MODES, sample_interval: float = 0.5,
                   pool: str | None = None, board: str | None = None, pool_modes: int = POOL_MODES,
                   hold_budget: bool = True, say: Callable[[str], None] | None = None) -> PowerMod:
    """A Flower client mod (``ClientApp(mods=[ptui_power_mod(...)])``).  The arguments are every
    node's defaults; a node's own config (NodeSpec) wins.  `devices`: in a simulation, where a node
    config holds only partition-id, the device of partition k is devices[k % len(devices)], and
    its SIMULATED unit's power factor unit_power[k % len(unit_power)] (unit-to-unit variation: the
    board draws that much more or less than the typical unit its model describes).  `pool`: the
    fleet's pool of profiles (default $PTUI_POOL; '' none): a node without a model profiles only
    `pool_modes` modes when the pool holds `fit_modes` rows or more of other boards of its type,
    and fits its own unit's model on them and the fleet's (README: Fleets).  `hold_budget`: a round
    with a power budget whose board, once its power settled, draws more than the budget (a unit
    that draws more than its model's typical unit) steps down to the mode its measured watts allow
    and trains on in it (said in the reply's notes); the watts reported are the new mode's."""
    if fit_modes < MIN_FIT_MODES:
        raise core.InputError(f"fit_modes must be at least {MIN_FIT_MODES} (the modes a node profiles for "
                              f"its first model, beside its workload's roofline prior), got {fit_modes}")
    if pool_modes < 1:
        raise core.InputError(f"pool_modes must be at least 1 (a board's factor needs a mode of its own), "
                              f"got {pool_modes}")
    # a node's minibatch size and a round's minibatches, as a node config's batch-size and steps are
    # (NodeSpec.of): refused here, naming the argument, not at every node's every round
    batch_size = core.number(batch_size, "batch_size", integer=True, ge=1)
    if steps is not None:
        steps = core.number(steps, "steps", integer=True, ge=1)
    # and so are a board no node could open (a device or backend ptui does not know, a SIMULATED unit
    # factor the simulator refuses), a risk no rule takes and a pool URL that names no pool
    devices = _listed(devices, "devices", "'orin-agx', 'orin-nano'") or None
    for d in [device, *(devices or [])]:
        core.get_device(d)
    if backend not in MOD_BACKENDS:
        raise core.InputError(f"backend must be {', '.join(MOD_BACKENDS[:-1])} or {MOD_BACKENDS[-1]}, "
                              f"got {backend!r}")
    unit_power = [core.number(u, "unit_power", ge=0.5, le=2)
                  for u in _listed(unit_power, "unit_power", "0.95, 1.05")]
    risk = risk_arg(risk)
    if pool:
        core.check_url(pool)
    # the environment's defaults are read here, once: a node's ptui work later sets these variables
    # to its own while it runs (_node_env), and another node reading them then would take its pool
    if pool is None:
        pool = core.pool_url()
    if pool and not board:
        board = core.board_id()
    mod = PowerMod(NodeSpec(device, backend, sysfs_root, data_dir, core.workload_name(workload), batch_size,
                            model, steps, None, pool, board),
                   devices, risk, fit_modes, sample_interval, say, int(pool_modes), bool(hold_budget))
    mod.unit_power = unit_power or None
    return mod


def _listed(value, name: str, example: str) -> list:
    """A mod argument given per partition (partition k takes item k % len): a list.  A lone name
    or number was iterated: devices="orin-agx" refused as "unknown device 'o'", unit_power=1.05
    raised "'float' object is not iterable"."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise core.InputError(f"{name} must be a list, an item for each partition in turn "
                              f"({name}=[{example}]), got {value!r}")
    return list(value)


def risk_arg(risk) -> float | None:
    """A mod's or PtuiFleet's risk: a probability strictly between 0 and 1 (core.DEFAULT_RISK by
    default), or None to decide on the predicted value alone (ptui's --risk mean)."""
    return None if risk is None else core.number(risk, "risk (None: decide on the mean)", gt=0, lt=1)


class PowerMod:
    """The mod: a callable (msg, ctx, call_next) -> reply holding each node's open board.  It
    pickles without them (Flower's simulation ships the ClientApp to its worker processes): a
    worker opens its nodes' boards on their first round."""

    def __init__(self, defaults: NodeSpec, devices, risk, fit_modes: int, sample_interval: float,
                 say: Callable[[str], None] | None, pool_modes: int = POOL_MODES,
                 hold_budget: bool = True) -> None:
        self.defaults, self.devices, self.risk = defaults, list(devices) if devices else None, risk
        self.fit_modes, self.sample_interval, self.say = fit_modes, sample_interval, say
        self.unit_power: list[float] | None = None
        self.hold_budget = hold_budget
        self.pool_modes = pool_modes
        self.nodes: dict[tuple, Node] = {}          # the open boards, for tests and tools
        self._opening = threading.Lock()

    def __getstate__(self) -> dict:
        st = dict(self.__dict__)
        st["nodes"], st["_opening"] = {}, None
        return st

    def __setstate__(self, st: dict) -> None:
        self.__dict__.update(st)
        self._opening = threading.Lock()

    def _say(self, text: str) -> None:
        (self.say or say_in_flowers_log)(text)

    def spec_for(self, ctx: Context) -> NodeSpec:
        spec = NodeSpec.of(ctx.node_config, self.defaults)
        if self.devices and "device" not in ctx.node_config and "partition-id" in ctx.node_config:
            spec.device = self.devices[int(ctx.node_config["partition-id"]) % len(self.devices)]
        if self.unit_power and "sim-unit-power" not in ctx.node_config and "partition-id" in ctx.node_config:
            spec.unit_power = self.unit_power[int(ctx.node_config["partition-id"]) % len(self.unit_power)]
        if spec.pool and "partition-id" in ctx.node_config and "board-id" not in ctx.node_config:
            # a simulation's virtual nodes share one host: each partition is a board of its own
            spec.board = f"{spec.board or 'sim'}-partition-{int(ctx.node_config['partition-id'])}"
        return spec

    def node_for(self, ctx: Context) -> Node:
        spec = self.spec_for(ctx)
        key = (ctx.node_id, *spec.key)        # each node its own board (a simulated one is per node)
        with self._opening:
            node = self.nodes.get(key)
            if node is None:
                node = self.nodes[key] = _open_node(spec, self.fit_modes, self._say, self.pool_modes)
        return node

    def __call__(self, msg: Message, ctx: Context, call_next) -> Message:
        if msg.metadata.message_type == QUERY and not msg.has_error():
            return self.answer(msg, ctx)
        if msg.metadata.message_type != MessageType.TRAIN or msg.has_error():
            return call_next(msg, ctx)
        node = self.node_for(ctx)
        with node.lock, _board_held(node):
            return _train_round(node, msg, ctx, call_next, self.risk, self.sample_interval, self._say,
                                self.hold_budget)


    def answer(self, msg: Message, ctx: Context) -> Message:
        """The reply to the strategy's QUERY, from the node's config (no board opened, no model
        fitted): its device, backend, workload, whether it has a model of the workload and, when
        it has, the model's predicted front for the round's steps (the query's ptui-steps, else
        the node's), as a train reply carries it; a ptui-steps that is no count of minibatches gets
        no front and notes naming it."""
        spec = self.spec_for(ctx)
        info = {"device": spec.device, "backend": spec.backend, "workload": spec.workload,
                "batch-size": spec.batch_size, "has-model": False, "model": "", "own-unit": spec.own_unit}
        config: dict = {}
        for rec in msg.content.config_records.values():
            config.update(rec)
        notes: list[str] = []
        try:                                  # the query's own fault, not the model's: said as such
            asked, steps_ok = round_steps(config), True
        except core.InputError as e:
            asked, steps_ok = None, False
            notes.append(f"the query's {e}: no front sent (its seconds are for the steps asked)")
        try:
            pred, where = self._predictions(ctx, spec)
            if pred is not None and not steps_ok:
                info.update({"has-model": True, "model": where})
            elif pred is not None:
                steps = steps_for(asked, spec, pred)
                fw, fs = round_front(pred.table, self.risk,
                                     steps + (round_overhead(spec, spec.backend) or 0.0))
                info.update({"has-model": True, "model": where, "steps": steps, "front-w": fw, "front-s": fs})
        except (core.PtuiError, OSError, ValueError) as e:
            notes.append(f"the node's model could not be read: {e}")
        if notes:
            info["notes"] = "; ".join(notes)
        return Message(RecordDict({RECORD: ConfigRecord(info)}), reply_to=msg)

    def _predictions(self, ctx: Context, spec: NodeSpec):
        """(the node's predictions, where its model is) when it has a model, else (None, '')."""
        key = (ctx.node_id, *spec.key)
        node = self.nodes.get(key)
        if node is not None:
            return node.predictions, str(node.model_dir)
        with _node_env(spec):
            out = Path(spec.model) if spec.model else model_dir_for(spec, spec.backend)
            if not (out / "meta.json").exists():
                return None, ""
            return core.load_predictions(out, core.get_device(spec.device)), str(out)

    def register(self, app) -> None:
        """Let the ClientApp `app` answer the strategy's QUERY: a ClientApp hands a message to its
        mods only when it has a function for the message's type, so this registers one (the mod,
        among the app's mods, answers before it is reached; it answers the same way where the mod
        is not).  An app built on a client_fn hands every message to its mods: nothing to do."""
        if getattr(app, "_call", None) is None and QUERY not in getattr(app, "_registered_funcs", {}):
            app.query(QUERY.split(".", 1)[1])(self.answer)


def _open_node(spec: NodeSpec, fit_modes: int, say, pool_modes: int = POOL_MODES) -> Node:
    with _node_env(spec):
        be, note = core.open_backend(spec.backend, spec.device, root=spec.sysfs_root or "/")
        say(f"ptui: node board {spec.device} ({be.kind}): {note}")
        if spec.unit_power is not None and spec.pool:
            _set_unit(be, spec)               # before any profile: the rows the fleet shares are its own
        cached = False                        # a model the mod fitted before (said with its date)
        if spec.model:
            out, where = Path(spec.model), f"the model {spec.model} (node config)"
        else:
            out = model_dir_for(spec, be.kind)
            with _fit_lock(out):              # nodes sharing a data directory fit it once
                cached = (out / "meta.json").exists()
                if cached:
                    where = f"the model the mod fitted before, {out}"
                elif spec.pool:
                    where = _fit_from_pool(be, spec, out, fit_modes, pool_modes, say)
                else:
                    sim = " (SIMULATED board)" if be.not_live else ""
                    say(f"ptui: no model for {spec.workload} bs{spec.batch_size} on this {spec.device}: "
                        f"profiling {fit_modes} modes on the node's board{sim} and fitting one into {out}")
                    t0 = time.perf_counter()
                    fit_node_model(be, spec, out, fit_modes, say)
                    where = (f"a model fitted now from {fit_modes} modes profiled on the node's "
                             f"board{sim} in {time.perf_counter() - t0:.1f} s, cached in {out}")
        if spec.unit_power is not None:
            if not spec.pool:                 # after the fit: its model describes the typical unit
                _set_unit(be, spec)
            whose = ("this unit's: its own rows, and the fleet's brought to it" if spec.pool
                     else "the typical unit's")
            say(f"ptui: this SIMULATED {spec.device} unit draws {spec.unit_power:.3f} x the typical "
                f"unit's power (unit-to-unit variation; its model is {whose})")
        pred = core.load_predictions(out, be.device)
        if cached and pred.model is not None:
            where += _fitted_when(pred.model)
        if pred.model is not None and pred.model.about.batch_size not in (None, spec.batch_size):
            raise core.InputError(f"the model {out} is for batch size {pred.model.about.batch_size}, "
                                  f"not {spec.batch_size}")
        say(f"ptui: {spec.device} decides with {where}")
        return Node(spec, be, pred, out, where)


def _fitted_when(model) -> str:
    """" (from N modes, fitted DATE)" of a cached model: a cache fitted by an older ptui, or from
    fewer modes, is then seen in the log (its figures differ from a fresh fit's)."""
    about = model.about
    modes = about.trained_on.get("modes")
    when = about.created.replace("T", " ").rstrip("Z")
    bits = ([f"from {modes} modes"] if modes is not None else []) + ([f"fitted {when} UTC"] if when else [])
    return f" ({', '.join(bits)})" if bits else ""


def _set_unit(be, spec: NodeSpec) -> None:
    if be.kind != "sim":
        raise core.InputError(f"sim-unit-power is a SIMULATED board's factor; this node's board is {be.kind}")
    be.set_unit(spec.unit_power)


def _fit_from_pool(be, spec: NodeSpec, out: Path, fit_modes: int, pool_modes: int, say) -> str:
    """A node of a pooling fleet without a model: with `fit_modes` rows or more of other boards of
    its type in the pool, profile `pool_modes` modes and fit this unit's model on them and the
    fleet's (its power and time factors from its own rows); with fewer, profile `fit_modes` alone.
    Either way its rows go to the pool for the boards to come.  Returns where the model came from,
    in words."""
    sim = " (SIMULATED board)" if be.not_live else ""
    try:
        rows, boards, where = core.pool_holds(be.device, spec.workload, spec.batch_size, url=spec.pool,
                                              board=spec.board)
    except core.InputError:                    # a URL that names no pool: the node's config is wrong
        raise
    except core.PtuiError as e:                # not reached: the profile below warns too, keeps its rows
        say(f"ptui: warning: {e}; this node profiles {fit_modes} modes alone")
        rows, boards, where = 0, 0, "(not reached)"
    pooled = rows >= fit_modes
    count = pool_modes if pooled else fit_modes
    held = (f"the pool {where} holds {rows} rows of {boards} other board{'s' * (boards != 1)} of "
            f"its type")
    say(f"ptui: no model for {spec.workload} bs{spec.batch_size} on this {spec.device} (board "
        f"{spec.board!r}): {held}" + ("" if pooled else f", fewer than {fit_modes} to pool")
        + f"; profiling {count} modes on the node's board{sim} and fitting "
        + ("this unit's model on them and the fleet's rows" if pooled else "one on them alone")
        + f" into {out}")
    t0 = time.perf_counter()
    try:
        fit_node_model(be, spec, out, count, say, pooled=pooled)
    except _PoolLost as e:                   # gone between the count and the fit: this board alone
        say(f"ptui: warning: {e.__cause__}; this node profiles {fit_modes} modes and fits alone")
        pooled, count = False, fit_modes
        fit_node_model(be, spec, out, count, say)
    how = (f"a pooled model: {count} modes of this board and the fleet's {rows} rows of {boards} "
           f"other board{'s' * (boards != 1)}" if pooled else
           f"a model fitted from {count} modes of this board alone ({held}, fewer than {fit_modes})")
    return f"{how}, profiled on the node's board{sim} in {time.perf_counter() - t0:.1f} s, cached in {out}"


@contextlib.contextmanager
def _fit_lock(out: Path):
    """An exclusive lock beside the model directory (processes of one host: Flower's simulation
    runs nodes in several), held while the model is looked for and, if missing, fitted."""
    import fcntl
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _pick(node: Node, goal: dict, steps: float, risk):
    """(decision or None, feasible, goal in words): the mode for the goal; a goal nothing meets
    takes the closest mode (feasible False); no goal keeps the board's mode (decision None).
    `steps`: the round's minibatches plus its overhead (round_overhead), in steady minibatches."""
    if not goal:
        return None, True, "none (the board's mode kept)"
    kw = dict(goal)
    if "deadline_s" in kw:
        kw["deadline_ms"] = kw.pop("deadline_s") * 1000.0 / steps
    tab = node.predictions.table
    try:
        d = core.choose(tab, risk=risk, **kw)
        return d, True, d.goal
    except core.InfeasibleError as e:
        if e.closest is None:
            return None, False, f"infeasible: {e}"
        i = int(e.closest)
        return _Closest(i, tab.modes[i], float(tab.time_ms[i]), float(tab.power_w[i])), False, \
            f"infeasible, closest mode: {e}"


def _overhead_file(spec: NodeSpec, backend_kind: str) -> Path:
    """Where a node keeps its rounds' overhead (in its data directory, beside its models)."""
    return core.data_dir() / "models" / f".{model_dir_for(spec, backend_kind).name}.round-overhead.json"


def round_overhead(spec: NodeSpec, backend_kind: str) -> float | None:
    """The node's per-round overhead in steady minibatches of the round's mode (the mean of its last
    OVERHEAD_ROUNDS rounds' measurements), None before its first measured round."""
    with _node_env(spec):
        seen = _kept_overheads(_overhead_file(spec, backend_kind))
    return sum(seen) / len(seen) if seen else None


def _kept_overheads(f: Path) -> list[float]:
    """The overheads a node's file keeps (in steady minibatches); none where it is missing or holds
    anything else (a file of another version, or edited by hand, fails no round)."""
    try:
        seen = json.loads(f.read_text()).get("minibatches")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(seen, list):
        return []
    return [float(k) for k in seen if isinstance(k, (int, float)) and math.isfinite(k) and k >= 0]


def _keep_overhead(spec: NodeSpec, backend_kind: str, minibatches: float) -> str:
    """Keep a round's measured overhead; "" when kept, else a note saying why not (a data directory
    the node cannot write to fails no round: the round trained, and its reply goes back)."""
    with _node_env(spec):
        f = _overhead_file(spec, backend_kind)
        seen = (_kept_overheads(f) + [round(minibatches, 4)])[-OVERHEAD_ROUNDS:]
        try:
            f.parent.mkdir(parents=True, exist_ok=True)
            core.write_atomic(f, json.dumps({"minibatches": seen}).encode())
        except OSError as e:
            return (f"this round's overhead could not be kept in {f.parent} "
                    f"({e.strerror or type(e).__name__}): the next rounds predict without it")
    return ""


@dataclass
class _Closest:
    index: int
    mode: object
    time_ms: float
    power_w: float


def front_of(table, risk: float | None = None) -> tuple[list[float], list[float]]:
    """The predicted Pareto front (power W ascending, time ms descending), at most FRONT_POINTS.
    With a risk, each mode's power is its upper bound at that risk (median x exp(z x log-sd), the
    bound core.choose holds a budget to): a node given that much as its budget can pick the mode."""
    pw_all = [float(p) for p in bound_w(table.power_w, table.power_w_std, risk)]
    order = sorted(range(len(table)), key=lambda i: (pw_all[i], float(table.time_ms[i])))
    pw, ms = [], []
    best = math.inf
    for i in order:
        t = float(table.time_ms[i])
        if t < best:
            best = t
            pw.append(pw_all[i])
            ms.append(t)
    if len(pw) > FRONT_POINTS:
        k = [round(j * (len(pw) - 1) / (FRONT_POINTS - 1)) for j in range(FRONT_POINTS)]
        pw, ms = [pw[j] for j in k], [ms[j] for j in k]
    return pw, ms


def round_front(table, risk: float | None, steps: float) -> tuple[list[float], list[float]]:
    """front_of with each time as the seconds of a round of `steps` minibatches (its overhead
    included: round_overhead): the front a node's reply (or answer to a query) carries and the
    server splits a cap by."""
    pw, ms = front_of(table, risk)
    return pw, [t * steps / 1000.0 for t in ms]


def bound_w(p, sd, risk: float | None):
    """Modes' power at the risk's upper bound (core.upper_bound: the bound core.choose holds a
    budget to), a hair above it so that a node given that much as its budget can pick the mode; the
    median without a risk."""
    b = core.upper_bound(p, sd, risk)
    return b if risk is None else np.where(b > 0, b * (1 + 1e-9), b)


@contextlib.contextmanager
def _board_held(node: Node):
    """The board is the round's from its decision until it is back: another ptui (an apply, a
    profile) is refused meanwhile (LockError names who holds it) instead of changing the mode under
    the training, or having it rolled back under itself; a round that finds the board held fails
    with the board untouched.  Re-entrant: the round's own apply and rollback take it again."""
    guard = contextlib.ExitStack()
    with _node_env(node.spec):            # where the lock lives may follow the data dir
        guard.enter_context(core.board_lock(node.backend))
    with guard:
        yield


def _train_round(node: Node, msg: Message, ctx: Context, call_next, risk, interval: float,
                 say, hold_budget: bool = True) -> Message:
    config: dict = {}
    for rec in msg.content.config_records.values():
        config.update(rec)
    goal = round_goal(config)
    hold_w = hold_watts(config, goal)       # bad input is refused before the board is touched
    steps = node.steps(config)
    be = node.backend
    extra = round_overhead(node.spec, be.kind)   # the round's start-up, in steady minibatches
    span = steps + (extra or 0.0)
    d, feasible, goal_words = _pick(node, goal, span, risk)
    notes: list[str] = []
    if "deadline_s" in goal and extra is None:
        notes.append("the round's overhead (its training's start-up: the first minibatch autotunes) is not "
                     "known before the node's first round: the deadline was held by its minibatches alone")
    if hold_w and "budget_w" not in goal:
        notes.append(f"{HOLD_KEY} {hold_w:g} W without {BUDGET_KEY}: nothing held (the hold steps down "
                     f"to a mode within a budget)")
    with _node_env(node.spec):
        left = core.recover_round(be)       # a round killed mid-way (kill -9) left the board in its mode
        if left is not None:
            notes.append(f"a round killed before it put the board back (pid {left[2]}, {left[1]}) "
                         f"left it in its mode: put back in {left[0]}, the mode that round started in")
            say(f"ptui: {node.spec.device}: {notes[-1]}")
        snap = be.snapshot()
        way_back = core.restore_record(be)   # a `ptui apply` made before keeps its way back
    start = be.snapshot_mode(snap)
    touched = applied = restored = False
    end = start
    record = hold = None
    try:
        if d is not None and d.mode != start:
            touched = True
            with _node_env(node.spec):
                record = core.begin_round(be, snap)
                r = core.apply(be, d.mode)
            applied = bool(r.ok)
            if not r.ok:
                notes.append(f"not applied, trained in {be.current_mode().key}: {r.message}")
                say(f"ptui: {node.spec.device}: {r.message}")
        elif d is not None:
            applied = True                  # already in it
        mode = be.current_mode()
        # the round's mode reads back from here: its power readings count once settled after it
        since = be.clock.now() if be.clock.virtual else time.monotonic()
        if hold_budget and applied and feasible and d is not None and "budget_w" in goal and hold_w:
            hold = _Hold(node, d, goal, hold_w, span, risk, since, snap, record)
        elif hold_budget and not feasible and "budget_w" in goal and hold_w:
            notes.append("no mode meets the goal: the round trains in the closest mode, not held "
                         "as measured")
        timed, w, w_round = _measure(be, node, lambda: call_next(msg, ctx), interval, steps, since, hold)
        if hold is not None and hold.words:
            notes.append(hold.words)
            say(f"ptui: {node.spec.device}: {hold.words}")
        if hold is not None and hold.stepped:
            d, feasible = hold.decision, hold.feasible
            if hold.closest:
                goal_words = f"{goal_words}; {hold.closest}"
            mode = be.current_mode()          # read back: what the round ended its training in
            if mode != d.mode:
                notes.append(f"the board reads {mode.key} after the step down to {d.mode.key}")
    finally:
        if hold is not None and hold.record is not None:
            record = hold.record              # the hold's step opened the round's record
        # the board back where it started, whatever happened (an apply or training that raised)
        end = be.current_mode()
        if touched or end != start:
            with _node_env(node.spec):
                end = core.rollback(be, snap)
                core.put_back_restore_record(be, way_back)
            if end != start:
                raise core.PtuiError(f"the board did not go back to {start.key}: it reads {end.key}")
            restored = True
        with _node_env(node.spec):
            core.end_round(be, record)
    reply = timed.reply
    if reply.has_error():
        return reply
    pred_w = float(d.power_w) if d is not None else math.nan
    step_s = float(d.time_ms) / 1000.0 if d is not None else math.nan   # a steady minibatch, predicted
    tab = node.predictions.table
    bound = (float(bound_w(tab.power_w[d.index], tab.power_w_std[d.index], risk))
             if d is not None else math.nan)
    # how sure the model was of the pick's power: the log-sd its bound was taken at (core.log_sd)
    log_sd = (float(core.log_sd(tab.power_w[d.index], tab.power_w_std[d.index]))
              if d is not None and tab.power_w[d.index] > 0 and math.isfinite(tab.power_w_std[d.index])
              else math.nan)
    if d is None:                            # no goal: the model's figures for the board's mode
        p = node.predictions.model.predict([mode]) if node.predictions.model is not None else None
        if p is not None:
            pred_w, step_s = float(p["power_w"][0]), float(p["time_ms"][0]) / 1000.0
    pred_s = step_s * span                   # the round's minibatches and its overhead known so far
    # the round's overhead: its seconds beyond its minibatches at the mode's steady pace (measured on
    # a simulated board; on a live one, beyond the model's pace for the mode)
    pace = timed.mb_s if math.isfinite(timed.mb_s) else step_s
    overhead_s = max(0.0, timed.s - steps * pace) if math.isfinite(pace) and pace > 0 else math.nan
    if math.isfinite(overhead_s) and (why := _keep_overhead(node.spec, be.kind, overhead_s / pace)):
        notes.append(why)
    if "deadline_s" in goal and timed.s > goal["deadline_s"] * (1 + 1e-9):
        feasible = False
        over = (f"overran its deadline: {timed.s:.2f} s on the board against {goal['deadline_s']:g} s"
                + (f" ({overhead_s:.2f} s of it the round's overhead)" if math.isfinite(overhead_s) else ""))
        goal_words = f"{goal_words}; {over}"
        notes.append(over)
    if not w.settled:
        notes.append(f"the board's power had not settled in {mode.key} during the round: its watts are "
                     f"the mean of the round's last {w.n} readings ({w.span_s:.1f} s)")
    stepped = hold is not None and hold.stepped
    if stepped:                               # its modes' readings, the higher draw before a step too
        notes.append(f"ptui-j is the mean of the round's readings in every mode it trained in "
                     f"({w_round:.2f} W) x its seconds; ptui-w is the last mode's settled watts")
    figures = {"ptui-s": timed.s, "ptui-w": w.mean, "ptui-j": (w_round if stepped else w.mean) * timed.s,
               "ptui-simulated": 1.0 if node.simulated else 0.0, "ptui-predicted-w": pred_w,
               "ptui-predicted-s": pred_s, "ptui-feasible": 1.0 if feasible else 0.0,
               "ptui-applied": 1.0 if applied else 0.0, "ptui-host-s": timed.host_s,
               "ptui-w-n": float(w.n), "ptui-w-span-s": w.span_s, "ptui-w-settled": 1.0 if w.settled else 0.0,
               "ptui-settle-s": w.settle_s, "ptui-bound-w": bound, "ptui-power-log-sd": log_sd,
               "ptui-train-s": timed.s - overhead_s, "ptui-overhead-s": overhead_s}
    metrics = list(reply.content.metric_records.values())
    target = metrics[0] if metrics else None
    if target is None:
        target = reply.content["metrics"] = MetricRecord()
    for k, v in figures.items():
        target[k] = float(v)
    fw, fs = round_front(node.predictions.table, risk, steps + (round_overhead(node.spec, be.kind) or 0.0))
    reply.content[RECORD] = ConfigRecord({
        "mode": mode.key, "device": node.spec.device, "backend": be.kind, "goal": goal_words,
        "workload": node.spec.workload, "model": node.model_note, "steps": steps,
        "start-mode": start.key, "end-mode": end.key, "restored": restored,
        "simulated": bool(node.simulated), "own-unit": node.spec.own_unit,
        **({"sim-unit-power": float(node.spec.unit_power)} if node.spec.unit_power is not None else {}),
        "watts-from": (("SIMULATED board telemetry" if node.simulated else "board telemetry")
                       + (f", the mean of {w.n} readings over {w.span_s:.1f} s once the power settled "
                          f"{w.settle_s:.1f} s after the mode read back ({w.dropped} before left out)"
                          if w.settled else f", the mean of the round's last {w.n} readings over "
                          f"{w.span_s:.1f} s (the power had not settled)")),
        "seconds-from": (f"the SIMULATED board's clock, {steps} minibatches of {node.spec.workload}"
                         if be.clock.virtual else "the round's wall time on this host"),
        # the front the server splits a cap by: W at the risk's upper bound, round seconds
        "front-w": fw, "front-s": fs, "notes": "; ".join(notes)})
    return reply


@dataclass
class _Timed:
    s: float                              # the round's seconds on the board (simulated: its clock)
    host_s: float                         # the host's wall seconds for the ClientApp's round
    reply: Message
    mb_s: float = math.nan                # a steady minibatch's seconds, measured (simulated: the median)


@dataclass
class Watts:
    """The round's power figure: the mean of `n` readings spanning `span_s` seconds; `settled`
    False when the board's power never settled in the round (then the readings are the round's
    last SETTLE_WINDOW_S seconds, the nearest to settled it had); `settle_s` the seconds from
    the mode reading back to the first settled reading (nan when it never settled)."""
    mean: float
    n: int
    span_s: float
    settled: bool
    settle_s: float
    dropped: int                          # readings left out (taken before the power settled)


def settled_power(readings: Iterable[tuple[float, float]], since: float, *,
                  window_s: float = SETTLE_WINDOW_S, tol: float = SETTLE_TOL,
                  min_s: float = SETTLE_MIN_S) -> Watts:
    """The mean of the power readings (t, W) taken once the power settled after `since` (when the
    round's mode read back; readings before it are left out): settled at the first reading, no
    sooner than `min_s` after `since`, where the readings of the last `window_s` seconds (at least
    3) lie within `tol` of their mean; every reading from there on counts.  None settled: the
    readings of the round's last `window_s` seconds, said so (settled False)."""
    rs = sorted((float(t), float(w)) for t, w in readings
                if w is not None and not math.isnan(w) and t >= since - 1e-9)
    if not rs:
        return Watts(math.nan, 0, 0.0, False, math.nan, 0)
    at = None
    lo = 0
    for i, (t, _) in enumerate(rs):
        while rs[lo][0] < t - window_s - 1e-9:
            lo += 1
        win = [w for _, w in rs[lo:i + 1]]
        if t - since >= min_s - 1e-9 and len(win) >= 3 and rs[i][0] - rs[lo][0] >= 0.5 * window_s:
            m = sum(win) / len(win)
            if max(win) - min(win) <= tol * abs(m):
                at = i
                break
    if at is None:
        end = rs[-1][0]
        kept = [(t, w) for t, w in rs if t >= end - window_s - 1e-9]
        settled, settle_s = False, math.nan
    else:
        kept = rs[at:]
        settled, settle_s = True, rs[at][0] - since
    ws = [w for _, w in kept]
    return Watts(sum(ws) / len(ws), len(ws), kept[-1][0] - kept[0][0], settled, settle_s,
                 len(rs) - len(kept))


def hold_watts(config: Mapping, goal: dict) -> float:
    """The watts a round holds as measured (_Hold): its config's ptui-hold-w (0: none), else its
    power budget, else 0."""
    v = config.get(HOLD_KEY)
    if v is None:
        return float(goal.get("budget_w", 0.0))
    return float(core.number(v, HOLD_KEY, ge=0))


class _Hold:
    """A round's watts held to `hold_w` as measured: once the board's power settled in the round's
    mode (settled_power's rule), the mean of its readings from there on is watched; a board whose
    mean goes over hold_w (a unit that draws more than the typical unit its model describes:
    identical units differ by 10-30 %; a draw that creeps up as the board warms) steps down to the
    mode the goal picks with the budget divided by the most the board drew over a mode's bound
    (its power at the risk's upper bound, what the pick held the budget to), and the new mode is
    watched the same way once settled: HOLD_STEPS steps at most (the ratio differs from mode to
    mode with the model's own error), then a mode still over is said.  check() is called with the
    readings so far (a list that only grows); `since` moves to when the new mode read back."""

    def __init__(self, node: Node, d, goal: dict, hold_w: float, steps: float, risk, since: float,
                 snap, record) -> None:
        self.node, self.decision, self.goal, self.hold_w = node, d, goal, hold_w
        self.steps, self.risk, self.since = steps, risk, since
        self.snap, self.record = snap, record   # the round's start and its record (begin_round)
        self.done = False
        self.feasible, self.closest = True, ""  # the last step's pick met the goal / why not
        self.factor = 0.0
        self.n_steps = 0
        self.said: list[str] = []
        self._at: float | None = None             # when the mode's power settled
        self._sum, self._n, self._seen = 0.0, 0, 0

    @property
    def stepped(self) -> bool:
        return self.n_steps > 0

    @property
    def words(self) -> str:
        return "; then ".join(self.said)

    def _mean(self, readings: list[tuple[float, float]]) -> float | None:
        """The mean of the mode's readings since its power settled (None before it settled)."""
        if self._at is None:
            w = settled_power(readings, self.since)
            if not w.settled:
                return None
            self._at = self.since + w.settle_s
            self._sum, self._n, self._seen = 0.0, 0, 0
        for t, p in readings[self._seen:]:
            if t >= self._at - 1e-9 and p is not None and not math.isnan(p):
                self._sum += p
                self._n += 1
        self._seen = len(readings)
        return self._sum / self._n if self._n else None

    def check(self, readings: list[tuple[float, float]]) -> None:
        if self.done:
            return
        mean = self._mean(readings)
        if mean is None or mean <= self.hold_w:
            return
        be, tab, d = self.node.backend, self.node.predictions.table, self.decision
        sim = " SIMULATED" if self.node.simulated else ""
        was = f"{be.current_mode().key} drew {mean:.2f} W{sim} once settled, over its {self.hold_w:.2f} W"
        if self.n_steps >= HOLD_STEPS:
            self.said.append(f"{was} after {HOLD_STEPS} steps down: the round trained on in it")
            self.done = True
            return
        b = float(bound_w(tab.power_w[d.index], tab.power_w_std[d.index], self.risk))
        self.factor = max(self.factor, mean / b if b > 0 else mean / self.hold_w)
        # the new mode's bound x factor within hold_w: its budget in the model's watts
        new, ok, words = _pick(self.node, {**self.goal, "budget_w": self.hold_w / self.factor}, self.steps,
                               self.risk)
        if new is None or new.mode == d.mode:
            self.said.append(f"{was}; no mode below it to step down to")
            self.done = True
            return
        with _node_env(self.node.spec):
            if self.record is None:            # the round had not changed the board: now it does
                self.record = core.begin_round(be, self.snap)
            way_back = core.restore_record(be)     # names the round's start (or the user's apply)
            try:
                r = core.apply(be, new.mode)
            finally:
                core.keep_restore_record(be, way_back)
        if not r.ok:
            self.said.append(f"{was}; stepping down to {new.mode.key} failed: {r.message}")
            self.done = True
            return
        self.since = be.clock.now() if be.clock.virtual else time.monotonic()
        self._at = None
        self.n_steps += 1
        self.decision = new
        self.feasible, self.closest = ok, ("" if ok else "no mode meets it as measured: the closest")
        self.said.append(f"{was} (x{self.factor:.3f} its model's bound): stepped down to {new.mode.key} "
                         f"(predicted {float(new.power_w):.2f} W for the typical unit"
                         + ("" if ok else ", the closest: no mode meets it") + ")")


def _measure(be, node: Node, run: Callable[[], Message], interval: float,
             steps: int, since: float, hold: _Hold | None = None) -> tuple[_Timed, Watts]:
    """Run the round; (its seconds, the host's wall seconds and the reply; the board's watts once
    settled in the round's mode, read back at `since`: settled_power).
    A live (or emulated) board is sampled by core.Sampler while the round runs: seconds are the
    round's wall time.  A board on a virtual clock (the simulator) then trains the node's workload
    for the round's `steps` minibatches on that clock, in the mode the round ran in: seconds and
    watts are the SIMULATED Jetson's, whatever the host's own training took.  `hold`: the round's
    watts held to its share (_Hold), checked as the readings come; the watts are then the mode's
    it stepped down to.  Returns (the seconds, the settled watts, the mean of every reading since
    `since`: the round's watts across the modes it trained in)."""
    if be.clock.virtual:
        t0 = time.perf_counter()
        reply = run()
        host = time.perf_counter() - t0
        s, w, whole, mb_s = _simulated_round(be, node, steps, interval, since, hold)
        return _Timed(s, host, reply, mb_s), w, whole
    # history for a week of samples: the mean is over the whole round (the default keeps 60 s)
    sampler = core.Sampler(be, interval=min(interval, 0.5), history_s=7 * 86400.0)
    sampler.sample_once()
    sampler.start()

    def readings() -> list[tuple[float, float]]:
        now = time.monotonic()
        return [(now + ago, p) for ago, p in sampler.history()]
    stop = threading.Event()
    watch = None
    if hold is not None:                  # the hold's check beside the training, every sample
        def watcher() -> None:
            seen: list[tuple[float, float]] = []
            n = 0
            try:
                while not stop.wait(sampler.interval) and not hold.done:
                    new, n = sampler.taken_after(n)
                    seen += [(t, w) for t, w in new if w is not None]
                    hold.check(seen)
            except Exception as e:  # noqa: BLE001 - said in the reply; the round goes on in its mode
                hold.done = True
                hold.said.append(f"the budget hold failed ({type(e).__name__}: {e}); the round "
                                 f"trained on in {be.current_mode().key}")
        watch = threading.Thread(target=watcher, name="ptui-hold", daemon=True)
        watch.start()
    t0 = time.perf_counter()
    try:
        reply = run()
    finally:
        host = time.perf_counter() - t0
        stop.set()
        if watch is not None:
            watch.join()
        sampler.stop()
    sampler.sample_once()
    rs = readings()
    return (_Timed(host, host, reply), settled_power(rs, hold.since if hold else since),
            _mean_since(rs, since))


def _mean_since(readings: list[tuple[float, float]], since: float) -> float:
    ws = [w for t, w in readings if t >= since - 1e-9 and w is not None and not math.isnan(w)]
    return sum(ws) / len(ws) if ws else math.nan


def _simulated_round(be, node: Node, steps: int, interval: float, since: float,
                     hold: _Hold | None = None) -> tuple[float, Watts, float, float]:
    """(seconds, settled watts, the mean of every reading, a steady minibatch's seconds: the median
    of the round's, nan under 3) of `steps` minibatches of the node's workload on the simulated
    board, from the start of its training (the first minibatch's autotuning included)."""
    own = be.trains_builtin and be.workload is None
    if own:
        be.start_training(core.get_workload(node.spec.workload, node.spec.batch_size))
    try:
        t0 = be.clock.now()
        n, ws, mbs = 0, [], []
        for ev in be.events(interval):
            p = getattr(ev, "power_w", ...)
            if p is ...:                  # a minibatch finished
                n += 1
                mbs.append(ev.ms / 1000.0)
                if n >= steps:
                    break
            elif p is not None:
                ws.append((ev.t, p))
                if hold is not None and not hold.done:
                    hold.check(ws)
        if not ws:
            t = be.read()
            ws = [(t.t, t.power_w)] if t.power_w is not None else []
        mb_s = float(np.median(mbs)) if len(mbs) >= 3 else math.nan
        return (be.clock.now() - t0, settled_power(ws, hold.since if hold else since), _mean_since(ws, since),
                mb_s)
    finally:
        if own:
            be.stop_training()


# -- the server strategy ----------------------------------------------------------------------------
def split_cap(curves: Mapping[int, tuple[list[float], list[float]]], cap_w: float) -> tuple[dict, bool]:
    """Each node's power budget from a fleet cap: the least round time T that every node can meet
    within the cap (a synchronous round waits for its slowest node), each node at the least power
    that meets T on its predicted front.  What is left of the cap stays unspent: more power could
    not shorten the round (T is the least the fronts allow), only make the other nodes wait
    faster.  curves: node -> (front W ascending, round seconds descending).  Returns ({node: W},
    feasible); when even every node's least power exceeds the cap, each gets its least power and
    feasible is False."""
    if not curves:
        return {}, True
    least = {n: w[0] for n, (w, _) in curves.items()}
    if sum(least.values()) > cap_w:
        return dict(least), False
    for T in sorted({t for _, ts in curves.values() for t in ts}):
        need = {}
        for n, (ws, ts) in curves.items():
            ok = [w for w, t in zip(ws, ts) if t <= T]
            if not ok:
                break
            need[n] = min(ok)
        else:
            if sum(need.values()) <= cap_w:
                return need, True
    return dict(least), True


class PtuiFleet(Strategy):
    """Wraps a Flower strategy (FedAvg, ...): each round every sampled node gets its own goal in
    its own RecordDict, the per-node figures are logged (not averaged) and the model aggregation
    is the wrapped strategy's.  Goals: `cap_w` (a fleet power cap split by the nodes' predicted
    power curves: the curves the nodes sent back with their last reply, before that the roofline
    prior of their device; before a node's first round the strategy asks it (a QUERY message the
    mod answers from the node's config: its device, and its model's front when it has one), a
    node that does not answer is split by the device from `devices`, node id -> device, or
    `default_device`, said in the log), `deadline_s`
    (every node's round deadline), `objective` ('energy', within the cap's share when both).
    `correct`: each node's curve is scaled by its unit's power factor (a per-board power
    correction: identical units differ by 10-30 %, and a node's model may be the typical unit's)
    and its share sent in its model's watts: the factor estimated from its measured/predicted
    watts of the rounds before (unit_factor), and a reserve for what is not known of the factors
    yet, shared by the nodes (reserve: each unit's power uniform within 1 +- `unit_spread` of its
    model's before it was measured, independent from unit to unit, so that at the risk's bound the
    fleet's draw is within the cap); a node whose model is its own unit's (it says so: a pooled
    fit, a board that fitted its own) has no such prior, only its model's bound;
    `margin`: the least fraction added to every node's curve.  `hold_shares`: each node holds its share
    as its board draws it (the mod's hold_budget: a node over its share once settled steps down),
    so the cap holds in every round whatever the units draw, at the price of the steps down (a
    node cannot spend what another leaves unspent)."""

    def __init__(self, strategy: Strategy, *, cap_w: float | None = None, deadline_s: float | None = None,
                 objective: str | None = None,
                 devices: Mapping[int, str] | Callable[[int], str] | None = None,
                 default_device: str = "orin-agx", workload: str = "resnet18", batch_size: int = 16,
                 steps: int | None = None, risk: float | None = core.DEFAULT_RISK,
                 query: bool = True, query_timeout_s: float = QUERY_TIMEOUT_S,
                 correct: bool = True, margin: float = 0.0, hold_shares: bool = False,
                 unit_spread: float = UNIT_SPREAD, log: Callable[[str], None] | None = None) -> None:
        if cap_w is None and deadline_s is None and objective is None:
            raise core.InputError("PtuiFleet needs a goal: cap_w, deadline_s or objective='energy'")
        if cap_w is not None and deadline_s is not None:
            raise core.InputError("give a fleet power cap or a round deadline, not both")
        # a goal that is no goal is refused here, not in every node's round (nan was split and sent)
        if cap_w is not None:
            cap_w = core.number(cap_w, "cap_w", gt=0)
        if deadline_s is not None:
            deadline_s = core.number(deadline_s, "deadline_s", gt=0)
        if objective is not None and objective != "energy":
            raise core.InputError(f"objective must be 'energy', got {objective!r}")
        if steps is not None:
            steps = core.number(steps, "steps", integer=True, ge=1)
        # and so is what a node's prior curve is made of (a device ptui does not know, a workload
        # without the published counts the prior takes, a batch size that is no count) and a risk no
        # rule takes, not in the first round a node is split by its device
        if devices is not None and not (isinstance(devices, Mapping) or callable(devices)):
            # a list (the mod's devices=) matched no node id: every node split as default_device
            raise core.InputError(f"devices must map node ids to devices ({{node_id: 'orin-nano'}}) or be "
                                  f"a function of the node id, got {devices!r}")
        for d in [default_device, *(devices.values() if isinstance(devices, Mapping) else [])]:
            core.get_device(d)
        core.get_workload(workload)
        batch_size = core.number(batch_size, "batch_size", integer=True, ge=1)
        risk = risk_arg(risk)
        self.strategy = strategy
        self.cap_w, self.deadline_s, self.objective = cap_w, deadline_s, objective
        self.devices = devices
        self.default_device = default_device
        self.workload, self.batch_size, self.steps = core.workload_name(workload), batch_size, steps
        self.risk = risk                       # the nodes' risk: the prior's front at its power bound
        self.log = log or say_in_flowers_log
        self.curves: dict[int, tuple[list[float], list[float]]] = {}   # node -> reported front
        self.node_device: dict[int, str] = {}                           # node -> reported device
        self.node_model: dict[int, bool] = {}                           # node -> has a model (QUERY)
        self.query, self.query_timeout_s = query, query_timeout_s
        self.asked: set[int] = set()           # nodes sent a QUERY (each once)
        self._priors: dict[str, tuple[list[float], list[float]]] = {}
        self.history: list[dict] = []          # one entry per round: per-node figures and totals
        self.last_budgets: dict[int, float] = {}
        self.last_nodes: list[int] = []        # the nodes this round's train messages went to
        self.last_split: dict[int, tuple[str, str]] = {}
        self.last_predicted_w: float | None = None
        self.correct = correct
        self.margin = core.number(margin, "margin", ge=0) if margin else 0.0
        self.hold_shares = bool(hold_shares)
        self.unit_spread = core.number(unit_spread, "unit_spread", ge=0, le=1) if unit_spread else 0.0
        self.unmeasured = 0.0                      # this round's reserve (a fraction; reserve())
        self.ratios: dict[int, list[float]] = {}   # node -> measured/bound watts, per round
        # node -> mode -> (log measured/predicted watts, the model's log-sd there): unit_factor
        self.seen: dict[int, dict[str, tuple[float, float]]] = {}
        self.own_unit: dict[int, bool] = {}        # node -> its model is its own unit's (it said so)
        self.last_sent: dict[int, float] = {}      # node -> the budget sent (its model's watts)
        self.last_factor: dict[int, float] = {}    # node -> the factor its budget was sent with

    # -- what the fleet knows of its nodes ---------------------------------------------------------
    def device_of(self, node_id: int) -> str:
        if node_id in self.node_device:
            return self.node_device[node_id]
        d = self.devices
        if callable(d):
            return d(node_id)
        if d is not None and node_id in d:
            return d[node_id]
        return self.default_device

    def prior_curve(self, device: str) -> tuple[list[float], list[float]]:
        """The roofline prior's predicted front for a device kind (no mode profiled)."""
        c = self._priors.get(device)
        if c is None:
            spec = core.workload_spec(workload=self.workload, batch_size=self.batch_size)
            pred = core.model_predictions(core.prior_model(core.get_device(device), spec,
                                                           workload=self.workload))
            steps = self.steps or pred.batches_per_epoch or 1
            c = self._priors[device] = round_front(pred.table, self.risk, steps)
        return c

    def unit_factor(self, node_id: int) -> tuple[float, float]:
        """The node's unit's power factor against its model, log mu and sd s: a normal prior (mean 0,
        sd unit_spread / sqrt(3), a uniform spread; none for a node whose model is its own unit's)
        updated by each distinct mode it trained in (the last RATIO_MODES), log(measured / the
        model's median) = the factor + the model's error there, whose sd is the model's log-sd for
        that mode (with the watts' own WATTS_LOG_SD).  One round says little where the model is
        unsure: a unit drawing 8 % over its model's median, in a mode whose bound was 15 % over it
        (a pick under the devices' priors), moves the factor by 2.4 %, and the rest stays in s.
        (The largest measured/bound ratio read 0.94 there, so 1, and the next round, in a mode whose
        bound was close, went over the cap; the largest measured/median ratio read 1.24 for a unit
        of 1.10 in a mode its model under-predicted by 13 %, and left a fifth of the cap unspent.)"""
        prior = 0.0 if self.own_unit.get(node_id) else self.unit_spread / math.sqrt(3.0)
        if prior <= 0:
            return 0.0, 0.0
        prec, num = 1.0 / prior ** 2, 0.0
        for lr, sd in list(self.seen.get(node_id, {}).values())[-RATIO_MODES:]:
            v = sd * sd + WATTS_LOG_SD ** 2
            prec += 1.0 / v
            num += lr / v
        return num / prec, math.sqrt(1.0 / prec)

    def power_factor(self, node_id: int) -> float:
        """The node's curve's factor, when `correct`: its unit's estimated factor (unit_factor),
        the largest measured/bound ratio of its last RATIO_ROUNDS rounds (the model's bound broken:
        for a model of its own unit, the only correction) and 1 + margin, the largest of them and
        never below 1 (a unit drawing less keeps its margin: the cap is held, the round not
        slowed); times 1 + this round's reserve where its factor is not known exactly."""
        if not self.correct:
            return 1.0 + self.margin
        mu, sd = self.unit_factor(node_id)
        r = self.ratios.get(node_id) or []
        base = max([1.0 + self.margin, math.exp(mu), *r[-RATIO_ROUNDS:]])
        return base * (1.0 + self.unmeasured) if sd > 0 else base

    def factor_words(self, node_id: int) -> str:
        """What a node's power factor is, in words (the split's log)."""
        if not self.correct:
            return "the margin"
        mu, sd = self.unit_factor(node_id)
        r = (self.ratios.get(node_id) or [])[-RATIO_ROUNDS:]
        k = len(list(self.seen.get(node_id, {}).values())[-RATIO_MODES:])
        bits = []
        if r and max(r) > max(1.0 + self.margin, math.exp(mu)):
            bits.append(f"its model's bound exceeded: x{max(r):.3f}")
        elif math.exp(mu) > 1.0 + self.margin:
            bits.append(f"its unit's factor x{math.exp(mu):.3f} from {k} measured mode{'s' * (k != 1)}")
        elif self.margin:
            bits.append("the margin")
        if sd > 0 and self.unmeasured:
            bits.append("the reserve" + ("" if k else ": not measured yet"))
        return ", ".join(bits) or "its model"

    def reserve(self, nodes: list[int], shares: Mapping[int, float] | None = None) -> float:
        """The fraction each node whose unit's factor is not known exactly adds to its curve: the
        factors' remaining sds s_i (unit_factor) are independent from unit to unit, so the fleet's
        draw varies with sd sqrt(sum (s_i w_i)^2) over their shares w_i, and the reserve is that at
        the risk's z, shared in proportion to their shares: z sqrt(sum (s_i w_i)^2) / sum w_i.  Before
        any was measured, z s / sqrt(n) for n equal shares: 3 % of 10 nodes' watts at +-10 % and risk
        0.05, 1 % of 100's.  Their shares are the split's (equal before it).  0 without a risk,
        unit_spread or correction, with hold_shares (each node then holds its share as measured), or
        when every node's model is its own unit's."""
        if not (self.correct and self.unit_spread and self.risk is not None and not self.hold_shares):
            return 0.0
        sds = {n: self.unit_factor(n)[1] for n in nodes}
        todo = [n for n in nodes if sds[n] > 0]
        if not todo:
            return 0.0
        w = np.array([shares[n] if shares else 1.0 for n in todo], np.float64)
        s = np.array([sds[n] for n in todo], np.float64)
        if not w.sum() > 0:
            return 0.0
        z = max(core.upper_z(self.risk), 0.0)        # a risk over one half reserves nothing, not less
        return float(z * math.sqrt(float(np.sum((s * w) ** 2))) / float(w.sum()))

    def curve(self, node_id: int) -> tuple[list[float], list[float]]:
        """The node's curve in the watts it draws: its front (or its device's prior) x its factor."""
        ws, ts = self.curves.get(node_id) or self.prior_curve(self.device_of(node_id))
        f = self.power_factor(node_id)
        return (ws, ts) if f == 1.0 else ([w * f for w in ws], ts)

    def split_by(self, node_id: int) -> str:
        """What a node's share is split by, in words."""
        if node_id in self.curves:
            return "its model's front"
        if node_id in self.node_device:
            return "its device's prior"
        return "a prior of a device it has not reported"

    def ask(self, server_round: int, nodes: Iterable[int], grid: Grid) -> None:
        """Send a QUERY to each node not heard from yet (once) and wait up to query_timeout_s for
        the answers: each node's device, and its model's front when it has one.  A node that does
        not answer (no reply in time, an error reply: a ClientApp without ptui_power_mod, or one
        whose mod was not `register`ed) is split as before, from `devices` or `default_device`."""
        todo = [n for n in nodes
                if n not in self.asked and n not in self.node_device and n not in self.curves]
        if not todo:
            return
        self.asked.update(todo)
        conf = ConfigRecord({STEPS_KEY: int(self.steps)} if self.steps is not None else {})
        t0 = time.perf_counter()
        try:
            msgs = [Message(RecordDict({"config": ConfigRecord(dict(conf))}), dst_node_id=n,
                            message_type=QUERY, group_id=f"ptui-query-{server_round}") for n in todo]
            replies = list(grid.send_and_receive(msgs, timeout=self.query_timeout_s))
        except Exception as e:  # noqa: BLE001 - any failure to ask falls back to the split without
            replies = []
            self.log(f"ptui fleet round {server_round}: could not ask the nodes their device "
                     f"({type(e).__name__}: {e})")
        heard = []
        for r in replies:
            n = r.metadata.src_node_id
            if r.has_error():
                self.log(f"ptui fleet round {server_round}: node {n} did not answer ptui's query "
                         f"({r.error.reason})")
                continue
            info = r.content.config_records.get(RECORD)
            if info is None or not info.get("device"):
                self.log(f"ptui fleet round {server_round}: node {n} answered ptui's query without a device")
                continue
            self.node_device[n] = str(info["device"])
            self.node_model[n] = bool(info.get("has-model", False))
            if "own-unit" in info:
                self.own_unit[n] = bool(info["own-unit"])
            if info.get("front-w") and info.get("front-s"):
                self.curves[n] = (list(info["front-w"]), list(info["front-s"]))
            heard.append(n)
        silent = [n for n in todo if n not in heard]
        said = [f"node {n} {self.node_device[n]} ("
                + ("its model's front" if n in self.curves else "no model yet: its device's prior") + ")"
                for n in heard]
        if silent:
            said.append(f"{len(silent)} did not answer ({', '.join(str(n) for n in silent)}): split as "
                        f"before, by the device in `devices` or {self.default_device}")
        self.log(f"ptui fleet round {server_round}: asked {len(todo)} node(s) their device in "
                 f"{time.perf_counter() - t0:.1f} s: " + "; ".join(said))

    # -- the rounds --------------------------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        msgs = list(self.strategy.configure_train(server_round, arrays, config, grid))
        nodes = [m.metadata.dst_node_id for m in msgs]
        self.last_nodes = nodes
        budgets: dict[int, float] = {}
        if self.cap_w is not None:
            if self.query:
                self.ask(server_round, nodes, grid)
            # the reserve for the units' factors not known yet: sized on equal shares, then on the split's
            self.unmeasured = self.reserve(nodes)
            budgets, ok = split_cap({n: self.curve(n) for n in nodes}, self.cap_w)
            m = self.reserve(nodes, budgets) if ok else self.unmeasured
            if m > self.unmeasured + 1e-6:
                self.unmeasured = m
                budgets, ok = split_cap({n: self.curve(n) for n in nodes}, self.cap_w)
            pred = sum(budgets.values())
            self.last_predicted_w = pred
            if not ok:
                self.log(f"ptui fleet round {server_round}: the cap {self.cap_w:g} W is below the "
                         f"fleet's least predicted power {pred:.1f} W"
                         + (f" (with the reserve of {100 * self.unmeasured:.1f} % for the units' factors)"
                            if self.unmeasured else "") + "; each node gets its least")
        self.last_budgets = budgets
        # the node decides in its model's watts: its share of the cap divided by its factor
        self.last_factor = {n: self.power_factor(n) for n in budgets}
        self.last_sent = {n: w / self.last_factor[n] for n, w in budgets.items()}
        # what each node's share was split by: the device and the curve's source, for the history
        self.last_split = {n: (self.device_of(n), self.split_by(n)) for n in budgets}
        out = []
        for m in msgs:
            n = m.metadata.dst_node_id
            content = RecordDict()
            for key, rec in m.content.items():
                # one RecordDict per node: the arrays shared (read only), each config its own copy
                content[key] = ConfigRecord(dict(rec)) if isinstance(rec, ConfigRecord) else rec
            conf = next((r for r in content.config_records.values()), None)
            if conf is None:
                conf = content["config"] = ConfigRecord()
            if n in budgets:
                conf[BUDGET_KEY] = float(self.last_sent[n])
                # the share as its board draws it, held by the node when hold_shares; else none
                conf[HOLD_KEY] = float(budgets[n]) if self.hold_shares else 0.0
            if self.deadline_s is not None:
                conf[DEADLINE_KEY] = float(self.deadline_s)
            if self.objective is not None:
                conf[OBJECTIVE_KEY] = self.objective
            if self.steps is not None:
                conf[STEPS_KEY] = int(self.steps)
            out.append(Message(content=content, metadata=copy.copy(m.metadata)))
        unknown = [n for n in nodes if n not in self.curves and n not in self.node_device
                   and not (callable(self.devices) or (self.devices is not None and n in self.devices))]
        if budgets and unknown:
            self.log(f"ptui fleet round {server_round}: {len(unknown)} node(s) not heard from yet and "
                     f"not in `devices`: split as {self.default_device} by its roofline prior until "
                     f"they report their own device and front")
        if budgets:
            self.log(f"ptui fleet round {server_round}: cap {self.cap_w:g} W split "
                     + ", ".join(f"node {n} ({self.device_of(n)}, {self.split_by(n)}) {w:.1f} W"
                                 + (f" (sent {self.last_sent[n]:.1f} W: its share / "
                                    f"{self.last_factor[n]:.3f}, {self.factor_words(n)})"
                                    if self.last_factor[n] != 1.0 else "")
                                 for n, w in budgets.items())
                     + f"; {max(0.0, self.cap_w - sum(budgets.values())):.1f} W unspent (it could not "
                       f"shorten the round)"
                     + (f"; the reserve: {100 * self.unmeasured:.1f} % on each node whose unit's factor "
                        f"is not known yet (units within +-{self.unit_spread:.0%} of their models')"
                        if self.unmeasured else ""))
        return out

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        replies = list(replies)
        rows = []
        for r in replies:
            n = r.metadata.src_node_id
            if r.has_error():
                rows.append({"node": n, "error": r.error.reason})
                continue
            met = next(iter(r.content.metric_records.values()), None)
            info = r.content.config_records.get(RECORD)
            if met is None or info is None or "ptui-w" not in met:
                rows.append({"node": n, "error": "no ptui figures (is ptui_power_mod on this node?)"})
                continue
            if info.get("device"):
                self.node_device[n] = str(info["device"])
            if "own-unit" in info:
                self.own_unit[n] = bool(info["own-unit"])
            if info.get("front-w") and info.get("front-s"):
                self.curves[n] = (list(info["front-w"]), list(info["front-s"]))
            rows.append({"node": n, "device": info.get("device"), "mode": info.get("mode"),
                         "start_mode": info.get("start-mode"), "end_mode": info.get("end-mode"),
                         "restored": bool(info.get("restored", False)),
                         "notes": str(info.get("notes") or ""),
                         "w": float(met["ptui-w"]), "s": float(met["ptui-s"]), "j": float(met["ptui-j"]),
                         "predicted_w": float(met["ptui-predicted-w"]),
                         "predicted_s": float(met["ptui-predicted-s"]),
                         "bound_w": float(met.get("ptui-bound-w", math.nan)),
                         "log_sd": float(met.get("ptui-power-log-sd", math.nan)),
                         "applied": bool(met.get("ptui-applied", 1.0)),
                         "budget_w": self.last_budgets.get(n), "sent_budget_w": self.last_sent.get(n),
                         "power_factor": self.last_factor.get(n, self.power_factor(n)),
                         "unit_power": info.get("sim-unit-power"),
                         "simulated": bool(met["ptui-simulated"]),
                         "split_device": self.last_split.get(n, (None, None))[0],
                         "split_by": self.last_split.get(n, (None, None))[1],
                         "w_n": int(met.get("ptui-w-n", 0)), "w_settled": bool(met.get("ptui-w-settled", 0)),
                         "feasible": bool(met["ptui-feasible"]), "goal": str(info.get("goal") or "")})
        replied = {r.metadata.src_node_id for r in replies}
        for n in self.last_nodes:
            if n not in replied:               # killed mid-round, cut off, or past the round's timeout
                rows.append({"node": n, "error": "no reply: a node killed mid-round leaves its board in the "
                                                 "round's mode (`ptui restore` on it, or its next round puts "
                                                 "it back); its watts are not in the fleet's"})
        ok = [x for x in rows if "error" not in x]
        for x in ok:
            pw, bw, w = x["predicted_w"], x["bound_w"], x["w"]
            # a round too short to settle (or a late step) has no steady figure to learn from, and
            # one whose mode was not applied drew in another mode than the one predicted
            if not (x["w_settled"] and x["applied"] and math.isfinite(w) and w > 0):
                continue
            if math.isfinite(bw) and math.isfinite(pw) and bw > pw * (1 + 1e-6):
                # the model's bound broken (power_factor); a node deciding on the median (no risk)
                # has no bound above it, and its ratio would be the measured/median over-read
                self.ratios.setdefault(x["node"], []).append(w / bw)
            if math.isfinite(pw) and pw > 0:          # the unit's factor (unit_factor)
                sd = x["log_sd"]
                if not math.isfinite(sd) or sd <= 0:   # a node before the figure: from its bound
                    z = core.upper_z(self.risk)
                    sd = math.log(bw / pw) / z if math.isfinite(bw) and bw > pw * (1 + 1e-6) else math.nan
                if not math.isfinite(sd):              # how sure its model was is not known: no reading
                    continue
                seen = self.seen.setdefault(x["node"], {})
                seen.pop(str(x["mode"]), None)         # the latest reading of a mode, last
                seen[str(x["mode"])] = (math.log(w / pw), sd)
        totals = {"w": sum(x["w"] for x in ok), "j": sum(x["j"] for x in ok),
                  "s": max((x["s"] for x in ok), default=0.0),
                  "predicted_w": sum(x["predicted_w"] for x in ok if not math.isnan(x["predicted_w"])),
                  "predicted_s": max((x["predicted_s"] for x in ok if not math.isnan(x["predicted_s"])),
                                     default=0.0),
                  "cap_w": self.cap_w, "simulated": any(x["simulated"] for x in ok),
                  # the reserve on each node whose unit's factor was not known exactly (reserve())
                  "unmeasured_reserve": self.unmeasured if self.cap_w is not None else 0.0}
        self.history.append({"round": server_round, "nodes": rows, "fleet": totals})
        for x in rows:
            if "error" in x:
                self.log(f"ptui fleet round {server_round}: node {x['node']}: {x['error']}")
            else:
                sim = " SIMULATED" if x["simulated"] else ""
                back = f"; back in {x['end_mode']}" if x["restored"] else ""
                self.log(f"ptui fleet round {server_round}: node {x['node']} {x['device']} {x['mode']}: "
                         f"{x['w']:.2f} W{sim}, {x['s']:.2f} s, {x['j']:.1f} J{back}")
                if not x["feasible"]:         # a deadline or share no mode of its meets: the closest
                    self.log(f"ptui fleet round {server_round}: node {x['node']} did not meet its goal: "
                             f"{x['goal'] or 'no mode meets it'}")
                if x["notes"]:                # e.g. a killed round it undid first
                    self.log(f"ptui fleet round {server_round}: node {x['node']} says: {x['notes']}")
        cap = f" (cap {self.cap_w:g} W)" if self.cap_w is not None else ""
        if not ok:
            self.log(f"ptui fleet round {server_round}: no node reported ptui's figures "
                     f"({len(rows)} repl{'y' if len(rows) == 1 else 'ies'}, each an error above): "
                     f"no fleet figures this round")
        else:
            self.log(f"ptui fleet round {server_round}: fleet {totals['w']:.2f} W{cap}, "
                     f"{totals['j']:.1f} J, round {totals['s']:.2f} s"
                     + (f" ({len(rows) - len(ok)} of {len(rows)} nodes without figures)"
                        if len(ok) < len(rows) else "")
                     + (f"; {missed} of {len(ok)} nodes could not meet their goal (each above)"
                        if (missed := sum(not x["feasible"] for x in ok)) else ""))
        return self.strategy.aggregate_train(server_round, replies)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]):
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        goal = (f"fleet cap {self.cap_w:g} W" if self.cap_w is not None
                else f"round deadline {self.deadline_s:g} s" if self.deadline_s is not None else "")
        self.log(f"PtuiFleet: {goal}{', least energy' if self.objective else ''}, wrapping "
                 f"{type(self.strategy).__name__}")
        self.strategy.summary()
