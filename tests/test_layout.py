"""The house's rooms (docs/architecture.md): what sits where, and which arrows between rooms exist.

The import graph is read from the source with :mod:`ast`: every ``import`` / ``from ... import`` of a
module, at the top level and inside functions, except those under ``if TYPE_CHECKING:`` (they exist only
for the type checker). The rules:

* only the public face sits directly in ``src/litstream/`` (at most six modules);
* no import cycle between modules;
* each room imports only from the rooms below it (:data:`MAY_IMPORT`), never from the facades above;
* ``read/plan`` is pure: no event loop, no storage, none of the read engine;
* only ``_torch/`` imports torch at module level.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING

import litstream

if TYPE_CHECKING:
    from collections.abc import Iterator

PACKAGE = Path(litstream.__file__).resolve().parent

LOOSE_MODULES = {"__init__", "_version", "debugger", "simulate"}

#: room -> the rooms its modules may import (itself included). A room is the first package below
#: ``litstream`` (``""``: the top-level modules).
MAY_IMPORT: dict[str, set[str]] = {
    "_core": {"_core"},
    "format": {"_core", "format"},
    "storage": {"_core", "storage"},
    "index": {"_core", "format", "storage", "index"},
    "read": {"_core", "format", "storage", "index", "read"},
    "write": {"_core", "format", "storage", "index", "read", "write"},
    "_sim": {"_core", "format", "storage", "index", "read", "_torch", "_sim"},
    "_torch": {"_core", "format", "storage", "index", "read", "write", "_torch"},
    "_view": {"", "_core", "format", "storage", "index", "read", "_torch", "_sim", "_view"},
    "_cli": {"", "_core", "format", "storage", "index", "read", "write", "_torch", "_sim", "_view", "_cli"},
    "": {"", "_core", "format", "storage", "index", "read", "write", "_torch", "_sim"},
}

PURE_PLAN = "litstream.read.plan"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


class _Imports(ast.NodeVisitor):
    """The modules one source file imports (``module.name`` too, for ``from package import module``)."""

    def __init__(self, name: str, is_package: bool) -> None:
        self.package = name if is_package else name.rpartition(".")[0]
        self.found: list[tuple[str, int, bool]] = []  # (imported name, line, at module level)
        self._depth = 0

    def visit_If(self, node: ast.If) -> None:
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _nested(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _nested

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, node.lineno, self._depth == 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        self.found.append((module, node.lineno, self._depth == 0))
        for alias in node.names:
            self.found.append((f"{module}.{alias.name}", node.lineno, self._depth == 0))


@functools.cache
def _imports(name: str) -> tuple[tuple[str, int, bool], ...]:
    """``(imported module, line, at module level)`` for each import of module ``name``."""
    return tuple(_walk(name))


def _walk(name: str) -> Iterator[tuple[str, int, bool]]:
    path = MODULES[name]
    visitor = _Imports(name, path.name == "__init__.py")
    visitor.visit(ast.parse(path.read_text(), str(path)))
    for imported, line, top in visitor.found:
        target = imported
        while target and target not in MODULES and "." in target:
            target = target.rpartition(".")[0]
        if target in MODULES:
            if target != name:
                yield target, line, top
        else:
            yield imported.split(".")[0], line, top


def _room(name: str) -> str:
    parts = name.split(".")
    if len(parts) == 1:
        return ""
    return parts[1] if (PACKAGE / parts[1]).is_dir() else ""


def _graph() -> dict[str, set[str]]:
    return {name: {t for t, _, _ in _imports(name) if t in MODULES} for name in MODULES}


def test_only_the_public_face_sits_at_the_top() -> None:
    loose = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert set(loose) <= LOOSE_MODULES, f"put {sorted(set(loose) - LOOSE_MODULES)} into a room"
    assert len(loose) <= 6


def test_every_room_is_a_declared_room() -> None:
    rooms = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == set(MAY_IMPORT) - {""}


def test_no_import_cycles() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert cycles == []


def test_arrows_point_down() -> None:
    wrong = [
        f"{name} line {line}: {target} ({_room(name) or 'top level'} may import only {sorted(MAY_IMPORT[_room(name)])})"
        for name in sorted(MODULES)
        for target, line, _ in _imports(name)
        if target in MODULES and _room(target) not in MAY_IMPORT[_room(name)]
    ]
    assert wrong == []


def test_the_read_plan_is_pure() -> None:
    wrong = [
        f"{name} line {line}: {target}"
        for name in MODULES
        if name.startswith(PURE_PLAN)
        for target, line, _ in _imports(name)
        if target in ("anyio", "obstore", "httpx", "torch", "trio")
        or target.startswith("litstream.storage")
        or (target.startswith("litstream.read") and not target.startswith(PURE_PLAN) and target != "litstream.read")
    ]
    assert wrong == []


def test_only_the_torch_room_imports_torch_at_module_level() -> None:
    wrong = [
        f"{name} line {line}"
        for name in MODULES
        if _room(name) != "_torch"
        for target, line, top in _imports(name)
        if target == "torch" and top
    ]
    assert wrong == []


def test_the_rules_see_real_imports() -> None:
    # the walker itself: a known top-level arrow, a known function-level one, a TYPE_CHECKING one skipped
    plan = dict.fromkeys(t for t, _, _ in _imports("litstream.read.plan._pieces"))
    assert "litstream.read.plan._plan" in plan
    assert "litstream.read.source._source" not in plan  # only under TYPE_CHECKING there
    engine = {t for t, _, top in _imports("litstream.read.engine._engine") if not top} | {
        t for t, _, top in _imports("litstream.read.engine._engine") if top
    }
    assert "anyio" in engine


#: read/'s sub-rooms -> what their modules may import of read/ (``""``: read/'s own top-level modules: the reader,
#: its spec and checks). Below them all sits ``plan`` (pure); ``source`` opens a dataset, ``engine`` turns its
#: bytes into samples, ``cache`` keeps chunk files; the reader (top) and the async face (``aio``) drive them.
READ_MAY_IMPORT: dict[str, set[str]] = {
    "plan": {"plan"},
    "cache": {"cache", "plan"},
    "source": {"source", "cache", "plan"},
    "engine": {"engine", "source", "cache", "plan"},
    "raw": {"raw", "engine", "source", "cache", "plan"},
    "": {"", "engine", "source", "cache", "plan", "aio", "raw"},
    "aio": {"aio", "", "engine", "source", "cache", "plan"},
}


def _read_room(name: str) -> str | None:
    """``name``'s sub-room of read/ (``""``: read/'s top level), ``None`` outside read/."""
    parts = name.split(".")
    if parts[:2] != ["litstream", "read"] or len(parts) < 3:
        return None
    return parts[2] if (PACKAGE / "read" / parts[2]).is_dir() else ""


def test_every_read_room_says_its_job() -> None:
    rooms = {p.name for p in (PACKAGE / "read").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == set(READ_MAY_IMPORT) - {""}
    for room in rooms:
        doc = ast.get_docstring(ast.parse((PACKAGE / "read" / room / "__init__.py").read_text()))
        assert doc is not None, f"read/{room}/__init__.py: a one-line docstring saying its job"
        assert len(doc.splitlines()) == 1, f"read/{room}/__init__.py: one line"


def test_read_rooms_import_only_below_them() -> None:
    wrong = [
        f"{name} line {line}: {target}"
        for name in sorted(MODULES)
        if (room := _read_room(name)) is not None
        for target, line, _ in _imports(name)
        if (other := _read_room(target)) is not None and other not in READ_MAY_IMPORT[room]
    ]
    assert wrong == []
