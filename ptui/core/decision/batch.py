"""Batch size as a knob: time (or energy) to a target accuracy over (power mode, batch size).

A larger minibatch usually runs more samples per second (per-step overheads are amortised and the
GPU's kernels are better used) but needs more samples to reach the same accuracy (McCandlish et al.
2018, "An empirical model of large-batch training").  What a user wants under a power cap is the
pair that reaches the target soonest:

    time to target(mode, B) = time per step(mode, B) / B  x  relative samples(B)  x  samples

relative samples(B) comes from a relation file (``--samples-to-target``: the paper's relation vector,
``batch_size,relative_samples``, e.g. measured on a server with a proxy dataset), or from the
noise-scale model E(B) = E_min (1 + B / B_noise) (``--noise-scale``), or is 1 (throughput only).
It is normalised to 1.0 at the largest candidate batch size.  A pair whose memory footprint does
not fit the board is never chosen.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..board.csvio import MAX_MODE_ROWS, CSVError, fields_error, profile_tags, read_batch_profile, read_csv
from ..board.files import check_input
from ..board.physics import footprint_gb, memory_gb
from ..catalogue.workloads import WORKLOADS
from ..errors import InputError, PtuiInputError
from ..prediction.nets import check_predictions, measured_at
from ..prediction.predictor import one_size_only
from .goals import Goal
from .pareto import DEFAULT_RISK, Decision, InfeasibleError, Table, choose, front_indices

MAX_BATCH = 4096
MAX_EPOCHS = 100_000    # a training job's epochs, at most (the faces' bound)


class BatchError(InputError):
    """Bad batch-size input (flag, relation file): one line, exit 2."""


def parse_batch_sizes(text: str, flag: str = "--batch-sizes") -> tuple[int, ...]:
    """'8,16,32,64' -> (8, 16, 32, 64): whole numbers 1..4096, no repeats, sorted."""
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or any(not p for p in parts):
        raise BatchError(f"{flag}: give comma-separated batch sizes, e.g. 8,16,32,64; got {text!r}")
    out = []
    for p in parts:
        if not p.isdigit() or not 1 <= int(p) <= MAX_BATCH:
            raise BatchError(f"{flag}: {p!r} is not a batch size (a whole number 1..{MAX_BATCH})")
        out.append(int(p))
    if len(set(out)) != len(out):
        raise BatchError(f"{flag}: batch size {next(b for b in out if out.count(b) > 1)} is given twice")
    return tuple(sorted(out))


# -- samples to target ----------------------------------------------------------------------------
@dataclass
class SamplesToTarget:
    """Relative number of training samples needed to reach the target accuracy, per batch size."""
    kind: str                                      # file | noise-scale | throughput
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0))   # file: given batch sizes
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))  # file: relative samples
    noise_scale: float | None = None
    source: str = ""

    @classmethod
    def throughput(cls) -> "SamplesToTarget":
        return cls("throughput", source="none given: every batch size needs the same samples")

    @classmethod
    def from_noise_scale(cls, b_noise: float) -> "SamplesToTarget":
        if not (isinstance(b_noise, (int, float)) and math.isfinite(b_noise) and b_noise > 0):
            raise BatchError(f"--noise-scale must be a positive number, got {b_noise!r}")
        return cls("noise-scale", noise_scale=float(b_noise),
                   source=f"noise-scale model E(B) ~ 1 + B / {b_noise:g}")

    @classmethod
    def from_file(cls, path) -> "SamplesToTarget":
        """A CSV with columns batch_size,relative_samples (one row per batch size); a device node,
        FIFO or socket is refused unopened (/dev/zero or a FIFO never returned)."""
        path = Path(path)
        check_input(path, "a CSV file")
        try:
            with open(path, newline="", encoding="utf-8-sig") as fh:
                rows = [r for r in csv.reader(fh) if any(c.strip() for c in r)]
        except OSError as e:
            raise BatchError(f"{path}: cannot read: {e.strerror or e}") from None
        except (UnicodeDecodeError, csv.Error):
            raise BatchError(f"{path}: not a text CSV file") from None
        if not rows:
            raise BatchError(f"{path}: file is empty (need columns batch_size,relative_samples)")
        head = [h.strip().lower() for h in rows[0]]
        if "batch_size" not in head or "relative_samples" not in head:
            raise BatchError(f"{path}:1: need columns batch_size,relative_samples, found "
                             f"{','.join(head) or 'none'}")
        ib, ir = head.index("batch_size"), head.index("relative_samples")
        got: dict[int, float] = {}
        for n, r in enumerate(rows[1:], start=2):
            # a field beyond the header's was dropped without a word ('16,1,2': a decimal comma
            # read as relative samples 1)
            if len(r) <= max(ib, ir) or len(r) > len(head):
                raise BatchError(fields_error(f"{path}:{n}", head, r))
            b, v = r[ib].strip(), r[ir].strip()
            if not b.isdigit() or not 1 <= int(b) <= MAX_BATCH:
                raise BatchError(f"{path}:{n}: batch_size {b!r} is not a whole number 1..{MAX_BATCH}")
            try:
                x = float(v)
            except ValueError:
                x = math.nan
            if not (math.isfinite(x) and x > 0):
                raise BatchError(f"{path}:{n}: relative_samples {v!r} is not a positive number")
            if int(b) in got and got[int(b)] != x:
                raise BatchError(f"{path}:{n}: batch size {b} appears twice with different values")
            got[int(b)] = x
        if not got:
            raise BatchError(f"{path}: no rows (need batch_size,relative_samples per batch size)")
        sizes = np.array(sorted(got), float)
        return cls("file", sizes, np.array([got[int(b)] for b in sizes]),
                   source=f"relation file {path}")

    def check_covers(self, batch_sizes) -> None:
        """A relation file is interpolated, never extrapolated: every candidate size must lie
        within the sizes it gives."""
        if self.kind != "file":
            return
        lo, hi = self.sizes[0], self.sizes[-1]
        out = [int(b) for b in batch_sizes if not lo <= b <= hi]
        if out:
            raise BatchError(f"{self.source.removeprefix('relation file ')} gives relative samples for "
                             f"batch sizes {lo:g}..{hi:g}; {', '.join(map(str, out))} would be "
                             f"extrapolated (add those sizes to the file or drop them from --batch-sizes)")

    def raw(self, batch) -> np.ndarray:
        B = np.asarray(batch, float)
        if self.kind == "throughput":
            return np.ones_like(B)
        if self.kind == "noise-scale":
            return 1.0 + B / self.noise_scale
        if len(self.sizes) == 1:
            return np.full_like(B, self.values[0])
        # linear in log B of log relative samples (a power law between neighbouring sizes)
        return np.exp(np.interp(np.log(B), np.log(self.sizes), np.log(self.values)))

    def relative(self, batch, largest: float) -> np.ndarray:
        """Relative samples at each batch, 1.0 at `largest` (the largest candidate size)."""
        return self.raw(batch) / float(self.raw(largest))

    @property
    def throughput_only(self) -> bool:
        return self.kind == "throughput"


def relation(samples_file: str | None, noise_scale: float | None) -> SamplesToTarget:
    if samples_file is not None and noise_scale is not None:
        raise BatchError("give --samples-to-target FILE or --noise-scale B, not both")
    if samples_file is not None:
        return SamplesToTarget.from_file(samples_file)
    if noise_scale is not None:
        return SamplesToTarget.from_noise_scale(noise_scale)
    return SamplesToTarget.throughput()


def time_to_target_s(step_ms, batch, rel, samples: float) -> np.ndarray:
    """Seconds to process `samples` x relative samples at this step time and batch."""
    return np.asarray(step_ms, float) / 1000.0 / np.asarray(batch, float) * rel * samples


# -- memory -----------------------------------------------------------------------------------------
@dataclass
class Memory:
    """Which batch sizes fit the board: from measured peak memory (a line through the profiled
    sizes' peaks), else the modelled footprint of a catalog workload; `known` False when neither."""
    capacity_gb: float
    peak: dict = field(default_factory=dict)        # batch -> GB (measured or modelled)
    how: str = "unknown"                            # the profile's peak_mem_gb | modelled | unknown

    def footprint(self, batch) -> np.ndarray:
        B = np.atleast_1d(np.asarray(batch, float))
        if not self.peak:
            return np.full(B.shape, np.nan)
        xs = np.array(sorted(self.peak), float)
        ys = np.array([self.peak[int(x)] for x in xs])
        if len(xs) == 1:                            # one peak says nothing about other sizes
            return np.where(B == xs[0], ys[0], np.nan)
        b, a = np.polyfit(xs, ys, 1)
        return a + b * B

    def fits(self, batch) -> np.ndarray:
        f = self.footprint(batch)
        return np.where(np.isnan(f), True, f <= self.capacity_gb + 1e-9)

    def largest(self, limit: int = MAX_BATCH) -> int | None:
        if not self.peak:
            return None
        cand = np.arange(1, limit + 1)
        ok = np.flatnonzero(self.fits(cand))
        return int(cand[ok[-1]]) if len(ok) else 0


def memory_for(device, workload: str | None, peak: dict | None = None) -> Memory:
    """The board's memory model for a workload: measured peaks where the profile has them, else the
    simulator's footprint model for a catalog workload, else unknown (every size assumed to fit)."""
    cap = memory_gb(device)
    if peak:
        return Memory(cap, {int(k): float(v) for k, v in peak.items()}, "the profile's peak_mem_gb")
    w = WORKLOADS.get(str(workload))
    if w is not None:
        return Memory(cap, {b: float(footprint_gb(w, b)) for b in (1, 1024)}, "modelled")
    return Memory(cap)


# -- the joint decision -----------------------------------------------------------------------------
def joint_table(model, modes, batch_sizes, memory: Memory | None = None):
    """Predictions (measurements where profiled) for every mode at every batch size: one
    pareto.Table with the batch of each row and whether it fits in memory."""
    tabs = []
    for b in batch_sizes:
        pred = model.predict(modes, batch_size=b)
        check_predictions(pred, "the model")
        tabs.append(Table.from_prediction(modes, pred).with_measurements(
            measured_at(model.measured, b, model.about.batch_size)))
    table = Table.concat(tabs, batch_sizes)
    if memory is not None:
        table.fits = np.asarray(memory.fits(table.batch), bool)
    return table


def paper_baseline(table, rel: SamplesToTarget, **kw):
    """The paper's baseline: the largest candidate batch that fits, at the fastest mode within the
    cap (least energy per step for the energy objective)."""
    fitting = table.batch[table.fits]
    if len(fitting) == 0:
        raise InfeasibleError("no candidate batch size fits in the board's memory")
    return choose(table, relation=rel, restrict=table.batch == fitting.max(), **kw)


def fixed_batch(table, rel: SamplesToTarget, batch: int, **kw):
    """The best mode at one fixed batch size (None when that size is not a fitting candidate)."""
    sel = table.batch == batch
    if not (sel & table.fits).any():
        return None
    return choose(table, relation=rel, restrict=sel, **kw)


def check_batch_model(model, batch_sizes) -> None:
    """A model fitted at one batch size predicts only that size."""
    if model.about.batch_sizes:
        return
    b = model.about.batch_size
    if any(b is None or int(x) != int(b) for x in batch_sizes):
        # a prior model is no fit of a profile: 'fitted on a profile' misled a user about what the
        # model rests on
        raise PtuiInputError(f"{one_size_only(model.about)}; to compare batch sizes profile them "
                             f"(ptui profile --batch-sizes ...) and fit that profile")


def check_within_fitted(model, batch_sizes, extrapolate: bool = False) -> None:
    """A model fitted over several batch sizes predicts the sizes between its smallest and largest;
    beyond them only with extrapolate."""
    have = model.about.batch_sizes
    out = [int(b) for b in batch_sizes if have and not min(have) <= int(b) <= max(have)]
    if out and not extrapolate:
        raise PtuiInputError(
            f"the model was fitted on batch sizes {','.join(map(str, have))}; "
            f"{','.join(map(str, out))} lie{'s' if len(out) == 1 else ''} outside them, where its "
            f"predictions are extrapolations: profile {'it' if len(out) == 1 else 'them'} "
            f"(ptui profile --batch-sizes ...), or add --extrapolate")


DEFAULT_BATCH = 16     # PowerTrain's fixed minibatch size


def default_batch(sizes) -> int:
    """A multi-size profile's default batch: 16 where profiled, else the size nearest to it."""
    sizes = sorted(int(b) for b in sizes)
    return min(sizes, key=lambda b: (abs(math.log(b / DEFAULT_BATCH)), b))


def model_memory(model) -> Memory:
    """The memory model a batch-aware model carries: measured peaks, else the catalog's model."""
    return memory_for(model.device, model.about.workload, model.about.peak_mem_gb)


def predict_table(model, modes_csv=None):
    """`ptui predict`: (table, batch per row or None).  A --modes CSV may carry a batch_size column
    (rows without one are at the model's batch size); without a file, every mode of the device."""
    dev = model.device
    if modes_csv:
        rows = read_csv(modes_csv, dev, extras=("batch_size",), max_rows=MAX_MODE_ROWS)
        if not rows:
            raise CSVError(f"{modes_csv}: no modes in file")
        modes = [m for m, _ in rows]
        given = [v.get("batch_size") for _, v in rows]
    else:
        modes, given = dev.full_space(), [None]
    own = model.about.batch_size
    if not model.batch_sizes and (own is None or all(b is None or b == own for b in given)):
        # a model of one batch size predicts exactly as before batch sizes existed; a batch_size
        # column (a profile CSV as --modes) is checked against the model's size where it is known
        pred = model.predict(modes)
        check_predictions(pred, "the model")
        return Table.from_prediction(modes, pred).with_measurements(model.measured), None
    b0 = model.about.batch_size
    batch = np.array([b if b is not None else (b0 or 0) for b in given] if modes_csv
                     else [b0] * len(modes), dtype=float)
    bad = (batch < 1) | (batch != np.round(batch))
    if bad.any():
        raise BatchError(f"{modes_csv}: batch_size must be a whole number >= 1 on every row "
                         f"(got {batch[bad][0]:g})")
    n = len(modes)
    t, p, ts, ps = (np.empty(n) for _ in range(4))
    flag = np.zeros(n, bool)
    for b in np.unique(batch):
        sel = np.flatnonzero(batch == b)
        sub = [modes[i] for i in sel]
        pred = model.predict(sub, batch_size=int(b))
        check_predictions(pred, "the model")
        tab = Table.from_prediction(sub, pred).with_measurements(
            measured_at(model.measured, int(b), b0))
        t[sel], p[sel], ts[sel], ps[sel] = tab.time_ms, tab.power_w, tab.time_ms_std, tab.power_w_std
        flag[sel] = tab.measured
    return Table(list(modes), t, p, ts, ps, flag), batch.astype(int)


@dataclass
class BatchDecision:
    pick: Decision                   # its index a row of space.table
    default: Decision | None         # best mode at the default batch size
    paper: Decision | None           # largest fitting batch, fastest mode under the cap
    default_batch: int
    rel: SamplesToTarget
    samples: float
    samples_note: str                # what `samples` is, in words
    memory: Memory
    dropped: list                    # candidate sizes that do not fit in memory
    goal: str
    notes: list
    space: "JointSpace"              # the space the pick indices refer to
    targets: "Targets"               # time and energy to target of every candidate pair

    def front(self) -> list[tuple[int, float, float]]:
        """The Pareto front of the candidate pairs, time to target against power (by power):
        (row of space.table, time to target, energy to target) of each point."""
        tg = self.targets
        if not len(tg.rows):
            return []
        return [(int(tg.rows[k]), float(tg.target_s[k]), float(tg.energy_wh[k]))
                for k in front_indices(tg.target_s, tg.power_w)]

    def target_at(self, time_ms: float, power_w: float, batch: int) -> tuple[float, float]:
        """(time, energy) to target of a point with this step time and power at `batch`, as this
        decision counts it (relative samples 1.0 at the largest evaluated size)."""
        ev = self.targets.evaluated
        largest = float(max(ev)) if ev else float(batch)
        rel = float(np.asarray(self.rel.relative(batch, largest)).reshape(-1)[0])
        s = float(time_to_target_s(time_ms, batch, rel, self.samples))
        return s, s * power_w / 3600.0


@dataclass
class JointSpace:
    """Every (mode, batch size) row a decision can draw on, computed once: a model's predictions at
    each size that fits (and at its default size), or a profile's measured pairs.  The app keeps one
    and decides in it as the goal changes; `decide` builds one per call."""
    table: Table                     # with the batch (and fit) of every row
    memory: Memory
    default_batch: int
    sizes: tuple                     # the sizes offered (a model's fitted sizes, a profile's sizes)
    samples_per_epoch: float | None = None   # what the model or profile says
    batches_per_epoch: int | None = None     # of the default batch, what the model says
    workload: str | None = None


def model_space(model, batch_sizes, modes=None) -> JointSpace:
    """Predictions (measurements where profiled) for every mode at each of `batch_sizes` that fits
    in memory, and at the model's default size."""
    memory = model_memory(model)
    b0 = int(model.about.batch_size or DEFAULT_BATCH)
    want = sorted(set(int(b) for b in batch_sizes) | {b0})
    evaluated = tuple(b for b in want if bool(memory.fits(b)[0]))
    modes = modes if modes is not None else model.decision_space()[0]
    table = joint_table(model, modes, evaluated, memory)
    spe = model.about.samples_per_epoch
    return JointSpace(table, memory, b0, tuple(sorted(set(int(b) for b in batch_sizes))),
                      float(spe) if spe else None, model.about.batches_per_epoch,
                      model.about.workload)


def profile_space(path, device, time_basis: str = "step") -> JointSpace:
    """A profile over several batch sizes as a space of measured pairs (no model: only the
    profiled pairs can be chosen).  Its default size is 16 where profiled, else the nearest."""
    prof = read_batch_profile(path, device, min_rows=1, time=time_basis)
    tags = profile_tags(path)
    memory = memory_for(device, tags.get("workload"), prof["peak"])
    batch = np.asarray(prof["batch"], int)
    n = len(batch)
    ms = prof["measured"]
    table = Table(list(prof["modes"]), np.asarray(prof["time_ms"], float),
                  np.asarray(prof["power_w"], float), np.asarray(ms["time_ms_std"], float),
                  np.asarray(ms["power_w_std"], float), np.ones(n, bool), batch,
                  np.asarray(memory.fits(batch), bool))
    sizes = tuple(sorted(set(int(b) for b in batch)))
    w = WORKLOADS.get(tags.get("workload", ""))
    return JointSpace(table, memory,
                      default_batch(sizes), sizes, float(w.samples) if w else None, None,
                      tags.get("workload"))


def _candidates(memory: Memory, sizes, rel: SamplesToTarget, budget_w, objective):
    """(fitting candidate sizes, sizes that do not fit); the errors `decide` gives before any work."""
    if budget_w is None and objective is None:
        raise BatchError("with --batch-sizes choose --budget-w W or --objective energy "
                         "(a per-minibatch deadline means different work at each batch size)")
    fit_mask = memory.fits(np.array(sizes))
    dropped = [b for b, ok in zip(sizes, fit_mask) if not ok]
    cands = tuple(b for b in sizes if b not in dropped)
    if not cands:
        raise InfeasibleError(f"none of the batch sizes {','.join(map(str, sizes))} fits in the "
                              f"{memory.capacity_gb:.1f} GB the board has for training "
                              f"(largest that fits: {memory.largest()}, {memory.how})")
    rel.check_covers(cands)
    return cands, dropped


@dataclass
class Targets:
    """Time and energy to target of each candidate row of a space (the rows a decision draws on)."""
    rows: np.ndarray                 # indices into the space
    batch: np.ndarray
    target_s: np.ndarray
    power_w: np.ndarray
    energy_wh: np.ndarray
    samples: float
    samples_note: str
    evaluated: tuple                 # the candidate sizes plus the default size where it counts


def targets(space: JointSpace, sizes, rel: SamplesToTarget, *, epochs: int | None = None,
            batches_per_epoch: int | None = None) -> Targets:
    """Time to target of every (mode, batch) among `sizes` (those that fit), normalised as a
    decision over the same sizes is (relative samples 1.0 at the largest evaluated size)."""
    sizes = tuple(sorted(int(b) for b in sizes))
    fit_mask = space.memory.fits(np.array(sizes)) if sizes else np.zeros(0, bool)
    cands = tuple(b for b, ok in zip(sizes, fit_mask) if ok)
    b0 = space.default_batch
    tab = space.table
    batch = tab.batches
    have = set(int(b) for b in batch)
    with_default = set(cands) | ({b0} if b0 in have else set())
    if rel.kind == "file" and b0 not in cands and not rel.sizes[0] <= b0 <= rel.sizes[-1]:
        with_default = set(cands)
    evaluated = tuple(sorted(b for b in with_default if b in have))
    spe = space.samples_per_epoch
    if spe is None and batches_per_epoch:
        spe = batches_per_epoch * b0
    if spe is None and space.batches_per_epoch:
        spe = space.batches_per_epoch * b0
    if spe is None and space.workload in WORKLOADS:
        spe = WORKLOADS[space.workload].samples
    if spe:
        samples = float(spe) * (epochs or 1)
        note = (f"{epochs or 1} epoch{'s' if (epochs or 1) > 1 else ''} of {int(spe):,} samples"
                + ("" if rel.throughput_only or not cands else f" at batch {max(cands)}"))
    else:
        samples, note = 1000.0, "1,000 samples (samples per epoch unknown: give --batches-per-epoch)"
    ev = np.isin(batch, evaluated) & tab.fits
    largest = float(batch[ev].max()) if ev.any() else 1.0
    rows = np.flatnonzero(np.isin(batch, cands) & tab.fits)
    b = batch[rows]
    tt = time_to_target_s(tab.time_ms[rows], b, rel.relative(b, largest), samples) \
        if len(rows) else np.zeros(0)
    pw = tab.power_w[rows]
    return Targets(rows, b, tt, pw, tt * pw / 3600.0, samples, note, evaluated)


def decide(model, batch_sizes, *, modes=None, samples_file: str | None = None,
           noise_scale: float | None = None, budget_w: float | None = None,
           objective: str | None = None, risk: float | None = DEFAULT_RISK, tolerance_w: float = 0.0,
           epochs: int | None = None, batches_per_epoch: int | None = None,
           cautious: bool = False, extrapolate: bool = False) -> BatchDecision:
    """`ptui pareto --batch-sizes`: the (mode, batch) with the least predicted time (or energy) to
    target, and the two baselines it is compared with.  Sizes beyond the model's fitted range are
    refused unless extrapolate."""
    rel = relation(samples_file, noise_scale)
    sizes = tuple(sorted(int(b) for b in batch_sizes))
    check_batch_model(model, sizes)
    cands, _ = _candidates(model_memory(model), sizes, rel, budget_w, objective)   # before any work
    check_within_fitted(model, cands, extrapolate)      # a size that does not fit is never predicted
    space = model_space(model, sizes, modes)
    return decide_in(space, sizes, rel, budget_w=budget_w, objective=objective, risk=risk,
                     tolerance_w=tolerance_w, epochs=epochs, batches_per_epoch=batches_per_epoch,
                     cautious=cautious)


def decide_in(space: JointSpace, batch_sizes, rel: SamplesToTarget, *,
              budget_w: float | None = None, objective: str | None = None,
              risk: float | None = DEFAULT_RISK, tolerance_w: float = 0.0, epochs: int | None = None,
              batches_per_epoch: int | None = None, cautious: bool = False) -> BatchDecision:
    """The joint decision among `batch_sizes` in a space already computed (`decide` and the app's
    Pareto screen both come here).  Pick indices are rows of the space."""
    sizes = tuple(sorted(int(b) for b in batch_sizes))
    memory = space.memory
    cands, dropped = _candidates(memory, sizes, rel, budget_w, objective)
    b0 = space.default_batch
    tg = targets(space, sizes, rel, epochs=epochs, batches_per_epoch=batches_per_epoch)
    # the rows of the evaluated sizes: the largest of them normalises the relative samples
    rows = np.flatnonzero(np.isin(space.table.batches, tg.evaluated))
    tab = space.table.subset(rows)
    goal = Goal(budget_w, None, objective)
    kw: dict[str, Any] = dict(risk=risk, tolerance_w=tolerance_w, samples=tg.samples,
                              cautious=cautious)
    cand_mask = np.isin(tab.batches, cands)
    pick = _reindex(choose(tab, goal, relation=rel, restrict=cand_mask, **kw), rows)
    base = paper = None
    try:
        q = fixed_batch(tab, rel, b0, goal=goal, **kw)
        base = None if q is None else _reindex(q, rows)
    except InfeasibleError:
        pass
    try:
        sub = replace(tab, fits=tab.fits & cand_mask)
        paper = _reindex(paper_baseline(sub, rel, goal=goal, **kw), rows)
    except InfeasibleError:
        pass
    notes: list[str] = []
    if rel.throughput_only:
        per = "energy per sample" if objective == "energy" else "throughput"
        notes.append("no --samples-to-target or --noise-scale given: every batch size is assumed "
                     f"to need the same samples, so this choice optimises {per} only")
    if dropped:
        notes.append(f"batch size{'s' if len(dropped) > 1 else ''} {','.join(map(str, dropped))} "
                     f"do{'es' if len(dropped) == 1 else ''} not fit in the {memory.capacity_gb:.1f} GB "
                     f"for training ({memory.how} footprint; largest that fits: {memory.largest()})")
    if memory.how == "unknown":
        notes.append("memory footprint unknown (no peak_mem_gb in the profile, not a catalog "
                     "workload): every batch size is assumed to fit")
    return BatchDecision(pick, base, paper, b0, rel, tg.samples, tg.samples_note, memory, dropped,
                         pick.goal, notes, space, tg)


def joint_goal(budget_w: float | None, objective: str | None, risk: float | None = None) -> str:
    """A decision over (mode, batch size) in words: per target (time or energy to reach it)."""
    return Goal(budget_w, None, objective).describe_per_target(risk)


def _reindex(q: Decision, rows: np.ndarray) -> Decision:
    return replace(q, index=int(rows[q.index]),
                   best_measured=None if q.best_measured is None else int(rows[q.best_measured]))
