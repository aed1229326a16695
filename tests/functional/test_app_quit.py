"""Quitting the app while a fine-tune runs (issue 10 C5): the app ends promptly, not after the
current fitting stage (it showed a blank screen for ~8 s)."""
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

    from ptui.core.devices import get_device
    from ptui.core.errors import InputError
    from ptui.core.session import fit_cancellable
    bad = tmp_path / "bad.csv"
    bad.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n")
    with pytest.raises(InputError) as e:
        fit_cancellable(get_device("orin-agx"), bad, workload="resnet18")
    assert "\n" not in str(e.value) and "Traceback" not in str(e.value) and str(e.value)
