"""AttentionSpan generators: formats (table 3), reference masks (sec. 3.1), App. F splits.

Hand-worked masks are written out literally; the brute-force checkers below re-derive
each reference from the task's arithmetic / semantics by perturbing the input, never
from the code under test.
"""

from __future__ import annotations

import pytest

from whitebox_eval.span.tasks import TASKS, generate, task_config
from whitebox_eval.span.examples import (
    flip_flop_example,
    long_addition_example,
    long_multiplication_example,
    string_reversal_example,
    successor_example,
    value_assignment_example,
)
from whitebox_eval.errors import WhiteboxError


def refs(example):
    return [None if r is None else sorted(r) for r in example.reference]


# ------------------------------------------------------------------ hand-worked masks


def test_string_reversal_hand_worked():
    e = string_reversal_example("abc")
    assert (e.input, e.target) == ("abc=", "cba")
    assert refs(e) == [[2], [1], [0]]


def test_long_addition_table3_example():
    # table 3: 1240 + 4335 + 3440 = 8916  (421 + 5334 + 443 = 6198, digits reversed)
    e = long_addition_example([421, 5334, 443])
    assert (e.input, e.target) == ("1240+4335+3440=", "8916")
    assert refs(e) == [[0, 5, 10], [1, 6, 11], [2, 7, 12], [3, 8, 13]]


def test_long_addition_unpadded_and_carry_reference():
    # 5 + 98 = 103 -> "5+89=" -> "301"; the carry-out digit has no column under it
    e = long_addition_example([5, 98], pad_with_zeros=False)
    assert (e.input, e.target) == ("5+89=", "301")
    assert refs(e) == [[0, 2], [3], None]
    c = long_addition_example([5, 98], pad_with_zeros=False, carry_reference=True)
    assert refs(c) == [[0, 2], [0, 2, 3], [3]]
    # padded: every column exists, "999+999" -> width 4 (the sum's length)
    p = long_addition_example([999, 999])
    assert (p.input, p.target) == ("9990+9990=", "8991")
    assert refs(p) == [[0, 5], [1, 6], [2, 7], [3, 8]]


def test_long_multiplication_table3_example():
    # table 3: 9900 * 9900 = 1980 + 0198 + 0000 + 0000 = 1089
    e = long_multiplication_example(99, 99)
    assert (e.input, e.target) == ("9900*9900=", "1980+0198+0000+0000=1089")
    # a at 0..3, b at 5..8; product i digit j needs b_i (5+i) and a_(j-i)
    assert refs(e) == [
        [0, 5], [1, 5], [2, 5], [3, 5], None,
        None, [0, 6], [1, 6], [2, 6], None,
        None, None, [0, 7], [1, 7], None,
        None, None, None, [0, 8], None,
        None, None, None, None,
    ]


def test_long_multiplication_unpadded_zero_digit_and_sum_reference():
    # 25 * 10: "52*01=" -> p0 = 25*0 = 0 -> "0", p1 = 25*1*10 = 250 -> "052"
    e = long_multiplication_example(10, 25, pad_with_zeros=False)  # larger goes first
    assert (e.input, e.target) == ("52*01=", "0+052=052")
    # "0" is zero because b_0 (char 3) is; p1 digit 0 is the shift's zero
    assert refs(e) == [[3], None, None, [0, 4], [1, 4], None, None, None, None]
    s = long_multiplication_example(25, 10, pad_with_zeros=False, reference_sum=True)
    # text "52*01=0+052=052": products at 6 and 8..10; result digit k <- column k
    assert refs(s)[-3:] == [[6, 8], [9], [10]]


def test_flip_flop_table3_example_first_command_is_last_write():
    # table 3: w11 i11 f10 r10 f10 r1 -> 1; the last write to register 1 is command 0
    e = flip_flop_example("w11i11f10r10f10r1")
    assert e.target == "1"
    assert refs(e) == [[0, 1, 2, 6, 7, 12, 13, 16]]


