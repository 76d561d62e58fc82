"""Fine-tuned weights are cached by what sets them and reused; a shared model gets its weights back;
the row loss agrees with the model's own label-masked loss."""

from __future__ import annotations

import json

import pytest
import torch

from whitebox_eval.span.finetune import FinetuneConfig
from whitebox_eval.span.study import SpanConfig, run_span
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models import training
from whitebox_eval.models.training import row_batch, row_loss, weights_fingerprint


def _cfg(**kw) -> SpanConfig:
    base = dict(model="tiny", task="string_reversal", split="both", limit=4, id_params={"length": (2, 4)},
                ood_params={"length": (5, 6)}, instruction="R:", finetune_examples=8,
                finetune=FinetuneConfig(learning_rate=1e-3, batch_size=4), rollout=False, heatmaps=0, batch_size=4)
    base.update(kw)
    return SpanConfig(**base)


def _finetuned(folder) -> list:
    return [(r["id"], r["correct"]) for r in folder.read_samples() if r["stage"].startswith("finetuned/")]


def test_a_second_run_with_the_same_training_reuses_the_cached_weights(make_span_lm, tmp_path):
    before = len(training.TRAINED)
    first = run_span(_cfg(), tmp_path, run_id="a", loaded=make_span_lm(seed=1), show_progress=False)
    assert len(training.TRAINED) == before + 1
    # another run (another folder, a fresh copy of the same model): no training, same numbers
    second = run_span(_cfg(), tmp_path, run_id="b", loaded=make_span_lm(seed=1), show_progress=False)
    assert len(training.TRAINED) == before + 1
    assert "reused from the cache" in (second.path / "run.log").read_text()
    assert json.loads((second.path / "finetune.json").read_text())["reused"] is True
    assert _finetuned(first) == _finetuned(second)
    assert first.load_results()["finetune"] == second.load_results()["finetune"]
    assert first.load_results()["phase"] == "finetuned"
    # another learning rate, or another model's weights, is another training
    run_span(_cfg(finetune=FinetuneConfig(learning_rate=2e-3, batch_size=4)), tmp_path, run_id="c",
             loaded=make_span_lm(seed=1), show_progress=False)
    run_span(_cfg(), tmp_path, run_id="d", loaded=make_span_lm(seed=2), show_progress=False)
    assert len(training.TRAINED) == before + 3


def test_the_cache_lives_under_the_cache_root(make_span_lm, tmp_path, monkeypatch):
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "root"))
    folder = run_span(_cfg(), tmp_path / "runs", run_id="a", loaded=make_span_lm(seed=1), show_progress=False)
    weights = json.loads((folder.path / "finetune.json").read_text())["weights"]
    assert weights.startswith(str(tmp_path / "root" / "finetuned" / "span"))
    assert not (folder.path / "checkpoints").exists()
    entry = (tmp_path / "root" / "finetuned" / "span")
    assert [p.name for p in entry.iterdir() if ".partial" in p.name] == []
    key = json.loads(next(entry.glob("*/key.json")).read_text())
    assert {"model", "weights", "task", "id_params", "seed", "finetune", "data"} <= set(key)


def test_a_shared_model_gets_its_weights_back(make_span_lm, tmp_path):
    lm = make_span_lm(seed=4)
    fp = weights_fingerprint(lm.model)
    run_span(_cfg(), tmp_path, run_id="a", loaded=lm, show_progress=False)
    assert weights_fingerprint(lm.model) == fp
    run_span(_cfg(), tmp_path, run_id="b", loaded=lm, show_progress=False)  # cached path restores too
    assert weights_fingerprint(lm.model) == fp


def test_a_failed_training_leaves_no_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path))

    def boom(dest):
        (dest / "half").write_text("x")
        raise WhiteboxError("stopped")

    with pytest.raises(WhiteboxError):
        training.trained("span", {"k": 1}, "m", boom)
    assert list((tmp_path / "finetuned" / "span").iterdir()) == [] or all(
        p.suffix == ".lock" for p in (tmp_path / "finetuned" / "span").iterdir())
    got = training.trained("span", {"k": 1}, "m", lambda dest: {"ok": 1})
    assert not got.reused and got.info == {"ok": 1}
    assert training.trained("span", {"k": 1}, "m", boom).reused


def test_row_loss_is_the_models_own_loss_on_the_answer_tokens(make_span_lm):
    lm = make_span_lm(seed=0)
    seqs = [[5, 6, 7, 8, 9], [10, 11, 12]]
    answers = [2, 1]  # the last tokens of each sequence are the answer
    batch = row_batch([(s, list(range(len(s) - a - 1, len(s) - 1)), s[len(s) - a:]) for s, a in zip(seqs, answers)])
    ours = row_loss(lm.model, batch)
    # reference: HF's loss with labels -100 outside the answer, one sequence at a time, token-weighted
    total, count = 0.0, 0
    for s, a in zip(seqs, answers):
        ids = torch.tensor([s])
        labels = torch.full_like(ids, -100)
        labels[0, len(s) - a:] = ids[0, len(s) - a:]
        with torch.no_grad():
            total += float(lm.model(input_ids=ids, labels=labels).loss) * a
        count += a
    assert float(ours.detach()) == pytest.approx(total / count, rel=1e-5)


def test_row_batch_errors_are_one_line():
    with pytest.raises(WhiteboxError, match="at least one"):
        row_batch([])
    with pytest.raises(WhiteboxError, match="inside its sequence"):
        row_batch([([1, 2], [5], [3])])
