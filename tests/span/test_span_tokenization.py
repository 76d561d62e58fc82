"""Character-level tokenization (App. D): one token per character, masks in token space."""

from __future__ import annotations

import numpy as np
import pytest

from whitebox_eval.span.tasks import generate
from whitebox_eval.span.examples import string_reversal_example, successor_example
from whitebox_eval.span.tokenization import character_token_ids, tokenize_example
from whitebox_eval.errors import WhiteboxError

TOKENIZERS = ["char_tokenizer", "byte_bpe_tokenizer", "metaspace_tokenizer"]


def test_hand_worked_layout_with_instruction(char_tokenizer):
    e = string_reversal_example("ab")  # "ab=" -> "ba"
    tok = tokenize_example(e, char_tokenizer, instruction="x")
    v = char_tokenizer.get_vocab()
    # [BOS, x, a, b, =, b, a]
    assert tok.input_ids.tolist() == [v["<s>"], v["x"], v["a"], v["b"], v["="], v["b"], v["a"]]
    assert tok.context_start == 2 and tok.prompt_length == 5
    assert tok.input_positions.tolist() == [2, 3, 4]
    assert tok.target_positions.tolist() == [5, 6]
    assert tok.prediction_positions.tolist() == [4, 5]
    expected = np.zeros((2, 7), dtype=bool)
    expected[0, 3] = True  # first output 'b' reads input 'b' (token 3)
    expected[1, 2] = True  # second output 'a' reads input 'a' (token 2)
    assert (tok.reference_mask == expected).all()
    assert tok.valid.tolist() == [True, True]


@pytest.mark.parametrize("name", TOKENIZERS)
def test_each_character_is_one_token_and_masks_line_up(name, request):
    tokenizer = request.getfixturevalue(name)
    examples = (generate("successor", 5, "ood", seed=1)
                + generate("long_addition", 5, "id", seed=1)
                + generate("long_multiplication", 3, "id", seed=1)
                + generate("flip_flop", 3, "id", seed=1))
    for e in examples:
        tok = tokenize_example(e, tokenizer, instruction="the fox")
        n = len(e.text)
        assert tok.seq_len == tok.context_start + n
        # independent check: each character's token, converted back, is that character
        pieces = tokenizer.convert_ids_to_tokens(tok.input_ids[tok.context_start:].tolist())
        for c, piece in zip(e.text, pieces):
            assert piece in {c, "Ġ", "\u2581"} and (piece == c or c == " ")
        assert np.array_equal(tok.input_positions,
                              np.arange(tok.context_start, tok.context_start + len(e.input)))
        assert np.array_equal(tok.target_positions,
                              np.arange(tok.context_start + len(e.input), tok.seq_len))
        for t, ref in enumerate(e.reference):
            cols = set(np.nonzero(tok.reference_mask[t])[0].tolist())
            if ref is None:
                assert not cols and not tok.valid[t]
            else:
                assert cols == {tok.context_start + i for i in ref} and tok.valid[t]
                assert max(cols) <= tok.prediction_positions[t]  # causal


def test_space_maps_to_the_tokenizers_own_space_token(byte_bpe_tokenizer, metaspace_tokenizer,
                                                      char_tokenizer):
    assert character_token_ids(byte_bpe_tokenizer, " ")[" "] == \
        byte_bpe_tokenizer.get_vocab()["Ġ"]
    assert character_token_ids(metaspace_tokenizer, " ")[" "] == \
        metaspace_tokenizer.get_vocab()["\u2581"]
    assert character_token_ids(char_tokenizer, " ")[" "] == char_tokenizer.get_vocab()[" "]
    # the byte-level char ids decode back to the exact text
    e = successor_example(98, 4)
    tok = tokenize_example(e, byte_bpe_tokenizer, add_bos=False)
    assert byte_bpe_tokenizer.decode(tok.input_ids.tolist()) == e.text


def test_metaspace_lookup_is_not_the_lone_encoding(metaspace_tokenizer):
    # encoding "1" alone gives "▁1" (prefix space); mid-text the model sees "1"
    lone = metaspace_tokenizer.convert_ids_to_tokens(
        metaspace_tokenizer("1", add_special_tokens=False)["input_ids"])
    assert lone[0] != "1"
    assert character_token_ids(metaspace_tokenizer, "1")["1"] == \
        metaspace_tokenizer.get_vocab()["1"]


@pytest.mark.parametrize("name, char", [("char_tokenizer", "%"),
                                        ("byte_bpe_tokenizer", "\u20ac")])
def test_missing_character_names_it(name, char, request):
    tokenizer = request.getfixturevalue(name)
    with pytest.raises(WhiteboxError, match=repr(char)):
        tokenize_example(string_reversal_example("a" + char), tokenizer)


def test_few_shot_is_character_level_and_instruction_normal(byte_bpe_tokenizer):
    tk = byte_bpe_tokenizer
    demo = string_reversal_example("12")  # "12=21"
    e = string_reversal_example("13")
    tok = tokenize_example(e, tk, instruction="the quick fox", few_shot=[demo, "99=99"],
                           few_shot_header="the dog", few_shot_footer="over")
    instr = tk("the quick fox", add_special_tokens=False)["input_ids"]
    header = tk("the dog", add_special_tokens=False)["input_ids"]
    footer = tk("over", add_special_tokens=False)["input_ids"]
    assert len(instr) < len("the quick fox")  # merged normally, not per character
    ids = tok.input_ids.tolist()
    assert ids[0] == tk.bos_token_id
    assert ids[1:1 + len(instr)] == instr
    start_demo = 1 + len(instr) + len(header)
    demo_tokens = tk.convert_ids_to_tokens(ids[start_demo:start_demo + 12])
    assert demo_tokens == list("12=21") + ["Ċ"] + list("99=99") + ["Ċ"]
    assert ids[start_demo + 12:start_demo + 12 + len(footer)] == footer
    assert tok.context_start == start_demo + 12 + len(footer)
    assert tok.reference_mask[0, tok.context_start + 1]  # '3' first in the output


def test_eos_row_has_no_reference(char_tokenizer):
    e = string_reversal_example("ab")
    tok = tokenize_example(e, char_tokenizer, append_eos=True, add_bos=False)
    assert tok.input_ids[-1] == char_tokenizer.eos_token_id
    assert tok.target_positions.tolist() == [3, 4, 5]
    assert tok.valid.tolist() == [True, True, False]
    assert not tok.reference_mask[2].any()
    assert tok.reference_mask.shape == (3, 6)
