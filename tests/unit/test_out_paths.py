"""Every path ptui writes: a regular file or nothing (a directory for a model); device nodes, FIFOs
and sockets are refused in one line before any work and never renamed or opened; an existing file is
read only up to a cap; failures at write time are one line that says how to get the rows out of the
session store; session names cannot leave the data directory."""
import errno
import os
import socket
import stat
import subprocess
import threading

import pytest

from ptui.core.profiling.store import Store
from tests.support.cli import PY, subprocess_env

PROFILE = ["profile", "--device", "orin-agx", "--workload", "mobilenetv3", "--count", "3",
           "--seed", "1"]


def _fifo(path):
    os.mkfifo(path)
    return path


def _socket(path, monkeypatch):
    """A unix socket node at `path` (bound by a relative name: AF_UNIX paths are short)."""
    monkeypatch.chdir(path.parent)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path.name)
    s.close()
    return path


def _same_node(path, before):
    st = os.lstat(path)
    return (st.st_ino, stat.S_IFMT(st.st_mode)) == (before.st_ino, stat.S_IFMT(before.st_mode))


def _in_time(fn, fifo=None, timeout=20):
    """fn() in a thread; fails (instead of hanging the suite) when it has not returned in time.
    A thread stuck opening `fifo` for reading is let go by opening and closing its write end."""
    box = {}

    def go():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e
    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            th.join(5)
        pytest.fail(f"{getattr(fn, '__name__', fn)} blocked (it opened a FIFO)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _sub(tmp_path, *args):
    """The CLI in a process of its own: a command that blocks on a FIFO is killed, not waited for."""
    r = subprocess.run([PY, "-m", "ptui", *map(str, args)], capture_output=True, text=True,
                       timeout=60, env=subprocess_env(tmp_path))
    return r.returncode, r.stdout, r.stderr


# -- device nodes, FIFOs, sockets ------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_out_that_is_a_fifo_or_a_socket_is_refused_before_any_work(kind, tmp_path, monkeypatch):
    from ptui.core.prediction.predictor import bundled_reference
    d = tmp_path / "outs"
    d.mkdir()
    node = _fifo(d / "p.csv") if kind == "fifo" else _socket(d / "p.csv", monkeypatch)
    before = os.lstat(node)
    word = "FIFO" if kind == "fifo" else "socket"
    for args in (PROFILE, ["tune", "--device", "orin-agx", "--workload", "mobilenetv3",
                           "--budget-w", "30", "--count", "6"],
                 ["modes", "--device", "orin-agx"],
                 ["predict", "--model", bundled_reference()]):
        rc, out, err = _sub(tmp_path, *args, "--out", node)
        assert rc == 2, (args, err)
        assert err.startswith("ptui: error: ") and err.count("\n") == 1, (args, err)
        assert word in err and "not a regular file" in err, err
        assert _same_node(node, before) and sorted(os.listdir(d)) == ["p.csv"], args
    assert Store().list_sessions() == []                        # refused before a session exists


def test_dev_null_is_refused_and_left_alone(tmp_path, cli):
    from ptui.core.board.csvio import check_out_file, write_csv
    from ptui.core.errors import InputError
    before = os.lstat("/dev/null")
    with pytest.raises(InputError, match="character device"):
        check_out_file("/dev/null")
    with pytest.raises(InputError, match="character device"):
        write_csv("/dev/null", ("cores",), [["4"]])
    rc, _, err = cli("modes", "--device", "orin-agx", "--grid", "presets", "--out", "/dev/null")
    assert rc == 2 and "/dev/null is a character device" in err and err.count("\n") == 1, err
    assert _same_node("/dev/null", before) and not os.path.lexists("/dev/null.~1~")


def test_keep_aside_never_renames_or_opens_a_node(tmp_path, monkeypatch):
    from ptui.core.board.csvio import keep_aside
    from ptui.core.errors import InputError
    sock = _socket(tmp_path / "s.csv", monkeypatch)
    fifo = _fifo(tmp_path / "f.csv")
    for node in (sock, fifo):
        before = os.lstat(node)
        with pytest.raises(InputError, match="not a regular file"):
            _in_time(lambda n=node: keep_aside(n, "x"), fifo=fifo)
        assert _same_node(node, before)
    assert sorted(os.listdir(tmp_path)) == ["f.csv", "s.csv"]


def test_model_out_whose_meta_is_a_fifo_is_refused_without_reading_it(tmp_path):
    from ptui.core.prediction.modeldir import check_out_dir
    from ptui.core.prediction.predictor import ModelError
    d = tmp_path / "m"
    d.mkdir()
    fifo = _fifo(d / "meta.json")
    with pytest.raises(ModelError, match="not a ptui model directory"):
        _in_time(lambda: check_out_dir(d), fifo=fifo)
    node = _fifo(tmp_path / "n")
    with pytest.raises(ModelError, match="FIFO"):
        check_out_dir(node)


def test_the_store_itself_must_be_a_regular_file(tmp_path):
    """(also in test_store, where the mutation benchmark runs it; here under a watchdog)"""
    from ptui.core.profiling.store import StoreError
    fifo = _fifo(tmp_path / "sessions.sqlite")
    with pytest.raises(StoreError, match="FIFO"):
        _in_time(lambda: Store(fifo), fifo=fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_an_existing_file_is_read_only_up_to_the_cap(tmp_path, monkeypatch):
    """A file at --out bigger than the cap is not read whole to see whether it is the session's own
    profile: it is kept aside (never lost), and a header check reads only its start."""
    from ptui.core.board import files
    from ptui.core.board.csvio import keep_aside, write_csv
    from ptui.core.profiling.profiler import PROFILE_HEADER
    big = tmp_path / "big.csv"
    row = ["4", "729.6", "318.75", "665.6", "100", "20"] + [""] * (len(PROFILE_HEADER) - 9) + \
          ["resnet18", "16", "s"]
    write_csv(big, PROFILE_HEADER, [row] * 200)
    text = big.read_text()
    monkeypatch.setattr(files, "READ_CAP", 1000)
    reads = []
    real = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real(fd, n))
    write_csv(big, PROFILE_HEADER, [row])                  # same header: replaced (header in the cap)
    assert 0 < sum(reads) <= 1001
    write_csv(big, PROFILE_HEADER, [row] * 200)
    moved = keep_aside(big, "s")                           # too big to check every row: kept
    assert moved is not None and moved.read_text() == text and not big.exists()


# -- names too long, disk full, read-only --------------------------------------------------------
def test_a_name_too_long_is_refused_up_front(tmp_path, cli):
    for n in (240, 300):        # too long for ptui's temporary name; too long for the file system
        rc, _, err = cli(*PROFILE, "--out", tmp_path / ("p" * n + ".csv"))
        assert rc == 2 and "too long" in err and err.count("\n") == 1, err
    assert Store().list_sessions() == []


class _Full:
    """A file whose writes fail as on a full disk."""

    def __init__(self, fh):
        self.fh = fh

    def write(self, _s):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.fh.close()


@pytest.mark.parametrize("fault", ["ENOSPC", "EROFS", "EACCES"])
def test_a_failed_write_is_one_line_and_says_how_to_get_the_rows_out(fault, tmp_path, cli,
                                                                     monkeypatch):
    import csv
    import tempfile
    out = tmp_path / "p.csv"
    with monkeypatch.context() as m:
        if fault == "ENOSPC":
            real_fdopen = os.fdopen
            m.setattr(os, "fdopen", lambda fd, *a, **k: _Full(real_fdopen(fd, *a, **k)))
        else:
            code = getattr(errno, fault)

            def refuse(*a, **k):
                raise OSError(code, os.strerror(code))
            m.setattr(tempfile, "mkstemp", refuse)
        rc, _, err = cli(*PROFILE, "--session", "s", "--out", out)
    lines = err.strip().splitlines()
    assert rc == 1 and lines[-1].startswith("ptui: error: ") and err.count("ptui: error") == 1, err
    assert "Traceback" not in err
    words = {"ENOSPC": "no space left", "EROFS": "the file system is read-only", "EACCES": "permission denied"}[fault]
    assert f"cannot write {out}: {words}" in lines[-1], err
    assert "3 finished modes are safe in session s" in lines[-1], err
    hint = "ptui profile --session s --resume --out elsewhere.csv"
    assert hint in lines[-1], err
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["data"]     # no temporaries
    # the hint works: the rows come out of the store, nothing is profiled again
    import ptui.core.board.backends as B

    def no_device(*a, **k):
        raise AssertionError("a finished session's export opened the device")
    monkeypatch.setattr(B, "open_backend", no_device)
    rc, _, err = cli(*hint.split()[1:-1], tmp_path / "elsewhere.csv")
    assert rc == 0, err
    rows = list(csv.DictReader(open(tmp_path / "elsewhere.csv")))
    assert len(rows) == 3 and {r["session"] for r in rows} == {"s"}


def test_a_finished_active_or_script_free_session_exports_without_the_device(tmp_path, cli,
                                                                             monkeypatch):
    import ptui.core.board.backends as B
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "mobilenetv3", "--strategy",
                     "active", "--budget-w", "30", "--count", "8", "--session", "a",
                     "--out", tmp_path / "a.csv")
    assert rc == 0, err
    first = (tmp_path / "a.csv").read_text()
    monkeypatch.setattr(B, "open_backend", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("opened the device")))
    rc, _, err = cli("profile", "--session", "a", "--resume", "--out", tmp_path / "b.csv")
    assert rc == 0, err
    assert (tmp_path / "b.csv").read_text() == first
    assert "nothing left to profile" in err
    s = Store().get_session("a")
    assert s.status == "done" and s.n_done == len(first.splitlines()) - 1


