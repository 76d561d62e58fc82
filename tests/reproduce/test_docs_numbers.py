"""Numbers quoted in docs/reproduce.md's "what holds" are checked against the committed claims.json.

A block ``<!-- numbers: PATH/claims.json -->`` ... ``<!-- /numbers -->`` binds prose to a committed
reproduction. Inside it every number carries its claims: a tag group ``(claim PAPER/ID, MODEL; ...)``
closes a segment (the text since the previous tag group), and each number of the segment must be a
value of one of the group's claims (any number the claim holds: its statistic, arms, levels,
controls' draws and rank counts, p-values; or one written in its texts: the claim's own words,
its published text, its checks' and rules' texts) as printed. Rounding: a number with d decimals matches a value v when it lies within half a
unit of its last digit of v, or of 100 v (percent, points); an unsigned number matches |v|; ``< q``
matches any value in [0, q); ``a/b`` is two integers. A rank count is matched in both directions
(draws at least as high and at most as high as the selected value), so the prose states the one the
claim's direction reads. How a child ran is checked too: "N key heads/neurons" against the k its
config ran (``ablation_k``) or the claim names (``k = N``), and "N of M draws ... at least as
low/high" against the draws counted in that direction, which must be the claim's. Section, table,
figure and appendix references and backticked spans are not quoted numbers. A number after the last
tag group of a bullet is untagged and fails. The verdicts the prose states ("holds", "not shown",
"uninformative (at chance)", "holds before Holm") are checked too, against the verdict names of
:mod:`whitebox_eval.reproduce.verdicts` and their claims' raw or Holm verdict (:func:`said_verdicts`
states the rule, negation and Holm included).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from pathlib import Path

import pytest

from whitebox_eval.reproduce import verdicts

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reproduce.md"
BLOCK = re.compile(r"<!-- numbers: (?P<path>\S+) -->(?P<body>.*?)<!-- /numbers -->", re.S)
TAG = re.compile(r"\(claim\s+(?P<refs>[^()]*?)\)")
REF = re.compile(r"^\s*(?P<paper>\d{3})/(?P<id>[a-z0-9-]+), (?P<model>[a-z0-9.-]+(?: \+ [A-Za-z0-9][A-Za-z0-9 .-]*?)?)\s*$")  # a trained column: "base + label"
NOT_QUOTED = re.compile(r"`[^`]*`|\*\d{3}\b[^*]*\*|\b(?:sec|Table|Tables|Fig|App|Corollary)\.? ?[A-Z]?\d+(?:\.\d+)*[a-z]?")
NUMBER = re.compile(r"(?P<cmp><\s*)?(?<![\w.])(?P<num>[+-]?\d+(?:,\d{3})*(?:\.\d+)?(?:e[+-]?\d+)?)(?:/(?P<den>\d+))?(?![\w])")



def _words(name: str) -> str:
    return r"\s+".join(map(re.escape, name.split()))


def _verdict_name(name: str) -> str:
    """A verdict's name as prose writes it: its first two words, the rest optional ("not shown")."""
    head, rest = name.split()[:2], name.split()[2:]
    return _words(" ".join(head)) + (rf"(?:\s+{_words(' '.join(rest))})?" if rest else "")


#: the project's own verdict names (verdicts.VERDICTS) and qualifiers (those verdicts.py writes)
QUALIFIERS = sorted({q for pair in re.findall(r'_demote\(out, \w+, "([^"]+)"|"qualifier": "([^"]+)"',
                                               inspect.getsource(verdicts)) for q in pair if q})
_QUAL = "|".join(_words(q) for q in sorted(QUALIFIERS, key=len, reverse=True))
VERDICT = re.compile(
    r"(?<![\w-])(?P<v>" + "|".join(_verdict_name(v) for v in sorted(verdicts.VERDICTS, key=len, reverse=True))
    + rf")(?![\w-])(?:\**\s*\((?P<q>{_QUAL})\))?|\*+(?P<alone>{_QUAL})\*+", re.I)
NEGATED = re.compile(r"\b(?:not|no longer|never)\b(?:\W+\w+){0,2}\W*$", re.I)
CLAUSE_END = re.compile(r"[;:.(]\s|\(claim|$")

def claim_values(c: dict) -> list[float]:
    """Every number a claim holds, rank counts in both directions, and those written in its text."""
    out: list[float] = []

    def walk(x) -> None:
        if isinstance(x, bool):
            return
        if isinstance(x, int | float):
            if math.isfinite(x):
                out.append(float(x))
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    texts: list[str] = []

    def strings(x) -> None:
        if isinstance(x, str):
            texts.append(x)
        elif isinstance(x, dict | list):
            for v in x.values() if isinstance(x, dict) else x:
                strings(v)

    walk(c)
    strings(c)
    for ctl in c.get("controls") or ():
        draws, sel = ctl.get("draws"), ctl.get("selected")
        if draws and sel is not None:
            out += [float(sum(d >= sel for d in draws)), float(sum(d <= sel for d in draws))]
    for text in texts:  # the claim's own words, its published text, its rules' and checks' texts
        for m in NUMBER.finditer(NOT_QUOTED.sub(" ", text)):  # a count "k/n" written there holds both
            out += [float(m["num"].replace(",", ""))] + ([float(m["den"])] if m["den"] else [])
    return out


