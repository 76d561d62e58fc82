"""A config's settings checked against the types its dataclass declares: the one type check of
every value a user gives a study, from the command line, a ``--config`` file, a paper file or
Python (:func:`checked_settings`), and of every entry of a paper file (:func:`checked_keys`).

The rules: each key is a field (an unknown one is refused naming the nearest field); a value has
its field's type (``seed: 1.5`` is refused as ``--seed 1.5`` is; a whole float is no int, a bool
no number); numbers are finite; ``None`` only where the field allows it; a tuple field takes a
list, a tuple or a comma text (``methods: baseline,qk``, as the command line writes it), a list
field a list, each element checked; a nested config dataclass takes a mapping of its own fields,
checked the same way.
Annotations this module does not know (a parsed object such as ``TaskSpec``) pass as they are.
A failure is one :class:`~whitebox_eval.errors.WhiteboxError` line naming ``where`` and the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from whitebox_eval.errors import WhiteboxError

_SKIP = ("volatile",)  # a config's own bookkeeping, never a setting


def nearest(key: str, known, cutoff: float = 0.6) -> str:
    """`` (did you mean X?)`` for the known name closest to ``key``, or ``""``."""
    close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]}?)" if close else ""


def field_types(cls) -> dict[str, Any]:
    """``{field: annotation}`` of a config dataclass (its bookkeeping ``volatile`` left out)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # a name only a type checker imports: read what resolves, the rest passes
        hints = {}
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.name not in _SKIP}


def checked_settings(cls, settings: Mapping[str, Any], where: str = "settings") -> dict[str, Any]:
    """``settings`` with every value checked (and a comma text or list made a tuple, a mapping
    made a nested config) against ``cls``'s field types; one line for the first fault."""
    return checked_keys(field_types(cls), settings, where, "setting", f" for {cls.__name__}")


def checked_keys(types_: Mapping[str, Any], mapping: Mapping[str, Any], where: str, noun: str = "key",
                 owner: str = "") -> dict[str, Any]:
    """``mapping`` with each value checked against its key's annotation in ``types_``
    (:func:`checked_value`); an unknown key is refused naming the nearest known one. The one check
    of a config's settings and of a paper file's entries (:mod:`whitebox_eval.reproduce.spec_keys`)."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key not in types_:
            raise WhiteboxError(f"{where}: unknown {noun} {key!r}{owner}{nearest(key, types_)}; "
                                f"the {noun}s are: {', '.join(sorted(types_))}")
        out[key] = checked_value(types_[key], value, f"{where}: {key}")
    return out


def checked_value(annotation: Any, value: Any, where: str) -> Any:
    """``value`` as ``annotation`` takes it (see the module docstring); one line otherwise."""
    if annotation is Any or isinstance(annotation, (str, typing.TypeVar)):
        return _finite(value, where)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None:
            if type(None) in options:
                return None
            raise WhiteboxError(f"{where} must be given (not null)")
        return _union([a for a in options if a is not type(None)], value, where)
    if value is None:
        raise WhiteboxError(f"{where} must be given (not null)")
    if origin is tuple or annotation is tuple:
        return _tuple(annotation, value, where)
    if origin is list or annotation is list:
        if not isinstance(value, list):
            raise WhiteboxError(f"{where} takes a list, not {_shown(value)}")
        args = typing.get_args(annotation)
        return [checked_value(args[0] if args else Any, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, Mapping) or annotation is dict:
        if not isinstance(value, Mapping):
            raise WhiteboxError(f"{where} takes a mapping, not {_shown(value)}")
        return {str(k): _finite(v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, Mapping):
            raise WhiteboxError(f"{where} takes a mapping of {annotation.__name__}'s settings, not {_shown(value)}")
        return annotation(**checked_settings(annotation, value, where))
    if annotation in (bool, int, float, str):
        return _scalar(annotation, value, where)
    return value  # a parsed object (TaskSpec, ...): its own parser checks it


def _union(options: list, value: Any, where: str) -> Any:
    """The first member type ``value`` fits (a scalar as itself before any conversion)."""
    if len(options) == 1:  # X | None: X's own words
        return checked_value(options[0], value, where)
    exact = [a for a in options if a in (bool, int, float, str) and _is(a, value)]
    if exact:
        return _scalar(exact[0], value, where)
    faults = []
    for a in options:
        try:
            return checked_value(a, value, where)
        except WhiteboxError as e:
            faults.append(e)
    names = "a number" if set(options) == {int, float} else " or ".join(
        _WORDS.get(a, getattr(a, "__name__", str(a))) for a in options)
    raise WhiteboxError(f"{where} takes {names}, not {_shown(value)}") from None


def _is(kind: type, value: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)


def _scalar(kind: type, value: Any, where: str) -> Any:
    if not _is(kind, value):
        hint = " (quote it in YAML to make it text)" if kind is str and isinstance(value, (int, float)) else ""
        raise WhiteboxError(f"{where} takes {_WORDS[kind]}, not {_shown(value)}{hint}")
    return _finite(float(value), where) if kind is float else value


_WORDS = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}


def _tuple(annotation: Any, value: Any, where: str) -> tuple:
    args = typing.get_args(annotation)
    element = args[0] if args and (len(args) == 1 or args[-1] is Ellipsis) else Any
    if isinstance(value, str):  # the command line's comma list
        parts = [p.strip() for p in value.split(",") if p.strip()]
        return tuple(checked_value(element, _from_text(element, p, where), where) for p in parts)
    if not isinstance(value, (list, tuple)):
        raise WhiteboxError(f"{where} takes a list, not {_shown(value)}")
    return tuple(checked_value(element, v, f"{where}[{i}]") for i, v in enumerate(value))


def _from_text(kind: Any, text: str, where: str) -> Any:
    """A comma list's element as ``kind`` (the command line gives text)."""
    try:
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        raise WhiteboxError(f"{where} takes a comma list of {'whole numbers' if kind is int else 'numbers'}, "
                            f"not {text!r}") from None
    return text


def _finite(value: Any, where: str) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise WhiteboxError(f"{where} must be a finite number, not {value}")
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _finite(v, f"{where}[{i}]")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _finite(v, f"{where}.{k}")
    return value


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:80]
