"""The fleet's pool (SQLite flavour: the same class and SQL as on PostgreSQL, whose own tests
are tests/functional/test_pool_pg.py) and the pooled fit with a per-board correction."""
from __future__ import annotations

import json
import random
import sqlite3

import numpy as np
import pytest

from ptui.core.errors import InputError
from ptui.core.profiling.pool import Pool, PoolError, PoolRow, check_url


def _row(board="a", idx=0, **kw):
    base = dict(board=board, device="orin-agx", workload="resnet18", batch_size=16, cores=4, cpu_mhz=729.6,
                gpu_mhz=305.25, mem_mhz=2133.0, time_ms=100.0 + idx, power_w=20.0, simulated=True,
                source="s", idx=idx, measured_at=1e9)
    return PoolRow(**{**base, **kw})


def test_rows_go_in_once_and_come_back_filtered(tmp_path):
    with Pool(f"sqlite:///{tmp_path}/p.sqlite") as pool:
        assert pool.add(_row("a", 0)) and pool.add(_row("a", 1)) and pool.add(_row("b", 0))
        assert not pool.add(_row("a", 0, time_ms=5.0))          # the same row again: kept as it was
        assert pool.add(_row("a", 0, source="other"))
        assert pool.add(_row("c", 0, workload="bert-base"))
        assert {(r.board, r.idx) for r in pool.rows(workload="resnet18", board="a")} == {("a", 0), ("a", 1)}
        assert pool.rows(board="a", workload="resnet18")[0].time_ms == 100.0
        assert pool.summary()[1] == {"device": "orin-agx", "workload": "resnet18", "batch_size": 16,
                                     "rows": 4, "boards": 2, "simulated_rows": 4,
                                     "newest": 1e9}


def test_a_pool_written_by_a_newer_ptui_is_refused(tmp_path):
    path = tmp_path / "p.sqlite"
    Pool(f"sqlite:///{path}").close()
    db = sqlite3.connect(path)
    db.execute("UPDATE ptui_pool_meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(PoolError, match="newer ptui"):
        Pool(f"sqlite:///{path}")


@pytest.mark.parametrize("url", ["mysql://h/db", "sqlite://relative", "postgresql://", "nonsense", "sqlite:///",
                                 # a port that is no port read as "cannot reach the pool", exit 1 (a user's trial)
                                 "postgresql://ptui@127.0.0.1:99999/ptui", "postgresql://u:pw@h:x/db"])
def test_bad_pool_urls_are_refused(url):
    with pytest.raises(InputError, match="bad pool URL") as e:
        check_url(url)
    assert "pw" not in str(e.value)                       # the password is not said


@pytest.mark.parametrize("url", ["postgresql://u@h1:5432,h2/db", "postgresql://bob:s3cr?et@db:5432/pool",
                                 "postgresql://bob:ab[c@db/pool", "postgresql://u@[::1]:5432/db",
                                 "postgresql://u@db/pool?sslmode=require"])
def test_urls_libpq_takes_are_left_to_libpq(url):
    """Several hosts, IPv6, and a password holding '?' or '[' (libpq reads it up to the '@'): the
    port check refused 'bob:s3cr?et@db:5432', saying 'Port could not be cast ... as 's3cr'' (a
    review)."""
    assert check_url(url)[0] == "postgresql"


@pytest.mark.parametrize("args", [["pool", "list", "--pool-url", "mysql://h/db"],
                                  ["fit", "--device", "orin-agx", "--profile", "x.csv", "--out", "m",
                                   "--pool-url", "ftp://h"],
                                  ["pool", "list"]])
def test_a_bad_or_missing_pool_is_one_line_exit_2(cli, args, monkeypatch, tmp_path):
    monkeypatch.delenv("PTUI_POOL", raising=False)
    monkeypatch.chdir(tmp_path)
    if args[0] == "fit":
        rc, out, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "6",
                           "--out", "x.csv")
        assert rc == 0, err
    rc, out, err = cli(*args)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert ("bad pool URL" if "--pool-url" in args else "no pool") in err


def test_profile_sends_each_finished_row_and_a_resume_adds_no_duplicate(cli, monkeypatch, tmp_path):
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    monkeypatch.setenv("PTUI_BOARD_ID", "unit-7")
    rc, out, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "4",
                       "--session", "s1", "--out", tmp_path / "a.csv")
    assert rc == 0, err
    with Pool(url) as pool:
        rows = pool.rows(board="unit-7")
    assert len(rows) == 4 and all(r.simulated and r.source == "s1@bs16" for r in rows)
    # the rows a killed run committed locally but had not sent: the next run of the session sends them
    from ptui.core.profiling.pool import PoolingStore
    from ptui.core.profiling.store import Store
    with Pool(url) as pool:
        ps = PoolingStore(Store(), pool, board="unit-7", device="orin-agx", workload="resnet18",
                          batch_size=16, simulated=True)
        ps.sync("s1")
        assert ps.sent == 0 and len(pool.rows(board="unit-7")) == 4
    rc, out, err = cli("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "a.csv")
    assert rc == 0 and "0 rows" in out and "4 were there already" in out, out + err


# -- the pooled fit ------------------------------------------------------------------------------
BUDGETS = (17, 20, 25, 30, 35, 40, 45, 50)


def _fleet(n_boards: int, n_modes: int, seed: int, device: str = "orin-agx"):
    """Simulated units (Orin AGX by default; power within +-10 %, time +-1 %), each measuring
    n_modes random grid modes through ptui's profiler; the last unit draws 10 % more power than the
    typical one."""
    from ptui.core.board.backends.sim import SimJetson
    from ptui.core.catalogue.devices import get_device
    from ptui.core.catalogue.workloads import get_workload
    from ptui.core.profiling.profiler import Profiler
    dev, wl = get_device(device), get_workload("resnet18")
    rng = random.Random(seed)
    grid = dev.pt_grid()
    units = []
    for b in range(n_boards):
        up = 1.10 if b == n_boards - 1 else 1 + rng.uniform(-0.1, 0.1)
        ut = 1 + rng.uniform(-0.01, 0.01)
        be = SimJetson(dev, seed=seed * 100 + b, unit_power=up, unit_time=ut)
        be.start_training(wl)
        ev, prof = be.events(), Profiler(be, wl, None, "t")
        units.append((f"u{b}", up, ut, [prof.measure_checked(ev, m).row() for m in rng.sample(grid, n_modes)]))
    return dev, wl, units


def _pooled_last(n_boards: int, seed: int):
    """_fleet(n_boards, 5 modes): the last unit's pooled GP fit on its rows and the others'; returns
    (device, the model, each unit's rows)."""
    from ptui.core.prediction.predictor import bundled_reference, load_model
    from ptui.core.profiling.pool import rows_from_results
    from ptui.core.usecases.pool import fit_pooled_rows
    dev, wl, units = _fleet(n_boards, 5, seed=seed)
    ref = load_model(bundled_reference())
    rows = {b: rows_from_results(list(enumerate(r)), board=b, device=dev.name, workload=wl.name,
                                 batch_size=16, simulated=True, source="t") for b, _, _, r in units}
    me = units[-1][0]
    fleet = [r for b, rs in rows.items() if b != me for r in rs]
    return dev, fit_pooled_rows(dev, rows[me], fleet, workload=wl.name, batch_size=16, reference=ref,
                                method="gp"), rows


@pytest.mark.slow
def test_the_pooled_fit_beats_the_board_alone_on_a_simulated_fleet():
    from ptui.core.board.physics import steady_state
    from ptui.core.decision.pareto import InfeasibleError, Table, choose
    from ptui.core.prediction.fit import fit_model
    from ptui.core.prediction.predictor import bundled_reference, load_model
    from ptui.core.profiling.pool import rows_from_results
    from ptui.core.usecases.pool import fit_pooled_rows
    dev, wl, units = _fleet(7, 6, seed=3)
    ref = load_model(bundled_reference())
    rows = {b: rows_from_results(list(enumerate(r[:5])), board=b, device=dev.name, workload=wl.name,
                                 batch_size=16, simulated=True, source="t") for b, _, _, r in units}
    me, up, ut, mine = units[-1]
    fleet = [r for b, rs in rows.items() if b != me for r in rs]
    pooled = fit_pooled_rows(dev, rows[me], fleet, workload=wl.name, batch_size=16, reference=ref, method="gp")
    p = pooled.about.trained_on["pooled"]
    others = np.mean([np.log(u[1]) for u in units[:-1]])
    assert p["power_factor"] == pytest.approx(up / np.exp(others), rel=0.03)
    assert p["boards"] == 6 and p["own_rows"] == 5 and p["fleet_rows"] == 30 and p["simulated_rows"] == 30
    from ptui.core.catalogue.modes import Mode
    modes6 = [Mode(r["cores"], r["cpu_mhz"], r["gpu_mhz"], r["mem_mhz"]) for r in mine]
    alone = fit_model(ref, dev, modes6, [r["time_ms"] for r in mine], [r["power_w"] for r in mine],
                      method="gp", workload=wl.name)
    space = dev.full_space()
    S = np.array([m.as_tuple() for m in space])
    op = steady_state(dev, wl, S[:, 0], S[:, 1], S[:, 2], S[:, 3])
    true_t, true_p = op.time_ms * ut, op.power_w * up
    where = {m.as_tuple(): i for i, m in enumerate(space)}

    def penalties(model):
        modes, _ = model.decision_space()
        tab = Table.from_prediction(modes, model.predict(modes)).with_measurements(model.measured)
        pen, over = [], 0
        for B in BUDGETS:
            try:
                i = where[choose(tab, budget_w=B).mode.as_tuple()]
            except InfeasibleError:
                pen.append(100.0)
                continue
            pen.append(100 * (true_t[i] / true_t[true_p <= B].min() - 1))
            over += int(true_p[i] > B + 1)
        return float(np.median(pen)), over
    pooled_pen, pooled_over = penalties(pooled)
    alone_pen, _ = penalties(alone)
    assert pooled_over == 0
    assert pooled_pen < alone_pen, (pooled_pen, alone_pen)
    assert pooled_pen < 10.0
    meta = json.loads(json.dumps(pooled.meta))
    assert meta["trained_on"]["pooled"]["correction"].startswith("per-board multiplicative factor")
    assert meta["trained_on"]["pooled"]["shape"] == "the bundled reference"     # its own device


def test_a_pool_out_of_reach_is_said_and_the_profile_goes_on(cli, monkeypatch, tmp_path):
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed (the test extra has it)")
    from tests.support.pgserver import free_port
    monkeypatch.setenv("PTUI_POOL", f"postgresql://nobody@127.0.0.1:{free_port()}/x")
    rc, out, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "3",
                       "--out", tmp_path / "a.csv")
    assert rc == 0, err
    assert "cannot reach the pool" in err and "ptui pool push" in err
    assert len((tmp_path / "a.csv").read_text().splitlines()) == 4