def matches(num: str, values: list[float], below: bool = False) -> bool:
    q = float(num.replace(",", ""))
    if below:
        return any(0 <= v < q for v in values)
    mantissa, _, exp = num.replace(",", "").partition("e")
    digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
    tol = 0.5 * 10.0 ** (int(exp or 0) - digits) + 1e-9 * max(1.0, abs(q))
    signed = num[0] in "+-"
    for v in values:
        for s in (1.0, 100.0):
            w = s * v if signed else abs(s * v)
            if abs(w - q) <= tol:
                return True
    return False


def segments(body: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """(text, [(paper, id, model), ...]) per segment; the text after a bullet's last tag, untagged."""
    out = []
    for bullet in re.split(r"\n(?=- )", body):
        pos = 0
        for m in TAG.finditer(bullet):
            refs = []
            for r in m["refs"].split(";"):
                ref = REF.match(" ".join(r.split()))
                assert ref, f"a malformed claim tag: (claim {m['refs']})"
                refs.append((ref["paper"], ref["id"], ref["model"]))
            out.append((bullet[pos:m.start()], refs))
            pos = m.end()
        out.append((bullet[pos:], []))
    return out


def ks_run(c: dict, runs: Path | None) -> set[int]:
    """The k a claim's child ran: its config's ``ablation_k`` (heads zeroed), or ``k = N`` in the claim."""
    out = {int(m[1]) for m in re.finditer(r"\bk = (\d+)", c.get("claim", ""))}
    config = runs / str(c.get("run")) / "config.yaml" if runs and c.get("run") else None
    if config and config.is_file():
        found = re.search(r"^ablation_k: (\d+)$", config.read_text(encoding="utf-8"), re.M)
        out |= {int(found[1])} if found else set()
    return out


def stated(text: str, refs: list, claims: dict, runs: Path | None) -> tuple[str, list[str]]:
    """Check the phrases that state how a child ran: "N key heads/neurons" against the k it ran
    (:func:`ks_run`), "N of M draws ... at least as low/high" against the draws counted in that
    direction, which must be the claim's (a "lowers" claim counts draws at least as low). Returns
    the text without them and what disagrees."""
    bad = []
    cs = [claims[r] for r in refs if r in claims]
    for m in re.finditer(r"\b(\d+) key (?:heads|neurons)\b", text):
        ks = set().union(*(ks_run(c, runs) for c in cs)) if cs else set()
        if int(m[1]) not in ks:
            bad.append(f"'{m[0]}': the child ran k in {sorted(ks) or 'nothing stated'}")
    for m in re.finditer(r"\b(\d+) of (\d+) (?:random )?draws\b[^.;()]*?at least as (low|high)", text):
        ok = False
        for c in cs:
            want = {"less": "low", "greater": "high"}.get(c.get("direction"))
            for ctl in c.get("controls") or ():
                d, sel = ctl.get("draws"), ctl.get("selected")
                if d and sel is not None and len(d) == int(m[2]) and m[3] == want:
                    ok |= int(m[1]) == sum((x <= sel) if want == "low" else (x >= sel) for x in d)
        if not ok:
            bad.append(f"'{m[0]}' is not the claim's rank count in its direction")
    return re.sub(r"\b\d+ key (?:heads|neurons)\b|\b\d+ of \d+ (?:random )?draws\b", " ", text), bad


def said_verdicts(text: str, refs: list, before: list, claims: dict) -> list[str]:
    """Each verdict the segment's prose states (:data:`VERDICT`: a verdict name, with its qualifier
    in parentheses if one follows, or an emphasised qualifier alone, ``*at chance*``) must be the
    verdict of one of its tagged claims, raw or after Holm; a qualifier must be that claim's too.
    One that opens a segment (only punctuation before it, "... (claim X): *holds*") is read from the
    tag group ``before`` it. Holm: a verdict whose clause says "before Holm" is the raw verdict, one
    whose clause names Holm otherwise ("after Holm", "Holm's too") Holm's. Negation: a verdict
    within three words after "not", "no longer" or "never" ("no longer *holds*") states no verdict
    and is not checked. Quotations ("...") are the papers' words, not verdicts. A verdict outside
    any tag group fails, as an untagged number does."""
    text = re.sub(r'"[^"]*"', ' "" ', NOT_QUOTED.sub(" ", text))
    lead = re.match(r"[\s:;,.*]*", text).end()
    found = list(VERDICT.finditer(text))
    bad = []
    for i, m in enumerate(found):
        if NEGATED.search(text[:m.start()]):
            continue
        after = text[m.end():found[i + 1].start() if i + 1 < len(found) else len(text)]
        after = after[:CLAUSE_END.search(after).start()]
        ahead = " ".join(re.split(r"[,;.:(]", text[found[i - 1].end() if i else 0:m.start()])[-1].split()[-4:])
        which = ({"raw"} if re.search(r"before\s+Holm", after, re.I) else
                 {"holm"} if re.search("Holm", ahead + " " + after, re.I) else {"raw", "holm"})
        name = m["v"] and next(v for v in verdicts.VERDICTS if re.fullmatch(_verdict_name(v), m["v"], re.I))
        qual = " ".join((m["q"] or m["alone"] or "").lower().split()) or None
        own = before if m.start() <= lead else refs
        said = " ".join(m[0].split())
        if not own:
            bad.append(f"untagged verdict '{said}' in '... {' '.join(text[max(0, m.start() - 60):m.end()].split())}'")
            continue
        agree = []
        for c in (claims[r] for r in own if r in claims):
            held = c.get("verdict_holm", c["verdict"])
            agree += [(c["verdict"], c.get("qualifier"))] if "raw" in which else []
            agree += [(held, c.get("qualifier") if held == c["verdict"] else None)] if "holm" in which else []
        if not any(name in (None, v) and qual in (None, q) for v, q in agree):
            bad.append(f"'{said}'{' (Holm)' if which == {'holm'} else ''} is not the verdict of "
                       f"{', '.join('/'.join(r) for r in own)}: {sorted(set(map(str, agree)))}")
    return bad


def problems(body: str, content: dict, runs: Path | None = None) -> list[str]:
    claims = {(p["number"], c["id"], c["model"]): c for p in content["papers"] for c in p["claims"]}
    bad, before = [], []
    for text, refs in segments(re.sub(r"<!--.*?-->", " ", body, flags=re.S)):
        bad += said_verdicts(text, refs, before, claims)
        before = refs
        missing = [r for r in refs if r not in claims]
        bad += [f"no claim {'/'.join(r[:2])} for {r[2]} in claims.json" for r in missing]
        text, wrong = stated(text, refs, claims, runs) if refs else (text, [])
        bad += wrong
        values = [v for r in refs if r in claims for v in claim_values(claims[r])]
        for m in NUMBER.finditer(NOT_QUOTED.sub(" ", text)):
            where = " ".join(text[max(0, m.start() - 40):m.end() + 10].split())
            if not refs:
                bad.append(f"untagged number {m.group(0).strip()!r} in '... {where} ...'")
                continue
            nums = [m["num"], m["den"]] if m["den"] else [m["num"]]
            for num in nums:
                if not matches(num, values, below=bool(m["cmp"]) and num == m["num"]):
                    bad.append(f"{num} matches no value of {', '.join('/'.join(r) for r in refs)}: '... {where} ...'")
    return bad


def blocks() -> list[tuple[Path, str]]:
    return [(ROOT / m["path"], m["body"]) for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))]


