"""ptui colocate: the concurrent decision from the command line (simulated board)."""
import json

import pytest

from ptui.core.catalogue.modes import Mode
from tests.support.cli import run_cli

BASE = ["colocate", "--device", "orin-agx", "--train-workload", "resnet18",
        "--infer-workload", "resnet50", "--rate", "20", "--latency-ms", "250"]


def test_json_pick_is_the_decision_shape_and_within_both_budgets():
    rc, out, err = run_cli(*BASE, "--budget-w", "35", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["schema_version"] == 2 and doc["command"] == "colocate"
    assert doc["feasible"] is True and doc["simulated"] is True
    p = doc["pick"]
    assert p["power_w"] <= 35 and p["latency_p99_ms"] <= 250 and p["over_budget"] <= 0.01
    assert p["batch_size"] in (1, 2, 4, 8, 16, 32, 64) and p["key"].count("/") == 3
    assert p["time_ms"] == pytest.approx(16 / p["train_samples_per_s"] * 1000.0, rel=1e-3)
    assert doc["profiled_modes"] <= 15
    assert set(doc["baselines"]) == {"maxn_largest_feasible_batch", "best_preset", "training_alone"}
    assert doc["baselines"]["training_alone"]["train_samples_per_s"] > p["train_samples_per_s"]


def test_text_output_says_simulated_and_names_the_baselines():
    rc, out, _ = run_cli(*BASE, "--budget-w", "35")
    assert rc == 0
    assert out.startswith("SIMULATED")
    assert "pick:" in out and "best_preset" in out and "training_alone" in out


def test_text_names_each_mode_in_words_as_pareto_and_tune_do():
    """pareto and tune name a mode in words ('6 cores · CPU 2.20 GHz · ...'); colocate's text named
    the pick and each baseline by its compact key ('6c/2201.6/726.75/3199'), a form for machines.
    The JSON keeps the key (and the mode's knobs) for them."""
    rc, out, err = run_cli(*BASE, "--budget-w", "35", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    rc, out, err = run_cli(*BASE, "--budget-w", "35")
    assert rc == 0, err
    points = [doc["pick"], *(b for b in doc["baselines"].values() if b)]
    assert len(points) == 4
    for p in points:
        assert p["key"] not in out, out
        assert Mode.from_key(p["key"]).describe() in out, out
    assert set(doc["pick"]) >= {"mode", "key", "batch_size", "power_w", "train_samples_per_s"}


def test_infeasible_budget_is_a_document_with_the_closest_option_and_exit_3():
    rc, out, err = run_cli(*BASE, "--budget-w", "4", "--json")
    assert rc == 3
    doc = json.loads(out)
    assert doc["feasible"] is False and doc["closest"] is not None
    assert doc["closest"]["power_w"] > 4
    assert len(err.strip().splitlines()) == 1


def test_infeasible_text_names_the_binding_budget_and_a_closest_option_that_meets_the_other():
    """The closest option was the lowest-power row of the latency screen alone, whose latency failed
    (p99 435 ms against 250): the line then named a mode that meets neither budget.  Now it is the
    lowest-power (mode, b) whose latency holds on its distribution, as decide checks a pick."""
    rc, out, err = run_cli(*BASE, "--budget-w", "4")
    assert rc == 3 and out == "" and len(err.strip().splitlines()) == 1
    assert "no mode within 4 W keeps p99 latency within 250 ms" in err and "SIMULATED" in err
    rc, out, _ = run_cli(*BASE, "--budget-w", "4", "--json")
    c = json.loads(out)["closest"]
    assert c["meets_latency"] is True and c["latency_p99_ms"] <= 250 and c["over_budget"] <= 0.005
    # the closest mode in words, as pareto and tune name a mode (its key is the JSON's)
    words = Mode.from_key(c["key"]).describe()
    assert f"{c['power_w']:.1f} W, {words} with inference batch {c['batch_size']}" in err
    assert c["key"] not in err


def test_infeasible_by_latency_says_so_whatever_the_power_budget():
    """ResNet-50 served at 30 requests/s within 100 ms beside ResNet-18 training: no (mode, b) passes
    the latency test (with its tail margin) at any power; the walk said 'no profiled mode meets the
    budgets (15 profiled)' and pareto's 'no mode stays within 60 W' could follow."""
    args = [a if a not in ("20", "250") else {"20": "30", "250": "100"}[a] for a in BASE]
    rc, out, err = run_cli(*args, "--budget-w", "60")
    assert rc == 3 and len(err.strip().splitlines()) == 1
    assert "keeps p99 latency within 100 ms at 30 requests/s with ptui's tail margin" in err
    assert "profiled mode" not in err and "within 60 W" not in err
    rc, out, _ = run_cli(*args, "--budget-w", "60", "--json")
    assert json.loads(out)["closest"]["meets_latency"] is False


def test_bad_input_is_one_line_exit_2():
    for args in (["--budget-w", "-1"], ["--budget-w", "30", "--strategy", "x"]):
        rc, out, err = run_cli(*BASE, *args)
        assert rc == 2 and out == ""
        assert len(err.strip().splitlines()) == 1
    rc, _, err = run_cli(*[a if a != "resnet50" else "nope" for a in BASE], "--budget-w", "30")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "inference workload" in err


def test_saved_profiles_re_decide_a_new_rate_with_nothing_profiled(tmp_path, monkeypatch):
    """--save-profiles keeps the walk's standalone profiles; --profiles decides again from them for
    a new rate (the pick changes, zero modes profiled, well under a second) and agrees with a
    decision over the same profiles in memory."""
    from ptui.core.catalogue.devices import get_device
    from ptui.core.decision.concurrent import decide
    from ptui.core.usecases import colocate
    from ptui.interleave import load_profiles
    saved = tmp_path / "p.json"
    rc, out, err = run_cli(*BASE, "--budget-w", "35", "--save-profiles", saved, "--json")
    assert rc == 0, err
    first = json.loads(out)
    assert first["saved_profiles"] == str(saved)
    st, about = load_profiles(saved, get_device("orin-agx"))
    assert len(st.modes) == first["profiled_modes"] and about["train_workload"] == "resnet18"
    calls = []
    monkeypatch.setattr(colocate, "standalone", lambda *a, **k: calls.append(a))
    # 60/s: another mode and inference batch than 20/s (40/s kept the mode, with the tie rule)
    rc, out, err = run_cli("colocate", "--device", "orin-agx", "--profiles", saved, "--rate", "60",
                           "--latency-ms", "250", "--budget-w", "35", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert calls == [] and doc["profiled_modes"] == 0 and doc["strategy"] == "saved profiles"
    assert doc["decided_in_s"] < 1.0
    want = decide(st, 60.0, 250.0, 35.0)
    assert doc["pick"]["key"] == want.mode.key and doc["pick"]["batch_size"] == want.batch
    assert (doc["pick"]["key"], doc["pick"]["batch_size"]) != (first["pick"]["key"], first["pick"]["batch_size"])


def test_profiles_bad_input_is_one_line_exit_2(tmp_path):
    (tmp_path / "x.json").write_text("not json")
    for args in (["--profiles", tmp_path / "x.json"], ["--profiles", tmp_path / "none.json"], []):
        rc, out, err = run_cli("colocate", "--device", "orin-agx", "--rate", "40", "--latency-ms", "250",
                               "--budget-w", "35", *args)
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err


def test_saved_profiles_nothing_meets_says_the_binding_budget_like_the_walk(tmp_path):
    """Re-deciding from saved profiles at a budget nothing meets said pareto's 'no mode stays
    within 5 W; the lowest-power mode is ... at 17.5 W (±0.0), 638 ms (predicted)' (a training
    step's time, no word of latency, not said SIMULATED) and its JSON had no closest option.  It
    says what the walk says: the budget that binds and the least power whose latency holds."""
    saved = tmp_path / "p.json"
    rc, _, err = run_cli(*BASE, "--budget-w", "35", "--save-profiles", saved, "--json")
    assert rc == 0, err
    again = ["colocate", "--device", "orin-agx", "--profiles", saved, "--rate", "20",
             "--latency-ms", "250", "--budget-w", "5"]
    rc, out, err = run_cli(*again)
    assert rc == 3 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "no mode within 5 W keeps p99 latency within 250 ms" in err and "SIMULATED" in err, err
    assert "(predicted)" not in err and "no mode stays within" not in err, err
    rc, out, _ = run_cli(*again, "--json")
    c = json.loads(out)["closest"]
    assert rc == 3 and c is not None and c["meets_latency"] is True and c["power_w"] > 5
    assert f"{c['power_w']:.1f} W, {Mode.from_key(c['key']).describe()}" in err
