"""The ``litstream`` command.

* ``litstream inspect DIR [DIR ...]`` prints what each dataset holds (``--json`` for machines); a
  local pattern such as ``'data/*'`` is expanded here too when the shell did not expand it.
* ``litstream cache path`` prints the chunk cache root; ``litstream cache clear`` deletes litstream's own cache
  (LitData's only with ``--include-litdata``; see :mod:`litstream._cli._cache`).
* ``litstream optimize --fn MODULE:FUNCTION --inputs SPEC --output-dir DIR ...`` runs ``optimize()``
  (see :mod:`litstream._cli._optimize`).
* ``litstream migrate PATH... [--diff | --check]`` rewrites a project's LitData imports to litstream
  (see :mod:`litstream._cli._migrate_command`).
* ``litstream simulate init|run|serve`` predicts a cluster's streaming (see :mod:`litstream._cli._simulate`).
* ``litstream view DATASET`` shows what a dataset holds in the browser (see :mod:`litstream._view`).
* ``litstream versions PATH`` lists a dataset's committed versions; ``litstream gc PATH`` removes what retention
  no longer keeps (see :mod:`litstream._cli._versions`, ``docs/versions.md``).
* ``litstream --version`` prints the version.

It imports no torch (see ``docs/contributing.md``), so every command answers in well under a second.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from .._core._errors import LitstreamError
from .._version import __version__
from .._view._cli import add_view_command, run_view
from ._cache import add_cache_commands, run_cache
from ._migrate_command import add_migrate_command, run_migrate
from ._optimize import add_optimize_command, run_optimize
from ._simulate import add_simulate_command, run_simulate
from ._versions import add_version_commands, run_gc, run_versions

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..format._index import Index

__all__ = ["main"]


def human_bytes(n: int) -> str:
    """``n`` bytes in decimal units, as ``chunk_bytes="64MB"`` counts them: ``"1.5 MB"``, ``"512 B"``."""
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(size) < 1000 or unit == "TB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")  # pragma: no cover


def human_time(stamp: str | None) -> str:
    """An ``updated_at`` stamp (LitData writes ``str(time.time())``) as a UTC date; kept as-is if not a number."""
    if stamp is None:
        return "unfinished (no index.json yet; partial indexes merged)"
    try:
        when = datetime.datetime.fromtimestamp(float(stamp), tz=datetime.timezone.utc)
    except (ValueError, OverflowError, OSError):
        return stamp
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def _summary(input_dir: str, index: Index) -> dict[str, Any]:
    config = index.config
    sizes = [c.chunk_size for c in index.chunks]
    return {
        "dataset": input_dir,
        "items": index.num_items,
        "chunks": len(index.chunks),
        "bytes": sum(c.chunk_bytes for c in index.chunks),
        "items_per_chunk": {"min": min(sizes), "max": max(sizes)} if sizes else None,
        "config": None if config is None else config.to_json_obj(),
        "updated_at": index.updated_at,
    }


def _print_summary(input_dir: str, index: Index, summary: dict[str, Any]) -> None:
    config = index.config
    per_chunk = summary["items_per_chunk"]
    print(f"dataset:      {input_dir}")
    print(f"items:        {summary['items']}")
    print(f"chunks:       {summary['chunks']}", end="")
    print(f" ({per_chunk['min']} to {per_chunk['max']} items each)" if per_chunk else "")
    print(f"size:         {human_bytes(summary['bytes'])} uncompressed ({summary['bytes']} bytes)")
    if config is not None:
        print(f"data_format:  {list(config.data_format)}")
        print(f"compression:  {config.compression or 'none'}")
        print(f"encryption:   {'yes' if config.encryption else 'none'}")
        print(f"item_loader:  {config.item_loader}")
        if config.chunk_bytes is not None:
            print(f"chunk_bytes:  {human_bytes(config.chunk_bytes)} (limit when written)")
        if config.chunk_size is not None:
            print(f"chunk_size:   {config.chunk_size} items (limit when written)")
    print(f"updated:      {human_time(index.updated_at)}")


def _expand(patterns: Sequence[str]) -> list[str]:
    """Each argument as given, or the sorted local paths it matches when it is an unexpanded glob."""
    out: list[str] = []
    for pattern in patterns:
        is_url = "://" in pattern
        matches = [] if is_url or not glob.has_magic(pattern) else sorted(glob.glob(pattern))
        out.extend(matches or [pattern])
    return out


def _inspect(input_dirs: Sequence[str], as_json: bool) -> int:
    """Summarise every dataset; one that fails is reported on stderr and the others still print (exit 1)."""
    from .._core._bridge import run_sync  # imported here so that `litstream --help` and `cache` start fast
    from ..read.source._index_load import load_index
    from ..storage._resolver import store_for

    summaries: list[dict[str, Any]] = []
    failed = 0
    for number, input_dir in enumerate(_expand(input_dirs)):
        try:
            index = run_sync(load_index, store_for(input_dir))
        except LitstreamError as exc:
            print(f"litstream: {exc}", file=sys.stderr)
            failed += 1
            continue
        summary = _summary(input_dir, index)
        summaries.append(summary)
        if not as_json:
            if number:
                print()
            _print_summary(input_dir, index, summary)
    if as_json and summaries:
        # One dataset: its summary object (as before); several: a list of them, in argument order.
        print(
            json.dumps(
                summaries[0] if len(input_dirs) == 1 and len(summaries) == 1 else summaries, indent=2, sort_keys=True
            )
        )
    return 1 if failed else 0


# Each sub-command but ``inspect`` (run by ``_inspect``) and the function that runs it, returning the exit code.
_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "cache": run_cache,
    "optimize": run_optimize,
    "migrate": run_migrate,
    "simulate": run_simulate,
    "view": run_view,
    "versions": run_versions,
    "gc": run_gc,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``litstream`` console script; returns the exit code."""
    parser = argparse.ArgumentParser(prog="litstream", description="Write and inspect litstream / LitData datasets.")
    parser.add_argument("--version", action="version", version=f"litstream {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect", help="print the item count, chunks and format of datasets")
    inspect.add_argument("input_dir", nargs="+", help="dataset directories or URLs (each holds index.json)")
    inspect.add_argument("--json", action="store_true", help="print the summary as JSON (raw numbers)")
    add_cache_commands(commands)
    add_optimize_command(commands)
    add_migrate_command(commands)
    add_simulate_command(commands)
    add_view_command(commands)
    add_version_commands(commands)
    args = parser.parse_args(argv)
    try:
        run = _COMMANDS.get(args.command)
        code = _inspect(args.input_dir, args.json) if run is None else run(args)
        sys.stdout.flush()  # here, so that a reader that left is handled below, not at interpreter exit
        return code
    except LitstreamError as exc:
        print(f"litstream: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader of stdout left (`litstream inspect ... | head`): stop quietly, as other shell tools do,
        # and point stdout at /dev/null so that Python's final flush does not fail a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
