"""``litstream migrate PATH... [--diff | --check]``: the command-line face of :mod:`litstream._cli._migrate`.

* Without a flag, each Python file under the paths whose LitData imports change is rewritten in place
  (a temporary file renamed over it, its permission bits kept), and the list of rewritten files is printed.
* ``--diff`` prints the change as a unified diff and writes nothing.
* ``--check`` writes nothing and exits 1 when a file would change (for CI), 0 when none would.

Findings (names litstream lacks, arguments it treats differently) go to stderr as ``path:line:column:
message`` in every mode; they do not change the exit code. Directories are walked recursively, skipping
hidden folders, ``__pycache__``, virtual environments and ``node_modules``; symbolic links are not followed.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .._core._errors import ConfigurationError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator, Sequence

__all__ = ["add_migrate_command", "python_files", "run_migrate"]

_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv"})


def add_migrate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``migrate`` to the ``litstream`` command's subcommands."""
    migrate = commands.add_parser(
        "migrate",
        help="rewrite a project's LitData imports to litstream and report arguments that behave differently",
        description="Rewrite LitData imports (litdata, litdata.streaming, litdata.processing.functions, ...) "
        "to litstream in place, keeping comments and formatting, and report each argument litstream treats "
        "differently (docs/migrating-from-litdata.md). Running it twice changes nothing.",
    )
    migrate.add_argument("paths", nargs="+", metavar="PATH", help="Python files or directories (walked recursively)")
    mode = migrate.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print a unified diff instead of writing")
    mode.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")


def python_files(paths: Sequence[str]) -> Iterator[Path]:
    """The ``.py`` files named by ``paths`` (files as given; directories walked in name order).

    Raises:
        ConfigurationError: a path does not exist.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            yield path
            continue
        if not path.is_dir():
            raise ConfigurationError(
                f"migrate: {raw!r} is neither a file nor a directory; give Python files or folders"
            )
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
            for name in sorted(files):
                candidate = Path(root) / name
                if name.endswith(".py") and not candidate.is_symlink():
                    yield candidate


def _write_in_place(path: Path, text: str) -> None:
    """Replace ``path``'s text atomically, keeping its permission bits."""
    mode = path.stat().st_mode & 0o7777
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".migrate", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def run_migrate(args: argparse.Namespace) -> int:
    """Run ``litstream migrate``; returns the exit code.

    Raises:
        ConfigurationError: a path does not exist, or a file is not valid Python.
    """
    try:
        from ._migrate import migrate_source, unified_diff
    except ModuleNotFoundError as exc:
        if exc.name != "libcst":
            raise
        raise ConfigurationError(
            'litstream migrate needs LibCST, which is not installed: pip install "litstream[migrate]"'
        ) from None
    changed: list[Path] = []
    for path in python_files(args.paths):
        original = path.read_bytes().decode("utf-8")
        result = migrate_source(original, str(path))
        for finding in result.findings:
            print(finding, file=sys.stderr)
        if not result.changed:
            continue
        changed.append(path)
        if args.diff:
            sys.stdout.write(unified_diff(result))
        elif not args.check:
            _write_in_place(path, result.migrated)
    if args.check:
        for path in changed:
            print(f"would migrate {path}")
        print(f"{len(changed)} file(s) would be migrated" if changed else "nothing to migrate")
        return 1 if changed else 0
    if not args.diff:
        for path in changed:
            print(f"migrated {path}")
        print(f"{len(changed)} file(s) migrated" if changed else "nothing to migrate")
    return 0
