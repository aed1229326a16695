"""One driver per board, and apply/restore never move the board where the user did not ask."""
import json

import pytest

from ptui.core.board.backends.sysfs import SysfsBackend
from ptui.core.catalogue.devices import get_device
from tests.support import fakesys
from tests.support.child import holding_lock
from tests.support.cli import ctrl_c_at_mode

ORIN = get_device("orin-agx")
MODE = ["--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6"]


@pytest.fixture
def tree(tmp_path):
    return fakesys.build(tmp_path / "root")


@pytest.fixture
def nvpmodel_on_path(tmp_path, tree, monkeypatch):
    nvp = fakesys.install_nvpmodel(tmp_path / "bin", tree)
    monkeypatch.setenv("PATH", f"{nvp.parent}:/usr/bin:/bin")
    return nvp


def _hold(path):
    return holding_lock(path)


def test_a_second_process_may_not_change_the_boards_mode(tree, cli, nvpmodel_on_path):
    from ptui.core.board import locks
    board = locks.lock_path(locks.board_key(SysfsBackend(ORIN, root=tree)))
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    before = fakesys.read_mode(tree)
    p = _hold(board)
    try:
        for args in (["apply", *sysfs, *MODE, "--yes"], ["apply", *sysfs, "--preset", "MODE_15W", "--yes"]):
            rc, out, err = cli(*args)
            assert rc == 1, (args, err)
            assert f"pid {p.pid}" in err and "changing the power mode" in err
            assert err.count("ptui: error") == 1 and "Traceback" not in err
            assert fakesys.read_mode(tree) == before
    finally:
        p.kill()
        p.wait()
    rc, out, err = cli("apply", *sysfs, *MODE, "--yes")
    assert rc == 0, err
    p = _hold(board)
    try:
        rc, out, err = cli("restore", *sysfs)
        assert rc == 1 and "changing the power mode" in err
        assert fakesys.read_mode(tree) == ORIN.mode(4, 729.6, 318.75, 665.6)
    finally:
        p.kill()
        p.wait()
    rc, out, err = cli("restore", *sysfs)
    assert rc == 0 and "restored" in out, err
    assert fakesys.read_mode(tree) == before


def test_board_lock_is_per_board_and_reentrant(tree, tmp_path):
    from ptui.core.board import locks
    a = SysfsBackend(ORIN, root=tree)
    other = fakesys.build(tmp_path / "other")
    b = SysfsBackend(ORIN, root=other)
    assert locks.board_key(a) != locks.board_key(b)
    from ptui.core.board.backends.sim import SimJetson
    assert locks.board_key(SimJetson(ORIN)) is None     # a simulated board lives in one process
    with locks.board_lock(a):
        with locks.board_lock(a):
            assert locks.holder(locks.board_key(a)) is not None
        with locks.board_lock(b):
            pass
    assert locks.holder(locks.board_key(a)) is None


@pytest.mark.parametrize("left, right", [
    ("emulated-jetson-boards-for-the-nightly-fleet-test-of-our-team-and-its-ci/orin-agx-alice",
     "emulated-jetson-boards-for-the-nightly-fleet-test-of-our-team-and-its-ci/orin-agx-bobby"),
    ("boards/orin_2", "boards/orin/2")], ids=["long", "underscore"])
def test_two_trees_are_two_boards_whatever_their_paths(tmp_path, cli, left, right):
    """Two emulated trees whose paths differ only past their first 120 characters (or by '/' for
    '_') were one board to ptui: one lock, one undo record; the second board's status offered to
    restore the first one's apply, and its restore would have written it there (two trees under
    /tmp/helpb/alice/... and /tmp/helpb/bobby/...: an apply on one, ptui status on the other)."""
    a = SysfsBackend(ORIN, root=fakesys.build(tmp_path / left))
    b = SysfsBackend(ORIN, root=fakesys.build(tmp_path / right))
    from ptui.core.board import locks
    assert locks.board_key(a) != locks.board_key(b)
    rc, _, err = cli("apply", "--backend", "sysfs", "--sysfs-root", a.root, *MODE, "--yes")
    assert rc == 0, err
    rc, _, err = cli("restore", "--backend", "sysfs", "--sysfs-root", b.root)
    assert rc == 2 and "nothing to restore" in err, err


