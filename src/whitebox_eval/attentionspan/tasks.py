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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError

#: which splits a span study evaluates: in-distribution lengths, out-of-distribution, or both
SPLIT_CHOICES = ("id", "ood", "both")

#: 62 alphanumeric characters: App. F asks for "at least 50 unique characters".
ALPHANUMERIC = string.ascii_uppercase + string.ascii_lowercase + string.digits

Reference = frozenset[int] | None


@dataclass
class SpanExample:
    """One AttentionSpan problem (sec. 3.1): prompt, answer and reference mask.

    ``reference[k]`` is the set of indices into ``text`` (= ``input + target``) that
    target character ``k`` needs, or ``None`` when nothing single is referenced.
    """

    task: str
    input: str
    target: str
    reference: tuple[Reference, ...]
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.reference) != len(self.target):
            raise WhiteboxError(
                f"{self.task}: {len(self.reference)} reference rows for a target of "
                f"{len(self.target)} characters; give one row (a set or None) per character"
            )
        for k, ref in enumerate(self.reference):
            if ref is None:
                continue
            limit = len(self.input) + k
            bad = [i for i in ref if not 0 <= i < limit]
            if bad or not ref:
                raise WhiteboxError(
                    f"{self.task}: reference of target character {k} must be a non-empty "
                    f"set of indices in [0, {limit}); got {sorted(ref)}"
                )

    @property
    def text(self) -> str:
        """The full sequence ``input + target`` the reference indices point into."""
        return self.input + self.target

    @property
    def valid(self) -> np.ndarray:
        """Boolean vector [len(target)]: True where a reference exists."""
        return np.array([r is not None for r in self.reference], dtype=bool)

    def reference_matrix(self) -> np.ndarray:
        """Boolean matrix [len(target), len(text)] in character coordinates."""
        out = np.zeros((len(self.target), len(self.text)), dtype=bool)
        for k, ref in enumerate(self.reference):
            if ref is not None:
                out[k, sorted(ref)] = True
        return out


def _ref(indices: Sequence[int] | set[int]) -> Reference:
    return frozenset(indices) if indices else None


def _reversed_digits(value: int) -> str:
    """Decimal digits, least significant first (App. A.3)."""
    return str(value)[::-1]


# --------------------------------------------------------------------------- builders


def string_reversal_example(chars: str) -> SpanExample:
    """String reversal (App. A.1): ``s=`` -> ``reverse(s)``.

    Target character ``k`` references input character ``n-1-k``.
    """
    if not chars:
        raise WhiteboxError("string_reversal: the string to reverse must not be empty")
    n = len(chars)
    reference = tuple(frozenset({n - 1 - k}) for k in range(n))
    return SpanExample("string_reversal", chars + "=", chars[::-1], reference,
                       {"length": n})


def long_addition_example(operands: Sequence[int], *, pad_with_zeros: bool = True,
                          carry_reference: bool = False) -> SpanExample:
    """Long addition (App. A.3, table 3 row 2): ``a+b+...=`` -> sum, digits reversed.

    Numbers are written least significant digit first. With ``pad_with_zeros`` every
    operand and the sum are right-padded with zeros to one common width, the number of
    digits of the longest of them (table 3: ``1240+4335+3440=8916``).

    Reference of sum digit ``i``: digit ``i`` of every operand that has one (the
    column of the standard algorithm, as in the released generator). With
    ``carry_reference`` digit ``i-1`` of every operand is added (the column the carry
    comes from). An unpadded carry-out digit with no column under it has no reference.
    """
    if len(operands) < 2:
        raise WhiteboxError("long_addition: give at least 2 operands")
    if any(int(x) < 0 for x in operands):
        raise WhiteboxError("long_addition: operands must be non-negative integers")
    total = sum(int(x) for x in operands)
    parts = [_reversed_digits(int(x)) for x in operands]
    result = _reversed_digits(total)
    if pad_with_zeros:
        width = max(len(p) for p in parts + [result])
        parts = [p.ljust(width, "0") for p in parts]
        result = result.ljust(width, "0")
    offsets = []
    pos = 0
    for p in parts:
        offsets.append(pos)
        pos += len(p) + 1
    reference = []
    for i in range(len(result)):
        cols = [i - 1, i] if carry_reference and i > 0 else [i]
        reference.append(_ref({off + c for off, p in zip(offsets, parts)
                               for c in cols if c < len(p)}))
    return SpanExample("long_addition", "+".join(parts) + "=", result, tuple(reference),
                       {"operands": [int(x) for x in operands],
                        "pad_with_zeros": pad_with_zeros,
                        "carry_reference": carry_reference})


