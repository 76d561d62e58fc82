"""A trained model column of one reproduction put into another's content, exactly as if it had been run there.

Why it is exact (:func:`.assemble.paper_content`): a trained column's claims read only its own children and
its producer (the finetune child trained for it, whose check :func:`.assemble.training_checks` reads), its
table cells read only its own children, and Holm's family is one paper x one model variant (each trained
column its own, ``holm_family``), so no claim or cell outside the column reads what the column's runs hold,
and the column's adjusted p-values read none outside it. Same code (the rule, the papers' text, the claims'
order) and the same runs (a child is named by its settings: the same run id is the same run) give the same
column, whichever other children ran. :func:`splice` checks that: every part but the column must be the
same in both (the first difference named), the column's claims must be the same claims, and nothing it keeps
of ``base`` may read a run that ``new`` ran. One text may differ: how the scale differs from the paper
(``scaled_down``) for an experiment whose runs ``new`` ran is ``new``'s, the text that says how those runs were
made (a recipe chosen since); for every other experiment it must be the same. A run ``new`` ran under an id
``base`` lacks (the column re-run with other settings) replaces ``base``'s one run of the same model and
experiments, and nothing kept may read the replaced run.

A base model's runs that ``new`` ran (a base child that had not run, or re-ran) go in the same way, but not
its whole column: the base models' other children did not run in ``new``. What is replaced is what reads
those runs: the base model's claims and table cells that name them (in ``new``: the same claims and cells),
their entries and figures; nothing else in ``base`` may read them (a claim across models that reads them is
refused). Then Holm's adjustment is made again over the base models' family of each such paper
(:func:`.verdicts.holm`: it reads only each claim's own p-value, statistic and rules), since the family holds
claims the splice replaced. ``new`` may be planned on fewer base models than ``base`` (``--model``, or only
the column's children): its models must then be ``base``'s in ``base``'s order less some, the column among
them; its runs are then ``base``'s less some, by run id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import verdicts

__all__ = ["splice", "spliced"]

SPLICED = ("claims", "runs", "tables", "figures", "models")  # a paper's parts the column is spliced into
NOT_RUN = "not run"


def _copy(x: Any) -> Any:
    return json.loads(json.dumps(x))


def _first_difference(a: Any, b: Any, where: str) -> str | None:
    """Where ``a`` and ``b`` first differ (``where`` its path), None when they are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{where}.{k} ({'only in new' if k not in a else 'only in base'})"
            if (d := _first_difference(a[k], b[k], f"{where}.{k}")) is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where} ({len(a)} entries in base, {len(b)} in new)"
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := _first_difference(x, y, f"{where}[{i}]"))), None)
    return None if a == b and type(a) is type(b) else f"{where} ({_short(a)} in base, {_short(b)} in new)"