def test_the_board_factor_error_widens_every_prediction_in_quadrature(tmp_path):
    """The pooled model's spread: this board's factor error is one error every prediction shares,
    added in quadrature to each mode's own sd.  It was a factor on every sd sized at the board's
    own rows, where the sd is least, so modes it did not profile got their sd multiplied (x1.4 to
    x2 on the simulated fleet) and decisions left 2-4 % of the budget unused; the fit and the
    saved model keep it."""
    from ptui.core.prediction.predictor import load_model
    dev, model, _ = _pooled_last(4, seed=5)
    p = model.about.trained_on["pooled"]
    A = np.array([m.as_tuple() for m in dev.pt_grid()], np.float64)
    for tgt in ("time", "power"):
        pred = getattr(model, tgt)
        se = pred.sd_shared
        assert se == pytest.approx(p[f"{tgt}_factor_se_pct"] / 100, abs=1e-5) and se > 0
        _, sd = pred.predict_log(dev, A)
        pred.sd_shared = 0.0
        _, bare = pred.predict_log(dev, A)
        pred.sd_shared = se
        np.testing.assert_allclose(sd ** 2, bare ** 2 + se ** 2, rtol=1e-9)
    model.save(tmp_path / "m")
    back = load_model(tmp_path / "m")
    for tgt in ("time", "power"):
        assert getattr(back, tgt).sd_shared == pytest.approx(getattr(model, tgt).sd_shared)
        np.testing.assert_allclose(getattr(back, tgt).predict_log(dev, A)[1],
                                   getattr(model, tgt).predict_log(dev, A)[1])


def test_a_fleet_share_gives_each_board_its_own_modes_of_one_design():
    from ptui.core.catalogue.devices import get_device
    from ptui.core.profiling.active import fleet_share
    dev = get_device("orin-agx")
    shares = [fleet_share(dev, 4, 5, i, seed=2) for i in range(4)]
    every = [m.as_tuple() for s in shares for m in s]
    assert all(len(s) == 5 for s in shares) and len(set(every)) == 20
    assert shares[1] == fleet_share(dev, 4, 5, 1, seed=2)          # every board computes the same plan
    with pytest.raises(InputError):
        fleet_share(dev, 4, 5, 4)


def test_ten_boards_of_five_modes_give_the_factor_regression_its_curvature():
    """10 boards x 5 modes (50 rows, 40 once the boards' factors are taken) fit the squares and the
    cross terms of the factors' shape; it was linear below 44 rows, and a board's factor then took
    up the curvature its own modes saw (eval_pool: 3 picks of 80 over budget + 1 W on seed 1)."""
    from ptui.core.catalogue.devices import get_device
    from ptui.core.prediction.pooled import _features
    dev = get_device("orin-agx")
    A = np.array([m.as_tuple() for m in random.Random(0).sample(dev.pt_grid(), 50)], np.float64)
    assert _features(dev, A, None, "power", 50 - 10).shape == (50, 10)
    assert _features(dev, A[:20], None, "power", 20 - 4).shape == (20, 5)


def test_the_pooled_model_says_how_far_its_rows_reach_in_power():
    """A budget above every pooled row's power is decided on extrapolation (the independent
    generator's seed 1 in eval_pool: rows up to ~40 W, picks at 45-50 W 10-20 % over their
    prediction): the model keeps the highest row's power on this board's unit and its note says it."""
    from ptui.core.prediction.pooled import pooled_note
    dev, model, rows = _pooled_last(3, seed=7)
    p = model.about.trained_on["pooled"]
    top = float(np.max(model.measured["power_w"]))
    assert p["measured_power_max_w"] == pytest.approx(top, abs=0.01)
    assert max(r.power_w for r in rows["u2"]) <= top + 0.01
    assert f"the pooled rows reach {top:.1f} W on this board" in pooled_note(model)


