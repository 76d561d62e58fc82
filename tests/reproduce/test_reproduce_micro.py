"""A reproduction end to end at micro scale on a tiny random model: every number in the
report is its child run's, verdicts follow the child's statistics, children are reused,
and a model that cannot run is marked while the others go on."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
from cases import build_fixtures  # noqa: E402

from whitebox_eval import studies  # noqa: E402
from whitebox_eval.reproduce import CLAIMS_FILE, MARKDOWN_FILE, cell_text  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_fixtures(tmp_path_factory.mktemp("rep")) / "tiny")


@pytest.fixture(scope="module")
def micro(tiny, tmp_path_factory, shared_datasets):
    out = tmp_path_factory.mktemp("repro")
    r = studies.reproduce("004", out, models=[tiny], scale="micro", data_root=str(shared_datasets),
                          show_progress=False)
    return r, out, shared_datasets


def _lookup(results: dict, source: str):
    """A number of results.json by its source as the report names it (independent of values.py)."""
    if "/" not in source:
        for where in (results.get("headline") or {}, results):
            if source in where:
                return where[source]
        raise KeyError(source)
    node = results
    for part in source.split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _ci(results: dict, source: str):
    name, _, filt = source.rpartition("/")[2].partition(",")
    key = f"{name}_ci" + (f",{filt}" if filt else "")
    parent = results if "/" not in source else _lookup(results, source.rpartition("/")[0])
    head = results.get("headline") or {}
    return head.get(key) or parent.get(key)


def test_every_number_equals_its_child_run(micro):
    r, out, _ = micro
    folder = r.folder
    md = (folder / MARKDOWN_FILE).read_text(encoding="utf-8")
    content = json.loads((folder / CLAIMS_FILE).read_text(encoding="utf-8"))
    assert content == r.content
    checked = 0
    for paper in content["papers"]:
        for table in paper["tables"]:
            cells = [c for row in table["rows"] for cs in row["ours"].values() if cs
                     for c in (cs if isinstance(cs, list) else [cs])]
            cells += [c for row in table["our_rows"] for c in row["ours"]]
            for cell in cells:
                if "value" not in cell:
                    continue
                results = json.loads((folder / "runs" / cell["run"] / "results.json").read_text())
                assert cell["value"] == pytest.approx(_lookup(results, cell["source"]) * cell["scale"], rel=1e-12)
                if "lo" in cell:
                    lo, hi = _ci(results, cell["source"])
                    assert (cell["lo"], cell["hi"]) == pytest.approx((lo * cell["scale"], hi * cell["scale"]))
                assert cell_text.ours_cell(cell, table["unit"]) in md
                checked += 1
        for claim in paper["claims"]:
            s = claim.get("statistic")
            if not s or not s["source"].startswith("paired_tests/"):
                continue
            results = json.loads((folder / "runs" / claim["run"] / "results.json").read_text())
            t = _lookup(results, s["source"])
            assert (s["value"], s["lo"], s["hi"], s["p_value"]) == (t["diff"], t["lo"], t["hi"], t["p_value"])
            assert cell_text.statistic_text(claim) in md
            checked += 1
    assert checked >= 10


def test_a_verdict_follows_its_child_statistic(micro, tmp_path):
    """Edit the child's per-question evidence across the rule (its free generations and MCQ
    P(correct)); the resumed reproduction's verdict follows."""
    r, out, data = micro
    copy = tmp_path / r.folder.name
    shutil.copytree(r.folder, copy)
    claim = next(c for c in r.claims if c["id"] == "free-beats-mcq-arithmetic")
    path = copy / "runs" / claim["run"] / "samples.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for right, mcq, expected in ((lambda i: True, 0.1, "holds"), (lambda i: False, 0.9, "contradicted"),
                                 (lambda i: i % 2 == 0, 0.5, "not shown at this n")):
        for i, s in enumerate(rows):  # every generation an answer: right (the gold number) or wrong
            gens = [f" {s['answer']}" if right(i) else f" {s['answer'] + 1}"] * len(s["generations"]["free"])
            s["generations"]["free"], s["p_correct"]["free"] = gens, float(right(i))
            s["p_correct"]["mcq"] = s["mcq"]["p_renorm"] = mcq + 0.01 * (i % 3)
            s.pop("classes", None)  # read as a child written before the class: reclassified from its texts
        path.write_text("".join(json.dumps(s) + "\n" for s in rows))
        again = studies.reproduce("004", tmp_path, run_id=copy.name, resume=True, models=r.content["models"],
                                  scale="micro", data_root=str(data), show_progress=False)
        c = next(x for x in again.claims if (x["id"], x["model"]) == (claim["id"], claim["model"]))
        # the statistical verdict follows; the rules may then demote it, saying which
        assert c.get("statistical_verdict", c["verdict"]) == expected, c.get("error")
        assert c["verdict"] == expected or c.get("qualifier") in ("at chance", "precondition failed")


