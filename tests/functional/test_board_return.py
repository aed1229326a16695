"""The board always goes back: stop signals, kill -9 then restore, resume, one lock per board.

The board is an emulated Orin AGX sysfs tree kept alive by the simulator (conftest's emulate);
ptui runs as a separate process, as a user's would, on a small real torch training script.
"""
import json
import os
import shlex
import shutil
import signal
import subprocess
import textwrap
import time

import pytest

from ptui.core.catalogue.devices import get_device
from tests.support import fakesys
from tests.support.cli import PY, subprocess_env

pytest.importorskip("torch")

# ptui runs as a subprocess profiling a real training script (it sleeps 10 ms a step)
pytestmark = pytest.mark.realtime

ORIN = get_device("orin-agx")
OTHER = ["--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6"]

TRAIN = textwrap.dedent("""
    import sys, time, torch
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 16)
    for i in range(int(sys.argv[1])):
        opt.zero_grad()
        model(x).sum().backward()
        time.sleep(0.01)
        opt.step()
""")


def _mode(root):
    """The emulated board's mode; a knob caught between ptui's truncate and write is read again."""
    for _ in range(50):
        try:
            return fakesys.read_mode(root)
        except ValueError:
            time.sleep(0.02)
    return fakesys.read_mode(root)


def _env(tmp_path, data: str):
    env = subprocess_env(tmp_path)
    env["PTUI_DATA_DIR"] = str(tmp_path / data)
    return env


