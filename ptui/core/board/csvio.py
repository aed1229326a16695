"""Reading and writing mode / profile CSV files.

A profile CSV starts with ``cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w``; any further columns are
extras.  Readers accept extra columns and reject, with one line naming the file and line, missing
columns, non-numbers, non-positive values, figures no Jetson can record (LIMITS) and modes that are
not on the device's tables.
"""
from __future__ import annotations

import csv
import errno
import io
import math
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..catalogue.devices import Device
from ..catalogue.modes import Mode, ModeError, fmt_mhz, make_mode
from ..errors import InputError
from .files import check_input, check_name_length, existing, read_head, write_error
from .locks import current_umask, pid_alive

MODE_COLS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")
PROFILE_COLS = MODE_COLS + ("time_ms", "power_w")


class CSVError(InputError):
    pass


# Figures no Jetson can record are refused as a file is read (a replay corpus with 1e300 W is a
# broken file, not a board): no Jetson draws a kilowatt, and no training step takes a day.
MAX_POWER_W = 1000.0
MAX_TIME_MS = 24 * 3600 * 1000.0
LIMITS = {"time_ms": (MAX_TIME_MS, "ms"), "time_ms_p25": (MAX_TIME_MS, "ms"),
          "time_ms_p75": (MAX_TIME_MS, "ms"), "power_w": (MAX_POWER_W, "W"),
          "power_w_std": (MAX_POWER_W, "W")}


