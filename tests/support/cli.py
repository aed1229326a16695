"""Helpers shared by the tests: run the CLI in-process, or as a subprocess with its own store."""
import contextlib
import io
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def run_cli(*args):
    """Run the CLI in-process and return (rc, stdout, stderr)."""
    from ptui.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(map(str, args)))
    return rc, out.getvalue(), err.getvalue()


def subprocess_env(tmp_path):
    env = dict(os.environ)
    env["PTUI_DATA_DIR"] = str(tmp_path / "data")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def kill_9_after_progress_lines(cmd, env, n: int) -> None:
    """Run a profiling command and SIGKILL it once it has printed `n` progress lines ("[...");
    asserts that the kill (not an exit) ended it."""
    import signal
    import subprocess
    p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    lines = 0
    for line in p.stderr:
        if line.startswith("["):
            lines += 1
            if lines == n:
                p.send_signal(signal.SIGKILL)
                break
    p.wait()
    assert p.returncode == -signal.SIGKILL, f"ended by itself (rc {p.returncode}) before {n} lines"


def disturbed_profile(tmp_path):
    """A 45-mode simulated Orin AGX ResNet-18 profile in which one power reading was caught low by
    a transient: the fastest mode drawing 19.5-21 W reads 17.2 W.  Returns (CSV path, the
    victim's row of cells, its true watts, its mode key as ptui writes it)."""
    import csv
    rc, _, err = run_cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "45",
                         "--out", tmp_path / "p.csv")
    assert rc == 0, err
    rows = list(csv.reader(open(tmp_path / "p.csv")))
    ip, it = rows[0].index("power_w"), rows[0].index("time_ms")
    victim = min((r for r in rows[1:] if 19.5 < float(r[ip]) < 21.0), key=lambda r: float(r[it]))
    true_w = float(victim[ip])
    victim[ip] = "17.2"
    with open(tmp_path / "q.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return tmp_path / "q.csv", victim, true_w, "/".join(victim[:4]).replace("/", "c/", 1)


def ctrl_c_at_mode(monkeypatch, n: int):
    """Ctrl-C as a profile measures its n-th mode, as a user's would (the modes before are saved):
    an unfinished session to resume.  Returns the function that lets the next profile run whole."""
    import ptui.core.profiling.profiler as P
    real, calls = P.Profiler.measure, []

    def measure(self, *a, **k):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(self, *a, **k)
    monkeypatch.setattr(P.Profiler, "measure", measure)
    return lambda: monkeypatch.setattr(P.Profiler, "measure", real)
