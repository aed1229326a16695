"""The JSON contract: what every command prints with --json, for scripts, playbooks and fleets.

Every document is one JSON object on stdout with

* ``schema_version``: SCHEMA_VERSION; a field is added without changing it, a field renamed,
  removed or given another meaning changes it;
* ``command``: the command that printed it (``status``, ``apply``, ``restore``, ``pareto``, ...);
* ``simulated`` wherever a board is involved: True when the figures come from the simulator (or a
  replayed recording) and not from a live board; ``pareto`` and ``fit`` say it of the model's
  profile (its ``timed`` says SIMULATED or REPLAYED; False for a model of the roofline prior alone).

A decision (``pareto``, ``tune``) has the same shape for one batch size or several: ``feasible``,
``goal``, the pick (``mode``, ``key``, ``batch_size``, ``source``: measured or predicted, time and
power with their spreads, ``epoch_s``/``energy_wh`` where the epoch is known, ``time_to_target_s``/
``energy_to_target_wh`` where the decision is per target), ``timed`` (what one time_ms is), ``front``
(the Pareto front of the candidates, each point shaped like the pick), ``baselines`` (always the
four names ``best_preset``, ``maxn``, ``best_mode_at_default_batch`` and
``largest_batch_fastest_mode``; null where none applies), ``energy`` (decision.energy.Energy.as_dict:
the least-energy candidate that fits in memory, goal-free, beside the pick, MAXN and the best preset,
in ``unit`` J per step for one batch size or Wh to target for several, each point with its
``energy`` and ``more_than_least_pct``; added in version 2; ``pick_ranked_by`` ``energy`` where the
goal is least energy and the pick was ranked by its median energy, as ``pareto`` ranks it, so it may
differ from ``least``, ranked by ``energy_upper``; null otherwise), ``default_batch``, and what a decision
over several batch sizes is made of (``samples_to_target``, ``throughput_only``, ``target_samples``,
``target_samples_note``, ``memory``; null for one batch size), and ``profiled``: the profiled
modes (or (mode, batch size) pairs) the model rests on, 0 for a decision from the roofline prior
alone (no measurement).  Version 2 renamed the baseline
``best_mode_at_batch_N`` to ``best_mode_at_default_batch`` and gave both shapes every
field.  A goal that no mode meets prints ``{"feasible": false, "goal":
..., "reason": ..., "closest": point or null}`` and the command exits 3.

``colocate`` (training beside inference) has the decision's ``feasible``, ``goal``, pick (``pick``:
``mode``, ``key``, ``batch_size`` the inference batch, ``source``, ``time_ms`` the training
minibatch's effective time, ``power_w`` the mean power, and ``train_samples_per_s``,
``latency_p50_ms``/``latency_p99_ms``, ``over_budget``, ``inference_share``) and ``baselines``
(``maxn_largest_feasible_batch``, ``best_preset``, ``training_alone``), ``simulated``, the
``strategy`` and ``profiled_modes``; an infeasible budget prints ``feasible: false`` with the
closest option and exits 3.  With the user's training script (after ``--``) it adds
``train_script``: ``label``, ``command``, ``counted`` (what the probe counted in one iteration, in
words), ``timed``, ``gflop_per_iteration``, ``parameters``, ``batch_size`` (null where no
DataLoader was seen and no ``--batch-size`` given), ``batch_size_from``, ``unit`` (``sample``, or
``iteration``: then every ``train_samples_per_s`` is iterations per second), ``batch`` and
``notes``; ``train_workload`` is ``script``.

Modes are given twice: ``mode`` (the four knobs as numbers) and ``key`` (the compact exact form
``6c/1497.6/522.75/2133``, which ``Mode.from_key`` reads back).

The board's documents:

* ``status``: ``device``, ``backend``, ``simulated``, ``emulated``, ``board`` (the board-wide
  lock's name; null for a board of this process), ``mode``/``key``/``words``, ``preset`` (the
  nvpmodel preset whose mode the board is in, or null), ``nvpmodel_id``, ``lock_holder`` (the pid
  driving the board, -1 when held by a process whose pid cannot be read, null when free),
  ``restore`` (what ``ptui restore`` would undo: ``kind`` profile or last-apply, ``mode``,
  ``session``, ``created``, ``pid``, ``in_progress``: that profile is still running),
  ``restore_problem`` (a saved state restore would refuse, in one line) and ``lock_problem``
  (what stands at the board's lock path instead of a lock file, a symbolic link say, or why no
  lock file can be made there, with the path: apply and profile are refused until it is mended;
  null when none);
* ``apply``: ``dry_run``, ``preset``, ``from``/``from_key``, ``to``/``to_key``, ``changed`` (the
  board was not held in the target: an apply writes; a custom ``--persist`` counts unless nvpmodel
  already keeps that very mode: its status file names ptui's mode and nvpmodel.conf holds it),
  ``steps``, ``applied``, ``readback``/``readback_key``, ``message``, and ``persist`` when asked;
* ``restore``: ``restored``, ``mode``/``key`` (what the board reads back), ``message``.
"""
from __future__ import annotations

