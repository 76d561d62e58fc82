"""The committed reproduction's claims re-assembled under the verdict rules from the committed
child results.json alone (its samples.jsonl are not committed), for the note on what changes.

    python benchmarks/reproduce_rules_preview.py cpu > benchmarks/results/reproduce_cpu_rules_preview.md

The children are named by the YAMLs they were run with (commit 7624415); the claims are today's.
A verdict that needs the children's per-item samples (every arm read from samples, group gaps,
stage gaps, clustered tokens, the fine-tune check) is listed as "needs samples": the re-run decides
it. The rest is what the new rules make of the committed numbers."""
import json, subprocess, sys
from dataclasses import dataclass, field
from pathlib import Path
import yaml
from whitebox_eval.reproduce import spec, assemble, plan as planning, data as bench, verdicts
from whitebox_eval.reproduce.plan import Plan

ROOT = Path(__file__).resolve().parents[1]
scale = sys.argv[1] if len(sys.argv) > 1 else "cpu"
COMMITTED = ROOT / f"benchmarks/results/reproduce_{scale}"
OLD = "7624415"

def old_paper(name):
    doc = yaml.safe_load(subprocess.check_output(["git", "-C", str(ROOT), "show", f"{OLD}:src/whitebox_eval/reproduce/papers/{name}"]))
    doc["claims"] = []; doc["tables"] = []
    return spec.parse_paper(doc, name)

names = sorted(p.name for p in spec.PAPERS_DIR.glob("*.yaml"))
old = [old_paper(n) for n in names]
new = list(spec.papers().values())
needed = planning.needed_data(old, scale)
located = bench.locate(list(needed), {}, bench.data_root(None), needed)
oplan = planning.build(old, ["smollm2-135m", "gemma3-270m"], scale, located, allow_code_execution=True)
plan = Plan(new, oplan.models, scale, oplan.data, oplan.children)

@dataclass
class Study:
    results: dict
    samples: list = field(default_factory=list)

outcomes = {}
for ch in oplan.children:
    f = COMMITTED / "runs" / ch.run_id
    if (f / "results.json").is_file():
        outcomes[ch.run_id] = assemble.Outcome(ch, "done", folder=str(f), _study=Study(json.loads((f / "results.json").read_text())))
    else:
        outcomes[ch.run_id] = assemble.Outcome(ch, "failed", reason="not committed")
content = assemble.content(plan, outcomes)
before = json.loads((COMMITTED / "claims.json").read_text())
prev = {(p["number"], c["id"], c["model"]): c for p in before["papers"] for c in p["claims"]}
NEEDS = ("could not be evaluated", "0 samples", "0 vs 0 samples", "no sample has", "groups too small",
         "no ID item", "has 0 samples", "sequences with a correct token 0")
rows = []
changed: dict[str, int] = {}
pending: dict[str, int] = {}
for p in content["papers"]:
    for c in p["claims"]:
        o = prev.get((p["number"], c["id"], c["model"]))
        ov = o["verdict"] if o else "(new claim)"
        reason = str(c.get("reason", ""))
        needs = any(x in reason for x in NEEDS) or (c["verdict"] == "uninformative" and not reason)
        nv = "needs samples (the re-run decides)" if needs else \
            c["verdict"] + (f" ({c['qualifier']})" if c.get("qualifier") else "")
        if needs:
            pending[p["number"]] = pending.get(p["number"], 0) + 1
        elif o and ov != c["verdict"]:
            changed[p["number"]] = changed.get(p["number"], 0) + 1
        if needs or ov != c["verdict"] or c.get("qualifier") or not o:
            why = "" if needs else reason if (c.get("qualifier") or c["verdict"] in ("not run", "not tested")) else ""
            cav = "" if needs else "; ".join(c.get("caveats") or [])
            rows.append((p["number"], c["id"], c["model"], ov, nv, (why + (" / " if why and cav else "") + cav)[:400]))
print(f"# The committed {scale} reproduction under the verdict rules (from committed results.json only)\n")
print(__doc__.split("\n\n", 2)[2] if __doc__ else "")
print(f"\nVerdicts the rules change on the committed numbers, per paper: {changed} (total {sum(changed.values())}); "
      f"cells that need the children's samples (decided by the re-run): {pending} (total {sum(pending.values())}).\n")
print("| paper | claim | model | committed | new rules | why |\n|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(x).replace("|", "/") for x in r) + " |")
