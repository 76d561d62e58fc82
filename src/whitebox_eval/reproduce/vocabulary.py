"""The words a paper file's claims are written in, in one place: the kinds of statistic, the
statistics a ``derived:`` names (these, every suite record's ``statistics``, and any
:func:`register`-ed one), and the checks of preconditions, controls, manipulations and substance.

A claim's ``stat`` is one :class:`Stat` kind: ``estimate`` (``key: NAME`` or ``at: [path]``, an
estimate with its interval), ``paired`` (``paired: NAME``, a test in results.json's
``paired_tests``), ``test_at`` (``test_at: [path]``, a test anywhere in results.json) or ``derived``
(``derived: NAME`` with the statistic's own arguments). :func:`check` validates it at
``--plan-only`` against its suite's record (the results.json places it declares, the statistic's
arguments): a misspelt name or argument is one line before any child runs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.lazy import resolve
from whitebox_eval.runs.record import Statistic

_HERE = "whitebox_eval.reproduce"

#: statistics any suite's runs give (computed from samples or results.json by :mod:`.derived`)
GENERAL = tuple(Statistic(name, f"{_HERE}.derived:{name}", needs, takes, paths, reads) for name, needs, takes, paths, reads in (
    ("group_gap", ("a", "b"), ("field", "strata"), (), "samples"),
    ("stage_gap", ("a", "b"), ("field",), (), "samples"),
    ("paired_fields", ("stage", "x", "y"), (), (), "samples"),
    ("clustered", ("stage",), ("score", "correct", "length"), (), "samples"),
    ("paired_samples", ("x", "y"), ("where", "label_a", "label_b"), (), "samples"),
    ("length_gap", ("stage",), ("field", "length"), (), "samples"),
    ("two_tests", ("a", "b"), (), ("a", "b"), "results"),
))

#: the checks a claim or an experiment declares (``kind: NAME``), by where they are declared
CHECKS: dict[str, dict[str, str]] = {
    "preconditions": {k: f"{_HERE}.claim_checks:{k}" for k in (
        "above_chance", "reference_sound", "not_at_bound", "enough_per_group", "enough_units", "at_least")},
    "controls": {**{k: f"{_HERE}.claim_checks:{k}" for k in ("constant_letter", "beat", "opposite_edit", "flips")},
                 **{k: f"{_HERE}.draw_controls:{k}" for k in ("random_heads", "random_draws")}},
    "manipulation": {**{k: f"{_HERE}.antecedents:{k}" for k in ("raised", "choice_mass", "finetuned", "above_uninformed")},
                     "trained": f"{_HERE}.trained:reached"},
    "substance": {"substance": f"{_HERE}.antecedents:substance"},
}

#: what a claim's ``stat`` may hold besides its kind's own keys
COMMON = ("than", "values", "arms", "label", "experiment", "strata")
KINDS = {"estimate": ("key", "at", "index", "scale"), "paired": ("paired",), "test_at": ("test_at",)}

_registered: dict[str, Statistic] = {}


def register(statistic: Statistic) -> None:
    """Add a statistic any paper file may name (``derived: NAME``), as ``suites.register`` adds a
    suite; a suite's own statistics belong in its record's ``statistics``."""
    if statistic.name in {s.name for s in GENERAL}:
        raise WhiteboxError(f"statistic {statistic.name!r} is already defined")
    _registered[statistic.name] = statistic


def checks(where: str) -> dict[str, Callable[..., dict[str, Any]]]:
    """The check functions of ``where`` (preconditions, controls, manipulation, substance) by kind."""
    return {k: resolve(v) for k, v in CHECKS[where].items()}


def _known(suite: str | None) -> dict[str, Statistic]:
    """The statistics a claim on ``suite``'s runs may name (None: every suite's, for a checkpoint)."""
    from whitebox_eval.suites import SUITES, suite as record

    own = record(suite).statistics if suite else [s for r in SUITES.values() for s in r.statistics]
    return {**{s.name: s for s in GENERAL}, **_registered, **{s.name: s for s in own}}


def statistic(name: str, suite: str | None) -> Statistic:
    """The statistic ``derived: name`` on a run of ``suite``: the suite's own, else a general or
    registered one; one line naming the nearest known otherwise, or the suite whose it is."""
    from whitebox_eval.suites import SUITES

    known = _known(suite)
    if name not in known:
        owner = next((r.name for r in SUITES.values() for s in r.statistics if s.name == name), None)
        if owner:
            raise WhiteboxError(f"statistic {name!r} reads {owner} runs, not {suite} runs")
        raise WhiteboxError(f"unknown statistic {name!r}{_nearest(name, known)}")
    return known[name]


def carried_arrays() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The files under a child's ``arrays/`` and the pass-name prefixes whose parts some statistic
    reads back: what a checkpoint carries with the child."""
    stats = _known(None).values()
    return (tuple(dict.fromkeys(a for s in stats for a in s.arrays)),
            tuple(dict.fromkeys(p for s in stats for p in s.passes)))


