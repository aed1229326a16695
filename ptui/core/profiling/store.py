"""SQLite session store for profiling runs (resumable, crash-safe).

One database in the user data directory (``$PTUI_DATA_DIR``, else ``$XDG_DATA_HOME/ptui``, else
``~/.local/share/ptui``).  Every finished mode is committed before the next one starts, in WAL mode
with full synchronisation, so a run killed at any point (even ``kill -9``) loses no finished mode.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..board.files import PathError, cause, existing
from ..board.locks import holder, session_key
from ..catalogue.modes import Mode
from ..errors import EXIT_INPUT, InputError, RuntimeFailure
from ..paths import data_dir, sessions_db  # noqa: F401 (data_dir re-exported)

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    name TEXT PRIMARY KEY,
    device TEXT NOT NULL,
    workload TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    backend TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    status TEXT NOT NULL,
    original_mode TEXT,
    plan TEXT NOT NULL,
    params TEXT NOT NULL,
    device_time_s REAL NOT NULL DEFAULT 0,
    original_state TEXT
);
CREATE TABLE IF NOT EXISTS results (
    session TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    cores INTEGER NOT NULL, cpu_mhz REAL NOT NULL, gpu_mhz REAL NOT NULL, mem_mhz REAL NOT NULL,
    time_ms REAL NOT NULL, power_w REAL NOT NULL,
    time_ms_p25 REAL, time_ms_p75 REAL, power_w_std REAL,
    n_minibatches INTEGER, n_power INTEGER, settle_s REAL, mode_s REAL, stable INTEGER,
    cycle_ms REAL,
    batch_size INTEGER,
    PRIMARY KEY (session, idx)
);
"""
# columns added to a table after stores were written without them: added in place when missing
MIGRATIONS = (("results", "cycle_ms", "REAL"), ("sessions", "original_state", "TEXT"),
              ("results", "batch_size", "INTEGER"))
# PRAGMA user_version of the layout this ptui writes; 0 is every store from before it was kept.
# 1: every result row holds its batch size, and a profile over several batch sizes is one session
# (a plan entry with a fifth number is a point at that batch size), not NAME@bsB sessions
SCHEMA_VERSION = 1
GROUP_SEP = "@bs"             # the sessions of a batch-size profile in stores of version 0

RESULT_FIELDS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "time_ms", "power_w", "time_ms_p25",
                 "time_ms_p75", "power_w_std", "n_minibatches", "n_power", "settle_s", "mode_s",
                 "stable", "cycle_ms")


class StoreError(RuntimeFailure):
    pass


NAME_MAX_CHARS, NAME_MAX_BYTES = 100, 150     # a name becomes file names: NAME.csv, NAME@bs64.log


def check_session_name(name: str) -> str:
    """`name` when it can name a session (it names files in the data directory too: printable
    text, no path separator, not '.' or '..', not empty, at most 100 characters), else InputError."""
    why = ("it is empty" if not name.strip() else
           "'.' and '..' name folders" if name in (".", "..") else
           "it holds a path separator" if "/" in name or "\\" in name else
           "it holds a control character" if not name.isprintable() else
           "it starts or ends with a space" if name != name.strip() else
           f"it is longer than {NAME_MAX_CHARS} characters"
           if len(name) > NAME_MAX_CHARS or len(os.fsencode(name)) > NAME_MAX_BYTES
           else None)
    if why is not None:
        raise InputError(f"bad session name {name!r}: {why} (a session name is printable text of at "
                         f"most {NAME_MAX_CHARS} characters, without / or \\)")
    return name


