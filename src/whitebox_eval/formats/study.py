"""First-token probabilities vs free generation (004): one question, three formats.

For every question, ``shots`` demonstrations (004 sec. 2.4: 5-shot in all three
formats) from a pool disjoint from the evaluated questions, then (004 App. A.2):

- ``mcq``: the next-token distribution after ``Answer:``; ``p_correct,raw`` is the
  plain softmax probability of the gold letter, ``p_correct,renorm`` the same
  renormalised over the option letters (004 is silent; renorm is the headline, as the
  alignment charts need a distribution over the options), ``letter_mass`` what the
  letters hold of the next-token mass;
- ``free``: share of ``n_samples`` generations at temperature T that are correct
  (004 sec. 2.4: 20 samples at T = 1; arithmetic: the first number, sec. 2.4.1, or a
  stricter ``--extract`` rule; TriviaQA: exact match after normalisation of answer
  and gold alike, against the answer and its aliases);
- ``free_options``: the same with the candidate answers listed in the prompt.

Each question is its own pass (one unpadded MCQ pass, one prefill per free format, see
``formats/generation.py``) and samples from a stream seeded by (seed, question id, format), so
every number and text is the same for any batch size, rank count or ``--resume``.
Under ``torchrun`` the ranks share the questions in blocks of ``batch_size`` and rank 0
merges their samples in question order (:mod:`whitebox_eval.runs.distributed`).

The evaluated questions are a seeded sample stratified by category x gold position
(``stratified_sample``), not the first N of a category-ordered suite. TriviaQA keeps
questions whose gold answer is <= 15 tokens (004 sec. 2.3) and samples 1,000 of them.

Reported with intervals over items: mean P(correct) per format (bootstrap), MCQ argmax
accuracy (Wilson), Pearson r between formats (004 Table 1) and the expected alignment
error (004 eq. 1) (bootstrap over questions), paired tests between formats, the MCQ
P(correct) distribution split by free-generation P(correct) (004 Tables 2-3), and the
alignment chart (Fig. 5). :func:`compare_runs` gives Fig. 6 across run folders.

Each generation is also classed right, wrong or off-format (no answer at all:
``formats/answers.py``), kept per sample in ``classes``; per free format the run reports the
off-format share of its generations (``off_format,{f}``, Wilson over generations, which a
question's samples share, so it is narrower than a cluster interval), P(correct) among the
generations that answered (``p_correct_answered,{f}``) and the questions with no answer at all
(``n_unanswered,{f}``), per question ``p_correct_answered`` and the per-question analyses on it
(``pearson_answered,mcq~free``, ``mcq_by_free_answered``: ``formats/answered.py``); ``off_format,mcq`` is the share of questions whose top next token over the
whole vocabulary is no option letter (``letter_mass`` the letters' share of that distribution).
``p_correct,{f}`` stays 004's fraction of all samples (an off-format one counts as not correct).
"""

from __future__ import annotations

import random
from itertools import combinations
from pathlib import Path
from typing import NamedTuple

import numpy as np

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.formats.config import (
    ARITHMETIC_LIMIT, ARITHMETIC_POOL_PER_CATEGORY, FORMATS, FREE_FORMATS, MAX_ANSWER_TOKENS, TEXT_LIMIT,
    FormatsConfig)
from whitebox_eval.formats.activations import Saver, check as check_saved
from whitebox_eval.formats.answered import answered_results, per_question
from whitebox_eval.formats.answers import classes_of
from whitebox_eval.formats.generation import sample_prompt, stream_seed
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.prompts import render_prompt
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder, open_run
from whitebox_eval.datafiles import recording
from whitebox_eval.runs.pass_plan import plan_passes
from whitebox_eval.runs.passes import run_pass
from whitebox_eval.runs.limits import checked, is_fraction, taken
from whitebox_eval.runs.lm_eval_format import add_lm_eval_fields
from whitebox_eval.tasks.loading import load_mcq
from whitebox_eval.tasks.spec import TaskSpec
from whitebox_eval.runs.distributed import world as current_world

