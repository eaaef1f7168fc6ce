"""Reading a dataset's index: ``index.json`` from its store (or its partial indexes merged), or a local index file."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio

from .._core._errors import DatasetNotFoundError, ObjectNotFoundError
from ..format._index import INDEX_FILENAME, Index, is_partial_index_name, merge_partial_indexes
from ..format.mds._index import read_index
from ..storage._base import mapped_errors
from ..storage._files import local_path
from ..storage._listing import list_retrying
from ..storage._safe_files import read_regular

if TYPE_CHECKING:
    from ..storage._store import Store

__all__ = ["load_index", "load_local_index"]


async def load_index(store: Store) -> Index:
    """Read ``index.json``; without it, merge the partial indexes in memory (an unfinished optimize).

    Raises:
        DatasetNotFoundError: neither ``index.json`` nor partial indexes exist.
        FormatError: the index is malformed.
    """
    try:
        path = local_path(store, INDEX_FILENAME)
        if path is not None:  # one small local file: read on the loop, no thread hop
            with mapped_errors("get", str(path)):
                raw = read_regular(path)  # a regular file inside the dataset, never a FIFO
        else:
            raw = await store.get(INDEX_FILENAME)
        return read_index(raw, f"{store.url}/{INDEX_FILENAME}")
    except ObjectNotFoundError:
        pass
    names = [m.path for m in await list_retrying(store) if "/" not in m.path and is_partial_index_name(m.path)]
    if not names:
        raise DatasetNotFoundError(
            f"{store.url} holds no index.json; is it the output_dir of optimize()? "
            "Run optimize(fn, inputs, output_dir=...) first"
        )
    partials = [(n, Index.from_json(await store.get(n), source=n)) for n in names]
    return merge_partial_indexes(partials)


async def load_local_index(index_path: str | os.PathLike[str]) -> Index:
    """Read an index kept apart from its data: ``index_path`` is an ``index.json`` or a directory holding one.

    Raises:
        FileNotFoundError: nothing there; the message names the path. FormatError: a malformed index.
    """
    path = await anyio.Path(index_path).expanduser()
    if await path.is_dir():
        path = path / INDEX_FILENAME
    try:
        text = await path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(
            f"index_path={os.fspath(index_path)!r}: no index file at {path}; pass the index.json that "
            "index_parquet_dataset or optimize wrote (or the directory holding it)"
        ) from None
    return read_index(text, str(path))