def test_every_what_holds_section_is_bound_to_a_committed_claims_file():
    text = DOC.read_text(encoding="utf-8")
    inside = [(m.start(), m.end()) for m in BLOCK.finditer(text)]
    heads = [m.start() for m in re.finditer(r"(?i)what holds at this size", text)]
    assert heads and inside
    for h in heads:  # the heading or its lead-in sentence sits just before its block
        assert any(0 <= s - h < 600 for s, _ in inside), f"'what holds' at offset {h} has no numbers block"
    for path, body in blocks():
        assert path.is_file(), path
        assert TAG.search(body), f"the block bound to {path} tags no claim"


@pytest.mark.parametrize("index", range(len(BLOCK.findall(DOC.read_text(encoding="utf-8")))))
def test_quoted_numbers_agree_with_claims_json(index):
    path, body = blocks()[index]
    content = json.loads(path.read_text(encoding="utf-8"))
    assert problems(body, content, path.parent / "runs") == []


SNIPPET = """
- *001.* Masking lowers the answer's log-probability by -5.21 nats [-5.40, -5.00] (n = 32, p < 0.001)
  (claim 001/masking-key-below-random-logprob, smollm2-135m).
"""


def _content(value: float) -> dict:
    c = {"id": "masking-key-below-random-logprob", "model": "smollm2-135m", "claim": "Masking (k = 4)",
         "statistic": {"value": value, "lo": -5.40, "hi": -5.0, "n": 32, "p_value": 0.0002}}
    return {"papers": [{"number": "001", "claims": [c]}]}


