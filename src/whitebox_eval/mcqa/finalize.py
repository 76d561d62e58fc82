"""An MCQA study's results (paper 000): every method's accuracy with its interval, the
paired tests against the baseline on the same items, the head tables and plots, and the
per-item fields added to samples.jsonl once every pass is done."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from whitebox_eval import stats
from whitebox_eval.mcqa import head_scores as hs
from whitebox_eval.mcqa import plots
from whitebox_eval.mcqa.debiasing import pride_by_option_count
from whitebox_eval.mcqa.metrics import by_option_count, chance_accuracy, per_layer_accuracy, selection_bias
from whitebox_eval.tasks import lm_eval
from whitebox_eval.runs import RunFolder
from whitebox_eval.runs.lm_eval_format import add_lm_eval_fields, hash_string, item_accuracy, log_arguments

from whitebox_eval.mcqa.config import HEAD_METHODS
from whitebox_eval.mcqa.explorer import ROWS_RULE

SPLIT_RULE = ("heads (best QK / Attention head, HeadScore head, ablation's key heads), degenerate-head marks and "
              "PriDe's prior are chosen on the validation items; every reported number is on the disjoint test items")


class ClozeScores(NamedTuple):
    """The cloze pass's per-option log-likelihoods (summed; per character) and lm-eval's
    predictions from them (first choice on ties)."""

    loglik: np.ndarray
    loglik_norm: np.ndarray
    pred: np.ndarray
    pred_norm: np.ndarray


def _correct(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    return (np.asarray(pred) == np.asarray(gold)).astype(np.int64)


@dataclass
class _Tally:
    """What the parts of :func:`finalize` add to: results.json's fields, the headline, each
    method's 0/1 per test item (the paired tests), the prediction distributions (plot) and the
    per-option-count accuracies of a mixed file."""

    results: dict
    headline: dict = field(default_factory=dict)
    correct: dict[str, np.ndarray] = field(default_factory=dict)
    dists: dict = field(default_factory=dict)
    by_count: dict = field(default_factory=dict)  # method -> (item indices, 0/1 per index)
    item_fields: dict = field(default_factory=dict)  # item index -> further per-item fields of samples.jsonl


def finalize(study) -> RunFolder:
    """Run the remaining passes, select heads, write results.json, arrays and plots.

    Every headline accuracy gets a Wilson interval and its n (:mod:`whitebox_eval.stats`);
    each method is compared with the baseline on the same test items by an exact McNemar
    test (``results["paired_tests"]``). The parts, in order: the baseline, the heads, the
    explorer's rows, the logit lens, PA, PriDe, the paired tests, the ablation, the cloze pass,
    the per-count table, and what is written.
    """
    cfg, folder, items = study.cfg, study.folder, study.items
    writer = study.world.main  # every rank runs the passes; rank 0 alone writes what follows from them
    main = study.main_pass() if study.letters else {}
    saved = study.saver.merge() if study.saver is not None and writer else None  # --save-activations' files
    gold = np.array([it.gold for it in items])
    counts = np.array([len(it.options) for it in items])  # essential options per item (files may mix counts)
    t = _Tally(_facts(study, counts))
    if saved is not None:
        t.results["activations"] = saved
    base_pred, base_all = _baseline(study, main, gold, counts, t) if study.letters else (None, None)
    for key, arr in main.items() if writer else ():
        folder.save_array(key, arr)
    selected, tables, score_heads = _heads(study, main, gold, t)
    # the report's per-item views: right after the heads are chosen, while the main pass's prefixes are cached
    explorer = _explorer(study, selected, tables, score_heads) if tables and cfg.item_views else None
    if "lens" in main:  # nothing is chosen: every evaluated item
        _lens(study, main, gold, t)
    if "pa" in cfg.methods:
        _pa(study, base_all, selected, t)
    pride_pred = _pride(study, main, gold, counts, t) if "pride" in cfg.methods else None
    for name in ("qk_head", "attention_head", "head_score_head", "pride"):
        if name in t.correct:
            stats.add_paired(t.results, f"{name}_vs_baseline", stats.mcnemar(t.correct[name], t.correct["baseline"]))
    if "ablation" in cfg.methods and "qk" in selected:
        from whitebox_eval.mcqa.ablation import ablation_study

        t.results["ablation"] = ablation_study(study, main, gold, selected["qk"].degenerate, t.headline, t.results)
    cloze = _cloze(study, gold, base_all, t) if "cloze" in cfg.methods else None
    if len(set(counts.tolist())) > 1:  # chance and accuracy per number of options (selecting methods: their test items)
        t.by_count.update({f"acc,{name}": (study.split.test, c) for name, c in t.correct.items() if name != "baseline"})
        t.results["by_option_count"] = by_option_count(counts, t.by_count)
    if writer:
        _write(study, main, selected, pride_pred, cloze, base_pred, explorer, t)
    return folder


def _facts(study, counts: np.ndarray) -> dict:
    """results.json's description of the items, the split and the rules."""
    cfg, items, split = study.cfg, study.items, study.split
    test, selecting = split.test, len(split.val) > 0  # a head or prior is chosen: those report on the test items
    n_unc = study.n_max - study.n_essential
    mixed = len(set(counts.tolist())) > 1
    return {
        "n_items": len(items), "n_total": study.n_total, "n_evaluated": len(items), "limit": cfg.limit,
        "prompt_style": cfg.prompt,
        "reported_on": ("baseline, cloze, PA of the baseline and the logit lens: all evaluated items; "
                        + ("methods that choose on validation items (heads, PriDe's prior): the test items, and "
                           "acc,baseline_test is the baseline on those same items for the paired tests" if selecting
                           else "nothing is selected, so there is no validation split")),
        "n_val": len(split.val), "n_test": len(test), "n_options": study.n_max,
        "n_essential_options": study.n_essential, "chance": chance_accuracy(counts),
        "chance_note": (f"mean of 1 / n essential options over the evaluated items ({counts.min()} to {counts.max()} options; "
                        "per count: by_option_count)" if mixed else f"1 / {study.n_essential} essential options")
                       + (f"; the {n_unc} uncertainty options are never gold" if n_unc else ""),
        "n_repeated_options": sum(it.repeated_options for it in items),
        "repeated_options_rule": ("rows whose options repeat are scored, as lm-eval scores them: a tie between copies goes "
                                  "to the first, so a gold on a later copy is never predicted by the cloze or baseline"),
        "split": {"rule": SPLIT_RULE, "seed": cfg.seed, "val_fraction": cfg.val_fraction, "min_val_items": cfg.min_val_items,
                  "validation_ids": [items[i].id for i in split.val], "test_ids": [items[i].id for i in test]},
        "tie_rule": (f"an item whose top score is shared by several options (relative tolerance {hs.TIE_RTOL:g}) gets a seeded "
                     f"random one of them; a head tied on more than {hs.DEGENERATE_TIE_SHARE:.0%} of the validation items is "
                     "degenerate: listed, never ranked or selected"),
    }


