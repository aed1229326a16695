"""The JSON contract (ptui.core.usecases.contract): status, apply --dry-run/--json and restore --json on an
emulated sysfs tree and on the simulator; every document has schema_version and command."""
import json
import math

import pytest

from ptui.core.board import locks
from ptui.core.board.backends.sysfs import SysfsBackend
from ptui.core.catalogue.devices import get_device
from ptui.core.catalogue.modes import Mode
from ptui.core.usecases import contract
from tests.support import fakesys

ORIN = get_device("orin-agx")
TARGET = ORIN.mode(4, 729.6, 318.75, 665.6)
MODE = ["--cores", "4", "--cpu-mhz", "729.6", "--gpu-mhz", "318.75", "--mem-mhz", "665.6"]


@pytest.fixture
def tree(tmp_path):
    return fakesys.build(tmp_path / "root")


def _doc(out, command):
    d = json.loads(out)
    assert d["schema_version"] == contract.SCHEMA_VERSION and d["command"] == command
    return d


def test_status_on_a_board_says_mode_preset_lock_and_what_restore_would_undo(tree, cli):
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    rc, out, err = cli("status", *sysfs, "--json")
    assert rc == 0, err
    d = _doc(out, "status")
    start = fakesys.read_mode(tree)
    assert d["key"] == start.key and d["preset"] == "MODE_30W" and d["nvpmodel_id"] is not None
    assert d["emulated"] is True and d["simulated"] is True and d["board"].startswith("ptui-orin-agx")
    assert d["lock_holder"] is None and d["restore"] is None and d["restore_problem"] is None
    rc, _, err = cli("apply", *sysfs, *MODE, "--yes")
    assert rc == 0, err
    d = _doc(cli("status", *sysfs, "--json")[1], "status")
    assert d["key"] == TARGET.key and d["preset"] is None
    assert d["restore"]["kind"] == "last-apply" and d["restore"]["mode"] == start.key
    rc, out, _ = cli("status", *sysfs)
    assert rc == 0 and "would put back the state before the last ptui apply" in out
    assert "not an nvpmodel preset" in out and "lock: free" in out
    # while another process drives the board, status names it (and writes nothing)
    be = SysfsBackend(ORIN, root=tree)
    with locks.board_lock(be):
        d = _doc(cli("status", *sysfs, "--json")[1], "status")
    assert d["lock_holder"] is not None


def test_apply_dry_run_json_says_whether_anything_would_change(tree, cli):
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    rc, out, err = cli("apply", *sysfs, *MODE, "--dry-run", "--json")
    assert rc == 0, err
    d = _doc(out, "apply")
    assert d["changed"] is True and d["dry_run"] is True and d["applied"] is False
    assert d["to_key"] == TARGET.key and fakesys.read_mode(tree) != TARGET      # nothing written
    rc, out, err = cli("apply", *sysfs, *MODE, "--yes", "--json")
    d = _doc(out, "apply")
    assert rc == 0 and d["applied"] is True and d["readback_key"] == TARGET.key, err
    assert fakesys.read_mode(tree) == TARGET
    # a second run changes nothing and says so: automation reports changed=0
    d = _doc(cli("apply", *sysfs, *MODE, "--dry-run", "--json")[1], "apply")
    assert d["changed"] is False
    rc, out, _ = cli("apply", *sysfs, *MODE, "--yes", "--json")
    d = _doc(out, "apply")
    assert rc == 0 and d["changed"] is False and d["applied"] is False and d["readback_key"] == TARGET.key
    # the apply that did nothing left the first apply's record: restore goes back to the start
    rc, out, err = cli("restore", *sysfs, "--json")
    d = _doc(out, "restore")
    assert rc == 0 and d["restored"] is True and d["key"] == fakesys.read_mode(tree).key != TARGET.key


def test_a_preset_the_board_is_in_would_change_nothing(tree, cli):
    sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
    d = _doc(cli("apply", *sysfs, "--preset", "MODE_30W", "--dry-run", "--json")[1], "apply")
    assert d["changed"] is False and d["preset"] == "MODE_30W"
    d = _doc(cli("apply", *sysfs, "--preset", "MODE_15W", "--dry-run", "--json")[1], "apply")
    assert d["changed"] is True


