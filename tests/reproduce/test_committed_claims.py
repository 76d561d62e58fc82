"""The committed reproductions recompute from their own claims.json and evidence.json.gz, with
benchmarks/recompute_claims.py (numpy, scipy and statsmodels; it imports nothing of whitebox_eval).

Monte Carlo p-values (permutation, bootstrap) agree within the tolerance the script states
(``max(0.01, 5 sd)`` for R resamples); everything else to 1e-9."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture(scope="module")
def recompute_claims():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import recompute_claims

    return recompute_claims


@pytest.mark.parametrize("scale", ["quick", "cpu"])
def test_every_committed_claim_recomputes_from_its_evidence(scale, recompute_claims):
    folder = RESULTS / f"reproduce_{scale}"
    content = json.loads((folder / "claims.json").read_text(encoding="utf-8"))
    if not (folder / "evidence.json.gz").is_file():
        pytest.skip(f"{folder.relative_to(ROOT)} predates per-item evidence (its re-run under the verdict rules "
                    "is not committed yet); nothing to recompute from")
    assert content.get("evidence") == "evidence.json.gz"
    ck = recompute_claims.recompute(folder)
    assert not ck.bad, "\n".join(ck.bad)
    tested = [c for p in content["papers"] for c in p["claims"] if "statistic" in c]
    assert tested and ck.done["Holm p"] == len(tested)  # every tested claim went through the script
    assert sum(v for k, v in ck.done.items() if "chance p" in k) >= len(tested)  # at least one arm each
    assert not ck.unrecomputed, f"tested claims the evidence cannot recompute: {dict(ck.unrecomputed)}"
