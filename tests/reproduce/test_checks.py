"""Every branch of the verdict rule on synthetic child results: the papers' own claims (as
their YAML declares them) read child runs made here from known per-item answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from whitebox_eval import stats
from whitebox_eval.reproduce import assemble, spec, verdicts, vocabulary
from whitebox_eval.reproduce.plan import Child, Plan, instances

MODEL = "m"


@dataclass
class _Study:
    results: dict[str, Any]
    samples: list[dict[str, Any]] = field(default_factory=list)


class _Plan(Plan):
    """A quick-scale plan on MODEL whose children are made as a test asks for them (run id
    ``PAPER-EXPID``), with one data file (``{data.snli.name}``); every paper's templates filled as
    :func:`.plan.build` fills them, again as children are made."""

    def __init__(self) -> None:
        super().__init__([], [MODEL], "quick", {"snli": "snli.jsonl"}, [])
        self.filled = {n: instances(p, self) for n, p in spec.papers().items()}

    def child(self, paper: str, expid: str, model: str) -> Child:
        made = Child(run_id=f"{paper}-{expid}", suite="x", mode=None, model=model, settings={}, uses=[(paper, expid)])
        self.children.append(made)
        self.filled[paper] = instances(spec.papers()[paper], self)
        return made


def _claim(paper: str, cid: str, results: dict[str, Any], samples: list[dict[str, Any]] = ()) -> dict[str, Any]:
    p = spec.papers()[paper]
    c = next(x for x in p.claims if x.id == cid)
    plan = _Plan()
    child = plan.child(paper, c.experiment, MODEL)
    outcome = assemble.Outcome(child, "done", folder="/nonexistent", _study=_Study(results, list(samples)))
    return assemble.claim(p, c, plan, {child.run_id: outcome}, MODEL)


def _kinds(out: dict[str, Any], key: str) -> dict[str, dict[str, Any]]:
    return {x["kind"]: x for x in out[key]}


# ------------------------------------------------------------------ 000: heads and letters


def _mcqa(gold: list[int], head: list[int], base: list[int]) -> tuple[dict, list]:
    """A 0-shot mcqa child: test items with gold letters, the QK head's and the baseline's answers."""
    samples = [{"id": f"q{i}", "split": "test", "gold": g, "labels": ["A", "B", "C", "D"], "n_options": 4,
                "qk_head": {"head": [14, 0], "pred": h}, "pred_baseline": b,
                "acc,qk_head": float(h == g), "acc,baseline": float(b == g)}
               for i, (g, h, b) in enumerate(zip(gold, head, base))]
    hc = np.array(head) == np.array(gold)
    bc = np.array(base) == np.array(gold)
    results = {"chance": 0.25, "qk": {"best_head": [14, 0]}, "paired_tests": {}}
    stats.add_paired(results, "qk_head_vs_baseline", stats.mcnemar(hc, bc))
    return results, samples


def test_a_head_that_does_not_beat_the_best_constant_letter_is_explained_by_the_label_prior():
    # gold letters: A 25, B 21, C 20, D 34; the head answers D always, and A on 4 of the A items
    gold = [0] * 25 + [1] * 21 + [2] * 20 + [3] * 34
    head = [0] * 4 + [3] * 96
    base = [1] * 100  # the baseline answers B: 21%, not significantly below chance
    results, samples = _mcqa(gold, head, base)
    out = _claim("000", "qk-beats-baseline-mmlu-0shot", results, samples)
    assert out["statistical_verdict"] == verdicts.HOLDS  # +17 pp, McNemar p < 0.05 ...
    assert out["p_value"] < 0.05 and out["statistic"]["value"] == pytest.approx(0.38 - 0.21)
    assert out["verdict"] == verdicts.UNINFORMATIVE  # ... but always answering D scores 34%
    ctl = _kinds(out, "controls")["constant_letter"]
    assert ctl["explains"] and ctl["best_letter"] == "D" and ctl["constant_accuracy"] == pytest.approx(0.34)
    assert ctl["recall"] == pytest.approx({"A": 4 / 25, "B": 0.0, "C": 0.0, "D": 1.0})
    assert ctl["reference_recall"]["B"] == 1.0 and ctl["test"]["b"] == 4 and ctl["test"]["c"] == 0
    # the rule every arm gets: the QK head (38%) is not above what always answering D scores (34%)
    assert out["qualifier"] == "at chance" and "uninformed level 34.0%" in out["reason"]
    assert "always 'D'" in out["reason"] and out["rules"]["chance"]["needed"] == ["a"]
    assert out["unit"] == "L14H0"
    assert out["arms"]["a"]["k"] == 38 and out["arms"]["b"]["k"] == 21 and out["arms"]["a"]["n"] == 100
    pre = _kinds(out, "preconditions")
    # the head's uninformed level is the general rule's (one status per arm, alike in every claim), not a 1/k precondition
    assert "above_chance" not in pre and pre["reference_sound"]["passed"] and pre["not_at_bound"]["passed"]


def test_a_head_that_reads_the_answer_beats_the_constant_letter_and_holds():
    rng = np.random.default_rng(0)
    gold = list(rng.integers(0, 4, 100))
    head = [g if i % 10 < 7 else (g + 1) % 4 for i, g in enumerate(gold)]  # 70% right, every letter
    base = [0] * 100
    results, samples = _mcqa(gold, head, base)
    out = _claim("000", "qk-beats-baseline-mmlu-0shot", results, samples)
    assert out["verdict"] == verdicts.HOLDS, out.get("reason")
    assert not _kinds(out, "controls")["constant_letter"]["explains"]


def test_a_degenerate_baseline_below_chance_makes_the_claim_uninformative():
    gold = [0] * 10 + [1] * 30 + [2] * 30 + [3] * 30
    head = [g if i % 2 else 0 for i, g in enumerate(gold)]
    base = [0] * 100  # answers A whatever the question: 10%, significantly below 25%
    results, samples = _mcqa(gold, head, base)
    out = _claim("000", "qk-beats-baseline-mmlu-0shot", results, samples)
    assert out["verdict"] == verdicts.UNINFORMATIVE
    assert "reference_sound failed" in out["reason"] and "degenerate reference" in out["reason"]


# ------------------------------------------------------------------ 003: floors


def _span(k_reinforced: int, k_none: int, n: int = 60) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A span child's results and its per-item samples (exact match per OOD item and stage)."""
    rein, none = np.arange(n) < k_reinforced, np.arange(n) < k_none
    samples = [{"id": f"{stage}/{i}", "stage": stage, "exact": bool(v[i]), "target": f"t{i}"}
               for stage, v in (("base/ood", none), ("reinforce/key-top10-C1-standard", rein),
                                ("reinforce/shifted-top10-C1-standard", none)) for i in range(n)]
    ev: dict[str, Any] = {"reinforced": {}, "no_intervention": {}, "shifted_reference": {}}
    stats.add_proportion(ev["reinforced"], "accuracy", rein)
    stats.add_proportion(ev["no_intervention"], "accuracy", none)
    stats.add_proportion(ev["shifted_reference"], "accuracy", none)
    ev["random_heads"] = {"accuracy": {"draws": [k_none / n] * 3}}  # 3 draws: descriptive (rule 7)
    results = {"reinforcement": {"evaluation": ev, "key_heads": [{"layer": 3, "head": 1, "score": 0.2}],
                                 "selection": {"chosen": {"setting": "key-top10-C1-standard"}}},
               "paired_tests": {}}
    stats.add_paired(results, "reinforced vs none", stats.mcnemar(rein, none))
    stats.add_paired(results, "reinforced vs shifted reference", stats.mcnemar(rein, none))
    stats.add_paired(results, "reinforced vs random heads", stats.paired_bootstrap(rein.astype(float), none.astype(float)))
    return results, samples


