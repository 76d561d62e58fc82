"""The per-token fields a MUI sample keeps for the report (mui/explorer.py), on hand-made scores."""

from __future__ import annotations

import pytest
import torch

from whitebox_eval.mui.explorer import token_view


class _Tok:
    def decode(self, ids):
        return "".join(chr(96 + i) for i in ids)


def test_each_key_unit_is_counted_once_where_it_peaks_and_top_units_are_ranked():
    scores = torch.zeros(3, 2, 4)  # [tokens, layers, width]
    scores[0, 0, 1], scores[2, 0, 1] = 0.5, 0.9  # unit 0.1 peaks at token 2
    scores[1, 1, 3] = 0.7  # unit 1.3 peaks at token 1
    scores[0, 1, 0] = 0.8  # a high score outside the key set
    key = torch.zeros(2, 4, dtype=torch.bool)
    key[0, 1] = key[1, 3] = True
    view = token_view(scores, key, [1, 2, 3], _Tok())
    assert view["response_tokens"] == ["a", "b", "c"]
    assert view["token_key_units"] == [0, 1, 1]
    assert view["token_top_units"][0][:2] == [["1.0", 0.8], ["0.1", 0.5]]
    assert view["token_top_units"][2][0] == ["0.1", 0.9] and len(view["token_top_units"][2]) == 5
    assert token_view(scores, key, [1, 2], _Tok())["response_tokens"] is None  # ids and positions differ


# ------------------------------------------------------------------ each response's answer class

ARITH = {"suite": "mui", "task": "arithmetic-gen", "seed": 0,
         "task_spec": {"name": "arithmetic-gen", "path": None, "categories": []}}
TEXTS = {"right": "1 + 9 = 10", "wrong": "1 + 9 = 11", "off_format": "Styloseness"}
CLASSES = ["right"] * 3 + ["wrong"] * 2 + ["off_format"] * 5


def _run(tmp_path, with_class: bool, config=ARITH, key_sets: bool = False):
    """A finished mui run of 10 responses (3 right, 2 wrong, 5 off-format): written with the class, or
    (``with_class`` False) before it -- no ``class`` per sample, no ``answer_classes`` in results."""
    import numpy as np

    from whitebox_eval.mui.answer_classes import class_results
    from whitebox_eval.mui.study import KEY_SETS_FILE
    from whitebox_eval.mui.utilization import KeySets
    from whitebox_eval.runs.folder import RunFolder

    run = RunFolder.create(tmp_path, config, run_id="r")
    samples = [{"id": f"s{i}", "gold": "10", "prompt": "Question: What is the value of 1 + 9?\nAnswer:",
                "response": TEXTS[c], "correct": c == "right", **({"class": c} if with_class else {})}
               for i, c in enumerate(CLASSES)]
    run.append_samples(samples)
    run.save_results({"n_items": 10, "correct_vs_incorrect": {"refused": "groups too small"},
                      **(class_results(CLASSES) if with_class else {})})
    if key_sets:
        ks = KeySets(2, 4, "neuron")
        for i in range(10):
            ks.add_indices(np.array([i % 2]), np.array([i % 4]), f"s{i}")
        ks.save(run.path / "arrays" / KEY_SETS_FILE)
    return run.path


def _views(path):
    from whitebox_eval.report.rundata import load_run
    from whitebox_eval.report.explorer_views import suite_views

    run = load_run(path)
    return suite_views(run, run.samples)


def test_each_response_shows_its_class_and_the_run_its_off_format_share(tmp_path):
    from whitebox_eval import stats

    v = _views(_run(tmp_path, with_class=True, key_sets=True))
    assert v["methods"] == ["model", "class"] and v["compare"] == ["model"]  # the class filters; it is no method to compare
    shown = [(row["pred"]["class"], row["ok"]["class"]) for row in v["items"]]
    assert shown == [("right", True)] * 3 + [("wrong", False)] * 2 + [("off-format", None)] * 5
    assert [row["mui"]["class"] for row in v["items"]] == CLASSES and v["items"][0]["mui"]["n"] == 1  # beside its units
    a = v["answer_classes"]
    assert a["counts"] == {"right": 3, "wrong": 2, "off_format": 5} and a["n"] == 10 and not a["read_back"]
    wilson = stats.proportion([c == "off_format" for c in CLASSES])
    assert a["off_format"] == 0.5 and a["ci"] == pytest.approx([wilson.lo, wilson.hi], abs=1e-4)  # 4 digits shown
    assert 0.2 < a["ci"][0] < 0.5 < a["ci"][1] < 0.8 and "off-format" in a["definition"]


def test_an_old_run_is_classified_from_its_texts_as_read_and_not_written(tmp_path):
    new = _views(_run(tmp_path / "new", with_class=True))
    path = _run(tmp_path / "old", with_class=False)
    before = {p.name: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    old = _views(path)
    assert {p.name: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before  # the folder untouched
    assert [r["pred"]["class"] for r in old["items"]] == [r["pred"]["class"] for r in new["items"]]
    assert old["answer_classes"]["read_back"] and old["answer_classes"]["counts"] == new["answer_classes"]["counts"]
    assert old["answer_classes"]["ci"] == new["answer_classes"]["ci"]
    assert "mui" in old["items"][0] and "per_layer" not in old["items"][0]["mui"]  # no key sets: the class alone


def test_a_run_whose_responses_cannot_be_classified_says_why_and_shows_no_class(tmp_path):
    cfg = {**ARITH, "task": "bigbench", "task_spec": {"name": "bigbench", "path": "x", "categories": []}}
    v = _views(_run(tmp_path, with_class=False, config=cfg))
    assert "own check" in v["answer_classes"]["not_classified"]
    assert v["methods"] == ["model"] and all("class" not in r["pred"] for r in v["items"])
