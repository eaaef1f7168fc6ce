"""Writing the ``keys/`` sidecar (layout in :mod:`litstream.format._keys`).

* In a worker, :class:`KeyRecorder` applies ``key_fn`` to every sample it writes and stores the keys, in
  sample order, as ``{rank}.keys.parquet`` when the worker finishes. A resumed worker (``use_checkpoint``)
  takes the committed prefix from the interrupted run's file, or recomputes it from its stored chunks.
* At the end of the run, :func:`publish_keys` maps every rank's keys to global indices through the
  merged index (chunks ``chunk-{rank}-*`` in order), puts the previous sidecar first (``mode="append"``),
  refuses duplicate keys naming both inputs, writes ``keys/shard-*.parquet`` and returns the ``keys``
  section that goes into ``index.json`` — written after the shards, so a reader never sees an index
  whose sidecar is missing.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, FormatError, ObjectNotFoundError
from ..format._keys import (
    LEGACY_KEYS_NAME,
    KeyTable,
    Labels,
    decode_key_table,
    encode_key_table,
    keys_config,
    normalize_key,
    rank_keys_name,
    section_of,
    shard_name,
    shard_split,
    sorted_table,
    table_from_values,
)
from .run._nodes import chunk_rank

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from ..format._index import Index
    from ..storage._store import Store
    from .run._nodes import BeforeIndex

__all__ = ["KeyRecorder", "load_sidecar", "publish_keys", "write_sidecar"]


def _rank_label(rank: int, j: int) -> str:
    return f"sample {j} of rank {rank}"


def _column_label(names: Any, j: int) -> str:
    return str(names[j].as_py())


def _dataset_label(name: str, indices: Any, j: int) -> str:
    return f"sample {int(indices[j])} of {name}"


@dataclass
class KeyRecorder:
    """The keys of one writer rank, in the order its samples were written."""

    key_fn: Callable[[Any], Any]
    keys: list[str | int] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)

    def add(self, sample: Any, where: str) -> None:
        """Record ``key_fn(sample)``; ``where`` names the input (for a duplicate-key message).

        Raises:
            ConfigurationError: ``key_fn`` returned something that is not a str or int key.
        """
        self.record(self.key_of(sample, where), where)

    def key_of(self, sample: Any, where: str) -> str | int:
        """``key_fn(sample)`` checked, not recorded (``optimize`` computes it in ``fn``'s thread).

        Raises:
            ConfigurationError: ``key_fn`` returned something that is not a str or int key.
        """
        return normalize_key(self.key_fn(sample), argument=f"key_fn(sample of {where})")

    def record(self, key: str | int | None, where: str) -> None:
        """Record a key made by :meth:`key_of` for the next sample written."""
        if key is None:
            raise ConfigurationError(f"no key was computed for the sample of {where}")
        self.keys.append(key)
        self.inputs.append(where)

    async def resume(self, store: Store, rank: int, committed: Index, decode: Callable[[Any], Any]) -> None:
        """Start from the ``committed`` chunks of an interrupted run: their keys come first.

        Uses the interrupted run's ``{rank}.keys.parquet`` when it covers them (it is written when a
        worker finishes), else decodes the chunks and applies ``key_fn`` again.
        """
        count = committed.num_items
        try:
            raw = await store.get(rank_keys_name(rank))
            keys, _, inputs = decode_key_table(raw, source=rank_keys_name(rank), num_items=2**62, partial=True)
            if len(keys) >= count:
                self.keys = keys.slice(0, count).to_pylist()
                names = inputs.slice(0, count).to_pylist() if inputs is not None else None
                self.inputs = [str(n) for n in names] if names else [_rank_label(rank, i) for i in range(count)]
                return
        except (ObjectNotFoundError, FormatError):
            pass
        from ..format._compression import decompress
        from ..format.arrow._chunk import ArrowChunk, read_chunk_view

        compression = committed.config.compression if committed.config is not None else None
        for chunk in committed.chunks:
            data = await store.get(chunk.filename)
            if compression:
                data = decompress(data, compression)
            view = read_chunk_view(data)  # Arrow rows are samples already
            rows = isinstance(view, ArrowChunk)
            for i in range(view.num_items):
                self.add(view.item(i) if rows else decode(view.item(i)), f"item {i} of {chunk.filename}")

    async def save(self, store: Store, rank: int) -> None:
        """Store this rank's keys as ``{rank}.keys.parquet`` (key, rank-local index, input)."""
        keys, indices = table_from_values(self.keys, source=f"rank {rank}", inputs=self.inputs)
        await store.put(rank_keys_name(rank), encode_key_table(keys, indices, inputs=self.inputs))


