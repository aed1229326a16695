"""Issue 10 in the app: quitting while a fine-tune runs ends the app promptly, not after the
current fitting stage (C5: it showed a blank screen for ~8 s); a script's model says what one
time is (A6)."""
import time


async def test_quitting_mid_fine_tune_is_prompt(tmp_path):
    from tests.functional.test_app import make_app
    from tests.support.cli import run_cli
    csv = tmp_path / "p.csv"
    rc, _, err = run_cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "50",
                         "--out", csv)
    assert rc == 0, err
    app, _ = make_app(profile_csv=csv)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("3")
        await pilot.pause(0.2)
        await pilot.press("t")
        t_start = time.monotonic()
        while "fitting" not in str(app.screen.query_one("#result").render()) \
                and "cross-validating" not in str(app.screen.query_one("#result").render()):
            assert time.monotonic() - t_start < 30
            await pilot.pause(0.05)
        await pilot.pause(0.5)                       # well inside a fitting stage
        res = str(app.screen.query_one("#result").render())
        assert "Fitted on" not in res, "the fit ended before the test could quit mid-way"
        t0 = time.monotonic()
        await app.action_quit()
        took = time.monotonic() - t0
    print(f"quit took {took:.2f} s")
    assert took < 1.5, f"quitting mid fine-tune took {took:.1f} s"


def test_the_fitting_child_reports_bad_input_as_one_line(tmp_path):
    import pytest

    from ptui.core.catalogue.devices import get_device
    from ptui.core.errors import InputError
    from ptui.core.usecases.fit import fit_cancellable
    bad = tmp_path / "bad.csv"
    bad.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n")
    with pytest.raises(InputError) as e:
        fit_cancellable(get_device("orin-agx"), bad, workload="resnet18")
    assert "\n" not in str(e.value) and "Traceback" not in str(e.value) and str(e.value)


async def test_a_scripts_model_says_what_was_timed_on_pareto_and_apply(tmp_path):
    """A model fitted on a script's profile predicts optimizer steps (or whole iterations): the
    Pareto details and the Apply plan say so (they said 'minibatch')."""
    import csv

    from tests.functional.test_app import make_app, wait_workers
    from tests.support.cli import run_cli
    rc, _, err = run_cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "20",
                         "--out", tmp_path / "p.csv")
    assert rc == 0, err
    rows = list(csv.reader((tmp_path / "p.csv").open()))
    h = rows[0]
    for r in rows[1:]:
        r[h.index("timed")] = "one iteration of 2 optimizers (2 optimizer steps, 2 backward passes)"
        r[h.index("workload")] = "script"
    with (tmp_path / "s.csv").open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    rc, _, err = run_cli("fit", "--device", "orin-agx", "--profile", tmp_path / "s.csv", "--out",
                         tmp_path / "m", "--method", "gp")
    assert rc == 0, err
    app, _ = make_app(model_dir=tmp_path / "m")
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("4")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        details = str(app.screen.query_one("#details").render())
        assert app.screen.model is not None and "minibatch" not in details, details
        await pilot.press("enter")
        await wait_workers(app, pilot)
        await pilot.pause(0.2)
        plan = str(app.screen.query_one("#plan").render())
        assert "ms per iteration of 2 optimizers" in plan and "minibatch" not in plan, plan


def test_the_fitting_child_fits_saves_and_reports_its_steps(tmp_path):
    """fit_cancellable's whole way: every step the child takes arrives as a progress.Step, saving
    last, and the outcome is the model the child saved."""
    from ptui.core.catalogue.devices import get_device
    from ptui.core.progress import SAVING
    from ptui.core.usecases.fit import fit_cancellable
    from tests.support.cli import run_cli
    csv = tmp_path / "p.csv"
    rc, _, err = run_cli("profile", "--device", "orin-agx", "--workload", "resnet18", "--count", "12",
                         "--out", csv)
    assert rc == 0, err
    steps = []
    res = fit_cancellable(get_device("orin-agx"), csv, workload="resnet18", out=tmp_path / "m",
                          progress=steps.append)
    assert res.out == tmp_path / "m" and res.n_modes == 12 and res.workload == "resnet18"
    assert res.sizes and res.model.device.name == "orin-agx" and res.seconds > 0
    assert steps and steps[-1].kind == SAVING and all(s.kind != SAVING for s in steps[:-1])


def test_a_fit_cancelled_before_it_starts_ends_at_once_with_no_model(tmp_path):
    import threading

    import pytest

    from ptui.core.catalogue.devices import get_device
    from ptui.core.usecases.fit import fit_cancellable
    from ptui.core.usecases.profile import Cancelled
    csv = tmp_path / "p.csv"
    csv.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n")
    cancel = threading.Event()
    cancel.set()
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        fit_cancellable(get_device("orin-agx"), csv, out=tmp_path / "m", cancel=cancel)
    assert time.monotonic() - t0 < 5 and not (tmp_path / "m").exists()