@dataclass
class SessionInfo:
    name: str
    device: str
    workload: str
    batch_size: int
    seed: int
    backend: str
    status: str
    original_mode: Mode | None
    plan: list[Mode]
    params: dict
    device_time_s: float
    created: float
    n_done: int = 0
    original_state: object = None         # the board's state when profiling began (backend JSON)
    plan_sizes: list[int] = field(default_factory=list)   # the batch size of each planned point

    def __post_init__(self) -> None:
        if not self.plan_sizes:               # a profile of one size: every point at its size
            self.plan_sizes = [self.batch_size] * len(self.plan)

    @property
    def up_to(self) -> int | None:
        """An active profile's most points (its --count; the plan grows one point at a time, so
        an interrupted one has every planned point done and more to go); None for a fixed plan."""
        p = self.params
        if p.get("strategy") == "active" and p.get("count"):
            return int(p["count"])
        if p.get("pairs") == "active" and p.get("pairs_count"):
            return int(p["pairs_count"])
        return None

    @property
    def resumable(self) -> bool:
        """Something is left to profile: a planned point not done, or an active profile that was
        stopped before it finished (its planner goes on where it was)."""
        return self.n_done < len(self.plan) or (self.up_to is not None and self.status != "done")

    @property
    def batch_sizes(self) -> tuple[int, ...] | None:
        """The batch sizes a profile over several was asked for; None for a profile of one."""
        asked = self.params.get("batch_sizes")
        return tuple(int(b) for b in asked) if asked else None


_CORRUPT = {11, 26}          # SQLITE_CORRUPT, SQLITE_NOTADB
_BUSY = {5, 6}               # SQLITE_BUSY, SQLITE_LOCKED
_checked: set[str] = set()   # stores this process has checked already (the check reads every page)
# what upgrading a store told, by store: every Store this process opens on it tells it (the first
# one opened may be a look-up that prints nothing)
_upgraded: dict[str, str] = {}
BUSY_TIMEOUT_S = 10.0        # how long a command waits for another process's write to the store


def _code(e: sqlite3.Error) -> int:
    """The primary SQLite result code of an error (0 when it carries none)."""
    return getattr(e, "sqlite_errorcode", 0) & 0xFF


def _is_corrupt(e: sqlite3.Error) -> bool:
    return _code(e) in _CORRUPT


