"""The async ChunkWriter: samples in, chunk files and a partial index out.

``ChunkWriter`` encodes each sample (pure code from ``format/``), groups items into chunks with
LitData's closing rule, and hands every closed chunk to an upload task through a bounded stream, so
encoding the next chunk overlaps writing the previous one while at most ``max_pending_chunks``
chunks wait in memory. ``done()`` writes ``{rank}.index.json`` (only if a chunk was produced; a
writer that saw no sample writes nothing, case B18).

Usage::

    async with ChunkWriter(store, rank=0, chunk_bytes="64MB") as writer:
        for sample in samples:
            await writer.add(sample)
    partial = writer.partial_index      # Index, or None when no sample was written
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._errors import ConfigurationError, FormatError, collapse_exception_group

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup
from ..format._chunk import ChunkBuilder, chunk_filename, chunk_header, pack_chunk
from ..format._compression import Compression, compress, resolve_compression
from ..format._framed import pack as pack_in_file
from ..format._index import ChunkInfo, DatasetConfig, Index, comparable_config, partial_index_name
from ..format._loaders import PyTreeLoader, SampleEncoder, TokensLoader
from ..format._tokens import TokenEncoder
from ..format._units import parse_bytes

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from types import TracebackType

    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from ..format._serializers import Serializer
    from ..storage._store import Store

__all__ = ["ChunkWriter", "check_chunking", "dataset_config", "pack_and_compress"]


def check_chunking(chunk_size: int | None, chunk_bytes: int | str | None) -> tuple[int | None, int | None]:
    """Validate the chunk budget arguments; exactly one must be given.

    Returns:
        ``(chunk_size, chunk_bytes)`` with ``chunk_bytes`` converted to bytes.

    Raises:
        ConfigurationError: both or neither given, or a value that is not a positive size.
    """
    if chunk_size is None and chunk_bytes is None:
        raise ConfigurationError(
            "give one of chunk_size (items per chunk, e.g. 1000) or chunk_bytes (e.g. '64MB'); both are None"
        )
    if chunk_size is not None and chunk_bytes is not None:
        raise ConfigurationError(
            f"give only one of chunk_size={chunk_size!r} and chunk_bytes={chunk_bytes!r}, not both"
        )
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ConfigurationError(f"chunk_size must be a positive int (items per chunk), got {chunk_size!r}")
    return chunk_size, None if chunk_bytes is None else parse_bytes(chunk_bytes)


def pack_and_compress(items: list[bytes], compression: str | None) -> tuple[bytes, int]:
    """Chunk bytes ready to store, and their length before compression (``index.json``'s ``chunk_bytes``).

    Pure CPU work, meant for a worker thread. ``items`` is emptied once packed, so the item bytes can be
    freed while the chunk is compressed and uploaded.

    Raises:
        FormatError: the chunk would exceed the 4 GiB format limit.
    """
    data = pack_chunk(items)
    items.clear()
    size = len(data)
    if compression is None:
        return data, size
    return compress(data, compression), size


def pack_in_file_compressed(items: list[bytes], compression: Compression) -> tuple[bytes, int]:
    """A ``"batch"`` or ``"sample"`` chunk file and its length (``chunk_bytes``, as LitData 0.2.76 records it)."""
    data = pack_in_file(items, compression)
    items.clear()
    return data, len(data)


def dataset_config(
    encoder: SampleEncoder | TokenEncoder,
    *,
    chunk_size: int | None,
    chunk_bytes: int | None,
    compression: str | Compression | None,
    item_loader: PyTreeLoader | TokensLoader,
) -> DatasetConfig:
    """The ``config`` of ``index.json`` for samples encoded by ``encoder`` (its format fixed by a first sample).

    Holds every key LitData 0.2.76 writes: ``compression_level``, ``compression_batch_size``,
    ``ipc_compression`` (always ``None``: litstream writes no Arrow chunks here) and ``types``.
    """
    spec = Compression(compression) if isinstance(compression, str) else compression
    keys = spec.config_keys() if spec is not None else {"compression": None}
    return DatasetConfig(
        data_format=encoder.data_format,
        data_spec=encoder.data_spec,
        chunk_size=chunk_size,
        chunk_bytes=chunk_bytes,
        compression=keys.pop("compression"),
        item_loader=type(item_loader).__name__,
        extra={
            "compression_batch_size": None,
            "compression_level": None,
            **keys,
            "ipc_compression": None,
            "types": getattr(encoder, "types", None),
        },
    )


class ChunkWriter:
    """Writes samples as LitData-format chunks into a :class:`~litstream.storage.Store`.

    Args:
        store: Where chunk files and the partial index go.
        rank: Writer rank; chunk files are named ``chunk-{rank}-{n}.bin``.
        chunk_size: Items per chunk. Exactly one of ``chunk_size`` and ``chunk_bytes``.
        chunk_bytes: Payload bytes per chunk (int or a string like ``"64MB"``, decimal units).
        compression: ``None``, ``"zstd"`` or ``"zstd:N"``.
        compression_level: ``"chunk"`` (default here: one frame per file, readable by every LitData),
            ``"batch"`` or ``"sample"`` (LitData 0.2.76's in-file layouts; PyTreeLoader only).
        compression_batch_size: Items per frame for ``"batch"`` (default 256).
        json_leaves: Store list / dict fields of dict samples as ``json`` leaves (LitData 0.2.76); ``False``
            flattens them (appending to a dataset written so).
        serializers: Extra serializers by registry key.
        start_chunk: Number of this rank's first chunk (append mode continues numbering).
        max_pending_chunks: Closed chunks allowed to wait for upload besides the one being uploaded
            (default 0: the next chunk is encoded while one uploads, which keeps a worker's memory
            to about two chunks; raise it for stores with bursty upload times).
        resume: Chunks (and their config) this rank committed in an interrupted run; they head the
            partial index (``use_checkpoint`` resume).
        on_commit: Awaited after each chunk is stored, with its entry; the next chunk waits for it.

    Raises:
        ConfigurationError: invalid chunking or compression arguments.
    """

    def __init__(
        self,
        store: Store,
        *,
        rank: int = 0,
        chunk_size: int | None = None,
        chunk_bytes: int | str | None = None,
        compression: str | None = None,
        serializers: Mapping[str, Serializer] | None = None,
        item_loader: PyTreeLoader | TokensLoader | None = None,
        start_chunk: int = 0,
        compression_level: str | None = None,
        compression_batch_size: int | None = None,
        json_leaves: bool = True,
        max_pending_chunks: int = 0,
        resume: Index | None = None,
        on_commit: Callable[[ChunkInfo], Awaitable[None]] | None = None,
    ) -> None:
        self._chunk_size, self._chunk_bytes = check_chunking(chunk_size, chunk_bytes)
        spec = resolve_compression(compression, compression_level, compression_batch_size, default_level="chunk")
        if spec is not None and not spec.whole_file and isinstance(item_loader, TokensLoader):
            raise ConfigurationError(
                f"compression_level={spec.level!r} is only for the default PyTreeLoader (as in LitData); "
                "TokensLoader datasets use compression_level='chunk'"
            )
        self._store = store
        self._rank = rank
        self._spec = spec
        # the ``.{compression}`` file-name infix, only for whole-file compression
        self._compression = compression if spec is not None and spec.whole_file else None
        self._encoder: SampleEncoder | TokenEncoder = (
            TokenEncoder(serializers)
            if isinstance(item_loader, TokensLoader)
            else SampleEncoder(serializers, json_leaves=json_leaves)
        )
        self._item_loader = item_loader or PyTreeLoader()
        self._builder = ChunkBuilder(chunk_size=self._chunk_size, chunk_bytes=self._chunk_bytes)
        self._next_chunk = start_chunk
        self._chunks: list[ChunkInfo] = list(resume.chunks) if resume is not None else []
        self._resume_config = resume.config if resume is not None else None
        self._on_commit = on_commit
        self._max_pending = max_pending_chunks
        self._task_group: TaskGroup | None = None
        self._send: MemoryObjectSendStream[tuple[str, list[bytes], int | None]] | None = None
        self.num_samples = 0
        self.partial_index: Index | None = None
        self.written_files: list[str] = []

    async def __aenter__(self) -> ChunkWriter:
        send, receive = anyio.create_memory_object_stream[tuple[str, list[bytes], int | None]](self._max_pending)
        self._send = send
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._upload_loop, receive)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._task_group is not None
        assert self._send is not None
        try:
            if exc_type is None:
                await self._emit(self._builder.flush())
            await self._send.aclose()
        finally:
            if exc_type is not None:
                self._task_group.cancel_scope.cancel()
            try:
                result = await self._task_group.__aexit__(exc_type, exc, tb)
            except BaseExceptionGroup as group:
                # Re-raise a single failure as itself (the caller's own exception, or the upload's).
                single = collapse_exception_group(group)
                if single is group:
                    raise
                raise single from single.__cause__
        if exc_type is None:
            await self._write_partial_index()
        return result

    async def add(self, sample: Any) -> None:
        """Encode ``sample`` and buffer it; waits while the upload queue is full (backpressure).

        Raises:
            FormatError: the sample cannot be encoded or differs in structure from the first one.
        """
        item, dim = self._encoder.encode_item(sample)
        self.num_samples += 1
        # An empty token array counts as one toward chunk_size, as in LitData.
        await self._emit(self._builder.add(item, dim or None))

    async def _emit(self, closed: tuple[list[bytes], list[int | None]] | None) -> None:
        if closed is None:
            return
        if self._send is None:
            raise RuntimeError("use ChunkWriter as `async with ChunkWriter(...) as writer:`")
        items, dims = closed
        name = chunk_filename(self._rank, self._next_chunk, self._compression)
        self._next_chunk += 1
        # TokensLoader chunks record their token count (index.json's ``dim``); others ``None``.
        tokens = sum(d or 0 for d in dims) if isinstance(self._encoder, TokenEncoder) else None
        await self._send.send((name, items, tokens))

    async def _upload_loop(self, receive: MemoryObjectReceiveStream[tuple[str, list[bytes], int | None]]) -> None:
        async with receive:
            async for name, items, dim in receive:
                count = len(items)
                put_parts = getattr(self._store, "put_parts", None)
                if self._spec is None and put_parts is not None:
                    # header and items go to the file one after the other: no 64 MB joined copy
                    header = chunk_header(items)
                    size = len(header) + sum(len(item) for item in items)
                    await put_parts(name, [header, *items])
                elif self._spec is not None and not self._spec.whole_file:
                    payload, size = await anyio.to_thread.run_sync(pack_in_file_compressed, items, self._spec)
                    await self._store.put(name, payload)
                else:
                    payload, size = await anyio.to_thread.run_sync(pack_and_compress, items, self._compression)
                    await self._store.put(name, payload)
                self.written_files.append(name)
                info = ChunkInfo(filename=name, chunk_size=count, chunk_bytes=size, dim=dim)
                self._chunks.append(info)
                if self._on_commit is not None:
                    await self._on_commit(info)

    @property
    def next_chunk_index(self) -> int:
        """The number the next chunk of this rank will get (chunks closed so far: this minus ``start_chunk``)."""
        return self._next_chunk

    def config(self) -> DatasetConfig | None:
        """The dataset config fixed by the first sample (or by ``resume``); ``None`` before any sample."""
        if self._encoder.data_spec is None:
            return self._resume_config
        return dataset_config(
            self._encoder,
            chunk_size=self._chunk_size,
            chunk_bytes=self._chunk_bytes,
            compression=self._spec,
            item_loader=self._item_loader,
        )

    async def _write_partial_index(self) -> None:
        config = self.config()
        if not self._chunks or config is None:
            return
        if self._resume_config is not None and comparable_config(config) != comparable_config(self._resume_config):
            raise FormatError(
                f"rank {self._rank}: the samples of this run have config {config.to_json_obj()}, the chunks "
                f"of the interrupted run {self._resume_config.to_json_obj()}; fn must produce the same format"
            )
        self.partial_index = Index(chunks=tuple(self._chunks), config=config)
        name = partial_index_name(self._rank)
        await self._store.put(name, self.partial_index.to_json().encode())
        self.written_files.append(name)
