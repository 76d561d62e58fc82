"""Lazy package namespaces (PEP 562), so that ``whitebox-eval --help`` never imports torch.

A package ``__init__`` lists what it exports and from which module; a name is imported
the first time it is used, then cached in the package. Submodules stay reachable as
attributes (``whitebox_eval.internals.lenses``) as with eager imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]]) -> tuple[Callable, Callable, list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for ``package``: {module: [names]}."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str):
        module = where.get(name)
        if module is None:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__, list(where)


def resolve(path: str):
    """The object a record names as ``"module:attribute"``, imported on first use (the one
    way a record names code without importing it: the task records' loaders, the suites'
    configs, runners and commands)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
