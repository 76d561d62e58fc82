"""A trained column spliced into a reproduction that did not run it (reproduce/splice.py,
benchmarks/reproduce_splice.py) is exactly the content of one reproduction that ran everything: 002 at cpu on
two models (its plan as built), synthetic child runs as in test_trained_truth_heads (the GAR-trained column's
truth-heads child and its training, the base models' truth-heads children; the evaluate children not run);
a base model's child run alone, spliced with Holm's family adjusted again; the refusals, each beside the call
it lets through; the script on a tmp copy, and reproduce_commit.py on its
output. Nothing is run."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import assemble, spec, verdicts, write_outputs
from whitebox_eval.reproduce import plan as planning
from whitebox_eval.reproduce.splice import splice, spliced

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_checks import _Study  # noqa: E402
from test_trained_truth_heads import _consumer, _training  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODELS = ["smollm2-135m", "gemma3-270m"]
DATA = {"snli": "snli.jsonl", "geometry_of_truth": "got"}
COLUMN = "smollm2-135m + GAR tasks"


@pytest.fixture(scope="module")
def plan():
    return planning.build([spec.papers()["002"]], MODELS, "cpu", DATA)


def _of_column(plan, column: str = COLUMN) -> set[str]:
    """The column's children and their producer."""
    mine = [c for c in plan.children if c.label == column]
    return {c.run_id for c in mine} | {c.producer for c in mine}


def _outcomes(plan, missing: str = "absent", column_done: bool = True) -> dict[str, assemble.Outcome]:
    """Every child: the trainings done, truth-heads children done (each its own count right), the evaluate
    children skipped; ``missing``: the other trained column's children and producer absent or skipped."""
    other = _of_column(plan, "gemma3-270m + GAR tasks")
    out = {}
    for i, c in enumerate(plan.children):
        if c.mode == "evaluate":
            out[c.run_id] = assemble.Outcome(c, "skipped", reason="--reuse-only: not found")
        elif c.run_id in other and missing == "absent":
            continue
        elif c.run_id in other or (not column_done and c.run_id in _of_column(plan)):
            out[c.run_id] = assemble.Outcome(c, "skipped", reason="--reuse-only: not found")
        elif c.suite == "finetune":
            out[c.run_id] = assemble.Outcome(c, "done", folder="/nonexistent", _study=_Study(_training(True)))
        else:
            out[c.run_id] = assemble.Outcome(c, "done", folder="/nonexistent", _study=_Study(*_consumer(30 + 4 * i)))
    return out


def _minus(outcomes, ids, how: str):
    """``outcomes`` less ``ids`` (``absent``), or with them skipped (``skipped``: as a --reuse-only assembly)."""
    if how == "absent":
        return {k: v for k, v in outcomes.items() if k not in ids}
    return {k: (assemble.Outcome(v.child, "skipped", reason="--reuse-only: not found") if k in ids else v)
            for k, v in outcomes.items()}


def _narrow(plan, keep: set[str], models: list[str]):
    """``plan`` with only the children ``keep``, on ``models`` (as a reproduction of those children alone)."""
    small = dataclasses.replace(plan, models=models, children=[c for c in plan.children if c.run_id in keep])
    return dataclasses.replace(small, filled={p.number: planning.instances(p, small) for p in small.papers})


def _json(x) -> str:
    return json.dumps(x, sort_keys=True, allow_nan=False)


@pytest.mark.parametrize("how", ["absent", "skipped"])
def test_a_spliced_column_is_the_content_of_one_reproduction_that_ran_it(plan, how):
    every = _outcomes(plan, missing=how)
    ids = _of_column(plan)
    full = assemble.content(plan, every)
    base = assemble.content(plan, _minus(every, ids, how))
    new = assemble.content(plan, {k: v for k, v in every.items() if k in ids})
    got = splice(base, new, [COLUMN])
    assert _json(got) == _json(full)  # floats exactly: the same code on the same runs
    # the column changed (else the test proves nothing), and nothing else did
    mine = [c for p in full["papers"] for c in p["claims"] if c.get("holm_family") == COLUMN]
    assert {c["verdict"] for c in mine} - {"not run", "not tested"}
    assert _json(base) != _json(full)
    rows = spliced(base, new, [COLUMN])[1]
    assert [r["id"] for r in rows] == [c["id"] for c in mine] and all(r["old"][0] == "not run" for r in rows)
    assert {r["new"] for r in rows} == {(c["verdict"], c["verdict_holm"]) for c in mine}


