"""``litstream migrate``: rewrite a project's LitData imports to litstream, keeping its formatting.

Built on LibCST (a concrete syntax tree), so comments, blank lines and quoting survive. What it does
to a module:

* ``from litdata[.sub.module] import A, B as C`` becomes ``from litstream import A, B as C`` when litstream
  exports every name; names litstream does not export stay in a ``from litdata... import`` of their own
  and are reported. ``from litdata.debugger import ...`` becomes ``from litstream.debugger import ...``.
* ``import litdata`` / ``import litdata.streaming`` become ``import litstream``, and ``import litdata[.x] as
  ld`` becomes ``import litstream as ld``; attribute chains through the bound name lose LitData's submodule
  path (``litdata.streaming.item_loader.TokensLoader`` → ``litstream.TokensLoader``).
* Calls of litstream names are checked against :data:`litstream._cli._migrate_rules.ARGUMENT_RULES` and each
  argument that behaves differently is reported (the code is not changed for those).

A second run changes nothing (the rewrite is idempotent). Relative imports and strings are left alone.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .._core._errors import ConfigurationError
from ._migrate_rules import ARGUMENT_RULES

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Finding", "MigrationResult", "migrate_source", "unified_diff"]

_SOURCE = "litdata"
_TARGET = "litstream"
# LitData modules that litstream keeps as modules of the same name (their names are not top-level names).
_SUBMODULES = {"litdata.debugger": "litstream.debugger"}


@dataclass(frozen=True)
class Finding:
    """One thing the user should look at: ``path:line:column: message``."""

    path: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.message}"


@dataclass(frozen=True)
class MigrationResult:
    """The migrated text of one module and what was found in it."""

    path: str
    original: str
    migrated: str
    findings: tuple[Finding, ...] = field(default=())

    @property
    def changed(self) -> bool:
        """Whether the rewrite changed the text."""
        return self.migrated != self.original


def _public_names() -> frozenset[str]:
    import litstream

    return frozenset(litstream.__all__)


def _dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` of a Name/Attribute chain, or ``None`` for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _is_litdata(module: str | None) -> bool:
    return module is not None and (module == _SOURCE or module.startswith(_SOURCE + "."))


def migrate_source(code: str, path: str = "<string>") -> MigrationResult:
    """Migrate one module's source text.

    Args:
        code: the module's text.
        path: shown in findings; the file is not read.

    Returns:
        The migrated text and the findings (names litstream lacks, arguments it treats differently).

    Raises:
        ConfigurationError: ``code`` is not valid Python (LibCST's parser message, with ``path``).
    """
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError as exc:
        raise ConfigurationError(f"{path} is not valid Python, so it was not migrated: {exc}") from None
    wrapper = MetadataWrapper(module)
    transformer = _Migrate(path, _public_names())
    migrated = wrapper.visit(transformer)
    return MigrationResult(path, code, migrated.code, tuple(sorted(transformer.findings, key=_finding_key)))


def _finding_key(finding: Finding) -> tuple[int, int, str]:
    return (finding.line, finding.column, finding.message)


def unified_diff(result: MigrationResult) -> str:
    """The change as a unified diff (``a/PATH`` → ``b/PATH``), empty when nothing changed."""
    return "".join(
        difflib.unified_diff(
            result.original.splitlines(keepends=True),
            result.migrated.splitlines(keepends=True),
            fromfile=f"a/{result.path}",
            tofile=f"b/{result.path}",
        )
    )


class _Migrate(cst.CSTTransformer):
    """The LibCST transformer behind :func:`migrate_source` (one instance per module)."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, path: str, public: frozenset[str]) -> None:
        super().__init__()
        self.path = path
        self.public = public
        self.findings: list[Finding] = []
        # Names bound by `import litdata...`: bound name -> the name it is bound to after the rewrite.
        self.module_aliases: dict[str, str] = {}
        # Names bound by `from litdata... import X as Y` (and litstream's own imports): local -> public name.
        self.imported: dict[str, str] = {}

    # -- findings ------------------------------------------------------------------------------------
    def _note(self, node: cst.CSTNode, message: str) -> None:
        position = self.get_metadata(PositionProvider, node).start
        self.findings.append(Finding(self.path, position.line, position.column + 1, message))

    # -- `import litdata...` -------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> bool:
        return False  # module names are rewritten whole in leave_Import, never name by name

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False  # likewise, in leave_SimpleStatementLine

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        names = []
        for alias in updated.names:
            dotted = _dotted(alias.name)
            if not _is_litdata(dotted) and dotted != _TARGET and not (dotted or "").startswith(_TARGET + "."):
                names.append(alias)
                continue
            if dotted is not None and dotted.startswith(_TARGET):
                # Already litstream (a second run): remember the binding so its calls are checked.
                bound = alias.asname.name.value if alias.asname else _TARGET  # type: ignore[union-attr]
                self.module_aliases[bound] = bound
                names.append(alias)
                continue
            if alias.asname is not None:
                bound = alias.asname.name.value  # type: ignore[union-attr]
                self.module_aliases[bound] = bound
                target = _SUBMODULES.get(dotted or "", _TARGET)
                names.append(alias.with_changes(name=_name_expr(target)))
            else:
                self.module_aliases[_SOURCE] = _TARGET
                names.append(alias.with_changes(name=cst.Name(_TARGET)))
        return updated.with_changes(names=_dedupe_imports(names))

    # -- `from litdata... import ...` -----------------------------------------------------------------
    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.ImportFrom):
            return updated
        statement = updated.body[0]
        original_statement = original.body[0]
        if statement.relative:
            return updated
        module = _dotted(statement.module) if statement.module is not None else None
        if not _is_litdata(module):
            if module is not None and (module == _TARGET or module.startswith(_TARGET + ".")):
                self._remember(statement)
            return updated
        assert module is not None
        if module in _SUBMODULES:
            return updated.with_changes(body=[statement.with_changes(module=_name_expr(_SUBMODULES[module]))])
        if isinstance(statement.names, cst.ImportStar):
            if module == _SOURCE:
                return updated.with_changes(body=[statement.with_changes(module=cst.Name(_TARGET))])
            self._note(
                original_statement,
                f"from {module} import *: litstream has no module {module}; import names from litstream instead",
            )
            return updated
        kept: list[cst.ImportAlias] = []
        moved: list[cst.ImportAlias] = []
        for alias in statement.names:
            name = _dotted(alias.name) or ""
            (moved if name in self.public else kept).append(alias)
            if name in self.public:
                local = alias.asname.name.value if alias.asname else name  # type: ignore[union-attr]
                self.imported[local] = name
            else:
                self._note(original_statement, f"{module}.{name} has no litstream equivalent; left as it is")
        if not moved:
            return updated
        parenthesized = statement.lpar is not None
        if not kept:
            return updated.with_changes(body=[statement.with_changes(module=cst.Name(_TARGET))])
        new = statement.with_changes(module=cst.Name(_TARGET), names=_last_without_comma(moved, parenthesized))
        rest = statement.with_changes(names=_last_without_comma(kept, parenthesized))
        return cst.FlattenSentinel(
            [updated.with_changes(body=[new]), updated.with_changes(body=[rest], leading_lines=[])]
        )

    def _remember(self, statement: cst.ImportFrom) -> None:
        if isinstance(statement.names, cst.ImportStar):
            return
        for alias in statement.names:
            name = _dotted(alias.name) or ""
            if name in self.public:
                self.imported[alias.asname.name.value if alias.asname else name] = name  # type: ignore[union-attr]

    # -- attribute chains through a module alias ------------------------------------------------------
    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        # The chain is read from the original tree: inner parts were already rewritten on their way up.
        # An attribute's own name is never a module alias (`obj.litdata` stays as it is).
        updated = updated.with_changes(attr=original.attr)
        dotted = _dotted(original)
        if dotted is None:
            return updated
        root, *parts = dotted.split(".")
        if root not in self.module_aliases or not parts:
            return updated
        new_root = self.module_aliases[root]
        # The deepest public name in the chain wins: litdata.streaming.StreamingDataset -> litstream.StreamingDataset.
        for position, part in enumerate(parts):
            if part in self.public:
                if position == 0 and new_root == root:
                    return updated
                rest = parts[position + 1 :]
                return _name_expr(".".join([new_root, part, *rest]))
            if part == "debugger" and position == 0:
                return updated if new_root == root else _name_expr(".".join([new_root, *parts]))
        if new_root != root:
            return _name_expr(".".join([new_root, *parts]))
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        # A bare `litdata` (passed around as a module object): follows the import's rename.
        if updated.value == _SOURCE and self.module_aliases.get(_SOURCE) == _TARGET:
            return updated.with_changes(value=_TARGET)
        return updated

    # -- calls -----------------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        name = self._called_public_name(node)
        if name is None:
            return
        keywords = {arg.keyword.value for arg in node.args if arg.keyword is not None}
        has_star_kwargs = any(arg.star == "**" for arg in node.args)
        for rule in ARGUMENT_RULES:
            if rule.function != name:
                continue
            if rule.when == "given" and rule.argument in keywords:
                self._note(node, f"{name}({rule.argument}=...): {rule.note}")
            elif rule.when == "missing" and rule.argument not in keywords and not has_star_kwargs:
                self._note(node, f"{name}() without {rule.argument}=: {rule.note}")
            elif rule.when == "called":
                self._note(node, f"{name}({rule.argument}): {rule.note}")

    def _called_public_name(self, node: cst.Call) -> str | None:
        dotted = _dotted(node.func)
        if dotted is None:
            return None
        root, *parts = dotted.split(".")
        if not parts:
            return self.imported.get(root)
        if root in self.module_aliases and parts[-1] in self.public:
            return parts[-1]
        return None


def _name_expr(dotted: str) -> cst.Attribute | cst.Name:
    return cst.parse_expression(dotted)  # type: ignore[return-value]


def _last_without_comma(aliases: Sequence[cst.ImportAlias], parenthesized: bool = False) -> list[cst.ImportAlias]:
    """``aliases`` as a valid name list: a trailing comma is kept only inside parentheses."""
    out = list(aliases)
    if out and not parenthesized:
        out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def _dedupe_imports(names: list[cst.ImportAlias]) -> list[cst.ImportAlias]:
    """``import litdata, litdata.streaming`` would become ``import litstream, litstream``: keep one."""
    seen: set[str] = set()
    out: list[cst.ImportAlias] = []
    for alias in names:
        key = f"{_dotted(alias.name)} as {alias.asname.name.value if alias.asname else ''}"  # type: ignore[union-attr]
        if key in seen:
            continue
        seen.add(key)
        out.append(alias)
    return _last_without_comma(out)
