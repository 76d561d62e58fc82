"""GAR studies that write run folders: the benchmark evaluation (sec. 3) and the
True/False-head study (secs. 4-5, App. E), both resumable.

Evaluation: every example of the chosen tasks is scored from one engine pass per
batch (first-token probabilities of the target and its alternatives at the last
position, App. C) and streamed to ``samples.jsonl``; ``results.json`` holds accuracy
(App. C rule and argmax) overall, by form, by difficulty (n_r x negate), by syntactic
variation, on knowledge-recall sub-problems, and the compositionality gap; plots are
fig. 2 and the accuracy by difficulty.

Heads: the classification examples' Yes/No pairs are split into a selection and a
report split (:func:`split_pairs`; the ids are in results.json).  On the selection
split EAP-IG attribution (KL metric, Yes/No partner as the corrupted input) ranks
heads and head activations at the stated answer split the top ones into True and
False heads; on the report split the True/False intervention, its inverse, strong /
weak / knock-out on the True+False heads, and the True/False intervention on random
heads of the same count and layer band (the control) are scored against the unedited
model (:mod:`whitebox_eval.gar.metrics`); optional truth probes on SNLI / GoT files
use those heads' activations.  Every stage streams its own samples (``id`` prefixed by the stage), so
``--resume`` continues where a run stopped.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np
import torch

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar import evaluation as ev
from whitebox_eval.gar.metrics import METRICS, matched_gap, record_metrics
from whitebox_eval.gar.generator import GARExample, generate_task_examples
from whitebox_eval.gar.heads import (
    Head,
    HeadAttribution,
    activation_from_rows,
    attention_rows,
    format_heads,
    matched_weight_from_rows,
    pair_partner,
    split_true_false,
)
from whitebox_eval.gar.roles import EncodedExample, encode_examples, parse_pattern
from whitebox_eval.gar.scoring import ExampleScore, make_batch, score_batch, score_examples, score_from_probs
from whitebox_eval.gar.tasks import GARTask, enumerate_tasks, kr_tasks, parse_task_id
from whitebox_eval.internals import Engine, integrated_gradients, kl_divergence_metric
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder, config_dict, progress
from whitebox_eval.runs.distributed import create_run, world as current_world
from whitebox_eval.runs.parts import write_part

#: the three classification tasks of sec. 5 ("GendersOfPersons/=, r_retrieve/∈")
PAPER_TRUTH_TASKS = (
    "GendersOfPersons/same,CountriesOfCities/inCountryOf×3 [g2c]",
    "GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]",
    "GendersOfPersons/same,UsagesOfThings/usedFor×3 [g2c]",
)
SELECTORS = ("all", "generation", "classification", "kr", "truth")


# --------------------------------------------------------------------------- task selection


def split_task_list(text: str) -> list[str]:
    """Split ``ID[,ID...]`` where ids themselves hold commas (``A/r,B/s×3 [negate,g2c]``):
    commas inside brackets never split, and an id ends at the piece holding ``×N``."""
    pieces, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch in ",;" and depth == 0:
            pieces.append(cur)
            cur = ""
        else:
            cur += ch
    pieces.append(cur)
    ids, acc = [], []
    for p in (p.strip() for p in pieces):
        if not p:
            continue
        if p in SELECTORS and not acc:
            ids.append(p)
            continue
        acc.append(p)
        if re.search(r"[×x]\s*\d+", p):
            ids.append(",".join(acc))
            acc = []
    if acc:
        raise WhiteboxError(f"cannot read task list {text!r}: {','.join(acc)!r} has no ×N_KV; "
                            "write ids like 'GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]' "
                            f"or one of {', '.join(SELECTORS)}")
    return ids


def select_tasks(spec: str | Sequence[str], *, include_kr: bool = True) -> list[GARTask]:
    """``all`` (384 tasks + knowledge-recall sub-problems when ``include_kr``),
    ``generation``, ``classification``, ``kr``, ``truth`` (the three tasks of sec. 5) or ids."""
    items = split_task_list(spec) if isinstance(spec, str) else list(spec)
    out: list[GARTask] = []
    for it in items:
        if it == "all":
            out += enumerate_tasks() + (kr_tasks() if include_kr else [])
        elif it == "generation":
            out += [t for t in enumerate_tasks() if not t.g2c]
        elif it == "classification":
            out += [t for t in enumerate_tasks() if t.g2c]
        elif it == "kr":
            out += kr_tasks()
        elif it == "truth":
            out += [parse_task_id(t) for t in PAPER_TRUTH_TASKS]
        else:
            out.append(parse_task_id(it))
    seen, uniq = set(), []
    for t in out:
        if t.task_id not in seen:
            seen.add(t.task_id)
            uniq.append(t)
    if not uniq:
        raise WhiteboxError("no GAR task selected")
    return uniq


def task_examples(tasks: Sequence[GARTask], limit: int | None, seed: int) -> list[GARExample]:
    """The first ``limit`` examples of each task's default set (8 generation, 16 classification),
    so a limited run is a subset of the full benchmark with the same seed."""
    if limit is not None and limit < 1:
        raise WhiteboxError(f"--limit must be >= 1 (got {limit})")
    if limit is not None and limit % 2 and any(t.g2c for t in tasks):
        raise WhiteboxError(f"--limit {limit} is odd: classification examples come in Yes/No pairs and an odd "
                            f"limit would keep more Yes than No items; use an even --limit (e.g. {limit + 1})")
    out = []
    for t in tasks:
        exs = generate_task_examples(t, seed=seed)
        out += exs if limit is None else exs[:limit]
    return out


def example_id(ex: GARExample) -> str:
    return f"{ex.task_id}#{ex.index}"


# --------------------------------------------------------------------------- configs


@dataclass
class _GARRun:
    """What every GAR mode's config holds (written to config.yaml with its ``mode``)."""

    MODE: ClassVar[str] = ""
    model: str = "smollm2-135m"
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def to_dict(self) -> dict:
        extra = {}
        if hasattr(self, "edit_at"):
            extra["edit_positions"] = EDIT_POSITIONS[getattr(self, "edit_at")]
        return config_dict(self, "gar", mode=self.MODE, **extra)