def test_a_column_from_a_reproduction_of_its_children_alone_on_one_model_is_the_same(plan):
    """The new reproduction planned on fewer models and only the column's children (``--model``): the same."""
    every = _outcomes(plan)
    ids = _of_column(plan)
    small = _narrow(plan, ids, ["smollm2-135m"])
    new = assemble.content(small, {k: v for k, v in every.items() if k in ids})
    assert new["papers"][0]["models"] == ["smollm2-135m", COLUMN] and len(new["papers"][0]["runs"]) == len(ids)
    got = splice(assemble.content(plan, _minus(every, ids, "skipped")), new, [COLUMN])
    assert _json(got) == _json(assemble.content(plan, every))


def test_figures_of_the_runs_new_ran_replace_base_s_in_the_plan_s_order(plan):
    every = _outcomes(plan)
    ids = _of_column(plan)
    base = assemble.content(plan, _minus(every, ids, "skipped"))
    new = assemble.content(plan, {k: v for k, v in every.items() if k in ids})
    runs = [r["run"] for r in base["papers"][0]["runs"]]
    column_run = next(r for r in runs if r in ids and "truth-heads" in r)  # done in new
    first, last = runs[0], runs[-1]
    base["papers"][0]["figures"] = [{"kind": "map", "run": first, "path": f"runs/{first}/a.svg"},
                                    {"kind": "map", "run": column_run, "path": "stale.svg"},
                                    {"kind": "map", "run": last, "path": f"runs/{last}/b.svg"}]
    new["papers"][0]["figures"] = [{"kind": "map", "run": column_run, "path": f"runs/{column_run}/c.svg"}]
    got = splice(base, new, [COLUMN])["papers"][0]["figures"]
    assert [f["path"] for f in got] == [f"runs/{first}/a.svg", f"runs/{column_run}/c.svg", f"runs/{last}/b.svg"]


def _pair(plan, column_done: bool = True):
    every = _outcomes(plan, column_done=column_done)
    ids = _of_column(plan)
    return (assemble.content(plan, _minus(every, ids, "skipped")),
            assemble.content(plan, {k: v for k, v in every.items() if k in ids}))


def test_a_column_no_paper_has_is_refused(plan):
    base, new = _pair(plan)
    with pytest.raises(WhiteboxError, match=r"paper 002 has no column 'smollm2-135m \+ planted facts' in base"):
        splice(base, new, ["smollm2-135m + planted facts"])
    assert splice(base, new, [COLUMN])


def test_a_column_new_did_not_run_is_refused(plan):
    base, new = _pair(plan, column_done=False)
    with pytest.raises(WhiteboxError, match="every claim of 'smollm2-135m \\+ GAR tasks' in new is not run: nothing"):
        splice(base, new, [COLUMN])
    assert splice(*_pair(plan), [COLUMN])


def _base_child(plan, model: str = "smollm2-135m") -> set[str]:
    """A base model's truth-heads child (its claims read it; no table cell or other claim does)."""
    return {c.run_id for c in plan.children if c.label is None and c.model == model and "truth-heads" in c.run_id}


@pytest.mark.parametrize("how", ["absent", "skipped"])
def test_a_base_model_s_runs_new_ran_spliced_are_the_content_of_one_reproduction_that_ran_them(plan, how):
    """A base child that had not run (``base``), run alone on its model (``new``): its claims replaced, the base
    models' Holm family adjusted again, and the result is one reproduction's that ran everything."""
    every = _outcomes(plan)
    ids = _base_child(plan)
    assert len(ids) == 1
    full = assemble.content(plan, every)
    base = assemble.content(plan, _minus(every, ids, how))
    new = assemble.content(_narrow(plan, ids, ["smollm2-135m"]), {k: v for k, v in every.items() if k in ids})
    got = splice(base, new, ["smollm2-135m"])
    assert _json(got) == _json(full)
    (run,) = ids
    mine = [c for c in full["papers"][0]["claims"] if c.get("run") == run]
    assert mine and all(c["model"] == "smollm2-135m" for c in mine)
    assert {c["verdict"] for c in mine} - {"not run", "not tested"}
    # the kept claims' adjusted p-values moved with the family (so the test proves the adjustment is made again)
    kept = [(b, f) for b, f in zip(base["papers"][0]["claims"], full["papers"][0]["claims"])
            if not f.get("holm_family") and f.get("run") != run and b.get("p_holm") is not None]
    assert kept and any(b["p_holm"] != f["p_holm"] for b, f in kept)
    rows = spliced(base, new, ["smollm2-135m"])[1]
    assert [r["id"] for r in rows if r["part"] == "replaced"] == [c["id"] for c in mine]
    assert all(r["old"][0] == "not run" for r in rows if r["part"] == "replaced")
    held = {(c["id"], c["model"]): c for c in full["papers"][0]["claims"]}
    assert all(r["new"] == (held[r["id"], r["model"]]["verdict"], held[r["id"], r["model"]]["verdict_holm"])
               for r in rows)
    assert all(r["old"][1] != r["new"][1] for r in rows if r["part"] == "Holm")