def _rank_positions(index: Index, first_new: int) -> dict[int, list[tuple[int, int]]]:
    """Per writer rank, ``(global start, items)`` of each of its chunks after ``first_new``, in order."""
    out: dict[int, list[tuple[int, int]]] = {}
    start = sum(c.chunk_size for c in index.chunks[:first_new])
    for chunk in index.chunks[first_new:]:
        rank = chunk_rank(chunk.filename)
        if rank is None:
            raise FormatError(f"cannot attribute {chunk.filename} to a writer rank to place its keys")
        out.setdefault(rank, []).append((start, chunk.chunk_size))
        start += chunk.chunk_size
    return out


async def load_sidecar(store: Store, index: Index, *, source: str | None = None) -> tuple[KeyTable, int] | None:
    """The whole sidecar of the dataset in ``store`` (all shards), and its shard count; ``None`` if it has none.

    Raises:
        FormatError: a shard is malformed or points outside ``index``.
        DuplicateKeyError: a key appears twice.
    """
    import numpy as np

    where = source or store.url
    num_shards = section_of(index.extra, source=f"{where}/index.json")
    names = [shard_name(s) for s in range(num_shards or 1)]
    if not await _exists(store, names[0]):  # LitData's rule: no shard 0, then the legacy single file
        if not await _exists(store, LEGACY_KEYS_NAME):
            return None
        names, num_shards = [LEGACY_KEYS_NAME], 1
    parts = []
    for name in names:
        raw = await store.get(name)
        parts.append(decode_key_table(raw, source=f"{where}/{name}", num_items=index.num_items)[:2])
    import pyarrow as pa

    keys = pa.concat_arrays([k.cast(parts[0][0].type) for k, _ in parts])
    indices = np.concatenate([i for _, i in parts])
    return sorted_table(keys, indices, source=f"{where}/keys"), num_shards or 1


async def _exists(store: Store, name: str) -> bool:
    try:
        await store.head(name)
    except ObjectNotFoundError:
        return False
    return True


async def write_sidecar(store: Store, table: KeyTable, index: Index, num_shards: int) -> dict[str, Any]:
    """Put ``keys/shard-*.parquet`` for ``table`` and return the ``keys`` section for ``index.json``."""
    import itertools

    starts = [0, *itertools.accumulate(c.chunk_size for c in index.chunks)][:-1]
    for s, part in enumerate(shard_split(table, num_shards)):
        await store.put(shard_name(s), encode_key_table(part.keys, part.indices, chunk_starts=starts))
    with contextlib.suppress(ObjectNotFoundError):  # readers prefer keys/ now; LitData drops the old file too
        await store.delete(LEGACY_KEYS_NAME)
    return keys_config(num_shards)


async def publish_keys(
    store: Store,
    index: Index,
    existing: Index | None,
    *,
    existing_sidecar: tuple[KeyTable, int] | None = None,
) -> Mapping[str, Any]:
    """Merge every rank's ``{rank}.keys.parquet`` into the dataset's sidecar; returns ``index.json``'s extra.

    Args:
        store: The output location.
        index: The merged index about to be written (previous chunks first in append mode).
        existing: The previous index (append mode), else ``None``.
        existing_sidecar: The previous sidecar (read before the run), for append mode.

    Raises:
        DuplicateKeyError: two samples share a key (names both inputs).
        FormatError: a rank's key file is missing or does not match its chunks.
    """
    import numpy as np
    import pyarrow as pa

    first_new = len(existing.chunks) if existing is not None else 0
    key_parts: list[Any] = []
    index_parts: list[Any] = []
    inputs = Labels()
    if existing_sidecar is not None:
        old = existing_sidecar[0]
        key_parts.append(old.keys)
        index_parts.append(old.indices)
        inputs.add(len(old), partial(_dataset_label, "the previous dataset", old.indices))
    names = []
    for rank, spans in sorted(_rank_positions(index, first_new).items()):
        name = rank_keys_name(rank)
        names.append(name)
        try:
            raw = await store.get(name)
        except ObjectNotFoundError:
            raise FormatError(f"{store.url}/{name} is missing: rank {rank} wrote chunks but no keys") from None
        keys, _, rank_inputs = decode_key_table(raw, source=name, num_items=2**62, partial=True)
        total = sum(n for _, n in spans)
        if len(keys) != total:
            raise FormatError(f"{name} lists {len(keys)} keys but rank {rank} wrote {total} samples")
        key_parts.append(keys)
        index_parts.append(np.concatenate([np.arange(s, s + n, dtype=np.int64) for s, n in spans]))
        if rank_inputs is not None:
            inputs.add(total, partial(_column_label, rank_inputs))
        else:
            inputs.add(total, partial(_rank_label, rank))
    kinds = {str(k.type) for k in key_parts if len(k)}
    if len(kinds) > 1:
        raise FormatError(f"key_fn returned keys of several types ({sorted(kinds)}); every key must have one type")
    keys_all = pa.concat_arrays([k.cast(key_parts[0].type) for k in key_parts]) if key_parts else pa.array([])
    indices_all = np.concatenate(index_parts) if index_parts else np.zeros(0, dtype=np.int64)
    if len(keys_all) != index.num_items:
        raise FormatError(
            f"the sidecar would list {len(keys_all)} keys for {index.num_items} samples; the previous dataset's "
            "keys/ is incomplete — rebuild it with build_keys_index"
        )
    table = sorted_table(keys_all, indices_all, source=store.url, inputs=inputs)
    num_shards = existing_sidecar[1] if existing_sidecar is not None else 1
    section = await write_sidecar(store, table, index, num_shards)
    for name in names:
        await store.delete(name)
    return {"keys": section}