class FormatItems(NamedTuple):
    items: list[MCQItem]
    answer_type: str  # "number" | "text"
    demos: list[MCQItem]
    notes: dict


def stratified_sample(items: list[MCQItem], n: int, seed: int) -> list[MCQItem]:
    """A seeded sample of ``n`` items stratified by category (``subject``) x gold position.

    Categories get ``n`` in proportion to their size (largest remainder, seeded ties);
    within a category the gold positions are as even as possible, preferring positions
    used least so far over all categories, so the gold marginal is balanced too. The
    sample keeps the input order. ``n >= len(items)`` returns every item.
    """
    if n >= len(items):
        return list(items)
    rng = random.Random(f"formats-sample/{seed}")
    cats: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        cats.setdefault(it.subject or "", []).append(i)
    quota = {c: n * len(ix) / len(items) for c, ix in cats.items()}
    alloc = {c: int(q) for c, q in quota.items()}
    rest = sorted(cats, key=lambda c: (-(quota[c] - alloc[c]), rng.random()))
    for c in rest[: n - sum(alloc.values())]:
        alloc[c] += 1
    used: dict[int, int] = {}
    chosen: list[int] = []
    for c in sorted(cats, key=lambda _: rng.random()):
        strata: dict[int, list[int]] = {}
        for i in cats[c]:
            strata.setdefault(items[i].gold, []).append(i)
        for ix in strata.values():
            rng.shuffle(ix)
        local: dict[int, int] = {}
        for _ in range(alloc[c]):
            g = min((g for g in strata if strata[g]), key=lambda g: (local.get(g, 0), used.get(g, 0), rng.random()))
            chosen.append(strata[g].pop())
            local[g] = local.get(g, 0) + 1
            used[g] = used.get(g, 0) + 1
    return [items[i] for i in sorted(chosen)]


def _take_demos(population: list[MCQItem], shots: int, seed: int) -> tuple[list[MCQItem], list[MCQItem]]:
    """``shots`` seeded demonstrations and the population without them (nor their questions)."""
    if shots < 0:
        raise WhiteboxError(f"--shots must be >= 0; got {shots}")
    if shots >= len(population):
        raise WhiteboxError(f"{shots} demonstrations need more than {len(population)} questions; lower --shots")
    demos = random.Random(f"formats-demos/{seed}").sample(population, shots)
    asked = {d.question for d in demos}
    return demos, [it for it in population if it.question not in asked]


def check_config(cfg: FormatsConfig) -> None:
    """Refuse, before any model is loaded, settings that cannot run (one line each)."""
    from whitebox_eval.formats.metrics import EXTRACTORS

    cfg.limit = checked(cfg.limit)  # N >= 1, or a fraction below 1 of the default (runs/limits.py): one line
    if cfg.extract not in EXTRACTORS:
        raise WhiteboxError(f"unknown --extract {cfg.extract!r}; choose one of {', '.join(EXTRACTORS)}")
    if cfg.spec.record.answer_type != "number" and cfg.extract != "paper":
        raise WhiteboxError(f"--extract applies to arithmetic answers; {cfg.spec.name}'s text answers are scored by the "
                            "paper's exact match")
    if cfg.lm_eval_data and cfg.spec.lm_eval_task is None:
        raise WhiteboxError("--lm-eval-data applies to --task lm-eval:TASK only")
    for name in ("n_samples", "max_new_tokens", "n_bins", "batch_size"):
        if getattr(cfg, name) < 1:
            raise WhiteboxError(f"--{name.replace('_', '-')} must be >= 1; got {getattr(cfg, name)}")
    if cfg.shots < 0 or cfg.temperature < 0:
        raise WhiteboxError("--shots and --temperature must be >= 0")
    if cfg.top_p is not None and not 0 < cfg.top_p <= 1:
        raise WhiteboxError(f"--top-p must be in (0, 1]; got {cfg.top_p}")
    if cfg.top_k is not None and cfg.top_k < 1:
        raise WhiteboxError(f"--top-k must be >= 1; got {cfg.top_k}")