def test_a_base_model_whose_runs_new_did_not_run_is_refused(plan):
    every = _outcomes(plan)
    ids = _base_child(plan)
    base = assemble.content(plan, _minus(every, ids, "skipped"))
    new = assemble.content(plan, {k: v for k, v in every.items() if k in ids})
    with pytest.raises(WhiteboxError, match="new ran no run of base model 'gemma3-270m': nothing to splice"):
        splice(base, new, ["gemma3-270m"])
    assert splice(base, new, ["smollm2-135m"])


def test_a_base_model_s_run_that_another_claim_reads_is_refused(plan):
    """A claim outside the base model (across models, say) that reads the run new ran cannot be spliced: it
    reads runs new did not run; base's cells outside that read it likewise (new ran a trained run too)."""
    every = _outcomes(plan)
    ids = _base_child(plan)
    base = assemble.content(plan, _minus(every, ids, "skipped"))
    new = assemble.content(_narrow(plan, ids, ["smollm2-135m"]), {k: v for k, v in every.items() if k in ids})
    (run,) = ids
    across = json.loads(json.dumps(new))
    claim = next(c for c in across["papers"][0]["claims"] if c.get("run") == run)
    across["papers"][0]["claims"].append(dict(claim, id="a-law", model="all"))
    with pytest.raises(WhiteboxError, match=f"claim a-law on 'all' reads run\\(s\\) {run} that new ran"):
        splice(base, across, ["smollm2-135m"])
    both = assemble.content(plan, {k: v for k, v in every.items() if k in ids | _of_column(plan)})
    with pytest.raises(WhiteboxError, match="cells outside 'smollm2-135m' read run\\(s\\) .*gar-tasks.* that new ran"):
        splice(base, both, ["smollm2-135m"])
    assert splice(base, both, ["smollm2-135m", COLUMN])  # the trained column named too: each its own part


def test_any_other_difference_is_refused_naming_it(plan):
    base, new = _pair(plan)
    assert splice(base, new, [COLUMN])
    for where, edit in (("content.scale", lambda c: c.update(scale="quick")),
                        ("paper 002.title", lambda c: c["papers"][0].update(title="another")),
                        ("paper 002.not_run", lambda c: c["papers"][0]["not_run"].append({"what": "x"})),
                        ("paper 002 table", lambda c: c["papers"][0]["tables"][0]["rows"][0].update(published=[1.0]))):
        changed = json.loads(json.dumps(new))
        edit(changed)
        with pytest.raises(WhiteboxError, match=f"base and new differ at {where}"):
            splice(base, changed, [COLUMN])
    more = json.loads(json.dumps(new))
    more["papers"][0]["models"] = ["gemma3-270m", *more["papers"][0]["models"]]
    with pytest.raises(WhiteboxError, match="not base's .* less some, in its order"):
        splice(base, more, [COLUMN])