def test_apply_json_without_yes_or_dry_run_is_refused_in_one_line(tree, cli):
    rc, out, err = cli("apply", "--backend", "sysfs", "--sysfs-root", tree, *MODE, "--json")
    assert rc == 2 and out == "" and "add --yes" in err and "Traceback" not in err
    assert fakesys.read_mode(tree) != TARGET


def test_status_on_the_simulator_is_labelled(cli):
    rc, out, err = cli("status", "--backend", "sim", "--device", "orin-nano", "--json")
    d = _doc(out, "status")
    assert rc == 0 and d["simulated"] is True and d["board"] is None and d["device"] == "orin-nano"


# -- decisions: one shape for one batch size or several; an infeasible goal is a document too ------
DECISION_KEYS = {"schema_version", "command", "feasible", "goal", "mode", "key", "batch_size", "source",
                 "time_ms", "power_w", "time_ms_std", "power_w_std", "exceed_prob", "timed", "front",
                 "baselines"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A model of one batch size and one over batch sizes 8 and 32, fitted on simulated profiles."""
    from tests.support.cli import run_cli
    d = tmp_path_factory.mktemp("models")
    out = {}
    with pytest.MonkeyPatch.context() as mp:        # its own store (module fixtures come first)
        for var in ("PTUI_DATA_DIR", "PTUI_LOCK_DIR", "PTUI_STATE_DIR"):
            mp.setenv(var, str(d / var.lower()))
        _fit_models(run_cli, d, out)
    return out


def _fit_models(run_cli, d, out):
    for name, knobs in (("one", ["--batch-size", "32"]), ("two", ["--batch-sizes", "8,32"])):
        rc, _, err = run_cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload",
                             "resnet18", *knobs, "--count", "20", "--session", name,
                             "--out", d / f"{name}.csv")
        assert rc == 0, err
        rc, _, err = run_cli("fit", "--device", "orin-agx", "--profile", d / f"{name}.csv",
                             "--out", d / name, "--method", "gp")
        assert rc == 0, err
        out[name] = d / name


def _point_keys(doc: dict) -> set:
    """The fields of a point: the pick's, less what only the decision has."""
    return {k for k in doc if k in doc["front"][0]}


def test_a_decision_has_one_shape_for_one_batch_size_or_several(models, cli):
    rc, out, err = cli("pareto", "--model", models["one"], "--budget-w", "25", "--json")
    one = _doc(out, "pareto")
    rc2, out, err2 = cli("pareto", "--model", models["two"], "--batch-sizes", "8,32", "--budget-w", "25",
                         "--json")
    two = _doc(out, "pareto")
    assert rc == rc2 == 0, err + err2
    for d in (one, two):
        assert DECISION_KEYS <= set(d), DECISION_KEYS - set(d)
        assert d["feasible"] is True and d["front"] and d["timed"]
        assert DECISION_KEYS - {"schema_version", "command", "feasible", "goal", "exceed_prob",
                                "timed", "front", "baselines"} <= set(d["front"][0])
        assert d["key"] == "{cores}c/{cpu}/{gpu}/{mem}".format(
            cores=d["mode"]["cores"], cpu=f"{d['mode']['cpu_mhz']:g}", gpu=f"{d['mode']['gpu_mhz']:g}",
            mem=f"{d['mode']['mem_mhz']:g}")
    assert one["batch_size"] == 32 and two["batch_size"] in (8, 32)
    # the same fields in both, and in every point (schema 2: the batch shape had no preset
    # baselines and named its default-batch baseline after the size)
    assert set(one) == set(two)
    assert set(one["front"][0]) == set(two["front"][0]) == set(_point_keys(one))
    names = {"best_preset", "maxn", "best_mode_at_default_batch", "largest_batch_fastest_mode"}
    assert set(one["baselines"]) == set(two["baselines"]) == names
    assert one["baselines"]["maxn"]["preset"] == two["baselines"]["maxn"]["preset"] == "MAXN"
    assert one["baselines"]["largest_batch_fastest_mode"] is None and one["memory"] is None
    assert two["baselines"]["best_mode_at_default_batch"]["batch_size"] == two["default_batch"]
    assert two["baselines"]["best_preset"]["time_to_target_s"] > 0 and two["memory"]["capacity_gb"] > 0
    assert two["time_to_target_s"] <= two["baselines"]["best_preset"]["time_to_target_s"]
    assert one["time_to_target_s"] is None and one["epoch_s"] > 0
    assert "(risk 0.05)" in one["goal"] and "(risk 0.05)" in two["goal"]      # the same rule, said
    # every front point is on the front: none is both faster and lower-power than another
    pts = [(p["time_ms"], p["power_w"]) for p in one["front"]]
    assert not any(a[0] < b[0] and a[1] < b[1] for a in pts for b in pts)


@pytest.mark.parametrize("which", ["one", "two"])
def test_a_decision_says_the_least_energy_mode_and_what_maxn_and_the_best_preset_take(models, cli, which):
    """Issue 25: the least-energy candidate beside MAXN, the best preset and the pick, in the JSON
    (per step for one batch size, to target for several) and in two lines of the text."""
    extra = ["--batch-sizes", "8,32"] if which == "two" else []
    rc, out, err = cli("pareto", "--model", models[which], *extra, "--budget-w", "25", "--json")
    d = _doc(out, "pareto")
    assert rc == 0, err
    e = d["energy"]
    assert e["unit"] == ("Wh to target" if which == "two" else "J per step") and e["source"] == "predicted"
    least, pick, maxn, bp = e["least"], e["pick"], e["maxn"], e["best_preset"]
    assert least["more_than_least_pct"] == 0.0 and least["energy"] > 0
    # the least is ranked by the energy's upper bound at the decision's risk (a mode predicted
    # 1.68 J +- a wide spread was called least where the board took 3.2 J): never more than another's
    assert e["ranked_by"] == "energy_upper" and e["risk"] == 0.05 and e["least_preset"] is None
    assert pick["key"] == d["key"] and pick["energy_upper"] >= least["energy_upper"] - 1e-6
    for p in (pick, maxn, bp):
        assert p["more_than_least_upper_pct"] >= 0 and p["energy_upper"] >= p["energy"]
    assert maxn["preset"] == "MAXN" and maxn["key"] == d["baselines"]["maxn"]["key"]
    assert bp["preset"] == d["baselines"]["best_preset"]["preset"]
    for p in (pick, maxn, bp):
        assert p["more_than_least_pct"] == pytest.approx(100 * (p["energy"] / least["energy"] - 1), abs=0.01)
    if which == "one":          # J per step: time per step x power
        assert least["energy"] == pytest.approx(least["time_ms"] * least["power_w"] / 1000, rel=1e-3)
        z = 1.6448536269514722

        def upper(p):           # time x power at the upper bound of their log-normal spreads
            s = math.hypot(*(math.sqrt(math.log1p((p[f"{k}_std"] / p[k]) ** 2)) for k in ("time_ms", "power_w")))
            return p["time_ms"] * p["power_w"] / 1000 * math.exp(z * s)
        assert least["energy_upper"] <= min(upper(p) for p in d["front"]) * (1 + 1e-3)
    else:                       # Wh to target, as the baselines count it
        assert maxn["energy"] == pytest.approx(d["baselines"]["maxn"]["energy_to_target_wh"], abs=1e-3)
    rc, out, err = cli("pareto", "--model", models[which], *extra, "--budget-w", "25")
    assert rc == 0, err
    lines = out.splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("Least energy: "))
    end = next(j for j in range(k, len(lines)) if lines[j].startswith(("apply with", "Pareto front")))
    said = " ".join(lines[k:end])
    assert Mode.from_key(least["key"]).describe() in said and "(predicted" in said
    assert f"MAXN uses {maxn['more_than_least_pct']:.0f}% more energy" in said
    assert f"the best preset ({bp['preset']})" in said
    # a faster least-energy mode that is not the pick says why (two lines more)
    faster = least["time_ms"] < pick["time_ms"] * 0.995 and which == "one"
    assert ("The least-energy mode is faster than the pick, but" in said) == faster
    # a candidate of less median energy ranked out for its spread is named (two lines more)
    ranked = 2 if "Ranked by the 95 % upper bound: " in said else 0
    assert all(len(line) <= 80 for line in lines[k:end]) and 2 <= end - k <= (6 if faster else 4) + ranked


