"""The fleet's pool on a real PostgreSQL server (tests/support/pgserver.py starts one as an
unprivileged user on a free 127.0.0.1 port; skipped, saying why, where that cannot be done):
concurrent writers lose nothing, a writer killed mid-write leaves no partial row, and `ptui
profile` / `ptui fit --pool` / `ptui pool` work against it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support import pgserver
from tests.support.cli import ROOT

WHY = pgserver.why_not()
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.slow]

# a writer: board ARGV[2] adds rows 0..ARGV[3]-1 (each one INSERT, committed), printing each idx
# once committed; a row's figures follow from its idx, so a reader can check every column
WRITER = r"""
import sys, time
from ptui.core.profiling.pool import Pool, PoolRow
url, board, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
pool = Pool(url)
for i in range(n):
    pool.add(PoolRow(board, "orin-agx", "resnet18", 16, 4 + i % 9, 729.6 + i, 305.25 + i, 2133.0,
                     100.0 + i, 20.0 + i / 10, 99.0 + i, 101.0 + i, 0.1, 40, 30, True, "w", i, 1e9 + i))
    print(i, flush=True)
    if delay:
        time.sleep(delay)
"""


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _complete(r) -> bool:
    i = r.idx
    return (r.cores == 4 + i % 9 and r.cpu_mhz == 729.6 + i and r.gpu_mhz == 305.25 + i
            and r.time_ms == 100.0 + i and abs(r.power_w - (20.0 + i / 10)) < 1e-9
            and r.time_ms_p25 == 99.0 + i and r.time_ms_p75 == 101.0 + i and r.n_power == 30
            and r.simulated is True and r.measured_at == 1e9 + i)


@pytest.fixture(scope="module")
def pg_url():
    server = pgserver.Server()
    try:
        server.start()
    except subprocess.CalledProcessError as e:
        server.stop()
        pytest.fail(f"PostgreSQL did not start: {e.stderr or e.stdout}")
    yield server.url
    server.stop()


def _pool(url):
    from ptui.core.profiling.pool import Pool
    return Pool(url)


def test_eight_concurrent_writers_lose_nothing(pg_url):
    n = 60
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg_url, f"conc-{k}", str(n)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert len(out.split()) == n
    with _pool(pg_url) as pool:
        rows = [r for r in pool.rows(device="orin-agx") if r.board.startswith("conc-")]
    assert len(rows) == 8 * n
    assert {(r.board, r.idx) for r in rows} == {(f"conc-{k}", i) for k in range(8) for i in range(n)}
    assert all(_complete(r) for r in rows)


def test_a_writer_killed_mid_write_leaves_no_partial_row(pg_url):
    p = subprocess.Popen([sys.executable, "-c", WRITER, pg_url, "killed", "100000", "0"], env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    for _ in range(150):                    # well into its stream of writes
        p.stdout.readline()
    p.send_signal(signal.SIGKILL)
    printed = 150 + len(p.stdout.read().split())
    p.wait(timeout=30)
    with _pool(pg_url) as pool:
        rows = pool.rows(board="killed")
    # every committed row is whole; at most the one in flight went in unannounced
    assert printed <= len(rows) <= printed + 1
    assert sorted(r.idx for r in rows) == list(range(len(rows)))
    assert all(_complete(r) for r in rows)
    # the board comes back and writes again from the start: nothing doubles
    again = subprocess.run([sys.executable, "-c", WRITER, pg_url, "killed", str(len(rows) + 5)], env=_env(),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    with _pool(pg_url) as pool:
        assert len(pool.rows(board="killed")) == len(rows) + 5


def test_profile_fit_and_pool_commands_against_postgres(pg_url, tmp_path, cli, monkeypatch):
    monkeypatch.setenv("PTUI_POOL", pg_url)
    for b in range(3):
        monkeypatch.setenv("PTUI_BOARD_ID", f"pg-board-{b}")
        rc, out, err = cli("profile", "--device", "orin-agx", "--workload", "mobilenetv3", "--count", "6",
                           "--seed", str(b), "--out", tmp_path / f"b{b}.csv")
        assert rc == 0, err
        assert "also goes to the pool" in err + out
    rc, out, err = cli("pool", "list", "--json")
    assert rc == 0, err
    mine = [g for g in json.loads(out)["groups"] if g["workload"] == "mobilenetv3"]
    assert mine == [{**mine[0], "rows": 18, "boards": 3, "simulated_rows": 18}]
    monkeypatch.setenv("PTUI_BOARD_ID", "pg-board-0")
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "b0.csv", "--pool",
                       "--method", "gp", "--out", tmp_path / "m")
    assert rc == 0, err
    assert "pooled: 6 rows of this board + 12 from 2 other boards" in out
    assert "SIMULATED" in out
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert meta["trained_on"]["pooled"]["boards"] == 2
    rc, out, err = cli("pool", "pull", "--device", "orin-agx", "--workload", "mobilenetv3",
                       "--out", tmp_path / "pulled.csv")
    assert rc == 0, err
    assert len((tmp_path / "pulled.csv").read_text().splitlines()) == 19
    t = time.time()
    rc, out, err = cli("pool", "list", "--pool-url", pg_url.rsplit(":", 1)[0] + f":{pgserver.free_port()}/x")
    assert rc == 1 and len(err.strip().splitlines()) == 1, err
    assert time.time() - t < 20
