"""``Dir(path=cache_dir, url=local_dir)``: LitData's "local remote", streamed through the cache.

LitData treats a ``Dir`` whose ``url`` is a local directory (a plain path or a ``file://`` URL) like a
remote dataset: chunks are copied from ``url`` into ``path`` (the cache) and read there. litstream does
the same: the source is read through a :class:`~litstream.LocalFileStore` and cached under ``path``.
"""

from __future__ import annotations

import os

from ..._core._errors import DatasetNotFoundError
from ...format._index import INDEX_FILENAME, is_partial_index_name
from ...storage._resolver import Dir, resolve_dir

__all__ = ["check_local_dataset", "local_remote_source"]


def local_remote_source(directory: Dir) -> str | None:
    """The local source directory of a ``Dir`` with a ``path`` and a local ``url``, else ``None``.

    Raises:
        ConfigurationError: ``url`` is a ``file://`` URL naming another machine.
    """
    if directory.path is None or directory.url is None:
        return None
    url = directory.url
    if "://" in url and not url.startswith("file://"):
        return None
    return resolve_dir(url, argument="input_dir.url").path


def check_local_dataset(root: str) -> None:
    """Raise now, in the constructor, when local directory ``root`` holds no dataset.

    A dataset is an ``index.json``, or the partial indexes (``{rank}.index.json``, ``{node}-index.json``) of
    an unfinished run: opening those raises ``DatasetNotFoundError`` naming the run, unless
    ``version="partial"`` asks for them (``read/source/_index_load.py``).

    Raises:
        DatasetNotFoundError: ``root`` does not exist, is not a directory, or holds no index.
    """
    if not os.path.isdir(root):
        raise DatasetNotFoundError(
            f"input_dir={root!r} does not exist or is not a directory; pass the output_dir of optimize()"
        )
    if os.path.lexists(os.path.join(root, INDEX_FILENAME)):
        return  # a link or a special file named index.json is refused, naming it, when it is read
    with os.scandir(root) as entries:
        if any(entry.is_file() and is_partial_index_name(entry.name) for entry in entries):
            return
    raise DatasetNotFoundError(
        f"input_dir={root!r} holds no {INDEX_FILENAME}; is it the output_dir of optimize()? "
        "Run optimize(fn, inputs, output_dir=...) first"
    )