def test_fit_says_its_profile_is_simulated_in_text_and_json(cli, tmp_path):
    """fit on a simulated profile said 'model for orin-agx (method gp), 20 profiled modes -> M'
    and its --json had no simulated field, where pareto on the model says 'profile: SIMULATED'
    (a user trial)."""
    import json
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "8",
                     "--out", tmp_path / "p.csv")
    assert rc == 0, err
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "p.csv", "--out",
                       tmp_path / "m", "--method", "gp")
    assert rc == 0 and out.splitlines()[1].startswith("profile: SIMULATED"), out
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "p.csv", "--out",
                       tmp_path / "m2", "--method", "gp", "--json")
    assert rc == 0 and json.loads(out)["simulated"] is True, err


def test_pareto_time_cycle_on_a_step_model_is_one_line(models, cli):
    """pareto --time cycle on a model of the median step printed the note on the modes it leaves
    out ('... have a knob value no profiled mode had ...'), then the error: bad input is one line."""
    rc, out, err = cli("pareto", "--model", models["one"], "--budget-w", "25", "--time", "cycle")
    assert rc == 2 and out == ""
    assert err.strip().splitlines() == [ln for ln in err.strip().splitlines() if ln.startswith("ptui: error:")]
    assert len(err.strip().splitlines()) == 1 and "refit it with: ptui fit ... --time cycle" in err, err


