"""An MCQA study: baseline, QK-score and Attention-score heads from one forward pass per batch.

For every batch, one engine pass yields the letter logits at the last position
(baseline, 000 eq. 4), the pre-RoPE query of the last token and the keys of every
option-representative token for all layers and heads (QK-score, 000 eq. 3), and the
attention row of the last token (Attention-score). The best head is chosen on a
validation split and applied to the test split (000 sec. 4, 5.3).

The run folder streams one ``samples.jsonl`` line per item and one array part per
batch, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Capture, Engine, batch_from_ids
from whitebox_eval.mcqa import head_scores as hs
from whitebox_eval.mcqa.items import MCQItem
from whitebox_eval.mcqa.prompts import render_prompt, select_demos, split_demo_pool
from whitebox_eval.mcqa.tokens import tokenize_prompt
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder, progress

METHODS = ("baseline", "qk", "attention")
HEAD_METHODS = ("qk", "attention")


@dataclass
class MCQAConfig:
    """Everything that determines an MCQA study's numbers (written to config.yaml)."""

    model: str = "smollm2-135m"
    task: str = "ssd"
    n_options: int = 4
    labels: str = "letters"
    uncertainty: bool = True
    language: str = "en"
    shots: int = 0
    limit: int | None = 500
    representative: str = "eol"
    methods: tuple[str, ...] = METHODS
    seed: int = 0
    val_fraction: float = hs.DEFAULT_VAL_FRACTION
    min_val_items: int = hs.DEFAULT_MIN_VAL_ITEMS
    on_bad_row: str = "skip"
    batch_size: int = 8
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["methods"] = list(self.methods)
        d["_volatile"] = list(d.pop("volatile"))
        d["suite"] = "mcqa"
        return d


