"""MCQA numbers a reader can trust: intervals, paired tests, held-out selection, controls,
demonstrations that are never evaluated, and regression tests."""

from __future__ import annotations

import dataclasses

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from test_mcqa_study import tiny_mcqa_model  # noqa: E402,F401  (the module fixture)

from whitebox_eval.tasks.spec import TaskSpec  # noqa: E402
from whitebox_eval import stats  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.controls import RULES, random_heads  # noqa: E402
from whitebox_eval.mcqa.command import _print_mcqa_summary  # noqa: E402
from whitebox_eval.tasks.demos import DEV_SOURCE, POOL_SOURCE, plan_demonstrations  # noqa: E402
from whitebox_eval.tasks import load_mcq_dataset  # noqa: E402
from whitebox_eval.mcqa.study import MCQAConfig, load_items, run_mcqa  # noqa: E402

ALL = ("baseline", "qk", "attention", "lens", "pride", "pa", "ablation", "cloze")


def _samples(folder) -> list[dict]:
    return [json.loads(line) for line in (folder.path / "samples.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def full_run(tiny_mcqa_model, tmp_path_factory):  # noqa: F811
    cfg = MCQAConfig(model="tiny", limit=40, min_val_items=10, batch_size=8, methods=ALL, ablation_k=2, ablation_draws=3)
    return run_mcqa(cfg, tmp_path_factory.mktemp("runs"), run_id="all", loaded=tiny_mcqa_model, show_progress=False)


#: metrics that select nothing: reported over every evaluated item, as lm-eval does
ALL_ITEMS = {"acc,baseline", "pa,baseline", "acc,cloze", "acc_norm,cloze"}


def test_every_headline_metric_has_a_wilson_interval_and_its_n(full_run):
    res = full_run.load_results()
    head = res["headline"]
    metrics = [k for k in head if not k.split(",")[0].endswith(("_ci", "_n", "_stderr", "_ci_method"))]
    assert {"acc,baseline", "acc,baseline_test", "acc,qk_head", "acc,attention_head", "acc,head_score_head", "acc,pride",
            "pa,baseline", "acc,cloze", "acc_norm,cloze", "acc,ablation_key_heads", "acc,ablation_random_heads"} <= set(metrics)
    assert res["n_test"] == 30 and res["n_items"] == res["n_evaluated"] == 40
    for key in metrics:
        name, filt = key.split(",", 1)
        lo, hi = head[f"{name}_ci,{filt}"]
        n = 40 if key in ALL_ITEMS else 30  # selecting methods (and the baseline beside them) on the test items
        assert lo <= head[key] <= hi and head[f"{name}_n,{filt}"] == n, key
        if head[f"{name}_ci_method,{filt}"] == "wilson":  # the interval of k correct of n
            k = round(head[key] * n)
            assert (lo, hi) == pytest.approx(stats.wilson(k, n), abs=1e-12)
    # the baseline recounted from samples.jsonl, independently of the study's arrays
    samples = _samples(full_run)
    test = [s for s in samples if s["split"] == "test"]
    assert head["acc,baseline"] == pytest.approx(np.mean([s["pred_baseline"] == s["gold"] for s in samples]))
    assert head["acc,baseline_test"] == pytest.approx(np.mean([s["pred_baseline"] == s["gold"] for s in test]))
    assert head["acc,cloze"] == pytest.approx(np.mean([s["pred_cloze"] == s["gold"] for s in samples]))


def test_paired_tests_count_the_discordant_test_items(full_run):
    res = full_run.load_results()
    tests = res["paired_tests"]
    assert {"qk_head_vs_baseline", "attention_head_vs_baseline", "head_score_head_vs_baseline", "pride_vs_baseline",
            "ablation_key_vs_random", "ablation_key_vs_unablated", "ablation_key_vs_random_draw0"} <= set(tests)
    test = [s for s in _samples(full_run) if s["split"] == "test"]
    for method in ("qk", "attention"):
        x = [s[f"{method}_head"]["pred"] == s["gold"] for s in test]
        y = [s["pred_baseline"] == s["gold"] for s in test]
        t = tests[f"{method}_head_vs_baseline"]
        assert t["test"] == "mcnemar_exact" and t["n"] == 30
        assert (t["b"], t["c"]) == (sum(a and not b for a, b in zip(x, y)), sum(b and not a for a, b in zip(x, y)))
        from scipy.stats import binomtest
        p = 1.0 if t["b"] + t["c"] == 0 else binomtest(t["b"], t["b"] + t["c"], 0.5).pvalue
        assert t["p_value"] == pytest.approx(p)
    assert tests["ablation_key_vs_random"]["test"] == "paired_bootstrap"


def test_selection_on_validation_reported_on_test_with_ids_in_the_run_folder(full_run):
    res = full_run.load_results()
    sp = res["split"]
    samples = _samples(full_run)
    assert len(sp["validation_ids"]) == res["n_val"] == 10 and len(sp["test_ids"]) == res["n_test"] == 30
    assert not set(sp["validation_ids"]) & set(sp["test_ids"])
    assert set(sp["validation_ids"]) == {s["id"] for s in samples if s["split"] == "validation"}
    assert set(sp["test_ids"]) == {s["id"] for s in samples if s["split"] == "test"}
    # PriDe's prior: the estimation pass covers the validation items only (4 cyclic orders each)
    idx = np.concatenate([np.load(p)["index"] for p in (full_run.path / "arrays" / "parts" / "pride").glob("*.npz")])
    assert sorted(idx.tolist()) == list(range(10 * 4))
    # the best head is the best on validation among non-degenerate heads
    qk = full_run.load_array("qk")
    gold = np.array([s["gold"] for s in samples])
    val = np.array([s["split"] == "validation" for s in samples])
    from whitebox_eval.mcqa import head_scores as hs
    pred = hs.option_predictions(np.where(np.isnan(qk), -np.inf, qk))
    val_acc = (pred[val] == gold[val][:, None, None]).mean(0)
    degenerate = full_run.load_array("qk_degenerate_heads").astype(bool)
    val_acc[degenerate] = -1
    assert res["qk"]["val_accuracy"] == pytest.approx(val_acc.max())


def test_ablation_random_heads_are_same_layer_never_key_and_every_draw_is_reported(full_run):
    a = full_run.load_results()["ablation"]
    key = [tuple(h) for h in a["key_heads"]]
    assert len(a["random_draws"]) == 3
    for d in a["random_draws"]:
        heads = [tuple(h) for h in d["heads"]]
        assert len(heads) == len(set(heads)) == len(key)
        assert not set(heads) & set(key)
        assert sorted(l for l, _ in heads) == sorted(l for l, _ in key)  # 4 heads a layer: room in every layer
    assert a["control"]["rule"] == "same-layers" and a["random_rule"] == RULES["same-layers"]
    assert a["control"]["draws"] == [d["heads"] for d in a["random_draws"]]
    accs = [d["accuracy"] for d in a["random_draws"]]
    assert a["random_accuracy"]["draws"] == accs
    assert a["random_accuracy"]["mean"] == pytest.approx(np.mean(accs))
    assert a["random_accuracy"]["sd"] == pytest.approx(np.std(accs, ddof=1))


def test_same_layer_draws_take_the_nearest_layer_only_when_a_layer_is_full():
    key = [(1, 0), (1, 1), (1, 2)]  # 3 heads a layer: layer 1 has none left
    heads = random_heads(key, (3, 3), 1, 0, "same-layers")[0]
    assert len(set(heads)) == 3 and not set(heads) & set(key)
    assert Counter(l for l, _ in heads) == Counter({0: 3})  # equal distance: the lower layer first, and it has room
    key = [(0, 0), (0, 1)]
    assert sorted(l for l, _ in random_heads(key, (2, 4), 1, 1, "same-layers")[0]) == [0, 0]


def test_ablation_that_cannot_draw_names_ablation_k(tiny_mcqa_model, tmp_path):  # noqa: F811
    cfg = MCQAConfig(model="tiny", limit=24, min_val_items=8, batch_size=8, methods=("baseline", "qk", "ablation"),
                     ablation_k=12, ablation_draws=1)  # 3 layers x 4 heads: k > 6 key heads leave fewer others
    with pytest.raises(WhiteboxError, match="use a smaller --ablation-k"):
        run_mcqa(cfg, tmp_path, run_id="too-many", loaded=tiny_mcqa_model, show_progress=False)


def test_samples_keep_head_scores_at_full_precision(full_run):
    """Regression: scores were rounded to 5 decimals, so attention of ~1e-7 showed as 0.0."""
    res = full_run.load_results()
    att = full_run.load_array("attention")
    layer, head = res["attention"]["best_head"]
    for i, s in enumerate(_samples(full_run)):
        np.testing.assert_allclose(s["attention_head"]["scores"], att[i, layer, head, :6], rtol=1e-7, atol=0)
        assert s["attention_head"]["pred"] in range(6)


def test_chance_is_over_the_essential_options(full_run, capsys):
    """Regression: 4 + 2 uncertainty options printed chance 17% (1/6); gold is never an uncertainty option."""
    _print_mcqa_summary(full_run)
    out = capsys.readouterr().out
    assert "17%" not in out and "chance: 25.0% (1 / 4 essential options)" in out
    res = full_run.load_results()
    assert res["n_options"] == 6 and res["n_essential_options"] == 4 and res["chance"] == 0.25
    assert "NOT significant" in out or "significant at 0.05" in out
    assert "[" in out.split("  acc,baseline ", 1)[1].splitlines()[0]  # the interval beside the value
    assert "degenerate" in out


def test_ssd_items_of_a_small_run_are_the_first_items_of_a_larger_one():
    """Regression: item ids changed with --limit."""
    small, large = load_items(MCQAConfig(limit=100)), load_items(MCQAConfig(limit=500))
    assert small == large[:100]


# ----------------------------------------------------------------------------- demonstrations


def _mmlu_tree(root: Path) -> Path:
    """A hendrycks layout: dev/<s>_dev.csv (5 rows) beside test/<s>_test.csv (6 rows), 2 subjects."""
    for split, n in (("dev", 5), ("test", 6)):
        (root / split).mkdir(parents=True)
        for subject in ("astronomy", "marketing"):
            rows = [f'"{subject} {split} question {i}?",w{i},x{i},y{i},z{i},{"ABCD"[i % 4]}' for i in range(n)]
            (root / split / f"{subject}_{split}.csv").write_text("\n".join(rows) + "\n")
    return root / "test"


def test_mmlu_shots_come_from_the_same_subjects_dev_split(tmp_path):
    """Regression: --shots took the first test items (across subjects) as demonstrations."""
    test_dir = _mmlu_tree(tmp_path / "mmlu")
    task = f"mmlu={test_dir}"
    items = list(load_mcq_dataset("mmlu", test_dir))
    demos, evaluated = plan_demonstrations(TaskSpec.parse(task), 3, items)
    assert demos.source == DEV_SOURCE and evaluated == items  # nothing comes off the test items
    for it in evaluated:
        ds = demos.for_item(it)
        assert [d.question for d in ds] == [f"{it.subject} dev question {i}?" for i in range(3)]  # first k, same subject
    assert not set(demos.ids()) & {it.id for it in evaluated}
    # a single subject file finds its dev split too
    one = plan_demonstrations(TaskSpec.parse(f"mmlu={test_dir / 'marketing_test.csv'}"), 2, items[6:])[0]
    assert one.source == DEV_SOURCE and list(one.by_subject) == ["marketing"]
    with pytest.raises(WhiteboxError, match="needs 6"):
        plan_demonstrations(TaskSpec.parse(task), 6, items)


def test_mmlu_run_records_the_dev_demonstrations_in_config(tiny_mcqa_model, tmp_path):  # noqa: F811
    """A 5-shot MMLU run's config lists the dev-split ids of each subject; none is evaluated."""
    test_dir = _mmlu_tree(tmp_path / "mmlu")
    cfg = MCQAConfig(model="tiny", task=f"mmlu={test_dir}", shots=5, limit=12, min_val_items=4, batch_size=4,
                     methods=("baseline", "qk", "attention"))
    folder = run_mcqa(cfg, tmp_path / "runs", run_id="m", loaded=tiny_mcqa_model, show_progress=False)
    conf = yaml.safe_load((folder.path / "config.yaml").read_text())["demonstrations"]
    assert conf["source"] == DEV_SOURCE and conf["dev_split"] == str(tmp_path / "mmlu" / "dev") and conf["shots"] == 5
    assert conf["ids"] == {s: [f"mmlu/{s}/{s}_dev.csv:{i}" for i in range(1, 6)] for s in ("astronomy", "marketing")}
    for s, ids in conf["ids"].items():  # every listed id is a row of that subject's dev file
        assert set(ids) <= {it.id for it in load_mcq_dataset("mmlu", tmp_path / "mmlu" / "dev" / f"{s}_dev.csv")}
    evaluated = {s["id"] for s in _samples(folder)}
    assert len(evaluated) == 12 and not evaluated & {i for ids in conf["ids"].values() for i in ids}
    # one cached prefix per subject gives the scores of the full passes
    off = run_mcqa(dataclasses.replace(cfg, prefix_cache=False), tmp_path / "runs", run_id="off",
                   loaded=tiny_mcqa_model, show_progress=False)
    for name in ("letter_logits", "qk", "attention"):
        np.testing.assert_allclose(folder.load_array(name), off.load_array(name), rtol=1e-4, atol=1e-5)


def test_without_a_dev_split_a_held_out_pool_is_never_evaluated(tiny_mcqa_model, tmp_path):  # noqa: F811
    cfg = MCQAConfig(model="tiny", shots=3, limit=12, min_val_items=4, batch_size=4, methods=("baseline",))
    folder = run_mcqa(cfg, tmp_path, run_id="p", loaded=tiny_mcqa_model, show_progress=False)
    conf = yaml.safe_load((folder.path / "config.yaml").read_text())["demonstrations"]
    assert conf["source"] == POOL_SOURCE and len(conf["ids"]) == 3
    evaluated = {s["id"] for s in _samples(folder)}
    assert len(evaluated) == 12 and not evaluated & set(conf["ids"])


def test_arc_run_takes_its_demonstrations_from_the_train_file_beside_it(tiny_mcqa_model, tmp_path):  # noqa: F811
    """ARC's train split (AI2 naming) feeds the shots; config.yaml lists the ids and the file."""
    for split, n in (("Test", 14), ("Train", 8)):
        rows = [{"id": f"{split}-{i}", "answerKey": "ABCD"[i % 4],
                 "question": {"stem": f"{split} q{i}?", "choices": [{"label": l, "text": f"{split} {l}{i}"} for l in "ABCD"]}}
                for i in range(n)]
        (tmp_path / f"ARC-Challenge-{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = MCQAConfig(model="tiny", task=f"arc={tmp_path / 'ARC-Challenge-Test.jsonl'}", shots=3, limit=14, min_val_items=4,
                     batch_size=4, methods=("baseline",), uncertainty=False)
    folder = run_mcqa(cfg, tmp_path / "runs", run_id="a", loaded=tiny_mcqa_model, show_progress=False)
    conf = yaml.safe_load((folder.path / "config.yaml").read_text())["demonstrations"]
    assert conf["source"] == "sibling_split" and conf["split"] == "train"
    assert conf["file"] == str(tmp_path / "ARC-Challenge-Train.jsonl") and len(conf["ids"]) == 3
    assert all(i.startswith("arc/Train-") for i in conf["ids"])
    evaluated = {s["id"] for s in _samples(folder)}
    assert len(evaluated) == 14 and not evaluated & set(conf["ids"])  # no pool came off the test items


@pytest.mark.skipif(not Path("/work/shared/datasets/mmlu/dev").is_dir(), reason="the shared MMLU sample is not here")
def test_real_mmlu_sample_takes_five_dev_rows_of_each_subject():
    path = "/work/shared/datasets/mmlu/test"
    items = list(load_mcq_dataset("mmlu", path))
    demos, _ = plan_demonstrations(TaskSpec.parse(f"mmlu={path}"), 5, items)
    assert sorted(demos.by_subject) == sorted({it.subject for it in items})
    for subject, ds in demos.by_subject.items():
        assert len(ds) == 5 and {d.subject for d in ds} == {subject} and all("_dev.csv" in d.id for d in ds)
