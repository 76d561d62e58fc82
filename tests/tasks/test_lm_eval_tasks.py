"""``--task lm-eval:TASK`` through lm-eval's own task objects, against what lm-eval 0.4.13 wrote.

``tests/fixtures/lm_eval_tasks/lm_eval_tasks.json`` was written by lm-eval itself
(``benchmarks/lm_eval_fixtures.py --part tasks``) for five multiple-choice tasks we have no
loader for (openbookqa, sciq, piqa, commonsense_qa, winogrande), on synthetic rows in each
task's hub schema (``data/<task>/<split>.jsonl``), 0-shot and 3-shot. Every request (context
and continuation) must be lm-eval's, byte for byte. lm-eval is the ``lm-eval`` extra, which
``make`` installs, so this runs in CI; the log-likelihoods and acc / acc_norm are compared
on the bundled model in ``tests/integration/test_lm_eval_tasks_smollm2.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcqa"))
from test_mcqa_study import tiny_mcqa_model  # noqa: E402,F401  (the module fixture)

from whitebox_eval.tasks.registry import record  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.tasks import lm_eval  # noqa: E402

pytest.importorskip("lm_eval", reason="the lm-eval extra is not installed (make installs it: pip install -e '.[lm-eval]')")

from whitebox_eval.tasks.lm_eval_tasks import load_items  # noqa: E402

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_tasks"
FIXTURE = json.loads((HERE / "lm_eval_tasks.json").read_text(encoding="utf-8"))
TASKS = ("openbookqa", "sciq", "piqa", "commonsense_qa", "winogrande")


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("shots", [0, 3])
def test_requests_are_lm_evals_own(task, shots):
    items, infos = load_items(task, shots=shots, data=HERE / "data" / task)
    ref = FIXTURE["runs"][f"{task}/{shots}"]["items"]
    assert len(items) == len(ref) == 16 and infos[0].n_docs == 16 and infos[0].num_fewshot == shots
    for it, r in zip(items, ref):
        assert it.meta["doc_id"] == r["doc_id"]
        assert it.meta["lm_eval_requests"] == r["requests"], (task, shots, r["doc_id"])
    assert infos[0].metrics == FIXTURE["runs"][f"{task}/{shots}"]["metrics"]


def test_commonsense_qa_letters_view_is_lm_evals_exact_prompt():
    """A task that already letters its options: the letters view is lm-eval's text, demonstrations included."""
    items, infos = load_items("commonsense_qa", shots=3, data=HERE / "data" / "commonsense_qa")
    assert infos[0].letters_native
    for it in items:
        query = lm_eval.doc(record("lm-eval"), it)
        text = lm_eval.context(query, it.meta["lm_eval_demos"])
        assert [[text, c] for c in lm_eval.continuations(query)] == it.meta["lm_eval_requests"]
        assert len(it.options) == 5 and it.options != it.meta["lm_eval_choices"]  # the listed texts, not the letters


def test_cloze_task_letters_view_lists_the_choices_under_the_question():
    items, infos = load_items("piqa", shots=3, data=HERE / "data" / "piqa")
    it = items[0]
    query = lm_eval.doc(record("lm-eval"), it)
    assert not infos[0].letters_native
    assert query.text == it.question.removesuffix("\nAnswer:") + "".join(
        f"\n{'AB'[i]}. {c}" for i, c in enumerate(it.meta["lm_eval_choices"])) + "\nAnswer:"
    assert query.choices == ["A", "B"] and query.options == tuple(it.meta["lm_eval_choices"])
    # its demonstrations are the documents lm-eval's sampler drew: their texts open lm-eval's own context
    context = it.meta["lm_eval_requests"][0][0]
    for demo in it.meta["lm_eval_demos"]:
        question = demo.text.split("\nA. ")[0]
        assert question in context
    # a permuted copy re-renders its letters view (permutation accuracy, PriDe)
    flipped = lm_eval.doc(record("lm-eval"), it.permuted([1, 0]))
    assert flipped.options == tuple(reversed(query.options)) and flipped.gold == 1 - query.gold


def test_refusals_are_one_line(tmp_path):
    with pytest.raises(WhiteboxError, match=r"lm-eval's gsm8k is a generate_until task; only multiple_choice"):
        load_items("gsm8k", shots=0, data=tmp_path)
    with pytest.raises(WhiteboxError, match=r"no task, group or tag 'openbookqaa'; did you mean openbookqa"):
        load_items("openbookqaa", shots=0)
    with pytest.raises(WhiteboxError, match=r"evaluates its 'test' or 'validation' split but the data folder has no "
                                            r"test\.jsonl or validation\.jsonl \(found: train\)"):
        (tmp_path / "obqa").mkdir()
        (tmp_path / "obqa" / "train.jsonl").write_text((HERE / "data" / "openbookqa" / "train.jsonl").read_text())
        load_items("openbookqa", shots=0, data=tmp_path / "obqa")


