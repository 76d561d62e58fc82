"""Every rule on every verdict and statistic kind, one test per rule on synthetic child runs read
through the papers' own claims: an all-at-chance "not shown" is uninformative before and after Holm,
a chance-level reference does not demote, an edit claim on a floor has no room to move, a clustered
token statistic whose pooled gap vanishes within position is decided within position, a control is
evaluated in the direction of the verdict it could demote, the inverse edit's control reads its own
stage, a claim without arms is refused (and with them, at chance), a floor is labelled alike in
every paper, and not run / not tested follow whether the child ran."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import ttest_1samp

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import assemble, chance, draw_controls, spec, verdicts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_checks import MODEL, _claim, _gar, _kinds, _Plan, _span  # noqa: E402


def _mcqa(gold: list[int], head: list[int], base: list[int], pride: list[int]) -> tuple[dict, list]:
    """A 0-shot mcqa child: the QK head's, the letter baseline's and PriDe's answers per test item."""
    samples = [{"id": f"q{i}", "split": "test", "gold": g, "labels": ["A", "B", "C", "D"], "n_options": 4,
                "qk_head": {"head": [14, 0], "pred": h}, "pred_baseline": b,
                "acc,qk_head": float(h == g), "acc,baseline": float(b == g), "acc,pride": float(p == g)}
               for i, (g, h, b, p) in enumerate(zip(gold, head, base, pride))]
    results = {"chance": 0.25, "qk": {"best_head": [14, 0]}, "paired_tests": {}}
    hc, bc = np.array(head) == np.array(gold), np.array(base) == np.array(gold)
    stats.add_paired(results, "qk_head_vs_baseline", stats.mcnemar(hc, bc))
    return results, samples


# ------------------------------------------------------------------ rule 1: the uninformed level, every verdict


def test_an_all_at_chance_not_shown_is_uninformative_before_and_after_holm():
    # QK head and PriDe both answer a random letter on a balanced 4-letter set: 25% each, no difference.
    # "not shown at this n; detectable X pp" would say more items settle it; they would not
    rng = np.random.default_rng(3)
    n = 200
    gold = [i % 4 for i in range(n)]
    head, pride = list(rng.integers(0, 4, n)), list(rng.integers(0, 4, n))
    results, samples = _mcqa(gold, head, list(rng.integers(0, 4, n)), pride)
    out = _claim("000", "qk-beats-pride-ssd", results, samples)
    assert out["statistical_verdict"] == verdicts.NOT_SHOWN
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "at chance"
    assert out["rules"]["chance"]["needed"] == ["a"] and "at chance" in out["reason"]
    # after Holm alike (its p only grows; the arm's level does not depend on p)
    verdicts.holm([out])
    assert out["verdict_holm"] == verdicts.UNINFORMATIVE


def test_holm_does_not_turn_an_at_chance_contradiction_back_into_not_shown():
    # 004: MCQ P(correct) at its letter floor (0.25) "beats" free generation at 0.10 (above its level of
    # 1/40): contradicted, decided by the MCQ arm, which is at chance. Holm over many claims makes it not
    # significant, where the claim's own arm (free) is above its level -- it must stay at chance
    from test_rules import _formats

    rng = np.random.default_rng(4)
    n = 40
    mcq = np.clip(0.25 + rng.normal(0, 0.01, n), 0, 1)
    free = np.clip(0.10 + rng.normal(0, 0.01, n), 0, 1)
    results, samples = _formats(free, mcq, [str(100 + i) for i in range(n)], [i % 4 for i in range(n)])
    out = _claim("004", "free-beats-mcq-arithmetic", results, samples)
    ch = out["rules"]["chance"]
    assert out["statistical_verdict"] == verdicts.CONTRADICTED and out["qualifier"] == "at chance"
    assert ch["arms"]["a"]["above"] is True and ch["arms"]["b"]["above"] is False
    others = [{"p_value": 0.01, "statistic": {"value": 0.1, "lo": 0.05, "hi": 0.15, "p_value": 0.01},
               "direction": "greater", "than": 0.0, "verdict": verdicts.HOLDS} for _ in range(400)]
    verdicts.holm([out, *others])
    assert out["p_holm"] >= stats.ALPHA  # Holm alone would read "not shown" (the free arm is above its level)
    assert verdicts.verdict(out["statistic"], "greater", 0.0, p=out["p_holm"], **out["rules"])["verdict"] == verdicts.NOT_SHOWN
    assert out["verdict_holm"] == verdicts.UNINFORMATIVE


