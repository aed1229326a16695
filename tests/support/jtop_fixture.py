"""Run the genuine jetson-stats service against ptui's emulated Orin tree.

jtop's testing mode reads the hard-coded /fake_sys; some of its readers ignore that mode and read
/sys, so the service runs in a private mount namespace (unshare -m) with the emulated tree bound
onto /sys there (the host's /sys is untouched).  Needs root, unshare and jetson-stats.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

FAKE = Path("/fake_sys")
SOCK = Path("/run/jtop.sock")


def unavailable() -> str | None:
    """Why the end-to-end jtop test cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (private mount namespace and the jtop socket in /run)"
    if not shutil.which("unshare"):
        return "needs unshare (util-linux)"
    try:
        import jtop  # noqa: F401
    except ImportError:
        return "jetson-stats is not installed"
    jtop_bin = Path(sys.executable).with_name("jtop")
    if not jtop_bin.exists():
        return f"no jtop executable next to {sys.executable}"
    if FAKE.exists() and not FAKE.is_symlink():
        return "/fake_sys exists and is not ours"
    if SOCK.exists() and _answers(SOCK):
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
        self.had_config = _config_dir().exists()

    def start(self, timeout: float = 20.0) -> None:
        if subprocess.run(["getent", "group", "jtop"], capture_output=True).returncode:
            subprocess.run(["groupadd", "jtop"], check=True)
        if FAKE.is_symlink():
            FAKE.unlink()
        FAKE.symlink_to(self.root / "sys")
        jtop_bin = Path(sys.executable).with_name("jtop")
        env = dict(os.environ, JTOP_SERVICE="1", JTOP_TESTING="1")
        if self.bin_dir:
            env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        script = f"mount --bind {self.root / 'sys'} /sys && exec {jtop_bin} --force"
        self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                     env=env, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        end = time.time() + timeout
        while time.time() < end:
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
