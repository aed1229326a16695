"""The fleet's pool: measured rows shared by boards of one type, on PostgreSQL.

Boards of one device type record the modes they measured for a workload (board id, device,
workload, batch size, the mode, time, power, their spreads, when) in one table, so that each board's
fit can use the whole fleet's rows (prediction/pooled.py).  The pool is named by a URL:
``postgresql://user@host:port/db`` (the fleet's server; psycopg 3, the ``fleet`` extra) or
``sqlite:///path`` (one host's boards, and the benchmark).  The session store stays SQLite.

Every row is one INSERT committed on its own, so a board that dies mid-write leaves either the
whole row or nothing; rows are keyed by (board, source, idx), so writing a row again (a resumed
profile, a CSV pushed twice) adds nothing.
"""
from __future__ import annotations

import os
import re
import socket
import sqlite3
import stat
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..board.files import kind_name
from ..catalogue.workloads import workload_key, workload_name, workload_spellings
from ..errors import InputError, RuntimeFailure

POOL_ENV = "PTUI_POOL"
STORE_ENV = "PTUI_STORE"     # the same URL under the name the fleet issue gave it; PTUI_POOL wins
BOARD_ENV = "PTUI_BOARD_ID"
POOL_SCHEMA_VERSION = 1
TABLE = "ptui_pool_rows"
COLS = ("board", "device", "workload", "batch_size", "cores", "cpu_mhz", "gpu_mhz", "mem_mhz",
        "time_ms", "power_w", "time_ms_p25", "time_ms_p75", "power_w_std", "n_minibatches", "n_power",
        "simulated", "source", "idx", "measured_at")
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    " board TEXT NOT NULL, device TEXT NOT NULL, workload TEXT NOT NULL, batch_size INTEGER NOT NULL,"
    " cores INTEGER NOT NULL, cpu_mhz DOUBLE PRECISION NOT NULL, gpu_mhz DOUBLE PRECISION NOT NULL,"
    " mem_mhz DOUBLE PRECISION NOT NULL, time_ms DOUBLE PRECISION NOT NULL,"
    " power_w DOUBLE PRECISION NOT NULL, time_ms_p25 DOUBLE PRECISION, time_ms_p75 DOUBLE PRECISION,"
    " power_w_std DOUBLE PRECISION, n_minibatches INTEGER, n_power INTEGER,"
    " simulated INTEGER NOT NULL, source TEXT NOT NULL,"
    " idx INTEGER NOT NULL, measured_at DOUBLE PRECISION NOT NULL,"
    " PRIMARY KEY (board, source, idx))",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_what ON {TABLE} (device, workload, batch_size)",
    "CREATE TABLE IF NOT EXISTS ptui_pool_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
URL_HELP = "postgresql://USER@HOST:PORT/DB (the fleet's server) or sqlite:///PATH (one host)"
CONNECT_TIMEOUT_S = 10


class PoolError(RuntimeFailure):
    pass


@dataclass(frozen=True)
class PoolRow:
    board: str
    device: str
    workload: str
    batch_size: int
    cores: int
    cpu_mhz: float
    gpu_mhz: float
    mem_mhz: float
    time_ms: float
    power_w: float
    time_ms_p25: float | None = None
    time_ms_p75: float | None = None
    power_w_std: float | None = None
    n_minibatches: int | None = None
    n_power: int | None = None
    simulated: bool = False
    source: str = ""          # the session (or CSV) the row was measured in
    idx: int = 0              # its place there
    measured_at: float = 0.0  # seconds since the epoch

    def values(self) -> tuple:
        return tuple(int(v) if isinstance(v, bool) else v for v in
                     (getattr(self, c) for c in COLS))


def board_id(given: str | None = None) -> str:
    """This board's name in the pool: `given` (a --board), else $PTUI_BOARD_ID, else the host name."""
    if given is not None:
        name, where = given.strip(), "--board"
    else:
        name, where = os.environ.get(BOARD_ENV, "").strip() or socket.gethostname(), f"${BOARD_ENV}"
    if not name or not name.isprintable() or len(name) > 100:
        raise InputError(f"bad board id {name!r} ({where}): printable text of at most 100 characters")
    return name


def board_seed(board: str) -> int:
    """The seed of a board's draw of modes in a pooling fleet (`ptui profile` without --seed, the
    Flower mod's node): one per board id, so that the boards profile different modes."""
    return zlib.crc32(str(board).encode()) % 100_000


def pool_url(url: str | None = None) -> str | None:
    """The pool's URL: `url`, else $PTUI_POOL, else $PTUI_STORE, else None (no pool)."""
    u = url if url is not None else (os.environ.get(POOL_ENV) or os.environ.get(STORE_ENV))
    return u.strip() if u and u.strip() else None


