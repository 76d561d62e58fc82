"""The Simple Synthetic Dataset (SSD) of paper 000 sec. 5.1, App. A.2 (Listing 5), H and K.

Each item asks ``Which of the following options corresponds to " <word> "?`` (Listing 5
wording); the options are that word and ``n_options - 1`` other random words in random
order. The main version has 4 options and 2,500 items; App. H varies the number of
essential options (up to 24) and the label symbols; App. K regenerates it in Italian,
French and Russian. Label set and uncertainty options are chosen when rendering
(``render_prompt(item, labels="symbols", uncertainty=False)``), not stored in items.

Choices where the paper is silent (all parameters): words come from the bundled lists
``data/words_<lang>.txt`` (about 340 common words each); the question is translated for
non-English languages (``translate_question``; the paper does not show its wording);
gold positions are balanced in consecutive blocks of ``n_options`` items (each block a
seeded permutation of the positions, so any prefix has each position gold
``n_items / n_options`` times, up to one). Items are one seeded sequence: ``make_ssd(100)``
is the first 100 items of ``make_ssd(500)`` (same ids, same content), so a larger run
contains a smaller one.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.prompts import LABEL_SETS

#: Question wording per language; English is the paper's Listing 5 literally.
SSD_QUESTIONS: dict[str, str] = {
    "en": 'Which of the following options corresponds to " {word} "?',
    "fr": 'Laquelle des options suivantes correspond à " {word} "?',
    "it": 'Quale delle seguenti opzioni corrisponde a " {word} "?',
    "ru": 'Какой из следующих вариантов соответствует " {word} "?',
}

SSD_LANGUAGES: tuple[str, ...] = tuple(SSD_QUESTIONS)

#: Number of essential options the paper uses (sec. 5.1 and App. H, fig. 5b / 24).
MIN_OPTIONS, MAX_OPTIONS = 2, 24


@dataclass(frozen=True)
class SSDVariant:
    """One SSD setting of App. H/K: option count, label set, uncertainty, language."""

    n_options: int = 4
    labels: str = "letters"
    uncertainty: bool = True
    language: str = "en"


def load_words(language: str) -> list[str]:
    """The bundled word list for ``language`` (one word a line, in file order)."""
    if language not in SSD_QUESTIONS:
        raise WhiteboxError(f"no SSD word list for language {language!r}; choose one of {list(SSD_LANGUAGES)}")
    text = resources.files("whitebox_eval.tasks").joinpath("data", f"words_{language}.txt").read_text("utf-8")
    return [w.strip() for w in text.splitlines() if w.strip()]


def make_ssd(n_items: int = 2500, n_options: int = 4, *, language: str = "en", seed: int = 0,
             words: Sequence[str] | None = None, translate_question: bool = True) -> list[MCQItem]:
    """Generate the Simple Synthetic Dataset (paper 000 sec. 5.1, App. H, K).

    Args:
        n_items: number of questions (the paper's main version has 2,500).
        n_options: essential options per question, 2..24 (App. H).
        language: one of SSD_LANGUAGES (App. K: en, it, fr, ru).
        seed: same seed, same items.
        words: a custom vocabulary instead of the bundled list (must be distinct).
        translate_question: use the language's question wording; False keeps English.
    """
    if not MIN_OPTIONS <= n_options <= MAX_OPTIONS:
        raise WhiteboxError(f"SSD n_options must be in {MIN_OPTIONS}..{MAX_OPTIONS} (App. H), got {n_options}")
    if n_items < 0:
        raise WhiteboxError(f"n_items must be >= 0, got {n_items}")
    vocab = list(words) if words is not None else load_words(language)
    if language not in SSD_QUESTIONS:
        raise WhiteboxError(f"unknown SSD language {language!r}; choose one of {list(SSD_LANGUAGES)}")
    if len({w.casefold() for w in vocab}) != len(vocab) or any(not w.strip() for w in vocab):
        raise WhiteboxError("SSD words must be non-empty and distinct (ignoring case)")
    if len(vocab) < n_options:
        raise WhiteboxError(f"{n_options} options need at least {n_options} words; the list has {len(vocab)}")
    template = SSD_QUESTIONS[language if translate_question else "en"]
    rng = random.Random(f"ssd/{language}/{n_options}/{seed}")
    items = []
    block: list[int] = []
    for i in range(n_items):
        if not block:  # the next n_options items take every gold position once, in a seeded order
            block = list(range(n_options))
            rng.shuffle(block)
        gold = block.pop()
        chosen = rng.sample(vocab, n_options)
        target = chosen[0]
        distractors = chosen[1:]
        rng.shuffle(distractors)
        options = distractors[:gold] + [target] + distractors[gold:]
        item = MCQItem(id=f"ssd-{language}-{n_options}-{i}", question=template.format(word=target),
                       options=options, gold=gold, subject=f"ssd_{language}",
                       meta={"word": target, "language": language, "n_options": n_options})
        items.append(item.validate())
    return items


def appendix_h_variants(language: str = "en") -> list[SSDVariant]:
    """The SSD grid of App. H: 2..24 options with letters and uncertainty options, and
    4 options under every label set with and without uncertainty options (fig. 25-26)."""
    out = [SSDVariant(n, "letters", True, language) for n in range(MIN_OPTIONS, MAX_OPTIONS + 1)]
    for labels in LABEL_SETS:
        for unc in (True, False):
            v = SSDVariant(4, labels, unc, language)
            if v not in out:
                out.append(v)
    return out


def ssd_items(spec, n: int, *, seed: int = 0, n_options: int = 4, language: str = "en") -> list[MCQItem]:
    """``--task ssd``: the first ``n`` items (a stable prefix), the record's loader."""
    return make_ssd(n, n_options, language=language, seed=seed)
