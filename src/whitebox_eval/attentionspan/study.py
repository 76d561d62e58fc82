"""An AttentionSpan study (paper 003): evaluate, optionally fine-tune, optionally reinforce.

Stages, each streamed to ``samples.jsonl`` (one line per example, id
``<stage>/<index>``) so an interrupted run resumes where it stopped:

1. ``base/<split>``: teacher-forced accuracy and partial accuracy (table 1), attention
   rollout and its reference score per target token (sec. 4, App. C), optionally free
   greedy generation, for the ID and/or OOD split (App. F).
2. With fine-tuning (App. E): train on fresh ID examples (checkpoint in
   ``checkpoints/final``; a finished checkpoint is reloaded on resume instead of
   training again), then ``finetuned/<split>``: the same evaluation after training.
3. With reinforcement (sec. 5.1, App. G; protocol in
   :mod:`whitebox_eval.attentionspan.protocol`): key heads from ``key_samples`` ID
   examples (``arrays/key_head_scores.npy``); ``select/<setting>``: the top-N key heads
   x C grid (and no intervention) on ``select_limit`` OOD *selection* examples; the best
   point is then scored on the study's OOD examples (the *evaluation* split) as
   ``reinforce/key-...`` beside ``reinforce/shifted-...`` (same heads on the wrong,
   neighbouring cell) and ``reinforce/random<d>-...`` (N random non-key heads from the
   key heads' layer band). With ``reinforce_generation`` the model also writes its
   answers freely under the chosen reinforcement (``generate/...``). ``splits.json``
   lists the inputs of the key-head, selection and evaluation examples.

``finalize`` turns the samples into ``results.json`` (table 1 and table 2 numbers per
stage with intervals, the reinforcement report with paired tests, headline numbers)
and plots: rollout heatmaps with the reference mask outlined, and OOD accuracy vs
input length with and without reinforcement.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from whitebox_eval.attentionspan import plots, protocol
from whitebox_eval.attentionspan.evaluation import (
    generate_greedy,
    generate_greedy_edited,
    generation_scores,
    generation_verdicts,
    summarize,
    teacher_forced_pass,
)
from whitebox_eval.attentionspan.metrics import generation_correctness, generation_exact
from whitebox_eval.attentionspan.finetune import (
    CHECKPOINT_WEIGHTS,
    FinetuneConfig,
    finetune,
    load_checkpoint_weights,
)
from whitebox_eval.attentionspan.reinforcement import (
    CONTROL_RULE,
    FEWER_HEADS,
    MODES,
    KeyHeads,
    Reinforcement,
    find_key_heads,
)
from whitebox_eval.attentionspan.tasks import SPLIT_CHOICES, TASKS, SpanExample, generate
from whitebox_eval.attentionspan.tokenization import TokenizedExample, tokenize_example
from whitebox_eval import controls, stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder, config_dict, open_run
from whitebox_eval.runs.passes import run_pass


#: Short task instructions (App. D: "instruction prompt", wording not given in the paper).
INSTRUCTIONS = {
    "string_reversal": "Reverse the string.",
    "long_addition": "Add the numbers. Digits are written least significant first.",
    "long_multiplication": "Multiply the numbers, writing each partial product and then "
                           "the result. Digits are written least significant first.",
    "flip_flop": "Output the bit stored in the register read last.",
    "value_assignment": "Translate the string using the table.",
    "successor": "Continue the series.",
}

#: Seed offsets: evaluation, training, key-head, demonstration and selection examples
#: never share a stream.
TRAIN_SEED, KEY_SEED, DEMO_SEED, SELECT_SEED = 1_000_000, 2_000_000, 3_000_000, 4_000_000

#: Free generation under reinforcement goes through this one function (switch here to
#: a cached implementation; signature ``(engine, tokenized, edits_for) -> list[str]``).
edited_generation = generate_greedy_edited


@dataclass
class SpanConfig:
    """Everything that determines an AttentionSpan study's numbers (written to config.yaml)."""

    model: str = "smollm2-135m"
    task: str = "string_reversal"
    split: str = "ood"
    limit: int = 100
    id_params: dict[str, Any] = field(default_factory=dict)
    ood_params: dict[str, Any] = field(default_factory=dict)
    instruction: str | None = None
    shots: int = 0
    append_eos: bool = True
    generation: bool = False
    rollout: bool = True
    heatmaps: int = 2
    test: str = "welch"
    finetune_examples: int = 0
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)
    reinforce: bool = False
    key_samples: int = 30
    select_limit: int = 50
    """OOD examples, disjoint from the evaluated ones, on which N and C are chosen."""
    heads: tuple[int, ...] = (5, 10, 20)
    values: tuple[float, ...] = (0.3, 1.0)
    mode: str = "standard"
    threshold: float = 0.05
    random_draws: int = 5
    shift: int = 1
    """Shifted-reference control: reference columns moved by this many tokens."""
    reinforce_generation: bool = False
    """Also generate freely under the chosen reinforcement (and its controls)."""
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def to_dict(self) -> dict:
        return config_dict(self, "span")

    @property
    def splits(self) -> list[str]:
        return ["id", "ood"] if self.split == "both" else [self.split]

    def check(self) -> None:
        if self.task not in TASKS:
            raise WhiteboxError(f"unknown task {self.task!r}; choose one of {', '.join(sorted(TASKS))}")
        if self.split not in SPLIT_CHOICES:
            raise WhiteboxError(f"split must be one of {SPLIT_CHOICES}; got {self.split!r}")
        if self.limit < 1:
            raise WhiteboxError("limit must be at least 1 example per split")
        if self.mode not in MODES:
            raise WhiteboxError(f"reinforcement mode must be one of {MODES}; got {self.mode!r}")
        if self.reinforce and "ood" not in self.splits:
            raise WhiteboxError("reinforcement is evaluated on OOD examples: use --split ood or both")
        if self.reinforce and (not self.heads or not self.values):
            raise WhiteboxError("reinforcement needs at least one head count (--heads) and one C (--values)")
        if self.reinforce and self.select_limit < 1:
            raise WhiteboxError("N and C are chosen on a selection split: give --select-limit >= 1")
        if self.reinforce and self.random_draws < 2:
            raise WhiteboxError("the random-head control needs at least 2 draws for a mean and sd "
                                "(--random-draws; 5 or more recommended)")
        if self.reinforce and self.shift < 1:
            raise WhiteboxError("the shifted-reference control needs --shift >= 1")
        if self.reinforce_generation and not self.reinforce:
            raise WhiteboxError("generation under reinforcement needs --reinforce")
        if self.finetune_examples < 0:
            raise WhiteboxError("finetune_examples must be >= 0 (0 = no fine-tuning)")
        self.finetune.check()

    def params_for(self, split: str) -> dict[str, Any]:
        return dict(self.id_params if split == "id" else self.ood_params)


