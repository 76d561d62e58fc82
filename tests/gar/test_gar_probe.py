"""App. E truth probe: MLP training and cross-validation on synthetic data, file loaders."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.probe import (
    ProbeConfig,
    cross_validate_probe,
    got_statement,
    load_geometry_of_truth,
    load_snli,
    load_truth_statements,
    make_probe,
    snli_statement,
    stratified_folds,
)


def _blobs(n: int, sep: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    x[:, 0] += sep * (2 * y - 1)
    x[:, 2] -= sep * (2 * y - 1)
    return x, y


def test_probe_architecture_is_linear_relu_linear():
    m = make_probe(4)
    assert [type(l) for l in m] == [torch.nn.Linear, torch.nn.ReLU, torch.nn.Linear]
    assert m[0].in_features == 4 and m[0].out_features == 32 and m[2].out_features == 2


def test_probe_beats_chance_on_separable_data_and_not_on_noise():
    x, y = _blobs(200, sep=2.0)
    res = cross_validate_probe(x, y, ProbeConfig(seed=1))
    assert len(res.fold_accuracies) == 5
    assert res.mean > 0.95 > res.chance + 0.3
    # same features, labels shuffled: no signal, the probe stays near chance
    noise = cross_validate_probe(x, np.random.default_rng(3).permutation(y), ProbeConfig(seed=1))
    assert noise.mean < 0.65
    # deterministic given the seed
    assert cross_validate_probe(x, y, ProbeConfig(seed=1)).fold_accuracies == res.fold_accuracies


def test_stratified_folds_partition_and_balance():
    y = np.array([0] * 30 + [1] * 20)
    folds = stratified_folds(y, 5, seed=0)
    assert sorted(np.concatenate(folds).tolist()) == list(range(50))
    for f in folds:
        assert (y[f] == 0).sum() == 6 and (y[f] == 1).sum() == 4


def test_probe_input_errors():
    x, y = _blobs(40, 1.0)
    with pytest.raises(WhiteboxError):
        cross_validate_probe(x, np.zeros(40, dtype=int))
    with pytest.raises(WhiteboxError):
        cross_validate_probe(x[:6], y[:6])
    with pytest.raises(WhiteboxError):
        cross_validate_probe(x, y[:10])


def test_templates_and_statement_spans():
    st = got_statement("The city of Krasnodar is in Russia.", 1)
    assert st.text == "Please answer with Yes or No. Is it true that the city of Krasnodar is in Russia? Answer:"
    assert st.text[st.span[0]:st.span[1]] == "the city of Krasnodar is in Russia"
    sn = snli_statement("Two dogs run in a field.", "Animals are outside.", 1)
    assert sn.text == "Two dogs run in a field. So Animals are outside."
    assert sn.text[sn.span[0]:sn.span[1]] == "Animals are outside."


def test_loaders_report_bad_rows(tmp_path):
    bad = tmp_path / "got.csv"
    bad.write_text("statement,label\nParis is in France.,1\nRome is in Spain.,maybe\n")
    with pytest.raises(WhiteboxError, match=r"got.csv:3"):
        load_geometry_of_truth(bad)
    nohdr = tmp_path / "x.csv"
    nohdr.write_text("text,y\na,1\n")
    with pytest.raises(WhiteboxError, match="statement"):
        load_geometry_of_truth(nohdr)
    sn = tmp_path / "s.jsonl"
    sn.write_text('{"sentence1": "A.", "sentence2": "B.", "gold_label": "neutral"}\n{oops\n')
    with pytest.raises(WhiteboxError, match=r"s.jsonl:2"):
        load_snli(sn)
    with pytest.raises(WhiteboxError):
        load_truth_statements(tmp_path / "data.parquet")


def test_real_files_load(shared_datasets):
    got = load_geometry_of_truth(shared_datasets / "geometry_of_truth" / "cities.csv")
    assert len(got) == 1496 and {s.label for s in got} == {0, 1}
    snli = load_snli(shared_datasets / "snli" / "snli_test_sample.jsonl")
    assert len(snli) == 102 + 95  # entailment + contradiction; neutral and '-' dropped
    assert sum(s.label for s in snli) == 102
    sub = load_truth_statements(shared_datasets / "geometry_of_truth" / "sp_en_trans.csv", limit=50, seed=0)
    assert len(sub) == 50
    assert sub == load_truth_statements(shared_datasets / "geometry_of_truth" / "sp_en_trans.csv", limit=50, seed=0)


def test_probe_reports_a_wilson_interval_and_the_majority_baseline():
    from scipy.stats import binomtest

    x, y = _blobs(120, sep=0.7, seed=4)
    y[:20] = 0  # unbalance the labels a little
    res = cross_validate_probe(x, y, ProbeConfig(seed=2))
    d = res.to_dict()
    assert len(res.correct) == 120  # every statement tested once
    k = int(res.correct.sum())
    ci = binomtest(k, 120).proportion_ci(0.95, method="wilson")
    assert d["acc"] == pytest.approx(k / 120)
    assert d["acc_ci"] == pytest.approx([ci.low, ci.high], abs=1e-9)
    # pooled accuracy = fold accuracies weighted by fold size
    sizes = [len(f) for f in stratified_folds(y, 5, 2)]
    assert d["acc"] == pytest.approx(np.dot(res.fold_accuracies, sizes) / 120)
    # each fold predicts its training part's majority label: stratified folds keep the overall majority
    maj = int(np.bincount(y).argmax())
    assert d["acc,majority"] == pytest.approx(np.mean(y == maj))
    t = d["paired_tests"]["probe_vs_majority"]
    assert t["test"] == "mcnemar_exact" and t["diff"] == pytest.approx(d["acc"] - d["acc,majority"])
    assert "probe - majority baseline" in d["verdict"]


def test_split_protocol_uses_disjoint_sets_and_several_seeds():
    from whitebox_eval.gar.probe import split_probe

    x, y = _blobs(330, sep=2.0, seed=5)
    res = split_probe(x, y, ProbeConfig(seed=0), n_each=100, seeds=3)
    assert len(res.correct) == 100 and len(res.fold_accuracies) == 3
    assert set(np.round(res.correct * 3).astype(int)) <= {0, 1, 2, 3}  # share of 3 seeds
    assert res.mean == pytest.approx(np.mean(res.fold_accuracies))
    d = res.to_dict()
    assert d["acc_ci_method"] == "bootstrap" and d["acc_ci"][0] <= d["acc"] <= d["acc_ci"][1]
    assert res.mean > 0.9
    with pytest.raises(WhiteboxError):
        split_probe(x, y, n_each=200)