def _predict(study):
    return lambda x: hs.option_predictions(np.nan_to_num(x, nan=-np.inf), study.cfg.seed)


def _baseline(study, main: dict, gold: np.ndarray, counts: np.ndarray, t: _Tally) -> tuple[np.ndarray, np.ndarray]:
    """The letter baseline on every item (and on the test items, for the paired tests) and its selection bias."""
    cfg, test = study.cfg, study.split.test
    # lm-eval's acc takes the first of tied letters; the paper style draws among ties (hs.TIE_RTOL)
    base_pred = lm_eval.first_argmax(main["letter_logits"]) if cfg.prompt == lm_eval.LM_EVAL else _predict(study)(main["letter_logits"])
    base_all = _correct(base_pred, gold)
    t.correct["baseline"] = base_all[test]
    stats.add_proportion(t.headline, "acc,baseline", base_all)
    if len(study.split.val) > 0:
        stats.add_proportion(t.headline, "acc,baseline_test", t.correct["baseline"])
    bias = selection_bias(base_pred, gold, study.n_max)
    t.results["selection_bias,baseline"] = {"prediction_distribution": bias.prediction_distribution.tolist(),
                                           "recall": bias.recall.tolist(), "recall_std": bias.recall_std}
    t.dists["baseline"] = bias.prediction_distribution
    t.by_count["acc,baseline"] = (np.arange(len(study.items)), base_all)
    if len(set(counts.tolist())) > 1:  # each count's letters on its own: position j means the same only among items with as many options
        t.results["selection_bias_by_option_count,baseline"] = {
            str(n): {"prediction_distribution": b.prediction_distribution.tolist(), "recall": b.recall.tolist(),
                     "recall_std": b.recall_std}
            for n in sorted(set(counts.tolist()))
            for b in [selection_bias(base_pred[counts == n], gold[counts == n], n + (study.n_max - study.n_essential))]}
    return base_pred, base_all


