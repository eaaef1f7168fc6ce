"""API guard: ``import litstream as litdata`` keeps LitData 0.2.76 code working.

Compares LitData's ``__all__`` and the parameters (names, positions, defaults) of its public callables
(functions, classes' ``__init__``) with litstream's. Every difference must be listed in DIFFERENCES,
the one table of them, which mirrors the "## API differences" section of docs/migrating-from-litdata.md
(checked below). Entries whose reason starts with "pending" are names another change of the same issue
is adding; they are removed when it lands.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import litstream
from peer import require_peer

pytestmark = pytest.mark.litdata


DIFFERENCES: dict[str, str] = {
    # Names another part of issue 13 is adding right now.
    # Deliberate differences (each one documented).
    "default: ChunkWaitTimeoutError(waited_s)": "optional: every litstream error is built from one message",
    "default: map(storage_options)": "None instead of {}: same meaning",
    "default: optimize(storage_options)": "None instead of {}: same meaning",
    "default: merge_datasets(storage_options)": "None instead of {}: same meaning",
}


def _parameters(obj: Any) -> list[inspect.Parameter] | None:
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature
        return None
    skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p for p in signature.parameters.values() if p.name != "self" and p.kind not in skip]


def _positional(params: list[inspect.Parameter]) -> list[str]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds]


def _differences() -> set[str]:
    litdata = require_peer("litdata")

    found: set[str] = set()
    for name in litdata.__all__:
        if not hasattr(litstream, name) or name not in litstream.__all__:
            found.add(f"missing: {name}")
            continue
        theirs, ours = _parameters(getattr(litdata, name)), _parameters(getattr(litstream, name))
        if theirs is None or ours is None:
            continue
        by_name = {p.name: p for p in ours}
        for param in theirs:
            mine = by_name.get(param.name)
            if mine is None:
                found.add(f"parameter: {name}({param.name})")
            elif repr(mine.default) != repr(param.default):
                found.add(f"default: {name}({param.name})")
        # A positional call that both accept must mean the same in both.
        for their_name, our_name in zip(_positional(theirs), _positional(ours), strict=False):
            if their_name != our_name:
                found.add(f"position: {name}({their_name})")
    return found


def test_litdata_api_differences_are_exactly_the_listed_ones() -> None:
    found = _differences()
    unlisted = sorted(found - DIFFERENCES.keys())
    stale = sorted(DIFFERENCES.keys() - found)
    assert not unlisted, f"new differences from LitData 0.2.76, fix them or list and document them: {unlisted}"
    assert not stale, f"listed differences that no longer exist, remove them from DIFFERENCES and the docs: {stale}"


def test_differences_table_mirrors_the_migration_guide() -> None:
    guide = Path(__file__).resolve().parents[1] / "docs" / "migrating-from-litdata.md"
    text = guide.read_text(encoding="utf-8")
    match = re.search(r"^## API differences\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert match is not None, "docs/migrating-from-litdata.md needs a '## API differences' section"
    entry = r"^- `((?:missing|default|parameter|position): [^`]+)`"
    documented = set(re.findall(entry, match.group(1), flags=re.MULTILINE))
    deliberate = {key for key, reason in DIFFERENCES.items() if not reason.startswith("pending")}
    assert documented == deliberate