def test_a_prediction_beyond_the_pooled_rows_reach_gets_a_wider_power_spread(tmp_path):
    """Above the most power any pooled row drew (X W) the power prediction is extrapolated (the
    independent generator's seed 1 in eval_pool: rows to ~40 W, picks at 45-50 W predicted 10-20 %
    low, 14 of 80 over budget + 1 W): its extrapolated part, log(predicted / X), is one more sd in
    quadrature, so a mode predicted at X + 10 W has a wider spread than one at X - 5 W; within the
    reach the spread is the quadrature one.  The saved model keeps the reach."""
    from ptui.core.prediction.predictor import load_model
    dev, model, _ = _pooled_last(4, seed=5)
    top = model.about.trained_on["pooled"]["measured_power_max_w"]
    A = np.array([m.as_tuple() for m in dev.pt_grid()], np.float64)
    pred = model.power
    mid, sd = pred.predict_modes(dev, A)
    assert pred.reach_log == pytest.approx(np.log(top), abs=1e-3)
    hi = np.argmin(np.abs(mid - (top + 10)))
    lo = np.argmin(np.abs(mid - (top - 5)))
    assert abs(mid[hi] - (top + 10)) < 2 and abs(mid[lo] - (top - 5)) < 2
    assert sd[hi] / mid[hi] > sd[lo] / mid[lo]
    mu, sd_log = pred.predict_log(dev, A)
    reach = pred.reach_log
    pred.reach_log = None
    _, bare = pred.predict_log(dev, A)
    pred.reach_log = reach
    beyond = np.maximum(mu - reach, 0.0)
    np.testing.assert_allclose(sd_log ** 2, bare ** 2 + beyond ** 2, rtol=1e-9)
    assert np.all(sd_log[mu <= reach] == bare[mu <= reach])
    assert beyond[hi] > 0.15 and bare[hi] < sd_log[hi]
    model.save(tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.power.reach_log == pytest.approx(pred.reach_log)
    assert back.time.reach_log is None
    np.testing.assert_allclose(back.power.predict_log(dev, A)[1], sd_log)


@pytest.mark.slow               # two 6-mode simulated profiles and a pooled fit (~6 s)
def test_fit_pool_takes_the_workload_spec_as_fit_does(tmp_path, cli, monkeypatch):
    """`ptui fit --pool --workload-spec S` fits with the spec's roofline prior among its candidates
    (recorded in the model's meta.json as any fit with a spec); --pool used to drop the spec."""
    monkeypatch.setenv("PTUI_POOL", f"sqlite:///{tmp_path}/pool.sqlite")
    for b in range(2):
        monkeypatch.setenv("PTUI_BOARD_ID", f"board-{b}")
        rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "6",
                         "--seed", str(b), "--out", tmp_path / f"b{b}.csv")
        assert rc == 0, err
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 58.0, "gbytes_per_step": 2.1, "batch_size": 16}))
    monkeypatch.setenv("PTUI_BOARD_ID", "board-0")
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "b0.csv", "--pool",
                       "--workload-spec", spec, "--method", "gp", "--out", tmp_path / "m")
    assert rc == 0, err
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert meta["trained_on"]["pooled"]["boards"] == 1
    assert meta["roofline_spec"]["gflop_per_step"] == 58.0


def test_ptui_store_names_the_pool_as_the_fleet_issue_says(monkeypatch, tmp_path, cli):
    """PTUI_STORE=postgresql://... (the issue's name for the shared store) names the pool as
    PTUI_POOL does; PTUI_POOL wins when both are set.  Before, PTUI_STORE did nothing: a
    board's rows went nowhere without a word (a user trial)."""
    from ptui.core.profiling.pool import pool_url
    monkeypatch.setenv("PTUI_STORE", f"sqlite:///{tmp_path}/store.sqlite")
    assert pool_url() == f"sqlite:///{tmp_path}/store.sqlite"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "lstm",
                     "--count", "3", "--session", "s", "--out", tmp_path / "p.csv")
    assert rc == 0, err
    assert len(Pool(f"sqlite:///{tmp_path}/store.sqlite").rows(device="orin-agx")) == 3
    monkeypatch.setenv("PTUI_POOL", f"sqlite:///{tmp_path}/pool.sqlite")
    assert pool_url() == f"sqlite:///{tmp_path}/pool.sqlite"


def test_boards_sharing_a_pool_draw_their_own_modes(monkeypatch, tmp_path, cli):
    """`ptui profile --count 5` seeded every board's draw with 0: four boards of a fleet gave the
    pool the same 5 modes (16 distinct of 20 rows in a user trial, the simulator's times identical),
    and the pooled fit's cross-validation then read 0.0 %.  With a pool and no --seed the draw is
    now seeded by the board's id; --seed still fixes it."""
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    for board in ("orin-01", "orin-02"):
        monkeypatch.setenv("PTUI_BOARD_ID", board)
        rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "lstm",
                         "--count", "5", "--session", f"s-{board}", "--out", tmp_path / f"{board}.csv")
        assert rc == 0, err
        assert "each board of the fleet draws its own" in err
    rows = Pool(url).rows(device="orin-agx")
    modes = {(r.cores, r.cpu_mhz, r.gpu_mhz, r.mem_mhz) for r in rows}
    assert len(rows) == 10 and len(modes) >= 9
    monkeypatch.setenv("PTUI_BOARD_ID", "orin-03")
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "lstm",
                     "--count", "5", "--seed", "0", "--session", "s3", "--out", tmp_path / "3.csv")
    assert rc == 0 and "(modes drawn with seed 0)" in err, err


def test_reading_a_sqlite_pool_that_does_not_exist_makes_no_file(tmp_path, cli):
    """`ptui pool list` on a mistyped SQLite path made an empty pool file there (a user trial
    made /rel.sqlite); a command that only reads says there is no pool (exit 2) and makes nothing.
    The Flower mod's count finds such a pool empty, as before."""
    from ptui.core.catalogue.devices import get_device
    from ptui.core.usecases.pool import pool_holds
    where = tmp_path / "typo.sqlite"
    url = f"sqlite:///{where}"
    for args in (("pool", "list", "--pool-url", url),
                 ("pool", "pull", "--pool-url", url, "--device", "orin-agx", "--out", tmp_path / "f.csv")):
        rc, _, err = cli(*args)
        assert rc == 2 and "no pool at" in err and len(err.strip().splitlines()) == 1, err
        assert not where.exists() and not (tmp_path / "f.csv").exists()
    assert pool_holds(get_device("orin-agx"), "resnet18", 16, url=url, board="b")[:2] == (0, 0)
    assert not where.exists()


def test_a_sqlite_file_of_someone_elses_is_left_as_it_is(tmp_path, cli):
    """`ptui pool list` (and push, profile) on an existing SQLite database of another program turned
    on WAL and added ptui's tables to it (a review): ptui writes nothing to it now; one line, exit 2."""
    other = tmp_path / "app.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE users (id INTEGER)")
    db.commit()
    db.close()
    before = other.read_bytes()
    rc, _, err = cli("pool", "list", "--pool-url", f"sqlite:///{other}")
    assert rc == 2 and "is not a ptui pool" in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(InputError, match="not a ptui pool"):
        Pool(f"sqlite:///{other}")
    assert other.read_bytes() == before and not (tmp_path / "app.sqlite-wal").exists()


