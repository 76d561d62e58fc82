"""Rules 6 and 9 for the off-format block in every paper: one shape (count, share, Wilson interval,
named method) in 001, 002 and 004; 002's rebuilt by benchmarks/recompute_claims.py from each wrong
output's class; a refused 001 cell's classes kept in the evidence and its block rebuilt from them."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from whitebox_eval import stats
from whitebox_eval.reproduce import EVIDENCE_FILE, evidence_bytes, merged, split, verdicts

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import recompute_claims as rc  # noqa: E402
from test_checks import MODEL, _claim  # noqa: E402
from test_rules_off_format_001 import CLAIM, _floor_child, _results  # noqa: E402
from test_rules_off_format_004 import _child, _gens  # noqa: E402

KEYS = {"n", "of", "value", "lo", "hi", "method", "definition"}
CLASS2 = "class2-errors-dominant"


def _gar_child():
    """002's evaluation in small: 30 wrong candidates, 15 off the candidates, 15 off-format, 8 right."""
    classes = (["other_candidate"] * 30 + ["off_candidates"] * 15 + ["off_format"] * 15 + ["target"] * 8)
    tokens = {"other_candidate": " b", "off_candidates": " pet", "off_format": "\n", "target": " a"}
    samples = [{"task_id": "t", "index": i, "kr": False, "g2c": False, "error_class": c, "top_token": tokens[c]}
               for i, c in enumerate(classes)]
    results = {"error_analysis": {"n_errors": 45, "n_wrong": 60, "share,off_format": 0.25,
                                  "share,class2_wrong_candidate": 30 / 45, "share,class1or3_off_candidates": 15 / 45}}
    return results, samples


def _write(folder: Path, cells: list[dict]) -> None:
    """claims.json and evidence.json.gz as a reproduction writes them (Holm within the paper, :func:`split`)."""
    for c in cells:
        verdicts.holm([c])
    slim, ev = split({"papers": [{"number": c.pop("_paper"), "claims": [c]} for c in cells]})
    (folder / "claims.json").write_text(json.dumps(slim))
    (folder / EVIDENCE_FILE).write_bytes(evidence_bytes(ev))


def _tamper_evidence(folder: Path, change) -> None:
    path = folder / EVIDENCE_FILE
    ev = json.loads(gzip.decompress(path.read_bytes()))
    change(ev)
    path.write_bytes(evidence_bytes(ev))


def test_every_papers_off_format_block_has_one_shape_with_its_wilson_interval():
    cell_002 = _claim("002", CLASS2, *_gar_child())
    cell_004 = _claim("004", "mcq-beats-free-triviaqa", *_child(*_gens()))
    ks, cls, samples = _floor_child()
    cell_001 = _claim("001", CLAIM, _results(ks, cls), samples)
    blocks = [cell_002["statistic"]["off_format"], cell_004["statistic"]["off_format"], cell_001["off_format"]]
    assert all(KEYS <= set(b) and b["method"] == "wilson" for b in blocks)
    off = blocks[0]
    wilson = stats.proportion([True] * 15 + [False] * 45)
    assert (off["n"], off["of"]) == (15, 60) and (off["value"], off["lo"], off["hi"]) == (wilson.value, wilson.lo, wilson.hi)
    assert off["tokens"] == ["\n"] and cell_002["statistic"]["value"] == pytest.approx(30 / 45)


def test_recompute_claims_rebuilds_002s_off_format_block_from_each_wrong_outputs_class(tmp_path):
    cell = _claim("002", CLASS2, *_gar_child())
    _write(tmp_path, [{**cell, "_paper": "002"}])
    ck = rc.recompute(tmp_path)
    assert not ck.bad, ck.bad
    assert ck.done["off-format wrong outputs"] == 1 and ck.done["off-format Wilson hi"] == 1
    assert ck.done["error of class other_candidate, per output"] == 45 and not ck.older and not ck.untested
    # one output's class changed in the evidence: an error turned off-format (the share and its arm disagree)
    _tamper_evidence(tmp_path, lambda ev: ev[f"002/{CLASS2}/{MODEL}"]["statistic"]["observations"]["class"]
                     .__setitem__(0, "off_format"))
    bad = rc.recompute(tmp_path).bad
    assert any("off-format wrong outputs" in b for b in bad) and any("Wilson" in b for b in bad)
    assert any("errors counted" in b for b in bad)
    # a class-2 error relabelled off the candidates: the block stands, the arm's 0/1 does not
    _write(tmp_path, [{**cell, "_paper": "002"}])
    _tamper_evidence(tmp_path, lambda ev: ev[f"002/{CLASS2}/{MODEL}"]["statistic"]["observations"]["class"]
                     .__setitem__(0, "off_candidates"))
    bad = rc.recompute(tmp_path).bad
    assert len(bad) == 1 and "error of class other_candidate, per output" in bad[0]
    # a report written before the per-output classes: its block is named as unchecked, never passed silently
    old = {**cell, "statistic": {k: v for k, v in cell["statistic"].items() if k != "observations"}}
    _write(tmp_path, [{**old, "_paper": "002"}])
    ck = rc.recompute(tmp_path)
    assert not ck.bad and ck.older["off-format block without per-item classes"] == 1


def test_a_refused_cells_response_classes_are_evidence_and_its_block_is_rebuilt_from_them(tmp_path):
    ks, cls, samples = _floor_child()
    cell = _claim("001", CLAIM, _results(ks, cls), samples)
    assert "statistic" not in cell and cell["observations"]["class"] == [str(c) for c in cls]
    slim, ev = split({"papers": [{"number": "001", "claims": [json.loads(json.dumps(cell))]}]})
    kept = slim["papers"][0]["claims"][0]
    assert "observations" not in kept and ev[kept["evidence_key"]]["cell"]["observations"]["class"][-1] == "off_format"
    assert merged(slim, ev)["papers"][0]["claims"][0] == {**cell, "evidence_key": kept["evidence_key"]}  # put back
    _write(tmp_path, [{**cell, "_paper": "001"}])
    ck = rc.recompute(tmp_path)
    assert not ck.bad and ck.done["off-format responses"] == 1 and ck.done["off-format Wilson lo"] == 1
    assert not ck.untested  # from each response's class, not from the block's own count
    # one response's class tampered with in the evidence: the block no longer agrees
    _tamper_evidence(tmp_path, lambda ev: ev[kept["evidence_key"]]["cell"]["observations"]["class"]
                     .__setitem__(0, "off_format"))
    bad = rc.recompute(tmp_path).bad
    assert bad and all(b.startswith(f"001 {CLAIM} {MODEL}: off-format") for b in bad)
    assert any("off-format responses recomputed 21" in b for b in bad)
    # a child with no samples: no classes to keep, the block checked from its own count as before
    bare = _claim("001", CLAIM, _results(ks, cls))
    assert "observations" not in bare and bare["off_format"]["n"] == 20
    _write(tmp_path, [{**bare, "_paper": "001"}])
    ck = rc.recompute(tmp_path)
    assert not ck.bad and ck.untested["off-format share of a refused cell"] == 1

