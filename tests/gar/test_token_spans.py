"""Character spans → token spans with real fast tokenizers trained here (no downloads)."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.generator import generate_task_examples
from whitebox_eval.gar.roles import answer_token_ids, token_spans
from whitebox_eval.gar.tasks import enumerate_tasks, kr_tasks


@pytest.fixture(scope="module")
def sample_examples():
    exs = [generate_task_examples(t, seed=7)[1] for t in enumerate_tasks()]
    return exs + [generate_task_examples(t, seed=7)[0] for t in kr_tasks()]


@pytest.fixture(scope="module")
def byte_bpe(sample_examples):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=6000, special_tokens=["<s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    answers = [e.prompt + " " + a for e in sample_examples for a in e.alternatives]
    tok.train_from_iterator([e.prompt for e in sample_examples] + answers, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>")


@pytest.fixture(scope="module")
def wordpiece(sample_examples):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=800, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator([e.prompt for e in sample_examples], trainer)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]")


def _check(example, tokenizer, demo=False):
    enc = tokenizer(example.prompt, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    chars = (example.demo_spans if demo else example.spans).as_dict()
    toks = token_spans(example, tokenizer, demo=demo).as_dict()
    assert set(chars) == set(toks)
    for name, (s, e) in toks.items():
        cs, ce = chars[name]
        assert e > s
        covered = {c for a, b in offsets[s:e] for c in range(a, b)}
        assert all(c in covered for c in range(cs, ce) if not example.prompt[c].isspace()), name
        for i in range(s, e):  # every token in the range overlaps the span
            a, b = offsets[i]
            assert a < ce and b > cs, name
        for i in (s - 1, e):  # neighbours do not
            if 0 <= i < len(offsets) and name != "END":
                a, b = offsets[i]
                assert not (b > a and a < ce and b > cs and
                            any(not example.prompt[c].isspace() for c in range(max(a, cs), min(b, ce)))), name
    return toks, enc


def test_byte_level_bpe_token_spans(sample_examples, byte_bpe):
    for ex in sample_examples:
        toks, enc = _check(ex, byte_bpe)
        ids = enc["input_ids"]
        assert toks["END"] == (len(ids) - 1, len(ids))
        assert ids[0] == byte_bpe.bos_token_id
        for name in ("Q", "K", "V"):
            if name in toks:
                s, e = toks[name]
                cs, ce = ex.spans.as_dict()[name]
                assert byte_bpe.decode(ids[s:e]).strip() == ex.prompt[cs:ce]
        _check(ex, byte_bpe, demo=True)


def test_wordpiece_token_spans(sample_examples, wordpiece):
    for ex in sample_examples[::3]:
        toks, enc = _check(ex, wordpiece)
        assert toks["END"] == (len(enc["input_ids"]) - 2, len(enc["input_ids"]) - 1)  # [SEP]


def test_answer_first_tokens(sample_examples, byte_bpe):
    for ex in sample_examples[::5]:
        first = answer_token_ids(ex, byte_bpe)
        assert set(first) == set(ex.alternatives)
        for alt, tid in first.items():
            piece = byte_bpe.decode([tid]).strip()
            assert piece and alt.startswith(piece)


class _SlowTokenizer:
    is_fast = False


class _GappyTokenizer:
    """A 'fast' tokenizer whose offsets cover only the first character."""

    is_fast = True

    def __call__(self, text, **kwargs):
        return {"input_ids": [0], "offset_mapping": [(0, 1)]}


class _SpaceTokenizer:
    """Splits off the space before the answer as a token of its own."""

    is_fast = True

    def __init__(self, n):
        self.n = n

    def __call__(self, text, **kwargs):
        offsets = [(0, self.n), (self.n, self.n + 1), (self.n + 1, len(text))]
        return {"input_ids": [0, 1, 2], "offset_mapping": offsets}


def test_answer_token_ids_rejects_lone_space(sample_examples):
    ex = sample_examples[0]
    with pytest.raises(WhiteboxError, match="space"):
        answer_token_ids(ex, _SpaceTokenizer(len(ex.prompt)))


def test_unmappable_spans_raise(sample_examples):
    ex = sample_examples[0]
    with pytest.raises(WhiteboxError, match="fast"):
        token_spans(ex, _SlowTokenizer())
    with pytest.raises(WhiteboxError, match="maps to no token"):
        token_spans(ex, _GappyTokenizer())
