"""The log (ptui.core.board.logs): -q, -v, the app's log file."""
import logging
import os

from ptui.core.board import logs
from tests.support import fakesys

MODE = ["--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6"]


def test_quiet_keeps_errors_and_verbose_says_every_write(cli, tmp_path):
    # MAXN powers every GPU TPC: MODE_30W's gated ones are a warning, which -q keeps
    tree = fakesys.build(tmp_path / "root", nvp_id=0)
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    rc, out, err = cli("-q", "apply", *sysfs, *MODE, "--yes")
    assert rc == 0 and err == "" and "applied and verified" in out
    rc, out, err = cli("apply", *sysfs, "--cores", "4", "--yes", "-q")        # -q after the command
    assert rc == 2 and err.startswith("ptui: error: ") and len(err.splitlines()) == 1
    rc, out, err = cli("restore", *sysfs, "-v")
    assert rc == 0
    writes = [line for line in err.splitlines() if line.startswith("debug: write ")]
    assert writes and all(str(tree) in line for line in writes)
    assert any(line.startswith("debug: took the lock ") for line in err.splitlines())
    rc, out, err = cli("apply", *sysfs, *MODE, "--yes")                       # neither: no debug
    assert rc == 0 and "debug:" not in err


def test_a_warning_is_said_under_quiet(capsys):
    logs.for_cli(quiet=True)
    try:
        logging.getLogger("ptui.core.x").info("progress")
        logging.getLogger("ptui.core.x").warning("the pick is uncertain")
    finally:
        logs.for_cli()
    assert capsys.readouterr().err == "warning: the pick is uncertain\n"


def test_the_app_logs_to_a_file_and_leaves_a_fifo_alone(tmp_path):
    try:
        path = logs.for_app(tmp_path, verbose=1)
        logging.getLogger("ptui.core.board.apply").debug("apply on orin-agx")
        assert path == tmp_path / "ptui-app.log" and "apply on orin-agx" in path.read_text()
        other = tmp_path / "other"
        other.mkdir()
        os.mkfifo(other / "ptui-app.log")
        assert logs.for_app(other) is None                  # no log file; never opened or renamed
        assert (other / "ptui-app.log").is_fifo()
    finally:
        logs.for_cli()
