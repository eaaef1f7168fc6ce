"""docs/migrating-from-litdata.md: every row of its tables names a test that shows the behaviour.

Each row ends with ``Test: `tests/<file>.py::<test>```; the file must be a collected test module and
the test a module-level ``test_*`` function (sync or async) in it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "migrating-from-litdata.md"
REFERENCE = re.compile(r"Test: `(tests/[\w/]+\.py)::(test_\w+)`")


def _rows() -> list[str]:
    rows = []
    for line in GUIDE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or line.startswith("| ---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("LitData", "Name", "Function"):  # a header
            continue
        rows.append(line)
    return rows


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")
    }


def test_the_guide_has_rows() -> None:
    assert len(_rows()) >= 40


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row[2:50])
def test_each_row_names_an_existing_test(row: str) -> None:
    found = REFERENCE.findall(row)
    assert found, f"this row names no test (end it with Test: `tests/...py::test_...`): {row[:120]}"
    for file, name in found:
        path = ROOT / file
        assert path.is_file(), f"{file} does not exist"
        assert path.name.startswith("test_"), f"{file} is not collected by pytest (test_*.py)"
        assert name in _tests_in(path), f"{file} has no module-level {name}"