def test_a_link_to_the_boards_tree_is_the_same_board(tree, tmp_path, cli, nvpmodel_on_path):
    """The key was the path as given: through a symbolic link to the tree a second ptui applied a
    mode while a profile held the board, and its undo record was another board's (a user's
    trial)."""
    from ptui.core.board import locks
    link = tmp_path / "link"
    link.symlink_to(tree)
    assert locks.board_key(SysfsBackend(ORIN, root=link)) == locks.board_key(SysfsBackend(ORIN, root=tree))
    before = fakesys.read_mode(tree)
    p = _hold(locks.lock_path(locks.board_key(SysfsBackend(ORIN, root=tree))))
    try:
        rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", link, *MODE, "--yes")
        assert rc == 1 and f"pid {p.pid}" in err and fakesys.read_mode(tree) == before, err
    finally:
        p.kill()
        p.wait()
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", link, *MODE, "--yes")
    assert rc == 0, err
    rc, out, err = cli("restore", "--backend", "sysfs", "--sysfs-root", tree)    # the same record
    assert rc == 0 and "restored" in out, err
    assert fakesys.read_mode(tree) == before


def test_second_restore_does_not_move_the_board(tree, cli, nvpmodel_on_path):
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    rc, _, err = cli("apply", *sysfs, *MODE, "--yes")
    assert rc == 0, err
    rc, out, err = cli("restore", *sysfs)
    assert rc == 0 and "restored" in out, err
    # the user now picks a preset by hand; a second restore has nothing of ptui's to undo
    SysfsBackend(ORIN, root=tree, nvpmodel_cmd=str(nvpmodel_on_path)).apply_preset("MODE_15W")
    rc, out, err = cli("restore", *sysfs)
    assert rc == 2 and "nothing to restore" in err
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_15W").mode


def test_missing_nvpmodel_is_named(tree, cli, tmp_path, monkeypatch):
    empty = tmp_path / "emptybin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    rc, _, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, "--preset", "MODE_15W", "--yes")
    assert rc == 1 and "nvpmodel was not found" in err and "Errno" not in err
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_30W").mode


def test_persist_is_checked_before_anything_is_applied(cli):
    rc, out, err = cli("apply", "--backend", "sim", "--device", "orin-agx", *MODE, "--yes", "--persist")
    assert rc == 2 and "--persist needs a real Jetson" in err and "nothing applied" in err
    assert "applied and verified" not in out
    rc, out, err = cli("apply", "--backend", "sim", "--device", "orin-agx", "--preset", "maxn",
                       "--yes", "--persist")
    assert rc == 2 and "--persist needs a real Jetson" in err and "selected" not in out


def test_preset_names_are_case_insensitive(cli):
    for name in ("maxn", "MaxN", "mode_15w"):
        rc, out, err = cli("apply", "--backend", "sim", "--device", "orin-agx", "--preset", name, "--yes")
        assert rc == 0, err
        assert "selected " + name.upper() in out


def test_persist_with_a_preset_says_what_it_does(tree, cli, nvpmodel_on_path):
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, "--preset", "MODE_15W",
                       "--yes", "--persist")
    assert rc == 0, err
    assert "selected MODE_15W" in out and "across reboots" in out


def test_profiling_holds_the_board(tmp_path):
    """Profiler.run refuses, touching nothing, while another process changes the board's mode."""
    from ptui.core.board import locks
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.workloads import get_workload
    from ptui.core.profiling.profiler import Profiler, choose_modes, open_session
    from ptui.core.profiling.store import Store

    class Board(SimJetson):                 # a real board as far as locking goes
        simulated = False
        kind = "sysfs"
        root = str(tmp_path / "board")

    be = Board(ORIN, seed=0)
    wl = get_workload("mobilenetv3")
    start = be.current_mode()
    store = Store()
    info = open_session(store, "b", resume=False, device=ORIN, workload=wl, seed=0, backend_kind="sysfs",
                        plan_fn=lambda: choose_modes(ORIN, count=2, seed=0), original_mode=start,
                        params={})
    p = _hold(locks.lock_path(locks.board_key(be)))
    try:
        with pytest.raises(locks.LockError, match=f"pid {p.pid}"):
            Profiler(be, wl, store, "b").run(info)
        assert be.current_mode() == start and store.done_indices("b") == set()
    finally:
        p.kill()
        p.wait()
    assert locks.holder(locks.session_key("b")) is None          # released for a later --resume
    info = open_session(store, "b", resume=True, device=ORIN, workload=wl, seed=0, backend_kind="sysfs",
                        plan_fn=None, original_mode=start, params={})
    assert len(Profiler(be, wl, store, "b").run(info)) == 2
    assert be.current_mode() == start


