"""Recorded sizes checked against the files, for large local datasets, before anything is planned.

The read plan allocates 8 bytes per recorded item (``chunk_size``, or tokens for ``dim``), and the schema
bounds items by the recorded ``chunk_bytes`` (``format/_index_schema.py``), which an index could inflate.
For a local, uncompressed dataset that records more than :data:`CHECKED_ITEMS` items in all, the real file
sizes are one ``stat`` per chunk away: a ``chunk_bytes`` larger than its file — a damaged or hostile index —
is refused when the dataset is opened, before the plan allocates anything. (Smaller datasets plan in at
most 8 MiB and are checked chunk by chunk when read, so a truncated chunk fails only where it is read.
Remote chunks are checked against ``chunk_bytes`` when they are downloaded, compressed chunks when they are
decompressed.)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..._core._errors import FormatError
from ...storage._files import local_path

if TYPE_CHECKING:
    from ...format._index import Index
    from ...storage._base import Store

__all__ = ["CHECKED_ITEMS", "check_local_sizes"]

CHECKED_ITEMS = 2**20
"""Recorded items (all chunks) above which a local index is checked against its files when opened."""


def check_local_sizes(store: Store, index: Index) -> None:
    """Refuse a large index (over ``CHECKED_ITEMS`` items) whose uncompressed chunks record more bytes
    than their files hold.

    A missing file is left to the read that needs it (which raises ``ObjectNotFoundError``); a store that
    keeps no local files (``storage/_files.py``) is left to the checks made when chunks are downloaded.

    Args:
        store: The dataset's store.
        index: Its parsed (schema-checked) index.

    Raises:
        FormatError: naming the chunk, its recorded ``chunk_bytes`` and the file's size.
    """
    config = index.config
    if sum(max(info.chunk_size, info.dim or 0) for info in index.chunks) <= CHECKED_ITEMS:
        return
    if config is None or config.compression or config.extra.get("compression_level") not in (None, "", "chunk"):
        return
    for position, info in enumerate(index.chunks):
        path = local_path(store, info.filename)
        if path is None:
            return
        try:
            size = os.stat(path).st_size
        except OSError:
            continue
        if size < info.chunk_bytes:
            raise FormatError(
                f"index.json chunks[{position}] records chunk_bytes={info.chunk_bytes} but {info.filename} holds "
                f"{size} bytes; the file is incomplete or the index is damaged — re-run optimize"
            )