def test_no_item_right_in_either_arm_is_uninformative_floor_not_a_matter_of_n():
    out = _claim("003", "reinforcement-raises-ood-string-reversal", *_span(0, 0))
    assert out["verdict"] == verdicts.UNINFORMATIVE
    assert "not_at_bound failed: floor: no item right in any arm" in out["reason"]
    assert out["statistic"]["lo"] < 0 < out["statistic"]["hi"]  # the exact interval is not [0, 0]
    assert out["unit"] == "L3H1"
    # one arm off the floor: a real comparison, decided by the test; its 3 random draws are descriptive
    out = _claim("003", "reinforcement-raises-ood-string-reversal", *_span(20, 0))
    assert out["verdict"] == verdicts.HOLDS and any("specificity untested" in x for x in out["caveats"])
    assert _kinds(out, "controls")["random_draws"]["descriptive"]


def test_a_substance_condition_failing_significantly_is_the_claim_failing():
    # 3.3% partial accuracy exceeds 0% exact accuracy, significantly -- but "most target tokens
    # are right" (partial >= 0.5) is significantly false: the claim is contradicted (rule 4)
    samples = [{"stage": "base/ood", "partial": 0.4 if i < 5 else 0.0, "exact": False} for i in range(60)]
    results = {"partial,ood": 2 / 60, "partial_ci,ood": [0.01, 0.06], "partial_n,ood": 60,
               "partial_ci_method,ood": "bootstrap", "acc,ood": 0.0}
    out = _claim("003", "partial-above-exact-string-reversal", results, samples)
    assert out["statistical_verdict"] == verdicts.HOLDS
    assert out["verdict"] == verdicts.CONTRADICTED and out["qualifier"] == "substance fails"
    assert "significantly below" in out["reason"]
    # below 0.5 but not significantly: not shown; above it significantly: the test decides
    results.update({"partial,ood": 0.45, "partial_ci,ood": [0.35, 0.55]})
    assert _claim("003", "partial-above-exact-string-reversal", results, samples)["verdict"] == verdicts.NOT_SHOWN
    results.update({"partial,ood": 0.7, "partial_ci,ood": [0.6, 0.8]})
    assert _claim("003", "partial-above-exact-string-reversal", results, samples)["verdict"] == verdicts.HOLDS


