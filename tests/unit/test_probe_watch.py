"""The probe's watch on its connection to ptui: end the script only when ptui is gone."""
import os
import socket

from ptui.probe import hook


def _watch(monkeypatch, sock):
    ended = []
    monkeypatch.setattr(hook, "_end_orphaned_script", lambda *a, **k: ended.append(True))
    hook._watch_ptui(sock)
    return ended


def test_a_descriptor_the_script_closed_itself_is_not_ptui_gone(monkeypatch):
    """A launcher that closes every inherited descriptor (os.closerange) before starting its
    ranks closed the probe's socket under its watch: the watch read that as 'ptui is gone' and
    ended the whole training run (a flaky CI failure: it depended on whether the watch thread
    reached recv() before the close)."""
    a, b = socket.socketpair()
    try:
        os.close(a.fileno())                   # as os.closerange(3, ...) does, behind the object
        assert _watch(monkeypatch, a) == []
    finally:
        a.detach()
        b.close()


def test_ptui_closing_the_connection_ends_the_script(monkeypatch):
    a, b = socket.socketpair()
    b.close()                                  # ptui gone: end-of-file
    try:
        assert _watch(monkeypatch, a) == [True]
    finally:
        a.close()