# --------------------------------------------------------------------------- data


def instruction_text(cfg: SpanConfig) -> str:
    text = INSTRUCTIONS.get(cfg.task, "") if cfg.instruction is None else cfg.instruction
    return text + "\n" if text and not text.endswith("\n") else text


def make_examples(cfg: SpanConfig, split: str, n: int, seed_offset: int = 0) -> list[SpanExample]:
    """``n`` examples of the configured task and split (App. F config + overrides)."""
    return generate(cfg.task, n, split, seed=cfg.seed + seed_offset, **cfg.params_for(split))


def tokenize_all(cfg: SpanConfig, tokenizer, examples: Sequence[SpanExample]) -> list[TokenizedExample]:
    """Character-level layout with the instruction and ``shots`` ID demonstrations (App. D)."""
    demos = make_examples(cfg, "id", cfg.shots, DEMO_SEED) if cfg.shots else []
    return [tokenize_example(e, tokenizer, instruction=instruction_text(cfg), few_shot=demos,
                             append_eos=cfg.append_eos) for e in examples]


def fresh_examples(cfg: SpanConfig, split: str, n: int, seed_offset: int,
                   exclude: Sequence[SpanExample], what: str) -> list[SpanExample]:
    """``n`` examples of ``split`` from their own seed stream, none equal to an excluded one."""
    seen = {e.text for e in exclude}
    out: list[SpanExample] = []
    batch = 0
    while len(out) < n:
        fresh = generate(cfg.task, n, split, seed=f"{cfg.seed + seed_offset}-{batch}",
                         **cfg.params_for(split))
        out += [e for e in fresh if e.text not in seen]
        batch += 1
        if batch > 50:
            raise WhiteboxError(f"could not draw {n} {what} examples distinct from the "
                                "evaluation ones; widen the parameters or ask for fewer")
    return out[:n]


