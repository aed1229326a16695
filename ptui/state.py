"""What the app's screens share, read and written on the UI thread only.

Workers never change it: they post a message (ptui/messages.py) and the handler updates the state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import core
from .core import Backend, Mode, Sampler


@dataclass
class AppState:
    """The device, and what the user has produced so far."""
    backend: Backend
    note: str
    """Why this backend (shown on the dashboard)."""
    sampler: Sampler
    profile_csv: Path | None = None
    """The profile the Fine-tune and Pareto screens start from."""
    workload: str = "resnet18"
    """The workload of that profile (epoch sizes, the simulated stand-in for the user's job)."""
    model_dir: Path | None = None
    """The fine-tuned model the Pareto screen predicts with."""
    selected: Mode | None = None
    """The mode picked on Pareto for Apply."""
    selected_pred: dict[str, float] = field(default_factory=dict)
    """Its predicted (or measured) time_ms, power_w and their spreads (time_ms_std, power_w_std)."""
    selected_prior: bool = False
    """Those figures are the roofline prior's alone (no mode profiled): Apply says so."""
    selected_basis: str = "predicted"
    """Where selected_pred comes from: 'predicted' (a model), 'measured' (a profile CSV) or
    'simulated' (a profile CSV the simulator made)."""
    selected_batch: int | None = None
    """The batch size picked with it (its source's, where known), else None."""
    selected_workload: str | None = None
    """The workload of the source it was picked from (None: not known): what the simulated board
    trains on Apply, so its measured power is of the job the figures are for."""
    selected_unit: str = "minibatch"
    """What one of its times is: a minibatch, or what the probe timed in a script."""
    applied: Mode | None = None
    """The mode an apply made here left the board in (None: none, or rolled back): said when the
    app quits, with the way back (quitting after an apply said nothing: a user's trial)."""
    log: list[str] = field(default_factory=list)


def make_state(backend_kind: str | None = None, device: str | None = None, speed: float = 1.0,
               clock=None, corpus: str | None = None, root: str | None = "/") -> AppState:
    backend, note = core.open_backend(backend_kind, device, clock=clock or core.RealClock(speed),
                                      corpus=corpus, root=root)
    st = AppState(backend, note, Sampler(backend, interval=0.5))
    st.profile_csv, st.model_dir = core.latest_outputs(backend.device.name)
    return st
