"""Feature MUI with an SAE trained here once per setting (paper 001 Tables 6-7 where no public SAE
exists): the cache keyed by model, layer, settings and text content, reused across studies, and
the fidelity figures beside MUI (tiny random models)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.sae import cache as sae_cache, training as sae_training  # noqa: E402
from whitebox_eval.mui.study import MUIConfig, run_mui  # noqa: E402

TEXT = ("What is 12 + 7? 19. What is 3 * 4? 12. The cat sat on the mat. A dog ran to the park and back. "
        "Question: What is the value of 5 + 5? Answer: 10. ") * 12


@pytest.fixture()
def cache(monkeypatch, tmp_path):
    """A fresh cache root, a text file, and a count of trainings."""
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))
    text = tmp_path / "text.txt"
    text.write_text("\n\n".join(TEXT[i:i + 180] for i in range(0, len(TEXT), 180)), encoding="utf-8")
    calls = []
    real = sae_training.train_sae_for_model

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(sae_training, "train_sae_for_model", counted)
    return text, calls


def settings(text: Path, **over) -> dict:
    return {"layer": 1, "text": [str(text)], "context": 16, "heldout": 0.2, "eval_tokens": 64, "d_sae": 16, "k": 4,
            "steps": 20, "batch_size": 32, "dead_window": 64, **over}


def test_an_sae_is_trained_once_per_setting_and_read_back_after(cache, tmp_path):
    text, calls = cache
    lm = tiny_lm("llama")
    spec, info = sae_cache.trained_sae(lm, settings(text))
    again, info2 = sae_cache.trained_sae(lm, settings(text))
    assert spec == again and info["trained_now"] and not info2["trained_now"] and len(calls) == 1
    folder = Path(info["path"])
    assert spec == f"1={folder}" and folder.parent == tmp_path / "cache" / "sae" and sae_cache.is_whole(folder)
    assert not list(folder.parent.glob("*.partial-*"))  # trained into a partial folder renamed into place
    other, _ = sae_cache.trained_sae(lm, settings(text, steps=21))  # another setting: another SAE
    text.write_text(text.read_text() + " More text.", encoding="utf-8")
    changed, _ = sae_cache.trained_sae(lm, settings(text))  # the same file name with other content
    assert len({spec, other, changed}) == 3 and len(calls) == 3


def test_middle_layer_unknown_settings_and_no_text(cache):
    text, _ = cache
    lm = tiny_lm("llama")
    assert sae_cache.resolve_layer(lm, "middle") == lm.arch.n_layers // 2
    with pytest.raises(WhiteboxError, match="unknown train_sae setting.*bogus"):
        sae_cache.settings({"text": [str(text)], "bogus": 1})
    with pytest.raises(WhiteboxError, match="train_sae needs text"):
        sae_cache.settings({"layer": 1})
    with pytest.raises(WhiteboxError, match="one of them"):
        sae_cache.check_sae_options("sae", ("1=x",), {"text": "t"})
    with pytest.raises(WhiteboxError, match="one of them"):
        sae_cache.check_sae_options("contribution", (), {"text": "t"})


def test_feature_mui_with_a_trained_sae_puts_its_fidelity_beside_it(cache, tmp_path):
    text, calls = cache
    lm = tiny_lm("llama")
    runs = []
    for task in ("arithmetic-gen", "ssd"):  # two studies, one SAE
        cfg = MUIConfig(model="tiny", task=task, score="sae", train_sae=settings(text), limit=4, max_new_tokens=3,
                        batch_size=4, shots="0")
        runs.append(run_mui(cfg, tmp_path / "runs", run_id=task, loaded=lm, show_progress=False))
    assert len(calls) == 1
    for folder in runs:
        res = folder.load_results()
        assert res["kind"] == "feature" and res["width"] == 16 and res["n_layers"] == 1
        assert folder.config["train_sae"]["d_sae"] == 16
        summary, (layer_fid,) = res["sae_summary"], res["sae_fidelity"].values()
        for key in ("mse", "explained_variance", "ce_loss_score"):  # one layer: its own figures
            assert summary[key] == pytest.approx(layer_fid[key])
        held = json.loads((Path(summary["saes"][0]) / "fidelity.json").read_text())["heldout"]
        assert summary["heldout"]["ce_loss_score"] == pytest.approx(held["ce_loss_score"])
    assert "read from the cache" in (runs[1].path / "run.log").read_text()


def test_the_summary_is_the_mean_over_layers():
    fid = {"3": {"n_tokens": 10, "mse": 1.0, "explained_variance": 0.5, "ce_loss_score": 0.9},
           "7": {"n_tokens": 30, "mse": 3.0, "explained_variance": 0.7, "ce_loss_score": 0.95},
           "9": {"n_tokens": 0}}
    out = sae_cache.fidelity_summary(fid, [])
    assert out["mse"] == 2.0 and out["explained_variance"] == pytest.approx(0.6)
    assert out["ce_loss_score"] == pytest.approx(0.925) and out["n_tokens"] == 40 and out["heldout"] is None