def test_how_the_scale_differs_is_new_s_for_the_experiments_new_ran_alone(plan):
    """A recipe chosen since changes its experiment's text: new's text for an experiment whose runs new ran
    (the training and the column's children), base's elsewhere, and any other text difference refused."""
    base, new = _pair(plan)
    ran = {e for r in new["papers"][0]["runs"] if r.get("status") == "done" for e in r["experiments"]}
    assert "gar-train" in ran and "evaluate" not in ran
    changed = json.loads(json.dumps(new))
    for e in changed["papers"][0]["scaled_down"]:
        e["differs"] = "a recipe chosen since"
    with pytest.raises(WhiteboxError, match="base and new differ at paper 002 scaled_down evaluate"):
        splice(base, changed, [COLUMN])
    for e in changed["papers"][0]["scaled_down"]:
        if e["experiment"] not in ran:
            e["differs"] = next(b["differs"] for b in base["papers"][0]["scaled_down"] if b["experiment"] == e["experiment"])
    got = {e["experiment"]: e["differs"] for e in splice(base, changed, [COLUMN])["papers"][0]["scaled_down"]}
    assert {x for x, text in got.items() if text == "a recipe chosen since"} == ran & set(got) and "evaluate" in got
    retitled = json.loads(json.dumps(new))
    retitled["papers"][0]["scaled_down"][2]["title"] = "another"
    with pytest.raises(WhiteboxError, match="base and new differ at paper 002 scaled_down"):
        splice(base, retitled, [COLUMN])


def test_a_column_re_run_under_new_ids_replaces_base_s_runs_of_the_same_experiments(plan):
    """The column re-ran with a recipe chosen since (its settings, so its run ids, changed): new's runs replace
    base's of the same model and experiments, and the result is one reproduction's that ran the new runs."""
    every = _outcomes(plan)
    ids = _of_column(plan)
    full = assemble.content(plan, every)
    base = assemble.content(plan, _minus(every, ids, "skipped"))
    new = assemble.content(plan, {k: v for k, v in every.items() if k in ids})

    def renamed(content):
        text = json.dumps(content)
        for rid in ids:
            text = text.replace(rid, rid[:-10] + "0123456789")
        return json.loads(text)

    assert _json(splice(base, renamed(new), [COLUMN])) == _json(renamed(full))
    stray = renamed(new)
    next(r for r in stray["papers"][0]["runs"] if r["run"].startswith("finetune-smollm2"))["experiments"] = ["x"]
    with pytest.raises(WhiteboxError, match=r"which base lacks, and base holds 0 run\(s\) of .* to replace"):
        splice(base, stray, [COLUMN])


def test_base_s_cells_that_read_a_run_new_ran_are_refused(plan):
    """new ran a base model's child too: base's claims on it would read the new run, so not exact."""
    every = _outcomes(plan)
    ids = _of_column(plan)
    base = assemble.content(plan, _minus(every, ids, "skipped"))
    with pytest.raises(WhiteboxError, match="read run\\(s\\) .*gar-truth-heads-smollm2-135m-truth-.* that new ran"):
        splice(base, assemble.content(plan, every), [COLUMN])


def _report(folder: Path, content: dict, runs: dict[str, str]) -> None:
    """A reproduction folder: claims.json with its evidence, and runs/<id>/{results.json,config.yaml,samples.jsonl}."""
    folder.mkdir(parents=True)
    write_outputs(folder, content, "whitebox-eval reproduce 002 --scale cpu")
    for run, config in runs.items():
        (folder / "runs" / run).mkdir(parents=True)
        (folder / "runs" / run / "results.json").write_text(json.dumps({"run": run}))
        (folder / "runs" / run / "config.yaml").write_text(config)
        (folder / "runs" / run / "samples.jsonl").write_text("{}\n")


