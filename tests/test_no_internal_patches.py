"""No test patches litstream's internals: a test that needs another piece size, clock, store or file mapper
passes it through the seam the code offers (a parameter, a settings value, an environment variable, an
injected object), so what is tested is the code that runs.

The scan reads every test module with :mod:`ast` and fails on

* ``monkeypatch.setattr`` / ``delattr`` / ``setitem``, ``mock.patch`` (``.object``, ``.dict``), ``setattr`` and
  ``delattr`` whose target is litstream's: a ``"litstream...."`` string, a name imported from litstream, or an
  object made from one;
* an assignment to an attribute of a name imported from litstream (``arrow.LIMIT = 0``, ``TRACER.path = None``),
  and to a private attribute (``obj._x = ...``) of any object not known to be foreign (public attributes of
  the objects a test made, ``loader.current_epoch = 1``, are the API).

What a name is comes from the module's imports and, inside a function, from the simple assignments before
it (``ds = StreamingDataset(...)``, ``cache = source.cache``). Patching the standard library to fake an
operating-system fault (``os.posix_fallocate`` failing with ``ENOSPC``) and the peers' own objects is not
litstream's internals and stays allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

PATCHERS = {"setattr", "delattr", "setitem", "delitem", "patch", "object", "dict"}
PATCHING_OBJECTS = {"monkeypatch", "mock", "patch", "mock.patch", "unittest.mock", "unittest.mock.patch"}
LIBRARY, FOREIGN, UNKNOWN = "litstream", "foreign", "unknown"


def _root(node: ast.expr) -> ast.expr:
    while True:
        if isinstance(node, ast.Await):
            node = node.value
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return node


class _Scan(ast.NodeVisitor):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.imports: dict[str, str] = {}  # name -> LIBRARY or FOREIGN
        self.scopes: list[dict[str, ast.expr | None]] = [{}]  # name -> what it was last assigned (None: a parameter)
        self.found: list[str] = []

    # -- what a name is -----------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            name = alias.asname or alias.name.partition(".")[0]
            self.imports[name] = LIBRARY if alias.name.partition(".")[0] == "litstream" else FOREIGN

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        kind = LIBRARY if (node.module or "").partition(".")[0] == "litstream" and not node.level else FOREIGN
        for alias in node.names:
            self.imports[alias.asname or alias.name] = kind

    def _kind(self, node: ast.expr, depth: int = 0) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return LIBRARY if node.value.partition(".")[0] == "litstream" else FOREIGN
        root = _root(node)
        if not isinstance(root, ast.Name) or depth > 8:
            return UNKNOWN
        if root.id in ("self", "cls"):
            return FOREIGN  # the test's own classes
        for scope in reversed(self.scopes):
            if root.id in scope:
                value = scope[root.id]
                return UNKNOWN if value is None else self._kind(value, depth + 1)
        return self.imports.get(root.id, UNKNOWN)

    def _imported(self, node: ast.expr) -> bool:
        """Whether ``node`` is a name imported from litstream (a module, class or object of the library)."""
        if not isinstance(node, ast.Name) or any(node.id in scope for scope in self.scopes):
            return False
        return self.imports.get(node.id) == LIBRARY

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        args = node.args
        names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        self.scopes.append(dict.fromkeys(names))
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    # -- what is done with it -------------------------------------------------------------------
    def _report(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.path.relative_to(TESTS)}:{getattr(node, 'lineno', 0)}: {what}")

    def _assigned(self, target: ast.expr, value: ast.expr | None, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if value is not None:
                self.scopes[-1][target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._assigned(element, None, node)
                if isinstance(element, ast.Name):
                    self.scopes[-1][element.id] = None
        elif isinstance(target, ast.Attribute):
            private = target.attr.startswith("_") and not target.attr.startswith("__")
            if self._imported(target.value) or (private and self._kind(target.value) != FOREIGN):
                self._report(node, f"assigns {ast.unparse(target)}")
        elif isinstance(target, ast.Subscript) and ast.unparse(target.value) == "sys.modules":
            if self._kind(target.slice) == LIBRARY:
                self._report(node, f"replaces {ast.unparse(target)}")

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            self._assigned(target, node.value, node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        self._assigned(node.target, node.value, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        if isinstance(node.target, ast.Attribute):
            self._assigned(node.target, None, node)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name not in PATCHERS or not node.args:
            return
        target: ast.expr | None
        if name in ("setattr", "delattr") and isinstance(func, ast.Name):  # the builtins
            target = node.args[0]
        elif name in ("setitem", "delitem", "dict"):  # monkeypatch.setitem(sys.modules, "litstream.x", ...)
            target = node.args[1] if len(node.args) > 1 and ast.unparse(node.args[0]) == "sys.modules" else None
        elif isinstance(func, ast.Attribute) and ast.unparse(func.value) in PATCHING_OBJECTS:
            target = node.args[0]
        elif name == "patch":  # a bare ``patch(...)`` from unittest.mock
            target = node.args[0]
        else:
            return
        if target is not None and self._kind(target) == LIBRARY:
            self._report(node, f"{ast.unparse(func)}({ast.unparse(target)}, ...)")


def scan(source: str, path: Path) -> list[str]:
    """The patches of litstream's internals in ``source`` (the text of test module ``path``)."""
    visitor = _Scan(path)
    visitor.visit(ast.parse(source))
    return visitor.found


def test_the_scan_finds_each_kind_of_patch() -> None:
    source = (
        "import litstream.format.arrow._chunk as arrow\n"
        "from litstream._core._trace import TRACER\n"
        "from litstream.format._loaders import SampleEncoder\n"
        "import os, sys\n"
        "def test(monkeypatch, fixture_object):\n"
        "    monkeypatch.setattr(arrow, 'MAX_DECODED_FLOOR', 0)\n"
        "    monkeypatch.setattr('litstream.read.engine._engine.open_streaming', None)\n"
        "    monkeypatch.setitem(sys.modules, 'litstream._core._bridge', None)\n"
        "    TRACER._next_flush = 0\n"
        "    encoder = SampleEncoder()\n"
        "    encoder._fast = None\n"
        "    fixture_object._private = 1\n"
        "    monkeypatch.setattr(os, 'posix_fallocate', None)\n"  # an OS fault: allowed
        "    ours = encoder\n"
        "    ours._spec = None\n"
        "    ours.data_format = ()\n"  # a public attribute of an object the test made: the API
        "    TRACER.path = None\n"
        "    self._inner = 1\n"  # the test's own class
        "    import litdata\n"
        "    theirs = litdata.StreamingDataset('x')\n"
        "    theirs._forced_worker_env = None\n"  # the peer's object
    )
    found = scan(source, TESTS / "test_example.py")
    assert [line.split(": ", 1)[0] for line in found] == [f"test_example.py:{n}" for n in (6, 7, 8, 9, 11, 12, 15, 17)]


def test_no_test_patches_litstream_internals() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.relative_to(TESTS).parts[0] == "data" or path == Path(__file__).resolve():
            continue
        found += scan(path.read_text(encoding="utf-8"), path)
    assert found == [], "give the code a seam (a parameter, a settings value, an injected object) instead"
