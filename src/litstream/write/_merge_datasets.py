"""``merge_datasets``: several optimized datasets copied into one (LitData's function of that name).

Inputs published by others (``hf://``, ``http(s)://``) or already marked untrusted make the output
carry the trust marker (``format/_trust_marker.py``): a default local read then refuses its pickled leaves.

Flow: resolve every location → read every input's ``index.json`` → check that the inputs can be
served as one dataset and that the output holds nothing → copy the chunk files under their new names
(``chunk-0-{k}[.{compression}].bin``, consecutive in input order), at most ``max_workers`` at once →
write ``index.json`` last, in one atomic ``put``. Nothing is written before every check passed; if a
copy fails, the chunks copied so far are removed again and no ``index.json`` appears.

One writer at a time: the merge holds the output's writer lease (``write/_writer_lock.py``) from the
emptiness check to the commit, as ``optimize`` does, and commits ``index.json`` only while the lease is
still its own and no ``index.json`` has appeared; a second writer of the same output (another merge, an
``optimize``, ...) fails at once with ``OutputLockedError`` naming the first.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from .._core._bridge import run_sync
from .._core._errors import (
    ConfigurationError,
    DatasetNotFoundError,
    ObjectNotFoundError,
    OutputLockedError,
    OutputNotEmptyError,
    raise_collapsed,
)
from ..format._checksum import CHECKSUM_KEY, DEFAULT_CHECKSUM, chunk_digest, expected_digest, verify_chunk
from ..format._chunk import chunk_filename
from ..format._compression import compression_from_config
from ..format._index import INDEX_FILENAME, ChunkInfo, DatasetConfig, Index
from ..format._keys import KeyTable, shard_name
from ..format._trust_marker import is_untrusted_location, untrusted_sources, with_untrusted
from ..storage._listing import list_retrying
from ..storage._resolver import store_for
from ._keys import load_sidecar, merge_key_tables, write_sidecar
from ._writer_lock import WriterLock, is_lock_name

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..storage._resolver import Dir
    from ..storage._store import Store

__all__ = ["merge_datasets"]


def merge_datasets(
    input_dirs: Sequence[str | os.PathLike[str] | Dir | Store],
    output_dir: str | os.PathLike[str] | Dir | Store,
    max_workers: int | None = os.cpu_count(),
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Copy several optimized datasets into ``output_dir`` as one dataset (matches LitData's ``merge_datasets``).

    The merged dataset serves the inputs' samples one input after the other, each in its own order.
    Chunk files are copied byte for byte (compressed ones stay compressed) and renamed
    ``chunk-0-{k}.bin``, or ``chunk-0-{k}.{compression}.bin`` when compressed (the name readers
    derive from the config, LitData issue #276); the config of the first input becomes the config.
    Inputs and output may be any mix of local directories and object-store URLs.

    Args:
        input_dirs: Two or more datasets (local paths, URLs, ``Dir`` or ``Store``), each with an
            ``index.json``. They must agree on ``data_format``, ``data_spec`` (the sample structure),
            ``item_loader``, ``encryption`` and whether and how they are compressed (zstd levels may
            differ).
        output_dir: Where the merged dataset goes; must hold no files (and not be an input).
        max_workers: Chunk copies in flight at once (``>= 1``; ``None`` means 1). Default
            ``os.cpu_count()``.
        storage_options: Credentials and client options for every remote location (see
            ``StreamingDataset``); ignored for local paths.

    Raises:
        ConfigurationError: (a ``ValueError``) fewer than two inputs, ``output_dir`` among them, a bad
            ``max_workers``, or inputs that cannot be merged (the message names both inputs, the
            config key and both values). Raised before anything is written.
        DatasetNotFoundError: an input holds no ``index.json`` (before anything is written).
        OutputNotEmptyError: ``output_dir`` already holds files (before anything is written).
        OutputLockedError: another run writes ``output_dir`` (names it; nothing is written), or this merge's
            lease was taken over before its commit (the chunks copied are removed).
        StorageError: a copy or the ``index.json`` upload failed; the chunks copied so far are removed.
        ChecksumError: an input's chunk does not match the checksum its index records (names it); the
            chunks copied so far are removed. The merged index records a checksum for every chunk.
    """
    if isinstance(input_dirs, (str, bytes, os.PathLike)) or not hasattr(input_dirs, "__len__"):
        raise ConfigurationError(
            f"input_dirs must be a list of dataset locations, got {input_dirs!r:.80}; "
            "pass e.g. input_dirs=['data/a', 'data/b']"
        )
    if len(input_dirs) < 2:
        raise ConfigurationError(
            f"input_dirs must name at least 2 datasets to merge, got {len(input_dirs)} ({list(input_dirs)!r:.80})"
        )
    workers = 1 if max_workers is None else max_workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigurationError(f"max_workers must be an int >= 1 (parallel chunk copies), got {max_workers!r}")
    inputs = [store_for(d, storage_options, argument=f"input_dirs[{i}]") for i, d in enumerate(input_dirs)]
    output = store_for(output_dir, storage_options, argument="output_dir")
    for i, store in enumerate(inputs):
        if _same_place(store, output):
            raise ConfigurationError(
                f"output_dir {output.url} is also input_dirs[{i}]; merge into a new, empty output_dir"
            )
    run_sync(_merge, inputs, output, workers)


