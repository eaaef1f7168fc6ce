"""The ``litstream`` command.

* ``litstream inspect DIR`` prints what a dataset holds.
* ``litstream cache path`` prints the chunk cache root; ``litstream cache clear`` deletes litstream's own cache
  (LitData's only with ``--include-litdata``; see :mod:`litstream._cache_cli`).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ._cache_cli import add_cache_commands, run_cache
from ._errors import LitstreamError
from ._sync import run_sync
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``litstream`` console script; returns the exit code."""
    parser = argparse.ArgumentParser(prog="litstream", description="Inspect litstream / LitData datasets.")
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect", help="print the item count, chunks and format of a dataset")
    inspect.add_argument("input_dir", help="dataset directory (holds index.json)")
    add_cache_commands(commands)
    args = parser.parse_args(argv)
    try:
        if args.command == "cache":
            return run_cache(args)
        return _inspect(args.input_dir)
    except LitstreamError as exc:
        print(f"litstream: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
