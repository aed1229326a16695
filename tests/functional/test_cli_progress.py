"""The CLI's long runs: a progress bar with an ETA on a terminal, plain lines otherwise."""
import os
import pty
import re
import subprocess

from tests.support.cli import PY, ROOT, subprocess_env

ARGS = ["-m", "ptui", "profile", "--device", "orin-agx", "--workload", "mobilenetv3", "--count", "6"]


def _run_on_a_terminal(tmp_path, columns: int = 140):
    master, slave = pty.openpty()
    env = dict(subprocess_env(tmp_path), TERM="xterm", COLUMNS=str(columns))
    p = subprocess.Popen([PY, *ARGS, "--out", str(tmp_path / "t.csv")], stdout=slave, stderr=slave,
                         stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:                   # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(60) == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def test_profile_draws_a_bar_with_eta_on_a_terminal(tmp_path):
    text = _run_on_a_terminal(tmp_path)
    assert "━" in text and "ETA" in text and "6/6" in text
    assert "[    1/6]" not in text                      # the bar replaces the per-mode lines
    assert "profiled: 6 finished modes" in text


def test_the_bar_and_the_figures_fit_80_columns(tmp_path):
    """The mode in plain words is long: at 80 columns the bar, its ETA and the last mode's time
    and power still show (the text beside the bar is cut at its end, the mode's tail)."""
    text = _run_on_a_terminal(tmp_path, 80)
    assert "━" in text and "ETA" in text and "6/6" in text
    assert re.search(r"\d+\.\d ms \d+\.\d\d W", text), text


def test_profile_prints_plain_lines_with_eta_when_piped(tmp_path):
    r = subprocess.run([PY, *ARGS, "--out", str(tmp_path / "p.csv")], env=subprocess_env(tmp_path),
                       cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("[")]
    assert len(lines) == 6 and "\x1b[" not in r.stderr and "━" not in r.stderr
    assert all("ETA" in ln for ln in lines[:-1]) and "ETA" not in lines[-1]


def test_steps_stage_messages_move_the_bar():
    from ptui.cliprogress import Steps
    said = []
    with Steps("fitting", 2, said.append, tty=False) as s:
        s.stage("fine-tuning time network on 50 modes")
        assert s.done == 0 and s.eta_s() is None
        s.stage("fine-tuning power network on 50 modes")
        assert s.done == 1 and s.eta_s() is not None
    assert said[0] == "fine-tuning time network on 50 modes"
    assert said[1].startswith("fine-tuning power network on 50 modes   ETA ")
