"""AttentionSpan task generators with reference attention masks (paper 003).

Implements the algorithmic tasks of sec. 3 / App. A (formats as in table 3) and the
in-distribution / out-of-distribution configurations of App. F. Every example carries,
for each target character, the set of earlier characters a correct solver must read
to produce it (the reference attention mask of sec. 3.1).

Coordinates. ``SpanExample.reference[k]`` holds indices into ``example.text``
(``input + target``); target character ``k`` sits at ``len(input) + k`` and may only
reference earlier characters. Most tasks reference input characters only; the
successor task (and, optionally, the final sum of long multiplication) also references
characters the model generated earlier, as the paper's released generators do.
``None`` marks a target character with no reference (separators, positional zeros):
such rows are excluded from attention scores, not counted as zero.

Choices where the paper is silent (each exposed as a parameter where it matters):

* Reference rows follow the authors' released generators unless those are wrong for
  the task; deviations are listed in the builder docstrings (long multiplication,
  flip-flop first command).
* Randomness: ``generate`` seeds ``random.Random`` with a string built from the task,
  split and seed, so the same call always gives the same examples and the ID and OOD
  streams of one seed are independent.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from whitebox_eval.span.examples import (
    SpanExample,
    flip_flop_example,
    long_addition_example,
    long_multiplication_example,
    string_reversal_example,
    successor_example,
    value_assignment_example,
)
from whitebox_eval.errors import WhiteboxError

#: which splits a span study evaluates: in-distribution lengths, out-of-distribution, or both
SPLIT_CHOICES = ("id", "ood", "both")

#: 62 alphanumeric characters: App. F asks for "at least 50 unique characters".
ALPHANUMERIC = string.ascii_uppercase + string.ascii_lowercase + string.digits

# ------------------------------------------------------------------------- parameters

IntRange = tuple[int, int]


def _int_range(task: str, name: str, value: Any, minimum: int,
               maximum: int | None = None) -> IntRange:
    """Accept ``k`` or ``(lo, hi)`` (inclusive) and check the bounds."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        lo = hi = int(value)
    elif (isinstance(value, (tuple, list)) and len(value) == 2
          and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                  for v in value)):
        lo, hi = int(value[0]), int(value[1])
    else:
        raise WhiteboxError(f"{task}: {name} must be an integer or an inclusive "
                            f"(low, high) pair of integers; got {value!r}")
    top = "" if maximum is None else f" and at most {maximum}"
    if lo > hi or lo < minimum or (maximum is not None and hi > maximum):
        raise WhiteboxError(f"{task}: {name}={value!r} must satisfy {minimum} <= low <= "
                            f"high{top}")
    return lo, hi


