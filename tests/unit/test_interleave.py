"""The interleaving runtime (ptui.interleave, usecases/interleave.py): the scheduler keeps
concurrent.py's written policy on a virtual clock (batches formed at b or at the deadline, never
pre-empted, training between), agrees with concurrent.simulate for the same arrivals and minibatch
times, re-decides on a changed rate from the profiles it has (nothing profiled), and puts the board
back on the way out, whatever ends the run."""
import re
import time

import numpy as np
import pytest

from ptui import interleave as il
from ptui.core.board.backends.sim import SimJetson
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload
from ptui.core.decision.concurrent import poisson_arrivals, simulate, slack
from ptui.core.errors import InputError
from ptui.core.usecases import colocate
from tests.support.cli import run_cli

ORIN = get_device("orin-agx")
T_TRAIN, T_INF = 0.040, {1: 0.010, 2: 0.014, 4: 0.020}      # seconds


def fixed(clock, b=4, latency_ms=200.0, arrivals=None, meter=None):
    """A scheduler whose minibatches take fixed times on a virtual clock; it logs what each got."""
    got = []

    def infer(payloads):
        got.append(list(payloads))
        clock.sleep(T_INF[min(len(payloads), 4)] if len(payloads) in T_INF else T_INF[4])

    s = il.Interleaver(infer, batch=b, latency_ms=latency_ms, clock=clock, arrivals=arrivals,
                       train_ms=T_TRAIN * 1000, infer_ms={k: v * 1000 for k, v in T_INF.items()},
                       meter=meter)
    return s, got, (lambda: clock.sleep(T_TRAIN))


def theta_s(b=4, latency_ms=200.0):
    return float(slack(T_TRAIN * 1000, T_INF[b] * 1000, latency_ms)) / 1000.0


def test_a_batch_runs_at_the_first_boundary_once_b_requests_wait():
    clock = il.VirtualClock()
    # four requests within the first training minibatch: the batch of 4 runs right after it
    s, got, train = fixed(clock, arrivals=il.trace([0.001, 0.002, 0.003, 0.004, 1.0]))
    s.run(train, train_batch=16, duration_s=1.0)
    first = next(m for m in s.minibatches if m.kind == "infer")
    assert first.k == 4 and first.t0 == pytest.approx(T_TRAIN)     # not before: no pre-emption
    assert s.minibatches[0].kind == "train"
    assert [len(g) for g in got] == [4, 1]


def test_fewer_than_b_wait_until_the_oldest_would_miss_its_budget():
    clock = il.VirtualClock()
    s, got, train = fixed(clock, arrivals=il.trace([0.005, 0.030]))
    s.run(train, train_batch=16, duration_s=0.03)
    inf = [m for m in s.minibatches if m.kind == "infer"]
    assert len(inf) == 1 and inf[0].k == 2
    # it starts at the first boundary after the oldest has waited theta, not one boundary earlier
    th = theta_s()
    assert inf[0].t0 - 0.005 > th
    before = [m for m in s.minibatches if m.kind == "train" and m.t1 <= inf[0].t0]
    assert before[-1].t0 - 0.005 <= th
    # and every request is within the budget (no backlog: the rule's promise)
    assert all(r.latency_ms <= 200.0 for r in s.done)


def test_minibatches_are_never_pre_empted_and_training_fills_every_gap():
    clock = il.VirtualClock()
    arr = poisson_arrivals(30.0, 5.0, seed=3) / 1000.0
    s, _, train = fixed(clock, arrivals=il.trace(arr))
    rep = s.run(train, train_batch=16, duration_s=5.0)
    mbs = s.minibatches
    for a, b in zip(mbs, mbs[1:]):
        assert b.t0 == pytest.approx(a.t1, abs=1e-12)         # back to back: nothing idles
    for m in mbs:                                             # each ran its whole time
        want = T_TRAIN if m.kind == "train" else T_INF[m.k] if m.k in T_INF else T_INF[4]
        assert m.t1 - m.t0 == pytest.approx(want)
    assert rep.requests == len(arr) and rep.train_minibatches > 0
    assert rep.train_sps == pytest.approx(16 * rep.train_minibatches / rep.span_s)


def test_user_code_pushes_requests_with_submit_and_the_training_loop_form():
    clock = il.VirtualClock()
    s, got, _ = fixed(clock, b=2)
    s.start()
    for step in range(20):
        if step % 3 == 0:
            s.submit({"frame": step})
        s.serve()
        with s.training(8):
            clock.sleep(T_TRAIN)
    s.drain()
    rep = s.report()
    assert rep.requests == 7 and all(isinstance(p, dict) for g in got for p in g)
    assert rep.train_minibatches == 20 and rep.train_sps == pytest.approx(8 * 20 / rep.span_s)
    assert rep.p99_ms <= 200.0 and rep.over_budget == 0.0


