"""The fleet's pool as use cases: send a profile's rows, list and pull the fleet's rows, and the
pooled fit (a board's model from its own few rows and the fleet's, prediction/pooled.py)."""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..board.csvio import (
    OUTSIDE_WARN,
    SPREAD_COLS,
    _distinct_rows,
    column_values,
    measured_uncertainty,
    outside_note,
    profile_batch_sizes,
    profile_boards,
    profile_tags,
    profile_time,
)
from ..catalogue.workloads import SCRIPT_WORKLOAD, WORKLOADS, workload_key, workload_name
from ..errors import InputError
from ..paths import model_dir
from ..prediction.pooled import Rows, fit_pooled
from ..prediction.predictor import bundled_reference, load_model
from ..profiling.pool import (  # noqa: F401 (façade)
    NoPoolFile,
    Pool,
    PoolRow,
    board_id,
    board_seed,
    check_url,
    open_pool,
    pool_url,
    redact,
)
from ..profiling.profiler import keep_timed
from .fit import (
    FitOutcome,
    check_spec_batch,
    load_reference,
    remember_epoch_size,
    roofline_of,
    workload_spec,
)

SHAPE_WORKLOAD = "resnet18"    # whose published counts give a pooled fit's shape without a spec

ROW_KEYS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "time_ms", "power_w", "time_ms_p25",
            "time_ms_p75", "power_w_std", "n_minibatches", "n_power")


def _profile_rows(profile: Path | str, device) -> tuple[list[dict], dict]:
    """A one-batch-size profile CSV's rows (dicts, in file order) and its tags."""
    sizes = profile_batch_sizes(profile)
    if len(sizes) > 1:
        raise InputError(f"{profile} holds batch sizes {','.join(map(str, sizes))}; the pool takes a "
                         f"profile of one batch size")
    workloads = sorted({workload_key(w) for w in column_values(profile, "workload")})
    if len(workloads) > 1:
        raise InputError(f"{profile} holds rows of workloads {', '.join(workloads)}; the pool takes a "
                         f"profile of one workload")
    seen = _distinct_rows(profile, device, 1, SPREAD_COLS)
    rows = []
    for m in seen:
        last = seen[m][1]
        rows.append({"cores": m.cores, "cpu_mhz": m.cpu_mhz, "gpu_mhz": m.gpu_mhz, "mem_mhz": m.mem_mhz,
                     **{k: last.get(k) for k in ROW_KEYS[4:]}})
    tags = profile_tags(profile)
    if sizes:
        tags["batch_size"] = str(int(sizes[0]))
    return rows, tags


def _check_board(profile, board: str) -> None:
    """A CSV whose `board` column names other boards (a `ptui pool pull` of the fleet) is not this
    board's profile: pushed or fitted as this board's, it would add the fleet's rows again under
    this board's id."""
    others = sorted(profile_boards(profile) - {board})
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise InputError(f"{profile} holds rows of board{'s' * (len(others) > 1)} {shown}, not this "
                         f"board's ({board!r}): give a profile this board made (a `ptui pool pull` "
                         f"CSV is the fleet's), or --board naming the board that made it")


def _source(profile, tags: dict, batch_size: int) -> str:
    """The pool's name for where a profile's rows were measured: a ptui profile's run, as its run
    sent them (PoolingStore: session@bsB), else the CSV's file name."""
    return f"{tags['session']}@bs{batch_size}" if tags.get("session") else f"csv:{Path(profile).name}"


def _same(pooled: float, written: float) -> bool:
    """A pooled figure (as measured) and the profile's (a CSV's, to 4 decimals: a 0.3 ms step is
    off by up to 1.7e-4 of itself) are one measurement."""
    return math.isclose(pooled, written, rel_tol=1e-4, abs_tol=1e-4)


