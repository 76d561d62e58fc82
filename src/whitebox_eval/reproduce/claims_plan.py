"""What the plan says about the claims besides the child runs: per claim, the rules it is decided
under that a reader should know before the run -- the manipulation it is conditional on, the
positive control of a claim of no difference, the strata of a pooled comparison, its substance
condition -- and every claim the scale cannot test, with the reason."""

from __future__ import annotations

from whitebox_eval.reproduce.spec import Paper


def lines(papers: list[Paper], scale: str) -> list[str]:
    """The plan's claim lines for ``scale``."""
    from whitebox_eval.reproduce.assemble import not_tested_at

    out = [f"claims at scale {scale} (every arm is also tested against its uninformed level):"]
    for p in papers:
        for c in p.claims:
            why = not_tested_at(p, c, scale)
            notes = []
            if why:
                notes.append(why)
            else:
                exp = p.experiment(c.experiment) if c.experiment else None
                for m in [*(exp.manipulation if exp else ()), *c.manipulation]:
                    if any(k in m and m[k] == c.stat.get(k) for k in ("paired", "test_at")):
                        continue
                    if m.get("applies_to") and m["applies_to"] not in (c.stat.get("test_at") or [c.stat.get("paired")]):
                        continue
                    notes.append(f"conditional on manipulation {m['kind']} ({m.get('label', '')})")
                if c.direction == "none":
                    pc = c.positive_control or {}
                    notes.append(f"positive control: {pc['none']}" if "none" in pc else
                                 f"positive control: {pc.get('label') or pc}")
                if c.stat.get("strata"):
                    notes.append(f"strata: {c.stat['strata'].get('field')}"
                                 + (f" without {', '.join(c.stat['strata'].get('strip', ()))}" if c.stat['strata'].get('strip') else ""))
                for sub in c.substance:
                    notes.append(f"substance: {sub.get('label', sub['stat'])} >= {sub['value']}")
            if notes:
                out.append(f"  {p.number} {c.id}: " + "; ".join(notes))
    return out
