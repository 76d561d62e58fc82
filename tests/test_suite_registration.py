"""Adding a suite is one record in its own package (DESIGN.md, "Adding a suite"): the toy suite
(``tests/toy_suite/``), registered as a plug-in registers (:func:`whitebox_eval.suites.register`),
runs from ``studies``, as a reproduce child of a paper file of the user's own at micro scale, in
``--plan-only`` at every scale, and in the report's explorer, with no file of whitebox_eval naming it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "faults"))
from cases import build_model_dir  # noqa: E402

import toy_suite  # noqa: E402
from whitebox_eval import studies, suites  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.reproduce import spec  # noqa: E402

PAPER = {
    "paper": "999", "short": "toy", "title": "A toy paper", "seed": "none.txt",
    "experiments": [{"id": "toy-exp", "suite": "toy", "settings": {"p": 0.9},
                     "scales": {"micro": {"limit": 12}, "quick": {}, "paper": {"limit": 1000}}}],
    "claims": [{"id": "toy-above-half", "claim": "The toy is right more often than not", "cite": "toy sec. 1",
                "experiment": "toy-exp", "stat": {"key": "acc", "than": 0.5}, "direction": "greater",
                "published": {"text": "0.9"}, "arms": {"a": {"label": "toy accuracy", "key": "acc"}}}],
}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(suites, "SUITES", dict(suites.SUITES))
    return toy_suite.register()


@pytest.fixture
def paper_file(tmp_path):
    path = tmp_path / "toy_paper.yaml"
    path.write_text(yaml.safe_dump(PAPER), encoding="utf-8")
    return path


def test_no_file_of_the_package_names_the_toy_suite():
    src = Path(__file__).resolve().parents[1] / "src" / "whitebox_eval"
    assert not [p for p in src.rglob("*") if p.is_file() and "toy_suite" in p.read_text(encoding="utf-8", errors="ignore")]


def test_a_registered_suite_runs_from_studies(toy, tmp_path):
    r = studies.toy(tmp_path, run_id="t", limit=8, p=1.0)
    assert r.folder == tmp_path / "t" and r.config["suite"] == "toy"
    assert len(r.samples) == 8 and all(s["correct"] for s in r.samples)
    assert r.headline["acc"] == 1.0 and "toy" in dir(studies)
    with pytest.raises(WhiteboxError, match="unknown setting.*limt"):
        studies.toy(tmp_path, limt=3)
    with pytest.raises(WhiteboxError, match="registered already"):
        suites.register(toy)


def test_a_registered_suite_runs_as_a_reproduce_child_of_a_paper_file(toy, tmp_path, paper_file):
    model = str(build_model_dir(tmp_path / "tiny"))
    r = studies.reproduce(str(paper_file), tmp_path / "out", models=[model], scale="micro", show_progress=False)
    plan = json.loads((r.folder / "plan.json").read_text())
    (child,) = plan["children"]
    assert child["suite"] == "toy" and child["items"] == 12  # limit 12 at micro
    assert studies.read(r.folder / "runs" / child["run_id"]).config["p"] == 0.9
    (claim,) = r.claims
    assert claim["id"] == "toy-above-half" and claim["verdict"] == "holds"
    content = json.loads((r.folder / "claims.json").read_text())
    (fig,) = content["papers"][0]["figures"]  # the toy record's own figure, its path under the reproduction
    assert fig == {"kind": "toy", "model": model, "experiment": "toy-exp", "run": child["run_id"],
                   "path": f"runs/{child['run_id']}/results.json"} and (r.folder / fig["path"]).is_file()
    # the quick scale sets nothing: the estimate comes from ToyConfig's own default (limit 20)
    quick = studies.reproduce(str(paper_file), tmp_path / "out", models=[model], scale="quick", show_progress=False)
    assert json.loads((quick.folder / "plan.json").read_text())["children"][0]["items"] == 20


@pytest.mark.parametrize("scale", ["micro", "quick", "cpu", "paper"])
def test_a_registered_suite_plans_at_every_scale(toy, tmp_path, paper_file, scale, capsys):
    """``--plan-only`` at every scale; at scale paper the GPU estimate takes the record's tokens per
    unit (a suite the estimate did not list raised KeyError there)."""
    from whitebox_eval.cli import main
    from whitebox_eval.runs.record import DEFAULT_TOKENS_PER_UNIT

    model = str(build_model_dir(tmp_path / "tiny"))
    main(["reproduce", str(paper_file), "--plan-only", "--scale", scale, "--model", model,
          "--output", str(tmp_path / "out")])
    out = capsys.readouterr().out
    items = {"micro": 12, "quick": 20, "cpu": 20, "paper": 1000}[scale]
    assert f"[1/1] toy {model}" in out and f"{items:,} items" in out, out
    if scale == "paper":
        assert "GPU estimate per paper" in out and "~0.0 GPU hours" in out
        assert toy.tokens_per_unit == DEFAULT_TOKENS_PER_UNIT


def test_a_registered_suite_shows_in_the_explorer(toy, tmp_path):
    from whitebox_eval.report.page import write_report

    r = studies.toy(tmp_path, run_id="t", limit=5)
    page = write_report([r.folder], tmp_path / "report.html").read_text(encoding="utf-8")
    assert "WB.views.toy = function" in page  # the record's script, inside the page's one script
    data = json.loads(page.split('<script type="application/json" id="wb-data">', 1)[1].split("</script>", 1)[0])
    (run,) = data["runs"]
    assert run["suite"] == "toy" and [it["toy"]["draw"] for it in run["items"]] == [s["draw"] for s in r.samples]


def test_an_unknown_suite_or_mode_in_a_paper_is_one_line():
    with pytest.raises(WhiteboxError, match="unknown suite 'toy'"):
        spec.parse_paper(PAPER, "toy.yaml")
    bad = {**PAPER, "experiments": [{**PAPER["experiments"][0], "suite": "gar", "mode": "evaluat"}]}
    with pytest.raises(WhiteboxError, match="unknown gar mode 'evaluat'"):
        spec.parse_paper(bad, "toy.yaml")


def test_every_record_has_a_rate_and_tokens_per_unit():
    for record in suites.SUITES.values():
        for mode in record.modes:
            assert record.rate_of(mode) > 0 and record.tokens_per_unit > 0


def _paper_with(tmp_path, stat) -> Path:
    claim = {**PAPER["claims"][0], "id": "toy-beyond-half", "claim": "The toy is right beyond half the time",
             "stat": stat}
    path = tmp_path / "toy_statistic.yaml"
    path.write_text(yaml.safe_dump({**PAPER, "claims": [claim]}), encoding="utf-8")
    return path


def test_a_suites_own_statistic_runs_from_a_paper_file_at_micro_scale(toy, tmp_path):
    """The toy record declares ``toy_beyond`` (tests/toy_suite/statistics.py); a paper file names it
    and the claim is computed by it, with no file of whitebox_eval naming it."""
    model = str(build_model_dir(tmp_path / "tiny"))
    path = _paper_with(tmp_path, {"derived": "toy_beyond", "level": 0.5})
    r = studies.reproduce(str(path), tmp_path / "out", models=[model], scale="micro", show_progress=False)
    (claim,) = r.claims
    (child,) = json.loads((r.folder / "plan.json").read_text())["children"]
    samples = studies.read(r.folder / "runs" / child["run_id"]).samples
    acc = sum(bool(s["correct"]) for s in samples) / len(samples)
    assert claim["statistic"]["value"] == pytest.approx(acc - 0.5) and claim["statistic"]["n"] == 12
    assert claim["statistic"]["source"] == "samples.jsonl correct - 0.5"


@pytest.mark.parametrize("stat, words", [
    ({"derived": "toy_beyound", "level": 0.5}, "unknown statistic 'toy_beyound' (did you mean 'toy_beyond'?)"),
    ({"derived": "toy_beyond"}, "statistic toy_beyond needs level"),
    ({"derived": "toy_beyond", "level": 0.5, "levle": 1}, "takes no argument 'levle' (did you mean 'level'?)"),
    ({"key": "acc_typo"}, "toy runs write no 'acc_typo' in results.json (did you mean 'acc'?)"),
    ({"keys": "acc"}, "stat names no statistic kind"),
])
def test_a_misspelt_statistic_fails_at_plan_only(toy, tmp_path, cli, stat, words):
    model = str(build_model_dir(tmp_path / "tiny"))
    code, out, err = cli(["reproduce", str(_paper_with(tmp_path, stat)), "--plan-only", "--scale", "micro",
                          "--model", model, "--output", str(tmp_path / "out")])
    assert code == 2 and err.strip().count("\n") == 0, err
    assert "toy_statistic.yaml claim toy-beyond-half" in err and words in err and "[1/1]" not in out


def test_a_child_run_here_is_read_once(toy, tmp_path, paper_file, monkeypatch):
    """The finished folder a child's run returns is the one its claims read: running it reads
    nothing back (suites.run_folder), and assembling reads it once."""
    from whitebox_eval.runs import finished

    reads: list[str] = []
    real = finished.read
    monkeypatch.setattr(finished, "read", lambda folder, *a, **k: reads.append(Path(folder).name) or real(folder, *a, **k))
    model = str(build_model_dir(tmp_path / "tiny"))
    r = studies.reproduce(str(paper_file), tmp_path / "out", models=[model], scale="micro", show_progress=False)
    (child,) = json.loads((r.folder / "plan.json").read_text())["children"]
    assert r.claims[0]["verdict"] == "holds" and reads.count(child["run_id"]) == 1, reads