def _heads(study, main: dict, gold: np.ndarray, t: _Tally) -> tuple[dict, dict, list]:
    """Each head method's best head (chosen on the validation items), its accuracy table and
    selection bias; HeadScore's label-free head."""
    cfg, folder, split, test = study.cfg, study.folder, study.split, study.split.test
    predict = _predict(study)
    selected: dict[str, hs.HeadSelection] = {}
    tables: dict[str, np.ndarray] = {}  # each head method's accuracy per head over all items
    score_heads: list = []  # HeadScore's choice
    for method in HEAD_METHODS:
        if method not in main:
            continue
        scores = np.where(np.isnan(main[method]), -np.inf, main[method])
        sel = selected[method] = hs.select_best_head(scores, gold, split=split, seed=cfg.seed)
        table = tables[method] = hs.head_accuracy(scores, gold, cfg.seed)
        ranked = hs.rank_heads(table, exclude=sel.degenerate)
        degenerate = [[int(l), int(h)] for l, h in zip(*np.nonzero(sel.degenerate))]
        t.results[method] = {"best_head": [sel.layer, sel.head], "val_accuracy": sel.val_accuracy, "test_accuracy": sel.test_accuracy,
                             "oracle_head": list(ranked[0]), "oracle_accuracy": float(table[ranked[0]]),
                             "oracle_note": "best head on all items, test included: for analysis, never a result",
                             "n_degenerate_heads": len(degenerate), "degenerate_heads": degenerate}
        t.correct[f"{method}_head"] = sel.test_correct
        stats.add_proportion(t.headline, f"acc,{method}_head", sel.test_correct)
        b = selection_bias(sel.test_predictions, gold[test], study.n_max)
        t.results[f"selection_bias,{method}_head"] = {"prediction_distribution": b.prediction_distribution.tolist(),
                                                     "recall": b.recall.tolist(), "recall_std": b.recall_std}
        t.dists[f"{method} head"] = b.prediction_distribution
        if study.world.main:
            folder.save_array(f"{method}_head_accuracy", table)
            folder.save_array(f"{method}_degenerate_heads", sel.degenerate)
            plots.plot_head_accuracy_heatmap(np.where(sel.degenerate, np.nan, table), folder.plot_path(f"{method}_head_accuracy"),
                                             best=(sel.layer, sel.head),
                                             title=f"{method}-score accuracy per head ({cfg.model}, {cfg.task}; blank = degenerate)")
    if "attention" in main:
        att = np.where(np.isfinite(main["attention"]), main["attention"], 0.0)
        score = hs.head_score(att[split.val], cfg.seed)  # label-free: no gold needed (000 App. I)
        top = hs.rank_heads(score, exclude=selected["attention"].degenerate)[:5]
        table = hs.head_accuracy(att, gold, cfg.seed)
        t.results["head_score"] = {"top": [{"head": [l, h], "head_score": float(score[l, h]), "accuracy_all_items": float(table[l, h])}
                                           for l, h in top], "selected_on": "validation (label-free)"}
        l0, h0 = top[0]
        score_heads = [(l0, h0)]
        t.correct["head_score_head"] = _correct(predict(main["attention"][:, l0, h0])[test], gold[test])
        stats.add_proportion(t.headline, "acc,head_score_head", t.correct["head_score_head"])
        if "qk" in main:
            stats.add_proportion(t.headline, "acc,head_score_qk", _correct(predict(main["qk"][:, l0, h0])[test], gold[test]))
    return selected, tables, score_heads


