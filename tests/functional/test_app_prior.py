"""The app's Pareto screen reads a model from the roofline prior alone like any model and says,
beside its figures, that no mode was profiled (issue 25)."""
import json
import re

from ptui.core.catalogue.devices import get_device
from tests.functional.test_app import make_app, type_path_on_pareto

AGX = get_device("orin-agx")


async def test_the_apps_pareto_screen_reads_a_prior_model_and_says_what_it_is(cli, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90.0, "gbytes_per_step": 6.0, "batch_size": 32}))
    rc, _, err = cli("fit", "--device", "orin-agx", "--workload-spec", spec,
                     "--out", tmp_path / "m")
    assert rc == 0, err
    app, _ = make_app()
    async with app.run_test(size=(110, 36)) as pilot:
        scr = await type_path_on_pareto(app, pilot, tmp_path / "m")
        assert scr.table is not None and len(scr.table) == len(AGX.full_space())
        assert "roofline prior alone: no mode profiled" in str(scr.query_one("#details").render())
        # a spec says no epoch: the screen counts 1000 steps, not ResNet-18's 3125 minibatches
        # of batch 16 for this batch-32 model (a user trial saw "epoch 7.04 min" from nowhere)
        assert scr.unit == "1k steps" and scr.mb_per_epoch == 1000
        assert "epoch" not in str(scr.query_one("#details").render()).lower()
        # a time spread wider than half the time says its 90 % interval (a user trial), and from
        # the prior alone the power's narrower one too
        details = str(scr.query_one("#details").render())
        assert "90 % within" in details and re.search(r"90 % within [\d.]+-[\d.]+ W", details), details


async def test_the_profile_screens_seed_is_the_boards_own_with_a_pool(monkeypatch, tmp_path):
    """The app sent seed 0 from its field whatever the pool: every board of a fleet profiling from
    the app drew the same modes (a review).  With a pool the field starts at ptui profile's
    default, drawn from the board's id; without, at 0."""
    import zlib

    from textual.widgets import Input
    monkeypatch.setenv("PTUI_POOL", f"sqlite:///{tmp_path}/pool.sqlite")
    monkeypatch.setenv("PTUI_BOARD_ID", "orin-07")
    app, _ = make_app()
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        want = zlib.crc32(b"orin-07") % 100_000          # the Flower node's too
        assert app.screen.query_one("#seed", Input).value == str(want)


async def test_the_source_list_marks_another_boards_model_by_its_device_not_its_name(cli, tmp_path):
    """ptui tune saves its model as tune-orin-agx-...: the Pareto screen's list marked it
    '(other board)' on the Orin AGX it was made for, as it did any model whose name did not begin
    with the device's (a user trial).  The model's meta.json says its device."""
    import os
    from pathlib import Path

    from textual.widgets import Select
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90.0, "gbytes_per_step": 6.0, "batch_size": 32}))
    rc, _, err = cli("--device", "orin-agx", "tune", "--count", "0", "--budget-w", "30",
                     "--workload-spec", spec)
    assert rc == 0, err
    models = Path(os.environ["PTUI_DATA_DIR"]) / "models"
    rc, _, err = cli("fit", "--device", "xavier-agx", "--workload-spec", spec,
                     "--out", models / "mine")
    assert rc == 0, err
    app, _ = make_app()
    async with app.run_test(size=(110, 36)) as pilot:
        scr = await type_path_on_pareto(app, pilot, tmp_path / "nothing")
        labels = {Path(v).name: str(label) for label, v in scr.query_one("#source", Select)._options
                  if isinstance(v, str)}
        tuned = next(k for k in labels if k.startswith("tune-orin-agx-"))
        assert "other board" not in labels[tuned], labels
        assert "other board" in labels["mine"], labels


async def test_apply_says_the_priors_time_spread_and_what_it_rests_on(cli, tmp_path):
    """Enter on a prior model's pick: Apply said 'predicted 135.2 ms per minibatch of 32, 22.31 W
    ± 4.04', the time's spread (± 219.8, 90 % within 20.8-877 ms) left out and nothing saying the
    figures rest on no measurement, where the Pareto screen beside it said both (a user trial)."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 90.0, "gbytes_per_step": 6.0, "batch_size": 32}))
    rc, _, err = cli("fit", "--device", "orin-agx", "--workload-spec", spec, "--out", tmp_path / "m")
    assert rc == 0, err
    app, _ = make_app()
    async with app.run_test(size=(110, 36)) as pilot:
        scr = await type_path_on_pareto(app, pilot, tmp_path / "m")
        scr.query_one("#front").focus()
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        plan = " ".join(str(app.screen.query_one("#plan").render()).split())
        assert re.search(r"[\d.]+ ± [\d.]+ ms per minibatch of 32 \(90 % within [\d.]+-[\d.]+ ms\)",
                         plan), plan
        assert re.search(r"W ± [\d.]+ \(90 % within [\d.]+-[\d.]+ W\)", plan), plan
        assert "roofline prior alone" in plan, plan


async def test_a_small_jobs_time_and_energy_are_not_rounded_to_nothing(cli, tmp_path):
    """A small CNN's model (tune --count 0 of docs/examples/train_cnn.py) read '1k steps 0.07 min'
    and '10 x 1k steps: 0.01 h, 0 Wh' on the Pareto screen (a user trial): the job's energy was
    rounded to nothing.  Short spans say seconds or minutes, small energies three digits."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"gflop_per_step": 0.4, "gbytes_per_step": 0.04, "batch_size": 32,
                                "host_ms": 2, "serial_ms": 0.5, "loader_ms": 0.5, "workers": 0}))
    rc, _, err = cli("fit", "--device", "orin-agx", "--workload-spec", spec, "--out", tmp_path / "m")
    assert rc == 0, err
    app, _ = make_app()
    async with app.run_test(size=(110, 36)) as pilot:
        scr = await type_path_on_pareto(app, pilot, tmp_path / "m")
        details = str(scr.query_one("#details").render())
        (job,) = [ln for ln in details.splitlines() if "x 1k steps:" in ln]
        m = re.fullmatch(r"10 x 1k steps: ([\d.]+) (s|min|h), ([\d.]+) Wh", job)
        assert m and float(m.group(1)) > 0 and float(m.group(3)) > 0, job
        (one,) = [ln for ln in details.splitlines() if ln.startswith("1k steps ")]
        assert re.fullmatch(r"1k steps [1-9][\d.]* (s|min)", one), one
