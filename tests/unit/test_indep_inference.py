"""Inference on the independent generator (benchmarks/indep_inference.py, SYNTHETIC): seeded,
monotone where its physics says, MAXN the fastest, near the measured MAXN sweep, not ptui's physics."""
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import indep_inference as ii  # noqa: E402

from ptui.core.catalogue.devices import get_device  # noqa: E402
from ptui.core.catalogue.inference import INFER_BATCHES, INFERENCE  # noqa: E402

DEV = get_device("orin-agx")
GRID = DEV.pt_grid()
TOP = np.array(DEV.maxn.as_tuple(), float)


def _along(axis: int, values) -> np.ndarray:
    """MAXN with one knob (cores, CPU, GPU, memory) swept over `values`."""
    a = np.tile(TOP, (len(values), 1))
    a[:, axis] = values
    return a


def test_covers_the_catalogue_inference_models():
    assert set(ii.INFER) == set(INFERENCE)


def test_same_seed_same_measurements_other_seed_differs_none_is_the_truth():
    modes = [GRID[0], DEV.maxn, GRID[len(GRID) // 2]]
    a = ii.standalone_measure(DEV, "resnet50", "yolov8n-det", seed=3)(modes)
    b = ii.standalone_measure(DEV, "resnet50", "yolov8n-det", seed=3)(modes)
    c = ii.standalone_measure(DEV, "resnet50", "yolov8n-det", seed=4)(modes)
    t = ii.standalone_measure(DEV, "resnet50", "yolov8n-det")(modes)
    for f in ("train_ms", "train_w", "infer_ms", "infer_w"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
        assert not np.array_equal(getattr(a, f), getattr(c, f))
        assert np.allclose(getattr(a, f), getattr(t, f), rtol=0.15)
    assert np.array_equal(t.infer_ms, ii.standalone_truth(DEV, "resnet50", "yolov8n-det", modes).infer_ms)
    # a mode reads the same whether measured alone or with others (the walk measures one at a time)
    one = ii.standalone_measure(DEV, "resnet50", "yolov8n-det", seed=3)([modes[2]])
    assert np.array_equal(one.infer_ms[0], a.infer_ms[2]) and one.train_w[0] == a.train_w[2]
    assert a.batches == INFER_BATCHES and a.train_batch == ii.JOBS["resnet50"].batch
    # the readings' standard error from their samples' spread: near power_sd, not the constant
    assert t.power_se is None and a.power_se is not None and a.power_se.shape == (3,)
    assert np.all(np.abs(a.power_se / 0.015 - 1.0) < 0.3) and len(set(a.power_se.tolist())) == 3
    assert one.power_se is not None and one.power_se[0] == a.power_se[2]


@pytest.mark.parametrize("name", sorted(ii.INFER))
def test_time_falls_as_any_clock_rises_and_grows_with_the_batch(name):
    job = ii.INFER[name]
    for axis, table in ((1, DEV.cpu_mhz), (2, DEV.gpu_mhz), (3, DEV.mem_mhz), (0, range(1, DEV.max_cores + 1))):
        for b in (1, 8, 64):
            t, _ = ii.infer_truth(DEV, job, b, _along(axis, np.array(table, float)))
            assert np.all(np.diff(t) <= 1e-9), (name, axis, b)
    t = np.array([ii.infer_truth(DEV, job, b, [DEV.maxn])[0][0] for b in INFER_BATCHES])
    assert np.all(np.diff(t) > 0)                                  # a larger minibatch takes longer
    assert np.all(np.diff(t / np.array(INFER_BATCHES)) < 0)        # ... and less per request


@pytest.mark.parametrize("name", sorted(ii.INFER))
def test_power_rises_with_the_gpu_clock_and_maxn_is_the_fastest_mode(name):
    job = ii.INFER[name]
    _, p = ii.infer_truth(DEV, job, 16, _along(2, np.array(DEV.gpu_mhz, float)))
    assert np.all(np.diff(p) > 0)
    mx = GRID.index(DEV.maxn)
    for b in (1, 64):
        t, p = ii.infer_truth(DEV, job, b, GRID)
        assert t[mx] <= t.min() * (1 + 1e-12)
        assert 5.0 < p.min() and p.max() < 70.0


@pytest.mark.skipif(not ii.SWEEP_CSV.exists(), reason="the measured sweep is not on this machine")
def test_loosely_calibrated_to_the_measured_maxn_sweep():
    for name, (tm, tw, pm, pw) in ii.calibration().items():
        assert tm < 10.0 and tw < 20.0 and pm < 8.0 and pw < 16.0, name


def test_not_ptuis_physics():
    import ast
    tree = ast.parse((ROOT / "benchmarks" / "indep_inference.py").read_text())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    ptui = {m for m in mods if m and m.startswith("ptui")}
    assert ptui and all(m.startswith(("ptui.core.catalogue", "ptui.core.decision.concurrent")) for m in ptui)