def training_examples(cfg: SpanConfig, exclude: Sequence[SpanExample]) -> list[SpanExample]:
    """``finetune_examples`` fresh ID examples, none equal to an evaluation example."""
    return fresh_examples(cfg, "id", cfg.finetune_examples, TRAIN_SEED, exclude, "training")


# ----------------------------------------------------------------------- records


def _rounded(values: np.ndarray | None, digits: int = 5) -> list | None:
    if values is None:
        return None
    return [None if (isinstance(v, float) and math.isnan(v)) or v != v else round(float(v), digits)
            for v in np.asarray(values, dtype=np.float64)]


def _stage_file_name(stage: str) -> str:
    return stage.replace("/", "_").replace(".", "p")


def _score_stage(folder: RunFolder, engine: Engine, lm: LoadedModel, cfg: SpanConfig, stage: str,
                 split: str, tokenized: Sequence[TokenizedExample], *,
                 reinforcement: Reinforcement | None = None, rollout: bool = False,
                 generation: str | None = None, show_progress: bool | None = None) -> None:
    """Evaluate the pending examples of one stage and stream their records.

    ``generation``: None (teacher-forced only), ``"plain"`` (also free greedy generation
    with ``lm.model.generate``) or ``"edited"`` (free greedy generation through
    :data:`edited_generation` under ``reinforcement``).
    """
    ids = [f"{stage}/{i}" for i in range(len(tokenized))]
    edits_for = reinforcement.edits if reinforcement is not None else None

    def score(chunk: list[int]):
        toks = [tokenized[i] for i in chunk]
        keep = [i < cfg.heatmaps for i in chunk]
        scores = teacher_forced_pass(engine, toks, edits_for=edits_for, rollout=rollout,
                                     keep_rollout=keep)
        if generation == "edited":
            gens = edited_generation(engine, toks, edits_for)
        else:
            gens = generate_greedy(lm, toks) if generation else None
        gen_correct = generation_scores(gens, toks) if gens is not None else None
        gen_exact = generation_verdicts(gens, toks) if gens is not None else None
        records = []
        for j, (i, tok, s) in enumerate(zip(chunk, toks, scores)):
            if s.rollout is not None:
                folder.save_array(f"rollout_{_stage_file_name(stage)}_{i}", s.rollout)
            ex = tok.example
            rec = {
                "id": ids[i], "stage": stage, "split": split, "index": i,
                "input": ex.input, "target": ex.target, "input_length": len(ex.input),
                "predicted": lm.tokenizer.decode(s.predicted.tolist()) if hasattr(lm.tokenizer, "decode") else None,
                "correct": [int(c) for c in s.correct], "exact": s.exact, "partial": round(s.partial, 5),
                "rollout_scores": _rounded(s.rollout_scores),
            }
            if gens is not None:
                rec["generated"] = gens[j]
                rec["generation_correct"] = [int(c) for c in gen_correct[j]]
                rec["generation_exact"] = bool(gen_exact[j])
            records.append(rec)
        return records, {}

    run_pass(folder, _stage_file_name(stage), ids, cfg.batch_size, score, desc=stage, show_progress=show_progress)


def _key_heads(folder: RunFolder, engine: Engine, cfg: SpanConfig, tokenizer,
               key_examples: Sequence[SpanExample]) -> KeyHeads:
    """App. G step 1, reloaded from ``arrays/key_head_scores.npy`` on resume."""
    from whitebox_eval.attentionspan.metrics import rank_key_heads

    path = folder.path / "arrays" / "key_head_scores.npy"
    if path.is_file():
        scores = folder.load_array("key_head_scores")
        return KeyHeads(scores, rank_key_heads(scores), cfg.key_samples)
    key_tok = tokenize_all(cfg, tokenizer, key_examples)
    heads = find_key_heads(engine, key_tok, batch_size=cfg.batch_size)
    folder.save_array("key_head_scores", heads.scores)
    return heads


SPLITS_FILE = "splits.json"


