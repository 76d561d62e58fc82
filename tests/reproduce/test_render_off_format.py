"""Rule 6 on the pages: a cell's off-format share (a tested cell's ``statistic.off_format``, a refused
or not-tested one's top-level ``off_format``) is shown once, in one form, by every renderer:
reproduction.md / .html (the claims table and the overview) and reproduce_commit.py's docs tables."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import reproduce_commit as rc  # noqa: E402

from whitebox_eval import power, stats  # noqa: E402
from whitebox_eval.reproduce import cell_text, render, verdicts  # noqa: E402

SHARE = "off-format 2/48 (4.2% [1.2, 14.0])"
REASON = "the correct group has 1 response, too few to compare (" + "x" * 200 + ")"


def _off(k: int, n: int) -> dict:
    w = stats.proportion([True] * k + [False] * (n - k))
    return {"n": k, "of": n, "value": w.value, "lo": w.lo, "hi": w.hi, "definition": "off-format: no answer read"}


def _cell(model: str, **kw) -> dict:
    base = {"id": "mui-correct-like-incorrect-arithmetic", "claim": "MUI of correct and incorrect responses does not differ",
            "cite": "sec. 3.7", "model": model, "direction": "none", "margin": 0.25, "than": 0.0, "effect_unit": "number"}
    return {**base, **kw, "verdict_holm": kw["verdict"]}


def _content() -> dict:
    tested = _cell("tested", verdict="not shown at this n", p_value=0.08,
                   statistic={"value": -0.02, "lo": -0.34, "hi": 0.31, "n": 46, "test": "permutation",
                              "p_value": 0.08, "off_format": _off(2, 48)})
    floor = _cell("floor", verdict=verdicts.UNINFORMATIVE, qualifier="floor", reason=REASON, off_format=_off(2, 48))
    untested = _cell("untested", verdict=verdicts.NOT_TESTED, reason="no key sets", off_format=_off(2, 48))
    plain = _cell("plain", verdict=verdicts.NOT_TESTED, reason="no key sets")
    paper = {"number": "001", "short": "mui", "title": "MUI", "summary": "", "runs": [], "tables": [],
             "claims": [tested, floor, untested, plain], "figures": [], "scaled_down": [], "not_run": []}
    return {"schema": 2, "scale": "quick", "models": ["tested", "floor", "untested", "plain"], "rule": verdicts.RULE,
            "alpha": stats.ALPHA, "power": power.POWER, "papers": [paper]}


def test_the_share_reads_the_block_of_a_tested_or_a_refused_cell_and_nothing_else():
    tested, floor, untested, plain = _content()["papers"][0]["claims"]
    assert [cell_text.off_format_text(c) for c in (tested, floor, untested)] == [SHARE] * 3
    assert cell_text.off_format_text(plain) == ""
    # 002's class-2 share is written without an interval: its count and share only
    assert cell_text.off_format_text({"statistic": {"off_format": {"n": 62, "of": 1218}}}) == "off-format 62/1218 (5.1%)"
    zero = _off(0, 48)
    assert cell_text.off_format_text({"off_format": zero}) == f"off-format 0/48 (0.0% [0.0, {100 * zero['hi']:.1f}])"


def test_every_renderer_shows_the_share_once_per_cell_that_has_one():
    content = _content()
    cells = content["papers"][0]["claims"]
    for c in cells:
        has = c["model"] != "plain"
        for text in (cell_text.short_verdict(c), rc._cell(c), rc._short(c)):
            assert text.count("off-format") == int(has), (c["model"], text)
    # the docs table cuts the reason, never the share: it comes before the reason
    floor = rc._cell(cells[1])
    assert floor.index(SHARE) < floor.index("the correct group") and REASON not in floor
    md = render.markdown(render.blocks(content, "whitebox-eval reproduce all"))
    html = render.html(render.blocks(content, "whitebox-eval reproduce all"), "t")
    # the claims table and the overview: twice for each of the three cells with a block
    assert md.count(SHARE) == 6 and html.count(SHARE) == 6
    table = rc.verdict_table(content)
    assert table.count(SHARE) == 3 and rc.beside_table(content, content, ("a", "b")).count(SHARE) == 3