def check_url(url: str) -> tuple[str, str]:
    """('postgresql', url) or ('sqlite', path) for a pool URL, else one-line InputError."""
    m = re.match(r"^([a-z][a-z0-9+.-]*)://(.*)$", url, re.I)
    scheme = m.group(1).lower() if m else ""
    if scheme in ("postgresql", "postgres"):
        if not m or not m.group(2) or m.group(2).startswith("/") and len(m.group(2)) == 1:
            raise InputError(f"bad pool URL {url!r}: name the server, {URL_HELP}")
        # a port that is no port (99999, 'x') is bad input: the host part is what follows the last
        # '@' of the authority (a password may hold '?', '#' or '[', as libpq reads it); libpq's
        # several hosts (h1:5432,h2) and IPv6 hosts ([::1]:5432) are left to libpq
        authority = m.group(2).split("/", 1)[0]
        host = authority.rsplit("@", 1)[-1]
        if "," not in host and not host.startswith("["):
            port = host.rpartition(":")[2] if ":" in host else ""
            if port and (not port.isdigit() or not 0 < int(port) < 65536):
                raise InputError(f"bad pool URL {redact(url)!r}: its port {port!r} is no port "
                                 f"(1-65535), {URL_HELP}")
        return "postgresql", url
    if scheme == "sqlite":
        assert m is not None
        rest = m.group(2)
        if not rest.startswith("/") or rest == "/":
            raise InputError(f"bad pool URL {url!r}: sqlite:///PATH takes an absolute path "
                             f"(three slashes), {URL_HELP}")
        path = rest[1:] if rest.startswith("//") else rest
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            # a folder, /dev/null, a FIFO: no pool file (it was 'unable to open database file' or
            # 'disk I/O error', exit 1, after opening the device: a fuzzing trial)
            raise InputError(f"bad pool URL {url!r}: {path} is {kind_name(st.st_mode)}, not an SQLite "
                             f"pool file")
        return "sqlite", path
    raise InputError(f"bad pool URL {url!r}: a pool is {URL_HELP}")


def redact(url: str) -> str:
    """The URL without its password (for messages)."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


def _while_locked(do, wait_s: float = 30.0):
    """`do()`, tried again while SQLite says the file is locked: switching a new file to WAL takes
    its lock at once, without the connection's busy wait, so of 8 nodes opening a fresh pool
    together one failed with 'database is locked' (CI, a loaded machine)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return do()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _refuse_foreign_db(db, where: str) -> None:
    """An SQLite file that holds tables but not a ptui pool's is someone else's database: ptui
    writes nothing to it (it used to turn on WAL and add its tables, even for `pool list`)."""
    try:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as e:
        db.close()
        raise InputError(f"{where} is not a ptui pool ({e}); name another file") from None
    # a pool another process is making (its tables come one statement at a time) is ptui's
    if names and "ptui_pool_meta" not in names and not names <= {TABLE, "ptui_pool_meta"}:
        db.close()
        raise InputError(f"{where} is not a ptui pool: it holds other tables "
                         f"({', '.join(sorted(names)[:3])}); ptui writes nothing to it, name another file")


class NoPoolFile(InputError):
    """A SQLite pool that a command only reads does not exist (reading it made an empty file)."""


