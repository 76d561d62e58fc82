"""The three splits: canonical forms, deduplication, no item in two splits, the demonstration
pool out of training; and the sources a fine-tuning reads (span's and GAR's tasks encoded as
their suites lay them out)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import transformers as tf

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.finetune.sources import encode, is_correct, load_items, parse_source
from whitebox_eval.finetune.splits import canonical, make_splits, split_hash


def test_canonical_sorts_the_operands_of_plus_and_times_only():
    assert canonical("What is 75 + 22?") == canonical("what is  22+75?") == "what is 22 + 75?"
    assert canonical("3 x 14") == canonical("14 * 3") == canonical("14 × 3") == "3 x 14"
    assert canonical("9 - 4") != canonical("4 - 9")  # not commutative: kept as written
    assert canonical("100 + 9 = 109") == "9 + 100 = 109"  # numeric order, not text order


@dataclass
class It:
    id: str
    form: str


def test_splits_are_disjoint_deduplicated_and_keep_the_demonstrations_out():
    items = [It(f"q{i}", canonical(f"{i % 30} + {7 + i % 30}")) for i in range(40)]  # 30 distinct
    items += [It("swapped", canonical("7 + 0"))]  # the same sum as q0, operands swapped
    s = make_splits(items, validation=0.1, test=0.2, shots=3, seed=0)
    assert s.duplicates == 11
    parts = [s.train, s.validation, s.test, s.demos]
    forms = [f for p in parts for f in (it.form for it in p)]
    assert len(forms) == len(set(forms)) == 30  # every distinct item once, in one split
    assert (len(s.demos), len(s.test), len(s.validation)) == (3, 5, 3)
    again = make_splits(items, validation=0.1, test=0.2, shots=3, seed=0)
    assert [it.id for it in again.test] == [it.id for it in s.test]
    other = make_splits(items, validation=0.1, test=0.2, shots=3, seed=1)
    assert split_hash(other.forms["test"]) != split_hash(s.forms["test"])
    rec = s.record(0)
    assert rec["test"]["sha256"] == split_hash(s.forms["test"]) and rec["demos"]["n"] == 3


def test_too_few_items_is_one_line():
    with pytest.raises(WhiteboxError, match="too few"):
        make_splits([It("a", "a"), It("b", "b")], validation=0.1, test=0.2, shots=0, seed=0)


@pytest.fixture(scope="module")
def tok(tiny_smol_folder):
    return tf.AutoTokenizer.from_pretrained(tiny_smol_folder)


def test_span_items_are_laid_out_as_span_lays_them_out(tok):
    from whitebox_eval.span.config import INSTRUCTIONS
    from whitebox_eval.span.tokenization import tokenize_example

    source = parse_source("span:string_reversal")
    items, _ = load_items(source, 6, seed=0)
    prompt, answer = encode(source, items[0], tok, [], tok.eos_token_id)
    t = tokenize_example(items[0].source, tok, instruction=INSTRUCTIONS["string_reversal"], append_eos=True)
    assert prompt + answer == t.input_ids.tolist() and answer[-1] == tok.eos_token_id
    assert len(answer) == len(items[0].source.target) + 1  # one token per character, then the end
    assert is_correct(source, items[0], "", answer, answer, None)
    assert not is_correct(source, items[0], "", answer[1:], answer, None)


def test_gar_items_train_the_target_after_a_space(tok):
    source = parse_source("gar:GendersOfPersons/same,CountriesOfCities/same×3")
    items, _ = load_items(source, 8, seed=0)  # 8 training lines from the train half, 2 test ones from the test half
    assert len(items) == 10 and all(it.answer == " " + it.source.target for it in items)
    prompt, answer = encode(source, items[0], tok, [], tok.eos_token_id)
    assert tok.decode(answer) == items[0].answer + tok.decode([tok.eos_token_id])


@pytest.mark.parametrize("text,match", [("span:nothing", "span's tasks are"), ("text=/no/such.txt", "no text file"),
                                        ("gar:Nope/same×3", "unknown GAR schema")])
def test_bad_sources_are_one_line(text, match):
    with pytest.raises(WhiteboxError, match=match):
        parse_source(text)
