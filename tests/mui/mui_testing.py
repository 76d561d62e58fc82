"""Helpers for the MUI suite tests: a character tokenizer and tiny random models that use it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from tiny_models import VOCAB, tiny_loaded  # noqa: E402

ALPHABET = "0123456789 +-*=?.:\nABCDEQuestinwhaVlfTcrbmk\"ogdpys,'()"
"""Characters 3.. of the tiny vocabulary (0 pad, 1 bos, 2 eos); unknown characters map to '?'."""
assert len(ALPHABET) + 3 <= VOCAB


class CharTokenizer:
    """One token per character; enough of the Hugging Face tokenizer API for the MUI suite."""

    pad_token_id = 0
    bos_token_id = None
    bos_token = None
    eos_token_id = 2
    eos_token = "<eos>"
    chat_template = None

    def __init__(self, chat: bool = False):
        if chat:
            self.chat_template = "user/assistant"

    def encode(self, text: str) -> list[int]:
        return [3 + ALPHABET.index(c) if c in ALPHABET else 3 + ALPHABET.index("?") for c in text]

    def __call__(self, text: str, add_special_tokens: bool = True):
        return {"input_ids": self.encode(text)}

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Special ids (pad, bos, eos) never have text here, skipped or not."""
        return "".join(ALPHABET[i - 3] for i in ids if 3 <= int(i) < 3 + len(ALPHABET))

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True) -> str:
        return "".join(f"U: {m['content']}\n" for m in messages) + "A:"


def tiny_lm(family: str = "llama", seed: int = 0, chat: bool = False):
    """A tiny random model of ``family`` with the character tokenizer."""
    lm = tiny_loaded(family, seed=seed)
    lm.tokenizer = CharTokenizer(chat)
    lm.model.generation_config.eos_token_id = 2
    lm.model.generation_config.pad_token_id = 0
    return lm


def save_tiny_sae(lm, folder):
    """A random TopK SAE (64 features, k=4) on the residual leaving block 1 of ``lm``, saved in
    SAELens' layout under ``folder``; returns the SAE."""
    import torch

    from whitebox_eval.sae.encoding import SAE
    from whitebox_eval.sae.files import save_sae

    d, f = lm.arch.d_model, 64
    g = torch.Generator().manual_seed(0)
    sae = SAE(torch.randn(d, f, generator=g) * 0.1, torch.zeros(f), torch.randn(f, d, generator=g) * 0.1,
              torch.zeros(d), activation="topk", k=4)
    sae.metadata.update({"hook_name": "blocks.1.hook_resid_post", "hook_layer": 1})
    save_sae(sae, folder)
    return sae