def reinforcement_splits(cfg: SpanConfig, evaluated: Mapping[str, Sequence[SpanExample]]
                         ) -> dict[str, list[SpanExample]]:
    """The reinforcement protocol's three example sets, pairwise disjoint:
    ``key_heads`` (ID, App. G step 1), ``selection`` (OOD, choose N and C) and
    ``evaluation`` (the study's OOD examples, reported)."""
    all_eval = [e for exs in evaluated.values() for e in exs]
    selection = fresh_examples(cfg, "ood", cfg.select_limit, SELECT_SEED, all_eval, "selection")
    key = fresh_examples(cfg, "id", cfg.key_samples, KEY_SEED, all_eval + selection, "key-head")
    return {"key_heads": key, "selection": selection, "evaluation": list(evaluated["ood"])}


def _write_splits(folder: RunFolder, splits: Mapping[str, Sequence[SpanExample]], cfg: SpanConfig) -> None:
    """``splits.json``: size, split, seed stream, example ids and inputs of each set."""
    where = {"key_heads": ("id", KEY_SEED, "key"), "selection": ("ood", SELECT_SEED, "select"),
             "evaluation": ("ood", 0, "ood")}
    out = {}
    for name, exs in splits.items():
        split, offset, prefix = where[name]
        out[name] = {"n": len(exs), "split": split, "seed": cfg.seed + offset,
                     "ids": [f"{prefix}/{i}" for i in range(len(exs))],
                     "inputs": [e.input for e in exs]}
    texts = {k: {e.text for e in v} for k, v in splits.items()}
    names = sorted(texts)
    out["overlap"] = {f"{a}&{b}": len(texts[a] & texts[b])
                      for i, a in enumerate(names) for b in names[i + 1:]}
    (folder.path / SPLITS_FILE).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


def _records_by_stage(folder: RunFolder) -> dict[str, list[dict]]:
    by_stage: dict[str, list[dict]] = defaultdict(list)
    for rec in folder.read_samples():
        by_stage[rec["stage"]].append(rec)
    for recs in by_stage.values():
        recs.sort(key=lambda r: r["index"])
    return by_stage


def selection_grid(cfg: SpanConfig, by_stage: Mapping[str, list[dict]]) -> list[dict]:
    """The key-head grid's selection-split accuracies (:func:`protocol.selection_table`)."""
    return protocol.selection_table(
        [(n, c, by_stage[f"select/{protocol.label('key', n, c, cfg.mode)}"])
         for n in cfg.heads for c in cfg.values])


def evaluation_settings(cfg: SpanConfig, heads: KeyHeads, n: int, c: float, n_layers: int,
                        n_heads: int) -> list[tuple[str, int | None, Reinforcement]]:
    """(source, seed, reinforcement) of the chosen point and its controls on the evaluation split."""
    key = tuple(heads.top(n))
    r = lambda hs, source, d=None: Reinforcement(  # noqa: E731
        tuple(hs), c, cfg.mode, cfg.threshold, protocol.label(source, n, c, cfg.mode, d),
        cells="shifted" if source == "shifted" else "reference", shift=cfg.shift)
    out = [("key", None, r(key, "key")), ("shifted", None, r(key, "shifted"))]
    drawn = controls.random_heads(key, (n_layers, n_heads), cfg.random_draws, cfg.seed, CONTROL_RULE, fix=FEWER_HEADS)
    for d, hs in enumerate(drawn):
        out.append(("random", controls.draw_seed(cfg.seed, d), r(hs, "random", d)))
    return out


# ---------------------------------------------------------------------------- run