def _same_place(a: Store, b: Store) -> bool:
    return a is b or a.url.rstrip("/") == b.url.rstrip("/")


async def _read_index(store: Store, argument: str) -> Index:
    try:
        text = await store.get(INDEX_FILENAME)
    except ObjectNotFoundError:
        raise DatasetNotFoundError(
            f"{argument}={store.url} holds no index.json; merge_datasets takes complete optimized datasets "
            "(run optimize() first, or finish an interrupted one)"
        ) from None
    index = Index.from_json(text, source=f"{store.url}/{INDEX_FILENAME}")
    if index.config is None or not index.chunks:
        raise ConfigurationError(f"{argument}={store.url} holds no samples (its index.json lists no chunks)")
    return index


def _codec(compression: str | None) -> str | None:
    return None if compression is None else compression.split(":")[0]


def _level(config: DatasetConfig) -> str | None:
    """``compression_level`` (``"chunk"``, ``"batch"``, ``"sample"``) or ``None`` when not compressed."""
    spec = compression_from_config(config.to_json_obj())
    return None if spec is None else spec.level


def _shown(config: DatasetConfig, key: str, value: Any) -> Any:
    return getattr(config, key) if hasattr(config, key) else value(config)


def _check_compatible(indexes: Sequence[Index], stores: Sequence[Store]) -> DatasetConfig:
    first = indexes[0].config
    assert first is not None
    checks: list[tuple[str, Any]] = [
        ("data_format", lambda c: list(c.data_format)),
        ("data_spec", lambda c: c.data_spec),
        ("item_loader", lambda c: c.item_loader),
        ("compression", lambda c: _codec(c.compression)),
        ("compression_level", _level),
        ("encryption", lambda c: None if c.encryption is None else dict(c.encryption)),
    ]
    for i, index in enumerate(indexes[1:], start=1):
        config = index.config
        assert config is not None
        for key, value in checks:
            if value(config) != value(first):
                hint = (
                    "; compressed and uncompressed datasets cannot be merged: re-optimize one of them with the "
                    "other's compression"
                    if key == "compression"
                    else "; only datasets whose samples have the same structure and types can be merged"
                )
                raise ConfigurationError(
                    f"input_dirs[{i}]={stores[i].url} has {key}={_shown(config, key, value)!r} but input_dirs[0]="
                    f"{stores[0].url} has {key}={_shown(first, key, value)!r}{hint}"
                )
    return first


async def _merge(inputs: Sequence[Store], output: Store, max_workers: int) -> None:
    indexes = [await _read_index(store, f"input_dirs[{i}]") for i, store in enumerate(inputs)]
    config = _check_compatible(indexes, inputs)
    await _check_empty(output)  # before the lease: a non-empty output is refused without a write
    keys = await _merged_keys(inputs, indexes)
    lock = await WriterLock(output, "merge_datasets").aacquire()
    try:
        await _check_empty(output)  # again under the lease: another writer may have come first
        await anyio.to_thread.run_sync(lock.note_index)
        await _copy_and_commit(inputs, indexes, config, keys, output, max_workers, lock)
    finally:
        await lock.arelease()