def merge_key_tables(parts: Sequence[tuple[str, KeyTable, int]], *, source: str) -> KeyTable:
    """Concatenate key tables of datasets served one after the other: ``(name, table, num_items)`` each.

    Raises:
        FormatError: the tables hold keys of different types.
        DuplicateKeyError: a key appears twice (names both datasets and samples).
    """
    import numpy as np
    import pyarrow as pa

    types = {str(t.keys.type) for _, t, _ in parts if len(t)}
    if len(types) > 1:
        raise FormatError(f"{source}: the datasets' keys have different types ({sorted(types)})")
    base = 0
    keys: list[Any] = []
    indices: list[Any] = []
    inputs = Labels()
    for name, table, num_items in parts:
        keys.append(table.keys.cast(parts[0][1].keys.type))
        indices.append(table.indices + base)
        inputs.add(len(table), partial(_dataset_label, name, table.indices))
        base += num_items
    return sorted_table(pa.concat_arrays(keys), np.concatenate(indices), source=source, inputs=inputs)


async def discard_rank_keys(store: Store, ranks: Sequence[int]) -> None:
    """Delete the ``{rank}.keys.parquet`` of ``ranks`` (a failed run leaves nothing behind)."""
    for rank in ranks:
        try:
            await store.delete(rank_keys_name(rank))
        except ObjectNotFoundError:
            pass


async def has_sidecar(store: Store) -> bool:
    """Whether ``store`` holds ``keys/shard-00000.parquet`` (or LitData's older ``keys.parquet``)."""
    return await _exists(store, shard_name(0)) or await _exists(store, LEGACY_KEYS_NAME)


async def check_append_keys(store: Store, with_key_fn: bool) -> None:
    """Refuse an append that would leave the sidecar out of step with the samples.

    Raises:
        ConfigurationError: ``key_fn`` given but the dataset has no sidecar, or the reverse.
    """
    from .._core._errors import ConfigurationError
    from ..format._index import INDEX_FILENAME

    try:
        await store.head(INDEX_FILENAME)
    except ObjectNotFoundError:
        return
    present = await has_sidecar(store)
    if with_key_fn and not present:
        raise ConfigurationError(
            f"key_fn given with mode='append' but the dataset in {store.url} has no keys/ sidecar, so its "
            "samples would have no keys; run build_keys_index on it first, or drop key_fn"
        )
    if present and not with_key_fn:
        raise ConfigurationError(
            f"the dataset in {store.url} has a keys/ sidecar; pass key_fn= with mode='append' so the new "
            "samples get keys too"
        )


async def keys_hook(store: Store, existing: Index | None) -> BeforeIndex:
    """The ``before_index`` hook of a run with ``key_fn``: publishes the sidecar before ``index.json``."""
    sidecar = await load_sidecar(store, existing) if existing is not None else None

    async def hook(index: Index) -> Mapping[str, Any]:
        return await publish_keys(store, index, existing, existing_sidecar=sidecar)

    return hook