def test_restore_undoes_only_an_apply_made_on_the_same_board(tmp_path, cli):
    """Two boards of one kind (two emulated trees, or an emulated one beside the real one): the
    state saved before an apply on one was restored onto the other, since it was kept per device."""
    a = fakesys.build(tmp_path / "a")
    b = fakesys.build(tmp_path / "b", mode=ORIN.mode(2, 268.8, 114.75, 204))
    rc, _, err = cli("apply", "--backend", "sysfs", "--sysfs-root", a, *MODE, "--yes")
    assert rc == 0, err
    rc, _, err = cli("apply", "--backend", "sysfs", "--sysfs-root", b, *MODE, "--yes")
    assert rc == 0, err
    rc, out, err = cli("restore", "--backend", "sysfs", "--sysfs-root", a)
    assert rc == 0 and "restored" in out, err
    assert fakesys.read_mode(a) == ORIN.preset("MODE_30W").mode           # a's own state, not b's
    assert fakesys.read_mode(b) == ORIN.mode(4, 729.6, 318.75, 665.6)      # b untouched
    rc, out, err = cli("restore", "--backend", "sysfs", "--sysfs-root", b)
    assert rc == 0 and "restored" in out, err
    assert fakesys.read_mode(b) == ORIN.mode(2, 268.8, 114.75, 204)
    c = fakesys.build(tmp_path / "c")
    rc, _, err = cli("restore", "--backend", "sysfs", "--sysfs-root", c)     # nothing applied there
    assert rc == 2 and "nothing to restore" in err


def test_apply_json_with_nothing_to_change_still_waits_its_turn(tree, cli, nvpmodel_on_path):
    """apply --json on a board already held in the mode says 'nothing to change' only under the
    board's lock: while another process drives the board it is refused like a plain apply, and a
    --persist never runs nvpmodel under that process (it did: changed false, exit 0, nvpmodel -m 99
    in the middle of a profile)."""
    from ptui.core.board import locks
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    rc, _, err = cli("apply", *sysfs, *MODE, "--yes")
    assert rc == 0, err
    status = (tree / "var/lib/nvpmodel/status")
    before = status.read_bytes() if status.exists() else None
    p = _hold(locks.lock_path(locks.board_key(SysfsBackend(ORIN, root=tree))))
    try:
        for extra in ([], ["--persist"]):
            rc, out, err = cli("apply", *sysfs, *MODE, "--yes", "--json", *extra)
            assert rc == 1 and out == "" and "not applied" in err and f"pid {p.pid}" in err, err
            assert (status.read_bytes() if status.exists() else None) == before
    finally:
        p.kill()
        p.wait()
    rc, out, err = cli("apply", *sysfs, *MODE, "--yes", "--json", "--persist")
    d = json.loads(out)
    assert rc == 0 and d["changed"] is True and d["applied"] is False and "persist" in d, err


def test_a_board_in_the_mode_but_not_held_there_is_a_change(tree, cli):
    """Right maximum clocks with lower minimums (a board after boot or a preset) are not the
    mode held: apply --json pins it and says changed; then nothing is left to change."""
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    mode = fakesys.read_mode(tree)
    args = ["--cores", str(mode.cores), "--cpu-mhz", f"{mode.cpu_mhz:g}", "--gpu-mhz", f"{mode.gpu_mhz:g}",
            "--mem-mhz", f"{mode.mem_mhz:g}"]
    low = tree / "sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq"
    low.write_text("115200\n")
    d = json.loads(cli("apply", *sysfs, *args, "--dry-run", "--json")[1])
    assert d["changed"] is True and low.read_text().strip() == "115200"
    rc, out, err = cli("apply", *sysfs, *args, "--yes", "--json")
    d = json.loads(out)
    assert rc == 0 and d["changed"] is True and d["applied"] is True, err
    assert low.read_text().strip() == str(int(mode.cpu_mhz * 1000))
    assert json.loads(cli("apply", *sysfs, *args, "--dry-run", "--json")[1])["changed"] is False


