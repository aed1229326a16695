"""The concurrent decision (training beside inference, decision/concurrent.py) on the simulated
board: standalone profiles of training and of inference per mode, an exhaustive grid (the optimum)
or a coordinate walk that profiles at most WALK_BUDGET modes, the baselines, the --json body.
Every figure here is SIMULATED (the simulator's physics; inference calibrated on a measured sweep)."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..board.backends import open_backend
from ..board.inference import inference_operating
from ..board.physics import steady_state
from ..catalogue.devices import Device
from ..catalogue.inference import INFER_BATCHES, get_inference
from ..catalogue.modes import Mode
from ..catalogue.workloads import Workload
from ..decision.concurrent import (
    MISS_MARGIN,
    MISS_MAX,
    PREDICT_MAX,
    Pick,
    Standalone,
    admitted,
    candidates,
    decide,
    predict,
    slack,
)
from ..decision.goals import least
from ..decision.pareto import InfeasibleError
from ..errors import InputError, Interrupted
from ..profiling.userscript import WHATIF_LABEL, command_text, count_script, describe_model, whatif_workload
from .contract import infeasible

WALK_BUDGET = 15

# Where standalone profiles come from: modes -> training alone and inference alone at every
# inference batch size it profiles (the simulator's: INFER_BATCHES) at those modes.  The default is
# the simulator (`standalone`); a benchmark passes another board's truth (benchmarks/eval_concurrent.py
# --truth indep), a caller a profiler.  A source that measures states the relative standard error
# of its power readings (Standalone.power_se, from its samples' spread): the decision then holds
# the measured power to the budget by two of them (decision.concurrent.POWER_SE_K).
Measure = Callable[[list[Mode]], Standalone]


def standalone(device: Device, train: Workload, infer: str, modes: list[Mode]) -> Standalone:
    """Training alone and inference alone at `modes`, from the simulator (noise-free)."""
    a = np.array([m.as_tuple() for m in modes], float).T
    op = steady_state(device, train, *a)
    im, iw = [], []
    for b in INFER_BATCHES:
        t, p = inference_operating(device, infer, b, *a)
        im.append(np.broadcast_to(t, (len(modes),)))
        iw.append(np.broadcast_to(p, (len(modes),)))
    return Standalone(list(modes), int(train.batch_size), np.asarray(op.time_ms, float),
                      np.asarray(op.power_w, float), INFER_BATCHES, np.array(im).T, np.array(iw).T)


def source(device: Device, train: Workload | None, infer: str, measure: Measure | None = None) -> Measure:
    """`measure` when given, else the simulator's standalone profiles of (train, infer)."""
    if measure is not None:
        return measure
    if train is None:
        raise InputError("a training workload or a measure is needed")
    return lambda modes: standalone(device, train, infer, list(modes))


def exhaustive(device: Device, train: Workload | None, infer: str, rate, latency_ms, budget_w,
               measure: Measure | None = None):
    """The optimum over PowerTrain's grid of modes x every inference batch (the reference), on
    `measure`'s profiles (default: the simulator's)."""
    st = source(device, train, infer, measure)(list(device.pt_grid()))
    return decide(st, rate, latency_ms, budget_w), st, len(st.modes)


SEED_MODES = 5         # modes profiled before the first fit (MAXN among them)
RBF_LENGTH = 0.15      # the residual interpolation's length scale, in clocks scaled to [0, 1]
NORM_P = (1.5, 2.0, 3.0, 4.0)   # the smooth maximum's exponents a time fit chooses among


def _time_terms(u: np.ndarray, p: float) -> np.ndarray:
    """(t / t_MAXN)^p's terms for clocks u scaled to [0, 1] (cores, CPU, GPU, memory): work on the
    GPU (1/f_GPU), on the memory (1/f_EMC), on the host (1/f_CPU), the data pipeline spread over
    the cores (1/(n f_CPU)), DRAM stalls of the host (1/sqrt(f_CPU f_EMC)) and of the GPU; their
    sum is the p-norm smooth maximum of overlapping activities (board/physics.py's shape)."""
    g, c, m, n = 1.0 / u[:, 2], 1.0 / u[:, 1], 1.0 / u[:, 3], 1.0 / u[:, 0]
    return np.column_stack([np.ones(len(u)), g ** p, m ** p, c ** p, (c * n) ** p,
                            (c * m) ** (p / 2), (g * m) ** (p / 2)])


