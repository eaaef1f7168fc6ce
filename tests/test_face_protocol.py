"""The faces reach into each other only through the protocols of ``read/_face.py``.

Walks the modules of the reading faces (``StreamingDataset``, the Combined / Parallel wrappers and their
checkpoints, ``StreamingDataLoader``, ``train_test_split``, LitData's ``Cache``, ``astream``) and the engine
that drives a dataset through the protocol, and collects every private name read on an object other than
``self``/``cls`` (``other._name``): each must be declared by ``Face``, ``Member`` or ``Composite``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import litstream
from litstream.read._face import Composite, Face, Member

PACKAGE = Path(litstream.__file__).parent
FACE_MODULES = (
    "_torch/_dataset.py",
    "_torch/_composite.py",
    "read/_composite_state.py",
    "_torch/_combined.py",
    "_torch/_parallel.py",
    "_torch/_dataloader.py",
    "_torch/_split.py",
    "_torch/_litdata_cache.py",
    "read/aio/_astream.py",
    "read/_reader.py",
    "read/engine/_pump.py",
    "read/_transform.py",
)
# private names of other value types the faces legitimately use (not faces: the spec and the plan values)
OTHER_VALUES = frozenset({"_shutdown_workers"})


def _declared() -> set[str]:
    names: set[str] = set()
    for protocol in (Face, Member, Composite):
        names |= {n for n in vars(protocol) if n.startswith("_") and not n.startswith("__")}
        names |= set(getattr(protocol, "__annotations__", {}))
    return names


def _crossings(path: Path) -> dict[str, set[int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    found: dict[str, set[int]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and (owner.id in ("self", "cls") or owner.id in imported):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        found.setdefault(node.attr, set()).add(node.lineno)
    return found


def test_the_protocols_declare_the_calls_between_faces() -> None:
    declared = _declared()
    assert {"_reader", "_open_reader", "_resume_plan", "_clear_resume"} <= declared
    undeclared = {
        f"{module}:{sorted(lines)[0]} ._{name.lstrip('_')}"
        for module in FACE_MODULES
        for name, lines in _crossings(PACKAGE / module).items()
        if name not in declared and name not in OTHER_VALUES
    }
    assert undeclared == set(), "declare these in read/_face.py or call a public method instead"


@pytest.mark.parametrize("name", ["_selection", "_pickle_choice", "_restricted_to", "_cache_settings", "_source"])
def test_the_old_private_reaches_are_gone(name: str) -> None:
    """What the faces used to read on each other directly (the spec now carries it, or a protocol call)."""
    reached = {module for module in FACE_MODULES if name in _crossings(PACKAGE / module)}
    assert reached == set()


FACE_TYPES = frozenset({"Member", "Face", "Composite"})


def _face_writes(tree: ast.AST) -> list[int]:
    """Lines where a function assigns an attribute of a face it was given (a parameter annotated ``Member``,
    ``Face`` or ``Composite``) or of a member it walks (``for d in face._datasets``)."""
    found: list[int] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        faces = {
            a.arg
            for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)
            if a.annotation is not None and ast.unparse(a.annotation).strip("'\"") in FACE_TYPES
        }
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.For)
                and isinstance(node.target, ast.Name)
                and "_datasets" in ast.unparse(node.iter)
            ):
                faces.add(node.target.id)
        for node in ast.walk(fn):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AugAssign | ast.AnnAssign) else []  # fmt: skip
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id in faces:
                        found.append(part.lineno)
    return found


def test_read_never_writes_an_attribute_of_a_face() -> None:
    """The read side owns its state (``DatasetReader``, ``CompositeResume``): code in ``read/`` reads a face
    through the protocols and writes nothing of it."""
    writes = {
        f"{path.relative_to(PACKAGE).as_posix()}:{line}"
        for path in sorted((PACKAGE / "read").rglob("*.py"))
        for line in _face_writes(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert writes == set()


def test_the_face_write_scan_finds_a_write() -> None:
    source = (
        "def load(face: Composite, state):\n"
        "    face._resume_state = dict(state)\n"
        "    for d in face._datasets:\n"
        "        d.current_epoch += 1\n"
        "def fine(face: 'Member'):\n"
        "    x = face._reader\n"
    )
    assert _face_writes(ast.parse(source)) == [2, 4]
