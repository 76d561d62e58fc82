"""004's answer classes (formats/answers.py): right, wrong, or off-format (no answer at all), on
generations as SmolLM2-135M and Gemma-3-270M wrote them in the committed cpu run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from whitebox_eval.formats.answers import answer_class, answered_p_correct, classes_of, off_format
from whitebox_eval.formats.config import FormatsConfig
from whitebox_eval.runs import RunFolder

ALIASES = ["David Moyes", "Moyes"]


@pytest.mark.parametrize("text, cls", [
    (" 236544", "right"),            # the gold number first
    (" 236544 is the product", "right"),
    (" 219082", "wrong"),            # a number, not the gold: an answer, wrong
    (" -37", "wrong"),
    (" Styloseness", "off_format"),  # words, no number (SmolLM2, free format)
    (" Cancellation: (self Binding: division using LINQ)", "off_format"),
    (" ", "off_format"),             # whitespace only (Gemma) and empty (SmolLM2, free with options)
    ("", "off_format"),
])
def test_arithmetic_classes_by_the_first_number(text, cls):
    assert answer_class(text, 236544, "number") == cls


def test_arithmetic_off_format_follows_the_runs_extraction_rule():
    # "after-equals" reads the number after the last "=": none here is off-format under it, not under the paper's
    assert off_format(" 9 + 2", "number", "after-equals") is False  # no "=": the whole text, its first number
    assert answer_class(" 9 + 2 = 11", 11, "number", "after-equals") == "right"
    assert answer_class(" 9 + 2 = 11", 11, "number") == "wrong"  # the paper's first number, 9
    assert off_format(" = x", "number", "after-equals") and off_format(" = x", "number")


@pytest.mark.parametrize("text, cls", [
    (" David Moyes", "right"),
    (" moyes.", "right"),                   # normalised, truncated at "."
    (" Martin Luther King Jr.", "wrong"),    # a wrong name
    (" The museum is on which continent?", "wrong"),  # text that is no name is still text to score: wrong
    (" The", "off_format"),                 # an article alone: nothing left after the normalisation (SmolLM2)
    (" A", "off_format"),                   # Gemma, TriviaQA free format
    ("", "off_format"),
    (" ...", "off_format"),
    (" I don't know", "off_format"),        # a refusal
    (" I'm not sure. Maybe Moyes", "off_format"),  # truncated at ".": the refusal is the answer
    (" No ideas about football", "wrong"),  # a refusal's words must end a word: not "no idea"
])
def test_triviaqa_classes_after_normalisation(text, cls):
    assert answer_class(text, ALIASES, "text") == cls


def test_a_gold_answer_that_reads_like_a_refusal_is_right_first():
    assert answer_class(" I don't know", ["I Don't Know"], "text") == "right"  # a song title


def test_answered_p_correct_leaves_off_format_out_of_right_and_wrong():
    assert answered_p_correct(["right", "off_format", "wrong", "off_format"]) == 0.5
    assert answered_p_correct(["off_format"] * 3) is None  # no answer to score
    sample = {"answer": 5, "generations": {"free": [" 5", " 7", " x"]}}
    assert classes_of(sample, "free", "number") == ["right", "wrong", "off_format"]


def test_a_run_reports_the_off_format_share_and_keeps_classes(tmp_path):
    from whitebox_eval.formats import study as fs
    from whitebox_eval.formats.command import formats_summary

    c = FormatsConfig(model="tiny", task="arithmetic:add1", limit=4, shots=0, n_samples=4, n_bins=2)
    folder = RunFolder.create(tmp_path, {**c.to_dict(), "demo_ids": [], "selection": "test"}, run_id="o")
    gens = [[" 5", " 5", " x", " 7"], [" ", " ", " ", " "], [" 5", " 6", " 6", " 6"], [" 5", " 5", " 5", " 5"]]
    folder.append_samples([{"id": f"q{i}", "subject": "add1", "gold": 0, "answer": 5,
                            "mcq": {"p_renorm": 0.5, "p_raw": 0.4, "letter_mass": 0.8, "pred": 0, "top_is_letter": i != 1},
                            "p_correct": {"mcq": 0.5, "free": sum(t == " 5" for t in g) / 4, "free_options": 1.0},
                            "generations": {"free": g, "free_options": [" 5"] * 4}} for i, g in enumerate(gens)])
    res = fs.finalize_formats(folder, c, "number").load_results()
    # 5 of 16 free generations off-format, Wilson over generations; the all-off-format question has no answer
    assert res["off_format,free"] == pytest.approx(5 / 16) and res["off_format_ci_method,free"] == "wilson"
    assert res["n_unanswered,free"] == 1 and res["off_format,free_options"] == 0
    # among the answers: 2/3, 1/4 and 4/4 (the paper's fraction of all samples: 1/2, 0, 1/4, 1)
    assert res["p_correct_answered,free"] == pytest.approx((2 / 3 + 1 / 4 + 1) / 3)
    assert res["p_correct,free"] == pytest.approx((0.5 + 0 + 0.25 + 1) / 4)
    assert res["off_format,mcq"] == 0.25 and res["off_format_ci_method,mcq"] == "wilson"  # top token no letter
    assert "off-format generations (Wilson)" in "\n".join(formats_summary(res, folder.path))


def test_the_samples_keep_each_generations_class(tmp_path):
    # what run_formats writes per question: one class per generation, in order (read back from the file)
    from whitebox_eval.formats.study import run_formats

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from tiny_models import tiny_formats_llama

    c = FormatsConfig(model="tiny", task="arithmetic:add1", limit=2, shots=1, n_samples=2, max_new_tokens=3, n_bins=1)
    folder = run_formats(c, tmp_path, run_id="k", loaded=tiny_formats_llama(), show_progress=False)
    for line in (folder.path / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        for f in ("free", "free_options"):
            assert s["classes"][f] == classes_of(s, f, "number") and len(s["classes"][f]) == 2
            assert s["p_correct_answered"][f] == answered_p_correct(s["classes"][f])


def _answered_run(tmp_path, run_id="a"):
    """A finished arithmetic run of 6 questions: q1 never answers; among the answers free P(correct)
    rises with the MCQ's."""
    from whitebox_eval.formats import study as fs

    c = FormatsConfig(model="tiny", task="arithmetic:add1", limit=6, shots=0, n_samples=4, n_bins=2)
    folder = RunFolder.create(tmp_path, {**c.to_dict(), "demo_ids": [], "selection": "test"}, run_id=run_id)
    gens = [[" 5", " x", " 7", " 7"], [" ", "", " ", " "], [" 5", " 6", " x", " x"],
            [" 5", " 5", " x", " x"], [" 5", " 5", " 5", " 6"], [" 5", " 5", " 5", " 5"]]
    mcq = [0.2, 0.9, 0.4, 0.6, 0.7, 0.8]
    folder.append_samples([{"id": f"q{i}", "subject": "add1", "gold": 0, "answer": 5,
                            "mcq": {"p_renorm": m, "p_raw": m, "letter_mass": 1.0, "pred": 0, "top_is_letter": True},
                            "p_correct": {"mcq": m, "free": sum(t == " 5" for t in g) / 4, "free_options": 1.0},
                            "generations": {"free": g, "free_options": [" 5"] * 4}} for i, (g, m) in enumerate(zip(gens, mcq))])
    return fs.finalize_formats(folder, c, "number"), mcq