#: config.yaml's words for where interventions edit (``edit_at``; interventions module doc)
EDIT_POSITIONS = {
    "read": "the last prompt token E, where the answer's first-token probability is read",
    "pattern": "the last token of the pattern's attending role (Q->A: the stated answer A), as sec. 5 states it",
    "both": "the pattern's attending role and the last prompt token E",
}


@dataclass
class GARConfig(_GARRun):
    """Everything that determines a GAR evaluation's numbers (written to config.yaml)."""

    tasks: str = "all"
    limit: int | None = None
    include_kr: bool = True
    rule: str = "chance"

    MODE: ClassVar[str] = "evaluate"


@dataclass
class GARHeadsConfig(_GARRun):
    """The True/False-head study (secs. 4-5, App. E)."""

    tasks: str = "truth"
    limit: int | None = None
    steps: int = 5
    n_candidates: int = 10
    n_true: int = 2
    n_false: int = 2
    true_heads: str | None = None
    false_heads: str | None = None
    pattern: str = "Q->A"
    edit_at: str = "read"
    select_fraction: float = 0.5
    random_draws: int = 5
    probe_data: tuple[str, ...] = ()
    probe_limit: int | None = None
    probe_folds: int = 5
    on_bad_row: str = "skip"
    rule: str = "chance"
    batch_size: int = 4

    MODE: ClassVar[str] = "truth-heads"


# --------------------------------------------------------------------------- evaluation


def _score_record(ex: GARExample, enc: EncodedExample, s: ExampleScore) -> dict:
    t = ex.task
    return {"id": example_id(ex), "task_id": ex.task_id, "index": ex.index, "n_r": t.n_r,
            "negate": t.negate, "g2c": t.g2c, "syntactic": None if t.is_kr else t.syntactic,
            "kr": t.is_kr, "target": ex.target, "label": ex.label,
            "alternatives": list(ex.alternatives), "n_tokens": enc.n_tokens, **s.to_dict()}


