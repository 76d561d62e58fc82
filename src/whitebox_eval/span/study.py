"""An AttentionSpan study (paper 003): evaluate, optionally fine-tune, optionally reinforce.

Stages, each streamed to ``samples.jsonl`` (one line per example, id
``<stage>/<index>``) so an interrupted run resumes where it stopped:

1. ``base/<split>``: teacher-forced accuracy and partial accuracy (table 1), attention
   rollout and its reference score per target token (sec. 4, App. C), optionally free
   greedy generation, for the ID and/or OOD split (App. F).
2. With fine-tuning (App. E): train on fresh ID examples, then ``finetuned/<split>``: the
   same evaluation after training. The weights are cached outside the run
   (:mod:`whitebox_eval.models.training`: ``<cache>/finetuned/span/...``, keyed by the
   model, task, ID parameters, training data, fine-tuning settings and seed), so another
   run with the same training loads them instead of training; ``finetune.json`` names the
   entry this run used (a resume loads it). With ``finetune.keep_checkpoints`` the entry also
   keeps the model along the training (:mod:`whitebox_eval.models.checkpoints`; ``finetune.json``'s
   ``checkpoints`` is the folder ``list_checkpoints`` reads). A model handed in gets its weights back at the end.
3. With reinforcement (sec. 5.1, App. G; protocol in
   :mod:`whitebox_eval.span.protocol`): key heads from ``key_samples`` ID
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
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from whitebox_eval.span import protocol
from whitebox_eval.span.evaluation import (
    generate_greedy_edited,
    generation_scores,
    generation_verdicts,
    teacher_forced_pass,
)
from whitebox_eval.span.finetune import finetune
from whitebox_eval.span.reinforcement import (
    KeyHeads,
    Reinforcement,
    find_key_heads,
)
from whitebox_eval.span.examples import SpanExample
from whitebox_eval.span.tasks import generate
from whitebox_eval.span.tokenization import TokenizedExample, tokenize_example
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.models.training import (
    WEIGHTS_FILE,
    data_digest,
    kept_weights,
    load_weights,
    trained,
    weights_fingerprint,
)
from whitebox_eval.runs import RunFolder, open_run
from whitebox_eval.runs.atomic import write_atomic
from whitebox_eval.runs.folder import ARRAYS_DIR
from whitebox_eval.runs.pass_plan import extend_plan, plan_passes
from whitebox_eval.runs.passes import run_pass
from whitebox_eval.runs.kept import NPY, kept
from whitebox_eval.span.config import INSTRUCTIONS, SpanConfig
from whitebox_eval.span.results import (
    SPLITS_FILE,
    _records_by_stage,
    _stage_file_name,
    evaluation_settings,
    finalize,
    selection_grid,
)


#: Seed offsets: evaluation, training, key-head, demonstration and selection examples
#: never share a stream.
TRAIN_SEED, KEY_SEED, DEMO_SEED, SELECT_SEED = 1_000_000, 2_000_000, 3_000_000, 4_000_000
#: the run's record of the fine-tuned weights it evaluated (cache folder, key digest, reused?)
FINETUNE_FILE = "finetune.json"
LOSSES_FILE = "losses.npy"

#: Free generation under reinforcement goes through this one function (switch here to
#: a cached implementation; signature ``(engine, tokenized, edits_for) -> list[str]``).
edited_generation = generate_greedy_edited


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


def _score_stage(folder: RunFolder, engine: Engine, lm: LoadedModel, cfg: SpanConfig, stage: str,
                 split: str, tokenized: Sequence[TokenizedExample], *,
                 reinforcement: Reinforcement | None = None, rollout: bool = False,
                 generation: str | None = None, show_progress: bool | None = None) -> None:
    """Evaluate the pending examples of one stage (one resumable pass) and stream their records.

    ``generation``: None (teacher-forced only), ``"plain"`` (also free greedy generation
    through the engine's decoder) or ``"edited"`` (the same under ``reinforcement``).
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
            gens = generate_greedy_edited(engine, toks, None) if generation else None
        gen_correct = generation_scores(gens, toks) if gens is not None else None
        gen_exact = generation_verdicts(gens, toks) if gens is not None else None
        records = []
        for j, (i, tok, s) in enumerate(zip(chunk, toks, scores)):
            ex = tok.example
            view = {}  # what the report's rollout view reads beside the kept rollout
            if s.rollout is not None:
                folder.save_array(f"rollout_{_stage_file_name(stage)}_{i}", s.rollout)
                folder.save_array(f"reference_{_stage_file_name(stage)}_{i}", np.asarray(tok.reference_mask, dtype=bool))
                view = {"prediction_positions": [int(p) for p in tok.prediction_positions],
                        "tokens": [str(t) for t in lm.tokenizer.convert_ids_to_tokens([int(x) for x in tok.input_ids])]
                        if hasattr(lm.tokenizer, "convert_ids_to_tokens") else None}
            rec = {
                "id": ids[i], "stage": stage, "split": split, "index": i,
                "input": ex.input, "target": ex.target, "input_length": len(ex.input),
                "predicted": lm.tokenizer.decode(s.predicted.tolist()) if hasattr(lm.tokenizer, "decode") else None,
                "correct": [int(c) for c in s.correct], "exact": s.exact, "partial": round(s.partial, 5),
                "rollout_scores": _rounded(s.rollout_scores), **view,
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
    """App. G step 1: the stage ``arrays/key_head_scores.npy`` (reused on resume)."""
    from whitebox_eval.span.metrics import rank_key_heads

    scores = kept(folder.path / ARRAYS_DIR, "key_head_scores", kind=NPY, compute=lambda: find_key_heads(
        engine, tokenize_all(cfg, tokenizer, key_examples), batch_size=cfg.batch_size).scores)
    return KeyHeads(scores, rank_key_heads(scores), len(key_examples))




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
    write_atomic(folder.path / SPLITS_FILE, json.dumps(out, indent=1) + "\n")


# ---------------------------------------------------------------------------- run


def run_span(cfg: SpanConfig, output: str | Path = "runs", *, run_id: str | None = None,
             resume: bool = False, loaded: LoadedModel | None = None,
             show_progress: bool | None = None) -> RunFolder:
    """Run (or resume) an AttentionSpan study and write its run folder."""
    from whitebox_eval.internals.edit_coverage import counted, edit_coverage
    from whitebox_eval.sae.feature_edits import check_edits, refuse_last, user_edits

    cfg.check()
    refuse_last(cfg.edits, "span scores and generates every answer token")
    check_edits(cfg.edits, loaded, cfg.model)  # out of range, wrong width: one line, before the run folder
    lm, coverage = loaded, {}
    if counted(cfg.edits):  # attn: cells: counted on every split's sequences (prompt and answer) before the folder
        lm = lm or load_model(cfg.model, dtype=cfg.dtype)
        coverage = edit_coverage(cfg.edits, [len(t.input_ids) for s in cfg.splits for t in
                                             tokenize_all(cfg, lm.tokenizer, make_examples(cfg, s, cfg.n_per_split))])
    folder = open_run(output, {**cfg.to_dict(), **coverage}, run_id=run_id, resume=resume)
    lm = lm or load_model(cfg.model, dtype=cfg.dtype)
    engine = Engine(lm).under(user_edits(cfg.edits, lm))  # --edit: every evaluation pass
    examples = {s: make_examples(cfg, s, cfg.n_per_split) for s in cfg.splits}
    tokenized = {s: tokenize_all(cfg, lm.tokenizer, ex) for s, ex in examples.items()}
    folder.log(f"task {cfg.task}, splits {cfg.splits}, {cfg.n_per_split} examples each, model {cfg.model}")
    phases = ["base"] + (["finetuned"] if cfg.finetune_examples else [])  # reinforcement's passes join when known
    plan_passes(folder, [(_stage_file_name(f"{p}/{s}"), len(tokenized[s])) for p in phases for s in cfg.splits])

    def evaluate(phase: str) -> None:
        for split in cfg.splits:
            _score_stage(folder, engine, lm, cfg, f"{phase}/{split}", split, tokenized[split],
                         rollout=cfg.rollout, generation="plain" if cfg.generation else None,
                         show_progress=show_progress)

    evaluate("base")
    # a model handed in (reproduce's children share one) gets its own weights back afterwards
    with kept_weights(lm.model) if (cfg.finetune_examples and loaded is not None) else nullcontext():
        if cfg.finetune_examples:
            _finetuned(folder, lm, cfg, sum(examples.values(), []), show_progress)
            evaluate("finetuned")
        if cfg.reinforce:
            _reinforce(folder, engine, lm, cfg, examples, tokenized["ood"], show_progress)
        return finalize(folder, cfg, tokenized)


def finetune_key(cfg: SpanConfig, lm: LoadedModel, train: Sequence[TokenizedExample]) -> dict:
    """What sets the fine-tuned weights (the cache key): the model and its weights, the task,
    ID parameters and seed, the training sequences as tokenized, the fine-tuning settings."""
    return {"suite": "span", "model": lm.spec, "weights": weights_fingerprint(lm.model), "dtype": cfg.dtype,
            "task": cfg.task, "id_params": cfg.id_params, "seed": cfg.seed, "examples": cfg.finetune_examples,
            "finetune": cfg.finetune.to_dict(),
            "data": data_digest([[t.input_ids.tolist(), t.prediction_positions.tolist()] for t in train])}


def _finetuned(folder: RunFolder, lm: LoadedModel, cfg: SpanConfig, evaluated: Sequence[SpanExample],
               show_progress: bool | None) -> None:
    """App. E: fine-tune on fresh ID examples, or load the weights the cache (or this run,
    on resume) holds for the same training; the losses go to ``arrays/finetune_losses.npy``."""
    mine = folder.path / FINETUNE_FILE
    record = json.loads(mine.read_text(encoding="utf-8")) if mine.is_file() else None
    if record and (Path(record["weights"]) / WEIGHTS_FILE).is_file():
        folder.log(f"loading this run's fine-tuned weights {record['weights']}")
        load_weights(lm.model, record["weights"])
    else:
        train = tokenize_all(cfg, lm.tokenizer, training_examples(cfg, evaluated))

        def run_training(dest: Path) -> dict:
            folder.log(f"fine-tuning on {len(train)} ID examples ({cfg.finetune})")

            def log_step(step: int, loss: float) -> None:
                if step % 25 == 0:
                    folder.log(f"fine-tuning step {step}: loss {loss:.4f}")

            result = finetune(lm, train, cfg.finetune, checkpoint_dir=dest, run_id=folder.run_id,
                              on_step=log_step, show_progress=show_progress)
            np.save(dest / LOSSES_FILE, np.asarray(result.losses))
            summary = {k: v for k, v in result.summary().items() if k != "checkpoint"}
            folder.log(f"fine-tuning done: {summary}")
            return summary

        entry = trained("span", finetune_key(cfg, lm, train), f"{cfg.model}-{cfg.task}", run_training, log=folder.log)
        if entry.reused:
            load_weights(lm.model, entry.path / "final")
        record = {"weights": str(entry.path / "final"), "cache_key": entry.digest, "reused": entry.reused,
                  **({"checkpoints": str(entry.path)} if cfg.finetune.keep_checkpoints else {})}
        write_atomic(mine, json.dumps(record, indent=1) + "\n")
    losses = Path(record["weights"]).parent / LOSSES_FILE
    kept(folder.path / ARRAYS_DIR, "finetune_losses", lambda: np.load(losses), kind=NPY)


def _reinforce(folder: RunFolder, engine: Engine, lm: LoadedModel, cfg: SpanConfig,
               examples: Mapping[str, list[SpanExample]], evaluation: list[TokenizedExample],
               show_progress: bool | None) -> None:
    """Key heads, the N x C grid on the selection split, the chosen point and its
    controls on the evaluation split (:mod:`protocol`)."""
    splits = reinforcement_splits(cfg, examples)
    _write_splits(folder, splits, cfg)
    heads = _key_heads(folder, engine, cfg, lm.tokenizer, splits["key_heads"])
    selection = tokenize_all(cfg, lm.tokenizer, splits["selection"])
    grid = ["select/none"] + [f"select/{protocol.label('key', n, c, cfg.mode)}" for n in cfg.heads for c in cfg.values]
    extend_plan(folder, [(_stage_file_name(stage), len(selection)) for stage in grid])
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
    stages = [f"reinforce/{r.label}" for _, _, r in settings] + (
        ["generate/none"] + [f"generate/{r.label}" for src, _, r in settings if src != "random"]
        if cfg.reinforce_generation else [])
    extend_plan(folder, [(_stage_file_name(stage), len(evaluation)) for stage in stages])
    for _, _, r in settings:
        _score_stage(folder, engine, lm, cfg, f"reinforce/{r.label}", "ood", evaluation,
                     reinforcement=r, show_progress=show_progress)
    if cfg.reinforce_generation:
        for stage, r in [("generate/none", None)] + [(f"generate/{r.label}", r)
                                                     for src, _, r in settings if src != "random"]:
            _score_stage(folder, engine, lm, cfg, stage, "ood", evaluation, reinforcement=r,
                         generation="edited", show_progress=show_progress)