def test_token_level_claims_are_clustered_by_sequence():
    rng = np.random.default_rng(2)
    samples = []
    for i in range(12):
        n = int(rng.integers(3, 8))
        correct = [int(rng.random() < 0.5) for _ in range(n)]
        samples.append({"id": f"base/ood/{i}", "stage": "base/ood", "correct": correct,
                        "rollout_scores": [float(rng.normal(0.05 * c + 0.01 * i, 0.01)) for c in correct] + [None]})
    out = _claim("003", "errors-attend-less-string-reversal", {}, samples)
    s = out["statistic"]
    assert s["test"] == "cluster_robust_t" and s["n"] == 12
    values = [v for x in samples for v in x["rollout_scores"][:-1]]
    good = [bool(c) for x in samples for c in x["correct"]]
    ids = [x["id"] for x in samples for _ in x["correct"]]
    ref = stats.clustered_difference(values, good, ids)
    assert (s["value"], s["lo"], s["hi"], s["p_value"]) == pytest.approx((ref.diff, ref.lo, ref.hi, ref.p_value))
    # only wrong tokens: the groups are too small -- uninformative, naming the counts
    for x in samples:
        x["correct"] = [0] * len(x["correct"])
    out = _claim("003", "errors-attend-less-string-reversal", {}, samples)
    assert out["verdict"] == verdicts.UNINFORMATIVE and "sequences with a correct token 0" in out["reason"]


# ------------------------------------------------------------------ 001: equivalence on its own scale


def _mui(a: float, b: float, se: float, p: float) -> dict[str, Any]:
    d = a - b
    return {"correct_vs_incorrect": {"n_correct": 20, "n_incorrect": 28, "n_off_format": 0, "subset_size": 19,
                                     "mui_correct_at_r": a, "mui_incorrect_at_r": b, "diff": d,
                                     "diff_ci": [d - 1.96 * se, d + 1.96 * se], "diff_stderr": se,
                                     "relative_diff": d / ((a + b) / 2), "p_value": p, "test": "permutation"}}


