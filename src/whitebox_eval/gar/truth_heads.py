"""The True/False-head study (paper 002 secs. 4-5, App. E), resumable stage by stage.

The classification examples' Yes/No pairs are split into a selection and a report split
(:func:`split_pairs`; the ids are in results.json).  On the selection split EAP-IG
attribution (KL metric, Yes/No partner as the corrupted input) ranks heads and head
activations at the stated answer split the top ones into True and False heads; on the
report split the True/False intervention, its inverse, strong / weak / knock-out on the
True+False heads, and the True/False intervention and its inverse on random heads of the same
count and layer band (each edit's own control: stages ``rand{d}``, ``invrand{d}``) are scored against the unedited model
(:mod:`whitebox_eval.gar.metrics`); optional truth probes on SNLI / GoT files use those
heads' activations.  Every stage streams its own samples (``id`` prefixed by the stage),
so ``--resume`` continues where a run stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from whitebox_eval import controls
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar import evaluation as ev
from whitebox_eval.gar import interventions as iv
from whitebox_eval.gar.generator import GARExample
from whitebox_eval.controls import Head
from whitebox_eval.gar.heads import (
    HeadAttribution,
    activation_from_rows,
    attention_rows,
    first_token_note,
    format_heads,
    matched_weight_from_rows,
    pair_partner,
    split_true_false,
)
from whitebox_eval.gar.probe_study import load_probe_files, probe_passes, run_probe_stage
from whitebox_eval.gar.roles import EncodedExample, Pattern, encode_examples, parse_pattern
from whitebox_eval.gar.scoring import ExampleScore, make_batch, score_batch, score_examples
from whitebox_eval.gar.elements import element_half
from whitebox_eval.gar.selection import example_id, select_tasks, selection_warnings, task_examples
from whitebox_eval.gar.config import EDIT_POSITIONS, GARHeadsConfig
from whitebox_eval.gar.study_base import (study_engine, CONTROL_RULE, StageOutput, coverage_model,
    intervention_headline, open_gar_run, random_head_draws, run_stage, scores_from_samples)
from whitebox_eval.internals import Engine, integrated_gradients, kl_divergence_metric
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder
from whitebox_eval.runs.pass_plan import extend_plan, plan_passes


def split_pairs(examples: Sequence[GARExample], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Selection / report split of classification examples by Yes/No pair (both examples of
    a loop on one side, so each side stays balanced and keeps attribution partners).

    Within each task the pairs are shuffled (``seed``); pairs are then dealt by their rank
    in that shuffle, task by task, and the first ``round(fraction * n_pairs)`` (at least
    one, at most all but one) go to selection, so every task is spread over both sides."""
    if not 0.0 < fraction < 1.0:
        raise WhiteboxError(f"--select-fraction must be in (0, 1) (got {fraction})")
    pairs: dict[tuple[str, int], list[int]] = {}
    for i, e in enumerate(examples):
        pairs.setdefault((e.task_id, e.index // 2), []).append(i)
    if len(pairs) < 2:
        raise WhiteboxError("selecting heads on one split and reporting on another needs at least two "
                            "Yes/No pairs; raise --limit (or give --true-heads/--false-heads)")
    rng = np.random.default_rng(seed)
    by_task: dict[str, list[tuple[str, int]]] = {}
    for key in pairs:
        by_task.setdefault(key[0], []).append(key)
    order = []
    for t, (task, keys) in enumerate(by_task.items()):
        for rank, j in enumerate(rng.permutation(len(keys))):
            order.append((rank, t, keys[j]))
    order.sort()
    n_sel = min(len(order) - 1, max(1, int(round(fraction * len(order)))))
    sel = sorted(i for _, _, k in order[:n_sel] for i in pairs[k])
    rep = sorted(i for _, _, k in order[n_sel:] for i in pairs[k])
    return sel, rep


# --------------------------------------------------------------------------- the study's steps


@dataclass
class _Run:
    """What every step of one truth-heads run reads."""

    cfg: GARHeadsConfig
    folder: RunFolder
    engine: Engine
    encoded: list[EncodedExample]
    keys: list[str]
    pat: Pattern
    show_progress: bool | None

    def stage(self, name: str, keys: Sequence[str], batch_size: int, score) -> StageOutput:
        return run_stage(self.folder, name, keys, batch_size, score, self.show_progress)


@dataclass
class _Base:
    """The unedited pass over every example: scores, activation at A and matched Q->A weight."""

    scores: list[ExampleScore]
    activation: np.ndarray  # [N, L, H]
    matched: np.ndarray  # [N, L, H]


def _base_stage(r: _Run) -> _Base:
    """Step 1: baseline scores and activations at the stated answer (one pass for both)."""
    engine, pat = r.engine, r.pat

    def score(idx: list[int]):
        chunk = [r.encoded[i] for i in idx]
        scores = score_batch(engine, chunk, rule=r.cfg.rule)
        batch = make_batch(engine, chunk)
        rows = attention_rows(engine, batch, [[e.attending_position(pat.query)] for e in chunk])  # [B, L, H, 1, S]
        act = activation_from_rows(rows[:, :, :, 0])
        mask = np.zeros((len(chunk), 1, batch.seq_len), dtype=bool)
        for b, e in enumerate(chunk):
            c = e.pattern_cells(pat)
            if c is not None:
                mask[b, 0, c[1]] = True
        matched = matched_weight_from_rows(rows, torch.as_tensor(mask))[..., 0]
        recs = [{"label": e.example.label, **s.to_dict()} for e, s in zip(chunk, scores)]
        return recs, {"activation": act.numpy(), "matched": matched.numpy()}

    out = r.stage("base", r.keys, max(r.cfg.batch_size, 8), score)
    return _Base(scores_from_samples(r.encoded, out.samples, r.keys, r.cfg.rule),
                 out.arrays["activation"], out.arrays["matched"])


@dataclass
class _Attribution:
    """Step 2's outcome: EAP-IG on the selection split (None when the heads were given)."""

    attribution: HeadAttribution | None
    usable: list[int]  # selection examples with a Yes/No partner of equal token length
    n_unequal: int
    pair_kl: list[float]


def _attribution_stage(r: _Run, sel_idx: Sequence[int]) -> _Attribution:
    """Step 2: EAP-IG (KL metric, the Yes/No partner as corrupted input) on the selection split."""
    cfg, engine, encoded = r.cfg, r.engine, r.encoded
    partners = pair_partner(encoded)
    usable = [i for i in sel_idx if i in partners and encoded[partners[i]].n_tokens == encoded[i].n_tokens]
    n_unequal = len(sel_idx) - len(usable)
    if not usable:
        if not cfg.heads_given:
            raise WhiteboxError("no Yes/No pair of the selection split tokenizes to equal lengths, so attribution "
                                "has no corrupted input; give --true-heads/--false-heads or other tasks")
        return _Attribution(None, usable, n_unequal, [])

    def score(idx: list[int]):
        batch = make_batch(engine, [encoded[usable[i]] for i in idx])
        base = make_batch(engine, [encoded[partners[usable[i]]] for i in idx])
        clean_logits = engine.run(batch).logits
        attr = integrated_gradients(engine, batch, kl_divergence_metric(clean_logits),
                                    points=("head_out", "q", "k", "v", "mlp_act"), steps=cfg.steps, baseline=base)
        sc = {p: s.detach().float().cpu() for p, s in attr.scores.items()}
        sc["mlp_act"] = sc["mlp_act"].sum(-1)
        recs = [{"kl_baseline": float(attr.metric_baseline[b])} for b in range(len(idx))]
        return recs, {p: v.numpy() for p, v in sc.items()}

    out = r.stage("attr", [r.keys[i] for i in usable], cfg.batch_size, score)
    a = out.arrays
    attribution = HeadAttribution(head_out=a["head_out"].mean(0), q=a["q"].mean(0), k=a["k"].mean(0),
                                  v=a["v"].mean(0), mlp=a["mlp_act"].mean(0), per_example=a["head_out"],
                                  n_examples=len(usable), baseline="pair",
                                  skipped=[r.keys[i] for i in sel_idx if i not in set(usable)])
    for p in ("head_out", "q", "k", "v", "mlp"):
        r.folder.save_array(f"attribution_{p}", getattr(attribution, p))
    pair_kl = [float(out.samples[r.keys[i]]["kl_baseline"]) for i in usable]
    return _Attribution(attribution, usable, n_unequal, pair_kl)


@dataclass
class _Chosen:
    """Step 3's outcome: the True and False heads and why they may mean nothing."""

    true_heads: list[Head]
    false_heads: list[Head]
    candidates: list[Head]
    gap: np.ndarray  # [L, H] mean activation at A, Yes minus No
    warnings: list[str]

    @property
    def both(self) -> list[Head]:
        return list(dict.fromkeys(self.true_heads + self.false_heads))


def _choose_heads(r: _Run, base: _Base, attr: _Attribution, labels: np.ndarray, sel_idx: Sequence[int]) -> _Chosen:
    """Step 3: split the top-attributed heads into True and False heads by their activation
    gap on the selection split (or take the given heads)."""
    cfg, n = r.cfg, len(r.encoded)
    sel = np.zeros(n, dtype=bool)
    sel[list(sel_idx)] = True
    yes = labels == "Yes"
    gap_rows = sel if sel.any() else np.ones(n, dtype=bool)  # given heads: the gap over every example
    gap = base.activation[gap_rows & yes].mean(0) - base.activation[gap_rows & ~yes].mean(0)
    r.folder.save_array("activation_gap_yes_minus_no", gap)
    r.folder.save_array("activation_at_A", base.activation)
    r.folder.save_array("matched_QA", base.matched)
    if cfg.heads_given:
        from whitebox_eval.gar.heads import parse_heads

        true_heads = parse_heads(cfg.true_heads) if cfg.true_heads else []
        false_heads = parse_heads(cfg.false_heads) if cfg.false_heads else []
        candidates = true_heads + false_heads
    else:
        assert attr.attribution is not None
        candidates = attr.attribution.ranked_heads(cfg.n_candidates)
        true_heads, false_heads = split_true_false(candidates, gap, n_true=cfg.n_true, n_false=cfg.n_false)
    for l, h in true_heads + false_heads:
        r.engine.arch.check_layer(l)
        r.engine.arch.check_head(h)
    warnings = [] if cfg.heads_given else selection_warnings(
        [base.scores[i].prediction for i in sel_idx], attr.pair_kl, attr.n_unequal, bool(true_heads or false_heads))
    for w in warnings:
        r.folder.log(f"warning: {w}")
    r.folder.log(f"True heads {format_heads(true_heads)}, False heads {format_heads(false_heads)}")
    return _Chosen(true_heads, false_heads, candidates, gap, warnings)


def _intervention_stages(r: _Run, rep_idx: Sequence[int], before: Sequence[ExampleScore],
                         chosen: _Chosen) -> tuple[dict[str, dict], dict[str, Any]]:
    """Step 4: on the report split, the True/False intervention, its inverse, strong / weak /
    knock-out on all chosen heads, and the True/False intervention and (``inverse_draws``) its
    inverse on random heads of the same count and layer band (each edit's own control, stages
    ``rand{d}`` and ``invrand{d}`` on the same head sets); each a resumable stage of after-scores."""
    from whitebox_eval.gar.metrics import random_control

    cfg, engine, pat = r.cfg, r.engine, r.pat
    rep_keys = [r.keys[i] for i in rep_idx]
    rep_enc = [r.encoded[i] for i in rep_idx]

    def stage(name: str, make: Callable[[list[EncodedExample]], list[ExampleScore]]) -> dict:
        def score(idx: list[int]):
            chunk = [rep_enc[i] for i in idx]
            pos = iv.edit_positions(chunk, pat, cfg.edit_at)
            return [{**s.to_dict(), "edit_positions": p} for s, p in zip(make(chunk), pos)], {}
        out = r.stage(name, rep_keys, cfg.batch_size, score)
        after = scores_from_samples(rep_enc, out.samples, rep_keys, cfg.rule)
        return iv.InterventionResult(name, before, after).summary()

    def true_false(name: str, t_heads: Sequence[Head], f_heads: Sequence[Head], inverse: bool) -> dict:
        return stage(name, lambda ch: iv.true_false_scores(
            engine, ch, t_heads, f_heads, inverse=inverse, pattern=cfg.pattern, batch_size=cfg.batch_size,
            rule=cfg.rule, at=cfg.edit_at))

    both = chosen.both
    if not both:
        return {}, {}
    band, sets = random_head_draws(both, engine.arch, cfg.random_draws, cfg.seed)
    inverse = range(len(sets)) if cfg.inverse_draws else range(0)
    names = ("tf", "inv", *iv.KINDS, *(f"rand{d}" for d in range(len(sets))), *(f"invrand{d}" for d in inverse))
    extend_plan(r.folder, [(k, len(rep_keys)) for k in names])  # the intervention passes, now known
    interventions = {"true_false": true_false("tf", chosen.true_heads, chosen.false_heads, False),
                     "inverse_true_false": true_false("inv", chosen.true_heads, chosen.false_heads, True)}
    for kind in iv.KINDS:
        edits_for = iv.intervention_edits(engine, kind, both, pat, cfg.edit_at)
        interventions[f"{kind}_{pat.text}"] = stage(kind, lambda ch, e=edits_for: score_examples(
            engine, ch, batch_size=cfg.batch_size, rule=cfg.rule, edits_for=e))
    draws, inverse_draws = [], []
    n_true = len(chosen.true_heads)
    for d, heads_d in enumerate(sets):
        t_d, f_d = heads_d[:n_true], heads_d[n_true:]
        draws.append({"true_heads": [list(h) for h in t_d], "false_heads": [list(h) for h in f_d],
                      "summary": true_false(f"rand{d}", t_d, f_d, False)})
    for d in inverse:  # the inverse edit's own control: the inverse edit on each of the same random head sets
        inverse_draws.append({**{k: draws[d][k] for k in ("true_heads", "false_heads")},
                              "summary": true_false(f"invrand{d}", sets[d][:n_true], sets[d][n_true:], True)})
    control: dict[str, Any] = {
        "layer_band": list(band), "n_heads": len(both), "draws": draws,
        "note": None if sets or cfg.random_draws == 0 else "the layer band has too few other heads",
        "control": controls.control_record(CONTROL_RULE, both, engine.arch, cfg.seed, sets)}
    if draws:
        control["comparison"] = random_control(interventions["true_false"], [d["summary"] for d in draws])
    if inverse_draws:
        control["inverse_draws"] = inverse_draws
        control["inverse_comparison"] = random_control(interventions["inverse_true_false"],
                                                       [d["summary"] for d in inverse_draws])
    return interventions, control


def _plots(r: _Run, base: _Base, attr: _Attribution, chosen: _Chosen, labels: np.ndarray,
           rep_idx: Sequence[int], interventions: dict[str, dict]) -> None:
    """Step 5: plots (report split)."""
    from whitebox_eval.gar import plots

    model, t_heads, f_heads = r.cfg.model, chosen.true_heads, chosen.false_heads
    if t_heads and f_heads:
        t_act = np.mean([base.activation[rep_idx, l, h] for l, h in t_heads], axis=0)
        f_act = np.mean([base.activation[rep_idx, l, h] for l, h in f_heads], axis=0)
        plots.plot_true_false_scatter(t_act, f_act, list(labels[rep_idx]), r.folder.plot_path("true_false_scatter"),
                                      title=f"True vs False heads ({model}, report split)")
    if attr.attribution is not None:
        plots.plot_head_heatmap(attr.attribution.head_out, r.folder.plot_path("attribution_head_out"),
                                f"EAP-IG (KL) head_out attribution ({model}, selection split)",
                                {"True": t_heads, "False": f_heads})
    plots.plot_head_heatmap(chosen.gap, r.folder.plot_path("activation_gap"),
                            "activation at A: mean(Yes) - mean(No)", {"True": t_heads, "False": f_heads})
    if interventions:
        plots.plot_interventions(interventions, r.folder.plot_path("interventions"),
                                 title=f"interventions on True/False heads ({model}, report split)")


def _selection_summary(base: _Base, attr: _Attribution, chosen: _Chosen, sel_idx: Sequence[int]) -> dict:
    preds = [base.scores[i].prediction for i in sel_idx]
    kl, a = attr.pair_kl, attr.attribution
    return {"n_examples": len(sel_idx), "attribution_examples": len(attr.usable),
            "unequal_length_dropped": attr.n_unequal,
            "answers": {x: preds.count(x) for x in sorted(set(preds))},
            "pair_kl": None if not kl else {"median": float(np.median(kl)), "min": float(np.min(kl)),
                                            "max": float(np.max(kl))},
            "max_abs_head_attribution": None if a is None else float(np.max(np.abs(a.head_out))),
            "warnings": chosen.warnings, "reliable": not chosen.warnings}


def run_gar_heads(cfg: GARHeadsConfig, output: str | Path = "runs", *, run_id: str | None = None,
                  resume: bool = False, loaded: LoadedModel | None = None,
                  show_progress: bool | None = None) -> RunFolder:
    """Find True/False heads on a selection split, then intervene on them (and on random
    heads of the same count and layer band) on the disjoint report split, and probe
    truth with them (secs. 4-5, App. E).  Heads given with ``true_heads``/``false_heads``
    are not selected here, so every example is reported."""
    from whitebox_eval.gar.metrics import score_metrics

    tasks = select_tasks(cfg.tasks, include_kr=False)
    if not all(t.g2c for t in tasks):
        raise WhiteboxError("the truth-heads study runs on classification tasks: give g2c task ids "
                            "or 'truth' / 'classification'")
    iv.check_edit_at(cfg.edit_at)
    if cfg.random_draws < 0:
        raise WhiteboxError(f"--random-draws must be >= 0 (got {cfg.random_draws})")
    examples = task_examples(tasks, cfg.limit, cfg.seed, element_half(cfg.elements, cfg.seed))
    pat = parse_pattern(cfg.pattern)
    if cfg.heads_given:
        sel_idx, rep_idx = [], list(range(len(examples)))
    else:
        sel_idx, rep_idx = split_pairs(examples, cfg.select_fraction, cfg.seed)
    statements, read = load_probe_files(cfg.probe_data, limit=cfg.probe_limit, seed=cfg.seed,
                                        on_bad_row=cfg.on_bad_row)
    loaded = coverage_model(cfg, loaded)
    folder = open_gar_run(cfg, output, run_id=run_id, resume=resume, data_files=read, loaded=loaded,
                          examples=examples, statements=statements)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = study_engine(cfg, loaded)  # --edit: every pass
    encoded = encode_examples(examples, loaded.tokenizer)
    keys = [example_id(e) for e in examples]
    n = len(encoded)
    folder.log(f"truth-heads: {len(tasks)} tasks, {n} examples ({len(sel_idx)} selection, {len(rep_idx)} report), "
               f"model {cfg.model}")
    r = _Run(cfg, folder, engine, encoded, keys, pat, show_progress)
    labels = np.array([e.label or "" for e in examples])
    plan_passes(folder, [("base", n), ("attr", len(sel_idx))])  # attr: at most; the later passes once heads are chosen

    base = _base_stage(r)
    attr = _attribution_stage(r, sel_idx)
    chosen = _choose_heads(r, base, attr, labels, sel_idx)
    before = [base.scores[i] for i in rep_idx]
    interventions, control = _intervention_stages(r, rep_idx, before, chosen)
    _plots(r, base, attr, chosen, labels, rep_idx, interventions)
    if statements:
        extend_plan(folder, probe_passes(statements))
    probes = {Path(p).name: run_probe_stage(folder, engine, p, statements[p], chosen.true_heads + chosen.false_heads,
                                            cfg, show_progress) for p in cfg.probe_data}

    a = attr.attribution
    res: dict[str, Any] = {
        "n_examples": n, "tasks": [t.task_id for t in tasks],
        "true_heads": [list(h) for h in chosen.true_heads], "false_heads": [list(h) for h in chosen.false_heads],
        "heads_given": cfg.heads_given,
        "split": {"selection": [keys[i] for i in sel_idx], "report": [keys[i] for i in rep_idx],
                  "fraction": None if cfg.heads_given else cfg.select_fraction, "seed": cfg.seed,
                  "unit": "Yes/No pair (both examples of a loop on one side)"},
        "selection": _selection_summary(base, attr, chosen, sel_idx),
        "candidates": [{"head": list(h), "attribution": None if a is None else float(a.head_out[h]),
                        "activation_gap_yes_minus_no": float(chosen.gap[h]),
                        "mean_matched_QA": float(np.nanmean(base.matched[:, h[0], h[1]]))} for h in chosen.candidates],
        "attribution_examples": 0 if a is None else a.n_examples,
        "attribution_top_mlp_layers": [] if a is None else [int(i) for i in np.argsort(-np.abs(a.mlp))[:5]],
        "pattern": pat.text, "edit_at": cfg.edit_at, "edit_positions": EDIT_POSITIONS[cfg.edit_at],
        "report": {"n_examples": len(rep_idx), **score_metrics(before)},
        "accuracy_before": ev.accuracy([s.correct for s in before]),
        "argmax_before": ev.accuracy([s.correct_argmax for s in before]),
        "interventions": interventions, "random_heads_control": control, "probes": probes,
        "first_token": first_token_note(loaded.tokenizer),
    }
    head = intervention_headline(before, interventions)
    for k, v in probes.items():
        head[f"probe,{k}"] = v["acc"]
    res["headline"] = head
    folder.save_results(res)
    return folder
