"""Every file and directory ptui keeps for the user, built in one place.

The data directory is ``$PTUI_DATA_DIR``, else ``$XDG_DATA_HOME/ptui``, else ``~/.local/share/ptui``.
Inside it: ``sessions.sqlite`` (profiling sessions), ``profiles/`` (profile CSVs the app writes),
``models/`` (fine-tuned predictors the app writes), ``logs/`` (output of profiled scripts) and
``last-apply-<device>.json`` (the state before the last apply, for ``ptui restore``; a board under
another sysfs root, e.g. an emulated one, has its own ``last-apply-<device>-<root>.json``).
"""
from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    env = os.environ.get("PTUI_DATA_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "ptui"


def sessions_db() -> Path:
    return data_dir() / "sessions.sqlite"


def profiles_dir() -> Path:
    return data_dir() / "profiles"


def profile_csv(session: str) -> Path:
    """Where the app writes a session's profile."""
    return profiles_dir() / f"{session}.csv"


def models_dir() -> Path:
    return data_dir() / "models"


def model_dir(name: str) -> Path:
    """Where the app writes a fine-tuned model."""
    return models_dir() / name


def logs_dir() -> Path:
    return data_dir() / "logs"


def script_log(session: str) -> Path:
    """The output of a training script profiled in a session."""
    return logs_dir() / f"{session}.log"


def apply_snapshot(board: str) -> Path:
    """The board's state before the last ptui apply (read by ``ptui restore``); `board` is the
    device name, with a tag for a board under another sysfs root (an emulated one)."""
    return data_dir() / f"last-apply-{board}.json"


def latest_outputs(device: str, complete=None) -> tuple[Path | None, Path | None]:
    """The newest profile CSV (for which complete(path) holds, if given) and model directory the
    app made for this device, if any."""
    profiles = sorted((p for p in profiles_dir().glob(f"{device}-*.csv") if complete is None or complete(p)),
                      key=lambda p: p.stat().st_mtime)
    models = sorted((p for p in models_dir().glob(f"{device}-*") if (p / "meta.json").exists()),
                    key=lambda p: p.stat().st_mtime)
    return (profiles[-1] if profiles else None), (models[-1] if models else None)