# -- session names --------------------------------------------------------------------------------
BAD_NAMES = ["../../x", "a/b", "a\\b", "", "  ", ".", "..", "tab\there", "new\nline", "x" * 101]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_a_bad_session_name_is_refused(name, tmp_path, cli):
    for args in (PROFILE, ["tune", "--device", "orin-agx", "--workload", "mobilenetv3",
                           "--budget-w", "30", "--count", "6"]):
        rc, out, err = cli(*args, "--session", name, "--out", tmp_path / "p.csv")
        assert rc == 2 and err.startswith("ptui: error: ") and err.count("\n") == 1, err
        assert "session name" in err
    assert Store().list_sessions() == [] and sorted(os.listdir(tmp_path)) in ([], ["data"])


def test_session_names_are_checked_in_the_core_too(tmp_path):
    """The app has no name field, but a name from an old store goes through the same check."""
    from ptui.core.errors import InputError
    from ptui.core.usecases.profile import ProfileRequest, ProfileRun
    with pytest.raises(InputError, match="session name"):
        ProfileRun(ProfileRequest(workload="resnet18", session="../up"))
    ok = ProfileRun(ProfileRequest(workload="resnet18", session="my run 2 (bs16)@home"))
    ok.close()


def test_a_batch_size_group_says_the_same_and_exports_without_the_device(tmp_path, cli,
                                                                          monkeypatch):
    import csv

    import ptui.core.board.backends as B
    out = tmp_path / "g.csv"
    real_fdopen = os.fdopen
    with monkeypatch.context() as m:
        m.setattr(os, "fdopen", lambda fd, *a, **k: _Full(real_fdopen(fd, *a, **k)))
        rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "mobilenetv3",
                         "--batch-sizes", "8,16", "--count", "4", "--session", "g", "--out", out)
    last = err.strip().splitlines()[-1]
    assert rc == 1 and err.count("ptui: error") == 1 and "Traceback" not in err, err
    assert last.startswith(f"ptui: error: cannot write {out}: no space left on the disk; the 4 "
                           f"finished (mode, batch size) pairs are safe in session g"), err
    hint = "ptui profile --session g --resume --batch-sizes 8,16 --out elsewhere.csv"
    assert last.endswith(hint) and not out.exists()
    monkeypatch.setattr(B, "open_backend", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("opened the device")))
    rc, _, err = cli(*hint.split()[1:-1], tmp_path / "elsewhere.csv")
    assert rc == 0, err
    rows = list(csv.DictReader(open(tmp_path / "elsewhere.csv")))
    assert len(rows) == 4 and {r["session"] for r in rows} == {"g"}
    assert sorted({r["batch_size"] for r in rows}) == ["16", "8"]