def load_items(cfg: MCQAConfig) -> list[MCQItem]:
    """The task's items: ``ssd``, ``arithmetic[:cat,cat]``, or ``NAME=PATH`` for a local file."""
    from whitebox_eval.mcqa.arithmetic import ARITHMETIC_CATEGORIES, make_arithmetic_suite
    from whitebox_eval.mcqa.loaders import LOADERS, load_mcq_dataset
    from whitebox_eval.mcqa.synthetic import make_ssd

    n = cfg.limit if cfg.limit is not None else 2500
    extra = 15 if cfg.shots > 0 else 0  # the demonstration pool comes off the front
    if cfg.task == "ssd":
        return make_ssd(n + extra, cfg.n_options, language=cfg.language, seed=cfg.seed)
    if cfg.task.startswith("arithmetic"):
        cats = tuple(cfg.task.split(":", 1)[1].split(",")) if ":" in cfg.task else ARITHMETIC_CATEGORIES
        per = max(1, -(-(n + extra) // len(cats)))
        return make_arithmetic_suite(per, seed=cfg.seed, categories=cats, n_options=cfg.n_options)[: n + extra]
    if "=" in cfg.task:
        name, path = cfg.task.split("=", 1)
        return list(load_mcq_dataset(name, path, on_bad_row=cfg.on_bad_row, limit=None if cfg.limit is None else n + extra, seed=cfg.seed))
    raise WhiteboxError(
        f"unknown task {cfg.task!r}: use ssd, arithmetic[:add1,mul2], or NAME=PATH with NAME one of {', '.join(sorted(LOADERS))}"
    )


def _score_batch(engine: Engine, toks, n_max: int, methods: Sequence[str]) -> dict[str, np.ndarray]:
    """One pass: letter logits, QK-scores and attention scores [B, L, H, n_max] (padded options = -inf)."""
    arch = engine.arch
    batch = batch_from_ids([t.input_ids for t in toks], pad_id=engine.tokenizer.pad_token_id or 0).to(engine.loaded.device)
    n_opts = [len(t.option_positions) for t in toks]
    opt_pos = [t.option_positions + [t.option_positions[-1]] * (n_max - len(t.option_positions)) for t in toks]
    captures = []
    if "qk" in methods:
        captures += [Capture("q", "last"), Capture("k", opt_pos)]
    if "attention" in methods:
        captures.append(Capture("attn", "last"))
    trace = engine.run(batch, captures)
    valid = torch.tensor([[o < n for o in range(n_max)] for n in n_opts])
    out: dict[str, np.ndarray] = {}
    letter = torch.full((len(toks), n_max), float("-inf"))
    for i, t in enumerate(toks):
        letter[i, : n_opts[i]] = trace.logits[i, t.answer_ids].float().cpu()
    out["letter_logits"] = letter.numpy()
    if "qk" in methods:
        q = trace["q"][:, :, 0].float()  # [B, L, H, D]
        k = trace["k"].float()  # [B, L, n, Hkv, D]
        k = k[:, :, :, arch.kv_head_map]  # [B, L, n, H, D]
        qk = torch.einsum("blhd,blnhd->blhn", q, k).cpu()
        out["qk"] = qk.masked_fill(~valid[:, None, None, :], float("-inf")).numpy()
    if "attention" in methods:
        rows = trace["attn"][:, :, :, 0].float().cpu()  # [B, L, H, S]
        idx = torch.tensor(opt_pos)[:, None, None, :].expand(-1, rows.shape[1], rows.shape[2], -1)
        att = rows.gather(-1, idx)
        out["attention"] = att.masked_fill(~valid[:, None, None, :], float("-inf")).numpy()
    return out


def run_mcqa(
    cfg: MCQAConfig,
    output: str | Path = "runs",
    *,
    run_id: str | None = None,
    resume: bool = False,
    loaded: LoadedModel | None = None,
    show_progress: bool | None = None,
) -> RunFolder:
    """Run (or resume) a study and write its run folder; returns the folder."""
    for m in cfg.methods:
        if m not in METHODS:
            raise WhiteboxError(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    items = load_items(cfg)
    demos: list[MCQItem] = []
    if cfg.shots > 0:
        pool, items = split_demo_pool(items)
        demos = select_demos(pool, cfg.shots, seed=cfg.seed)
    if cfg.limit is not None:
        items = items[: cfg.limit]
    if not items:
        raise WhiteboxError("the task produced no items")
    folder_path = Path(output) / run_id if run_id else None
    if resume and folder_path is not None and folder_path.exists():
        folder = RunFolder.open_for_resume(folder_path, cfg.to_dict())
    else:
        folder = RunFolder.create(output, cfg.to_dict(), run_id=run_id, resume=resume)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = Engine(loaded)
    rendered = [render_prompt(it, demos=demos, labels=cfg.labels, uncertainty=cfg.uncertainty) for it in items]
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        raise WhiteboxError("item ids are not unique; the loader must give every row its own id")
    n_max = max(len(r.options) for r in rendered)
    parts = folder.path / "arrays" / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    index = {item_id: i for i, item_id in enumerate(ids)}
    pending = folder.count_pending(ids)
    folder.log(f"{len(items)} items, {pending} pending, model {cfg.model}")
    for chunk in progress(folder.iterate_pending(list(zip(items, rendered)), ids, cfg.batch_size),
                          total=-(-pending // cfg.batch_size), desc="mcqa batches", enabled=show_progress):
        toks = [tokenize_prompt(loaded.tokenizer, r, cfg.representative) for _, (_, r) in chunk]
        scores = _score_batch(engine, toks, n_max, cfg.methods)
        np.savez(parts / f"{index[chunk[0][0]]:08d}.npz", index=np.array([index[i] for i, _ in chunk]), **scores)
        records = []
        for j, (item_id, (item, r)) in enumerate(chunk):
            n = len(r.options)
            letters = scores["letter_logits"][j, :n]
            records.append({
                "id": item_id, "gold": item.gold, "n_options": n, "n_tokens": len(toks[j].input_ids),
                "labels": r.labels, "letter_logits": [round(float(x), 5) for x in letters],
                "pred_baseline": int(np.argmax(letters)),
            })
        folder.append_samples(records)
    return finalize(folder, items, n_max, cfg)


def _load_parts(folder: RunFolder, n_items: int, n_max: int, methods: Sequence[str]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for part in sorted((folder.path / "arrays" / "parts").glob("*.npz")):
        with np.load(part) as z:
            idx = z["index"]
            for key in z.files:
                if key == "index":
                    continue
                if key not in arrays:
                    arrays[key] = np.full((n_items, *z[key].shape[1:]), np.nan, dtype=np.float32)
                arrays[key][idx] = z[key]
    return arrays


def finalize(folder: RunFolder, items: Sequence[MCQItem], n_max: int, cfg: MCQAConfig) -> RunFolder:
    """Assemble arrays, select heads, write results.json and plots."""
    from whitebox_eval.mcqa import plots
    from whitebox_eval.mcqa.metrics import accuracy

    arrays = _load_parts(folder, len(items), n_max, cfg.methods)
    gold = np.array([it.gold for it in items])
    letter = arrays["letter_logits"]
    if np.isnan(letter).all(axis=1).any():
        raise WhiteboxError("some items have no scores yet; run again with --resume to finish them")
    base_pred = np.argmax(np.nan_to_num(letter, nan=-np.inf), axis=1)
    split = hs.validation_split(len(items), cfg.val_fraction, cfg.min_val_items, cfg.seed)
    results: dict = {"n_items": len(items), "n_val": len(split.val), "n_test": len(split.test), "n_options": n_max}
    headline = {"acc,baseline_test": accuracy(base_pred[split.test], gold[split.test])}
    results["acc,baseline"] = accuracy(base_pred, gold)
    folder.save_array("letter_logits", letter)
    for method in HEAD_METHODS:
        if method not in arrays:
            continue
        scores = arrays[method]
        folder.save_array(f"{method}_scores", scores)
        sel = hs.select_best_head(scores, gold, split=split)
        table = hs.head_accuracy(scores, gold)
        folder.save_array(f"{method}_head_accuracy", table)
        results[method] = {
            "best_head": [sel.layer, sel.head],
            "val_accuracy": sel.val_accuracy,
            "test_accuracy": sel.test_accuracy,
            "oracle_head": list(hs.best_head(table)),
            "oracle_accuracy": float(table.max()),
        }
        headline[f"acc,{method}_test"] = sel.test_accuracy
        plots.plot_head_accuracy_heatmap(table, folder.plot_path(f"{method}_head_accuracy"), best=(sel.layer, sel.head),
                                         title=f"{method} accuracy per head ({cfg.model}, {cfg.task})")
        if method == "attention":
            score = hs.head_score(np.where(np.isfinite(scores), scores, 0.0))
            top = hs.rank_heads(score)[:5]
            results["head_score_top"] = [{"head": [l, h], "head_score": float(score[l, h]), "accuracy": float(table[l, h])} for l, h in top]
    results["headline"] = headline
    folder.save_results(results)
    return folder
