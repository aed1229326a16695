"""Mode and profile CSV files: every bad input is one line naming the file and line."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ptui.core.board.csvio import (
    PROFILE_COLS,
    CSVError,
    fmt_value,
    mode_cells,
    read_csv,
    read_modes,
    read_profile,
    write_csv,
)
from ptui.core.catalogue.devices import get_device
from ptui.core.prediction.predictor import bundled_reference

ORIN = get_device("orin-agx")
HEAD = "cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w"
GOOD = ["4,729.6,318.75,665.6,120.5,14.25", "8,1728,624.75,3199,60,30", "12,2201.6,1300.5,3199,40,50.5"]


def csv(tmp_path, *lines, name="p.csv"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("bad", ["nan", "NaN", "inf", "-inf", "Infinity", "0", "-3", "1e999", "abc", ""])
def test_non_finite_and_non_positive_numbers_are_refused(tmp_path, bad):
    p = csv(tmp_path, HEAD, GOOD[0], f"8,1728,624.75,3199,{bad},30")
    with pytest.raises(CSVError) as ei:
        read_csv(p, ORIN, need=PROFILE_COLS)
    msg = str(ei.value)
    assert msg.startswith(f"{p}:3: column 'time_ms' ")
    assert repr(bad) in msg


def test_small_positive_values_are_fine(tmp_path):
    p = csv(tmp_path, HEAD, "1,115.2,114.75,204,0.75,0.5")
    ((m, v),) = read_csv(p, ORIN, need=PROFILE_COLS)
    assert m.cores == 1 and (v["time_ms"], v["power_w"]) == (0.75, 0.5)


def test_mode_columns_must_be_on_the_tables(tmp_path):
    p = csv(tmp_path, HEAD, GOOD[0], "4,1000,318.75,665.6,1,1")
    with pytest.raises(CSVError, match=rf"^{p}:3: .*1000"):
        read_csv(p, ORIN)


def test_reads_modes_values_and_extras(tmp_path):
    p = csv(tmp_path, " cores , cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w,power_w_std,note",
            GOOD[0] + ",0.5,x", "", " , , ", GOOD[1] + ",,y")
    rows = read_csv(p, ORIN, need=PROFILE_COLS, extras=("power_w_std", "missing"))
    assert [m for m, _ in rows] == [ORIN.mode(4, 729.6, 318.75, 665.6), ORIN.mode(8, 1728, 624.75, 3199)]
    assert rows[0][1] == {"cores": 4.0, "cpu_mhz": 729.6, "gpu_mhz": 318.75, "mem_mhz": 665.6,
                          "time_ms": 120.5, "power_w": 14.25, "power_w_std": 0.5}
    assert "power_w_std" not in rows[1][1]                # empty extra: absent, not 0
    bad = csv(tmp_path, HEAD + ",power_w_std", GOOD[0] + ",wide", name="b.csv")
    with pytest.raises(CSVError, match=rf"{bad}:2: column 'power_w_std' is not a number: 'wide'"):
        read_csv(bad, ORIN, need=PROFILE_COLS, extras=("power_w_std",))


def test_structure_errors(tmp_path):
    with pytest.raises(CSVError, match="cannot read"):
        read_csv(tmp_path / "missing.csv", ORIN)
    empty = tmp_path / "e.csv"
    empty.write_text("")
    with pytest.raises(CSVError, match="file is empty"):
        read_csv(empty, ORIN)
    p = csv(tmp_path, "cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms", GOOD[0], name="m.csv")
    with pytest.raises(CSVError, match=rf"^{p}:1: missing column\(s\) power_w \(need cores, cpu_mhz, "
                                       r"gpu_mhz, mem_mhz, time_ms, power_w\)"):
        read_csv(p, ORIN, need=PROFILE_COLS)
    p = csv(tmp_path, HEAD, GOOD[0], "4,729.6,318.75,665.6,1", name="s.csv")
    with pytest.raises(CSVError, match=rf"^{p}:3: expected 6 fields, found 5"):
        read_csv(p, ORIN, need=PROFILE_COLS)
    # a field beyond the header that holds something was dropped without a word: a modes file's
    # '8,1497.6,828.75,3199,5' was profiled and predicted, a profile row's ',7' fitted (exit 0)
    p = csv(tmp_path, "cores,cpu_mhz,gpu_mhz,mem_mhz", "4,729.6,318.75,665.6", "8,1497.6,828.75,3199,5",
            name="x.csv")
    with pytest.raises(CSVError, match=rf"^{p}:3: expected 4 fields, found 5"):
        read_csv(p, ORIN)
    p = csv(tmp_path, HEAD, GOOD[0], GOOD[0] + ",7", name="x6.csv")
    with pytest.raises(CSVError, match=rf"^{p}:3: expected 6 fields, found 7"):
        read_csv(p, ORIN, need=PROFILE_COLS)
    # a spreadsheet's trailing commas hold nothing: read as before
    p = csv(tmp_path, "cores,cpu_mhz,gpu_mhz,mem_mhz", "4,729.6,318.75,665.6,,", name="t.csv")
    assert len(read_csv(p, ORIN)) == 1
    b = tmp_path / "bin.csv"
    b.write_bytes(b"\xff\xfe\x00\x81garbage\n")
    with pytest.raises(CSVError, match="not a text CSV file"):
        read_csv(b, ORIN)
    q = tmp_path / "q.csv"
    q.write_text(HEAD + "\n" + "4" * 200_000 + ",1,1,1,1,1\n")       # over the csv field limit
    with pytest.raises(CSVError, match=rf"^{q}: malformed CSV: field larger than field limit"):
        read_csv(q, ORIN, need=PROFILE_COLS)


def test_read_modes(tmp_path):
    assert read_modes(csv(tmp_path, "cores,cpu_mhz,gpu_mhz,mem_mhz", "4,729.6,318.75,665.6"), ORIN) == \
           [ORIN.mode(4, 729.6, 318.75, 665.6)]
    with pytest.raises(CSVError, match="no modes in file"):
        read_modes(csv(tmp_path, "cores,cpu_mhz,gpu_mhz,mem_mhz", name="n.csv"), ORIN)


def test_read_profile_merges_identical_duplicates_and_refuses_conflicts(tmp_path):
    p = csv(tmp_path, HEAD, *GOOD, GOOD[1])
    modes, t, pw = read_profile(p, ORIN, min_modes=3)
    assert modes == [ORIN.mode(4, 729.6, 318.75, 665.6), ORIN.mode(8, 1728, 624.75, 3199), ORIN.maxn]
    assert t.tolist() == [120.5, 60.0, 40.0] and pw.tolist() == [14.25, 30.0, 50.5]
    assert t.dtype == np.float64
    c = csv(tmp_path, HEAD, *GOOD, "8,1728,624.75,3199,60,31", name="c.csv")
    with pytest.raises(CSVError, match=r"mode 8c/1728/624.75/3199 appears twice with different values "
                                       r"\(60 ms/30 W vs 60 ms/31 W\)"):
        read_profile(c, ORIN, min_modes=1)
    c2 = csv(tmp_path, HEAD, *GOOD, "8,1728,624.75,3199,61,30", name="c2.csv")
    with pytest.raises(CSVError, match="appears twice"):
        read_profile(c2, ORIN, min_modes=1)
    with pytest.raises(CSVError, match=r"3 distinct modes; at least 4 are needed \(profile more with: "
                                       r"ptui profile --count 5\)"):
        read_profile(p, ORIN, min_modes=4)
    # one mode is enough (a pooled fit's board, a profile's measurements): 'is', not 'are'; a board
    # of a pool needs 5 modes, not the 50 a fit alone takes (a fleet trial read 'at least 1 are
    # needed (profile more with: ptui profile --count 50)')
    empty = csv(tmp_path, HEAD, name="empty.csv")
    with pytest.raises(CSVError, match=r"0 distinct modes; at least 1 is needed \(profile more with: "
                                       r"ptui profile --count 5\)"):
        read_profile(empty, ORIN, min_modes=1)
    with pytest.raises(CSVError, match=r"at least 10 are needed \(profile more with: ptui profile --count 50\)"):
        read_profile(p, ORIN, min_modes=10)
    assert len(read_profile(p, ORIN, min_modes=3)[0]) == 3


def test_fmt_value_and_mode_cells():
    assert [fmt_value(v) for v in (True, False, 3, 2.0, 1.23456, 0.5, 1e-5, math.nan, math.inf, None, "x")] == \
           ["1", "0", "3", "2", "1.2346", "0.5", "0", "", "", "", "x"]
    assert mode_cells(ORIN.mode(4, 729.6, 114.75, 204)) == ["4", "729.6", "114.75", "204"]


def test_write_csv_atomic_and_stdout(tmp_path, capsys):
    p = tmp_path / "o.csv"
    write_csv(p, ("a", "b"), [["1", "2"], [3, "x,y"]])
    assert p.read_text() == 'a,b\n1,2\n3,"x,y"\n'
    write_csv(None, ("a",), [["1"]])
    write_csv("-", ("b",), [["2"]])
    assert capsys.readouterr().out == "a\n1\nb\n2\n"

    seen = []

    def rows():
        yield ["9", "9"]
        seen.extend(x.name for x in tmp_path.iterdir())
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_csv(p, ("a", "b"), rows())
    assert p.read_text() == 'a,b\n1,2\n3,"x,y"\n'                # untouched
    assert sorted(x.name for x in tmp_path.iterdir()) == ["o.csv"]  # no temp file left
    tmp = [n for n in seen if n != "o.csv"]
    assert len(tmp) == 1 and tmp[0].startswith(".o.csv.")           # written as a hidden sibling
    with pytest.raises(CSVError, match="cannot write"):
        write_csv(tmp_path / "no" / "dir" / "o.csv", ("a",), [])


def test_write_then_read_round_trip(tmp_path):
    p = tmp_path / "r.csv"
    write_csv(p, PROFILE_COLS, [mode_cells(ORIN.mode(4, 729.6, 318.75, 665.6)) + [fmt_value(120.5), fmt_value(14.25)]])
    ((m, v),) = read_csv(p, ORIN, need=PROFILE_COLS)
    assert m == ORIN.mode(4, 729.6, 318.75, 665.6) and (v["time_ms"], v["power_w"]) == (120.5, 14.25)


def test_profile_and_its_measurements_come_from_one_read(tmp_path, monkeypatch):
    """read_profile_measured: the modes, figures and measured uncertainty of a profile from a
    single read of the file; a duplicated mode keeps its first row's figures (as read_profile)
    and its last row's spreads."""
    import numpy as np

    from ptui.core.board import csvio
    from ptui.core.catalogue.devices import get_device
    dev = get_device("orin-agx")
    m0, m1 = dev.full_space()[:2]
    f = tmp_path / "p.csv"
    head = list(csvio.PROFILE_COLS) + ["power_w_std", "n_power"]
    rows = [[*map(str, m0.as_tuple()), "100", "20", "0.4", "4"],
            [*map(str, m1.as_tuple()), "200", "15", "0.3", "9"],
            [*map(str, m0.as_tuple()), "100", "20", "0.8", "4"]]
    f.write_text("\n".join(",".join(r) for r in [head] + rows) + "\n")
    reads = []
    real = csvio.read_csv
    monkeypatch.setattr(csvio, "read_csv", lambda *a, **k: reads.append(a) or real(*a, **k))
    modes, t, p, ms = csvio.read_profile_measured(f, dev, min_modes=1)
    assert len(reads) == 1
    assert modes == [m0, m1] and list(t) == [100, 200] and list(p) == [20, 15]
    want = csvio.measured_uncertainty([{"time_ms": 100, "power_w": 20, "power_w_std": 0.8, "n_power": 4},
                                       {"time_ms": 200, "power_w": 15, "power_w_std": 0.3, "n_power": 9}])
    assert np.allclose(ms["power_w_std"], want["power_w_std"])
    assert (modes, list(t), list(p)) == (lambda r: (r[0], list(r[1]), list(r[2])))(
        csvio.read_profile(f, dev, min_modes=1))


