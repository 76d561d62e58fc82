"""MCQA over a file whose rows have different numbers of options (3, 5 and 8)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.mcqa.debiasing import cyclic_orders, pride, pride_by_option_count  # noqa: E402
from whitebox_eval.mcqa.head_scores import Split  # noqa: E402
from whitebox_eval.mcqa.metrics import by_option_count, chance_accuracy  # noqa: E402
from tiny_models import tiny_llama_with_bpe  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "byod" / "questions.jsonl"
WORDS = ["red", "blue", "green", "cat", "dog", "sun", "moon", "tree", "rock", "fish", "bird", "milk"]


def mixed_rows(n_per_count: int = 8) -> list[dict]:
    """Rows with 3, 5 and 8 choices in turn, answers given as index, letter and text in turn."""
    rows = []
    for k in range(3 * n_per_count):
        n = (3, 5, 8)[k % 3]
        choices = [WORDS[(k + j) % len(WORDS)] for j in range(n)]
        gold = (k * 7) % n
        answer = [gold, "ABCDEFGH"[gold], choices[gold]][(k // 3) % 3]
        rows.append({"id": f"r{k}", "question": f"Which word is number {gold + 1} here", "choices": choices, "answer": answer})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---------------------------------------------------------------------------- pure functions


def test_chance_is_the_mean_of_one_over_n_and_the_table_splits_by_count():
    counts = [3, 3, 5, 8, 8, 8]
    assert chance_accuracy(counts) == pytest.approx((2 / 3 + 1 / 5 + 3 / 8) / 6)
    assert chance_accuracy([4, 4, 4]) == 0.25
    base = np.array([1, 0, 1, 1, 0, 0])
    head_items, head = np.array([1, 2, 4, 5]), np.array([1, 1, 0, 1])
    table = by_option_count(counts, {"acc,baseline": (np.arange(6), base), "acc,qk_head": (head_items, head)})
    assert list(table) == ["3", "5", "8"]
    assert table["3"] == {"n_items": 2, "chance": pytest.approx(1 / 3), "acc,baseline_n": 2, "acc,baseline": 0.5,
                          "acc,qk_head_n": 1, "acc,qk_head": 1.0}
    assert table["5"]["acc,qk_head"] == 1.0 and table["8"]["acc,baseline"] == pytest.approx(1 / 3)
    assert table["8"]["acc,qk_head_n"] == 2 and table["8"]["acc,qk_head"] == 0.5


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_pride_by_count_equals_pride_run_on_each_count_alone():
    rng = np.random.default_rng(0)
    counts = np.array([3, 5, 3, 5, 3, 5, 3, 5, 3, 4])
    logits = np.full((len(counts), 5), -np.inf)
    for i, n in enumerate(counts):
        logits[i, :n] = rng.normal(size=n) + np.linspace(1.0, 0.0, n)  # a bias towards A
    split = Split(val=np.array([0, 1, 2, 3]), test=np.array([4, 5, 6, 7, 8, 9]))
    pairs, perm = [], []
    for i in split.val:
        n = counts[i]
        for p in range(n):
            pairs.append((int(i), p))
            row = np.full(5, -np.inf)
            row[:n] = rng.normal(size=n)
            perm.append(row)
    res = pride_by_option_count(logits, counts, np.array(perm), pairs, split)
    assert res.estimation_items == {3: 2, 4: 0, 5: 2}
    for n in (3, 5):
        idx = np.flatnonzero(counts == n)
        val = [i for i in split.val if counts[i] == n]
        est = np.stack([_softmax(np.stack([perm[pairs.index((int(i), p))][:n] for p in range(n)])) for i in val])
        pos = np.array([list(idx).index(i) for i in val])
        alone = pride(_softmax(logits[idx, :n]), est, Split(val=pos, test=np.setdiff1d(np.arange(len(idx)), pos)),
                      orders=cyclic_orders(n))
        np.testing.assert_array_equal(res.predictions[idx], alone.predictions)
        np.testing.assert_allclose(res.priors[n], alone.prior)
    assert 4 not in res.priors and res.predictions[9] == np.argmax(logits[9, :4])  # nothing to estimate from: observed


def test_pride_by_count_with_one_count_is_plain_pride():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(6, 4)).astype(np.float32)
    split = Split(val=np.array([1, 4]), test=np.array([0, 2, 3, 5]))
    perm = rng.normal(size=(8, 4)).astype(np.float32)
    pairs = [(i, p) for i in (1, 4) for p in range(4)]
    res = pride_by_option_count(logits, [4] * 6, perm, pairs, split)
    plain = pride(_softmax(logits), _softmax(perm.reshape(2, 4, 4)), split)
    np.testing.assert_array_equal(res.predictions, plain.predictions)
    np.testing.assert_array_equal(res.priors[4], plain.prior)


# ---------------------------------------------------------------------------- the study and the command


@pytest.fixture(scope="module")
def tiny_model():
    from whitebox_eval.tasks.mcq import load_mcq_file
    from whitebox_eval.tasks.prompts import render_prompt

    import tempfile

    with tempfile.TemporaryDirectory() as d:
        items = load_mcq_file(write_jsonl(Path(d) / "f.jsonl", mixed_rows()))
    texts = [render_prompt(it).text + " A B C D E F G H I J" for it in items]
    return tiny_llama_with_bpe(texts, 400)


def check_results(run: Path, counts: list[int]) -> None:
    """results.json and samples.jsonl of an mcqa run over items with ``counts`` essential options."""
    res = json.loads((run / "results.json").read_text())
    assert res["n_items"] == len(counts) and res["n_essential_options"] == 8 and res["n_options"] == 10
    assert res["chance"] == pytest.approx(np.mean([1 / n for n in counts]))
    table = res["by_option_count"]
    assert {n: row["n_items"] for n, row in table.items()} == {str(n): counts.count(n) for n in (3, 5, 8)}
    assert table["5"]["chance"] == pytest.approx(0.2)
    for key in ("acc,baseline", "acc,qk_head", "acc,attention_head", "acc,head_score_head", "acc,pride", "acc,cloze"):
        assert key in res["headline"] and key in table["3"]
    assert sum(row["acc,qk_head_n"] for row in table.values()) == res["n_test"]
    assert sum(row["acc,baseline_n"] for row in table.values()) == res["n_items"]
    for key in ("pa,baseline", "acc,ablation_key_heads", "acc,ablation_random_heads"):
        assert key in res["headline"]
    assert "qk_head_vs_baseline" in res["paired_tests"] and "pride_vs_baseline" in res["paired_tests"]
    for n, row in res["pride_prior_by_option_count"].items():
        assert (row["prior"] is None) == (row["estimation_items"] == 0)
        if row["prior"] is not None:
            assert len(row["prior"]) == int(n) and sum(row["prior"]) == pytest.approx(1.0)
    for n, b in res["selection_bias_by_option_count,baseline"].items():
        assert len(b["prediction_distribution"]) == int(n) + 2  # the two uncertainty options follow each count's own
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert [s["n_options"] for s in samples] == [n + 2 for n in counts]
    assert [len(s["cloze_loglik"]) for s in samples] == counts


def test_command_runs_every_method_on_a_mixed_file(tiny_model, tmp_path, cli):
    model = tmp_path / "model"
    tiny_model.model.save_pretrained(model)
    tiny_model.tokenizer.save_pretrained(model)
    rows = mixed_rows()
    rows[4]["answer"] = 9  # out of range: the bad-row policy
    data = write_jsonl(tmp_path / "mixed.jsonl", rows)
    args = ["mcqa", "--model", str(model), "--task", f"mcq={data}", "--min-val-items", "9", "--ablation-k", "2",
            "--ablation-draws", "2", "--methods", "baseline,qk,attention,lens,pride,pa,ablation,cloze",
            "--output", str(tmp_path / "runs"), "--run-id", "r"]
    code, out, err = cli(args + ["--on-bad-row", "error"])
    assert code != 0 and f"{data}:5: answer 9 is out of range for 5 choices" in out + err
    code, out, err = cli(args)
    assert code == 0, out + err
    assert "evaluated all 23 items" in out and "options per item: 3 to 8 essential (+ 2 uncertainty" in out
    assert f"chance: {(8 / 3 + 7 / 5 + 8 / 8) / 23:.1%} (mean of 1 / n essential options" in out  # row 5 (5 choices) skipped
    assert "chance and accuracy per number of options" in out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("chance and accuracy per number"))
    assert [line.split()[:3] for line in lines[at + 2:at + 5]] == [["3", "8", "33.3%"], ["5", "7", "20.0%"], ["8", "8", "12.5%"]]
    assert "QK head vs baseline" in out and "best qk head: layer" in out
    check_results(tmp_path / "runs" / "r", [n for k, n in enumerate([3, 5, 8] * 8) if k != 4])
    # --field: the mapping is recorded, and a resume with another mapping is refused
    renamed = write_jsonl(tmp_path / "renamed.jsonl", [{"q": r["question"], "opts": r["choices"], "key": r["answer"],
                                                        "id": r["id"]} for r in mixed_rows() if r["answer"] != 9])
    fields = ["--field", "question=q", "--field", "choices=opts", "--field", "answer=key"]
    small = ["mcqa", "--model", str(model), "--task", f"mcq={renamed}", "--methods", "baseline",
             "--output", str(tmp_path / "runs"), "--run-id", "f"]
    code, out, err = cli(small + fields)
    assert code == 0, out + err
    cfg = (tmp_path / "runs" / "f" / "config.yaml").read_text()
    assert "fields:" in cfg and "question: q" in cfg
    code, out, err = cli(small + fields + ["--field", "id=id", "--resume"])  # the same items, another mapping
    assert code != 0 and "fields" in out + err, out + err


def test_lm_eval_prompt_lists_each_items_own_letters(tiny_model, tmp_path):
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    path = write_jsonl(tmp_path / "mixed.jsonl", mixed_rows(4))
    cfg = MCQAConfig(model="tiny", task=f"mcq={path}", prompt="lm-eval", uncertainty=False, min_val_items=4,
                     batch_size=6, methods=("baseline", "pride", "pa"))
    folder = run_mcqa(cfg, tmp_path, run_id="l", loaded=tiny_model, show_progress=False)
    res = folder.load_results()
    assert res["n_options"] == res["n_essential_options"] == 8 and "acc,pride" in res["headline"]
    samples = [json.loads(line) for line in (folder.path / "samples.jsonl").read_text().splitlines()]
    assert samples[0]["prompt"] == "Which word is number 1 here\nA. red\nB. blue\nC. green\nAnswer:"
    assert samples[0]["continuations"] == [" A", " B", " C"]
    assert [len(s["labels"]) for s in samples] == [3, 5, 8] * 4


@pytest.mark.integration
@pytest.mark.slow
def test_smollm2_on_the_example_file(tmp_path):
    """docs/data.md's command on the bundled model: every method, chance per count, a QK head and its test."""
    import subprocess

    args = [sys.executable, "-m", "whitebox_eval", "mcqa", "--model", "smollm2-135m", "--task", f"mcq={EXAMPLE}",
            "--min-val-items", "8", "--methods", "baseline,qk,attention,lens,pride,pa,ablation,cloze",
            "--output", str(tmp_path), "--run-id", "byod"]
    res = subprocess.run(args, capture_output=True, text=True)  # no timeout: under load it takes longer
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    assert "evaluated all 24 items" in out and "options per item: 3 to 8 essential" in out
    assert f"chance: {(8 / 3 + 8 / 5 + 8 / 8) / 24:.1%} (mean of 1 / n essential options" in out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("chance and accuracy per number"))
    assert [line.split()[:3] for line in lines[at + 2:at + 5]] == [["3", "8", "33.3%"], ["5", "8", "20.0%"], ["8", "8", "12.5%"]]
    assert "QK head vs baseline:" in out and "mcnemar_exact p = " in out and "best qk head: layer" in out
    check_results(tmp_path / "byod", [3] * 8 + [5] * 8 + [8] * 8)