def test_a_mode_two_boards_profiled_is_held_out_with_its_twin():
    """The pooled fit's rows may repeat a mode (two boards drew it: an Orin Nano's PowerTrain grid
    has 450 modes, so ten boards of five modes repeat about three).  Cross-validation held one row
    out while its twin stayed in, predicted it from the twin, and the cross-validated error and
    the calibrated interval came out too small; rows of one mode now share a fold."""
    from ptui.core.board.physics import steady_state
    from ptui.core.catalogue.devices import get_device
    from ptui.core.catalogue.workloads import get_workload
    from ptui.core.prediction.fit import fit_model, folds
    from ptui.core.prediction.predictor import bundled_reference, load_model
    dev, wl = get_device("orin-agx"), get_workload("mobilenetv3")
    modes = random.Random(5).sample(dev.pt_grid(), 14)
    A = np.array([m.as_tuple() for m in modes])
    op = steady_state(dev, wl, A[:, 0], A[:, 1], A[:, 2], A[:, 3])
    noise = np.random.default_rng(1)
    t1, p1 = op.time_ms * np.exp(noise.normal(0, .01, 14)), op.power_w * np.exp(noise.normal(0, .01, 14))
    t2, p2 = t1 * 1.002, p1 * 0.998                 # a second board's row of each mode
    ref = load_model(bundled_reference())
    once = fit_model(ref, dev, modes, t1, p1, method="gp", workload=wl.name)
    twice = fit_model(ref, dev, modes + modes, np.r_[t1, t2], np.r_[p1, p2], method="gp", workload=wl.name)
    for tgt in ("time", "power"):
        a, b = once.meta["metrics"][tgt]["cv_mape"], twice.meta["metrics"][tgt]["cv_mape"]
        assert b > 0.5 * a, (tgt, a, b)              # was 0.2 % against 10 %: each twin predicted the other
    f = folds(28, 0, np.vstack([A, A]))
    assert (f[:14] == f[14:]).all() and len(set(f)) == 5
    assert (folds(14, 0, A) == folds(14, 0)).all()   # distinct modes: the folds as before
    # a few modes repeated many times: every mode in one fold, every fold used (the first
    # version gave up on the grouping whenever a fold came out empty: a review)
    for reps in (2, 3, 10):
        for seed in range(5):
            f = folds(5 * reps, seed, np.repeat(A[:5], reps, axis=0))
            assert all(len(set(f[k * reps:(k + 1) * reps])) == 1 for k in range(5)) and len(set(f)) == 5
    f = folds(20, 0, np.vstack([np.repeat(A[:1], 16, axis=0), A[1:5]]))
    assert len(set(f[:16])) == 1


@pytest.mark.parametrize("device", ["orin-nano", "xavier-agx"])
def test_a_fleet_without_a_reference_of_its_device_finds_each_boards_factor(device):
    """The factors' regression took the fleet's shape from the bundled reference, an Orin AGX's,
    and on any other device from the knobs' logs alone: an Orin Nano's or an AGX Xavier's rows
    sat 6-14 % (power) and 22-28 % (time) off that shape, each board's factor 3-7 % and 10-12 %
    off, and the pooled decisions were a median 22-29 % (Nano) and 18-27 % (Xavier) from the
    optimum.  The shape now has ResNet-18's roofline for the device, refitted to the fleet's rows."""
    from ptui.core.prediction.predictor import bundled_reference, load_model
    from ptui.core.profiling.pool import rows_from_results
    from ptui.core.usecases.pool import fit_pooled_rows
    dev, wl, units = _fleet(10, 5, seed=4, device=device)
    rows = {b: rows_from_results(list(enumerate(r)), board=b, device=dev.name, workload=wl.name,
                                 batch_size=16, simulated=True, source="t") for b, _, _, r in units}
    me, up, ut, _ = units[-1]
    fleet = [r for b, rs in rows.items() if b != me for r in rs]
    p = fit_pooled_rows(dev, rows[me], fleet, workload=wl.name, batch_size=16,
                        reference=load_model(bundled_reference()), method="gp").about.trained_on["pooled"]
    typical_p = np.exp(np.mean([np.log(u[1]) for u in units[:-1]]))
    typical_t = np.exp(np.mean([np.log(u[2]) for u in units[:-1]]))
    assert p["power_factor"] == pytest.approx(up / typical_p, rel=0.025), p
    assert p["time_factor"] == pytest.approx(ut / typical_t, rel=0.04), p
    assert p["power_resid_sd_pct"] < 4.0 and p["time_resid_sd_pct"] < 8.0, p
    assert p["shape"].startswith("the roofline prior (catalog resnet18"), p["shape"]   # said in the model


