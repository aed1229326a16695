"""A mode in plain words (issue 23): one formatter, Mode.describe, for the screens and the CLI's
text; the compact key stays for CSV, JSON and whatever a machine reads back."""
import pytest

from ptui.core.catalogue.devices import DEVICES, get_device
from ptui.core.catalogue.modes import Mode


def test_describe_reads_like_the_issue_says():
    m = get_device("orin-agx").mode(6, 1497.6, 522.75, 2133)
    assert m.describe() == "6 cores · CPU 1.50 GHz · GPU 523 MHz · memory 2133 MHz"
    assert str(m) == m.describe()
    assert m.key == "6c/1497.6/522.75/2133"                    # unchanged: CSV and JSON
    assert Mode(1, 115.2, 1300.5, 665.6).describe() == "1 core · CPU 0.12 GHz · GPU 1301 MHz · memory 666 MHz"


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_no_two_table_values_read_alike(name):
    """Rounding for people never makes two of a board's clock settings look the same."""
    dev = get_device(name)
    for i, table in ((1, dev.cpu_mhz), (2, dev.gpu_mhz), (3, dev.mem_mhz)):
        words = {Mode(1, *[x if k == i else 1000.0 for k in (1, 2, 3)]).words()[i] for x in table}
        assert len(words) == len(table), (name, i)


def test_key_round_trips():
    for m in get_device("xavier-agx").pt_grid()[::37]:
        assert Mode.from_key(m.key) == m
    with pytest.raises(ValueError):
        Mode.from_key("MODE_30W")
