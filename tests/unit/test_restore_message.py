"""When the board cannot be put back after profiling, nobody says it was (CLI and app words)."""
from ptui.core.board.backends.sim import SimJetson


def test_cli_does_not_claim_a_restore_that_failed(tmp_path, cli, monkeypatch):
    real = SimJetson.restore
    calls = {"n": 0}

    def failing_restore(self, snap):
        calls["n"] += 1
        raise OSError("EBUSY writing the EMC rate")
    monkeypatch.setattr(SimJetson, "restore", failing_restore)
    rc, _, err = cli("profile", "--device", "orin-agx", "--workload", "lstm", "--count", "2",
                     "--out", tmp_path / "p.csv")
    monkeypatch.setattr(SimJetson, "restore", real)
    assert rc == 1 and calls["n"] == 1
    assert "NOT back in its original mode" in err
    assert "the device was restored" not in err
    assert err.strip().splitlines()[-1].startswith("ptui: error: could not restore the original mode")
