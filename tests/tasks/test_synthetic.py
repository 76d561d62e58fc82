"""Simple Synthetic Dataset (paper 000 sec. 5.1, App. A.2 Listing 5, H, K)."""

from collections import Counter

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.prompts import render_prompt
from whitebox_eval.tasks.ssd import SSD_LANGUAGES, appendix_h_variants, load_words, make_ssd


def test_question_wording_is_listing_5():
    item = make_ssd(1, seed=0, words=["optimal", "ion", "coins", "jackie"])[0]
    assert sorted(item.options) == ["coins", "ion", "jackie", "optimal"]
    assert item.question == f'Which of the following options corresponds to " {item.meta["word"]} "?'
    text = render_prompt(item).text
    assert text.startswith(f'Question: Which of the following options corresponds to " {item.meta["word"]} "?\n'
                           "Options:\nA. ")
    assert text.endswith("E. I don't know .\nF. None of the above .\nAnswer:")


def test_same_seed_same_data_other_seed_other_data():
    a = make_ssd(200, 4, seed=7)
    assert a == make_ssd(200, 4, seed=7)
    assert [x.question for x in a] != [x.question for x in make_ssd(200, 4, seed=8)]


@pytest.mark.parametrize("n_options", [2, 4, 24])
def test_a_smaller_set_is_a_prefix_of_a_larger_one(n_options):
    """Regression: ids and contents changed with the item count (--limit)."""
    small, large = make_ssd(100, n_options, seed=3), make_ssd(500, n_options, seed=3)
    assert small == large[:100]
    for n in (1, 7, 101):  # any prefix stays balanced up to one
        counts = Counter(x.gold for x in make_ssd(n, n_options, seed=3))
        assert max(counts.values()) - min(counts.get(g, 0) for g in range(n_options)) <= 1


@pytest.mark.parametrize("n_options", [2, 4, 10, 24])
def test_gold_is_the_asked_word_and_positions_balanced(n_options):
    items = make_ssd(240, n_options, seed=1)
    counts = Counter(x.gold for x in items)
    assert set(counts) == set(range(n_options))
    assert max(counts.values()) - min(counts.values()) <= 1
    for x in items:
        assert x.options[x.gold] == x.meta["word"]
        assert f'" {x.options[x.gold]} "' in x.question
        assert len(set(x.options)) == len(x.options) == n_options
        assert x.options.count(x.meta["word"]) == 1


def test_main_version_size_and_24_options_render_with_uncertainty():
    assert len(make_ssd()) == 2500
    item = make_ssd(1, 24, seed=0)[0]
    r = render_prompt(item)
    assert r.labels[-2:] == ["Y", "Z"] and len(r.options) == 26


@pytest.mark.parametrize("labels", ["letters", "symbols", "arbitrary", "digits"])
@pytest.mark.parametrize("uncertainty", [True, False])
def test_label_set_variants_render(labels, uncertainty):
    item = make_ssd(1, 4, seed=2)[0]
    r = render_prompt(item, labels=labels, uncertainty=uncertainty)
    assert len(r.options) == (6 if uncertainty else 4)
    assert r.options[r.gold].content.of(r.text) == item.meta["word"]


def test_option_count_out_of_range_raises():
    with pytest.raises(WhiteboxError, match="2..24"):
        make_ssd(5, 25)
    with pytest.raises(WhiteboxError, match="2..24"):
        make_ssd(5, 1)


@pytest.mark.parametrize("language", SSD_LANGUAGES)
def test_word_lists_are_large_distinct_single_words(language):
    words = load_words(language)
    assert len(words) >= 300
    assert len({w.casefold() for w in words}) == len(words)
    assert all(w == w.strip() and " " not in w and w.isprintable() for w in words)


def test_languages_have_their_own_words_and_questions():
    ru = make_ssd(20, 4, language="ru", seed=0)
    assert all(any("\u0400" <= ch <= "\u04ff" for ch in x.meta["word"]) for x in ru)
    assert ru[0].question.startswith("Какой из следующих вариантов")
    fr = make_ssd(3, 4, language="fr", seed=0, translate_question=False)
    assert fr[0].question.startswith("Which of the following options corresponds to")
    assert set(SSD_LANGUAGES) >= {"en", "fr", "it", "ru"}
    with pytest.raises(WhiteboxError, match="language"):
        make_ssd(3, language="xx")


def test_appendix_h_variants_cover_option_counts_and_symbol_sets():
    v = appendix_h_variants()
    assert {x.n_options for x in v} == set(range(2, 25))
    four = {(x.labels, x.uncertainty) for x in v if x.n_options == 4}
    assert {("symbols", True), ("symbols", False), ("arbitrary", False), ("letters", False)} <= four
