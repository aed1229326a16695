"""A device's spaces carry their modes' values as an array (so predicting 18,096 modes does not
walk the objects); the array must always describe the list it belongs to."""
import random

import numpy as np
import pytest

from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.modes import Mode, ModeList
from ptui.core.prediction.gp import raw_modes

DEV = get_device("orin-agx")


def _walked(modes):
    return np.array([m.as_tuple() for m in modes], np.float64).reshape(-1, 4)


@pytest.mark.parametrize("space", [DEV.full_space, DEV.pt_grid, get_device("orin-nano").full_space])
def test_spaces_carry_their_own_values(space):
    s = space()
    assert isinstance(s, ModeList) and s.raw is not None
    assert np.array_equal(raw_modes(s), _walked(s))
    with pytest.raises(ValueError):
        s.raw[0, 0] = 99                      # shared between calls: read-only


def test_each_call_is_a_fresh_list():
    a = DEV.full_space()
    a.append(Mode(1, 1.0, 1.0, 1.0))
    assert len(DEV.full_space()) == DEV.n_modes


@pytest.mark.parametrize("change", [
    lambda s: s.sort(reverse=True), lambda s: random.Random(0).shuffle(s), lambda s: s.reverse(),
    lambda s: s.__setitem__(0, s[-1]), lambda s: s.__delitem__(3), lambda s: s.pop(),
    lambda s: s.insert(0, s[5]), lambda s: s.remove(s[7]), lambda s: s.append(s[0]),
    lambda s: s.extend(s[:2]), lambda s: s.__iadd__(s[:2]), lambda s: s.clear(),
    lambda s: s.__setitem__(slice(0, 2), [s[9], s[8]])])
def test_any_change_drops_the_array(change):
    s = DEV.pt_grid()
    change(s)
    assert s.raw is None
    assert np.array_equal(raw_modes(s), _walked(s))


def test_a_list_and_an_array_of_another_length_are_not_paired():
    s = DEV.pt_grid()
    assert ModeList(s[:10], s.raw).raw is None
    assert ModeList(s[:10], s.raw[:10]).raw is not None


def test_decision_space_keeps_values_matching_its_modes(tmp_path):
    from tests.unit.test_decision_space import _model
    model, _ = _model(tmp_path)
    kept, _ = model.decision_space()
    assert 0 < len(kept) < DEV.n_modes
    assert np.array_equal(raw_modes(kept), _walked(kept))
    assert np.array_equal(model.predict(kept)["time_ms"], model.predict(list(kept))["time_ms"])
