"""What the report's explorer draws of a formats run (``formats``, ``data/views.js``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whitebox_eval.runs.items import TEXT_CAP, cut, item_table, num


def views(folder: Path, results: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The MCQ letter probabilities beside the free answers, each answer's class (``formats``: right,
    wrong or off-format, :mod:`.answers`; a run written before the class is classified from its texts)."""
    from whitebox_eval.formats.answered import answer_type_of
    from whitebox_eval.formats.answers import classes_of

    table = item_table(samples)
    kind, extract = answer_type_of(samples), str(results.get("extract") or "paper")
    for row, s in zip(table["items"], samples):
        p = s.get("p_correct") if isinstance(s.get("p_correct"), dict) else {}
        for fmt, value in p.items():
            row["pred"][fmt], row["ok"][fmt] = None if num(value) is None else f"{num(value):.3g}", None
            row["num"][f"p_correct {fmt}"] = num(value)
        prompts = s.get("prompts") if isinstance(s.get("prompts"), dict) else {}
        if prompts.get("mcq_plain"):
            row["text"] = cut(str(prompts["mcq_plain"]), TEXT_CAP)
        row["formats"] = {"mcq": {k: num(v) for k, v in (s.get("mcq") or {}).items()}, "p_correct": {k: num(v) for k, v in p.items()},
                          "answer": s.get("answer"),
                          "generations": {f: [cut(str(g), 600) for g in gens] for f, gens in (s.get("generations") or {}).items()},
                          "classes": {f: (s.get("classes") or {}).get(f) or classes_of(s, f, kind, extract)
                                      for f in (s.get("generations") or {}) if "answer" in s}}
    table["methods"] = list(dict.fromkeys(m for row in table["items"] for m in row["pred"]))
    return table
