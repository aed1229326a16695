"""Deciding: a model or profile becomes the candidates of a decision, the view the
Pareto screen shows for a goal, and tune's fit-and-decide after an active profile."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..board.backends.replay import load_corpus
from ..board.csvio import count_rows, profile_batch_sizes, profile_tags, read_profile_measured
from ..catalogue.workloads import WORKLOADS
from ..decision import batch, energy
from ..decision.batch import model_space, profile_space
from ..decision.goals import Goal
from ..decision.pareto import (
    DEFAULT_RISK,
    Decision,
    InfeasibleError,
    Table,
    best_preset,
    choose,
    front_indices,
    presets_table,
)
from ..errors import InputError
from ..paths import models_dir, profiles_dir
from ..prediction.fit import outlier_note, subset_note
from ..prediction.predictor import load_model
from ..profiling.profiler import cycle_timed, model_timed, time_unit
from ..progress import stage

if TYPE_CHECKING:
    from ..decision.batch import JointSpace, SamplesToTarget
    from ..decision.energy import Energy
    from ..prediction.predictor import Model


from .fit import fit, fit_prior, profile_time_choice
from .profile import _complete_profile


# -- decide ------------------------------------------------------------------------------------------
@dataclass
class Predictions:
    table: Table
    model: Model | None                   # None: measured values from a profile CSV
    batches_per_epoch: int | None         # of the profiled workload; None: not known (a script)
    workload: str | None = None           # what was profiled ('script': the user's own)
    timed: str = ""                       # what one time_ms is (a profile CSV's `timed` column)
    note: str = ""                        # modes left out of the decision (knob values never profiled)
    space: JointSpace | None = None       # the source holds several batch sizes
    batch_size: int | None = None         # the source's one batch size, where known


def model_predictions(model: Model, within=None) -> Predictions:
    """Every mode of a model's decision space predicted (its profiled modes with their
    measurements), whether the model was loaded from a directory or is in memory.  within: the
    only modes a decision may choose (a replay board's recorded modes, as tune_decide keeps to
    them), else the device's whole space."""
    modes, note = model.decision_space(None if within is None else list(within))
    wl = model.about.workload
    w = WORKLOADS.get(str(wl))
    mb = model.about.batches_per_epoch or (w.minibatches_per_epoch if w else None)
    table = Table.from_prediction(modes, model.predict(modes)).with_measurements(model.measured_at())
    space = None
    if len(model.batch_sizes) > 1:
        space = model_space(model, model.batch_sizes, modes)
    return Predictions(table, model, mb, wl, model.about.timed, note=note, space=space,
                       batch_size=model.about.batch_size)


