"""`ptui emulate` run as the user runs it: a subprocess that is the board until it is stopped."""
import select
import signal
import subprocess
import sys

from tests.support.cli import subprocess_env


class Emulated:
    """A running `python -m ptui emulate ...`; `line` is the one line it printed when ready."""

    def __init__(self, tmp_path, root, device, *extra, timeout=60.0):
        self.root = root
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ptui", "emulate", "--device", device, "--root", str(root), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(tmp_path))
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        self.line = self.proc.stdout.readline() if ready else ""
        if not self.line:
            self.proc.kill()
            _, err = self.proc.communicate(10)
            raise AssertionError(f"ptui emulate printed nothing in {timeout:.0f} s "
                                 f"(rc {self.proc.returncode}): {err[-800:]}")

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        """Send `sig`; (exit code, the rest of stdout, stderr)."""
        self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError(f"ptui emulate did not stop on {sig!r} within {timeout:.0f} s: "
                                 f"{err[-800:]}") from None
        return self.proc.returncode, out, err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
