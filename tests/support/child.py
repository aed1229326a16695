"""Another process, as a second ptui or another account would be: started, ready, killed by the test."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def until_killed(code: str, ready: str) -> subprocess.Popen:
    """A Python process running `code`, which prints `ready` once it is set, then sleeps until the
    test kills it (at most 60 s)."""
    p = subprocess.Popen([sys.executable, "-c", f"{code}\nprint({ready!r}, flush=True)\n"
                          "import time\ntime.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == ready
    return p


def holding_lock(path: Path) -> subprocess.Popen:
    """A process holding an exclusive flock on `path` (its pid written in it) until killed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return until_killed("import fcntl, os\n"
                        f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
                        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
                        "os.write(fd, str(os.getpid()).encode())", "held")
