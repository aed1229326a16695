"""The concurrent decision (training beside inference, decision/concurrent.py) on the simulated
board: standalone profiles of training and of inference per mode, an exhaustive grid (the optimum)
or a coordinate walk that profiles at most WALK_BUDGET modes, the baselines, the --json body.
Every figure here is SIMULATED (the simulator's physics; inference calibrated on a measured sweep)."""
from __future__ import annotations

import numpy as np

from ..board.inference import inference_operating
from ..board.physics import steady_state
from ..catalogue.devices import Device
from ..catalogue.inference import INFER_BATCHES, get_inference
from ..catalogue.modes import Mode
from ..catalogue.workloads import Workload
from ..decision.concurrent import Pick, Standalone, candidates, decide, predict
from ..decision.pareto import InfeasibleError
from ..errors import InputError

WALK_BUDGET = 15


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


def exhaustive(device: Device, train: Workload, infer: str, rate, latency_ms, budget_w):
    """The optimum over PowerTrain's grid of modes x every inference batch (the reference)."""
    st = standalone(device, train, infer, list(device.pt_grid()))
    return decide(st, rate, latency_ms, budget_w), st, len(st.modes)


TRIM = 0.99            # a CPU knob is lowered while training alone keeps this share of its speed
TRIM_STEPS = 2         # bisection steps per CPU knob (cores, CPU clock)


def walk(device: Device, train: Workload, infer: str, rate, latency_ms, budget_w):
    """A coordinate walk over the knobs that profiles at most WALK_BUDGET modes.  Power and
    throughput both rise with every knob, so the best point sits on the power budget's edge, at
    the highest GPU (and memory) clock the budget affords once the knobs that buy little speed
    draw as little as they can:

    1. MAXN; feasible, it is the answer (nothing is faster);
    2. trim the CPU at full GPU and memory clocks: bisect the cores, then the CPU clock (two
       steps each), down towards the lowest setting at which training alone keeps TRIM of its
       speed (it then draws less, and keeps that share at any lower GPU clock, where the host
       matters less still);
    3. bisect the GPU clock for the highest feasible one at full memory clock (none: at the next
       memory clock down, and so on);
    4. one memory step down, and the GPU clock bisected up from there (a memory-light pair may
       afford a faster GPU);
    5. spare profiles: one more CPU step down and the GPU up again.

    Profiling a mode measures every inference batch size, so the batch is chosen whole at each
    profiled mode.  The best feasible profiled point is the pick."""
    grid = device.pt_grid()
    knobs: list[list[float]] = [sorted({float(m.cores) for m in grid}),
                                sorted({m.cpu_mhz for m in grid}),
                                sorted({m.gpu_mhz for m in grid}), sorted({m.mem_mhz for m in grid})]
    top = [len(k) - 1 for k in knobs]
    seen: dict[tuple, tuple[Pick | None, float, float]] = {}
    CORES, CPU, GPU, MEM = 0, 1, 2, 3

    def prof(ix) -> tuple[float, float]:
        """(feasible training samples/s or -1, training-alone samples/s); -1, -1 past the budget."""
        key = tuple(int(v) for v in ix)
        if key not in seen:
            if len(seen) >= WALK_BUDGET:
                return -1.0, -1.0
            m = device.mode(*(knobs[k][key[k]] for k in range(4)))
            st = standalone(device, train, infer, [m])
            alone = float(st.train_batch / st.train_ms[0] * 1000.0)
            try:
                p = decide(st, rate, latency_ms, budget_w)
                seen[key] = (p, p.prediction.train_sps, alone)
            except InfeasibleError:
                seen[key] = (None, -1.0, alone)
        return seen[key][1], seen[key][2]

    def with_(ix, k, v) -> list[int]:
        out = list(ix)
        out[k] = v
        return out

    cur = list(top)
    if prof(cur)[0] > 0:
        return seen[tuple(cur)][0], len(seen)
    ref = prof(cur)[1]
    for k in (CORES, CPU):                      # 2: the lowest setting that keeps TRIM of the speed
        lo, hi = 0, cur[k]
        for _ in range(TRIM_STEPS):             # a coarse bisection: profiles go to the GPU's edge
            if lo >= hi:
                break
            mid = (lo + hi) // 2
            if prof(with_(cur, k, mid))[1] >= TRIM * ref:
                hi = mid
            else:
                lo = mid + 1
        cur[k] = hi

    def gpu_up(base: list[int], lo: int) -> list[int]:
        """The highest feasible GPU index >= lo at `base`'s other knobs, bisected; base if none."""
        best, hi = None, top[GPU]
        while lo <= hi and len(seen) < WALK_BUDGET:
            mid = (lo + hi + 1) // 2
            if prof(with_(base, GPU, mid))[0] > 0:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return base if best is None else with_(base, GPU, best)

    for m in range(top[MEM], -1, -1):                                       # 3
        got = gpu_up(with_(cur, MEM, m), 0)
        if prof(got)[0] > 0:
            cur = got
            break
    if cur[MEM] > 0 and prof(cur)[0] > 0:                                   # 4
        gpu_up(with_(cur, MEM, cur[MEM] - 1), cur[GPU])
    for k in (CPU, CORES):                                                  # 5
        if cur[k] > 0 and len(seen) < WALK_BUDGET - 1:
            gpu_up(with_(cur, k, cur[k] - 1), cur[GPU])
    found = [p for p, v, _ in seen.values() if p is not None and v > 0]
    if not found:
        raise InfeasibleError(f"no profiled mode meets the budgets ({len(seen)} profiled)")
    return max(found, key=lambda p: p.prediction.train_sps), len(seen)


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