def test_a_significant_difference_inside_the_margin_is_equivalence_without_a_positive_control():
    # rarefied MUI 0.0110 vs 0.0100: +9.5% of their mean, significant (p = 0.002) yet the 90%
    # interval on the relative scale lies inside +-25%: TOST shows equivalence -- but no positive
    # control shows this measure can register a 25% difference: uninformative (insensitive)
    out = _claim("001", "mui-correct-like-incorrect-arithmetic", _mui(0.011, 0.010, 0.0003, 0.002))
    assert out["statistical_verdict"] == verdicts.HOLDS
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "insensitive"
    eq = out["equivalence"]
    assert out["statistic"]["value"] == pytest.approx(0.001 / 0.0105)
    assert eq["se"] == pytest.approx(0.0003 / 0.0105) and eq["hi"] < 0.25 and eq["lo"] > -0.25
    # far beyond the margin: contradicted; too uncertain: not shown at this n
    assert _claim("001", "mui-correct-like-incorrect-arithmetic", _mui(0.02, 0.01, 0.001, 0.001))["verdict"] \
        == verdicts.CONTRADICTED
    assert _claim("001", "mui-correct-like-incorrect-arithmetic", _mui(0.0102, 0.01, 0.004, 0.9))["verdict"] \
        == verdicts.NOT_SHOWN


def test_a_law_over_models_needs_enough_models():
    stat = {"value": -2.0, "lo": -3.0, "hi": -1.0, "p_value": None, "n": 10,
            "points": [{"label": f"m{i % 2} / mui-{i}", "performance": 10.0 + i, "mui": 1.0} for i in range(10)]}
    p = spec.papers()["001"]
    c = next(x for x in p.claims if x.id == "utility-law")
    orig = assemble._across_models
    try:
        assemble._across_models = lambda *a, **k: dict(stat)
        out = assemble.claim(p, c, _Plan(), {}, "all")
    finally:
        assemble._across_models = orig
    assert out["verdict"] == verdicts.UNINFORMATIVE and "enough_units failed: 2 model(s)" in out["reason"]
    assert vocabulary.statistic("utility_law", "mui").reads == "runs"  # the real fit is what _across_models calls


def test_the_law_over_models_fits_each_child_as_assembly_read_it(tmp_path, monkeypatch):
    """The real across-models path (no stub): every child's study, read once, goes to the suite's fit;
    points on MUI = -2 ln(P) + 12 give A = -2, and the runs are named."""
    import math
    from types import SimpleNamespace

    from whitebox_eval.mui.config import MUIConfig
    from whitebox_eval.runs import RunFolder

    p = spec.papers()["001"]
    c = next(x for x in p.claims if x.id == "utility-law")
    made = []

    def outcome(plan, outcomes, paper, expid, model):
        acc = 5.0 + 7.0 * len(made)
        cfg = {"suite": "mui", "task": "t", **MUIConfig().to_dict(), "model": model}
        f = RunFolder.create(tmp_path, cfg, run_id=f"r{len(made)}")
        f.save_results({"accuracy": acc / 100, "mui": (-2.0 * math.log(acc) + 12.0) / 100, "n_items": 48})
        made.append(f.path.name)
        return assemble.Outcome(child=None, status="done", folder=str(f.path))

    monkeypatch.setattr(assemble, "_outcome", outcome)
    models = ["m0", "m1"]
    plan = SimpleNamespace(models=models, filled={p.number: SimpleNamespace(models=models)})
    t = assemble._across_models(p, c, plan, {})
    assert t["value"] == pytest.approx(-2.0) and t["n"] == len(made) == 2 * len(c.stat["experiments"])
    assert t["runs"] == made


# ------------------------------------------------------------------ 002: interventions


