"""``complete_dataset``: rebuild a missing ``index.json`` after an interrupted run.

LitData's ``complete_dataset(input_dir)`` merges the per-writer ``{rank}.index.json`` (and per-node
``{node}-index.json``) files of a run that stopped before its final merge, and does nothing when
``index.json`` exists (spec/format-and-write.md §2.6, §8). litstream does the same, on local disk and
object storage, and also recovers the chunk files no partial index lists (a worker killed before it
wrote its partial): their item counts come from the chunk headers (§3.1), the dataset's config
from any partial index or optimize checkpoint that survived. The rebuilt index lists chunks in
LitData's merge order — by writer rank, then chunk number — and is written last, in one atomic put;
the partial indexes it consumed are then deleted.

One writer at a time: the rebuild holds the dataset's writer lease (``write/_writer_lock.py``), as
``optimize`` does, and writes ``index.json`` only while the lease is its own and ``index.json`` is as it
found it. So two ``complete_dataset`` calls (or one beside a running ``optimize``) never both write: the
second fails with ``OutputLockedError`` naming the first. A crashed run's lease is taken over by the
stale-lock rule; a live run's (or, from another machine, one renewed in the last minute) is not.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .._core._bridge import run_sync
from .._core._errors import DatasetNotFoundError, FormatError, ObjectNotFoundError
from ..format._chunk import header_length, item_span_offset
from ..format._compression import compression_from_config, decompress
from ..format._dtypes import numpy_dtype_from_index, parse_dtype_suffix, torch_dtype_itemsize
from ..format._framed import FRAMED_MAGIC, chunk_from_file
from ..format._index import (
    INDEX_FILENAME,
    ChunkInfo,
    DatasetConfig,
    Index,
    is_partial_index_name,
    merge_partial_indexes,
)
from ..format.arrow._chunk import ARROW_FOOTER_MAGIC, ARROW_TRAILER
from ..storage._listing import list_retrying
from ..storage._resolver import store_for
from ._writer_lock import WriterLock, is_lock_name

if TYPE_CHECKING:
    import os
    from collections.abc import Awaitable, Callable, Mapping

    from ..storage._resolver import Dir
    from ..storage._store import ObjectMeta, Store

__all__ = ["complete_dataset", "is_complete_dataset"]

_CHUNK_NAME = re.compile(r"^chunk-(\d+)-(\d+)(?:-u[0-9a-zA-Z]+)?(\.[^/]+)?\.bin$")
_CHECKPOINT = re.compile(r"^\.checkpoints/checkpoint-\d+\.json$")


def complete_dataset(
    input_dir: str | os.PathLike[str] | Dir | Store, *, storage_options: Mapping[str, Any] | None = None
) -> str:
    """Write ``index.json`` for a dataset whose run stopped before its final merge; matches LitData's.

    Does nothing if a valid ``index.json`` exists (as LitData). Otherwise the chunks listed by the
    partial indexes (``{rank}.index.json``, ``{node}-index.json``) and every other chunk file
    (``chunk-{rank}-{n}[.{compression}].bin``) are indexed, ordered by rank then chunk number; the
    config comes from the partial indexes (which must agree) or, failing those, from an optimize
    checkpoint (``.checkpoints/checkpoint-{rank}.json``). A truncated ``index.json`` (not valid
    JSON) is rebuilt the same way.

    Args:
        input_dir: A local directory, an object-store URL (``s3://``, ``gs://``, ``azure://``), a
            :class:`~litstream.Dir` or a :class:`~litstream.Store`.
        storage_options: Credentials and client options for object-store URLs.

    Returns:
        The dataset's location (``Store.url``: an absolute path, or the URL).

    Raises:
        DatasetNotFoundError: the location holds no files, or neither an index nor any chunk file.
        FormatError: the index cannot be rebuilt: no partial index or checkpoint records the sample
            format, the partial configs differ, a listed chunk file is missing, or a chunk file is
            truncated or compressed differently from the config. Nothing is written then.
        OutputLockedError: (a ``RuntimeError``) another run writes the dataset (named); nothing is written.
        StorageError: a read or the write failed.
    """
    store = store_for(input_dir, storage_options, argument="input_dir")
    run_sync(_complete_locked, store)
    return store.url


def is_complete_dataset(
    input_dir: str | os.PathLike[str] | Dir | Store, *, storage_options: Mapping[str, Any] | None = None
) -> bool:
    """Whether ``input_dir`` holds an ``index.json``, i.e. the dataset is ready to stream; as LitData's.

    Like LitData this only checks that the file exists (it does not parse it); a directory or prefix
    that does not exist is not complete. :func:`complete_dataset` writes the index of one that is not.

    Args:
        input_dir: A local directory, an object-store URL, a :class:`~litstream.Dir` or a
            :class:`~litstream.Store`. LitData accepts local paths only.
        storage_options: Credentials and client options for object-store URLs.

    Returns:
        ``True`` when ``index.json`` exists at the top of ``input_dir``.

    Raises:
        ConfigurationError: an unknown URL scheme or bad ``storage_options``.
        StorageError: the check itself failed (other than "not found").
    """
    store = store_for(input_dir, storage_options, argument="input_dir")
    return run_sync(_has_index, store)


async def _has_index(store: Store) -> bool:
    try:
        await store.head(INDEX_FILENAME)
    except ObjectNotFoundError:
        return False
    return True


async def _listing(store: Store) -> list[ObjectMeta]:
    listing = [meta for meta in await list_retrying(store) if not is_lock_name(meta.path)]
    if not listing:
        raise DatasetNotFoundError(f"{store.url} does not exist or holds no files: there is no dataset to complete")
    return listing


async def _is_complete(store: Store, listing: list[ObjectMeta]) -> bool:
    if all(meta.path != INDEX_FILENAME for meta in listing):
        return False
    try:
        Index.from_json(await store.get(INDEX_FILENAME))
        return True
    except FormatError:
        return False  # a truncated index.json: rebuild it


async def _complete_locked(store: Store) -> Index | None:
    """:func:`_complete` under the writer lease; nothing is written (no lease either) for a complete one."""
    if await _is_complete(store, await _listing(store)):
        return None
    lock = await WriterLock(store, "complete_dataset").aacquire()
    try:
        await anyio.to_thread.run_sync(lock.note_index)
        return await _complete(store, lock.acommit_index)
    finally:
        await lock.arelease()


async def _complete(store: Store, commit: Callable[[bytes], Awaitable[None]] | None = None) -> Index | None:
    listing = await _listing(store)
    sizes = {meta.path: meta.size for meta in listing}
    if await _is_complete(store, listing):
        return None
    partial_names = [name for name in sizes if "/" not in name and is_partial_index_name(name)]
    partials = [(name, Index.from_json(await store.get(name), source=name)) for name in partial_names]
    merged = merge_partial_indexes(partials)
    chunk_files = {name for name in sizes if "/" not in name and _CHUNK_NAME.match(name)}
    if not chunk_files and not merged.chunks:
        raise DatasetNotFoundError(
            f"{store.url} has no {INDEX_FILENAME}, no partial index and no chunk file: it is not a dataset "
            "(or the run wrote nothing); run optimize again"
        )
    listed = {chunk.filename for chunk in merged.chunks}
    missing = sorted(listed - sizes.keys())
    if missing:
        raise FormatError(
            f"cannot rebuild {store.url}/{INDEX_FILENAME}: the partial indexes list chunk files that are missing "
            f"({', '.join(missing[:5])}); the run's output is damaged, run optimize again"
        )
    config = merged.config or await _checkpoint_config(store, listing)
    orphans = sorted(chunk_files - listed)
    if config is None:
        raise FormatError(
            f"cannot rebuild {store.url}/{INDEX_FILENAME}: {len(orphans)} chunk file(s) but no partial index "
            "({rank}.index.json) or optimize checkpoint records the sample format (data_format, data_spec); "
            "run optimize again"
        )
    recovered = [await _chunk_info(store, name, sizes[name], config) for name in orphans]
    chunks = list(merged.chunks)
    if recovered:
        chunks = sorted(chunks + recovered, key=_order)
    index = Index(chunks=tuple(chunks), config=config).stamped()
    if commit is None:
        await store.put(INDEX_FILENAME, index.to_json().encode())
    else:
        await commit(index.to_json().encode())
    for name in partial_names:
        await store.delete(name)
    return index


def _order(chunk: ChunkInfo) -> tuple[int, int, int, str]:
    match = _CHUNK_NAME.match(chunk.filename)
    if match is None:  # a name only a partial index knows: after the numbered ones
        return (1, 0, 0, chunk.filename)
    return (0, int(match.group(1)), int(match.group(2)), chunk.filename)


async def _checkpoint_config(store: Store, listing: list[ObjectMeta]) -> DatasetConfig | None:
    for meta in listing:
        if _CHECKPOINT.match(meta.path):
            try:
                obj = json.loads(await store.get(meta.path))
                if isinstance(obj, dict) and isinstance(obj.get("config"), dict):
                    return DatasetConfig.from_json_obj(obj["config"])
            except (json.JSONDecodeError, UnicodeDecodeError, FormatError):
                continue
    return None


async def _chunk_info(store: Store, name: str, size: int, config: DatasetConfig) -> ChunkInfo:
    """A ``chunks[]`` entry for a chunk file from its header (the whole file when compressed)."""
    match = _CHUNK_NAME.match(name)
    assert match is not None
    infix = (match.group(3) or "")[1:] or None
    spec = compression_from_config(config.to_json_obj())
    if spec is not None and not spec.whole_file:  # "batch" / "sample": no infix, chunk_bytes is the file length
        if infix is not None:
            raise FormatError(
                f"chunk file {name} in {store.url} is compressed with {infix}, but the dataset's config says "
                f"compression_level={spec.level!r}; remove it or the files of the other run"
            )
        whole = await store.get(name)
        head = bytes(whole[12:16] if bytes(whole[:8]) == FRAMED_MAGIC else whole[:4])
        if len(head) != 4:
            raise _truncated(store, name, len(whole))
        count = int.from_bytes(head, "little")
        try:
            await anyio.to_thread.run_sync(
                lambda: chunk_from_file(whole, spec, filename=name, chunk_size=count, chunk_bytes=len(whole))
            )
        except FormatError:
            raise _truncated(store, name, len(whole)) from None
        return ChunkInfo(filename=name, chunk_size=count, chunk_bytes=len(whole), dim=None)
    if infix != config.compression:
        raise FormatError(
            f"chunk file {name} in {store.url} is {'compressed with ' + infix if infix else 'not compressed'}, but the "
            f"dataset's config says compression={config.compression!r}; remove it or the files of the other run"
        )
    if config.encryption is not None and config.encryption.get("level") == "chunk":
        raise FormatError(
            f"chunk file {name} in {store.url} is encrypted whole (level 'chunk') and no partial index lists it: "
            "its item count cannot be read without the key; delete it to complete the dataset without its samples"
        )
    data: bytes | None = None
    if config.compression is not None:
        data = await anyio.to_thread.run_sync(decompress, await store.get(name), config.compression)
        size = len(data)
    head = data[:4] if data is not None else await store.get_range(name, 0, 4)
    count = int.from_bytes(head, "little") if len(head) == 4 else -1
    if count < 0 or size < header_length(count):
        raise _truncated(store, name, size)
    end_at = item_span_offset(count)  # where offsets[N], the end of the last item, is stored
    last = data[end_at : end_at + 4] if data is not None else await store.get_range(name, end_at, 4)
    items_end = int.from_bytes(last, "little")
    if items_end != size and not (items_end < size and await _arrow_tail(store, name, data, items_end, size)):
        raise _truncated(store, name, size)
    return ChunkInfo(filename=name, chunk_size=count, chunk_bytes=size, dim=_tokens(config, count, size))


async def _arrow_tail(store: Store, name: str, data: bytes | None, items_end: int, size: int) -> bool:
    """Whether the ``size - items_end`` bytes after the last item are an Arrow payload and its trailer (a chunk
    of LitData's Arrow rows, ``format/arrow/_chunk.py``), as long as its length field says."""
    if size - items_end <= ARROW_TRAILER:
        return False
    tail = data[size - ARROW_TRAILER :] if data is not None else await store.get_range(name, size - ARROW_TRAILER, 12)
    length = int.from_bytes(tail[:4], "little")
    return bytes(tail[4:]) == ARROW_FOOTER_MAGIC and items_end + length + ARROW_TRAILER == size


def _truncated(store: Store, name: str, size: int) -> FormatError:
    return FormatError(
        f"chunk file {name} in {store.url} ({size} bytes) is truncated or not a chunk: its header does not match "
        "its length; delete it to complete the dataset without its samples"
    )


def _tokens(config: DatasetConfig, count: int, size: int) -> int | None:
    """``dim`` for TokensLoader chunks: the tokens stored (item bytes over the token dtype's size)."""
    if config.item_loader != "TokensLoader" or len(config.data_format) != 1:
        return None
    kind = config.data_format[0]
    index = parse_dtype_suffix(kind)
    if kind.startswith("no_header_tensor"):
        itemsize = torch_dtype_itemsize(index)
    else:
        itemsize = numpy_dtype_from_index(index).itemsize
    return (size - header_length(count)) // itemsize
