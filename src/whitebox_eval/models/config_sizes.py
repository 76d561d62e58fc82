"""A model's sizes from its config.json alone, before any weights load: what a command
checks its input against (``--edit`` heads and neurons in range, ``--batch-size auto``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigSizes:
    n_layers: int
    n_heads: int
    d_model: int
    d_ff: int
    vocab: int
    tied: bool


def sizes_of_config(config) -> ConfigSizes:
    """The sizes a transformers config declares (a multimodal config's text part; GPT-2's
    ``n_*`` names; ``d_ff`` 4 d_model where none is given)."""
    text = getattr(config, "text_config", None) or config
    d = int(getattr(text, "hidden_size", 0) or getattr(text, "n_embd", 0) or 0)
    return ConfigSizes(
        n_layers=int(getattr(text, "num_hidden_layers", 0) or getattr(text, "n_layer", 0) or 0),
        n_heads=int(getattr(text, "num_attention_heads", 0) or getattr(text, "n_head", 0) or 0),
        d_model=d,
        d_ff=int(getattr(text, "intermediate_size", 0) or getattr(text, "n_inner", 0) or 4 * d),
        vocab=int(getattr(text, "vocab_size", 0) or 0),
        tied=bool(getattr(text, "tie_word_embeddings", getattr(config, "tie_word_embeddings", True))),
    )


def config_sizes(spec: str) -> ConfigSizes:
    """:func:`sizes_of_config` of the model ``spec`` names (its config.json only)."""
    from transformers import AutoConfig

    from whitebox_eval.models.loading import resolve_source

    source, _ = resolve_source(spec)
    return sizes_of_config(AutoConfig.from_pretrained(source))