def _gar(after_tf: np.ndarray, before: np.ndarray, draws: list[np.ndarray], after_inv: np.ndarray) -> tuple[dict, list]:
    keys = [f"k{i}" for i in range(before.size)]
    results: dict[str, Any] = {"true_heads": [[5, 1]], "false_heads": [[6, 2]], "interventions": {}}
    for name, after in (("true_false", after_tf), ("inverse_true_false", after_inv)):
        block: dict[str, Any] = {"before": {"choice_mass": 0.95}, "after": {"choice_mass": 0.9}}
        stats.add_proportion(block["before"], "acc,appc", before)
        stats.add_proportion(block["after"], "acc,appc", after)
        stats.add_paired(block, "acc,appc", stats.mcnemar(after, before))
        results["interventions"][name] = block
    samples = []  # as the child writes them: the unedited stage names each item's label, an edit only what it did
    for stage, correct in (("base", before), ("tf", after_tf), ("inv", after_inv),
                           *((f"rand{d}", x) for d, x in enumerate(draws))):
        for k, c in zip(keys, correct):
            gold = "Yes" if int(k[1:]) % 2 == 0 else "No"
            pred = gold if c else ("No" if gold == "Yes" else "Yes")
            row = {"id": f"{stage}:{k}", "stage": stage, "correct": bool(c), "prediction": pred,
                   "probs": {"Yes": 0.7 if pred == "Yes" else 0.2, "No": 0.7 if pred == "No" else 0.2}}
            samples.append({**row, "label": gold} if stage == "base" else row)
    return results, samples


def test_an_intervention_no_better_than_random_heads_is_uninformative():
    n = 40
    before = np.arange(n) < 12  # 30%
    after = np.arange(n) < 30  # 75%: McNemar p < 0.001 against before
    draws = [np.roll(after, d) for d in range(20)]  # the same edit on 20 random head sets does as well
    results, samples = _gar(after, before, draws, before)
    out = _claim("002", "true-false-intervention-raises", results, samples)
    assert out["statistical_verdict"] == verdicts.HOLDS and out["verdict"] == verdicts.UNINFORMATIVE
    ctl = _kinds(out, "controls")["random_heads"]
    assert ctl["explains"] and ctl["random_accuracy"] == pytest.approx([0.75] * 20) and ctl["n"] == n
    assert ctl["rank"]["p_value"] == 1.0 and "random_heads explains" in out["reason"]
    # random heads that do nothing: the selected heads' effect stands (rank p = 1/21 < 0.05)
    results, samples = _gar(after, before, [before.copy() for _ in range(20)], before)
    out = _claim("002", "true-false-intervention-raises", results, samples)
    assert out["verdict"] == verdicts.HOLDS and _kinds(out, "controls")["random_heads"]["rank"]["p_value"] == 1 / 21


def test_an_inverse_edit_that_drops_accuracy_like_the_forward_one_is_damage():
    n = 40
    before = np.arange(n) < 30
    broken = np.zeros(n, dtype=bool)  # both edits drive accuracy to 0 (Gemma in the quick run)
    results, samples = _gar(broken, before, [before.copy() for _ in range(3)], broken)
    out = _claim("002", "inverse-intervention-lowers", results, samples)
    assert out["statistical_verdict"] == verdicts.HOLDS and out["verdict"] == verdicts.UNINFORMATIVE
    assert "opposite_edit explains" in out["reason"]
    flips = _kinds(out, "controls")["flips"]
    assert flips["n"] == n and sum(flips["before"].values()) == sum(flips["after"].values()) == n
    assert sum(flips["changes"].values()) == 30  # the 30 right answers all flipped


def test_a_probe_no_better_than_random_heads_is_explained_by_them():
    def results(draws: list[float]) -> dict[str, Any]:
        probe = {"acc": 0.70, "random_heads": stats.draws(draws).as_dict(), "paired_tests": {}}
        y = np.arange(200) < 140
        stats.add_paired(probe, "probe_vs_majority", stats.mcnemar(y, np.arange(200) < 100))
        return {"probes": {"snli.jsonl": probe}}

    out = _claim("002", "truth-probe-snli", results([0.60, 0.72, 0.65] + [0.6] * 17))
    assert out["statistical_verdict"] == verdicts.HOLDS and out["verdict"] == verdicts.UNINFORMATIVE
    assert "random_draws explains" in out["reason"] and "72.0%" in out["reason"]
    assert _claim("002", "truth-probe-snli", results([0.60, 0.62, 0.65] + [0.6] * 17))["verdict"] == verdicts.HOLDS


