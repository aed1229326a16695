import subprocess

import pytest

from ptui.core.board.backends.sim import SimJetson
from ptui.core.board.physics import steady_state
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload
from ptui.core.profiling.profiler import ProfileConfig, Profiler, choose_modes, open_session
from ptui.core.profiling.store import Store
from tests.support.cli import PY, kill_9_after_progress_lines, subprocess_env

ORIN = get_device("orin-agx")
WL = get_workload("resnet18")


def start(store, name, plan, sim=None):
    sim = sim or SimJetson(ORIN, seed=1)
    info = open_session(store, name, resume=False, device=ORIN, workload=WL, seed=1,
                        backend_kind="sim", plan_fn=lambda: plan,
                        original_mode=sim.current_mode(), params={})
    return sim, Profiler(sim, WL, store, name), info


def test_results_match_the_physics(tmp_path):
    store = Store(tmp_path / "s.db")
    plan = choose_modes(ORIN, count=12, seed=3)
    sim, prof, info = start(store, "a", plan)
    res = prof.run(info)
    assert len(res) == 12
    for r in res:
        op = steady_state(ORIN, WL, *r.mode.as_tuple())
        assert r.time_ms == pytest.approx(float(op.time_ms), rel=0.03)
        assert r.power_w == pytest.approx(float(op.power_w), rel=0.02)
        assert r.n_minibatches >= 40 and r.n_power >= 5 and r.stable
        assert r.time_ms_p25 <= r.time_ms <= r.time_ms_p75
        # power samples cover the recorded minibatches
        assert r.n_power * 0.5 >= 0.8 * (r.n_minibatches * r.time_ms / 1000) or r.n_power >= 5
    assert sim.current_mode() == ORIN.preset("MODE_30W").mode   # restored
    assert sim.read().nvpmodel == "MODE_30W" and sim.tpc == 4
    assert store.get_session("a").status == "done"


def test_plan_is_seeded_and_ordered():
    a = choose_modes(ORIN, count=50, seed=7)
    assert a == choose_modes(ORIN, count=50, seed=7)
    assert a != choose_modes(ORIN, count=50, seed=8)
    assert len(set(a)) == 50 and all(m in set(ORIN.pt_grid()) for m in a)
    assert sum(1 for x, y in zip(a, a[1:]) if x.mem_mhz != y.mem_mhz) <= 3


def test_error_mid_run_restores_and_keeps_finished_modes(tmp_path):
    store = Store(tmp_path / "s.db")
    plan = choose_modes(ORIN, count=6, seed=3)
    sim, prof, info = start(store, "b", plan)
    original = sim.current_mode()
    done = []

    def on_progress(p):
        done.append(p.done)
        if p.done == 3:
            sim.fail_next_apply = "injected"

    with pytest.raises(Exception, match="injected"):
        prof.run(info, on_progress)
    assert sim.current_mode() == original and sim.workload is None
    assert len(store.results("b")) == 3
    assert store.get_session("b").status == "failed"


def test_ctrl_c_restores(tmp_path):
    store = Store(tmp_path / "s.db")
    sim, prof, info = start(store, "c", choose_modes(ORIN, count=5, seed=3))

    def boom(p):
        if p.done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prof.run(info, boom)
    assert sim.current_mode() == ORIN.preset("MODE_30W").mode
    assert store.get_session("c").status == "interrupted"


def test_abort_from_control(tmp_path):
    store = Store(tmp_path / "s.db")
    sim, prof, info = start(store, "d", choose_modes(ORIN, count=5, seed=3))
    prof.control.abort()
    from ptui.core.profiling.profiler import ProfileAborted
    with pytest.raises(ProfileAborted):
        prof.run(info)
    assert sim.current_mode() == ORIN.preset("MODE_30W").mode
    assert store.results("d") == []


