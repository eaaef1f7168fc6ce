"""``walk``: ``os.walk`` over a local directory or an object-store prefix.

Object stores have no directories: a "directory" is a key prefix ending in ``/``. A remote prefix is
listed once (one recursive listing), the tree is rebuilt from the keys, and then walked like a local
one. Empty directories therefore exist only on local disk, and directory-marker objects (empty objects
named like a directory, or ending in ``/``, as consoles write them) count as directories, not files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._core._bridge import run_sync
from .._core._errors import ConfigurationError
from ._listing import list_retrying
from ._resolver import Dir, resolve_dir, store_for

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from ._base import ObjectMeta, Store

__all__ = ["walk"]


@dataclass
class _Node:
    dirs: dict[str, _Node] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)  # name -> size


def walk(
    folder: str | os.PathLike[str] | Dir,
    max_workers: int | None = 2,
    *,
    topdown: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> Iterator[tuple[str, list[str], list[str]]]:
    """Yield ``(dirpath, dirnames, filenames)`` for ``folder`` and every directory below it, like ``os.walk``.

    Works on local directories and on object-store prefixes (``s3://bucket/prefix``, ``gs://``,
    ``azure://``, ``hf://datasets/...``). ``dirpath`` is ``path`` (a URL keeps its scheme, without a
    trailing ``/``) joined with the sub-directory names, ``os.path.join`` for local paths and ``/`` for
    URLs. Names are sorted; with ``topdown=True`` (default) a directory comes before its
    sub-directories, and removing names from ``dirnames`` in place prunes the walk, as with
    ``os.walk``; with ``topdown=False`` it comes after them. A path that does not exist (or a prefix
    holding no object) yields nothing. Symbolic links to directories are not followed.

    A remote prefix is listed in one recursive listing when the walk starts. LitData's ``walk`` is a
    threaded local listing in no particular order; this one keeps ``os.walk``'s order instead.

    Args:
        folder: A local directory (``str``, ``Path``, ``file://``, ``local:``), a URL, or a
            :class:`~litstream.Dir`.
        max_workers: Accepted for LitData's signature (``walk(folder, max_workers=2)``); ``None`` or
            an int >= 1, without effect.
        topdown: Parents before children (default), or children first.
        storage_options: Credentials and client options for object-store URLs.

    Raises:
        ConfigurationError: an unknown URL scheme, bad ``storage_options`` or ``max_workers``.
        StorageError: the listing failed (plain ``http(s)://`` locations cannot be listed).
    """
    bad_workers = isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1
    if max_workers is not None and bad_workers:
        raise ConfigurationError(f"max_workers must be None or an int >= 1, got {max_workers!r}")
    resolved = resolve_dir(folder, argument="folder")
    if resolved.url is None:
        text = None if isinstance(folder, Dir) else os.fspath(folder)
        plain = text is not None and "://" not in text and not text.startswith("local:")
        return _walk_local(text if plain and text is not None else resolved.path or "", topdown)
    store = store_for(resolved.url, storage_options, argument="folder")
    return _walk_remote(resolved.url.rstrip("/"), store, topdown)


def _walk_local(top: str, topdown: bool) -> Iterator[tuple[str, list[str], list[str]]]:
    if topdown:
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()  # in place: os.walk descends in this order, and honours pruning
            filenames.sort()
            yield dirpath, dirnames, filenames
        return
    # Bottom-up: collect the sorted top-down order, then emit every directory after its children.
    entries = list(_walk_local(top, True))
    by_path = {dirpath: (dirnames, filenames) for dirpath, dirnames, filenames in entries}

    def visit(dirpath: str) -> Iterator[tuple[str, list[str], list[str]]]:
        dirnames, filenames = by_path[dirpath]
        for name in dirnames:
            child = os.path.join(dirpath, name)
            if child in by_path:  # not a symbolic link to a directory
                yield from visit(child)
        yield dirpath, dirnames, filenames

    if entries:
        yield from visit(entries[0][0])


def _walk_remote(top: str, store: Store, topdown: bool) -> Iterator[tuple[str, list[str], list[str]]]:
    listing: list[ObjectMeta] = run_sync(list_retrying, store)  # a listing cut short is asked for again
    if not listing:
        return
    root = _Node()
    for meta in listing:
        parts = meta.path.split("/")
        node = root
        for part in parts[:-1]:
            if part:
                node = node.dirs.setdefault(part, _Node())
        if parts[-1]:
            node.files[parts[-1]] = meta.size

    def visit(dirpath: str, node: _Node) -> Iterator[tuple[str, list[str], list[str]]]:
        # An empty object named like a sub-directory is that directory's marker, not a file.
        dirnames = sorted(node.dirs)
        filenames = sorted(name for name, size in node.files.items() if not (size == 0 and name in node.dirs))
        if topdown:
            yield dirpath, dirnames, filenames
        for name in dirnames:  # pruned in place by the caller when topdown
            if name in node.dirs:
                yield from visit(f"{dirpath}/{name}", node.dirs[name])
        if not topdown:
            yield dirpath, dirnames, filenames

    yield from visit(top, root)
