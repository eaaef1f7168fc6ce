"""Merging per-writer partial indexes into ``index.json``, written last and atomically."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format._index import INDEX_FILENAME, Index, is_partial_index_name, merge_partial_indexes
from ..storage._listing import list_retrying

if TYPE_CHECKING:
    from ..storage._store import Store

__all__ = ["merge_index"]


async def merge_index(store: Store, *, existing: Index | None = None, now: float | None = None) -> Index:
    """Merge every ``{rank}.index.json`` in ``store`` (natural order) into a stamped ``index.json``.

    ``index.json`` is written with one atomic ``put`` after all partials were read; the partials are
    deleted afterwards. ``existing`` (append mode) contributes its chunks first.

    Returns:
        The index that was written.

    Raises:
        FormatError: the partial configs differ.
    """
    names = [m.path for m in await list_retrying(store) if "/" not in m.path and is_partial_index_name(m.path)]
    partials = [(name, Index.from_json(await store.get(name), source=name)) for name in names]
    merged = merge_partial_indexes(partials, existing=existing).stamped(now)
    await store.put(INDEX_FILENAME, merged.to_json().encode())
    for name in names:
        await store.delete(name)
    return merged
