"""Prompt templates against paper 000 App. A.3 and paper 004 App. A.2, literally."""

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.demos import select_demos, split_demo_pool
from whitebox_eval.tasks.prompts import LABEL_SETS, answer_strings, option_labels, render_prompt


def _from_listing(listing: str) -> str:
    """Paper notation -> text: '_' is a space, '\\n' a line break, real newlines are layout."""
    return "".join(line.strip() for line in listing.strip().splitlines()).replace("_", " ").replace("\\n", "\n")


# Paper 000, App. A.3, Listing 6 (MMLU prompt template), copied from the paper.
LISTING_6 = r"""
Question:_{Text of the question}?\n
Options:\n
A._{Text of the option A}_.\n
B._{Text of the option B}_.\n
C._{Text of the option C}_.\n
D._{Text of the option D}_.\n
E._I_don't_know_.\n
F._None_of_the_above_.\n
Answer:
"""

# Listing 7 (CosmosQA/HellaSwag/Halu Dialogue); the extraction's "_.." read as "_." (see prompts docstring).
LISTING_7 = r"""
Context:_{The context of the question/situation or the dialog history}\n
Question:_{Text of the question}?\n
Options:\n
A._{Text of the option A}_.\n
B._{Text of the option B}_.\n
C._{Text of the option C}_.\n
D._{Text of the option D}_.\n
E._I_don't_know_.\n
F._None_of_the_above_.\n
Answer:
"""

def test_mmlu_template_listing_6_literally():
    expected = _from_listing(LISTING_6.replace("{Text of the question}", "Q").replace(
        "{Text of the option ", "OPT").replace("}", ""))
    item = MCQItem(id="t", question="Q", options=["OPTA", "OPTB", "OPTC", "OPTD"], gold=0)
    assert render_prompt(item).text == expected
    assert expected.startswith("Question: Q?\nOptions:\nA. OPTA .\n")
    assert expected.endswith("E. I don't know .\nF. None of the above .\nAnswer:")


def test_context_template_listing_7_literally():
    expected = _from_listing(LISTING_7.replace("{The context of the question/situation or the dialog history}", "CTX")
                             .replace("{Text of the question}", "Q").replace("{Text of the option ", "OPT")
                             .replace("}", ""))
    item = MCQItem(id="t", question="Q", options=["OPTA", "OPTB", "OPTC", "OPTD"], gold=0, context="CTX")
    assert render_prompt(item).text == expected
    assert expected.startswith("Context: CTX\nQuestion: Q?\n")


# Listing 8: 1-shot MMLU prompt (the query's option D is garbled in the extraction and
# duplicates A there; a distinct text is used instead).
LISTING_8 = (
    "Question: A medication prescribed by a psychiatrist for major depressive disorder would most likely "
    "influence the balance of which of the following neurotransmitters?\n"
    "Options:\nA. serotonin .\nB. dopamine .\nC. acetylcholine .\nD. thorazine .\n"
    "E. I don't know .\nF. None of the above .\nAnswer: A\n"
    "Question: Meat should be kept frozen at what temperature in degrees Fahrenheit?\n"
    "Options:\nA. 0 degrees or below .\nB. between 10 and 20 degrees .\nC. between 20 and 30 degrees .\n"
    "D. between 30 and 40 degrees .\nE. I don't know .\nF. None of the above .\nAnswer:")

DEMO = MCQItem(id="d", question="A medication prescribed by a psychiatrist for major depressive disorder would most "
               "likely influence the balance of which of the following neurotransmitters?",
               options=["serotonin", "dopamine", "acetylcholine", "thorazine"], gold=0)
MEAT = MCQItem(id="m", question="Meat should be kept frozen at what temperature in degrees Fahrenheit?",
               options=["0 degrees or below", "between 10 and 20 degrees", "between 20 and 30 degrees",
                        "between 30 and 40 degrees"], gold=0)


def test_one_shot_listing_8_literally():
    r = render_prompt(MEAT, demos=[DEMO])
    assert r.text == LISTING_8
    assert "Answer: A\n" in r.text and "Answer:A" not in r.text
    assert not r.text.endswith((" ", "\n"))
    assert r.prefix == LISTING_8[: LISTING_8.index("Question: Meat")]