def long_multiplication_example(a: int, b: int, *, pad_with_zeros: bool = True,
                                carry_reference: bool = False,
                                reference_sum: bool = False) -> SpanExample:
    """Long multiplication (App. A.2, table 3 row 3): ``a*b=`` -> ``p0+p1+...=a·b``.

    The larger operand comes first; ``p_i = a · b_i · 10^i`` is the intermediate
    product of the ``i``-th digit of ``b``; all numbers least significant digit first.
    With ``pad_with_zeros`` (table 3: ``9900*9900=1980+0198+0000+0000=1089``) operands,
    products and result are padded to width ``W = 2·len(a)`` and there is one product
    per digit of the padded ``b`` (as the released generator does).

    Reference of digit ``j`` of ``p_i``: digit ``i`` of ``b`` and digit ``j-i`` of
    ``a`` (the shift by ``i`` is respected; the released generator points at digit
    ``j`` of ``a``, which is wrong for ``i > 0``). Digits ``j < i`` are the positional
    zeros of the shift: no reference. Unpadded ``p_i = 0`` (written ``0``) references
    digit ``i`` of ``b``. ``carry_reference`` adds digit ``j-i-1`` of ``a``.
    Separators ``+`` and ``=`` have no reference. Digits of the final result have no
    reference by default (the released generator removed them: the model need not
    attend to its own outputs); ``reference_sum`` makes digit ``k`` reference digit
    ``k`` of every intermediate product (plus ``k-1`` with ``carry_reference``).
    """
    a, b = int(a), int(b)
    if a < 0 or b < 0:
        raise WhiteboxError("long_multiplication: operands must be non-negative integers")
    if a < b:
        a, b = b, a
    a_str, b_str = _reversed_digits(a), _reversed_digits(b)
    if pad_with_zeros:
        width = 2 * len(a_str)
        a_str, b_str = a_str.ljust(width, "0"), b_str.ljust(width, "0")
        products = [_reversed_digits(a * int(d) * 10 ** i).ljust(width, "0")
                    for i, d in enumerate(b_str)]
        result = _reversed_digits(a * b).ljust(width, "0")
    else:
        products = [_reversed_digits(a * int(d) * 10 ** i) for i, d in enumerate(b_str)]
        result = _reversed_digits(a * b)
    prompt = a_str + "*" + b_str + "="
    b_off = len(a_str) + 1
    reference: list[Reference] = []
    product_offsets = []
    pos = len(prompt)
    for i, p in enumerate(products):
        product_offsets.append(pos)
        for j in range(len(p)):
            c = j - i
            if not pad_with_zeros and int(b_str[i]) == 0:
                reference.append(frozenset({b_off + i}))
            elif c < 0:
                reference.append(None)
            else:
                ref = {b_off + i}
                if c < len(a_str):
                    ref.add(c)
                if carry_reference and 0 <= c - 1 < len(a_str):
                    ref.add(c - 1)
                reference.append(frozenset(ref))
        reference.append(None)  # the '+' after it, or the '=' after the last one
        pos += len(p) + 1
    for k in range(len(result)):
        if reference_sum:
            cols = [k - 1, k] if carry_reference and k > 0 else [k]
            reference.append(_ref({off + c for off, p in zip(product_offsets, products)
                                   for c in cols if c < len(p)}))
        else:
            reference.append(None)
    target = "+".join(products) + "=" + result
    return SpanExample("long_multiplication", prompt, target, tuple(reference),
                       {"a": a, "b": b, "pad_with_zeros": pad_with_zeros,
                        "carry_reference": carry_reference, "reference_sum": reference_sum})


FLIP_FLOP_COMMANDS = "wifr"


