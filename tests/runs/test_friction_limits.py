"""``--limit 0.1`` on a generated task says how many of the task's items it
evaluated (50 of 500), not "all 50"; a file's share and a whole number keep their counts."""

from __future__ import annotations

import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.runs.limits import offered  # noqa: E402


def test_what_a_run_offers_without_a_limit():
    assert offered(50, 500, 0.1) == 500  # a generated task made only its share
    assert offered(600, 500, 600) == 600  # a larger limit made more
    assert offered(500, 500, None) == 500 and offered(37, None, 0.5) == 37  # no limit; a file's items


def test_a_fraction_of_a_generated_task_is_reported_of_its_default_count(tmp_path):
    import click

    from tiny_models import tiny_llama_with_bpe
    from whitebox_eval.mcqa.command import _print_mcqa_summary
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa
    from whitebox_eval.tasks.prompts import render_prompt
    from whitebox_eval.tasks.ssd import make_ssd

    lm = tiny_llama_with_bpe([render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)], 400)
    folder = run_mcqa(MCQAConfig(model="tiny", limit=0.02, methods=("baseline",), item_views=False, batch_size=8),
                      tmp_path, run_id="f", loaded=lm, show_progress=False)
    res = folder.load_results()
    assert (res["n_items"], res["n_total"]) == (10, 500)
    out = CliRunner().invoke(click.command()(lambda: _print_mcqa_summary(folder)), [])
    assert "evaluated 10 of 500 items (--limit)" in out.output and "evaluated all" not in out.output