def _profile(tmp_path, root, *extra, data="data", session="s"):
    """Start `ptui profile` on the emulated board; returns the process once it is measuring its
    first mode (the board has left its start mode)."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    cmd = [PY, "-m", "ptui", "profile", "--backend", "sysfs", "--sysfs-root", str(root),
           "--count", "4", "--sample-interval", "0.1", "--session", session, *extra,
           "--out", str(tmp_path / f"{session}.csv"), "--", PY, str(script), "100000"]
    p = subprocess.Popen(cmd, env=_env(tmp_path, data), stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    return p


def _wait_until_moved(p, root, start, timeout=120):
    """Read the profile's output until the board is in another mode than `start` (and a mode has
    finished, so the session has rows), then until the tree reads one whole mode twice, 0.3 s
    apart: the row is printed just before the next mode's writes, and a kill -9 landing between
    one knob's truncate and write leaves that file empty for good on an emulated tree (a real
    sysfs write is atomic); seen once under load in CI.  Returns the lines read."""
    lines = []
    for line in p.stderr:
        lines.append(line)
        if line.startswith("[") and _mode(root) != start:
            end = time.monotonic() + timeout
            last = None
            while time.monotonic() < end:
                now = _mode(root)
                if now == last and now != start:
                    return lines
                last = now
                time.sleep(0.3)
            raise AssertionError(f"the board never held one mode for 0.3 s (last {last})")
    raise AssertionError("profile ended before it moved the board:\n" + "".join(lines))


def _signal_when(p, ready, sig) -> str:
    """Once ready() returns (it waits for the moment), send `sig` to the ptui process `p`; what it
    says then, to its end (killed if it does not end)."""
    try:
        ready()
        p.send_signal(sig)
        rest = p.stderr.read()
        p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
    return rest


def _cli(tmp_path, *args, data="other-data"):
    r = subprocess.run([PY, "-m", "ptui", *map(str, args)], env=_env(tmp_path, data),
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_stop_signal_during_a_profile_restores_the_board(tmp_path, emulate, sig):
    root = emulate(tmp_path / "root").root
    start = _mode(root)
    p = _profile(tmp_path, root)
    rest = _signal_when(p, lambda: _wait_until_moved(p, root, start), sig)
    name = signal.Signals(sig).name
    assert p.returncode == 128 + sig, rest
    assert f"stopped by {name}: EMULATED device restored to its original mode" in rest
    assert "Traceback" not in rest
    assert _mode(root) == start


@pytest.mark.slow
def test_kill_9_then_restore_from_another_account_returns_to_the_start(tmp_path, emulate):
    """A second process with another data directory (sudo, another user) may not apply during the
    profile; after kill -9 it restores the mode the board had before the profile."""
    root = emulate(tmp_path / "root").root
    start = _mode(root)
    p = _profile(tmp_path, root)
    try:
        _wait_until_moved(p, root, start)
        rc, out, err = _cli(tmp_path, "apply", "--backend", "sysfs", "--sysfs-root", root, *OTHER, "--yes")
        assert rc == 1 and "changing the power mode" in err and f"pid {p.pid}" in err, err
        assert "applied" not in out and _mode(root) != ORIN.mode(4, 729.6, 318.75, 665.6)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    left = _mode(root)
    assert left != start
    rc, out, err = _cli(tmp_path, "restore", "--backend", "sysfs", "--sysfs-root", root)
    assert rc == 0, err
    assert "restored the state before the interrupted profile (session s" in out
    assert f"reads back {start.describe()}" in out
    assert _mode(root) == start
    rc, out, err = _cli(tmp_path, "restore", "--backend", "sysfs", "--sysfs-root", root)
    assert rc == 2 and "nothing to restore" in err


@pytest.mark.slow
def test_resume_ends_in_the_mode_before_the_first_run(tmp_path, emulate):
    root = emulate(tmp_path / "root").root
    start = _mode(root)
    p = _profile(tmp_path, root)
    try:
        _wait_until_moved(p, root, start)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert _mode(root) != start
    p = _profile(tmp_path, root, "--resume")
    out = p.stderr.read()
    p.wait(300)
    assert p.returncode == 0, out
    assert _mode(root) == start
    rc, _, err = _cli(tmp_path, "restore", "--backend", "sysfs", "--sysfs-root", root)
    assert rc == 2 and "nothing to restore" in err            # the resumed run left nothing behind


@pytest.mark.slow
def test_a_resume_ends_in_the_mode_chosen_since_the_stop(tmp_path, emulate):
    """A profile stopped by SIGTERM put the board back; the user then selected MODE_15W and resumed
    the profile.  The resumed run ended in the mode the first run had started from (MODE_30W), not
    in MODE_15W, which the user had chosen since (a user's trial)."""
    root = emulate(tmp_path / "root").root
    start = _mode(root)
    p = _profile(tmp_path, root)
    rest = _signal_when(p, lambda: _wait_until_moved(p, root, start), signal.SIGTERM)
    assert p.returncode == 143 and _mode(root) == start, rest
    rc, _, err = _cli(tmp_path, "apply", "--backend", "sysfs", "--sysfs-root", root, "--preset",
                      "MODE_15W", "--yes")
    chosen = ORIN.preset("MODE_15W").mode
    assert rc == 0 and _mode(root) == chosen, err
    p = _profile(tmp_path, root, "--resume")
    out = p.stderr.read()
    p.wait(300)
    assert p.returncode == 0, out
    assert _mode(root) == chosen


@pytest.mark.slow
def test_tune_apply_does_not_write_over_a_change_made_while_it_fitted(tmp_path, emulate):
    """tune --apply lets the board go while it fits and decides; another user selected MODE_15W
    then, and tune applied its pick over it without a word (an emulated board)."""
    root = emulate(tmp_path / "root").root
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    code = textwrap.dedent(f"""
        import subprocess, sys
        import ptui.core as core
        real = core.tune_decide
        def decide(*a, **k):
            r = subprocess.run([sys.executable, "-m", "ptui", "apply", "--backend", "sysfs",
                                "--sysfs-root", {str(root)!r}, "--preset", "MODE_15W", "--yes"],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            return real(*a, **k)
        core.tune_decide = decide
        from ptui.cli import main
        sys.exit(main(["tune", "--backend", "sysfs", "--sysfs-root", {str(root)!r}, "--budget-w", "25",
                       "--count", "6", "--sample-interval", "0.1", "--apply", "--", {PY!r},
                       {str(script)!r}, "100000"]))
    """)
    r = subprocess.run([PY, "-c", code], env=_env(tmp_path, "data"), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ptui: error: not applied: the board was changed while tune fitted and "
                           "decided"), last
    assert "applied and verified" not in r.stdout + r.stderr
    assert _mode(root) == ORIN.preset("MODE_15W").mode


def _sigterm_at_write(tmp_path, k: int, argv: list):
    """`ptui ARGV` in a process that sends itself SIGTERM as it makes its k-th sysfs write; it
    stopped by the signal (exit 143), without a traceback.  The finished process."""
    code = textwrap.dedent(f"""
        import os, signal, sys
        from ptui.core.board.backends.sysfs import SysfsBackend
        real, n = SysfsBackend._write, [0]
        def write(self, path, value):
            n[0] += 1
            if n[0] == {k}:
                os.kill(os.getpid(), signal.SIGTERM)
            real(self, path, value)
        SysfsBackend._write = write
        from ptui.cli import main
        sys.exit(main({argv!r}))
    """)
    r = subprocess.run([PY, "-c", code], env=_env(tmp_path, "data"), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    assert "Traceback" not in r.stderr
    return r


@pytest.mark.parametrize("json_", [False, True])
def test_a_signal_mid_apply_waits_for_the_mode_to_be_whole(tmp_path, json_):
    """SIGTERM between two sysfs writes of an apply: the apply finishes (read back and verified),
    then ptui stops, saying both; the board is never left half-written.  It said only 'stopped by
    SIGTERM', and --json printed nothing, though the mode was applied (a user's trial)."""
    root = fakesys.build(tmp_path / "root")
    extra = ["--json"] if json_ else []
    r = _sigterm_at_write(tmp_path, 3, ["apply", "--backend", "sysfs", "--sysfs-root", str(root),
                                        *OTHER, "--yes", *extra])
    assert "stopped by SIGTERM" in r.stderr
    if json_:
        d = json.loads(r.stdout)
        assert d["applied"] is True and d["stopped_by"] == "SIGTERM" and d["readback_key"]
    else:
        assert "applied and verified" in r.stdout
    assert _mode(root) == ORIN.mode(4, 729.6, 318.75, 665.6)
    rc, out, err = _cli(tmp_path, "restore", "--backend", "sysfs", "--sysfs-root", root)
    assert rc == 0 and _mode(root) == ORIN.preset("MODE_30W").mode, err


@pytest.mark.parametrize("json_", [False, True])
def test_a_signal_mid_restore_finishes_it_and_says_it(tmp_path, json_):
    """SIGTERM between two writes of `ptui restore`: the restore was finished and read back, then
    ptui stopped saying only 'stopped by SIGTERM', and the record stayed (a later restore said it
    restored it again)."""
    root = fakesys.build(tmp_path / "root")
    rc, _, err = _cli(tmp_path, "apply", "--backend", "sysfs", "--sysfs-root", root, *OTHER, "--yes",
                      data="data")
    assert rc == 0, err
    r = _sigterm_at_write(tmp_path, 2, ["restore", "--backend", "sysfs", "--sysfs-root", str(root),
                                        *(["--json"] if json_ else [])])
    assert r.stderr.rstrip().endswith("stopped by SIGTERM")
    start = ORIN.preset("MODE_30W").mode
    said = json.loads(r.stdout)["message"] if json_ else r.stdout
    assert f"restored the state before the last ptui apply: the EMULATED board reads back {start.describe()}" in said
    assert _mode(root) == start
    rc, _, err = _cli(tmp_path, "restore", "--backend", "sysfs", "--sysfs-root", root, data="data")
    assert rc == 2 and "nothing to restore" in err, err


def _signal_in_nvpmodel(tmp_path, root, args: list, only_mode=None):
    """`ptui apply ARGS` on the fake sysfs tree `root` with a fake nvpmodel on PATH, SIGTERM sent
    to ptui as nvpmodel starts (for mode `only_mode` only, when given); it stopped by the signal,
    without a traceback.  The finished process."""
    nvp = fakesys.install_nvpmodel(tmp_path / "bin", root)
    when = "True" if only_mode is None else f"mode_id == {only_mode!r}"
    code = textwrap.dedent(f"""
        import os, signal, sys
        from ptui.core.board.backends.sysfs import SysfsBackend
        real = SysfsBackend.run_nvpmodel
        def run(self, mode_id):
            if {when}:
                os.kill(os.getpid(), signal.SIGTERM)
            real(self, mode_id)
        SysfsBackend.run_nvpmodel = run
        from ptui.cli import main
        sys.exit(main(["apply", "--backend", "sysfs", "--sysfs-root", {str(root)!r}, *{args!r}]))
    """)
    env = _env(tmp_path, "data")
    env["PATH"] = f"{nvp.parent}:{env.get('PATH', '/usr/bin:/bin')}"
    r = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    assert "stopped by SIGTERM" in r.stderr and "Traceback" not in r.stderr
    return r


@pytest.mark.parametrize("json_", [False, True])
def test_a_signal_mid_preset_waits_for_it_and_says_it(tmp_path, json_):
    """SIGTERM while nvpmodel selects a preset: the preset is selected and read back, then ptui
    stops, saying both, as a custom mode's apply does.  It said only 'stopped by SIGTERM', and
    --json printed nothing, though the board was in the preset."""
    root = fakesys.build(tmp_path / "root")
    r = _signal_in_nvpmodel(tmp_path, root, ["--preset", "MODE_15W", "--yes",
                                             *(["--json"] if json_ else [])])
    if json_:
        d = json.loads(r.stdout)
        assert d["applied"] is True and d["stopped_by"] == "SIGTERM" and d["preset"] == "MODE_15W"
        assert d["readback_key"] == ORIN.preset("MODE_15W").mode.key
    else:
        assert "selected MODE_15W" in r.stdout
    assert _mode(root) == ORIN.preset("MODE_15W").mode


@pytest.mark.parametrize("json_", [False, True])
def test_a_signal_mid_tune_apply_says_the_pick_was_applied(tmp_path, json_):
    """SIGTERM while tune --apply applies its pick: the apply finishes (verified), and ptui says
    so before 'stopped by SIGTERM'; it said only that, and the board was in the tuned mode."""
    code = textwrap.dedent(f"""
        import os, signal, sys
        import ptui.core as core
        from ptui.core.board.backends.sim import SimJetson
        decided, real_decide, real_apply = [False], core.tune_decide, SimJetson.apply_mode
        def decide(*a, **k):
            got = real_decide(*a, **k)
            decided[0] = True
            return got
        def apply_mode(self, *a, **k):
            if decided[0]:                      # the pick's apply, after the profile's modes
                os.kill(os.getpid(), signal.SIGTERM)
            return real_apply(self, *a, **k)
        core.tune_decide, SimJetson.apply_mode = decide, apply_mode
        from ptui.cli import main
        sys.exit(main(["tune", "--device", "orin-agx", "--workload", "mobilenetv3", "--budget-w", "20",
                       "--count", "6", "--seed", "1", "--apply", *{(["--json"] if json_ else [])!r}]))
    """)
    r = subprocess.run([PY, "-c", code], env=_env(tmp_path, "data"), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    assert "applied and verified" in r.stderr and "SIMULATED" in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith("stopped by SIGTERM") and "Traceback" not in r.stderr


@pytest.mark.parametrize("json_", [False, True])
def test_a_signal_mid_persist_waits_for_nvpmodel_and_says_it(tmp_path, json_):
    """SIGTERM while --persist selects ptui's nvpmodel mode: the selection finishes and is said,
    then ptui stops.  The signal cut it between writing nvpmodel.conf and running nvpmodel -m 99
    (on a board, it would have killed nvpmodel half-way): the conf held a mode nvpmodel never
    selected, and nothing said so."""
    root = fakesys.build(tmp_path / "root")
    r = _signal_in_nvpmodel(tmp_path, root, [*OTHER, "--yes", "--persist", *(["--json"] if json_ else [])],
                            only_mode=99)
    said = json.loads(r.stdout)["persist"] if json_ else r.stdout
    assert "saved as nvpmodel 99" in said, r.stdout
    assert "pmode:0099" in (root / "var/lib/nvpmodel/status").read_text()
    assert _mode(root) == ORIN.mode(4, 729.6, 318.75, 665.6)


def test_stop_signal_on_the_simulated_board_says_so(tmp_path):
    p = subprocess.Popen([PY, "-m", "ptui", "profile", "--device", "orin-agx", "--workload", "resnet18",
                          "--grid", "pt", "--session", "sim", "--out", str(tmp_path / "p.csv")],
                         env=_env(tmp_path, "data"), stderr=subprocess.PIPE, text=True)

    def first_mode():
        for line in p.stderr:
            if line.startswith("["):
                break
        time.sleep(0.2)
    rest = _signal_when(p, first_mode, signal.SIGTERM)
    assert p.returncode == 143, rest
    assert "stopped by SIGTERM: SIMULATED device restored to its original mode" in rest
    assert "--session sim --resume" in rest


@pytest.mark.skipif(not shutil.which("tmux"), reason="tmux is not installed on this machine")
@pytest.mark.parametrize("sig", ["TERM", "HUP", "INT"])
def test_the_app_restores_the_board_when_stopped_by_a_signal(tmp_path, emulate, sig):
    """The app in a real terminal profiling the emulated board: `kill` (SIGTERM), `kill -INT` or
    the terminal closing under it (SIGHUP, as when an SSH session drops) aborts the profile,
    restores the board and ends the app.  SIGINT left the app blank and alive, the profile
    running, until kill -9 (a user's trial)."""
    from tests.support.tmux_drive import Term
    root = emulate(tmp_path / "root").root
    start = _mode(root)
    env = _env(tmp_path, "data")
    exports = " ".join(f"{k}={shlex.quote(env[k])}" for k in
                       ("PTUI_DATA_DIR", "PTUI_LOCK_DIR", "PTUI_STATE_DIR", "PYTHONPATH"))
    rc_file = tmp_path / "rc"
    # the app draws on stderr (Textual's terminal output), so stderr stays on the terminal: the
    # test waits for what is on screen, not for a fixed time
    cmd = (f"{exports} {shlex.quote(PY)} -m ptui --backend sysfs --sysfs-root {shlex.quote(str(root))} "
           f"--device orin-agx; echo $? > {rc_file}; sleep 30")
    term = Term(cols=100, rows=30, command=cmd)
    try:
        term.wait_for("Dashboard")
        term.keys("2")
        term.wait_for("Plan")
        term.keys("s")
        end = time.time() + 120
        while _mode(root) == start:
            assert time.time() < end, term.screen()
            time.sleep(0.2)
        app = subprocess.run(["pgrep", "-f", f"^{PY} -m ptui --backend sysfs --sysfs-root {root}"],
                             capture_output=True, text=True).stdout.split()
        assert len(app) == 1, app
        pid = int(app[0])
        if sig == "HUP":
            term.tmux("kill-session", "-t", term.name)
        else:
            os.kill(pid, getattr(signal, f"SIG{sig}"))
        end = time.time() + 60
        while _alive(pid):
            assert time.time() < end, "the app did not exit"
            time.sleep(0.2)
        assert _mode(root) == start
        if sig != "HUP":
            # the shell writes the app's exit status a moment after the app is gone
            end = time.time() + 60
            while not rc_file.exists() or not rc_file.read_text().strip():
                assert time.time() < end, "the app's shell wrote no exit status"
                time.sleep(0.1)
            assert rc_file.read_text().strip() == str(128 + getattr(signal, f"SIG{sig}"))
    finally:
        term.close()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:                     # a zombie has exited
        return f.read().split()[2] != "Z"