def run_span(cfg: SpanConfig, output: str | Path = "runs", *, run_id: str | None = None,
             resume: bool = False, loaded: LoadedModel | None = None,
             show_progress: bool | None = None) -> RunFolder:
    """Run (or resume) an AttentionSpan study and write its run folder."""
    cfg.check()
    folder = open_run(output, cfg.to_dict(), run_id=run_id, resume=resume)
    lm = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = Engine(lm)
    examples = {s: make_examples(cfg, s, cfg.limit) for s in cfg.splits}
    tokenized = {s: tokenize_all(cfg, lm.tokenizer, ex) for s, ex in examples.items()}
    folder.log(f"task {cfg.task}, splits {cfg.splits}, {cfg.limit} examples each, model {cfg.model}")

    def evaluate(phase: str) -> None:
        for split in cfg.splits:
            _score_stage(folder, engine, lm, cfg, f"{phase}/{split}", split, tokenized[split],
                         rollout=cfg.rollout, generation="plain" if cfg.generation else None,
                         show_progress=show_progress)

    evaluate("base")
    if cfg.finetune_examples:
        ckpt = folder.path / "checkpoints" / "final"
        if (ckpt / CHECKPOINT_WEIGHTS).is_file():
            folder.log(f"loading the finished fine-tuning checkpoint {ckpt}")
            load_checkpoint_weights(lm, ckpt)
        else:
            train = tokenize_all(cfg, lm.tokenizer, training_examples(cfg, sum(examples.values(), [])))
            folder.log(f"fine-tuning on {len(train)} ID examples ({cfg.finetune})")
            def log_step(step: int, loss: float) -> None:
                if step % 25 == 0:
                    folder.log(f"fine-tuning step {step}: loss {loss:.4f}")

            result = finetune(lm, train, cfg.finetune, checkpoint_dir=folder.path / "checkpoints",
                              on_step=log_step)
            folder.save_array("finetune_losses", np.asarray(result.losses))
            folder.log(f"fine-tuning done: {result.summary()}")
        evaluate("finetuned")
    if cfg.reinforce:
        _reinforce(folder, engine, lm, cfg, examples, tokenized["ood"], show_progress)
    return finalize(folder, cfg, tokenized)


def _reinforce(folder: RunFolder, engine: Engine, lm: LoadedModel, cfg: SpanConfig,
               examples: Mapping[str, list[SpanExample]], evaluation: list[TokenizedExample],
               show_progress: bool | None) -> None:
    """Key heads, the N x C grid on the selection split, the chosen point and its
    controls on the evaluation split (:mod:`protocol`)."""
    splits = reinforcement_splits(cfg, examples)
    _write_splits(folder, splits, cfg)
    heads = _key_heads(folder, engine, cfg, lm.tokenizer, splits["key_heads"])
    selection = tokenize_all(cfg, lm.tokenizer, splits["selection"])
    _score_stage(folder, engine, lm, cfg, "select/none", "select", selection, show_progress=show_progress)
    for n in cfg.heads:
        for c in cfg.values:
            label = protocol.label("key", n, c, cfg.mode)
            r = Reinforcement(tuple(heads.top(n)), c, cfg.mode, cfg.threshold, label)
            _score_stage(folder, engine, lm, cfg, f"select/{label}", "select", selection,
                         reinforcement=r, show_progress=show_progress)
    chosen = protocol.choose_setting(selection_grid(cfg, _records_by_stage(folder)))
    n, c = chosen["n_heads"], chosen["value"]
    folder.log(f"chosen on the selection split: top-{n} key heads, C={c:g}")
    settings = evaluation_settings(cfg, heads, n, c, engine.arch.n_layers, engine.arch.n_heads)
    for _, _, r in settings:
        _score_stage(folder, engine, lm, cfg, f"reinforce/{r.label}", "ood", evaluation,
                     reinforcement=r, show_progress=show_progress)
    if cfg.reinforce_generation:
        for stage, r in [("generate/none", None)] + [(f"generate/{r.label}", r)
                                                     for src, _, r in settings if src != "random"]:
            _score_stage(folder, engine, lm, cfg, stage, "ood", evaluation, reinforcement=r,
                         generation="edited", show_progress=show_progress)


# ------------------------------------------------------------------------ finalize


def _nan_array(values: list | None) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in (values or [])], dtype=np.float64)


def _stage_summary(records: list[dict], test: str) -> dict:
    correct = [np.asarray(r["correct"], dtype=bool) for r in records]
    has_rollout = all(r.get("rollout_scores") is not None for r in records)
    rollout = [_nan_array(r["rollout_scores"]) for r in records] if has_rollout else None
    has_gen = all("generated" in r for r in records)
    gen = [generation_correctness(r["generated"], r["target"]) for r in records] if has_gen else None
    exact = [generation_exact(r["generated"], r["target"]) for r in records] if has_gen else None
    return summarize(correct, rollout_scores=rollout, generation_correct=gen,
                     generation_exact=exact, test=test).to_dict()


def _length_bins(lengths: np.ndarray, max_bins: int = 8) -> list[tuple[int, int]]:
    uniq = np.unique(lengths)
    if len(uniq) <= max_bins:
        return [(int(u), int(u)) for u in uniq]
    edges = np.unique(np.quantile(lengths, np.linspace(0, 1, max_bins + 1)).round().astype(int))
    return [(int(edges[k]) + (k > 0), int(edges[k + 1])) for k in range(len(edges) - 1)]