def load_predictions(path: Path, device, time_basis: str = "auto", within=None) -> Predictions:
    """Every mode predicted by a model directory, or the measured modes of a profile CSV (with
    time_ms the median step or the whole cycle: csvio.profile_time).  within: the modes a replay
    board can be set to (its corpus's recorded modes): a model predicts those alone, and a profile
    keeps only its rows among them (the app's Pareto offered a mode Apply then refused: 'not in
    the replay corpus')."""
    path = Path(path)
    if path.is_dir():
        return model_predictions(load_model(path), within)
    basis = profile_time_choice(path, time_basis)
    if len(profile_batch_sizes(path)) > 1:
        # a profile over (mode, batch size) pairs: the measured pairs; the table is the default size
        space = profile_space(path, device, time_basis=basis)
        tags = profile_tags(path)
        if basis == "cycle":
            tags["timed"] = cycle_timed(tags.get("timed"))
        sub = space.table.subset(space.table.batch == space.default_batch)
        w = WORKLOADS.get(tags.get("workload", ""))
        mb = w.with_batch(space.default_batch).minibatches_per_epoch if w else None
        return Predictions(sub, None, mb, tags.get("workload"), tags.get("timed", ""), space=space,
                           batch_size=space.default_batch)
    modes, t, p, ms = read_profile_measured(path, device, min_modes=1, time=basis)
    tags = profile_tags(path)          # the profile's own workload counts its epochs
    if basis == "cycle":
        tags["timed"] = cycle_timed(tags.get("timed"))
    w = WORKLOADS.get(tags.get("workload", ""))
    bs = tags.get("batch_size", "")
    mb = (w.with_batch(int(bs)) if bs.isdigit() and int(bs) > 0 else w).minibatches_per_epoch if w else None
    # each row with the uncertainty of its figures, as a batch profile's rows and a model's
    # measured modes have: a measurement is not exact; and each row said measured, as a batch
    # profile's are (the decision's lines called a profile's rows 'predicted')
    table = Table(modes, t, p, ms["time_ms_std"], ms["power_w_std"], np.ones(len(modes), bool))
    if within is not None:
        keep = set(within)
        table = table.subset(np.array([m in keep for m in modes], bool))
        if not len(table):              # nothing to draw or choose (the view had no minimum)
            raise InputError(f"none of the {len(modes)} modes of {path.name} is among the "
                             f"{len(keep)} modes this board can be set to (its replay corpus)")
    return Predictions(table, None, mb,
                       tags.get("workload"), tags.get("timed", ""),
                       batch_size=int(bs) if bs.isdigit() and int(bs) > 0 else None)


def saved_sources(device: str) -> list[tuple[str, Path]]:
    """What the Pareto screen can open, newest first: ('model'|'profile', path) for the models ptui
    saved (any board's: another board's is a what-if there) and this board's complete profiles."""
    models = [p for p in models_dir().glob("*") if (p / "meta.json").exists()]
    profiles = [p for p in profiles_dir().glob(f"{device}-*.csv") if _complete_profile(p)]
    got = [("model", p) for p in models] + [("profile", p) for p in profiles]

    def mtime(kp):
        try:
            return kp[1].stat().st_mtime
        except OSError:
            return 0.0
    return sorted(got, key=mtime, reverse=True)


@dataclass(frozen=True)
class Baseline:
    """A point a decision on screen is compared with: an NVIDIA preset, the best mode at the default
    batch size, the paper's (largest batch, fastest mode); `row` is its candidate row where it is
    one (None: a preset, predicted apart), `job_s`/`energy_wh` the whole job at it as the view
    counts it; `missing` says why there is none (then the figures are 0)."""
    tag: str
    row: int | None = None
    time_ms: float = 0.0
    power_w: float = 0.0
    job_s: float = 0.0
    energy_wh: float = 0.0
    missing: str = ""


@dataclass(frozen=True)
class View:
    """What the Pareto screen shows of a source for a goal: the candidates (`rows` of `table`,
    sorted), each with its `x_s` (the axis: seconds per epoch for one batch size, to target for
    several), the whole job's seconds and energy (epochs x epoch, or to target), the front, the
    decision (or `error`: why none) and the baselines, in one shape for one batch size or several."""
    table: Table
    per_target: bool                      # several batch sizes: the job is reaching the target
    rows: np.ndarray
    x_s: np.ndarray
    job_s: np.ndarray
    energy_wh: np.ndarray
    front: np.ndarray                     # rows, by increasing power
    decision: Decision | None             # its index a row of table
    error: str | None
    baselines: tuple = ()
    dropped: tuple = ()                   # batch sizes that do not fit in memory
    relation: SamplesToTarget | None = None   # several batch sizes: the samples each needs
    batch_size: int | None = None         # one batch size: the source's, where known
    # the least-energy candidate beside the pick, MAXN and the best preset within the budget on
    # screen (decision.energy; None: no decision, or no candidate fits); the screen says its
    # panel_lines(width)
    energy: Energy | None = None

    def pos(self, i: int) -> int:
        """Where row i sits among the candidates."""
        return int(np.searchsorted(self.rows, i))

    def batch_of(self, i: int) -> int | None:
        """The batch size a training run at row i trains at (None: not known)."""
        b = self.table.batch_of(i)
        return self.batch_size if b is None else b

    def job(self, i: int) -> tuple[float, float]:
        """(seconds, Wh) of the whole job at row i."""
        k = self.pos(i)
        return float(self.job_s[k]), float(self.energy_wh[k])


