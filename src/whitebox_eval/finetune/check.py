"""The held-out check of a fine-tuning (the test split, before and after), the validation loss
(and, for arithmetic text, the validation exact match) that stops it early, and its loss curve.

GAR tasks are checked by App. C's rule per format (:func:`.gar_tasks.appc_check`). Any other
task with answers is checked by greedy generation (:func:`whitebox_eval.internals.generation.generate`,
the one decoder) and the source's check (:func:`.sources.is_correct`); a text is checked by
next-token accuracy on its test lines (every token a trial of the Wilson interval: tokens of one
line are not independent, so the interval is narrower than the lines warrant). Format-neutral
arithmetic (``arithmetic-text``) is checked on the statistic paper 004's claims read: each test
problem asked in 004's free format (its question after the demonstrations), ``samples`` answers
drawn at temperature 1 as the formats suite draws them (free P(correct): the share right), and the
greedy answer beside it (exact match: the 0/1 outcome of the McNemar test).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from whitebox_eval.finetune.sources import ARITH, GAR, TEXT, Item, Source, is_correct
from whitebox_eval.models.training import row_batch, row_outputs

Encoded = tuple[list[int], list[int]]


def sequences(encoded: Sequence[Encoded]) -> list[tuple[list[int], list[int], list[int]]]:
    """``(ids, prediction rows, target ids)`` of each (prompt, answer): the loss on the answer."""
    return [(p + a, list(range(len(p) - 1, len(p) + len(a) - 1)), a) for p, a in encoded]


def mean_loss(lm, encoded: Sequence[Encoded], batch_size: int) -> float:
    """The mean cross-entropy per answer token over ``encoded`` (the validation loss)."""
    seqs = sequences(encoded)
    total, tokens = 0.0, 0.0
    was = lm.model.training
    lm.model.eval()
    try:
        with torch.no_grad():
            for i in range(0, len(seqs), batch_size):
                batch = row_batch(seqs[i:i + batch_size], lm.pad_id)
                nll, _ = row_outputs(lm.model, batch)
                w = batch.weights.to(nll.device)
                total += float((nll.double() * w).sum())
                tokens += float(w.sum())
    finally:
        lm.model.train(was)
    return total / tokens


def held_out_check(lm, source: Source, items: Sequence[Item], encoded: Sequence[Encoded], task, *,
                   batch_size: int, max_new_tokens: int | None, demos: Sequence[Item] = (), samples: int = 0,
                   seed: int = 0) -> list[dict[str, Any]]:
    """One row per test item: the response (or, for a text, the tokens predicted right) and
    whether it is correct (arithmetic text: also its free P(correct) over ``samples`` draws)."""
    if source.kind == TEXT:
        return token_accuracy(lm, items, encoded, batch_size)
    if source.kind == ARITH:
        return _free_format(lm, items, demos, samples, seed, max_new_tokens or max(len(a) for _, a in encoded) + 2)
    if source.kind == GAR:  # 002's statistic: App. C's rule per format, one forward pass per item
        from whitebox_eval.finetune.gar_tasks import appc_check

        return appc_check(lm, items, batch_size)
    from whitebox_eval.internals.engine import Engine
    from whitebox_eval.internals.generation import generate

    engine = Engine(lm)
    budget = max_new_tokens or max(len(a) for _, a in encoded) + 2
    rows = []
    for i in range(0, len(items), batch_size):
        part = items[i:i + batch_size]
        gens = generate(engine, [p for p, _ in encoded[i:i + batch_size]], max_new_tokens=budget)
        for it, (_, answer), g in zip(part, encoded[i:i + batch_size], gens):
            text = lm.tokenizer.decode(g.content_ids, skip_special_tokens=True)
            rows.append({"id": it.id, "response": text, "truncated": g.truncated,
                         "correct": is_correct(source, it, text, [int(t) for t in g.ids], answer, task)})
    return rows


def free_exact_match(lm, items: Sequence[Item], demos: Sequence[Item], batch_size: int, *,
                     need_end: bool = True) -> list[bool]:
    """Whether each arithmetic item's greedy answer in 004's free format would be exactly right,
    read from one teacher-forced forward (no decoding: cheap enough to run on the validation split
    every few steps): every answer token the argmax, then the line's end (a newline, the decoder's
    stop, or the end token) the argmax after it. Greedy decoding writes exactly these tokens and
    stops, so a true here is a correct greedy answer; a false may still be a right number
    tokenized otherwise (rare: digits are single tokens in the bundled models). The line's end is
    any token the decoder's newline stop cuts to white space (``"\n"``, ``"\n\n"``, ``" \n"``:
    :func:`line_end_ids`) or a stop id. ``need_end=False`` reads the answer's tokens alone (a
    diagnostic: whether the number is there, ended or not)."""
    from whitebox_eval.tasks.prompts import render_prompt

    shown = [d.source for d in demos]
    return line_exact_match(lm, [render_prompt(it.source, fmt="free", demos=shown).text for it in items],
                            [f" {it.source.meta['answer']}" for it in items], batch_size, need_end=need_end)


def line_exact_match(lm, prompts: Sequence[str], answers: Sequence[str], batch_size: int, *,
                     need_end: bool = True) -> list[bool]:
    """Teacher-forced, for each prompt text: every token of its answer text the argmax after it,
    then (``need_end``) a line's end the argmax after the answer (:func:`free_exact_match`'s
    reading, for any prompt)."""
    tok = lm.tokenizer
    ends = line_end_ids(tok) | {int(t) for t in lm.stop_ids}
    seqs = []
    for text, answer_text in zip(prompts, answers, strict=True):
        prompt = list(tok(text)["input_ids"])
        answer = list(tok(answer_text, add_special_tokens=False)["input_ids"])
        seqs.append((prompt + answer, list(range(len(prompt) - 1, len(prompt) + len(answer))), answer + [0]))
    right = []
    was = lm.model.training
    lm.model.eval()
    try:
        with torch.no_grad():
            for i in range(0, len(seqs), batch_size):
                part = seqs[i:i + batch_size]
                _, argmax = row_outputs(lm.model, row_batch(part, lm.pad_id))
                for (_, _, target), got in zip(part, argmax.cpu().tolist()):
                    k = len(target) - 1
                    right.append(got[:k] == target[:k] and (got[k] in ends or not need_end))
    finally:
        lm.model.train(was)
    return right


def line_end_ids(tok) -> set[int]:
    """The tokens that end a free answer's line as the decoder reads it (it cuts its text at the
    first newline): those whose text holds a newline with only white space before it."""
    marks = ("\n", "\u010a")  # a newline as SentencePiece and as byte-level BPE vocabularies write it
    out = set()
    for piece, i in tok.get_vocab().items():
        if any(m in piece for m in marks):
            text = tok.decode([i])
            if "\n" in text and not text.split("\n", 1)[0].strip():
                out.add(int(i))
    return out


def _free_format(lm, items: Sequence[Item], demos: Sequence[Item], samples: int, seed: int,
                 budget: int) -> list[dict[str, Any]]:
    from whitebox_eval.formats.generation import sample_prompt, stream_seed
    from whitebox_eval.formats.study import score_free
    from whitebox_eval.internals.engine import Engine
    from whitebox_eval.tasks.prompts import render_prompt

    engine = Engine(lm)
    shown = [d.source for d in demos]
    rows = []
    for it in items:
        prompt = render_prompt(it.source, fmt="free", demos=shown).text
        answer = it.source.meta["answer"]
        greedy = sample_prompt(lm, prompt, n_samples=1, temperature=0.0, max_new_tokens=budget, seed=0, engine=engine)
        drawn = sample_prompt(lm, prompt, n_samples=samples, temperature=1.0, max_new_tokens=budget,
                              seed=stream_seed(seed, it.id, "free"), engine=engine) if samples else []
        rows.append({"id": it.id, "response": greedy[0], "correct": bool(score_free(greedy, answer, "number")),
                     **({"p_correct": score_free(drawn, answer, "number"), "samples": drawn} if samples else {})})
    return rows


def token_accuracy(lm, items: Sequence[Item], encoded: Sequence[Encoded], batch_size: int) -> list[dict[str, Any]]:
    """Teacher-forced hits per item: how many answer tokens are the argmax, of how many."""
    seqs = sequences(encoded)
    rows = []
    with torch.no_grad():
        for i in range(0, len(seqs), batch_size):
            batch = row_batch(seqs[i:i + batch_size], lm.pad_id)
            _, argmax = row_outputs(lm.model, batch)
            hits = ((argmax.cpu() == batch.targets) & (batch.weights > 0)).sum(1)
            for it, k, n in zip(items[i:i + batch_size], hits.tolist(), batch.weights.sum(1).tolist()):
                rows.append({"id": it.id, "hits": int(k), "tokens": int(n)})
    return rows


def outcomes(source: Source, rows: Sequence[dict[str, Any]]) -> list[bool]:
    """The 0/1 trials of the check: one per item, or one per token for a text."""
    if source.kind == TEXT:
        return [t < r["hits"] for r in rows for t in range(r["tokens"])]
    return [bool(r["correct"]) for r in rows]


def plot_losses(losses: Sequence[float], validation: Sequence[dict[str, float]], path: Path) -> Path:
    """The training loss per step (and its running mean over 10 steps) with the validation
    loss at each evaluation."""
    import numpy as np
    from matplotlib.figure import Figure

    from whitebox_eval.runs.png import save_png

    fig = Figure(figsize=(6, 3.6))
    ax = fig.add_subplot(1, 1, 1)
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, losses, color="#9ab", lw=0.8, label="training loss (step)")
    if len(losses) >= 10:
        run = np.convolve(losses, np.ones(10) / 10, mode="valid")
        ax.plot(steps[9:], run, color="#246", lw=1.5, label="training loss (10-step mean)")
    if validation:
        ax.plot([v["step"] for v in validation], [v["loss"] for v in validation], "o-", color="#c52",
                label="validation loss")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy per target token")
    ax.legend(frameon=False, fontsize=8)
    return save_png(fig, path)
