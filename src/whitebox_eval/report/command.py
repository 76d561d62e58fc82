"""``whitebox-eval report`` (the HTML page) and ``whitebox-eval compare`` (headline deltas)."""

from __future__ import annotations

from pathlib import Path

import click

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.runs.finished import is_finished
from whitebox_eval.report.rundata import DEFAULT_SAMPLE_CAP


@click.command()
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(path_type=Path, file_okay=True, dir_okay=True))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="where to write the page (default: <first run>/report.html)")
@click.option("--samples", "sample_cap", type=click.IntRange(min=0), default=DEFAULT_SAMPLE_CAP,
              show_default=True, help="samples shown per run in the --static page's viewer")
@click.option("--static", is_flag=True, default=False,
              help="the page without any script: no item explorer, samples as collapsed text")
def report(run_dirs: tuple[Path, ...], out: Path | None, sample_cap: int, static: bool) -> None:
    """Write one self-contained report.html for one or more run folders.

    \b
    The page works offline (plots embedded): config, summary metrics (headline first),
    every plot and per-head heatmap, and an item explorer: the items filtered by each
    method's correctness, disagreement and search, sorted by any score, and per item the
    suite's views (mcqa: a kept head's attention over the prompt, option scores, logit
    lens, the head grid; gar: flips per intervention; span: rollout beside the reference
    mask; mui: key neurons or SAE features; formats: letters beside free answers). With
    several runs: headline metrics side by side, the same item across runs, and for runs
    of one task whose results.json names its moves (e.g. paper 001 sec. 3.3) the
    direction each moved. --static: today's page without script.

    \b
      whitebox-eval report runs/20260101-120000-mcqa-smollm2-135m-ssd
      whitebox-eval report runs/base runs/tuned --out compare.html
    """
    from whitebox_eval.report.page import write_report
    from whitebox_eval.runs.folder import RunFolder

    path = write_report(list(run_dirs), out, sample_cap=sample_cap, static=static)
    for run_dir in (d for d in run_dirs if is_finished(d)):
        try:  # a corrupted results.json is flagged on the page and named here
            RunFolder.open(run_dir).load_results()
        except WhiteboxError as error:
            click.echo(f"warning: {error} (the report shows the rest of the run)", err=True)
    click.echo(f"wrote {path}")


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, default=False,
              help="print the comparison as one JSON object (exact values and p-values) instead of the table")
def compare(inputs: tuple[Path, ...], as_json: bool) -> None:
    """Print the headline metrics of runs and lm-eval results files side by side, with deltas vs the first.

    \b
    Each INPUT is a run folder, an lm-eval results_*.json (from lm_eval --output_path),
    or a folder holding such files (lm-eval nests them under a model-name folder).
    With an lm-eval file, rows are (task, metric): lm-eval's hellaswag / arc_* acc and
    acc_norm sit beside our acc,cloze / acc_norm,cloze, its mmlu acc beside our
    acc,baseline, each with its interval and n.

    \b
    With run folders only, each later run is also paired with the first item by
    item (samples.jsonl ids): for every per-item metric both record, B - A with its
    95% interval and test (exact McNemar for 0/1 metrics, paired bootstrap for
    scores), its p-value (six significant digits), n, and the items that flip.
    --json prints all of it as one JSON object, p-values unrounded.

    \b
      whitebox-eval compare runs/base runs/tuned
      whitebox-eval compare runs/hs-lm-eval lm_eval_out/ runs/hs-paper
      whitebox-eval compare runs/base runs/ablated --json > compare.json
    """
    from whitebox_eval.report.side_by_side import compare_lines, load_inputs

    if as_json:
        from whitebox_eval.report.compare_json import compare_json_text

        click.echo(compare_json_text(load_inputs(list(inputs))))
        return
    for line in compare_lines(load_inputs(list(inputs))):
        click.echo(line)
