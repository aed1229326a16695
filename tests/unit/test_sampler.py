"""core.Sampler's readings for a watcher that keeps its own list (the Flower mod's budget hold)."""
from __future__ import annotations

import pytest

from ptui.core.board.backends.sim import SimJetson
from ptui.core.board.telemetry import Sampler
from ptui.core.catalogue.devices import get_device


def test_a_watcher_gets_each_reading_once_and_in_order():
    be = SimJetson(get_device("orin-agx"), seed=1)
    s = Sampler(be, interval=0.1, history_s=0.5, now=be.clock.now)    # keeps 6 readings
    got, n = [], 0
    for _ in range(4):
        s.sample_once()
    new, n = s.taken_after(n)
    got += new
    assert n == 4 and len(new) == 4
    assert s.taken_after(n) == ([], 4)                                   # nothing new: nothing again
    for _ in range(9):                                                   # more than it keeps
        s.sample_once()
    new, n = s.taken_after(n)
    got += new
    assert n == 13 and len(new) == 6                                     # the kept ones, oldest first
    assert [t for t, _ in new] == sorted(t for t, _ in new)
    kept = s.history()
    assert [w for _, w in new] == [w for _, w in kept]
    assert [t for t, _ in new] == pytest.approx([s.now() + ago for ago, _ in kept])