class Pool:
    """A connection to the pool; `open_pool(url)` makes one.  create=False (a command that only
    reads it): a SQLite pool file that does not exist is NoPoolFile, not made."""

    def __init__(self, url: str, create: bool = True) -> None:
        self.kind, where = check_url(url)
        self.url = url
        self.where = redact(url)
        self._ph = "%s" if self.kind == "postgresql" else "?"
        if self.kind == "sqlite" and not create and not Path(where).exists():
            raise NoPoolFile(f"no pool at {where}: a SQLite pool is made by the first profile or "
                             f"`ptui pool push` that sends rows to it")
        try:
            if self.kind == "postgresql":
                self.db = _pg_connect(url)
            else:
                Path(where).parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(where, timeout=30, isolation_level=None)
                _refuse_foreign_db(self.db, where)     # before anything is written to it
                _while_locked(lambda: self.db.execute("PRAGMA journal_mode=WAL"))
                self.db.execute("PRAGMA synchronous=FULL")
            self._schema()
        except (PoolError, InputError):
            raise
        except (OSError, sqlite3.Error) as e:
            raise PoolError(f"cannot open the pool {self.where}: {e}") from None
        except Exception as e:  # noqa: BLE001 - psycopg's errors, imported late
            raise PoolError(f"cannot open the pool {self.where}: {_one_line(e)}") from None

    def _sql(self, text: str) -> str:
        return text.replace("?", self._ph)

    def _run(self, text: str, args: tuple = (), fetch: bool = False) -> list[tuple[Any, ...]]:
        """One statement in a transaction of its own (committed or not at all)."""
        try:
            if self.kind == "postgresql":
                with self.db.transaction():
                    cur = self.db.execute(self._sql(text), args)
                    return cur.fetchall() if fetch else []
            cur = self.db.execute(text, args)
            return cur.fetchall() if fetch else []
        except sqlite3.Error as e:
            raise PoolError(f"the pool {self.where}: {e}") from None
        except Exception as e:  # noqa: BLE001 - psycopg's errors
            if type(e).__module__.startswith("psycopg"):
                raise PoolError(f"the pool {self.where}: {_one_line(e)}") from None
            raise

    def _schema(self) -> None:
        if self.kind == "sqlite":             # made whole or not at all: another process (a node of
            self._run("BEGIN IMMEDIATE")      # a simulated fleet) opening it meanwhile waits
            try:
                for stmt in SCHEMA:
                    self._run(stmt)
                self._run("COMMIT")
            except BaseException:
                self.db.rollback()
                raise
        else:
            for stmt in SCHEMA:
                try:
                    self._run(stmt)
                except PoolError:
                    # two boards creating the table at once on PostgreSQL: the loser's IF NOT EXISTS
                    # can fail on the catalogue; by the time it tries again the table is there
                    time.sleep(0.2)
                    self._run(stmt)
        got = self._run("SELECT value FROM ptui_pool_meta WHERE key='schema_version'", fetch=True)
        if not got:
            self._run("INSERT INTO ptui_pool_meta (key, value) VALUES ('schema_version', ?) "
                      "ON CONFLICT (key) DO NOTHING", (str(POOL_SCHEMA_VERSION),))
        elif int(got[0][0]) > POOL_SCHEMA_VERSION:
            raise PoolError(f"the pool {self.where} was written by a newer ptui (pool version "
                            f"{got[0][0]}; this ptui reads up to {POOL_SCHEMA_VERSION})")

    def close(self) -> None:
        try:
            self.db.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------
    def add(self, row: PoolRow) -> bool:
        """Commit one row; False when the pool holds it already (same board, source and idx)."""
        cols = ", ".join(COLS)
        marks = ", ".join("?" * len(COLS))
        if self.kind == "postgresql":
            got = self._run(f"INSERT INTO {TABLE} ({cols}) VALUES ({marks}) "
                            f"ON CONFLICT (board, source, idx) DO NOTHING RETURNING 1",
                            row.values(), fetch=True)
            return bool(got)
        before = self.db.total_changes
        self._run(f"INSERT INTO {TABLE} ({cols}) VALUES ({marks}) "
                  f"ON CONFLICT (board, source, idx) DO NOTHING", row.values())
        return self.db.total_changes > before

    # -- reading ---------------------------------------------------------------------------------
    def rows(self, *, device: str | None = None, workload: str | None = None,
             batch_size: int | None = None, board: str | None = None,
             source: str | None = None) -> list[PoolRow]:
        """The pool's rows that match, oldest first.  A workload is matched however a row wrote
        it (RESNET18, ResNet-18: resnet18, as an older ptui sent it), and each row's is read as
        the catalogue's name (the rows stay as they were written)."""
        where: list[str] = []
        args: list[Any] = []
        for col, v in (("device", device), ("batch_size", batch_size), ("board", board),
                       ("source", source)):
            if v is not None:
                where.append(f"{col} = ?")
                args.append(v)
        if workload is not None:
            names = workload_spellings(workload)
            where.append(f"lower(trim(workload)) IN ({', '.join('?' * len(names))})")
            args.extend(names)
        text = (f"SELECT {', '.join(COLS)} FROM {TABLE}"
                + (f" WHERE {' AND '.join(where)}" if where else "")
                + " ORDER BY measured_at, board, source, idx")
        out = []
        for r in self._run(text, tuple(args), fetch=True):
            d = dict(zip(COLS, r))
            d["simulated"] = bool(d["simulated"])
            d["workload"] = workload_name(d["workload"])
            out.append(PoolRow(**d))
        return out

    def summary(self) -> list[dict]:
        """One entry per (device, workload, batch size): rows, boards, simulated rows, newest; a
        workload however its rows wrote it (RESNET18 and resnet18) is one entry, under the
        catalogue's name (another workload's: the spelling most of its rows have)."""
        got = self._run(f"SELECT device, workload, batch_size, board, count(*), sum(simulated), "
                        f"max(measured_at) FROM {TABLE} GROUP BY device, workload, batch_size, board",
                        fetch=True)
        groups: dict[tuple, dict] = {}
        for d, w, b, board, n, s, t in got:
            g = groups.setdefault((d, workload_key(w), int(b)), {
                "names": {}, "rows": 0, "boards": set(), "simulated_rows": 0, "newest": float(t)})
            name = workload_name(w)
            g["names"][name] = g["names"].get(name, 0) + int(n)
            g["rows"] += int(n)
            g["boards"].add(board)
            g["simulated_rows"] += int(s or 0)
            g["newest"] = max(g["newest"], float(t))
        out = []
        for (d, _, b), g in groups.items():
            name = min(g["names"], key=lambda k: (-g["names"][k], k))
            out.append({"device": d, "workload": name, "batch_size": b, "rows": g["rows"],
                        "boards": len(g["boards"]), "simulated_rows": g["simulated_rows"],
                        "newest": g["newest"]})
        return sorted(out, key=lambda e: (e["device"], e["workload"], e["batch_size"]))


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _pg_connect(url: str):
    try:
        import psycopg
    except ImportError:
        raise InputError("a PostgreSQL pool needs psycopg 3: pip install 'ptui[fleet]' "
                         "(or pip install 'psycopg[binary]==3.2.3')") from None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.ProgrammingError as e:        # a URL libpq cannot parse
        raise InputError(f"bad pool URL {redact(url)!r}: {_one_line(e)}") from None
    except psycopg.Error as e:
        raise PoolError(f"cannot reach the pool {redact(url)}: {_one_line(e)}") from None


