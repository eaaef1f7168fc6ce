"""The ``litstream`` command.

* ``litstream inspect DIR`` prints what a dataset holds.
* ``litstream cache path`` prints the chunk cache root; ``litstream cache clear`` deletes it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import TYPE_CHECKING

from ._errors import LitstreamError
from ._sync import run_sync
from .read._cache import default_cache_root
from .read._source import load_index
from .storage._resolver import store_for

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


def _inspect(input_dir: str) -> int:
    index = run_sync(load_index, store_for(input_dir))
    config = index.config
    print(f"dataset:      {input_dir}")
    print(f"items:        {index.num_items}")
    print(f"chunks:       {len(index.chunks)}")
    print(f"bytes:        {sum(c.chunk_bytes for c in index.chunks)} (uncompressed)")
    if config is not None:
        print(f"data_format:  {list(config.data_format)}")
        print(f"compression:  {config.compression}")
        print(f"item_loader:  {config.item_loader}")
    print(f"updated_at:   {index.updated_at}")
    return 0


def _cache(command: str) -> int:
    root = default_cache_root()
    if command == "path":
        print(root)
        return 0
    if root.exists():
        shutil.rmtree(root)
    print(f"removed {root}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``litstream`` console script; returns the exit code."""
    parser = argparse.ArgumentParser(prog="litstream", description="Inspect litstream / LitData datasets.")
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect", help="print the item count, chunks and format of a dataset")
    inspect.add_argument("input_dir", help="dataset directory (holds index.json)")
    cache = commands.add_parser("cache", help="the local chunk cache of remote datasets")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True)
    cache_commands.add_parser("path", help="print the cache root")
    cache_commands.add_parser("clear", help="delete the cache root and everything in it")
    args = parser.parse_args(argv)
    try:
        if args.command == "cache":
            return _cache(args.cache_command)
        return _inspect(args.input_dir)
    except LitstreamError as exc:
        print(f"litstream: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
