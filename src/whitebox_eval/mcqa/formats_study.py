"""First-token probabilities vs free generation (004): one question, three formats.

For every item (004 sec. 2, App. A.2):

- ``mcq``: P(correct) = probability of the correct label's first token at the last
  position, renormalised over the option labels (004 sec. 2.3);
- ``free``: share of ``n_samples`` generations at temperature T that are correct
  (004 sec. 2.4: 20 samples at T = 1; arithmetic: first number; TriviaQA: exact
  match after normalisation against the answer and its aliases);
- ``free_options``: the same with the candidate answers listed in the prompt.

The study reports mean P(correct) per format, the per-question Pearson correlation
between formats (004 table 1) and the expected alignment error over equal-size bins
(004 eq. 1), and plots the alignment chart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine
from whitebox_eval.mcqa.generation import generate
from whitebox_eval.mcqa.items import MCQItem
from whitebox_eval.mcqa.prompts import render_prompt
from whitebox_eval.mcqa.scoring import score_prompts
from whitebox_eval.mcqa.tokens import tokenize_prompt
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder, config_dict, progress

FORMATS = ("mcq", "free", "free_options")


@dataclass
class FormatsConfig:
    model: str = "smollm2-135m"
    task: str = "arithmetic"
    limit: int | None = 160
    n_options: int = 4
    n_samples: int = 20
    temperature: float = 1.0
    max_new_tokens: int = 16
    n_bins: int = 10
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def to_dict(self) -> dict:
        return config_dict(self, "formats")


def load_format_items(cfg: FormatsConfig) -> tuple[list[MCQItem], str]:
    """Items and their answer type: ``arithmetic[:cats]`` (number) or ``triviaqa=PATH`` (text)."""
    from whitebox_eval.mcqa.arithmetic import ARITHMETIC_CATEGORIES, make_arithmetic_suite
    from whitebox_eval.mcqa.loaders import load_mcq_dataset

    n = cfg.limit or 160
    if cfg.task.startswith("arithmetic"):
        cats = tuple(cfg.task.split(":", 1)[1].split(",")) if ":" in cfg.task else ARITHMETIC_CATEGORIES
        per = max(1, -(-n // len(cats)))
        return make_arithmetic_suite(per, seed=cfg.seed, categories=cats, n_options=cfg.n_options)[:n], "number"
    if cfg.task.startswith("triviaqa="):
        return list(load_mcq_dataset("triviaqa", cfg.task.split("=", 1)[1], on_bad_row="skip", limit=n, seed=cfg.seed)), "text"
    raise WhiteboxError(f"unknown task {cfg.task!r} for the formats study: use arithmetic[:add1,mul2] or triviaqa=PATH")


def _gold_for(item: MCQItem, answer_type: str):
    if answer_type == "number":
        return item.meta.get("answer", int(item.options[item.gold]))
    return item.accepted_answers()


def run_formats(cfg: FormatsConfig, output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
                loaded: LoadedModel | None = None, show_progress: bool | None = None) -> RunFolder:
    from whitebox_eval.mcqa.metrics import fraction_correct
    items, answer_type = load_format_items(cfg)
    folder = RunFolder.create(output, cfg.to_dict(), run_id=run_id, resume=resume)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = Engine(loaded)
    ids = [it.id for it in items]
    pending = folder.count_pending(ids)
    for chunk in progress(folder.iterate_pending(items, ids, cfg.batch_size), total=-(-pending // cfg.batch_size),
                          desc="formats", enabled=show_progress):
        batch_items = [it for _, it in chunk]
        mcq = [render_prompt(it, fmt="mcq_plain") for it in batch_items]
        toks = [tokenize_prompt(loaded.tokenizer, r, "eol") for r in mcq]
        letters = score_prompts(engine, toks, max(len(t.answer_ids) for t in toks), ["baseline"]).letter_logits
        seed = cfg.seed * 1_000_003 + ids.index(chunk[0][0])
        gens = {f: generate(loaded, [render_prompt(it, fmt=f).text for it in batch_items], n_samples=cfg.n_samples,
                            temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, seed=seed)
                for f in ("free", "free_options")}
        records = []
        for j, it in enumerate(batch_items):
            x = letters[j, : len(it.options)].astype(np.float64)
            p = np.exp(x - x.max())
            p /= p.sum()
            gold = _gold_for(it, answer_type)
            records.append({
                "id": it.id, "subject": it.subject, "gold": it.gold,
                "p_correct": {"mcq": float(p[it.gold]),
                              **{f: fraction_correct(gens[f][j], gold, answer_type) for f in ("free", "free_options")}},
                "generations": {f: gens[f][j] for f in ("free", "free_options")},
            })
        folder.append_samples(records)
    return finalize_formats(folder, cfg)


def finalize_formats(folder: RunFolder, cfg: FormatsConfig) -> RunFolder:
    from whitebox_eval.mcqa.metrics import expected_alignment_error, format_correlation
    from whitebox_eval.mcqa.plots import plot_alignment

    samples = list(folder.read_samples())
    pc = {f: np.array([s["p_correct"][f] for s in samples]) for f in FORMATS}
    results: dict = {"n_items": len(samples), "p_correct": {f: float(v.mean()) for f, v in pc.items()}}
    results["pearson"] = {f"{a}~{b}": format_correlation(pc[a], pc[b]) for a, b in combinations(FORMATS, 2)}
    results["alignment_error"] = {
        f"{a}~free": expected_alignment_error(pc[a], pc["free"], n_bins=cfg.n_bins).error for a in ("mcq", "free_options")
    }
    by_subject: dict[str, dict[str, float]] = {}
    for subj in sorted({s["subject"] for s in samples if s.get("subject")}):
        rows = [i for i, s in enumerate(samples) if s["subject"] == subj]
        by_subject[subj] = {f: float(pc[f][rows].mean()) for f in FORMATS}
    results["p_correct_by_subject"] = by_subject
    results["headline"] = {"p_correct,mcq": results["p_correct"]["mcq"], "p_correct,free": results["p_correct"]["free"],
                           "p_correct,free_options": results["p_correct"]["free_options"],
                           "alignment_error,mcq~free": results["alignment_error"]["mcq~free"]}
    for f, v in pc.items():
        folder.save_array(f"p_correct_{f}", v)
    plot_alignment(pc["mcq"], pc["free"], folder.plot_path("alignment_mcq_vs_free"), n_bins=cfg.n_bins)
    folder.save_results(results)
    return folder