def _lens(study, main: dict, gold: np.ndarray, t: _Tally) -> None:
    """The logit lens's accuracy per layer, every evaluated item."""
    lens = np.where(np.isnan(main["lens"]), -np.inf, main["lens"])
    curve = per_layer_accuracy(lens, gold)
    t.results["lens_accuracy_per_layer"] = [float(x) for x in curve]
    hits = (np.argmax(lens, axis=-1) == gold[:, None]).sum(axis=0)
    t.results["lens_accuracy_per_layer_ci"] = [list(stats.wilson(int(k), len(study.items))) for k in hits]
    if study.world.main:
        plots.plot_logit_lens_accuracy(np.asarray(curve), study.folder.plot_path("logit_lens_accuracy"),
                                       baseline=t.headline["acc,baseline"])


def _pa(study, base_all: np.ndarray, selected: dict, t: _Tally) -> None:
    """PA = (1/N) sum I_i I_i^p (000 sec. 5.3): right on the item and on its option-permuted copy;
    each item's I_i I_i^p is a field of its sample (``pa,baseline`` on every item, ``pa,<method>_head``
    on the test items), the per-item evidence of PA and of its stability."""
    predict, test = _predict(study), study.split.test
    perm, orders = study.perm_pass()
    pgold = np.array([o.index(it.gold) for o, it in zip(orders, study.items)])
    per = {"pa,baseline": (np.arange(len(study.items)), base_all * _correct(predict(perm["letter_logits"]), pgold))}
    for method, sel in selected.items():
        pp = predict(perm[method][:, sel.layer, sel.head])[test]
        per[f"pa,{method}_head"] = (test, sel.test_correct * _correct(pp, pgold[test]))
    for name, (idx, values) in per.items():
        stats.add_proportion(t.headline, name, values)
        for i, v in zip(idx, values):
            t.item_fields.setdefault(int(i), {})[name] = int(v)


def _pride(study, main: dict, gold: np.ndarray, counts: np.ndarray, t: _Tally) -> np.ndarray:
    """PriDe's debiased predictions on the test items and its prior(s).

    PriDe debiases among the essential options: the uncertainty options never move, so their
    "prior" would only absorb their content (and dividing by it promotes them). Each option
    count has its own cyclic permutations and its own prior (one count: PriDe on the whole split)."""
    split, test = study.split, study.split.test
    est, pairs = study.pride_pass()
    n = study.n_essential
    res = pride_by_option_count(main["letter_logits"], counts, est, pairs, split)
    t.correct["pride"] = _correct(res.predictions[test], gold[test])
    stats.add_proportion(t.headline, "acc,pride", t.correct["pride"])
    if len(set(counts.tolist())) > 1:
        t.results["pride_prior_by_option_count"] = {
            str(c): {"estimation_items": k, "prior": res.priors[c].tolist() if c in res.priors else None}
            for c, k in res.estimation_items.items()}
        t.results["pride_note"] = ("one prior per option count, from that count's validation items under its own cyclic "
                                   "permutations; a count without validation items keeps its observed predictions")
    else:
        t.results["pride_prior"] = res.priors[n].tolist()
    t.results["pride_prior_estimated_on"] = "validation items (the same split the heads are chosen on)"
    t.dists["PriDe"] = np.pad(selection_bias(res.predictions[test], gold[test], n).prediction_distribution,
                              (0, study.n_max - n))
    return res.predictions


def _cloze(study, gold: np.ndarray, base_all: np.ndarray | None, t: _Tally) -> ClozeScores:
    """lm-eval's acc / acc_norm: first choice on ties, every evaluated item."""
    ll, norm = study.cloze_pass()
    cloze = ClozeScores(ll, norm, lm_eval.first_argmax(ll), lm_eval.first_argmax(norm))
    stats.add_proportion(t.headline, "acc,cloze", _correct(cloze.pred, gold))
    t.by_count["acc,cloze"] = (np.arange(len(study.items)), _correct(cloze.pred, gold))
    if study.reports_acc_norm:  # lm-eval's MMLU reports acc only (its choices are one letter each)
        stats.add_proportion(t.headline, "acc_norm,cloze", _correct(cloze.pred_norm, gold))
    if "baseline" in t.correct:
        stats.add_paired(t.results, "cloze_vs_baseline", stats.mcnemar(_correct(cloze.pred, gold), base_all))
    return cloze


