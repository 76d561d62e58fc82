"""The AttentionSpan study on a tiny model: run folder, resume, results, plots, CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from whitebox_eval.attentionspan.command import _parse_params, command
from whitebox_eval.attentionspan.finetune import FinetuneConfig
from whitebox_eval.attentionspan.study import SpanConfig, run_span
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs import RunFolder


def _cfg(**kw) -> SpanConfig:
    base = dict(model="tiny", task="string_reversal", split="both", limit=5,
                id_params={"length": (2, 4)}, ood_params={"length": (5, 7)}, instruction="R:",
                generation=True, finetune_examples=8,
                finetune=FinetuneConfig(learning_rate=1e-3, batch_size=4),
                reinforce=True, key_samples=3, heads=(1, 2), values=(0.5,), random_draws=2,
                heatmaps=1, batch_size=2)
    base.update(kw)
    return SpanConfig(**base)


def _stages(folder: RunFolder) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in folder.read_samples():
        out[r["stage"]] = out.get(r["stage"], 0) + 1
    return out


def test_study_writes_everything_and_resumes_to_the_same_numbers(make_span_lm, tmp_path):
    cfg = _cfg()
    folder = run_span(cfg, tmp_path, run_id="full", loaded=make_span_lm(seed=3), show_progress=False)
    res = folder.load_results()
    stages = _stages(folder)
    assert set(stages) == {"base/id", "base/ood", "finetuned/id", "finetuned/ood",
                           "reinforce/key-top1-C0.5-standard", "reinforce/key-top2-C0.5-standard",
                           "reinforce/random0-top1-C0.5-standard", "reinforce/random1-top1-C0.5-standard",
                           "reinforce/random0-top2-C0.5-standard", "reinforce/random1-top2-C0.5-standard"}
    assert all(n == 5 for n in stages.values())
    assert {"acc,id", "acc,ood", "partial,ood", "acc,ood_reinforced", "acc,ood_random_heads"} <= set(res["headline"])
    assert res["finetune"]["steps"] == 2
    assert len(res["reinforcement"]["table"]) == 3
    assert res["stages"]["base/ood"]["correct_vs_error"]["test"] == "welch"
    plots = {p.name for p in (folder.path / "plots").iterdir()}
    assert {"rollout_base_id_0.png", "rollout_finetuned_ood_0.png", "ood_accuracy_vs_length.png",
            "ood_partial_accuracy_vs_length.png"} <= plots
    assert (folder.path / "checkpoints" / "final" / "model.safetensors").is_file()
    assert folder.load_array("key_head_scores").shape == (3, 4)

    # interrupt: keep the base stages and half of the fine-tuned ones, drop the rest
    lines = folder.samples_path.read_text().splitlines()
    keep = [l for l in lines if json.loads(l)["stage"].startswith("base/")]
    keep += [l for l in lines if json.loads(l)["stage"] == "finetuned/id"][:2]
    folder.samples_path.write_text("\n".join(keep) + "\n")
    (folder.path / "results.json").unlink()
    (folder.path / "arrays" / "key_head_scores.npy").unlink()
    # resume with a fresh random model of another seed: the checkpoint must be reloaded,
    # so the fine-tuned numbers cannot depend on that seed
    resumed = run_span(cfg, tmp_path, run_id="full", resume=True, loaded=make_span_lm(seed=9),
                       show_progress=False)
    again = resumed.load_results()
    assert _stages(resumed) == stages
    assert again["stages"] == res["stages"]
    assert again["headline"] == res["headline"]
    assert "resumed with" in (folder.path / "run.log").read_text()


def test_resume_refuses_a_different_config(make_span_lm, tmp_path):
    cfg = _cfg(finetune_examples=0, reinforce=False, generation=False)
    run_span(cfg, tmp_path, run_id="r", loaded=make_span_lm(), show_progress=False)
    with pytest.raises(WhiteboxError):
        run_span(_cfg(finetune_examples=0, reinforce=False, generation=False, limit=6),
                 tmp_path, run_id="r", resume=True, loaded=make_span_lm(), show_progress=False)


def test_config_errors_say_what_to_fix():
    with pytest.raises(WhiteboxError, match="OOD"):
        _cfg(split="id").check()
    with pytest.raises(WhiteboxError, match="unknown task"):
        _cfg(task="sorting").check()
    with pytest.raises(WhiteboxError, match="valid ones"):
        _parse_params("string_reversal", "lenght=3-5", "--id-params")
    assert _parse_params("long_addition", "digits=1-3,pad_with_zeros=false", "--id-params") == \
        {"digits": (1, 3), "pad_with_zeros": False}


def test_cli_help_teaches_the_modes():
    out = CliRunner().invoke(command, ["--help"])
    assert out.exit_code == 0
    for word in ("--finetune", "--reinforce", "--heads", "--values", "--mode", "--split", "--resume"):
        assert word in out.output
    assert "whitebox-eval span" in out.output