def _guarded(method):
    """A Store method whose SQLite failures (busy, disk full, read-only, damaged) are one
    StoreError line; constraint violations and a closed store are bugs and pass through."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
            raise
        except sqlite3.DatabaseError as e:
            raise self.failure(e) from None
    return run


class Store:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else sessions_db()
        self.notice: str | None = None       # something the user should hear (a store salvaged)
        try:
            existing(self.path, "PTUI_DATA_DIR")       # a device node, FIFO or socket: refused
        except PathError as e:
            # also a data directory that is a file or a device ('a part of the path is not a
            # folder'): the user's setting, exit 2 (it was exit 1: a fuzzing trial)
            raise StoreError(f"cannot open session store: {e}", exit_code=EXIT_INPUT) from None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._open()
        except sqlite3.DatabaseError as e:
            if not _is_corrupt(e):
                raise self.failure(e) from None
            self._recover(e)
        except OSError as e:
            raise StoreError(f"cannot open session store {self.path}: {cause(e)}") from None
        self.notice = self.notice or _upgraded.get(str(self.path))

    def failure(self, e: sqlite3.Error) -> StoreError:
        """One line for an SQLite error on this store."""
        code = _code(e)
        if code in _BUSY:
            return StoreError(f"the session store is busy: another process holds {self.path} "
                              f"locked (waited {BUSY_TIMEOUT_S:g} s); try again when it has finished")
        if _is_corrupt(e):
            return StoreError(f"the session store {self.path} is damaged ({e}); the next ptui "
                              f"command salvages what can be read of it")
        if code == 13:                   # SQLITE_FULL
            return StoreError(f"cannot write the session store {self.path}: no space left on the "
                              f"disk (what was committed before is kept)")
        if code == 8:                    # SQLITE_READONLY
            return StoreError(f"cannot write the session store {self.path}: it is read-only")
        return StoreError(f"session store {self.path}: {e}")

    def _open(self) -> None:
        self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            self._refuse_newer(self._version())        # before anything is written to it
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
            if self._version() < SCHEMA_VERSION:
                self._upgrade()
            if str(self.path) not in _checked:
                bad = [r[0] for r in self.db.execute("PRAGMA quick_check")]
                if bad != ["ok"]:
                    e = sqlite3.DatabaseError(f"database disk image is malformed: {bad[0]}")
                    e.sqlite_errorcode = 11
                    raise e
                _checked.add(str(self.path))
        except BaseException:
            self.db.close()
            raise

    def _version(self) -> int:
        return self.db.execute("PRAGMA user_version").fetchone()[0]

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(f"the session store {self.path} was written by a newer ptui (store "
                             f"version {version}; this ptui reads up to {SCHEMA_VERSION}); it is "
                             f"left as it is: upgrade ptui, or set PTUI_DATA_DIR to another folder")

    def _upgrade(self) -> None:
        """Bring a store of an older version (or a new, empty one) to SCHEMA_VERSION in one
        transaction: a process killed half-way leaves the old store as it was, and the next open
        upgrades it again.  Another process that upgraded it first leaves nothing to do."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            version = self._version()
            self._refuse_newer(version)
            if version < SCHEMA_VERSION:
                for stmt in SCHEMA.split(";"):
                    if stmt.strip():
                        self.db.execute(stmt)
                self._migrate()
                notes = upgrade_rows(self.db)
                self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                if notes:
                    _upgraded[str(self.path)] = "; ".join(notes)
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    def _migrate(self) -> None:
        """Add the columns a store written by an older ptui lacks (its rows get NULL there)."""
        for table, col, kind in MIGRATIONS:
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            if col not in have:
                try:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {col} {kind}")
                except sqlite3.OperationalError as e:
                    if "duplicate column" not in str(e):    # another process just added it
                        raise

    def _recover(self, e: sqlite3.Error) -> None:
        """A damaged store: set it aside (kept as it is), start a new one and copy into it every
        session that can still be read, with its finished modes; say what was saved and lost."""
        try:
            moved = self._set_aside()
            self._open()
        except (OSError, sqlite3.Error) as e2:
            raise StoreError(f"cannot open session store {self.path}: {e2}") from None
        try:
            saved, lost, partial = salvage(moved, self)
            what = (f"{saved} session{'s' * (saved != 1)} saved, {lost} lost" if saved or lost
                    else "no session could be read from it")
        except (OSError, sqlite3.Error) as e2:           # a full disk, ...: the new store stays empty
            partial, what = 0, f"nothing could be copied from it ({e2})"
        if partial:
            what += (f" ({partial} of the saved miss finished modes that were on damaged pages: "
                     f"a --resume profiles them again)")
        self.notice = (f"warning: the session store {self.path} was damaged ({e}); it was moved "
                       f"to {moved} and a new one started with what could be read: {what} "
                       f"(finished profile CSVs are not affected)")

    def _set_aside(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        dest = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        n = 1
        while dest.exists():
            n += 1
            dest = self.path.with_name(f"{self.path.name}.damaged-{stamp}-{n}")
        os.replace(self.path, dest)
        for ext in ("-wal", "-shm"):
            side = Path(f"{self.path}{ext}")
            if side.exists():
                os.replace(side, Path(f"{dest}{ext}"))
        return dest

    def close(self) -> None:
        self.db.close()

    @_guarded
    def free_name(self, base: str, taken: Collection[str] = ()) -> str:
        """`base`, or `base-2`, `base-3`... whichever no session has yet (nor is in `taken`)."""
        name, n = base, 1
        while name in taken or self.get_session(name) is not None:
            n += 1
            name = f"{base}-{n}"
        return name

    # -- sessions ---------------------------------------------------------------------------
    @_guarded
    def create_session(self, name: str, *, device: str, workload: str, batch_size: int, seed: int,
                       backend: str, plan: list[Mode], params: dict,
                       original_mode: Mode | None, plan_sizes: list[int] | None = None) -> None:
        """plan_sizes: the batch size of each planned point, for a profile over several sizes
        (None: every point is at batch_size)."""
        now = time.time()
        try:
            self.db.execute(
                "INSERT INTO sessions (name, device, workload, batch_size, seed, backend, created,"
                " updated, status, original_mode, plan, params) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (name, device, workload, batch_size, seed, backend, now, now, "running",
                 json.dumps(original_mode.as_tuple()) if original_mode else None,
                 json.dumps(_plan_entries(plan, plan_sizes)), json.dumps(params)))
        except sqlite3.IntegrityError:
            raise StoreError(f"session {name!r} already exists; resume it with --resume "
                             f"or choose another --session name") from None

    @_guarded
    def get_session(self, name: str) -> SessionInfo | None:
        row = self.db.execute(
            "SELECT name, device, workload, batch_size, seed, backend, status, original_mode, plan,"
            " params, device_time_s, created, original_state FROM sessions WHERE name=?",
            (name,)).fetchone()
        if row is None:
            return None
        n_done = self.db.execute("SELECT COUNT(*) FROM results WHERE session=?", (name,)).fetchone()[0]
        orig = Mode(*json.loads(row[7])) if row[7] else None
        status = row[6]
        if status == "running":
            if holder(session_key(name)) is None:
                status = "interrupted"      # its process is gone (killed): nobody holds its lock
        entries = json.loads(row[8])
        return SessionInfo(row[0], row[1], row[2], row[3], row[4], row[5], status, orig,
                           [Mode(*t[:4]) for t in entries], json.loads(row[9]), row[10],
                           row[11], n_done, json.loads(row[12]) if row[12] else None,
                           [int(t[4]) if len(t) > 4 else row[3] for t in entries])

    def set_original_state(self, name: str, state, mode: Mode) -> None:
        """Record, durably, the board's state (a backend snapshot as JSON) and mode when a run of
        this session began: the run ends by putting it back, and a resume of a run cut before it
        did (kill -9) ends in it too."""
        self.db.execute("UPDATE sessions SET original_state=?, original_mode=?, updated=? WHERE name=?",
                        (json.dumps(state), json.dumps(mode.as_tuple()), time.time(), name))

    @_guarded
    def forget_original_state(self, name: str) -> None:
        """The run put the board back in its original state: a resume starts from the board's
        state then (original_mode stays, for the record)."""
        self.db.execute("UPDATE sessions SET original_state=NULL, updated=? WHERE name=?",
                        (time.time(), name))

    @_guarded
    def merge_params(self, name: str, extra: dict) -> None:
        """Add keys to a session's params (what a script's probe learnt once it ran)."""
        row = self.db.execute("SELECT params FROM sessions WHERE name=?", (name,)).fetchone()
        if row is None:
            return
        params = json.loads(row[0])
        params.update(extra)
        self.db.execute("UPDATE sessions SET params=? WHERE name=?", (json.dumps(params), name))

    def merge_session_params(self, name: str, extra: dict) -> None:
        """merge_params: what holds for the whole session (a BatchPart's merge_params is its size's)."""
        self.merge_params(name, extra)

    @_guarded
    def list_sessions(self) -> list[SessionInfo]:
        names = [r[0] for r in self.db.execute("SELECT name FROM sessions ORDER BY created DESC")]
        return [s for s in (self.get_session(n) for n in names) if s]

    @_guarded
    def set_status(self, name: str, status: str, device_time_s: float | None = None) -> None:
        if device_time_s is None:
            self.db.execute("UPDATE sessions SET status=?, updated=? WHERE name=?",
                            (status, time.time(), name))
        else:
            self.db.execute("UPDATE sessions SET status=?, updated=?, device_time_s=? WHERE name=?",
                            (status, time.time(), device_time_s, name))

    @_guarded
    def delete_session(self, name: str) -> None:
        self.db.execute("DELETE FROM sessions WHERE name=?", (name,))

    @_guarded
    def extend_plan(self, name: str, modes: list[Mode], batch_size: int | None = None) -> list[Mode]:
        """Append modes to a session's plan (active profiling decides them one at a time);
        committed before the mode is measured, so a resumed run measures it as the lost run would
        have.  batch_size: the size they are profiled at, in a profile over several.  Returns the
        whole plan."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute("SELECT plan FROM sessions WHERE name=?", (name,)).fetchone()
            if row is None:
                raise StoreError(f"no session named {name!r}")
            plan = json.loads(row[0]) + _plan_entries(
                modes, None if batch_size is None else [batch_size] * len(modes))
            self.db.execute("UPDATE sessions SET plan=?, updated=? WHERE name=?",
                            (json.dumps(plan), time.time(), name))
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:          # Ctrl-C can land after COMMIT: nothing to undo
                self.db.execute("ROLLBACK")
            raise
        return [Mode(*t[:4]) for t in plan]

    @_guarded
    def update_params(self, name: str, change: Callable[[dict], None]) -> None:
        """Change a session's params in place (`change` edits the dict), in one transaction."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute("SELECT params FROM sessions WHERE name=?", (name,)).fetchone()
            if row is not None:
                params = json.loads(row[0])
                change(params)
                self.db.execute("UPDATE sessions SET params=? WHERE name=?", (json.dumps(params), name))
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    def part(self, name: str, batch_size: int) -> "BatchPart":
        """The points of session `name` at one batch size, as a store of their own."""
        return BatchPart(self, name, batch_size)

    # -- results ------------------------------------------------------------------------------
    @_guarded
    def save_result(self, session: str, idx: int, row: dict, device_time_s: float,
                    batch_size: int | None = None) -> None:
        """Commit one finished mode and the session's device time atomically.  batch_size: the
        size it was profiled at (None: the session's)."""
        vals = [row.get(k) for k in RESULT_FIELDS]
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute(
                f"INSERT INTO results (session, idx, {', '.join(RESULT_FIELDS)}, batch_size) "
                f"VALUES (?, ?, {', '.join('?' * len(RESULT_FIELDS))}, "
                f"coalesce(?, (SELECT batch_size FROM sessions WHERE name=?)))",
                [session, idx, *vals, batch_size, session])
            self.db.execute("UPDATE sessions SET updated=?, device_time_s=? WHERE name=?",
                            (time.time(), device_time_s, session))
            self.db.execute("COMMIT")
        except BaseException:
            # Ctrl-C can land after COMMIT (or before BEGIN took effect): no transaction to undo
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    @_guarded
    def results(self, session: str) -> list[tuple[int, dict]]:
        """(plan index, row) of every finished point, in plan order; the row has its batch_size."""
        cols = (*RESULT_FIELDS, "batch_size")
        cur = self.db.execute(
            f"SELECT idx, {', '.join(cols)} FROM results WHERE session=? ORDER BY idx", (session,))
        return [(r[0], dict(zip(cols, r[1:]))) for r in cur]

    @_guarded
    def done_indices(self, session: str) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT idx FROM results WHERE session=?", (session,))}


