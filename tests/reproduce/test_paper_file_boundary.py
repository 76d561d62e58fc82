"""A paper file of the user's own (``reproduce PATH.yaml``) at the boundary: every key known (an
unknown one names the nearest), every value of its type, every claim's statistic one its suite's
runs give; nested YAML aliases and oversized files refused. Each fault is one line, exit status 2,
before any plan is printed."""

from __future__ import annotations

import copy

import pytest
import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import spec, spec_keys

PAPER = {
    "paper": "998", "short": "mine", "title": "My paper", "seed": "none.txt",
    "experiments": [{"id": "ssd", "suite": "mcqa", "settings": {"task": "ssd"}, "scales": {"micro": {"limit": 8}},
                     "matrix": {"shots": [0]}}],
    "tables": [{"id": "t1", "cite": "Table 1", "region": ["a", "b"], "columns": ["acc"],
                "rows": [{"label": ["x"], "published": [1.0]}]}],
    "claims": [{"id": "qk-beats", "claim": "The QK head beats the baseline", "cite": "sec. 1", "experiment": "ssd",
                "stat": {"paired": "qk_head_vs_baseline"}, "direction": "greater", "margin": 0.05,
                "arms": {"a": {"label": "QK head", "samples": "acc,qk_head"},
                         "b": {"label": "baseline", "samples": "acc,baseline"}}}],
}


def _write(tmp_path, doc=None, text=None):
    path = tmp_path / "mine.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(doc), encoding="utf-8")
    return path


def _with(change):
    doc = copy.deepcopy(PAPER)
    change(doc)
    return doc


def test_a_correct_paper_file_reads():
    paper = spec.parse_paper(copy.deepcopy(PAPER), "mine.yaml")
    assert paper.claims[0].stat == {"paired": "qk_head_vs_baseline"} and paper.experiments[0].suite == "mcqa"


@pytest.mark.parametrize("change, words", [
    (lambda d: d.__setitem__("claimz", d.pop("claims")),
     "mine.yaml: unknown key 'claimz' (did you mean claims?); the keys are: claims, experiments"),
    (lambda d: d["experiments"][0].__setitem__("setings", {}), "experiments 1 (ssd): unknown key 'setings' (did you mean settings?)"),
    (lambda d: d["claims"][0].__setitem__("directon", "less"), "claims 1 (qk-beats): unknown key 'directon' (did you mean direction?)"),
    (lambda d: d.__setitem__("claims", "qk beats"), "mine.yaml: claims takes a list, not str 'qk beats'"),
    (lambda d: d.__setitem__("title", ["a", "b"]), "mine.yaml: title takes text, not list ['a', 'b']"),
    (lambda d: d["claims"][0].__setitem__("margin", "big"), "claims 1 (qk-beats): margin takes a number, not str 'big'"),
    (lambda d: d["claims"][0].__setitem__("margin", float("nan")), "mine.yaml: claims[0].margin must be a finite number, not nan"),
    (lambda d: d["claims"][0].__setitem__("headline", "yes"), "headline takes true or false, not str 'yes'"),
    (lambda d: d["claims"][0].__setitem__("stat", "paired"), "stat takes a mapping, not str 'paired'"),
    (lambda d: d["claims"].__setitem__(0, ["qk-beats"]), "claims 1: an entry is a mapping"),
    (lambda d: d["experiments"][0].__setitem__("settings", [1, 2]), "experiments 1 (ssd): settings takes a mapping, not list [1, 2]"),
    (lambda d: d["experiments"][0].__setitem__("matrix", {"shots": 3}), "experiments 1 (ssd): a value of the wrong type"),
    (lambda d: d["experiments"][0]["scales"].__setitem__("micro", [8]), "experiments 1 (ssd): a value of the wrong type"),
    (lambda d: d["tables"][0].__setitem__("rows", [[1, 2]]), "tables 1 (t1): a value of the wrong type"),
    (lambda d: d["experiments"][0]["scales"]["micro"].__setitem__("by_model", [{"limit": 2}]),
     "scales.micro.by_model must map a model's name to its settings"),
    (lambda d: d["experiments"][0]["scales"]["micro"].__setitem__("by_model", {"smolm2-135m": {"limit": 2}}),
     "by_model names ['smolm2-135m'], neither a bundled model (smollm2-135m, gemma3-270m)"),
    (lambda d: d["experiments"][0]["scales"]["micro"].__setitem__("by_model", {"smollm2-135m": {"matrix": {}}}),
     "by_model sets matrix: a model's entry holds suite settings only"),
    (lambda d: d["claims"][0].__setitem__("controls", {"kind": "beat"}), "controls takes a list, not dict"),
    (lambda d: d["claims"][0].__setitem__("stat", {"paired": "qk_head_vs_baselin"}),
     "mcqa runs write no 'paired_tests/qk_head_vs_baselin' in results.json"),
    (lambda d: d["claims"][0].__setitem__("stat", {"paired": "x", "test_at": ["y"]}), "more than one statistic kind"),
    (lambda d: d["claims"][0].__setitem__("stat", {"derived": "group_gap", "a": {}, "b": {}, "fields": "x"}),
     "statistic group_gap takes no argument 'fields' (did you mean 'field'?)"),
    (lambda d: d["claims"][0].__setitem__("stat", {"derived": "masked_items", "task": "t", "k": 4}),
     "statistic 'masked_items' reads masking runs, not mcqa runs"),
])
def test_a_wrong_key_or_type_is_one_line(cli, tmp_path, change, words):
    code, out, err = cli(["reproduce", str(_write(tmp_path, _with(change))), "--plan-only", "--scale", "micro"])
    assert code == 2 and err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert words in err and out == "", err