def test_a_board_changed_since_the_plan_or_the_apply_is_not_written(tree, nvpmodel_on_path):
    """apply waited at its [y/N] without the lock, and then made writes another plan's (another
    ptui had applied meanwhile); the app's `r` rolled back over another ptui's later apply without
    a word (a user's trial).  Both check the board under the lock and write nothing."""
    from ptui.core.board.apply import BoardChanged
    from ptui.core.board.apply import plan as plan_apply
    from ptui.core.usecases.board import apply, rollback
    me, other = SysfsBackend(ORIN, root=tree), SysfsBackend(ORIN, root=tree)
    plan = plan_apply(me, ORIN.mode(4, 729.6, 318.75, 665.6))
    assert apply(other, ORIN.preset("MODE_15W").mode).ok            # meanwhile, someone else
    res = apply(me, ORIN.mode(4, 729.6, 318.75, 665.6), expect_from=plan.current)
    assert not res.ok and "changed since the plan" in res.message
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_15W").mode
    res = apply(me, ORIN.mode(4, 729.6, 318.75, 665.6))             # the app applies...
    assert res.ok
    assert apply(other, ORIN.preset("MODE_30W").mode).ok            # ...someone else after it
    with pytest.raises(BoardChanged, match="rolling back would undo that change"):
        rollback(me, res.snapshot, expect=res.readback)
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_30W").mode
    assert apply(other, res.readback).ok                            # back in the app's mode: fine
    rollback(me, res.snapshot, expect=res.readback)
    assert fakesys.read_mode(tree) == ORIN.preset("MODE_15W").mode


def test_a_profile_refused_by_the_lock_starts_nothing_and_says_nothing_else(tree, cli):
    """It said it was running the probe's loop and had restored the board, and left an
    interrupted 0/N session, though no script started and the board was never touched (a user's
    trial)."""
    from ptui.core.board import locks
    from ptui.core.profiling.store import Store
    p = _hold(locks.lock_path(locks.board_key(SysfsBackend(ORIN, root=tree))))
    try:
        for cmd in (["profile", "--count", "2", "--out", str(tree.parent / "p.csv")],
                    ["tune", "--count", "6", "--budget-w", "30"]):
            rc, out, err = cli("--backend", "sysfs", "--sysfs-root", tree, *cmd, "--workload",
                               "resnet18", "--session", f"s-{cmd[0]}")
            assert rc == 1 and f"pid {p.pid}" in err and "nothing was started" in err, err
            assert "running" not in err and "restored" not in err and "resume" not in err, err
    finally:
        p.kill()
        p.wait()
    assert Store().list_sessions() == []