def _plan_entries(plan: list[Mode], sizes: list[int] | None) -> list[list]:
    """A plan as stored: [cores, cpu, gpu, mem] per point, with its batch size fifth in a profile
    over several sizes."""
    if sizes is None:
        return [list(m.as_tuple()) for m in plan]
    if len(sizes) != len(plan):
        raise ValueError(f"{len(plan)} planned modes but {len(sizes)} batch sizes")
    return [[*m.as_tuple(), int(b)] for m, b in zip(plan, sizes)]


class BatchPart:
    """The points of one session at one batch size, with the Store methods a profile of one size
    uses (session.ProfileRun, profiler.Profiler, profiler.profile_rows): its plan and indices are
    those points' own (0, 1, ... in plan order), its rows are saved at its size in the session,
    and its params are the session's with those recorded for this size (params['per_size']).
    A training run holds one batch size, so a profile over several runs one part at a time."""

    def __init__(self, store: Store, name: str, batch_size: int) -> None:
        self.store, self.name, self.batch_size = store, name, int(batch_size)
        self.path = store.path
        self.notice: str | None = None       # the store's own notice is the whole profile's

    def _positions(self, info: SessionInfo) -> list[int]:
        return [g for g, b in enumerate(info.plan_sizes) if b == self.batch_size]

    def get_session(self, name: str) -> SessionInfo | None:
        """None until this size's first run recorded its params (create_session)."""
        info = self.store.get_session(name)
        if info is None or str(self.batch_size) not in info.params.get("per_size", {}):
            return None
        b = self.batch_size
        pos = self._positions(info)
        top = {k: v for k, v in info.params.items() if k != "per_size"}
        return replace(info, batch_size=b, plan=[info.plan[g] for g in pos], plan_sizes=[b] * len(pos),
                       params={**top, **info.params["per_size"][str(b)]},
                       n_done=len(self.results(name)))

    def create_session(self, name: str, *, device: str, workload: str, batch_size: int, seed: int,
                       backend: str, plan: list[Mode], params: dict,
                       original_mode: Mode | None) -> None:
        """Record this size's params; its points are the session's planned at this size (the
        profile plans them all up front), else `plan`."""
        info = self.store.get_session(name)
        if info is None:
            raise StoreError(f"no session named {name!r}")
        if self.batch_size not in info.plan_sizes:
            self.store.extend_plan(name, plan, self.batch_size)
        self.store.update_params(name, lambda p: p.setdefault("per_size", {}).__setitem__(
            str(self.batch_size), params))

    def set_original_state(self, name: str, state, mode: Mode) -> None:
        self.store.set_original_state(name, state, mode)

    def forget_original_state(self, name: str) -> None:
        self.store.forget_original_state(name)

    def merge_params(self, name: str, extra: dict) -> None:
        self.store.update_params(name, lambda p: p.setdefault("per_size", {}).setdefault(
            str(self.batch_size), {}).update(extra))

    def merge_session_params(self, name: str, extra: dict) -> None:
        """Add keys to the whole session's params, every size's (the board its start state is of)."""
        self.store.merge_params(name, extra)

    def set_status(self, name: str, status: str, device_time_s: float | None = None) -> None:
        # one size finished is not the profile finished: the whole run says when that is
        self.store.set_status(name, "running" if status == "done" else status, device_time_s)

    def extend_plan(self, name: str, modes: list[Mode]) -> list[Mode]:
        self.store.extend_plan(name, modes, self.batch_size)
        info = self.store.get_session(name)
        return [info.plan[g] for g in self._positions(info)]

    def save_result(self, session: str, idx: int, row: dict, device_time_s: float) -> None:
        pos = self._positions(self.store.get_session(session))
        self.store.save_result(session, pos[idx], row, device_time_s, self.batch_size)

    def results(self, session: str) -> list[tuple[int, dict]]:
        info = self.store.get_session(session)
        if info is None:
            return []
        local = {g: k for k, g in enumerate(self._positions(info))}
        return [(local[g], r) for g, r in self.store.results(session)
                if r["batch_size"] == self.batch_size and g in local]

    def done_indices(self, session: str) -> set[int]:
        return {k for k, _ in self.results(session)}

    def free_name(self, base: str) -> str:
        return self.store.free_name(base)

    def close(self) -> None:
        """The store is the whole profile's, closed by it."""