def test_without_lm_eval_the_error_says_what_to_install(monkeypatch):
    from whitebox_eval.tasks import lm_eval_tasks

    monkeypatch.setitem(sys.modules, "lm_eval", None)
    lm_eval_tasks._task_manager.cache_clear()
    try:
        with pytest.raises(WhiteboxError, match=r"pip install 'whitebox-eval\[lm-eval\]'"):
            lm_eval_tasks.load_items("sciq", shots=0)
    finally:
        lm_eval_tasks._task_manager.cache_clear()


def test_study_on_both_views(tiny_mcqa_model, tmp_path):  # noqa: F811
    """The cloze view scores lm-eval's requests (acc/acc_norm); the letters view runs the head scores
    on the same documents; config.yaml records the view, the tasks and the data files."""
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    data = str(HERE / "data" / "sciq")
    cfg = MCQAConfig(model="tiny", task="lm-eval:sciq", prompt="lm-eval", shots=3, batch_size=8, view="letters",
                     lm_eval_data=data, min_val_items=4, methods=("baseline", "qk", "pa", "pride", "cloze"),
                     uncertainty=False)
    folder = run_mcqa(cfg, tmp_path, run_id="letters", loaded=tiny_mcqa_model, show_progress=False)
    res = folder.load_results()
    config = yaml.safe_load((folder.path / "config.yaml").read_text())
    assert config["lm_eval_view"]["view"] == "letters" and config["lm_eval_tasks"][0]["name"] == "sciq"
    assert config["demonstrations"]["source"] == "lm-eval sampler"
    assert any(str(p).endswith("sciq/test.jsonl") for p in config["data_files"]) or config["data_files"]
    headline = res["headline"]
    assert {"acc,baseline", "acc,cloze", "acc_norm,cloze"} <= set(headline)
    assert res["n_items"] == 16
    with pytest.raises(WhiteboxError, match="lists no options"):
        run_mcqa(MCQAConfig(model="tiny", task="lm-eval:sciq", prompt="lm-eval", view="cloze", methods=("qk",),
                            lm_eval_data=data), tmp_path, run_id="bad", loaded=tiny_mcqa_model, show_progress=False)
    with pytest.raises(WhiteboxError, match="partial evaluation"):
        run_mcqa(MCQAConfig(model="tiny", task="lm-eval:winogrande", prompt="lm-eval", view="letters",
                            lm_eval_data=str(HERE / "data" / "winogrande")), tmp_path, run_id="bad2",
                 loaded=tiny_mcqa_model, show_progress=False)


def test_winogrande_samples_log_every_request_and_batches_do_not_matter(tiny_mcqa_model, tmp_path):  # noqa: F811
    """One context per choice: every request of a document is in its samples.jsonl line (lm-eval's
    ``arguments``), and the log-likelihoods do not depend on the batch size or the batches' order."""
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

    ref = FIXTURE["runs"]["winogrande/3"]["items"]
    runs = {}
    for b in (1, 3, 16):
        cfg = MCQAConfig(model="tiny", task="lm-eval:winogrande", prompt="lm-eval", shots=3, batch_size=b,
                         lm_eval_data=str(HERE / "data" / "winogrande"), methods=("cloze",), uncertainty=False)
        folder = run_mcqa(cfg, tmp_path, run_id=f"b{b}", loaded=tiny_mcqa_model, show_progress=False)
        runs[b] = list(folder.read_samples())
    for b, samples in runs.items():
        assert [s["id"] for s in samples] == [f"winogrande/{r['doc_id']}" for r in ref]  # item order
        for s, r in zip(samples, ref):
            assert [[a["arg_0"], a["arg_1"]] for a in s["arguments"].values()] == r["requests"]
            assert r["requests"][0][0] != r["requests"][1][0]  # two contexts, both logged
        np.testing.assert_allclose([s["cloze_loglik"] for s in samples], [s["cloze_loglik"] for s in runs[16]],
                                   rtol=1e-5, atol=1e-5)
        # stable: the smallest gap between an item's two log-likelihoods (2.6e-3) is over twice the tolerance above
        assert [s["pred_cloze"] for s in samples] == [s["pred_cloze"] for s in runs[16]]
