"""One fit for both faces: `ptui fit` and the Fine-tune screen (core.fit, run in the app's child
process) give the same model for the same profile: its batch sizes, its epoch size, what was timed."""
import pytest

from ptui import core
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.workloads import get_workload

AGX = get_device("orin-agx")


def _profile(cli, tmp_path, *knobs, count="12"):
    out = tmp_path / "p.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "resnet18",
                     *knobs, "--count", count, "--session", "p", "--out", out)
    assert rc == 0, err
    return out


def test_the_apps_fit_counts_the_profiles_own_batch_size_per_epoch(cli, tmp_path):
    """A ResNet-18 profile at batch 32: an epoch is 1563 minibatches of 32, not batch 16's 3125
    (the app's fit gave twice `ptui fit`'s epoch time for the same predicted step)."""
    prof = _profile(cli, tmp_path, "--batch-size", "32")
    res = core.fit(AGX, prof, workload=None, out=tmp_path / "app", method="gp")
    rc, _, err = cli("fit", "--device", "orin-agx", "--profile", prof, "--out", tmp_path / "cli",
                     "--method", "gp")
    assert rc == 0, err
    want = get_workload("resnet18").with_batch(32).minibatches_per_epoch
    app = core.load_predictions(res.out, AGX)
    cli_ = core.load_predictions(tmp_path / "cli", AGX)
    assert app.batches_per_epoch == cli_.batches_per_epoch == want
    assert res.model.meta["batch_size"] == 32 and app.workload == "resnet18"
    assert app.timed == cli_.timed and app.timed


def test_the_apps_fit_of_a_two_size_profile_keeps_the_batch_sizes(cli, tmp_path):
    """A profile over batch sizes 8 and 32 is fitted over (mode, batch size), as `ptui fit` does,
    not as one surface of modes that ignores the batch size."""
    prof = _profile(cli, tmp_path, "--batch-sizes", "8,32", count="16")
    res = core.fit(AGX, prof, workload=None, out=tmp_path / "app", method="gp")
    assert res.model.batch_sizes == [8, 32]
    assert res.sizes == [8, 32] and res.n_modes == 16
    pred = core.load_predictions(res.out, AGX)
    assert pred.space is not None
    m = AGX.pt_grid()[:5]
    t8 = res.model.predict(m, batch_size=8)["time_ms"]
    t32 = res.model.predict(m, batch_size=32)["time_ms"]
    assert (t32 > 2 * t8).all()


def test_scratch_over_several_batch_sizes_is_refused_in_one_line(cli, tmp_path):
    from ptui.core.errors import InputError
    prof = _profile(cli, tmp_path, "--batch-sizes", "8,32", count="10")
    with pytest.raises(InputError, match="--scratch trains a network"):
        core.fit(AGX, prof, workload=None, out=tmp_path / "m", scratch=True)


def test_tunes_fit_says_how_many_modes_it_fits(cli, tmp_path):
    """tune's progress names how many profiled modes (or pairs) it fits, not only the file."""
    said = []
    prof = _profile(cli, tmp_path, "--batch-size", "16")
    core.tune_decide(prof, AGX, budget_w=30, method="gp", model_dir=tmp_path / "m",
                        progress=said.append)
    assert f"fitting time and power (gp) on 12 profiled modes of {prof}" in said, said
    assert said[0].kind == "stage"