# -- stores of an older version ----------------------------------------------------------------
def upgrade_rows(db: sqlite3.Connection) -> list[str]:
    """The rows of a store from before version 1, brought to it within the caller's transaction
    (idempotent): every result row gets its session's batch size, and the NAME@bsB sessions a
    batch-size profile was stored as become one session NAME (its rows tagged with their size,
    re-indexed).  Returns what the user should hear (a profile kept under another name)."""
    db.execute("UPDATE results SET batch_size = (SELECT s.batch_size FROM sessions s "
               "WHERE s.name = results.session) WHERE batch_size IS NULL")
    groups: dict[str, list[str]] = {}
    for name, size, params in db.execute("SELECT name, batch_size, params FROM sessions").fetchall():
        try:
            group = json.loads(params).get("group")
        except (ValueError, AttributeError):
            continue
        if isinstance(group, str) and name == f"{group}{GROUP_SEP}{size}":
            groups.setdefault(group, []).append(name)
    return [n for n in (_merge_group(db, g, subs) for g, subs in sorted(groups.items())) if n]


def _merge_group(db: sqlite3.Connection, group: str, names: list[str]) -> str | None:
    cols = [c for c, _ in SESSION_COLS]
    subs = [dict(zip(cols, r)) for r in db.execute(
        f"SELECT {', '.join(cols)} FROM sessions WHERE name IN ({', '.join('?' * len(names))}) "
        f"ORDER BY created, name", names)]
    params = [json.loads(s["params"]) for s in subs]
    target, n = group, 1
    while db.execute("SELECT 1 FROM sessions WHERE name=?", (target,)).fetchone():
        n += 1
        target = f"{group}-{n}"
    present = [s["batch_size"] for s in subs]
    asked = [int(b) for b in params[0].get("batch_sizes") or sorted(present)]
    # a script's command is kept per size (as run there, {bs} filled in): the whole profile's
    # command with its {bs} was never stored
    top = {k: v for k, v in params[0].items() if k not in ("group", "group_done", "command")}
    top["batch_sizes"] = asked
    top["per_size"] = {str(s["batch_size"]): {k: v for k, v in p.items()
                                              if k not in ("group", "group_done", "batch_sizes")}
                       for s, p in zip(subs, params)}
    finished = all(s["status"] == "done" for s in subs) and (
        top.get("pairs") != "active" or any(p.get("group_done") for p in params))
    later = [s for s in sorted(subs, key=lambda s: s["updated"]) if s["status"] != "done"]
    status = "done" if finished else later[-1]["status"] if later else "aborted"
    plan, offsets, at = [], [], 0
    for s in subs:
        entries = json.loads(s["plan"])
        top_idx = db.execute("SELECT max(idx) FROM results WHERE session=?", (s["name"],)).fetchone()[0]
        offsets.append(at)
        plan += [[*t[:4], s["batch_size"]] for t in entries]
        at += max(len(entries), -1 if top_idx is None else top_idx + 1)
    first = subs[0]
    size = next((b for b in asked if b in present), first["batch_size"])
    db.execute(f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
               [target, first["device"], first["workload"], size, first["seed"], first["backend"],
                min(s["created"] for s in subs), max(s["updated"] for s in subs), status,
                first["original_mode"], json.dumps(plan), json.dumps(top),
                sum(s["device_time_s"] or 0.0 for s in subs), first["original_state"]])
    for s, off in zip(subs, offsets):
        db.execute("UPDATE results SET session=?, idx=idx+?, batch_size=coalesce(batch_size, ?) "
                   "WHERE session=?", (target, off, s["batch_size"], s["name"]))
        db.execute("DELETE FROM sessions WHERE name=?", (s["name"],))
    if target == group:
        return None
    return (f"the session store was upgraded: the batch-size profile stored as sessions "
            f"{', '.join(names)} is now the one session {target!r} (a session named {group!r} "
            f"exists already and is kept as it was)")