@pytest.mark.parametrize("program, target, expected", [
    ("w01w10r0", "1", [0, 1, 2, 7]),      # first command is the last write to reg 0
    ("w01w10w00r0", "0", [6, 7, 8, 10]),  # a later write supersedes it
    ("w00w01r0", "1", [3, 4, 5, 7]),
    ("f00i01r0", "1", [0, 1, 7]),         # never written: start at 0, flips count
    ("w11r0", "0", [4]),                  # never touched: only the read's register
])
def test_flip_flop_hand_worked(program, target, expected):
    e = flip_flop_example(program)
    assert e.target == target
    assert refs(e) == [expected]


def test_flip_flop_rejects_inconsistent_read():
    with pytest.raises(WhiteboxError, match="holds"):
        flip_flop_example("w11r10r1")


def test_value_assignment_table3_example():
    table = [("B", "1"), ("E", "0"), ("D", "1"), ("A", "1"), ("C", "0")]
    e = value_assignment_example(table, "ABBEDACABCD")
    assert (e.input, e.target) == ("B1E0D1A1C0 ABBEDACABCD=", "11101101101")
    # query starts at 11; A is pair 3 (chars 6, 7), B pair 0 (0, 1), E pair 1 (2, 3)
    assert refs(e)[:4] == [[6, 7, 11], [0, 1, 12], [0, 1, 13], [2, 3, 14]]


def test_successor_hand_worked():
    e = successor_example(12, 3)
    assert (e.input, e.target) == ("12 ", "13 14 ")
    assert refs(e) == [[0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3, 4],
                       [3, 4, 5], [3, 4, 5, 6], [3, 4, 5, 6, 7]]
    c = successor_example(99, 2)
    assert (c.input, c.target) == ("99 ", "100 ")
    assert refs(c) == [[0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]]


def test_reference_matrix_and_validity_line_up():
    e = long_multiplication_example(12, 3, pad_with_zeros=False)  # "21*3=" -> "63=63"
    m = e.reference_matrix()
    assert m.shape == (5, 10)
    assert m[0].nonzero()[0].tolist() == [0, 3] and m[1].nonzero()[0].tolist() == [1, 3]
    assert e.valid.tolist() == [True, True, False, False, False]
    assert not m[2:].any()


# -------------------------------------------------------------- brute-force checkers