def test_nested_aliases_are_refused_and_flat_ones_read(cli, tmp_path):
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))
    code, _, err = cli(["reproduce", str(_write(tmp_path, text=laughs)), "--plan-only"])
    assert code == 2 and "nested aliases are not allowed" in err and "line 3" in err
    assert spec_keys.load("x: &x [1]\ny: *x\n", "f")["y"] == [1]  # a flat alias, as the bundled papers share blocks


def test_an_oversized_or_unreadable_paper_file_is_one_line(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(spec_keys, "MAX_BYTES", 100)
    code, _, err = cli(["reproduce", str(_write(tmp_path, PAPER)), "--plan-only"])
    assert code == 2 and "a paper file is at most" in err
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"paper: '\xff\xfe'\n")
    code, _, err = cli(["reproduce", str(path), "--plan-only"])
    assert code == 2 and "cannot read the paper file" in err and err.strip().count("\n") == 0


def test_an_unknown_check_kind_names_the_known_ones():
    doc = _with(lambda d: d["claims"][0].__setitem__("preconditions", [{"kind": "above_chanc"}]))
    with pytest.raises(WhiteboxError, match="preconditions entries need a kind, one of above_chance"):
        spec.parse_paper(doc, "mine.yaml")


def test_a_registered_statistic_is_named_by_a_paper_file_and_computed(monkeypatch):
    """``vocabulary.register`` adds a statistic any suite's claim may name, as ``suites.register``
    adds a suite; its arguments are checked as a record's are."""
    from types import SimpleNamespace

    from whitebox_eval.reproduce import vocabulary
    from whitebox_eval.runs.record import Statistic

    monkeypatch.setattr(vocabulary, "_registered", {})
    vocabulary.register(Statistic("n_items", "whitebox_eval.reproduce.values:estimate", needs=("at",), reads="results"))
    doc = _with(lambda d: d["claims"][0].__setitem__("stat", {"derived": "n_items", "at": ["n"]}))
    assert spec.parse_paper(doc, "mine.yaml").claims[0].stat["derived"] == "n_items"
    study = SimpleNamespace(results={"n": 7})
    assert vocabulary.compute({"derived": "n_items", "at": ["n"]}, study, "mcqa") == {"value": 7.0, "source": "n"}
    with pytest.raises(WhiteboxError, match="statistic n_items needs at"):
        spec.parse_paper(_with(lambda d: d["claims"][0].__setitem__("stat", {"derived": "n_items"})), "mine.yaml")
    with pytest.raises(WhiteboxError, match="already defined"):
        vocabulary.register(Statistic("group_gap", "whitebox_eval.reproduce.derived:group_gap"))