# -- salvaging a damaged store ---------------------------------------------------------------------
REAL = (int, float)
# the columns copied, with the Python types a sound row holds (SQLite itself does not enforce them)
SESSION_COLS = (("name", str), ("device", str), ("workload", str), ("batch_size", int),
                ("seed", int), ("backend", str), ("created", REAL), ("updated", REAL),
                ("status", str), ("original_mode", (str, type(None))), ("plan", str),
                ("params", str), ("device_time_s", REAL), ("original_state", (str, type(None))))
RESULT_COLS = (("session", str), ("idx", int), ("cores", int), ("cpu_mhz", REAL),
               ("gpu_mhz", REAL), ("mem_mhz", REAL), ("time_ms", REAL), ("power_w", REAL)) + tuple(
    (k, (*REAL, type(None))) for k in RESULT_FIELDS[6:]) + (("batch_size", (int, type(None))),)
PROBE_LIMIT = 100_000         # rowids tried one by one past a damaged page


def _sound(row: tuple, cols) -> bool:
    return all(isinstance(v, t) for v, (_, t) in zip(row, cols))


def _sound_session(row: tuple) -> bool:
    """A sessions row as ptui wrote it: the types, and plan / params / original mode that parse."""
    if not _sound(row, SESSION_COLS) or not row[0]:
        return False
    try:
        plan, params = json.loads(row[10]), json.loads(row[11])
        orig = [] if row[9] is None else [json.loads(row[9])]
        return isinstance(params, dict) and all(
            isinstance(m, list) and len(m) in (4, 5) and all(isinstance(x, REAL) for x in m)
            for m in [*plan, *orig])
    except (ValueError, TypeError):
        return False


