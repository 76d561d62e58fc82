"""GAR protocol fixes: odd --limit, selection/report splits, random-head controls,
the intervention run's results and summary, on a tiny random llama with SmolLM2's tokenizer."""

from __future__ import annotations

import json

import pytest
import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.evaluate_study import GARConfig, run_gar
from whitebox_eval.gar.intervene_study import GARInterveneConfig, run_gar_intervene
from whitebox_eval.gar.selection import select_tasks, task_examples
from whitebox_eval.gar.study_base import random_head_draws
from whitebox_eval.gar.selection import selection_warnings
from whitebox_eval.gar.truth_heads import GARHeadsConfig, run_gar_heads, split_pairs

G2C = "GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]"
G2C2 = "GendersOfPersons/same,CountriesOfCities/inCountryOf×3 [g2c]"


def test_an_odd_limit_is_refused_for_yes_no_tasks(tmp_path):
    """Regression: --limit 1 kept only the Yes item of every classification task."""
    with pytest.raises(WhiteboxError, match="odd"):
        task_examples(select_tasks("classification"), 1, 0)
    with pytest.raises(WhiteboxError, match="even"):
        run_gar(GARConfig(model="tiny", tasks="all", limit=3), tmp_path)
    exs = task_examples(select_tasks("classification"), 2, 0)
    assert sum(e.label == "Yes" for e in exs) == sum(e.label == "No" for e in exs) == 192
    assert len(task_examples(select_tasks("generation"), 1, 0)) == 192  # no pairs there: odd is fine