def test_a_reference_at_chance_does_not_demote_and_an_arm_reads_alike_in_every_claim():
    # the letter baseline of "head beats baseline" at 25% is a reference: the head (70%) decides
    n = 200
    gold = [i % 4 for i in range(n)]
    head = [g if i % 10 < 7 else (g + 1) % 4 for i, g in enumerate(gold)]
    base = [(i // 4) % 4 for i in range(n)]  # 25%: each letter by position, unrelated to gold
    pride = [g if i % 10 < 3 else (g + 2) % 4 for i, g in enumerate(gold)]
    results, samples = _mcqa(gold, head, base, pride)
    out = _claim("000", "qk-beats-baseline-ssd", results, samples)
    ch = out["rules"]["chance"]
    assert ch["arms"]["b"]["above"] is False and ch["arms"]["a"]["above"] is True
    assert out["verdict"] == verdicts.HOLDS
    # the QK head's uninformed level is computed once from its items: the same text in its sister claim
    sister = _claim("000", "qk-beats-pride-ssd", results, samples)
    assert sister["rules"]["chance"]["arms"]["a"]["text"] == ch["arms"]["a"]["text"]


def test_a_head_at_chance_reads_alike_in_its_sister_claims():
    # SmolLM2's QK head on MMLU (121/482): "uninformative" in one claim and "not shown, detectable 9 pp" in
    # its sister claim before; now the same status, the same text, in both
    rng = np.random.default_rng(7)
    n = 240
    gold = [i % 4 for i in range(n)]
    head = list(rng.integers(0, 4, n))
    results, samples = _mcqa(gold, head, [(i // 4) % 4 for i in range(n)], list(rng.integers(0, 4, n)))
    outs = [_claim("000", cid, results, samples) for cid in ("qk-beats-baseline-mmlu-0shot", "qk-beats-pride-mmlu")]
    assert [o["verdict"] for o in outs] == [verdicts.UNINFORMATIVE] * 2
    assert [o["qualifier"] for o in outs] == ["at chance"] * 2
    assert outs[0]["rules"]["chance"]["arms"]["a"]["text"] == outs[1]["rules"]["chance"]["arms"]["a"]["text"]


def test_a_mean_arm_is_tested_against_its_level_by_a_one_sample_t_test():
    rng = np.random.default_rng(5)
    x = np.clip(0.27 + rng.normal(0, 0.05, 40), 0, 1)
    arm = {"label": "P(correct)", "items": {f"i{k}": float(v) for k, v in enumerate(x)},
           "answers": {f"i{k}": [4, str(k % 4), k % 4] for k in range(40)}}  # balanced: level 1/4
    lv = chance.above(arm)
    assert lv["test"] == "one-sample t-test of the mean"
    assert lv["p_value"] == pytest.approx(ttest_1samp(x, 0.25, alternative="greater").pvalue)


# ------------------------------------------------------------------ rule 2: room to move


def test_an_edit_claim_on_a_floor_has_no_room_to_move():
    # "the inverse edit lowers accuracy", on a model that says "No" to every item (50% = its constant
    # answer): the unedited accuracy already sits at its floor, whatever the edit does
    n = 60
    before = np.arange(n) % 2 == 1
    after = np.arange(n) < 5
    results, samples = _gar(np.arange(n) < 50, before, [before.copy() for _ in range(20)], after)
    out = _claim("002", "inverse-intervention-lowers", results, samples)
    assert out["statistical_verdict"] == verdicts.HOLDS
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "no room to move"
    room = out["rules"]["room"][0]
    assert room["arm"] == "b" and room["measure"] == "accuracy" and room["bound"] == 0.5 and room["room"] is False
    # a model that reads the question (45/60 before): room to move, the claim holds
    results, samples = _gar(np.arange(n) < 50, np.arange(n) < 45, [np.arange(n) < 45 for _ in range(20)], after)
    out = _claim("002", "inverse-intervention-lowers", results, samples)
    assert out["rules"]["room"][0]["room"] is True and out["verdict"] == verdicts.HOLDS


def test_room_to_move_bounds_by_measure():
    share0 = {"label": "MUI", "items": {"a": 0.0, "b": 0.0, "c": 0.0}}
    assert chance.room(share0, "lowers")["room"] is False  # a share at 0 cannot fall
    assert chance.room(share0, "raises")["room"] is True
    full = {"label": "acc", "items": {f"i{k}": 1.0 for k in range(20)},
            "answers": {f"i{k}": [4, "A", 0] for k in range(10)} | {f"i{k}": [4, "B", 1] for k in range(10, 20)}}
    assert chance.room(full, "raises")["room"] is False and chance.room(full, "lowers")["room"] is True
    logp = {"label": "log P", "items": {"a": -3.0, "b": -2.5}}
    assert chance.room(logp, "lowers") == {**chance.room(logp, "lowers"), "room": True, "bound": None}


# ------------------------------------------------------------------ rule 3: strata for every pooled kind


def test_a_clustered_token_gap_that_vanishes_within_position_is_decided_within_position():
    # scores fall with position; correct tokens come early, wrong ones late; at each position correct and
    # wrong tokens score alike. Pooled over positions, "correct tokens score higher" is significant
    rng = np.random.default_rng(6)
    samples = []
    for s in range(60):
        pos = np.arange(12)
        correct = rng.random(12) < np.where(pos < 6, 0.9, 0.1)
        score = 1.0 - 0.06 * pos + rng.normal(0, 0.02, 12)
        samples.append({"id": f"base/ood/{s}", "stage": "base/ood", "rollout_scores": score.tolist(),
                        "correct": correct.tolist(), "exact": False, "target": f"t{s}"})
    out = _claim("003", "errors-attend-less-string-reversal", {"phase": "base"}, samples)
    s = out["statistic"]
    assert s["pooled"]["value"] > 0.1 and s["pooled"]["p_value"] < 0.05 and s["pooled"]["test"] == "cluster_robust_t"
    assert abs(s["value"]) < 0.02 and s["p_value"] > 0.05 and s["source"].endswith("within token position")
    assert s["stratified"]["strata_used"] == 12 and "permutation within token position" in s["test"]
    assert out["verdict"] == verdicts.NOT_SHOWN


# ------------------------------------------------------------------ rule 4: controls


def test_a_control_is_evaluated_in_the_direction_of_the_verdict_it_could_demote():
    # 003's "reinforcement raises OOD accuracy" with 20 random-head draws. Not shown (reinforced 20/60 vs
    # 24/60): the control is read in the claim's direction (draws at least as HIGH), not the observed one
    results, samples = _span(20, 24)
    results["reinforcement"]["evaluation"]["random_heads"]["accuracy"]["draws"] = [0.3] * 20
    out = _claim("003", "reinforcement-raises-ood-string-reversal", results, samples)
    assert out["verdict"] == verdicts.NOT_SHOWN
    ctl = _kinds(out, "controls")["random_draws"]
    assert ctl["rank"]["direction"] == "greater" and "at least as high" in ctl["text"]
    assert ctl["rank"]["at_least_selected"] == 0  # no draw (0.30) as high as 20/60; all 20 as low
    assert "the claimed direction" in ctl["hypothesis"]
    # contradicted (5/60 vs 40/60): the control that could demote it is read in the observed direction
    results, samples = _span(5, 40)
    results["reinforcement"]["evaluation"]["random_heads"]["accuracy"]["draws"] = [0.3] * 20
    out = _claim("003", "reinforcement-raises-ood-string-reversal", results, samples)
    ctl = _kinds(out, "controls")["random_draws"]
    assert out.get("statistical_verdict", out["verdict"]) == verdicts.CONTRADICTED
    assert ctl["rank"]["direction"] == "less" and "at least as low" in ctl["text"] and "observed" in ctl["hypothesis"]


def test_the_inverse_edit_control_reads_its_own_stage_or_is_not_run():
    n = 60
    before, tf, inv = np.arange(n) < 45, np.arange(n) < 55, np.arange(n) < 10
    results, samples = _gar(tf, before, [before.copy() for _ in range(20)], inv)
    # a child that ran only the forward edit on random heads (rand*): the inverse claim's control is not run,
    # never read from the forward edit's draws in its place
    out = _claim("002", "inverse-intervention-lowers", results, samples)
    ctl = _kinds(out, "controls")["random_heads"]
    assert ctl["not_run"] and not ctl["explains"] and "no random draws invrand*" in ctl["text"]
    assert out["verdict"] == verdicts.HOLDS  # a control not run neither explains nor passes ...
    assert any(c.startswith("specificity untested: control not run") for c in out["caveats"])  # ... it is named
    # draws declared as another stage's edit are refused whatever the child ran
    assert "repeat stage tf's edit" in draw_controls.random_heads(
        {"stage": "inv", "draws": "rand", "draws_of": "tf", "field": "correct"}, {}, results, samples, "less")["text"]

    def inverse_draws(correct: np.ndarray) -> list[dict]:  # the child's stages invrand0..19, as gar truth-heads writes them
        return [{"id": f"invrand{d}:k{i}", "stage": f"invrand{d}", "correct": bool(c)}
                for d in range(20) for i, c in enumerate(correct)]

    # the inverse edit on random heads leaves accuracy where it was: the selected heads' drop is specific
    out = _claim("002", "inverse-intervention-lowers", results, samples + inverse_draws(before))
    ctl = _kinds(out, "controls")["random_heads"]
    assert not ctl.get("not_run") and ctl["rank"]["draws"] == 20 and ctl["rank"]["at_least_selected"] == 0
    assert out["verdict"] == verdicts.HOLDS and not any("specificity untested" in c for c in out["caveats"])
    # the inverse edit on random heads lowers accuracy as far: the control explains the holding verdict
    out = _claim("002", "inverse-intervention-lowers", results, samples + inverse_draws(np.arange(n) < 5))
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "control explains"


# ------------------------------------------------------------------ rule 6: arms for every claim


def test_a_claim_without_arms_is_refused_and_its_declared_arm_at_chance_decides():
    from test_paper_file_boundary import PAPER

    doc = copy.deepcopy(PAPER)
    del doc["claims"][0]["arms"]
    with pytest.raises(WhiteboxError, match="declares no arms"):
        spec.parse_paper(doc, "mine.yaml")
    doc["claims"][0]["arms"] = {"a": {"label": "a fit's points", "answers": "none"}}
    assert spec.parse_paper(doc, "mine.yaml").claims[0].arms
    # a YAML flow mapping split by a comma in a label leaves a stray key: refused, not read as a role
    doc["claims"][0]["arms"] = {"a": {"label": "random heads (per item", " mean over draws)": None}}
    with pytest.raises(WhiteboxError, match="arm a takes no ' mean over draws\\)'"):
        spec.parse_paper(doc, "mine.yaml")
    # 002's class-2 share of errors, on a model at chance among its candidates: its errors say nothing
    from test_rules import _gar_eval

    n = 300

    def classified(correct: list[int]) -> tuple[dict[str, Any], list]:
        """Generation rows whose errors are 80% class 2, and the child's own error_analysis of them."""
        rows = _gar_eval(correct, [], [f"T{i % 5}" for i in range(n)], [])
        errors = [r for r in rows if not r["correct"]]
        for j, r in enumerate(errors):
            r.update(index=j, error_class="other_candidate" if j % 5 else "off_candidates")
        for r in rows:
            r.setdefault("index", -1 - int(r["id"][1:]))
            r.setdefault("error_class", "target")
        share: dict[str, Any] = {"n_errors": len(errors)}
        stats.add_proportion(share, "share,class2_wrong_candidate",
                             np.array([r["error_class"] == "other_candidate" for r in errors]))
        return {"error_analysis": share}, rows

    out = _claim("002", "class2-errors-dominant", *classified([1 if i % 3 == 0 else 0 for i in range(n)]))
    assert out["statistical_verdict"] == verdicts.HOLDS  # 80% of the errors > 1/2
    assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "at chance"
    assert _claim("002", "class2-errors-dominant", *classified([1 if i % 10 else 0 for i in range(n)]))["verdict"] \
        == verdicts.HOLDS


# ------------------------------------------------------------------ rule 7: labels by definition


def test_a_floor_is_labelled_alike_in_two_papers():
    # 004: no question answered freely (an empty partition); 003: every token right (no wrong token)
    empty = {"mcq_by_free_answered": {"partitions": {"free>=0.5": {"n": 0}, "free<0.5": {"n": 40}}}}
    a = _claim("004", "partitions-distinct-triviaqa", empty)
    rows = [{"id": f"base/ood/{s}", "stage": "base/ood", "rollout_scores": [0.5, 0.4], "correct": [True, True]}
            for s in range(10)]
    b = _claim("003", "errors-attend-less-string-reversal", {"phase": "base"}, rows)
    for out in (a, b):
        assert out["verdict"] == verdicts.UNINFORMATIVE and out["qualifier"] == "floor"
    assert "no item in free>=0.5" in a["reason"] and "sequences with a wrong token 0" in b["reason"]


def test_not_run_is_a_child_that_did_not_run_and_not_tested_one_that_ran_without_the_statistic():
    p = spec.papers()["001"]
    c = next(x for x in p.claims if x.id == "masking-key-below-random-accuracy")  # not tested at the quick scale
    plan = _Plan()
    child = plan.child("001", c.experiment, MODEL)
    done = assemble.Outcome(child, "done", folder="/nonexistent", _study=None)
    tested = assemble.claim(p, c, plan, {child.run_id: done}, MODEL)
    assert tested["verdict"] == verdicts.NOT_TESTED and tested["reason"].startswith("not tested at the quick scale: ")
    unrun = assemble.claim(p, c, plan, {}, MODEL)
    assert unrun["verdict"] == verdicts.NOT_RUN and unrun["reason"].startswith("not run at the quick scale: ")
    failed = assemble.Outcome(child, "failed", reason="out of memory")
    assert assemble.claim(p, c, plan, {child.run_id: failed}, MODEL)["verdict"] == verdicts.NOT_RUN
    law = next(x for x in p.claims if x.id == "utility-law-sae")  # across models: no child of its own ran
    out = assemble.claim(p, law, plan, {}, "all")
    assert out["verdict"] == verdicts.NOT_RUN and out["reason"].startswith("not run at the quick scale: "), out
