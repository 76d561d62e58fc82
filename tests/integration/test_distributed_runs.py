"""torchrun with 2 CPU ranks (gloo) gives the same run folder as one process (MCQA, GAR); the
MCQA comparison's near-tie rule (tests/mcqa_ties.py) passes on near ties and fails on a fault."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mcqa_ties import TOL, Run, close, compare_runs, load_run  # noqa: E402

from whitebox_eval import stats  # noqa: E402
from whitebox_eval.mcqa import head_scores as hs  # noqa: E402

# several processes on a bundled model: minutes on 2 cores, so `make test-slow` (CI runs it).
# No subprocess timeout: under load a run takes longer, and that must not fail it. The unit
# tests of the comparison (the end of this file) are neither.

# torchrun --standalone: a free port for the ranks' rendezvous, not the fixed 29500 another job may hold.
TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]

STUDY = ["mcqa", "--model", "smollm2-135m", "--limit", "20", "--min-val-items", "8", "--batch-size", "4",
         "--methods", "baseline,qk,attention,pa,pride"]


def _results(folder) -> dict:
    """results.json without lm-eval's ``date`` (when each run folder was created)."""
    res = json.loads((folder / "results.json").read_text())
    res.pop("date", None)
    return res


def _samples(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


@pytest.mark.integration
@pytest.mark.slow
def test_two_rank_run_equals_one_process_run(tmp_path):
    # the ranks start on an empty model cache (a fresh machine): both dequantise the GGUF at once
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WHITEBOX_EVAL_CACHE": str(tmp_path / "cache")}
    two = subprocess.run([sys.executable, *TORCHRUN, "-m", "whitebox_eval",
                          *STUDY, "--output", str(tmp_path), "--run-id", "two"],
                         capture_output=True, text=True, env=env)
    assert two.returncode == 0, two.stderr[-3000:]
    one = subprocess.run([sys.executable, "-m", "whitebox_eval", *STUDY, "--output", str(tmp_path), "--run-id", "one"],
                         capture_output=True, text=True, env=env)
    assert one.returncode == 0, one.stderr[-3000:]
    a, b = tmp_path / "one", tmp_path / "two"
    assert "rank 1 of 2" in (b / "run.log").read_text()  # both ranks worked on it
    assert not (b / "shards").exists()  # rank 0 merged the shards away
    # Every pass's scores (main, permuted, PriDe) to TOL, attention also to ATT_RTOL of itself;
    # each argmax-derived value (predictions, 0/1s, accuracies, head counts, best / oracle /
    # degenerate / HeadScore heads, the statistics of the counts) exactly, except on items whose
    # one-process scores lie within those drifts of a tie, and then by no more than those items
    # allow (tests/mcqa_ties.py). Measured on 2 cores, two ranks against one process: all arrays
    # bit-identical. Near ties of the one-process run: main pass QK 187 of 5,400 (item, head)
    # argmaxes (180 of them the 9 degenerate layer-0 heads' exact ties), Attention 3 of 5,400,
    # letters 0 of 20; permuted pass QK 191, Attention 7, letters 0; PriDe 4 of 20 items (none
    # a test item). The best QK head (17, 5) has 5 of 8 validation items right, as three later
    # heads do: an exact integer tie the lower layer decides, none of the four with a near tie.
    # HeadScore's top 6 are 3.9% or more apart, 20x the 0.2% two heads' ranges span.
    compare_runs(load_run(a, _results(a), _samples(a)), load_run(b, _results(b), _samples(b)))
    for name in ("letter_logits", "qk", "attention"):
        np.testing.assert_allclose(np.load(b / "arrays" / f"{name}.npy"), np.load(a / "arrays" / f"{name}.npy"),
                                   atol=TOL, rtol=TOL, equal_nan=True)
    assert sorted(p.name for p in (b / "plots").iterdir()) == sorted(p.name for p in (a / "plots").iterdir())
    assert "run folder:" in two.stdout and two.stdout.count("run folder:") == 1  # rank 0 alone reports


@pytest.mark.integration
@pytest.mark.slow
def test_two_rank_gar_evaluation_equals_one_process(tmp_path):
    # the three truth tasks (sec. 5), 6 examples each: several blocks of 4 for 2 ranks to share
    study = ["gar", "--model", "smollm2-135m", "--tasks", "truth", "--limit", "6", "--batch-size", "4"]
    runs = {}
    for name, launch in (("one", []), ("two", TORCHRUN)):
        cmd = [sys.executable, *launch, "-m", "whitebox_eval", *study, "--output", str(tmp_path), "--run-id", name]
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = done
    a, b = tmp_path / "one", tmp_path / "two"
    assert "rank 1 of 2" in (b / "run.log").read_text()
    close(_results(a), _results(b))
    sa = {s["id"]: s for s in map(json.loads, (a / "samples.jsonl").read_text().splitlines())}
    sb = {s["id"]: s for s in map(json.loads, (b / "samples.jsonl").read_text().splitlines())}
    assert len(sa) >= 18 and sa.keys() == sb.keys()  # 3 tasks x 6 examples (+ sub-problems)
    close(sa, sb)
    assert runs["two"].stdout.count("run folder:") == 1


@pytest.mark.integration
@pytest.mark.slow
def test_two_rank_cloze_only_run_equals_one_process(tmp_path):
    """A cloze-only study (lm-eval's HellaSwag prompt) streams samples from the cloze pass on every rank."""
    rows = [{"ind": i, "activity_label": "Cooking", "ctx_a": f"A cook adds {i} eggs to a bowl.", "ctx_b": "she",
             "endings": ["whisks them.", "paints the wall.", f"sings {i} songs.", "drives away."], "label": "0"}
            for i in range(10)]
    data = tmp_path / "hellaswag_val.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    study = ["mcqa", "--model", "smollm2-135m", "--task", f"hellaswag={data}", "--prompt", "lm-eval", "--batch-size", "4"]
    for name, launch in (("one", []), ("two", TORCHRUN)):
        done = subprocess.run([sys.executable, *launch, "-m", "whitebox_eval", *study, "--output", str(tmp_path),
                               "--run-id", name], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    a, b = tmp_path / "one", tmp_path / "two"
    assert "rank 1 of 2" in (b / "run.log").read_text() and not (b / "shards").exists()
    close(_results(a), _results(b))
    sa = [json.loads(line) for line in (a / "samples.jsonl").read_text().splitlines()]
    sb = [json.loads(line) for line in (b / "samples.jsonl").read_text().splitlines()]
    assert [s["id"] for s in sb] == [s["id"] for s in sa] == [f"hellaswag/{i}" for i in range(10)]
    close(sa, sb)


# ---------------------------------------------------------------- the comparison on synthetic runs


def _synthetic_run() -> Run:
    """10 items, 4 options, 2 x 2 heads: head (1, 0) puts the gold option first by a clear margin,
    the others a wrong one; item 3 has a near tie in its letters and at head (1, 0)."""
    n, gold = 10, np.arange(10) % 4
    letters = np.stack([np.roll([3.0, 1.0, 0.0, -1.0], i + 1) for i in range(n)])
    letters[3, [0, 3]] = 5.0 + 1e-7, 5.0
    qk = np.empty((n, 2, 2, 4))
    for i in range(n):
        for l in range(2):
            for h in range(2):
                qk[i, l, h] = np.roll([4.0, 2.0, 1.0, 0.0], i if (l, h) == (1, 0) else i + 1 + l + h)
    qk[3, 1, 0, 0] = 4.0 - 1e-7
    split = hs.validation_split(n, min_val_items=4)
    sel = hs.select_best_head(qk, gold, split=split)
    table = hs.head_accuracy(qk, gold)
    base = hs.option_predictions(letters)
    ids = [f"q{i}" for i in range(n)]
    headline: dict = {}
    stats.add_proportion(headline, "acc,baseline", (base == gold).astype(int))
    stats.add_proportion(headline, "acc,qk_head", sel.test_correct)
    results = {"split": {"seed": 0, "validation_ids": [ids[i] for i in split.val], "test_ids": [ids[i] for i in split.test]},
               "qk": {"best_head": [sel.layer, sel.head], "val_accuracy": sel.val_accuracy, "test_accuracy": sel.test_accuracy,
                      "oracle_head": list(hs.best_head(table)), "oracle_accuracy": float(table.max()),
                      "n_degenerate_heads": 0, "degenerate_heads": []},
               "headline": headline}
    samples = [{"id": ids[i], "gold": int(gold[i]), "pred_baseline": int(base[i]), "acc,baseline": float(base[i] == gold[i]),
                "qk_head": {"head": [1, 0], "scores": qk[i, 1, 0].tolist(), "pred": int(sel.predictions[i]),
                            "tied": bool(hs.tied_items(qk[i, 1, 0][None])[0])},
                "acc,qk_head": float(sel.correct[i])} for i in range(n)]
    return Run(results, samples, {"main": {"letter_logits": letters, "qk": qk}},
               {"qk_head_accuracy": table, "qk_degenerate_heads": sel.degenerate})


def _flip_baseline(run: Run, i: int) -> None:
    s = run.samples[i]
    s["pred_baseline"] = (s["pred_baseline"] + 1) % 4 if i != 3 else 3 - s["pred_baseline"]  # item 3: 0 <-> 3 tie
    s["acc,baseline"] = float(s["pred_baseline"] == s["gold"])


def test_comparison_passes_where_only_near_ties_moved():
    one = _synthetic_run()
    compare_runs(one, copy.deepcopy(one))
    two = copy.deepcopy(one)
    two.passes["main"]["letter_logits"][3, [0, 3]] = 5.0, 5.0 + 1e-7  # within TOL: the near tie flips
    _flip_baseline(two, 3)
    head = two.samples[3]["qk_head"]
    head["pred"], head["tied"] = 3 - head["pred"], not head["tied"]  # a near tie at the best head too
    two.samples[3]["acc,qk_head"] = float(head["pred"] == 3)
    moved = two.samples[3]["acc,qk_head"] - one.samples[3]["acc,qk_head"]
    two.tables["qk_head_accuracy"][1, 0] += moved / 10
    test = [i for i, s in enumerate(two.samples) if s["id"] in two.results["split"]["test_ids"]]
    two.results["qk"]["test_accuracy"] += moved / len(test)
    two.results["headline"] = {}  # every statistic from the moved 0/1s
    stats.add_proportion(two.results["headline"], "acc,baseline", [int(s["acc,baseline"]) for s in two.samples])
    stats.add_proportion(two.results["headline"], "acc,qk_head", [int(two.samples[i]["acc,qk_head"]) for i in test])
    assert two.results["headline"]["acc,baseline"] != one.results["headline"]["acc,baseline"]
    assert moved != 0
    compare_runs(one, two)


@pytest.mark.parametrize("fault", ["clear_item", "best_head", "accuracy_past_ties", "head_count", "arrays"])
def test_comparison_fails_on_a_clear_margin_difference(fault):
    one = _synthetic_run()
    two = copy.deepcopy(one)
    if fault == "clear_item":  # item 0's letters are 2 apart: its prediction cannot move
        _flip_baseline(two, 0)
    elif fault == "best_head":  # head (0, 1) is wrong on every item: it cannot reach (1, 0)'s count
        two.results["qk"]["best_head"] = [0, 1]
    elif fault == "accuracy_past_ties":  # two items' worth with one near tie
        two.results["headline"]["acc,baseline"] += 0.2
    elif fault == "head_count":  # head (0, 0) has no near tie
        two.tables["qk_head_accuracy"][0, 0] += 0.1
    else:
        two.passes["main"]["qk"][5, 1, 1, 2] += 0.01
    with pytest.raises(AssertionError):
        compare_runs(one, two)
