"""``mcqa --prompt lm-eval`` on a tiny model: every number recomputed from the model's own
forward pass with lm-eval's text and encoding, and the all-items / --limit rules."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from test_mcqa_study import tiny_mcqa_model  # noqa: E402,F401  (the module fixture)

from whitebox_eval.tasks.spec import TaskSpec  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.mcqa.command import _print_mcqa_summary  # noqa: E402
from whitebox_eval.mcqa.config import default_methods  # noqa: E402
from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa  # noqa: E402


def _hellaswag(path: Path, n: int = 6) -> Path:
    rows = [{"ind": i, "activity_label": f"Activity {i}", "ctx_a": f"Someone does thing {i}.", "ctx_b": "then they",
             "endings": [f"walk [title] away {i}.", "sit  down.", f"run {i} miles to the store.", "x"], "label": str(i % 4)}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _mmlu(folder: Path) -> Path:
    for split, n in (("test", 8), ("dev", 5)):
        (folder / split).mkdir(parents=True, exist_ok=True)
        what = "What is" if split == "test" else "Say"  # dev rows differ from test rows (identical ones are not evaluated)
        rows = [f"{what} {i} plus {i}?,{2 * i},{2 * i + 1},{2 * i + 2},{2 * i + 3},{'ABCD'[i % 4]}" for i in range(n)]
        (folder / split / f"elementary_mathematics_{split}.csv").write_text("\n".join(rows) + "\n")
    return folder / "test"


def _loglik(lm, context: str, continuation: str) -> float:
    """lm-eval's loglikelihood computed here from HF's model directly (no engine)."""
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    whole = lm.tokenizer(context + continuation)["input_ids"]
    ctx = lm.tokenizer(context)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(input_ids=torch.tensor([whole])).logits[0].double(), -1)
    return float(sum(logp[p - 1, whole[p]] for p in range(len(ctx), len(whole))))


def _samples(folder) -> list[dict]:
    return [json.loads(line) for line in (folder.path / "samples.jsonl").read_text().splitlines()]


def test_hellaswag_cloze_equals_lm_evals_computation(tiny_mcqa_model, tmp_path):  # noqa: F811
    path = _hellaswag(tmp_path / "hs.jsonl")
    task = f"hellaswag={path}"
    assert default_methods(TaskSpec.parse(task), "lm-eval") == ("cloze",)
    cfg = MCQAConfig(model="tiny", task=task, prompt="lm-eval", methods=default_methods(TaskSpec.parse(task), "lm-eval"), batch_size=4)
    folder = run_mcqa(cfg, tmp_path / "runs", run_id="hs", loaded=tiny_mcqa_model, show_progress=False)
    res, samples = folder.load_results(), _samples(folder)
    assert res["n_total"] == res["n_evaluated"] == len(samples) == 6 and res["n_val"] == 0
    acc, acc_norm = [], []
    for s in samples:
        i = int(s["id"].split("/")[1])
        assert s["prompt"] == f"Activity {i}: Someone does thing {i}. Then they"
        choices = [f"walk. away {i}.", "sit down.", f"run {i} miles to the store.", "x"]
        assert s["continuations"] == [" " + c for c in choices]
        ref = np.array([_loglik(tiny_mcqa_model, s["prompt"], " " + c) for c in choices])
        np.testing.assert_allclose(s["cloze_loglik"], ref, rtol=1e-5, atol=1e-4)  # float32 sums of ~20 terms
        acc.append(int(np.argmax(ref)) == s["gold"])
        acc_norm.append(int(np.argmax(ref / np.array([len(c) for c in choices]))) == s["gold"])
        assert s["pred_cloze"] == int(np.argmax(s["cloze_loglik"]))
    assert res["headline"]["acc,cloze"] == pytest.approx(np.mean(acc))
    assert res["headline"]["acc_norm,cloze"] == pytest.approx(np.mean(acc_norm))
    assert res["headline"]["acc_n,cloze"] == 6
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["prompt_style"]["tasks"] == ["hellaswag"]


def test_mmlu_letters_with_dev_demonstrations_and_white_box_scores(tiny_mcqa_model, tmp_path, capsys):  # noqa: F811
    test_dir = _mmlu(tmp_path / "mmlu")
    cfg = MCQAConfig(model="tiny", task=f"mmlu={test_dir}", prompt="lm-eval", shots=2, limit=6, batch_size=4,
                     min_val_items=2, methods=("baseline", "qk", "cloze"), uncertainty=False)
    folder = run_mcqa(cfg, tmp_path / "runs", run_id="m", loaded=tiny_mcqa_model, show_progress=False)
    res, samples = folder.load_results(), _samples(folder)
    assert (res["n_total"], res["n_evaluated"], res["n_val"], res["n_test"]) == (8, 6, 2, 4)
    head = "The following are multiple choice questions (with answers) about elementary mathematics.\n\n"
    shots = "Say 0 plus 0?\nA. 0\nB. 1\nC. 2\nD. 3\nAnswer: A\n\nSay 1 plus 1?\nA. 2\nB. 3\nC. 4\nD. 5\nAnswer: B\n\n"
    for s in samples:
        i = int(s["id"].rsplit(":", 1)[1]) - 1
        prompt = head + shots + f"What is {i} plus {i}?\nA. {2 * i}\nB. {2 * i + 1}\nC. {2 * i + 2}\nD. {2 * i + 3}\nAnswer:"
        ref = np.array([_loglik(tiny_mcqa_model, prompt, " " + x) for x in "ABCD"])
        np.testing.assert_allclose(s["cloze_loglik"], ref, rtol=1e-5, atol=1e-4)
        # the letter logits of the same pass give the same choice as lm-eval's loglikelihoods
        assert s["pred_baseline"] == int(np.argmax(ref)) == s["pred_cloze"]
    assert res["headline"]["acc,baseline"] == pytest.approx(np.mean([s["pred_baseline"] == s["gold"] for s in samples]))
    assert res["headline"]["acc_n,baseline"] == 6 and res["headline"]["acc_n,qk_head"] == 4
    assert "acc_norm,cloze" not in res["headline"]  # lm-eval's MMLU reports acc only
    _print_mcqa_summary(folder)
    out = capsys.readouterr().out
    assert "evaluated 6 of 8 items (--limit)" in out and "acc,baseline_test" in out
    conf = yaml.safe_load((folder.path / "config.yaml").read_text())
    assert conf["prompt"] == "lm-eval" and conf["demonstrations"]["source"] == "dev_same_subject"


def test_lm_eval_style_refuses_what_it_cannot_run(tiny_mcqa_model, tmp_path):  # noqa: F811
    task = f"hellaswag={_hellaswag(tmp_path / 'hs.jsonl')}"
    with pytest.raises(WhiteboxError, match="use --methods cloze"):
        run_mcqa(MCQAConfig(model="tiny", task=task, prompt="lm-eval", methods=("baseline",)), tmp_path / "r",
                 loaded=tiny_mcqa_model, show_progress=False)
    with pytest.raises(WhiteboxError, match="task ssd has prompt styles: paper"):
        run_mcqa(MCQAConfig(model="tiny", prompt="lm-eval"), tmp_path / "r", loaded=tiny_mcqa_model, show_progress=False)
    assert not (tmp_path / "r").exists()  # refused before a run folder was made


def test_paper_style_cloze_shows_the_demonstrations_with_their_gold_text(tiny_mcqa_model, tmp_path):  # noqa: F811
    cfg = MCQAConfig(model="tiny", task="ssd", shots=2, limit=4, methods=("cloze",), batch_size=4)
    folder = run_mcqa(cfg, tmp_path / "runs", run_id="c", loaded=tiny_mcqa_model, show_progress=False)
    demo_ids = yaml.safe_load((folder.path / "config.yaml").read_text())["demonstrations"]["ids"]
    from whitebox_eval.tasks.ssd import make_ssd

    pool = {it.id: it for it in make_ssd(4 + 15, 4, seed=0)}
    shots = "".join(f"Question: {pool[i].question}\nAnswer: {pool[i].gold_text}\n\n" for i in demo_ids)
    for s in _samples(folder):
        assert s["prompt"] == shots + f"Question: {pool[s['id']].question}\nAnswer:"
        assert s["continuations"] == [" " + o for o in pool[s["id"]].options]
