"""002's truth-heads child on the GAR-trained model (truth-heads-trained): its own manipulation check
(``above_uninformed``: the trained model's App. C accuracy on the truth tasks' report examples before
any edit, above its uninformed level) read from the consumer's own samples, a failed check making every
claim on that column "uninformative (manipulation failed)", and the plan running it after its producer.
Synthetic child runs, as in test_checks; nothing is run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest

from whitebox_eval import stats
from whitebox_eval.reproduce import antecedents, assemble, spec, verdicts
from whitebox_eval.reproduce.plan import Child, run_ref

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_checks import MODEL, _gar, _Plan, _Study  # noqa: E402

PRODUCER = "002-gar-train"
TRAINED = run_ref(PRODUCER)


def _check_spec() -> dict[str, Any]:
    (check,) = spec.papers()["002"].experiment("truth-heads-trained").manipulation
    return check


def _consumer(right: int, n: int = 60, selection: int = 20) -> tuple[dict, list]:
    """A truth-heads child: ``right`` of its ``n`` report examples right before any edit (the edits move
    30 more items right), and ``selection`` selection examples, every one right, that the check must
    not read."""
    before = np.arange(n) < right
    after = np.arange(n) < min(n, right + 30)
    results, samples = _gar(after, before, [before.copy() for _ in range(20)], before)
    results["split"] = {"report": [f"k{i}" for i in range(n)], "selection": [f"s{i}" for i in range(selection)]}
    samples += [{"id": f"base:s{i}", "stage": "base", "correct": True, "prediction": gold, "label": gold,
                 "probs": {"Yes": 0.7 if gold == "Yes" else 0.2, "No": 0.7 if gold == "No" else 0.2}}
                for i, gold in ((i, "Yes" if i % 2 == 0 else "No") for i in range(selection))]
    return results, samples


def test_the_check_passes_above_the_uninformed_level_and_fails_at_it():
    check = _check_spec()
    high = antecedents.above_uninformed(check, *_consumer(42))
    p = binomtest(42, 60, 0.5, alternative="greater").pvalue
    assert high["passed"] is True and high["n"] == 60 and high["k"] == 42 and high["level"] == pytest.approx(0.5)
    assert high["p_value"] == pytest.approx(p) and p < 0.05
    assert "H1: above its uninformed level" in high["text"] and "42/60" in high["text"] and "p = 0.00" in high["text"]
    # at chance on the report examples: failed, though the 20 selection examples (every one right) would lift it
    low = antecedents.above_uninformed(check, *_consumer(31))
    assert low["passed"] is False and low["n"] == 60 and low["k"] == 31 and "-- at chance" in low["text"]
    assert low["p_value"] == pytest.approx(binomtest(31, 60, 0.5, alternative="greater").pvalue)
    assert antecedents.above_uninformed({k: v for k, v in check.items() if k != "items_at"}, *_consumer(31))["passed"]


def test_a_report_split_without_its_samples_is_not_a_pass():
    results, samples = _consumer(42)
    results["split"]["report"] = ["nowhere"]
    out = assemble.checks.evaluate({"above_uninformed": antecedents.above_uninformed}, _check_spec(), results, samples)
    assert "passed" not in out and "no sample" in out["error"]


class _TrainedPlan(_Plan):
    """test_checks' plan with 002's gar-train producer on MODEL and its truth-heads column."""

    def __init__(self) -> None:
        super().__init__()
        self.producer = Child(PRODUCER, "finetune", None, MODEL, {}, [("002", "gar-train")])
        self.column = Child("002-truth-heads-trained", "gar", "truth-heads", TRAINED, {}, [("002", "truth-heads")],
                            label=f"{MODEL} + GAR tasks")
        self.children += [self.producer, self.column]


def _training(up: bool) -> dict[str, Any]:
    """gar-train's results: App. C accuracy per format on 60 test-half items, before 20 right, after 50 (or 20)."""
    res: dict[str, Any] = {}
    before, after = np.arange(60) < 20, np.arange(60) < (50 if up else 20)
    for fmt in ("generation", "classification"):
        stats.add_proportion(res, f"accuracy_{fmt},before", before)
        stats.add_proportion(res, f"accuracy_{fmt},after", after)
        stats.add_paired(res, f"accuracy_{fmt},after_vs_before", stats.mcnemar(after, before))
    return res


def _claims(report_right: int, trained_up: bool = True) -> dict[str, dict[str, Any]]:
    plan = _TrainedPlan()
    outcomes = {PRODUCER: assemble.Outcome(plan.producer, "done", folder="/nonexistent", _study=_Study(_training(trained_up))),
                plan.column.run_id: assemble.Outcome(plan.column, "done", folder="/nonexistent",
                                                     _study=_Study(*_consumer(report_right)))}
    p = spec.papers()["002"]
    return {c.id: assemble.claim(p, c, plan, outcomes, TRAINED) for c in p.claims if c.experiment == "truth-heads"}


