"""``whitebox-eval compare`` with lm-eval results files beside run folders.

The real file is ``tests/fixtures/lm_eval_results/results_2026-11-23T00-00-00.000000.json``,
written by lm-eval 0.4.13's EvaluationTracker (benchmarks/lm_eval_parity.py): HellaSwag and
ARC-Challenge, 30 items each, SmolLM2-135M. MMLU files are built here in the same layout.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.report.command import compare
from whitebox_eval.report.side_by_side import compare_lines, load_inputs
from whitebox_eval.report.lm_eval_results import Z, load_lm_eval_file, lm_eval_rows, pooled
from whitebox_eval.runs import RunFolder

FIXTURES = Path(__file__).parents[1] / "fixtures"
REAL = FIXTURES / "lm_eval_results" / "results_2026-11-23T00-00-00.000000.json"


def _run(root: Path, run_id: str, task: str, correct: dict[str, list[int]], **config) -> RunFolder:
    folder = RunFolder.create(root, {"suite": "mcqa", "model": "smollm2-135m", "task": task, **config}, run_id=run_id)
    head: dict = {}
    for key, x in correct.items():
        stats.add_proportion(head, key, x)
    folder.save_results({"headline": head})
    return folder


def _lm_eval_output(tmp_path: Path, data: dict | None = None) -> Path:
    """lm-eval's --output_path layout: OUT/<model_name_sanitized>/results_<date>.json."""
    out = tmp_path / "lm_eval_out"
    (out / "__smollm2-135m").mkdir(parents=True)
    target = out / "__smollm2-135m" / REAL.name
    if data is None:
        shutil.copy(REAL, target)
    else:
        target.write_text(json.dumps(data))
    return out