@pytest.mark.parametrize("cols,cells,col", [
    ("", "120,1e300", "power_w"), ("", "9e7,20", "time_ms"), (",power_w_std", "120,20,-0.5", "power_w_std"),
    (",time_ms_p75", "120,20,inf", "time_ms_p75"), (",power_w_std", "120,20,2000", "power_w_std"),
])
def test_figures_no_jetson_can_record_are_refused_naming_row_and_column(tmp_path, cols, cells, col):
    """1e300 W, a step of more than a day, a negative or infinite spread: a broken file, refused
    on reading (a replay corpus replayed 1e300 W as a measurement)."""
    p = csv(tmp_path, HEAD + cols, "4,729.6,318.75,665.6," + cells)
    with pytest.raises(CSVError) as ei:
        read_csv(p, ORIN, need=PROFILE_COLS, extras=("power_w_std", "time_ms_p75"))
    assert str(ei.value).startswith(f"{p}:2: column '{col}' "), ei.value


def test_a_nan_spread_reads_as_missing(tmp_path):
    p = csv(tmp_path, HEAD + ",power_w_std", "4,729.6,318.75,665.6,120,20,nan")
    ((_, v),) = read_csv(p, ORIN, need=PROFILE_COLS, extras=("power_w_std",))
    assert "power_w_std" not in v


