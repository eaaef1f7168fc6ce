"""The import graph of ``src/litstream``: no cycles, and no arrow up a floor (docs/architecture.md).

Every import counts, at the top of a module and inside functions alike; only ``if TYPE_CHECKING:`` blocks
are skipped (annotations never run). The rules are two small tables: :data:`ROOMS` says which room a module
lives in (by module-name prefix, the longest wins) and :data:`MAY_IMPORT` which rooms a room may import
besides itself. When modules move into new rooms, extend the tables; a module that no prefix names fails.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Module-name prefix -> room. The longest matching prefix names a module's room.
ROOMS = {
    "litstream.format": "format",
    "litstream.storage": "storage",
    "litstream.read": "read",
    "litstream.write": "write",
    "litstream._sim": "tools",
    # The core, below every room: errors, the environment, the sync<->async bridge, trace, LitData's knobs.
    "litstream._errors": "core",
    "litstream._environ": "core",
    "litstream._sync": "core",
    "litstream._trace": "core",
    "litstream._litdata_env": "core",
    "litstream._litdata_params": "core",
    "litstream._local_remote": "read",  # a read-room module still at the top level
    "litstream": "face",  # everything else at the top: the public faces, torch, the CLI
}

# Room -> the rooms it may import besides itself.
MAY_IMPORT = {
    "core": set(),
    "format": {"core"},
    "storage": {"core"},
    "read": {"core", "format", "storage"},
    "write": {"core", "format", "storage"},
    "tools": {"core", "format", "storage", "read", "write", "face"},
    "face": {"core", "format", "storage", "read", "write", "tools"},
}

# Imports that break a rule today, each with the reason it is allowed and the way out. The test fails when an
# entry is no longer needed, so the list only shrinks.
EXCEPTIONS = {
    ("litstream.read._spec", "litstream.write._hf"): (
        "an hf:// Parquet dataset is indexed when it is opened; Hub/Parquet indexing moves to a room below both "
        "(index/ in DESIGN.md's layout)"
    ),
    ("litstream._dataset", "litstream._litdata_cache"): (
        "a cycle between two faces: StreamingDataset.cache builds LitData's Cache, which reads through a "
        "StreamingDataset; goes when the facades share one read spec (issue 26, deliverable 5)"
    ),
}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(source: str, module: str, *, package: bool) -> set[str]:
    """Every name that ``source`` (the text of ``module``) imports, at any depth outside ``if TYPE_CHECKING:``
    blocks, made absolute: ``import x.y`` gives ``x.y``, ``from x import y`` gives ``x.y`` (``y`` may be a
    module or a name in ``x``)."""
    here = module.split(".") if package else module.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.orelse:
                    visit_one(statement)
            else:
                visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found.update(target if alias.name == "*" else f"{target}.{alias.name}" for alias in node.names)
        visit(node)

    visit(ast.parse(source))
    return found


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / "litstream").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """``module -> the litstream modules it imports`` (``from x import y``: ``x.y`` when that is a module,
    else ``x``)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        names = imported_names(path.read_text(encoding="utf-8"), module, package=path.name == "__init__.py")
        targets = set()
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def room_of(module: str) -> str:
    prefix = max((p for p in ROOMS if module == p or module.startswith(p + ".")), key=len, default=None)
    if prefix is None:
        raise AssertionError(f"{module} is in no room: add its prefix to ROOMS in {__file__}")
    return ROOMS[prefix]


GRAPH = import_graph()


def test_the_walker_sees_function_level_imports_and_skips_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import _sibling\n"
        "from ..format._index import INDEX_FILENAME\n"
        "if TYPE_CHECKING:\n"
        "    from ..write._writer import ChunkWriter\n"
        "else:\n"
        "    import litstream.storage._base\n"
        "def f():\n"
        "    from .._errors import PlanError\n"
    )
    names = imported_names(source, "litstream.read._x", package=False)
    assert {"litstream.read._sibling", "litstream.format._index.INDEX_FILENAME", "litstream._errors.PlanError"} <= names
    assert "litstream.storage._base" in names
    assert not any("write" in name for name in names)
    assert "litstream._litdata_cache" in GRAPH["litstream._dataset"]  # inside a property


def test_every_module_has_a_room() -> None:
    assert all(room_of(module) in MAY_IMPORT for module in GRAPH)


def test_no_import_goes_up_a_floor() -> None:
    wrong = sorted(
        f"{module} ({room_of(module)}) imports {target} ({room_of(target)})"
        for module, targets in GRAPH.items()
        for target in targets
        if room_of(target) != room_of(module)
        and room_of(target) not in MAY_IMPORT[room_of(module)]
        and (module, target) not in EXCEPTIONS
    )
    assert wrong == []


def test_there_is_no_import_cycle() -> None:
    graph = {m: {t for t in targets if (m, t) not in EXCEPTIONS} for m, targets in GRAPH.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


@pytest.mark.parametrize("edge", sorted(EXCEPTIONS))
def test_every_exception_is_still_needed(edge: tuple[str, str]) -> None:
    module, target = edge
    assert target in GRAPH[module], f"{module} no longer imports {target}: remove the entry from EXCEPTIONS"
    rest = {m: {t for t in targets if (m, t) != edge} for m, targets in GRAPH.items()}
    cycle = False
    try:
        graphlib.TopologicalSorter(rest | {module: GRAPH[module]}).prepare()
    except graphlib.CycleError:
        cycle = True
    breaks_a_rule = room_of(target) != room_of(module) and room_of(target) not in MAY_IMPORT[room_of(module)]
    assert cycle or breaks_a_rule, f"{module} -> {target} breaks no rule any more: remove it from EXCEPTIONS"