def open_pool(url: str | None = None, create: bool = True) -> Pool:
    """The pool named by `url` or $PTUI_POOL; InputError when neither names one (create: Pool's)."""
    u = pool_url(url)
    if u is None:
        raise InputError(f"no pool: give --pool-url URL or set {POOL_ENV} (or {STORE_ENV}) ({URL_HELP})")
    return Pool(u, create=create)


def rows_from_results(results: list[tuple[int, dict]], *, board: str, device: str, workload: str,
                      batch_size: int, simulated: bool, source: str) -> list[PoolRow]:
    """Pool rows for a session's finished points ((idx, row) as Store.results gives them)."""
    now = time.time()
    out = []
    for idx, r in results:
        out.append(PoolRow(board, device, workload, int(r.get("batch_size") or batch_size),
                           int(r["cores"]), float(r["cpu_mhz"]), float(r["gpu_mhz"]), float(r["mem_mhz"]),
                           float(r["time_ms"]), float(r["power_w"]), time_ms_p25=_f(r.get("time_ms_p25")),
                           time_ms_p75=_f(r.get("time_ms_p75")), power_w_std=_f(r.get("power_w_std")),
                           n_minibatches=_i(r.get("n_minibatches")), n_power=_i(r.get("n_power")),
                           simulated=simulated, source=source, idx=int(idx), measured_at=now))
    return out


def _f(v) -> float | None:
    return None if v is None or v == "" else float(v)


def _i(v) -> int | None:
    return None if v is None or v == "" else int(float(v))


class PoolingStore:
    """A session store whose finished rows also go to the pool, each right after the local store
    committed it (the local store stays the record: a pool that fails is said once and profiling
    goes on; `sync` later sends what the pool missed)."""

    def __init__(self, store, pool: Pool, *, board: str, device: str, workload: str,
                 batch_size: int, simulated: bool, notify=None) -> None:
        self._store, self._pool = store, pool
        self.board, self._device, self._workload = board, device, workload
        self._batch_size, self._simulated = batch_size, simulated
        self._notify = notify or (lambda text: None)
        self.failed: str | None = None
        self.sent = 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    def save_result(self, session: str, idx: int, row: dict, *args, **kwargs) -> None:
        self._store.save_result(session, idx, row, *args, **kwargs)
        self._send(session, [(idx, row)])

    def sync(self, session: str) -> None:
        """Send the session's finished rows the pool does not hold yet (a run killed between the
        local commit and the pool's)."""
        self._send(session, self._store.results(session))

    def _send(self, session: str, results) -> None:
        if self.failed is not None or not results:
            return
        try:
            for r in rows_from_results(results, board=self.board, device=self._device,
                                       workload=self._workload, batch_size=self._batch_size,
                                       simulated=self._simulated,
                                       source=f"{session}@bs{self._batch_size}"):
                self.sent += self._pool.add(r)
        except PoolError as e:
            self.failed = str(e)
            self._notify(f"warning: {e}; the profile goes on without the pool (its rows stay in the "
                         f"local session store)")


def pooling_store(store, *, device, workload: str, batch_size: int, simulated: bool,
                  notify=None) -> tuple[Any, Pool | None]:
    """`store` with its finished rows also sent to the pool when $PTUI_POOL names one (else
    `store` itself, and None); (store, pool to close)."""
    if pool_url() is None:
        return store, None
    pool = open_pool()
    return PoolingStore(store, pool, board=board_id(), device=device.name, workload=workload,
                        batch_size=batch_size, simulated=simulated, notify=notify), pool