def _check_sent_as_other(pool: Pool, profile, rows: list[dict], source: str, board: str, *,
                         device: str, workload: str, batch_size: int) -> set[int]:
    """A profile whose rows the pool holds as another board's (a mode with the same time and power,
    of the same run or of any row of its device, workload and batch size: a CSV that names no run,
    or names another than the pool's) is that board's: pushed or fitted under another id (a shell
    without the PTUI_BOARD_ID it was profiled with, a host whose name is not that id, a copy of the
    CSV without its session column) its rows would count twice, as this board's and as the
    fleet's, and the board's factors would be drawn towards the fleet's.  Where the pool holds them
    as this board's too (identical simulated units with one --seed and one session name: each
    board sent the same rows), they are this board's.  Returns the indices of `rows` the pool
    holds as this board's already (under any source: a push adds them again as nothing new)."""
    held = pool.rows(device=device, workload=workload, batch_size=batch_size)
    if not source.startswith("csv:"):         # the run's rows, whatever workload they were sent as
        held += pool.rows(source=source)
    by_mode: dict[tuple, list[PoolRow]] = {}
    for p in held:
        by_mode.setdefault((p.cores, p.cpu_mhz, p.gpu_mhz, p.mem_mhz), []).append(p)
    holders: dict[str, set[str]] = {}           # board: the sources it sent them under
    mine = set()
    for i, r in enumerate(rows):
        mode = (int(r["cores"]), float(r["cpu_mhz"]), float(r["gpu_mhz"]), float(r["mem_mhz"]))
        for p in by_mode.get(mode, []):
            if _same(p.time_ms, float(r["time_ms"])) and _same(p.power_w, float(r["power_w"])):
                holders.setdefault(p.board, set()).add(p.source)
                if p.board == board:
                    mine.add(i)
    owners = sorted(set(holders) - {board})
    if owners and board not in holders:
        who = owners[0]
        same_run = source in holders[who]
        run = (f"its run {source.rsplit('@', 1)[0]}" if same_run
               else "the same modes with the same times and power")
        if _simulated(profile) and all(p.simulated for p in held if p.board == who):
            # the simulator draws its modes and figures from the seed alone: two simulated boards
            # profiled with one seed (0 without a pool) made these same rows, each its own
            seed = ("profile each simulated board with its own --seed (or its own PTUI_BOARD_ID with "
                    "PTUI_POOL set, which seeds from the board id; without a pool every seed is 0)")
            if not same_run:
                raise InputError(f"the pool {pool.where} holds rows identical to those of {profile} as "
                                 f"those of board {who!r} (the same simulated modes, times and power; "
                                 f"another run): "
                                 f"simulated profiles made with one seed are identical, so the pool cannot "
                                 f"tell them apart; {seed}, or give --board {who} if {profile} is {who}'s")
            raise InputError(f"the pool {pool.where} holds the rows of {profile} as those of board {who!r} "
                             f"({run}), not of this board ({board!r}): give --board {who} (or "
                             f"PTUI_BOARD_ID={who}, as when it was profiled); if another simulated board "
                             f"made it with the same seed and run name, {seed}")
        raise InputError(f"the pool {pool.where} holds the rows of {profile} as those of board {who!r} "
                         f"({run}), not of this board ({board!r}): give "
                         f"--board {who} (or PTUI_BOARD_ID={who}, as when it was profiled)")
    return mine


def _what(profile, tags: dict, workload: str | None, batch_size: int | None) -> tuple[str, int]:
    """The workload and batch size of a profile's rows: its workload and batch_size columns, else
    --workload and --batch-size; given beside a column that says another, they are refused (the
    rows would go to the pool, or be pooled, as another workload's)."""
    said = tags.get("workload")
    if said == SCRIPT_WORKLOAD:
        # every unnamed script's profile says 'script': pooled by that, two boards' different
        # trainings would be one workload's rows
        if not workload:
            raise InputError(f"{profile} is a profile of a script ptui names only '{SCRIPT_WORKLOAD}': "
                             f"name its training with --workload NAME (the same name on every board "
                             f"that runs it), so that only the same training is pooled")
        said = None
    if workload and said and workload_key(workload) != workload_key(said):
        raise InputError(f"{profile} is a profile of {said} (its workload column), not {workload}: leave "
                         f"--workload out (it names the workload of a CSV without that column)")
    wl = workload_name(said or workload or "")
    if not wl:
        raise InputError(f"{profile} does not say its workload: give --workload")
    said_b = int(tags["batch_size"]) if str(tags.get("batch_size", "")).isdigit() else None
    if batch_size and said_b and int(batch_size) != said_b:
        raise InputError(f"{profile} was profiled at batch size {said_b} (its batch_size column), not "
                         f"{batch_size}: leave --batch-size out (it names the batch size of a CSV "
                         f"without that column)")
    b = batch_size or said_b
    if b is None:
        w = WORKLOADS.get(wl)
        if w is None:
            raise InputError(f"{profile} does not say its batch size: give --batch-size")
        b = w.batch_size
    return wl, int(b)


