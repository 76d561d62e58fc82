"""``--apply-chat-template``: a rendered prompt as the one user message of the chat template.

What lm-eval 0.4.13 does for a ``multiple_choice`` task with ``--apply_chat_template``
(``api/task.py`` ``fewshot_context``, ``build_qa_turn``, ``construct_requests``;
``api/utils.py`` ``multiturn_to_singleturn``; ``models/huggingface.py``), and we do the same:

- the demonstrations and the question are collapsed into one user message (lm-eval's
  default, without ``--fewshot_as_multiturn``), no system message is added (the template
  may add its own default), and the text is
  ``tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
  tokenize=False, add_generation_prompt=True)``;
- the answer follows the generation prompt *without* the target delimiter: ``"A"``, not
  ``" A"`` (``construct_requests`` sets it to ``""`` when the task has no ``gen_prefix``),
  and the cloze options likewise (``"Paris"``, not ``" Paris"``);
- special tokens: the templated text is tokenized without adding special tokens when it
  already starts with the BOS token (``tok_encode``: ``has_bos_prefix``), otherwise as the
  tokenizer does by default, so BOS is never doubled.

One difference: lm-eval moves the context's trailing whitespace (the ``"\\n"`` that ends
most generation prompts) into the continuation (``_encode_pair``), so its per-option
log-likelihood also contains log P("\\n" | context), the same term for every option. Our
letter logits are read after the whole generation prompt, so the argmax is the same; in
the cloze pass we score the moved whitespace as lm-eval does.

The option spans of :class:`~whitebox_eval.tasks.prompts.RenderedPrompt` are shifted by
the offset of the user content inside the templated text, so
:func:`whitebox_eval.tasks.prompt_tokens.tokenize_prompt` finds every option's representative
token, the answer cue and the last position inside the template.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.prompts import OptionSpans, RenderedPrompt, Span

RULE = ("prompt (demonstrations + question, ending 'Answer:') = the one user message of the tokenizer's chat template, "
        "add_generation_prompt=True, no system message added; answers follow the generation prompt without the ' ' "
        "delimiter ('A', cloze: the option text); no special tokens added when the templated text starts with BOS "
        "(lm-eval 0.4.13 --apply_chat_template, few-shot collapsed into one turn)")


class ChatTemplate:
    """The tokenizer's chat template around MCQA prompts (see the module docstring)."""

    def __init__(self, tokenizer):
        if not getattr(tokenizer, "chat_template", None):
            raise WhiteboxError("--apply-chat-template: this model's tokenizer has no chat template "
                                "(tokenizer.chat_template is empty); drop the option to score the plain prompt")
        self.tokenizer = tokenizer
        self.bos = getattr(tokenizer, "bos_token", None)

    @property
    def sha256(self) -> str:
        """Digest of the template text (recorded in results.json)."""
        return hashlib.sha256(str(self.tokenizer.chat_template).encode()).hexdigest()

    def wrap(self, content: str) -> tuple[str, int]:
        """``(templated text, offset of content in it)``."""
        text = self.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                  add_generation_prompt=True)
        offset = text.find(content)
        if offset < 0:
            raise WhiteboxError("--apply-chat-template: the chat template changes the prompt text (it does not contain "
                                "the user message verbatim), so option positions cannot be found; drop the option")
        return text, offset

    def add_special_tokens(self, text: str) -> bool:
        """lm-eval's rule: no special tokens added to a text that already starts with BOS."""
        return not (self.bos and text.startswith(self.bos))

    def apply(self, r: RenderedPrompt) -> RenderedPrompt:
        """``r`` inside the template: text templated, every span shifted, answers without the delimiter."""
        text, off = self.wrap(r.text)
        move = lambda s: None if s is None else Span(s.start + off, s.end + off)  # noqa: E731
        options = [OptionSpans(o.index, move(o.label), move(o.label_sep), move(o.content), move(o.content_end),
                               move(o.eol), o.is_uncertainty) for o in r.options]
        return dataclasses.replace(r, text=text, prefix_len=r.prefix_len + off, options=options,
                                   answer_strings=[a.removeprefix(" ") for a in r.answer_strings],
                                   question=move(r.question), context=move(r.context), answer_cue=move(r.answer_cue))

    def cloze(self, context: str, options: Sequence[str]) -> tuple[str, list[str]]:
        """``(context, continuations)`` of a cloze item as lm-eval scores them under the
        template: the templated context's trailing whitespace moves to every continuation,
        which is the option without the delimiter. The template is applied once per item."""
        text, _ = self.wrap(context)
        core = text.rstrip()
        return core, [text[len(core):] + o for o in options]
