"""``write_report``: one self-contained ``report.html`` for one or more run folders.

The page needs no network: plots are embedded as base64 ``data:`` URIs and the style is
inline. By default each run gets an item explorer (:mod:`.interactive`: the item table
and the suite's per-item views, built by the page's one script from a JSON block; with
several runs, the same item across runs); ``static=True`` gives the page without any
script (the sample viewer uses ``<details>``). The Content-Security-Policy allows inline
style, ``data:`` images and, on the interactive page, only its own script by hash, so
even text that escaped escaping could not run or load anything. All run text goes
through :mod:`whitebox_eval.report.markup`.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import whitebox_eval
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.report.moves import headline_rows, moves, skipped_moves
from whitebox_eval.report.markup import Markup, join, render
from whitebox_eval.report.paired_runs import paired_comparison
from whitebox_eval.report.metrics import flatten, format_cell, format_delta, format_value, metric_rows, paired_rows
from whitebox_eval.report.rundata import DEFAULT_SAMPLE_CAP, IMAGE_TYPES, RunData, load_run
from whitebox_eval.report.samples import plot_anchor, render_samples
from whitebox_eval.report.style import CSP, STYLE
from whitebox_eval.runs.atomic import AtomicFile
from whitebox_eval.runs.estimates import estimate_rows
from whitebox_eval.runs.folder import RunFolder

REPORT_FILE = "report.html"


def write_report(run_dirs: list[Path], out: Path | None = None, *,
                 sample_cap: int = DEFAULT_SAMPLE_CAP, static: bool = False) -> Path:
    """Write the report of ``run_dirs`` to ``out`` and return its path.

    ``out`` defaults to ``<first run>/report.html``; an existing folder gets
    ``report.html`` inside it. With several runs the page starts with their headline
    metrics side by side (deltas against the first run) and, for runs of the same task
    whose results.json names moves (``moves``), the direction each moved. ``static``: the
    page without script (no item explorer; the sample viewer shows ``sample_cap`` samples).
    Raises :class:`WhiteboxError` for a path that is not a run folder.
    """
    if not run_dirs:
        raise WhiteboxError("give at least one run folder to report on")
    runs = [load_run(Path(p), sample_cap) for p in run_dirs]
    out = Path(out) if out is not None else runs[0].path / REPORT_FILE
    if out.is_dir():
        out = out / REPORT_FILE
    _write_atomic(out, render_page(runs, static=static))
    return out


def render_page(runs: list[RunData], static: bool = False) -> str:
    """The whole HTML document for ``runs`` (interactive unless ``static``)."""
    title = "whitebox-eval report: " + ", ".join(r.run_id for r in runs)
    nav = join(render("<li><a href=\"#{key}\">{id}</a> <span class=meta>{what}</span></li>",
                      key=_run_key(i), id=r.run_id, what=_describe(r)) for i, r in enumerate(runs))
    comparison = _comparison(runs, static) if len(runs) > 1 else Markup("")
    sections = join(_run_section(i, r, static) for i, r in enumerate(runs))
    csp, style, end = CSP, Markup(STYLE), Markup("")
    if not static:
        from whitebox_eval.report import interactive

        csp, style, end = interactive.csp(), Markup(STYLE + interactive.style()), interactive.body_end(runs)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return render(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<title>{title}</title><style>{style}</style></head>\n<body>"
        "<header><h1>whitebox-eval report</h1>"
        "<p class=meta>{n} run(s); written {generated} by whitebox-eval {version}</p>"
        "<ul class=nav>{nav}</ul></header>\n{comparison}{sections}{end}</body></html>\n",
        csp=csp, title=title, style=style, n=len(runs), generated=generated,
        version=whitebox_eval.__version__, nav=nav, comparison=comparison, sections=sections, end=end)


# ---------------------------------------------------------------------- several runs


def _comparison(runs: list[RunData], static: bool) -> Markup:
    head = join(render("<th>{id}</th>", id=r.run_id) for r in runs)
    rows = []
    for row in headline_rows(runs):
        cells = []
        for value, ci, d in zip(row.values, row.intervals, row.deltas()):
            shown = render("{v} <span class=delta>{d}</span>", v=format_cell(value, ci), d=format_delta(d)) \
                if d is not None else render("{v}", v=format_cell(value, ci))
            cells.append(render("<td>{c}</td>", c=shown))
        rows.append(render("<tr><th>{m}</th>{cells}</tr>", m=row.metric, cells=join(cells)))
    table = render("<table class=metrics><thead><tr><th>headline metric</th>{head}</tr></thead>"
                   "<tbody>{rows}</tbody></table><p class=note>Deltas are against the first run.</p>",
                   head=head, rows=join(rows)) if rows else \
        render("<p class=note>None of these runs has headline metrics yet.</p>")
    directions = _directions(runs)
    paired = _paired(runs)
    same = Markup("") if static else render("<div class=explorer data-explorer=compare></div>")
    return render("<section id=\"comparison\"><h2>Runs side by side</h2>{table}{paired}{directions}{same}"
                  "</section>\n", table=table, paired=paired, directions=directions, same=same)


def _paired(runs: list[RunData]) -> Markup:
    """Each later run against the first, item by item (:mod:`.paired_runs`)."""
    if any(not (r.path / "samples.jsonl").is_file() for r in runs):
        return Markup("")
    first = list(RunFolder.open(runs[0].path).read_samples())
    blocks = []
    for run in runs[1:]:
        try:
            cmp = paired_comparison(first, RunFolder.open(run.path).read_samples(), runs[0].run_id, run.run_id)
        except WhiteboxError as error:
            blocks.append(render("<p class=note>No item-by-item comparison of {b}: {e}</p>", b=run.run_id, e=str(error)))
            continue
        if not cmp.metrics:
            continue
        rows = join(render(
            "<tr><th>{m}</th><td>{a}</td><td>{b}</td><td>{d}</td><td>[{lo}, {hi}]</td><td>{p}</td><td>{t}</td>"
            "<td>{n}</td><td>{f}</td></tr>", m=m.metric, a=format_value(m.mean_a), b=format_value(m.mean_b),
            d=f"{m.test.diff:+.4f}", lo=f"{m.test.lo:+.4f}", hi=f"{m.test.hi:+.4f}", p=f"{m.test.p_value:.3g}",
            t="exact McNemar" if m.binary else "paired bootstrap", n=m.test.n,
            f=f"+{len(m.gained)} / -{len(m.lost)}" if m.binary else "") for m in cmp.metrics)
        blocks.append(render(
            "<h3>{b} - {a}, item by item ({n} shared items)</h3><table class=metrics data-paired><thead><tr>"
            "<th>metric</th><th>{a}</th><th>{b}</th><th>diff</th><th>95% interval</th><th>p</th><th>test</th>"
            "<th>n</th><th>flips</th></tr></thead><tbody>{rows}</tbody></table>",
            a=cmp.label_a, b=cmp.label_b, n=cmp.n_shared, rows=rows))
    return join(blocks)


def _directions(runs: list[RunData]) -> Markup:
    """The direction each later run moved from the first (runs that declare ``moves``)."""
    found = moves(runs)
    out = Markup("")
    if found:
        x, y = found[0].axes
        rows = join(render(
            "<tr><td>{task}</td><td>{a}</td><td>{b}</td><td>{xa} / {ya}</td><td>{xb} / {yb}</td>"
            "<td class=direction>{d}</td></tr>", task=m.task, a=m.before_run, b=m.after_run,
            xa=format_value(m.before[0]), ya=format_value(m.before[1]), xb=format_value(m.after[0]),
            yb=format_value(m.after[1]), d=m.direction) for m in found)
        note = render("<p class=note>{n}</p>", n=found[0].note) if found[0].note else Markup("")
        out = render("<h3>Direction each task moved</h3><table class=metrics><thead><tr>"
                     "<th>task</th><th>from</th><th>to</th><th>{x} / {y} (from)</th><th>{x} / {y} (to)</th>"
                     "<th>direction</th></tr></thead><tbody>{rows}</tbody></table>{note}",
                     x=x, y=y, rows=rows, note=note)
    notes = join(render("<li>{n}</li>", n=n) for n in skipped_moves(runs))
    if notes:
        out = render("{out}<ul class=note>{notes}</ul>", out=out, notes=notes)
    return out


# ---------------------------------------------------------------------- one run


def _run_section(i: int, run: RunData, static: bool = True) -> Markup:
    key = _run_key(i)
    plot_names = {p.stem for p in run.plots}
    heatmaps = [p for p in run.plots if "head" in p.stem and not p.stem.startswith("rollout")]
    attention = [p for p in run.plots if p.stem.startswith("rollout")]
    others = [p for p in run.plots if p not in heatmaps and p not in attention]
    parts = [
        render("<h3>Summary metrics</h3>{m}", m=_metrics(run)),
        _figures("Per-head heatmaps", heatmaps, key),
        _figures("Attention maps (rollout with the reference mask)", attention, key),
        _figures("Plots", others, key),
        _unembedded(run),
        render("<details open><summary><h3>Config</h3></summary>{t}</details>", t=_config(run.config)),
        _arrays(run),
        render("<h3>Samples</h3>{v}", v=render_samples(run.samples, run.n_samples, key, plot_names)) if static else
        render("<h3>Items</h3><p class=note>Filter, sort and select an item to see its views ({n} items; every "
               "sample line is in samples.jsonl).</p><div class=explorer data-explorer=\"{key}\"></div>",
               n=run.n_samples, key=key),
    ]
    return render("<section class=run id=\"{key}\"><h2>{id}</h2><p class=meta>{what}</p>"
                  "<p class=meta>{path}</p>{parts}</section>\n",
                  key=key, id=run.run_id, what=_describe(run), path=str(run.path), parts=join(parts))


def _metrics(run: RunData) -> Markup:
    if run.results_error is not None:
        return render("<p class=\"note warning\"><strong>Warning: results.json is unreadable</strong> "
                      "({e}). Its metrics are missing below; plots, arrays and samples are shown "
                      "as found.</p>", e=run.results_error)
    if run.results is None:
        return render("<p class=note>No results.json yet: the run is in progress or was "
                      "interrupted (finish it with --resume). Samples so far are below.</p>")
    headline, rest = metric_rows(run.results)
    head_rows = estimate_rows(dict(headline), run.results)
    rest_rows = estimate_rows(dict(rest))
    head = join(render("<tr class=headline><th>{k}</th><td>{v}</td></tr>", k=k, v=format_cell(v, ci))
                for k, v, ci in head_rows)
    note = render("<p class=note>[lo, hi]: 95% interval over the n items it was measured on "
                  "(wilson: Wilson score interval; bootstrap: percentile bootstrap over items; jackknife: "
                  "delete-one jackknife over items; paired_bootstrap: of the per-item differences).</p>") \
        if any(ci for _, _, ci in head_rows + rest_rows) else Markup("")
    table = render("<table class=metrics><tbody>{rows}</tbody></table>{note}", rows=head, note=note) if headline else \
        render("<p class=note>results.json has no headline metrics.</p>")
    table = render("{table}{paired}", table=table, paired=_paired_tests(run.results))
    if not rest_rows:
        return table
    rows = join(render("<tr><th>{k}</th><td>{v}</td></tr>", k=k, v=format_cell(v, ci)) for k, v, ci in rest_rows)
    return render("{table}<details><summary>all results ({n} values)</summary>"
                  "<table class=metrics><tbody>{rows}</tbody></table></details>",
                  table=table, n=len(rest_rows), rows=rows)


def _paired_tests(results: dict[str, Any]) -> Markup:
    rows = paired_rows(results)
    if not rows:
        return Markup("")
    body = join(render(
        "<tr><th>{name}</th><td>{test}</td><td>{diff} [{lo}, {hi}]</td><td>{p}</td><td>{n}</td><td>{bc}</td>"
        "<td class=\"verdict {cls}\">{verdict}</td></tr>",
        name=r["name"], test=r.get("test", ""), diff=format_delta(r.get("diff")), lo=format_delta(r.get("lo")),
        hi=format_delta(r.get("hi")), p=format_value(r["p_value"]), n=format_value(r.get("n")),
        bc="" if r.get("b") is None else f"{r['b']} / {r.get('c')}",
        cls="ok" if r["verdict"].startswith("significant") else "plain", verdict=r["verdict"]) for r in rows)
    return render("<h3>Paired tests (X vs Y on the same items)</h3><table class=metrics><thead><tr><th>comparison</th>"
                  "<th>test</th><th>difference X - Y [95% interval]</th><th>p</th><th>n</th><th>b / c</th>"
                  "<th>verdict</th></tr></thead><tbody>{body}</tbody></table><p class=note>b / c: items only X / only Y "
                  "got right (McNemar). A difference whose p-value is not below 0.05 is not told apart from chance on "
                  "this many items.</p>", body=body)


def _config(config: dict[str, Any]) -> Markup:
    rows = join(render("<tr><th>{k}</th><td>{v}</td></tr>", k=k, v=format_value(v, max_items=64))
                for k, v in flatten(config) if k)
    return render("<table class=config><tbody>{rows}</tbody></table>", rows=rows)


def _figures(title: str, plots: list[Path], key: str) -> Markup:
    if not plots:
        return Markup("")
    figures = join(render("<figure id=\"{anchor}\"><img src=\"{src}\" alt=\"{name}\">"
                          "<figcaption>{name}</figcaption></figure>",
                          anchor=plot_anchor(key, p.stem), src=_data_uri(p), name=p.name) for p in plots)
    return render("<h3>{title}</h3><div class=figures>{figures}</div>", title=title, figures=figures)


def _unembedded(run: RunData) -> Markup:
    if not run.other_plot_files:
        return Markup("")
    names = join(render("<li>{n}</li>", n=p.name) for p in run.other_plot_files)
    return render("<p class=note>Also in plots/ (not embedded; open them from the run folder):</p>"
                  "<ul class=note>{names}</ul>", names=names)


def _arrays(run: RunData) -> Markup:
    if not run.arrays:
        return Markup("")
    rows = join(render("<tr><th>{n}</th><td>{s}</td><td>{d}</td></tr>", n=a.name,
                       s="?" if a.shape is None else " \u00d7 ".join(map(str, a.shape)) or "scalar",
                       d=a.dtype) for a in run.arrays)
    return render("<details><summary><h3>Arrays</h3></summary><table class=config><thead><tr><th>"
                  "arrays/*.npy</th><th>shape</th><th>dtype</th></tr></thead><tbody>{rows}</tbody>"
                  "</table></details>", rows=rows)


def _data_uri(path: Path) -> str:
    mime = IMAGE_TYPES[path.suffix.lower()]
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _describe(run: RunData) -> str:
    bits = [f"suite {run.suite or '?'}", f"model {run.model or '?'}", f"task {run.task or '?'}",
            f"{run.n_samples} samples"]
    if run.config.get("edits"):  # --edit: the study ran under these
        bits.append("under --edit " + ", ".join(str(e) for e in run.config["edits"]))
    if run.config.get("created"):
        bits.append(f"started {run.config['created']}")
    return " \u00b7 ".join(bits)


def _run_key(i: int) -> str:
    return f"run{i}"


def _write_atomic(path: Path, text: str) -> None:
    """report.html through the run folders' atomic writer; a folder that cannot take it is one line."""
    try:
        with AtomicFile(path, "w") as f:
            f.write(text)
    except OSError as exc:
        raise WhiteboxError(f"cannot write the report to {path} ({exc.strerror or exc}); choose "
                            "another --out") from None