"""Model directories: ptui replaces only its own, and notices edited, swapped or broken files."""
import json
import os

import numpy as np
import pytest

from ptui.core.prediction.predictor import ModelError, bundled_reference, load_model

HDR = "cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n"


@pytest.fixture(scope="module")
def ref():
    return load_model(bundled_reference())


@pytest.fixture
def profile(tmp_path):
    """A 12-mode profile from the simulator's physics (enough for fit)."""
    from ptui.core.board.csvio import mode_cells
    from ptui.core.board.physics import steady_state
    from ptui.core.catalogue.devices import get_device
    from ptui.core.catalogue.workloads import get_workload
    dev = get_device("orin-agx")
    modes = dev.pt_grid()[::360][:12]
    a = np.array([m.as_tuple() for m in modes])
    ss = steady_state(dev, get_workload("resnet18"), a[:, 0], a[:, 1], a[:, 2], a[:, 3])
    lines = [",".join(mode_cells(m) + [f"{t:.3f}", f"{p:.3f}"])
             for m, t, p in zip(modes, ss.time_ms, ss.power_w)]
    f = tmp_path / "p.csv"
    f.write_text(HDR + "\n".join(lines) + "\n")
    return f


def _no_training(monkeypatch):
    """Fail the test if a command gets as far as training."""
    from ptui.core.prediction import train

    def boom(*a, **k):
        raise AssertionError("trained before refusing --out")
    monkeypatch.setattr(train, "transfer", boom)
    monkeypatch.setattr(train, "build_reference", boom)


def test_fit_refuses_a_directory_ptui_did_not_write(tmp_path, profile, cli, monkeypatch):
    _no_training(monkeypatch)
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "train.py").write_text("print('mine')\n")
    (tmp_path / "sibling").mkdir()
    (tmp_path / "sibling" / "notes.txt").write_text("keep me")
    monkeypatch.chdir(work)
    for out in (work / "src", ".", "..", str(tmp_path), tmp_path / "sibling"):
        rc, _, err = cli("fit", "--device", "orin-agx", "--profile", profile, "--out", out)
        assert rc == 2, (out, err)
        assert err.count("\n") == 1 and "Traceback" not in err
    rc, _, err = cli("reference", "build", "--device", "orin-agx", "--profile", profile,
                     "--out", "..")
    assert rc == 2
    assert (work / "src" / "train.py").read_text() == "print('mine')\n"
    assert (tmp_path / "sibling" / "notes.txt").read_text() == "keep me"


def test_reference_build_refuses_before_training(tmp_path, cli, monkeypatch):
    _no_training(monkeypatch)
    monkeypatch.setattr("ptui.core.board.csvio.read_profile", lambda *a, **k: ([], None, None))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "data.bin").write_bytes(b"x")
    rc, _, err = cli("reference", "build", "--device", "orin-agx", "--profile", tmp_path / "x.csv",
                     "--out", tmp_path / "mine")
    assert rc == 2 and "not a ptui model directory" in err
    assert (tmp_path / "mine" / "data.bin").read_bytes() == b"x"


