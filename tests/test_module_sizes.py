"""The house rule: modules stay under ~400 lines (split by topic when one grows); none may pass 420."""

from __future__ import annotations

from pathlib import Path

import litstream

LIMIT = 420
PACKAGE = Path(litstream.__file__).parent


def _sizes() -> dict[str, int]:
    return {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_every_module_is_at_most_420_lines() -> None:
    sizes = _sizes()
    assert "read/_engine.py" in sizes  # the walk sees the package's subfolders
    over = {name: lines for name, lines in sizes.items() if lines > LIMIT}
    assert over == {}, f"split these modules by topic (at most {LIMIT} lines each): {over}"
