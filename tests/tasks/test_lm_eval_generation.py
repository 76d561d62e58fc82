"""lm-eval's generate_until tasks through its own objects (tasks/lm_eval_generation.py), checked
against what lm-eval 0.4.13 itself made of the same rows (benchmarks/lm_eval_generation_fixture.py):
the same prompts, stop strings and budgets on every document, and, on lm-eval's own generated
texts, the same filtered answers and metrics. No model runs here."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

pytest.importorskip("lm_eval", reason="lm-eval is the optional extra [lm-eval]")

from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.tasks import lm_eval_generation as leg  # noqa: E402
from whitebox_eval.tasks.generation import load_generation  # noqa: E402
from whitebox_eval.tasks.spec import TaskSpec  # noqa: E402

FIXTURE = Path(__file__).parents[1] / "fixtures" / "lm_eval_generation"
FROZEN = json.loads((FIXTURE / "lm_eval_generation.json").read_text(encoding="utf-8"))
TASKS = sorted(FROZEN["tasks"])


@pytest.fixture(scope="module")
def ours():
    return {t: load_generation(TaskSpec.parse(f"lm-eval:{t}"), lm_eval_data=str(FIXTURE / "data")) for t in TASKS}


def test_the_fixture_covers_the_three_shapes():
    assert set(TASKS) == {"gsm8k", "bbh_fewshot_boolean_expressions", "hendrycks_math_algebra"}
    gsm = FROZEN["tasks"]["gsm8k"]
    assert gsm["n_shot"] == 5 and set(gsm["docs"][0]["filters"]) == {"strict-match", "flexible-extract"}


@pytest.mark.parametrize("task", TASKS)
def test_same_prompts_stops_and_budgets_on_every_document(ours, task):
    docs = FROZEN["tasks"][task]["docs"]
    items = ours[task].items
    assert [it.meta["doc_id"] for it in items] == [d["doc_id"] for d in docs]
    for it, d in zip(items, docs):
        assert it.prompt == d["prompt"], it.id
        assert list(it.stops) == d["gen_kwargs"]["until"]
        assert it.max_new_tokens == d["gen_kwargs"].get("max_gen_toks", leg.DEFAULT_MAX_GEN_TOKS)
        assert it.gold_response.strip() == str(d["target"]).strip()


@pytest.mark.parametrize("task", TASKS)
def test_lm_evals_own_texts_get_its_filtered_answers_and_metrics(ours, task):
    """Fed the texts lm-eval generated, our scoring gives lm-eval's filtered answer and every metric
    under every filter (gsm8k's strict-match and flexible-extract; math's own process_results)."""
    gen = ours[task]
    for it, d in zip(gen.items, FROZEN["tasks"][task]["docs"]):
        got = gen.score(it, d["resp"])
        assert set(got["filters"]) == set(d["filters"]), it.id
        for name, want in d["filters"].items():
            assert got["filters"][name]["filtered"] == want["filtered"], (it.id, name)
            for metric, value in want.items():
                if metric != "filtered":
                    assert float(got["filters"][name][metric]) == float(value), (it.id, name, metric)
        first = next(iter(d["filters"].values()))
        metric = next(m for m in first if m != "filtered")
        assert got["correct"] == (float(first[metric]) == 1.0)


def test_a_different_text_changes_the_metric(ours):
    gen = ours["gsm8k"]
    it = gen.items[0]
    gold = it.gold.rsplit("####", 1)[1].strip()
    assert gen.score(it, f" so it is {gold}.\n#### {gold}")["correct"]
    wrong = gen.score(it, f" so it is {gold}1.\n#### {gold}1")
    assert not wrong["correct"] and wrong["filters"]["strict-match"]["filtered"] == f"{gold}1"


def test_the_text_lm_eval_keeps():
    assert leg.lm_eval_text(" 5 apples.\n\nQuestion: next", ["Question:", "</s>"]) == " 5 apples.\n\n"
    assert leg.lm_eval_text("A\n\nQ: b", ["Q", "\n\n"]) == "A"  # every stop in turn: the first one found wins
    assert leg.lm_eval_text("no stop", ["", "x"]) == "no stop"  # an empty stop (seq2seq EOS) is ignored


def test_tasks_that_run_the_models_code_need_permission(monkeypatch):
    monkeypatch.delenv("HF_ALLOW_CODE_EVAL", raising=False)
    with pytest.raises(WhiteboxError, match="humaneval scores by executing the model's code; run it only with "
                                            "--allow-code-execution"):
        leg.check_code_execution("humaneval", allow=False)
    assert leg.check_code_execution("humaneval", allow=True) and os.environ["HF_ALLOW_CODE_EVAL"] == "1"
    assert not leg.check_code_execution("gsm8k", allow=False)


def test_code_runs_in_a_subprocess_with_a_timeout():
    assert leg._isolated(lambda: {"pass@1": 1.0}, timeout_s=30) == {"pass@1": 1.0}
    t0 = time.perf_counter()
    with pytest.raises(WhiteboxError, match="no result within 0.5 s"):
        leg._isolated(lambda: time.sleep(600), timeout_s=0.5)
    assert time.perf_counter() - t0 < 300  # killed, not waited for (a fork and a kill take far less, even under load)
    with pytest.raises(WhiteboxError, match="ZeroDivisionError"):
        leg._isolated(lambda: 1 / 0, timeout_s=30)
    pid = os.getpid()
    assert leg._isolated(os.getpid, timeout_s=30) != pid  # another process


def test_a_multiple_choice_task_is_asked_with_letters():
    data = Path(__file__).parents[1] / "fixtures" / "lm_eval_tasks" / "data" / "sciq"
    gen = load_generation(TaskSpec.parse("lm-eval:sciq"), lm_eval_data=str(data), limit=3)
    it = gen.items[0]
    assert it.check == "choice" and it.labels == ["A", "B", "C", "D"] and "\nA. " in it.question
    assert gen.score(it, it.gold)["correct"] and gen.notes["lm_eval_view"].startswith("letters")
