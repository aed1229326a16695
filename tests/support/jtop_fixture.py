"""Run the genuine jetson-stats service against ptui's emulated Orin tree.

jtop's testing mode reads the hard-coded /fake_sys; some of its readers ignore that mode and read
/sys, so the service runs in a private mount namespace (unshare -m) with the emulated tree bound
onto /sys there (the host's /sys is untouched).  Needs root, unshare, swapon and jetson-stats.

/fake_sys and /run/jtop.sock are one per machine: a test holds LOCK while its service runs (or while
it checks that none does), so two test runs side by side, or two pytest-xdist workers, take turns.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

FAKE = Path("/fake_sys")
SOCK = Path("/run/jtop.sock")
LOCK = Path("/run/lock/ptui-jtop-e2e.lock")
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")
"""The service runs `swapon --show` (and nvpmodel); a minimal PATH such as /usr/bin:/bin lacks the
sbin folders those live in, so the service's PATH gets them."""


def service_path(path: str | None = None) -> str:
    """PATH for the service: `path` (default: this process's) with the sbin folders it lacks."""
    parts = (os.environ.get("PATH", "") if path is None else path).split(os.pathsep)
    return os.pathsep.join([p for p in parts if p] + [d for d in SBIN if d not in parts])


@contextlib.contextmanager
def exclusive(timeout: float = 600.0):
    """Hold the machine's jtop test lock: no other test's service starts meanwhile.  Waits for a
    running one to finish (a whole jtop test takes well under a minute, even under load).  Where
    the lock cannot be made (not root), no service can be started either: nothing to wait for."""
    try:
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        f = open(LOCK, "a")
    except OSError:
        yield
        return
    with f:
        end = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    raise RuntimeError(f"another test run held {LOCK} for {timeout:.0f} s") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _ours_running() -> bool:
    """A test's service (this run's or another's) holds the lock right now."""
    if not LOCK.exists():
        return False
    with open(LOCK, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def unavailable() -> str | None:
    """Why the end-to-end jtop test cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (private mount namespace and the jtop socket in /run)"
    if not shutil.which("unshare"):
        return "needs unshare (util-linux)"
    if not shutil.which("swapon", path=service_path()):
        return "needs swapon (util-linux), which the jtop service runs; not found on PATH or in " \
               + ", ".join(SBIN)
    try:
        import jtop  # noqa: F401
    except ImportError:
        return "jetson-stats is not installed"
    jtop_bin = Path(sys.executable).with_name("jtop")
    if not jtop_bin.exists():
        return f"no jtop executable next to {sys.executable}"
    if FAKE.exists() and not FAKE.is_symlink():
        return "/fake_sys exists and is not ours"
    if SOCK.exists() and _answers(SOCK) and not _ours_running():
        return "a jtop service is already running on /run/jtop.sock"
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    if r.returncode:
        return f"unshare --mount is not permitted here: {r.stderr.decode().strip()[:100]}"
    return None


def _answers(sock: Path) -> bool:
    """A socket left behind by a killed service refuses connections: the service's --force
    replaces it, so only a live one is a reason to stay away."""
    import socket
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(sock))
            return True
        except OSError:
            return False


def _config_dir() -> Path:
    return Path(sys.base_prefix) / "local" / "jtop"


class JtopService:
    def __init__(self, root: Path, bin_dir: Path | None = None) -> None:
        self.root = root                       # emulated tree: root/sys is what jtop sees as /sys
        self.bin_dir = bin_dir                 # fake nvpmodel etc., first on the service's PATH
        self.proc: subprocess.Popen | None = None
        self.log = root / "jtop-service.log"
        self.had_config = True
        self._lock = contextlib.ExitStack()

    def start(self, timeout: float = 120.0) -> None:
        """Start the service and wait until its socket answers: `timeout` only bounds a service
        that never comes up (it answers within seconds on a quiet machine, later under load)."""
        self._lock = contextlib.ExitStack()
        self._lock.enter_context(exclusive())
        self.had_config = _config_dir().exists()
        if subprocess.run(["getent", "group", "jtop"], capture_output=True).returncode:
            subprocess.run(["groupadd", "jtop"], check=True)
        if FAKE.is_symlink():
            FAKE.unlink()
        FAKE.symlink_to(self.root / "sys")
        jtop_bin = Path(sys.executable).with_name("jtop")
        env = dict(os.environ, JTOP_SERVICE="1", JTOP_TESTING="1", PATH=service_path())
        if self.bin_dir:
            env["PATH"] = f"{self.bin_dir}{os.pathsep}{env['PATH']}"
        script = f"mount --bind {self.root / 'sys'} /sys && exec {jtop_bin} --force"
        self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                     env=env, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if SOCK.exists() and _answers(SOCK):
                time.sleep(0.3)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"jtop service did not start: {self.log.read_text()[-800:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if SOCK.exists():
            SOCK.unlink()
        if FAKE.is_symlink():
            FAKE.unlink()
        if not self.had_config:
            shutil.rmtree(_config_dir(), ignore_errors=True)
        self._lock.close()
