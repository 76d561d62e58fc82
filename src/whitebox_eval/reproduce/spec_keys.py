"""A paper file at the boundary: the keys each level may hold and their types, checked by the one
type check of settings (:func:`whitebox_eval.runs.settings.checked_keys`: an unknown key refused
naming the nearest known one), nested YAML aliases and oversized files refused, and each claim's
statistic checked against its suite's record (:func:`.vocabulary.check`). Every fault is one
:class:`~whitebox_eval.errors.WhiteboxError` line naming the file and the entry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.settings import checked_keys

MAX_BYTES = 4 * 1024 * 1024
"""A paper file larger than this is refused (the bundled ones are under 100 kB)."""

_SCALED = tuple(f"differs_{s}" for s in ("quick", "cpu", "paper", "micro"))
#: the keys of each level of a paper file, with the annotation each value must fit (Any: any value;
#: every key may also be null)
KEYS: dict[str, dict[str, Any]] = {
    "paper": {"paper": str | int, "short": str, "title": str, "seed": str, "summary": str, "experiments": list,
              "tables": list, "claims": list, "not_run": list, "models": list, "saes": list},
    "experiment": {"id": str, "suite": str, "mode": str, "title": str, "settings": dict, "scales": dict,
                   "matrix": dict, "data": list, "differs": str, "skip_models": dict, "models": list,
                   "manipulation": list, "model": str, "label": str, "variant_of": str, **{k: str for k in _SCALED}},
    "claim": {"id": str, "claim": str, "cite": str, "stat": dict, "direction": str, "experiment": str,
              "published": dict, "across_models": bool, "margin": int | float, "headline": bool, "differs": str,
              "not_at": dict, "arms": dict, "unit": dict, "preconditions": list, "controls": list,
              "effect_unit": str, "substance": list, "positive_control": dict, "manipulation": list},
    "table": {"id": str, "cite": str, "title": str, "region": list, "columns": list, "rows": list,
              "published_model": str, "unit": str, "ours_by": str, "ours_note": str, "label_header": list,
              "ours_rows": list},
    "model": {"id": str, "name": str, "cite": str, "ambiguous": str, "named_only": bool},
    "not_run": {"what": str, "cite": str, "reason": str, "scales": list},
    "saes": {"model": str, "release": str, "ids": str, "layers": int, "hook": str, "cite": str, "repo": str},
}
_NULLABLE = {level: {k: t | None for k, t in keys.items()} for level, keys in KEYS.items()}


def entry(d: Any, level: str, where: str) -> dict[str, Any]:
    """``d`` as a mapping of ``level``'s keys with values of their types; one line otherwise."""
    if not isinstance(d, Mapping):
        raise WhiteboxError(f"{where}: an entry is a mapping of {', '.join(KEYS[level])}; got {d!r:.60}")
    return checked_keys(_NULLABLE[level], d, where)


def entries(d: Mapping[str, Any], key: str, level: str, where: str, read=None) -> list[Any]:
    """The list under ``key``, each entry checked as ``level`` and, given ``read(entry, where)``,
    read by it: a value of the wrong shape inside an entry is one line naming the entry."""
    out = []
    for i, e in enumerate(d.get(key) or ()):
        name = e.get("id") or e.get("name") if isinstance(e, Mapping) else None
        here = f"{where} {key} {i + 1}" + (f" ({name})" if name else "")
        e = entry(e, level, here)
        try:
            out.append(read(e, here) if read else e)
        except (TypeError, AttributeError, ValueError, KeyError, IndexError) as x:
            raise WhiteboxError(f"{here}: a value of the wrong type or shape "
                                f"({type(x).__name__}: {str(x).splitlines()[0] if str(x) else '?'})") from None
    return out


class _FlatAliases(yaml.SafeLoader):
    """Safe YAML whose aliases name only anchors that hold no alias themselves: the bundled papers
    share an arms or checks block by alias, but nested aliases (a "billion laughs" file) are refused."""

    def __init__(self, stream):
        super().__init__(stream)
        self._aliases, self._nested = 0, set()

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._nested:
                raise WhiteboxError(f"line {event.start_mark.line + 1}: an alias of an anchor that holds aliases "
                                    "(nested aliases are not allowed in a paper file)")
            self._aliases += 1
            return super().compose_node(parent, index)
        before = self._aliases
        node = super().compose_node(parent, index)
        if getattr(event, "anchor", None) is not None and self._aliases > before:
            self._nested.add(event.anchor)
        return node


def load(text: str, name: str) -> Any:
    """The YAML of a paper file, refusing nested aliases and files over :data:`MAX_BYTES`."""
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise WhiteboxError(f"{name}: a paper file is at most {MAX_BYTES // (1024 * 1024)} MB")
    try:
        return yaml.load(text, Loader=_FlatAliases)  # noqa: S506 (a SafeLoader)
    except WhiteboxError as e:
        raise WhiteboxError(f"{name}: {e}") from None
    except yaml.YAMLError as e:
        raise WhiteboxError(f"{name} is not YAML: {str(e).splitlines()[0]}") from None


def statistics(paper, source: str) -> None:
    """Each claim's statistic (and its positive control's, substance's and reported sides') as one
    :class:`.vocabulary.Stat` kind whose results paths its suite's runs write."""
    from whitebox_eval.reproduce import vocabulary

    for c in paper.claims:
        where = f"{source} claim {c.id}"
        named = c.experiment or next(iter(c.stat.get("experiments") or ()), None)
        suite = paper.experiment(named).suite if named else None
        vocabulary.check(c.stat, suite, where)
        vocabulary.arms(c.stat, c.arms, where)
        for side in (c.stat.get("values") or {}).values():
            vocabulary.check(side, suite, f"{where} values")
        for sub in c.substance:
            vocabulary.check(sub["stat"], suite, f"{where} substance")
        pc = c.positive_control
        if pc and "none" not in pc:
            other = pc.get("experiment")
            vocabulary.check({k: v for k, v in pc.items() if k != "label"},
                             paper.experiment(other).suite if other else suite, f"{where} positive_control")
