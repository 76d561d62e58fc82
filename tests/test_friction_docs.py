"""The docs say what the tool does: test paths they name exist, hints name
the download command the installed huggingface_hub provides, ``--limit`` takes fractions, an
``--edit`` applies at every position unless it ends in ``@last``."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "DESIGN.md"]


def test_every_test_path_the_docs_name_exists():
    named = {(page.name, m) for page in DOCS for m in re.findall(r"tests/[\w/.-]+\.py", page.read_text())}
    assert named, "the docs name test files"
    missing = [(page, path) for page, path in named if not (ROOT / path).is_file()]
    assert not missing


def test_hints_name_the_installed_hub_cli():
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "hf").exists() or shutil.which("hf"), "huggingface_hub installs the hf command"
    sources = [p for p in (ROOT / "src").rglob("*.py")] + DOCS
    assert not [p for p in sources if "huggingface-cli" in p.read_text(encoding="utf-8")]


def test_limit_and_edit_position_rows_say_what_the_tool_does():
    lm_eval = (ROOT / "docs" / "lm-eval.md").read_text()
    assert "no fraction" not in lm_eval and "a fraction below 1" in lm_eval
    row = next(line for line in (ROOT / "docs" / "questions.md").read_text().splitlines()
               if line.startswith("| `...@last`"))
    assert "every position" in row and "(default" not in row