def _simulated(profile) -> bool:
    """A profile measured by ptui's simulator, an emulated board or a what-if (its `timed` or
    label says so); a real board's otherwise."""
    timed = profile_tags(profile).get("timed", "")
    if any(w in timed.upper() for w in ("SIMULATED", "REPLAYED", "WHAT-IF")):
        return True
    try:
        head = Path(profile).read_text(encoding="utf-8", errors="replace")[:200000].lower()
    except OSError:
        return False
    return "simulated" in head


def push_profile(profile: Path | str, device, *, url: str | None = None, board: str | None = None,
                 workload: str | None = None, batch_size: int | None = None,
                 simulated: bool | None = None) -> tuple[int, int, str, str | None]:
    """`ptui pool push`: a profile CSV's rows to the pool as this board's; (added, already there,
    the pool's name, what to say of a batch size it took as the workload's default or None)."""
    rows, tags = _profile_rows(profile, device)     # a bad profile is refused before connecting
    wl, b = _what(profile, tags, workload, batch_size)
    me = board_id(board)
    _check_board(profile, me)
    with open_pool(url) as pool:
        added, had = push_to(pool, profile, device, board=me, workload=workload,
                             batch_size=batch_size, simulated=simulated)
        return added, had, pool.where, _default_batch_note(tags, batch_size, wl, b)


def _default_batch_note(tags: dict, batch_size: int | None, workload: str, b: int) -> str | None:
    """What a push says of a batch size neither the CSV (no batch_size column) nor --batch-size
    gave: the rows went to the group of the catalogue workload's default (_what), which is a
    guess a user should see."""
    if batch_size or str(tags.get("batch_size", "")).isdigit():
        return None
    return (f"as batch size {b}, {workload}'s default (the CSV has no batch_size column); give "
            f"--batch-size if it was another")


def push_to(pool: Pool, profile: Path | str, device, *, board: str, workload: str | None = None,
            batch_size: int | None = None, simulated: bool | None = None) -> tuple[int, int]:
    """Send a profile CSV's rows to an open pool as `board`'s; (added, already there)."""
    _check_board(profile, board)
    rows, tags = _profile_rows(profile, device)
    wl, b = _what(profile, tags, workload, batch_size)
    sim = _simulated(profile) if simulated is None else simulated
    # a ptui profile's rows as its run sent them (in plan order), so pushing a profile that
    # already went to the pool adds nothing
    source = _source(profile, tags, b)
    had = _check_sent_as_other(pool, profile, rows, source, board, device=device.name, workload=wl,
                               batch_size=b)
    now = time.time()
    added = 0
    for i, r in enumerate(rows):
        if i in had:                          # this board's already (as its run sent it, or a copy)
            continue
        added += pool.add(_pool_row(r, board=board, device=device.name, workload=wl, batch_size=b,
                                    simulated=sim, source=source, idx=i, measured_at=now))
    return added, len(rows) - added