def test_split_pairs_is_disjoint_balanced_and_keeps_pairs_together():
    exs = task_examples(select_tasks(f"{G2C},{G2C2}", include_kr=False), 8, 0)
    sel, rep = split_pairs(exs, 0.5, seed=3)
    assert not set(sel) & set(rep) and sorted(sel + rep) == list(range(len(exs)))
    assert len(sel) == len(rep) == 8
    for part in (sel, rep):
        labels = [exs[i].label for i in part]
        assert labels.count("Yes") == labels.count("No")
        pairs = {(exs[i].task_id, exs[i].index // 2) for i in part}
        assert len(pairs) * 2 == len(part)  # both examples of a loop on one side
        assert {exs[i].task_id for i in part} == {exs[0].task_id, exs[-1].task_id}  # every task on both sides
    assert split_pairs(exs, 0.5, seed=3) == (sel, rep)
    assert split_pairs(exs, 0.5, seed=4) != (sel, rep)
    with pytest.raises(WhiteboxError):
        split_pairs(exs[:2], 0.5, 0)  # one pair cannot be split
    with pytest.raises(WhiteboxError):
        split_pairs(exs, 1.0, 0)


def test_random_head_draws_same_count_same_band_never_selected():
    selected = [(3, 1), (5, 0), (4, 2)]
    band, sets = random_head_draws(selected, (8, 4), 6, seed=0)
    assert band == (3, 5) and len(sets) == 6
    for s in sets:
        assert len(s) == 3 and len(set(s)) == 3
        assert all(3 <= l <= 5 and (l, h) not in selected for l, h in s)
    assert len({tuple(s) for s in sets}) > 1
    assert random_head_draws([(0, 0), (0, 1)], (2, 3), 5, 0)[1] == []  # band too small: no draw


def test_selection_warnings_say_when_nothing_can_be_selected():
    w = selection_warnings(["No"] * 12, [1e-4, 5e-4, 2e-3], 2, True)
    assert any("answers 'No' to all 12" in x for x in w)
    assert any("median KL" in x for x in w) and any("2 selection examples" in x for x in w)
    assert selection_warnings(["No", "Yes"], [0.5, 0.2], 0, True) == []


def test_truth_heads_select_and_report_on_disjoint_items(tmp_path, tiny_real_vocab, capsys):
    cfg = GARHeadsConfig(model="tiny", tasks=f"{G2C},{G2C2}", limit=8, steps=2, n_candidates=8, batch_size=4,
                         random_draws=5)
    folder = run_gar_heads(cfg, tmp_path, run_id="h", loaded=tiny_real_vocab)
    res = folder.load_results()
    sel, rep = res["split"]["selection"], res["split"]["report"]
    assert len(sel) == len(rep) == 8 and not set(sel) & set(rep)
    samples = [json.loads(l) for l in (folder.path / "samples.jsonl").read_text().splitlines()]
    attr_ids = {s["id"].split(":", 1)[1] for s in samples if s["stage"] == "attr"}
    assert attr_ids and attr_ids <= set(sel)  # attribution saw only the selection split
    tf_ids = {s["id"].split(":", 1)[1] for s in samples if s["stage"] == "tf"}
    assert tf_ids == set(rep)  # interventions are scored only on the report split
    assert all(s["edit_positions"] for s in samples if s["stage"] == "tf")
    tf = res["interventions"]["true_false"]
    assert tf["n"] == 8 and "acc,argmax" in tf["paired_tests"] and "p_target" in tf["paired_tests"]
    ctl = res["random_heads_control"]
    assert len(ctl["draws"]) == 5 and ctl["comparison"]["delta_p_target"]["random"]["n"] == 5
    # the inverse edit's own control: the inverse edit on each of the same head sets, on the report split
    assert [d["true_heads"] for d in ctl["inverse_draws"]] == [d["true_heads"] for d in ctl["draws"]]
    assert ctl["inverse_comparison"]["delta_p_target"]["random"]["n"] == 5
    inv_ids = {s["id"].split(":", 1)[1] for s in samples if s["stage"] == "invrand4"}
    assert inv_ids == set(rep)
    assert ctl["inverse_comparison"]["delta_p_target"]["selected"] == \
        res["interventions"]["inverse_true_false"]["paired_tests"]["p_target"]["diff"]
    chosen = {tuple(h) for h in res["true_heads"] + res["false_heads"]}
    for d in ctl["draws"]:
        assert not chosen & {tuple(h) for h in d["true_heads"] + d["false_heads"]}
    assert "warnings" in res["selection"] and "first_token" in res
    conf = yaml.safe_load((folder.path / "config.yaml").read_text())
    assert conf["edit_at"] == "read" and "last prompt token" in conf["edit_positions"]
    from whitebox_eval.gar import command
    capsys.readouterr()
    command._print_heads(folder)
    text = capsys.readouterr().out
    assert "reported on 8 other examples" in text and "random heads (same count" in text
    assert text.index("true_false ") < text.index("knockout_Q->A")


def test_intervene_run_reports_moving_metrics_and_the_summary_says_so(tmp_path, tiny_real_vocab, capsys):
    from click.testing import CliRunner

    from whitebox_eval.gar import command

    cfg = GARInterveneConfig(model="tiny", tasks=G2C, limit=4, heads="0.0,0.1,0.2,0.3,1.0,1.1,1.2,1.3",
                             pattern="Q->A", batch_size=4)
    folder = run_gar_intervene(cfg, tmp_path, run_id="iv", loaded=tiny_real_vocab)
    res = folder.load_results()
    ko = res["interventions"]["knockout_Q->A"]
    for key in ("acc,appc", "acc,argmax", "p_target", "choice_mass"):
        assert key in ko["before"] and key in ko["after"]
    assert ko["paired_tests"]["acc,argmax"]["test"] == "mcnemar_exact"
    assert ko["paired_tests"]["p_target"]["test"] == "paired_bootstrap"
    assert ko["max_abs_change_p_target"] > 0  # knocking out every head at the read position moves the output
    head = res["headline"]
    assert list(head)[0] == "acc,before"
    for key in ("acc_argmax,before", "p_target,before", "acc_argmax,knockout_Q->A", "flips,knockout_Q->A",
                "acc_ci,before", "p_target_ci,knockout_Q->A"):
        assert key in head
    conf = yaml.safe_load((folder.path / "config.yaml").read_text())
    assert conf["edit_at"] == "read" and conf["edit_positions"].startswith("the last prompt token")
    from whitebox_eval.gar.roles import encode_examples
    enc = encode_examples(task_examples(select_tasks(G2C), 4, 0), tiny_real_vocab.tokenizer)
    ends = {f"{e.example.task_id}#{e.example.index}": [e.n_tokens - 1] for e in enc}
    recs = [json.loads(l) for l in (folder.path / "samples.jsonl").read_text().splitlines()]
    ko_recs = [r for r in recs if r["stage"] == "knockout"]
    assert len(ko_recs) == 4 and all(r["edit_positions"] == ends[r["id"].split(":", 1)[1]] for r in ko_recs)
    # the CLI summary prints the paper's rule beside argmax, P(target), flips and the paired tests
    out = CliRunner().invoke(command.command, ["--help"])
    assert "'V->E'" in out.output and "--pattern V->E" not in out.output  # quoted for the shell
    capsys.readouterr()
    command._print_heads(folder)
    text = capsys.readouterr().out
    assert "paper's rule" in text and "argmax" in text and "P(target)" in text and "mass on choices" in text
    assert f"{ko['predictions_changed']}/4 argmax predictions changed" in text or \
        "no argmax prediction changed (0/4)" in text
    assert "after - before" in text and "no effect" not in text


def test_probe_mode_reports_interval_baseline_control_and_protocol(tmp_path, tiny_real_vocab, shared_datasets,
                                                                    capsys):
    from whitebox_eval.gar.probe_study import GARProbeConfig, run_gar_probe

    snli = shared_datasets / "snli" / "snli_test_sample.jsonl"
    cfg = GARProbeConfig(model="tiny", heads="1.0,1.3", probe_data=(str(snli),), probe_limit=60, random_draws=5)
    folder = run_gar_probe(cfg, tmp_path, run_id="p", loaded=tiny_real_vocab)
    res = folder.load_results()
    p = res["probes"]["snli_test_sample.jsonl"]
    assert p["n"] == 60 and p["acc_ci_method"] == "wilson" and "acc,majority" in p
    assert "9000" in p["protocol_note"] and p["protocol"] == "5-fold cross-validation"
    assert p["random_heads"]["n"] == 5 and p["random_heads"]["layer_band"] == [1, 1]
    for hs in p["random_heads"]["heads"]:
        assert sorted(map(tuple, hs)) == [(1, 1), (1, 2)]  # the only other heads of the band
    assert res["headline"]["probe,snli_test_sample.jsonl"] == p["acc"]
    assert res["headline"]["probe_ci,snli_test_sample.jsonl"] == p["acc_ci"]  # the interval beside it
    from whitebox_eval.gar import command
    capsys.readouterr()
    command._print_heads(folder)
    text = capsys.readouterr().out
    assert "majority baseline" in text and "probe - majority baseline" in text and "random heads" in text
