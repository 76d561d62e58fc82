"""How an MCQA study writes its prompts: the letter prompt of an item, its tokens, and its cloze requests.

One :class:`PromptWriter` (the config, the tokenizer, the demonstrations and the chat template)
serves the study's passes and, before the run folder, the ``--edit`` coverage count, so both see
the same prompts.
"""

from __future__ import annotations

from typing import Sequence

from whitebox_eval.mcqa.chat import ChatTemplate
from whitebox_eval.mcqa.config import MCQAConfig
from whitebox_eval.mcqa.scoring import Request
from whitebox_eval.tasks import lm_eval
from whitebox_eval.tasks.demos import Demonstrations
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.prompt_tokens import TokenizedPrompt, tokenize_prompt
from whitebox_eval.tasks.prompts import RenderedPrompt, render_prompt


class PromptWriter:
    """Writes one study's prompts: ``--prompt``'s style, its demonstrations, ``--apply-chat-template``."""

    def __init__(self, cfg: MCQAConfig, tokenizer, demos: Demonstrations):
        self.cfg, self.tokenizer, self.demos = cfg, tokenizer, demos
        self.chat = ChatTemplate(tokenizer) if cfg.apply_chat_template else None

    def lm_eval_docs(self, item: MCQItem) -> tuple[lm_eval.LmEvalDoc, list[lm_eval.LmEvalDoc]]:
        """The item and its demonstrations as lm-eval's task sees them (``--prompt lm-eval``;
        ``--task lm-eval:TASK`` items carry their own, drawn by lm-eval's sampler)."""
        record = self.cfg.spec.record
        if "lm_eval_demos" in item.meta:
            return lm_eval.doc(record, item), list(item.meta["lm_eval_demos"])
        return lm_eval.doc(record, item), [lm_eval.doc(record, d) for d in self.demos.for_item(item)]

    def render(self, item: MCQItem) -> RenderedPrompt:
        """The item's letter prompt (options listed, ``Answer:``), templated under ``--apply-chat-template``."""
        if self.cfg.prompt == lm_eval.LM_EVAL:
            r = lm_eval.render_letters(*self.lm_eval_docs(item), item.id)
        else:
            r = render_prompt(item, demos=self.demos.for_item(item), labels=self.cfg.labels, uncertainty=self.cfg.uncertainty)
        return self.chat.apply(r) if self.chat else r

    def special_tokens(self, text: str) -> bool:
        """Whether tokenizing ``text`` adds special tokens: not to a chat-templated text that
        already starts with BOS (:mod:`whitebox_eval.mcqa.chat`)."""
        return self.chat.add_special_tokens(text) if self.chat else True

    def token_ids(self, text: str) -> list[int]:
        """``text``'s ids, special tokens as :meth:`special_tokens` says."""
        return list(self.tokenizer(text, add_special_tokens=self.special_tokens(text))["input_ids"])

    def tokenize(self, r: RenderedPrompt) -> TokenizedPrompt:
        return tokenize_prompt(self.tokenizer, r, self.cfg.representative, self.special_tokens(r.text))

    def lengths(self, items: Sequence[MCQItem]) -> list[int]:
        """Each item's letter prompt length in tokens, as the main pass writes it."""
        return [len(self.tokenize(self.render(it)).input_ids) for it in items]

    def cloze_request(self, item: MCQItem) -> tuple[list[tuple[str, str]], list[str]]:
        """((context, continuation) per choice, choices) of the cloze: lm-eval's requests for
        ``--task lm-eval:TASK`` (partial-evaluation tasks such as winogrande have one context per
        choice), lm-eval's text with ``--prompt lm-eval``; otherwise ``[context\\n]Question:
        ..\\nAnswer:`` and ``" " + option``, after the demonstrations written the same way with
        their gold text and a blank line. ``choices`` are what acc_norm divides by. Under
        ``--apply-chat-template`` the context is templated and the continuations are the
        choices without the delimiter, after the template's trailing whitespace (:mod:`.chat`)."""
        if "lm_eval_requests" in item.meta:
            return [(c, x) for c, x in item.meta["lm_eval_requests"]], list(item.meta["lm_eval_choices"])
        if self.cfg.prompt == lm_eval.LM_EVAL:
            query, docs = self.lm_eval_docs(item)
            context, choices = lm_eval.context(query, docs), list(query.choices)
        else:  # demonstrations as lm-eval lays them out: "...Answer: <gold text>\n\n" before the query
            cue = lambda it: (f"{it.context}\n" if it.context else "") + f"Question: {it.question}\nAnswer:"  # noqa: E731
            shots = "".join(cue(d) + lm_eval.TARGET_DELIMITER + d.gold_text + lm_eval.FEWSHOT_DELIMITER
                            for d in self.demos.for_item(item))
            context, choices = shots + cue(item), list(item.options)
        if self.chat:
            context, continuations = self.chat.cloze(context, choices)
        else:
            continuations = [lm_eval.TARGET_DELIMITER + c for c in choices]
        return [(context, c) for c in continuations], choices

    def cloze_tokens(self, item: MCQItem) -> tuple[list[Request], list[tuple[str, str]], list[str]]:
        """The item's cloze requests as token ids (lm-eval's ``_encode_pair``; a context is
        tokenized once for its continuations), as text, and its choices."""
        pairs, choices = self.cloze_request(item)
        reqs: list[Request] = []
        for context, group in _by_context(pairs):
            c_ids, x_ids = lm_eval.encode_request(self.token_ids, context, group)
            reqs += [(c_ids, x) for x in x_ids]
        return reqs, pairs, choices


def _by_context(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Consecutive requests that share a context, as (context, continuations)."""
    out: list[tuple[str, list[str]]] = []
    for context, continuation in pairs:
        if out and out[-1][0] == context:
            out[-1][1].append(continuation)
        else:
            out.append((context, [continuation]))
    return out