def test_the_script_writes_a_folder_reproduce_commit_accepts(plan, tmp_path):
    every = _outcomes(plan)
    ids = _of_column(plan)
    base = assemble.content(plan, _minus(every, ids, "skipped"))
    data = tmp_path / "datasets"
    committed, new = tmp_path / "committed", tmp_path / "out" / "new"
    done = [r["run"] for r in base["papers"][0]["runs"] if r["status"] == "done"]
    _report(committed, base, {r: "model: smollm2-135m\n" for r in done})
    new_content = assemble.content(plan, {k: v for k, v in every.items() if k in ids})
    (producer,) = [i for i in ids if i.startswith("finetune")]
    new_content["papers"][0]["figures"] = [{"kind": "map", "run": producer, "path": f"{new}/runs/{producer}/f.svg"}]
    _report(new, new_content, {r: f"model: {new}/runs/{producer}/checkpoints\ndata: {data}/snli.jsonl\n" for r in ids})
    out = tmp_path / "spliced"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "reproduce_splice.py"), str(committed), str(new),
           "--column", COLUMN, "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "paper 002: 12 cells replaced, 7 changed verdict (raw / Holm)" in r.stdout
    assert "  true-false-intervention-raises [smollm2-135m + GAR tasks]: not run / not run -> " in r.stdout
    # the same claims.json and evidence as one reproduction that ran everything, its figure path into OUT
    full = assemble.content(plan, every)
    full["papers"][0]["figures"] = [{"kind": "map", "run": producer, "path": f"{out.resolve()}/runs/{producer}/f.svg"}]
    (tmp_path / "full").mkdir()
    write_outputs(tmp_path / "full", full, "x")
    for name in ("claims.json", "evidence.json.gz"):
        assert (out / name).read_bytes() == (tmp_path / "full" / name).read_bytes(), name
    ran = {i for i in ids if "evaluate" not in i}  # the column's evaluate child skipped in new too
    assert "(2 runs from the new reproduction)" in r.stdout and len(ran) == 2
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(set(done) | ran)
    assert (out / "runs" / producer / "samples.jsonl").is_file()  # the new runs whole
    assert f"{out.resolve()}/runs/{producer}/checkpoints" in (out / "runs" / producer / "config.yaml").read_text()
    assert str(new) in (new / "runs" / producer / "config.yaml").read_text()  # its source as it was
    # reproduce_commit.py takes it: every path relative, the spliced runs among those copied
    dest, md, page = tmp_path / "dest", tmp_path / "r.md", tmp_path / "page.md"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reproduce_commit.py"), str(out), "--data-root",
                        str(data), "--dest", str(dest), "--md", str(md), "--page", str(page)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert (dest / "runs" / producer / "config.yaml").read_text() == (
        f"model: runs/{producer}/checkpoints\ndata: snli.jsonl\n")
    assert f'"path": "runs/{producer}/f.svg"' in (dest / "claims.json").read_text()
    # a second --out over the first is refused; a column new did not run stops it, the message said
    assert subprocess.run(cmd, capture_output=True, text=True).returncode != 0
    bad = subprocess.run(cmd[:-4] + ["--column", "smollm2-135m", "--out", str(tmp_path / "other")],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "that new ran: splicing would not be exact" in bad.stderr
    assert not (tmp_path / "other").exists()


def test_the_committed_cpu_report_spliced_with_its_own_trained_column_is_itself():
    """On the committed report's own structure (per-column table cells, blocks of our rows, figures of the
    column's runs): 000's planted-facts column from a copy of 000 in which only that column and its training
    ran is the report unchanged."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reproduce_splice import read

    base = read(ROOT / "benchmarks" / "results" / "reproduce_cpu")
    column = "smollm2-135m + planted facts"
    new = json.loads(json.dumps(base))
    new["papers"] = [p for p in new["papers"] if p["number"] == "000"]
    runs = new["papers"][0]["runs"]
    training = {r["run"] for r in runs if r["run"].startswith("finetune-smollm2-135m-planted-facts")}
    for r in runs:
        if r["model"] != column and r["run"] not in training:
            r["status"] = "skipped"
    assert any(f["run"] in {r["run"] for r in runs if r["model"] == column} for f in base["papers"][0]["figures"])
    assert _json(splice(base, new, [column])) == _json(base)
    assert len(spliced(base, new, [column])[1]) == 4
    with pytest.raises(WhiteboxError, match="paper 000 has no column 'smollm2-135m \\+ arithmetic' in base"):
        splice(base, new, ["smollm2-135m + arithmetic"])


def test_the_committed_cpu_report_spliced_with_a_base_model_s_own_run_is_itself():
    """On the committed report: 000's base Gemma with one of its own runs, from a copy in which only that run
    ran, is the report unchanged, Holm's family of the base models adjusted again included (the adjustment
    made from the claims as committed gives the committed p_holm and verdicts after Holm)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reproduce_splice import read

    base = read(ROOT / "benchmarks" / "results" / "reproduce_cpu")
    new = json.loads(json.dumps(base))
    new["papers"] = [p for p in new["papers"] if p["number"] == "000"]
    runs = new["papers"][0]["runs"]
    run = next(r["run"] for r in runs if r["model"] == "gemma3-270m" and r["run"].startswith("mcqa-gemma3-270m-mmlu"))
    for r in runs:
        if r["run"] != run:
            r["status"] = "skipped"
    got = splice(base, new, ["gemma3-270m"])
    assert _json(got) == _json(base)
    rows = spliced(base, new, ["gemma3-270m"])[1]
    assert rows and {r["part"] for r in rows} == {"replaced"} and all(r["old"] == r["new"] for r in rows)
    assert any(c.get("p_holm") is not None for p in got["papers"] if p["number"] == "000" for c in p["claims"])