def _own(claim: dict[str, Any]) -> dict[str, Any]:
    (check,) = [m for m in claim["rules"]["manipulation"] if m["kind"] == "above_uninformed"]
    return check


def test_a_trained_model_at_chance_on_the_report_examples_makes_every_claim_on_its_column_uninformative():
    claims = _claims(31)
    assert all(c["model"] == f"{MODEL} + GAR tasks" for c in claims.values())
    # every claim whose statistic the synthetic child holds (the probes' and strong / weak edits' it lacks)
    read = {cid: c for cid, c in claims.items() if c["verdict"] != verdicts.NOT_TESTED}
    assert set(read) == {"true-false-intervention-raises", "inverse-intervention-lowers"}
    for cid, c in read.items():
        assert c["verdict"] == verdicts.UNINFORMATIVE and c["qualifier"] == "manipulation failed", cid
        assert _own(c)["passed"] is False and "31/60" in _own(c)["text"], cid
        assert "above_uninformed failed" in c["reason"] and "31/60" in c["reason"], cid
        assert all(m["passed"] for m in c["rules"]["manipulation"] if m["kind"] != "above_uninformed"), cid
    # above chance, the same column's claim is read: the training's check and its own both pass
    up = _claims(42)["true-false-intervention-raises"]
    assert _own(up)["passed"] is True
    assert [m["passed"] for m in up["rules"]["manipulation"] if m["kind"] == "trained"] == [True, True]
    assert up["verdict"] == verdicts.HOLDS
    # a training that missed its target fails the claim on its own, whatever the column's accuracy
    missed = _claims(42, trained_up=False)["true-false-intervention-raises"]
    assert missed["qualifier"] == "manipulation failed" and "accuracy_generation" in missed["reason"]


def test_a_training_that_missed_its_check_decides_its_column_s_claims_whose_child_did_not_run():
    """The column's child did not run (skipped): a training that finished and missed its check makes each
    claim "uninformative (manipulation failed)", as had the child run; one that passed, or did not finish,
    leaves them not run."""
    plan = _TrainedPlan()
    p = spec.papers()["002"]
    skipped = assemble.Outcome(plan.column, "skipped", "--reuse-only: no finished copy under --output")

    def claims(producer: assemble.Outcome | None) -> list[dict[str, Any]]:
        outcomes = {plan.column.run_id: skipped, **({PRODUCER: producer} if producer else {})}
        return [assemble.claim(p, c, plan, outcomes, TRAINED) for c in p.claims if c.experiment == "truth-heads"]

    missed = claims(assemble.Outcome(plan.producer, "done", folder="/x", _study=_Study(_training(False))))
    assert missed and all(c["verdict"] == verdicts.UNINFORMATIVE and c["qualifier"] == "manipulation failed"
                          for c in missed)
    assert all("accuracy_generation" in c["reason"] and c["run"] == plan.column.run_id for c in missed)
    assert all(m["kind"] == "trained" for c in missed for m in c["rules"]["manipulation"])
    passed = claims(assemble.Outcome(plan.producer, "done", folder="/x", _study=_Study(_training(True))))
    assert {c["verdict"] for c in passed} == {verdicts.NOT_RUN} and all("--reuse-only" in c["reason"] for c in passed)
    for producer in (None, assemble.Outcome(plan.producer, "failed", "out of memory")):
        assert {c["verdict"] for c in claims(producer)} == {verdicts.NOT_RUN}


def test_the_base_models_truth_heads_claims_do_not_read_the_columns_check():
    plan = _TrainedPlan()
    base = plan.child("002", "truth-heads", MODEL)
    outcomes = {base.run_id: assemble.Outcome(base, "done", folder="/nonexistent", _study=_Study(*_consumer(31)))}
    p = spec.papers()["002"]
    c = assemble.claim(p, next(x for x in p.claims if x.id == "true-false-intervention-raises"), plan, outcomes, MODEL)
    assert not [m for m in c["rules"]["manipulation"] if m["kind"] in ("above_uninformed", "trained")]


def test_the_plan_runs_the_column_after_its_training_with_truth_heads_settings_on_the_test_half():
    from whitebox_eval.reproduce import plan as planning

    p = spec.papers()["002"]
    models = ["smollm2-135m", "gemma3-270m"]
    data = {"snli": "snli.jsonl", "geometry_of_truth": "got"}
    for scale in ("micro", "cpu"):
        children = planning.build([p], models, scale, data).children
        ids = [c.run_id for c in children]
        for model in models:
            (column,) = [c for c in children if c.label == f"{model} + GAR tasks" and c.mode == "truth-heads"]
            (base,) = [c for c in children if c.model == model and c.mode == "truth-heads"]
            (producer,) = [c for c in children if c.model == model and c.suite == "finetune"]
            assert column.model == run_ref(producer.run_id) and column.uses == [("002", "truth-heads")]
            assert ids.index(producer.run_id) < ids.index(column.run_id)
            assert {k: v for k, v in column.settings.items() if k != "elements"} == base.settings
            assert column.settings["elements"] == "test" and column.seconds == base.seconds > 0