def test_option_already_ending_with_period_is_not_doubled():
    item = MCQItem(id="h", question="Which of the following is the best ending to the given context?",
                   options=["walks away from the camera as he pushes the mower.", "is unrelieved.",
                            "They are moving to a new house .", "no period"], gold=1)
    text = render_prompt(item).text
    assert "A. walks away from the camera as he pushes the mower.\n" in text
    assert "C. They are moving to a new house .\n" in text
    assert "D. no period .\n" in text


# Paper 004, App. A.2 (1-shot examples; the extraction's blank lines and stray 'Answer:' dropped).
ARITH_DEMO = MCQItem(id="a", question="What is the value of 75 + 22?", options=["130", "97", "10", "144"], gold=1)
ARITH_Q = MCQItem(id="b", question="What is the value of 227 + 243?", options=["920", "470", "810", "313"], gold=1)


def test_004_mcq_format_literally():
    expected = ("Question: What is the value of 75 + 22?\nA. 130\nB. 97\nC. 10\nD. 144\nAnswer: B\n"
                "Question: What is the value of 227 + 243?\nA. 920\nB. 470\nC. 810\nD. 313\nAnswer:")
    assert render_prompt(ARITH_Q, fmt="mcq_plain", demos=[ARITH_DEMO]).text == expected


def test_004_free_generation_literally():
    expected = ("Question: What is the value of 75 + 22?\nAnswer: 97\n"
                "Question: What is the value of 227 + 243?\nAnswer:")
    r = render_prompt(ARITH_Q, fmt="free", demos=[ARITH_DEMO])
    assert r.text == expected and r.options == [] and r.gold_answer == " 470"


def test_004_free_generation_with_options_literally():
    expected = ("Question: What is the value of 75 + 22?\nHere are some possible answers:\n130\n97\n10\n144\n"
                "Answer: 97\nQuestion: What is the value of 227 + 243?\nHere are some possible answers:\n"
                "920\n470\n810\n313\nAnswer:")
    r = render_prompt(ARITH_Q, fmt="free_options", demos=[ARITH_DEMO])
    assert r.text == expected
    assert [o.content.of(r.text) for o in r.options] == ["920", "470", "810", "313"]
    assert all(o.label is None for o in r.options)


@pytest.mark.parametrize("fmt", ["mcq", "mcq_plain", "free_options"])
@pytest.mark.parametrize("labels", sorted(LABEL_SETS))
def test_spans_point_at_the_right_characters(fmt, labels):
    item = MCQItem(id="s", question="Pick one", options=["alpha beta", "gamma.", "delta ?", "x"], gold=2,
                   context="Some context\nwith a line break.")
    r = render_prompt(item, fmt=fmt, labels=labels, demos=[DEMO], uncertainty=(fmt != "mcq_plain"))
    t = r.text
    expected_contents = ["alpha beta", "gamma", "delta ?", "x", "I don't know", "None of the above"]
    if fmt != "mcq":
        expected_contents[1] = "gamma."
    n = 6 if fmt != "mcq_plain" else 4
    assert len(r.options) == n
    for i, o in enumerate(r.options):
        assert o.content.of(t) == expected_contents[i]
        assert o.eol.of(t) == "\n"
        assert o.is_uncertainty == (i >= 4)
        if fmt == "free_options":
            continue
        assert o.label.of(t) == r.labels[i] == LABEL_SETS[labels][i]
        assert o.label_sep.of(t) == "."
        assert o.label_sep.start == o.label.end
        # the option line is label, '.', ' ', content, [terminator], '\n'
        line_start = t.rfind("\n", 0, o.label.start) + 1
        assert line_start == o.label.start
        if fmt == "mcq":
            assert o.content_end.of(t) == "."
            assert o.eol.start == o.content_end.end
        else:
            assert o.content_end is None and o.eol.start == o.content.end
    assert r.question.of(t).startswith("Pick one")
    assert r.context.of(t) == "Some context\nwith a line break."
    assert r.answer_cue.of(t) == "Answer:" and r.answer_cue.end == len(t)
    assert r.prefix_len > 0 and t[r.prefix_len:].startswith("Context: Some context")


def test_uncertainty_options_take_next_labels_and_are_never_gold():
    ten = MCQItem(id="ten", question="q?", options=[f"w{i}" for i in range(10)], gold=9)
    r = render_prompt(ten)
    assert r.labels[10:] == ["K", "L"]  # App. H, Listing 10
    assert "K. I don't know .\nL. None of the above .\nAnswer:" in r.text
    assert r.gold == 9 and r.gold < r.n_essential and r.gold_answer == " J"


