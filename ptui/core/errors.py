"""One error model for ptui.

Every error ptui expects derives from PtuiError and carries the process exit code it maps to:
2 bad input, 1 device or runtime failure, 3 no feasible mode, 130 interrupted.  The CLI maps them
once (cli.main) and prints one line; the app shows the message in its own words.  Anything else is a
bug and shows a traceback.
"""
from __future__ import annotations

import math

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_INPUT = 2
EXIT_INFEASIBLE = 3
EXIT_INTERRUPTED = 130


class PtuiError(Exception):
    """The root of ptui's errors; `exit_code` is the class default unless given per instance."""
    exit_code: int = EXIT_RUNTIME

    def __init__(self, message: str = "", exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(PtuiError, ValueError):
    """Bad input from the user: a flag, a file, a name (exit code 2)."""
    exit_code = EXIT_INPUT


class RuntimeFailure(PtuiError, RuntimeError):
    """The device or the run failed: no permission, no sensor, a service down (exit code 1)."""
    exit_code = EXIT_RUNTIME


class Infeasible(PtuiError, ValueError):
    """No mode meets the goal (exit code 3)."""
    exit_code = EXIT_INFEASIBLE


class Interrupted(PtuiError):
    """The user stopped the run (exit code 130)."""
    exit_code = EXIT_INTERRUPTED


# operating-system errors ptui reports as one line (a path that is missing, not writable, a folder)
OS_ERRORS: tuple[type[BaseException], ...] = (PermissionError, FileNotFoundError, IsADirectoryError,
                                              NotADirectoryError, FileExistsError)


def known_errors() -> tuple[type[BaseException], ...]:
    """The exception types shown as one line (catch these; anything else is a bug)."""
    return (PtuiError, *OS_ERRORS)


def exit_code(exc: BaseException) -> int:
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return int(getattr(exc, "exit_code", EXIT_RUNTIME))


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# -- values as they enter: one rule for the CLI's flags and the app's fields -------------------------
def number(value, what: str = "value", *, integer: bool = False, ge: float | None = None,
           gt: float | None = None, le: float | None = None, lt: float | None = None):
    """`value` (a number or its text) as an int or a finite float within the bounds, else InputError
    naming `what`."""
    text = str(value).strip()
    x: int | float
    try:
        if integer:
            if isinstance(value, float) and value.is_integer():
                x = int(value)
            else:
                x = int(text)
        else:
            x = float(text)
    except (TypeError, ValueError):
        kind = "a whole number" if integer else "a number"
        raise InputError(f"{what} must be {kind}, got {text!r}") from None
    if not integer and not math.isfinite(x):
        raise InputError(f"{what} must be a finite number, got {text!r}")
    if ge is not None and x < ge:
        raise InputError(f"{what} must be at least {_fmt(ge)}, got {text}")
    if gt is not None and x <= gt:
        positive = " (positive)" if gt == 0 else ""
        raise InputError(f"{what} must be above {_fmt(gt)}{positive}, got {text}")
    if le is not None and x > le:
        raise InputError(f"{what} must be at most {_fmt(le)}, got {text}")
    if lt is not None and x >= lt:
        raise InputError(f"{what} must be below {_fmt(lt)}, got {text}")
    return x


PtuiInputError = InputError        # the name fit.py and active.py use