def _table(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    start = next(i for i, x in enumerate(lines) if x.startswith("task "))
    rows = {}
    for line in lines[start + 2:]:
        if not line.strip():
            break
        cells = line.split()
        rows[(cells[0], cells[1])] = line
    return rows


def test_real_lm_eval_file_maps_to_our_cloze_metrics():
    f = load_lm_eval_file(REAL)
    assert f.version == "0.4.13" and f.model == "<smollm2-135m HF folder>"
    rows, notes = lm_eval_rows(f)
    raw = json.loads(REAL.read_text())["results"]
    for task in ("hellaswag", "arc_challenge"):
        for theirs, ours in (("acc", "acc,cloze"), ("acc_norm", "acc_norm,cloze")):
            value, ci = rows[(task, ours)]
            se = raw[task][f"{theirs}_stderr,none"]
            assert value == raw[task][f"{theirs},none"]
            assert ci["lo"] == pytest.approx(value - 1.96 * se, abs=2e-5) and ci["hi"] == pytest.approx(value + 1.96 * se, abs=2e-5)
            assert ci["n"] == 30 and ci["method"] == "normal-approx"
    assert len(rows) == 4 and notes == []
    # lm-eval's stderr is the sample sd / sqrt(n) of the 0/1 items: 8 of 30 right on HellaSwag acc
    k = round(raw["hellaswag"]["acc,none"] * 30)
    assert raw["hellaswag"]["acc_stderr,none"] == pytest.approx(stats.sample_stderr([1] * k + [0] * (30 - k)), rel=1e-12)


def test_compare_shows_ours_beside_lm_eval(tmp_path):
    ours = _run(tmp_path / "runs", "hs", "hellaswag=/data/hellaswag/validation.jsonl",
                {"acc,baseline": [1] * 9 + [0] * 21, "acc,cloze": [1] * 8 + [0] * 22, "acc_norm,cloze": [1] * 12 + [0] * 18},
                prompt="lm-eval")
    out = _lm_eval_output(tmp_path)
    result = CliRunner().invoke(compare, [str(ours.path), str(out)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("A: hs  (mcqa / smollm2-135m / hellaswag=")
    assert lines[1].startswith("B: ") and "(lm-eval 0.4.13 / <smollm2-135m HF folder> / arc_challenge, hellaswag)" in lines[1]
    header = next(x for x in lines if x.startswith("task "))
    assert header.split() == ["task", "metric", "A", "B", "B", "-", "A"]
    rows = _table(lines)
    assert set(rows) == {("hellaswag", "acc,baseline"), ("hellaswag", "acc,cloze"), ("hellaswag", "acc_norm,cloze")}
    lo, hi = stats.wilson(8, 30)
    cloze = rows[("hellaswag", "acc,cloze")]
    assert f"0.2667 [{lo:.4g}, {hi:.4g}] n=30 wilson" in cloze
    se = json.loads(REAL.read_text())["results"]["hellaswag"]["acc_stderr,none"]
    assert f"0.2667 [{0.26666666666666666 - Z * se:.4g}, {0.26666666666666666 + Z * se:.4g}] n=30 normal-approx" in cloze
    assert cloze.rstrip().endswith("+0")  # same 8 of 30
    assert rows[("hellaswag", "acc_norm,cloze")].rstrip().endswith("+0")
    assert rows[("hellaswag", "acc,baseline")].split()[-1] == "\u2014"  # lm-eval has no letter score on HellaSwag
    assert any("our acc,cloze / acc_norm,cloze" in x for x in lines) and any("normal-approx" in x for x in lines)
    assert not any("--prompt" in x for x in lines)  # the run used lm-eval's prompts


def test_paper_prompt_run_is_flagged_and_arc_is_matched_by_its_path(tmp_path):
    arc = _run(tmp_path / "runs", "arc", "arc=/data/ARC-Challenge/test.jsonl", {"acc,cloze": [1] * 6 + [0] * 24},
               prompt="paper")
    lines = compare_lines(load_inputs([arc.path, REAL]))
    rows = _table(lines)
    # every metric of the matched task that any input has is a row: B's acc_norm,cloze has no A value
    assert set(rows) == {("arc_challenge", "acc,cloze"), ("arc_challenge", "acc_norm,cloze")}
    assert rows[("arc_challenge", "acc_norm,cloze")].split()[2] == "\u2014"
    assert any("A used --prompt paper" in x for x in lines)


def test_arc_without_a_hint_takes_the_only_arc_task_present(tmp_path):
    run = _run(tmp_path / "runs", "arc", "arc=/data/arc.jsonl", {"acc,cloze": [1, 0, 0]})
    lines = compare_lines(load_inputs([run.path, REAL]))
    assert ("arc_challenge", "acc,cloze") in _table(lines)
    both = json.loads(REAL.read_text())
    both["results"]["arc_easy"] = dict(both["results"]["arc_challenge"], name="arc_easy", alias="arc_easy")
    both["n-samples"]["arc_easy"] = both["n-samples"]["arc_challenge"]
    lines = compare_lines(load_inputs([run.path, _lm_eval_output(tmp_path, both)]))
    assert any("none of its tasks (arc_challenge, arc_easy, hellaswag) is a task of the runs (arc)" in x for x in lines)


def _mmlu_file(subjects: dict[str, list[int]], group: bool) -> dict:
    base = json.loads(REAL.read_text())
    data = {k: copy.deepcopy(base[k]) for k in ("config", "lm_eval_version", "date")}
    data.update(results={}, versions={}, **{"n-samples": {}, "n-shot": {}, "group_subtasks": {}, "configs": {}})
    for s, x in subjects.items():
        t = f"mmlu_{s}"
        data["results"][t] = {"name": t, "alias": f"  - {s}", "sample_len": len(x), "acc,none": float(np.mean(x)),
                              "acc_stderr,none": stats.sample_stderr(x)}
        data["n-samples"][t] = {"original": len(x), "effective": len(x)}
        data["versions"][t] = 1.0
    if group:
        allx = [v for x in subjects.values() for v in x]
        data["results"] = {"mmlu": {"name": "mmlu", "alias": "mmlu", "sample_len": len(allx), "acc,none": 0.123,
                                    "acc_stderr,none": 0.01},
                           "mmlu_humanities": {"name": "mmlu_humanities", "alias": " - humanities", "acc,none": 0.5,
                                               "acc_stderr,none": 0.1, "sample_len": 3},
                           **data["results"]}
        data["group_subtasks"] = {"mmlu_humanities": [f"mmlu_{s}" for s in subjects], "mmlu": ["mmlu_humanities"]}
    return data


def test_mmlu_subjects_are_pooled_as_lm_eval_groups_them(tmp_path):
    subjects = {"marketing": [1] * 6 + [0] * 4, "virology": [1] * 5 + [0] * 15, "anatomy": [1] * 20 + [0] * 10}
    rows, notes = lm_eval_rows(load_lm_eval_file(_write(tmp_path, _mmlu_file(subjects, group=False))))
    value, ci = rows[("mmlu", "acc,baseline")]
    allx = np.array([v for x in subjects.values() for v in x], dtype=float)
    assert value == pytest.approx(allx.mean(), abs=1e-12) and ci["n"] == 60  # n-weighted mean = mean of all items
    # pooled within-subject variance from the items themselves: sum of squared deviations from each
    # subject's mean / (N - k), then / N (lm_eval.api.metrics.pooled_sample_stderr)
    ss = sum(((np.array(x) - np.mean(x)) ** 2).sum() for x in subjects.values())
    se = math.sqrt(ss / (60 - 3) / 60)
    assert ci["stderr"] == pytest.approx(se, rel=1e-12)
    assert pooled([0.6], [stats.sample_stderr(subjects["marketing"])], [10])[1] == pytest.approx(
        stats.sample_stderr(subjects["marketing"]), rel=1e-12)  # one subject: its own stderr
    assert len(rows) == 1 and "n-weighted mean of its 3 subject tasks" in notes[0]


def test_mmlu_group_entry_is_used_as_lm_eval_reports_it(tmp_path):
    subjects = {"marketing": [1, 0, 1], "virology": [0, 0, 1, 1]}
    rows, notes = lm_eval_rows(load_lm_eval_file(_write(tmp_path, _mmlu_file(subjects, group=True))))
    assert list(rows) == [("mmlu", "acc,baseline")] and notes == []  # no category or subject rows
    value, ci = rows[("mmlu", "acc,baseline")]
    assert value == 0.123 and ci["stderr"] == 0.01 and ci["n"] == 7


def test_mmlu_run_beside_lm_eval(tmp_path):
    run = _run(tmp_path / "runs", "m", "mmlu=/data/mmlu/test", {"acc,baseline": [1] * 4 + [0] * 3, "acc,qk_head": [1] * 5 + [0] * 2})
    lm = _write(tmp_path, _mmlu_file({"marketing": [1, 0, 1], "virology": [0, 0, 1, 1]}, group=False))
    rows = _table(compare_lines(load_inputs([lm, run.path])))
    assert set(rows) == {("mmlu", "acc,baseline"), ("mmlu", "acc,qk_head")}
    assert rows[("mmlu", "acc,baseline")].rstrip().endswith("+0")  # 4 of 7 both
    assert rows[("mmlu", "acc,qk_head")].split()[2] == "\u2014"


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "results_2026-01-01T00-00-00.json"
    path.write_text(json.dumps(data))
    return path


def test_only_lm_eval_files_show_all_their_tasks(tmp_path):
    lines = compare_lines(load_inputs([REAL, _lm_eval_output(tmp_path)]))
    rows = _table(lines)
    assert len(rows) == 4 and all(line.rstrip().endswith("+0") for line in rows.values())


def test_bad_inputs_are_one_line_errors(tmp_path, mcqa_run):
    ours = tmp_path / "results.json"
    ours.write_text(json.dumps({"headline": {"acc,baseline": 0.5}, "results": {}}))
    with pytest.raises(WhiteboxError, match="is not an lm-eval results file"):
        load_inputs([ours, REAL])
    broken = tmp_path / "results_x.json"
    broken.write_text("{")
    with pytest.raises(WhiteboxError, match="cannot read .* as an lm-eval results file"):
        load_inputs([broken, REAL])
    with pytest.raises(WhiteboxError, match="at least two inputs"):
        load_inputs([REAL])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(WhiteboxError, match="not a run folder"):
        load_inputs([empty, REAL])
    result = CliRunner().invoke(compare, [str(ours), str(REAL)])
    assert result.exit_code != 0 and isinstance(result.exception, WhiteboxError)


def test_three_runs_get_deltas_against_the_first(mcqa_run):
    a = mcqa_run(run_id="a", headline={"acc,baseline": 0.5})
    b = mcqa_run(run_id="b", headline={"acc,baseline": 0.75})
    c = mcqa_run(run_id="c", headline={"acc,baseline": 0.25})
    result = CliRunner().invoke(compare, [str(a.path), str(b.path), str(c.path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[2].startswith("C: c")
    header = next(x for x in lines if x.startswith("metric"))
    assert header.split() == ["metric", "A", "B", "C", "B", "-", "A", "C", "-", "A"]
    row = next(x for x in lines if x.startswith("acc,baseline"))
    assert row.split() == ["acc,baseline", "0.5", "0.75", "0.25", "+0.25", "-0.25"]


def test_rows_on_different_numbers_of_items_are_flagged(tmp_path):
    run = _run(tmp_path / "runs", "hs", "hellaswag=/d/hs.jsonl", {"acc,cloze": [1] * 5 + [0] * 15})
    lines = compare_lines(load_inputs([run.path, REAL]))
    assert any(x == "note: hellaswag acc,cloze: A n=20, B n=30: not the same items, so the delta mixes model and "
               "item differences" for x in lines)
    assert not any("acc_norm,cloze: A" in x for x in lines)  # A has no acc_norm: nothing to flag


def test_mmlu_is_matched_on_the_subjects_the_run_evaluated(tmp_path):
    subjects = {"marketing": [1, 0, 1], "virology": [0, 0, 1, 1], "anatomy": [1] * 9 + [0]}
    lm = _write(tmp_path, _mmlu_file(subjects, group=True))
    run = _run(tmp_path / "runs", "m", "mmlu=/data/mmlu/test", {"acc,baseline": [1] * 4 + [0] * 3})
    run.append_samples([{"id": f"mmlu/{s}/{s}_test.csv:{i}", "doc": {"subject": s}}
                        for s in ("marketing", "virology") for i in range(1, len(subjects[s]) + 1)])
    lines = compare_lines(load_inputs([run.path, lm]))
    row = _table(lines)[("mmlu", "acc,baseline")]
    # not the group's 0.123: marketing + virology pooled, 4 of 7, the run's own subjects
    assert "0.5714" in row.split("wilson")[1] and "n=7 normal-approx" in row and row.rstrip().endswith("+0")
    assert any("mmlu = its 2 subject tasks the runs evaluated" in x for x in lines)
    # a subject the file lacks: its own mmlu row, said so
    other = _run(tmp_path / "runs", "o", "mmlu=/data/mmlu/test", {"acc,baseline": [1, 0]})
    other.append_samples([{"id": "mmlu/astronomy/astronomy_test.csv:1"}, {"id": "mmlu/marketing/marketing_test.csv:1"}])
    lines = compare_lines(load_inputs([other.path, lm]))
    assert "0.123" in _table(lines)[("mmlu", "acc,baseline")]
    assert any("lacks 1 subject(s) the runs evaluated (astronomy): its mmlu row covers other items" in x for x in lines)


def test_real_mmlu_subject_results_pool_to_the_mean_over_their_items(tmp_path):
    """lm-eval 0.4.13's own mmlu_<subject> blocks (the parity fixture, 10 items of each of 3
    subjects): pooled, they give the mean of the 30 per-item acc values lm-eval logged."""
    parity = FIXTURES / "lm_eval_parity.json"
    if not parity.is_file():
        pytest.skip("tests/fixtures/lm_eval_parity.json (benchmarks/lm_eval_parity.py) is not in this checkout")
    block = json.loads(parity.read_text(encoding="utf-8"))["tasks"]["mmlu"]
    data = {**block["raw"], "lm_eval_version": "0.4.13"}
    rows, notes = lm_eval_rows(load_lm_eval_file(_write(tmp_path, data)))
    value, ci = rows[("mmlu", "acc,baseline")]
    acc = [it["acc"] for it in block["items"]]
    assert value == pytest.approx(np.mean(acc), abs=1e-12) == pytest.approx(block["mean_over_items"]["acc"], abs=1e-12)
    by_subject: dict[str, list[float]] = {}
    for it in block["items"]:
        by_subject.setdefault(it["key"]["subject"], []).append(it["acc"])
    ss = sum(((np.array(x) - np.mean(x)) ** 2).sum() for x in by_subject.values())
    assert ci["n"] == 30 and ci["stderr"] == pytest.approx(math.sqrt(ss / (30 - 3) / 30), rel=1e-12)


def test_cli_user_errors_are_one_line_and_exit_2(tmp_path, capsys):
    from whitebox_eval.cli import main

    ours = tmp_path / "results.json"
    ours.write_text(json.dumps({"headline": {"acc,baseline": 0.5}, "results": {}}))
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(ours), str(REAL)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "is not an lm-eval results file" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