@pytest.mark.slow
def test_the_readmes_one_host_pool_runs_as_written(tmp_path):
    """The README's pool block started with a board's own profile and a pooled fit of it, which a
    new user on one host could only meet with 'nothing to pool' (a user trial of the README).  Its
    one-host block (three simulated units in one SQLite pool, then the third's pooled fit and a
    decision from it) runs here as written, the pool moved into tmp_path."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"three simulated units of a fleet\n.*?```bash\n(.*?)```", text, re.S)
    assert block, "the README's one-host pool block"
    script = block.group(1).replace("sqlite:////tmp/pool.sqlite", f"sqlite:///{tmp_path}/pool.sqlite")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           **{k: str(tmp_path / k) for k in ("PTUI_DATA_DIR", "PTUI_LOCK_DIR", "PTUI_STATE_DIR")}}
    env.pop("PTUI_POOL", None)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "goal: fastest within 30 W" in r.stdout and "15 profiled modes count" in r.stdout, r.stdout
    meta = json.loads((tmp_path / "unit3-pooled" / "meta.json").read_text())
    pooled = meta["trained_on"]["pooled"]
    assert pooled["boards"] == 2 and pooled["own_rows"] == 5 and pooled["power_factor"] > 1.05


def test_a_pulled_csv_of_other_boards_is_not_pushed_or_fitted_as_this_boards(monkeypatch, tmp_path, cli):
    """`ptui pool pull` writes the fleet's rows with a `board` column; `ptui pool push --profile
    fleet.csv` then added every other board's rows again as this board's (a fleet trial: the pool
    held 15 rows of 3 boards twice, and the next pooled fit read this board's factor off them).
    A CSV naming other boards is refused in one line (exit 2) by push and by `fit --pool`, and the
    pool is left as it was; a CSV of this board's own rows still goes."""
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    for board in ("orin-01", "orin-02"):
        monkeypatch.setenv("PTUI_BOARD_ID", board)
        rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                         "--count", "3", "--session", f"s-{board}", "--out", tmp_path / f"{board}.csv")
        assert rc == 0, err
    rc, _, err = cli("pool", "pull", "--device", "orin-agx", "--out", tmp_path / "fleet.csv")
    assert rc == 0, err
    monkeypatch.setenv("PTUI_BOARD_ID", "orin-03")
    for args in (("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "fleet.csv"),
                 ("fit", "--device", "orin-agx", "--profile", tmp_path / "fleet.csv", "--pool",
                  "--out", tmp_path / "m")):
        rc, out, err = cli(*args)
        assert rc == 2 and len(err.strip().splitlines()) == 1, out + err
        assert "orin-01" in err and "orin-02" in err and "not this board's" in err, err
    assert len(Pool(url).rows(device="orin-agx")) == 6 and not (tmp_path / "m").exists()
    rc, _, err = cli("pool", "pull", "--device", "orin-agx", "--board", "orin-01", "--out", tmp_path / "o1.csv")
    assert rc == 0, err
    monkeypatch.setenv("PTUI_BOARD_ID", "orin-01")
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "o1.csv", "--pool",
                       "--out", tmp_path / "m1")
    assert rc == 0, out + err


def test_a_profile_the_pool_holds_as_another_boards_is_not_pushed_or_fitted_as_this_boards(
        monkeypatch, tmp_path, cli):
    """The README's one-host fleet, then `ptui fit --pool --profile unit-3.csv` in a shell without
    the PTUI_BOARD_ID=orin-03 it was profiled with: the host's name was this board, and unit-3's
    rows, already in the pool as orin-03's, were pooled twice, as this board's and as the fleet's
    ("5 rows of this board + 24 from 5 other boards"; power x1.059 where orin-03 is x1.107), and
    `pool push --board orin-01` of orin-02's profile added its rows again as orin-01's (a fleet
    trial).  Both are refused in one line naming the board that made it (exit 2), the pool left
    as it was; under that board's id they go as before."""
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    for board in ("orin-01", "orin-02", "orin-03"):
        monkeypatch.setenv("PTUI_BOARD_ID", board)
        rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                         "--count", "3", "--session", f"s-{board}", "--out", tmp_path / f"{board}.csv")
        assert rc == 0, err
    monkeypatch.setenv("PTUI_BOARD_ID", "the-host")
    for args in (("fit", "--device", "orin-agx", "--profile", tmp_path / "orin-03.csv", "--pool",
                  "--out", tmp_path / "m"),
                 ("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "orin-03.csv"),
                 ("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "orin-02.csv",
                  "--board", "orin-01")):
        rc, out, err = cli(*args)
        assert rc == 2 and len(err.strip().splitlines()) == 1, out + err
        assert "as those of board 'orin-0" in err and "not of this board" in err, err
        assert "give --board orin-0" in err, err
    assert len(Pool(url).rows(device="orin-agx")) == 9 and not (tmp_path / "m").exists()
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "orin-03.csv", "--pool",
                       "--board", "orin-03", "--out", tmp_path / "m3")
    assert rc == 0 and "3 rows of this board + 6 from 2 other boards" in out, out + err


def test_a_workload_or_batch_size_the_profile_does_not_say_is_refused(monkeypatch, tmp_path, cli):
    """`ptui pool push --profile old.csv --workload mobilenetv3` of a ResNet-18 profile (its
    workload column says resnet18) sent its rows to the pool as MobileNetV3's, where the fleet's
    MobileNetV3 fits would pool them; --batch-size 32 of a batch-16 profile did the same, and
    `fit --pool --workload mobilenetv3` pooled it with MobileNetV3's rows (a fleet trial).  Each is
    refused in one line (exit 2), the pool left as it was; the column's own workload, however
    written (ResNet-18), goes under the column's name."""
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_BOARD_ID", "orin-07")
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "3", "--out", tmp_path / "old.csv")
    assert rc == 0, err
    monkeypatch.setenv("PTUI_POOL", url)
    push = ("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "old.csv")
    for extra, said in ((("--workload", "mobilenetv3"), "is a profile of resnet18 (its workload column), "
                                                         "not mobilenetv3"),
                        (("--batch-size", "32"), "was profiled at batch size 16 (its batch_size column), not 32")):
        rc, out, err = cli(*push, *extra)
        assert rc == 2 and said in err and len(err.strip().splitlines()) == 1, out + err
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "old.csv", "--pool",
                       "--workload", "mobilenetv3", "--out", tmp_path / "m")
    assert rc == 2 and "not mobilenetv3" in err and not (tmp_path / "m").exists(), out + err
    assert not (tmp_path / "pool.sqlite").exists()
    rc, out, err = cli(*push, "--workload", "ResNet-18", "--batch-size", "16")
    assert rc == 0, out + err
    assert {(r.workload, r.batch_size) for r in Pool(url).rows()} == {("resnet18", 16)}


def test_a_pooled_fit_on_one_row_of_its_own_says_row():
    """`ptui fit --pool` of a one-mode profile said "pooled: 1 rows of this board + 10 from 2
    other boards" (a fleet trial); it says "1 row" now, and "5 rows" as before."""
    from types import SimpleNamespace

    from ptui.core.prediction.pooled import pooled_note
    p = {"fleet_rows": 10, "boards": 2, "power_factor": 1.0, "power_factor_se_pct": 2.0, "time_factor": 1.0,
         "time_factor_se_pct": 4.0}
    for own, said in ((1, "pooled: 1 row of this board + 10 from 2 other boards"),
                      (5, "pooled: 5 rows of this board + 10 from 2 other boards")):
        model = SimpleNamespace(about=SimpleNamespace(trained_on={"pooled": {**p, "own_rows": own}}))
        assert pooled_note(model).startswith(said), pooled_note(model)


def test_a_boards_own_profile_is_pooled_though_another_board_sent_the_same_rows(monkeypatch, tmp_path, cli):
    """Two identical simulated units profiled with one --seed under one session name send the
    same rows; the second board's `fit --pool` and `pool push` of its own profile were refused as
    the first board's ("give --board a"), though the pool held them as its own too (review).
    They are this board's: pooled and re-pushed (nothing added) as before."""
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    for board in ("a", "b"):                     # two boards: a session store each
        monkeypatch.setenv("PTUI_BOARD_ID", board)
        monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / f"data-{board}"))
        rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                         "--count", "6", "--seed", "3", "--session", "same", "--out", tmp_path / f"{board}.csv")
        assert rc == 0, err
    rc, out, err = cli("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "b.csv")
    assert rc == 0, out + err
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "b.csv", "--pool",
                       "--out", tmp_path / "mb")
    assert rc == 0 and "6 rows of this board + 6 from 1 other board" in out, out + err
    assert len(Pool(url).rows(device="orin-agx")) == 12


def test_a_profile_of_sub_millisecond_steps_the_pool_holds_as_another_boards_is_refused(
        monkeypatch, tmp_path, cli):
    """The CSV writes a time to 4 decimals and the pool keeps it whole: a step of 0.3 ms differs
    by up to 1.7e-4 of itself, over the 1e-4 the check allowed, so a tiny script's profile pushed
    under another board's id went into the pool again, its rows counted twice (review).  It is
    refused as a larger step's is."""
    import csv
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    monkeypatch.setenv("PTUI_BOARD_ID", "orin-03")
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "3", "--session", "tiny", "--out", tmp_path / "tiny.csv")
    assert rc == 0, err
    # as if its steps took a 2000th of the time (0.4 ms or less), each 0.0000437 ms off its 4 decimals
    with sqlite3.connect(tmp_path / "pool.sqlite") as db:
        db.execute("UPDATE ptui_pool_rows SET time_ms = ROUND(time_ms / 2000, 4) + 0.0000437")
        tiny = {(c, float(g)): t for c, g, t in db.execute("SELECT cores, gpu_mhz, time_ms FROM ptui_pool_rows")}
    with open(tmp_path / "tiny.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(tiny) == 3 and all(t < 0.5 for t in tiny.values()), tiny
    for r in rows:
        r["time_ms"] = f"{tiny[(int(r['cores']), float(r['gpu_mhz']))]:.4f}"
    with open(tmp_path / "tiny.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    rc, out, err = cli("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "tiny.csv",
                       "--board", "orin-01")
    assert rc == 2 and "as those of board 'orin-03'" in err, out + err
    assert len(Pool(url).rows(device="orin-agx")) == 3


def _bare(src, dest, keep: int = 11) -> None:
    """A copy of a ptui profile with only its first `keep` columns (mode, time, power and their
    spreads): a CSV that names no run (session), workload or batch size, as an older tool wrote."""
    import csv
    with open(src, newline="") as fh:
        rows = [r[:keep] for r in csv.reader(fh)]
    with open(dest, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)


def test_a_csv_that_names_no_run_is_not_pushed_again_as_another_boards(monkeypatch, tmp_path, cli):
    """A CSV without a session column was checked against nothing: `pool push --board a` of it,
    then `--board b` of the same rows (or of a renamed copy) added them again as b's, so the
    fleet counted one board's rows twice under two names; `--board a` again under another file
    name added them twice as a's.  The other board's push (and `fit --pool`) is refused in one
    line naming the board that holds them, as for a ptui profile's run; this board's adds
    nothing; and the profile with its session column pushed as b is refused too."""
    import shutil
    monkeypatch.setenv("PTUI_BOARD_ID", "a")
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "3", "--out", tmp_path / "full.csv")
    assert rc == 0, err
    _bare(tmp_path / "full.csv", tmp_path / "old.csv")
    shutil.copy(tmp_path / "old.csv", tmp_path / "copy.csv")
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    push = ("pool", "push", "--device", "orin-agx", "--workload", "resnet18", "--profile")
    rc, out, err = cli(*push, tmp_path / "old.csv")
    assert rc == 0 and "3 rows" in out, out + err
    for args in ((*push, tmp_path / "old.csv", "--board", "b"), (*push, tmp_path / "copy.csv", "--board", "b"),
                 ("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "full.csv", "--board", "b"),
                 ("fit", "--device", "orin-agx", "--workload", "resnet18", "--profile", tmp_path / "copy.csv",
                  "--pool", "--board", "b", "--out", tmp_path / "m")):
        rc, out, err = cli(*args)
        assert rc == 2 and len(err.strip().splitlines()) == 1, out + err
        assert "as those of board 'a'" in err and "give --board a" in err, err
    rc, out, err = cli(*push, tmp_path / "copy.csv")
    assert rc == 0 and "0 rows" in out and "3 were there already" in out, out + err
    assert {(r.board, r.source) for r in Pool(url).rows()} == {("a", "csv:old.csv")}
    assert len(Pool(url).rows()) == 3 and not (tmp_path / "m").exists()


def test_a_workload_however_written_is_one_group_in_the_pool(monkeypatch, tmp_path, cli):
    """`pool push --workload RESNET18` of a CSV without a workload column was refused ("does not
    say its batch size") and, with --batch-size, its rows went to the pool as workload 'RESNET18',
    a group of their own beside the profiles' resnet18 that no fit pooled; `pool pull --workload
    ResNet-18` found nothing.  The name is the catalogue's, however written (as `ptui profile`
    takes it)."""
    monkeypatch.setenv("PTUI_BOARD_ID", "a")
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "3", "--out", tmp_path / "a.csv")
    assert rc == 0, err
    monkeypatch.setenv("PTUI_POOL", "")
    monkeypatch.setenv("PTUI_BOARD_ID", "b")
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "3", "--out", tmp_path / "b-full.csv")
    assert rc == 0, err
    _bare(tmp_path / "b-full.csv", tmp_path / "b.csv")
    monkeypatch.setenv("PTUI_POOL", url)
    rc, out, err = cli("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "b.csv", "--workload",
                       "RESNET18")
    assert rc == 0, out + err
    assert {(r.workload, r.batch_size) for r in Pool(url).rows()} == {("resnet18", 16)}
    rc, out, err = cli("pool", "list")
    assert rc == 0 and out.count("resnet18") == 1 and "RESNET18" not in out, out
    rc, out, err = cli("pool", "pull", "--device", "orin-agx", "--workload", "ResNet-18", "--out",
                       tmp_path / "fleet.csv")
    assert rc == 0 and "6 rows of 2 boards" in out, out + err
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "b.csv", "--workload", "Resnet18",
                       "--pool", "--out", tmp_path / "mb")
    assert rc == 0 and "3 rows of this board + 3 from 1 other board" in out, out + err


_OPEN_AT_ONCE = """
import sys, time
from ptui.core.profiling.pool import Pool
start = float(sys.argv[2])
while time.time() < start:
    pass
try:
    Pool(sys.argv[1]).close()
except Exception as e:
    print(type(e).__name__, e)
    sys.exit(3)
"""


def test_nodes_that_make_a_fresh_sqlite_pool_at_once_all_open_it(tmp_path):
    """Ten simulated nodes of `fleet_sim.py --pool sqlite:///NEW` open the pool at once: one
    process had made its rows table but not yet its meta table when another looked, and the other
    refused the file as "not a ptui pool: it holds other tables (ptui_pool_rows)", failing its
    node's round (a user's run of the README's command).  The pool is made in one transaction, and
    a file holding only ptui's tables is ptui's."""
    import subprocess
    import sys
    import time

    from tests.support.cli import ROOT
    half = tmp_path / "half.sqlite"              # as another process left it between two statements
    with sqlite3.connect(half) as db:
        db.execute(__import__("ptui.core.profiling.pool", fromlist=["SCHEMA"]).SCHEMA[0])
    Pool(f"sqlite:///{half}").close()
    assert Pool(f"sqlite:///{half}").summary() == []
    for k in range(4):
        url = f"sqlite:///{tmp_path}/fresh-{k}.sqlite"
        start = f"{time.time() + 1.5:.3f}"
        procs = [subprocess.Popen([sys.executable, "-c", _OPEN_AT_ONCE, url, start], cwd=ROOT,
                                  stdout=subprocess.PIPE, text=True) for _ in range(8)]
        said = [p.communicate(timeout=60)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs), said


def test_a_csv_of_two_workloads_is_not_pushed_as_one(monkeypatch, tmp_path, cli):
    """A CSV holding a ResNet-18 profile's rows and a MobileNetV3 profile's (one file of a board's
    runs) was refused as "does not say its workload", and with `--workload resnet18` all its rows
    went to the pool as ResNet-18's, the MobileNetV3 modes among them (fit --pool pooled them too).
    Push and fit --pool refuse it in one line naming both, exit 2, before the pool is touched."""
    for seed, wl in enumerate(("resnet18", "mobilenetv3")):      # modes of their own
        rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", wl,
                         "--count", "3", "--seed", str(seed), "--out", tmp_path / f"{wl}.csv")
        assert rc == 0, err
    lines = (tmp_path / "resnet18.csv").read_text().splitlines()
    lines += (tmp_path / "mobilenetv3.csv").read_text().splitlines()[1:]
    (tmp_path / "mixed.csv").write_text("\n".join(lines) + "\n")
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    monkeypatch.setenv("PTUI_BOARD_ID", "z")
    for args in (("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "mixed.csv",
                  "--workload", "resnet18"),
                 ("fit", "--device", "orin-agx", "--profile", tmp_path / "mixed.csv", "--pool",
                  "--workload", "resnet18", "--out", tmp_path / "m")):
        rc, out, err = cli(*args)
        assert rc == 2 and len(err.strip().splitlines()) == 1, out + err
        assert "holds rows of workloads mobilenetv3, resnet18" in err, err
    assert not (tmp_path / "pool.sqlite").exists() and not (tmp_path / "m").exists()


@pytest.mark.parametrize("board", ["", "   ", "a\tb", "x" * 101])
def test_a_board_id_that_names_no_board_is_refused(monkeypatch, tmp_path, cli, board):
    """`pool push --board ''` sent the rows as the host name's without a word, and `--board` with a
    tab or of 101 characters sent them under that id (what $PTUI_BOARD_ID is refused for). Push and
    fit --pool refuse it in one line naming --board, exit 2, before the pool is touched."""
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "3", "--out", tmp_path / "p.csv")
    assert rc == 0, err
    monkeypatch.setenv("PTUI_POOL", f"sqlite:///{tmp_path}/pool.sqlite")
    for args in (("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "p.csv", "--board", board),
                 ("fit", "--device", "orin-agx", "--profile", tmp_path / "p.csv", "--pool", "--board", board,
                  "--out", tmp_path / "m")):
        rc, out, err = cli(*args)
        assert rc == 2 and "bad board id" in err and "(--board)" in err, out + err
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "pool.sqlite").exists() and not (tmp_path / "m").exists()


def _profile_into_pool(cli, monkeypatch, tmp_path, board: str, count: int = 3) -> str:
    """`board` profiles `count` modes with the pool at tmp_path/pool.sqlite; the pool's URL."""
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    monkeypatch.setenv("PTUI_POOL", url)
    monkeypatch.setenv("PTUI_BOARD_ID", board)
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", str(count), "--session", f"s-{board}", "--out", tmp_path / f"{board}.csv")
    assert rc == 0, err
    return url


