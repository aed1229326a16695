"""A throwaway PostgreSQL server for the pool's tests: initdb + pg_ctl in a temporary folder, on a
free port of 127.0.0.1, as an unprivileged user (PostgreSQL refuses to run as root), stopped and
removed afterwards.  `why_not()` says why one cannot be started here (the tests skip with it)."""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

BIN_DIRS = ("/usr/local/bin", "/usr/local/pgsql/bin", "/usr/lib/postgresql/15/bin")


def _bin(name: str) -> str | None:
    for d in BIN_DIRS:
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return shutil.which(name)


def _user() -> str | None:
    """Who runs the server: ourselves unless root, then the 'postgres' account."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid()).pw_name
    try:
        pwd.getpwnam("postgres")
        return "postgres"
    except KeyError:
        return None


def why_not() -> str | None:
    missing = [n for n in ("initdb", "pg_ctl") if _bin(n) is None]
    if missing:
        return f"PostgreSQL server binaries not found ({', '.join(missing)}; looked in {', '.join(BIN_DIRS)} and PATH)"
    if _user() is None:
        return "running as root and there is no 'postgres' account to run the server as"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to start the server as 'postgres'"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg 3 is not installed (pip install -e '.[test]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self) -> None:
        self.user = _user()
        self.tmp = Path(tempfile.mkdtemp(prefix="ptui-pg-"))
        self.data = self.tmp / "data"
        self.port = free_port()
        self.url = f"postgresql://ptui@127.0.0.1:{self.port}/postgres"

    def _as_user(self, *cmd: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", str(self.user), "--", *cmd]
        return list(cmd)

    def start(self) -> "Server":
        if os.geteuid() == 0:
            pw = pwd.getpwnam(str(self.user))
            os.chown(self.tmp, pw.pw_uid, pw.pw_gid)
        run = dict(check=True, capture_output=True, text=True, timeout=120, cwd="/")
        subprocess.run(self._as_user(str(_bin("initdb")), "-D", str(self.data), "-U", "ptui",
                                     "--auth=trust", "--no-sync", "-E", "UTF8"), **run)
        opts = f"-p {self.port} -k {self.tmp} -c listen_addresses=127.0.0.1 -c max_connections=50 -c fsync=on"
        subprocess.run(self._as_user(str(_bin("pg_ctl")), "-D", str(self.data), "-o", opts,
                                     "-l", str(self.tmp / "log"), "-w", "-t", "60", "start"), **run)
        return self

    def stop(self) -> None:
        try:
            subprocess.run(self._as_user(str(_bin("pg_ctl")), "-D", str(self.data), "-m", "immediate",
                                         "-w", "stop"), capture_output=True, timeout=60, cwd="/")
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
