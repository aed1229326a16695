"""check_state: every way a saved sysfs state can fail to fit the board is refused with
DamagedSnapshot naming the first thing wrong, never with another exception."""
from __future__ import annotations

import copy

import pytest

from ptui.core.board.backends.base import DamagedSnapshot
from ptui.core.board.backends.sysfs import check_state
from ptui.core.catalogue.devices import get_device

ORIN = get_device("orin-agx")

GOOD = {"online": {"1": "1", "11": "0"}, "cpufreq": {"0": ["115200", "2201600"], "4": ["729600", "729600"]},
        "gpu": ["114750000", "1300500000"], "emc": ["1", "3199000000"], "nvpmodel": 3}


def _with(**parts) -> dict:
    st = copy.deepcopy(GOOD)
    for k, v in parts.items():
        if v is KeyError:
            del st[k]
        else:
            st[k] = v
    return st


def test_a_state_that_fits_passes():
    check_state(ORIN, GOOD)
    check_state(ORIN, _with(gpu=None, emc=None, nvpmodel=None))
    check_state(ORIN, _with(nvpmodel=KeyError, online={}, cpufreq={}))
    # a governor's range may lie a little outside the table
    check_state(ORIN, _with(gpu=["113000000", "1320000000"]))


REFUSED = {
    "not a dict": (["online"], "it is not a saved sysfs state"),
    "a part missing": (_with(emc=KeyError), "it is not a saved sysfs state"),
    "online not a table": (_with(online=["1"]), "its online or cpufreq part is not a table"),
    "cpufreq not a table": (_with(cpufreq=None), "its online or cpufreq part is not a table"),
    "online core not a number": (_with(online={"x": "1"}), "the online table names cpux, which orin-agx"),
    "online core too high": (_with(online={"12": "1"}), "names cpu12, which orin-agx (cpu0-11)"),
    "online core negative": (_with(online={"-1": "1"}), "names cpu-1"),
    "cpu0 offline": (_with(online={"0": "1"}), "names cpu0, which cannot go offline"),
    "online flag": (_with(online={"3": 1}), "cpu3 online is 1, not 0 or 1"),
    "cpufreq core": (_with(cpufreq={"12": ["115200", "115200"]}), "the cpufreq table names cpu12"),
    "cpufreq not a pair": (_with(cpufreq={"0": ["115200"]}), "cpu0's CPU limits is not a (min, max) pair"),
    "cpufreq a string": (_with(cpufreq={"0": "ab"}), "cpu0's CPU limits is not a (min, max) pair: ab"),
    "cpu min not a number": (_with(cpufreq={"0": ["1e5", "115200"]}),
                             "cpu0's CPU minimum '1e5' is not a whole number"),
    "cpu max not a string": (_with(cpufreq={"0": ["115200", 115200]}),
                             "cpu0's CPU maximum 115200 is not a whole number"),
    "cpu min off the table": (_with(cpufreq={"0": ["1000", "115200"]}),
                              "cpu0's CPU minimum 1 MHz is outside orin-agx's range 115.2-2201.6 MHz"),
    "cpu max off the table": (_with(cpufreq={"0": ["115200", "2300000"]}), "cpu0's CPU maximum 2300 MHz"),
    "cpu min above max": (_with(cpufreq={"0": ["729600", "115200"]}),
                          "cpu0's CPU minimum 729600 is above its maximum 115200"),
    "gpu not a pair": (_with(gpu="114750000"), "the GPU limits is not a (min, max) pair"),
    "gpu min off the table": (_with(gpu=["1", "114750000"]), "the GPU minimum 1e-06 MHz is outside"),
    "gpu max off the table": (_with(gpu=["114750000", "9000000000"]), "the GPU maximum 9000 MHz"),
    "gpu min above max": (_with(gpu=["1300500000", "114750000"]),
                          "the GPU minimum 1300500000 is above its maximum 114750000"),
    "emc not a pair": (_with(emc=["1", "2", "3"]), "the EMC state is not a (min, max) pair"),
    "emc lock flag": (_with(emc=["yes", "3199000000"]), "the EMC lock flag is 'yes', not 0 or 1"),
    "emc rate": (_with(emc=["0", "-5"]), "the EMC rate '-5' is not a whole number"),
    "emc rate off the table": (_with(emc=["0", "100000000"]), "the EMC rate 100 MHz is outside"),
    "nvpmodel a string": (_with(nvpmodel="3"), "the nvpmodel mode '3' is not a mode number"),
    "nvpmodel a bool": (_with(nvpmodel=True), "the nvpmodel mode True is not a mode number"),
    "nvpmodel too high": (_with(nvpmodel=1000), "the nvpmodel mode 1000 is not a mode number"),
    "nvpmodel negative": (_with(nvpmodel=-1), "the nvpmodel mode -1 is not a mode number"),
}


@pytest.mark.parametrize("how", sorted(REFUSED))
def test_a_state_that_does_not_fit_is_refused_naming_why(how):
    st, said = REFUSED[how]
    with pytest.raises(DamagedSnapshot) as e:
        check_state(ORIN, st)
    assert said in str(e.value)


def test_the_first_thing_wrong_is_the_one_named():
    st = _with(online={"3": "yes"}, gpu=["1300500000", "114750000"])
    with pytest.raises(DamagedSnapshot, match="cpu3 online"):
        check_state(ORIN, st)


@pytest.mark.parametrize("digits", ["\u00b2", "1\u0663", "\uff11\uff12"])
def test_a_frequency_in_non_ascii_digits_is_refused_not_a_crash(digits):
    # str.isdigit() is true of superscripts and other scripts' digits; int() rejects some of them
    # and reads others as a number, so a hand-edited or corrupted record must be refused outright
    with pytest.raises(DamagedSnapshot, match="the EMC rate .* is not a whole number"):
        check_state(ORIN, _with(emc=["0", digits]))
