"""Head ablation against random heads of the same layers (000 sec. 6, fig. 4).

The key heads are the top ``k`` by QK-score accuracy on the validation items (degenerate
heads excluded); accuracy is measured on the test items with them zeroed, and with
``draws`` sets of ``k`` random heads zeroed instead.

Random-head control (the paper does not define it): the ``"same-layers"`` rule of
:mod:`whitebox_eval.controls`, i.e. per key head one random non-key head of the same
layer (the nearest layer only when that layer has none left), so a draw has the key
heads' count and layer profile. Key vs random is compared on the same test items: an
exact McNemar test per draw, and a paired bootstrap of the key heads' per-item
correctness against the per-item mean over draws; the draws are reported one by one,
and ``control`` (:func:`whitebox_eval.controls.control_record`) names the rule and
lists every drawn head.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

import numpy as np

from whitebox_eval import controls, stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mcqa import head_scores as hs

RULE = "same-layers"
KEY_PASS, RANDOM_PASS = "ablate_top", "ablate_random"


def _predict(letter_logits: np.ndarray, seed: int) -> np.ndarray:
    return hs.option_predictions(np.nan_to_num(letter_logits, nan=-np.inf), seed)


def per_item(folder: str | Path, samples: Sequence[Mapping], seed: int, draws: int) -> tuple[list[str], np.ndarray, list[np.ndarray]]:
    """A finished run's ablation item by item, read back from its passes' parts (no model is run):
    the test items' ids, 0/1 with the key heads zeroed, and 0/1 with each random draw zeroed,
    exactly as :func:`ablation_study` scored them (the same predictions, the same tie-breaks)."""
    from whitebox_eval.runs.folder import RunFolder
    from whitebox_eval.runs.passes import read_pass

    run = RunFolder.open(folder)
    test = [s for s in samples if s.get("split") == "test"]  # the split's test items, ascending
    gold = np.array([int(s["gold"]) for s in test])

    def correct(name: str) -> np.ndarray:
        try:
            logits = read_pass(run, name, len(test))["letter_logits"]
        except (KeyError, ValueError, WhiteboxError) as e:
            raise WhiteboxError(f"{run.path}: the ablation pass {name} cannot be read back ({e})") from e
        return (_predict(logits, seed) == gold).astype(np.int64)

    return ([str(s["id"]) for s in test], correct(KEY_PASS),
            [correct(f"{RANDOM_PASS}{d}") for d in range(draws)])


def ablation_study(study, main: dict[str, np.ndarray], gold: np.ndarray, degenerate: np.ndarray,
                   headline: MutableMapping, results: MutableMapping) -> dict:
    """Zero the top-k validation QK heads vs k random same-layer heads, on the test items.

    Writes ``acc,ablation_key_heads`` (Wilson) and ``acc,ablation_random_heads`` (the
    mean over draws, percentile bootstrap over items) to ``headline`` and the paired
    tests to ``results["paired_tests"]``; returns the ``results["ablation"]`` block.
    """
    cfg, split = study.cfg, study.split
    test, val = split.test, split.val
    predict = lambda x: _predict(x, cfg.seed)  # noqa: E731
    scores = np.where(np.isnan(main["qk"]), -np.inf, main["qk"])
    val_counts = (hs.option_predictions(scores, cfg.seed)[val] == gold[val][:, None, None]).sum(axis=0)
    key = hs.rank_heads(val_counts, exclude=degenerate)[: cfg.ablation_k]
    n_layers, n_heads = val_counts.shape
    drawn = controls.random_heads(key, (n_layers, n_heads), cfg.ablation_draws, cfg.seed, RULE,
                                  fix="use a smaller --ablation-k")
    g = gold[test]
    unablated = (predict(main["letter_logits"])[test] == g).astype(np.int64)
    key_correct = (predict(study.ablation_pass(KEY_PASS, key)) == g).astype(np.int64)
    draws, rand_correct = [], []
    for d, heads in enumerate(drawn):
        c = (predict(study.ablation_pass(f"{RANDOM_PASS}{d}", heads)) == g).astype(np.int64)
        rand_correct.append(c)
        est = stats.proportion(c)
        draws.append({"heads": [list(h) for h in heads], "accuracy": est.value, "accuracy_ci": [est.lo, est.hi]})
    out: dict = {"k": len(key), "key_heads": [list(h) for h in key], "key_heads_selected_on": "validation (QK accuracy)",
                 "reported_on": "test", "random_rule": controls.RULES[RULE], "random_draws": draws,
                 "control": controls.control_record(RULE, key, (n_layers, n_heads), cfg.seed, drawn)}
    stats.add_proportion(out, "acc,unablated", unablated)
    stats.add_proportion(headline, "acc,ablation_key_heads", key_correct)
    out["acc,key_heads"] = headline["acc,ablation_key_heads"]
    if rand_correct:
        per_item = np.mean(rand_correct, axis=0)
        stats.add_mean(headline, "acc,ablation_random_heads", per_item)
        out["random_accuracy"] = stats.draws([d["accuracy"] for d in draws]).as_dict()
        out["drop_key"] = float(unablated.mean() - key_correct.mean())
        out["drop_random_mean"] = float(unablated.mean() - per_item.mean())
        vs_mean, vs_each = stats.against_draws(key_correct, rand_correct)
        stats.add_paired(results, "ablation_key_vs_random", vs_mean)
        for d, test in enumerate(vs_each):
            stats.add_paired(results, f"ablation_key_vs_random_draw{d}", test)
    stats.add_paired(results, "ablation_key_vs_unablated", stats.mcnemar(key_correct, unablated))
    return out
