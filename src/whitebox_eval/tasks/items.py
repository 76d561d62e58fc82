"""The multiple-choice item record shared by every MCQA data source.

An item holds only the *essential* options (paper 000 sec. 5.1: the uncertainty
options "I don't know" / "None of the above" are added by the prompt renderer, never
stored here, so they can never be gold). The same record serves the three formats of
paper 004 App. A.2: MCQ, free generation (gold answer plus ``aliases``) and free
generation with answer options.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from whitebox_eval.errors import WhiteboxError


@dataclass
class MCQItem:
    """One multiple-choice question.

    Attributes:
        id: stable identifier (unique within a dataset).
        question: the question text.
        options: essential option contents, in display order.
        gold: index of the correct option in ``options``.
        context: passage / dialogue history shown before the question, if any.
        subject: category (MMLU subject, arithmetic category, SSD language, ...).
        aliases: further strings accepted as the gold answer in free generation
            (paper 004 sec. 2.3, TriviaQA aliases); the gold option itself is implied.
        meta: anything else the source carried (kept for the run folder).
    """

    id: str
    question: str
    options: list[str]
    gold: int
    context: str | None = None
    subject: str | None = None
    aliases: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> MCQItem:
        """Raise WhiteboxError naming the problem if the item is malformed; return self.

        Checks: question is non-empty text, at least 2 options, every option non-empty
        (after stripping whitespace), gold is an integer index into ``options``. Options
        may repeat (lm-eval scores such rows: a tie goes to the first copy, so a gold on a
        later copy can never be predicted); :attr:`repeated_options` tells them apart.
        """
        where = f"item {self.id!r}"
        if not isinstance(self.question, str) or not self.question.strip():
            raise WhiteboxError(f"{where}: the question is empty; give every item question text")
        if not isinstance(self.options, list | tuple) or len(self.options) < 2:
            n = len(self.options) if isinstance(self.options, list | tuple) else 0
            raise WhiteboxError(f"{where}: has {n} option(s); a multiple-choice item needs at least 2")
        for i, opt in enumerate(self.options):
            if not isinstance(opt, str) or not opt.strip():
                raise WhiteboxError(f"{where}: option {i} is empty; every option needs text")
        if isinstance(self.gold, bool) or not isinstance(self.gold, int):
            raise WhiteboxError(f"{where}: gold must be an integer option index, got {self.gold!r}")
        if not 0 <= self.gold < len(self.options):
            raise WhiteboxError(
                f"{where}: gold index {self.gold} is out of range for {len(self.options)} options "
                f"(valid: 0..{len(self.options) - 1})")
        return self

    @property
    def repeated_options(self) -> bool:
        """Whether two options have the same text (compared without surrounding whitespace)."""
        keys = [o.strip() for o in self.options]
        return len(set(keys)) < len(keys)

    @property
    def gold_text(self) -> str:
        """The content of the correct option."""
        return self.options[self.gold]

    def accepted_answers(self) -> list[str]:
        """Gold option content followed by its aliases, without repeats (paper 004 sec. 2.4)."""
        out: list[str] = []
        for a in [self.options[self.gold], *self.aliases]:
            if a not in out:
                out.append(a)
        return out

    def permuted(self, order: Sequence[int]) -> MCQItem:
        """A copy whose option ``j`` is this item's option ``order[j]``; gold follows its text.

        Used for Permutation Accuracy (paper 000 sec. 5.3) and cyclic permutations (eq. 5).
        """
        if sorted(order) != list(range(len(self.options))):
            raise WhiteboxError(
                f"item {self.id!r}: {list(order)} is not a permutation of 0..{len(self.options) - 1}")
        meta = dict(self.meta)
        if "file_options" in meta:  # the options as the file wrote them (whitespace kept) move with them
            meta["file_options"] = [meta["file_options"][i] for i in order]
        return replace(self, options=[self.options[i] for i in order],
                       gold=list(order).index(self.gold), aliases=list(self.aliases), meta=meta)
