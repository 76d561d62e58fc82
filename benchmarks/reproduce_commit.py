"""Put a finished reproduction where every number traces to a file in the repository.

    python benchmarks/reproduce_commit.py /work/repro/quick-v2

Copies the reproduction's ``claims.json`` and ``evidence.json.gz`` and, for every child run, its
``results.json`` and ``config.yaml`` into ``benchmarks/results/reproduce_quick/``
(``runs/<child>/``), and its ``reproduction.md`` to ``benchmarks/results/reproduce_all_quick.md``.
A child the reproduction has not (yet) finished is listed in ``missing.txt``. Nothing is
recomputed. No copied file keeps an absolute path of the machine that made it: data paths become
relative to the data root (``--data-root``, default: the deepest folder holding every data file of
the reproduction's plan.json), the cache root's become ``<cache>/...``, the reproduction folder's
relative to it, a local model folder its folder's name; a path left over stops the copy, naming it.
It prints the verdict table (one row per claim, one column per model) and writes it into
``docs/reproduce.md`` between the markers ``<!-- verdicts: SCALE -->`` and ``<!-- /verdicts -->``
(added at the page's end when it has none); ``--beside OTHER/claims.json`` makes instead each
model's verdict there beside this one's (e.g. the quick scale beside the cpu scale), under
``<!-- verdicts: OTHER_SCALE beside SCALE -->``. ``--changes EARLIER/claims.json`` prints how
many verdicts moved since an earlier report of the same scale, per paper and how (e.g. the
committed one before it is overwritten). ``--dest``, ``--md`` and ``--page`` write elsewhere (a
check that leaves the committed files alone).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "benchmarks" / "results" / "reproduce_quick"
MARKDOWN = ROOT / "benchmarks" / "results" / "reproduce_all_quick.md"
PAGE = ROOT / "docs" / "reproduce.md"
BEGIN, END = "<!-- verdicts: {} -->", "<!-- /verdicts -->"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="a reproduction folder (holds claims.json and runs/)")
    ap.add_argument("--dest", type=Path, default=DEST, help="folder to write (default: %(default)s)")
    ap.add_argument("--md", type=Path, default=MARKDOWN, help="where reproduction.md goes (default: %(default)s)")
    ap.add_argument("--beside", type=Path, default=None,
                    help="another reproduction's claims.json: its verdicts beside this one's")
    ap.add_argument("--page", type=Path, default=PAGE,
                    help="the docs page the verdict table is written into (default: %(default)s)")
    ap.add_argument("--data-root", type=Path, default=None, help="the data root the data paths are made relative to")
    ap.add_argument("--changes", type=Path, default=None,
                    help="an earlier claims.json of the same scale: print how many verdicts changed, per paper and how")
    args = ap.parse_args()
    folder, dest = args.folder, args.dest
    content = json.loads((folder / "claims.json").read_text(encoding="utf-8"))
    roots = path_roots(folder, args.data_root)
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "runs").mkdir(parents=True)
    copy_relative(folder / "claims.json", dest / "claims.json", roots)
    if (folder / "evidence.json.gz").is_file():
        shutil.copy(folder / "evidence.json.gz", dest / "evidence.json.gz")
    runs = sorted({r["run"] for p in content["papers"] for r in p["runs"]})
    missing = []
    for run in runs:
        src = (folder / "runs" / run).resolve()
        if not (src / "results.json").is_file():
            missing.append(run)
            continue
        (dest / "runs" / run).mkdir()
        for name in ("results.json", "config.yaml"):
            if (src / name).is_file():
                copy_relative(src / name, dest / "runs" / run / name, roots)
    (dest / "missing.txt").write_text("".join(f"{r}\n" for r in missing), encoding="utf-8")
    shutil.copy(folder / "reproduction.md", args.md)
    print(f"{len(runs) - len(missing)} child runs copied to {dest}, {len(missing)} missing")
    if args.beside:
        other = json.loads(args.beside.read_text(encoding="utf-8"))
        key, table = f"{other['scale']} beside {content['scale']}", beside_table(other, content, (other["scale"], content["scale"]))
    else:
        key, table = content["scale"], verdict_table(content)
    print(table)
    page = args.page
    page.write_text(put_table(page.read_text(encoding="utf-8") if page.is_file() else "", key, table), encoding="utf-8")
    print(f"verdict table '{key}' written to {page}")
    if args.changes:
        print(changes(json.loads(args.changes.read_text(encoding="utf-8")), content))


def block(key: str, table: str) -> str:
    """The table between its markers (blank lines around it, so that it renders as a table)."""
    return f"{BEGIN.format(key)}\n\n{table}\n\n{END}\n"


def put_table(text: str, key: str, table: str) -> str:
    """``text`` with the table between the markers of ``key`` replaced by ``table``; the block
    is added at the end where the page has no such markers."""
    begin = BEGIN.format(key)
    start = text.find(begin)
    if start < 0:
        return (text.rstrip("\n") + "\n\n" if text.strip() else "") + block(key, table)
    stop = text.find(END, start)
    if stop < 0:
        raise SystemExit(f"{begin} has no end marker {END} after it")
    rest = text[stop + len(END):]
    return text[:start] + block(key, table) + rest.removeprefix("\n")


ABSOLUTE = re.compile(r"(?<![\w.~<>-])(/(?:work|home|tmp|root|Users|mnt|private|var|opt)/[^\s\"',\]}]*)")


def path_roots(folder: Path, data_root: Path | None) -> list[tuple[str, str]]:
    """(absolute prefix, what replaces it), longest first: the data root's children become relative
    paths, the cache root ``<cache>/``, the reproduction folder and those beside it under the same
    ``--output`` relative (a child found there is ``runs/<child>`` here too), a local model folder its
    name."""
    import os

    plan = json.loads((folder / "plan.json").read_text(encoding="utf-8")) if (folder / "plan.json").is_file() else {}
    data = [str(Path(p).resolve()) for p in (plan.get("data") or {}).values()]
    if data_root is None and data:
        data_root = Path(os.path.commonpath([str(Path(d).parent) for d in data]))
    roots = []
    if data_root is not None:
        roots.append((str(Path(data_root).resolve()) + "/", ""))
    from whitebox_eval.models.loading import cache_root

    roots.append((str(cache_root().resolve()) + "/", "<cache>/"))
    roots.append((str(folder.resolve()) + "/", ""))
    for other in sorted(folder.resolve().parent.iterdir()) if folder.resolve().parent.is_dir() else ():
        if other.is_dir() and (other / "runs").is_dir():  # a reproduction folder beside it: a child reused from there
            roots.append((str(other) + "/", ""))  # names the same runs/<child> as this one
    for model in plan.get("models") or []:  # a local model folder is named by its folder's name
        if Path(model).is_absolute():
            roots.append((str(Path(model).parent) + "/", ""))
            roots.append((str(Path(model).resolve().parent) + "/", ""))
    return sorted(roots, key=lambda r: -len(r[0]))


def relative(text: str, roots: list[tuple[str, str]]) -> str:
    """``text`` with each absolute prefix of ``roots`` replaced by what replaces it."""
    for prefix, replacement in roots:
        text = text.replace(prefix, replacement)
    return text


def refuse_absolute(text: str, where: Path) -> str:
    """``text``, or stop naming the absolute paths of a machine still in it."""
    left = sorted(set(ABSOLUTE.findall(text)))
    if left:
        raise SystemExit(f"{where}: absolute path(s) left after making them relative: {', '.join(left[:5])}")
    return text


def copy_relative(src: Path, dst: Path, roots: list[tuple[str, str]]) -> None:
    """Copy a text file with each absolute prefix of ``roots`` replaced; refuse one left over."""
    dst.write_text(refuse_absolute(relative(src.read_text(encoding="utf-8"), roots), src), encoding="utf-8")


def _cell(c: dict) -> str:
    from whitebox_eval.reproduce import cell_text

    v, off = c["verdict"], cell_text.off_format_text(c)
    if v in ("not run", "not tested"):
        return f"{v}; {off}" if off else v
    text = f"**{v}**"
    if c.get("verdict_holm", v) != v:
        text += f" (Holm: {c['verdict_holm']})"
    if c.get("statistic"):
        text += f" {cell_text.statistic_text(c)}, {cell_text.p_text(c.get('p_value'))}"
    text += f"; {off}" if off else ""  # before the reason, which is cut
    if v == "uninformative":
        text += "; " + c.get("reason", "").replace("precondition ", "").replace(" failed", "")[:140]
    elif v == "not shown at this n" and c.get("minimum_detectable_effect") is not None:
        text += f"; detects {abs(c['minimum_detectable_effect']) * cell_text._k(c):.3g}{cell_text._u(c)}"
    return text.replace("|", "/")


def verdict_table(content: dict) -> str:
    models = content["models"]
    lines = ["| paper | claim | " + " | ".join(models) + " |", "|---|---|" + "---|" * len(models)]
    for p in content["papers"]:
        by: dict = {}
        for c in p["claims"]:
            by.setdefault(c["id"], {})[c["model"]] = c
        for per in by.values():
            first = next(iter(per.values()))
            name = first["claim"] + (" (headline)" if first.get("headline") else "")
            cells = [_cell(per["all"]) if "all" in per else _cell(per[m]) if m in per else "" for m in models]
            if "all" in per:
                cells = [cells[0]] + ["same fit"] * (len(models) - 1)
            lines.append(f"| {p['number']} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _short(c: dict | None) -> str:
    """A verdict and, where it was decided on one, the effect and p."""
    from whitebox_eval.reproduce import cell_text

    if c is None:
        return ""
    v, off = c["verdict"], cell_text.off_format_text(c)
    if v not in ("not run", "not tested") and c.get("statistic"):
        v += f" {cell_text.statistic_text(c)}, {cell_text.p_text(c.get('p_value'))}"
    return (f"{v}; {off}" if off else v).replace("|", "/")


def _cells(content: dict) -> dict[tuple[str, str, str], dict]:
    """A claims.json's cells by (paper, claim id, model)."""
    return {(p["number"], c["id"], c["model"]): c for p in content["papers"] for c in p["claims"]}


