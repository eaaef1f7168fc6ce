"""Rewrite the "Arguments that `litstream migrate` reports" table of docs/migrating-from-litdata.md from
``litstream._cli._migrate_rules.ARGUMENT_RULES`` (the one source; ``tests/test_migrate.py`` checks they agree).

Run: ``.venv/bin/python scripts/migrate_table.py``.
"""

from __future__ import annotations

from pathlib import Path

from litstream._cli._migrate_rules import ARGUMENT_RULES

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "migrating-from-litdata.md"
HEADING = "## Arguments that `litstream migrate` reports"
SHOWN = "Test: `tests/test_migrate.py::test_every_rule_is_reported_where_it_applies`"
WHEN = {"given": "passed", "missing": "not passed", "called": "every call"}


def table() -> list[str]:
    rows = [
        "| Function | Argument | Reported when | What litstream does | Shown by |",
        "| --- | --- | --- | --- | --- |",
    ]
    rows += [f"| `{r.function}` | `{r.argument}` | {WHEN[r.when]} | {r.note} | {SHOWN} |" for r in ARGUMENT_RULES]
    return rows


def main() -> None:
    lines = GUIDE.read_text(encoding="utf-8").split("\n")
    start = lines.index(HEADING)
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("| Function |"))
    last = first
    while last + 1 < len(lines) and lines[last + 1].startswith("|"):
        last += 1
    lines[first : last + 1] = table()
    GUIDE.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