def accuracy_by_length(records: list[dict], bins: list[tuple[int, int]], key: str = "exact") -> list[float]:
    """Exact-match accuracy (``key="exact"``, fig. 2) or partial accuracy
    (``key="partial"``) per input-length bin; NaN for an empty bin."""
    out = []
    for lo, hi in bins:
        hits = [float(r[key]) for r in records if lo <= r["input_length"] <= hi]
        out.append(float(np.mean(hits)) if hits else float("nan"))
    return out


def _expected_count(cfg: SpanConfig, stage: str) -> int:
    return cfg.select_limit if stage.startswith("select/") else cfg.limit


def finalize(folder: RunFolder, cfg: SpanConfig,
             tokenized: dict[str, list[TokenizedExample]] | None = None) -> RunFolder:
    """Summaries per stage, the reinforcement report, headline numbers and plots."""
    by_stage = _records_by_stage(folder)
    results: dict[str, Any] = {"task": cfg.task, "model": cfg.model, "n_per_split": cfg.limit,
                               "stages": {}}
    for stage, recs in by_stage.items():
        if len(recs) < _expected_count(cfg, stage):
            raise WhiteboxError(f"stage {stage} has {len(recs)} of {_expected_count(cfg, stage)} "
                                "samples; run again with --resume to finish it")
        results["stages"][stage] = _stage_summary(recs, cfg.test)
    phase = "finetuned" if cfg.finetune_examples else "base"
    headline: dict[str, Any] = {}
    for split in cfg.splits:
        recs = by_stage.get(f"{phase}/{split}")
        if recs:
            stats.add_proportion(headline, f"acc,{split}", protocol.exact_vector(recs))
            stats.add_mean(headline, f"partial,{split}", [float(r["partial"]) for r in recs])
    losses_path = folder.path / "arrays" / "finetune_losses.npy"
    if losses_path.is_file():
        losses = folder.load_array("finetune_losses")
        w = min(20, len(losses))
        results["finetune"] = {"steps": int(len(losses)), "loss_first": float(losses[:w].mean()),
                               "loss_last": float(losses[-w:].mean()), **cfg.finetune.to_dict(),
                               "examples": cfg.finetune_examples}
    if cfg.reinforce:
        _reinforcement_results(folder, cfg, by_stage, results, headline, phase)
    results["headline"] = headline
    folder.save_results(results)
    _heatmaps(folder, cfg, by_stage, tokenized)
    return folder