async def _check_empty(output: Store) -> None:
    present = [m for m in await list_retrying(output) if not is_lock_name(m.path)]
    if present:
        names = ", ".join(m.path for m in present[:3])
        raise OutputNotEmptyError(
            f"output_dir {output.url} is not empty (holds {names}{', ...' if len(present) > 3 else ''}); "
            "merge_datasets writes into an empty directory or prefix"
        )


async def _copy_and_commit(
    inputs: Sequence[Store],
    indexes: Sequence[Index],
    config: DatasetConfig,
    keys: KeyTable | None,
    output: Store,
    max_workers: int,
    lock: WriterLock,
) -> None:
    copies: list[tuple[Store, ChunkInfo, str]] = []
    chunks: list[ChunkInfo] = []
    for store, index in zip(inputs, indexes, strict=True):
        for chunk in index.chunks:
            # the ``.{compression}`` infix marks whole-file ("chunk") compression only
            name = chunk_filename(0, len(chunks), config.compression if _level(config) == "chunk" else None)
            copies.append((store, chunk, name))
            chunks.append(replace(chunk, filename=name))

    limiter = anyio.CapacityLimiter(max_workers)
    written: list[str] = []

    async def copy(position: int, source: Store, old: ChunkInfo, new: str) -> None:
        async with limiter:
            data = await source.get(old.filename)
            # a recorded checksum is verified (no corrupt chunk is copied); a chunk without one gets the default
            checked = await anyio.to_thread.run_sync(_checked, old, data, f"{source.url}/{old.filename}")
            chunks[position] = replace(checked, filename=new)
            if lock.lost is not None:  # another run took the output over: stop copying into it
                raise OutputLockedError(lock.lost)
            await output.put(new, data)
            written.append(new)

    try:
        try:
            async with anyio.create_task_group() as tg:
                for position, (source, old, new) in enumerate(copies):
                    tg.start_soon(copy, position, source, old, new)
        except BaseExceptionGroup as group:
            raise_collapsed(group)
        # trust travels: inputs published by others (or already marked) make the merged dataset untrusted
        sources = [s.url for s in inputs if is_untrusted_location(s.url)]
        sources += [url for index in indexes for url in untrusted_sources(index.extra)]
        merged = Index(chunks=tuple(chunks), config=config, extra=with_untrusted({}, sources)).stamped()
        if keys is not None:
            written.append(shard_name(0))
            merged = replace(merged, extra={**merged.extra, "keys": await write_sidecar(output, keys, merged, 1)})
        await lock.acommit_index(merged.to_json().encode())  # only while the lease is ours and no index exists
    except BaseException:
        with anyio.CancelScope(shield=True):
            for name in written:
                await output.delete(name)
        raise


def _checked(info: ChunkInfo, data: bytes, where: str) -> ChunkInfo:
    """``info`` once ``data`` matches its recorded checksum, or ``info`` with the default checksum of ``data``.

    Raises:
        ChecksumError: ``data`` does not match the checksum its input records (names the chunk).
    """
    if expected_digest(info) is not None:
        verify_chunk(data, info, where=where)
        return info
    return replace(info, extra={**info.extra, CHECKSUM_KEY: chunk_digest([data], DEFAULT_CHECKSUM)})


async def _merged_keys(inputs: Sequence[Store], indexes: Sequence[Index]) -> KeyTable | None:
    """The inputs' ``keys/`` sidecars as one (indices shifted), ``None`` when no input has one.

    Raises:
        ConfigurationError: some inputs have a sidecar and others not.
        DuplicateKeyError: two inputs share a key (checked before anything is copied).
    """
    tables = [await load_sidecar(store, index) for store, index in zip(inputs, indexes, strict=True)]
    if all(t is None for t in tables):
        return None
    lacking = [i for i, t in enumerate(tables) if t is None]
    if lacking:
        raise ConfigurationError(
            f"input_dirs[{lacking[0]}]={inputs[lacking[0]].url} has no keys/ sidecar but other inputs do; run "
            "build_keys_index on it first so the merged dataset keeps keyed access"
        )
    parts = [
        (f"input_dirs[{i}]", t[0], index.num_items)
        for i, (t, index) in enumerate(zip(tables, indexes, strict=True))
        if t is not None
    ]
    return merge_key_tables(parts, source="merge_datasets")
