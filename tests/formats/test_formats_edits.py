"""``formats --edit``: the MCQ pass and every free generation under the edits, recorded in
config.yaml; a bad edit is one line before the run folder."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.formats import study as fs

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_formats_llama  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return tiny_formats_llama()


def _cfg(**kw):
    base = dict(model="tiny", task="arithmetic:add1,add2,mul1", limit=3, shots=2, n_samples=2, max_new_tokens=3, n_bins=2)
    return fs.FormatsConfig(**{**base, **kw})


def test_a_steered_formats_study_records_its_edit_and_changes_the_numbers(tiny, tmp_path):
    np.save(tmp_path / "v.npy", np.full(tiny.arch.d_model, 4.0, dtype=np.float32))
    spec = f"steer:resid:0:{tmp_path / 'v.npy'}*2"
    plain = fs.run_formats(_cfg(), tmp_path, run_id="plain", loaded=tiny, show_progress=False)
    edited = fs.run_formats(_cfg(edits=(spec,)), tmp_path, run_id="steered", loaded=tiny, show_progress=False)
    assert yaml.safe_load((edited.path / "config.yaml").read_text())["edits"] == [spec]
    assert "edits" not in yaml.safe_load((plain.path / "config.yaml").read_text())
    a, b = list(plain.read_samples()), list(edited.read_samples())
    assert [s["mcq"]["p_raw"] for s in a] != [s["mcq"]["p_raw"] for s in b]
    assert [s["generations"] for s in a] != [s["generations"] for s in b]


def test_bad_edits_are_refused_before_the_run_folder(tiny, tmp_path):
    with pytest.raises(WhiteboxError, match="layer 7 is outside"):
        fs.run_formats(_cfg(edits=("neurons:7:1",)), tmp_path, run_id="x", loaded=tiny, show_progress=False)
    with pytest.raises(WhiteboxError, match="leave out @last"):
        fs.run_formats(_cfg(edits=("ablate:0.0@last",)), tmp_path, run_id="x", loaded=tiny, show_progress=False)
    with pytest.raises(WhiteboxError, match="unknown edit 'zap'"):
        _cfg(edits=("zap:1",))
    assert not (tmp_path / "x").exists()