def test_a_modes_file_past_the_cap_is_refused_as_it_is_read(tmp_path, cli):
    """`ptui predict --modes` read a 3-million-row file whole (past a minute, 2.5 GB): more than
    MAX_MODE_ROWS rows are refused in one line, at the first row past the cap."""
    from ptui.core.board.csvio import MAX_MODE_ROWS
    from ptui.core.prediction.predictor import bundled_reference
    row = ",".join(mode_cells(ORIN.full_space()[0]))
    p = tmp_path / "modes.csv"
    p.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz\n" + f"{row}\n" * (MAX_MODE_ROWS + 1) + "not,a,mode,row\n")
    rc, out, err = cli("predict", "--model", bundled_reference(), "--modes", p)
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err == (f"ptui: error: {p}: more than {MAX_MODE_ROWS} rows; a modes file holds at most "
                   f"{MAX_MODE_ROWS} (several times the largest board's mode space)\n")
    with pytest.raises(CSVError, match="more than"):
        read_modes(p, ORIN)
    p.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz\n" + f"{row}\n" * MAX_MODE_ROWS)
    assert len(read_modes(p, ORIN)) == MAX_MODE_ROWS


def test_a_column_named_twice_is_refused_in_one_line(tmp_path, cli):
    """A modes file with 'cores' twice was read from its first 'cores' without a word (a user's
    trial); a column ptui does not read may repeat."""
    p = csv(tmp_path, "cores,cores,cpu_mhz,gpu_mhz,mem_mhz,note,note", "4,8,729.6,318.75,665.6,a,b")
    with pytest.raises(CSVError, match=rf"^{p}:1: column\(s\) cores appear more than once"):
        read_modes(p, ORIN)
    rc, out, err = cli("predict", "--model", bundled_reference(), "--modes", p)
    assert rc == 2 and not out and len(err.strip().splitlines()) == 1 and "more than once" in err, err
    ok = csv(tmp_path, "cores,cpu_mhz,gpu_mhz,mem_mhz,note,note", "4,729.6,318.75,665.6,a,b", name="ok.csv")
    assert read_modes(ok, ORIN)[0].cores == 4


