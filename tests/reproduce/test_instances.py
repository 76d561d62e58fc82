"""What the plan decides about each paper before any child runs (:mod:`whitebox_eval.reproduce.instances`):
assembly reads it and fills only what a child's results fill in."""

from __future__ import annotations

from whitebox_eval.reproduce import assemble
from whitebox_eval.reproduce import plan as plan_mod
from whitebox_eval.reproduce.data import BENCHMARKS
from whitebox_eval.reproduce.spec import resolve


def test_the_plan_fills_a_papers_tables_and_decides_its_claims_once():
    gar = resolve(["002"])[0]
    data = {name: f"/data/{name}.jsonl" for name in BENCHMARKS}
    p = plan_mod.build([gar], [], "quick", data)
    mine = p.filled["002"]
    assert mine.models == p.models_for("002") == list(plan_mod.DEFAULT_MODELS)
    assert mine.runs_at == [e.id for e in gar.experiments if plan_mod.points(e, "quick")] and mine.runs_at
    assert mine.env["data.snli.name"] == "snli.jsonl" and mine.env["phase"] == "{phase}"
    table = next(t for t in gar.tables if any(r.ours for r in t.ours_rows))
    specs = mine.tables[table.id].our_rows[0]
    assert specs[0]["at"] == ["probes", "snli.jsonl", "acc"] and specs[1] is None
    for c in gar.claims:
        assert mine.claims[c.id].not_tested == plan_mod.not_tested_at(gar, c, "quick")
    # assembly fills the child's own values into what the plan filled, and nothing else
    spec = {"at": ["{phase}/ood", "{data.snli.name}"]}
    assert assemble._filled(spec, mine.env, {"phase": "finetuned"}) == {"at": ["finetuned/ood", "snli.jsonl"]}
    assert assemble._filled(spec, mine.env) == {"at": ["{phase}/ood", "snli.jsonl"]}  # across models: no child