def test_a_quoted_number_drifting_from_claims_json_fails():
    assert problems(SNIPPET, _content(-5.2104)) == []
    bad = problems(SNIPPET, _content(-5.26))  # the claim moved; the prose did not
    assert len(bad) == 1 and "5.21" in bad[0]
    assert problems(SNIPPET.replace("(claim 001/", "(claim 002/"), _content(-5.21))[0].startswith("no claim 002")
    untagged = SNIPPET + "- *002.* Class-2 errors are 46.9% of errors.\n"
    assert any("untagged number '46.9'" in b for b in problems(untagged, _content(-5.21)))
    assert problems(SNIPPET.replace("p < 0.001", "p < 0.0001"), _content(-5.21))  # 0.0002 is not below 0.0001


def test_k_and_rank_directions_are_stated_as_the_child_ran_them(tmp_path):
    c = {"id": "ablation-key-below-random-ssd", "model": "m", "claim": "Zeroing the key heads lowers accuracy",
         "direction": "less", "run": "child", "statistic": {"value": 0.006, "n": 700},
         "controls": [{"draws": [0.2] * 16 + [0.3] * 4, "selected": 0.25}]}
    (tmp_path / "child").mkdir()
    (tmp_path / "child" / "config.yaml").write_text("ablation_k: 5\n")
    content = {"papers": [{"number": "000", "claims": [c]}]}
    good = "- *000.* Zeroing the 5 key heads: +0.6 points, 16 of 20 draws at least as low (claim 000/ablation-key-below-random-ssd, m).\n"
    assert problems(good, content, tmp_path) == []
    for wrong in (good.replace("the 5 key", "the 10 key"), good.replace("16 of 20 draws at least as low", "4 of 20 draws at least as high"),
                  good.replace("16 of 20", "15 of 20")):
        assert problems(wrong, content, tmp_path), wrong


def _verdicts(verdict: str, holm: str | None = None, qualifier: str | None = None) -> dict:
    c = {"id": "errors-attend-less", "model": "m", "claim": "Errors attend less", "verdict": verdict,
         "verdict_holm": holm or verdict, **({"qualifier": qualifier} if qualifier else {})}
    return {"papers": [{"number": "003", "claims": [c]}]}


def test_a_verdict_word_drifting_from_claims_json_fails():
    doc = "- *003.* Errors attend less: *{}* (claim 003/errors-attend-less, m).\n"
    assert problems(doc.format("holds"), _verdicts("holds")) == []
    bad = problems(doc.format("holds"), _verdicts("not shown at this n"))  # re-committed; the prose did not follow
    assert len(bad) == 1 and "'holds' is not the verdict of 003/errors-attend-less/m" in bad[0]
    assert problems(doc.format("not shown"), _verdicts("not shown at this n")) == []  # the short name
    assert problems(doc.format("uninformative (floor)"), _verdicts("uninformative", qualifier="floor")) == []
    assert problems(doc.format("uninformative (floor)"), _verdicts("uninformative", qualifier="no room to move"))
    assert problems(doc.format("at chance"), _verdicts("uninformative", qualifier="floor"))  # a qualifier alone
    assert problems(doc.format("holds"), _verdicts("uninformative", "holds", "at chance")) == []  # raw or Holm
    after = "- *003.* Errors attend less (claim 003/errors-attend-less, m): *contradicted*. More.\n"
    assert problems(after, _verdicts("contradicted")) == []  # opening the next segment: the tag before it
    assert problems(after, _verdicts("holds"))
    untagged = "- *003.* Errors attend less, +0.1 (claim 003/errors-attend-less, m); the rest is *not shown*.\n"
    assert any(b.startswith("untagged verdict 'not shown'") for b in problems(untagged, _verdicts("holds")))


def test_a_phrase_naming_holm_reads_the_holm_verdict():
    doc = "- *003.* Errors attend less: it {} (claim 003/errors-attend-less, m).\n"
    content = _verdicts("holds", holm="not shown at this n")
    assert problems(doc.format("holds before Holm, and is *not shown* after Holm"), content) == []
    assert problems(doc.format("**holds**, Holm's too"), content)
    assert problems(doc.format("is *not shown* before Holm"), content)
    assert problems(doc.format("holds after Holm"), content)


def test_a_negated_verdict_states_none():
    doc = "- *003.* Errors attend less: it {} (claim 003/errors-attend-less, m).\n"
    content = _verdicts("not shown at this n")
    for negated in ("no longer *holds*", "is not significant and never holds", "is not *uninformative* here"):
        assert problems(doc.format(negated), content) == [], negated
    assert problems(doc.format("*holds* no longer"), content)  # a negation after the verdict negates nothing
    quoted = '- *003.* "Errors attend less, and it holds" is *not shown* (claim 003/errors-attend-less, m).\n'
    assert problems(quoted, content) == []  # the paper's words are no verdict
