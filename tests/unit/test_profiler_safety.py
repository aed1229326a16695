"""The profiler when the board misbehaves: every path ends with the board back where it started
(or an error saying it is not), and the session's status saying what happened."""
from __future__ import annotations

import threading

import pytest

from ptui.core.board.backends.base import ApplyError, BackendError
from ptui.core.board.backends.sim import SimJetson
from ptui.core.board.csvio import CSVError
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload
from ptui.core.profiling.profiler import (
    Control,
    ProfileAborted,
    ProfileConfig,
    ProfileError,
    Profiler,
    SessionError,
    ThermalLimit,
    choose_modes,
    open_session,
    profile_rows,
    summarise,
)
from ptui.core.profiling.store import Store
from tests.support import faults

ORIN = get_device("orin-agx")
WL = get_workload("resnet18")
START = ORIN.preset("MODE_30W").mode
PLAN = [ORIN.mode(4, 729.6, 318.75, 665.6), ORIN.mode(8, 1113.6, 624.75, 2133),
        ORIN.mode(12, 1728, 930.75, 3199)]


def session(tmp_path, be, plan=PLAN, name="s", cfg=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = Store(tmp_path / "s.db")
    info = open_session(store, name, resume=False, device=ORIN, workload=WL, seed=1,
                        backend_kind="sim", plan_fn=lambda: list(plan),
                        original_mode=be.current_mode(), params={})
    return store, Profiler(be, WL, store, name, cfg), info


def test_a_clean_run_records_stable_modes_and_restores(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, prof, info = session(tmp_path, be)
    seen = []
    res = prof.run(info, lambda p: seen.append((p.done, p.total, p.mode, p.phase)))
    assert [r.mode for r in res] == PLAN and all(r.stable for r in res)
    assert seen == [(1, 3, PLAN[0], "recording"), (2, 3, PLAN[1], "recording"), (3, 3, PLAN[2], "recording")]
    assert prof.progress.phase == "done" and prof.progress.done == 3
    assert store.get_session("s").status == "done"
    assert [r["stable"] for _, r in store.results("s")] == [1, 1, 1]
    assert be.current_mode() == START and be.workload is None
    assert prof.progress.live_power_w is not None and prof.progress.live_minibatch_ms is not None
    dev_t = store.get_session("s").device_time_s
    assert dev_t == pytest.approx(prof.progress.device_time_s, rel=0.05) and dev_t > 3 * 40 * 0.05


def test_restore_failing_after_profiling_is_reported(tmp_path):
    be = faults.RestoreRaisesAfterRunBackend(ORIN, seed=1)
    store, prof, info = session(tmp_path, be)
    with pytest.raises(BackendError, match="could not restore the original mode: .*Device or resource busy"):
        prof.run(info)
    assert be.current_mode() == PLAN[-1]            # the error is true: the board is still there
    assert len(store.results("s")) == 3             # and no data is lost
    assert be.workload is None                      # training was stopped before restoring


def test_restore_failing_after_an_error_is_reported_too(tmp_path):
    be = faults.RestoreRaisesAfterRunBackend(ORIN, seed=1)
    store, prof, info = session(tmp_path, be)

    def boom(p):
        if p.done == 1:
            raise RuntimeError("disk full")

    with pytest.raises(BackendError, match="could not restore the original mode") as ei:
        prof.run(info, boom)
    assert isinstance(ei.value.__context__, RuntimeError)        # the cause is kept
    assert store.get_session("s").status == "failed"


def test_wrong_mode_after_apply_is_not_measured(tmp_path):
    be = faults.OtherModeBackend(ORIN, seed=1, wrong_after=1)
    store, prof, info = session(tmp_path, be)
    with pytest.raises(ApplyError, match=f"mode {PLAN[1].key} did not read back \\(device reports "):
        prof.run(info)
    assert [r["cores"] for _, r in store.results("s")] == [4]    # only the verified mode
    assert be.current_mode() == START
    assert store.get_session("s").status == "failed"


def test_a_mode_that_never_settles_is_recorded_as_unstable(tmp_path):
    be = faults.UnsettledBackend(ORIN, seed=1)
    store, prof, info = session(tmp_path, be, plan=PLAN[:1])
    (r,) = prof.run(info)
    assert r.stable is False
    assert r.settle_s == pytest.approx(ProfileConfig().settle_timeout_s, abs=0.6)
    assert r.n_minibatches >= 40
    assert store.results("s")[0][1]["stable"] == 0
    assert be.current_mode() == START


def test_settling_takes_at_least_the_minimum(tmp_path):
    be = SimJetson(ORIN, seed=1, noise=False)
    _store, prof, info = session(tmp_path, be, plan=PLAN[:1])
    (r,) = prof.run(info)
    assert r.stable and ProfileConfig().min_settle_s <= r.settle_s < ProfileConfig().settle_timeout_s


@pytest.mark.parametrize("zone_c, hot", [(85.0, True), (84.9, False)])
def test_hot_zone_at_the_default_limit(tmp_path, zone_c, hot):
    be = faults.HotBackend(ORIN, zone_c, seed=1)
    store, prof, info = session(tmp_path, be, plan=PLAN[:1])
    assert prof.cfg.thermal_limit_c == 85.0
    if hot:
        with pytest.raises(ThermalLimit, match=r"thermal guard: tj reached 85.0 °C \(limit 85 °C\) in mode "
                                               + PLAN[0].key):
            prof.run(info)
        assert store.get_session("s").status == "failed" and store.results("s") == []
        assert store.get_session("s").device_time_s > 0         # the time spent still counts
    else:
        assert len(prof.run(info)) == 1
    assert be.current_mode() == START and be.workload is None


def test_stalled_training_hits_the_mode_timeout(tmp_path):
    be = faults.StalledBackend(ORIN, after=0, horizon_s=4000, seed=1)
    store, prof, info = session(tmp_path, be, plan=PLAN[:2])
    with pytest.raises(ProfileError, match=rf"mode {PLAN[0].key}: no result after 1800 s \(0 minibatches\)"):
        prof.run(info)
    assert 1800 < be.clock.now() < 1900
    assert be.current_mode() == START and store.get_session("s").status == "failed"


def test_mode_timeout_is_configurable(tmp_path):
    be = faults.StalledBackend(ORIN, after=10, horizon_s=400, seed=1)
    _store, prof, info = session(tmp_path, be, plan=PLAN[:1], cfg=ProfileConfig(mode_timeout_s=60))
    with pytest.raises(ProfileError, match=r"no result after 60 s"):
        prof.run(info)
    assert 60 < be.clock.now() < 70


def test_no_power_sensor_is_an_error(tmp_path):
    class NoPower(SimJetson):
        def read(self):
            from dataclasses import replace
            return replace(super().read(), power_w=None)

    be = NoPower(ORIN, seed=1)
    _store, prof, info = session(tmp_path, be, plan=PLAN[:1])
    with pytest.raises(BackendError, match="no power reading"):
        prof.run(info)
    assert be.current_mode() == START


def test_abort_is_recorded_as_aborted_not_failed(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, prof, info = session(tmp_path, be)

    def stop(p):
        if p.done == 2:
            prof.control.abort()

    applied = []
    real = be.apply_mode
    be.apply_mode = lambda mode, **kw: applied.append(mode) or real(mode, **kw)
    with pytest.raises(ProfileAborted, match="^profile aborted$"):
        prof.run(info, stop)
    assert PLAN[2] not in applied                      # stopped before the next mode was applied
    assert store.get_session("s").status == "aborted"
    assert len(store.results("s")) == 2 and be.current_mode() == START
    assert prof.progress.phase == "aborted"


def test_abort_while_paused_releases_the_run(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, prof, info = session(tmp_path, be)
    prof.control.pause()
    assert prof.control.paused and not prof.control.aborted
    t = threading.Timer(0.3, prof.control.abort)
    t.start()
    with pytest.raises(ProfileAborted):
        prof.run(info)
    t.join()
    assert store.get_session("s").status == "aborted" and be.current_mode() == START


def test_control_pause_resume():
    c = Control()
    assert not c.paused and not c.aborted
    c.pause()
    assert c.paused
    c.resume()
    assert not c.paused
    c.wait()                                         # running: returns at once
    c.abort()
    assert c.aborted and not c.paused
    with pytest.raises(ProfileAborted):
        c.wait()


def test_resume_mismatches_are_refused(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, _prof, _info = session(tmp_path, be)
    kw = {"seed": 1, "backend_kind": "sim", "plan_fn": lambda: PLAN, "original_mode": START, "params": {}}
    with pytest.raises(SessionError, match="'s' was profiled on orin-agx, not xavier-agx") as ei:
        open_session(store, "s", resume=True, device=get_device("xavier-agx"), workload=WL, **kw)
    assert ei.value.exit_code == 2
    with pytest.raises(SessionError, match="profiles resnet18 at batch size 16, not resnet18 at 32"):
        open_session(store, "s", resume=True, device=ORIN, workload=WL.with_batch(32), **kw)
    with pytest.raises(SessionError, match="profiles resnet18 at batch size 16, not lstm at 16"):
        open_session(store, "s", resume=True, device=ORIN, workload=get_workload("lstm"), **kw)
    with pytest.raises(SessionError, match="no session named 'nope'"):
        open_session(store, "nope", resume=True, device=ORIN, workload=WL, **kw)
    with pytest.raises(SessionError, match="'s' already exists"):
        open_session(store, "s", resume=False, device=ORIN, workload=WL, **kw)
    again = open_session(store, "s", resume=True, device=ORIN, workload=WL, **kw)
    assert again.plan == PLAN and again.n_done == 0


def test_resume_skips_finished_modes_and_warms_up_in_the_previous_one(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, prof, info = session(tmp_path, be)

    def stop(p):
        if p.done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prof.run(info, stop)
    assert store.get_session("s").status == "interrupted"
    info = open_session(store, "s", resume=True, device=ORIN, workload=WL, seed=1, backend_kind="sim",
                        plan_fn=list, original_mode=START, params={})
    assert info.n_done == 1
    assert info.status == store.get_session("s").status == "running"   # listed as running again
    applied = []
    real = be.apply_mode

    def spy(mode, **kw):
        applied.append(mode)
        return real(mode, **kw)

    be.apply_mode = spy
    prof2 = Profiler(be, WL, store, "s")
    res = prof2.run(info)
    assert [r.mode for r in res] == PLAN[1:]
    assert applied[:3] == PLAN                      # warm-up in mode 0, then modes 1 and 2
    assert [i for i, _ in store.results("s")] == [0, 1, 2]
    assert store.get_session("s").status == "done" and be.current_mode() == START
    # the warm-up waits for settled power, it does not measure mode 0 again (virtual clock)
    added = store.get_session("s").device_time_s - info.device_time_s
    mode_s = [r["mode_s"] for _, r in store.results("s")]
    assert mode_s[1] + mode_s[2] < added < mode_s[1] + mode_s[2] + 0.5 * mode_s[0]


def test_choose_modes_bounds_and_order():
    g = ORIN.pt_grid()
    with pytest.raises(SessionError, match=f"--count must be between 1 and {len(g)}"):
        choose_modes(ORIN, count=0)
    with pytest.raises(SessionError):
        choose_modes(ORIN, count=len(g) + 1)
    assert len(choose_modes(ORIN, count=len(g))) == len(g)
    assert len(choose_modes(ORIN, count=1)) == 1
    assert len(choose_modes(ORIN)) == 50
    assert sorted(choose_modes(ORIN, grid="pt")) == sorted(g)
    assert choose_modes(ORIN, modes=[PLAN[0], PLAN[1], PLAN[0]]).count(PLAN[0]) == 1
    assert choose_modes(ORIN, count=8) == choose_modes(ORIN, count=8, seed=0) != \
        choose_modes(ORIN, count=8, seed=1)                # seeded, 0 unless told


def test_summarise():
    r = summarise(PLAN[0], [10.0, 12.0, 11.0, 30.0, 9.0], [5.0, 7.0], 2.0, 9.0, True)
    assert (r.time_ms, r.power_w, r.power_w_std) == (11.0, 6.0, 1.0)
    assert (r.time_ms_p25, r.time_ms_p75) == (9.5, 21.0)
    assert (r.n_minibatches, r.n_power, r.settle_s, r.mode_s, r.stable) == (5, 2, 2.0, 9.0, True)
    one = summarise(PLAN[0], [10.0], [5.0], 1.0, 2.0, False)
    assert (one.time_ms, one.time_ms_p25, one.time_ms_p75, one.power_w_std) == (10.0, 10.0, 10.0, 0.0)
    row = r.row()
    assert row["cores"] == 4 and row["gpu_mhz"] == 318.75 and "mode" not in row


def test_profile_rows_in_plan_order(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, prof, info = session(tmp_path, be, plan=PLAN[:2])
    prof.run(info)
    rows = profile_rows(store, "s")
    assert [r[:4] for r in rows] == [["4", "729.6", "318.75", "665.6"], ["8", "1113.6", "624.75", "2133"]]
    from ptui.core.profiling.profiler import PROFILE_HEADER
    stable = PROFILE_HEADER.index("stable")
    assert all(r[stable] == "1" for r in rows) and len(rows[0]) == len(PROFILE_HEADER)


def test_events_before_the_switch_are_not_counted(tmp_path):
    """Minibatches that ended before the mode was applied, and the first one after, are dropped."""

    be = SimJetson(ORIN, seed=1, noise=False)
    _store, prof, info = session(tmp_path, be, plan=PLAN[:1])
    prof.cfg = ProfileConfig(min_minibatches=5)
    (r,) = prof.run(info)
    from ptui.core.board.physics import steady_state
    assert r.time_ms == pytest.approx(float(steady_state(ORIN, WL, *PLAN[0].as_tuple()).time_ms), rel=0.01)
    assert r.n_minibatches >= 5


# -- planners, sources, and what the CSV's columns say ---------------------------------------------
class _Planner:
    """An active planner that proposes the given modes one at a time, then stops."""

    def __init__(self, modes, count=10):
        self.modes, self.count, self.seen = list(modes), count, []

    def next_mode(self, rows):
        self.seen.append([(r["cores"], r["cpu_mhz"]) for r in rows])
        return self.modes.pop(0) if self.modes else None


def test_a_planner_extends_the_plan_one_mode_at_a_time(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, prof, info = session(tmp_path, be, plan=PLAN[:1])
    prof.planner = _Planner(PLAN[1:], count=5)
    totals = []
    res = prof.run(info, lambda p: totals.append(p.total))
    assert [r.mode for r in res] == PLAN
    assert store.get_session("s").plan == PLAN and store.done_indices("s") == {0, 1, 2}
    assert [len(s) for s in prof.planner.seen] == [1, 2, 3]          # the store's rows, each time
    assert prof.planner.seen[2] == [(m.cores, m.cpu_mhz) for m in PLAN]
    assert totals == [5, 5, 5] and prof.progress.total == 3           # the count, then what it took
    assert store.get_session("s").status == "done" and be.current_mode() == START
    # a planner going past its count: the total grows one mode at a time, never ahead of the run
    store2, prof2, info2 = session(tmp_path / "2", be, plan=PLAN[:1])
    prof2.planner = _Planner(PLAN[1:], count=2)
    seen = []
    prof2.run(info2, lambda p: seen.append((p.done, p.total)))
    assert seen == [(1, 2), (2, 2), (3, 3)]


def test_a_resume_after_the_last_planned_mode_asks_the_planner_first(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, prof, info = session(tmp_path, be, plan=PLAN[:1])
    prof.planner = _Planner(PLAN[1:2])

    def stop(p):
        raise KeyboardInterrupt                    # after the first mode, before the planner

    with pytest.raises(KeyboardInterrupt):
        prof.run(info, stop)
    assert store.get_session("s").plan == PLAN[:1] and store.done_indices("s") == {0}
    info = open_session(store, "s", resume=True, device=ORIN, workload=WL, seed=1,
                        backend_kind="sim", plan_fn=list, original_mode=START, params={})
    applied = []
    real = be.apply_mode
    be.apply_mode = lambda mode, **kw: applied.append(mode) or real(mode, **kw)
    prof2 = Profiler(be, WL, store, "s", planner=prof.planner)
    res = prof2.run(info)
    assert applied[:2] == PLAN[:2]                  # warm-up in mode 0, then the planner's mode
    assert [r.mode for r in res] == [PLAN[1]] and store.get_session("s").plan == PLAN[:2]
    assert store.done_indices("s") == {0, 1} and be.current_mode() == START


class _Source:
    """A training process of the user's own (as userscript.ScriptSource): here the simulator's."""

    def __init__(self, be, prof_box):
        self.be, self.box, self.log = be, prof_box, []

    def start(self):
        self.log.append(("start", self.box[0].progress.phase))
        self.be.start_training(WL)

    def events(self, interval):
        self.log.append(("events", interval))
        return self.be.events(interval)

    def stop(self):
        self.log.append(("stop", None))
        self.be.stop_training()


def test_a_source_is_started_with_the_sampling_interval_and_always_stopped(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, _prof, info = session(tmp_path, be, plan=PLAN[:1])
    box = []
    src = _Source(be, box)
    prof = Profiler(be, WL, store, "s", ProfileConfig(sample_interval=0.25), source=src)
    box.append(prof)
    (r,) = prof.run(info)
    assert src.log == [("start", "starting"), ("events", 0.25), ("stop", None)]
    assert r.mode == PLAN[0] and be.current_mode() == START and be.workload is None
    # the backend's own training loop is sampled at the same interval
    asked = []
    real = be.events
    be.events = lambda interval=None: asked.append(interval) or real(interval)
    store2, _p, info2 = session(tmp_path / "own", be, plan=PLAN[:1])
    Profiler(be, WL, store2, "s", ProfileConfig(sample_interval=0.25)).run(info2)
    assert asked == [0.25]


def _info(**kw):
    from ptui.core.profiling.store import SessionInfo
    base = dict(name="s", device="orin-agx", workload="resnet18", batch_size=16, seed=0,
                backend="sim", status="done", original_mode=None, plan=[], params={},
                device_time_s=0.0, created=0.0)
    return SessionInfo(**{**base, **kw})


def test_batch_tag_is_the_stated_or_the_measured_batch():
    from ptui.core.profiling.profiler import batch_tag
    assert batch_tag(_info()) == "16"
    assert batch_tag(_info(params={"batch_size_stated": False})) == "16"      # not a script
    unstated = {"batch_size_stated": False}
    assert batch_tag(_info(workload="script", params=unstated)) == ""        # no DataLoader seen
    assert batch_tag(_info(workload="script", params={**unstated, "samples": 12.0})) == "12"
    assert batch_tag(_info(workload="script", params={
        **unstated, "samples": 12, "whatif": {"model": {"samples": 24}}})) == "24"
    assert batch_tag(_info(workload="script", batch_size=8,
                           params={"batch_size_stated": True, "samples": 12})) == "8"


def test_what_one_time_ms_is():
    from ptui.core.profiling.profiler import time_unit, timed_unit
    assert timed_unit(None) == ""
    assert timed_unit(_info()) == "minibatch (SIMULATED built-in workload)"
    assert timed_unit(_info(backend="sysfs")) == "minibatch"
    assert timed_unit(_info(params={"timed": "one optimizer step"})) == "one optimizer step"
    for text, unit in ((None, "minibatch"), ("", "minibatch"), ("  ", "minibatch"),
                       ("minibatch (SIMULATED built-in workload)", "minibatch"),
                       ("one optimizer step", "optimizer step"),
                       ("what-if: one optimizer step", "optimizer step"),
                       ("what-if (no colon)", "what-if (no colon)"),
                       ("what-if: one step of ratio 1:2", "step of ratio 1:2"),
                       (" whole iteration (2 optimizers) ", "whole iteration (2 optimizers)")):
        assert time_unit(text) == unit, text


def test_keep_timed_records_what_the_profile_timed(tmp_path):
    from ptui.core.prediction.predictor import bundled_reference, load_model
    from ptui.core.profiling.profiler import keep_timed
    f = tmp_path / "p.csv"
    for body, want in (("timed\none optimizer step\none optimizer step\n", "one optimizer step"),
                       ("timed\na\nb\n", ""), ("cores\n4\n", "")):
        f.write_text(body)
        model = load_model(bundled_reference())          # a copy of its own (tell edits it)
        model.tell(workload="x")
        keep_timed(model, f)
        assert model.about.timed == want and model.about.workload == "x"


def test_the_first_minibatch_in_a_new_mode_is_not_recorded(tmp_path):
    """PowerTrain's protocol: the first minibatch to finish in the new mode (here a slow one, no
    minibatch straddling the switch) is dropped, even when power settles before it."""
    from ptui.core.board.backends.base import MinibatchEvent, Telemetry
    from ptui.core.clock import VirtualClock
    be = SimJetson(ORIN, seed=1, clock=VirtualClock(100.0))
    store, prof, _info = session(tmp_path, be, plan=PLAN[:1])
    prof.cfg = ProfileConfig(min_minibatches=4, min_power_samples=3, window=2, min_settle_s=0.0)

    def events():                                          # read from the mode's switch on
        t = be.clock.now()
        yield MinibatchEvent(t, 100.0, 0)                    # ended as the mode switched
        yield Telemetry(t + 0.1, 20.0)
        yield Telemetry(t + 0.2, 20.1)                       # stable from here
        yield MinibatchEvent(t + 0.9, 600.0, 1)              # the first one in the new mode
        for k, at in enumerate((0.95, 1.05, 1.15)):
            yield Telemetry(t + at, 20.0 + k / 10)
        for k in range(6):
            yield MinibatchEvent(t + 1.0 + k / 10, 100.0 + k, 2 + k)
    from ptui.core.profiling.profiler import Progress
    prof.progress = Progress(0, 1, PLAN[0], None, 0.0, "settling")
    phases = []

    def watched():
        for ev in events():
            phases.append(prof.progress.phase)
            yield ev
    r = prof.measure(watched(), PLAN[0])
    assert phases[:3] == ["settling"] * 3 and phases[3:] == ["recording"] * (len(phases) - 3)
    assert r.n_minibatches == 4 and r.time_ms_p75 < 200 and r.time_ms == pytest.approx(101.5)
    assert r.n_power == 3 and r.power_w == pytest.approx(20.1) and r.settle_s == pytest.approx(0.2)


def test_resuming_a_session_with_nothing_left_measures_nothing(tmp_path):
    be = SimJetson(ORIN, seed=1)
    store, prof, info = session(tmp_path, be, plan=PLAN[:2])
    prof.run(info)
    before = store.results("s")
    for planner in (None, _Planner([])):                   # a random plan; a planner that stops
        info = open_session(store, "s", resume=True, device=ORIN, workload=WL, seed=1,
                            backend_kind="sim", plan_fn=list, original_mode=START, params={})
        applied = []
        real = be.apply_mode
        be.apply_mode = lambda mode, **kw: applied.append(mode) or real(mode, **kw)
        res = Profiler(be, WL, store, "s", planner=planner).run(info)
        be.apply_mode = real
        assert res == [] and not set(applied) & set(PLAN) and store.results("s") == before
        assert store.get_session("s").status == "done" and be.current_mode() == START


def test_save_profile_says_what_it_did(tmp_path):
    from ptui.core.profiling.profiler import save_profile
    be = SimJetson(ORIN, seed=1)
    store, prof, info = session(tmp_path, be, plan=PLAN[:2])
    out = tmp_path / "p.csv"
    assert save_profile(out, store, "s") == f"no mode finished yet, {out} not written"
    assert not out.exists()
    prof.run(info)
    out.write_text("mine\n")                 # a file of the user's, there before the save
    with pytest.raises(CSVError, match="is not a profile ptui wrote.*--session s --resume"):
        save_profile(out, store, "s")
    assert out.read_text() == "mine\n" and not list(tmp_path.glob("p.csv.~*"))   # never renamed
    out.unlink()
    assert save_profile(out, store, "s") == f"2 finished modes saved to {out}"
    assert save_profile(out, store, "s") == f"2 finished modes saved to {out}"     # its own
    assert len(out.read_text().splitlines()) == 3
    other = tmp_path / "q.csv"                # another session's profile: ptui's, kept aside
    other.write_text(out.read_text().replace(",s\n", ",t\n").replace(",s,", ",t,"))
    msg = save_profile(other, store, "s")
    assert msg == f"2 finished modes saved to {other} (the file that was there is kept as {other}.~1~)"


def _settle(tmp_path, watts, every=5):
    """measure() with the default settings on power samples `watts` (its last repeated), one per
    `every` minibatches of 100 ms from the switch on: (settle_s, stable)."""
    from ptui.core.board.backends.base import MinibatchEvent, Telemetry
    from ptui.core.clock import VirtualClock
    be = SimJetson(ORIN, seed=1, clock=VirtualClock(50.0))
    d = tmp_path / f"{len(list(tmp_path.iterdir()))}"
    d.mkdir()
    _store, prof, _info = session(d, be, plan=PLAN[:1])

    def events():
        t = be.clock.now()
        for k in range(2000):
            at = t + 0.1 * (k + 1)
            yield MinibatchEvent(at, 100.0, k)
            if k % every == every - 1:
                yield Telemetry(at, watts[min(k // every, len(watts) - 1)])
    r = prof.measure(events(), PLAN[0])
    _settle.last = r
    return round(r.settle_s, 6), r.stable


def test_power_is_stable_when_four_samples_in_a_row_are_within_3_percent(tmp_path):
    """The protocol's settling rule, with its default settings: a window of 4 power samples whose
    spread is within 3 % of their mean, at least 1 s after the switch; no more than 30 s."""
    # samples at 0.5, 1.0, ... s: 20..20.5 (2.5 %) is stable at the 5th sample
    assert _settle(tmp_path, [30, 20, 20.2, 20.4, 20.5]) == (2.5, True)
    # then at least 40 minibatches that started after it and 5 power samples: here 4 s of them
    assert (_settle.last.n_minibatches, _settle.last.n_power) == (40, 7)
    # 20..20.7 (3.4 %) is not; 20.3..20.7 (1.9 %) one sample later is
    assert _settle(tmp_path, [30, 20, 20.3, 20.6, 20.7]) == (3.0, True)
    # never within 3 % (a 4 % saw-tooth): recorded as unstable after 30 s
    settle, stable = _settle(tmp_path, [20, 20.8] * 100)
    assert not stable and 30.0 <= settle <= 30.5               # the first sample from 30 s on
    # samples every 0.2 s, steady at once: still not before 1 s after the switch
    assert _settle(tmp_path, [20], every=2) == (1.0, True)
    # power read slowly (every 2 s): recording goes on until the 5th sample
    assert _settle(tmp_path, [20], every=20)[1] and _settle.last.n_power == 5
    assert _settle.last.n_minibatches > 40
    with pytest.raises(AttributeError):
        ProfileConfig().window = 3                    # fixed once made (shared with the UI)


def test_the_clock_may_start_anywhere(tmp_path):
    """A board's clock is the time since boot (days): the mode timeout counts from the switch."""
    from ptui.core.clock import VirtualClock
    be = SimJetson(ORIN, seed=1, clock=VirtualClock(3 * 86400.0))
    store, prof, info = session(tmp_path, be, plan=PLAN[:2])
    res = prof.run(info)
    assert [r.mode for r in res] == PLAN[:2] and store.get_session("s").status == "done"


def test_the_hottest_zone_is_named(tmp_path):
    from ptui.core.board.backends.base import Telemetry
    from ptui.core.clock import VirtualClock
    be = SimJetson(ORIN, seed=1, clock=VirtualClock(10.0))
    _store, prof, _info = session(tmp_path, be, plan=PLAN[:1])

    def events():
        t = be.clock.now()
        yield Telemetry(t + 0.5, 20.0, temps={"CPU-therm": 91.5, "GPU-therm": 86.0, "SOC": 60.0})
    with pytest.raises(ThermalLimit, match=r"CPU-therm reached 91.5 °C"):
        prof.measure(events(), PLAN[0])


def test_a_script_with_slow_steps_extends_the_mode_timeout(tmp_path):
    """A source (a user's script) may need longer per mode than the default limit: the larger
    of the two counts; without one, the config's limit stops the mode."""
    from types import SimpleNamespace

    from ptui.core.board.backends.base import MinibatchEvent, Telemetry
    from ptui.core.clock import VirtualClock
    be = SimJetson(ORIN, seed=1, clock=VirtualClock(10.0))
    _store, prof, _info = session(tmp_path, be, plan=PLAN[:1])
    prof.cfg = ProfileConfig(mode_timeout_s=20.0, min_minibatches=3, min_power_samples=1)

    def slow():                                           # one 10 s step at a time
        t = be.clock.now()
        for k in range(10):
            at = t + 10.0 * (k + 1)
            be.clock.sleep_until(at)
            yield Telemetry(at - 5, 20.0)
            yield MinibatchEvent(at, 10000.0, k)
    prof.source = SimpleNamespace(mode_timeout_s=100.0)
    r = prof.measure(slow(), PLAN[0])
    assert r.n_minibatches == 3
    prof.source = None
    with pytest.raises(ProfileError, match="no result after 20 s"):
        prof.measure(slow(), PLAN[0])


def test_a_session_is_held_by_the_process_that_runs_it(tmp_path):
    import os

    from ptui.core.board.locks import holder, session_key
    be = SimJetson(ORIN, seed=1)
    assert holder(session_key("held-here")) is None
    store, prof, info = session(tmp_path, be, plan=PLAN[:1], name="held-here")
    assert holder(session_key("held-here")) == os.getpid()   # taken when opened
    prof.run(info)
    assert holder(session_key("held-here")) is None          # given back when the run ends


def test_a_prepared_run_that_never_starts_lets_its_session_go(tmp_path):
    """prepare() takes the session's lock; closing a run that never started (the app's worker
    failing after prepare, a CLI error before run) releases it, so a later --resume in this
    process, or in another, is not refused as 'running'."""
    from ptui.core.board import locks
    from ptui.core.usecases.profile import ProfileRequest, ProfileRun
    run = ProfileRun(ProfileRequest(workload="lstm", count=2, session="never", out=tmp_path / "p.csv"))
    run.open_backend("sim", "orin-agx")
    run.prepare()
    assert locks.holder(locks.session_key("never")) is not None
    run.close()
    assert locks.holder(locks.session_key("never")) is None
    again = ProfileRun(ProfileRequest(session="never", resume=True, out=tmp_path / "p.csv"))
    again.open_backend("sim", "orin-agx")
    again.prepare()
    assert again.run().status == "done"
    assert locks.holder(locks.session_key("never")) is None


def test_an_abort_stops_the_measurement_under_way(tmp_path):
    """An abort (the app's x or q) during a mode stops that mode's measurement at once: no row
    for it, the board restored; it does not wait for the mode to finish first."""
    class Aborting(SimJetson):
        control = None

        def events(self, interval=None):
            for n, ev in enumerate(super().events(interval)):
                if n == 20:
                    self.control.abort()
                yield ev
    be = Aborting(ORIN)
    store, prof, info = session(tmp_path, be)
    be.control = prof.control
    with pytest.raises(ProfileAborted):
        prof.run(info)
    assert store.done_indices("s") == set() and be.current_mode() == START


def test_open_session_that_fails_lets_the_session_go(tmp_path):
    from ptui.core.board import locks
    store, prof, info = session(tmp_path, SimJetson(ORIN))
    locks.unlock_session("s")
    with pytest.raises(SessionError):
        open_session(store, "s", resume=True, device=get_device("orin-nano"), workload=WL, seed=1,
                     backend_kind="sim", plan_fn=None, original_mode=None, params={})
    assert locks.holder(locks.session_key("s")) is None


def test_the_csv_gives_the_share_of_the_cycle_outside_the_steps(tmp_path):
    store, prof, info = session(tmp_path, SimJetson(ORIN))
    r = dict(summarise(PLAN[0], [2.0] * 40, [20.0] * 5, 1.0, 3.0, True).row(), cycle_ms=8.0)
    store.save_result("s", 0, r, 1.0)
    (cells,) = profile_rows(store, "s")
    from ptui.core.profiling.profiler import PROFILE_HEADER
    row = dict(zip(PROFILE_HEADER, cells))
    assert row["cycle_ms"] == "8" and row["outside_pct"] == "75.0"


def test_active_profiling_decides_on_the_time_basis_asked_for(tmp_path):
    """With --time cycle the planner is given each row's whole cycle as its time, also where the
    share outside the steps is small (17 % here: auto would decide on the step)."""
    seen = []

    class Planner:
        count, goal = 2, None

        def next_mode(self, rows):
            seen.append([r["time_ms"] for r in rows])
            return None
    store, prof, info = session(tmp_path, SimJetson(ORIN), plan=PLAN[:1])
    prof.planner, prof.time_basis = Planner(), "cycle"
    prof.progress = type("P", (), {"phase": "", "total": 1})()
    r = dict(summarise(PLAN[0], [2.0] * 40, [20.0] * 5, 1.0, 3.0, True).row(), cycle_ms=2.4)
    store.save_result("s", 0, r, 1.0)
    assert prof._extend(list(info.plan)) == []
    assert seen == [[2.4]]


def test_the_cycle_is_the_mean_minibatch_plus_what_the_source_timed_outside_the_steps(tmp_path):
    """cycle_ms, wall time per step: the window's mean minibatch time, plus the work a source (a
    what-if) measured outside the steps; nothing is added without such a source."""
    from types import SimpleNamespace

    from ptui.core.board.backends.base import MinibatchEvent, Telemetry
    from ptui.core.clock import VirtualClock
    be = SimJetson(ORIN, seed=1, clock=VirtualClock(10.0))
    _store, prof, _info = session(tmp_path, be, plan=PLAN[:1])
    prof.cfg = ProfileConfig(min_minibatches=4, min_power_samples=2, window=2, min_settle_s=0.0)

    def events():
        t = be.clock.now()
        for k in range(40):
            yield Telemetry(t + 0.1 * k + 0.05, 20.0)
            yield MinibatchEvent(t + 0.1 * (k + 1), 90.0 + 20 * (k % 2), k)
    r = prof.measure(events(), PLAN[0])
    assert r.cycle_ms == pytest.approx(100.0) and r.n_minibatches == 4
    seen = []
    prof.source = SimpleNamespace(outside_ms=lambda mode: seen.append(mode) or 7.5)
    r = prof.measure(events(), PLAN[0])
    assert r.cycle_ms == pytest.approx(107.5) and seen == [PLAN[0]]
    assert prof.measure(events(), PLAN[0], record=False) is None and seen == [PLAN[0]]