def _pool_row(r: dict, *, board: str, device: str, workload: str, batch_size: int, simulated: bool,
              source: str, idx: int, measured_at: float) -> PoolRow:
    return PoolRow(board, device, workload, batch_size, int(r["cores"]), float(r["cpu_mhz"]),
                   float(r["gpu_mhz"]), float(r["mem_mhz"]), float(r["time_ms"]), float(r["power_w"]),
                   time_ms_p25=_num(r.get("time_ms_p25")), time_ms_p75=_num(r.get("time_ms_p75")),
                   power_w_std=_num(r.get("power_w_std")), n_minibatches=_int(r.get("n_minibatches")),
                   n_power=_int(r.get("n_power")), simulated=simulated, source=source, idx=idx,
                   measured_at=measured_at)


def _num(v) -> float | None:
    try:
        return None if v in (None, "") else float(v)
    except (TypeError, ValueError):
        return None


def _int(v) -> int | None:
    f = _num(v)
    return None if f is None else int(f)


def rows_of(pool_rows: list[PoolRow]):
    """prediction.pooled.Rows of pool rows (measurement sds as a profile's: csvio)."""
    dicts = [{k: getattr(r, k) for k in ROW_KEYS} for r in pool_rows]
    u = measured_uncertainty(dicts) if dicts else {"time_ms_std": np.zeros(0), "power_w_std": np.zeros(0)}
    return Rows(np.array([[r.cores, r.cpu_mhz, r.gpu_mhz, r.mem_mhz] for r in pool_rows],
                         np.float64).reshape(-1, 4),
                np.array([r.time_ms for r in pool_rows], np.float64),
                np.array([r.power_w for r in pool_rows], np.float64),
                np.asarray(u["time_ms_std"], np.float64), np.asarray(u["power_w_std"], np.float64),
                [r.board for r in pool_rows])


def fleet_rows(pool: Pool, device, workload: str, batch_size: int, *, board: str) -> list[PoolRow]:
    """The pool's rows for this device type, workload and batch size, of other boards than
    `board` (a board's own rows come from its profile)."""
    rows = pool.rows(device=device.name, workload=workload, batch_size=batch_size)
    return [r for r in rows if r.board != board]


def pool_holds(device, workload: str, batch_size: int, *, url: str | None = None,
               board: str | None = None) -> tuple[int, int, str]:
    """(rows, boards, the pool's name): what the pool holds of boards other than `board` (default
    this board's id) for this device type, workload and batch size, what a pooled fit would take."""
    me = board_id(board)
    try:
        pool = open_pool(url, create=False)
    except NoPoolFile:                      # no board has sent a row yet: it holds nothing
        return 0, 0, redact(pool_url(url) or "")
    with pool:
        rows = fleet_rows(pool, device, workload_name(workload), batch_size, board=me)
        return len(rows), len({r.board for r in rows}), pool.where


def fit_pooled_rows(device, own: list[PoolRow], fleet: list[PoolRow], *, workload: str, batch_size: int,
                    reference=None, method: str = "gp", seed: int = 0, loss: str = "mse",
                    source: str = "", fleet_source: str = "", progress=None, spec=None):
    """The pooled model of a board from its own rows and the fleet's (both as pool rows): what
    `ptui fit --pool` and the benchmark run; spec: the workload's counts (its roofline prior is
    one more candidate of the fit, as in `ptui fit --workload-spec`).  The factors' shape on a
    board the reference is not for (prediction.pooled.fleet_shape) is the roofline of the spec,
    else of the catalog workload, else of SHAPE_WORKLOAD, at the rows' batch size."""
    ref = reference if reference is not None else load_model(bundled_reference())
    roofline = roofline_of(device, spec)
    shape = roofline or roofline_of(device, workload_spec(None, workload, batch_size)
                                    or workload_spec(None, SHAPE_WORKLOAD, batch_size))
    model = fit_pooled(ref, device, rows_of(own), rows_of(fleet), method=method, seed=seed, loss=loss,
                       workload=workload, source=source, fleet_source=fleet_source,
                       simulated_rows=sum(r.simulated for r in fleet), progress=progress,
                       roofline=roofline, shape_prior=shape)
    remember_epoch_size(model, workload, batch_size)
    return model


