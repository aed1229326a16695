"""The JSON contract: what every command prints with --json, for scripts, playbooks and fleets.

Every document is one JSON object on stdout with

* ``schema_version``: SCHEMA_VERSION; a field is added without changing it, a field renamed,
  removed or given another meaning changes it;
* ``command``: the command that printed it (``status``, ``apply``, ``restore``, ``pareto``, ...);
* ``simulated`` wherever a board is involved: True when the figures come from the simulator (or a
  replayed recording) and not from a live board.

A decision (``pareto``, ``tune``) has the same shape for one batch size or several: ``feasible``,
``goal``, the pick (``mode``, ``key``, ``batch_size``, ``source``: measured or predicted, time and
power with their spreads), ``timed`` (what one time_ms is), ``front`` (the Pareto front of the
candidates, each point shaped like the pick) and ``baselines`` (a name for each point it is compared
with; null where none applies).  A goal that no mode meets prints ``{"feasible": false, "goal":
..., "reason": ..., "closest": point or null}`` and the command exits 3.

Modes are given twice: ``mode`` (the four knobs as numbers) and ``key`` (the compact exact form
``6c/1497.6/522.75/2133``, which ``Mode.from_key`` reads back).

The board's documents:

* ``status``: ``device``, ``backend``, ``simulated``, ``emulated``, ``board`` (the board-wide
  lock's name; null for a board of this process), ``mode``/``key``/``words``, ``preset`` (the
  nvpmodel preset whose mode the board is in, or null), ``nvpmodel_id``, ``lock_holder`` (the pid
  driving the board, -1 when held by a process whose pid cannot be read, null when free),
  ``restore`` (what ``ptui restore`` would undo: ``kind`` profile or last-apply, ``mode``,
  ``session``, ``created``, ``pid``, ``in_progress``: that profile is still running) and
  ``restore_problem`` (a saved state restore would refuse, in one line);
* ``apply``: ``dry_run``, ``preset``, ``from``/``from_key``, ``to``/``to_key``, ``changed`` (the
  board was not held in the target: an apply writes; a custom ``--persist`` always counts),
  ``steps``, ``applied``, ``readback``/``readback_key``, ``message``, and ``persist`` when asked;
* ``restore``: ``restored``, ``mode``/``key`` (what the board reads back), ``message``.
"""
from __future__ import annotations

import json

from .modeldir import finite_json
from .modes import Mode

SCHEMA_VERSION = 1


def document(command: str, body: dict) -> str:
    """One --json document: the schema version and the command first, then `body` (non-finite
    numbers as null)."""
    return json.dumps(finite_json({"schema_version": SCHEMA_VERSION, "command": command, **body}),
                      allow_nan=False)


def mode_fields(mode: Mode) -> dict:
    """A mode as the contract gives it: ``mode`` (the knobs) and ``key``."""
    return {"mode": mode.as_dict(), "key": mode.key}


def infeasible(goal: str | None, reason: str, closest: dict | None = None) -> dict:
    """The body of a decision no mode meets (exit 3)."""
    return {"feasible": False, "goal": goal, "reason": reason, "closest": closest}


def point(tab, i: int, *, mb_per_epoch: int | None = None, epochs: int | None = None,
          batch_size: int | None = None) -> dict:
    """One candidate of a decision (pareto.Table row i): mode, key, batch size, source, time and
    power with their spreads, and per epoch (time, energy) where the epoch's size is known."""
    m = tab.modes[i]
    t, pw = float(tab.time_ms[i]), float(tab.power_w[i])
    epoch_s = round(t * mb_per_epoch / 1000.0, 3) if mb_per_epoch else None
    return {**mode_fields(m), "batch_size": batch_size, "source": tab.source(i),
            "time_ms": round(t, 4), "power_w": round(pw, 4),
            "time_ms_std": round(float(tab.time_ms_std[i]), 4),
            "power_w_std": round(float(tab.power_w_std[i]), 4), "epoch_s": epoch_s,
            "energy_wh": round(pw * epoch_s * epochs / 3600.0, 4) if epoch_s and epochs else None}


def decision(tab, d, model, goal: dict, *, timed: str, batch_size: int | None = None,
             mb_per_epoch: int | None = None, epochs: int | None = None) -> dict:
    """The body of a decision of one batch size (pareto.choose's `d` in `tab`): the pick as a
    point, then feasible, goal, exceed_prob, timed, the front and the baselines (the NVIDIA preset
    a user would pick for the same goal, and MAXN, each predicted by `model`)."""
    from .pareto import best_preset, front_indices, presets_table

    def pt(t, i: int) -> dict:
        return point(t, i, mb_per_epoch=mb_per_epoch, epochs=epochs, batch_size=batch_size)
    presets = presets_table(model.device, model)
    baselines: dict[str, dict | None] = {"best_preset": None, "maxn": None}
    bp = best_preset(presets, **goal)
    if bp is not None:
        b, pre = bp
        # pareto.best_preset types its Preset as object (pareto does not import devices)
        baselines["best_preset"] = dict(pt(presets[0], b.index), preset=pre.name,  # type: ignore[attr-defined]
                                        goal=b.goal)
    ptab, ps = presets
    k = next((j for j, p in enumerate(ps) if p.name == "MAXN"), None)
    if k is not None:
        baselines["maxn"] = dict(pt(ptab, k), preset="MAXN")
    body = pt(tab, d.index)
    body.update(feasible=True, goal=d.goal, exceed_prob=d.exceed_prob, timed=timed,
                front=[pt(tab, int(i)) for i in front_indices(tab.time_ms, tab.power_w)],
                baselines=baselines)
    return body