def test_a_folder_no_file_can_be_made_in_is_refused_up_front(tmp_path, monkeypatch):
    """As root, access() says yes to /proc, and a profile to /proc/x.csv ran every mode before
    failing with 'folder /proc does not exist'; the check now makes (and removes) a file of its
    own, and leaves nothing behind where it can.  (access() is made to say yes here, as it does to
    root, so the test holds for any user.)"""
    import os

    from ptui.core.board import csvio
    from ptui.core.board.csvio import check_out_file
    monkeypatch.setattr(csvio.os, "access", lambda *a, **k: True)
    with pytest.raises(CSVError, match=r"^/proc/x.csv: cannot write in /proc"):
        check_out_file("/proc/x.csv")
    check_out_file(tmp_path / "p.csv")
    assert os.listdir(tmp_path) == []


def test_a_predict_output_is_not_taken_for_a_profile(tmp_path, cli):
    """`ptui predict --out pred.csv` then `ptui fit --profile pred.csv` fitted the model's own
    predictions and called them measurements ("measured 116.3 ms"); a table of predictions is
    refused as a profile in one line (exit 2), and still names modes for --modes."""
    modes = csv(tmp_path, "cores,cpu_mhz,gpu_mhz,mem_mhz",
                *(",".join(mode_cells(m)) for m in ORIN.pt_grid()[::400]), name="modes.csv")
    pred = tmp_path / "pred.csv"
    rc, _, err = cli("predict", "--model", bundled_reference(), "--modes", modes, "--out", pred)
    assert rc == 0, err
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", pred, "--out", tmp_path / "m")
    assert rc == 2 and not out and err.count("\n") == 1, err
    assert err.startswith(f"ptui: error: {pred}: ") and "predictions" in err and "not measurements" in err
    assert not (tmp_path / "m").exists()
    with pytest.raises(CSVError, match="predictions"):
        read_profile(pred, ORIN, min_modes=1)
    assert len(read_modes(pred, ORIN)) == len(ORIN.pt_grid()[::400])
    # a profile written by hand (the six columns, or with a spread of its own) still reads
    ok = csv(tmp_path, HEAD + ",power_w_std", *(g + ",0.1" for g in GOOD), name="ok.csv")
    assert len(read_profile(ok, ORIN, min_modes=1)[0]) == 3


def test_a_profile_of_several_batch_sizes_is_not_read_as_one_sizes_modes(tmp_path, cli):
    """`ptui reference build --profile rb.csv` on a profile of batch sizes 8,16,32,64 said a mode
    'appears twice with different values', blaming a sound ptui profile; it now says the profile
    holds several batch sizes (one line, exit 2)."""
    head = HEAD + ",batch_size"
    p = csv(tmp_path, head, *(g + ",8" for g in GOOD), *(g.replace(",60,", ",90,") + ",16" for g in GOOD[1:2]))
    with pytest.raises(CSVError, match=r"batch sizes 8,16"):
        read_profile(p, ORIN, min_modes=1)
    rc, out, err = cli("reference", "build", "--device", "orin-agx", "--profile", p, "--out", tmp_path / "r")
    assert rc == 2 and not out and err.count("\n") == 1 and "batch sizes 8,16" in err, err
    assert "appears twice" not in err
    one = csv(tmp_path, head, *(g + ",8" for g in GOOD), name="one.csv")
    assert len(read_profile(one, ORIN, min_modes=1)[0]) == 3
