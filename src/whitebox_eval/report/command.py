"""``whitebox-eval report`` (the HTML page) and ``whitebox-eval compare`` (headline deltas)."""

from __future__ import annotations

from pathlib import Path

import click

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.report.comparison import headline_rows, mui_moves
from whitebox_eval.report.metrics import format_delta, format_estimate, format_value
from whitebox_eval.report.rundata import DEFAULT_SAMPLE_CAP, RunData, load_run


@click.command()
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(path_type=Path, file_okay=True, dir_okay=True))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="where to write the page (default: <first run>/report.html)")
@click.option("--samples", "sample_cap", type=click.IntRange(min=0), default=DEFAULT_SAMPLE_CAP,
              show_default=True, help="samples shown per run in the viewer")
def report(run_dirs: tuple[Path, ...], out: Path | None, sample_cap: int) -> None:
    """Write one self-contained report.html for one or more run folders.

    \b
    The page works offline (plots embedded): config, summary metrics (headline first),
    every plot and per-head heatmap, and a sample viewer. With several runs: headline
    metrics side by side, and for MUI runs of the same task the direction each moved.

    \b
      whitebox-eval report runs/20260101-120000-mcqa-smollm2-135m-ssd
      whitebox-eval report runs/base runs/tuned --out compare.html
    """
    from whitebox_eval.report.page import write_report
    from whitebox_eval.runs.folder import RunFolder

    path = write_report(list(run_dirs), out, sample_cap=sample_cap)
    for run_dir in (d for d in run_dirs if (Path(d) / "results.json").is_file()):
        try:  # a corrupted results.json is flagged on the page and named here
            RunFolder.open(run_dir).load_results()
        except WhiteboxError as error:
            click.echo(f"warning: {error} (the report shows the rest of the run)", err=True)
    click.echo(f"wrote {path}")


@click.command()
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
def compare(run_a: Path, run_b: Path) -> None:
    """Print the headline metrics of two runs and their deltas (B - A).

    \b
      whitebox-eval compare runs/base runs/tuned
    """
    runs = [load_run(run_a, sample_cap=0), load_run(run_b, sample_cap=0)]
    for run in runs:
        if run.results_error is not None:
            raise WhiteboxError(run.results_error)
        if run.results is None:
            raise WhiteboxError(f"{run.path} has no results.json yet: the run did not finish; "
                                "complete it with --resume before comparing")
    for line in compare_lines(runs[0], runs[1]):
        click.echo(line)


def compare_lines(a: RunData, b: RunData) -> list[str]:
    """The aligned table ``compare`` prints (plus MUI direction when both are MUI runs)."""
    lines = [f"A: {a.run_id}  ({a.suite or '?'} / {a.model or '?'} / {a.task or '?'})",
             f"B: {b.run_id}  ({b.suite or '?'} / {b.model or '?'} / {b.task or '?'})", ""]
    rows = [("metric", "A", "B", "B - A")]
    for row in headline_rows([a, b]):
        rows.append((row.metric, format_estimate(row.values[0], row.intervals[0]),
                     format_estimate(row.values[1], row.intervals[1]), format_delta(row.deltas()[1])))
    if len(rows) == 1:
        return lines + ["neither run has headline metrics"]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for n, r in enumerate(rows):
        cells = [f"{r[0]:<{widths[0]}}", *(f"{v:>{w}}" for v, w in zip(r[1:], widths[1:]))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    for move in mui_moves([a, b]):
        lines += ["", f"MUI direction on {move.task}: {move.direction} (accuracy % / MUI %: "
                      f"{format_value(move.before[0])} / {format_value(move.before[1])} -> "
                      f"{format_value(move.after[0])} / {format_value(move.after[1])})"]
    return lines