_GPU_TERMS = (1, 2, 6)


def _fit_time(u_fit: np.ndarray, y: np.ndarray, u_all: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A time (ms) at every mode and the GPU's share of it: t^p a non-negative sum of _time_terms
    (non-negative least squares), p the exponent of NORM_P that fits the profiled modes best."""
    from scipy.optimize import nnls
    s = float(y.max())
    best: tuple[float, float, np.ndarray] | None = None
    for p in NORM_P:
        f = _time_terms(u_fit, p)
        c, _ = nnls(f, (y / s) ** p)
        err = float(np.mean(np.log(np.maximum(f @ c, 1e-12) ** (1.0 / p) * s / y) ** 2))
        if best is None or err < best[0]:
            best = (err, p, c)
    assert best is not None
    _, p, c = best
    f = _time_terms(u_all, p)
    tot = np.maximum(f @ c, 1e-12)
    gpu = f[:, _GPU_TERMS] @ c[list(_GPU_TERMS)]
    return tot ** (1.0 / p) * s, np.clip(gpu / tot, 0.0, 1.0) ** (1.0 / p)


def _power_terms(u: np.ndarray, t: np.ndarray, util: np.ndarray) -> np.ndarray:
    """Mean power's terms: static and clock-tree power (polynomials of the clocks: voltage rises
    with frequency), energy per minibatch spread over its time (terms x t_min / t) and the GPU's
    switching while busy (x its share of the time).  Between the two memory clocks the walk
    profiles (those at or above SEED_FLOOR of the top) the linear memory term is any step a
    memory controller's voltage level takes; what it needs is modes that differ in the memory
    clock alone (_probe)."""
    g, c, m, n = u[:, 2], u[:, 1], u[:, 3], u[:, 0]
    r = float(t.min()) / t
    return np.column_stack([np.ones(len(u)), m, n, c * n, c ** 3, g, g ** 3, r, g * r, g ** 2 * r,
                            g ** 3 * r, c * r, c ** 2 * r, m * r, g * util, g ** 3 * util])


def _fit_predict(rows: list[int], y_fit: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Every profiled quantity predicted at every grid mode (u: the grid's clocks scaled to [0, 1];
    rows: the profiled modes' rows; y_fit's columns: training time, training power, inference time
    at each batch size, inference power at each): each time by _fit_time, each power by
    non-negative least squares on _power_terms with its time's prediction, then a Gaussian
    radial-basis interpolation of the log residuals over u, so a profiled mode is predicted as
    measured and its neighbours lean towards it."""
    from scipy.optimize import nnls
    nb = (y_fit.shape[1] - 2) // 2
    pairs = [(0, 1)] + [(2 + j, 2 + nb + j) for j in range(nb)]
    out = np.empty((len(u), y_fit.shape[1]))
    for qt, qp in pairs:
        t, util = _fit_time(u[rows], y_fit[:, qt], u)
        f = _power_terms(u, t, util)
        c, _ = nnls(f[rows], y_fit[:, qp])
        out[:, qt], out[:, qp] = t, np.maximum(f @ c, 1e-3)
    res = np.log(y_fit / out[rows])
    d2 = ((u[rows][:, None, :] - u[rows][None, :, :]) ** 2).sum(-1)
    k = np.exp(-d2 / (2.0 * RBF_LENGTH ** 2)) + 1e-6 * np.eye(len(rows))
    alpha = np.linalg.solve(k, res)
    d2a = ((u[:, None, :] - u[rows][None, :, :]) ** 2).sum(-1)
    return out * np.exp(np.exp(-d2a / (2.0 * RBF_LENGTH ** 2)) @ alpha)


SEED_FLOOR = 0.3       # seeds and exploration keep every clock at or above this share of its top


