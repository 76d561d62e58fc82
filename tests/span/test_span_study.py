"""The AttentionSpan study on a tiny model: run folder, resume, results, plots, CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from whitebox_eval.span.command import _parse_params, command, print_summary
from whitebox_eval.span.finetune import FinetuneConfig
from whitebox_eval.span.study import SpanConfig, run_span
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs import RunFolder


def _cfg(**kw) -> SpanConfig:
    base = dict(model="tiny", task="string_reversal", split="both", limit=5,
                id_params={"length": (2, 4)}, ood_params={"length": (5, 7)}, instruction="R:",
                generation=True, finetune_examples=8,
                finetune=FinetuneConfig(learning_rate=1e-3, batch_size=4),
                reinforce=True, key_samples=3, heads=(1, 2), values=(0.5,), random_draws=2, select_limit=4,
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
    chosen = res["reinforcement"]["selection"]["chosen"]
    n = chosen["n_heads"]
    assert set(stages) == {"base/id", "base/ood", "finetuned/id", "finetuned/ood",
                           "select/none", "select/key-top1-C0.5-standard", "select/key-top2-C0.5-standard",
                           f"reinforce/key-top{n}-C0.5-standard", f"reinforce/shifted-top{n}-C0.5-standard",
                           f"reinforce/random0-top{n}-C0.5-standard", f"reinforce/random1-top{n}-C0.5-standard"}
    assert all(k == (4 if s.startswith("select/") else 5) for s, k in stages.items())
    assert {"acc,id", "acc_ci,id", "acc,ood", "partial,ood", "acc,ood_reinforced", "acc_ci,ood_reinforced",
            "acc,ood_shifted_reference", "acc,ood_random_heads", "acc_sd,ood_random_heads"} <= set(res["headline"])
    assert res["finetune"]["steps"] == 2
    assert res["stages"]["base/ood"]["correct_vs_error"]["test"] == "welch"
    assert "within_sample" in res["stages"]["base/ood"] and "by_position" in res["stages"]["base/ood"]
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


# ------------------------------------------------------------------- regressions


def test_print_summary_survives_a_split_without_correct_tokens(make_span_lm, tmp_path, capsys):
    # regression: mean_correct is NaN -> null in results.json -> None:.4f raised TypeError
    cfg = SpanConfig(model="tiny", task="string_reversal", split="both", limit=3,
                     id_params={"length": (2, 4)}, ood_params={"length": (5, 7)}, instruction="R:",
                     generation=True, heatmaps=0, batch_size=3)
    folder = run_span(cfg, tmp_path, run_id="g", loaded=make_span_lm(seed=5), show_progress=False)
    res = folder.load_results()
    cve = [s["correct_vs_error"] for s in res["stages"].values()]
    assert any(c["mean_correct"] is None or c["mean_error"] is None for c in cve)  # the case
    print_summary(folder)
    out = capsys.readouterr().out
    assert "n/a" in out and "per answer position" in out and "within samples" in out


def test_id_params_keep_text_values_as_strings():
    # regression: charset=123456789 was read as the integer 123456789 and rejected
    assert _parse_params("string_reversal", "charset=123456789", "--id-params") == {"charset": "123456789"}
    assert _parse_params("string_reversal", "length=5,charset=ab", "--id-params") == \
        {"length": 5, "charset": "ab"}
    assert _parse_params("value_assignment", "key_charset=01,n_pairs=3-4", "--id-params") == \
        {"key_charset": "01", "n_pairs": (3, 4)}
    with pytest.raises(WhiteboxError, match="integer or a range"):
        _parse_params("string_reversal", "length=abc", "--id-params")
    with pytest.raises(WhiteboxError, match="true or false"):
        _parse_params("long_addition", "pad_with_zeros=1", "--id-params")
    out = CliRunner().invoke(command, ["--model", "tiny-nonexistent", "--id-params", "lenght=3", "--limit", "1"])
    assert out.exit_code != 0