def load_format_items(cfg: FormatsConfig, tokenizer=None) -> FormatItems:
    """Evaluated questions, demonstrations and notes for config.yaml.

    ``arithmetic[:cats]``: ``ARITHMETIC_POOL_PER_CATEGORY`` generated questions per
    category (more if the limit needs them); a multiple-choice task with text choices
    (``triviaqa=PATH``, ``mcq=PATH``, ``mmlu=PATH``, ``lm-eval:TASK`` read as its letters
    view, ...): its questions whose gold choice is <= 15 tokens of the model's ``tokenizer``
    (004 sec. 2.3 filters TriviaQA so; applied to every text answer, which exact match must
    reproduce). The demonstrations are a seeded pool of ``shots`` questions removed (with any
    question identical to one) from what is evaluated, the same for every task (004 uses one
    5-shot prompt per task; a dev split is not looked for).
    """
    from whitebox_eval.tasks.arithmetic import ARITHMETIC_CATEGORIES

    notes: dict = {}
    check_config(cfg)
    spec = cfg.spec
    kind = spec.name
    if kind == "arithmetic":
        n = taken(cfg.limit, ARITHMETIC_LIMIT)
        per = max(ARITHMETIC_POOL_PER_CATEGORY, -(-n // len(spec.categories or ARITHMETIC_CATEGORIES)) * cfg.n_options + cfg.shots)
        population = load_mcq(spec, per * len(spec.categories or ARITHMETIC_CATEGORIES), seed=cfg.seed,
                              n_options=cfg.n_options)
        answer_type = "number"
    else:  # text choices
        if tokenizer is None:
            raise WhiteboxError("the answer-length filter (004 sec. 2.3) needs the model's tokenizer")
        n = taken(cfg.limit, TEXT_LIMIT)
        rows = _text_items(cfg, n)
        population = [it for it in rows if len(tokenizer(it.gold_text, add_special_tokens=False)["input_ids"]) <= MAX_ANSWER_TOKENS]
        notes["answer_filter"] = f"gold answer <= {MAX_ANSWER_TOKENS} tokens (004 sec. 2.3): kept {len(population)} of {len(rows)}"
        if len(population) <= cfg.shots:
            raise WhiteboxError(f"only {len(population)} of {len(rows)} questions have a gold answer of <= "
                                f"{MAX_ANSWER_TOKENS} tokens; free generation is checked by exact match, so this task "
                                "needs short answers (or fewer --shots)")
        answer_type = "text"
    demos, pool = _take_demos(population, cfg.shots, cfg.seed)
    items = stratified_sample(pool, taken(cfg.limit, min(TEXT_LIMIT, len(pool))) if is_fraction(cfg.limit) and answer_type == "text" else n, cfg.seed)
    notes["selection"] = (f"seeded sample stratified by category x gold position: {len(items)} of {len(pool)} questions"
                          if len(items) < len(pool) else f"all {len(items)} questions")
    notes["demo_ids"] = [d.id for d in demos]
    notes["demo_pool"] = f"seeded pool of {cfg.shots} removed from the evaluated questions (no dev split in this data)"
    if cfg.n_bins > len(items):
        raise WhiteboxError(f"--n-bins {cfg.n_bins} exceeds the {len(items)} questions; lower --n-bins or raise --limit")
    return FormatItems(items, answer_type, demos, notes)


def _text_items(cfg: FormatsConfig, n: int) -> list[MCQItem]:
    """The multiple-choice items of a text task: a file's rows, a generator's first ``n`` plus the
    demonstration pool, or lm-eval's documents (their letters view: question and choice texts)."""
    spec = cfg.spec
    if spec.lm_eval_task is not None:
        from whitebox_eval.tasks.lm_eval_tasks import load_items

        items, infos = load_items(spec.lm_eval_task, shots=0, data=cfg.lm_eval_data)
        partial = [t.name for t in infos if t.multiple_input]
        if partial:
            raise WhiteboxError(f"lm-eval's {', '.join(partial)} scores one context per choice: there is no question "
                                "to ask in free generation")
        return items
    return load_mcq(spec, n + cfg.shots if spec.record.is_generator else 0, seed=cfg.seed, n_options=cfg.n_options,
                    on_bad_row="skip")


def answer_of(item: MCQItem, answer_type: str):
    """The gold free-generation answer: the number (arithmetic) or answer + aliases."""
    if answer_type == "number":
        return item.meta.get("answer", int(item.options[item.gold]))
    return item.accepted_answers()


def score_free(texts: list[str], answer, answer_type: str, extract: str = "paper") -> float:
    """Share of correct generations (TriviaQA: gold normalised like the generation)."""
    from whitebox_eval.formats.metrics import fraction_correct

    return fraction_correct(texts, answer, answer_type, extract=extract, truncate_gold=answer_type == "text")


def mcq_probabilities(engine, item: MCQItem, demos: list[MCQItem], prefixes=None, saver=None, edits=()) -> dict:
    """P(gold letter) raw and renormalised over the letters, the letters' mass, argmax letter.

    ``prefixes`` (a :class:`~whitebox_eval.internals.prefixes.PrefixCache`): the
    demonstrations' key/values, computed once for every question (none under ``edits``: an edit
    covers the whole prompt, demonstrations included)."""
    import torch

    from whitebox_eval.internals import batch_from_ids
    from whitebox_eval.tasks.prompt_tokens import tokenize_prompt

    t = tokenize_prompt(engine.tokenizer, render_prompt(item, fmt="mcq_plain", demos=demos), "eol")
    prefix = prefixes.for_batch([t.input_ids], limit=t.prefix_tokens) if prefixes is not None and not edits else None
    skip = prefix.length if prefix is not None else 0
    trace = engine.run(batch_from_ids([t.input_ids[skip:]]).to(engine.loaded.device), saver.captures(t) if saver else (),
                       edits=edits, prefix=prefix)
    if saver is not None:  # --save-activations (formats/activations.py)
        saver.prompt(item.id, t, trace, prefix)
    logits = trace.logits[0].double().cpu()
    logp = torch.log_softmax(logits, -1)[t.answer_ids]
    raw = logp.exp()
    renorm = torch.softmax(logits[t.answer_ids], -1)
    return {"p_renorm": float(renorm[item.gold]), "p_raw": float(raw[item.gold]),
            "letter_mass": float(raw.sum()), "pred": int(logits[t.answer_ids].argmax()),
            "top_is_letter": int(logits.argmax()) in t.answer_ids}  # else the first token is off-format


def reach(tokenizer, data, max_new_tokens: int) -> list[int]:
    """Each question's longest sequence (``--edit`` coverage): its MCQ prompt, or a free-format prompt
    with every token it may generate."""
    from whitebox_eval.tasks.prompt_tokens import tokenize_prompt

    mcq = lambda it: len(tokenize_prompt(tokenizer, render_prompt(it, fmt="mcq_plain", demos=data.demos)).input_ids)  # noqa: E731
    free = lambda it, f: len(tokenizer(render_prompt(it, fmt=f, demos=data.demos).text)["input_ids"])  # noqa: E731
    return [max([mcq(it)] + [free(it, f) + max_new_tokens for f in FREE_FORMATS]) for it in data.items]


def run_formats(cfg: FormatsConfig, output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
                loaded: LoadedModel | None = None, show_progress: bool | None = None) -> RunFolder:
    from whitebox_eval.internals import Engine
    from whitebox_eval.internals.prefixes import PrefixCache

    from whitebox_eval.internals.edit_coverage import counted, edit_coverage
    from whitebox_eval.sae.feature_edits import refuse_last, user_edits

    check_config(cfg)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    check_saved(cfg, loaded)
    refuse_last(cfg.edits, "formats generates free answers")  # one line, before the folder
    edits = user_edits(cfg.edits, loaded)
    with recording() as read:  # every data file opened, for config.yaml's data_files
        data = load_format_items(cfg, loaded.tokenizer)
    coverage = edit_coverage(cfg.edits, reach(loaded.tokenizer, data, cfg.max_new_tokens), generates=(
        "counting the --max-new-tokens each free answer may generate")) if counted(cfg.edits) else {}
    ranks = current_world()
    folder = open_run(output, {**cfg.to_dict(), **data.notes, **coverage}, run_id=run_id, resume=resume, world=ranks,
                      data_files=read)
    folder.log(f"{len(data.items)} questions, {cfg.shots}-shot, model {cfg.model}"
               + (f", rank {ranks.rank} of {ranks.size}" if ranks.distributed else ""))
    engine = Engine(loaded)
    prefixes = PrefixCache(engine)  # the demonstrations of every MCQ prompt
    saver = Saver(cfg, folder, engine, data.items, data.demos, FREE_FORMATS, ranks.main) if cfg.save_activations else None

    def score(chunk: list[int]):
        records = []
        for it in (data.items[i] for i in chunk):
            mcq = mcq_probabilities(engine, it, data.demos, prefixes, saver, edits)
            answer = answer_of(it, data.answer_type)
            prompts = {f: render_prompt(it, fmt=f, demos=data.demos).text for f in ("mcq_plain", *FREE_FORMATS)}
            gens = {f: sample_prompt(loaded, prompts[f], n_samples=cfg.n_samples,
                                     temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens,
                                     seed=stream_seed(cfg.seed, it.id, f), top_p=cfg.top_p, top_k=cfg.top_k,
                                     edits=edits, engine=engine, **(saver.on_generation(it.id, f) if saver else {}))
                    for f in FREE_FORMATS}
            record = {
                "id": it.id, "subject": it.subject, "gold": it.gold, "answer": answer, "prompts": prompts, "mcq": mcq,
                "p_correct": {"mcq": mcq["p_renorm"],
                              **{f: score_free(gens[f], answer, data.answer_type, cfg.extract) for f in FREE_FORMATS}},
                "generations": gens,
            }
            records.append(record | {"classes": {f: classes_of(record, f, data.answer_type, cfg.extract)
                                                 for f in FREE_FORMATS},
                                     "p_correct_answered": per_question(record, data.answer_type, cfg.extract)})
        return records, {}

    plan_passes(folder, [("formats", len(data.items))])  # one pass: the MCQ prompt and every free answer
    run_pass(folder, "formats", [it.id for it in data.items], cfg.batch_size, saver.wrap(score) if saver else score,
             world=ranks, desc="formats", show_progress=show_progress if ranks.main else False)
    if ranks.main:
        finalize_formats(folder, cfg, data.answer_type, saver.merge() if saver else None)
    ranks.barrier()
    return folder


def finalize_formats(folder: RunFolder, cfg: FormatsConfig, answer_type: str | None = None, activations=None) -> RunFolder:
    from whitebox_eval.formats.metrics import (
        EXTRACTORS,
        correlation_or_reason,
        expected_alignment_error,
        extract_number,
        format_correlation,
        mcq_by_free_partition,
    )
    from whitebox_eval.formats.plots import plot_alignment

    samples = list(folder.read_samples())
    answer_type = answer_type or cfg.spec.record.answer_type
    mcq = {k: np.array([s["mcq"][k] for s in samples], dtype=np.float64) for k in ("p_renorm", "p_raw", "letter_mass")}
    pc = {f: np.array([s["p_correct"][f] for s in samples], dtype=np.float64) for f in FORMATS}
    n = len(samples)
    results: dict = {"n_items": n, "shots": cfg.shots, "demo_ids": folder.config.get("demo_ids"),
                     "selection": folder.config.get("selection"), "extract": cfg.extract,
                     "mcq_probability": "renorm (over the option letters) is the headline; raw = plain softmax"}
    results["p_correct"] = {f: float(v.mean()) for f, v in pc.items()}  # mcq = renorm
    stats.add_mean(results, "p_correct,renorm", mcq["p_renorm"])
    stats.add_mean(results, "p_correct,raw", mcq["p_raw"])
    stats.add_mean(results, "letter_mass", mcq["letter_mass"])
    stats.add_proportion(results, "acc,mcq", [float(s["mcq"]["pred"] == s["gold"]) for s in samples])
    if all("top_is_letter" in s["mcq"] for s in samples):  # the first token's answer no letter: off-format
        stats.add_proportion(results, "off_format,mcq", [not s["mcq"]["top_is_letter"] for s in samples])
    for f in FREE_FORMATS:
        stats.add_mean(results, f"p_correct,{f}", pc[f])
        texts = [t for s in samples for t in s["generations"][f]]
        results[f"empty_rate,{f}"] = float(np.mean([not t.strip() for t in texts]))
    results.update(answered_results(samples, answer_type, cfg.extract))  # off-format apart (answered.py)
    for a, b in (("free", "mcq"), ("free_options", "mcq"), ("free_options", "free")):
        stats.add_paired(results, f"{a}_vs_{b}", stats.paired_bootstrap(pc[a], pc[b]))
    for a, b in combinations(FORMATS, 2):
        key = f"pearson,{a}~{b}"
        r, reason = correlation_or_reason(pc[a], pc[b], (a, b))
        if r is None:
            results[key] = None
            results[stats.derived_key(key, "reason")] = reason
            continue
        est, undefined = stats.bootstrap_pairs(pc[a], pc[b], format_correlation)
        stats.add_estimate(results, key, est)
        if undefined:
            results[stats.derived_key(key, "undefined_resamples")] = undefined
    for name, x in (("mcq", mcq["p_renorm"]), ("raw", mcq["p_raw"]), ("free_options", pc["free_options"])):
        est, _ = stats.bootstrap_pairs(x, pc["free"], lambda a, b: expected_alignment_error(a, b, n_bins=cfg.n_bins).error)
        stats.add_estimate(results, f"alignment_error,{name}~free", est)
    if answer_type == "number":
        results["extraction"] = _extraction_table(samples, EXTRACTORS, extract_number)
    results["mcq_by_free"] = mcq_by_free_partition(mcq["p_renorm"], pc["free"])
    hi, lo = (mcq["p_renorm"][pc["free"] >= 0.5], mcq["p_renorm"][pc["free"] < 0.5])
    if hi.size >= 2 and lo.size >= 2:
        results["mcq_by_free"]["test"] = stats.permutation_test(hi, lo).as_dict()
    by_subject: dict[str, dict[str, float]] = {}
    for subj in sorted({s["subject"] for s in samples if s.get("subject")}):
        rows = [i for i, s in enumerate(samples) if s["subject"] == subj]
        by_subject[subj] = {f: float(pc[f][rows].mean()) for f in FORMATS} | {"n": len(rows)}
    results["p_correct_by_subject"] = by_subject
    results["headline"] = {k: results[k] for k in ("p_correct,renorm", "p_correct,free", "p_correct,free_options",
                                                   "alignment_error,mcq~free")}
    for f, v in pc.items():
        folder.save_array(f"p_correct_{f}", v)
    folder.save_array("p_correct_mcq_raw", mcq["p_raw"])
    plot_alignment(mcq["p_renorm"], pc["free"], folder.plot_path("alignment_mcq_vs_free"), n_bins=cfg.n_bins)
    add_lm_eval_fields(results, folder.config, cfg.spec.lm_eval_task or cfg.spec.name)  # lm-eval's results-file blocks
    results.update({"activations": activations} if activations is not None else {})  # --save-activations' files
    folder.save_results(results)
    return folder


def _extraction_table(samples: list[dict], rules, extract_number) -> dict:
    """Per extraction rule: mean P(correct) per free format and the share of generations
    whose extracted number differs from the paper's rule (004 sec. 2.4.1)."""
    out = {}
    for rule in rules:
        row: dict = {}
        for f in FREE_FORMATS:
            per_item, differ, total = [], 0, 0
            for s in samples:
                vals = [extract_number(t, rule) for t in s["generations"][f]]
                per_item.append(np.mean([v is not None and v == s["answer"] for v in vals]))
                differ += sum(v != extract_number(t, "paper") for v, t in zip(vals, s["generations"][f]))
                total += len(vals)
            row[f"p_correct,{f}"] = float(np.mean(per_item))
            row[f"disagree_with_paper,{f}"] = differ / total if total else None
            row["n_generations"] = total
        out[rule] = row
    return out