def changes(before: dict, after: dict) -> str:
    """How the verdicts of the cells both hold moved from ``before`` to ``after``: the count per
    paper, then each move (``old -> new (qualifier)``) with its count; the cells only ``after`` holds."""
    from collections import Counter

    old = _cells(before)
    per, moves, new = Counter(), Counter(), Counter()
    for p in after["papers"]:
        for c in p["claims"]:
            was = old.get((p["number"], c["id"], c["model"]))
            if was is None:
                new[p["number"]] += 1
            elif was["verdict"] != c["verdict"]:
                per[p["number"]] += 1
                q = f" ({c['qualifier']})" if c.get("qualifier") else ""
                moves[(p["number"], f"{was['verdict']} -> {c['verdict']}{q}")] += 1
    shared = len(old.keys() & _cells(after).keys())
    lines = [f"{sum(per.values())} of {shared} cells both hold changed verdict: "
             + (", ".join(f"{k}: {v}" for k, v in sorted(per.items())) or "none")]
    lines += [f"  {paper}: {move} x{n}" for (paper, move), n in sorted(moves.items())]
    lines.append(f"{sum(new.values())} new cells: " + (", ".join(f"{k}: {v}" for k, v in sorted(new.items())) or "none"))
    return "\n".join(lines)


def beside_table(before: dict, after: dict, names: tuple[str, str]) -> str:
    """One row per claim of ``after``; per model, ``before``'s verdict then ``after``'s."""
    models = after["models"]
    old = _cells(before)
    head = " | ".join(f"{m} {n}" for m in models for n in names)
    lines = [f"| paper | claim | {head} |", "|---|---|" + "---|" * (2 * len(models))]
    for p in after["papers"]:
        by: dict = {}
        for c in p["claims"]:
            by.setdefault(c["id"], {})[c["model"]] = c
        for cid, per in by.items():
            first = next(iter(per.values()))
            cells = []
            for m in models:
                mine = per.get(m, per.get("all"))
                was = old.get((p["number"], cid, m), old.get((p["number"], cid, "all")))
                cells += [was["verdict"] if was else "", _short(mine)]
            lines.append(f"| {p['number']} | {first['claim']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
