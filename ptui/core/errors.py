"""The error types ptui reports as one line (anything else is a bug and shows a traceback)."""
from __future__ import annotations


class PtuiError(Exception):
    """Root of the errors ptui reports as one line; carries the CLI exit code."""
    exit_code = 1


class PtuiInputError(PtuiError, ValueError):
    """Bad input: a flag, a file or a value that cannot be used (exit code 2)."""
    exit_code = 2


def known_errors() -> tuple[type[BaseException], ...]:
    from .backends.base import BackendError
    from .csvio import CSVError
    from .devices import DeviceError
    from .modes import ModeError
    from .profiler import ProfileError
    from .store import StoreError
    from .workloads import WorkloadError
    extra: list[type[BaseException]] = []
    from .pareto import InfeasibleError
    from .predictor import ModelError
    extra += [ModelError, InfeasibleError]
    try:
        from .train import TrainError
        extra.append(TrainError)
    except ImportError:  # no torch: nothing can raise it
        pass
    return (PtuiError, BackendError, CSVError, DeviceError, ModeError, ProfileError, StoreError,
            WorkloadError, PermissionError, FileNotFoundError, IsADirectoryError, *extra)
