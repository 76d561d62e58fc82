"""A claim's preconditions and controls, evaluated from its finished child run.

Declared per claim in the paper's YAML (``arms``, ``preconditions``, ``controls``) and read
from the child's own files (results.json, samples.jsonl): nothing is rerun. Each check
returns a record with its values and one line of text, which the verdict and the report
quote.

- **arms**: the two sides of the claim on the same items, each ``k / n`` (``samples``: a
  0/1 field of samples.jsonl, filtered by ``where``: equal to a value,
  or ``{op: bound}`` with op >=, >, <= or <; or ``key`` / ``at``: an estimate of
  results.json with its n), and the ``unit`` the claim is about (e.g. head ``L14H0``).
- **preconditions** (failed: the verdict is *uninformative*, naming it):
  ``above_chance`` (an arm beats 1/k, exact binomial, one-sided), ``reference_sound`` (the
  reference arm is not significantly below chance), ``not_at_bound`` (not every arm at 0%,
  nor every arm at 100%), ``enough_per_group`` (counts read from the child),
  ``enough_units`` (distinct models in a fit over models), ``at_least`` (the claim's
  substance, e.g. partial accuracy >= 0.5).
- **reliability** (:func:`reliability`): the warnings the child run records, each a failed
  precondition of every claim reading it.
- **controls** (one that explains the effect turns *holds* into *uninformative*):
  ``constant_letter`` (the arm against always answering the most frequent gold letter on
  the same items, with per-letter recall; 000 sec. 5), ``random_heads`` (the same edit on
  random heads, per item from the run's samples; 002 sec. 5; in :mod:`.draw_controls` with
  ``random_draws``), ``beat`` (a paired test of
  the arm against a control arm the child ran), ``opposite_edit`` (an edit meant to move
  the other way that moves the same way: the effect is damage, not direction), and
  ``flips`` (answer flips, informational).

A control *explains* the effect unless the arm beats it significantly (p < 0.05) in the
claimed direction; ``opposite_edit`` explains when that edit moves significantly in the
claimed direction too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from whitebox_eval import stats
from whitebox_eval.reproduce.values import Missing, at, estimate, record, test

# ------------------------------------------------------------------------ helpers


def pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _field(sample: Mapping[str, Any], path: str) -> Any:
    node: Any = sample
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


COMPARE = {">=": lambda x, y: x >= y, ">": lambda x, y: x > y, "<=": lambda x, y: x <= y, "<": lambda x, y: x < y}


def _holds(value: Any, condition: Any) -> bool:
    """``value`` equals ``condition``, or meets it when it is ``{op: bound}`` (op one of >=, >, <=, <)."""
    if isinstance(condition, Mapping):
        return value is not None and all(COMPARE[op](value, bound) for op, bound in condition.items())
    return value == condition


def _where(samples: Sequence[Mapping[str, Any]], where: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return [s for s in samples if all(_holds(_field(s, k), v) for k, v in (where or {}).items())]


def _significant_in(t: Mapping[str, Any], direction: str) -> bool:
    sign = -1 if direction == "less" else 1
    return t.get("p_value") is not None and t["p_value"] < stats.ALPHA and sign * t["value"] > 0


# ------------------------------------------------------------------------ arms and unit


def arm(results: Mapping[str, Any], samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """``{label, k, n, value, source}`` of one arm."""
    label = spec.get("label", "")
    if "samples" in spec:
        rows = [s for s in _where(samples, spec.get("where")) if _field(s, spec["samples"]) is not None]
        if not rows:
            raise Missing(f"no sample has {spec['samples']!r} where {spec.get('where')}")
        source = f"samples.jsonl {spec['samples']}" + (f" where {_fmt_where(spec['where'])}" if spec.get("where") else "")
        out = {**arm_of(label, {item_id(s): float(_field(s, spec["samples"])) for s in rows}), "source": source,
               **{k: spec[k] for k in ("unedited", "measure") if k in spec}}
        key = answers_for(rows, samples, spec)
        if key or spec.get("answers") == "none":
            out["answers"] = key
        return out
    if "key" not in spec and "at" not in spec:
        if spec.get("answers") == "none":  # a fit or a per-token measure: declared to have no answers
            return {"label": label, "answers": {}, "source": "declared: a measure without answers",
                    **{k: spec[k] for k in ("unedited", "measure") if k in spec}}
        raise Missing(f"arm {label!r} names no source (samples, key or at) and its statistic carries none")
    est = estimate(results, spec)
    n = est.get("n")
    out = {"label": label, "value": est["value"], "n": n, "source": est["source"],
           **{k: spec[k] for k in ("unedited", "measure") if k in spec}}
    if n and spec.get("answers") != "none" and abs(est["value"] * n - round(est["value"] * n)) < 1e-9:
        out["k"] = int(round(est["value"] * n))  # a count only where the value is one (a share of n items)
    if spec.get("answers") == "none":  # declared a measure without answers (MUI): it has no uninformed level
        out["answers"] = {}
    return out


def arm_of(label: str, items: Mapping[str, float]) -> dict[str, Any]:
    """``{label, n, value, items}`` of per-item values (item id -> value), and ``k`` where every
    value is 0 or 1."""
    vals = [float(v) for v in items.values()]
    out = {"label": label, "n": len(vals), "value": float(np.mean(vals)), "items": dict(items)}
    if all(v in (0.0, 1.0) for v in vals):
        out["k"] = int(sum(vals))
    return out


PAIRED_TESTS = ("mcnemar_exact", "paired_bootstrap")


def on_shared_items(arms: dict[str, dict[str, Any]]) -> None:
    """Two per-item arms of a paired statistic restricted to the items both hold (e.g. the
    unedited stage also holds the examples heads were selected on, which no edit ran on)."""
    a, b = arms.get("a") or {}, arms.get("b") or {}
    if "items" not in a or "items" not in b or a["items"].keys() == b["items"].keys():
        return
    shared = [i for i in a["items"] if i in b["items"]]
    if not shared:  # no item in common: nothing to restrict them to
        return
    for arm in (a, b):
        dropped = len(arm["items"]) - len(shared)
        if not dropped:
            continue
        arm.update(arm_of(arm.get("label", ""), {i: arm["items"][i] for i in shared}))
        if "answers" in arm:
            arm["answers"] = {i: arm["answers"][i] for i in shared if i in arm["answers"]}
        arm["source"] = f"{arm.get('source', '')}, on the {len(shared)} items both arms hold ({dropped} dropped)"


def item_id(sample: Mapping[str, Any]) -> str:
    """A sample's item id, its stage prefix (``stage:`` or ``stage/``) dropped so that the same item
    pairs across stages."""
    sid, stage = str(sample.get("id")), sample.get("stage")
    if stage:
        for sep in (":", "/"):
            if sid.startswith(f"{stage}{sep}"):
                return sid[len(stage) + 1:]
    return sid


def answers_for(rows: Sequence[Mapping[str, Any]], samples: Sequence[Mapping[str, Any]],
                spec: Mapping[str, Any] | None = None) -> dict[str, list[Any]]:
    """Item id -> :func:`answer_key` of each row's item. An answer key belongs to the item, not to
    the stage: a row that carries none (an edited stage, which records only what the model did)
    takes the key another row of the same item carries (its unedited stage)."""
    spec = spec or {}
    key = {item_id(s): answer_key(s, spec) for s in rows}
    if any(v is None for v in key.values()):
        for s in samples:
            i = item_id(s)
            if i in key and key[i] is None:
                key[i] = answer_key(s, spec)
    return {k: v for k, v in key.items() if v is not None}


def answer_key(sample: Mapping[str, Any], spec: Mapping[str, Any]) -> list[Any] | None:
    """``[K, gold answer, gold position]`` of one item, for its uninformed level (:mod:`.chance`):
    ``answers: options`` (the row's ``alternatives`` + ``target``; the candidates its ``probs`` scores
    + its ``label``; or ``labels``/``n_options`` + ``gold``; ``options: K`` where the row does not
    list them), ``answers: free`` (free text: K is
    None, the gold answer is ``gold:`` or the row's ``answer``/``target``), ``answers: none``
    (no answer: a measure without an uninformed level). Default: options where the row has them,
    else free text where it has an answer, else none."""
    kind = spec.get("answers")
    alts, labels, target = sample.get("alternatives"), sample.get("labels"), sample.get("target")
    probs = sample.get("probs")
    if alts is None and isinstance(probs, Mapping) and sample.get("label") in probs:
        alts, target = list(probs), sample["label"]  # candidates scored by their first token (GAR's Yes/No)
    n_opt = spec.get("options") or sample.get("n_options") or (len(labels) if labels else None)
    gold_field = spec.get("gold")
    if kind is None:
        kind = "options" if (alts or n_opt) else "free" if any(k in sample for k in ("answer", "target")) else "none"
    if kind == "none":
        return None
    if kind == "options":
        if alts and target is not None:
            return [len(alts), str(target), alts.index(target) if target in alts else None]
        gold = _field(sample, gold_field or "gold")
        if n_opt is None or gold is None:
            return None
        return [int(n_opt), labels[int(gold)] if labels else str(gold), int(gold)]
    gold = _field(sample, gold_field) if gold_field else sample.get("answer", sample.get("target"))
    return None if gold is None else [None, str(gold).strip(), None]


def _fmt_where(where: Mapping[str, Any]) -> str:
    return ",".join(f"{k}{op}{b}" for k, v in where.items()
                    for op, b in (v.items() if isinstance(v, Mapping) else [("=", v)]))


def unit(results: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """The unit a claim is about: ``{at: path, as: head}`` gives ``L14H0``; ``text`` is given as is."""
    if "text" in spec:
        return str(spec["text"])
    value = at(results, list(spec["at"]))
    if spec.get("as") == "head":
        return head_name(value)
    if spec.get("as") == "heads":
        return ", ".join(head_name(h) for h in value) or "none"
    return str(value)


def head_name(h: Sequence[int] | Mapping[str, Any]) -> str:
    """``L14H0`` from ``[14, 0]`` or ``{"layer": 14, "head": 0}``."""
    if isinstance(h, Mapping):
        return f"L{int(h['layer'])}H{int(h['head'])}"
    return f"L{int(h[0])}H{int(h[1])}"


# ------------------------------------------------------------------------ preconditions


def _chance(results: Mapping[str, Any], spec: Mapping[str, Any]) -> float:
    c = spec.get("chance", None)
    if c is None:
        c = results.get("chance")
    if c is None:
        raise Missing("no chance level in the child run (give chance:)")
    return float(c)


def _arm_of(arms: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    name = spec.get("arm", "a")
    if name not in arms or "k" not in arms[name]:
        raise Missing(f"the check needs arm {name!r} with a count")
    return arms[name]


def above_chance(spec, arms, results, stat) -> dict[str, Any]:
    a = _arm_of(arms, spec)
    c = _chance(results, spec)
    p = stats.binomial_p(a["k"], a["n"], c, "greater")
    return {"passed": p < stats.ALPHA, "p_value": p, "chance": c,
            "text": f"{a['label']} {a['k']}/{a['n']} = {pct(a['value'])} vs chance {pct(c)}: exact binomial "
                    f"(greater) {stats.fmt_p(p)}"}


def reference_sound(spec, arms, results, stat) -> dict[str, Any]:
    a = _arm_of(arms, {"arm": spec.get("arm", "b")})
    c = _chance(results, spec)
    p = stats.binomial_p(a["k"], a["n"], c, "less")
    return {"passed": p >= stats.ALPHA, "p_value": p, "chance": c,
            "text": f"{a['label']} {a['k']}/{a['n']} = {pct(a['value'])} vs chance {pct(c)}: below chance by an exact "
                    f"binomial (less) {stats.fmt_p(p)}" + (" (degenerate reference)" if p < stats.ALPHA else "")}


def not_at_bound(spec, arms, results, stat) -> dict[str, Any]:
    counted = [a for a in arms.values() if "value" in a]
    if not counted or len(counted) < len(arms):
        raise Missing("not_at_bound needs every arm's value")
    floor = all(a["value"] == 0 for a in counted)
    ceiling = all(a["value"] == 1 for a in counted)
    what = "floor: no item right in any arm" if floor else "ceiling: every item right in every arm" if ceiling else \
        "not every arm at 0% or at 100%"
    return {"passed": not (floor or ceiling), "bound": "floor" if floor else "ceiling" if ceiling else None,
            "text": f"{what} (" + ", ".join(_arm_short(a) for a in counted) + ")"}


def _arm_short(a: Mapping[str, Any]) -> str:
    return f"{a['label']} {a['k']}/{a['n']}" if "k" in a and a.get("n") else f"{a['label']} {pct(a['value'])}"


def enough_per_group(spec, arms, results, stat) -> dict[str, Any]:
    """``counts``: {name: path in results.json}, or the statistic's own ``groups``."""
    if "counts" in spec:
        counts = {name: int(at(results, list(path))) for name, path in spec["counts"].items()}
    else:
        counts = dict(stat.get("groups") or {})
    if not counts:
        raise Missing("enough_per_group has no counts")
    low = {k: v for k, v in counts.items() if v < spec["min"]}
    return {"passed": not low, "counts": counts, "min": spec["min"],
            "text": ", ".join(f"{k} {v}" for k, v in counts.items()) + f" (each needs >= {spec['min']})"}


def enough_units(spec, arms, results, stat) -> dict[str, Any]:
    """Distinct models among a fit's points (labels ``model / experiment``)."""
    models = sorted({p["label"].split(" / ")[0] for p in stat.get("points", ())})
    return {"passed": len(models) >= spec["min"], "models": models, "min": spec["min"],
            "text": f"{len(models)} model(s) ({', '.join(models)}); a law over models needs >= {spec['min']} "
                    f"on a fixed dataset"}


def at_least(spec, arms, results, stat) -> dict[str, Any]:
    est = estimate(results, spec["stat"])
    ok = est["value"] >= float(spec["value"])
    return {"passed": ok, "value": est["value"],
            "text": f"{spec.get('label', est['source'])} = {est['value']:.3g} (needs >= {spec['value']:g})"}


# ------------------------------------------------------------------------ controls


def constant_letter(spec, arms, results, samples, direction) -> dict[str, Any]:
    """The arm's predictions (``pred``: a field holding the option index) against the best
    constant letter on the same items, with per-letter recall of the arm and the reference."""
    rows = [s for s in _where(samples, spec.get("where")) if _field(s, spec["pred"]) is not None]
    if not rows:
        raise Missing(f"no sample has {spec['pred']!r}")
    labels = list(rows[0].get("labels") or [chr(65 + i) for i in range(int(rows[0].get("n_options", 4)))])
    gold = np.array([int(s["gold"]) for s in rows])
    pred = np.array([int(_field(s, spec["pred"])) for s in rows])
    counts = np.bincount(gold, minlength=len(labels))
    best = int(np.argmax(counts))
    head_ok, const_ok = pred == gold, gold == best
    t = record(stats.mcnemar(head_ok, const_ok), f"samples.jsonl {spec['pred']} vs constant {labels[best]}")
    out = {"explains": not _significant_in(t, "greater" if direction != "less" else "less"),
           "best_letter": labels[best], "constant_accuracy": float(const_ok.mean()), "arm_accuracy": float(head_ok.mean()),
           "n": int(gold.size), "test": t, "gold_counts": {labels[i]: int(c) for i, c in enumerate(counts)},
           "recall": _recall(gold, pred, labels), "predicted_counts": _counts(pred, labels)}
    if spec.get("reference_pred"):
        ref = np.array([int(_field(s, spec["reference_pred"])) for s in rows])
        out["reference_recall"] = _recall(gold, ref, labels)
        out["reference_predicted_counts"] = _counts(ref, labels)
    out["text"] = (f"always '{labels[best]}' scores {pct(out['constant_accuracy'])} on the same {gold.size} items; "
                   f"the arm {pct(out['arm_accuracy'])}: {100 * t['value']:+.1f} pp [{100 * t['lo']:+.1f}, "
                   f"{100 * t['hi']:+.1f}], exact McNemar {stats.fmt_p(t['p_value'])}; recall by gold letter "
                   + ", ".join(f"{k} {'-' if v is None else pct(v)}" for k, v in out["recall"].items()))
    return out


def _recall(gold: np.ndarray, pred: np.ndarray, labels: Sequence[str]) -> dict[str, float | None]:
    return {lab: (float(np.mean(pred[gold == i] == i)) if np.any(gold == i) else None)
            for i, lab in enumerate(labels) if np.any(gold == i) or np.any(pred == i)}


def _counts(pred: np.ndarray, labels: Sequence[str]) -> dict[str, int]:
    return {lab: int(np.sum(pred == i)) for i, lab in enumerate(labels) if np.any(pred == i)}


def _stage_rows(samples: Sequence[Mapping[str, Any]], stage: str) -> dict[str, Mapping[str, Any]]:
    prefix = f"{stage}:"
    return {str(s["id"])[len(prefix):]: s for s in samples if s.get("stage") == stage}


def _test_of(results: Mapping[str, Any], spec: Mapping[str, Any]):
    return test(results, {"paired": spec["paired"]} if "paired" in spec else {"at": spec["test_at"]})


def beat(spec, arms, results, samples, direction) -> dict[str, Any]:
    t = _test_of(results, spec)
    return {"explains": not _significant_in(t, direction), "test": t,
            "text": f"{spec.get('label', t['source'])}: {100 * t['value']:+.1f} pp [{100 * t['lo']:+.1f}, "
                    f"{100 * t['hi']:+.1f}] n={t['n']}, {t['test']} {stats.fmt_p(t['p_value'])}"}


def opposite_edit(spec, arms, results, samples, direction) -> dict[str, Any]:
    t = _test_of(results, spec)
    same = _significant_in(t, direction)
    return {"explains": same, "test": t,
            "text": f"{spec.get('label', t['source'])} (meant to move the other way): {100 * t['value']:+.1f} pp "
                    f"[{100 * t['lo']:+.1f}, {100 * t['hi']:+.1f}], {stats.fmt_p(t['p_value'])}"
                    + (" -- it moves the same way: the edit damages, whatever its sign" if same else "")}


def flips(spec, arms, results, samples, direction) -> dict[str, Any]:
    """Answer flips between stage ``before`` and stage ``after`` on the same items
    (``field``, default ``prediction``): per answer before and after, and each change."""
    field = spec.get("field", "prediction")
    before, after = _stage_rows(samples, spec["before"]), _stage_rows(samples, spec["after"])
    keys = [k for k in after if k in before]
    if not keys:
        raise Missing(f"no item in both stages {spec['before']!r} and {spec['after']!r}")
    pairs = [(str(before[k][field]).strip(), str(after[k][field]).strip()) for k in keys]
    answers = sorted({a for p in pairs for a in p})
    changes = {f"{a}->{b}": sum(1 for p in pairs if p == (a, b)) for a in answers for b in answers if a != b}
    out = {"explains": False, "n": len(keys),
           "before": {a: sum(1 for p in pairs if p[0] == a) for a in answers},
           "after": {a: sum(1 for p in pairs if p[1] == a) for a in answers}, "changes": changes}
    out["text"] = (f"{len(keys)} items; before " + ", ".join(f"{a} {n}" for a, n in out["before"].items())
                   + "; after " + ", ".join(f"{a} {n}" for a, n in out["after"].items())
                   + "; flips " + (", ".join(f"{k} {v}" for k, v in changes.items() if v) or "none"))
    return out



def evaluate(kind_table: Mapping[str, Any], spec: Mapping[str, Any], *args: Any) -> dict[str, Any]:
    """One declared check: its record, or ``{"error": why}`` when the child lacks its inputs."""
    kind = spec["kind"]
    try:
        out = kind_table[kind](spec, *args)
    except Missing as e:
        out = {"error": str(e), "text": f"could not be evaluated: {e}"}
    return {"kind": kind, **({"label": spec["label"]} if "label" in spec else {}), **out}


TRUNCATED_SHARE = 0.10
"""A child whose responses hit the token budget on more than this share of items reads them cut."""


def reliability(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reliability warnings a child run records, each a precondition of every claim reading it:
    an unreliable head selection (``selection.reliable`` false), a truncated response budget (more
    than :data:`TRUNCATED_SHARE` of the responses cut), a fine-tune whose loss did not fall, and any
    other warning the child lists (poor SAE fidelity, degenerate heads): named, failed."""
    out = []
    sel = results.get("selection")
    if isinstance(sel, Mapping) and sel.get("reliable") is False:
        out.append({"kind": "reliable_selection", "passed": False,
                    "text": "the child marks its head selection unreliable: " + "; ".join(sel.get("warnings") or ())})
    ft = results.get("finetune")
    if isinstance(ft, Mapping) and ft.get("loss_first") is not None and ft.get("loss_last") is not None:
        ok = float(ft["loss_last"]) < float(ft["loss_first"])
        if not ok:
            out.append({"kind": "finetune_converged", "passed": False,
                        "text": f"fine-tuning loss {ft['loss_first']:.3g} -> {ft['loss_last']:.3g}: it did not fall"})
    for w in results.get("warnings") or ():
        text = str(w)
        if "hit the" in text and "budget" in text:
            m = re.match(r"(\d+) of (\d+)", text)
            if m and int(m.group(1)) <= TRUNCATED_SHARE * int(m.group(2)):
                continue  # a few cut responses: noted by the child, not a failed precondition
        out.append({"kind": "child_warning", "passed": False, "text": text})
    return out
