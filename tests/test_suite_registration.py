"""Adding a suite is one record (DESIGN.md, "How to add a suite"): a toy suite registered
through :func:`whitebox_eval.suites.register` runs from ``studies`` and as a reproduce child
at micro scale, with its cost from its own config's defaults."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "faults"))
from cases import build_model_dir  # noqa: E402

from whitebox_eval import studies, suites  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.reproduce import spec  # noqa: E402

TOY = suites.Suite("toy", "A toy suite (tests).", None,
                   {"study": suites.Mode("toy_suite:ToyConfig", "toy_suite:run_toy")},
                   lambda cfg, mode: (cfg.limit, float(cfg.limit)))

PAPER = {
    "paper": "999", "short": "toy", "title": "A toy paper", "seed": "none.txt",
    "experiments": [{"id": "toy-exp", "suite": "toy", "settings": {"p": 0.9},
                     "scales": {"micro": {"limit": 12}, "quick": {}, "paper": {"limit": 1000}}}],
    "claims": [{"id": "toy-above-half", "claim": "The toy is right more often than not", "cite": "toy sec. 1",
                "experiment": "toy-exp", "stat": {"key": "acc", "than": 0.5}, "direction": "greater",
                "published": {"text": "0.9"}}],
}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(suites, "SUITES", dict(suites.SUITES))
    suites.register(TOY)
    return TOY


def test_a_registered_suite_runs_from_studies(toy, tmp_path):
    r = studies.toy(tmp_path, run_id="t", limit=8, p=1.0)
    assert r.folder == tmp_path / "t" and r.config["suite"] == "toy"
    assert len(r.samples) == 8 and all(s["correct"] for s in r.samples)
    assert r.headline["acc"] == 1.0 and "toy" in dir(studies)
    with pytest.raises(WhiteboxError, match="unknown setting.*limt"):
        studies.toy(tmp_path, limt=3)
    with pytest.raises(WhiteboxError, match="registered already"):
        suites.register(TOY)


def test_a_registered_suite_runs_as_a_reproduce_child(toy, tmp_path, monkeypatch):
    paper = spec.parse_paper(PAPER, "toy.yaml")
    monkeypatch.setattr(spec, "papers", lambda: {"999": paper})
    model = str(build_model_dir(tmp_path / "tiny"))
    r = studies.reproduce("999", tmp_path / "out", models=[model], scale="micro", show_progress=False)
    plan = json.loads((r.folder / "plan.json").read_text())
    (child,) = plan["children"]
    assert child["suite"] == "toy" and child["items"] == 12  # limit 12 at micro
    assert studies.read(r.folder / "runs" / child["run_id"]).config["p"] == 0.9
    (claim,) = r.claims
    assert claim["id"] == "toy-above-half" and claim["verdict"] == "holds"
    # the quick scale sets nothing: the estimate comes from ToyConfig's own default (limit 20)
    quick = studies.reproduce("999", tmp_path / "out", models=[model], scale="quick", show_progress=False)
    assert json.loads((quick.folder / "plan.json").read_text())["children"][0]["items"] == 20


def test_an_unknown_suite_or_mode_in_a_paper_is_one_line():
    with pytest.raises(WhiteboxError, match="unknown suite 'toy'"):
        spec.parse_paper(PAPER, "toy.yaml")
    bad = {**PAPER, "experiments": [{**PAPER["experiments"][0], "suite": "gar", "mode": "evaluat"}]}
    with pytest.raises(WhiteboxError, match="unknown gar mode 'evaluat'"):
        spec.parse_paper(bad, "toy.yaml")


def test_every_measured_rate_names_a_record_and_every_record_has_one():
    from whitebox_eval.reproduce.costs import RATES

    for key in RATES:
        name, _, mode = key.partition(" ")
        suites.suite(name).mode(mode or None)  # one line naming the records otherwise
    assert set(suites.SUITES) <= set(RATES)
