"""Numpy inference of the predictors, on small hand-made networks whose answers are known."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.prediction.predictor import (
    FORMAT,
    Model,
    ModelError,
    Net,
    features,
    load_bundled,
    load_model,
)

ORIN = get_device("orin-agx")


def tiny(heads=((1.0, 0.0), (1.0, 0.0)), bias=(0.0, 0.0), resid=0.0, y_mean=0.0, y_scale=1.0) -> Net:
    """4 -> 2 (ReLU) -> K heads; the first hidden unit is the scaled core fraction, the second
    its negative (zero after ReLU for fractions above the mean)."""
    W = np.zeros((4, 2), np.float32)
    W[0, 0], W[0, 1] = 1.0, -1.0
    return Net(np.full(4, 0.5), np.full(4, 0.25), [(W, np.zeros(2, np.float32))],
               np.array(heads, np.float32), np.array(bias, np.float32), y_mean, y_scale, resid)


def test_features_are_fractions_of_the_maximum():
    m = ORIN.mode(6, 729.6, 318.75, 665.6)
    x = features(ORIN, [m, ORIN.maxn])
    assert x.shape == (2, 4)
    assert np.allclose(x[0], [6 / 12, 729.6 / 2201.6, 318.75 / 1300.5, 665.6 / 3199])
    assert np.allclose(x[1], 1.0)
    assert np.allclose(features(ORIN, np.array([[6, 729.6, 318.75, 665.6]])), x[:1])
    assert features(ORIN, []).shape == (0, 4)


def test_body_scales_then_relu():
    net = tiny()
    X = np.array([[1.0, 0, 0, 0], [0.25, 0, 0, 0]])
    h = net.body(X)
    assert h.dtype == np.float32
    assert np.allclose(h, [[2.0, 0.0], [0.0, 1.0]])          # (1-0.5)/0.25 = 2; (0.25-0.5)/0.25 = -1


def test_heads_give_mean_and_spread_in_log_units():
    net = tiny(heads=((1.0, 0.0), (3.0, 0.0)), bias=(0.5, -0.5), y_mean=1.0, y_scale=2.0)
    mu, sd = net.predict_log(np.array([[1.0, 0, 0, 0]]))
    # heads: 1*2+0.5 = 2.5 and 3*2-0.5 = 5.5 -> *2 +1 -> 6 and 12
    assert mu[0] == pytest.approx(9.0) and sd[0] == pytest.approx(3.0)
    net.resid_sd = 4.0
    assert net.predict_log(np.array([[1.0, 0, 0, 0]]))[1][0] == pytest.approx(5.0)
    one = tiny(heads=((1.0, 0.0),), bias=(0.0,), resid=0.3)
    assert one.predict_log(np.array([[1.0, 0, 0, 0]]))[1][0] == pytest.approx(0.3)


def test_predict_is_the_log_normal_median_and_sd():
    net = tiny(heads=((0.5, 0.0), (0.5, 0.0)), resid=0.1)
    mid, sd = net.predict(np.array([[1.0, 0, 0, 0]]))
    assert mid[0] == pytest.approx(math.e)
    assert sd[0] == pytest.approx(math.e * math.sqrt(math.expm1(0.01)))


def test_arrays_round_trip_and_checks():
    net = tiny(resid=0.2, y_mean=3.0, y_scale=0.5)
    d = net.to_arrays()
    back = Net.from_arrays(d)
    X = np.random.default_rng(0).uniform(0, 1, (5, 4))
    assert np.allclose(back.predict(X)[0], net.predict(X)[0]) and back.resid_sd == pytest.approx(0.2)
    assert (back.y_mean, back.y_scale) == (3.0, 0.5)
    for key, val, msg in (("W0", np.zeros((3, 2)), "layer shapes do not chain"),
                          ("b0", np.zeros(3), "layer shapes do not chain"),
                          ("heads_w", np.zeros((2, 3)), "head shape"),
                          ("heads_w", np.zeros(2), "head shape"),
                          ("heads_b", np.zeros(3), "bad head bias"),
                          ("x_mean", np.zeros(3), "scaler shape"),
                          ("x_scale", np.array([1, 1, np.nan, 1.0]), "non-finite"),
                          ("y", np.array([0.0, np.inf, 0.0]), "non-finite")):
        bad = dict(d, **{key: val})
        with pytest.raises(ValueError, match=msg):
            Net.from_arrays(bad)


def test_model_save_load_predict(tmp_path):
    m = Model(ORIN, tiny(), tiny(heads=((0.2, 0.0), (0.4, 0.0))), {"kind": "test"})
    m.save(tmp_path / "m")
    got = load_model(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert meta["format"] == FORMAT and meta["device"] == "orin-agx" and meta["kind"] == "test"
    modes = [ORIN.maxn, ORIN.mode(1, 115.2, 114.75, 204)]
    p = got.predict(modes)
    assert set(p) == {"time_ms", "power_w", "time_ms_std", "power_w_std"}
    X = features(ORIN, modes)
    assert np.allclose(p["time_ms"], m.time.predict(X)[0]) and np.allclose(p["power_w"], m.power.predict(X)[0])
    assert np.allclose(p["power_w_std"], m.power.predict(X)[1]) and p["power_w_std"][0] > 0
    m2 = Model(ORIN, tiny(resid=0.5), tiny(), {"kind": "second"})
    m2.save(tmp_path / "m")                                   # replaces in one step
    assert load_model(tmp_path / "m").meta["kind"] == "second"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m"]


def test_load_errors(tmp_path):
    with pytest.raises(ModelError, match="no model directory"):
        load_model(tmp_path / "none")
    d = tmp_path / "d"
    d.mkdir()
    with pytest.raises(ModelError, match="meta.json is missing"):
        load_model(d)
    (d / "meta.json").write_text("[1, 2]")
    with pytest.raises(ModelError, match="not a ptui model"):
        load_model(d)
    (d / "meta.json").write_text(json.dumps({"format": FORMAT, "device": "tx2"}))
    with pytest.raises(ModelError, match="unknown device 'tx2'"):
        load_model(d)
    (d / "meta.json").write_text(json.dumps({"format": FORMAT, "device": "orin-agx"}))
    with pytest.raises(ModelError, match="time.npz: missing"):
        load_model(d)


def test_bundled_reference_is_loaded_once():
    assert load_bundled("orin-agx") is load_bundled("orin-agx")
    assert load_bundled().device.name == "orin-agx"


def test_defaults_dtypes_and_nested_save(tmp_path):
    W = np.zeros((4, 2), np.float32)
    net = Net(np.full(4, 0.5), np.full(4, 0.25), [(W, np.zeros(2, np.float32))],
              np.ones((1, 2), np.float32), np.zeros(1, np.float32), 0.0, 1.0)
    assert net.resid_sd == 0.0
    assert net.predict_log(np.ones((1, 4)))[1][0] == 0.0          # one head, no residual: no spread
    d = {k: (v.astype(np.float32) if v.dtype == np.float64 else v) for k, v in net.to_arrays().items()}
    back = Net.from_arrays(d)
    assert back.x_mean.dtype == np.float64 and back.x_scale.dtype == np.float64
    assert back.heads_w.dtype == np.float32 and back.layers[0][0].dtype == np.float32
    Model(ORIN, net, net, {}).save(tmp_path / "a" / "b" / "m")
    assert load_model(tmp_path / "a" / "b" / "m").device.name == "orin-agx"


def test_a_model_of_a_newer_format_is_refused_as_such(tmp_path):
    from ptui.core.prediction.predictor import ModelError, load_model
    d = tmp_path / "m"
    d.mkdir()
    (d / "meta.json").write_text(json.dumps({"format": "ptui-model-9", "device": "orin-agx"}))
    with pytest.raises(ModelError, match="newer ptui"):
        load_model(d)


@pytest.mark.parametrize("edit, said", [({"device": 5}, "device 5 is not a device name"),
                                        ({"predictors": ["gp"]}, "'predictors' is not a table")])
def test_a_hand_edited_meta_of_the_wrong_shape_is_refused_not_a_crash(tmp_path, edit, said):
    # a model without checksums ('files') is read as it is, so its meta.json may say anything
    d = tmp_path / "m"
    d.mkdir()
    (d / "meta.json").write_text(json.dumps({"format": FORMAT, "device": "orin-agx", **edit}))
    with pytest.raises(ModelError, match=said):
        load_model(d)
