"""Feature MUI with an SAE trained here (paper 001 Tables 6-7 where no public SAE exists): the SAE
is a study of its own (``studies.sae``, a reproduce child) whose run folder the MUI runs read, and
its fidelity figures stand beside MUI (tiny random models)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "mui"))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval import studies  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.mui.study import MUIConfig, run_mui  # noqa: E402
from whitebox_eval.sae import study as sae_study, training as sae_training  # noqa: E402

TEXT = ("What is 12 + 7? 19. What is 3 * 4? 12. The cat sat on the mat. A dog ran to the park and back. "
        "Question: What is the value of 5 + 5? Answer: 10. ") * 12


@pytest.fixture()
def text(monkeypatch, tmp_path):
    """A text file, and a count of trainings."""
    path = tmp_path / "text.txt"
    path.write_text("\n\n".join(TEXT[i:i + 180] for i in range(0, len(TEXT), 180)), encoding="utf-8")
    calls = []
    real = sae_training.train_sae_for_model

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(sae_training, "train_sae_for_model", counted)
    return path, calls


def settings(text: Path, **over) -> dict:
    return {"layer": 1, "text": [str(text)], "context": 16, "heldout": 0.2, "eval_tokens": 64, "d_sae": 16, "k": 4,
            "steps": 20, "batch_size": 32, "dead_window": 64, **over}


def test_an_sae_study_trains_into_its_run_folder_and_a_resume_keeps_it(text, tmp_path):
    path, calls = text
    lm = tiny_lm("llama")
    r = studies.sae(tmp_path / "runs", run_id="sae", loaded=lm, show_progress=False, **settings(path))
    sae = r.folder / sae_study.SAE_DIR
    assert sae_study.is_whole(sae) and r.results["sae"] == f"1={sae}" and r.config["suite"] == "sae"
    assert r.results["heldout"]["n_tokens"] > 0 and len(calls) == 1
    again = studies.sae(tmp_path / "runs", run_id="sae", resume=True, loaded=lm, show_progress=False, **settings(path))
    assert again.results["sae"] == r.results["sae"] and len(calls) == 1  # kept, not trained again
    assert sae_study.resolve_layer(lm, "middle") == lm.arch.n_layers // 2
    with pytest.raises(WhiteboxError, match="needs text"):
        studies.sae(tmp_path / "runs", loaded=lm, **{**settings(path), "text": []})


def test_feature_mui_reads_the_sae_run_folder_and_puts_its_fidelity_beside_it(text, tmp_path):
    path, calls = text
    lm = tiny_lm("llama")
    sae_run = studies.sae(tmp_path / "runs", run_id="sae", loaded=lm, show_progress=False, **settings(path)).folder
    runs = []
    for task in ("arithmetic-gen", "ssd"):  # two studies, one SAE
        cfg = MUIConfig(model="tiny", task=task, score="sae", sae=(str(sae_run),), limit=4, max_new_tokens=3,
                        batch_size=4, shots="0")
        runs.append(run_mui(cfg, tmp_path / "runs", run_id=task, loaded=lm, show_progress=False))
    assert len(calls) == 1
    for folder in runs:
        res = folder.load_results()
        assert res["kind"] == "feature" and res["width"] == 16 and res["n_layers"] == 1
        summary, (layer_fid,) = res["sae_summary"], res["sae_fidelity"].values()
        for key in ("mse", "explained_variance", "ce_loss_score"):  # one layer: its own figures
            assert summary[key] == pytest.approx(layer_fid[key])
        held = json.loads((Path(summary["saes"][0]) / "fidelity.json").read_text())["heldout"]
        assert summary["heldout"]["ce_loss_score"] == pytest.approx(held["ce_loss_score"])
    with pytest.raises(WhiteboxError, match="--score sae needs --sae"):
        run_mui(MUIConfig(model="tiny", score="sae", limit=2), tmp_path / "runs", loaded=lm)


def test_the_summary_is_the_mean_over_layers():
    fid = {"3": {"n_tokens": 10, "mse": 1.0, "explained_variance": 0.5, "ce_loss_score": 0.9},
           "7": {"n_tokens": 30, "mse": 3.0, "explained_variance": 0.7, "ce_loss_score": 0.95},
           "9": {"n_tokens": 0}}
    out = sae_study.fidelity_summary(fid, [])
    assert out["mse"] == 2.0 and out["explained_variance"] == pytest.approx(0.6)
    assert out["ce_loss_score"] == pytest.approx(0.925) and out["n_tokens"] == 40 and out["heldout"] is None