def test_predict_says_the_models_profile_is_simulated_as_pareto_does(models, cli):
    """ptui predict on a model of a simulated profile wrote its CSV and 'predicted 18096 modes'
    with no word of the simulator, where pareto on the same model says 'profile: SIMULATED' (a
    user trial).  It says so on stderr; stdout stays the CSV."""
    rc, out, err = cli("predict", "--model", models["one"])
    assert rc == 0, err
    assert "profile: SIMULATED (the model's profiled figures" in err, err
    assert out.splitlines()[0].startswith("cores,cpu_mhz") and "SIMULATED" not in out


def test_pareto_json_says_simulated_where_the_models_profile_was(models, cli, tmp_path):
    """pareto's text says 'profile: SIMULATED (the model's profiled figures are the simulated
    board's ...)'; its --json said nothing, and its pick and front read 'source: measured' (a user
    trial).  Both shapes say `simulated`: true for a model of a simulated profile, false for one
    of the roofline prior alone (no profile)."""
    import json
    rc, out, err = cli("pareto", "--model", models["one"], "--budget-w", "25", "--json")
    rc2, out2, err2 = cli("pareto", "--model", models["two"], "--batch-sizes", "8,32", "--budget-w",
                          "25", "--json")
    assert rc == rc2 == 0, err + err2
    assert _doc(out, "pareto")["simulated"] is True and _doc(out2, "pareto")["simulated"] is True
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90, "gbytes_per_step": 6, "batch_size": 32}))
    rc, _, err = cli("fit", "--device", "orin-agx", "--workload-spec", spec, "--out", tmp_path / "p")
    assert rc == 0, err
    rc, out, err = cli("pareto", "--model", tmp_path / "p", "--budget-w", "30", "--json")
    assert rc == 0 and _doc(out, "pareto")["simulated"] is False, err


@pytest.mark.parametrize("which", ["one", "two"])
def test_an_infeasible_goal_prints_a_document_and_exits_3(models, cli, which):
    extra = ["--batch-sizes", "8,32"] if which == "two" else []
    rc, out, err = cli("pareto", "--model", models[which], *extra, "--budget-w", "2", "--json")
    d = _doc(out, "pareto")
    assert rc == 3 and d["feasible"] is False and "2 W" in d["goal"] and d["reason"] in err
    assert err.strip().splitlines()[-1].startswith("ptui: error: no ")
    # the closest option is a point in both (it was null over batch sizes)
    assert d["closest"]["power_w"] > 2 and d["closest"]["key"] and d["closest"]["batch_size"]


