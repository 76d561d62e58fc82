"""Small offline tokenizers for the AttentionSpan tests (no downloads)."""

from __future__ import annotations

import copy
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


@pytest.fixture(scope="session")
def tiny_span_lm(char_tokenizer):
    """A tiny random llama whose vocabulary fits ``char_tokenizer`` (one token per char)."""
    return make_tiny_span_lm(char_tokenizer)


def make_tiny_span_lm(tokenizer, seed: int = 0, attn: str = "sdpa"):
    import torch
    import transformers as tf

    from whitebox_eval.models.architectures import Architecture
    from whitebox_eval.models.loading import LoadedModel

    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=48,
                         num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8, max_position_embeddings=256, pad_token_id=0,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         attn_implementation=attn, tie_word_embeddings=True)
    model = tf.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.normal_(0, 0.3)
    tokenizer = copy.deepcopy(tokenizer)  # the session fixture stays untouched
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LoadedModel(model=model, tokenizer=tokenizer, arch=Architecture.of(model),
                       spec="tiny-span-llama", source="random")


@pytest.fixture
def make_span_lm(char_tokenizer):
    """Factory of fresh tiny models (for tests that train or need eager attention)."""
    return lambda seed=0, attn="sdpa": make_tiny_span_lm(char_tokenizer, seed=seed, attn=attn)


@pytest.fixture(autouse=True)
def _finetune_cache(tmp_path_factory, monkeypatch, request):
    """Fine-tuned weights of tiny models go to a temporary cache root, not the user's
    (tests marked slow or integration keep the real cache: the bundled GGUF model lives there)."""
    if request.node.get_closest_marker("slow") or request.node.get_closest_marker("integration"):
        return
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path_factory.mktemp("cache")))