def _charset(task: str, name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise WhiteboxError(f"{task}: {name} must be a non-empty string of characters")
    if len(set(value)) != len(value):
        raise WhiteboxError(f"{task}: {name} has repeated characters; list each once")
    return value


def _bool(task: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise WhiteboxError(f"{task}: {name} must be True or False; got {value!r}")
    return value


def _draw(rng: random.Random, span: IntRange) -> int:
    return rng.randint(span[0], span[1])


def _number_with_digits(rng: random.Random, digits: int) -> int:
    """Uniform integer with exactly ``digits`` digits (0-9 for one digit)."""
    low = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.randint(low, 10 ** digits - 1)


def _gen_string_reversal(rng: random.Random, cfg: Mapping[str, Any]) -> SpanExample:
    length = _int_range("string_reversal", "length", cfg["length"], 1)
    charset = _charset("string_reversal", "charset", cfg["charset"])
    chars = "".join(rng.choice(charset) for _ in range(_draw(rng, length)))
    return string_reversal_example(chars)


def _gen_long_addition(rng: random.Random, cfg: Mapping[str, Any]) -> SpanExample:
    digits = _int_range("long_addition", "digits", cfg["digits"], 1)
    n_ops = _int_range("long_addition", "n_operands", cfg["n_operands"], 2)
    operands = [_number_with_digits(rng, _draw(rng, digits)) for _ in range(_draw(rng, n_ops))]
    return long_addition_example(
        operands, pad_with_zeros=_bool("long_addition", "pad_with_zeros", cfg["pad_with_zeros"]),
        carry_reference=_bool("long_addition", "carry_reference", cfg["carry_reference"]))


def _gen_long_multiplication(rng: random.Random, cfg: Mapping[str, Any]) -> SpanExample:
    task = "long_multiplication"
    digits = _int_range(task, "digits", cfg["digits"], 1)
    a = _number_with_digits(rng, _draw(rng, digits))
    b = _number_with_digits(rng, _draw(rng, digits))
    return long_multiplication_example(
        a, b, pad_with_zeros=_bool(task, "pad_with_zeros", cfg["pad_with_zeros"]),
        carry_reference=_bool(task, "carry_reference", cfg["carry_reference"]),
        reference_sum=_bool(task, "reference_sum", cfg["reference_sum"]))


def _gen_flip_flop(rng: random.Random, cfg: Mapping[str, Any]) -> SpanExample:
    task = "flip_flop"
    n_commands = _int_range(task, "n_commands", cfg["n_commands"], 1)
    n_registers = _int_range(task, "n_registers", cfg["n_registers"], 1, 10)
    ops = "wi" + ("f" if _bool(task, "use_flip", cfg["use_flip"]) else "") + \
        ("r" if _bool(task, "intermediate_reads", cfg["intermediate_reads"]) else "")
    n_reg = _draw(rng, n_registers)
    values = [0] * n_reg
    parts = []
    for _ in range(_draw(rng, n_commands) - 1):
        op = rng.choice(ops)
        reg = rng.randrange(n_reg)
        bit = rng.randint(0, 1)
        if op == "w":
            values[reg] = bit
        elif op == "f":
            values[reg] = 1 - values[reg]
        elif op == "r":
            bit = values[reg]
        parts.append(f"{op}{reg}{bit}")
    parts.append(f"r{rng.randrange(n_reg)}")
    example = flip_flop_example("".join(parts))
    example.params["n_registers"] = n_reg
    return example


def _gen_value_assignment(rng: random.Random, cfg: Mapping[str, Any]) -> SpanExample:
    task = "value_assignment"
    keys_cs = _charset(task, "key_charset", cfg["key_charset"])
    values_cs = _charset(task, "value_charset", cfg["value_charset"])
    n_pairs = _int_range(task, "n_pairs", cfg["n_pairs"], 1, len(keys_cs))
    length = _int_range(task, "length", cfg["length"], 1)
    keys = rng.sample(keys_cs, _draw(rng, n_pairs))
    table = [(k, rng.choice(values_cs)) for k in keys]
    query = "".join(rng.choice(keys) for _ in range(_draw(rng, length)))
    return value_assignment_example(table, query)


def _gen_successor(rng: random.Random, cfg: Mapping[str, Any]) -> SpanExample:
    start = _int_range("successor", "start", cfg["start"], 0)
    count = _int_range("successor", "count", cfg["count"], 2)
    return successor_example(_draw(rng, start), _draw(rng, count))


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class TaskSpec:
    """A task: its generator, free parameters and the App. F split configurations."""

    name: str
    draw: Callable[[random.Random, Mapping[str, Any]], SpanExample]
    defaults: Mapping[str, Any]
    splits: Mapping[str, Mapping[str, Any]]
    paper_section: str


TASKS: dict[str, TaskSpec] = {
    "string_reversal": TaskSpec(
        "string_reversal", _gen_string_reversal,
        {"charset": ALPHANUMERIC, "length": (1, 10)},
        {"id": {"length": (1, 10)}, "ood": {"length": (11, 50)}},
        "App. A.1, F.4"),
    "long_addition": TaskSpec(
        "long_addition", _gen_long_addition,
        {"n_operands": 2, "digits": (1, 4), "pad_with_zeros": True,
         "carry_reference": False},
        {"id": {"n_operands": 2, "digits": (1, 4)},
         "ood": {"n_operands": 2, "digits": (5, 10)}},
        "App. A.3, F.1"),
    "long_multiplication": TaskSpec(
        "long_multiplication", _gen_long_multiplication,
        {"digits": (1, 3), "pad_with_zeros": True, "carry_reference": False,
         "reference_sum": False},
        {"id": {"digits": (1, 3)}, "ood": {"digits": (4, 6)}},
        "App. A.2, F.3"),
    "flip_flop": TaskSpec(
        "flip_flop", _gen_flip_flop,
        {"n_commands": 10, "n_registers": 2, "use_flip": True, "intermediate_reads": True},
        {"id": {"n_commands": 10, "n_registers": 2, "use_flip": True},
         "ood": {"n_commands": (11, 100), "n_registers": 2, "use_flip": True}},
        "App. A.5, F.2"),
    "value_assignment": TaskSpec(
        "value_assignment", _gen_value_assignment,
        {"n_pairs": 5, "length": 5, "key_charset": ALPHANUMERIC,
         "value_charset": ALPHANUMERIC},
        {"id": {"n_pairs": 5, "length": 5}, "ood": {"n_pairs": (10, 50), "length": (10, 20)}},
        "App. A.4, F.6"),
    "successor": TaskSpec(
        "successor", _gen_successor,
        {"start": (1, 90), "count": (2, 4)},
        {"id": {"start": (1, 90), "count": (2, 4)},
         "ood": {"start": (100, 900), "count": (5, 6)}},
        "App. F.5"),
}

SPLITS = ("id", "ood")


def task_config(task: str, split: str = "id", **params: Any) -> dict[str, Any]:
    """The full parameter set of ``task`` for ``split`` (App. F), overridden by ``params``."""
    if task not in TASKS:
        raise WhiteboxError(f"unknown AttentionSpan task {task!r}; choose one of "
                            f"{sorted(TASKS)}")
    if split not in SPLITS:
        raise WhiteboxError(f"unknown split {split!r}; choose 'id' or 'ood'")
    spec = TASKS[task]
    unknown = sorted(set(params) - set(spec.defaults))
    if unknown:
        raise WhiteboxError(f"{task}: unknown parameter(s) {unknown}; valid ones are "
                            f"{sorted(spec.defaults)}")
    return {**spec.defaults, **spec.splits[split], **params}


def generate(task: str, n: int, split: str = "id", seed: int = 0,
             **params: Any) -> list[SpanExample]:
    """``n`` examples of ``task`` under the App. F ``split`` config; same seed, same data.

    ``params`` override the split's configuration (e.g. ``length=(20, 30)``).
    """
    cfg = task_config(task, split, **params)
    if not isinstance(n, int) or n < 0:
        raise WhiteboxError(f"n must be a non-negative integer; got {n!r}")
    rng = random.Random(f"attentionspan/{task}/{split}/{seed}")
    out = []
    for _ in range(n):
        example = TASKS[task].draw(rng, cfg)
        example.params["split"] = split
        out.append(example)
    return out
