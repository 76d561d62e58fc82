"""Generator invariants checked on every example of all 384 tasks (sec. 2, App. B)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.generator import generate_task_examples, sample_loop
from whitebox_eval.gar.prompts import render_line
from whitebox_eval.gar.tasks import GARTask, enumerate_tasks, kr_tasks, parse_task_id


def _rels(ex):
    lref, rref = ex.task.functional_relations()
    (ls, lr), (rs, rr) = lref.load(), rref.load()
    return ls, lr, rs, rr


def _holds_affirmative(ex, answer):
    """Closed-world truth of "Q r_lookup∘r_retrieve answer" given the context pairs."""
    _, lr, _, rr = _rels(ex)
    return any(lr.holds(k, ex.query) and rr.holds(v, answer) for k, v in ex.context_pairs)


def _statement_true(ex, answer, negate=None):
    negate = ex.task.negate if negate is None else negate
    return not _holds_affirmative(ex, answer) if negate else _holds_affirmative(ex, answer)


def test_dataset_size_and_per_task_counts(gar_examples):
    assert len(gar_examples) == 4608
    per_task = Counter(ex.task_id for ex in gar_examples)
    assert len(per_task) == 384
    for task in enumerate_tasks():
        assert per_task[task.task_id] == (16 if task.g2c else 8)
    assert sum(ex.is_classification for ex in gar_examples) == 3072


def test_relational_loop_holds_against_schema_facts(gar_examples):
    for ex in gar_examples:
        _, lr, _, rr = _rels(ex)
        assert lr.holds(ex.key, ex.query) is (not ex.task.negate), ex.task_id
        assert rr.holds(ex.value, ex.answer), ex.task_id
        assert len(ex.distractor_keys) == ex.task.n_kv - 1
        for k, v, a in zip(ex.distractor_keys, ex.distractor_values, ex.distractor_answers):
            assert lr.holds(k, ex.query) is ex.task.negate, ex.task_id
            assert rr.holds(v, a) and a != ex.answer, ex.task_id
            assert not rr.holds(v, ex.answer), ex.task_id  # distractors never answer


def test_exactly_one_correct_answer_among_candidates(gar_examples):
    for ex in gar_examples:
        candidates = list(dict.fromkeys((ex.answer,) + ex.distractor_answers))
        correct = [a for a in candidates if _statement_true(ex, a)]
        assert correct == [ex.answer], (ex.task_id, ex.prompt)
        if not ex.is_classification:
            assert ex.target == ex.answer and set(ex.alternatives) == set(candidates)
            assert math.isclose(ex.chance, 1 / len(candidates))


def test_classification_labels_and_negate_flip(gar_examples):
    seen = defaultdict(Counter)
    for ex in gar_examples:
        if not ex.is_classification:
            continue
        assert ex.alternatives == ("Yes", "No") and ex.target == ex.label
        truth = _statement_true(ex, ex.stated_answer)
        assert ex.label == ("Yes" if truth else "No"), ex.prompt
        assert (ex.stated_answer == ex.answer) is (ex.label == "Yes")
        # the same statement with the other polarity has the other label
        assert _statement_true(ex, ex.stated_answer, negate=not ex.task.negate) is not truth
        seen[ex.task.negate][ex.label] += 1
    for negate in (False, True):
        assert seen[negate]["Yes"] == seen[negate]["No"] == 96 * 8


def test_negated_rendering_differs_only_by_not():
    ex = generate_task_examples(
        "GendersOfPersons/isA,KindsOfThings/kindOf×3 [g2c]", seed=3)[1]
    neg_task = parse_task_id("GendersOfPersons/isA,KindsOfThings/kindOf×3 [negate,g2c]")
    pairs = ex.context_pairs
    aff, _ = render_line(ex.task, ex.query, pairs, ex.target_position, ex.answer,
                         stated=ex.stated_answer)
    neg, spans = render_line(neg_task, ex.query, pairs, ex.target_position, ex.answer,
                             stated=ex.stated_answer)
    assert " not " in neg and " not " not in aff
    assert neg[spans.negation[0]:spans.negation[1]] == "not"
    assert ex.label == "No"  # a distractor's answer is stated
    assert _statement_true(ex, ex.stated_answer, negate=True)  # so the negation holds


def test_swap_variations_change_order(gar_examples):
    for ex in gar_examples:
        ls, lr, rs, rr = _rels(ex)
        k0, v0 = ex.spans.key[0], ex.spans.value[0]
        assert (k0 < v0) is (ex.task.swap_qa == ex.task.swap_kv), ex.prompt
        # swapQA: the query comes from the second schema and the answer from the first
        assert (ls.side == "person") is (not ex.task.swap_qa)
        assert (rs.side == "object") is (not ex.task.swap_qa)
        for k, s in zip(ex.distractor_keys, ex.spans.distractor_keys):
            assert ex.prompt[s[0]:s[1]].lower() == k.lower()


def test_spans_cover_the_right_substrings(gar_examples):
    for ex in gar_examples:
        p = ex.prompt
        ls, lr, _, _ = _rels(ex)
        text = lambda s: p[s[0]:s[1]].lower()  # noqa: E731
        q = ls.plural(ex.query) if (lr.kind == "category" and ex.task.negate
                                    and ls.side == "person") else ex.query
        assert text(ex.spans.query) == q.lower()
        assert text(ex.spans.key) == ex.key.lower()
        assert text(ex.spans.value) == ex.value.lower()
        for v, s in zip(ex.distractor_values, ex.spans.distractor_values):
            assert text(s) == v.lower()
        assert ex.spans.end == (len(p) - 1, len(p)) and not p.endswith(" ")
        last_line = p.rfind("\n") + 1
        assert all(s[0] >= last_line for s in ex.spans.as_dict().values())
        assert ex.spans.query[1] <= ex.spans.end[0]
        if ex.is_classification:
            assert text(ex.spans.answer) == ex.stated_answer.lower()
            assert p.endswith("? Answer:")
        else:
            assert ex.spans.answer is None
        assert (ex.spans.negation is not None) is ex.task.negate
        if ex.task.negate:
            assert text(ex.spans.negation) == "not"
        demo = ex.demo_spans
        assert demo.answer is not None and demo.end[1] < last_line
        assert p[demo.answer[1]] == ("?" if ex.is_classification else "\n")


def test_prompt_format_of_appendix_b(gar_examples):
    for ex in gar_examples:
        _, _, rs, rr = _rels(ex)
        lines = ex.prompt.split("\n")
        assert len(lines) == (2 if rr.is_same else 3)
        if not rr.is_same:
            assert lines[0].startswith(rs.candidates_intro + " ")
            for a in (ex.answer,) + ex.distractor_answers:
                assert a in lines[0]
        for line in lines[-2:]:
            assert "< " in line and " >." in line
            if ex.is_classification:
                assert line.startswith("Premise: < ")
                assert "Answer with Yes or No. Can it be inferred from the premise that" in line
        if ex.is_classification:
            assert lines[-2].endswith(("Answer: Yes", "Answer: No"))


def test_position_and_answer_balance():
    for task in enumerate_tasks()[:192:7]:
        exs = generate_task_examples(task, seed=5)
        positions = Counter(ex.target_position for ex in exs)
        assert sorted(positions.values()) == [2, 3, 3]
        _, rref = task.functional_relations()
        n_answers = len(rref.load()[1].codomain())
        assert max(Counter(ex.answer for ex in exs).values()) <= math.ceil(8 / n_answers)


def test_same_seed_same_data_other_seed_other_data():
    task = "OccupationOfPersons/worksAsA,CountriesOfLandmarks/inCountryOf×3 [negate,g2c](swapQA)"
    a = generate_task_examples(task, seed=11)
    b = generate_task_examples(task, seed=11)
    c = generate_task_examples(task, seed=12)
    assert [x.to_dict() for x in a] == [x.to_dict() for x in b]
    assert [x.prompt for x in a] != [x.prompt for x in c]


def test_kr_sub_problems():
    for task in kr_tasks():
        for ex in generate_task_examples(task):
            _, rel = task.retrieve.load()
            assert rel.holds(ex.value, ex.answer)
            assert ex.prompt[ex.spans.value[0]:ex.spans.value[1]].lower() == ex.value.lower()
            assert ex.alternatives[0] == ex.answer and len(set(ex.alternatives)) == \
                len(ex.alternatives) >= 2
            assert ex.spans.end == (len(ex.prompt) - 1, len(ex.prompt))


def test_errors_a_user_can_cause():
    with pytest.raises(WhiteboxError, match="even"):
        generate_task_examples("GendersOfPersons/same,KindsOfThings/same×3 [g2c]", n_examples=3)
    with pytest.raises(WhiteboxError):
        generate_task_examples("GendersOfPersons/same,KindsOfThings/same×3 [g2c", seed=0)
    task = parse_task_id("GendersOfPersons/same,KindsOfThings/same×3")
    import random
    with pytest.raises(WhiteboxError, match="cannot be an answer"):
        sample_loop(task, random.Random(0), answer="Atlantis")
    with pytest.raises(WhiteboxError, match="too few"):
        sample_loop(GARTask(task.lookup, task.retrieve, n_kv=60), random.Random(0))
