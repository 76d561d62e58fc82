"""Strong / weak / knock-out interventions on chosen heads (paper 002 sec. 5, fig. 4),
each a resumable stage, with the heads' matched attention on the pattern before."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.heads import format_heads
from whitebox_eval.gar.metrics import matched_gap, record_metrics
from whitebox_eval.gar.roles import encode_examples, parse_pattern
from whitebox_eval.gar.scoring import score_batch
from whitebox_eval.gar.selection import example_id, select_tasks, task_examples
from whitebox_eval.gar.config import EDIT_POSITIONS, GARInterveneConfig
from whitebox_eval.gar.study_base import (study_engine, intervention_headline, coverage_model, open_gar_run,
    run_stage, scores_from_samples)
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder
from whitebox_eval.runs.pass_plan import plan_passes


def run_gar_intervene(cfg: GARInterveneConfig, output: str | Path = "runs", *, run_id: str | None = None,
                      resume: bool = False, loaded: LoadedModel | None = None,
                      show_progress: bool | None = None) -> RunFolder:
    """Accuracy before/after strong, weak and knock-out interventions on ``cfg.heads``,
    with the heads' matched attention weight on the pattern before intervening."""
    from whitebox_eval.gar import interventions as iv
    from whitebox_eval.gar import plots
    from whitebox_eval.gar.heads import matched_attention, parse_heads

    heads = parse_heads(cfg.heads)
    pat = parse_pattern(cfg.pattern)
    tasks = select_tasks(cfg.tasks, include_kr=False)
    examples = task_examples(tasks, cfg.limit, cfg.seed)
    loaded = coverage_model(cfg, loaded)
    folder = open_gar_run(cfg, output, run_id=run_id, resume=resume, loaded=loaded, examples=examples)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = study_engine(cfg, loaded)  # --edit: every pass
    for l, h in heads:
        engine.arch.check_layer(l)
        engine.arch.check_head(h)
    encoded = encode_examples(examples, loaded.tokenizer)
    have = [i for i, e in enumerate(encoded) if e.pattern_cells(pat) is not None]
    if not have:
        raise WhiteboxError(f"no example of the chosen tasks has both roles of the pattern {pat.text}; "
                            "pick tasks whose prompts contain them (A is absent from generation prompts)")
    encoded = [encoded[i] for i in have]
    examples = [examples[i] for i in have]
    keys = [example_id(e) for e in examples]
    plan_passes(folder, [("base", len(keys))] + [(kind, len(keys)) for kind in iv.KINDS])  # progress: pass k of N

    def score_base(idx: list[int]):
        chunk = [encoded[i] for i in idx]
        m = matched_attention(engine, chunk, [pat.text], batch_size=len(chunk)).weights[:, 0]
        return [{"prompt": e.example.prompt, "target": e.example.target, **s.to_dict()}
                for e, s in zip(chunk, score_batch(engine, chunk, rule=cfg.rule))], {"matched": m}

    base = run_stage(folder, "base", keys, cfg.batch_size, score_base, show_progress)
    before = scores_from_samples(encoded, base.samples, keys, cfg.rule)
    matched = base.arrays["matched"]
    folder.save_array(f"matched_{re.sub(r'[^A-Za-z0-9]+', '_', pat.text)}", matched)
    results: dict[str, dict] = {}
    for kind in iv.KINDS:
        edits_for = iv.intervention_edits(engine, kind, heads, pat, cfg.edit_at)

        def score_edited(idx: list[int], e=edits_for):
            chunk = [encoded[i] for i in idx]
            pos = iv.edit_positions(chunk, pat, cfg.edit_at)
            return [{**s.to_dict(), "edit_positions": p} for s, p in
                    zip(score_batch(engine, chunk, edits_for=e, rule=cfg.rule), pos)], {}

        stage = run_stage(folder, kind, keys, cfg.batch_size, score_edited, show_progress)
        after = scores_from_samples(encoded, stage.samples, keys, cfg.rule)
        results[f"{kind}_{pat.text}"] = iv.InterventionResult(kind, before, after).summary()
    mean_matched = np.nanmean(matched, axis=0)
    best = np.unravel_index(np.nanargmax(mean_matched), mean_matched.shape)
    plots.plot_interventions(results, folder.plot_path("interventions"),
                             title=f"{format_heads(heads)} on {pat.text} ({cfg.model})")
    plots.plot_head_heatmap(mean_matched, folder.plot_path("matched_attention"),
                            f"mean matched attention on {pat.text}", {"intervened": heads})
    res = {"n_examples": len(keys), "tasks": [t.task_id for t in tasks], "heads": [list(h) for h in heads],
           "pattern": pat.text, "edit_at": cfg.edit_at, "edit_positions": EDIT_POSITIONS[cfg.edit_at],
           "before": record_metrics([s.to_dict() for s in before]), "interventions": results,
           "matched_weight_of_heads": {f"{l}.{h}": float(mean_matched[l, h]) for l, h in heads},
           "best_matching_head": {"head": [int(best[0]), int(best[1])], "weight": float(mean_matched[best])},
           "matched_gap_fig4a": matched_gap(examples, np.mean([matched[:, l, h] for l, h in heads], axis=0)),
           "headline": intervention_headline(res_before=before, interventions=results)}
    folder.save_results(res)
    return folder