def run_gar(cfg: GARConfig, output: str | Path = "runs", *, run_id: str | None = None,
            resume: bool = False, loaded: LoadedModel | None = None,
            show_progress: bool | None = None) -> RunFolder:
    """Evaluate the model on the GAR tasks and write (or resume) the run folder."""
    if cfg.rule not in ev.RULES:
        raise WhiteboxError(f"unknown App. C rule {cfg.rule!r}; use one of {ev.RULES}")
    tasks = select_tasks(cfg.tasks, include_kr=cfg.include_kr)
    examples = task_examples(tasks, cfg.limit, cfg.seed)
    if cfg.batch_size < 1:
        raise WhiteboxError(f"batch size must be >= 1 (got {cfg.batch_size})")
    ranks = current_world()
    folder = create_run(ranks, output, cfg.to_dict(), run_id=run_id, resume=resume)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = Engine(loaded)
    encoded = encode_examples(examples, loaded.tokenizer)
    ids = [example_id(e) for e in examples]
    if len(set(ids)) != len(ids):
        raise WhiteboxError("two examples share an id; check the task list for duplicates")
    done = ranks.broadcast(folder.done_ids() if ranks.main else None)  # one list for every rank to shard
    order = sorted(range(len(examples)), key=lambda i: (encoded[i].n_tokens, i))  # less padding
    bs = cfg.batch_size
    todo = ranks.shard([i for i in order if ids[i] not in done], block=bs)  # torchrun: this rank's blocks
    folder.log(f"{len(tasks)} tasks, {len(examples)} examples, {len(todo)} pending, model {cfg.model}"
               + (f", rank {ranks.rank} of {ranks.size}" if ranks.distributed else ""))
    for start in progress(range(0, len(todo), bs), total=-(-len(todo) // bs), desc="gar batches",
                          enabled=show_progress if ranks.main else False):
        idx = todo[start:start + bs]
        scores = score_batch(engine, [encoded[i] for i in idx], rule=cfg.rule)
        folder.append_samples([_score_record(examples[i], encoded[i], s) for i, s in zip(idx, scores)])
    ranks.barrier()
    if not ranks.main:
        return folder
    folder.merge_shards(ids)
    return finalize_gar(folder, examples, cfg.model)


def _difficulty_key(k: tuple[int, bool]) -> str:
    return f"n_r={k[0]}" + (",negate" if k[1] else "")


def gar_results(examples: Sequence[GARExample], samples: dict[str, dict]) -> dict:
    """results.json content from the examples and their sample records (by id)."""
    missing = [example_id(e) for e in examples if example_id(e) not in samples]
    if missing:
        raise WhiteboxError(f"{len(missing)} examples have no score yet (e.g. {missing[0]}); "
                            "rerun with --resume to finish them")
    correct = [bool(samples[example_id(e)]["correct"]) for e in examples]
    argmax = [bool(samples[example_id(e)]["correct_argmax"]) for e in examples]
    gar = [not e.task.is_kr for e in examples]
    res: dict[str, Any] = {"n_examples": len(examples), "n_tasks": len({e.task_id for e in examples})}
    for name, corr in (("appc", correct), ("argmax", argmax)):
        r: dict[str, Any] = {
            "overall": ev.accuracy([c for c, g in zip(corr, gar) if g]),
            "by_form": ev.accuracy_by_form(examples, corr),
            "by_difficulty": {form: {_difficulty_key(k): v for k, v in
                                     sorted(ev.accuracy_by_difficulty(examples, corr, form).items())}
                              for form in ("generation", "classification")},
            "by_syntactic_variation": ev.accuracy_by_syntactic_variation(examples, corr),
            "kr": ev.kr_accuracy(examples, corr),
        }
        try:
            r["compositionality_gap"] = ev.compositionality_gap(examples, corr)
        except WhiteboxError:
            r["compositionality_gap"] = None
        res[name] = r
    probs = defaultdict(list)
    for e in examples:
        key = "kr" if e.task.is_kr else ("classification" if e.task.g2c else "generation")
        probs[key].append(samples[example_id(e)]["target_prob"])
    res["mean_target_prob"] = {k: float(np.mean(v)) for k, v in probs.items()}
    res["shared_first_token_examples"] = sum(bool(samples[example_id(e)].get("shared_first_token"))
                                             for e in examples)
    groups: dict[str, list[dict]] = defaultdict(list)
    for e in examples:
        rec = samples[example_id(e)]
        if not e.task.is_kr:
            groups["overall"].append(rec)
        groups["kr" if e.task.is_kr else ("classification" if e.task.g2c else "generation")].append(rec)
    res["metrics"] = {k: record_metrics(v) for k, v in groups.items()}  # with intervals (gar.metrics)
    res["error_analysis"] = ev.error_analysis(examples, samples)
    gap = res["appc"]["compositionality_gap"]
    head: dict[str, Any] = {}
    overall = res["metrics"].get("overall", {})
    for key in METRICS:  # the paper's rule first, then the metrics that can move on small models
        if key in overall:
            stats.add_estimate(head, key, _estimate(overall, key))
    head.update({"acc,generation": res["appc"]["by_form"].get("generation"),
                 "acc,classification": res["appc"]["by_form"].get("classification"),
                 "compositionality_gap": gap})
    res["headline"] = head
    return res


def _estimate(metrics: Mapping[str, Any], key: str) -> stats.Estimate:
    """The :class:`stats.Estimate` stored under ``key`` by ``stats.add_*``."""
    lo, hi = metrics[stats.derived_key(key, "ci")]
    return stats.Estimate(metrics[key], lo, hi, metrics[stats.derived_key(key, "n")],
                          metrics[stats.derived_key(key, "ci_method")], metrics[stats.derived_key(key, "stderr")])


def finalize_gar(folder: RunFolder, examples: Sequence[GARExample], model: str) -> RunFolder:
    """Write results.json and the plots from the streamed samples."""
    from whitebox_eval.gar.plots import plot_accuracy_by_difficulty

    samples = {s["id"]: s for s in folder.read_samples()}
    res = gar_results(examples, samples)
    folder.save_results(res)
    correct = [bool(samples[example_id(e)]["correct"]) for e in examples]
    if any(not e.task.is_kr for e in examples):
        ev.plot_gar_summary({model: (list(examples), correct)}, folder.plot_path("gar_summary"))
    kr = res["appc"]["kr"]
    plot_accuracy_by_difficulty(res["appc"]["by_difficulty"], folder.plot_path("accuracy_by_difficulty"),
                                title=f"GAR accuracy by difficulty ({model})",
                                kr=None if kr is None or (isinstance(kr, float) and math.isnan(kr)) else kr)
    folder.log("results written")
    return folder


# --------------------------------------------------------------------------- staged, resumable work


def _run_stage(folder: RunFolder, stage: str, keys: Sequence[str], batch_size: int,
               fn: Callable[[list[int]], tuple[list[dict], dict[str, np.ndarray]]],
               show_progress: bool | None) -> None:
    """Run ``fn`` over pending batches of ``keys`` (indices in), streaming one sample per
    key (id ``stage:key``) and one npz part of per-example arrays per batch."""
    parts = folder.path / "arrays" / "parts" / stage
    parts.mkdir(parents=True, exist_ok=True)
    ids = [f"{stage}:{k}" for k in keys]
    pending = folder.count_pending(ids)
    for chunk in progress(folder.iterate_pending(list(range(len(keys))), ids, batch_size),
                          total=-(-pending // batch_size), desc=stage, enabled=show_progress):
        idx = [i for _, i in chunk]
        records, arrays = fn(idx)
        if arrays:
            write_part(parts / f"{idx[0]:08d}.npz", index=np.array(idx), **arrays)
        folder.append_samples([{"id": sid, "stage": stage, **r} for (sid, _), r in zip(chunk, records)])


def _stage_samples(folder: RunFolder, stage: str) -> dict[str, dict]:
    prefix = f"{stage}:"
    return {s["id"][len(prefix):]: s for s in folder.read_samples() if str(s["id"]).startswith(prefix)}


def _stage_arrays(folder: RunFolder, stage: str, n: int) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for part in sorted((folder.path / "arrays" / "parts" / stage).glob("*.npz")):
        with np.load(part) as z:
            for key in z.files:
                if key == "index":
                    continue
                if key not in out:
                    out[key] = np.full((n, *z[key].shape[1:]), np.nan, dtype=np.float32)
                out[key][z["index"]] = z[key]
    return out


def _scores_from_samples(encoded: Sequence[EncodedExample], samples: dict[str, dict], keys: Sequence[str],
                         rule: str) -> list[ExampleScore]:
    return [score_from_probs(e, samples[k]["probs"], rule) for e, k in zip(encoded, keys)]


# --------------------------------------------------------------------------- True/False-head study


#: below this median KL(Yes prompt || No prompt) (nats) the corrupted input barely moves the
#: output, so EAP-IG attributions are too small to rank heads (issue 16: SmolLM2 gives 1e-4..1e-2)
MIN_PAIR_KL = 1e-3


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


def random_head_draws(selected: Sequence[Head], n_layers_heads: tuple[int, int], draws: int,
                      seed: int) -> tuple[tuple[int, int], list[list[Head]]]:
    """``draws`` random sets of ``len(selected)`` heads from the selected heads' layer band
    (lowest to highest selected layer), never a selected head; each set is drawn without
    replacement.  Returns the band and the sets (empty when the band has too few heads)."""
    if not selected:
        return (0, -1), []
    lo, hi = min(l for l, _ in selected), max(l for l, _ in selected)
    pool = [(l, h) for l in range(lo, hi + 1) for h in range(n_layers_heads[1]) if (l, h) not in set(selected)]
    if len(pool) < len(selected):
        return (lo, hi), []
    rng = np.random.default_rng(seed)
    sets = []
    for _ in range(draws):
        idx = rng.choice(len(pool), size=len(selected), replace=False)
        sets.append([pool[int(i)] for i in idx])
    return (lo, hi), sets


def selection_warnings(answers: Sequence[str], pair_kl: Sequence[float], n_unequal: int,
                       candidates_found: bool) -> list[str]:
    """Why heads selected on the selection split may mean nothing (shown in the summary)."""
    out = []
    if answers and len(set(answers)) == 1:
        out.append(f"the model answers {answers[0]!r} to all {len(answers)} selection items, so Yes/No "
                   "pairs barely differ in its output: attributions are too small to select True/False heads")
    if len(pair_kl) and float(np.median(pair_kl)) < MIN_PAIR_KL:
        out.append(f"median KL between the Yes and No prompts' outputs is {float(np.median(pair_kl)):.2g} nats "
                   f"(< {MIN_PAIR_KL:g}): attributions are too small to rank heads reliably")
    if n_unequal:
        out.append(f"{n_unequal} selection examples were left out of attribution: their Yes/No partner "
                   "tokenizes to a different length (EAP-IG needs token-aligned inputs)")
    if not candidates_found:
        out.append("no candidate head is more active on one label than the other: no True/False head selected")
    return out


def run_gar_heads(cfg: GARHeadsConfig, output: str | Path = "runs", *, run_id: str | None = None,
                  resume: bool = False, loaded: LoadedModel | None = None,
                  show_progress: bool | None = None) -> RunFolder:
    """Find True/False heads on a selection split, then intervene on them (and on random
    heads of the same count and layer band) on the disjoint report split, and probe
    truth with them (secs. 4-5, App. E).  Heads given with ``true_heads``/``false_heads``
    are not selected here, so every example is reported."""
    from whitebox_eval.gar import interventions as iv
    from whitebox_eval.gar import plots
    from whitebox_eval.gar.heads import parse_heads
    from whitebox_eval.gar.metrics import random_control, score_metrics

    tasks = select_tasks(cfg.tasks, include_kr=False)
    if not all(t.g2c for t in tasks):
        raise WhiteboxError("the truth-heads study runs on classification tasks: give g2c task ids "
                            "or 'truth' / 'classification'")
    iv.check_edit_at(cfg.edit_at)
    if cfg.random_draws < 0:
        raise WhiteboxError(f"--random-draws must be >= 0 (got {cfg.random_draws})")
    examples = task_examples(tasks, cfg.limit, cfg.seed)
    pat = parse_pattern(cfg.pattern)
    have_given = cfg.true_heads is not None or cfg.false_heads is not None
    if have_given:
        sel_idx, rep_idx = [], list(range(len(examples)))
    else:
        sel_idx, rep_idx = split_pairs(examples, cfg.select_fraction, cfg.seed)
    folder = RunFolder.create(output, cfg.to_dict(), run_id=run_id, resume=resume)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = Engine(loaded)
    arch = engine.arch
    encoded = encode_examples(examples, loaded.tokenizer)
    keys = [example_id(e) for e in examples]
    n = len(encoded)
    folder.log(f"truth-heads: {len(tasks)} tasks, {n} examples ({len(sel_idx)} selection, {len(rep_idx)} report), "
               f"model {cfg.model}")

    # 1. baseline scores and activations at the stated answer (one pass for both)
    def base_fn(idx: list[int]):
        chunk = [encoded[i] for i in idx]
        scores = score_batch(engine, chunk, rule=cfg.rule)
        batch = make_batch(engine, chunk)
        pos = [[e.attending_position(pat.query)] for e in chunk]
        rows = attention_rows(engine, batch, pos)  # [B, L, H, 1, S]
        act = activation_from_rows(rows[:, :, :, 0])
        mask = np.zeros((len(chunk), 1, batch.seq_len), dtype=bool)
        for b, e in enumerate(chunk):
            c = e.pattern_cells(pat)
            if c is not None:
                mask[b, 0, c[1]] = True
        matched = matched_weight_from_rows(rows, torch.as_tensor(mask))[..., 0]
        recs = [{"label": e.example.label, **s.to_dict()} for e, s in zip(chunk, scores)]
        return recs, {"activation": act.numpy(), "matched": matched.numpy()}

    _run_stage(folder, "base", keys, max(cfg.batch_size, 8), base_fn, show_progress)
    base_samples = _stage_samples(folder, "base")
    scores_all = _scores_from_samples(encoded, base_samples, keys, cfg.rule)
    arrs = _stage_arrays(folder, "base", n)
    activation, matched = arrs["activation"], arrs["matched"]
    labels = np.array([e.label or "" for e in examples])

    # 2. attribution on the selection split (EAP-IG, KL metric, Yes/No partner as corrupted input)
    partners = pair_partner(encoded)
    usable = [i for i in sel_idx if i in partners and encoded[partners[i]].n_tokens == encoded[i].n_tokens]
    n_unequal = len(sel_idx) - len(usable)

    def attr_fn(idx: list[int]):
        batch = make_batch(engine, [encoded[usable[i]] for i in idx])
        base = make_batch(engine, [encoded[partners[usable[i]]] for i in idx])
        clean_logits = engine.run(batch).logits
        attr = integrated_gradients(engine, batch, kl_divergence_metric(clean_logits),
                                    points=("head_out", "q", "k", "v", "mlp_act"), steps=cfg.steps, baseline=base)
        sc = {p: s.detach().float().cpu() for p, s in attr.scores.items()}
        sc["mlp_act"] = sc["mlp_act"].sum(-1)
        recs = [{"kl_baseline": float(attr.metric_baseline[b])} for b in range(len(idx))]
        return recs, {p: v.numpy() for p, v in sc.items()}

    attribution = None
    pair_kl: list[float] = []
    if usable:
        _run_stage(folder, "attr", [keys[i] for i in usable], cfg.batch_size, attr_fn, show_progress)
        a = _stage_arrays(folder, "attr", len(usable))
        attribution = HeadAttribution(head_out=a["head_out"].mean(0), q=a["q"].mean(0), k=a["k"].mean(0),
                                      v=a["v"].mean(0), mlp=a["mlp_act"].mean(0), per_example=a["head_out"],
                                      n_examples=len(usable), baseline="pair",
                                      skipped=[keys[i] for i in sel_idx if i not in set(usable)])
        attr_samples = _stage_samples(folder, "attr")
        pair_kl = [float(attr_samples[keys[i]]["kl_baseline"]) for i in usable]
        for p in ("head_out", "q", "k", "v", "mlp"):
            folder.save_array(f"attribution_{p}", getattr(attribution, p))
    elif not have_given:
        raise WhiteboxError("no Yes/No pair of the selection split tokenizes to equal lengths, so attribution "
                            "has no corrupted input; give --true-heads/--false-heads or other tasks")

    sel = np.zeros(n, dtype=bool)
    sel[sel_idx] = True
    yes = labels == "Yes"
    gap_rows = sel if sel.any() else np.ones(n, dtype=bool)  # given heads: the gap over every example
    gap = activation[gap_rows & yes].mean(0) - activation[gap_rows & ~yes].mean(0)
    folder.save_array("activation_gap_yes_minus_no", gap)
    folder.save_array("activation_at_A", activation)
    folder.save_array("matched_QA", matched)
    if have_given:
        true_heads = parse_heads(cfg.true_heads) if cfg.true_heads else []
        false_heads = parse_heads(cfg.false_heads) if cfg.false_heads else []
        candidates = true_heads + false_heads
    else:
        assert attribution is not None
        candidates = attribution.ranked_heads(cfg.n_candidates)
        true_heads, false_heads = split_true_false(candidates, gap, n_true=cfg.n_true, n_false=cfg.n_false)
    for l, h in true_heads + false_heads:
        arch.check_layer(l)
        arch.check_head(h)
    warnings = [] if have_given else selection_warnings(
        [scores_all[i].prediction for i in sel_idx], pair_kl, n_unequal, bool(true_heads or false_heads))
    for w in warnings:
        folder.log(f"warning: {w}")
    folder.log(f"True heads {format_heads(true_heads)}, False heads {format_heads(false_heads)}")

    # 3. interventions on the report split, each a resumable stage of after-scores
    rep_keys = [keys[i] for i in rep_idx]
    rep_enc = [encoded[i] for i in rep_idx]
    before = [scores_all[i] for i in rep_idx]

    def intervention_stage(name: str, make: Callable[[list[EncodedExample]], list[ExampleScore]]) -> dict:
        def fn(idx: list[int]):
            chunk = [rep_enc[i] for i in idx]
            pos = iv.edit_positions(chunk, pat, cfg.edit_at)
            return [{**s.to_dict(), "edit_positions": p} for s, p in zip(make(chunk), pos)], {}
        _run_stage(folder, name, rep_keys, cfg.batch_size, fn, show_progress)
        after = _scores_from_samples(rep_enc, _stage_samples(folder, name), rep_keys, cfg.rule)
        return iv.InterventionResult(name, before, after).summary()

    def tf_stage(name: str, t_heads: Sequence[Head], f_heads: Sequence[Head], inverse: bool) -> dict:
        return intervention_stage(name, lambda ch: iv.true_false_scores(
            engine, ch, t_heads, f_heads, inverse=inverse, pattern=cfg.pattern, batch_size=cfg.batch_size,
            rule=cfg.rule, at=cfg.edit_at))

    both = list(dict.fromkeys(true_heads + false_heads))
    interventions: dict[str, dict] = {}
    control: dict[str, Any] = {}
    if both:
        interventions["true_false"] = tf_stage("tf", true_heads, false_heads, False)
        interventions["inverse_true_false"] = tf_stage("inv", true_heads, false_heads, True)
        for kind in iv.KINDS:
            edits_for = iv.intervention_edits(engine, kind, both, pat, cfg.edit_at)
            interventions[f"{kind}_{pat.text}"] = intervention_stage(kind, lambda ch, e=edits_for: score_examples(
                engine, ch, batch_size=cfg.batch_size, rule=cfg.rule, edits_for=e))
        # random heads of the same count and layer band: the True/False intervention's control
        band, sets = random_head_draws(both, (arch.n_layers, arch.n_heads), cfg.random_draws, cfg.seed)
        draws = []
        for d, heads_d in enumerate(sets):
            t_d, f_d = heads_d[:len(true_heads)], heads_d[len(true_heads):]
            summ = tf_stage(f"rand{d}", t_d, f_d, False)
            draws.append({"true_heads": [list(h) for h in t_d], "false_heads": [list(h) for h in f_d],
                          "summary": summ})
        control = {"layer_band": list(band), "n_heads": len(both), "draws": draws,
                   "note": None if sets or cfg.random_draws == 0 else "the layer band has too few other heads"}
        if draws:
            control["comparison"] = random_control(interventions["true_false"], [d["summary"] for d in draws])

    # 4. plots (report split)
    if true_heads and false_heads:
        t_act = np.mean([activation[rep_idx, l, h] for l, h in true_heads], axis=0)
        f_act = np.mean([activation[rep_idx, l, h] for l, h in false_heads], axis=0)
        plots.plot_true_false_scatter(t_act, f_act, list(labels[rep_idx]), folder.plot_path("true_false_scatter"),
                                      title=f"True vs False heads ({cfg.model}, report split)")
    if attribution is not None:
        plots.plot_head_heatmap(attribution.head_out, folder.plot_path("attribution_head_out"),
                                f"EAP-IG (KL) head_out attribution ({cfg.model}, selection split)",
                                {"True": true_heads, "False": false_heads})
    plots.plot_head_heatmap(gap, folder.plot_path("activation_gap"),
                            "activation at A: mean(Yes) - mean(No)", {"True": true_heads, "False": false_heads})
    if interventions:
        plots.plot_interventions(interventions, folder.plot_path("interventions"),
                                 title=f"interventions on True/False heads ({cfg.model}, report split)")

    # 5. truth probes
    probes: dict[str, dict] = {}
    for path in cfg.probe_data:
        probes[Path(path).name] = run_probe_stage(folder, engine, path, true_heads + false_heads, cfg, show_progress)

    res: dict[str, Any] = {
        "n_examples": n, "tasks": [t.task_id for t in tasks],
        "true_heads": [list(h) for h in true_heads], "false_heads": [list(h) for h in false_heads],
        "heads_given": have_given,
        "split": {"selection": [keys[i] for i in sel_idx], "report": rep_keys,
                  "fraction": None if have_given else cfg.select_fraction, "seed": cfg.seed,
                  "unit": "Yes/No pair (both examples of a loop on one side)"},
        "selection": {"n_examples": len(sel_idx), "attribution_examples": len(usable),
                      "unequal_length_dropped": n_unequal,
                      "answers": {a: sum(scores_all[i].prediction == a for i in sel_idx)
                                  for a in sorted({scores_all[i].prediction for i in sel_idx})},
                      "pair_kl": None if not pair_kl else {"median": float(np.median(pair_kl)),
                                                          "min": float(np.min(pair_kl)),
                                                          "max": float(np.max(pair_kl))},
                      "max_abs_head_attribution": None if attribution is None
                      else float(np.max(np.abs(attribution.head_out))),
                      "warnings": warnings, "reliable": not warnings},
        "candidates": [{"head": list(h), "attribution": None if attribution is None else float(attribution.head_out[h]),
                        "activation_gap_yes_minus_no": float(gap[h]),
                        "mean_matched_QA": float(np.nanmean(matched[:, h[0], h[1]]))} for h in candidates],
        "attribution_examples": 0 if attribution is None else attribution.n_examples,
        "attribution_top_mlp_layers": [] if attribution is None else
        [int(i) for i in np.argsort(-np.abs(attribution.mlp))[:5]],
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


def first_token_note(tokenizer: Any) -> dict:
    """Which token head activation treats as "the first" (sec. 5): a BOS the tokenizer adds,
    or, for tokenizers that add none (SmolLM2), the prompt's own first word."""
    ids = tokenizer("x", add_special_tokens=True)["input_ids"]
    bos = getattr(tokenizer, "bos_token_id", None)
    is_bos = bool(ids) and bos is not None and ids[0] == bos
    return {"adds_bos": is_bos,
            "note": "the first token is the BOS token" if is_bos else
            "this tokenizer adds no BOS: the first token (excluded from head activation as the attention "
            "sink) is the prompt's first word"}


def run_probe_stage(folder: RunFolder, engine: Engine, path: str, heads: Sequence[Head],
                    cfg: "GARHeadsConfig | GARProbeConfig", show_progress: bool | None) -> dict:
    """Features (streamed, resumable) then the App. E MLP probe on one SNLI / GoT file, with
    its majority baseline and a random-heads control.

    Features are taken for every head of the selected heads' layer band, so that the
    control (``random_draws`` sets of as many random heads from that band, never a
    selected one) reuses the same pass.  Protocol: an SNLI file with at least 9,000
    entailment/contradiction pairs gets App. E's 3,000/3,000/3,000 split x 5 seeds;
    anything else k-fold cross-validation (App. E's GoT protocol), and the result says which."""
    from whitebox_eval.gar.probe import (SNLI_SPLIT, ProbeConfig, cross_validate_probe, load_truth_statements,
                                         split_probe, truth_features)

    if not heads:
        raise WhiteboxError("the truth probe needs heads; none were found or given")
    statements = load_truth_statements(path, limit=cfg.probe_limit, seed=cfg.seed, on_bad_row=cfg.on_bad_row)
    if statements.bad_rows:
        folder.log(f"skipped {len(statements.bad_rows)} malformed row(s): " + "; ".join(statements.bad_rows))
    stage = "probe-" + re.sub(r"[^A-Za-z0-9_-]+", "_", Path(path).stem)
    keys = [f"{i}" for i in range(len(statements))]
    lo, hi = min(l for l, _ in heads), max(l for l, _ in heads)
    band = [(l, h) for l in range(lo, hi + 1) for h in range(engine.arch.n_heads)]
    col = {h: i for i, h in enumerate(band)}

    def fn(idx: list[int]):
        x = truth_features(engine, [statements[i] for i in idx], band, batch_size=len(idx))
        return [{"label": statements[i].label, "source": statements[i].source} for i in idx], {"features": x}

    _run_stage(folder, stage, keys, max(cfg.batch_size, 8), fn, show_progress)
    x_band = _stage_arrays(folder, stage, len(statements))["features"]
    y = np.array([s.label for s in statements])
    x = x_band[:, [col[h] for h in heads]]
    folder.save_array(f"{stage}_features", x)
    pcfg = ProbeConfig(folds=cfg.probe_folds, seed=cfg.seed)
    snli = Path(path).suffix.lower() in (".jsonl", ".json")
    if snli and len(y) >= 3 * SNLI_SPLIT:
        probe, note = (lambda xx: split_probe(xx, y, pcfg)), None
    else:
        probe = lambda xx: cross_validate_probe(xx, y, pcfg)  # noqa: E731
        note = (f"App. E's SNLI protocol (3,000/3,000/3,000 x 5 seeds) needs {3 * SNLI_SPLIT} "
                f"entailment/contradiction pairs; this file gives {len(y)}: cross-validation instead") if snli else None
    result = probe(x).to_dict()
    _, sets = random_head_draws(list(heads), (engine.arch.n_layers, engine.arch.n_heads),
                                getattr(cfg, "random_draws", 5), cfg.seed)
    draws = [probe(x_band[:, [col[h] for h in hs]]).to_dict()["acc"] for hs in sets]
    control = None if not draws else {**stats.draws(draws).as_dict(), "layer_band": [lo, hi],
                                      "heads": [[list(h) for h in hs] for hs in sets]}
    return {**result, "file": str(path), "heads": [list(h) for h in heads], "protocol_note": note,
            "random_heads": control}


# --------------------------------------------------------------------------- chosen-head interventions


@dataclass
class GARInterveneConfig(_GARRun):
    """Strong / weak / knock-out interventions on chosen heads (sec. 5, fig. 4)."""

    tasks: str = "truth"
    limit: int | None = None
    heads: str = ""
    pattern: str = "V->E"
    edit_at: str = "read"
    rule: str = "chance"

    MODE: ClassVar[str] = "intervene"


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
    folder = RunFolder.create(output, cfg.to_dict(), run_id=run_id, resume=resume)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = Engine(loaded)
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

    def base_fn(idx: list[int]):
        chunk = [encoded[i] for i in idx]
        m = matched_attention(engine, chunk, [pat.text], batch_size=len(chunk)).weights[:, 0]
        return [s.to_dict() for s in score_batch(engine, chunk, rule=cfg.rule)], {"matched": m}

    _run_stage(folder, "base", keys, cfg.batch_size, base_fn, show_progress)
    before = _scores_from_samples(encoded, _stage_samples(folder, "base"), keys, cfg.rule)
    matched = _stage_arrays(folder, "base", len(keys))["matched"]
    folder.save_array(f"matched_{re.sub(r'[^A-Za-z0-9]+', '_', pat.text)}", matched)
    results: dict[str, dict] = {}
    for kind in iv.KINDS:
        edits_for = iv.intervention_edits(engine, kind, heads, pat, cfg.edit_at)

        def fn(idx: list[int], e=edits_for):
            chunk = [encoded[i] for i in idx]
            pos = iv.edit_positions(chunk, pat, cfg.edit_at)
            return [{**s.to_dict(), "edit_positions": p} for s, p in
                    zip(score_batch(engine, chunk, edits_for=e, rule=cfg.rule), pos)], {}

        _run_stage(folder, kind, keys, cfg.batch_size, fn, show_progress)
        after = _scores_from_samples(encoded, _stage_samples(folder, kind), keys, cfg.rule)
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


def intervention_headline(res_before: Sequence[ExampleScore], interventions: Mapping[str, dict]) -> dict:
    """Headline keys: before and after each intervention, the paper's rule (``acc``), argmax
    accuracy (``acc_argmax``), mean P(target) (``p_target``), each with its interval, and the
    number of flipped predictions (``flips``); filters name the condition."""
    from whitebox_eval.gar.metrics import score_metrics

    head: dict[str, Any] = {}
    conds = [("before", score_metrics(res_before))] + [(k, v["after"]) for k, v in interventions.items()]
    for cond, m in conds:
        for key, name in (("acc,appc", "acc"), ("acc,argmax", "acc_argmax"), ("p_target", "p_target")):
            if key in m:
                stats.add_estimate(head, f"{name},{cond}", _estimate(m, key))
    for k, v in interventions.items():
        head[f"flips,{k}"] = v["predictions_changed"]
    return head


# --------------------------------------------------------------------------- probe only


@dataclass
class GARProbeConfig(_GARRun):
    """App. E truth probe on chosen heads."""

    heads: str = ""
    probe_data: tuple[str, ...] = ()
    probe_limit: int | None = None
    probe_folds: int = 5
    random_draws: int = 5
    on_bad_row: str = "skip"

    MODE: ClassVar[str] = "probe"


def run_gar_probe(cfg: GARProbeConfig, output: str | Path = "runs", *, run_id: str | None = None,
                  resume: bool = False, loaded: LoadedModel | None = None,
                  show_progress: bool | None = None) -> RunFolder:
    """Cross-validated truth probe on ``cfg.heads``' activations for each probe file."""
    from whitebox_eval.gar.heads import parse_heads

    heads = parse_heads(cfg.heads)
    if not cfg.probe_data:
        raise WhiteboxError("give at least one --probe-data file (SNLI .jsonl or Geometry of Truth .csv)")
    folder = RunFolder.create(output, cfg.to_dict(), run_id=run_id, resume=resume)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = Engine(loaded)
    probes = {Path(p).name: run_probe_stage(folder, engine, p, heads, cfg, show_progress) for p in cfg.probe_data}
    folder.save_results({"heads": [list(h) for h in heads], "probes": probes,
                         "headline": {f"probe,{k}": v["acc"] for k, v in probes.items()}})
    return folder


# --------------------------------------------------------------------------- heads per task


@dataclass
class GARAttributeConfig(_GARRun):
    """EAP-IG head ranking per task and the heads the tasks share (sec. 4)."""

    MODE: ClassVar[str] = "attribute"
    tasks: str = "truth"
    limit: int | None = None
    steps: int = 5
    top: int = 10
    batch_size: int = 4


def attribution_baseline(task: GARTask) -> str:
    """Classification tasks use each example's Yes/No partner as the corrupted input;
    generation tasks have no partner, so they walk from zero input embeddings."""
    return "pair" if task.g2c else "zero"


def shared_heads(rankings: Mapping[str, Sequence[Head]]) -> list[dict]:
    """Heads in the top lists of several tasks, most shared first: the reused core of
    the task circuits (sec. 4: circuits compared across tasks)."""
    count: dict[Head, list[str]] = defaultdict(list)
    for task_id, heads in rankings.items():
        for h in heads:
            count[tuple(h)].append(task_id)
    ordered = sorted(count.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [{"head": list(h), "n_tasks": len(ts), "tasks": ts} for h, ts in ordered if len(ts) > 1]


def run_gar_attribute(cfg: GARAttributeConfig, output: str | Path = "runs", *, run_id: str | None = None,
                      resume: bool = False, loaded: LoadedModel | None = None,
                      show_progress: bool | None = None) -> RunFolder:
    """Rank heads per task by EAP-IG (KL metric) and list the heads several tasks share.

    Resumable per task: each finished task is one sample (its top heads) and one array
    part (mean head_out / q / k / v attribution [L, H] and MLP [L])."""
    from whitebox_eval.gar import plots
    from whitebox_eval.gar.heads import attribute_heads

    if cfg.top < 1:
        raise WhiteboxError(f"--top must be >= 1 (got {cfg.top})")
    tasks = select_tasks(cfg.tasks, include_kr=False)
    folder = RunFolder.create(output, cfg.to_dict(), run_id=run_id, resume=resume)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = Engine(loaded)
    parts = folder.path / "arrays" / "parts" / "attribute"
    parts.mkdir(parents=True, exist_ok=True)
    ids = [t.task_id for t in tasks]
    folder.log(f"attribute: {len(tasks)} tasks, model {cfg.model}")
    for chunk in progress(folder.iterate_pending(list(range(len(tasks))), ids, 1), total=folder.count_pending(ids),
                          desc="tasks", enabled=show_progress):
        (task_id, k), = chunk
        task = tasks[k]
        encoded = encode_examples(task_examples([task], cfg.limit, cfg.seed), loaded.tokenizer)
        attr = attribute_heads(engine, encoded, baseline=attribution_baseline(task), steps=cfg.steps,
                               batch_size=cfg.batch_size)
        write_part(parts / f"{k:05d}.npz", head_out=attr.head_out, q=attr.q, k=attr.k, v=attr.v, mlp=attr.mlp)
        top = attr.ranked_heads(cfg.top)
        folder.append_samples([{"id": task_id, "baseline": attr.baseline, "n_examples": attr.n_examples,
                                "skipped": attr.skipped,
                                "top_heads": [{"head": list(h), "head_out": float(attr.head_out[h])} for h in top]}])
    samples = {s["id"]: s for s in folder.read_samples()}
    head_out = np.stack([np.load(parts / f"{k:05d}.npz")["head_out"] for k in range(len(tasks))])
    folder.save_array("attribution_head_out_per_task", head_out)
    rankings = {t: [tuple(x["head"]) for x in samples[t]["top_heads"]] for t in ids}
    shared = shared_heads(rankings)
    union = list(dict.fromkeys(h for t in ids for h in rankings[t]))
    plots.plot_task_heads(head_out, ids, union, folder.plot_path("attribution_per_task"),
                          title=f"|EAP-IG head_out attribution| per task, top {cfg.top} of each ({cfg.model})")
    mean = head_out.mean(0)
    plots.plot_head_heatmap(mean, folder.plot_path("attribution_mean"), f"mean EAP-IG head_out attribution ({cfg.model})",
                            {"shared": [tuple(s["head"]) for s in shared[:10]]})
    res = {"n_tasks": len(tasks), "tasks": {t: samples[t] for t in ids}, "shared_heads": shared,
           "top": cfg.top, "headline": {"n_shared_heads": len(shared),
                                        "max_tasks_sharing_a_head": max((s["n_tasks"] for s in shared), default=1)}}
    folder.save_results(res)
    return folder