def test_uncertainty_options_never_shuffled():
    item = MCQItem(id="p", question="q?", options=["a", "b", "c", "d"], gold=1)
    for order in ([3, 2, 1, 0], [1, 2, 3, 0], [2, 0, 3, 1]):
        r = render_prompt(item.permuted(order))
        assert r.text.endswith("E. I don't know .\nF. None of the above .\nAnswer:")
        assert r.options[r.gold].content.of(r.text) == "b"


def test_uncertainty_switch():
    item = MCQItem(id="p", question="q?", options=["a", "b"], gold=0)
    off = render_prompt(item, uncertainty=False)
    assert off.text == "Question: q?\nOptions:\nA. a .\nB. b .\nAnswer:"
    assert off.labels == ["A", "B"]
    with pytest.raises(WhiteboxError, match="uncertainty"):
        render_prompt(item, fmt="free", uncertainty=True)


def test_label_sets_and_answer_strings():
    assert option_labels(4, "symbols")[:3] == ["$", "&", "#"]
    assert option_labels(4, "arbitrary") == ["p", "t", "g", "U"]
    assert option_labels(3, "digits") == ["1", "2", "3"]
    assert answer_strings(["A", "B"]) == [" A", " B"]
    for name, labs in LABEL_SETS.items():
        assert len(set(labs)) == len(labs) == 26, name
        assert all("." not in x and "\n" not in x for x in labs)
    r = render_prompt(MCQItem(id="s", question="q?", options=["x", "y"], gold=1), labels="arbitrary")
    assert "p. x .\nt. y .\ng. I don't know .\nU. None of the above .\n" in r.text
    assert r.answer_strings == [" p", " t", " g", " U"] and r.gold_answer == " t"
    with pytest.raises(WhiteboxError, match="labels"):
        option_labels(27, "letters")
    with pytest.raises(WhiteboxError, match="label set"):
        option_labels(2, "greek")


def test_k_shot_sets_are_nested_and_seeded():
    pool = [MCQItem(id=f"d{i}", question=f"q{i}?", options=["a", "b"], gold=i % 2) for i in range(15)]
    prev_prefix = ""
    for k in range(6):
        demos = select_demos(pool, k, seed=3)
        assert demos == select_demos(pool, k, seed=3)
        if k:
            assert demos[:-1] == select_demos(pool, k - 1, seed=3)
        r = render_prompt(MEAT, demos=demos)
        assert r.prefix.startswith(prev_prefix)
        assert r.prefix.count("Answer: ") == k
        prev_prefix = r.prefix
    assert [d.id for d in select_demos(pool, 5, seed=1)] != [d.id for d in select_demos(pool, 5, seed=2)]
    with pytest.raises(WhiteboxError):
        select_demos(pool, 16)


def test_prefix_is_shared_across_items():
    demos = [DEMO]
    a = render_prompt(MEAT, demos=demos, instruction="Answer the questions.")
    b = render_prompt(ARITH_Q, demos=demos, instruction="Answer the questions.")
    assert a.prefix == b.prefix and a.prefix.startswith("Answer the questions.\nQuestion: A medication")
    assert a.text[: a.prefix_len] == a.prefix


def test_split_demo_pool_takes_first_fifteen():
    items = [MCQItem(id=str(i), question="q?", options=["a", "b"], gold=0) for i in range(20)]
    pool, rest = split_demo_pool(items)
    assert [x.id for x in pool] == [str(i) for i in range(15)] and len(rest) == 5


def test_question_mark_and_line_breaks():
    item = MCQItem(id="n", question="The capital of France is", options=["Paris\nFrance", "Lyon"], gold=0)
    t = render_prompt(item).text
    assert t.startswith("Question: The capital of France is?\n")
    assert "A. Paris France .\n" in t
    assert render_prompt(item, ensure_question_mark=False).text.startswith("Question: The capital of France is\n")


def test_unknown_format_and_invalid_item_raise():
    with pytest.raises(WhiteboxError, match="format"):
        render_prompt(MEAT, fmt="chat")
    with pytest.raises(WhiteboxError, match="out of range"):
        render_prompt(MCQItem(id="x", question="q?", options=["a", "b"], gold=5))