def _pooled_time(profile, time_basis: str, note: Callable[[str], None] | None) -> None:
    """The pool holds each mode's median step (not its whole cycle), so a pooled fit decides on
    the step: --time cycle is refused; a profile a fit alone would decide on the cycle for (the
    work outside the steps, or the profile's own time_basis) is said to `note`."""
    if time_basis == "cycle":
        raise InputError("--time cycle does not pool: the pool holds each mode's median step, not its "
                         "whole cycle; fit the profile without --pool to decide on the cycle, or leave "
                         "--time out")
    if time_basis != "auto" or note is None:
        return
    share = profile_time(profile, "step").share
    if profile_tags(profile).get("time_basis") == "cycle" or (share is not None and share > OUTSIDE_WARN):
        note("warning: " + (f"{outside_note(share)}, and " if share is not None else "")
             + "this pooled model decides on the median step (the pool holds steps); ptui fit "
               "without --pool decides on the whole cycle")


def fit_with_pool(device, profile: Path | str, *, url: str | None = None, board: str | None = None,
                  workload: str | None = None, out: Path | None = None, reference=None,
                  method: str = "auto", seed: int = 0, loss: str = "mse",
                  progress: Callable[[str], None] | None = None, spec=None, time_basis: str = "auto",
                  note: Callable[[str], None] | None = None) -> FitOutcome:
    """`ptui fit --pool`: this board's profile (a few modes) and the fleet's rows for its device
    type, workload and batch size, with this board's power and time factors estimated from its
    own rows; the model says it was pooled (trained_on.pooled).  time_basis: --time (the pool's
    times are steps: _pooled_time)."""
    t0 = time.perf_counter()
    _pooled_time(profile, time_basis, note)
    me = board_id(board)
    _check_board(profile, me)
    rows, tags = _profile_rows(profile, device)
    wl, b = _what(profile, tags, workload, None)
    check_spec_batch(spec, b)
    ref = load_reference(reference) if reference else None     # refused before the pool is read
    sim = _simulated(profile)
    own = [_pool_row(r, board=me, device=device.name, workload=wl, batch_size=b, simulated=sim,
                     source="own", idx=i, measured_at=0.0) for i, r in enumerate(rows)]
    with open_pool(url, create=False) as pool:
        _check_sent_as_other(pool, profile, rows, _source(profile, tags, b), me, device=device.name,
                             workload=wl, batch_size=b)
        fleet = fleet_rows(pool, device, wl, b, board=me)
        where = pool.where
    if not fleet:
        raise InputError(f"the pool {where} holds no rows of another board for {device.name}, "
                         f"{wl} at batch size {b}: nothing to pool (`ptui pool list` shows what it holds)")
    if note is not None and _default_batch_note(tags, None, wl, b):
        note(f"warning: {profile} has no batch_size column: pooled with the fleet's rows of batch size {b}, "
             f"{wl}'s default; if it was profiled at another, add that batch_size column to it")
    model = fit_pooled_rows(device, own, fleet, workload=wl, batch_size=b, reference=ref, method=method,
                            seed=seed, loss=loss, source=f"profile {profile} + pool {where}",
                            fleet_source=where, progress=progress, spec=spec)
    keep_timed(model, profile, "step")
    if progress:
        progress("saving")
    dest = Path(out) if out is not None else model_dir(Path(profile).stem + "-pooled")
    model.save(dest)
    return FitOutcome(model, dest, len(own) + len(fleet), time.perf_counter() - t0, [b], wl)


def pull_rows(device, workload: str | None, batch_size: int | None, *, url: str | None = None,
              board: str | None = None) -> tuple[list[PoolRow], str]:
    """The pool's rows that match (and the pool's name, password left out); board: one board's
    only, an id as push takes it (`--board ""` is refused, not read as every board's)."""
    one = board_id(board) if board is not None else None
    with open_pool(url, create=False) as pool:
        return pool.rows(device=device.name if device else None,
                         workload=workload_name(workload) if workload else None,
                         batch_size=batch_size, board=one), pool.where


def pool_summary(url: str | None = None) -> tuple[list[dict], str]:
    with open_pool(url, create=False) as pool:
        return pool.summary(), pool.where
