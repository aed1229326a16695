"""Active profiling over the joint (mode, batch size) space (issue 11): the planner, the CLI, its
refusals and kill -9 + resume."""
import re
import subprocess
import sys

import numpy as np
import pytest

from ptui.core.board.physics import steady_state
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload
from ptui.core.decision.batch import BatchError, SamplesToTarget
from ptui.core.prediction.predictor import load_bundled
from ptui.core.profiling.active import ActivePlanner, Goal, Space, joint_active_offline
from tests.functional.test_profiler import _rows
from tests.support.cli import PY, kill_9_after_progress_lines, subprocess_env

ORIN = get_device("orin-agx")
SIZES = (8, 16, 32, 64)


def truth(wl="resnet18"):
    """Noise-free time and power of the simulator for (mode, batch)."""
    w = get_workload(wl)

    def f(m, b):
        A = np.array([m.as_tuple()], float)
        op = steady_state(ORIN, w.with_batch(b), A[:, 0], A[:, 1], A[:, 2], A[:, 3], batch_size=b)
        return float(np.asarray(op.time_ms)[0]), float(np.asarray(op.power_w)[0])
    return f


def true_optimum(f, rel, budget, modes):
    """Least true time to target within the budget over every (mode, batch) pair."""
    best = np.inf
    for b in SIZES:
        r = float(rel.relative(b, max(SIZES)))
        for m in modes:
            t, p = f(m, b)
            if p <= budget:
                best = min(best, t / b * r)
    return best


@pytest.mark.slow
@pytest.mark.parametrize("budget,noise", [(30.0, 16.0), (20.0, None)])
def test_joint_active_finds_the_best_pair_in_few_profiles(budget, noise):
    """A decision within 2 % of the true optimum over (mode, batch size), from at most 30 pairs
    chosen for the goal (random pairs need about 100 for 2 %; docs/accuracy.md)."""
    f = truth()
    rel = SamplesToTarget.from_noise_scale(noise) if noise else SamplesToTarget.throughput()
    modes = ORIN.pt_grid()
    order, why, pl = joint_active_offline(ORIN, modes, SIZES, f, goal={"budget_w": budget},
                                          rel=rel, count=30, reference=load_bundled())
    assert why and len(order) <= 30 and len(set(order)) == len(order)
    assert len({b for _, b in order}) >= 2                       # it explored the batch knob
    rows = [dict(zip(("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"), m.as_tuple()), batch_size=b,
                 time_ms=f(m, b)[0], power_w=f(m, b)[1]) for m, b in order]
    m, b = pl.candidates[pl.decide(rows)]
    t, p = f(m, b)
    assert p <= budget + 1.0
    assert t / b * float(rel.relative(b, max(SIZES))) <= 1.02 * true_optimum(f, rel, budget, modes)


def test_the_objective_is_time_to_target_not_time_per_step():
    """The planner ranks pairs by time per step x relative samples / batch: with the noise-scale
    model the shift grows with the relation; with throughput only it is -log(batch)."""
    goal = Goal(budget_w=30.0)
    thr = ActivePlanner(ORIN, Space.joint(ORIN.pt_grid()[:10], SIZES, SamplesToTarget.throughput()), goal,
                        count=20)
    ns = ActivePlanner(ORIN, Space.joint(ORIN.pt_grid()[:10], SIZES, SamplesToTarget.from_noise_scale(8.0)),
                       goal, count=20)
    b = thr.A[:, 4]
    assert np.allclose(thr.shift, -np.log(b))
    assert np.allclose(ns.shift, np.log((1 + b / 8.0) / (1 + 64 / 8.0) / b))
    with pytest.raises(BatchError, match="deadline"):
        ActivePlanner(ORIN, Space.joint(ORIN.pt_grid(), SIZES, SamplesToTarget.throughput()),
                      Goal(deadline_ms=100.0), count=20)


@pytest.mark.parametrize("rel", [SamplesToTarget.throughput(), SamplesToTarget.from_noise_scale(64)])
def test_start_design_spans_the_batch_axis(rel):
    """The reference knows one batch size; the start's plausibility filter must not rule a size
    out for it (it used to take a step as the same at every size, which left batch 8 and 16 out
    of the start and the GP extrapolating along the batch axis)."""
    pl = ActivePlanner(ORIN, Space.joint(ORIN.pt_grid(), SIZES, rel), Goal(budget_w=30), count=40,
                       reference=load_bundled())
    sizes = {b for _, b in pl.initial()}
    assert min(SIZES) in sizes and max(SIZES) in sizes, sizes


