"""Small offline tokenizers for the AttentionSpan tests (no downloads)."""

from __future__ import annotations

import string

import pytest
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

CHARS = string.ascii_letters + string.digits + " =+*\n.,:"
CORPUS = ["the quick brown fox jumps over the lazy dog 12 13 14 = + * 99 100"] * 40


@pytest.fixture(scope="session")
def char_tokenizer() -> PreTrainedTokenizerFast:
    """WordLevel tokenizer with one token per character (and nothing longer)."""
    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2}
    for c in CHARS:
        vocab[c] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("(?m)."), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


@pytest.fixture(scope="session")
def byte_bpe_tokenizer() -> PreTrainedTokenizerFast:
    """GPT-2 style byte-level BPE trained on a toy corpus (space is 'Ġ')."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


@pytest.fixture(scope="session")
def metaspace_tokenizer() -> PreTrainedTokenizerFast:
    """SentencePiece-style BPE with a Metaspace pre-tokenizer (space is '▁')."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<s>", "</s>", "<unk>"],
                                  initial_alphabet=list(string.ascii_letters + string.digits
                                                        + "=+*"))
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