def test_power_is_the_time_weighted_mean_of_the_meter():
    clock = il.VirtualClock()
    s, _, train = fixed(clock, arrivals=il.trace([0.001, 0.002, 0.003, 0.004]),
                        meter=lambda kind, k: 20.0 if kind == "train" else 40.0)
    rep = s.run(train, train_batch=16, duration_s=0.2)
    inf = rep.infer_share
    assert rep.power_w == pytest.approx(40.0 * inf + 20.0 * (1 - inf))
    assert il.Interleaver(lambda p: None, batch=1, latency_ms=10).report().power_w != \
        il.Interleaver(lambda p: None, batch=1, latency_ms=10).report().power_w      # nan: no reading


@pytest.mark.parametrize("rate,latency_ms,b,mode", [
    (20.0, 250.0, 8, None), (40.0, 200.0, 16, None), (5.0, 400.0, 2, "slow"), (60.0, 300.0, 32, None)])
def test_the_runtime_agrees_with_concurrent_simulate(rate, latency_ms, b, mode):
    """Same arrivals, same per-minibatch times and powers: the same schedule, so the same figures."""
    m = ORIN.maxn if mode is None else ORIN.mode(8, 1497.6, 624.75, 2133)
    st = colocate.standalone(ORIN, get_workload("resnet18", 16), "resnet50", [m])
    arr = poisson_arrivals(rate, 30.0, seed=11)
    want = simulate(st, 0, arr, latency_ms, b)
    clock = il.VirtualClock()

    def infer(payloads):
        clock.sleep(float(st.t_inf(0, len(payloads))) / 1000.0)

    def meter(kind, k):
        return float(st.train_w[0]) if kind == "train" else float(st.p_inf(0, k))

    s = il.Interleaver(infer, batch=b, latency_ms=latency_ms, clock=clock, arrivals=il.trace(arr / 1000.0),
                       train_ms=float(st.train_ms[0]), infer_ms=lambda k: float(st.t_inf(0, k)), meter=meter)
    got = s.run(lambda: clock.sleep(float(st.train_ms[0]) / 1000.0), train_batch=16,
                duration_s=float(arr[-1]) / 1000.0)
    assert got.requests == len(arr)
    assert got.p50_ms == pytest.approx(want.p50_ms, rel=1e-9)
    assert got.p99_ms == pytest.approx(want.p99_ms, rel=1e-9)
    assert got.over_budget == pytest.approx(want.over_budget, abs=1e-12)
    assert got.train_sps == pytest.approx(want.train_sps, rel=1e-9)
    assert got.power_w == pytest.approx(want.power_w, rel=1e-9)
    assert got.infer_share == pytest.approx(want.infer_share, rel=1e-9)
    assert got.mean_batch == pytest.approx(want.mean_batch, rel=1e-9)


def _managed(rate=20.0, latency_ms=250.0, budget_w=35.0):
    be = SimJetson(ORIN)
    prof, n = il.walk_profiles(ORIN, get_workload("resnet18", 16), "resnet50", rate, latency_ms, budget_w)
    sched = il.Interleaver(lambda p: be.clock.sleep(0.02), batch=1, latency_ms=latency_ms, clock=be.clock,
                           arrivals=il.poisson(rate, seed=1))
    return be, il.Managed(be, prof, sched, rate, budget_w, profiled=n), n


def test_a_changed_rate_re_decides_from_the_profiles_it_has_with_nothing_profiled(monkeypatch):
    be, m, n = _managed()
    start = be.current_mode()
    assert 1 <= n <= 15
    with m:
        first = m.decisions[0]
        assert be.current_mode() == first.pick.mode and m.sched.batch == first.pick.batch
        m.sched.run(lambda: be.clock.sleep(0.05), train_batch=16, duration_s=5.0)
        calls = []
        monkeypatch.setattr(colocate, "standalone", lambda *a, **k: calls.append(a))
        monkeypatch.setattr(SimJetson, "start_training", lambda *a, **k: calls.append(a))
        t = time.perf_counter()
        d = m.set_rate(45.0)
        took = time.perf_counter() - t
        assert calls == [] and d.profiled == 0 and took < 1.0            # no profiling, under 1 s
        assert (d.pick.mode, d.pick.batch) != (first.pick.mode, first.pick.batch)
        assert be.current_mode() == d.pick.mode and m.sched.batch == d.pick.batch
        # the scheduler's slack follows the new pick's profiled times
        r = d.pick.row
        assert m.sched.theta_ms() == pytest.approx(
            float(slack(m.profiles.train_ms[r], m.profiles.t_inf(r, d.pick.batch), 250.0)))
    assert be.current_mode() == start


@pytest.mark.parametrize("boom", [RuntimeError("the training loop failed"), KeyboardInterrupt()])
def test_the_board_goes_back_on_an_exception_or_a_stop_signal(boom):
    be, m, _ = _managed()
    start = be.current_mode()
    with pytest.raises(type(boom)):
        with m:
            assert be.current_mode() != start
            m.set_rate(45.0)
            raise boom
    assert be.current_mode() == start