# ------------------------------------------------------------------ Holm within a paper


def test_holm_gives_a_second_verdict_within_the_paper():
    claims = []
    for i, p in enumerate([0.01, 0.04, 0.03, 0.5]):
        stat = {"value": 0.1, "lo": 0.01, "hi": 0.2, "p_value": p, "n": 100, "test": "t", "source": "x"}
        c = {"id": f"c{i}", "direction": "greater", "than": 0.0, "statistic": stat, "preconditions": [],
             "controls": [], **verdicts.verdict(stat, "greater")}
        claims.append(c)
    claims.append({"id": "untested", "verdict": verdicts.NOT_TESTED})
    verdicts.holm(claims)
    from statsmodels.stats.multitest import multipletests

    ref = multipletests([0.01, 0.04, 0.03, 0.5], method="holm")[1]
    assert [c["p_holm"] for c in claims[:4]] == pytest.approx(list(ref))
    assert [c["verdict"] for c in claims[:4]] == [verdicts.HOLDS] * 3 + [verdicts.NOT_SHOWN]
    assert [c["verdict_holm"] for c in claims[:4]] == [verdicts.HOLDS] + [verdicts.NOT_SHOWN] * 3
    assert claims[4]["verdict_holm"] == verdicts.NOT_TESTED and "p_holm" not in claims[4]


def test_paired_arms_are_read_on_the_items_both_hold():
    """An unedited stage that also holds the selection examples is cut to the edited items, so that
    each arm's level and the paired test read the same items."""
    from whitebox_eval.reproduce import claim_checks

    samples = ([{"id": f"x{i}", "stage": "base", "correct": i % 2} for i in range(8)]
               + [{"id": f"tf:x{i}", "stage": "tf", "correct": 1} for i in range(4)])
    arms = {"a": claim_checks.arm({}, samples, {"samples": "correct", "where": {"stage": "tf"}}),
            "b": claim_checks.arm({}, samples, {"samples": "correct", "where": {"stage": "base"}})}
    assert arms["b"]["n"] == 8
    claim_checks.on_shared_items(arms)
    assert arms["a"]["n"] == arms["b"]["n"] == 4 and set(arms["b"]["items"]) == {"x0", "x1", "x2", "x3"}
    assert arms["b"]["k"] == 2 and arms["b"]["value"] == 0.5 and "4 dropped" in arms["b"]["source"]
    assert "dropped" not in arms["a"]["source"]


def test_a_span_claim_names_the_reinforcement_stage_its_child_chose():
    results = {"phase": "finetuned", "reinforcement": {"selection": {"chosen": {"setting": "key-top10-C1-standard"}}}}
    spec_ = {"where": {"stage": "reinforce/shifted-{setting}"}, "b": "{phase}/ood"}
    assert assemble._filled(spec_, {}, results) == {"where": {"stage": "reinforce/shifted-top10-C1-standard"},
                                                    "b": "finetuned/ood"}
    assert assemble._child_env({}) == {"phase": "base", "setting": ""}


def test_masking_claims_carry_each_items_key_and_random_mean():
    """The paired bootstrap the masking child reports, recomputed from its samples with both sides
    as per-item arms (key mask, and the mean over the random masks of each item)."""
    from whitebox_eval.reproduce import values, vocabulary

    rng = np.random.default_rng(0)
    key, rnd = rng.normal(-5, 1, 12), rng.normal(-1, 1, (3, 12))
    samples = ([{"task": "t", "masking": "key", "k": 4, "draw": 0, "item_answer_logprob": key.tolist()}]
               + [{"task": "t", "masking": "random", "k": 4, "draw": d, "item_answer_logprob": r.tolist()}
                  for d, r in enumerate(rnd)]
               + [{"task": "t", "masking": "key", "k": 16, "draw": 0, "item_answer_logprob": (key * 2).tolist()}])
    def masked_items(samples, spec):
        return vocabulary.compute({"derived": "masked_items", **spec}, SimpleNamespace(samples=samples), "masking")

    out = masked_items(samples, {"task": "t", "k": 4, "metric": "answer_logprob"})
    want = stats.paired_bootstrap(key, rnd.mean(axis=0))
    assert out["value"] == pytest.approx(want.diff) and out["p_value"] == want.p_value
    assert out["arms"]["a"]["items"]["t#3"] == key[3] and out["arms"]["b"]["items"]["t#3"] == pytest.approx(rnd[:, 3].mean())
    with pytest.raises(values.Missing):
        masked_items(samples, {"task": "t", "k": 8})


