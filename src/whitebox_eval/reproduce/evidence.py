"""The per-item evidence behind every verdict, kept beside claims.json so that each p-value and
interval recomputes from the two files alone.

``claims.json`` stays readable: each claim's arms keep their counts and values; their per-item
values (``items``: item id -> value), answer keys (``answers``: item id -> [K, gold, gold position],
:mod:`.chance`), strata (``strata``: item id -> stratum) and a random-head control's per-item draws
(``draw_items``) and a statistic's observations (``observations``: a token-level statistic's value,
group and sequence of each token; MUI's key units per response; PA stability's accuracy and PA of
each item) move to ``evidence.json.gz`` (gzip with no time stamp: a resumed reproduction writes
the same bytes), keyed ``paper/claim/model``; claims.json names the file (``evidence``) and each
claim its key (``evidence_key``). Resampling tests carry their scheme and seed in the claim
(``statistic.scheme``, the stratified test's ``permutations`` and ``seed``).
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

EVIDENCE_FILE = "evidence.json.gz"
ARM_KEYS = ("items", "answers", "strata")
CONTROL_KEYS = ("draw_items",)
STATISTIC_KEYS = ("observations",)


def split(content: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """claims.json's content without the per-item evidence, and the evidence by claim key."""
    slim = json.loads(json.dumps(content))  # a deep copy of plain data
    evidence: dict[str, Any] = {}
    for paper in slim.get("papers", ()):
        for c in paper.get("claims", ()):
            ev: dict[str, Any] = {}
            for name, arm in (c.get("arms") or {}).items():
                moved = {k: arm.pop(k) for k in ARM_KEYS if k in arm}
                if moved:
                    ev.setdefault("arms", {})[name] = moved
            for i, ctl in enumerate(c.get("controls") or ()):
                moved = {k: ctl.pop(k) for k in CONTROL_KEYS if k in ctl}
                if moved:
                    ev.setdefault("controls", {})[str(i)] = moved
            moved = {k: c["statistic"].pop(k) for k in STATISTIC_KEYS if k in (c.get("statistic") or {})}
            if moved:
                ev["statistic"] = moved
            if ev:
                key = f"{paper['number']}/{c['id']}/{c['model']}"
                c["evidence_key"] = key
                evidence[key] = ev
    slim["evidence"] = EVIDENCE_FILE
    return slim, evidence


def dumps(evidence: dict[str, Any]) -> bytes:
    """The evidence as deterministic gzip bytes (no file name, mtime 0)."""
    raw = json.dumps(evidence, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as f:
        f.write(raw)
    return buf.getvalue()


def load(folder: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """claims.json and its evidence from a reproduction folder (evidence {} where there is none)."""
    folder = Path(folder)
    content = json.loads((folder / "claims.json").read_text(encoding="utf-8"))
    path = folder / content.get("evidence", EVIDENCE_FILE)
    evidence = json.loads(gzip.decompress(path.read_bytes())) if path.is_file() else {}
    return content, evidence


def merged(content: dict[str, Any], evidence: dict[str, Any]) -> dict[str, Any]:
    """claims.json's content with the evidence put back in place (as :func:`split` found it)."""
    out = json.loads(json.dumps(content))
    for paper in out.get("papers", ()):
        for c in paper.get("claims", ()):
            ev = evidence.get(c.get("evidence_key", ""), {})
            for name, moved in (ev.get("arms") or {}).items():
                c["arms"][name].update(moved)
            for i, moved in (ev.get("controls") or {}).items():
                c["controls"][int(i)].update(moved)
            c.get("statistic", {}).update(ev.get("statistic") or {})
    return out
