"""Scoring, role positions, the evaluation run folder with resume, and the truth-heads study,
on a tiny random llama that uses SmolLM2's real tokenizer (fast, no model weights)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.generator import generate_task_examples
from whitebox_eval.gar.roles import encode_example, parse_pattern
from whitebox_eval.gar.scoring import alternative_probs, score_examples, score_from_probs
from whitebox_eval.internals import Engine
from whitebox_eval.gar.evaluate_study import GARConfig, run_gar
from whitebox_eval.gar.selection import select_tasks, split_task_list
from whitebox_eval.gar.truth_heads import GARHeadsConfig, run_gar_heads

TASKS = ("GendersOfPersons/same,CountriesOfCities/same×3,"
         "GendersOfPersons/isA,KindsOfThings/kindOf×3 [negate],"
         "GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c],KindsOfThings/kindOf×0")


def test_score_from_probs_worked_example(tokenizer):
    ex = generate_task_examples("GendersOfPersons/isA,KindsOfThings/kindOf×3", seed=1)[0]
    enc = encode_example(ex, tokenizer)
    a, b, c = ex.alternatives
    t = ex.target
    others = [x for x in ex.alternatives if x != t]
    # target 0.40 > 1/3 and the highest: correct under both rules
    s = score_from_probs(enc, {t: 0.40, others[0]: 0.35, others[1]: 0.05})
    assert s.correct and s.correct_argmax and s.prediction == t
    # target 0.30 < 1/3 but highest: wrong under App. C, right under argmax; "mean" rule: 0.30 > 0.15
    s = score_from_probs(enc, {t: 0.30, others[0]: 0.10, others[1]: 0.05})
    assert not s.correct and s.correct_argmax
    assert score_from_probs(enc, {t: 0.30, others[0]: 0.10, others[1]: 0.05}, rule="mean").correct
    # target 0.34 > 1/3 but another alternative higher: App. C correct, argmax wrong
    s = score_from_probs(enc, {t: 0.34, others[0]: 0.60, others[1]: 0.01})
    assert s.correct and not s.correct_argmax and s.prediction == others[0]


def test_alternative_probs_reads_the_first_token(tokenizer):
    ex = generate_task_examples("GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]", seed=0)[0]
    enc = encode_example(ex, tokenizer)
    logits = torch.zeros(1, len(tokenizer))
    logits[0, enc.answer_ids["Yes"]] = 2.0
    p = alternative_probs(logits, [enc])[0]
    z = np.exp(2.0) + len(tokenizer) - 1
    assert p["Yes"] == pytest.approx(np.exp(2.0) / z, rel=1e-4)  # float32 softmax
    assert p["No"] == pytest.approx(1 / z, rel=1e-4)


def test_roles_point_at_the_right_tokens(tokenizer):
    ex = generate_task_examples("GendersOfPersons/same,CountriesOfCities/inCountryOf×3 [g2c]", seed=0)[0]
    enc = encode_example(ex, tokenizer)
    text = lambda toks: tokenizer.decode([enc.input_ids[i] for i in toks]).strip()  # noqa: E731
    assert text(enc.role_tokens("Q")) == ex.query
    assert text(enc.role_tokens("K")) == ex.key
    assert text(enc.role_tokens("V")) == ex.value
    assert text(enc.role_tokens("A")) == ex.stated_answer
    assert enc.attending_position("E") == enc.n_tokens - 1
    assert tokenizer.decode([enc.input_ids[enc.attending_position("E")]]).strip() == ":"
    q, keys = enc.pattern_cells(parse_pattern("Q->A"))
    assert q == max(enc.role_tokens("A")) and keys == enc.role_tokens("Q")
    assert enc.pattern_cells("A->Q") is None  # A comes after Q: no causal cell
    demo_a = enc.role_tokens("A^")
    assert max(demo_a) < min(enc.role_tokens("K'"))
    assert enc.role_tokens("V+") == [max(enc.role_tokens("V")) + 1]
    for bad in ("V=>E", "X->E", "V->"):
        with pytest.raises(WhiteboxError):
            parse_pattern(bad)


def test_task_list_parsing():
    ids = split_task_list("GendersOfPersons/same,KindsOfThings/kindOf×3 [negate,g2c](swapQA,swapKV),"
                          "KindsOfThings/kindOf x0;truth")
    assert ids == ["GendersOfPersons/same,KindsOfThings/kindOf×3 [negate,g2c](swapQA,swapKV)",
                   "KindsOfThings/kindOf x0", "truth"]
    assert len(select_tasks("all")) == 384 + 7 and len(select_tasks("all", include_kr=False)) == 384
    assert len(select_tasks("truth")) == 3
    with pytest.raises(WhiteboxError):
        split_task_list("GendersOfPersons/same,KindsOfThings/kindOf")


def test_scores_do_not_depend_on_batch_size(tiny_real_vocab):
    from whitebox_eval.internals import Engine
    engine = Engine(tiny_real_vocab)
    exs = [e for t in select_tasks(TASKS) for e in generate_task_examples(t, seed=0)[:2]]
    enc = [encode_example(e, tiny_real_vocab.tokenizer) for e in exs]
    one = score_examples(engine, enc, batch_size=1)
    many = score_examples(engine, enc, batch_size=5)
    for a, b in zip(one, many):
        for k in a.probs:
            assert a.probs[k] == pytest.approx(b.probs[k], rel=1e-4, abs=1e-7)


def test_evaluation_run_resumes_to_the_same_results(tmp_path, tiny_real_vocab):
    cfg = GARConfig(model="tiny", tasks=TASKS, limit=4, batch_size=3)
    full = run_gar(cfg, tmp_path, run_id="full", loaded=tiny_real_vocab)
    res = full.load_results()
    assert res["n_examples"] == 16
    assert set(res["appc"]["by_difficulty"]["generation"]) == {"n_r=0", "n_r=2,negate"}
    assert res["appc"]["compositionality_gap"] is not None or res["appc"]["by_difficulty"]["generation"]["n_r=2,negate"] is not None
    lines = (full.path / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 16 and len({json.loads(l)["id"] for l in lines}) == 16
    assert (full.path / "plots" / "accuracy_by_difficulty.png").is_file()
    assert (full.path / "plots" / "gar_summary.png").is_file()
    # interrupted run: the parts of the first 9 examples (batches 0, 3, 6), 7 sample lines and half a line
    part = tmp_path / "part"
    shutil.copytree(full.path, part)
    (part / "results.json").unlink()
    shutil.rmtree(part / "plots")
    for first in (9, 12, 15):
        (part / "arrays" / "parts" / "evaluate" / f"{first:08d}.npz").unlink()
    (part / "samples.jsonl").write_text("\n".join(lines[:7]) + "\n" + lines[7][:25])
    calls = []
    import whitebox_eval.gar.evaluate_study as study
    orig = study.score_batch

    def counting(engine, chunk, **kw):
        calls.append(len(chunk))
        return orig(engine, chunk, **kw)

    study.score_batch = counting
    try:
        resumed = run_gar(GARConfig(model="tiny", tasks=TASKS, limit=4, batch_size=5), tmp_path, run_id="part",
                          resume=True, loaded=tiny_real_vocab)
    finally:
        study.score_batch = orig
    assert sum(calls) == 16 - 9  # only the examples without a part were scored
    resumed_lines = (resumed.path / "samples.jsonl").read_text().splitlines()
    assert resumed_lines[:9] == lines[:9]  # lines 8-9 come back from their part, as written
    assert [json.loads(l)["id"] for l in resumed_lines] == [json.loads(l)["id"] for l in lines]
    again = resumed.load_results()
    for key in ("appc", "argmax", "mean_target_prob"):
        assert json.dumps(again[key], sort_keys=True) == json.dumps(res[key], sort_keys=True)
    with pytest.raises(WhiteboxError):  # a different config cannot resume the run
        run_gar(GARConfig(model="tiny", tasks=TASKS, limit=2), tmp_path, run_id="part", resume=True,
                loaded=tiny_real_vocab)


def test_truth_heads_study_runs_end_to_end(tmp_path, tiny_real_vocab, shared_datasets):
    got = shared_datasets / "geometry_of_truth" / "sp_en_trans.csv"
    cfg = GARHeadsConfig(model="tiny", tasks="GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]", limit=6,
                         steps=2, n_candidates=6, probe_data=(str(got),), probe_limit=40, batch_size=4)
    folder = run_gar_heads(cfg, tmp_path, run_id="heads", loaded=tiny_real_vocab)
    res = folder.load_results()
    assert res["n_examples"] == 6 and len(res["split"]["selection"]) + len(res["split"]["report"]) == 6
    assert len(res["true_heads"]) + len(res["false_heads"]) >= 1
    assert set(res["interventions"]) == {"true_false", "inverse_true_false", "strong_Q->A", "weak_Q->A",
                                         "knockout_Q->A"}
    probe = res["probes"]["sp_en_trans.csv"]
    assert probe["n"] == 40 and probe["acc_ci"][0] <= probe["acc"] <= probe["acc_ci"][1]
    assert "acc,majority" in probe and "probe_vs_majority" in probe["paired_tests"]
    assert probe["protocol"] == "5-fold cross-validation" and probe["protocol_note"] is None  # a GoT file
    rnd = probe["random_heads"]
    chosen = {tuple(h) for h in res["true_heads"] + res["false_heads"]}
    if rnd is not None:  # the tiny model's layer band may hold too few other heads
        assert rnd["n"] == 5 and len(rnd["draws"]) == 5
        assert all(len(hs) == len(chosen) and not chosen & {tuple(h) for h in hs} for hs in rnd["heads"])
    assert folder.load_array("attribution_head_out").shape == (2, 4)
    # every held-out statement's prediction is a sample: its counts give the child's McNemar
    rows = [s for s in folder.read_samples() if s.get("probe_file") == "sp_en_trans.csv"]
    assert sorted(r["statement"] for r in rows) == list(range(40))
    pc = np.array([r["probe_correct"] for r in rows], bool)
    mc = np.array([r["majority_correct"] for r in rows], bool)
    t = probe["paired_tests"]["probe_vs_majority"]
    assert (t["b"], t["c"], t["n"]) == (int((pc & ~mc).sum()), int((~pc & mc).sum()), 40)
    assert probe["acc"] == pc.mean() and all(r["n_options"] == 2 and r["gold"] in (0, 1) for r in rows)
    # a resumed finished run recomputes nothing and gives the same results
    again = run_gar_heads(cfg, tmp_path, run_id="heads", resume=True, loaded=tiny_real_vocab)
    assert again.load_results()["interventions"] == res["interventions"]
    assert again.load_results()["true_heads"] == res["true_heads"]
    assert len([s for s in again.read_samples() if s.get("probe_file")]) == 40  # written once


def test_shared_heads_worked_example():
    from whitebox_eval.gar.attribute_study import shared_heads

    got = shared_heads({"t1": [(1, 2), (3, 0)], "t2": [(3, 0), (1, 2), (0, 0)], "t3": [(3, 0)]})
    assert got == [{"head": [3, 0], "n_tasks": 3, "tasks": ["t1", "t2", "t3"]},
                   {"head": [1, 2], "n_tasks": 2, "tasks": ["t1", "t2"]}]  # (0, 0) is in one list only


def test_attribute_mode_ranks_heads_per_task_and_resumes(tmp_path, tiny_real_vocab, monkeypatch):
    from whitebox_eval.gar import heads as gar_heads
    from whitebox_eval.gar.roles import encode_examples
    from whitebox_eval.gar.attribute_study import GARAttributeConfig, run_gar_attribute
    from whitebox_eval.gar.selection import task_examples

    tasks = "GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c],GendersOfPersons/isA,KindsOfThings/kindOf×3 [negate]"
    cfg = GARAttributeConfig(model="tiny", tasks=tasks, limit=4, steps=2, top=3, batch_size=2)
    folder = run_gar_attribute(cfg, tmp_path, run_id="attr", loaded=tiny_real_vocab)
    res = folder.load_results()
    per_task = folder.load_array("attribution_head_out_per_task")
    assert per_task.shape == (2, 2, 4)
    for k, task in enumerate(select_tasks(tasks, include_kr=False)):
        t = res["tasks"][task.task_id]
        assert t["baseline"] == ("pair" if task.g2c else "zero")
        enc = encode_examples(task_examples([task], 4, 0), tiny_real_vocab.tokenizer)
        direct = gar_heads.attribute_heads(Engine(tiny_real_vocab), enc, baseline=t["baseline"], steps=2, batch_size=2)
        np.testing.assert_allclose(per_task[k], direct.head_out, rtol=1e-4, atol=1e-7)
        order = np.argsort(-np.abs(per_task[k]), axis=None)[:3]
        assert [x["head"] for x in t["top_heads"]] == [list(np.unravel_index(i, (2, 4))) for i in order]
    assert (folder.path / "plots" / "attribution_per_task.png").is_file()
    monkeypatch.setattr(gar_heads, "attribute_heads", lambda *a, **k: pytest.fail("recomputed a finished task"))
    again = run_gar_attribute(cfg, tmp_path, run_id="attr", resume=True, loaded=tiny_real_vocab).load_results()
    assert again["tasks"] == res["tasks"]