def _write(study, main, selected, pride_pred, cloze, base_pred, explorer, t: _Tally) -> None:
    """samples.jsonl's per-item fields, the explorer's arrays, the distribution plot, results.json."""
    cfg, folder, items = study.cfg, study.folder, study.items
    results = t.results
    extras = _per_item_extras(study, main, selected, pride_pred, cloze, base_pred if study.letters else None)
    if explorer is not None:  # the report's per-item views (mcqa/explorer.py)
        heads, rows, offsets, before, fields = explorer
        folder.save_array("attention_rows", rows)
        folder.save_array("attention_rows_offsets", offsets)
        folder.save_array("attention_rows_before", before)
        results["explorer"] = {"heads": [list(h) for h in heads], "rows": ROWS_RULE}
        for it, f in zip(items, fields):
            extras[it.id].update(f)
    for i, f in t.item_fields.items():
        extras[items[i].id].update(f)
    folder.annotate_samples(extras)
    if t.dists:
        plots.plot_prediction_distribution(t.dists, folder.plot_path("prediction_distribution"),
                                           letters=study.rendered[0].labels if len(study.rendered[0].labels) == study.n_max else None)
    if study.prompts.chat:  # the template the prompts went through (config.yaml: chat_template.rule)
        example = study.rendered[0].text if study.rendered else study.prompts.cloze_request(study.items[0])[0][0][0]
        results["chat_template"] = {"sha256": study.prompts.chat.sha256, "example_prompt": example}
    results["headline"] = t.headline
    add_lm_eval_fields(results, folder.config, cfg.spec.lm_eval_task or cfg.spec.name)  # lm-eval's results-file blocks (lm-eval:TASK: its name)
    folder.save_results(results)


def _explorer(study, selected, tables, score_heads):
    """The heads the report can show on every item and their attention rows (:mod:`.explorer`)."""
    from whitebox_eval.mcqa.explorer import explorer_heads, rows_pass

    heads = explorer_heads(selected, tables, score_heads)
    return (heads, *rows_pass(study, heads))


def _per_item_extras(study, main, selected, pride_pred, cloze, base_pred=None) -> dict:
    """What samples.jsonl gains once heads are chosen: the best heads' scores (full float
    precision: attention scores can be ~1e-7) and predictions (ties drawn as in the
    accuracies), PriDe's prediction and the options' log-likelihoods, per item."""
    extras: dict = {}
    val = set(int(i) for i in study.split.val)
    for i, it in enumerate(study.items):
        n = len(study.rendered[i].options) if study.rendered else len(it.options)
        e: dict = {"split": ("validation" if i in val else "test") if val else "all (nothing selected)"}
        for method, sel in selected.items():
            row = main[method][i, sel.layer, sel.head, :n]
            e[f"{method}_head"] = {"head": [sel.layer, sel.head], "scores": [float(x) for x in row],
                                   "pred": int(sel.predictions[i]), "tied": bool(hs.tied_items(row[None])[0])}
        if pride_pred is not None:
            e["pred_pride"] = int(pride_pred[i])
        if cloze is not None:
            e["cloze_loglik"] = [float(x) for x in cloze.loglik[i, : len(it.options)]]
            e["cloze_loglik_norm"] = [float(x) for x in cloze.loglik_norm[i, : len(it.options)]]
            e["pred_cloze"], e["pred_cloze_norm"] = int(cloze.pred[i]), int(cloze.pred_norm[i])
            if study.rendered:  # the cloze read its own requests, not the letter prompt of samples' "arguments"
                requests = study.prompts.cloze_request(it)[0]
                e["cloze_prompt_hash"] = hash_string(requests[0][0])
                e["cloze_arguments"] = log_arguments(requests)
        # per-item 0/1 as lm-eval's samples carry it, from the predictions the headline uses
        e.update(item_accuracy(it.gold, {"baseline": None if base_pred is None else base_pred[i], "pride": e.get("pred_pride"),
                                         **{f"{m}_head": sel.predictions[i] for m, sel in selected.items()},
                                         "acc,cloze": e.get("pred_cloze"),
                                         "acc_norm,cloze": e.get("pred_cloze_norm") if study.reports_acc_norm else None}))
        extras[it.id] = e
    return extras