def _as_an_older_ptui_wrote(tmp_path, board: str, name: str = "RESNET18") -> None:
    """The board's rows in the pool under the workload name as an older ptui sent it (as typed)."""
    with sqlite3.connect(tmp_path / "pool.sqlite") as db:
        db.execute("UPDATE ptui_pool_rows SET workload = ? WHERE board = ?", (name, board))


def test_a_workload_group_an_older_ptui_wrote_in_another_case_is_read_as_one(monkeypatch, tmp_path, cli):
    """Rows an older ptui sent as workload 'RESNET18' (before names were the catalogue's) were a
    group apart: `pool list` showed RESNET18 and resnet18, `pool pull --workload resnet18` left
    them out and `fit --pool` pooled none of them ('nothing to pool' for the second board).  The
    pool reads them as resnet18's, one group, and leaves them as they were written."""
    _profile_into_pool(cli, monkeypatch, tmp_path, "a")
    _as_an_older_ptui_wrote(tmp_path, "a", "RESNET18")
    url = _profile_into_pool(cli, monkeypatch, tmp_path, "b")
    rc, out, err = cli("pool", "list", "--json")
    assert rc == 0, err
    groups = json.loads(out)["groups"]
    assert [(g["workload"], g["rows"], g["boards"]) for g in groups] == [("resnet18", 6, 2)], groups
    rc, out, err = cli("pool", "pull", "--device", "orin-agx", "--workload", "resnet18", "--out",
                       tmp_path / "fleet.csv")
    assert rc == 0 and "6 rows of 2 boards" in out, out + err
    assert "RESNET18" not in (tmp_path / "fleet.csv").read_text()
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "b.csv", "--pool",
                       "--out", tmp_path / "mb")
    assert rc == 0 and "3 rows of this board + 3 from 1 other board" in out, out + err
    with sqlite3.connect(tmp_path / "pool.sqlite") as db:      # read as one, not rewritten
        assert sorted(db.execute("SELECT DISTINCT board, workload FROM ptui_pool_rows")) == [
            ("a", "RESNET18"), ("b", "resnet18")]
    assert {r.workload for r in Pool(url).rows(workload="ResNet-18")} == {"resnet18"}