def test_masking_specificity_is_a_relative_change_of_probability_recomputed_from_each_item():
    """Task specificity on a scale-free measure: per item, P_key / mean P_random - 1 on the masked task
    against the other task's items (a permutation test); two tasks whose baselines differ by 5 nats
    but lose the same share of probability show no difference, and recompute_claims recomputes the
    test from each item's change alone."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import recompute_claims as rc

    from whitebox_eval.mui.read_back import relative_change
    from whitebox_eval.reproduce import vocabulary

    rng = np.random.default_rng(1)

    def rows(task, key, rnd):
        return ([{"task": task, "masking": "key", "k": 4, "draw": 0, "item_answer_logprob": key.tolist()}]
                + [{"task": task, "masking": "random", "k": 4, "draw": d, "item_answer_logprob": r.tolist()}
                   for d, r in enumerate(rnd)])

    base_a, base_b = rng.normal(-0.5, 0.1, (20, 16)), rng.normal(-5.5, 0.1, (20, 16))
    shared = np.log(0.3)  # both tasks keep 30% of their probability under the key mask: no specificity
    samples = rows("a", base_a.mean(0) + shared, base_a) + rows("b", base_b.mean(0) + shared, base_b)
    spec = {"derived": "masked_specificity", "task": "a", "other": "b", "k": 4}
    out = vocabulary.compute(spec, SimpleNamespace(samples=samples), "masking")
    ra = relative_change(base_a.mean(0) + shared, base_a)
    assert out["arms"]["a"]["items"]["a#2"] == pytest.approx(ra[2]) and -0.8 < ra.mean() < -0.6
    assert abs(out["value"]) < 0.05 and out["p_value"] > 0.05  # the same share lost on both tasks
    samples = rows("a", base_a.mean(0) + np.log(0.1), base_a) + rows("b", base_b.mean(0) + np.log(0.9), base_b)
    out = vocabulary.compute(spec, SimpleNamespace(samples=samples), "masking")
    assert out["value"] == pytest.approx(-0.8, abs=0.05) and out["p_value"] < 0.01 and out["test"] == "permutation"
    arms = {k: dict(v) for k, v in out.pop("arms").items()}
    ck = rc.Check()
    rc.check_statistic("spec", {"statistic": out}, arms, ck, np.random.default_rng(0))
    assert not ck.bad and ck.done["difference of means"] == 1 and ck.done["permutation p (Monte Carlo)"] == 1
    arms["a"]["items"]["a#0"] += 5.0  # one item's change altered: the mean no longer agrees
    ck = rc.Check()
    rc.check_statistic("spec", {"statistic": out}, arms, ck, np.random.default_rng(0))
    assert ck.bad


def test_token_observations_move_to_the_evidence_and_come_back():
    """claims.json keeps the clustered test's numbers; the tokens behind it (value, group and sequence
    of each) go to evidence.json.gz, and merging puts them back where they were."""
    from whitebox_eval.reproduce import merged, split

    obs = {"value": [0.1, 0.2, 0.3], "correct": [True, False, True], "sequence": ["s0", "s0", "s1"]}
    content = {"papers": [{"number": "003", "claims": [
        {"id": "c", "model": "m", "statistic": {"test": "cluster_robust_t", "value": 0.1, "observations": obs},
         "arms": {}}]}]}
    slim, ev = split(content)
    c = slim["papers"][0]["claims"][0]
    assert "observations" not in c["statistic"] and ev[c["evidence_key"]]["statistic"]["observations"] == obs
    back = merged(slim, ev)["papers"][0]["claims"][0]
    assert back["statistic"] == content["papers"][0]["claims"][0]["statistic"]


def test_an_arm_can_select_items_by_a_bound_on_another_field():
    """004's partitions: MCQ P(correct) of the questions answered freely (free P(correct) >= 0.5)
    against the rest, each with its answer key for the uninformed level."""
    from whitebox_eval.reproduce import claim_checks

    samples = [{"id": f"q{i}", "gold": i % 4, "p_correct": {"mcq": 0.1 * i, "free": f}}
               for i, f in enumerate([0.0, 0.5, 0.9, 0.2, None])]
    spec_ = {"samples": "p_correct.mcq", "answers": "options", "options": 4, "gold": "gold"}
    hi = claim_checks.arm({}, samples, {**spec_, "where": {"p_correct.free": {">=": 0.5}}})
    lo = claim_checks.arm({}, samples, {**spec_, "where": {"p_correct.free": {"<": 0.5}}})
    assert sorted(hi["items"]) == ["q1", "q2"] and sorted(lo["items"]) == ["q0", "q3"]  # None is in neither
    assert "p_correct.free>=0.5" in hi["source"] and hi["answers"]["q2"] == [4, "2", 2]


def test_a_continuous_arm_read_from_an_estimate_shows_its_mean_and_n_never_a_count():
    """MUI after fine-tuning, 0.99% over 48 responses: no "(0/48)"; an accuracy of 8/48 keeps its count."""
    from whitebox_eval.reproduce import claim_checks
    from whitebox_eval.reproduce.cell_text import arms_text

    res = {"headline": {"mui,gsm8k,final": 0.009874, "mui_n,gsm8k,final": 48, "mui_ci,gsm8k,final": [0.0088, 0.0109],
                        "mui_ci_method,gsm8k,final": "jackknife",
                        "accuracy,gsm8k,final": 8 / 48, "accuracy_n,gsm8k,final": 48,
                        "accuracy_ci,gsm8k,final": [0.087, 0.296], "accuracy_ci_method,gsm8k,final": "wilson"}}
    mui = claim_checks.arm(res, [], {"label": "after", "key": "mui,gsm8k,final", "answers": "none"})
    acc = claim_checks.arm(res, [], {"label": "after", "key": "accuracy,gsm8k,final"})
    assert "k" not in mui and mui["n"] == 48 and acc["k"] == 8
    text = arms_text({"arms": {"a": mui, "b": acc}})
    assert "/48" not in text.split(" vs ")[0] and "mean over 48 items" in text and "(8/48)" in text


def test_a_truth_probe_claim_reads_each_held_out_statement_as_its_arms():
    """The probe's and the majority label's per-statement correctness (the child's ``-probe``
    samples) are the claim's arms, each statement with its gold label of two as its answer key."""
    y = np.arange(200) < 140
    maj = np.arange(200) < 100
    probe = {"acc": 0.70, "random_heads": stats.draws([0.6] * 20).as_dict(), "paired_tests": {}}
    stats.add_paired(probe, "probe_vs_majority", stats.mcnemar(y, maj))
    samples = [{"id": f"probe-snli-probe:{i}", "stage": "probe-snli-probe", "probe_file": "snli.jsonl",
                "statement": i, "gold": int(i % 3 == 0), "n_options": 2, "probe_correct": float(p),
                "majority_correct": float(m)} for i, (p, m) in enumerate(zip(y, maj))]
    out = _claim("002", "truth-probe-snli", {"probes": {"snli.jsonl": probe}}, samples)
    a, b = out["arms"]["a"], out["arms"]["b"]
    assert (a["k"], a["n"], b["k"], b["n"]) == (140, 200, 100, 200)
    assert set(a["items"]) == {str(i) for i in range(200)} and a["answers"]["3"] == [2, "1", 1]