def test_a_profile_whose_board_lock_cannot_be_taken_leaves_no_session(tree, cli, tmp_path):
    """A lock that cannot be taken (here a link at its path; a lock directory that is not
    writable, chattr +i, is the same): the profile started, failed on the lock and left a failed
    0/N session under the name, saying 'finished modes are kept in session ...' though none were.
    Now it is refused before any session exists, and the name stays free."""
    from ptui.core.board import locks
    from ptui.core.profiling.store import Store
    path = locks.lock_path(locks.board_key(SysfsBackend(ORIN, root=tree)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.symlink_to(tmp_path / "elsewhere")
    rc, out, err = cli("--backend", "sysfs", "--sysfs-root", tree, "profile", "--count", "2",
                       "--out", str(tmp_path / "p.csv"), "--workload", "resnet18", "--session", "s")
    assert rc == 1 and "cannot take the lock" in err and "nothing was started" in err, err
    assert "finished modes" not in err and "running" not in err, err
    assert Store().list_sessions() == [] and not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("again", [MODE + ["--yes"], ["--preset", "MODE_15W", "--yes"]])
def test_an_apply_that_changes_nothing_keeps_the_way_back(tree, cli, nvpmodel_on_path, again):
    """The same apply run twice (a retried script, a boot hook): the second writes the values the
    board already holds, so `ptui restore` must still go back to where the board was before the
    first.  It named the mode the first apply left as the way back, and the board's own mode was
    lost (apply --json, which writes nothing then, kept it)."""
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    before = fakesys.read_mode(tree)
    for _ in range(2):
        rc, _, err = cli("apply", *sysfs, *again)
        assert rc == 0, err
    assert fakesys.read_mode(tree) != before
    rc, out, err = cli("restore", *sysfs)
    assert rc == 0 and "restored" in out, err
    assert fakesys.read_mode(tree) == before


def test_end_of_input_at_the_apply_prompt_applies_nothing_and_says_so(tree, cli, monkeypatch):
    """Ctrl-D at 'apply this mode? [y/N]' (the terminal's end of input) ended ptui with an EOFError
    traceback, exit 1 (an emulated board)."""
    import builtins
    import sys

    def eof(prompt=""):
        sys.stdout.write(prompt)
        raise EOFError
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(builtins, "input", eof)
    before = fakesys.read_mode(tree)
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, *MODE)
    assert rc == 0 and "Traceback" not in err, err
    assert out.rstrip().endswith("apply this mode? [y/N] \nnot applied"), out
    assert fakesys.read_mode(tree) == before


def test_a_link_at_the_boards_lock_path_is_not_written_through(tree, cli, tmp_path):
    """A symbolic link planted at the board's lock path (a shared lock directory): ptui opened it,
    truncated the file it points to and wrote its pid there (a user's file 'precious' became
    '4946', an emulated board); now nothing is written through it and the apply is refused."""
    from ptui.core.board.locks import board_key, lock_path
    precious = tmp_path / "precious.txt"
    precious.write_text("precious\n")
    path = lock_path(board_key(SysfsBackend(ORIN, root=tree)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.symlink_to(precious)
    before = fakesys.read_mode(tree)
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, *MODE, "--yes")
    assert precious.read_text() == "precious\n"
    assert rc == 1 and "applied" not in out and fakesys.read_mode(tree) == before, out
    last = err.strip().splitlines()[-1]
    assert last == (f"ptui: error: not applied: cannot take the lock {path}: it is a symbolic link, "
                    f"not ptui's lock file; nothing was written there (remove it, then try again)"), last


def test_status_says_what_stands_at_the_lock_path(tree, cli, tmp_path):
    """A symbolic link at the board's lock path: apply is refused there, but `ptui status` said
    'lock: free'.  It names the link now (and --json its lock_problem)."""
    from ptui.core.board.locks import board_key, lock_path
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    rc, out, err = cli("status", *sysfs, "--json")
    assert rc == 0 and json.loads(out)["lock_problem"] is None, err
    path = lock_path(board_key(SysfsBackend(ORIN, root=tree)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.symlink_to(tmp_path / "elsewhere")
    rc, out, err = cli("status", *sysfs)
    assert rc == 0 and "lock: free" not in out, out
    assert f"lock: cannot be taken: {path}: it is a symbolic link, not ptui's lock file" in out, out
    rc, out, err = cli("status", *sysfs, "--json")
    assert rc == 0 and "symbolic link" in json.loads(out)["lock_problem"], out
    assert not (tmp_path / "elsewhere").exists()


def test_status_says_when_no_lock_file_can_be_made(tree, cli, tmp_path, monkeypatch):
    """PTUI_LOCK_DIR under a regular file, or a lock directory that cannot be written (immutable,
    a read-only file system; access() says so): `ptui status` said 'lock: free' (and --json
    lock_problem null) and the next apply failed on the lock.  Now both name the directory at fault,
    and apply is refused as before."""
    import os
    afile = tmp_path / "afile"
    afile.write_text("")
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    monkeypatch.setenv("PTUI_LOCK_DIR", str(afile / "locks"))
    rc, out, err = cli("status", *sysfs)
    assert rc == 0 and "lock: free" not in out, out
    assert f"cannot be made: {afile} is not a directory; apply, restore and profile are refused" in out, out
    rc, out, err = cli("status", *sysfs, "--json")
    assert rc == 0 and f"{afile} is not a directory" in json.loads(out)["lock_problem"], out
    rc, out, err = cli("apply", *sysfs, *MODE, "--yes")
    assert rc == 1 and "cannot take the lock" in err, err
    shut = tmp_path / "shut"
    shut.mkdir()
    monkeypatch.setenv("PTUI_LOCK_DIR", str(shut / "ptui"))
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **k: False if str(p) == str(shut) else real(p, m, **k))
    rc, out, err = cli("status", *sysfs, "--json")
    assert rc == 0 and f"{shut} cannot be written" in json.loads(out)["lock_problem"], out
    monkeypatch.setattr(os, "access", real)
    rc, out, err = cli("status", *sysfs, "--json")
    assert rc == 0 and json.loads(out)["lock_problem"] is None and not (shut / "ptui").exists(), out


def test_sigterm_at_the_apply_prompt_is_said_on_its_own_line(tree, cli, monkeypatch):
    """SIGTERM at 'apply this mode? [y/N]' printed 'ptui: error: stopped by SIGTERM' on the
    prompt's line (no newline after the prompt); nothing is applied."""
    import builtins
    import signal
    import sys

    from ptui.core.board.signals import Terminated

    def stopped(prompt=""):
        sys.stdout.write(prompt)
        raise Terminated(signal.SIGTERM)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(builtins, "input", stopped)
    before = fakesys.read_mode(tree)
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, *MODE)
    assert rc == 143 and out.endswith("apply this mode? [y/N] \n"), out
    assert err.strip().splitlines()[-1] == "ptui: error: stopped by SIGTERM", err
    assert fakesys.read_mode(tree) == before


def test_a_fifo_at_the_boards_lock_path_does_not_hang_status_or_apply(tree, cli):
    """A named pipe planted at the board's lock path (a shared lock directory): `ptui status`
    opened it to read who holds the lock and waited for a writer for ever (so did apply, profile
    and restore where they ask the holder first).  Now status names it and apply is refused."""
    import os
    import signal

    from ptui.core.board.locks import board_key, lock_path
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    path = lock_path(board_key(SysfsBackend(ORIN, root=tree)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    before = fakesys.read_mode(tree)

    class Hung(BaseException):      # not an OSError, which ptui's opens catch
        pass

    def hung(*_):
        raise Hung("ptui hung on the named pipe at the lock path")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        rc, out, err = cli("status", *sysfs)
        assert rc == 0 and f"lock: cannot be taken: {path}: it is not a regular file" in out, (out, err)
        rc, out, err = cli("apply", *sysfs, *MODE, "--yes")
        assert rc == 1 and "Traceback" not in err and fakesys.read_mode(tree) == before, (out, err)
        assert "it is not a regular file, not ptui's lock file" in err, err
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("how", ["resumed", "prior"])
def test_tune_apply_that_profiled_nothing_does_not_write_over_a_change_made_meanwhile(
        tree, cli, monkeypatch, how):
    """tune --apply whose run touched no mode (a finished session resumed, --count 0): the check
    that the board was not changed while tune fitted and decided compared with the mode a profile
    left, and with none it was skipped: a mode another user selected meanwhile was written over,
    without a word.  Now it compares with the mode the board was in when tune started."""
    import ptui.core as core
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    goal = ["--workload", "resnet18", "--budget-w", "25", "--session", "t"]
    if how == "resumed":
        rc, _, err = cli("tune", "--backend", "sim", "--device", "orin-agx", *goal, "--count", "6")
        assert rc == 0, err
        _profiled_on_the_tree("t", tree)       # a session resumes (and applies) only where it was made
        run = [*goal, "--resume"]
        name = "tune_decide"
    else:
        run = [*goal, "--count", "0"]
        name = "tune_prior"
    real = getattr(core, name)

    def meanwhile(*args, **kw):
        rc, _, err = cli("apply", *sysfs, *MODE, "--yes")
        assert rc == 0, err
        return real(*args, **kw)
    monkeypatch.setattr(core, name, meanwhile)
    rc, out, err = cli("tune", *sysfs, *run, "--apply")
    chosen = fakesys.read_mode(tree)
    assert rc == 1 and "applied and verified" not in out + err, (out, err)
    assert err.strip().splitlines()[-1].startswith(
        "ptui: error: not applied: the board was changed while tune fitted and decided"), err
    assert "when tune started" in err, err
    monkeypatch.setattr(core, name, real)
    rc, out, err = cli("tune", *sysfs, *run, "--apply")
    assert rc == 0 and "applied and verified" in out + err, (out, err)
    assert fakesys.read_mode(tree) != chosen


def _profiled_on_the_tree(name, tree):
    """The session as if profiled on the board at `tree` (a finished profile there, without
    running one): its backend and board as such a run records them."""
    import sqlite3

    from ptui.core.board.locks import board_key
    from ptui.core.profiling.profiler import board_where
    from ptui.core.profiling.store import Store
    board = SysfsBackend(ORIN, root=tree)
    store = Store()
    try:
        store.update_params(name, lambda p: p.update(original_board=board_key(board),
                                                     board_where=board_where(board)))
        path = store.path
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE sessions SET backend='sysfs' WHERE name=?", (name,))


def _done(name):
    from ptui.core.profiling.store import Store
    store = Store()
    try:
        return store.get_session(name).n_done
    finally:
        store.close()


def _older_ptui(name):
    """The session as an older ptui left it: no board recorded, its backend's kind alone."""
    from ptui.core.profiling.store import Store
    store = Store()
    try:
        store.update_params(name, lambda p: [p.pop(k, None) for k in ("original_board", "board_where",
                                                                       "undo_dir")])
    finally:
        store.close()


def test_tune_apply_of_a_simulated_session_is_refused_on_a_board(tree, cli):
    """`ptui tune --backend sim ... --session s` then `ptui tune --sysfs-root TREE --session s
    --resume --apply` said 'board: SIMULATED orin-agx' and then 'applied and verified' on the
    board: a pick made on simulated rows set on a board.  Refused in one line (exit 2) before
    anything is fitted or written, naming the simulator and how to resume there, which works."""
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    goal = ["--budget-w", "25", "--session", "t"]
    rc, _, err = cli("tune", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     *goal, "--count", "6")
    assert rc == 0, err
    before = fakesys.read_mode(tree)
    rc, out, err = cli("tune", *sysfs, *goal, "--resume", "--apply")
    assert rc == 2 and "applied" not in out + err and fakesys.read_mode(tree) == before, (out, err)
    line = err.strip().splitlines()[-1]
    assert line == (f"ptui: error: session 't' was profiled on the simulator, not on the emulated "
                    f"orin-agx at {tree.resolve()}: resume it with --backend sim --device orin-agx, or "
                    f"start a new session here (another --session name); nothing was written"), err
    rc, out, err = cli("tune", "--backend", "sim", "--device", "orin-agx", *goal, "--resume", "--apply")
    assert rc == 0 and "on the SIMULATED board" in out + err, (out, err)


def test_an_unfinished_simulated_session_resumes_only_on_the_simulator(tree, cli, monkeypatch):
    """An unfinished simulator's session resumed on the replay device (or, from an older ptui
    that recorded no board, on a board) profiled the rest there: simulated and replayed
    (measured) rows in one session.  Refused in one line (exit 2) before anything is written,
    naming the simulator and how to resume there, which still works."""
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    before = fakesys.read_mode(tree)
    whole = ctrl_c_at_mode(monkeypatch, 3)
    out_csv = tree.parent / "p.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "6", "--session", "u", "--out", out_csv)
    assert rc == 130, err
    whole()
    corpus = tree.parent / "corpus.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "12", "--out", corpus)
    assert rc == 0, err
    replay = ["--backend", "replay", "--corpus", corpus]
    for where, words in ((replay, "the replay device"), (sysfs, "the emulated orin-agx at")):
        rc, _, err = cli("profile", *where, "--session", "u", "--resume", "--out", out_csv)
        assert rc == 2 and f"session 'u' was profiled on the simulator, not on {words}" in err, err
        assert "resume it with --backend sim --device orin-agx" in err, err
    _older_ptui("u")                         # no board recorded: its kind still says where
    for where in (replay, sysfs):
        rc, _, err = cli("profile", *where, "--session", "u", "--resume", "--out", out_csv)
        assert rc == 2 and "session 'u' was profiled on the simulator" in err, err
    assert fakesys.read_mode(tree) == before and _done("u") == 2      # nothing profiled elsewhere
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--session", "u",
                     "--resume", "--out", out_csv)
    assert rc == 0 and "6 finished modes saved" in err, err