def colocate(device: Device, train: Workload, infer_name: str, rate: float, latency_ms: float,
             budget_w: float, strategy: str = "walk") -> dict:
    """The decision's body (contract shape): feasible, goal, the pick, baselines, profiled modes.
    InfeasibleError carries the closest option's point in .closest_point."""
    if not (rate > 0 and latency_ms > 0 and budget_w > 0):
        raise InputError("--rate, --latency-ms and --budget-w must be positive numbers")
    if strategy not in ("walk", "exhaustive"):
        raise InputError(f"--strategy must be walk or exhaustive, got {strategy!r}")
    infer = get_inference(infer_name).name
    goal = {"rate_per_s": rate, "latency_ms": latency_ms, "budget_w": budget_w,
            "objective": "training throughput", "latency_rule": "p99 within the budget"}
    try:
        if strategy == "exhaustive":
            pick, _st, profiled = exhaustive(device, train, infer, rate, latency_ms, budget_w)
        else:
            pick, profiled = walk(device, train, infer, rate, latency_ms, budget_w)
    except InfeasibleError as e:
        e.closest_point = _closest(device, train, infer, rate, latency_ms)  # type: ignore[attr-defined]
        raise
    return {"feasible": True, "simulated": True, "goal": goal, "strategy": strategy,
            "profiled_modes": profiled, "train_workload": train.name,
            "train_batch_size": train.batch_size, "infer_workload": infer,
            "pick": _point(pick, train.batch_size),
            "baselines": _baselines(device, train, infer, rate, latency_ms, budget_w)}


def _baselines(device: Device, train: Workload, infer: str, rate, latency_ms, budget_w) -> dict:
    """MAXN with the largest feasible inference batch, the best NVIDIA preset, training alone."""
    st = standalone(device, train, infer, [device.maxn])
    maxn = None
    for b in reversed(INFER_BATCHES):
        pr = predict(st, 0, rate, latency_ms, b)
        if pr.over_budget <= 0.01:
            maxn = _point(Pick(0, device.maxn, b, pr), train.batch_size)
            if maxn is not None:
                maxn["within_power_budget"] = pr.power_w <= budget_w
            break
    presets = [p.mode for p in device.presets]
    sp = standalone(device, train, infer, presets)
    try:
        bp = decide(sp, rate, latency_ms, budget_w)
        pre = device.preset_for(bp.mode)
        best_preset = {**(_point(bp, train.batch_size) or {}), "preset": None if pre is None else pre.name}
    except InfeasibleError:
        best_preset = None
    ok = st.train_w <= budget_w
    alone = {"mode": device.maxn.as_dict(), "key": device.maxn.key,
             "train_samples_per_s": round(float(train.batch_size / st.train_ms[0] * 1000.0), 3),
             "power_w": round(float(st.train_w[0]), 3), "within_power_budget": bool(ok[0]),
             "note": "training alone at MAXN, no inference served"}
    return {"maxn_largest_feasible_batch": maxn, "best_preset": best_preset, "training_alone": alone}


def _closest(device: Device, train: Workload, infer: str, rate, latency_ms) -> dict | None:
    """The closest option to budgets nothing meets: the lowest-power grid (mode, b) whose latency
    holds, else the (mode, b) with the lowest predicted p99."""
    st = standalone(device, train, infer, list(device.pt_grid()))
    try:
        p = decide(st, rate, latency_ms, 1e9)
    except InfeasibleError:
        best = None
        for b in INFER_BATCHES:
            pr = predict(st, int(np.argmin(st.train_ms)), rate, latency_ms, b)
            if best is None or pr.p99_ms < best.prediction.p99_ms:
                i = int(np.argmin(st.train_ms))
                best = Pick(i, st.modes[i], b, pr)
        return _point(best, train.batch_size)
    # the lowest mean power among latency-feasible rows of the grid
    tab, ok = candidates(st, rate, latency_ms)
    if not ok.any():
        return _point(p, train.batch_size)
    k = int(np.flatnonzero(ok)[np.argmin(tab.power_w[ok])])
    r, b = k % len(st.modes), int(tab.batches[k])
    return _point(Pick(r, st.modes[r], b, predict(st, r, rate, latency_ms, b)), train.batch_size)
