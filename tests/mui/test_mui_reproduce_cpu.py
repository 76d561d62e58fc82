"""Paper 001 at the cpu scale: HumanEval (only with --allow-code-execution, otherwise planned as
not run with the reason), BIG-Bench's tasks, and feature MUI with an SAE trained once per model."""

from __future__ import annotations

from pathlib import Path

import pytest

from whitebox_eval import suites
from whitebox_eval.reproduce import prepare
from whitebox_eval.reproduce.plan import NEEDS_CODE_EXECUTION, run_ref


@pytest.fixture()
def data_root(tmp_path: Path) -> Path:
    """Every benchmark 001 reads at the cpu scale, as files the plan can locate and read."""
    root = tmp_path / "data"
    for name, rel in (("gsm8k", "test.jsonl"), ("arc", "arc.jsonl"), ("humaneval", "HumanEval.jsonl"),
                      ("wikitext2", "valid.txt"), ("mmlu", "test/a_test.csv"), ("mmlu", "dev/a_dev.csv"),
                      ("bigbench", "object_counting.task.json"), ("bigbench", "date_understanding.task.json")):
        path = root / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n" if path.suffix in (".json", ".jsonl") else "q,a,b,c,d,A\n", encoding="utf-8")
    return root


def _tasks(plan) -> dict[str, list]:
    out: dict[str, list] = {}
    for c in plan.children:
        for _, expid in c.uses:
            out.setdefault(expid, []).append(c)
    return out


def test_humaneval_runs_only_with_the_flag_and_says_why_without_it(data_root):
    without = _tasks(prepare(["001"], ["m1"], "cpu", data_root=str(data_root)))
    with_flag = _tasks(prepare(["001"], ["m1"], "cpu", data_root=str(data_root), allow_code_execution=True))
    for expid in ("mui-humaneval", "mui-sae-humaneval"):
        (c,) = without[expid]
        assert c.skip == NEEDS_CODE_EXECUTION and "--allow-code-execution" in c.skip
        (c,) = with_flag[expid]
        assert c.skip is None and c.settings["allow_code_execution"] is True
    assert all(c.skip is None for e, cs in without.items() if "humaneval" not in e for c in cs)


def test_the_cpu_experiments_are_valid_mui_settings_and_not_at_quick(data_root):
    plan = prepare(["001"], ["m1"], "cpu", data_root=str(data_root), allow_code_execution=True)
    by_exp = _tasks(plan)
    assert {"mui-bbh", "mui-sae-gsm8k", "mui-sae-arc", "mui-sae-bbh", "mui-sae-mmlu"} <= set(by_exp)
    for expid, (c,) in by_exp.items():
        cfg = suites.suite(c.suite).config(c.mode, c.settings)  # what the child run will be given
        if expid.startswith("mui-sae-"):
            assert cfg.score == "sae" and cfg.allow_code_execution == (expid == "mui-sae-humaneval")
    (sae,) = by_exp["sae-wikitext2"]  # the SAE is a child of its own, before the tasks that read it
    cfg = suites.suite(sae.suite).config(sae.mode, sae.settings)
    assert cfg.layer == "middle" and cfg.text == (str((data_root / "wikitext2" / "valid.txt").resolve()),)
    reads = {c.settings["sae"][0] for e, (c,) in by_exp.items() if e.startswith("mui-sae-")}
    assert reads == {run_ref(sae.run_id)}  # one SAE per model for every task
    order = [c.run_id for c in plan.children]
    assert all(order.index(sae.run_id) < order.index(c.run_id) for e, (c,) in by_exp.items() if e.startswith("mui-sae-"))
    assert by_exp["mui-bbh"][0].settings["task"] == f"bigbench={(data_root / 'bigbench').resolve()}"
    quick = _tasks(prepare(["001"], ["m1"], "quick", data_root=str(data_root)))
    assert not any(e in quick for e in ("mui-humaneval", "mui-bbh")) and not any(e.startswith("mui-sae") for e in quick)


def test_the_plan_prints_humaneval_as_not_run_naming_the_flag(cli, data_root):
    code, out, err = cli(["reproduce", "001", "--scale", "cpu", "--plan-only", "--model", "smollm2-135m",
                          "--data-root", str(data_root)])
    line = next(ln for ln in out.splitlines() if "humaneval=" in ln and "mui smollm2-135m" in ln)
    assert code == 0 and "not run" in line and "--allow-code-execution" in line
    code, out, _ = cli(["reproduce", "001", "--scale", "cpu", "--plan-only", "--model", "smollm2-135m", "--data-root",
                        str(data_root), "--allow-code-execution"])
    assert code == 0 and "164 items" in out
