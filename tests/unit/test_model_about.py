"""A model's description is typed (issue 24 item 2): ptui reads `model.about` and records facts
with `Model.tell`; no module outside the model's own files edits or reads the meta dict."""
import re
from pathlib import Path

import pytest

from ptui.core.prediction.predictor import About, bundled_reference, load_model

ROOT = Path(__file__).resolve().parents[2] / "ptui"


def test_about_reads_the_facts_typed():
    a = About.of({"kind": "gp", "batch_size": "32", "batch_sizes": [8, "32"], "peak_mem_gb": {"8": 1.5},
                  "batches_per_epoch": 1563, "timed": None})
    assert a.batch_size == 32 and a.batch_sizes == (8, 32) and a.peak_mem_gb == {8: 1.5}
    assert a.timed == "" and a.time_basis == "step" and a.samples_per_epoch is None


def test_tell_records_a_fact_for_the_file_and_refuses_what_is_not_one(tmp_path):
    m = load_model(bundled_reference())                  # a copy of its own (tell edits it)
    m.tell(batch_size=32, batches_per_epoch=1563, peak_mem_gb={32: 2.25})
    assert m.about.batch_size == 32 and m.about.peak_mem_gb == {32: 2.25}
    with pytest.raises(TypeError, match="bogus"):
        m.tell(bogus=1)
    m.save(tmp_path / "m")
    back = load_model(tmp_path / "m").about
    assert back.batch_size == 32 and back.batches_per_epoch == 1563 and back.peak_mem_gb == {32: 2.25}


def test_no_module_edits_or_reads_a_models_meta_dict():
    own = {"predictor.py", "modeldir.py"}
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
            for p in ROOT.rglob("*.py") if p.name not in own
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"\.meta\b(?!data)", line)]
    assert not hits, "\n".join(hits)