def _digit(value: int, k: int) -> int:
    return (value // 10 ** k) % 10


def _rev_int(s: str) -> int:
    return int(s[::-1])


def _changes(solve, text: str, p: int, k: int, alphabet: str) -> bool:
    """Does some replacement of character p change output k of ``solve``?"""
    base = solve(text)
    for c in alphabet:
        if c != text[p] and solve(text[:p] + c + text[p + 1:])[k] != base[k]:
            return True
    return False


@pytest.mark.parametrize("seed", range(3))
def test_string_reversal_brute_force(seed):
    for e in generate("string_reversal", 40, "ood", seed=seed, length=(1, 12)):
        s = e.input[:-1]
        assert e.target == s[::-1]
        for k in range(len(s)):
            depends = {p for p in range(len(s))
                       if _changes(lambda t: t[::-1], s, p, k, "ab")}
            assert set(e.reference[k]) == depends


@pytest.mark.parametrize("pad", [True, False])
def test_long_addition_brute_force(pad):
    examples = generate("long_addition", 60, "id", seed=3, n_operands=(2, 4),
                        digits=(1, 4), pad_with_zeros=pad)
    for e in examples:
        parts = e.input[:-1].split("+")
        offsets = [sum(len(q) + 1 for q in parts[:j]) for j in range(len(parts))]
        assert _rev_int(e.target) == sum(_rev_int(q) for q in parts)
        column = {off + c: c for off, q in zip(offsets, parts) for c in range(len(q))}

        def solve(text, n=len(e.target)):
            total = sum(_rev_int(q) for q in text.split("+"))
            return [_digit(total, k) for k in range(n)]

        body = e.input[:-1]
        for k in range(len(e.target)):
            expected = {p for p, c in column.items() if c == k}
            assert (set(e.reference[k]) if e.reference[k] else set()) == expected
            for p in column:  # digit k reads column k, is never moved by higher ones
                moved = _changes(solve, body, p, k, "0123456789")
                if column[p] == k:
                    assert moved
                if column[p] > k:
                    assert not moved


@pytest.mark.parametrize("pad", [True, False])
def test_long_multiplication_brute_force(pad):
    examples = generate("long_multiplication", 25, "id", seed=5, digits=(1, 3),
                        pad_with_zeros=pad)
    for e in examples:
        a_s, b_s = e.input[:-1].split("*")
        a, b = _rev_int(a_s), _rev_int(b_s)
        products_s, result_s = e.target.split("=")
        products = products_s.split("+")
        assert _rev_int(result_s) == a * b and a >= b
        assert len(products) == len(b_s)
        for i, p in enumerate(products):
            assert _rev_int(p) == a * int(b_s[i]) * 10 ** i
        b_off = len(a_s) + 1
        t = 0
        for i, p in enumerate(products):
            for j in range(len(p)):
                ref = e.reference[t]
                # digit j of a * b_i * 10^i: read b_i and a's digit in column j - i
                if ref is None:
                    assert j < i  # only the shift's positional zeros are unreferenced
                else:
                    assert b_off + i in ref
                    a_cols = {q for q in ref if q < len(a_s)}
                    assert a_cols == ({j - i} if 0 <= j - i < len(a_s) else set())

                    def solve(text, i=i, j=j):
                        x, y = text.split("*")
                        return [_digit(_rev_int(x) * int(y[i]) * 10 ** i, j)]

                    body = e.input[:-1]
                    # b_i matters whenever a's column digit is non-zero; higher
                    # digits of a never matter; a's column digit matters when b_i != 0
                    if 0 <= j - i < len(a_s) and a_s[j - i] != "0":
                        assert _changes(solve, body, b_off + i, 0, "0123456789")
                    for q in range(len(a_s)):
                        if q > j - i:
                            assert not _changes(solve, body, q, 0, "0123456789")
                        if q == j - i and int(b_s[i]):
                            assert _changes(solve, body, q, 0, "0123456789")
                t += 1
            assert e.reference[t] is None  # the separator
            t += 1
        assert all(r is None for r in e.reference[t:])


def _simulate_flip_flop(program: str) -> str:
    """Independent simulator: reads are no-ops, registers start at 0."""
    regs: dict[str, int] = {}
    for p in range(0, len(program) - 2, 3):
        op, reg, bit = program[p:p + 3]
        if op == "w":
            regs[reg] = int(bit)
        elif op == "f":
            regs[reg] = 1 - regs.get(reg, 0)
    return str(regs.get(program[-1], 0))


def _flip_flop_brute_reference(program: str) -> set[int]:
    """Characters whose change changes the answer, expanded to whole command chunks."""
    answer = _simulate_flip_flop(program)
    ref = {len(program) - 1}
    for p in range(0, len(program) - 2, 3):
        op = program[p]
        if op == "w":
            flipped = program[:p + 2] + str(1 - int(program[p + 2])) + program[p + 3:]
            if _simulate_flip_flop(flipped) != answer:
                ref |= {p, p + 1, p + 2}
        elif op == "f":
            removed = program[:p] + "i" + program[p + 1:]
            if _simulate_flip_flop(removed) != answer:
                ref |= {p, p + 1}
    return ref


@pytest.mark.parametrize("split", ["id", "ood"])
def test_flip_flop_brute_force(split):
    examples = generate("flip_flop", 150, split, seed=11, n_registers=(1, 3),
                        n_commands=(1, 12) if split == "id" else (11, 40))
    first_command_cases = 0
    for e in examples:
        assert e.target == _simulate_flip_flop(e.input)
        brute = _flip_flop_brute_reference(e.input)
        assert set(e.reference[0]) == brute
        if e.input[0] == "w" and {0, 1, 2} <= brute:
            first_command_cases += 1
    if split == "id":
        assert first_command_cases > 0  # the released code's blind spot is exercised


def test_value_assignment_brute_force():
    for e in generate("value_assignment", 40, "ood", seed=2, n_pairs=(1, 12), length=(1, 12)):
        table_s, rest = e.input.split(" ", 1)
        query = rest[:-1]
        pairs = [table_s[i:i + 2] for i in range(0, len(table_s), 2)]
        mapping = {kv[0]: kv[1] for kv in pairs}
        assert len(mapping) == len(pairs)
        assert e.target == "".join(mapping[c] for c in query)
        q_off = len(table_s) + 1

        def solve(text):
            t_s, r = text.split(" ", 1)
            m = {t_s[i]: t_s[i + 1] for i in range(0, len(t_s), 2)}
            return [m.get(c, "?") for c in r]

        body = e.input[:-1]
        for k in range(len(query)):
            value_chars = {p for p in range(1, len(table_s), 2)
                           if _changes(solve, body, p, k, "xy")}
            assert len(value_chars) == 1
            v = value_chars.pop()
            assert set(e.reference[k]) == {q_off + k, v - 1, v}


def test_successor_brute_force():
    for e in generate("successor", 40, "ood", seed=4, start=(0, 1200), count=(2, 6)):
        numbers = e.text.split(" ")[:-1]
        assert [int(x) for x in numbers] == list(range(int(numbers[0]),
                                                        int(numbers[0]) + len(numbers)))
        starts = [sum(len(x) + 1 for x in numbers[:m]) for m in range(len(numbers))]
        k = 0
        for m in range(1, len(numbers)):
            for j in range(len(numbers[m]) + 1):  # digits and the trailing space
                p = starts[m] + j
                assert e.text[p] == (numbers[m] + " ")[j]
                assert set(e.reference[k]) == set(range(starts[m - 1], p))
                k += 1
        assert k == len(e.target)


def test_every_generated_reference_is_causal():
    for task in TASKS:
        for split in ("id", "ood"):
            for e in generate(task, 5, split, seed=9):
                for k, ref in enumerate(e.reference):
                    assert ref is None or max(ref) < len(e.input) + k


# ------------------------------------------------------------- determinism & splits


@pytest.mark.parametrize("task", sorted(TASKS))
def test_same_seed_same_data(task):
    a = generate(task, 8, "ood", seed=123)
    b = generate(task, 8, "ood", seed=123)
    c = generate(task, 8, "ood", seed=124)
    assert [(x.input, x.target, x.reference) for x in a] == \
        [(x.input, x.target, x.reference) for x in b]
    assert [x.text for x in a] != [x.text for x in c]


def test_split_configs_match_appendix_f():
    assert task_config("long_addition", "id")["digits"] == (1, 4)
    assert task_config("long_addition", "ood")["digits"] == (5, 10)
    assert task_config("long_addition", "ood")["n_operands"] == 2
    ff_id, ff_ood = task_config("flip_flop", "id"), task_config("flip_flop", "ood")
    assert (ff_id["n_commands"], ff_id["n_registers"], ff_id["use_flip"]) == (10, 2, True)
    assert (ff_ood["n_commands"], ff_ood["n_registers"], ff_ood["use_flip"]) == \
        ((11, 100), 2, True)
    assert task_config("long_multiplication", "id")["digits"] == (1, 3)
    assert task_config("long_multiplication", "ood")["digits"] == (4, 6)
    assert task_config("string_reversal", "id")["length"] == (1, 10)
    assert task_config("string_reversal", "ood")["length"] == (11, 50)
    assert len(set(task_config("string_reversal", "ood")["charset"])) >= 50
    assert (task_config("successor", "id")["start"], task_config("successor", "id")["count"]) \
        == ((1, 90), (2, 4))
    assert (task_config("successor", "ood")["start"],
            task_config("successor", "ood")["count"]) == ((100, 900), (5, 6))
    va_id, va_ood = task_config("value_assignment", "id"), task_config("value_assignment", "ood")
    assert (va_id["n_pairs"], va_id["length"]) == (5, 5)
    assert (va_ood["n_pairs"], va_ood["length"]) == ((10, 50), (10, 20))


def test_generated_id_and_ood_data_follow_their_ranges():
    def lens(task, split, f):
        return {f(e) for e in generate(task, 60, split, seed=0)}

    assert lens("string_reversal", "id", lambda e: len(e.target)) <= set(range(1, 11))
    assert lens("string_reversal", "ood", lambda e: len(e.target)) <= set(range(11, 51))
    digits_id = {len(str(x)) for e in generate("long_addition", 60, "id")
                 for x in e.params["operands"]}
    digits_ood = {len(str(x)) for e in generate("long_addition", 60, "ood")
                  for x in e.params["operands"]}
    assert digits_id <= {1, 2, 3, 4} and digits_ood <= set(range(5, 11))
    assert lens("long_addition", "ood", lambda e: e.input.count("+")) == {1}
    mul = {len(str(e.params[k])) for e in generate("long_multiplication", 60, "ood")
           for k in ("a", "b")}
    assert mul <= {4, 5, 6}
    assert lens("flip_flop", "id", lambda e: (len(e.input) + 1) // 3) == {10}
    ood_cmds = lens("flip_flop", "ood", lambda e: (len(e.input) + 1) // 3)
    assert ood_cmds <= set(range(11, 101)) and len(ood_cmds) > 5
    regs = {c for e in generate("flip_flop", 60, "ood") for c in e.input[1::3]}
    assert regs == {"0", "1"}
    assert {"f"} <= {e.input[0] for e in generate("flip_flop", 60, "ood")} | \
        {c for e in generate("flip_flop", 60, "ood") for c in e.input[::3]}
    assert lens("value_assignment", "id",
                lambda e: (e.input.index(" ") // 2, len(e.target))) == {(5, 5)}
    for e in generate("value_assignment", 60, "ood"):
        assert 10 <= e.input.index(" ") // 2 <= 50 and 10 <= len(e.target) <= 20
    for e in generate("successor", 60, "id"):
        assert 1 <= int(e.input) <= 90 and 2 <= e.text.count(" ") <= 4
    for e in generate("successor", 60, "ood"):
        assert 100 <= int(e.input) <= 900 and 5 <= e.text.count(" ") <= 6


def test_params_override_split_and_flip_can_be_disabled():
    es = generate("flip_flop", 30, "id", seed=1, use_flip=False, intermediate_reads=False)
    assert all(c in "wir" for e in es for c in e.input[::3])
    assert all(c in "wi" for e in es for c in e.input[:-2:3])


@pytest.mark.parametrize("call, message", [
    (lambda: generate("sorting", 1), "unknown AttentionSpan task"),
    (lambda: generate("successor", 1, split="test"), "unknown split"),
    (lambda: generate("successor", 1, lenght=3), "unknown parameter"),
    (lambda: generate("string_reversal", 1, length=(5, 2)), "length"),
    (lambda: generate("flip_flop", 1, n_registers=11), "n_registers"),
    (lambda: generate("value_assignment", 1, n_pairs=5, key_charset="abc"), "n_pairs"),
    (lambda: generate("string_reversal", 1, charset="aab"), "repeated"),
    (lambda: generate("long_addition", -1), "non-negative"),
    (lambda: value_assignment_example([("a", "1")], "ab"), "no entry"),
])
def test_user_errors_say_what_to_fix(call, message):
    with pytest.raises(WhiteboxError, match=message):
        call()
