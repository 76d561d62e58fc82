"""An edit's coverage (a record says only what took effect): counted on the prompts'
token lengths before the run folder; none covered is one line, some is recorded and printed, all
adds nothing to config.yaml."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals.edit_coverage import counted, edit_coverage  # noqa: E402
from whitebox_eval.internals.edit_specs import parse_edit  # noqa: E402
from whitebox_eval.internals.edits.attention_edits import covers  # noqa: E402
from whitebox_eval.mcqa.prompt_writer import PromptWriter  # noqa: E402
from whitebox_eval.mcqa.study import MCQAConfig, load_items, run_mcqa  # noqa: E402
from whitebox_eval.tasks.demos import plan_demonstrations  # noqa: E402
from whitebox_eval.tasks.prompts import render_prompt  # noqa: E402
from whitebox_eval.tasks.ssd import make_ssd  # noqa: E402
from tiny_models import tiny_llama_with_bpe  # noqa: E402

SIDES = ["all", "first", "last", 0, 2, 5, -1, -3, -7]


@pytest.mark.parametrize("queries", SIDES)
@pytest.mark.parametrize("keys", SIDES + ["self", "prev"])
def test_covers_is_whether_the_rule_builds_any_cell(queries, keys):
    """The kind's count agrees with the cells the engine builds, lengths 1 to 8, on either side."""
    spec = parse_edit(f"attn:0.0:{queries}>{keys}:force")
    got = [covers(spec, n) for n in range(1, 9)]
    assert got == [bool(spec.rule.cells([n]).any()) for n in range(1, 9)]


def test_cases_by_hand():
    at = lambda text, n: covers(parse_edit(f"attn:0.0:{text}:add=1"), n)  # noqa: E731
    assert not at("500>3", 400) and at("500>3", 501)  # a query past the prompt
    assert not at("3>5", 10)  # a key after its query: causal attention cannot reach it
    assert at("-1>-4", 4) and not at("-1>-4", 3)  # from the end: the key falls before the prompt
    assert not at("first>prev", 10) and not at("all>prev", 1) and at("all>prev", 2)
    assert at("2>last", 3) and not at("2>last", 4)  # the last key is after query 2 in a longer prompt


def test_none_covered_is_one_line_some_recorded_all_nothing(recwarn):
    with pytest.raises(WhiteboxError, match=r"--edit attn:14.0:500>3:force: its positions fall in none of the "
                                            r"3 prompts \(10 to 30 tokens\)"):
        edit_coverage(["attn:14.0:500>3:force"], [10, 20, 30])
    got = edit_coverage(["ablate:1.0", "attn:1.0:15>first:force", "attn:1.0:last>first:force"], [10, 20, 30])
    assert got == {"edit_coverage": {"attn:1.0:15>first:force": {"covered": 2, "items": 3}}}
    assert [str(w.message) for w in recwarn].count(
        "--edit attn:1.0:15>first:force reaches 2 of 3 prompts (their positions fall outside the others); "
        "config.yaml records it as edit_coverage") == 1
    assert edit_coverage(["attn:1.0:all>prev:add=1", "scale:0.0=2@last"], [2, 9]) == {}
    assert [s.text for s in counted(["ablate:1.0", "neurons:0:1@last", "attn:1.0:0>0:force"])] == ["attn:1.0:0>0:force"]


@pytest.fixture(scope="module")
def tiny():
    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    return tiny_llama_with_bpe(texts, 400)


def test_a_study_records_partial_coverage_and_refuses_none(tiny, tmp_path):
    base = dict(model="tiny", limit=6, min_val_items=2, batch_size=3, shots=0, methods=("baseline",), item_views=False)
    cfg = MCQAConfig(**base)
    demos, items = plan_demonstrations(cfg.spec, cfg.shots, load_items(cfg), cfg.seed, cfg.on_bad_row, cfg.demos_from)
    lengths = PromptWriter(cfg, tiny.tokenizer, demos).lengths(items[:6])
    assert len(set(lengths)) > 1, lengths  # the ssd prompts differ in length, so a position can split them
    q = sorted(lengths)[-1] - 1  # the last position of the longest prompts only
    spec = f"attn:1.0:{q}>first:force"
    folder = run_mcqa(MCQAConfig(**base, edits=(spec,)), tmp_path, run_id="some", loaded=tiny, show_progress=False)
    want = {"covered": sum(n > q for n in lengths), "items": 6}
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["edit_coverage"] == {spec: want}
    full = run_mcqa(MCQAConfig(**base, edits=("attn:1.0:last>first:force",)), tmp_path, run_id="all", loaded=tiny,
                    show_progress=False)
    assert "edit_coverage" not in yaml.safe_load((full.path / "config.yaml").read_text())
    with pytest.raises(WhiteboxError, match="fall in none of the 6 prompts"):
        run_mcqa(MCQAConfig(**base, edits=(f"attn:1.0:{max(lengths)}>first:force",)), tmp_path, run_id="none",
                 loaded=tiny, show_progress=False)
    assert not (tmp_path / "none").exists()


def test_cli_refuses_an_edit_that_covers_no_item(tmp_path, cli):
    out = tmp_path / "runs"
    code, _, err = cli(["mcqa", "--edit", "attn:14.0:500>3:force", "--limit", "2", "--output", str(out)])
    assert code == 2 and "its positions fall in none of the 2 prompts" in err, err
    assert not out.exists() or not any(out.iterdir())


def test_formats_counts_the_generation_budget(tmp_path):
    """formats generates: a position past a prompt counts when --max-new-tokens can reach it; one past
    every prompt and its budget is refused before the run folder."""
    from whitebox_eval.formats import study as fs
    from tiny_models import tiny_formats_llama

    lm = tiny_formats_llama()
    cfg = dict(model="tiny", task="arithmetic:add1,add2,mul1", limit=3, shots=0, n_samples=1, max_new_tokens=3, n_bins=2)
    data = fs.load_format_items(fs.FormatsConfig(**cfg), lm.tokenizer)
    reach = fs.reach(lm.tokenizer, data, 3)
    assert [r - 3 for r in reach] == fs.reach(lm.tokenizer, data, 0)  # a free prompt is the longest, 3 tokens more
    with pytest.raises(WhiteboxError, match="fall in none of the 3 prompts .*--max-new-tokens"):
        fs.run_formats(fs.FormatsConfig(**cfg, edits=(f"attn:0.0:{max(reach)}>first:force",)), tmp_path, run_id="none",
                       loaded=lm, show_progress=False)
    assert not (tmp_path / "none").exists()
    folder = fs.run_formats(fs.FormatsConfig(**cfg, edits=(f"attn:0.0:{max(reach) - 1}>first:force",)), tmp_path,
                            run_id="reached", loaded=lm, show_progress=False)
    got = yaml.safe_load((folder.path / "config.yaml").read_text())["edit_coverage"]
    assert got == {f"attn:0.0:{max(reach) - 1}>first:force": {"covered": reach.count(max(reach)), "items": 3}}
    assert reach.count(max(reach)) < 3  # the questions differ in length: the coverage is partial
