"""The shape DESIGN.md promises, checked on the source: no import circle and no arrow up the
layers, counting every import (inside functions and ``if TYPE_CHECKING`` too); no suite
importing report/; small modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "whitebox_eval"

#: the layers of DESIGN.md, bottom first: a module imports only from its own room or a lower layer
LAYERS = (
    ("errors", "lazy"),
    ("controls", "datafiles", "models", "stats"),
    ("internals", "power", "tasks"),
    ("runs",),
    ("command_options", "config_file"),
    ("sae",),
    ("mcqa", "formats", "mui", "gar", "span"),
    ("finetune",),
    ("suites",),
    ("report",),
    ("reproduce", "cli"),
    ("studies", "__main__"),
)
#: the files that may import by name at run time (importlib): the one resolver of records'
#: ``module:attribute`` strings and the lazy package faces, both in lazy.py
IMPORTLIB_ALLOWED = {"lazy.py"}


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, src: Path, modules: set[str]) -> set[str]:
    """Modules of the package that ``path`` imports anywhere in it (a function's imports too).
    ``from pkg import sub`` is an import of ``pkg.sub``, not of ``pkg``'s ``__init__``."""
    me = _module_name(path, src)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
    return {m for m in found if m in modules and m != me}


def _graph(src: Path = SRC, package: str = "whitebox_eval") -> dict[str, set[str]]:
    paths = {_module_name(p, src): p for p in (src / package).rglob("*.py")}
    modules = set(paths)
    return {m: _imports(p, src, modules) for m, p in paths.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def dfs(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                dfs(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            dfs(m)
    return cycles


def _room(module: str) -> str:
    """The top-level module or package of ``module`` (``whitebox_eval.tasks.hub`` -> ``tasks``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_circle():
    cycles = _circles(_graph())
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_a_circle_through_function_level_imports_is_caught(tmp_path):
    """A planted circle whose every import sits inside a function (the kind a module-level
    reading misses) is seen."""
    pkg = tmp_path / "planted"
    (pkg / "inner").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "inner" / "__init__.py").write_text("")
    (pkg / "top.py").write_text("def run():\n    from planted.inner import low\n    return low.value()\n")
    (pkg / "inner" / "low.py").write_text("def value():\n    from planted import top\n    return top\n")
    (pkg / "alone.py").write_text("from planted.inner import low\n")
    cycles = _circles(_graph(tmp_path, "planted"))
    assert cycles == [["planted.inner.low", "planted.top", "planted.inner.low"]], cycles


def test_every_room_sits_on_a_layer_and_arrows_point_down():
    graph = _graph()
    layer = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}
    rooms = {_room(m) for m in graph} - {""}
    assert rooms <= set(layer), f"rooms on no layer in LAYERS (add them, and to DESIGN.md): {sorted(rooms - set(layer))}"
    up = sorted(f"{m} -> {n}" for m, deps in graph.items() for n in deps
                if _room(m) and _room(n) and _room(m) != _room(n) and layer[_room(n)] >= layer[_room(m)])
    assert not up, "imports that do not point down the layers: " + "; ".join(up)


def test_only_the_resolver_imports_by_name():
    hits = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
            if str(p.relative_to(PACKAGE)) not in IMPORTLIB_ALLOWED
            and re.search(r"import_module|__import__", p.read_text(encoding="utf-8"))]
    assert not hits, f"import by name only through whitebox_eval.lazy.resolve: {hits}"


def test_every_record_names_code_that_exists():
    from whitebox_eval.cli import LAZY_COMMANDS
    from whitebox_eval.lazy import resolve
    from whitebox_eval.suites import SUITES
    from whitebox_eval.tasks.registry import RECORDS

    named = [target for target, _ in LAZY_COMMANDS.values()]
    named += [path for s in SUITES.values() for m in s.modes.values() for path in (m.config, m.run)]
    from whitebox_eval.reproduce.vocabulary import CHECKS, GENERAL

    named += [st.compute for s in SUITES.values() for st in s.statistics] + [st.compute for st in GENERAL]
    named += [path for kinds in CHECKS.values() for path in kinds.values()]
    named += [getattr(r, f) for r in RECORDS.values()
              for f in ("loader", "generation_loader", "categories", "hub_row", "lm_eval_doc") if getattr(r, f)]
    missing = []
    for path in named:
        try:
            resolve(path)
        except (ImportError, AttributeError) as e:
            missing.append(f"{path}: {e}")
    assert not missing, missing


def test_no_suite_imports_report_and_report_names_no_suite():
    graph = _graph()
    suites = ("whitebox_eval.mcqa", "whitebox_eval.mui", "whitebox_eval.gar", "whitebox_eval.span")
    bad = [(m, n) for m, deps in graph.items() for n in deps
           if (m.startswith(suites) and n.startswith("whitebox_eval.report"))
           or (m.startswith("whitebox_eval.report") and n.startswith(suites))]
    assert not bad, bad


def test_modules_stay_small():
    """~450 lines a module, the engine's rooms too (no exception)."""
    big = {str(p.relative_to(SRC)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 460}
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


def test_reproduce_report_and_cli_key_on_no_suite_name():
    """What a suite is lives in its record: no ``suite == "mcqa"`` (or ``in``, ``!=``) and no dict
    keyed by suite names in reproduce/, report/ or cli.py (the paper YAMLs name their suites)."""
    from whitebox_eval.suites import SUITES

    names = set(SUITES)
    hits = []
    files = [*(PACKAGE / "reproduce").rglob("*.py"), *(PACKAGE / "report").rglob("*.py"), PACKAGE / "cli.py"]
    for p in files:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                consts = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
                sides = " ".join(ast.unparse(c) for c in [node.left, *node.comparators])
                if any(c in names for c in consts) and "suite" in sides.lower():
                    hits.append(f"{p.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                if len(keys & names) >= 2:
                    hits.append(f"{p.relative_to(PACKAGE)}:{node.lineno}: a dict keyed by suites {sorted(keys & names)}")
    assert not hits, hits


#: the suite packages (their records are reached through suites.py)
SUITE_PACKAGES = ("mcqa", "formats", "mui", "gar", "span", "sae")


def test_reproduce_imports_no_suite_package():
    """reproduce/ reaches a suite only through its record in suites.py (its statistics, figures,
    costs by ``module:attribute``): no import of a suite package anywhere in it, a function's too."""
    graph = _graph()
    hits = sorted(f"{m} imports {n}" for m, deps in graph.items() if m.startswith("whitebox_eval.reproduce")
                  for n in deps if _room(n) in SUITE_PACKAGES)
    assert not hits, hits


def test_the_reproduce_scan_sees_an_import_inside_a_function(tmp_path):
    pkg = tmp_path / "whitebox_eval"
    (pkg / "reproduce").mkdir(parents=True)
    (pkg / "mui").mkdir()
    for p in (pkg / "__init__.py", pkg / "reproduce" / "__init__.py", pkg / "mui" / "__init__.py", pkg / "mui" / "fit.py"):
        p.write_text("")
    (pkg / "reproduce" / "law.py").write_text("def law():\n    from whitebox_eval.mui.fit import x\n    return x\n")
    deps = _graph(tmp_path)["whitebox_eval.reproduce.law"]
    assert {_room(n) for n in deps} & set(SUITE_PACKAGES) == {"mui"}