def _num(text: str, col: str, where: str) -> float:
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise CSVError(f"{where}: column {col!r} is not a number: {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise CSVError(f"{where}: column {col!r} must be a positive number, got {text!r}")
    _within_limit(v, text, col, where)
    return v


def _within_limit(v: float, text: str, col: str, where: str) -> None:
    if col in LIMITS and v > LIMITS[col][0]:
        top, unit = LIMITS[col]
        raise CSVError(f"{where}: column {col!r} is {text} {unit}, more than a Jetson can record "
                       f"(at most {top:.0f} {unit}); is the file broken?")


def _extra(text: str, col: str, where: str) -> float | None:
    """An optional figure: a number; a bounded one (a spread: LIMITS) must also be finite, not
    negative and within its limit, with 'nan' read as missing (None)."""
    try:
        v = float(text)
    except ValueError:
        raise CSVError(f"{where}: column {col!r} is not a number: {text!r}") from None
    if col not in LIMITS:
        return v
    if math.isnan(v):
        return None
    if not math.isfinite(v) or v < 0:
        raise CSVError(f"{where}: column {col!r} must be a finite number, not negative, got {text!r}")
    _within_limit(v, text, col, where)
    return v


# what `ptui predict` writes (batch_size only for a --modes file that has one): predictions, which
# a profile is not (fit, a what-if, a replay and the pool read a profile as measurements)
PREDICTION_COLS = (*MODE_COLS, "batch_size", "time_ms", "power_w", "time_ms_std", "power_w_std")


# A modes file (--modes) names modes to profile or predict: the largest board's mode space is
# 29 232 modes (xavier-agx), so 200 000 rows is every one of them several times over (at several
# batch sizes).  More is a broken or wrong file, refused as it is read: a 3-million-row file ran
# past a minute at 2.5 GB before.
MAX_MODE_ROWS = 200_000


def fields_error(where: str, header: Sequence[str], row: Sequence[str]) -> str:
    """The line that refuses a row whose fields are not the header's (`where`: PATH:LINE)."""
    return f"{where}: expected {len(header)} fields, found {len(row)}"


def read_csv(path: str | Path, device: Device, *, need: Sequence[str] = MODE_COLS,
             extras: Sequence[str] = (), max_rows: int | None = None) -> list[tuple[Mode, dict]]:
    """Rows as (mode, {column: float}) for the `need` and known `extras` columns present; more
    than `max_rows` rows are refused as they are read."""
    path = Path(path)
    check_input(path, "a CSV file")
    try:
        fh = open(path, newline="", encoding="utf-8-sig")     # -sig: Excel's byte-order mark
    except OSError as e:
        raise CSVError(f"{path}: cannot read: {e.strerror or e}") from None
    rows: list[tuple[Mode, dict]] = []
    with fh:
        try:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise CSVError(f"{path}: file is empty")
            header = [h.strip().lower() for h in header]
            missing = [c for c in need if c not in header]
            if missing and len(header) == 1:
                sep = next((s for s in (";", "\t", "|") if s in header[0]), None)
                if sep is not None:
                    name = {";": "semicolons", "\t": "tabs", "|": "bars"}[sep]
                    raise CSVError(f"{path}:1: columns are separated by {name}; ptui reads comma-"
                                   f"separated CSV with a dot as the decimal mark (in Excel: Save As "
                                   f"'CSV UTF-8 (Comma delimited)')")
            if missing:
                raise CSVError(f"{path}:1: missing column(s) {', '.join(missing)} "
                               f"(need {', '.join(need)})")
            if "time_ms" in need and "time_ms_std" in header and set(header) <= set(PREDICTION_COLS):
                raise CSVError(f"{path}: holds predictions (ptui predict's columns), not measurements: "
                               f"give a profile CSV (ptui profile --out F.csv)")
            # a column ptui reads named twice: the first was taken without a word (a user's trial)
            twice = [c for c in dict.fromkeys(header) if header.count(c) > 1 and (c in need or c in extras)]
            if twice:
                raise CSVError(f"{path}:1: column(s) {', '.join(twice)} appear more than once; which "
                               f"one to read is unclear: keep one of each")
            pos = {c: header.index(c) for c in list(need) + [e for e in extras if e in header]}
            for lineno, rec in enumerate(reader, start=2):
                if not rec or all(not x.strip() for x in rec):
                    continue
                where = f"{path}:{lineno}"
                if max_rows is not None and len(rows) >= max_rows:
                    raise CSVError(f"{path}: more than {max_rows} rows; a modes file holds at most "
                                   f"{max_rows} (several times the largest board's mode space)")
                # a field beyond the header that holds something was dropped without a word (a
                # mode row '8,1497.6,828.75,3199,5' profiled, a profile row's ',7' fitted); empty
                # ones after the last column (a spreadsheet's trailing commas) hold nothing
                if len(rec) < len(header) or any(x.strip() for x in rec[len(header):]):
                    raise CSVError(fields_error(where, header, rec))
                vals = {}
                for c, i in pos.items():
                    text = rec[i].strip()
                    if c in need:
                        vals[c] = _num(text, c, where)
                    elif text and (v := _extra(text, c, where)) is not None:
                        vals[c] = v
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
    rows = read_csv(path, device, max_rows=MAX_MODE_ROWS)
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


TMP_TAG = "ptui-tmp"


def _clean_stale_temps(path: Path) -> None:
    """Remove this target's temporaries left by ptui processes that died mid-write (kill -9)."""
    d = path.parent if str(path.parent) else Path(".")
    prefix = f".{path.name}.{TMP_TAG}-"
    try:
        names = [n for n in os.listdir(d) if n.startswith(prefix)]
    except OSError:
        return
    for n in names:
        pid = n[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            try:
                os.unlink(d / n)
            except OSError:
                pass


# headers earlier ptui versions wrote, which a newer header extends with more columns (profiles
# before the workload/batch_size/session columns; before the whole cycle's columns, with and
# without a batch profile's peak memory)
_V1 = PROFILE_COLS + ("time_ms_p25", "time_ms_p75", "power_w_std", "n_minibatches", "n_power",
                      "settle_s", "mode_s", "stable")
_V2 = _V1 + ("timed", "host_step_ms", "workload", "batch_size", "session")
OLDER_HEADERS = {_V1, _V2, _V2 + ("peak_mem_gb",)}


def _refuse_foreign(path: Path, header: Sequence[str], st: os.stat_result | None) -> None:
    """A file at `path` (stat `st`, None: nothing there) is replaced only when it is the same kind
    of ptui CSV (the same header, or an older ptui version of it); anything else is the user's and
    is kept."""
    if st is None or st.st_size == 0:
        return
    got = _own_rows(path)
    old = got[0] if got else None
    new = [h.lower() for h in header]
    if old and (old == new or (tuple(old) in OLDER_HEADERS and set(old) <= set(new))):
        return
    raise CSVError(f"{path} exists and is not a ptui CSV of this kind; nothing written "
                   f"(choose another --out, or move the file away first)")


def _is_dir(st: os.stat_result | None) -> bool:
    return st is not None and stat.S_ISDIR(st.st_mode)


def write_csv(path: str | Path | None, header: Sequence[str], rows: Iterable[Sequence]) -> None:
    """Write atomically (temp file + rename) so a crash never leaves a half-written file;
    path None or '-' writes to stdout.  The file gets the permissions of a new file under the
    umask (an existing file keeps its own); temporaries of killed writers are cleaned up."""
    import sys
    if path in (None, "-"):
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
        return
    path = Path(path)
    if path.is_symlink():
        # the link's target is written (a ptui CSV, checked below); the link stays as it was
        path = Path(os.path.realpath(path))
    d = path.parent if str(path.parent) else Path(".")
    st = existing(path)                          # a device node, FIFO or socket: refused here
    if _is_dir(st):
        raise CSVError(f"{path}: is a directory; give a file name for the CSV")
    _refuse_foreign(path, header, st)
    perm = st.st_mode & 0o777 if st is not None else 0o666 & ~current_umask()
    _clean_stale_temps(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{TMP_TAG}-{os.getpid()}-", dir=d)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            raise CSVError(f"{path}: cannot write: folder {d} does not exist") from None
        raise write_error(path, e) from None
    try:
        os.fchmod(fd, perm)
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
        if _is_dir(existing(path)):              # again: something may have appeared meanwhile
            raise CSVError(f"{path}: is a directory; give a file name for the CSV")
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise write_error(path, e) from None
        raise


def _merge_rows(path, keyed, min_count: int, what: str = "modes") -> dict:
    """{key: (its first row, its last row)} in file order, from (key, label, row) triples: rows
    with the same key and identical figures are one measurement; the same key with conflicting
    figures is an error naming the label.  Fewer than min_count keys: an error naming `what`."""
    seen: dict = {}
    for key, label, v in keyed:
        prev = seen.get(key)
        if prev is not None:
            t0, p0 = prev[0]["time_ms"], prev[0]["power_w"]
            if abs(t0 - v["time_ms"]) > 1e-9 * t0 or abs(p0 - v["power_w"]) > 1e-9 * p0:
                raise CSVError(f"{path}: {label} appears twice with different values "
                               f"({t0:g} ms/{p0:g} W vs {v['time_ms']:g} ms/{v['power_w']:g} W)")
            seen[key] = (prev[0], v)
            continue
        seen[key] = (v, v)
    if len(seen) < min_count:
        need = f"at least {min_count} {'is' if min_count == 1 else 'are'} needed"
        more = max(min_count, 5 if min_count <= 5 else 50)    # 5 a pooled fit's board, 50 a fit alone
        raise CSVError(f"{path}: {len(seen)} distinct {what}; {need} (profile more with: "
                       f"ptui profile --count {more})")
    return seen


# -- what one time is: the median step or the whole cycle ----------------------------------------
OUTSIDE_WARN = 0.25      # share of the wall time outside the timed steps above which ptui warns
                         # and --time auto decides on the whole cycle
TIME_BASES = ("auto", "step", "cycle")


@dataclass(frozen=True)
class TimeChoice:
    basis: str                  # step | cycle
    share: float | None         # the profile's median share of wall time outside the steps
    note: str                   # what was chosen and why, for the user ("" when nothing to say)


def _shares(rows) -> list[tuple[dict, float]]:
    """(row, its share of the wall time outside the timed steps, 1 - step / cycle) for the rows
    (dicts with time_ms and cycle_ms) that have a cycle."""
    return [(r, max(0.0, 1.0 - float(r["time_ms"]) / float(r["cycle_ms"]))) for r in rows
            if r.get("cycle_ms") and float(r["cycle_ms"]) > 0 and r.get("time_ms")]


def outside_share(rows) -> float | None:
    """The median over rows (dicts with time_ms and cycle_ms) of the share of the wall time spent
    outside the timed steps, 1 - step / cycle; None when no row has a cycle."""
    import statistics
    got = [x for _, x in _shares(rows)]
    return statistics.median(got) if got else None


def outside_note(share: float, step_ms: float | None = None, cycle_ms: float | None = None,
                 per_mode: bool = False) -> str:
    """The words for a share of the wall time outside the timed steps (per_mode: the figures are
    the mode's whose share is the profile's median)."""
    figs = (f" (median step {step_ms:.1f} ms, whole cycle {cycle_ms:.1f} ms per step"
            f"{', in the median mode' if per_mode else ''})" if step_ms and cycle_ms else "")
    return f"{100 * share:.0f} % of the wall time is outside the optimizer steps{figs}"


def choose_time(rows, requested: str = "auto", recorded: str = "", where: str = "") -> TimeChoice:
    """Which time decides: `requested` (--time step|cycle), else what the profile was asked for
    (`recorded`, its time_basis), else the whole cycle when more than OUTSIDE_WARN of the wall time
    is outside the steps, else the median step.  rows: dicts with time_ms and cycle_ms."""
    share = outside_share(rows)
    basis = requested if requested in ("step", "cycle") else (
        recorded if recorded in ("step", "cycle") else None)
    if basis == "cycle" and share is None:
        raise CSVError(f"{where or 'the profile'} has no cycle_ms column (profiled before ptui "
                       f"measured the whole cycle): re-profile it, or use --time step")
    why = "asked for" if requested in ("step", "cycle") else "as the profile was asked to"
    if basis is None:
        basis = "cycle" if share is not None and share > OUTSIDE_WARN else "step"
        why = ""
    if share is None:
        return TimeChoice(basis, None, "")
    said = outside_note(share)
    if basis == "cycle":
        note = (f"deciding on the whole cycle (wall time per optimizer step, the work outside the "
                f"steps included): {said}" + (f" ({why})" if why else
                                               f", more than {100 * OUTSIDE_WARN:.0f} %")
                + "; --time step decides on the median step")
    elif share > OUTSIDE_WARN:
        note = (f"warning: {said}, and the decision is on the median step ({why}); --time cycle "
                f"decides on the whole cycle")
    else:
        note = ""
    return TimeChoice(basis, share, note)


def outside_warning(rows, basis: str = "auto") -> str:
    """After a profile: a warning when more than OUTSIDE_WARN of its wall time went outside the
    timed steps (rows: dicts with time_ms and cycle_ms); "" otherwise.  basis: what the profile
    was asked to decide on (--time)."""
    share = outside_share(rows)
    if share is None or share <= OUTSIDE_WARN:
        return ""
    # the figures of the mode whose share is the median: the medians of the steps and of the
    # cycles, taken apart, came from different modes ('48 % ... (median step 18.5 ms, whole cycle
    # 19.2 ms per step)', a helper's trial)
    mid = min(_shares(rows), key=lambda rx: abs(rx[1] - share))[0]
    step, cyc = float(mid["time_ms"]), float(mid["cycle_ms"])
    then = ("it was asked to decide on the median step (--time step), which understates what a "
            "step costs" if basis == "step" else
            "fit, pareto and tune decide on the whole cycle (cycle_ms) unless given --time step")
    return (f"warning: {outside_note(share, step, cyc, per_mode=True)}: time_ms, the median step, "
            f"leaves out the work between the steps (rollouts, validation, data waits); {then}")


def profile_time(path, requested: str = "auto") -> TimeChoice:
    """choose_time for a profile CSV (its rows and the time_basis it records)."""
    got = _text_rows(Path(path))
    if got is None:              # the reader that follows says what is wrong with the file
        return TimeChoice(requested if requested in ("step", "cycle") else "step", None, "")
    header, rows = got
    dicts = []
    if "cycle_ms" in header and "time_ms" in header:
        it, ic = header.index("time_ms"), header.index("cycle_ms")
        for r in rows:
            try:
                dicts.append({"time_ms": float(r[it]), "cycle_ms": float(r[ic])})
            except (ValueError, IndexError):
                continue
    return choose_time(dicts, requested, profile_tags(path).get("time_basis", ""), str(path))


def with_time(rows: list[dict], basis: str, where: str = "") -> list[dict]:
    """The one switch between the two times: rows (dicts) as a decision takes them.  'step':
    unchanged; 'cycle': time_ms is the row's cycle_ms and its quartiles scale with it (the cycle
    is taken as uncertain, relatively, as the step)."""
    if basis != "cycle":
        return rows
    out = []
    for r in rows:
        c = r.get("cycle_ms")
        if not c or c <= 0:
            raise CSVError(f"{where or 'the profile'}: a row has no cycle_ms (profiled before ptui "
                           f"measured the whole cycle): re-profile it, or use --time step")
        k = c / r["time_ms"]
        r = dict(r, time_ms=c)
        for q in ("time_ms_p25", "time_ms_p75"):
            if r.get(q):
                r[q] = r[q] * k
        out.append(r)
    return out


def _profile_csv(path, device: Device, extras=(), time: str = "step") -> list[tuple[Mode, dict]]:
    """A profile CSV's rows (read_csv), their time_ms being the median step or the whole cycle."""
    rows = read_csv(path, device, need=PROFILE_COLS, extras=tuple(extras) + ("cycle_ms",))
    vals = with_time([v for _, v in rows], time, str(path))
    return [(m, v) for (m, _), v in zip(rows, vals)]


def _distinct_rows(path, device: Device, min_modes: int, extras=(), time: str = "step") -> dict:
    """{mode: (its first row, its last row)} of a profile CSV in file order (_merge_rows)."""
    rows = _profile_csv(path, device, extras, time)
    return _merge_rows(path, ((m, f"mode {m.key}", v) for m, v in rows), min_modes)


def read_profile(path, device: Device, *, min_modes: int = 10, time: str = "step"):
    """A profile CSV as (modes, time_ms array, power_w array).  Identical duplicate rows are
    merged; duplicates with conflicting values are an error."""
    import numpy as np
    sizes = profile_batch_sizes(path)
    if len(sizes) > 1:           # its modes repeat at each size: not "a mode with two values"
        raise CSVError(f"{path}: holds batch sizes {','.join(map(str, sizes))}, and this reads the "
                       f"modes of one batch size: give a profile of one size (ptui profile "
                       f"--batch-size B)")
    seen = _distinct_rows(path, device, min_modes, time=time)
    modes = list(seen)
    return (modes, np.array([seen[m][0]["time_ms"] for m in modes]),
            np.array([seen[m][0]["power_w"] for m in modes]))


REPEAT_SD = 0.004      # relative sd of a mode's median time / mean power from one run to the next
SPREAD_COLS = ("time_ms_p25", "time_ms_p75", "power_w_std", "n_minibatches", "n_power")


def measured_uncertainty(rows: list[dict]) -> dict:
    """How far a profiled mode's figures may be off, as sds (arrays time_ms_std, power_w_std):
    the standard error of the statistic the profile recorded, not the spread of its samples.
    The time is the median of n_minibatches minibatch times whose sd is IQR / 1.349 (a median's
    standard error is 1.2533 sd / sqrt(n)); the power is the mean of n_power samples of sd
    power_w_std (standard error sd / sqrt(n)); both with a REPEAT_SD floor, the run-to-run
    variation that more samples do not remove.  Without a count (older files) n = 1: the spread
    itself, the cautious reading.  rows: dicts with time_ms, power_w and any of SPREAD_COLS."""
    import numpy as np

    def col(k):                      # absent, empty or not a finite number: missing (0)
        v = np.array([float(r.get(k) or 0.0) for r in rows], np.float64)
        return np.where(np.isfinite(v), v, 0.0)

    def count(k):
        return np.maximum(col(k), 1.0)
    t, p = col("time_ms"), col("power_w")
    t_sd = np.maximum(col("time_ms_p75") - col("time_ms_p25"), 0.0) / 1.349
    p_sd = np.maximum(col("power_w_std"), 0.0)
    return {"time_ms_std": np.hypot(1.2533 * t_sd / np.sqrt(count("n_minibatches")), REPEAT_SD * t),
            "power_w_std": np.hypot(p_sd / np.sqrt(count("n_power")), REPEAT_SD * p)}


def read_profile_measured(path, device: Device, *, min_modes: int = 10, time: str = "step"):
    """read_profile's (modes, time_ms, power_w) and, from the same read of the file, the measured
    figures of each mode and their uncertainty for decisions that trust measurements (arrays of
    predictor.MEASURED_KEYS in the order of modes; the sds are measured_uncertainty's, from a
    duplicated mode's last row)."""
    import numpy as np
    seen = _distinct_rows(path, device, min_modes, SPREAD_COLS, time)
    modes = list(seen)
    t = np.array([seen[m][0]["time_ms"] for m in modes])
    p = np.array([seen[m][0]["power_w"] for m in modes])
    last = [seen[m][1] for m in modes]
    measured = {"modes": np.array([m.as_tuple() for m in modes], np.float64).reshape(-1, 4),
                "time_ms": np.array([r["time_ms"] for r in last]),
                "power_w": np.array([r["power_w"] for r in last]), **measured_uncertainty(last)}
    return modes, t, p, measured


# -- profile files: whose are they, what do they hold ---------------------------------------------
def _text_rows(path: Path) -> tuple[list[str], list[list[str]]] | None:
    check_input(path, "a CSV file")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if not rows:
        return None
    return [h.strip().lower() for h in rows[0]], [r for r in rows[1:] if any(x.strip() for x in r)]


def count_rows(path) -> int | None:
    """How many data rows a CSV holds (None: unreadable), for a progress line."""
    got = _text_rows(Path(path))
    return None if got is None else len(got[1])


def _own_rows(path: Path) -> tuple[list[str], list[list[str]] | None] | None:
    """An existing file at a path ptui is about to write, read to see whether it is ptui's own:
    (header, rows), or (header, None) when the file is longer than files.READ_CAP (only its
    start is read); None when it is not a regular file or not a text CSV.  Never opens anything
    but a regular file (files.read_head)."""
    got = read_head(path)
    if got is None:
        return None
    data, whole = got
    if not whole:                                # its first line only: the header
        nl = data.find(b"\n")
        if nl < 0:
            return None
        data = data[:nl + 1]
    try:
        rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    except (UnicodeDecodeError, csv.Error):
        return None
    if not rows:
        return None
    header = [h.strip().lower() for h in rows[0]]
    return header, ([r for r in rows[1:] if any(x.strip() for x in r)] if whole else None)


def profile_tags(path) -> dict[str, str]:
    """What a ptui profile CSV says it holds: {'workload', 'batch_size', 'session', 'timed'} where
    the file names them (one value each), else {}."""
    got = _text_rows(Path(path))
    if got is None:
        return {}
    header, rows = got
    out: dict[str, str] = {}
    for col in ("workload", "batch_size", "session", "timed", "time_basis"):
        if col in header:
            i = header.index(col)
            vals = {r[i].strip() for r in rows if len(r) > i and r[i].strip()}
            if len(vals) == 1:
                out[col] = vals.pop()
    return out


def profile_boards(path) -> set[str]:
    """The boards a CSV's `board` column names (a `ptui pool pull` CSV has one; a profile has
    none: an empty set)."""
    return column_values(path, "board")


def column_values(path, col: str) -> set[str]:
    """The distinct values of a CSV's column `col` (an empty set when it has none)."""
    got = _text_rows(Path(path))
    if got is None or col not in got[0]:
        return set()
    header, rows = got
    i = header.index(col)
    return {r[i].strip() for r in rows if len(r) > i and r[i].strip()}


def is_profile_of(path, session: str) -> bool:
    """True when `path` is a ptui profile CSV whose every row belongs to `session` (a file too big
    to read whole is not: it is kept aside rather than overwritten)."""
    got = _own_rows(Path(path))
    if got is None:
        return False
    header, rows = got
    if rows is None:
        return False
    if "session" not in header or any(c not in header for c in PROFILE_COLS):
        return False
    i = header.index("session")
    return all(len(r) > i and r[i].strip() == session for r in rows)


# columns only a ptui profile has (every version since the first): a CSV of a user's own, even one
# with the six figures ptui reads, has not all of them
PTUI_PROFILE_MARK = ("time_ms_p25", "time_ms_p75", "power_w_std", "n_minibatches", "settle_s")


def is_ptui_profile(path) -> bool:
    """True when `path` is a profile CSV ptui wrote (any session, any version)."""
    got = _own_rows(Path(path))
    return got is not None and all(c in got[0] for c in PROFILE_COLS + PTUI_PROFILE_MARK)


def _not_ours(p: Path, session: str | None) -> CSVError:
    where = (f"; the finished modes stay in the session store: ptui profile --session {session} "
             f"--resume --out ANOTHER.csv writes them") if session else ""
    return CSVError(f"{p} exists and is not a profile ptui wrote; nothing written there (choose "
                    f"another --out, or move the file away first){where}")


def check_profile_out(path) -> None:
    """Up front, before profiling: check_out_file, and a file already at `path` must be a profile
    ptui wrote (its own is replaced, another session's kept as F.~N~); a user's file is refused
    (it used to be renamed to F.~N~: ptui never renames what it did not write)."""
    check_out_file(path)
    if path in (None, "-"):
        return
    p = Path(path)
    st = existing(p)
    if st is not None and st.st_size > 0 and not is_ptui_profile(p):
        raise _not_ours(p, None)


def keep_aside(path, session: str) -> Path | None:
    """Before writing `session`'s profile to `path`: another session's ptui profile there is
    renamed to the first free `path.~N~` (returned); that session's own is overwritten.  A file
    that is not a ptui profile (one that appeared during the run: check_profile_out refused it up
    front) is refused, never renamed.  A device node, FIFO or socket there is refused
    (PathError), never renamed or opened.  A symbolic link stays: its target is what is kept
    aside (write_csv writes the target; a link to no file yet creates it)."""
    p = Path(path)
    if p.is_symlink():
        p = Path(os.path.realpath(p))
    if not os.path.lexists(p):
        return None
    st = existing(p)
    if _is_dir(st):
        raise CSVError(f"{p}: is a directory; give a file name for the CSV")
    if is_profile_of(p, session):
        return None
    if st is not None and st.st_size > 0 and not is_ptui_profile(p):
        raise _not_ours(p, session)
    n = 1
    while True:
        b = p.with_name(f"{p.name}.~{n}~")
        if not os.path.lexists(b):
            break
        n += 1
    try:
        os.link(p, b, follow_symlinks=False)     # never replaces an existing backup
        os.unlink(p)
    except OSError:
        os.replace(p, b)
    return b


def check_out_file(path) -> None:
    """Up front, before a long run: CSVError (PathError for a device node, FIFO or socket, or a
    name too long) unless a CSV can be written at `path`."""
    if path in (None, "-"):
        return
    p = Path(path)
    if _is_dir(existing(p)):
        raise CSVError(f"{p}: is a directory; give a file name for the CSV")
    check_name_length(p)
    d = p.parent if str(p.parent) else Path(".")
    if not d.is_dir():
        raise CSVError(f"{p}: folder {d} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise CSVError(f"{p}: cannot write in {d} (permission denied)")
    # a file of ptui's own, made and removed at once: access() says yes to root everywhere, and a
    # pseudo-filesystem (/proc, /sys) or a read-only mount refused only the finished profile,
    # after every mode had run ('folder /proc does not exist', a user's trial)
    probe = d / f".{p.name}.{TMP_TAG}-{os.getpid()}-probe"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as e:
        raise CSVError(f"{p}: cannot write in {d} ({e.strerror or e})") from None
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass


# -- profiles over several batch sizes -----------------------------------------------------------
PEAK_COL = "peak_mem_gb"          # optional: peak memory of the run at that (mode, batch size)


def profile_batch_sizes(path) -> list[int]:
    """The distinct batch sizes in a profile's batch_size column ([] when the column is absent or
    empty: the profile is of its single, default batch size)."""
    got = _text_rows(Path(path))
    if got is None or "batch_size" not in got[0]:
        return []
    i = got[0].index("batch_size")
    vals = {r[i].strip() for r in got[1] if len(r) > i and r[i].strip()}
    out = []
    for v in vals:
        try:
            b = float(v)
        except ValueError:
            raise CSVError(f"{path}: column 'batch_size' is not a number: {v!r}") from None
        if not (math.isfinite(b) and b >= 1 and b == int(b)):
            raise CSVError(f"{path}: column 'batch_size' must hold whole numbers >= 1, got {v!r}")
        out.append(int(b))
    return sorted(out)


def read_batch_profile(path, device: Device, *, default_batch: int | None = None, min_rows: int = 10,
                       time: str = "step"):
    """A profile over (mode, batch size) pairs: dict with modes, batch (int array), time_ms,
    power_w, measured (read_profile_measured's arrays plus batch_size) and peak ({batch: GB}, the
    largest peak memory seen at each size; empty without a peak_mem_gb column).  A row without a batch
    size is at `default_batch`.  Identical duplicates merge (a repeated pair's spreads are its last
    row's, as in read_profile_measured); conflicting ones are an error."""
    import numpy as np
    rows = _profile_csv(path, device, ("batch_size", PEAK_COL) + SPREAD_COLS, time)
    keyed = []
    for m, v in rows:
        b = v.get("batch_size", default_batch)
        if b is None:
            raise CSVError(f"{path}: a row has no batch_size and the profile names no default")
        if b < 1 or b != int(b):
            raise CSVError(f"{path}: batch_size must be a whole number >= 1, got {b:g}")
        keyed.append(((m, int(b)), f"mode {m.key} at batch size {int(b)}", v))
    seen = _merge_rows(path, keyed, min_rows, "(mode, batch size) pairs")
    keys = list(seen)
    first = [seen[k][0] for k in keys]
    last = [seen[k][1] for k in keys]
    modes = [k[0] for k in keys]
    batch = np.array([k[1] for k in keys], dtype=int)
    t = np.array([v["time_ms"] for v in first])
    p = np.array([v["power_w"] for v in first])
    measured = {"modes": np.array([m.as_tuple() for m in modes], np.float64).reshape(-1, 4),
                "time_ms": np.array([v["time_ms"] for v in last]),
                "power_w": np.array([v["power_w"] for v in last]), **measured_uncertainty(last),
                "batch_size": batch.astype(np.float64)}
    peak: dict[int, float] = {}
    for (_, b), _label, v in keyed:            # every row: a repeated pair may have peaked higher
        if PEAK_COL in v and v[PEAK_COL] > 0:
            peak[b] = max(peak.get(b, 0.0), v[PEAK_COL])
    return {"modes": modes, "batch": batch, "time_ms": t, "power_w": p, "measured": measured,
            "peak": peak}