def test_save_replaces_only_its_own_model_dir(tmp_path, ref):
    ref.save(tmp_path / "m")
    ref.save(tmp_path / "m")                  # replacing a ptui model directory stays allowed
    assert load_model(tmp_path / "m").device.name == "orin-agx"
    (tmp_path / "m" / "my-notes.txt").write_text("mine")
    with pytest.raises(ModelError, match="did not write"):
        ref.save(tmp_path / "m")
    assert (tmp_path / "m" / "my-notes.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    ref.save(tmp_path / "empty")             # an empty directory holds nothing to lose
    assert load_model(tmp_path / "empty")
    (tmp_path / "f").write_text("a file")
    with pytest.raises(ModelError, match="not a model directory"):
        ref.save(tmp_path / "f")
    # nothing hidden left behind next to the model
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_stale_temporaries_of_a_killed_save_are_cleaned(tmp_path, ref):
    dead = 2 ** 22 + 12345                   # above pid_max on this machine: no such process
    stale = tmp_path / f".m.ptui-new-{dead}-abc123"
    stale.mkdir()
    (stale / "time.npz").write_bytes(b"half")
    ref.save(tmp_path / "m")
    assert not stale.exists()


def test_meta_records_checksums_and_edits_are_refused(tmp_path, ref):
    ref.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert set(meta["files"]) == {"time.npz", "power.npz"} and len(meta["digest"]) == 64
    meta["device"] = "xavier-agx"
    (tmp_path / "m" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="edited"):
        load_model(tmp_path / "m")


def test_swapped_weight_files_are_refused(tmp_path, ref, cli):
    ref.save(tmp_path / "m")
    t, p = tmp_path / "m" / "time.npz", tmp_path / "m" / "power.npz"
    a, b = t.read_bytes(), p.read_bytes()
    t.write_bytes(b)
    p.write_bytes(a)
    rc, _, err = cli("predict", "--model", tmp_path / "m")
    assert rc == 2 and ".npz: corrupt or replaced" in err


def _write_net(path, net, **change):
    d = net.to_arrays()
    d.update(change)
    np.savez(path, **d)


def test_garbage_and_non_finite_weights(tmp_path, ref, cli):
    legacy = tmp_path / "legacy"          # a model from before checksums: still loads, still checked
    legacy.mkdir()
    meta = {k: v for k, v in ref.meta.items() if k not in ("files", "digest")}
    (legacy / "meta.json").write_text(json.dumps(meta))
    _write_net(legacy / "time.npz", ref.time)
    _write_net(legacy / "power.npz", ref.power)
    assert load_model(legacy).device.name == "orin-agx"
    (legacy / "time.npz").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(ModelError) as e:
        load_model(legacy)
    assert "allow_pickle" not in str(e.value)
    np.save(legacy / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    os.replace(legacy / "obj.npy", legacy / "time.npz")
    with pytest.raises(ModelError) as e:
        load_model(legacy)
    assert "allow_pickle" not in str(e.value)
    # huge but finite weights overflow exp(): "inf ms" and JSON with Infinity before
    _write_net(legacy / "time.npz", ref.time, y=np.array([800.0, 1.0, 0.0]))
    rc, out, err = cli("pareto", "--model", legacy, "--budget-w", "30", "--json")
    assert rc == 2 and "non-finite" in err and "Infinity" not in out
    _write_net(legacy / "time.npz", ref.time, y=np.array([np.nan, 1.0, 0.0]))
    with pytest.raises(ModelError):
        load_model(legacy)


def test_pareto_json_is_strict_json(tmp_path, ref, cli):
    ref.save(tmp_path / "m")
    rc, out, err = cli("pareto", "--model", tmp_path / "m", "--budget-w", "30", "--json")
    assert rc == 0, err
    json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


@pytest.mark.parametrize("field, value, says", [
    ("batches_per_epoch", float("nan"), "NaN"), ("batch_size", "x", "invalid literal"),
    ("metrics", "x", "'metrics' is not a table"), ("trained_on", [1], "'trained_on' is not a table"),
    ("time_basis", "weird", "not step or cycle"), ("batch_size", -3, "not a count"),
    ("batches_per_epoch", -1, "not a count"),
])
def test_a_damaged_meta_without_a_digest_is_one_error_not_a_traceback(tmp_path, field, value, says):
    """A model of the format before digests has no checksum to refuse an edit: a NaN, a word or a
    negative count in its meta.json was a ValueError or TypeError traceback in pareto and predict,
    or an epoch of -0.00 min (a fuzzing trial).  With a digest, a NaN is an edit like any other."""
    import shutil
    src = tmp_path / "m"
    shutil.copytree(bundled_reference(), src)
    meta = json.loads((src / "meta.json").read_text())
    for keep in (False, True):
        d = tmp_path / f"m{int(keep)}"
        shutil.copytree(src, d)
        m = dict(meta)
        if not keep:
            m.pop("digest", None)
            m.pop("files", None)
        m[field] = value
        (d / "meta.json").write_text(json.dumps(m))
        with pytest.raises(ModelError, match="damaged" if not keep else "edited|damaged") as e:
            load_model(d)
        if not keep:
            assert says in str(e.value) and "\n" not in str(e.value)
