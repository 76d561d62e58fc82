"""First-token probabilities of the target and its alternatives, one engine pass per batch.

App. C: "the output logits from the last position are used to compute the probability
of the target", and an example is correct when that probability exceeds the
alternatives' average (:func:`whitebox_eval.gar.evaluation.appc_correct`).  Here the
probability is the softmax over the *whole vocabulary* at the last prompt token, read
at each alternative's first token (:func:`~whitebox_eval.gar.prompts.answer_token_ids`).

Batches are left padded with correct position ids (the engine's :class:`Batch`), so the
numbers do not depend on the batch size beyond float tolerance.  ``edits_for`` lets an
intervention change the pass (see :mod:`whitebox_eval.gar.interventions`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.evaluation import appc_correct, off_format
from whitebox_eval.gar.roles import EncodedExample
from whitebox_eval.internals import Batch, Engine, batch_from_ids, to_device
from whitebox_eval.internals.requests import Edit

EditsFor = Callable[[Sequence[EncodedExample], Batch], list[Edit]]


@dataclass(frozen=True)
class ExampleScore:
    """First-token probabilities of one example's alternatives and the two correctness rules."""

    probs: dict[str, float]
    target: str
    correct: bool
    correct_argmax: bool
    prediction: str
    shared_first_token: bool
    choice_mass: float = float("nan")  # total probability on the choices' distinct first tokens
    top_token: str | None = None  # the model's most likely next token over the whole vocabulary
    error_class: str | None = None  # :func:`error_class` of that token (App. C error analysis)

    @property
    def target_prob(self) -> float:
        return self.probs[self.target]

    def to_dict(self) -> dict:
        return {"probs": {k: round(v, 6) for k, v in self.probs.items()},
                "target_prob": round(self.target_prob, 6), "correct": self.correct,
                "correct_argmax": self.correct_argmax, "prediction": self.prediction,
                "shared_first_token": self.shared_first_token, "choice_mass": round(self.choice_mass, 6),
                **({"top_token": self.top_token, "error_class": self.error_class} if self.top_token is not None else {})}


def score_from_probs(enc: EncodedExample, probs: dict[str, float], rule: str = "chance") -> ExampleScore:
    """App. C and argmax correctness from the alternatives' first-token probabilities.

    Argmax: the target's probability is strictly above every other alternative's (two
    alternatives sharing a first token therefore never count as an argmax win).
    """
    ex = enc.example
    alts = list(ex.alternatives)
    target_p = probs[ex.target]
    others = [probs[a] for a in alts if a != ex.target]
    pred = max(alts, key=lambda a: (probs[a], a == ex.target))
    ids = [enc.answer_ids[a] for a in alts]
    return ExampleScore(probs=dict(probs), target=ex.target,
                        correct=appc_correct(target_p, [probs[a] for a in alts], rule),
                        correct_argmax=all(target_p > p for p in others), prediction=pred,
                        shared_first_token=len(set(ids)) < len(ids),
                        choice_mass=float(sum({enc.answer_ids[a]: probs[a] for a in alts}.values())))


ERROR_CLASSES = ("target", "other_candidate", "off_candidates")


def error_class(enc: EncodedExample, top_id: int, top_token: str | None = None) -> str:
    """App. C error analysis, automated on the model's top next token over the vocabulary:
    ``target`` (the target's first token), ``other_candidate`` (another choice's first token:
    the paper's class 2, r_retrieve applied to a wrong candidate V'), ``off_format``
    (:func:`.evaluation.off_format`: no answer at all, its own class), or ``off_candidates`` (none of the
    choices: the paper's class 1 (a synonym of the answer) or class 3 (an irrelevant answer),
    which only reading the token can tell apart)."""
    ex = enc.example
    if top_id == enc.answer_ids[ex.target]:
        return "target"
    if any(top_id == enc.answer_ids[a] for a in ex.alternatives if a != ex.target):
        return "other_candidate"
    return "off_format" if off_format(top_token) else "off_candidates"


def make_batch(engine: Engine, encoded: Sequence[EncodedExample]) -> Batch:
    """Left-padded batch of the encoded prompts on the engine's device."""
    return batch_from_ids([list(e.input_ids) for e in encoded], pad_id=engine.loaded.pad_id).to(engine.loaded.device)


def alternative_probs(logits: torch.Tensor, encoded: Sequence[EncodedExample]) -> list[dict[str, float]]:
    """Softmax of last-position logits [B, vocab] read at each alternative's first token."""
    return _read(logits, encoded)[0]


def _read(logits: torch.Tensor, encoded: Sequence[EncodedExample], index: torch.Tensor | None = None):
    """(each example's alternative probabilities, its top token id): the softmax read at every
    alternative's first token for the whole batch at once, and one copy to the host."""
    if logits.shape[0] != len(encoded):
        raise WhiteboxError(f"{logits.shape[0]} logit rows for {len(encoded)} examples")
    if index is None:
        index = _alternative_ids(encoded)
    p = torch.softmax(logits.detach().float(), dim=-1)
    picked = p.gather(1, index.to(p.device))
    top = logits.detach().float().argmax(-1, keepdim=True).to(picked.dtype)  # token ids < 2**24: exact in float32
    host = torch.cat([picked, top], dim=1).cpu()
    probs = [{a: float(v) for a, v in zip(e.example.alternatives, row)}
             for e, row in zip(encoded, host[:, :-1].tolist())]
    return probs, [int(t) for t in host[:, -1].tolist()]


def _alternative_ids(encoded: Sequence[EncodedExample]) -> torch.Tensor:
    """[B, max alternatives] first-token ids of every example's alternatives (rows padded by repeating)."""
    ids = [[e.answer_ids[a] for a in e.example.alternatives] for e in encoded]
    width = max(len(r) for r in ids)
    return torch.tensor([r + [r[-1]] * (width - len(r)) for r in ids], dtype=torch.long)


def score_batch(engine: Engine, encoded: Sequence[EncodedExample], *,
                edits_for: EditsFor | None = None, rule: str = "chance") -> list[ExampleScore]:
    """One engine pass over ``encoded`` (optionally edited) -> one score per example."""
    batch = make_batch(engine, encoded)
    edits = edits_for(encoded, batch) if edits_for is not None else []
    (index,) = to_device([_alternative_ids(encoded)], engine.output_device)  # uploaded before the forward
    trace = engine.run(batch, edits=edits)
    probs, top = _read(trace.logits, encoded, index)
    decode = getattr(engine.tokenizer, "decode", None)  # every HF tokenizer has it; test stubs may not
    out = []
    for e, p, t in zip(encoded, probs, top):
        text = decode([t]) if decode else None
        out.append(dataclasses.replace(score_from_probs(e, p, rule), top_token=f"<{t}>" if text is None else text,
                                       error_class=error_class(e, t, text)))
    return out


def score_examples(engine: Engine, encoded: Sequence[EncodedExample], *, batch_size: int = 8,
                   edits_for: EditsFor | None = None, rule: str = "chance") -> list[ExampleScore]:
    """:func:`score_batch` over consecutive batches of ``batch_size``."""
    if batch_size < 1:
        raise WhiteboxError(f"batch size must be >= 1 (got {batch_size})")
    out: list[ExampleScore] = []
    for i in range(0, len(encoded), batch_size):
        out.extend(score_batch(engine, encoded[i:i + batch_size], edits_for=edits_for, rule=rule))
    return out
