"""The evaluation's independent corpus generator (benchmarks/indep_corpus.py): seeded, readable by
ptui as a profile, calibrated to the published figures it claims, and not ptui's physics."""
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import indep_corpus as ic  # noqa: E402

from ptui.core.board.csvio import read_profile  # noqa: E402
from ptui.core.catalogue.devices import get_device  # noqa: E402


def test_same_seed_same_file_other_seed_differs(tmp_path):
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    ic.write_corpus(a, "orin-nano", "gru-speech", seed=3)
    ic.write_corpus(b, "orin-nano", "gru-speech", seed=3)
    ic.write_corpus(c, "orin-nano", "gru-speech", seed=4)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_corpus_is_a_ptui_profile_of_the_whole_grid(tmp_path):
    f = tmp_path / "nano.csv"
    dev = get_device("orin-nano")
    n = ic.write_corpus(f, "orin-nano", "vit-tiny")
    modes, t, p = read_profile(f, dev)
    assert n == len(modes) == len(dev.pt_grid())
    assert set(modes) == set(dev.pt_grid())
    assert np.all(t > 0) and np.all(p > 0)
    assert f.read_text().splitlines()[1].endswith(",indep-vit-tiny,32,indep-orin-nano-vit-tiny-s0,,,")


def test_orin_agx_calibration_matches_published_ranges():
    dev = get_device("orin-agx")
    grid = dev.pt_grid()
    t, p, _ = ic.truth(dev, ic.JOBS["resnet50"], grid)
    mx = grid.index(dev.maxn)
    assert 45 <= p[mx] <= 58                 # ResNet-like CNN at MAXN ~50 W
    assert 9 <= p.min() <= 13                # slowest modes ~10-12 W
    assert 15 <= t.max() / t.min() <= 40     # 20-40x time spread over the grid


@pytest.mark.parametrize("job", sorted(ic.JOBS))
def test_more_gpu_clock_is_never_slower_and_never_cheaper(job):
    dev = get_device("orin-agx")
    for cores, cpu, emc in ((8, 1497.6, 3199), (2, 268.8, 204), (12, 2201.6, 665.6)):
        base = np.array([[cores, cpu, g, emc] for g in dev.gpu_mhz])
        t, p, _ = ic.truth(dev, ic.JOBS[job], base)
        assert np.all(np.diff(t) <= 1e-9 * t[:-1])
        assert np.all(np.diff(p) > 0)


def test_not_ptuis_physics():
    """The same grid through ptui's simulator and through the generator: different surfaces
    (a generator that reproduced physics.py would make the 'independent' evaluation moot)."""
    from ptui.core.board.physics import steady_state
    from ptui.core.catalogue.workloads import get_workload
    dev = get_device("orin-agx")
    A = np.array([m.as_tuple() for m in dev.pt_grid()], float)
    t_sim = steady_state(dev, get_workload("resnet18"), *A.T).time_ms
    t_ind, _, _ = ic.truth(dev, ic.JOBS["resnet50"], A)
    r = np.log(t_ind) - np.log(t_sim)
    assert np.std(r) > 0.1                  # not a constant rescaling of the simulator


def test_header_is_ptuis_profile_header():
    from ptui.core.profiling.profiler import PROFILE_HEADER
    assert tuple(ic.HEADER) == tuple(PROFILE_HEADER)