GOALS = ("budget", "deadline", "energy")


def view(pred: Predictions, *, goal: str | None, budget_w: float | None = None,
         deadline_s: float | None = None, epochs: int = 1, mb_per_epoch: int,
         sizes=None, noise_scale: float | None = None,
         risk: float | None | str = "auto") -> View:
    """The decision for the Pareto screen, made as `ptui pareto` makes it (with --batch-sizes for a
    source of several sizes: batch.decide_in): 'budget' (fastest, or least time to target, within
    budget_w), 'deadline' (lowest power meeting deadline_s per epoch; one batch size only) or
    'energy' (least energy, within budget_w if given).  `sizes` None: every size of the source; a
    noise scale gives the samples each size needs (none: throughput only).  Bad input raises
    InputError; a goal nothing meets is returned as `error` with the candidates still drawn.
    goal None: the candidates and their front alone (no decision, one batch size).  risk 'auto':
    the default risk for a model's predictions; a profile's measured figures are decided on as
    measured (their spread is the measurement's, not a prediction's)."""
    if risk == "auto":
        risk = DEFAULT_RISK if pred.model is not None else None
    if isinstance(risk, str):
        raise InputError(f"risk must be a probability, None or 'auto', got {risk!r}")
    if goal is not None and goal not in GOALS:
        raise InputError(f"unknown goal {goal!r}; choose {', '.join(GOALS)}")
    if goal == "budget" and budget_w is None:
        raise InputError("set a power budget in W")
    space = pred.space
    # the NVIDIA presets, predicted by the model (none for a profile's measurements), and the one
    # the CLI's best_preset baseline picks at the budget on screen
    presets = bp = None
    if pred.model is not None and goal is not None:
        presets = presets_table(pred.model.device, pred.model)
        bp = best_preset(presets, budget_w=budget_w, risk=DEFAULT_RISK)
    if space is not None and goal is not None:
        return _view_per_target(space, goal=goal, budget_w=budget_w, sizes=sizes,
                                noise_scale=noise_scale, epochs=epochs, risk=risk,
                                presets=(presets, bp))
    if goal == "deadline" and deadline_s is None:
        raise InputError("set a deadline in seconds per epoch")
    tab = pred.table
    rows = np.arange(len(tab))
    x_s = tab.time_ms * mb_per_epoch / 1000.0
    job_s = x_s * epochs
    job_wh = tab.power_w * job_s / 3600.0
    front = front_indices(tab.time_ms, tab.power_w)
    d = error = g = None
    try:
        deadline_ms = None if deadline_s is None else deadline_s * 1000.0 / mb_per_epoch
        g = None if goal is None else Goal.of(goal, budget_w, deadline_ms)
        d = None if g is None else choose(tab, g, risk=risk, unit=time_unit(pred.timed))
    except InfeasibleError as e:
        error = str(e)
    base: tuple = ()
    if presets is not None:
        if bp is None:
            base = (Baseline("", missing="no NVIDIA preset fits this budget"),)
        else:
            b, pre = bp
            js = b.time_ms * mb_per_epoch / 1000.0 * epochs
            base = (Baseline(pre.name, None, b.time_ms, b.power_w, js, b.power_w * js / 3600.0),)
    en = None if d is None or g is None else \
        energy.per_step(tab, d, presets, bp, pred.batch_size, g.budget_w, risk,
                        pick_by_median=g.kind == "energy")
    return View(tab, False, rows, x_s, job_s, job_wh, front, d, error, base, batch_size=pred.batch_size,
                energy=en)


