"""Tiny randomly initialised models of every supported family (no downloads).

Sizes are chosen so that head_dim != hidden_size / n_heads wherever the family allows
it, and query heads outnumber key/value heads (GQA) wherever the family has them.
"""

from __future__ import annotations

import torch
import transformers as tf

from whitebox_eval.models.architectures import FAMILIES, Architecture
from whitebox_eval.models.loading import LoadedModel

VOCAB = 64


def _config(family: str, attn: str, vocab: int = VOCAB):
    common = dict(vocab_size=vocab, hidden_size=32, intermediate_size=40, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=12, max_position_embeddings=128,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation=attn)
    if family == "llama":
        return tf.LlamaConfig(**common)
    if family == "mistral":
        return tf.MistralConfig(**common, sliding_window=None)
    if family == "qwen2":
        return tf.Qwen2Config(**common)
    if family == "qwen3":
        return tf.Qwen3Config(**common)
    if family == "gemma2":
        return tf.Gemma2Config(**common, query_pre_attn_scalar=12, sliding_window=4,
                               attn_logit_softcapping=5.0, final_logit_softcapping=3.0)
    if family == "gemma3":
        return tf.Gemma3TextConfig(**common, query_pre_attn_scalar=12, sliding_window=4,
                                   layer_types=["sliding_attention", "sliding_attention", "full_attention"])
    if family == "olmo2":
        return tf.Olmo2Config(**common)
    if family == "phi3":
        c = dict(common)
        c.pop("head_dim")
        return tf.Phi3Config(**c)
    if family == "gpt2":
        return tf.GPT2Config(vocab_size=vocab, n_embd=32, n_layer=3, n_head=4, n_positions=128,
                             bos_token_id=1, eos_token_id=2, attn_implementation=attn)
    if family == "gpt_neox":  # Pythia: fused qkv interleaved per head, rotary on half of each head, parallel residual
        return tf.GPTNeoXConfig(vocab_size=vocab, hidden_size=32, intermediate_size=40, num_hidden_layers=3,
                                num_attention_heads=4, rotary_pct=0.5, max_position_embeddings=128,
                                use_parallel_residual=True, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                attn_implementation=attn)
    raise KeyError(f"{family}: add a tiny config for this family of FAMILIES here")


#: every family the engine supports: the tests cover each by construction (no second list)
FAMILY_NAMES = list(FAMILIES)


def default_attention(family: str) -> str:
    """gemma2 soft-caps attention logits, which SDPA cannot do; the rest use SDPA."""
    return "eager" if family == "gemma2" else "sdpa"


def tiny_model(family: str, attn: str | None = None, seed: int = 0, vocab: int = VOCAB):
    """A tiny causal LM of ``family`` with random weights (biases randomised too)."""
    torch.manual_seed(seed)
    cfg = _config(family, attn or default_attention(family), vocab)
    model = tf.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name:
                p.add_(0.1 * torch.randn_like(p))  # norms non-trivial, so a skipped norm shows
            elif name.endswith("bias"):
                p.normal_(0, 0.05)
            else:
                p.normal_(0, 0.25)
    return model


class _Tok:
    pad_token_id = 0


def byte_tokenizer(texts=None):
    """A deterministic byte-level BPE (specials <pad> <s> </s> <unk> = ids 0-3, as the tiny configs'
    pad/bos/eos), trained on ``texts`` (default: MCQ-like lines), for models saved as folders."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    letters = " ".join("ABCDEFGHIJ")  # " A" .. " J" become single tokens (the MCQ answer letters)
    texts = texts or [f"Question: which is {w}? A. {w} B. no C. yes D. maybe Answer: {letters}\n" for w in
                      ("red", "blue", "a cat", "the sum", "two", "France", "water")]
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tf.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                      unk_token="<unk>")


def tiny_folder(family: str, path, seed: int = 0):
    """A tiny random ``family`` model saved as a Hugging Face folder (safetensors) with a tokenizer
    written here: what ``--model FOLDER`` loads."""
    from pathlib import Path

    tok = byte_tokenizer()
    model = tiny_model(family, seed=seed, vocab=len(tok))
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return Path(path)


def tiny_loaded(family: str, attn: str | None = None, seed: int = 0) -> LoadedModel:
    model = tiny_model(family, attn, seed)
    return LoadedModel(model=model, tokenizer=_Tok(), arch=Architecture.of(model), spec=f"tiny-{family}", source="random")


def tiny_llama_with_bpe(texts, vocab_size: int) -> LoadedModel:
    """A tiny random llama (3 layers, 4 heads, GQA 2) with a byte-level BPE trained on ``texts``
    (deterministic), for studies that need a real tokenizer's merges."""
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from whitebox_eval.models.architectures import Architecture

    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<unk>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>")
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=12, attn_implementation="sdpa")
    model = tf.LlamaForCausalLM(cfg).eval()
    return LoadedModel(model, tok, Architecture.of(model), "tiny-llama", "random")


def tiny_formats_llama() -> LoadedModel:
    """A tiny random llama (2 layers) with a byte-level BPE trained on arithmetic questions in the
    formats study's three prompt formats (paper 004)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from whitebox_eval.models.architectures import Architecture
    from whitebox_eval.tasks.arithmetic import make_arithmetic_suite
    from whitebox_eval.tasks.prompts import render_prompt

    texts = [render_prompt(it, fmt=f).text + " A B C D " + it.gold_text + "\n"
             for it in make_arithmetic_suite(6, seed=3) for f in ("mcq_plain", "free", "free_options")]
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<unk>", "</s>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", eos_token="</s>")
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, attn_implementation="sdpa",
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = tf.LlamaForCausalLM(cfg).eval()
    return LoadedModel(model, tok, Architecture.of(model), "tiny-llama", "random")


def random_lora(base, out, *, targets=("q_proj", "v_proj"), r: int = 2, seed: int = 1):
    """A PEFT LoRA adapter on ``base``'s ``targets`` with random non-zero A and B (``0.3 * N(0, 1)``,
    seeded), saved by peft into ``out``: an adapter whose merge changes every targeted weight."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(targets), init_lora_weights=False)
    peft_model = get_peft_model(tf.AutoModelForCausalLM.from_pretrained(base), config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    peft_model.save_pretrained(out)
    return out
