"""The toy suite's own statistic, named by its record (``statistics``): no file of whitebox_eval names it.

``beyond``: the toy's accuracy beyond a stated ``level``, item by item (each item's 0/1 against the
level), as a paired bootstrap; ``kit`` is the reproduction's readers."""

from __future__ import annotations

from whitebox_eval import stats


def beyond(study, spec, kit):
    rows = [s for s in study.samples if "correct" in s]
    if len(rows) < 2:
        raise kit.Missing(f"{len(rows)} toy items")
    level = float(spec["level"])
    x = [float(bool(s["correct"])) for s in rows]
    out = dict(kit.record(stats.paired_bootstrap(x, [level] * len(x)), f"samples.jsonl correct - {level:g}"))
    out["arms"] = {"a": kit.arm_of("toy items", {str(s["id"]): v for s, v in zip(rows, x)})}
    return out