def test_a_model_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path):
    from ptui.core.board.files import WriteError
    from ptui.core.errors import exit_code
    from ptui.core.prediction.modeldir import write_model_dir

    def full(d):
        (d / "time.npz").write_bytes(b"half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with pytest.raises(WriteError) as e:
        write_model_dir(tmp_path / "m", {"format": "ptui-test"}, full)
    assert str(e.value) == f"cannot write {tmp_path / 'm'}: no space left on the disk"
    assert exit_code(e.value) == 1 and os.listdir(tmp_path) == []


def test_the_newest_model_includes_tunes_for_this_device_only():
    """The app opens on the newest model: a `ptui tune` model counts (tune-auto-... when no
    --device was given, or a --session name), and it did not (the app opened on an older model of
    its own after a tune; a user trial and a review).  Its meta.json says its device."""
    import json
    import os

    from ptui.core import paths
    mdir = paths.models_dir()
    made = []
    for k, (name, dev) in enumerate((("orin-agx-resnet18-1", "orin-agx"), ("tune-auto-spec-2", "orin-agx"),
                                     ("tune-auto-spec-3", "orin-nano"), ("my-session-4", None),
                                     ("not-json-5", "bad"))):
        d = mdir / name
        d.mkdir(parents=True)
        if dev == "bad":
            (d / "meta.json").write_text("{not json")
        elif dev is not None:                             # no meta.json: not a model (yet)
            (d / "meta.json").write_text(json.dumps({"device": dev}))
        os.utime(d, (1000 + k, 1000 + k))
        made.append(d)
    assert paths.latest_outputs("orin-agx")[1] == made[1]
    assert paths.latest_outputs("orin-nano")[1] == made[2]
    assert paths.latest_outputs("xavier-agx")[1] is None


# -- a user's trial (fuzzing every flag): inputs that are no file, and outputs that are the user's --
def test_an_input_that_is_no_regular_file_is_refused_without_reading_it(tmp_path, cli):
    """--workload-spec /dev/zero grew ptui to 24 GB before the kernel killed it, --profile
    /dev/zero and --modes FIFO never returned: inputs are read only when they are regular files."""
    from ptui.core.board.csvio import read_csv, read_modes
    from ptui.core.catalogue.devices import get_device
    from ptui.core.errors import InputError
    from ptui.core.prediction.roofline import WorkloadSpec
    from ptui.core.usecases.interleave import load_profiles
    orin = get_device("orin-agx")
    fifo = _fifo(tmp_path / "f.csv")
    for fn in (lambda: read_csv("/dev/null", orin), lambda: read_modes(fifo, orin),
               lambda: WorkloadSpec.from_json(fifo), lambda: load_profiles(fifo, orin)):
        with pytest.raises(InputError, match="ptui reads only regular files"):
            _in_time(fn, fifo=fifo)
    rc, _, err = cli("fit", "--device", "orin-agx", "--profile", "/dev/null", "--out", tmp_path / "m")
    assert rc == 2 and "/dev/null is a character device" in err and err.count("\n") == 1, err


def test_a_samples_to_target_file_that_is_no_regular_file_is_refused_without_reading_it(tmp_path):
    """pareto --batch-sizes 8,16 --samples-to-target FIFO (or /dev/zero) never returned: the
    relation file is read only when it is a regular file, as every other input."""
    from ptui.core.decision.batch import SamplesToTarget
    from ptui.core.errors import InputError
    fifo = _fifo(tmp_path / "rel.csv")
    for path in (fifo, "/dev/zero"):
        with pytest.raises(InputError, match="ptui reads only regular files"):
            _in_time(lambda p=path: SamplesToTarget.from_file(p), fifo=fifo)


def test_modes_out_never_replaces_a_modes_file_the_user_wrote(tmp_path, cli):
    """`ptui modes --out mine.csv` replaced a hand-made modes CSV (the four knobs, the format the
    README asks for --modes): ptui's own now carries its grid's name, and only that is replaced."""
    mine = tmp_path / "mine.csv"
    mine.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz\n12,2201.6,1300.5,3199\n")
    rc, _, err = cli("modes", "--device", "orin-agx", "--out", mine)
    assert rc == 2 and "not a ptui CSV" in err
    assert mine.read_text() == "cores,cpu_mhz,gpu_mhz,mem_mhz\n12,2201.6,1300.5,3199\n"
    ours = tmp_path / "ours.csv"
    for _ in range(2):                                        # its own file: replaced
        rc, _, err = cli("modes", "--device", "orin-agx", "--grid", "pt", "--out", ours)
        assert rc == 0, err
    assert ours.read_text().splitlines()[0] == "cores,cpu_mhz,gpu_mhz,mem_mhz,grid"
    rc, out, err = cli("modes", "--device", "orin-agx", "--json", "--out", ours)
    assert rc == 2 and "give one of them" in err


def test_a_csv_out_that_is_a_symbolic_link_stays_one(tmp_path, cli):
    """A link given as --out was replaced by a regular file; its target (ptui's CSV) is written."""
    target = tmp_path / "modes.csv"
    assert cli("modes", "--device", "orin-agx", "--grid", "pt", "--out", target)[0] == 0
    link = tmp_path / "link.csv"
    link.symlink_to(target.name)
    rc, _, err = cli("modes", "--device", "orin-agx", "--grid", "full", "--out", link)
    assert rc == 0, err
    assert link.is_symlink() and os.readlink(link) == "modes.csv"
    assert target.read_text().splitlines()[1].endswith(",full")


def test_a_profile_out_that_is_a_symbolic_link_stays_one(tmp_path, cli):
    """profile --out LINK, LINK -> another session's profile (or -> a file not there yet): the link
    itself was renamed to LINK.~1~ and a regular file written in its place; its target is kept
    aside (or created) and the link stays."""
    target = tmp_path / "real.csv"
    assert cli(*PROFILE, "--out", target)[0] == 0
    link = tmp_path / "l.csv"
    link.symlink_to(target.name)
    rc, _, err = cli(*PROFILE, "--out", link)
    assert rc == 0, err
    assert link.is_symlink() and os.readlink(link) == "real.csv"
    kept = tmp_path / "real.csv.~1~"
    assert kept.is_file() and not kept.is_symlink() and not (tmp_path / "l.csv.~1~").exists()
    assert target.read_text() != kept.read_text()            # another session's rows
    dangling = tmp_path / "d.csv"
    dangling.symlink_to("new.csv")
    rc, _, err = cli(*PROFILE, "--out", dangling)
    assert rc == 0, err
    assert dangling.is_symlink() and (tmp_path / "new.csv").is_file()
    assert not (tmp_path / "d.csv.~1~").exists()


def test_colocate_save_profiles_writes_only_its_own_file(tmp_path, cli):
    """--save-profiles overwrote any file (a user's, through a link, /dev/null) and hung on a FIFO,
    after the whole walk; it is checked first, written through a temporary, and a link stays."""
    args = ["colocate", "--device", "orin-agx", "--rate", "20", "--latency-ms", "100", "--budget-w",
            "30", "--train-workload", "resnet18", "--infer-workload", "lstm-lm", "--save-profiles"]
    user = tmp_path / "user.txt"
    user.write_text("precious\n")
    fifo = _fifo(tmp_path / "f.json")
    for path, words in ((user, "is not standalone profiles ptui wrote"), ("/dev/null", "character device"),
                        (fifo, "FIFO"), (tmp_path, "is a directory")):
        rc, _, err = _in_time(lambda p=path: cli(*args, p), fifo=fifo)
        assert rc == 2 and words in err and err.count("\n") == 1, err
    assert user.read_text() == "precious\n"
    saved = tmp_path / "p.json"
    assert cli(*args, saved)[0] == 0
    link = tmp_path / "l.json"
    link.symlink_to(saved.name)
    assert cli(*args, link)[0] == 0 and link.is_symlink()
    # a goal no mode meets: the profiles are saved all the same (re-deciding is what they are for)
    late = tmp_path / "late.json"
    rc, _, err = cli(*[a if a != "100" else "1" for a in args], late)
    assert rc == 3 and late.exists() and "--profiles" in err
    rc, _, err = cli("colocate", "--device", "orin-agx", "--rate", "20", "--latency-ms", "100",
                     "--budget-w", "30", "--profiles", late)
    assert rc == 0, err
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    rc, _, err = cli("colocate", "--device", "orin-agx", "--rate", "20", "--latency-ms", "100",
                     "--budget-w", "30", "--profiles", bad)
    assert rc == 2 and "not a ptui standalone-profiles file" in err


def test_settings_that_name_no_folder_or_no_pool_file_are_bad_input(tmp_path, cli, monkeypatch):
    """Exit 1 ('the device or the run failed') for what were the user's settings: a data
    directory that is a file, a pool URL naming a folder or /dev/null (opened, 'disk I/O
    error'), the replay backend without its recording (a fuzzing trial)."""
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    monkeypatch.setenv("PTUI_DATA_DIR", str(afile / "sub"))
    rc, _, err = cli(*PROFILE, "--out", tmp_path / "p.csv")
    assert rc == 2 and "session store" in err and err.count("\n") == 1, err
    monkeypatch.delenv("PTUI_DATA_DIR")
    for url, says in ((f"sqlite://{tmp_path}", "is a directory"), ("sqlite:///dev/null", "character device")):
        rc, _, err = cli("pool", "list", "--pool-url", url)
        assert rc == 2 and says in err, err
    assert os.path.exists("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    rc, _, err = cli("--backend", "replay", "status")
    assert rc == 2 and "needs --corpus" in err


def test_tune_out_in_a_missing_or_file_folder_is_refused_like_profiles(tmp_path, cli):
    """tune --out is checked as profile's is: a folder that does not exist is refused (tune made
    it, and every folder above it, from a mistyped path) and a file in the middle of the path is
    one line of bad input (it was '[Errno 17] File exists', exit 1), before any mode is profiled."""
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    tune = ["tune", "--device", "orin-agx", "--workload", "mobilenetv3", "--budget-w", "20",
            "--count", "6", "--seed", "1"]
    rc, _, err = cli(*tune, "--out", tmp_path / "new" / "deeper" / "t.csv")
    assert rc == 2 and "does not exist" in err and err.count("\n") == 1, err
    assert not (tmp_path / "new").exists()
    rc, _, err = cli(*tune, "--out", afile / "t.csv")
    assert rc == 2 and "not a folder" in err and err.count("\n") == 1, err
    assert afile.read_text() == "x\n"
    assert Store().list_sessions() == []                        # refused before a session exists
