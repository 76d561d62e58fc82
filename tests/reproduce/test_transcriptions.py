"""Every transcribed published figure is checked against the paper's text in ../shared/seeds/.

A row's ``seed`` names the line that holds it (the line's first words once whitespace is
collapsed, and which such line inside the table's region); its readable published numbers
must be the numbers that follow on that line, in order (a subsequence where the extraction
merged cells, a cell is marked unreadable, or each figure is followed by its ± sd: ``sd_after``; ``skip``: numbers before the first figure, such
as an example's operands). Skipped, with the reason, when the seed texts
are not in this clone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from whitebox_eval.reproduce import spec

SEEDS = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"
MIN_FIGURES = 20


def _norm(text: str) -> str:
    return " ".join(text.split())


def _numbers(text: str) -> list[float]:
    text = re.sub(r"(\d),(\d{3})(?!\d)", r"\1\2", text)  # 6,237 -> 6237
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


def _region(lines: list[str], table: spec.Table) -> list[str]:
    start_marker, end_marker = (_norm(m) for m in table.region)
    start = next((i for i, ln in enumerate(lines) if start_marker in _norm(ln)), None)
    assert start is not None, f"{table.cite}: region start {table.region[0]!r} not in the seed text"
    end = next((i for i in range(start + 1, len(lines)) if end_marker in _norm(lines[i])), None)
    assert end is not None, f"{table.cite}: region end {table.region[1]!r} not after its start"
    return lines[start:end + 1]


def _line(region: list[str], seed: dict, where: str) -> str:
    prefix = _norm(seed["line"])
    found = [_norm(ln) for ln in region if _norm(ln).startswith(prefix)]
    k = int(seed.get("occurrence", 1))
    assert len(found) >= k, f"{where}: line {prefix!r} #{k} not in the region (found {len(found)})"
    if "occurrence" not in seed:
        assert len(found) == 1, f"{where}: {prefix!r} starts {len(found)} lines of the region; give its occurrence"
    return found[k - 1][len(prefix):]


def _is_subsequence(wanted: list[float], have: list[float]) -> bool:
    it = iter(have)
    return all(any(abs(w - h) < 1e-9 for h in it) for w in wanted)


def _check_paper(paper: spec.Paper) -> int:
    path = SEEDS / paper.seed
    lines = path.read_text(encoding="utf-8").splitlines()
    checked = 0
    for table in paper.tables:
        region = _region(lines, table)
        for row in table.rows:
            readable = [v for v in row.published if v is not None and v != spec.UNREADABLE]
            if not readable:
                continue
            where = f"paper {paper.number} {table.cite} row {' / '.join(row.label)}"
            assert row.seed, f"{where}: published figures without a seed line"
            rest = _line(region, row.seed, where)
            if table.unit == "text":
                for v in readable:
                    assert _norm(str(v)) in rest, f"{where}: {v!r} not on its line {rest!r}"
            else:
                have = _numbers(rest)[int(row.seed.get("skip", 0)):]
                wanted = [float(v) for v in readable]
                if len(readable) == len(row.published) and not row.seed.get("sd_after"):
                    assert have[:len(wanted)] == pytest.approx(wanted, abs=1e-9), f"{where}: {wanted} vs {have}"
                else:
                    assert _is_subsequence(wanted, have), f"{where}: {wanted} not in order in {have}"
            checked += len(readable)
    return checked


@pytest.mark.parametrize("number", sorted(spec.papers()))
def test_transcribed_figures_match_the_seed_text(number, capsys):
    if not SEEDS.is_dir():
        reason = f"the seed texts are not in this clone ({SEEDS}): transcriptions not checked"
        with capsys.disabled():
            print(f"\nSKIPPED: {reason}")
        pytest.skip(reason)
    paper = spec.papers()[number]
    assert _check_paper(paper) >= MIN_FIGURES, f"paper {number}: fewer than {MIN_FIGURES} figures checked"


def test_every_paper_is_there_and_every_table_cites_its_number():
    papers = spec.papers()
    assert sorted(papers) == ["000", "001", "002", "003", "004"]
    for paper in papers.values():
        assert paper.tables, paper.number
        for table in paper.tables:
            assert re.fullmatch(r"Table \d+", table.cite), (paper.number, table.cite)
            assert table.id.replace("table", "") == table.cite.split()[1], (paper.number, table.id, table.cite)


def test_a_table_without_its_number_is_refused():
    from whitebox_eval.errors import WhiteboxError

    doc = {"paper": "9", "short": "x", "title": "t", "seed": "s.txt",
           "tables": [{"id": "t", "cite": "the big table", "region": ["a", "b"], "columns": ["c"], "rows": []}]}
    with pytest.raises(WhiteboxError, match="cite must name the table number"):
        spec.parse_paper(doc, "x.yaml")


def test_a_wrong_figure_is_caught(tmp_path):
    """The check can fail: one transcribed number changed is reported with its row."""
    import dataclasses

    if not SEEDS.is_dir():
        pytest.skip(f"the seed texts are not in this clone ({SEEDS})")
    paper = spec.papers()["004"]
    t = paper.tables[0]
    bad_row = dataclasses.replace(t.rows[0], published=(0.253, 0.605, 0.048))
    bad = dataclasses.replace(paper, tables=(dataclasses.replace(t, rows=(bad_row, *t.rows[1:])),))
    with pytest.raises(AssertionError, match="gemma-2B"):
        _check_paper(bad)