def flip_flop_example(program: str) -> SpanExample:
    """Flip-flop language modelling with registers and flip (App. A.5, table 3 row 4).

    ``program`` is the input: 3-character commands ``<op><register><bit>`` with ``op``
    in ``w`` (write), ``i`` (ignore), ``f`` (flip), ``r`` (read; its bit must be the
    register's value), then a final read ``r<register>`` without its bit, which is the
    target. Registers start at 0; ``f`` negates a register, its bit is noise, like
    that of ``i``. Example: ``w11i11f10r10f10r1`` -> ``1``.

    Reference: the register digit of the final read, the three characters of the last
    write to that register -- including when that write is the very first command,
    which the released generator's backward scan skips -- and the ``f`` and register
    characters of every flip of that register after it (every flip when it was never
    written). Intermediate reads repeat information and are not referenced.
    """
    if len(program) < 2 or (len(program) - 2) % 3 != 0 or program[-2] != "r":
        raise WhiteboxError(
            f"flip_flop: program {program!r} must be 3-character commands followed by a "
            "final read 'r<register>' (e.g. 'w11i11f10r1')")
    registers: dict[str, int] = {}
    last_write: dict[str, int] = {}
    flips: dict[str, list[int]] = {}
    for p in range(0, len(program) - 2, 3):
        op, reg, bit = program[p:p + 3]
        if op not in FLIP_FLOP_COMMANDS or not reg.isdigit() or bit not in "01":
            raise WhiteboxError(
                f"flip_flop: command {program[p:p + 3]!r} at {p} must be one of "
                f"{list(FLIP_FLOP_COMMANDS)} + register digit + bit 0/1")
        if op == "w":
            registers[reg] = int(bit)
            last_write[reg] = p
            flips[reg] = []
        elif op == "f":
            registers[reg] = 1 - registers.get(reg, 0)
            flips.setdefault(reg, []).append(p)
        elif op == "r" and int(bit) != registers.get(reg, 0):
            raise WhiteboxError(
                f"flip_flop: read {program[p:p + 3]!r} at {p} holds {bit} but register "
                f"{reg} holds {registers.get(reg, 0)}; fix the bit")
    reg = program[-1]
    if not reg.isdigit():
        raise WhiteboxError(f"flip_flop: final read register {reg!r} must be a digit")
    ref = {len(program) - 1}
    if reg in last_write:
        w = last_write[reg]
        ref.update({w, w + 1, w + 2})
    for f in flips.get(reg, []):
        ref.update({f, f + 1})
    target = str(registers.get(reg, 0))
    return SpanExample("flip_flop", program, target, (frozenset(ref),),
                       {"n_commands": (len(program) + 1) // 3})


def value_assignment_example(table: Sequence[tuple[str, str]], query: str) -> SpanExample:
    """Value assignment (App. A.4, table 3 row 5): ``k1v1k2v2... q=`` -> ``map(q)``.

    Reference of output character ``k``: query character ``k`` and the key and value
    characters of its pair in the table (as in the released generator).
    """
    keys = [k for k, _ in table]
    if any(len(k) != 1 or len(v) != 1 for k, v in table):
        raise WhiteboxError("value_assignment: keys and values must be single characters")
    if len(set(keys)) != len(keys):
        raise WhiteboxError("value_assignment: table keys must be unique")
    if not query:
        raise WhiteboxError("value_assignment: the string to translate must not be empty")
    missing = sorted(set(query) - set(keys))
    if missing:
        raise WhiteboxError(f"value_assignment: query characters {missing} have no entry "
                            "in the table")
    where = {k: 2 * i for i, k in enumerate(keys)}
    mapping = dict(table)
    prompt = "".join(k + v for k, v in table) + " " + query + "="
    q_off = 2 * len(table) + 1
    reference = tuple(frozenset({q_off + i, where[c], where[c] + 1})
                      for i, c in enumerate(query))
    return SpanExample("value_assignment", prompt, "".join(mapping[c] for c in query),
                       reference, {"n_pairs": len(table), "length": len(query)})


def successor_example(start: int, count: int) -> SpanExample:
    """Successor (App. F.5): ``n `` -> ``n+1 n+2 ... n+count-1 `` (space-terminated).

    Every target character of number ``m`` (its digits and trailing space) references
    all characters from the first digit of number ``m-1`` up to the character just
    before it, as the released generator does.
    """
    if start < 0:
        raise WhiteboxError("successor: the starting number must be non-negative")
    if count < 2:
        raise WhiteboxError("successor: the series needs at least 2 numbers")
    numbers = [str(start + i) + " " for i in range(count)]
    starts = np.cumsum([0] + [len(x) for x in numbers]).tolist()
    reference = []
    for m in range(1, count):
        for j in range(len(numbers[m])):
            p = starts[m] + j
            reference.append(frozenset(range(starts[m - 1], p)))
    return SpanExample("successor", numbers[0], "".join(numbers[1:]), tuple(reference),
                       {"start": start, "count": count})


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