def _blank(x, run: str):
    """``x`` with every table cell that reads another run than ``run`` not run (a reproduction that ran ``run``
    alone), part by part in a list of cells."""
    if isinstance(x, list):
        return [_blank(v, run) for v in x]
    if isinstance(x, dict) and isinstance(x.get("run"), str):
        return x if x["run"] == run else {"not_run": "--reuse-only: no finished copy under --output"}
    return x


def test_a_base_model_s_run_among_others_in_one_row_is_merged_part_by_part():
    """001's tables list several runs of one model in a row of ours (a cell per task): a base model's run new ran
    alone replaces its parts only, and base's other parts stay. (Its claims across models read it too, which
    the splice refuses: here they are taken out of both, to reach the tables.)"""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reproduce_splice import read

    base = read(ROOT / "benchmarks" / "results" / "reproduce_cpu")
    base["papers"] = [p for p in base["papers"] if p["number"] == "001"]
    paper = base["papers"][0]
    paper["claims"] = [c for c in paper["claims"] if c["model"] != "all"]
    verdicts.holm([c for c in paper["claims"] if not c.get("holm_family")])  # the family without them
    run = next(r["run"] for r in paper["runs"]
               if r["model"] == "gemma3-270m" and r["run"].startswith("mui-gemma3-270m-gsm8k"))
    new = json.loads(json.dumps(base))
    for r in new["papers"][0]["runs"]:
        if r["run"] != run:
            r["status"] = "skipped"
    for t in new["papers"][0]["tables"]:
        t["our_rows"] = [dict(r, ours=_blank(r["ours"], run)) if r.get("model") == "gemma3-270m" else r
                         for r in t["our_rows"]]
        t["rows"] = [dict(r, ours={m: _blank(c, run) if m == "gemma3-270m" else c for m, c in r["ours"].items()})
                     if isinstance(r.get("ours"), dict) else r for r in t["rows"]]
    mixed = [(b, n) for bt, nt in zip(paper["tables"], new["papers"][0]["tables"])
             for b, n in zip(bt["our_rows"], nt["our_rows"]) if b != n and run in json.dumps(b)]
    assert mixed  # rows holding this run and others: taking new's whole row would lose the others
    assert _json(splice(base, new, ["gemma3-270m"])) == _json(base)
    across = json.loads(json.dumps(new))
    row = next(r for t in across["papers"][0]["tables"] for r in t["our_rows"] if run in json.dumps(r))
    cell = next(c for c in row["ours"] if isinstance(c, dict) and c.get("run") == run)
    cell["runs"] = [run, "another-run"]
    with pytest.raises(WhiteboxError, match="a cell of 'gemma3-270m' reads run\\(s\\) another-run besides"):
        splice(base, across, ["gemma3-270m"])


def test_a_splice_extends_the_committed_command_line():
    """--md: the report's first line keeps every splice that made it, in order; without it, the papers' command."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reproduce_splice import command

    base = {"papers": [{"number": "000"}, {"number": "002"}], "scale": "cpu"}
    plain = "# Reproducing the papers\n\n`whitebox-eval reproduce 000 002 --scale cpu`: scale cpu, models m.\n"
    once = command(base, ["m + A"], "r1", plain)
    assert once == "whitebox-eval reproduce 000 002 --scale cpu; m + A from r1 (benchmarks/reproduce_splice.py)"
    twice = command(base, ["m", "m + B"], "r2", plain.replace(plain.split("`")[1], once))
    assert twice == ("whitebox-eval reproduce 000 002 --scale cpu; m + A from r1, m, m + B from r2 "
                     "(benchmarks/reproduce_splice.py)")
    assert command(base, ["m + A"], "r1", None) == once  # no markdown: this splice alone