def _reinforcement_results(folder: RunFolder, cfg: SpanConfig, by_stage: dict[str, list[dict]],
                           results: dict, headline: dict, phase: str) -> None:
    """``results["reinforcement"]``: protocol, selection grid, the chosen point on the
    evaluation split beside its controls, paired tests; fig. 2 by input length."""
    from whitebox_eval.attentionspan.metrics import rank_key_heads

    scores = folder.load_array("key_head_scores")
    heads = KeyHeads(scores, rank_key_heads(scores), cfg.key_samples)
    splits = json.loads((folder.path / SPLITS_FILE).read_text(encoding="utf-8"))
    grid = selection_grid(cfg, by_stage)
    chosen = protocol.choose_setting(grid)
    n, c = chosen["n_heads"], chosen["value"]
    n_layers, n_heads = scores.shape
    settings = evaluation_settings(cfg, heads, n, c, n_layers, n_heads)
    recs = {r.label: by_stage[f"reinforce/{r.label}"] for _, _, r in settings}
    key_label, shifted_label = protocol.label("key", n, c, cfg.mode), protocol.label("shifted", n, c, cfg.mode)
    base_recs = by_stage[f"{phase}/ood"]
    randoms = [(seed, r.heads, recs[r.label]) for src, seed, r in settings if src == "random"]
    evaluation = protocol.evaluation_report(base_recs, recs[key_label], recs[shifted_label], randoms, results)
    control = controls.control_record(CONTROL_RULE, heads.top(n), (n_layers, n_heads), cfg.seed,
                                      [r.heads for src, _, r in settings if src == "random"])
    evaluation["random_heads"]["band"] = control["band"]
    evaluation["random_heads"]["band_rule"] = ("layers of the key heads (min..max), widened by one "
                                               "on each side until it holds N non-key heads")
    evaluation["random_heads"]["control"] = control
    out = {
        "mode": cfg.mode, "threshold": cfg.threshold, "shift": cfg.shift,
        "protocol": {
            "rule": "N and C chosen on the selection split (highest accuracy; ties: partial "
                    "accuracy, fewer heads, smaller C), reported on the disjoint evaluation split",
            **{k: {f: v[f] for f in ("n", "split", "seed")} for k, v in splits.items() if k != "overlap"},
            "overlap": splits["overlap"], "splits_file": SPLITS_FILE},
        "key_heads": [{"layer": l, "head": h, "score": float(scores[l, h])} for l, h in heads.top(n)],
        "selection": {"grid": grid, "no_intervention": protocol.accuracy_block(by_stage["select/none"]),
                      "chosen": {"n_heads": n, "value": c, "setting": key_label}},
        "evaluation": evaluation,
    }
    results["reinforcement"] = out
    stats.add_proportion(headline, "acc,ood_reinforced", protocol.exact_vector(recs[key_label]))
    stats.add_proportion(headline, "acc,ood_shifted_reference", protocol.exact_vector(recs[shifted_label]))
    rnd = evaluation["random_heads"]["accuracy"]
    headline["acc,ood_random_heads"] = rnd["mean"]
    headline["acc_sd,ood_random_heads"] = rnd["sd"]
    headline["acc_draws,ood_random_heads"] = rnd["draws"]
    if cfg.reinforce_generation:
        out["generation"] = protocol.generation_report(
            by_stage["generate/none"], by_stage[f"generate/{key_label}"],
            by_stage[f"generate/{shifted_label}"], results)
        for name, stage in (("none", "generate/none"), ("reinforced", f"generate/{key_label}"),
                            ("shifted_reference", f"generate/{shifted_label}")):
            stats.add_proportion(headline, f"acc_generated,ood_{name}",
                                 protocol.exact_vector(by_stage[stage], "generation_exact"))
    # fig. 2: OOD accuracy vs input length, evaluation split
    bins = _length_bins(np.array([r["input_length"] for r in base_recs]))
    centers = [(lo + hi) / 2 for lo, hi in bins]
    results["accuracy_by_length"] = {"bins": bins}
    for key, name, ylabel in (("exact", "ood_accuracy_vs_length", "accuracy"),
                              ("partial", "ood_partial_accuracy_vs_length", "partial accuracy")):
        curves = {"no intervention": accuracy_by_length(base_recs, bins, key),
                  f"top-{n} key heads, C={c:g}": accuracy_by_length(recs[key_label], bins, key),
                  f"shifted reference (same heads, C={c:g})": accuracy_by_length(recs[shifted_label], bins, key)}
        per = np.array([accuracy_by_length(r, bins, key) for _, _, r in randoms])
        curves[f"{n} random heads (mean of {len(randoms)})"] = list(np.nanmean(per, axis=0))
        results["accuracy_by_length"][key] = curves
        plots.plot_accuracy_vs_length(centers, curves, folder.plot_path(name),
                                      title=f"{cfg.task}: OOD {ylabel} vs input length ({cfg.model})",
                                      xlabel="input length (characters)", ylabel=ylabel)


def _heatmaps(folder: RunFolder, cfg: SpanConfig, by_stage: dict[str, list[dict]],
              tokenized: dict[str, list[TokenizedExample]] | None) -> None:
    """fig. 1 / fig. 3: rollout heatmaps of the first examples with the reference mask."""
    if tokenized is None or not cfg.rollout:
        return
    for stage in by_stage:
        if stage.split("/", 1)[0] in ("reinforce", "select", "generate"):
            continue
        split = stage.split("/", 1)[1]
        for i in range(min(cfg.heatmaps, len(tokenized.get(split, [])))):
            name = f"rollout_{_stage_file_name(stage)}_{i}"
            if not (folder.path / "arrays" / f"{name}.npy").is_file():
                continue
            rec = by_stage[stage][i]
            ok = f"{sum(rec['correct'])}/{len(rec['correct'])} target tokens right"
            plots.plot_attention_with_reference(
                folder.load_array(name), tokenized[split][i], folder.plot_path(name),
                title=f"{stage} #{i}: rollout vs reference ({ok})")