def test_the_per_question_analyses_leave_a_question_without_answer_out(tmp_path):
    import numpy as np

    folder, mcq = _answered_run(tmp_path)
    res = folder.load_results()
    answered = [1 / 3, 1 / 2, 1.0, 3 / 4, 1.0]  # q0, q2..q5 among their answers; q1 has none
    x = [mcq[i] for i in (0, 2, 3, 4, 5)]
    assert res["pearson_answered,mcq~free"] == pytest.approx(np.corrcoef(x, answered)[0, 1])
    part = res["mcq_by_free_answered"]
    assert part["n_unanswered"] == 1 and part["partitions"]["free>=0.5"]["n"] == 4
    assert part["partitions"]["free<0.5"]["mean"] == pytest.approx(0.2)
    # the paper's partition (of all samples) puts q1 (MCQ 0.9, no answer) below 0.5 with q0 and q2
    assert res["mcq_by_free"]["partitions"]["free<0.5"]["n"] == 3


def test_an_old_run_gains_the_keys_when_read_and_shows_its_classes(tmp_path):
    from whitebox_eval.formats.over_runs import compare_runs
    from whitebox_eval.formats.views import views
    from whitebox_eval.suites import read

    folder, _ = _answered_run(tmp_path)
    new = folder.load_results()
    path = folder.path / "results.json"  # as a run written before the class: no off-format keys, no classes
    old = {k: v for k, v in new.items() if "off_format" not in k and "answered" not in k and "unanswered" not in k}
    path.write_text(json.dumps(old))
    written = path.read_bytes()
    study = read(folder.path)
    for key in ("off_format,free", "off_format_ci,free", "p_correct_answered,free", "pearson_answered,mcq~free",
                "mcq_by_free_answered", "n_unanswered,free"):
        assert study.results[key] == new[key], key
    assert all(study.results[k] == v for k, v in old.items()) and path.read_bytes() == written
    row = compare_runs([folder.path])["runs"][0]
    assert row["off_format,free"] == pytest.approx(9 / 24) and row["off_format,free_options"] == 0
    items = views(folder.path, old, study.samples)["items"]
    assert items[1]["formats"]["classes"]["free"] == ["off_format"] * 4
    assert items[0]["formats"]["classes"]["free"] == ["right", "off_format", "wrong", "wrong"]
