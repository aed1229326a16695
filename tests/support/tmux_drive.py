"""Drive the real ptui app in a real terminal (tmux): send keys, read the screen, check it.

Walks the whole user journey on the simulated Orin AGX: dashboard, a 50-mode profile, fine-tune,
a 30 W budget on the Pareto screen, apply, roll back.  Run directly to save the captures:
    python tests/support/tmux_drive.py --out docs/screens.txt
tests/functional/test_tmux.py runs it under pytest (skipped where tmux is missing).
"""
from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START = "8 cores · CPU 1.73 GHz · GPU 625 MHz · memory 3199 MHz"
"""The simulated Orin AGX's mode at start (MODE_30W, 8c/1728/624.75/3199), as the app says it."""


def _flat(s: str) -> str:
    """Text with line breaks, panel borders and runs of spaces collapsed to one space."""
    return re.sub(r"[\s│┃║]+", " ", s)


_ids = itertools.count()


class Term:
    """One terminal on a tmux server of its own (tmux -L): the app sees this test's environment
    (a shared server hands its sessions the environment of whichever process started it, perhaps
    another test run's), and tests running side by side never share a session name."""

    def __init__(self, data_dir: str | None = None, cols: int = 110, rows: int = 36, speed: float = 400,
                 *, command: str | None = None) -> None:
        self.socket = f"ptui-test-{os.getpid()}-{next(_ids)}"
        self.name = "ptui"
        cmd = command or f"PTUI_DATA_DIR={data_dir} {sys.executable} -m ptui --speed {speed}"
        self.tmux("new-session", "-d", "-s", self.name, "-x", cols, "-y", rows, "-c", ROOT, cmd)

    def tmux(self, *args, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *map(str, args)], capture_output=True,
                              text=True, check=check)

    def keys(self, *keys: str) -> None:
        for k in keys:
            self.tmux("send-keys", "-t", self.name, k)
            time.sleep(0.3)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-t", self.name, "-p").stdout

    def wait_for(self, text: str, timeout: float = 90.0) -> str:
        """Wait until `text` is on screen, also when the terminal wrapped it inside a panel, and
        the frame is whole: tmux can be read while the app is half-way through drawing a frame
        (seen in CI under load: the bottom rows of the screen before still showing), so a capture
        counts once its bottom line is the key footer.  A screen that never draws its footer
        whole still fails here, with the screen shown."""
        want = _flat(text)
        end = time.time() + timeout
        while time.time() < end:
            s = self.screen()
            lines = s.rstrip("\n").splitlines()
            if want in _flat(s) and lines and "Quit" in lines[-1]:
                return s
            time.sleep(0.3)
        raise AssertionError(f"{text!r} never appeared above a whole footer; screen:\n{self.screen()}")

    def close(self) -> None:
        self.tmux("kill-server", check=False)
        # tmux leaves the server's socket file behind: one per terminal would pile up in /tmp
        sock = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / self.socket
        sock.unlink(missing_ok=True)


def journey(out: Path | None = None, cols: int = 110, rows: int = 36) -> dict[str, str]:
    caps: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as d:
        t = Term(d, cols, rows)
        try:
            caps["dashboard"] = t.wait_for("VDD_GPU_SOC")
            assert "SIMULATED" in caps["dashboard"] and "MODE_30W" in caps["dashboard"]
            t.keys("2")
            t.wait_for("Plan ResNet-18 bs16: 50 random")
            t.keys("s")
            caps["profile"] = t.wait_for("profile finished", timeout=180)
            assert "50 modes saved" in caps["profile"].replace("\n", " ") or "saved to" in caps["profile"]
            t.keys("3")
            t.wait_for("profile CSV")
            t.keys("t")
            caps["finetune"] = t.wait_for("Next: 4 Pareto", timeout=240)
            t.keys("4")
            caps["pareto"] = t.wait_for("fastest within 30 W", timeout=60)
            t.keys("Enter")
            caps["apply-plan"] = t.wait_for("press y to apply")
            t.keys("y")
            caps["apply-done"] = t.wait_for("10 s measurement done", timeout=60)
            done = caps["apply-done"]
            # the pick is a profiled mode (measurements count in decisions) or a predicted one
            assert "applied and verified" in done, done
            assert "measured while profiling" in done or "predicted" in done, done
            t.keys("r")
            caps["rolled-back"] = t.wait_for(f"rolled back to {START}")
            t.keys("1")
            caps["dashboard-after"] = t.wait_for("MODE_30W")
            t.keys("6")
            t.wait_for("Decide (d)")
            t.keys("d")
            # the pick and its baselines' table are on screen once it is made (the panel's last
            # lines, the profiled-mode count and the plot's legend, are below its fold at 80x24)
            caps["colocate"] = t.wait_for("training alone", timeout=240)
            assert "SIMULATED" in caps["colocate"] and "pick" in caps["colocate"], caps["colocate"]
            t.keys("?")
            caps["help"] = t.wait_for("Screens")
            t.keys("Escape", "q")
        finally:
            t.close()
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(f"===== {k} =====\n{v}\n" for k, v in caps.items()))
    return caps


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--cols", type=int, default=110)
    ap.add_argument("--rows", type=int, default=36)
    a = ap.parse_args()
    if not shutil.which("tmux"):
        sys.exit("tmux is not installed")
    caps = journey(a.out, a.cols, a.rows)
    print(f"ok: {len(caps)} screens checked" + (f", captures in {a.out}" if a.out else ""))