@pytest.mark.slow
def test_cli_active_over_batch_sizes(cli, tmp_path):
    out = tmp_path / "a.csv"
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--batch-sizes",
                     "8,16,32,64", "--strategy", "active", "--budget-w", "30", "--noise-scale", "64",
                     "--count", "16", "--out", out)
    assert rc == 0, err
    # the goal as the decision over batch sizes says it (per target, not per minibatch)
    assert "active profiling for the goal 'least time to target within 30 W'" in err
    assert "noise-scale model" in err and "stopped:" in err
    assert "best measured (mode, batch size) pair for the goal:" in err
    assert " · batch " in err                                  # each progress line names its size
    lines = out.read_text().splitlines()
    head = lines[0].split(",")
    pairs = [tuple(r.split(",")[:4]) + (r.split(",")[head.index("batch_size")],) for r in lines[1:]]
    assert 6 < len(pairs) <= 16 and len(set(pairs)) == len(pairs)
    assert len({p[-1] for p in pairs}) >= 2


@pytest.mark.parametrize("args,why", [
    (["--strategy", "active", "--deadline-ms", "100"], "per-minibatch deadline"),
    (["--strategy", "active"], "needs a goal"),
    (["--strategy", "space-filling", "--budget-w", "30"], "not supported"),
    (["--noise-scale", "64"], "steer an active profile"),
    (["--strategy", "active", "--budget-w", "30", "--noise-scale", "64",
      "--samples-to-target", "x.csv"], "not both"),
    (["--strategy", "active", "--budget-w", "30", "--samples-to-target", "missing.csv"],
     "cannot read"),
    # too few pairs for a fit over batch sizes, and more than there are (used to be a MemoryError)
    (["--strategy", "active", "--budget-w", "30", "--count", "5"], "between 10 and"),
    (["--strategy", "active", "--budget-w", "30", "--count", "1000000000000"], "between 10 and"),
])
def test_cli_active_over_batch_sizes_refuses_bad_input(cli, tmp_path, args, why):
    rc, out, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--batch-sizes",
                       "8,16", *args, "--out", tmp_path / "x.csv")
    assert rc == 2 and why in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("sizes,why", [
    ("8,4096", "only 8 of 8,4096 does (memory: 61.5 GB"),     # used to hide which size did not fit
    ("16", "needs at least two sizes: give --batch-sizes"),
])
def test_active_over_too_few_fitting_sizes_says_which(cli, tmp_path, sizes, why):
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--batch-sizes",
                     sizes, "--strategy", "active", "--budget-w", "30", "--out", tmp_path / "x.csv")
    assert rc == 2 and why in err and "Traceback" not in err, err
    assert "largest resnet18 batch that fits: 647" in err or sizes == "16"


def test_noise_scale_without_batch_sizes_is_refused(cli, tmp_path):
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--noise-scale",
                     "64", "--out", tmp_path / "x.csv")
    assert rc == 2 and "go with --batch-sizes" in err


