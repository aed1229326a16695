"""One entry for a profile run (core.profile_run) and one run class (profile.ProfileRun) at one
batch size or several: cancel, and a pause that holds between sizes."""
import threading
import time

import pytest

from ptui.core.usecases.profile import ProfileRequest, ProfileRun, profile_run


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def _batch(data, name="b", count=2, control=None):
    req = ProfileRequest(workload="resnet18", count=count, session=name, out=data / f"{name}.csv")
    run = ProfileRun(req, (8, 16), control=control)
    run.open_backend("sim", "orin-agx")
    run.prepare()
    return run


def test_profile_run_chooses_by_the_sizes_or_the_resumed_session(data):
    one = profile_run(ProfileRequest(workload="resnet18", session="one", out=data / "one.csv"))
    assert type(one) is ProfileRun and one.batch_sizes is None
    one.close()
    several = profile_run(ProfileRequest(workload="resnet18", session="b", out=data / "b.csv"),
                          (8, 16))
    assert type(several) is ProfileRun and several.batch_sizes == (8, 16)
    several.close()
    run = _batch(data)
    assert run.run().status == "done"
    again = profile_run(ProfileRequest(session="b", resume=True, out=data / "b.csv"))
    assert again.batch_sizes == (8, 16) and again.finished      # resumed by its session alone
    assert again.export().n_rows == 2


def test_cancel_a_profile_over_batch_sizes(data):
    """BatchProfileRun had no cancel() (ProfileRun has): the app's surface was not the same."""
    run = _batch(data, count=4)
    run.cancel()
    res = run.run()
    assert res.status == "aborted" and res.n_rows == 0


def test_a_pause_before_a_size_starts_holds_it(data):
    """A pause while no size's run was under way (between sizes, or before the first) was dropped:
    BatchProfileRun.pause() paused only the running size.  It holds the next size until resumed."""
    from ptui.core.profiling.profiler import Control
    from ptui.core.profiling.store import Store
    control, out, runs = Control(), [], []

    def work():                            # as the app: made, prepared and run in one thread
        runs.append(_batch(data, count=2, control=control))
        runs[0].pause()
        out.append(runs[0].run())
    t = threading.Thread(target=work)
    t.start()
    time.sleep(4.0)
    assert t.is_alive() and not out
    store = Store()
    try:
        assert not store.results("b")
    finally:
        store.close()
    control.resume()
    t.join(60)
    assert out and out[0].status == "done" and out[0].n_rows == 2


@pytest.mark.parametrize("bad, words", [({"startup_timeout": -1.0}, "--startup-timeout must be"),
                                        ({"time_basis": "wall"}, "--time must be one of")])
def test_a_bad_request_is_refused_up_front_at_one_size_or_several(data, bad, words):
    """ProfileRun checked --startup-timeout and --time when made; a profile over batch sizes
    checked them only in each size's run, after its session was created (ProfileRun checks both, at any number of sizes)."""
    from ptui.core.profiling.profiler import SessionError
    from ptui.core.profiling.store import Store
    for sizes in (None, (8, 16)):
        req = ProfileRequest(workload="resnet18", count=2, session="s", out=data / "s.csv", **bad)
        with pytest.raises(SessionError, match=words):
            run = profile_run(req, sizes)
            run.open_backend("sim", "orin-agx")
            run.prepare()
        store = Store()
        try:
            assert store.get_session("s") is None
        finally:
            store.close()


def test_the_resume_hint_at_one_size_and_several(data):
    run = _batch(data)
    assert run.resume_hint() == (f"ptui profile --session b --resume --batch-sizes 8,16 "
                                 f"--out {data / 'b.csv'}")
    run.close()
    one = profile_run(ProfileRequest(workload="resnet18", count=2, session="one", out=data / "o.csv"))
    one.open_backend("sim", "orin-agx")
    one.prepare()
    assert one.resume_hint() == f"ptui profile --session one --resume --out {data / 'o.csv'}"
    one.close()


def test_run_prepares_itself_at_one_size_or_several(data):
    """run() without prepare() first prepared a one-size run, but a run over batch sizes crashed
    (AttributeError: no info): the one surface was not the same at several sizes."""
    for sizes, n in ((None, 2), ((8, 16), 2)):
        run = profile_run(ProfileRequest(workload="resnet18", count=2, session=f"p{n}{sizes}",
                                         out=data / "p.csv"), sizes)
        run.open_backend("sim", "orin-agx")
        res = run.run()
        assert res.status == "done" and res.n_rows == n, res


def test_one_size_is_stored_as_before_and_several_by_part(data):
    """The one run class keeps the store's two layouts: a one-size session has no parts (plan
    entries of 4, no per_size params), a session over several sizes has its size in each plan
    entry and each size's params under per_size, as its size's run recorded them."""
    import json
    import sqlite3

    from ptui.core.profiling.store import Store
    one = profile_run(ProfileRequest(workload="resnet18", count=2, session="one", out=data / "o.csv"))
    one.open_backend("sim", "orin-agx")
    assert one.run().status == "done"
    run = _batch(data, count=3)
    assert run.run().status == "done"
    store = Store()
    path = store.path
    store.close()
    db = sqlite3.connect(path)
    try:
        rows = dict(db.execute("SELECT name, plan FROM sessions").fetchall())
        params = {n: json.loads(p) for n, p in db.execute("SELECT name, params FROM sessions")}
    finally:
        db.close()
    assert {len(e) for e in json.loads(rows["one"])} == {4}
    assert "per_size" not in params["one"] and "batch_sizes" not in params["one"]
    assert params["one"]["out"] == str(data / "o.csv") and params["one"]["strategy"] == "random"
    plan = json.loads(rows["b"])
    assert {len(e) for e in plan} == {5}
    sizes = {str(e[4]) for e in plan}
    assert params["b"]["batch_sizes"] == [8, 16] and set(params["b"]["per_size"]) == sizes
    for part in params["b"]["per_size"].values():
        assert part["strategy"] == "random" and part["count"] is None and part["goal"] is None
