"""Merging per-writer partial indexes into ``index.json``, committed last as a new version (LitData's ``Cache``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format._index import Index, is_partial_index_name, merge_partial_indexes
from ..storage._listing import list_retrying
from ._writer_lock import WriterLock

if TYPE_CHECKING:
    from ..storage._store import Store

__all__ = ["merge_index"]


async def merge_index(store: Store, *, existing: Index | None = None, now: float | None = None) -> Index:
    """Merge every ``{rank}.index.json`` in ``store`` (natural order) into a stamped ``index.json``.

    The merge holds the output's writer lease and commits ``index.json`` as a new version of the dataset
    (``_commit.py``: one atomic step) after all partials were read; the partials are deleted afterwards.
    ``existing`` (append mode) contributes its chunks first.

    Returns:
        The index that was written.

    Raises:
        FormatError: the partial configs differ.
        OutputLockedError: another run writes the output (names it); nothing was committed.
    """
    lock = await WriterLock(store, "Cache").aacquire()
    try:
        names = [m.path for m in await list_retrying(store) if "/" not in m.path and is_partial_index_name(m.path)]
        partials = [(name, Index.from_json(await store.get(name), source=name)) for name in names]
        merged = merge_partial_indexes(partials, existing=existing).stamped(now)
        await lock.acommit_index(merged.to_json().encode())
        for name in names:
            await store.delete(name)
    finally:
        await lock.arelease()
    return merged