def _spread(u: np.ndarray, have: list[int], n: int, allow: np.ndarray | None = None) -> list[int]:
    """n more grid rows, each the farthest (scaled clocks) from those chosen so far (maximin),
    among the modes whose clocks are all at least SEED_FLOOR of their top (the slowest modes meet
    no latency budget of interest and teach the fit little about the modes that do) and, where
    `allow` (a mask over the grid) leaves any of those, among the allowed ones."""
    d = np.min(((u[:, None, :] - u[None, have, :]) ** 2).sum(-1), axis=1)
    floor = (u[:, 1:] < SEED_FLOOR).any(1)
    if allow is not None and (allow & ~floor & (d > 0)).any():
        floor |= ~allow
    d[floor] = -1.0
    out: list[int] = []
    for _ in range(n):
        j = int(np.argmax(d))
        out.append(j)
        d = np.minimum(d, ((u - u[j]) ** 2).sum(-1))
    return out


def _may_meet(pst: Standalone, latency_ms, budget_w) -> np.ndarray:
    """The grid modes that may meet both budgets by the predicted standalone figures: a slack
    (decision.concurrent.slack) at inference batch 1, i.e. training's and one inference
    minibatch's times fit in the latency budget, and the cheaper activity within the power budget.
    Exploring elsewhere profiles modes whose training alone misses the latency budget."""
    return ((slack(pst.train_ms, pst.infer_ms[:, 0], latency_ms) >= 0)
            & (np.minimum(pst.train_w, pst.infer_w.min(1)) <= budget_w))


OPTIMISM = (0.0, 0.02, 0.05, 0.1, 0.2)   # with nothing predicted better, modes this much over
CHECKS = 40            # predicted (mode, b) rows whose latency distribution a step computes at most


def _next_mode(pst: Standalone, rows: list[int], rate, latency_ms, budget_w, floor: float) -> int | None:
    """The unprofiled grid row whose predicted best (mode, b) promises the most training
    throughput above `floor` within budget_w, its latency checked on the predicted distribution
    (the CHECKS best predicted rows are tried); None when no row promises more."""
    tb = pst.train_batch
    # rows that could beat the floor: training alone faster, the cheaper activity within budget
    alone = tb / pst.train_ms * 1000.0
    cheap = np.minimum(pst.train_w, pst.infer_w.min(1))
    live = np.setdiff1d(np.flatnonzero((alone > floor) & (cheap <= budget_w)), rows)
    if not len(live):
        return None
    tab, ok = candidates(pst, rate, latency_ms, live)
    ok &= (tab.power_w <= budget_w) & (tab.time_ms < (tb / floor * 1000.0 if floor else np.inf))
    order = np.flatnonzero(ok)[np.argsort(tab.time_ms[ok], kind="stable")]
    for k in order[:CHECKS]:
        r = int(live[k % len(live)])
        if admitted(predict(pst, r, rate, latency_ms, int(tab.batches[k]))):
            return r
    return None


PROBE_TIGHT = 0.9      # a walk probes the best pick's cheaper neighbours when its mean power is
                       # at least this share of the budget (_probe)