def _first_readable(db, table: str, names: str, rowid: int, top: int | None):
    """(rowid, row) of the first row from `rowid` on that can be read, trying rowids one by one
    (each row of a damaged page fails; a missing rowid is a deleted row) up to the table's last
    rowid and at most PROBE_LIMIT of them; None when there is none."""
    last = rowid + PROBE_LIMIT if top is None else min(top, rowid + PROBE_LIMIT)
    for k in range(rowid, last + 1):
        try:
            row = db.execute(f"SELECT {names} FROM {table} WHERE rowid=?", (k,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None:
            return k, row


def _readable_rows(db, table: str, cols) -> list[tuple]:
    """Every row of `table` (the columns `cols`) that can still be read, in rowid order: a scan
    that steps over damaged pages."""
    names = ", ".join(c for c, _ in cols)
    try:
        top = db.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    except sqlite3.DatabaseError:
        top = None                       # the table's last page is damaged
    rows, nxt = [], 1
    while True:
        try:
            for r in db.execute(f"SELECT rowid, {names} FROM {table} WHERE rowid >= ? ORDER BY rowid",
                                (nxt,)):
                rows.append(r[1:])
                nxt = r[0] + 1
            return rows
        except sqlite3.DatabaseError:
            found = _first_readable(db, table, names, nxt, top)
            if found is None:
                return rows
            rows.append(found[1])
            nxt = found[0] + 1


def _readable_rows_of(db, table: str, cols) -> list[tuple]:
    """_readable_rows of the columns `cols`, in that order; a column a store from an older ptui
    lacks (one MIGRATIONS adds) reads as NULL."""
    try:
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
    except sqlite3.DatabaseError:
        have = {c for c, _ in cols}
    added = {c for t, c, _ in MIGRATIONS if t == table}
    use = [(c, t) for c, t in cols if c in have or c not in added]
    rows = _readable_rows(db, table, use)
    where = {c: i for i, (c, _) in enumerate(use)}
    return [tuple(r[where[c]] if c in where else None for c, _ in cols) for r in rows]


def _session_names(db) -> set[str]:
    """Names of sessions the damaged store had, as far as its index can still be read."""
    names: set[str] = set()
    try:
        for (n,) in db.execute("SELECT name FROM sessions INDEXED BY sqlite_autoindex_sessions_1"):
            names.add(n)
    except sqlite3.DatabaseError:
        pass
    return names


def salvage(damaged: Path, into: Store) -> tuple[int, int, int]:
    """Copy every session that can be read from the damaged store `damaged` (through a copy: the
    file itself is kept as it is) into `into`, with its finished modes.  Returns (sessions saved,
    sessions known to be lost, saved sessions that finished but miss modes: set to 'aborted' so a
    resume profiles those again)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "damaged.sqlite"
        shutil.copyfile(damaged, copy)
        if Path(f"{damaged}-wal").exists():       # its last commits (a writer killed before a
            shutil.copyfile(f"{damaged}-wal", f"{copy}-wal")     # checkpoint) are there
        with contextlib.closing(sqlite3.connect(copy, isolation_level=None)) as src:
            try:                         # no readable schema (page 1 damaged): nothing to read
                tables = {n for (n,) in src.execute("SELECT name FROM sqlite_master")}
            except sqlite3.DatabaseError:
                tables = set()
            sessions, results = ([] if t not in tables else _readable_rows_of(src, t, cols)
                                 for t, cols in (("sessions", SESSION_COLS), ("results", RESULT_COLS)))
            known = _session_names(src) if tables else set()
    known |= {r[0] for r in sessions + results if isinstance(r[0], str)}
    good = {r[0]: r for r in sessions if _sound_session(r)}
    done: dict[str, int] = {}
    db = into.db
    db.execute("BEGIN IMMEDIATE")
    try:
        for r in good.values():
            db.execute(f"INSERT INTO sessions ({', '.join(c for c, _ in SESSION_COLS)}) "
                       f"VALUES ({', '.join('?' * len(SESSION_COLS))})", r)
        for r in results:
            if r[0] in good and _sound(r, RESULT_COLS):
                cur = db.execute(f"INSERT OR IGNORE INTO results ({', '.join(c for c, _ in RESULT_COLS)}) "
                                 f"VALUES ({', '.join('?' * len(RESULT_COLS))})", r)
                done[r[0]] = done.get(r[0], 0) + cur.rowcount
        partial = [n for n, r in good.items()
                   if r[8] == "done" and done.get(n, 0) < len(json.loads(r[10]))]
        for n in partial:
            db.execute("UPDATE sessions SET status='aborted' WHERE name=?", (n,))
        upgrade_rows(db)                 # the damaged store may be of an older version
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return len(good), len(known - set(good)), len(partial)