def test_tune_with_a_goal_no_mode_meets_prints_a_document_and_exits_3(cli):
    rc, out, err = cli("tune", "--backend", "sim", "--device", "orin-agx", "--workload", "lstm",
                       "--budget-w", "2", "--count", "6", "--json")
    d = _doc(out, "tune")
    assert rc == 3 and d["feasible"] is False and d["closest"]["power_w"] > 2, err


def test_tune_json_has_the_decision_shape(cli):
    rc, out, err = cli("tune", "--backend", "sim", "--device", "orin-agx", "--workload", "lstm",
                       "--budget-w", "25", "--count", "6", "--json")
    d = _doc(out, "tune")
    assert rc == 0, err
    assert DECISION_KEYS <= set(d) and d["feasible"] is True and d["batch_size"] == 16
    assert d["profiled"] == 6 and d["applied"] is False
    # tune's own fields, named as tune over batch sizes names them (test_batch_active)
    assert d["predicted"]["time_ms"] > 0 and "(risk 0.05)" in d["goal"]
    assert d["best_measured"] is None or d["best_measured"]["batch_size"] == 16
    assert d["energy"]["least"]["energy"] <= d["energy"]["pick"]["energy"] and d["energy"]["maxn"]


def test_profile_fit_sessions_and_modes_have_json_too(cli, tmp_path):
    rc, out, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "lstm",
                       "--count", "12", "--session", "j", "--out", tmp_path / "p.csv", "--json")
    d = _doc(out, "profile")
    assert rc == 0 and d["status"] == "done" and d["rows"] == 12 and d["simulated"] is True, err
    assert d["out"] == str(tmp_path / "p.csv") and d["session"] == "j"
    rc, out, err = cli("fit", "--device", "orin-agx", "--profile", tmp_path / "p.csv",
                       "--out", tmp_path / "m", "--method", "gp", "--json")
    d = _doc(out, "fit")
    assert rc == 0 and d["profiled"] == 12 and d["workload"] == "lstm" and d["batch_sizes"] == [16], err
    assert d["metrics"]["time"]["choice"] and d["metrics"]["power"]["cv_mape"] > 0
    assert d["model"] == str(tmp_path / "m") and (tmp_path / "m" / "meta.json").exists()
    d = _doc(cli("sessions", "--json")[1], "sessions")
    assert [(s["name"], s["done"], s["planned"], s["status"]) for s in d["sessions"]] == [("j", 12, 12, "done")]
    d = _doc(cli("modes", "--device", "orin-nano", "--grid", "presets", "--json")[1], "modes")
    assert d["count"] == len(d["modes"]) == 2 and {m["name"] for m in d["modes"]} == {"15W", "7W"}
    d = _doc(cli("modes", "--device", "orin-agx", "--grid", "pt", "--json")[1], "modes")
    assert d["count"] == 4368


def test_status_does_not_say_under_way_a_profile_that_ended_off_its_mode(tree, cli, tmp_path):
    """A profile whose put-back failed (its emulator stopped mid-profile) ended and let the board's
    lock go, its record kept for `ptui restore`; its process (the app) lives on.  Status said 'a
    profile is under way in pid N; it puts the board back when it ends' of a profile that had
    ended off its mode.  Under way now means its process still holds the board's lock."""
    from tests.support.child import until_killed
    p = until_killed("from ptui.core.board import undo\n"
                     "from ptui.core.board.backends.sysfs import SysfsBackend\n"
                     "from ptui.core.catalogue.devices import get_device\n"
                     f"be = SysfsBackend(get_device('orin-agx'), root={str(tree)!r})\n"
                     "undo.save(be, undo.PROFILE, be.snapshot(), 'ended')", "saved")
    try:
        sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
        d = _doc(cli("status", *sysfs, "--json")[1], "status")
        assert d["restore"]["pid"] == p.pid and d["restore"]["in_progress"] is False
        out = cli("status", *sysfs)[1]
        assert "under way" not in out and "interrupted profile (session ended)" in out, out
    finally:
        p.kill()
        p.wait()