import json

from ..catalogue.modes import Mode
from ..decision import energy
from ..decision.pareto import best_preset, front_indices, presets_table
from ..prediction.modeldir import finite_json
from ..profiling.profiler import time_unit

SCHEMA_VERSION = 2


def document(command: str, body: dict) -> str:
    """One --json document: the schema version and the command first, then `body` (non-finite
    numbers as null)."""
    return json.dumps(finite_json({"schema_version": SCHEMA_VERSION, "command": command, **body}),
                      allow_nan=False)


def mode_fields(mode: Mode) -> dict:
    """A mode as the contract gives it: ``mode`` (the knobs) and ``key``."""
    return {"mode": mode.as_dict(), "key": mode.key}


def infeasible(goal: str | None, reason: str, closest: dict | None = None,
               profiled: int | None = None) -> dict:
    """The body of a decision no mode meets (exit 3); with `profiled` (where known: 0 for the
    roofline prior alone) how many profiled modes it rests on, as a feasible decision's says."""
    body: dict = {"feasible": False, "goal": goal, "reason": reason, "closest": closest}
    if profiled is not None:
        body["profiled"] = profiled
    return body


def point(tab, i: int, *, mb_per_epoch: int | None = None, epochs: int | None = None,
          batch_size: int | None = None, target: tuple[float, float] | None = None) -> dict:
    """One candidate of a decision (pareto.Table row i): mode, key, batch size (the row's where the
    table has several, else `batch_size`), source, time and power with their spreads, per epoch
    (time, energy) where the epoch's size is known, and to target (time, energy: `target`) where
    the decision is per target."""
    m = tab.modes[i]
    t, pw = float(tab.time_ms[i]), float(tab.power_w[i])
    epoch_s = round(t * mb_per_epoch / 1000.0, 3) if mb_per_epoch else None
    b = tab.batch_of(i)
    return {**mode_fields(m), "batch_size": batch_size if b is None else b, "source": tab.source(i),
            "time_ms": round(t, 4), "power_w": round(pw, 4),
            "time_ms_std": round(float(tab.time_ms_std[i]), 4),
            "power_w_std": round(float(tab.power_w_std[i]), 4), "epoch_s": epoch_s,
            "energy_wh": round(pw * epoch_s * epochs / 3600.0, 4) if epoch_s and epochs else None,
            "time_to_target_s": None if target is None else round(target[0], 3),
            "energy_to_target_wh": None if target is None else round(target[1], 4)}


def _presets(model, goal: dict, timed: str = "") -> tuple:
    """(pareto.presets_table's presets, pareto.best_preset's pick among them for `goal`, in words
    per `timed`'s unit), each predicted by `model`; (None, None) without a model."""
    if model is None:
        return None, None
    presets = presets_table(model.device, model)
    return presets, best_preset(presets, time_unit(timed), **goal)


def _preset_baselines(presets, bp, pt) -> dict:
    """The NVIDIA preset a user would pick for the same goal (`bp`), and MAXN, each predicted by
    the model (at its default batch size: `presets`, `_presets`) and shaped by `pt(table, row)`."""
    out: dict[str, dict | None] = {"best_preset": None, "maxn": None}
    if presets is None:
        return out
    if bp is not None:
        b, pre = bp
        out["best_preset"] = dict(pt(presets[0], b.index), preset=pre.name, goal=b.goal)
    ptab, ps = presets
    k = next((j for j, p in enumerate(ps) if p.name == "MAXN"), None)
    if k is not None:
        out["maxn"] = dict(pt(ptab, k), preset="MAXN")
    return out


def profiled_modes(model) -> int | None:
    """How many profiled modes (or (mode, batch size) pairs) a model's predictions rest on: 0 for
    the roofline prior alone; None when the model does not say."""
    n = model.about.trained_on.get("modes") if model is not None else None
    return int(n) if isinstance(n, (int, float)) else None


