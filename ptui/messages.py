"""Messages the app's workers post; handlers on the UI thread update widgets and shared state.

Named in the past tense: each says what happened in a worker.  They carry plain values, never a
live object the worker keeps changing."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message


# -- profile -----------------------------------------------------------------------------------------
@dataclass
class ProfileStarted(Message):
    run: object                      # core.ProfileRun: read-only from the UI (progress)
    session: str
    total: int
    finished: list                   # (index, row dict) of modes finished before this run
    notes: list


@dataclass
class ModeProfiled(Message):
    done: int
    total: int
    row: dict                        # ModeResult.row()
    batch_size: int | None = None    # a profile over several batch sizes: this point's


@dataclass
class ProfileFinished(Message):
    status: str                      # done | aborted | failed
    out: Path | None
    n_rows: int
    workload: str | None
    error: str | None = None
    note: str = ""                   # active profiling: why it stopped and its best mode
    board_left: bool = False         # the original mode could not be restored (profiler.RestoreFailed)


# -- fine-tune ---------------------------------------------------------------------------------------
@dataclass
class FitProgressed(Message):
    text: str


@dataclass
class FitFinished(Message):
    metrics: dict
    fitted_on: str                 # '12 profiled modes', or (mode, batch size) pairs and sizes
    seconds: float
    out: Path


@dataclass
class FitFailed(Message):
    error: str


# -- pareto ------------------------------------------------------------------------------------------
@dataclass
class PredictionsLoaded(Message):
    path: Path
    predictions: object              # core.usecases.decide.Predictions


@dataclass
class PredictionsFailed(Message):
    path: Path
    error: str


@dataclass
class ViewReady(Message):
    generation: int                  # the request it answers (older answers are dropped)
    view: object | None              # core.usecases.decide.View
    error: str | None = None         # bad input: what is wrong


# -- colocate ----------------------------------------------------------------------------------------
@dataclass
class ColocateDecided(Message):
    goal: tuple                      # (train, infer, rate, latency ms, budget W) it answers
    view: object | None              # core.ColocateView
    error: str | None = None


@dataclass
class ColocateLive(Message):
    snapshot: dict                   # core.live_snapshot of the running demo's phase


@dataclass
class ColocateRunEnded(Message):
    result: dict | None              # core.run_demo's result (None: it failed)
    error: str | None = None


# -- apply -------------------------------------------------------------------------------------------
@dataclass
class PlanReady(Message):
    plan: object | None              # core.apply.Plan
    error: str | None = None
    note: str | None = None          # what the plan cannot change (core.tpc_note), read with it


@dataclass
class ApplyFinished(Message):
    result: object                   # core.apply.ApplyResult
    stand_in: str | None = None      # the workload the simulated board now trains, if it started one


@dataclass
class RollbackFinished(Message):
    mode: object | None
    error: str | None = None
    changed: bool = False          # refused: someone changed the board since the apply


@dataclass
class PersistFinished(Message):
    text: str | None
    error: str | None = None
