import pytest

from ptui.core.catalogue.devices import DEVICES, DeviceError, get_device
from ptui.core.catalogue.modes import Mode, ModeError, transition_order
from ptui.core.catalogue.workloads import WORKLOADS, WorkloadError, get_workload


@pytest.mark.parametrize("name,full,grid", [("orin-agx", 18096, 4368), ("xavier-agx", 29232, 7056),
                                            ("orin-nano", 1800, 450)])
def test_mode_spaces(name, full, grid):
    d = get_device(name)
    assert len(d.full_space()) == full == d.n_modes
    assert len(set(d.full_space())) == full
    assert len(d.pt_grid()) == grid


def test_orin_tables_match_powertrain():
    d = get_device("orin-agx")
    assert (len(d.cpu_mhz), len(d.gpu_mhz), len(d.mem_mhz)) == (29, 13, 4)
    assert d.mem_mhz == (204.0, 665.6, 2133.0, 3199.0)
    grid_cpu = sorted({m.cpu_mhz for m in d.pt_grid()})
    assert grid_cpu == [268.8, 422.4, 576.0, 729.6, 883.2, 1036.8, 1190.4, 1344.0, 1497.6,
                        1651.2, 1804.8, 1958.4, 2112.0, 2201.6]
    assert sorted({m.cores for m in d.pt_grid()}) == [2, 4, 6, 8, 10, 12]
    assert d.maxn == Mode(12, 2201.6, 1300.5, 3199.0)


def test_xavier_and_nano_tables():
    x, n = get_device("xavier-agx"), get_device("orin-nano")
    assert (x.max_cores, len(x.cpu_mhz), len(x.gpu_mhz), len(x.mem_mhz)) == (8, 29, 14, 9)
    assert x.cpu_mhz[-1] == 2265.6 and x.gpu_mhz[-1] == 1377.0 and x.mem_mhz[-1] == 2133.0
    assert (n.max_cores, len(n.cpu_mhz), len(n.gpu_mhz), len(n.mem_mhz)) == (6, 20, 5, 3)


def test_presets_and_rails():
    d = get_device("orin-agx")
    assert [p.name for p in d.presets] == ["MAXN", "MODE_15W", "MODE_30W", "MODE_50W"]
    p = d.preset("MODE_15W")
    assert p.mode == Mode(4, 1113.6, 420.75, 2133.0) and p.tpc == 3
    assert d.preset(d.default_preset).name == "MODE_30W"
    assert d.rails == ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO")
    assert get_device("orin-nano").total_rail == "VDD_IN"
    with pytest.raises(DeviceError, match="presets: 0=MAXN"):
        d.preset(9)


def test_off_table_mode_rejected_with_valid_values():
    d = get_device("orin-agx")
    with pytest.raises(ModeError, match=r"GPU frequency 1000 MHz .* valid values: 114.75, 216.75"):
        d.mode(4, 729.6, 1000, 3199)
    with pytest.raises(ModeError, match="valid values: 1..12"):
        d.mode(13, 729.6, 114.75, 3199)
    with pytest.raises(ModeError, match="EMC"):
        d.mode(4, 729.6, 114.75, 3200)
    assert d.mode(4, "729.6", "114.75", "204") == Mode(4, 729.6, 114.75, 204.0)


def test_mode_is_immutable():
    m = Mode(4, 729.6, 114.75, 204.0)
    with pytest.raises(AttributeError):
        m.cores = 5  # type: ignore[misc]
    assert m.key == "4c/729.6/114.75/204"


def test_unknown_device():
    with pytest.raises(DeviceError, match="known devices"):
        get_device("tx2")
    assert set(DEVICES) == {"orin-agx", "xavier-agx", "orin-nano"}


def test_workloads_table3():
    assert set(WORKLOADS) == {"resnet18", "mobilenetv3", "yolov8n", "bert-base", "lstm"}
    r = get_workload("resnet18")
    assert (r.samples, r.params_m, r.fwd_gflops, r.workers, r.batch_size) == (50000, 11.7, 1.8, 4, 16)
    assert r.minibatches_per_epoch == 3125
    assert get_workload("yolov8n").workers == 0
    assert get_workload("bert-base", 32).minibatches_per_epoch == 2188
    with pytest.raises(WorkloadError):
        get_workload("vgg")
    with pytest.raises(WorkloadError):
        get_workload("lstm", 0)


def test_transition_order_is_cheap():
    d = get_device("orin-agx")
    g = d.pt_grid()
    o = transition_order(g)
    assert sorted(o) == sorted(g)
    emc_changes = sum(1 for a, b in zip(o, o[1:]) if a.mem_mhz != b.mem_mhz)
    core_changes = sum(1 for a, b in zip(o, o[1:]) if a.cores != b.cores)
    assert emc_changes == 3            # each EMC level visited once
    assert core_changes == 4 * 5       # snake: the core count carries over EMC boundaries
    assert o[0] == d.maxn
