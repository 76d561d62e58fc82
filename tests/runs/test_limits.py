"""``--limit F`` below 1: a fraction of the items a run has without a limit, rounded up, per
task in gar and per split in span, recorded in config.yaml as given."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parents[1] / "mui"))
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.runs.limits import checked, taken  # noqa: E402


def test_numbers_and_fractions():
    assert [checked(x) for x in (None, 3, "3", 2.0, "0.25", 0.1)] == [None, 3, 3, 2, 0.25, 0.1]
    assert taken(0.1, 30) == 3 and taken(0.25, 10) == 3 and taken(0.001, 10) == 1 and taken(None, 7) == 7
    assert taken(12, 7) == 12  # a number is as given (each suite caps it as before)
    for bad in (0, -1, 1.5, "x", True, 0.0):
        with pytest.raises(WhiteboxError, match="--limit must be a whole number of items"):
            checked(bad)


def test_cli_refuses_a_bad_limit(cli, tmp_path):
    for suite in ("mcqa", "formats", "mui", "gar", "span"):
        code, _, err = cli([suite, "--limit", "1.5", "--output", str(tmp_path)])
        assert code == 2 and "'1.5' is not a whole number of items (>= 1) or a fraction" in err, (suite, err)
    assert not any(tmp_path.iterdir())


def test_mcqa_takes_a_share_of_its_items_and_records_the_limit_as_given(tmp_path):
    from tiny_models import tiny_llama_with_bpe
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa
    from whitebox_eval.tasks.prompts import render_prompt
    from whitebox_eval.tasks.ssd import make_ssd

    lm = tiny_llama_with_bpe([render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)], 400)
    cfg = MCQAConfig(model="tiny", limit=0.01, methods=("baseline",), item_views=False, batch_size=8)
    folder = run_mcqa(cfg, tmp_path, run_id="f", loaded=lm, show_progress=False)
    assert len(list(folder.read_samples())) == 5  # ceil(0.01 x the 500 generated items)
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["limit"] == 0.01
    # a file: a share of its items
    rows = tmp_path / "items.jsonl"
    import json

    rows.write_text("".join(json.dumps({"question": f"q{i}?", "choices": ["a", "b", "c"], "answer": i % 3}) + "\n"
                            for i in range(10)))
    folder = run_mcqa(MCQAConfig(model="tiny", task=f"mcq={rows}", limit=0.25, methods=("baseline",), item_views=False),
                      tmp_path, run_id="file", loaded=lm, show_progress=False)
    assert len(list(folder.read_samples())) == 3 and folder.load_results()["n_total"] == 10


def test_formats_and_mui_take_a_share():
    from mui_testing import tiny_lm
    from whitebox_eval.formats.study import FormatsConfig, load_format_items
    from whitebox_eval.mui.responses import prepare_task
    from whitebox_eval.mui.study import MUIConfig

    assert len(load_format_items(FormatsConfig(limit=0.05, n_bins=2)).items) == 8  # of the default 160
    assert len(prepare_task(MUIConfig(model="tiny", task="arithmetic-gen", limit=0.1), tiny_lm().tokenizer).items) == 20
    assert MUIConfig(limit=0.1).to_dict()["limit"] == 0.1


def test_gar_takes_a_share_of_each_task_in_whole_pairs():
    from whitebox_eval.gar.evaluate_study import GARConfig
    from whitebox_eval.gar.selection import select_tasks, task_examples

    tasks = select_tasks("truth", include_kr=False)
    full = task_examples(tasks, None, 0)
    half = task_examples(tasks, 0.3, 0)
    for t in tasks:
        mine = [e for e in half if e.task_id == t.task_id]
        every = [e for e in full if e.task_id == t.task_id]
        want = -(-3 * len(every) // 10)
        assert len(mine) == (want + want % 2 if t.g2c else want) and mine == every[:len(mine)], t.task_id
    assert GARConfig(limit=0.3).to_dict()["limit"] == 0.3


def test_span_takes_a_share_of_each_split():
    from whitebox_eval.span.config import SpanConfig
    from whitebox_eval.span.record import work

    cfg = SpanConfig(limit=0.05, split="both")
    cfg.check()
    assert cfg.n_per_split == 5 and cfg.to_dict()["limit"] == 0.05 and work(cfg, "study")[0] == 10
    with pytest.raises(WhiteboxError, match="--limit must be"):
        SpanConfig(limit=2.5).check()