def _probe(grid: list[Mode], have: Pick | None, meas: dict, held_w: float, kind: str) -> int | None:
    """The grid row of the best pick's mode made cheaper along one clock (`kind` "mem": the next
    lower memory clock at or above SEED_FLOOR of its top; "cores": half the cores), when the power
    budget binds (the pick within PROBE_TIGHT of it) and that mode is not profiled.  The modes a
    walk profiles cluster around its picks and differ in several clocks at once, so the fit cannot
    tell what one of them costs or saves on its own: the memory clock's power (a memory
    controller's voltage comes in a few levels, one level down can be a step cheaper) or what a
    few cores less slow a data pipeline.  One mode that differs from the pick in that clock alone
    tells the fit whether the power it saves buys more elsewhere."""
    if have is None or have.prediction.power_w < PROBE_TIGHT * held_w:
        return None
    m = have.mode
    if kind == "mem":
        top = max(x.mem_mhz for x in grid)
        lower = [x.mem_mhz for x in grid if SEED_FLOOR * top <= x.mem_mhz < m.mem_mhz]
        want = None if not lower else (m.cores, m.cpu_mhz, m.gpu_mhz, max(lower))
    else:
        fewer = [x.cores for x in grid if x.cores <= m.cores // 2]
        want = None if not fewer else (max(fewer), m.cpu_mhz, m.gpu_mhz, m.mem_mhz)
    j = next((i for i, x in enumerate(grid) if x.as_tuple() == want), None)
    return None if j is None or j in meas else j


PROBES = ("mem", "cores")   # the cheaper neighbours a walk probes, each once at most


def walk(device: Device, train: Workload | None, infer: str, rate, latency_ms, budget_w,
         keep: dict | None = None, measure: Measure | None = None):
    """A model-guided search that profiles at most WALK_BUDGET modes (each measuring training alone
    and inference alone at every batch size).  A coordinate walk's bisections assume feasibility
    falls as a clock rises; the latency budget also bounds the clocks from below (too slow a mode
    misses it), so the feasible region is a band, and bisections miss it or land low.  Instead:

    1. MAXN (feasible, it is not necessarily the answer: a slower mode may afford a larger
       inference batch within the power budget, and train faster beside it);
    2. SEED_MODES - 1 more modes spread over the grid (maximin over the clocks scaled to [0, 1]);
    3. fit every standalone quantity (training time and power alone, inference time and power at
       each batch size) over the profiled modes (_fit_predict), predict them at every grid mode,
       and run the decision (candidates, then decide's latency test) on the predicted grid;
    4. profile the best predicted (mode, b) not yet profiled that promises more than the best
       profiled pick, refit, and again; with nothing promising more, modes predicted up to
       OPTIMISM over the budget (or under the pick); stop when none is left or the budget is
       spent (before any feasible point, a further spread-out mode among those that may meet
       the budgets, _may_meet); while the best pick's power binds, its cheaper neighbours along
       the memory clock and the cores are profiled first, each once (_probe).  Measured
       profiles are held to the budget by their power margin (Standalone.power_margin).

    The pick is the best feasible PROFILED point, decided on its measured figures: a predicted mode
    is never picked.  Returns (pick, modes profiled); `keep` (a dict), when given, gets the profiles
    (grid row -> one-row Standalone), for a later re-decision without profiling.  `measure` (modes
    -> Standalone) is where the profiles come from: the simulator by default, called once per
    profiled mode with that one mode."""
    measure = source(device, train, infer, measure)
    grid = list(device.pt_grid())
    xs = np.array([m.as_tuple() for m in grid], float)
    u = xs / xs.max(0)
    meas: dict[int, Standalone] = {}
    picks: dict[int, Pick | None] = {}

    def prof(i: int) -> None:
        st = measure([grid[i]])
        meas[i] = st
        try:
            picks[i] = decide(st, rate, latency_ms, budget_w)
        except InfeasibleError:
            picks[i] = None

    def best() -> Pick | None:
        # the decisions' tie rule (goals.least): of picks training equally fast, the least power;
        # the first found of them was taken, so colocate picked 12 cores where the demo, deciding
        # over the same profiles, ran 6 at the same 208.8 samples/s and 0.3 W less (a user's trial)
        found = [p for p in picks.values() if p is not None]
        if not found:
            return None
        return found[least(np.array([1.0 / max(p.prediction.train_sps, 1e-12) for p in found]),
                           np.array([p.prediction.power_w for p in found]))]

    top = grid.index(device.maxn)
    prof(top)
    for i in _spread(u, [top], SEED_MODES - 1):
        prof(i)
    batches = meas[top].batches
    nb = len(batches)
    tb = int(meas[top].train_batch)
    probes = list(PROBES)
    while len(meas) < WALK_BUDGET:
        # measured profiles are held to the budget by their power margin (decide): search the
        # predicted grid for the power a profiled mode would be held to (the median margin so far)
        held_w = budget_w / float(np.median(Standalone.stack(meas.values()).power_margin()))
        probe = _probe(grid, best(), meas, held_w, probes[0]) if probes else None
        if probe is not None:
            probes.pop(0)
            prof(probe)
            continue
        rows = list(meas)
        y = np.array([np.concatenate([[meas[i].train_ms[0], meas[i].train_w[0]],
                                      meas[i].infer_ms[0], meas[i].infer_w[0]]) for i in rows])
        pred = _fit_predict(rows, y, u)
        pred[rows] = y
        pst = Standalone(grid, tb, pred[:, 0], pred[:, 1], batches,
                         pred[:, 2:2 + nb], pred[:, 2 + nb:])
        have = best()
        floor = 0.0 if have is None else have.prediction.train_sps
        nxt = None
        for tol in OPTIMISM:
            nxt = _next_mode(pst, rows, rate, latency_ms, held_w * (1.0 + tol), floor * (1.0 - tol))
            if nxt is not None:
                break
        if nxt is None:
            if have is not None:
                break
            # nothing predicted feasible yet: explore, among the modes that may meet the budgets
            nxt = _spread(u, rows, 1, _may_meet(pst, latency_ms, held_w * (1.0 + OPTIMISM[-1])))[0]
        prof(nxt)
    if keep is not None:
        keep.update(meas)
    pick = best()
    if pick is None:
        raise InfeasibleError(f"no profiled mode meets the budgets ({len(meas)} profiled)")
    return pick, len(meas)


def _point(p: Pick | None, train_batch: int | None = None) -> dict | None:
    """A pick as the contract's decision point: mode, key, batch_size (the inference batch),
    source, time_ms (the training minibatch's effective time under the interleaving) and power_w
    (mean), plus the interleaving's figures."""
    if p is None:
        return None
    pr = p.prediction
    t_ms = (train_batch / pr.train_sps * 1000.0 if train_batch and pr.train_sps > 0 else None)
    return {"mode": p.mode.as_dict(), "key": p.mode.key, "batch_size": p.batch,
            "source": "predicted", "time_ms": None if t_ms is None else round(t_ms, 4),
            "train_samples_per_s": round(pr.train_sps, 3),
            "latency_p50_ms": round(pr.p50_ms, 3), "latency_p99_ms": round(pr.p99_ms, 3),
            "over_budget": round(pr.over_budget, 5), "power_w": round(pr.power_w, 3),
            "inference_share": round(pr.infer_share, 4), "mean_inference_batch": round(pr.mean_batch, 3)}


SCRIPT_LABEL = "the script's counted model (SIMULATED)"


def script_train(device_name: str, argv, log_path: Path, *, batch_size: int | None = None,
                 startup_timeout: float | None = None,
                 notify: Callable[[str], None] | None = None) -> tuple[Workload, dict]:
    """The training workload of a user's script for the concurrent decision on the simulated board:
    the probe counts one iteration of the command (profiling.userscript.count_script: the script
    runs on this machine, under its own Python, and is stopped, its process group with it, once it
    has been counted) and the counts become the workload the what-if profile simulates
    (userscript.whatif_workload).  Returns (the workload, what was counted: the body's
    `train_script`).  `batch_size`: the samples one iteration holds where the probe sees no
    DataLoader (a DataLoader's batch wins); without either the unit is one iteration."""
    backend, _ = open_backend("sim", device_name)
    try:
        info, timed = count_script(backend, list(argv), log_path, startup_timeout=startup_timeout,
                                   notify=notify)
    finally:
        backend.close()
    seen = int(info.get("samples") or 0)
    notes = []
    if seen <= 0 and not batch_size:
        notes.append("no DataLoader seen: throughputs are iterations/s; --batch-size N names the "
                     "samples one iteration holds")
    if seen <= 0 and batch_size:
        info = {**info, "samples": int(batch_size)}
        source = f"--batch-size {batch_size} (no DataLoader seen)"
    elif seen > 0:
        source = "the DataLoader's batch"
        if batch_size and batch_size != seen:
            notes.append(f"--batch-size {batch_size} ignored: the probe saw the DataLoader's batch of "
                         f"{seen} samples per iteration")
    else:
        source = None
    train = whatif_workload(info, command=command_text(argv))
    samples = int(info.get("samples") or 0)
    about = {
        "label": SCRIPT_LABEL, "whatif": WHATIF_LABEL, "command": command_text(argv),
        "counted": describe_model(info), "timed": timed,
        "gflop_per_iteration": round(float(info.get("flops") or 0) / 1e9, 6),
        "parameters": int(info.get("params") or 0),
        "batch_size": samples or None, "batch_size_from": source,
        "unit": "sample" if samples else "iteration",
        "batch": (f"{samples} samples per iteration ({source})" if samples
                  else "unknown: one iteration is the unit"),
        "notes": notes,
    }
    return train, about


def colocate_goal(rate: float, latency_ms: float, budget_w: float) -> dict:
    """The concurrent decision's goal (the body's `goal`); InputError for a budget that is not a
    positive number."""
    if not (rate > 0 and latency_ms > 0 and budget_w > 0):
        raise InputError("--rate, --latency-ms and --budget-w must be positive numbers")
    return {"rate_per_s": rate, "latency_ms": latency_ms, "budget_w": budget_w,
            "objective": "training throughput", "latency_rule": "p99 within the budget"}


def colocate(device: Device, train: Workload, infer_name: str, rate: float, latency_ms: float,
             budget_w: float, strategy: str = "walk", keep: dict | None = None,
             train_script: dict | None = None, measure: Measure | None = None,
             stop: Callable[[], bool] | None = None) -> dict:
    """The decision's body (contract shape): feasible, goal, the pick, baselines, profiled modes.
    InfeasibleError carries the closest option's point in .closest_point.  `keep` (a dict), when
    given, gets the standalone profiles the decision took under "profiles" (a Standalone).
    `train_script`: what script_train counted, when the training workload is a user's script (the
    body's `train_script`; its `unit` says whether throughputs are samples or iterations).
    `measure`: where every profile comes from (default the simulator; `source`).  `stop`, when
    given, is asked before each profile: true ends the decision with Interrupted (the app's quit:
    a walk runs 10-20 s on an Orin AGX's grid, and quitting waited for it)."""
    goal = colocate_goal(rate, latency_ms, budget_w)
    if strategy not in ("walk", "exhaustive"):
        raise InputError(f"--strategy must be walk or exhaustive, got {strategy!r}")
    infer = get_inference(infer_name).name
    measure = _stoppable(source(device, train, infer, measure), stop)
    meas: dict = {}
    try:
        if strategy == "exhaustive":
            pick, st, profiled = exhaustive(device, train, infer, rate, latency_ms, budget_w, measure)
            meas = {0: st}
        else:
            pick, profiled = walk(device, train, infer, rate, latency_ms, budget_w, keep=meas,
                                  measure=measure)
    except InfeasibleError as e:
        closest = _closest(device, train, infer, rate, latency_ms, measure)
        why = _why_infeasible(closest, rate, latency_ms, budget_w, str(e))
        err = InfeasibleError(why, e.table, e.closest)
        err.closest_point = closest  # type: ignore[attr-defined]
        raise err from e
    finally:
        if keep is not None and meas:
            keep["profiles"] = Standalone.stack(meas[i] for i in sorted(meas))
    body = {"feasible": True, "simulated": True, "goal": goal, "strategy": strategy,
            "profiled_modes": profiled, "train_workload": train.name,
            "train_batch_size": train.batch_size, "infer_workload": infer,
            "pick": _point(pick, train.batch_size),
            "baselines": _baselines(device, train, infer, rate, latency_ms, budget_w, measure)}
    if train_script is not None:
        body["train_batch_size"] = train_script["batch_size"]
        body["train_script"] = train_script
    return body


def _why_infeasible(closest: dict | None, rate, latency_ms, budget_w, found: str) -> str:
    """One line for a decision nothing meets: which budget binds, and the closest option (on the
    simulator's whole grid) with the figure that misses."""
    if closest is None:
        return found
    # the mode in words, as pareto and tune name one (the document's closest keeps its key)
    near = f"{Mode.from_key(closest['key']).describe()} with inference batch {closest['batch_size']}"
    if not closest["meets_latency"]:
        p99 = closest["latency_p99_ms"]
        # 'over_margin' is the share of requests later than the budget less ptui's tail margin
        # (decide's second test); it read '100 % late, 100 % inside the margin', a contradiction
        tail = (f"p99 {p99:.1f} ms" if math.isfinite(p99) else
                "no p99: requests arrive faster than inference serves them, and the queue grows")
        return (f"no mode and inference batch keeps p99 latency within {latency_ms:g} ms at {rate:g} "
                f"requests/s with ptui's tail margin; closest: {near}: {tail}; "
                f"{100 * closest['over_budget']:.1f} % of requests later than {latency_ms:g} ms (the "
                f"decision allows {100 * MISS_MAX:g} %) and {100 * closest['over_margin']:.1f} % later "
                f"than {latency_ms:g} ms less the tail margin (it allows {100 * MISS_MARGIN:g} %) "
                f"(SIMULATED)")
    return (f"no mode within {budget_w:g} W keeps p99 latency within {latency_ms:g} ms at "
            f"{rate:g} requests/s; the least power that does: {closest['power_w']:.1f} W, {near}, "
            f"{closest['train_samples_per_s']:.1f} training samples/s (SIMULATED)")


def colocate_profiles(st: Standalone, rate: float, latency_ms: float, budget_w: float,
                      about: dict | None = None) -> dict:
    """The decision again from saved standalone profiles (a changed rate or budget): decide over
    the modes they hold, nothing profiled; no baselines (they would need modes the file lacks)."""
    goal = colocate_goal(rate, latency_ms, budget_w)
    about = about or {}
    try:
        pick = decide(st, rate, latency_ms, budget_w)
    except InfeasibleError as e:
        # the walk's reason, over the saved modes: it said pareto's 'no mode stays within 5 W; the
        # lowest-power mode is ... 638 ms (predicted)', a training time for a latency budget
        closest = _closest_in(st, rate, latency_ms) if len(st.modes) else None
        err = InfeasibleError(_why_infeasible(closest, rate, latency_ms, budget_w, str(e)),
                              e.table, e.closest)
        err.closest_point = closest  # type: ignore[attr-defined]
        raise err from e
    return {"feasible": True, "simulated": bool(about.get("simulated", True)), "goal": goal,
            "strategy": "saved profiles", "profiled_modes": 0, "profiles_modes": len(st.modes),
            "train_workload": about.get("train_workload"), "train_batch_size": st.train_batch,
            "infer_workload": about.get("infer_workload"), "pick": _point(pick, st.train_batch),
            "baselines": {}}


def _baselines(device: Device, train: Workload | None, infer: str, rate, latency_ms, budget_w,
               measure: Measure | None = None) -> dict:
    """MAXN with the largest feasible inference batch, the best NVIDIA preset, training alone
    (profiles from `measure`, default the simulator)."""
    measure = source(device, train, infer, measure)
    st = measure([device.maxn])
    tb = st.train_batch
    maxn = None
    for b in reversed(st.batches):
        pr = predict(st, 0, rate, latency_ms, b)
        if pr.over_budget <= 0.01:
            maxn = _point(Pick(0, device.maxn, b, pr), tb)
            if maxn is not None:
                maxn["within_power_budget"] = pr.power_w <= budget_w
            break
    presets = [p.mode for p in device.presets]
    sp = measure(presets)
    try:
        bp = decide(sp, rate, latency_ms, budget_w)
        pre = device.preset_for(bp.mode)
        best_preset = {**(_point(bp, tb) or {}), "preset": None if pre is None else pre.name}
    except InfeasibleError:
        best_preset = None
    ok = st.train_w <= budget_w
    alone = {"mode": device.maxn.as_dict(), "key": device.maxn.key,
             "train_samples_per_s": round(float(tb / st.train_ms[0] * 1000.0), 3),
             "power_w": round(float(st.train_w[0]), 3), "within_power_budget": bool(ok[0]),
             "note": "training alone at MAXN, no inference served"}
    return {"maxn_largest_feasible_batch": maxn, "best_preset": best_preset, "training_alone": alone}


def _closest(device: Device, train: Workload | None, infer: str, rate, latency_ms,
             measure: Measure | None = None) -> dict | None:
    """The closest option to budgets nothing meets, on the simulator's grid: the lowest-power
    (mode, b) whose latency holds (decide's test: the screen, then the latency distribution),
    else the fastest-training mode's b of lowest p99; `meets_latency` says which."""
    return _closest_in(source(device, train, infer, measure)(list(device.pt_grid())), rate, latency_ms)


def _closest_in(st: Standalone, rate, latency_ms) -> dict | None:
    """_closest over the modes of standalone profiles `st` (the grid's, or a saved file's)."""
    tb = st.train_batch
    tab, ok = candidates(st, rate, latency_ms)
    where = np.flatnonzero(ok)
    for k in where[np.argsort(tab.power_w[where], kind="stable")][:PREDICT_MAX]:
        r, b = int(k) % len(st.modes), int(tab.batches[k])
        pr = predict(st, r, rate, latency_ms, b)
        if admitted(pr):
            return {**(_point(Pick(r, st.modes[r], b, pr), tb) or {}), "meets_latency": True}
    i = int(np.argmin(st.train_ms))
    best = min((Pick(i, st.modes[i], b, predict(st, i, rate, latency_ms, b)) for b in st.batches),
               key=lambda p: p.prediction.p99_ms)
    return {**(_point(best, tb) or {}), "meets_latency": False,
            "over_margin": round(best.prediction.over_margin, 5)}


def goal_text(rate: float, latency_ms: float, budget_w: float) -> str:
    """The goal of a concurrent decision in words (the document's `goal` when nothing meets it)."""
    return (f"most training throughput, p99 latency <= {latency_ms:g} ms at {rate:g} req/s, "
            f"mean power <= {budget_w:g} W")


@dataclass(frozen=True)
class ColocateView:
    """What the app shows of a concurrent decision: the decision document's body (feasible or not,
    as `ptui colocate --json` prints it) and, per inference batch b, the upper edge of the region
    whose latency holds: (mean power W, training samples/s) of the grid's (mode, b), each checked
    on its latency distribution (SIMULATED)."""
    body: dict
    edges: dict[int, tuple[np.ndarray, np.ndarray]]


def _edge(st: Standalone, tab, k: np.ndarray, rate, latency_ms) -> tuple[np.ndarray, np.ndarray]:
    """The staircase of rows k (one inference batch) that no other row beats on both power and
    throughput, keeping only those whose latency holds on its distribution."""
    sps = st.train_batch / tab.time_ms[k] * 1000.0
    order = np.argsort(tab.power_w[k], kind="stable")
    w, y, top = [], [], -np.inf
    for j in order:
        if sps[j] <= top:
            continue
        r, b = int(k[j]) % len(st.modes), int(tab.batches[k[j]])
        if admitted(predict(st, r, rate, latency_ms, b)):
            top = float(sps[j])
            w.append(float(tab.power_w[k[j]]))
            y.append(top)
    return np.array(w), np.array(y)


def _stoppable(measure: Measure, stop: Callable[[], bool] | None) -> Measure:
    """`measure`, asking `stop` first (None: as it is)."""
    if stop is None:
        return measure

    def asked(modes):
        if stop():
            raise Interrupted("the colocate decision was stopped")
        return measure(modes)
    return asked


def colocate_view(device: Device, train: Workload, infer_name: str, rate: float, latency_ms: float,
                  budget_w: float, strategy: str = "walk",
                  stop: Callable[[], bool] | None = None) -> ColocateView:
    """The decision (or, where nothing meets the budgets, its infeasible body with the closest
    option) and the feasible region's edges over PowerTrain's grid x every inference batch.
    `stop`: as colocate's (Interrupted when it says so)."""
    try:
        body = colocate(device, train, infer_name, rate, latency_ms, budget_w, strategy, stop=stop)
    except InfeasibleError as e:
        closest = getattr(e, "closest_point", None)
        body = {**infeasible(goal_text(rate, latency_ms, budget_w), str(e), closest), "simulated": True}
    infer = get_inference(infer_name).name
    st = _stoppable(source(device, train, infer), stop)(list(device.pt_grid()))
    tab, ok = candidates(st, rate, latency_ms)
    edges = {}
    for b in INFER_BATCHES:
        k = np.flatnonzero(ok & (tab.batches == b))
        if len(k):
            edges[b] = _edge(st, tab, k, rate, latency_ms)
    return ColocateView(body, {b: e for b, e in edges.items() if len(e[0])})