def test_every_statistic_recomputes_from_claims_and_evidence_alone(micro):
    """benchmarks/recompute_claims.py (scipy/statsmodels, no whitebox_eval) agrees with claims.json."""
    r, _, _ = micro
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import recompute_claims

    ck = recompute_claims.recompute(r.folder)
    assert not ck.bad, ck.bad
    assert not ck.from_counts and not ck.unrecomputed  # every tested cell from per-item evidence, none from summaries
    assert ck.done["McNemar p"] + ck.done["paired bootstrap p (Monte Carlo)"] >= 1 and ck.done["Holm p"] >= 3
    assert sum(v for k, v in ck.done.items() if "chance p" in k) >= 4  # both arms of the arithmetic claims
    assert (r.folder / "evidence.json.gz").is_file() and r.content["evidence"] == "evidence.json.gz"
    assert "items" not in json.dumps(r.content["papers"][0]["claims"][0].get("arms", {}))


def test_children_are_reused_across_reproduction_folders(micro, capsys):
    r, out, data = micro
    again = studies.reproduce("004", out, run_id="second", models=r.content["models"], scale="micro",
                              data_root=str(data), show_progress=False)
    err = capsys.readouterr().err
    assert "reused from " + r.folder.name in err
    assert again.content == r.content


def test_reuse_only_assembles_finished_children_and_runs_nothing(micro, cli, tmp_path):
    r, out, data = micro
    again = studies.reproduce("004", out, run_id="assembled", models=r.content["models"], scale="micro",
                              data_root=str(data), show_progress=False, reuse_only=True)
    assert again.content == r.content  # every child found finished under the same --output
    code, _, err = cli(["reproduce", "004", "--reuse-only", "--scale", "micro", "--model", r.content["models"][0],
                        "--data-root", str(data), "--output", str(tmp_path / "empty")])
    assert code == 0, err
    assert "--reuse-only:" in err and "marked not run" in err
    claims = json.loads(next((tmp_path / "empty").glob("*/" + CLAIMS_FILE)).read_text())
    verdicts = {c["verdict"] for p in claims["papers"] for c in p["claims"]}
    assert verdicts == {"not run"}
    assert not any((tmp_path / "empty").glob("*/runs/*/results.json"))  # nothing ran


def test_a_model_that_cannot_run_is_marked_and_the_others_go_on(micro, tiny, tmp_path):
    _, out, data = micro  # the tiny model's children are reused from the first reproduction
    missing = str(tmp_path / "no-such-model")
    r = studies.reproduce("004", out, run_id="with-a-missing-model", models=[missing, tiny], scale="micro",
                          data_root=str(data), show_progress=False)
    by_model = {}
    for c in r.claims:
        by_model.setdefault(c["model"], set()).add(c["verdict"])
    assert by_model[missing] == {"not run"}
    assert by_model[tiny] - {"not run"}
    reasons = {c["reason"] for c in r.claims if c["model"] == missing}
    assert all("did not load" in x for x in reasons), reasons