def test_interrupted_then_resumed_equals_uninterrupted(tmp_path, cli):
    args = ["profile", "--device", "orin-agx", "--workload", "mobilenetv3", "--count", "25",
            "--seed", "5"]
    rc, _, _ = cli(*args, "--session", "full", "--out", tmp_path / "full.csv")
    assert rc == 0
    # interrupt after 9 modes
    import ptui.core.profiling.profiler as P
    real = P.Profiler.measure
    calls = {"n": 0}

    def flaky(self, events, mode, record=True):
        if record:
            calls["n"] += 1
            if calls["n"] == 10:
                raise KeyboardInterrupt
        return real(self, events, mode, record=record)

    P.Profiler.measure = flaky
    try:
        rc, _, err = cli(*args, "--session", "part", "--out", tmp_path / "part.csv")
    finally:
        P.Profiler.measure = real
    assert rc == 130 and "resume with" in err
    assert len((tmp_path / "part.csv").read_text().splitlines()) == 10
    rc, _, err = cli("profile", "--session", "part", "--resume", "--out", tmp_path / "part.csv")
    assert rc == 0, err
    assert "9 done, 16 to go" in err
    assert _rows(tmp_path / "part.csv") == _rows(tmp_path / "full.csv")
    assert not list(tmp_path.glob("part.csv.~*"))     # its own profile: replaced, not kept aside


def _rows(path):
    """A profile CSV's text without the session column (the one that differs between sessions)."""
    lines = path.read_text().splitlines()
    i = lines[0].split(",").index("session")
    return [",".join(c for k, c in enumerate(line.split(",")) if k != i) for line in lines]


@pytest.mark.slow
def test_kill_9_then_resume_equals_uninterrupted(tmp_path):
    env = subprocess_env(tmp_path)
    base = [PY, "-m", "ptui", "profile", "--device", "orin-agx", "--workload", "resnet18",
            "--count", "1000", "--seed", "11"]
    subprocess.run(base + ["--session", "ref", "--out", str(tmp_path / "ref.csv")], env=env,
                   check=True, capture_output=True)
    kill_9_after_progress_lines(base + ["--session", "k", "--out", str(tmp_path / "k.csv")],
                                env, 8)
    assert not (tmp_path / "k.csv").exists()          # killed before writing: all data is in the store
    r = subprocess.run(base + ["--session", "k", "--resume", "--out", str(tmp_path / "k.csv")],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    done_before = int(r.stderr.split(" done,")[0].rsplit(" ", 1)[1])
    assert 70 <= done_before < 1000
    assert _rows(tmp_path / "k.csv") == _rows(tmp_path / "ref.csv")


def test_resume_checks(tmp_path, cli):
    rc, _, err = cli("profile", "--session", "nope", "--resume", "--out", tmp_path / "x.csv")
    assert rc == 2 and "no session named 'nope'" in err
    rc, _, _ = cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "3",
                   "--session", "s1", "--out", tmp_path / "x.csv")
    assert rc == 0
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "3",
                     "--session", "s1", "--out", tmp_path / "x.csv")
    assert rc == 2 and "already exists" in err
    rc, _, err = cli("profile", "--workload", "bert-base", "--session", "s1", "--resume",
                     "--out", tmp_path / "x.csv")
    assert rc == 2 and "profiles lstm" in err


def test_thermal_guard_stops_and_restores(tmp_path):
    from ptui.core.profiling.profiler import ThermalLimit
    store = Store(tmp_path / "s.db")
    plan = choose_modes(ORIN, count=6, seed=3)
    sim, prof, info = start(store, "hot", plan)
    # idle junction is 41.2 °C; MAXN heats it (60 s time constant) past 41.5 within seconds
    prof.cfg = ProfileConfig(thermal_limit_c=41.5)
    hot_plan = [ORIN.maxn] + plan
    info.plan = hot_plan
    with pytest.raises(ThermalLimit, match="thermal guard: .* reached"):
        prof.run(info)
    assert sim.current_mode() == ORIN.preset("MODE_30W").mode and sim.workload is None
    assert store.get_session("hot").status == "failed"
