"""Keyed reads: a sample's own id → its position → its bytes (``ds["id"]``, ``get_by_key``).

A :class:`KeyReader` loads the ``keys/`` shard a key hashes to once per process (one ``get`` of that
shard, validated in :mod:`litstream.format._keys`; LitData's older single ``keys.parquet`` when
``keys/shard-00000.parquet`` is absent) and answers every later lookup from memory by binary search; the
sample itself is then one item read, as ``ds[i]``: on a remote uncompressed dataset one range read of the
sample's bytes once the chunk's offset table is held (``read/source/_headers.py``). The reader pickles empty, so each
DataLoader worker loads its own copy on first use.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import anyio

from ..._core._errors import ConfigurationError, KeyNotFoundError, ObjectNotFoundError, raise_collapsed
from ...format._keys import (
    LEGACY_KEYS_NAME,
    KeyTable,
    decode_key_table,
    key_shard,
    normalize_key,
    section_of,
    shard_name,
    sorted_table,
)
from ...format._version_log import index_digest
from ._index_load import read_index_bytes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..plan._subset import Selection
    from ._source import DatasetSource

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["KeyReader", "read_by_keys"]

_CONCURRENT_READS = 16
"""Item reads of one ``get_by_keys`` call in flight at once."""


async def _check_latest(source: DatasetSource) -> None:
    """The ``keys/`` sidecar is not versioned (docs/versions.md): it maps keys to the positions of the latest
    version only, so a reader pinned to an older version refuses a keyed lookup rather than serve the sample at
    the same position of another version."""
    if source.digest is None:
        return  # partial indexes or an index kept apart: no version to compare
    try:
        raw = await anyio.to_thread.run_sync(read_index_bytes, source.store)
    except ObjectNotFoundError:
        return
    if index_digest(raw) != source.digest:
        raise KeyNotFoundError(
            f"{source.store.url}: this reader serves an older version of the dataset (a newer one was committed "
            "since it opened it); the keys/ sidecar maps keys to the latest version's samples only, so looking a "
            "key up here could return another sample. Open the dataset again for keyed lookups"
        )


class KeyReader:
    """The shards of one dataset's sidecar loaded so far in this process (empty after pickling)."""

    def __init__(self) -> None:
        self._reset(None)

    def _reset(self, updated_at: str | None) -> None:
        self._pid = os.getpid()
        self._names: list[str] | None = None  # the sidecar's files, by shard
        self._shards: dict[int, KeyTable] = {}
        self._updated_at = updated_at

    def __reduce__(self) -> tuple[type[KeyReader], tuple[()]]:
        return (KeyReader, ())

    async def _table_for(self, source: DatasetSource, key: str | int) -> KeyTable:
        if self._pid != os.getpid() or self._updated_at != source.index.updated_at:
            self._reset(source.index.updated_at)  # another process or another index: start afresh
        if self._names is None:
            # LitData infers one shard when index.json has no "keys" section (older writers)
            n = section_of(source.index.extra, source=f"{source.store.url}/index.json") or 1
            self._names = [shard_name(s) for s in range(n)]
        shard = key_shard(key, len(self._names))
        table = self._shards.get(shard)
        if table is not None:
            return table
        name = self._names[shard]
        try:
            raw = await source.store.get(name)
        except ObjectNotFoundError:
            if name == LEGACY_KEYS_NAME:
                raise
            try:  # LitData's older single-file layout, read when keys/shard-00000.parquet is absent
                raw = await source.store.get(LEGACY_KEYS_NAME)
            except ObjectNotFoundError:
                raise KeyNotFoundError(
                    f"the dataset in {source.store.url} has no keys/ sidecar ({name} and {LEGACY_KEYS_NAME} are "
                    "absent), so samples cannot be looked up by key; write it with optimize(..., key_fn=...) "
                    "or build_keys_index(input_dir, key_fn)"
                ) from None
            self._names, self._shards, shard, name = [LEGACY_KEYS_NAME], {}, 0, LEGACY_KEYS_NAME
        await _check_latest(source)  # after the read: a writer replaces the sidecar before it commits
        where = f"{source.store.url}/{name}"
        keys, indices, _ = decode_key_table(raw, source=where, num_items=source.index.num_items)
        table = self._shards[shard] = sorted_table(keys, indices, source=where)
        return table

    async def locate(self, source: DatasetSource, key: object) -> int:
        """The global sample index (in ``index.json`` order) of ``key``.

        Raises:
            KeyNotFoundError: the dataset has no sidecar, or ``key`` is not in it.
            ConfigurationError: ``key`` is not a str or int.
            FormatError: the sidecar is malformed.
        """
        norm = normalize_key(key)
        found = (await self._table_for(source, norm)).find(norm)
        if found is None:
            raise KeyNotFoundError(f"key {norm!r} is not in the dataset {source.store.url}")
        return found


def _in_selection(selection: Selection, chunk: int, item: int) -> bool:
    pairs = zip(selection.chunks, selection.regions, strict=True)
    return any(c == chunk and start <= item < end for c, (start, end) in pairs)


async def read_by_keys(
    source: DatasetSource, reader: KeyReader, keys: Sequence[object], selection: Selection | None
) -> list[Any]:
    """Decode the samples of ``keys``, in that order.

    Raises:
        KeyNotFoundError: a key is missing, or outside ``selection`` (a subset or split).
        ConfigurationError: the dataset is read with ``TokensLoader`` or ``ParquetLoader`` (no per-sample keys).
    """
    if source.tokens is not None or source.parquet is not None:
        raise ConfigurationError(
            "keyed access reads whole samples; open the dataset with the default item_loader (PyTreeLoader)"
        )
    positions = []
    for key in keys:  # all lookups first: a missing key fails before any sample is read
        chunk, item = source.locate(await reader.locate(source, key))
        if selection is not None and not _in_selection(selection, chunk, item):
            raise KeyNotFoundError(f"key {key!r} is in the dataset {source.store.url} but not in this subset")
        positions.append((chunk, item))
    if len(positions) == 1:
        chunk, item = positions[0]
        return [await source.read_sample(chunk, item)]  # a pytree item, or the row of an Arrow chunk
    out: list[Any] = [None] * len(positions)
    limiter = anyio.CapacityLimiter(_CONCURRENT_READS)

    async def fetch(slot: int, chunk: int, item: int) -> None:
        async with limiter:
            out[slot] = await source.read_sample(chunk, item)

    try:
        async with anyio.create_task_group() as tg:
            for slot, (chunk, item) in enumerate(positions):
                tg.start_soon(fetch, slot, chunk, item)
    except BaseExceptionGroup as group:
        raise_collapsed(group)
    return out
