"""The app and the session store: another process holding the store is said on screen, never a
crash; a profile the app cannot check against the store is not offered as complete."""
import pytest

from tests.functional.test_app import make_app, wait_workers
from tests.unit.test_store import _hold_store


@pytest.fixture
def busy_store(monkeypatch):
    """The session store held in exclusive locking mode by another process (readers wait too)."""
    import ptui.core.profiling.store as S
    monkeypatch.setattr(S, "BUSY_TIMEOUT_S", 0.3)
    s = S.Store()
    s.close()
    S._checked.clear()
    p = _hold_store(s.path, exclusive=True)
    yield s.path
    p.kill()
    p.wait()


async def test_profile_screen_says_the_store_is_busy(busy_store):
    app, _ = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.5)
        await pilot.press("s")
        await wait_workers(app, pilot)
        await pilot.pause(0.3)
        status = str(app.screen.query_one("#status").render())
        assert "profile failed" in status and "the session store is busy" in status, status
        assert any("the session store is busy" in str(n.message) for n in app._notifications)
        assert app.is_running


def test_latest_outputs_with_a_busy_store(busy_store):
    from ptui import core
    from ptui.core import paths
    p = paths.profile_csv("orin-agx-resnet18-bs16-20260101-000000")
    p.parent.mkdir(parents=True)
    p.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,time_ms,power_w\n")
    assert core.latest_outputs("orin-agx") == (None, None)     # not known to be complete
    # ... nor said to be unfinished beside Fine-tune's profile (a review's trial)
    assert core.unfinished_after("orin-agx", None) == []