def test_a_pulled_csv_of_this_boards_rows_pushed_again_adds_nothing(monkeypatch, tmp_path, cli):
    """`pool pull --out pulled.csv` then `pool push --profile pulled.csv` added the board's 50 rows
    again as its own (100 in the pool) where an older ptui had sent them as 'RESNET18': the
    check for rows the pool holds (same board, mode and measurement) looked in the resnet18 group
    only.  Pushed again, with all its columns or a bare copy (--workload given), they add nothing."""
    url = _profile_into_pool(cli, monkeypatch, tmp_path, "a", count=6)
    _as_an_older_ptui_wrote(tmp_path, "a", "RESNET18")
    rc, out, err = cli("pool", "pull", "--device", "orin-agx", "--out", tmp_path / "pulled.csv")
    assert rc == 0 and "6 rows of 1 board" in out, out + err
    _bare(tmp_path / "pulled.csv", tmp_path / "bare.csv")
    for args in ((tmp_path / "pulled.csv",), (tmp_path / "bare.csv", "--workload", "resnet18")):
        rc, out, err = cli("pool", "push", "--device", "orin-agx", "--profile", *args)
        assert rc == 0 and out.startswith("0 rows") and "6 were there already" in out, out + err
    assert len(Pool(url).rows()) == 6


def test_fit_pool_refuses_a_reference_that_is_no_network(monkeypatch, tmp_path, cli):
    """`fit --pool --reference DIR` with DIR a fitted GP model or a roofline prior ended in a
    traceback (GPStack.predict_log() missing 'A'), as `fit --reference` did: one line, exit 2, no
    model written, as there."""
    _profile_into_pool(cli, monkeypatch, tmp_path, "a")
    _profile_into_pool(cli, monkeypatch, tmp_path, "b", count=6)
    rc, _, err = cli("fit", "--device", "orin-agx", "--workload", "resnet18", "--out", tmp_path / "prior")
    assert rc == 0, err
    rc, _, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "b.csv", "--method", "gp",
                     "--out", tmp_path / "gp")
    assert rc == 0, err
    for ref in ("prior", "gp"):
        rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "b.csv", "--pool",
                           "--reference", tmp_path / ref, "--out", tmp_path / "m")
        assert rc == 2 and not out and len(err.strip().splitlines()) == 1, out + err
        assert "not reference networks" in err and "ptui reference build" in err, err
        assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("board", ["", "   ", "a\tb", "x" * 101])
def test_pull_of_a_board_id_that_names_no_board_is_refused(monkeypatch, tmp_path, cli, board):
    """`pool pull --board ''` said "the pool holds no rows for orin-agx" of a pool holding them (it
    looked for board '' and said nothing of it), where `pool push --board ''` is refused. Pull
    refuses such an id as push does (one line naming --board, exit 2); an id with spaces about it
    is read as push takes it (stripped)."""
    _profile_into_pool(cli, monkeypatch, tmp_path, "orin-01")
    rc, out, err = cli("pool", "pull", "--device", "orin-agx", "--board", board, "--out", tmp_path / "f.csv")
    assert rc == 2 and "bad board id" in err and "(--board)" in err, out + err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "f.csv").exists()
    rc, out, err = cli("pool", "pull", "--device", "orin-agx", "--board", " orin-01 ", "--out", tmp_path / "f.csv")
    assert rc == 0 and "3 rows of 1 board" in out, out + err


