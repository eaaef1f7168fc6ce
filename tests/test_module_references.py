"""Docstrings, comments and docs name modules that exist: a reference such as ``read/engine/_pump.py``,
``read.plan._resume`` or ``litstream.storage._store.Store`` (inside backticks) must start with a module or package
of the project; the names after it may be attributes. A module that moves leaves no stale name behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import litstream

PACKAGE = Path(litstream.__file__).parent
ROOT = PACKAGE.parent.parent
ROOMS = ("read", "write", "storage", "format", "index", "_core", "_torch", "_cli", "_sim", "_view", "_migrate")
QUOTED = re.compile(r"`+([^`\s]+)`+")
REFERENCE = re.compile(r"(?:litstream[./])?(" + "|".join(ROOMS) + r")((?:[./]\w+)+?)(?:\.py)?(?:\(\))?")


def _modules() -> set[str]:
    found = {p.relative_to(PACKAGE).with_suffix("").as_posix() for p in PACKAGE.rglob("*.py")}
    return found | {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*") if p.is_dir()}


def stale_references(text: str, modules: set[str]) -> list[str]:
    """The quoted references in ``text`` whose first two parts (room, module) are not a module or package."""
    stale = []
    for quoted in QUOTED.findall(text):
        match = REFERENCE.fullmatch(quoted)
        if match is None:
            continue
        parts = [match.group(1), *re.split(r"[./]", match.group(2).lstrip("./"))]
        if parts[1].endswith(".md") or (not parts[1].startswith("_") and parts[1] not in modules):
            continue  # a spec page (read.md) or an attribute of the room's package
        if "/".join(parts[:2]) not in modules:
            stale.append(quoted)
    return stale


def test_quoted_module_names_exist() -> None:
    modules = _modules()
    # docs/performance.md is a dated log of measurements: its entries name the modules as they were then
    files = [*PACKAGE.rglob("*.py"), *(p for p in (ROOT / "docs").glob("*.md") if p.name != "performance.md")]
    found = {
        f"{path.relative_to(ROOT).as_posix()}: {ref}"
        for path in files
        for ref in stale_references(path.read_text(encoding="utf-8"), modules)
    }
    assert found == set(), "name the module where it lives now"


def test_the_scan_finds_a_moved_module() -> None:
    modules = {"read", "read/plan", "read/plan/_resume", "read/engine", "read/engine/_pump"}
    text = "``read._resume``, ``read.plan._resume.ResumePlan``, `read/engine/_pump.py`, ``read/_gone.py``, `read.md`"
    assert stale_references(text, modules) == ["read._resume", "read/_gone.py"]