@pytest.mark.slow
def test_joint_active_kill_9_then_resume_equals_uninterrupted(tmp_path):
    env = subprocess_env(tmp_path)
    base = [PY, "-m", "ptui", "profile", "--device", "orin-agx", "--workload", "resnet18",
            "--batch-sizes", "8,16,32,64", "--strategy", "active", "--objective", "energy",
            "--count", "14", "--seed", "2"]
    r = subprocess.run(base + ["--session", "ref", "--out", str(tmp_path / "ref.csv")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # past the space-filling start: chosen pairs
    kill_9_after_progress_lines(base + ["--session", "k", "--out", str(tmp_path / "k.csv")],
                                env, 10)
    r = subprocess.run([PY, "-m", "ptui", "profile", "--session", "k", "--resume", "--batch-sizes",
                        "8,16,32,64", "--out", str(tmp_path / "k.csv")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "stopped:" in r.stderr
    assert sorted(_rows(tmp_path / "k.csv")) == sorted(_rows(tmp_path / "ref.csv"))



def test_ctrl_c_while_choosing_the_next_pair_saves_and_says_how_to_resume(tmp_path, monkeypatch):
    """Ctrl-C between pairs (the planner refitting) ended the command with 'interrupted' and no
    resume hint; now it ends as during a pair: the finished pairs saved, the run aborted."""
    monkeypatch.setenv("PTUI_DATA_DIR", str(tmp_path / "data"))
    from ptui.core.usecases.profile import ProfileRequest, ProfileRun
    req = ProfileRequest(workload="resnet18", count=12, session="c", out=tmp_path / "c.csv",
                         strategy="active", budget_w=30.0)
    run = ProfileRun(req, (8, 16, 32, 64))
    run.open_backend("sim", "orin-agx")
    run.prepare()
    start = len(run.store.get_session("c").plan)           # the space-filling start

    def interrupted(rows):
        raise KeyboardInterrupt
    run.planner.next_mode = interrupted
    res = run.run()
    assert res.status == "aborted" and res.interrupted and res.n_rows == start
    assert len((tmp_path / "c.csv").read_text().splitlines()) == start + 1


@pytest.mark.slow
def test_tune_over_batch_sizes_json_and_apply(cli, tmp_path):
    """`ptui tune --batch-sizes`: active over (mode, batch), fit, the joint decision, applied and
    verified on the simulated board; the pick is within 2 % of the true optimum and the budget."""
    import json
    rc, out, err = cli("tune", "--device", "orin-agx", "--workload", "resnet18", "--batch-sizes",
                       "8,16,32,64", "--budget-w", "30", "--noise-scale", "64", "--count", "30",
                       "--apply", "--json", "--out", tmp_path / "t.csv")
    assert rc == 0, err
    d = json.loads(out)
    assert d["applied"] and "verified" in d["apply_message"]
    assert d["profiled"] <= 30 and d["batch_size"] in SIZES and d["predicted"]["time_ms"] > 0
    assert "(risk 0.05)" in d["goal"]
    m = ORIN.mode(d["mode"]["cores"], d["mode"]["cpu_mhz"], d["mode"]["gpu_mhz"], d["mode"]["mem_mhz"])
    f = truth()
    rel = SamplesToTarget.from_noise_scale(64)
    t, p = f(m, d["batch_size"])
    assert p <= 31.0
    assert t / d["batch_size"] * float(rel.relative(d["batch_size"], 64)) <= \
        1.02 * true_optimum(f, rel, 30.0, ORIN.pt_grid())
    assert d["baselines"]["best_mode_at_default_batch"]["batch_size"] == d["default_batch"] == 16
    assert d["samples_to_target"].startswith("noise")
    assert d["baselines"]["best_preset"] is not None and "maxn" in d["baselines"]
    # one answer: the best measured pair is the pick, or the JSON says why not
    bm = d["best_measured"]
    assert bm["is_pick"] == (bm["why"] == "the pick") and (bm["is_pick"] or "not taken" in bm["why"])
    assert bm["is_pick"] == (bm["mode"] == d["mode"] and bm["batch_size"] == d["batch_size"])


@pytest.mark.parametrize("args,why", [
    (["--batch-sizes", "8,16", "--deadline-ms", "100"], "different work at each batch size"),
    (["--noise-scale", "64", "--budget-w", "30"], "go with --batch-sizes"),
    # a profile the fit after it could never use: refused before any device time is spent
    (["--batch-sizes", "8,16,32", "--budget-w", "30", "--count", "4"], "at least 10 (mode, batch"),
    (["--budget-w", "30", "--count", "4"], "at least 6 modes"),
])
def test_tune_over_batch_sizes_refuses_bad_input(cli, tmp_path, args, why):
    rc, _, err = cli("tune", "--device", "orin-agx", "--workload", "resnet18", *args,
                     "--out", tmp_path / "t.csv")
    assert rc == 2 and why in err and "Traceback" not in err, err
    assert not (tmp_path / "t.csv").exists()


@pytest.mark.slow
def test_tune_resume_decides_for_what_the_group_was_profiled_for(cli, tmp_path):
    """A resumed `tune` over batch sizes decides with the group's stored relation and workload
    (it used to decide on throughput only, for workload 'script'), and a different goal or noise
    scale on the resume is refused before any profiling."""
    import json
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--batch-sizes",
                     "8,16,32", "--strategy", "active", "--budget-w", "30", "--noise-scale", "16",
                     "--count", "12", "--session", "g", "--out", tmp_path / "g.csv")
    assert rc == 0, err
    for args, why in ((["--budget-w", "25"], "profiled for 'fastest within 30 W'"),
                      (["--budget-w", "30", "--noise-scale", "8"], "profiled with --noise-scale 16")):
        rc, _, err = cli("tune", "--session", "g", "--resume", *args, "--method", "gp")
        assert rc == 2 and why in err and "Traceback" not in err, err
    rc, out, err = cli("tune", "--session", "g", "--resume", "--budget-w", "30", "--method", "gp",
                       "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["samples_to_target"].startswith("noise") and "16" in d["samples_to_target"]
    with open(tmp_path / "g.csv") as fh:               # every pair the group profiled, no more
        assert d["profiled"] == sum(1 for _ in fh) - 1 <= 12
    assert d["target_samples"] == 50_000          # resnet18's epoch, not a script's 1,000


@pytest.mark.slow
def test_an_interrupted_tune_resumes_as_a_tune(cli, tmp_path, monkeypatch):
    """Ctrl-C during `ptui tune` names the tune command that resumes it (profile, fit and
    decision), not a `ptui profile` that would stop after profiling; the hint works."""
    import shlex

    from ptui.core.usecases.profile import ProfileRun
    real = ProfileRun._size
    calls = []

    def interrupted(self, *args, **kw):          # Ctrl-C as the second size's session opens
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, *args, **kw)
    monkeypatch.setattr(ProfileRun, "_size", interrupted)
    rc, _, err = cli("tune", "--device", "orin-agx", "--workload", "resnet18", "--batch-sizes",
                     "8,16,32", "--budget-w", "30", "--count", "12", "--method", "gp",
                     "--session", "tk", "--out", tmp_path / "t.csv")
    assert rc == 130, err
    hint = err.split("resume with: ")[1].strip().splitlines()[0]
    assert hint.startswith("ptui tune --session tk --resume --budget-w 30 --method gp"), hint
    monkeypatch.setattr(ProfileRun, "_size", real)
    rc, out, err = cli(*shlex.split(hint)[1:], "--json")
    assert rc == 0, err
    assert '"batch_size"' in out


def test_an_infeasible_budget_over_batch_sizes_names_a_pair_per_step():
    """The closest option over batch sizes is a (mode, batch) pair with its time per step (it used
    to print the time per sample as if per step, with no batch size)."""
    from ptui.core.decision.pareto import InfeasibleError, Table, choose
    grid = ORIN.pt_grid()
    t = Table([grid[0], grid[1]], np.array([160.0, 300.0]), np.array([12.0, 11.0]),
              np.array([1.0, 1.0]), np.array([0.2, 0.2]), np.array([True, True]), np.array([16, 32]))
    with pytest.raises(InfeasibleError, match=rf"lowest-power pair is {re.escape(grid[1].describe())} at batch 32: "
                                              r"11.0 W \(±0.2\), 300 ms per step"):
        choose(t, relation=SamplesToTarget.throughput(), budget_w=5)


def test_tune_over_batch_sizes_ranks_cautiously():
    """tune's decision over batch sizes ranks as single-size tune does: a predicted pair with a wide
    sd that is barely better on its median does not beat a measured pair."""
    from ptui.core.decision.pareto import Table, choose
    grid = ORIN.pt_grid()
    modes = [grid[0], grid[1]]
    t = Table(modes, np.array([100.0, 99.8]), np.array([20.0, 20.0]), np.array([0.5, 8.0]),
              np.array([0.1, 0.1]), np.array([True, False]), np.array([16, 16]))
    rel = SamplesToTarget.throughput()
    assert choose(t, relation=rel, budget_w=30).index == 1                 # the median alone
    pick = choose(t, relation=rel, budget_w=30, cautious=True)
    assert pick.index == 0 and pick.best_measured == 0 and pick.why == "the pick"  # tune: the measured one
    # as single-size tune: the best measured pair and why the pick is not it, in the table's rows
    t2 = Table(modes + [grid[2]], np.array([100.0, 60.0, 90.0]), np.array([20.0, 20.0, 29.99]),
               np.array([0.5, 2.0, 0.4]), np.array([0.1, 0.2, 0.1]), np.array([True, False, True]),
               np.array([16, 16, 16]))
    pick = choose(t2, relation=rel, budget_w=30, cautious=True, restrict=np.array([True, True, True]))
    assert pick.index == 1 and pick.best_measured == 2 and "exceeds 30 W" in pick.why


def test_tune_decide_batches_passes_the_cautious_ranking(monkeypatch, tmp_path):
    from ptui import core
    from ptui.core.decision import batch
    from ptui.core.usecases import decide
    from ptui.core.usecases.fit import FitOutcome
    seen = {}

    class Stop(Exception):
        pass

    def fake_decide(*args, **kw):
        seen.update(kw)
        raise Stop

    class FakeModel:
        meta = {"trained_on": {"modes": 10}}

        def save(self, out):
            pass

        def decision_space(self):
            return [], None
    monkeypatch.setattr(batch, "decide", fake_decide)
    monkeypatch.setattr(decide, "fit", lambda *a, **k: FitOutcome(
        FakeModel(), tmp_path / "m", 10, 0.0, [8, 16]))
    with pytest.raises(Stop):
        core.tune_decide_batches(tmp_path / "p.csv", ORIN, (8, 16), budget_w=30,
                                 model_dir=tmp_path / "m")
    assert seen.get("cautious") is True


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_tune_over_batch_sizes_names_the_best_measured_pair_in_words(cli, tmp_path):
    """tune over batch sizes said 'best measured (mode, batch size) for the goal:
    6c/2201.6/522.75/3199 at batch 32', a compact key, below the pick's mode in words."""
    rc, out, err = cli("tune", "--device", "orin-agx", "--workload", "resnet18", "--batch-sizes",
                       "8,32", "--budget-w", "30", "--count", "12", "--out", tmp_path / "t.csv")
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("best measured (mode, batch size)"))
    assert not re.search(r"\d+c/[\d.]+/[\d.]+/[\d.]+", line), line
    m = re.search(r"for the goal: (.+) at batch \d+ \(", line)
    assert m and any(x.describe() == m[1] for x in ORIN.full_space()), line
