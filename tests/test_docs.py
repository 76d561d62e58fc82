"""The README and the pages under docs/ stay true to the checkout: every relative link
reaches a file (and a heading, for a ``#anchor``, by GitHub's slug rule), every
``whitebox-eval`` command they quote parses, and the verdict tables of docs/reproduce.md
are the ones ``benchmarks/reproduce_commit.py`` makes from the committed claims.json files.

A quoted command parses when click accepts it with ``--help`` added: click reads every
option and sub-command before it acts on the eager ``--help``, so an unknown option, a
missing sub-command or an option that lost its value fails, while values (paths that are
not here, placeholders) are not checked. The command tree is walked as click's groups walk
it, without running any group's callback (``--device cuda`` would look for a GPU), and
``--help`` imports no suite's code beyond its command module (no torch): the test is fast.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
README_MAX_LINES = 250

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
PLACEHOLDER = re.compile(r"<[A-Za-z][^<>]*>")  # <run-id>, <formats run A>: a value, not a redirection
SHELL_PUNCTUATION = "|&;<>()"  # a token of these alone (|, &&, >, 2>&1's >&, ...) ends a command


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


# --- reading a page: prose, code blocks, inline code -------------------------------------

def _blocks(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(prose lines, code lines) with their line numbers: fenced blocks and indented
    (4-space) blocks that follow a blank line are code; list items' continuation lines
    (indented less) are prose."""
    prose, code = [], []
    fenced, indented, previous_blank = False, False, True
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            code.append((number, line))
            continue
        blank = not line.strip()
        if not blank and line.startswith(("    ", "\t")) and (previous_blank or indented):
            indented = True
            code.append((number, line))
        else:
            indented = indented and blank  # a blank line inside an indented block keeps it open
            prose.append((number, line))
        previous_blank = blank
    return prose, code


