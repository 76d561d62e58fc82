"""The lm-eval prompt style against lm-eval 0.4.13's task configs, written out by hand here
(``mmlu/default/_default_template_yaml``, ``hellaswag/utils.py``, ``arc/arc_easy.yaml``,
``api/task.py`` ``fewshot_context`` / ``process_results``, ``api/model.py`` ``_encode_pair``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from whitebox_eval.tasks.registry import record  # noqa: E402
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks import load_mcq_dataset
from whitebox_eval.tasks import lm_eval as le
from whitebox_eval.tasks.hellaswag import preprocess
from whitebox_eval.tasks.items import MCQItem


def test_hellaswag_preprocess_matches_lm_evals_rules():
    # strip, " [title]" -> ". ", drop [...] (non-greedy), then ONE pass of "  " -> " "
    assert preprocess("  Make tea [title] Boil water. [step] Pour it.  ") == "Make tea. Boil water. Pour it."
    assert preprocess("a [header] b") == "a b"
    assert preprocess("a    b") == "a  b"  # str.replace is one non-overlapping pass: 4 spaces -> 2
    assert preprocess("x [a] y [b] z") == "x y z"


def test_hellaswag_doc_is_activity_label_then_context_with_ctx_b_capitalized(tmp_path):
    row = {"ind": 7, "activity_label": "Baking cookies", "ctx_a": "A woman mixes dough.", "ctx_b": "she",
           "ctx": "A woman mixes dough. she", "endings": ["puts it [title] in.", "eats it", "x y", "sings"], "label": "1"}
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(row) + "\n")
    item = load_mcq_dataset("hellaswag", path)[0]
    doc = le.doc(record("hellaswag"), item)
    assert doc.text == "Baking cookies: A woman mixes dough. She"
    assert doc.choices == ["puts it. in.", "eats it", "x y", "sings"] and doc.gold == 1 and doc.output == "cloze"
    assert le.context(doc) == doc.text and le.continuations(doc)[0] == " puts it. in."
    # a file with ctx only (no ctx_a/ctx_b) gives the same text: ctx is ctx_a + " " + ctx_b
    del row["ctx_a"], row["ctx_b"]
    row["ctx"] = "A woman mixes dough. She"
    path.write_text(json.dumps(row) + "\n")
    assert le.doc(record("hellaswag"), load_mcq_dataset("hellaswag", path)[0]).text == doc.text


def test_mmlu_doc_and_few_shot_context_are_lm_evals_template():
    item = MCQItem(id="q", question=" What is 2+2? ", options=["3", "4", "5", "6"], gold=1, subject="high_school_math")
    demo = MCQItem(id="d", question="What is 1+1?", options=["2", "3", "4", "5"], gold=0, subject="high_school_math")
    doc, shot = le.doc(record("mmlu"), item), le.doc(record("mmlu"), demo)
    header = "The following are multiple choice questions (with answers) about high school math.\n\n"
    assert doc.task == "mmlu_high_school_math" and doc.metrics == ("acc",)
    assert doc.choices == ["A", "B", "C", "D"] and le.continuations(doc) == [" A", " B", " C", " D"]
    assert le.context(doc) == header + "What is 2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:"
    assert le.context(doc, [shot]) == (header + "What is 1+1?\nA. 2\nB. 3\nC. 4\nD. 5\nAnswer: A\n\n"
                                       + "What is 2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:")


def test_arc_doc_is_question_answer_cloze_named_by_file(tmp_path):
    row = {"query": "Question: Which is a gas?\nAnswer:", "choices": ["ice", "steam"], "gold": 1}
    for name, task in (("ARC-Challenge-Test.jsonl", "arc_challenge"), ("arc_easy.jsonl", "arc_easy")):
        (tmp_path / name).write_text(json.dumps(row) + "\n")
        doc = le.doc(record("arc"), load_mcq_dataset("arc", tmp_path / name)[0])
        assert (doc.task, doc.text, doc.choices, doc.gold) == (task, "Question: Which is a gas?\nAnswer:", ["ice", "steam"], 1)


def test_render_letters_spans_point_at_each_option():
    item = MCQItem(id="q", question="Pick", options=["red", "green\tish", "blue", "A. trap"], gold=2, subject="x")
    demo = MCQItem(id="d", question="Pick", options=["A. trap", "b", "c", "d"], gold=0, subject="x")
    r = le.render_letters(le.doc(record("mmlu"), item), [le.doc(record("mmlu"), demo)], item.id)
    assert r.text.endswith("Answer:") and r.prefix.endswith("Answer: A\n\n") and r.text[r.prefix_len:].startswith("Pick\n")
    for o, label, text in zip(r.options, "ABCD", item.options):
        assert (o.label.of(r.text), o.label_sep.of(r.text), o.content.of(r.text), o.eol.of(r.text)) == (label, ".", text, "\n")
        assert o.label.start > r.prefix_len  # the query's lines, never the demonstration's
    assert r.answer_strings == [" A", " B", " C", " D"] and r.gold == 2 and r.answer_cue.of(r.text) == "Answer:"


class _CharTokenizer:
    """One token per character (a space merges into the next character, like BPE's 'Ġx')."""

    def __call__(self, text):
        ids, i = [], 0
        while i < len(text):
            if text[i] == " " and i + 1 < len(text):
                ids.append(1000 + ord(text[i + 1]))
                i += 2
            else:
                ids.append(ord(text[i]))
                i += 1
        return {"input_ids": ids}


def test_encode_pair_moves_trailing_space_and_splits_the_whole_encoding():
    tok = _CharTokenizer()
    encode = lambda text: tok(text)["input_ids"]  # noqa: E731
    ctx, (cont,) = le.encode_request(encode, "Answer: ", ["B"])  # the trailing space joins the continuation: " B" -> one token
    assert ctx == [ord(c) for c in "Answer:"] and cont == [1000 + ord("B")]
    ctx, (cont,) = le.encode_request(encode, "ab", [" cd"])
    assert ctx + cont == tok("ab cd")["input_ids"] and cont == [1000 + ord("c"), ord("d")]


def test_acc_norm_uses_characters_and_first_choice_wins_ties():
    assert list(le.choice_lengths(["ab", " c", "é"])) == [2.0, 2.0, 1.0]  # characters, not bytes; no delimiter
    assert list(le.first_argmax(np.array([[1.0, 3.0, 3.0], [-np.inf, np.nan, -2.0]]))) == [1, 2]


def test_tasks_without_an_lm_eval_style_say_which_styles_they_have():
    with pytest.raises(WhiteboxError, match=r"task cosmosqa has prompt styles: paper \(lm-eval 0.4.13 has no CosmosQA task\)"):
        le.check_style(record("cosmosqa"), "lm-eval")
    with pytest.raises(WhiteboxError, match="unknown --prompt style"):
        le.check_style(record("mmlu"), "harness")
    le.check_style(record("arc"), "lm-eval")


def test_each_lm_eval_dataset_scores_answers_as_its_table_says():
    items = {"mmlu": MCQItem(id="q", question="Q", options=["a", "b", "c", "d"], gold=0, subject="x"),
             "hellaswag": MCQItem(id="h", question="Q", options=["a", "b"], gold=0, context="c", subject="act"),
             "arc": MCQItem(id="r", question="Q", options=["a", "b"], gold=1),
             "mcq": MCQItem(id="m", question="Q", options=["a", "b", "c"], gold=2)}
    from whitebox_eval.tasks.registry import RECORDS

    assert set(items) == {n for n, r in RECORDS.items() if r.lm_eval_output and r.mcq and r.is_file}
    for name, item in items.items():
        assert le.doc(RECORDS[name], item).output == RECORDS[name].lm_eval_output, name