def test_an_empty_pool_url_is_refused_not_read_as_no_pool(monkeypatch, tmp_path, cli):
    """`fit --pool-url ""` (which implies --pool) fitted the profile alone without a word, and
    `pool list --pool-url ""` said 'no pool: give --pool-url URL or set PTUI_POOL' with $PTUI_POOL
    set.  An empty or blank --pool-url is refused in one line (exit 2), before anything runs."""
    _profile_into_pool(cli, monkeypatch, tmp_path, "a", count=6)
    for url in ("", "  "):
        for args in (("fit", "--device", "orin-agx", "--profile", tmp_path / "a.csv", "--method", "gp",
                      "--out", tmp_path / "m"),
                     ("pool", "list"),
                     ("pool", "pull", "--device", "orin-agx", "--out", tmp_path / "f.csv"),
                     ("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "a.csv")):
            rc, out, err = cli(*args, "--pool-url", url)
            assert rc == 2 and not out and len(err.strip().splitlines()) == 1, out + err
            assert "names no pool" in err and "--pool-url" in err, err
    assert not (tmp_path / "m").exists() and not (tmp_path / "f.csv").exists()


def test_fit_pool_says_it_decides_on_the_step_the_pool_holds(monkeypatch, tmp_path, cli):
    """`fit --pool --time cycle` wrote a model that decides on the median step (the pool's times)
    without a word, and so did `fit --pool` of a profile whose wall time went largely outside the
    steps (which `fit` alone decides on the whole cycle for).  --time cycle is refused in one line
    (exit 2, no model); the other fits, saying it decides on the step."""
    import csv
    _profile_into_pool(cli, monkeypatch, tmp_path, "a")
    _profile_into_pool(cli, monkeypatch, tmp_path, "b")
    fit = ("fit", "--device", "orin-agx", "--profile", tmp_path / "b.csv", "--pool", "--method", "gp")
    rc, out, err = cli(*fit, "--time", "cycle", "--out", tmp_path / "m")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--time cycle does not pool" in err, out + err
    assert not (tmp_path / "m").exists()
    with open(tmp_path / "b.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:                               # 40 % of each cycle outside the step
        r["cycle_ms"] = f"{float(r['time_ms']) / 0.6:.4f}"
    with open(tmp_path / "b.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    rc, out, err = cli(*fit, "--out", tmp_path / "m")
    assert rc == 0 and "40 % of the wall time is outside the optimizer steps" in err, out + err
    assert "this pooled model decides on the median step" in err, err
    assert json.loads((tmp_path / "m" / "meta.json").read_text())["time_basis"] == "step"


SCRIPT = """import torch
m = torch.nn.Linear(32, 4)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
while True:
    loss = m(torch.randn(16, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_scripts_profile_is_pooled_only_under_a_name_its_user_gives(monkeypatch, tmp_path, cli):
    """A user script's profile says workload 'script' (the user named none): its rows went to the
    pool as workload 'script', where every board's own script, whatever it trains, pooled as one
    workload.  A profile under $PTUI_POOL now keeps them out and says how to send them; pool push
    and fit --pool ask for --workload NAME, and push them under that name."""
    import sys
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.setenv("PTUI_POOL", url)
    monkeypatch.setenv("PTUI_BOARD_ID", "orin-07")
    rc, out, err = cli("profile", "--device", "orin-agx", "--count", "6", "--out", tmp_path / "a.csv",
                       "--", sys.executable, tmp_path / "train.py")
    assert rc == 0, err
    assert "not sent to the pool" in err and "--workload NAME" in err, err
    assert not (tmp_path / "pool.sqlite").exists() or Pool(url).rows() == []
    push = ("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "a.csv", "--batch-size", "16")
    rc, out, err = cli(*push)
    assert rc == 2 and "--workload NAME" in err and len(err.strip().splitlines()) == 1, out + err
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "a.csv", "--pool",
                       "--out", tmp_path / "m")
    assert rc == 2 and "--workload NAME" in err and not (tmp_path / "m").exists(), out + err
    rc, out, err = cli(*push, "--workload", "mynet")
    assert rc == 0, out + err
    assert {(r.workload, r.batch_size) for r in Pool(url).rows()} == {("mynet", 16)}


def test_two_simulated_boards_profiled_with_one_seed_are_told_why_their_rows_are_one(monkeypatch, tmp_path, cli):
    """Two simulated profiles made without a pool (seed 0 both) are identical; pushing the second
    under its own --board was refused as board a's with "give --board a (or PTUI_BOARD_ID=a, as
    when it was profiled)", untrue of b's own profile.  Still refused (the pool cannot tell the
    rows apart), the line says they are identical to a's because the simulator drew them with one
    seed, and how to profile each board apart; the pool is left as it was."""
    for board in ("a", "b"):
        monkeypatch.setenv("PTUI_BOARD_ID", board)
        rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                         "--count", "3", "--session", f"s-{board}", "--out", tmp_path / f"{board}.csv")
        assert rc == 0, err
    url = f"sqlite:///{tmp_path}/pool.sqlite"
    push = ("pool", "push", "--device", "orin-agx", "--pool-url", url)
    rc, out, err = cli(*push, "--profile", tmp_path / "a.csv", "--board", "a")
    assert rc == 0, out + err
    rc, out, err = cli(*push, "--profile", tmp_path / "b.csv", "--board", "b")
    assert rc == 2 and len(err.strip().splitlines()) == 1, out + err
    assert "identical to those of" in err and "board 'a'" in err and "seed" in err, err
    assert "--seed" in err and "as when it was profiled" not in err, err
    assert len(Pool(url).rows(device="orin-agx")) == 3


def test_pull_of_no_match_names_the_workload_it_looked_for(monkeypatch, tmp_path, cli):
    """`pool pull --workload RESNET18` that matched nothing said "holds no rows for orin-agx,
    RESNET18", though it looked for the catalogue's resnet18 (the pool's name); it says resnet18."""
    _profile_into_pool(cli, monkeypatch, tmp_path, "a")
    rc, out, err = cli("pool", "pull", "--device", "orin-agx", "--workload", "RESNET18", "--batch-size", "64",
                       "--out", tmp_path / "none.csv")
    assert rc == 2 and len(err.strip().splitlines()) == 1, out + err
    assert ", resnet18 at batch size 64" in err and "RESNET18" not in err, err


def test_pool_list_keeps_its_columns_for_a_long_workload_name(monkeypatch, tmp_path, cli):
    """A workload named longer than 14 characters (a script's, --workload NAME) pushed its row of
    `pool list` past the header: batch, rows and boards no longer stood under their names.  Every
    column starts where its header does, whatever the names' lengths."""
    url = _profile_into_pool(cli, monkeypatch, tmp_path, "a")
    _bare(tmp_path / "a.csv", tmp_path / "bare.csv")
    rc, out, err = cli("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "bare.csv", "--board", "b",
                       "--workload", "my-very-long-training-script", "--batch-size", "32", "--pool-url", url)
    assert rc == 0, out + err
    rc, out, err = cli("pool", "list")
    assert rc == 0, err
    head, *rows = out.strip().splitlines()[1:]
    assert len(rows) == 2 and any("my-very-long-training-script" in r for r in rows), out
    for col in ("batch", "rows", "boards", "simulated"):
        end = head.index(col) + len(col)              # right-aligned: each figure ends where its name does
        for r in rows:
            assert r[end - 1] != " " and r[end] == " ", (col, out)


def test_a_push_that_takes_the_workloads_default_batch_size_says_so(monkeypatch, tmp_path, cli):
    """`pool push --workload resnet18` of a CSV with no batch_size column (and no --batch-size)
    put its rows in the pool's batch-16 group, resnet18's default, without a word: a batch-64
    profile's rows would be pooled with batch 16's.  The push's line says the batch size it took
    and that it is the default, and how to give another; a CSV that says it, or --batch-size,
    adds nothing to the line."""
    url = _profile_into_pool(cli, monkeypatch, tmp_path, "a")
    _bare(tmp_path / "a.csv", tmp_path / "bare.csv")
    push = ("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "bare.csv", "--workload", "resnet18")
    rc, out, err = cli(*push, "--pool-url", f"sqlite:///{tmp_path}/p2.sqlite")
    assert rc == 0 and len(out.strip().splitlines()) == 1, out + err
    assert "as batch size 16, resnet18's default" in out and "give --batch-size" in out, out
    assert {r.batch_size for r in Pool(f"sqlite:///{tmp_path}/p2.sqlite").rows()} == {16}
    rc, out, err = cli(*push, "--batch-size", "16", "--pool-url", f"sqlite:///{tmp_path}/p3.sqlite")
    assert rc == 0 and "default" not in out and "--batch-size" not in out, out + err
    monkeypatch.setenv("PTUI_BOARD_ID", "a")
    rc, out, err = cli("pool", "push", "--device", "orin-agx", "--profile", tmp_path / "a.csv", "--pool-url", url)
    assert rc == 0 and "default" not in out, out + err


def test_fit_pool_of_a_csv_without_its_batch_size_says_the_default_it_pooled_with(monkeypatch, tmp_path, cli):
    """`fit --pool --workload resnet18` of a CSV with no batch_size column pooled it with the
    fleet's batch-16 rows (resnet18's default) without a word, as `pool push` did; a batch-64
    profile would be corrected by batch 16's rows.  It fits as before and says so (stderr)."""
    _profile_into_pool(cli, monkeypatch, tmp_path, "a")
    monkeypatch.setenv("PTUI_BOARD_ID", "b")
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     "--count", "3", "--seed", "5", "--out", tmp_path / "b.csv")
    assert rc == 0, err
    monkeypatch.delenv("PTUI_POOL")
    _bare(tmp_path / "b.csv", tmp_path / "bare.csv")
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "bare.csv", "--workload", "resnet18",
                       "--pool", "--pool-url", f"sqlite:///{tmp_path}/pool.sqlite", "--out", tmp_path / "m")
    assert rc == 0 and "3 rows of this board + 3 from 1 other board" in out, out + err
    assert "no batch_size column" in err and "batch size 16, resnet18's default" in err, err
