"""The shape DESIGN.md promises, checked on the source: no import circle (type-only imports
included), no suite importing report/, small modules."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "whitebox_eval"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Modules of the package that ``path`` imports at module level (``if TYPE_CHECKING`` too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)

    visit(tree.body)
    return {m for m in found if m in modules and m != me}


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {m: _imports(p, modules) for m, p in paths.items()}


def test_no_import_circle():
    graph = _graph()
    # package __init__ files only name their lazy exports (strings), so edges into a
    # package mean "its __init__", which imports nothing heavy; follow real modules only
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def dfs(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                dfs(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            dfs(m)
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_suite_imports_report_and_report_names_no_suite():
    graph = _graph()
    suites = ("whitebox_eval.mcqa", "whitebox_eval.mui", "whitebox_eval.gar", "whitebox_eval.attentionspan")
    bad = [(m, n) for m, deps in graph.items() for n in deps
           if (m.startswith(suites) and n.startswith("whitebox_eval.report"))
           or (m.startswith("whitebox_eval.report") and n.startswith(suites))]
    assert not bad, bad


def test_modules_stay_small():
    """~450 lines a module; the engine is the one exception (one pass's hooks in one place)."""
    big = {str(p.relative_to(SRC)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 460 and p.name != "engine.py"}
    assert not big, big


def test_no_ticket_words_in_the_product():
    import re

    hits = [f"{p.relative_to(SRC)}:{i}" for p in PACKAGE.rglob("*.py")
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if re.search(r"\bissue \d+", line)]
    design = SRC.parent / "DESIGN.md"
    if design.is_file():
        hits += [f"DESIGN.md:{i}" for i, line in enumerate(design.read_text(encoding="utf-8").splitlines(), 1)
                 if re.search(r"\bissue \d+", line)]
    assert not hits, hits


def test_no_code_outside_tasks_splits_a_task_string():
    """``--task`` is read once into a TaskSpec (tasks/spec.py); elsewhere a task is an object:
    no split/partition of a name holding ``task``, and no test of its ``lm-eval:`` / ``NAME=`` form."""
    hits = []
    for p in PACKAGE.rglob("*.py"):
        rel = p.relative_to(PACKAGE)
        if rel.parts[0] == "tasks":
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver, args = ast.unparse(node.func.value).lower(), " ".join(ast.unparse(a) for a in node.args)
            if "task" not in receiver:
                continue
            if node.func.attr in ("split", "rsplit", "partition", "rpartition") or (
                    node.func.attr in ("startswith", "endswith") and any(c in args for c in ("lm-eval", "=", ":"))):
                hits.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not hits, hits
