"""From rendered prompts to token positions and answer-token ids.

The option-representative token of 000 fig. 2a / sec. 6 is addressed by a character
span in :class:`~whitebox_eval.tasks.prompts.RenderedPrompt`; here it becomes the index
of the token that contains that character (:mod:`whitebox_eval.tasks.token_spans`).
Answer tokens are taken from the context they appear in (``prompt + " A"``), since
``" A"`` after ``Answer:`` and ``A`` at the start of an option line tokenize differently.
"""

from __future__ import annotations

from dataclasses import dataclass

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.prompts import RenderedPrompt
from whitebox_eval.tasks.token_spans import char_offsets, span_tokens

REPRESENTATIVES = ("label", "label_sep", "content_end", "eol", "content_mean")
"""Option-representative token variants (000 fig. 2a): the label (``A``), the period
after it, the period after the content, the end of line (default, sec. 6), and the
mean over the option's content tokens (keys averaged for the QK-score, attention
weights averaged for the Attention-score)."""


@dataclass
class TokenizedPrompt:
    input_ids: list[int]
    option_positions: list[int]
    """One representative token per option (the first content token for ``content_mean``)."""
    answer_ids: list[int]
    prefix_tokens: int
    """Number of leading tokens that belong to the shared prefix (demonstrations)."""
    option_tokens: list[list[int]] | None = None
    """All tokens that represent each option (``content_mean``); None = option_positions."""
    label_positions: list[int] | None = None
    """Each option's label token (``A``), whatever the representative; a format without labels
    (``free_options``): the option's first content token. What ``--save-activations ...:options`` keeps."""

    def representative_tokens(self) -> list[list[int]]:
        return self.option_tokens or [[p] for p in self.option_positions]


def _token_at(offsets: list[tuple[int, int]], char: int, what: str, item_id: str) -> int:
    holding = span_tokens(offsets, char, char + 1)
    if holding:
        return holding[0]
    raise WhiteboxError(f"item {item_id}: no token covers the {what} (character {char}); the tokenizer dropped it")


def tokenize_prompt(tokenizer, rendered: RenderedPrompt, representative: str = "eol",
                    add_special_tokens: bool = True) -> TokenizedPrompt:
    """Token ids of the prompt, the representative token of every option, and answer ids.

    ``add_special_tokens=False`` for a chat-templated text that already holds its special
    tokens (:mod:`whitebox_eval.mcqa.chat`)."""
    if representative not in REPRESENTATIVES:
        raise WhiteboxError(f"unknown option-representative token {representative!r}; choose one of {', '.join(REPRESENTATIVES)}")
    ids, offsets = char_offsets(tokenizer, rendered.text, add_special_tokens=add_special_tokens)
    positions, groups, labels = [], [], []
    for opt in rendered.options:
        at = opt.label.start if opt.label is not None else opt.content.start
        labels.append(_token_at(offsets, at, f"label of option {opt.index}", rendered.item_id))
        if representative == "content_mean":
            toks = sorted({_token_at(offsets, c, f"content of option {opt.index}", rendered.item_id)
                           for c in range(opt.content.start, opt.content.end)})
            groups.append(toks)
            positions.append(toks[0])
            continue
        span = getattr(opt, representative)
        if span is None:
            raise WhiteboxError(f"the {representative!r} token does not exist in format {rendered.fmt!r}; use --representative eol")
        char = span.start if representative != "content_end" else span.end - 1
        positions.append(_token_at(offsets, char, f"{representative} of option {opt.index}", rendered.item_id))
    prefix_tokens = sum(1 for s, e in offsets if e <= rendered.prefix_len and e > 0)
    answers = answer_token_ids(tokenizer, rendered.text, rendered.answer_strings, ids, add_special_tokens)
    return TokenizedPrompt(ids, positions, answers, prefix_tokens, groups or None, labels)


def answer_token_ids(tokenizer, prompt: str, answers: list[str], prompt_ids: list[int] | None = None,
                     add_special_tokens: bool = True) -> list[int]:
    """The single token each answer string adds after ``prompt`` (raises if not one token)."""
    special = {"add_special_tokens": add_special_tokens}
    base = prompt_ids if prompt_ids is not None else tokenizer(prompt, **special)["input_ids"]
    out = []
    for a in answers:
        full = tokenizer(prompt + a, **special)["input_ids"]
        extra = full[len(base):]
        if full[: len(base)] != base or len(extra) != 1:
            pieces = tokenizer.convert_ids_to_tokens(extra) if extra else []
            raise WhiteboxError(
                f"the answer {a!r} is not a single token after the prompt (it becomes {pieces}); "
                "choose a label set whose labels are single tokens for this tokenizer (e.g. --labels letters)"
            )
        out.append(extra[0])
    if len(set(out)) != len(out):
        raise WhiteboxError(f"two answers share a token id ({answers}); choose distinct labels")
    return out