@dataclass(frozen=True)
class Stat:
    """A claim's statistic as one kind: ``estimate``, ``paired``, ``test_at`` or ``derived``
    (``name`` the derived statistic's), with the places in results.json it names (``paths``)."""

    kind: str
    name: str | None
    paths: tuple[str, ...]


def _nearest(word: str, known) -> str:
    close = difflib.get_close_matches(str(word), list(known), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else f"; known: {', '.join(sorted(known))}"


def _path(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if not isinstance(value, list | tuple) or not value:
        raise WhiteboxError(f"{where}: a results path is a list of keys, got {value!r}")
    return "/".join(map(str, value))


def kind(stat: Mapping[str, Any], where: str, suite: str | None = None) -> Stat:
    """The :class:`Stat` of a claim's ``stat`` mapping; one line when it names no kind, two, or
    an argument its kind does not take."""
    if not isinstance(stat, Mapping):
        raise WhiteboxError(f"{where}: stat is a mapping (key, at, paired, test_at or derived), got {stat!r}")
    if "derived" in stat:
        try:
            s = statistic(str(stat["derived"]), suite)
        except WhiteboxError as e:
            raise WhiteboxError(f"{where}: {e}") from None
        args = set(stat) - {"derived", *COMMON, "experiments"}
        missing = [a for a in s.needs if a not in stat]
        if missing:
            raise WhiteboxError(f"{where}: statistic {s.name} needs {', '.join(missing)}")
        takes = {*s.needs, *s.takes, *s.paths}
        extra = sorted(args - takes)
        if extra:
            raise WhiteboxError(f"{where}: statistic {s.name} takes no argument {extra[0]!r}"
                                f"{_nearest(extra[0], takes) if takes else '; it takes none'}")
        paths = [f"paired_tests/{stat[a]}" if a == "paired" else _path(stat[a], where)
                 for a in s.paths if a in stat]
        return Stat("derived", s.name, tuple(paths))
    found = [k for k, keys in KINDS.items() if keys[0] in stat or (k == "estimate" and "at" in stat)]
    if len(found) != 1:
        raise WhiteboxError(f"{where}: stat names {'no' if not found else 'more than one'} statistic kind: "
                            f"key or at (an estimate), paired, test_at or derived; got {dict(stat)!r}")
    name = found[0]
    extra = set(stat) - {*KINDS[name], *COMMON}
    if extra:
        raise WhiteboxError(f"{where}: a {name} stat takes no {sorted(extra)[0]!r}"
                            f"{_nearest(sorted(extra)[0], [*KINDS[name], *COMMON])}")
    if name == "paired":
        return Stat(name, None, (f"paired_tests/{stat['paired']}",))
    if name == "test_at":
        return Stat(name, None, (_path(stat["test_at"], where),))
    return Stat(name, None, (str(stat["key"]) if "key" in stat else _path(stat["at"], where),))


#: the general statistics that carry their two arms (per-item values of each side)
CARRY_ARMS = ("group_gap", "stage_gap", "paired_fields", "paired_samples", "length_gap")
#: what a declared arm may hold (its source, its answer key, its roles)
ARM_KEYS = ("label", "samples", "where", "key", "at", "index", "scale", "answers", "options", "gold", "unedited", "measure")


def arms(stat: Mapping[str, Any], declared: Mapping[str, Any], where: str) -> None:
    """Every claim has arms: declared in the paper file (a fit or a token measure declares
    ``answers: none``; a statistic's own arms may be marked by roles only), or carried by a general
    statistic (:data:`CARRY_ARMS`); one line otherwise -- an arm is what the uninformed-level rule reads."""
    for name, a in (declared or {}).items():
        extra = sorted(set(a) - set(ARM_KEYS)) if isinstance(a, Mapping) else [repr(a)]
        if extra:
            raise WhiteboxError(f"{where}: arm {name} takes no {extra[0]!r}{_nearest(extra[0], ARM_KEYS)}")
        if a.get("unedited") not in (None, "lowers", "raises"):
            raise WhiteboxError(f"{where}: arm {name}: unedited is lowers or raises, got {a['unedited']!r}")
    name = stat.get("derived")
    if declared or name in CARRY_ARMS or (name is not None and any(
            s.name == name and s.arms for s in _known(None).values())):
        return
    raise WhiteboxError(f"{where}: the claim declares no arms (arms: a, b -- samples, key or at; or answers: none for "
                        "a measure without answers), and its statistic carries none: the uninformed level could not be read")


def _pattern(p: str) -> re.Pattern:
    return re.compile("".join("[^/]+" if part.startswith("{") else re.escape(part)
                              for part in re.split(r"(\{[^{}]*\})", p)))


def check(stat: Mapping[str, Any], suite: str | None, where: str) -> Stat:
    """:func:`kind`, and each results path it names against the places ``suite``'s record declares
    (``{...}`` in the claim, filled in at assembly, matches any one key)."""
    from whitebox_eval.suites import suite as record

    st = kind(stat, where, suite)
    declared = record(suite).results if suite else ()
    if declared:
        patterns = [_pattern(p) for p in declared]
        for path in st.paths:
            probe = re.sub(r"\{[^{}]*\}", "x", path)
            if not any(p.fullmatch(probe) for p in patterns):
                raise WhiteboxError(f"{where}: {suite} runs write no {path!r} in results.json{_nearest(path, declared)}")
    return st


def compute(stat: Mapping[str, Any], study, suite: str | None) -> dict[str, Any]:
    """The derived statistic ``stat`` names, of one finished child (``StudyResult``)."""
    s = statistic(str(stat["derived"]), suite)
    fn = resolve(s.compute)
    if s.reads == "samples":
        return fn(study.samples, stat)
    if s.reads == "results":
        return fn(study.results, stat)
    return fn(study, stat, kit())


def across(stat: Mapping[str, Any], studies: list, labels: list, suite: str | None) -> dict[str, Any]:
    """The derived statistic ``stat`` names over several children (``reads="runs"``)."""
    s = statistic(str(stat["derived"]), suite)
    if s.reads != "runs":
        from whitebox_eval.reproduce.values import Missing

        raise Missing(f"{s.name} is not a statistic across models")
    return resolve(s.compute)(studies, labels, kit())


def kit() -> SimpleNamespace:
    """The reproduction's readers a suite's statistic is given (it imports nothing of reproduce/)."""
    from whitebox_eval.reproduce import claim_checks, values

    return SimpleNamespace(at=values.at, test=values.test, record=values.record, Missing=values.Missing,
                           TooFew=values.TooFew, Floor=values.Floor, arm=claim_checks.arm, arm_of=claim_checks.arm_of,
                           answer_key=claim_checks.answer_key)