def _view_per_target(space, *, goal: str, budget_w, sizes, noise_scale, epochs: int,
                     risk, presets: tuple = (None, None)) -> View:
    if goal == "deadline":
        raise InputError("a deadline per minibatch is different work at each batch size: "
                         "choose fastest or least energy")
    rel = batch.relation(None, noise_scale)
    sizes = tuple(space.sizes if sizes is None else sizes)
    tg = batch.targets(space, sizes, rel, epochs=epochs)
    front = (tg.rows[front_indices(tg.target_s, tg.power_w)] if len(tg.rows)
             else np.zeros(0, int))
    tab = space.table
    d = error = en = None
    base: list[Baseline] = []
    dropped: tuple = ()
    try:
        r = batch.decide_in(space, sizes, rel, budget_w=budget_w,
                            objective="energy" if goal == "energy" else None, risk=risk,
                            epochs=epochs)
    except InfeasibleError as e:
        error = str(e)
    else:
        d, dropped = r.pick, tuple(r.dropped)
        en = energy.to_target(r, presets[0], presets[1], risk)
        for tag, q in ((f"bs{r.default_batch} best mode", r.default),
                       (f"paper bs{r.paper.batch_size if r.paper else ''} fastest", r.paper)):
            base.append(Baseline(tag, missing="none fits") if q is None else
                        Baseline(tag, q.index, q.time_ms, q.power_w, *q.to_target()))
    return View(tab, True, tg.rows, tg.target_s, tg.target_s, tg.energy_wh, front, d, error,
                tuple(base), dropped, rel, energy=en)


# -- tune: active profile + fit + decision -------------------------------------------------------------
@dataclass
class TuneDecision:
    decision: Decision
    source: str                           # measured | predicted
    predicted: dict                       # the model's time_ms / power_w for the picked mode
    model_dir: Path
    n_modes: int
    table: Table | None = None            # the table the decision was made in

    @property
    def best_measured(self) -> dict | None:
        """The best measured mode for the goal (on its measured figures) and why the pick is or
        is not that mode (pareto.choose's cautious ranking): one answer, not two."""
        j, tab = self.decision.best_measured, self.table
        if j is None or tab is None:
            return None
        return {"mode": tab.modes[j].as_dict(), "key": tab.modes[j].key,
                "batch_size": self.model.about.batch_size if self.model is not None else None,
                "time_ms": round(float(tab.time_ms[j]), 4), "power_w": round(float(tab.power_w[j]), 4),
                "is_pick": j == self.decision.index, "why": self.decision.why}
    timed: str = ""                       # what one time is (the model's meta: step or cycle)
    model: Model | None = None            # the fitted predictor the decision was made with


def _rows_of(profile, what: str) -> str:
    """'12 profiled modes of PROFILE' for a progress line (the file alone where it cannot be read)."""
    n = count_rows(profile)
    return f"{profile}" if n is None else f"{n} {what} of {profile}"