def _body(pick: dict, d, *, timed: str, front: list, baselines: dict, default_batch,
          per_target: dict | None = None, profiled: int | None = None, energy=None) -> dict:
    """The one decision shape, for one batch size or several: what is per target (the relation
    of samples to batch size, the target, memory) is null for one batch size.  profiled: the
    profiled modes the model rests on (0: a decision from the roofline prior alone)."""
    per_target = per_target or {}
    return {**pick, "feasible": True, "goal": d.goal, "exceed_prob": d.exceed_prob, "timed": timed,
            "profiled": profiled,
            "front": front,
            "baselines": {"best_preset": None, "maxn": None, "best_mode_at_default_batch": None,
                          "largest_batch_fastest_mode": None, **baselines},
            "energy": None if energy is None else energy.as_dict(),
            "default_batch": default_batch,
            **{k: per_target.get(k) for k in ("samples_to_target", "throughput_only",
                                               "target_samples", "target_samples_note", "memory")}}


def _by_median(goal: dict, cautious: bool) -> bool:
    """The goal is least energy and the decision ranked its pick by the median (pareto; tune's
    cautious ranking ranks by upper bounds)."""
    return goal.get("objective") == "energy" and not cautious


def decision_energy(tab, d, model, goal: dict, *, batch_size: int | None = None,
                    cautious: bool = False):
    """The energy side of a decision of one batch size (decision.energy.Energy, per step): the
    least-energy mode of `tab` beside the pick, MAXN and the best preset for `goal` (predicted by
    `model`); None where no mode is eligible.  cautious: the decision ranked by upper bounds
    (tune).  The faces print its lines()."""
    presets, bp = _presets(model, goal)
    return energy.per_step(tab, d, presets, bp, batch_size, goal.get("budget_w"), goal.get("risk"),
                           goal.get("tolerance_w") or 0.0, _by_median(goal, cautious))


def batch_decision_energy(r, model, goal: dict):
    """decision_energy for a decision over batch sizes (batch.BatchDecision `r`): to target."""
    presets, bp = _presets(model, goal)
    return energy.to_target(r, presets, bp, goal.get("risk"))


def decision_body(tab, d, model, goal: dict, *, timed: str, batch_size: int | None = None,
             mb_per_epoch: int | None = None, epochs: int | None = None, cautious: bool = False) -> dict:
    """The body of a decision of one batch size (pareto.choose's `d` in `tab`): the pick as a
    point, then feasible, goal, exceed_prob, timed, the front and the baselines (the NVIDIA preset
    a user would pick for the same goal, and MAXN, each predicted by `model`), and `energy`
    (decision.energy.per_step: the least-energy mode beside them)."""

    def pt(t, i: int) -> dict:
        return point(t, i, mb_per_epoch=mb_per_epoch, epochs=epochs, batch_size=batch_size)
    presets, bp = _presets(model, goal, timed)
    return _body(pt(tab, d.index), d, timed=timed,
                 front=[pt(tab, int(i)) for i in front_indices(tab.time_ms, tab.power_w)],
                 baselines=_preset_baselines(presets, bp, pt), default_batch=batch_size,
                 profiled=profiled_modes(model),
                 energy=energy.per_step(tab, d, presets, bp, batch_size, risk=goal.get("risk"),
                                        pick_by_median=_by_median(goal, cautious)))


def batch_decision_body(r, model, goal: dict, *, timed: str) -> dict:
    """The body of a decision over several batch sizes (batch.BatchDecision `r`, per target), in
    the same shape as `decision`: the front is over time to target and power, and the baselines
    add the best mode at the default batch size and the paper's (largest batch, fastest mode);
    `energy` is to target (decision.energy.to_target)."""
    tab = r.space.table

    def pt(t, i: int) -> dict:
        b = t.batch_of(i) or r.default_batch
        return point(t, i, batch_size=b, target=r.target_at(float(t.time_ms[i]), float(t.power_w[i]), b))
    presets, bp = _presets(model, goal)
    base = _preset_baselines(presets, bp, pt)
    base["best_mode_at_default_batch"] = pt(tab, r.default.index) if r.default else None
    base["largest_batch_fastest_mode"] = pt(tab, r.paper.index) if r.paper else None
    m = r.memory
    return _body(pt(tab, r.pick.index), r.pick, timed=timed,
                 front=[pt(tab, i) for i, _, _ in r.front()], baselines=base,
                 default_batch=r.default_batch, profiled=profiled_modes(model),
                 energy=energy.to_target(r, presets, bp, goal.get("risk")),
                 per_target={"samples_to_target": r.rel.source,
                             "throughput_only": r.rel.throughput_only,
                             "target_samples": r.samples, "target_samples_note": r.samples_note,
                             "memory": {"how": m.how, "capacity_gb": round(m.capacity_gb, 2),
                                        "largest_batch": m.largest(),
                                        "infeasible_batch_sizes": r.dropped}})