def test_profiles_round_trip_through_a_file_and_decide_the_same(tmp_path):
    prof, _ = il.walk_profiles(ORIN, get_workload("resnet18", 16), "resnet50", 20.0, 250.0, 35.0)
    il.save_profiles(prof, tmp_path / "p.json", device="orin-agx")
    back, about = il.load_profiles(tmp_path / "p.json", ORIN)
    assert about["device"] == "orin-agx" and back.modes == prof.modes
    assert np.array_equal(back.infer_ms, prof.infer_ms)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError, match="standalone profiles"):
        il.load_profiles(tmp_path / "bad.json", ORIN)


def test_bad_arguments_are_input_errors():
    with pytest.raises(InputError):
        il.Interleaver(lambda p: None, batch=0, latency_ms=100)
    with pytest.raises(InputError):
        il.Interleaver(lambda p: None, batch=2, latency_ms=-1)
    with pytest.raises(InputError):
        il.trace([0.2, 0.1])
    with pytest.raises(InputError):
        il.poisson(0)


def test_the_demo_on_the_simulated_board_is_labelled_and_ends_where_it_started():
    rc, out, err = run_cli("interleave-demo", "--seconds", "20", "--then-rate", "40")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("SIMULATED orin-agx (sim backend)")
    import torch
    assert f"inference loop, on {'cuda' if torch.cuda.is_available() else 'cpu'})" in lines[0]
    assert "0 modes profiled" in out and "board back in its starting mode" in out
    assert out.count("measured:") == 2 and "SIMULATED" in lines[4]
    # each mode in words, as pareto, tune and colocate name one (it was the key, '6c/2201.6/...')
    assert not re.search(r"\d+c/[\d.]+/[\d.]+/[\d.]+", out + err), out + err
    assert "cores · CPU" in [x for x in lines if x.startswith("rate 2")][0], out
    assert "cores · CPU" in [x for x in lines if x.startswith("board back")][0], out


@pytest.mark.parametrize("args,words", [
    (["--rate", "0"], "--rate"), (["--infer-workload", "nope"], "inference workload"),
    (["--train-workload", "nope"], "workload"), (["--seconds", "-2"], "--seconds"),
    (["--backend", "replay"], "replay")])
def test_the_demo_s_bad_input_is_one_line_and_exit_2(args, words):
    rc, out, err = run_cli("interleave-demo", *args)
    assert rc == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and words in err


def test_the_api_imports_neither_textual_nor_torch():
    from tests.unit.test_hygiene import _loaded_after_import
    assert _loaded_after_import("ptui.interleave")["ptui.interleave"] == []


def test_the_board_is_the_runs_until_it_is_back_another_ptui_is_refused(tmp_path):
    """One process drives a board at a time: while a managed run holds its decision on a board,
    another ptui's apply was free to change the mode under it (the run then rolled that back at
    its end); now it is refused, naming the run's process, and the board is free afterwards."""
    import os
    import subprocess
    import sys

    from ptui.core.board.backends.sysfs import SysfsBackend
    from tests.support import fakesys
    from tests.support.cli import subprocess_env
    tree = fakesys.build(tmp_path / "root")
    be = SysfsBackend(ORIN, root=tree)
    prof, n = il.walk_profiles(ORIN, get_workload("resnet18", 16), "resnet50", 20.0, 250.0, 35.0)
    sched = il.Interleaver(lambda p: None, batch=1, latency_ms=250.0)
    other = [sys.executable, "-m", "ptui", "apply", "--backend", "sysfs", "--sysfs-root", str(tree),
             "--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6", "--yes"]
    env = subprocess_env(tmp_path)
    start = be.current_mode()
    with il.Managed(be, prof, sched, 20.0, 35.0, profiled=n) as m:
        r = subprocess.run(other, capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 1 and "changing the power mode" in r.stderr, r.stderr
        assert f"pid {os.getpid()}" in r.stderr
        assert be.current_mode() == m.decisions[0].pick.mode
    assert be.current_mode() == start
    r = subprocess.run(other, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr                     # the board is free once it is back


def test_profiles_keep_their_power_se_through_a_file(tmp_path):
    from dataclasses import replace
    st = colocate.standalone(ORIN, get_workload("resnet18", 16), "resnet50", [ORIN.maxn])
    assert st.power_se is None
    il.save_profiles(st, tmp_path / "exact.json")
    assert il.load_profiles(tmp_path / "exact.json", ORIN)[0].power_se is None
    il.save_profiles(replace(st, power_se=np.array([0.012])), tmp_path / "p.json")
    back, about = il.load_profiles(tmp_path / "p.json", ORIN)
    assert back.power_se is not None and back.power_se.tolist() == [0.012] and "power_se" not in about
