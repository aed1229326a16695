"""Reading and writing mode / profile CSV files.

A profile CSV starts with ``cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w``; any further columns are
extras.  Readers accept extra columns and reject, with one line naming the file and line, missing
columns, non-numbers, non-positive values and modes that are not on the device's tables.
"""
from __future__ import annotations

import csv
import math
import os
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

from .devices import Device
from .errors import InputError
from .modes import Mode, ModeError, fmt_mhz, make_mode

MODE_COLS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")
PROFILE_COLS = MODE_COLS + ("time_ms", "power_w")


class CSVError(InputError):
    pass


def _num(text: str, col: str, where: str) -> float:
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise CSVError(f"{where}: column {col!r} is not a number: {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise CSVError(f"{where}: column {col!r} must be a positive number, got {text!r}")
    return v


def read_csv(path: str | Path, device: Device, *, need: Sequence[str] = MODE_COLS,
             extras: Sequence[str] = ()) -> list[tuple[Mode, dict]]:
    """Rows as (mode, {column: float}) for the `need` and known `extras` columns present."""
    path = Path(path)
    try:
        fh = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise CSVError(f"{path}: cannot read: {e.strerror or e}") from None
    rows: list[tuple[Mode, dict]] = []
    with fh:
        try:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise CSVError(f"{path}: file is empty")
            header = [h.strip() for h in header]
            missing = [c for c in need if c not in header]
            if missing:
                raise CSVError(f"{path}:1: missing column(s) {', '.join(missing)} "
                               f"(need {', '.join(need)})")
            pos = {c: header.index(c) for c in list(need) + [e for e in extras if e in header]}
            for lineno, rec in enumerate(reader, start=2):
                if not rec or all(not x.strip() for x in rec):
                    continue
                where = f"{path}:{lineno}"
                if len(rec) < len(header):
                    raise CSVError(f"{where}: expected {len(header)} fields, found {len(rec)}")
                vals = {}
                for c, i in pos.items():
                    text = rec[i].strip()
                    if c in need:
                        vals[c] = _num(text, c, where)
                    elif text:
                        try:
                            vals[c] = float(text)
                        except ValueError:
                            raise CSVError(f"{where}: column {c!r} is not a number: {text!r}") from None
                try:
                    mode = make_mode(device, vals["cores"], vals["cpu_mhz"], vals["gpu_mhz"],
                                     vals["mem_mhz"])
                except ModeError as e:
                    raise CSVError(f"{where}: {e}") from None
                rows.append((mode, vals))
        except UnicodeDecodeError:
            raise CSVError(f"{path}: not a text CSV file") from None
        except csv.Error as e:
            raise CSVError(f"{path}: malformed CSV: {e}") from None
    return rows


def read_modes(path, device: Device) -> list[Mode]:
    rows = read_csv(path, device)
    if not rows:
        raise CSVError(f"{path}: no modes in file")
    return [m for m, _ in rows]


def fmt_value(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.4f}".rstrip("0").rstrip(".") if math.isfinite(v) else ""
    return "" if v is None else str(v)


def mode_cells(m: Mode) -> list[str]:
    return [str(m.cores), fmt_mhz(m.cpu_mhz), fmt_mhz(m.gpu_mhz), fmt_mhz(m.mem_mhz)]


def write_csv(path: str | Path | None, header: Sequence[str], rows: Iterable[Sequence]) -> None:
    """Write atomically (temp file + rename) so a crash never leaves a half-written file;
    path None or '-' writes to stdout."""
    import sys
    if path in (None, "-"):
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
        return
    path = Path(path)
    d = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=d)
    except OSError as e:
        raise CSVError(f"{path}: cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_profile(path, device: Device, *, min_modes: int = 10):
    """A profile CSV as (modes, time_ms array, power_w array).  Identical duplicate rows are
    merged; duplicates with conflicting values are an error."""
    import numpy as np
    rows = read_csv(path, device, need=PROFILE_COLS)
    seen: dict[Mode, tuple[int, float, float]] = {}
    for i, (m, v) in enumerate(rows):
        prev = seen.get(m)
        if prev is not None:
            if abs(prev[1] - v["time_ms"]) > 1e-9 * prev[1] or abs(prev[2] - v["power_w"]) > 1e-9 * prev[2]:
                raise CSVError(f"{path}: mode {m.key} appears twice with different values "
                               f"({prev[1]:g} ms/{prev[2]:g} W vs {v['time_ms']:g} ms/{v['power_w']:g} W)")
            continue
        seen[m] = (i, v["time_ms"], v["power_w"])
    if len(seen) < min_modes:
        raise CSVError(f"{path}: {len(seen)} distinct modes; at least {min_modes} are needed "
                       f"(profile more with: ptui profile --count 50)")
    modes = list(seen)
    return (modes, np.array([seen[m][1] for m in modes]), np.array([seen[m][2] for m in modes]))