def _short(x: Any) -> str:
    text = json.dumps(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _same(a: Any, b: Any, where: str) -> None:
    if (d := _first_difference(a, b, where)) is not None:
        raise WhiteboxError(f"splice: base and new differ at {d}: they were made by different code or another plan; "
                            "assemble both with the same whitebox-eval (re-run the new reproduction's assembly with "
                            "--resume on this code)")


def _fewer(base: Sequence[str], new: Sequence[str], where: str) -> None:
    """``new`` is ``base`` less some, in ``base``'s order."""
    it = iter(base)
    if not all(any(m == b for b in it) for m in new):
        raise WhiteboxError(f"splice: {where}: new's {list(new)} are not base's {list(base)} less some, in its order: "
                            "another plan; plan the new reproduction on the same models (--model) and scale")


def _in_column(c: Mapping[str, Any], column: str) -> bool:
    """A claim of trained column ``column``: its Holm family (a trained column's claims carry it, also where
    its child never ran and the claim names the plan's model), or its model."""
    return c.get("holm_family") == column or c.get("model") == column


def _runs_read(x: Any) -> set[str]:
    """Every run id a claim or cell names (``run``, a fit's ``runs``)."""
    out: set[str] = set()
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "run" and isinstance(v, str):
                out.add(v)
            elif k == "runs" and isinstance(v, list):
                out.update(r for r in v if isinstance(r, str))
            else:
                out |= _runs_read(v)
    elif isinstance(x, list):
        for v in x:
            out |= _runs_read(v)
    return out


def _column_block(paper: Mapping[str, Any], table: Mapping[str, Any], column: str, who: str) -> tuple[int, int]:
    """The slice of ``table``'s ``our_rows`` that holds ``column`` (one block of rows per model, in the
    paper's model order: :func:`.assemble.table`)."""
    models, rows = paper["models"], table.get("our_rows") or []
    if len(rows) % len(models):
        raise WhiteboxError(f"splice: {who} paper {paper['number']} table {table['id']}: {len(rows)} of our rows for "
                            f"{len(models)} models is not one block per model")
    k = len(rows) // len(models)
    i = models.index(column) * k
    block = rows[i:i + k]
    if len({r.get("model") for r in block}) > 1:
        raise WhiteboxError(f"splice: {who} paper {paper['number']} table {table['id']}: our rows of {column!r} "
                            "name several models")
    return i, i + k


def _table_frame(t: Mapping[str, Any]) -> dict[str, Any]:
    """A table less our cells (what must be the same in both)."""
    out = {k: v for k, v in t.items() if k not in ("rows", "our_rows")}
    out["rows"] = [{k: v for k, v in r.items() if k != "ours"} for r in t.get("rows") or []]
    return out


def _check_columns(columns: Sequence[str]) -> None:
    if not columns:
        raise WhiteboxError("splice: name the column(s) to splice (--column '<base model> + <label>' for a trained "
                            "column, --column '<base model>' for the base model's runs new ran)")


def _base_runs(number: str, new: Mapping[str, Any], model: str) -> set[str]:
    """A base model's runs that ``new`` ran (none: refused)."""
    ran = {r["run"] for r in new["runs"] if r.get("status") == "done" and r.get("model") == model}
    if not ran:
        raise WhiteboxError(f"splice: paper {number}: new ran no run of base model {model!r}: nothing to splice; let "
                            "its children finish (and assemble the new reproduction) first")
    return ran


def _scaled_down(base: Mapping[str, Any], new: Mapping[str, Any], ran: set[str]) -> list[dict[str, Any]]:
    """The paper's how-this-scale-differs texts: base's, but new's for an experiment whose runs new ran (the
    text that says how those runs were made: a recipe chosen since); every experiment and title the same."""
    number = base["number"]
    _same([{k: v for k, v in e.items() if k != "differs"} for e in base["scaled_down"]],
          [{k: v for k, v in e.items() if k != "differs"} for e in new["scaled_down"]], f"paper {number} scaled_down")
    out = []
    for b, n in zip(base["scaled_down"], new["scaled_down"]):
        if b["experiment"] not in ran:
            _same(b, n, f"paper {number} scaled_down {b['experiment']}")
        out.append(n if b["experiment"] in ran else b)
    return out


def _swapped(base: Mapping[str, Any], new_runs: Mapping[str, Mapping[str, Any]], taken: set[str]) -> dict[str, str]:
    """base's run id -> new's, for each run new ran (or of the column) under an id base lacks: it replaces base's
    one run of the same model and experiments (the column re-run with a recipe chosen since: its settings, so its
    id, changed)."""
    swap: dict[str, str] = {}
    ids = {r["run"] for r in base["runs"]}
    for rid in sorted(taken - ids):
        r = new_runs[rid]
        same = [b["run"] for b in base["runs"] if b.get("model") == r.get("model") and b.get("experiments") == r.get("experiments")]
        if len(same) != 1 or same[0] in swap:
            raise WhiteboxError(f"splice: paper {base['number']}: new ran {rid}, which base lacks, and base holds "
                                f"{len(same)} run(s) of {r.get('model')!r} for {r.get('experiments')} for it to replace "
                                "(one is needed, replaced once): another plan")
        swap[same[0]] = rid
    return swap


def _renamed(x: Any, swap: Mapping[str, str]) -> Any:
    """``x`` with each run id of ``swap`` (in a run reference too) as new's."""
    text = json.dumps(x)
    for old, new in swap.items():
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    return json.loads(text)


class _Parts:
    """What a splice replaces in one paper: a trained column's every claim (:func:`_in_column`), a base model's
    claims that read the runs new ran on it (:func:`_base_runs`), under new's ids and, where new ran them under
    another, base's (``swap``: :func:`_swapped`)."""

    def __init__(self, number: str, new: Mapping[str, Any], trained: Sequence[str], bases: Sequence[str],
                 swap: Mapping[str, str]):
        self.trained = list(trained)
        self.ran = {}
        for c in bases:
            ran = _base_runs(number, new, c)
            self.ran[c] = ran | {old for old, rid in swap.items() if rid in ran}

    def reads(self, col: str, x: Any) -> bool:
        return bool(_runs_read(x) & self.ran[col])

    def claim(self, c: Mapping[str, Any], ids: Iterable[tuple[str, str]] = ()) -> str | None:
        """The column whose claim ``c`` is, None when the splice keeps it: a base model's claim reads the runs
        new ran, or is one of ``ids`` (column, claim id: new's that do; base's may name no run, its child absent)."""
        for col in self.trained:
            if _in_column(c, col):
                return col
        return next((col for col in self.ran if c.get("model") == col and not c.get("holm_family")
                     and (self.reads(col, c) or (col, c["id"]) in ids)), None)

    def merged(self, col: str, b: Any, n: Any, where: str) -> tuple[Any, list[Any]]:
        """Base model ``col``'s cell ``b`` with new's ``n`` where it reads the runs new ran on ``col``, part by part
        in a list of cells (a row of ours lists several runs' values), and base's parts kept."""
        if isinstance(b, list) and isinstance(n, list):
            if len(b) != len(n):
                raise WhiteboxError(f"splice: {where}: {len(b)} cells of {col!r} in base, {len(n)} in new: "
                                    "different code")
            out, kept = [], []
            for x, y in zip(b, n):
                m, k = self.merged(col, x, y, where)
                out.append(m)
                kept += k
            return out, kept
        if not self.reads(col, n):
            return b, [b]
        if other := sorted(_runs_read(n) - self.ran[col]):
            raise WhiteboxError(f"splice: {where}: a cell of {col!r} reads run(s) {', '.join(other)} besides those "
                                "new ran: splicing would not be exact; assemble the whole reproduction")
        return n, []


def _paper(base: dict[str, Any], new: Mapping[str, Any], columns: Sequence[str],
           base_models: Sequence[str]) -> tuple[dict[str, Any], set[int]]:
    number = base["number"]
    own = (*SPLICED, "scaled_down")
    _same({k: v for k, v in base.items() if k not in own}, {k: v for k, v in new.items() if k not in own},
          f"paper {number}")
    _fewer(base["models"], new["models"], f"paper {number} models")
    for col in columns:
        for who, p in (("base", base), ("new", new)):
            if col not in p["models"]:
                raise WhiteboxError(f"splice: paper {number} has no column {col!r} in {who} (its columns: "
                                    f"{', '.join(p['models'])}); name a column of every paper both hold, "
                                    "or assemble the new reproduction from those papers only")
    trained = [c for c in columns if c not in base_models]
    for col in trained:
        mine = [c for c in new["claims"] if _in_column(c, col)]
        if not any(c["verdict"] != NOT_RUN for c in mine):
            raise WhiteboxError(f"splice: paper {number}: every claim of {col!r} in new is not run: nothing to "
                                "splice; let its children finish (and assemble the new reproduction) first")

    # runs: an entry done in new replaces base's (its producer is listed under the base model's name), under its
    # own id where the column re-ran with other settings, and so does every entry of a trained column (one not
    # done too: the column is new's whole)
    new_runs = {r["run"]: r for r in new["runs"]}
    done = {rid for rid, r in new_runs.items() if r.get("status") == "done"}
    taken = done | {rid for rid, r in new_runs.items() if r.get("model") in trained}
    swap = _swapped(base, new_runs, taken)
    parts = _Parts(number, new, trained, [c for c in columns if c in base_models], swap)
    base_ids = [swap.get(r["run"], r["run"]) for r in base["runs"]]
    _fewer(base_ids, [r["run"] for r in new["runs"]], f"paper {number} runs")
    runs = [new_runs[rid] if rid in taken else r for r, rid in zip(base["runs"], base_ids)]

    # claims: each column's replaced by new's of the same id, in base's order
    theirs: dict[tuple[str, str], dict[str, Any]] = {}
    for c in new["claims"]:
        col = parts.claim(c)
        if col is None:
            if read := sorted(r for ran in parts.ran.values() for r in _runs_read(c) & ran):
                raise WhiteboxError(f"splice: paper {number}: claim {c['id']} on {c.get('model')!r} reads run(s) "
                                    f"{', '.join(read)} that new ran: splicing would not be exact; assemble the whole "
                                    "reproduction with every child instead")
            continue
        if (col, c["id"]) in theirs:
            raise WhiteboxError(f"splice: paper {number}: new holds claim {c['id']} twice on {col!r}")
        theirs[col, c["id"]] = c
    ours = {(col, c["id"]) for c in base["claims"] if (col := parts.claim(c, theirs)) is not None}
    for col in columns:
        if only := sorted(i for x, i in set(theirs) - ours if x == col):
            raise WhiteboxError(f"splice: paper {number}: new holds claim(s) {', '.join(only)} on {col!r} that base "
                                "does not: another plan or other papers' code")
        if lacking := sorted(i for x, i in ours - set(theirs) if x == col):
            raise WhiteboxError(f"splice: paper {number}: new lacks claim(s) {', '.join(lacking)} on {col!r}: its plan "
                                "does not run every child of the column; plan all of the column's experiments")
    claims, kept, taken_claims = [], [], set()
    for i, c in enumerate(base["claims"]):
        col = parts.claim(c, theirs)
        claims.append(c if col is None else theirs[col, c["id"]])
        if col is None:
            kept.append(c)
            continue
        taken_claims.add(i)
        if col in parts.ran and (other := sorted(_runs_read(c) - parts.ran[col])):
            raise WhiteboxError(f"splice: paper {number}: claim {c['id']} on {col!r} reads run(s) {', '.join(other)} "
                                "besides those new ran: splicing would not be exact; assemble the whole reproduction")

    # tables: the columns' cells (rows' per-model cells, rows of ours) replaced by new's
    if len(base["tables"]) != len(new["tables"]):
        raise WhiteboxError(f"splice: paper {number}: {len(base['tables'])} tables in base, {len(new['tables'])} in "
                            "new: different code")
    tables = []
    for bt, nt in zip(base["tables"], new["tables"]):
        where = f"paper {number} table {bt.get('id')}"
        _same(_table_frame(bt), _table_frame(nt), where)
        t = dict(bt)
        t["rows"] = []
        for r, nr in zip(bt["rows"], nt["rows"]):
            if not isinstance(r.get("ours"), dict):
                t["rows"].append(r)
                continue
            cells = {}
            for m, cell in r["ours"].items():
                if m in parts.trained and m in nr["ours"]:
                    cells[m] = nr["ours"][m]
                elif m in parts.ran and m in nr["ours"]:
                    cells[m], left = parts.merged(m, cell, nr["ours"][m], where)
                    kept += left
                else:
                    cells[m] = cell
                    kept.append(cell)
            t["rows"].append(dict(r, ours=cells))
        our_rows = list(bt.get("our_rows") or [])
        keep = [True] * len(our_rows)
        for col in columns:
            (b0, b1), (n0, n1) = _column_block(base, bt, col, "base"), _column_block(new, nt, col, "new")
            if b1 - b0 != n1 - n0:
                raise WhiteboxError(f"splice: {where}: {b1 - b0} of our rows of {col!r} in base, {n1 - n0} in new: "
                                    "different code")
            for i, (br, nr) in enumerate(zip(our_rows[b0:b1], nt["our_rows"][n0:n1])):
                if col in parts.trained or parts.reads(col, nr):
                    _same(_renamed({k: v for k, v in br.items() if k != "ours"}, swap),
                          {k: v for k, v in nr.items() if k != "ours"}, f"{where} our rows of {col!r}")
                    if col in parts.trained:
                        our_rows[b0 + i] = nr
                    else:
                        ours, left = parts.merged(col, br.get("ours"), nr.get("ours"), f"{where} our rows")
                        our_rows[b0 + i] = dict(br, ours=ours)
                        kept += left
                    keep[b0 + i] = False
        t["our_rows"] = our_rows
        kept += [r for r, k in zip(our_rows, keep) if k]
        tables.append(t)

    # nothing kept of base may read a run new ran: it would read the new run too
    replaced = done | set(swap)  # base's entries that new's stand for
    if clash := sorted(_runs_read(kept) & replaced):
        raise WhiteboxError(f"splice: paper {number}: base's claims or cells outside {', '.join(map(repr, columns))} "
                            f"read run(s) {', '.join(clash)} that new ran: splicing would not be exact; assemble the "
                            "whole reproduction with every child instead")
    if parts.ran:  # the base models' family holds claims replaced: its adjusted p-values read them all
        verdicts.holm([c for c in claims if not c.get("holm_family")])

    # figures: base's of runs new ran dropped, new's added, in the plan's order of their runs
    figures = [f for f in base["figures"] if f.get("run") not in replaced]
    figures += [f for f in new["figures"] if f.get("run") in done]
    order = {rid: i for i, rid in enumerate(base_ids)}
    figures.sort(key=lambda f: order.get(f.get("run"), len(order)))
    ran = {e for rid, r in new_runs.items() if rid in done for e in r.get("experiments", ())}
    return {**base, "runs": runs, "claims": claims, "tables": tables, "figures": figures,
            "scaled_down": _scaled_down(base, new, ran)}, taken_claims


def _splice(base: Mapping[str, Any], new: Mapping[str, Any], columns: Sequence[str]
            ) -> tuple[dict[str, Any], dict[str, set[int]]]:
    """:func:`splice`, and per paper spliced the indices of its claims replaced by new's."""
    columns = list(dict.fromkeys(columns))
    _check_columns(columns)
    skip = ("papers", "models", "evidence")  # evidence: the name of the file split writes it to, not content
    _same({k: v for k, v in base.items() if k not in skip}, {k: v for k, v in new.items() if k not in skip}, "content")
    _fewer(base["models"], new["models"], "models")
    theirs = {p["number"]: p for p in new["papers"]}
    if extra := sorted(set(theirs) - {p["number"] for p in base["papers"]}):
        raise WhiteboxError(f"splice: new holds paper(s) {', '.join(extra)} that base does not: a column is spliced "
                            "into a paper base holds")
    if not theirs:
        raise WhiteboxError("splice: new holds no paper")
    out = _copy(base)
    new = _copy(new)
    taken: dict[str, set[int]] = {}
    papers = []
    for p in out["papers"]:
        if p["number"] in theirs:
            p, taken[p["number"]] = _paper(p, theirs[p["number"]], columns, base["models"])
        papers.append(p)
    out["papers"] = papers
    return out, taken


def splice(base: Mapping[str, Any], new: Mapping[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """``base`` (a reproduction's content, evidence in place: :func:`.assemble.content`,
    :func:`whitebox_eval.reproduce.merged`) with ``columns`` taken from ``new`` in every paper both hold: a
    trained column (``"<base model> + <label>"``) whole, a base model (``"<base model>"``) where it reads the
    runs new ran on it (then Holm's family of the base models adjusted again); the claims and table cells,
    the runs new ran (their entries) and their figures. Everything else must be the same in both
    (:class:`WhiteboxError` naming the first difference); the module's docstring says why the result is the
    content of one reproduction that ran both."""
    return _splice(base, new, columns)[0]


def spliced(base: Mapping[str, Any], new: Mapping[str, Any], columns: Sequence[str]
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """:func:`splice`'s content, and what it changes, per paper both hold, in base's order: each claim it
    replaces (``part`` "replaced"), and each other claim whose verdict after Holm it changes (``part`` "Holm":
    the base models' family adjusted again); paper, id, model, and the verdict raw and after Holm, old
    (``base``'s) and new (the spliced report's)."""
    out, taken = _splice(base, new, columns)
    rows = []
    for pb, po in zip(base["papers"], out["papers"]):
        if pb["number"] not in taken:
            continue
        for i, (cb, co) in enumerate(zip(pb["claims"], po["claims"])):
            old = (cb["verdict"], cb.get("verdict_holm", cb["verdict"]))
            now = (co["verdict"], co.get("verdict_holm", co["verdict"]))
            if i in taken[pb["number"]] or old != now:
                rows.append({"paper": pb["number"], "id": cb["id"], "model": co["model"], "old": old, "new": now,
                             "part": "replaced" if i in taken[pb["number"]] else "Holm"})
    return out, rows