def tune_decide(profile: Path | str, device, *, budget_w: float | None = None,
                deadline_ms: float | None = None, objective: str | None = None,
                risk: float | None = DEFAULT_RISK, method: str = "auto", seed: int = 0,
                workload: str = "custom", corpus: str | None = None, model_dir: Path | None = None,
                progress: Callable[[str], None] | None = None,
                time_basis: str = "auto", spec=None) -> TuneDecision:
    """After an active profile: fit (measurements kept), then decide with the measured modes
    counting and a cautious ranking (pareto.choose: a predicted mode beats the best measured one
    only when it does so at its upper bound at the risk level; the decision says why it differs
    from the best measured mode, and warns about an uncertain predicted pick).  On the replay
    device only recorded modes are candidates.  spec: the workload's roofline.WorkloadSpec
    (--workload-spec), a GP candidate's prior mean (usecases.fit)."""
    if progress:
        progress(stage(f"fitting time and power ({method}) on {_rows_of(profile, 'profiled modes')}"))
    res = fit(device, profile, workload=workload, out=model_dir, method=method, seed=seed,
              time_basis=time_basis, note=progress, min_modes=6, spec=spec)
    model, out = res.model, res.out
    for note in [subset_note(model.about.metrics)] + [outlier_note(tgt, model.about.metrics[tgt])
                                                        for tgt in ("time", "power")]:
        if note and progress:
            progress(note)
    if corpus:
        space = list(load_corpus(corpus, device))
    else:
        space, _ = model.decision_space()          # no extrapolation beyond what was profiled
    # model.measured: the profile's measurements, those the fit left out as outliers not exact
    tab = Table.from_prediction(space, model.predict(space)).with_measurements(model.measured)
    d = choose(tab, budget_w=budget_w, deadline_ms=deadline_ms, objective=objective, risk=risk,
               cautious=True, unit=time_unit(model_timed(model)))
    pred = model.predict([d.mode])
    return TuneDecision(d, tab.source(d.index), {"time_ms": float(pred["time_ms"][0]),
                                                 "power_w": float(pred["power_w"][0])},
                        out, res.n_modes, tab, model.about.timed, model)


def tune_prior(device, spec, *, budget_w: float | None = None, deadline_ms: float | None = None,
               objective: str | None = None, risk: float | None = DEFAULT_RISK,
               workload: str | None = None, model_dir: Path, timed: str = "",
               time_basis: str = "step") -> TuneDecision:
    """`ptui tune --count 0`: no mode profiled; the roofline prior of `spec` (the probe's counts of
    one iteration of the user's script, a --workload-spec, or a catalog workload's published
    counts) is the model (saved to model_dir, as `ptui fit --workload-spec` saves it), and the
    decision is made on its predictions with their spreads at the goal's risk.  time_basis: what
    the spec's time is (usecases.fit.probe_time), kept in the model."""
    res = fit_prior(device, spec, out=model_dir, workload=workload, timed=timed, time_basis=time_basis)
    model = res.model
    space, _ = model.decision_space()
    tab = Table.from_prediction(space, model.predict(space))
    d = choose(tab, budget_w=budget_w, deadline_ms=deadline_ms, objective=objective, risk=risk,
               unit=time_unit(model_timed(model)))
    pred = model.predict([d.mode])
    return TuneDecision(d, "predicted", {"time_ms": float(pred["time_ms"][0]),
                                         "power_w": float(pred["power_w"][0])},
                        res.out, 0, tab, model.about.timed, model)


def tune_decide_batches(profile: Path | str, device, batch_sizes, *, budget_w: float | None = None,
                        objective: str | None = None, risk: float | None = DEFAULT_RISK,
                        samples_file: str | None = None, noise_scale: float | None = None,
                        method: str = "auto", seed: int = 0, workload: str = "custom",
                        model_dir: Path | None = None,
                        progress: Callable[[str], None] | None = None,
                        time_basis: str = "auto") -> tuple[object, Path, int, object]:
    """After an active profile over batch sizes: fit the batch-aware model (measured pairs kept)
    and decide as `ptui pareto --batch-sizes` does, with tune's cautious ranking (as
    `tune_decide`: a pair the model knows little about never beats a measured one on its median
    alone).  Returns (batch.BatchDecision, model dir, pairs profiled, the fitted model)."""
    if progress:
        progress(stage(f"fitting time and power ({method}) over (mode, batch size) on "
                       f"{_rows_of(profile, 'profiled pairs')}"))
    res = fit(device, profile, workload=workload, out=model_dir, method=method, seed=seed,
              time_basis=time_basis, note=progress)
    model, out = res.model, res.out
    modes, _ = model.decision_space()            # no extrapolation beyond what was profiled
    r = batch.decide(model, batch_sizes, modes=modes, samples_file=samples_file, noise_scale=noise_scale,
               budget_w=budget_w, objective=objective, risk=risk, cautious=True)
    return r, out, int(model.about.trained_on["modes"]), model
