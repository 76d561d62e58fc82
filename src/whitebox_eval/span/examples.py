"""AttentionSpan examples and their builders (paper 003 sec. 3, table 3): each example
carries, for every target character, the earlier characters a correct solver must read
(the reference attention mask of sec. 3.1; coordinates and choices in
:mod:`whitebox_eval.span.tasks`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from whitebox_eval.errors import WhiteboxError

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
