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
import threading
from dataclasses import replace
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._core._crash import crash_point
from .._core._errors import ConfigurationError, FormatError, raise_collapsed
from .._core._trace import CAT_WRITE, TRACER

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup
from ..format._checksum import CHECKSUM_KEY, DEFAULT_CHECKSUM, check_checksum_argument, chunk_digest
from ..format._chunk import ChunkBuilder, chunk_filename, chunk_header
from ..format._compression import resolve_compression
from ..format._encrypted import check_writer_encryption
from ..format._index import ChunkInfo, DatasetConfig, Index, comparable_config, partial_index_name
from ..format._loaders import PyTreeLoader, SampleEncoder, TokensLoader
from ..format._tokens import TokenEncoder
from ..format._types import fuse_schema_json
from ..format.arrow._write import check_chunk_format, ipc_codec, pack_arrow_chunk
from ._chunk_pack import check_chunking, dataset_config, pack_and_compress, pack_in_file_compressed
from ._layout import EncodedSample, Layout

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from types import TracebackType

    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from ..format._serializers import Serializer
    from ..storage._store import Store

__all__ = ["ChunkWriter", "EncodedSample"]


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
        checksum: ``"xxh3"`` (default), ``"sha256"`` or ``"blake2b"``: record each stored chunk file's digest
            in its ``index.json`` entry (see :mod:`litstream.format._checksum`), which readers verify;
            ``None`` records none.
        encryption: A ``FernetEncryption`` / ``RSAEncryption``: items (level ``"sample"``) or whole
            chunks (level ``"chunk"``) are encrypted; ``index.json`` records its ``state_dict()``.

        chunk_format: ``"arrow"``: LitData's Arrow chunks, for dict samples of JSON-like values
            (``format/arrow/_write.py``); ``compression`` then compresses the Arrow buffers and ``chunk_bytes``
            counts LitData's row estimate. ``"pytree"``: the pytree layout. ``None`` (default): Arrow chunks
            where LitData 0.2.76 writes them, pytree otherwise (:meth:`encode` says where).

    Attributes:
        num_samples: Samples added so far.
        chunks_written: Chunk files stored so far (``resume`` chunks not counted).
        bytes_written: Bytes of those chunk files as stored (after compression).

    Raises:
        ConfigurationError: invalid chunking, compression, encryption or chunk format arguments.
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
        checksum: str | None = DEFAULT_CHECKSUM,
        encryption: Any = None,
        chunk_format: str | None = None,
        allow_pickle: bool = True,
    ) -> None:
        self._checksum = check_checksum_argument(checksum)
        self._chunk_size, self._chunk_bytes = check_chunking(chunk_size, chunk_bytes)
        spec = resolve_compression(compression, compression_level, compression_batch_size, default_level="chunk")
        if spec is not None and not spec.whole_file and isinstance(item_loader, TokensLoader):
            raise ConfigurationError(
                f"compression_level={spec.level!r} is only for the default PyTreeLoader (as in LitData); "
                "TokensLoader datasets use compression_level='chunk'"
            )
        self._encryption = check_writer_encryption(encryption, item_loader)
        layout = check_chunk_format(chunk_format)
        if spec is not None and not spec.whole_file and (self._encryption is not None or layout == "arrow"):
            raise ConfigurationError(
                f"compression_level={spec.level!r} cannot be combined with encryption= or chunk_format= (as in "
                "LitData); use compression_level='chunk'"
            )
        self._store = store
        self._rank = rank
        self._spec = spec
        self._compression = compression
        # the ``.{compression}`` file-name infix, only for whole-file compression
        self._infix = compression if spec is not None and spec.whole_file else None
        self._encoder: SampleEncoder | TokenEncoder = (
            TokenEncoder(serializers)
            if isinstance(item_loader, TokensLoader)
            else SampleEncoder(serializers, allow_pickle=allow_pickle, json_leaves=json_leaves)
        )
        self._item_loader = item_loader or PyTreeLoader()
        # Arrow rows unless the layout is "pytree"; the default's conditions besides the samples (encode()): no
        # compression (one index.json config then fits chunks of either layout: workers, appends and a
        # fallback may mix them), no encryption, no TokensLoader, list fields as json leaves
        eligible = (
            spec is None and self._encryption is None and json_leaves and not isinstance(item_loader, TokensLoader)
        )
        self._encode_lock = threading.Lock()  # encode() may run in fn's thread while config() runs here
        self._layout = Layout(layout, eligible=eligible, encoder=self._encoder, lock=self._encode_lock)
        self._schema = self._layout.schema
        self._adding_rows = self._layout.starts_with_rows  # whether the open chunk holds Arrow rows (add side)
        if layout == "arrow" and isinstance(item_loader, TokensLoader):
            raise ConfigurationError("chunk_format='arrow' stores dict samples; it cannot be used with TokensLoader()")
        if layout == "arrow" and self._encryption is not None:
            raise ConfigurationError(
                "chunk_format='arrow' cannot be combined with encryption= (LitData cannot read encrypted Arrow "
                "chunks back either); drop one of the two"
            )
        self._rows: list[Any] = []  # samples of the open Arrow chunk
        self._builder = ChunkBuilder(chunk_size=self._chunk_size, chunk_bytes=self._chunk_bytes)
        self._next_chunk = start_chunk
        self._chunks: list[ChunkInfo] = list(resume.chunks) if resume is not None else []
        self._resume_config = resume.config if resume is not None else None
        self._on_commit = on_commit
        self._max_pending = max_pending_chunks
        self._task_group: TaskGroup | None = None
        self._send: MemoryObjectSendStream[tuple[str, list[Any], int | None, bool]] | None = None
        self.num_samples = 0
        self.chunks_written = 0
        self.bytes_written = 0
        self.partial_index: Index | None = None
        self.written_files: list[str] = []

    async def __aenter__(self) -> ChunkWriter:
        send, receive = anyio.create_memory_object_stream[tuple[str, list[Any], int | None, bool]](self._max_pending)
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
                closed = self._builder.flush()
                rows = self._adding_rows
                await self._emit(closed if not rows or closed is None else (self._take_rows(), closed[1]), rows)
            await self._send.aclose()
        finally:
            if exc_type is not None:
                self._task_group.cancel_scope.cancel()
            try:
                result = await self._task_group.__aexit__(exc_type, exc, tb)
            except BaseExceptionGroup as group:
                # The root cause as itself (the caller's own exception, or the upload's).
                raise_collapsed(group)
        if exc_type is None:
            await self._write_partial_index()
        return result

    def encode(self, sample: Any) -> EncodedSample:
        """Encode ``sample`` now, with no I/O, so that it no longer depends on the object ``fn`` returned (a
        ``fn`` may reuse and mutate its dict or array for the next input). Call it from one thread at a
        time (``optimize`` calls it in the thread that runs ``fn``); pass the result to :meth:`add_encoded`
        in order.

        With ``chunk_format=None`` a sample becomes an Arrow row where LitData 0.2.76 would store it so: the
        first sample a non-empty ``dict`` and every sample so far one Arrow can hold with the fused types
        (:class:`ArrowEncoder`'s rule), pyarrow importable; from the first sample that is not, every sample
        is a pytree item (the open chunk's rows too), as LitData's writer switches.

        Raises:
            FormatError: the sample cannot be encoded or differs in structure from the first one.
        """
        with self._encode_lock:
            row = self._layout.row(sample)
            if row is not None:
                return row
            item, dim = self._encoder.encode_item(sample)
        if self._encryption is not None and self._encryption.level == "sample":
            item = self._encryption.encrypt(bytes(item))
        # An empty token array counts as one toward chunk_size, as in LitData.
        return EncodedSample(item, dim or None, None, None)

    async def add_encoded(self, encoded: EncodedSample) -> None:
        """Buffer a sample made by :meth:`encode`; waits while the upload queue is full (backpressure)."""
        self.num_samples += 1
        if self._adding_rows and encoded.row is not None:
            closed = self._builder.add(b"", None, size=encoded.size)
            rows = self._take_rows() if closed is not None else []
            self._rows.append(encoded.row)
            await self._emit(None if closed is None else (rows, closed[1]), True)
            return
        if self._adding_rows:  # the first pytree item: the open chunk's rows become pytree items too
            self._adding_rows = False
            self._builder = ChunkBuilder(chunk_size=self._chunk_size, chunk_bytes=self._chunk_bytes)
            for row in self._take_rows():
                await self._emit(self._builder.add(*self._layout.pytree_item(row)), False)
        item, dim = (encoded.item, encoded.dim) if encoded.row is None else self._layout.pytree_item(encoded.row)
        await self._emit(self._builder.add(item, dim), False)

    async def add(self, sample: Any) -> None:
        """Encode ``sample`` and buffer it (:meth:`encode` then :meth:`add_encoded`); waits while the upload
        queue is full (backpressure).

        Raises:
            FormatError: the sample cannot be encoded or differs in structure from the first one.
        """
        await self.add_encoded(self.encode(sample))

    def _take_rows(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    async def _emit(self, closed: tuple[list[Any], list[int | None]] | None, rows: bool) -> None:
        if closed is None:
            return
        if self._send is None:
            raise RuntimeError("use ChunkWriter as `async with ChunkWriter(...) as writer:`")
        items, dims = closed
        # Arrow chunks compress their buffers inside: the file name carries no compression infix
        name = chunk_filename(self._rank, self._next_chunk, None if rows else self._infix)
        self._next_chunk += 1
        # TokensLoader chunks record their token count (index.json's ``dim``); others ``None``.
        tokens = sum(d or 0 for d in dims) if isinstance(self._encoder, TokenEncoder) else None
        await self._send.send((name, items, tokens, rows))

    async def _upload_loop(self, receive: MemoryObjectReceiveStream[tuple[str, list[Any], int | None, bool]]) -> None:
        async with receive:
            async for name, items, dim, rows in receive:
                t0 = perf_counter_ns() if TRACER.on else 0
                count = len(items)
                put_parts = getattr(self._store, "put_parts", None)
                if rows:
                    payload = await anyio.to_thread.run_sync(pack_arrow_chunk, items, self._compression)
                    size = len(payload)
                    stored = size
                    digest = await self._digest([payload])
                    await self._store.put(name, payload)
                elif self._compression is None and self._encryption is None and put_parts is not None:
                    # header and items go to the file one after the other: no 64 MB joined copy
                    header = chunk_header(items)
                    size = len(header) + sum(len(item) for item in items)
                    parts = [header, *items]
                    digest = await self._digest(parts)
                    await put_parts(name, parts)
                    stored = size
                elif self._spec is not None and not self._spec.whole_file:
                    payload, size = await anyio.to_thread.run_sync(pack_in_file_compressed, items, self._spec)
                    stored = size
                    digest = await self._digest([payload])
                    await self._store.put(name, payload)
                else:
                    payload, size = await anyio.to_thread.run_sync(
                        pack_and_compress, items, self._compression, self._encryption
                    )
                    stored = len(payload)
                    digest = await self._digest([payload])
                    await self._store.put(name, payload)
                self.written_files.append(name)
                crash_point("chunk:stored")
                if t0:
                    TRACER.async_span("write chunk", CAT_WRITE, t0, {"chunk": name, "items": count, "bytes": stored})
                self.chunks_written += 1
                self.bytes_written += stored
                extra = {CHECKSUM_KEY: digest} if digest is not None else {}
                info = ChunkInfo(filename=name, chunk_size=count, chunk_bytes=size, dim=dim, extra=extra)
                self._chunks.append(info)
                if self._on_commit is not None:
                    await self._on_commit(info)

    async def _digest(self, parts: list[bytes]) -> str | None:
        """The stored file's checksum (in a worker thread), or ``None`` without ``checksum``."""
        if self._checksum is None:
            return None
        return await anyio.to_thread.run_sync(chunk_digest, parts, self._checksum)

    @property
    def next_chunk_index(self) -> int:
        """The number the next chunk of this rank will get (chunks closed so far: this minus ``start_chunk``)."""
        return self._next_chunk

    def config(self) -> DatasetConfig | None:
        """The dataset config fixed by the first sample (or by ``resume``); ``None`` before any sample."""
        with self._encode_lock:
            return self._config()

    def _config(self) -> DatasetConfig | None:
        if self._adding_rows and self._schema is not None and self._schema.data_spec is not None:
            return DatasetConfig(
                data_format=self._schema.data_format,
                data_spec=self._schema.data_spec,
                chunk_size=self._chunk_size,
                chunk_bytes=self._chunk_bytes,
                compression=None,
                item_loader=type(self._item_loader).__name__,
                extra={  # every key LitData 0.2.76 writes for such a dataset
                    "compression_batch_size": None,
                    "compression_level": None,
                    "ipc_compression": ipc_codec(self._compression)[0],
                    "types": self._schema.types_json(),
                },
            )
        if self._encoder.data_spec is None:
            return self._resume_config
        config = dataset_config(
            self._encoder,
            chunk_size=self._chunk_size,
            chunk_bytes=self._chunk_bytes,
            compression=self._spec,
            item_loader=self._item_loader,
            encryption=self._encryption,
        )
        if self._schema is None or self._schema.data_spec is None:
            return config
        # Arrow chunks came first (uncompressed, so the same config): the types of their rows count too
        types = fuse_schema_json(self._schema.types_json(), config.extra.get("types"))
        return replace(config, extra={**config.extra, "types": types})

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