def _code_commands(code: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Code lines joined over ``\\`` continuations."""
    out, pending, start = [], "", 0
    for number, line in code:
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def _paragraphs(prose: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Prose joined into paragraphs (an inline code span or a link may wrap), each with its
    first line's number; a table row or a heading stays a paragraph of its own."""
    out: list[tuple[int, str]] = []
    joined, start = [], 0
    for number, line in [*prose, (0, "")]:
        alone = line.lstrip().startswith(("|", "#"))
        if (not line.strip() or alone) and joined:
            out.append((start, " ".join(joined)))
            joined = []
        if alone:
            out.append((number, line))
        elif line.strip():
            if not joined:
                start = number
            joined.append(line.strip())
    return out


def _inline_spans(prose: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(number, m.group(2).strip()) for number, text in _paragraphs(prose) for m in INLINE_CODE.finditer(text)]


def quoted_commands(page: Path) -> list[tuple[int, list[str] | None]]:
    """Every ``whitebox-eval ARGS`` (or ``python -m whitebox_eval ARGS``, ``torchrun ... -m
    whitebox_eval ARGS``) the page quotes, as (line, ARGS): a comment after ``#``, a pipe or
    a redirection ends it, ``<placeholders>`` stand for a value. ARGS is None where the
    shell could not read the line (an unbalanced quote)."""
    prose, code = _blocks(page.read_text(encoding="utf-8"))
    found = []
    for number, text in _code_commands(code) + _inline_spans(prose):
        text = PLACEHOLDER.sub("PLACEHOLDER", text)
        try:
            lexer = shlex.shlex(text, posix=True, punctuation_chars=SHELL_PUNCTUATION)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
        except ValueError:  # an unbalanced quote: a problem where it quotes a command
            if re.search(r"whitebox-eval|-m whitebox_eval", text):
                found.append((number, None))
            continue
        i = 0
        while i < len(tokens):
            start = None
            if tokens[i] == "whitebox-eval":
                start = i + 1
            elif tokens[i] == "-m" and i + 1 < len(tokens) and tokens[i + 1] == "whitebox_eval":
                start = i + 2
            if start is None:
                i += 1
                continue
            end = start
            while end < len(tokens) and not set(tokens[end]) <= set(SHELL_PUNCTUATION):
                end += 1
            args = tokens[start:end]
            if end < len(tokens) and tokens[end][0] in "<>" and args and args[-1].isdigit():
                args = args[:-1]  # the 2 of 2>&1
            found.append((number, args))
            i = end
    return found


# --- the checks ---------------------------------------------------------------------------

def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lower case, punctuation other
    than ``-`` and ``_`` removed, spaces to ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # emphasis underscores, not snake_case
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings (a repeated heading gets -1, -2, ...)."""
    prose, _ = _blocks(page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def relative_links(page: Path) -> list[tuple[int, str]]:
    prose, _ = _blocks(page.read_text(encoding="utf-8"))
    links = []
    for number, text in _paragraphs(prose):
        text = INLINE_CODE.sub("", text)
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            links.append((number, target))
    return links


def link_problem(page: Path, target: str, root: Path = ROOT) -> str | None:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
        return f"{path} does not exist"
    if root not in dest.parents and dest != root:
        return f"{path} leaves the repository"
    if anchor:
        if dest.is_dir() or dest.suffix != ".md":
            return f"#{anchor} on {path}, which is not a markdown page"
        if anchor not in anchors(dest):
            return f"{path or page.name} has no heading with the anchor #{anchor}"
    return None


def parse_with_help(args: list[str]) -> str | None:
    """None when click accepts ``whitebox-eval ARGS --help``, else why not."""
    from whitebox_eval.cli import cli

    argv = [*args, "--help"]
    with CliRunner().isolation() as (out, _err, *_):
        try:
            ctx = cli.make_context("whitebox-eval", list(argv))
            command: click.Command = cli
            while isinstance(command, click.Group):  # what Group.invoke does, less the callbacks
                protected = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args
                rest = [*protected, *ctx.args]
                if not rest:
                    return "names no sub-command"
                name, command, rest = command.resolve_command(ctx, rest)
                if command is None:
                    return f"no command {name!r}"
                ctx = command.make_context(name, rest, parent=ctx)
        except click.exceptions.Exit as e:
            if e.exit_code != 0:
                return f"--help exited with status {e.exit_code}"
            return None if b"Usage:" in out.getvalue() else "--help printed no usage"
        except click.UsageError as e:
            return e.format_message()
        except Exception as e:  # a callback ran: --help was taken as an option's value
            return f"{type(e).__name__}: {e}"
    return "--help was taken as a value (an option before it has no value)"


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_resolve(page):
    problems = [f"{_rel(page)}:{n}: {target}: {why}" for n, target in relative_links(page)
                if (why := link_problem(page, target))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_quoted_commands_parse(page):
    problems = []
    for number, args in quoted_commands(page):
        if args is None:
            problems.append(f"{_rel(page)}:{number}: the shell cannot read this command (an unbalanced quote)")
        elif "..." in args:
            problems.append(f"{_rel(page)}:{number}: whitebox-eval {' '.join(args)}: write a <placeholder>, not ...")
        elif (why := parse_with_help(args)) is not None:
            problems.append(f"{_rel(page)}:{number}: whitebox-eval {' '.join(args)}: {why}")
    assert not problems, "\n".join(problems)


def test_every_page_is_reached_from_the_readme():
    """Each docs page is linked from the README or from a page the README reaches."""
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        for _, target in relative_links(page):
            dest = (page.parent / target.partition("#")[0]).resolve()
            if dest.suffix == ".md" and dest.is_file():
                todo.append(dest)
    assert not set(PAGES) - reached, sorted(_rel(p) for p in set(PAGES) - reached)


def test_readme_is_an_introduction():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_the_readme_keeps_the_make_targets():
    """CI (.ci/run) runs `make test` and `make test-slow`, the README's commands."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in ("make demo", "make test", "make test-slow"):
        assert re.search(rf"^\s*{target}\b", readme, re.M), target
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test", "test-slow"):
        assert re.search(rf"^{target}:", makefile, re.M), target


# --- the checker itself -------------------------------------------------------------------

def test_the_checker_reads_shell_and_markdown(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "# Title: `code` and *more*\n\n## Repeated\n\n## Repeated\n\n"
        "Prose with `whitebox-eval mcqa --limit 5` inline, and one that `whitebox-eval gar\n--limit 2` wraps.\n\n"
        "    whitebox-eval report runs/<run-id>     # a comment --nope\n"
        "    torchrun --nproc-per-node 2 -m whitebox_eval --device cuda mcqa \\\n"
        "        --task mmlu=data/mmlu/test | tee log\n\n"
        "```\nWHITEBOX_PROGRESS=lines whitebox-eval runs > list.txt\nnohup whitebox-eval runs 2>&1 && echo\n"
        "whitebox-eval gar --pattern 'V->E\n```\n", encoding="utf-8")
    assert [a for _, a in quoted_commands(page)] == [
        ["report", "runs/PLACEHOLDER"],
        ["--device", "cuda", "mcqa", "--task", "mmlu=data/mmlu/test"],
        ["runs"],
        ["runs"],
        None,
        ["mcqa", "--limit", "5"],
        ["gar", "--limit", "2"]]
    assert anchors(page) == {"title-code-and-more", "repeated", "repeated-1"}
    assert _slug("Coming from TransformerLens or nnsight") == "coming-from-transformerlens-or-nnsight"
    assert _slug("GPUs, devices and dtypes (`--device`)") == "gpus-devices-and-dtypes---device"
    assert _slug("The engine's 3.5 rules: a/b") == "the-engines-35-rules-ab"


def test_the_checker_finds_what_does_not_parse():
    assert parse_with_help(["mcqa", "--task", "x", "--limit", "3"]) is None
    assert parse_with_help(["--device", "cuda", "reproduce", "all", "--scale", "paper"]) is None
    assert parse_with_help(["mui", "train-sae", "--layer", "3"]) is None
    assert parse_with_help([]) is None
    assert "No such option" in parse_with_help(["mcqa", "--no-such-option"])
    assert "No such command" in parse_with_help(["no-such-command"])
    assert "No such command" in parse_with_help(["mui", "no-such-command"])
    assert parse_with_help(["mcqa", "--task"]) is not None  # --help taken as --task's value


def test_the_checker_finds_broken_links(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\n## Part two\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#part-two) [missing](nope.md) [bad anchor](a.md#part-3) [web](https://x.org)\n"
                    "`[not a link](nope.md)` [a wrapped\nlink](nope.md)\n", encoding="utf-8")
    problems = [t for _, t in relative_links(page) if link_problem(page, t, root=tmp_path)]
    assert problems == ["nope.md", "a.md#part-3", "nope.md"]
    assert link_problem(page, "../outside.md", root=tmp_path) is not None


# --- docs/reproduce.md's tables are the committed reproductions ----------------------------

def _reproduce_commit():
    spec = importlib.util.spec_from_file_location("reproduce_commit", ROOT / "benchmarks" / "reproduce_commit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reproduce_page_tables_are_the_committed_claims():
    """`python benchmarks/reproduce_commit.py FOLDER` writes these tables into docs/reproduce.md;
    with the committed claims.json they come out as the page has them."""
    rc = _reproduce_commit()
    results = ROOT / "benchmarks" / "results"
    quick = json.loads((results / "reproduce_quick" / "claims.json").read_text(encoding="utf-8"))
    cpu = json.loads((results / "reproduce_cpu" / "claims.json").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "reproduce.md").read_text(encoding="utf-8")
    for key, table in (("quick", rc.verdict_table(quick)), ("quick beside cpu", rc.beside_table(quick, cpu, ("quick", "cpu")))):
        assert rc.put_table(page, key, table) == page, f"docs/reproduce.md's '{key}' table is not the committed one"


def test_reproduce_commit_writes_between_its_markers(tmp_path):
    rc = _reproduce_commit()
    text = "# Page\n\nbefore\n\n" + rc.block("quick", "| old |") + "\nafter\n"
    new = rc.put_table(text, "quick", "| new |\n|---|")
    assert new == "# Page\n\nbefore\n\n" + rc.block("quick", "| new |\n|---|") + "\nafter\n"
    assert rc.put_table(new, "quick", "| new |\n|---|") == new
    added = rc.put_table("# Page\n", "cpu", "| t |")
    assert added == "# Page\n\n" + rc.block("cpu", "| t |")
    assert rc.put_table("", "cpu", "| t |") == rc.block("cpu", "| t |")
    with pytest.raises(SystemExit, match="no end marker"):
        rc.put_table(rc.block("quick", "x").replace(rc.END, ""), "quick", "| t |")
