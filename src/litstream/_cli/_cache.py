"""``litstream cache path`` and ``litstream cache clear``: show and empty the local chunk cache.

``path`` prints the cache root in use, and which variable chose it (``--plain``: the path alone).
``clear`` removes litstream's own cache root (``LITSTREAM_CACHE_DIR``, else ``~/.cache/litstream/chunks``)
and nothing else unless told: LitData's cache (``LITDATA_CACHE_DIR``, which litstream reads from and writes
into when ``LITSTREAM_CACHE_DIR`` is unset) only with ``--include-litdata``, any other directory (a
``cache_dir=`` given to a dataset) only when named with ``--dir``. It prints every path removed with its
file count and bytes, and what it kept.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from .._core._environ import environ
from .._core._errors import ConfigurationError
from ..storage._cache_dirs import default_cache_root, litdata_cache_root, own_cache_root

if TYPE_CHECKING:
    import argparse

__all__ = ["add_cache_commands", "run_cache"]


def add_cache_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``cache path`` and ``cache clear`` to the ``litstream`` parser."""
    cache = commands.add_parser("cache", help="the local chunk cache of remote datasets")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True)
    path = cache_commands.add_parser("path", help="print the cache root in use and where it comes from")
    path.add_argument("--plain", action="store_true", help="print only the path (for scripts)")
    clear = cache_commands.add_parser(
        "clear", help="delete litstream's cache root (LITSTREAM_CACHE_DIR or ~/.cache/litstream/chunks)"
    )
    clear.add_argument(
        "--include-litdata",
        action="store_true",
        help="also delete LitData's cache ($LITDATA_CACHE_DIR), which LitData itself uses",
    )
    clear.add_argument(
        "--dir",
        action="append",
        default=[],
        metavar="PATH",
        help="delete this cache directory instead (a dataset's cache_dir=); may be repeated",
    )


def _usage(path: Path) -> tuple[int, int]:
    """(files, bytes) under ``path`` (symbolic links are counted, not followed)."""
    files = size = 0
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                size += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                continue
            files += 1
    return files, size


def _check_removable(path: Path) -> None:
    if path == Path(path.anchor) or path == Path.home() or path == Path.cwd():
        raise ConfigurationError(
            f"cache clear: refusing to delete {path} (a filesystem root, the home or the current directory); "
            "point LITSTREAM_CACHE_DIR or --dir at a cache directory"
        )
    if path.exists() and not path.is_dir():
        raise ConfigurationError(f"cache clear: {path} is not a directory; nothing was removed")


def _clear(targets: list[Path]) -> list[str]:
    lines: list[str] = []
    for path in targets:
        _check_removable(path)
    for path in targets:
        if not path.exists():
            lines.append(f"nothing to remove: {path} does not exist")
            continue
        files, size = _usage(path)
        shutil.rmtree(path)
        lines.append(f"removed {path} ({files} files, {size} bytes)")
    return lines


def run_cache(args: argparse.Namespace) -> int:
    """Run ``cache path`` or ``cache clear``; returns the exit code.

    Raises:
        ConfigurationError: a target is a filesystem root, the home or the current directory, or not a directory.
    """
    if args.cache_command == "path":
        root = default_cache_root()
        if args.plain:
            print(root)
            return 0
        env = environ()
        source = (
            "set by LITSTREAM_CACHE_DIR"
            if env.litstream_cache_dir
            else "LitData's, set by LITDATA_CACHE_DIR"
            if env.litdata_cache_dir
            else "the default; set LITSTREAM_CACHE_DIR to move it"
        )
        print(f"Chunk cache directory (default for remote datasets): {root} ({source})")
        return 0
    litdata = litdata_cache_root()
    if args.dir:
        targets = [Path(d).expanduser().absolute() for d in args.dir]
    else:
        targets = [own_cache_root()]
    if args.include_litdata and litdata is not None:
        targets.append(litdata)
    targets = list(dict.fromkeys(targets))  # once each, in order
    lines = _clear(targets)
    if litdata is not None and litdata not in targets:
        lines.append(f"kept LitData's cache {litdata} (LITDATA_CACHE_DIR); pass --include-litdata to remove it too")
    elif args.include_litdata and litdata is None:
        lines.append("LITDATA_CACHE_DIR is not set: there is no LitData cache to remove")
    print("\n".join(lines))
    return 0