def test_status_says_a_profile_is_under_way_not_interrupted(tree, cli, tmp_path):
    """The record a running profile keeps is not an interrupted one: status says it is under way
    (its process lives), and what restore would do once it were killed."""
    from tests.support.child import until_killed
    p = until_killed("from ptui.core.board import undo\n"
                     "from ptui.core.board.backends.sysfs import SysfsBackend\n"
                     "from ptui.core.catalogue.devices import get_device\n"
                     "from ptui.core.board.locks import board_lock\n"
                     f"be = SysfsBackend(get_device('orin-agx'), root={str(tree)!r})\n"
                     "board_lock(be).__enter__()\n"          # a profile holds the board's lock
                     "undo.save(be, undo.PROFILE, be.snapshot(), 'busy')", "saved")
    try:
        sysfs = ["--backend", "sysfs", "--sysfs-root", tree]
        d = _doc(cli("status", *sysfs, "--json")[1], "status")
        assert d["restore"]["kind"] == "profile" and d["restore"]["in_progress"] is True
        assert d["restore"]["pid"] == p.pid and d["restore"]["session"] == "busy"
        out = cli("status", *sysfs)[1]
        assert f"is under way in pid {p.pid}" in out and "interrupted" not in out
    finally:
        p.kill()
        p.wait()
    d = _doc(cli("status", "--backend", "sysfs", "--sysfs-root", tree, "--json")[1], "status")
    assert d["restore"]["in_progress"] is False                      # killed: restore would undo it
    assert "interrupted profile" in cli("status", "--backend", "sysfs", "--sysfs-root", tree)[1]


def test_a_preset_the_replay_board_never_recorded_is_refused_before_a_plan(cli, tmp_path):
    corpus = tmp_path / "c.csv"
    rc, _, err = cli("profile", "--backend", "sim", "--device", "orin-agx", "--workload", "lstm",
                     "--count", "6", "--session", "c", "--out", corpus)
    assert rc == 0, err
    for extra in (["--dry-run", "--json"], ["--dry-run"]):
        rc, out, err = cli("apply", "--backend", "replay", "--corpus", corpus, "--device", "orin-agx",
                           "--preset", "MAXN", *extra)
        assert rc == 2 and out == "" and "ptui: error:" in err, (extra, out, err)


def test_batch_sizes_beyond_the_fitted_ones_are_refused_unless_extrapolate(models, cli, tmp_path):
    """A model fitted on batch sizes 8 and 32 decided at 64 and 128 without a word (its predictions
    there are extrapolations); now that is one line and exit 2, or --extrapolate; and ptui predict
    says which rows are extrapolations."""
    rc, out, err = cli("pareto", "--model", models["two"], "--batch-sizes", "32,64,128", "--budget-w", "30")
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "64,128 lie outside them" in err and "--extrapolate" in err
    rc, out, err = cli("pareto", "--model", models["two"], "--batch-sizes", "32,64", "--budget-w", "30",
                       "--extrapolate")
    assert rc == 0, err
    f = tmp_path / "m.csv"
    f.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,batch_size\n12,2201.6,1300.5,3199,64\n12,2201.6,1300.5,3199,16\n")
    rc, out, err = cli("predict", "--model", models["two"], "--modes", f)
    assert rc == 0 and "batch size 64 lies outside the profiled 8,32" in err, err


def test_bad_input_over_batch_sizes_is_one_line_even_where_modes_are_left_out(models, cli, tmp_path):
    """The note on modes left out of the decision came before the error line (two lines for bad
    input); it is said only once the decision is made."""
    rc, out, err = cli("pareto", "--model", models["two"], "--batch-sizes", "8,32", "--budget-w", "30",
                       "--samples-to-target", tmp_path / "none.csv")
    assert rc == 2 and len(err.strip().splitlines()) == 1, err


def test_the_help_and_the_readme_give_the_schema_version_documents_carry():
    """They said schema_version 1 while every document said 2."""
    from pathlib import Path

    from ptui import cli
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"`schema_version` ({contract.SCHEMA_VERSION})" in readme
    assert f"schema_version {contract.SCHEMA_VERSION}" in cli.JSON_HELP
    assert all(f"schema_version {v}" not in cli.JSON_HELP for v in range(contract.SCHEMA_VERSION))
