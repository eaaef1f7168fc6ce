"""``AsyncUploader``: append samples to a dataset from a running async service (asyncio or trio).

One object, shared by any number of tasks::

    add(sample) ─lock─▶ encode (worker thread) ─▶ ChunkBuilder ─▶ a closed chunk
                         │ before a chunk is closed: ByteBudget.acquire   (waits here: backpressure)
                         ▼
                pack [+ zstd] (worker thread) ─▶ Uploader (max_concurrency puts at once)
                                                  └─ on success: bytes released, chunk marked uploaded
    flush() ─▶ close the open chunk ─▶ wait for every chunk closed so far ─▶ put index.json (one atomic put)

``index.json`` only ever lists chunks whose upload has finished, and it is replaced in one atomic put
(temporary file + rename on disk, one PUT on object stores), so readers see the previous commit or
the new one, and a crash (an exception, a cancellation, a killed process) loses at most the samples
added since the last commit. Each commit is a new version of the dataset (``_commit.py``). Chunk files no
commit lists are removed when the block ends however it ends (an exception, a cancellation), and those a
killed process left by the next writer of the output.
"""

from __future__ import annotations

import sys
import time
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._core._errors import FormatError
from .._core._units import parse_bytes
from ..format._checksum import CHECKSUM_KEY, DEFAULT_CHECKSUM, check_checksum_argument, chunk_digest
from ..format._chunk import ChunkBuilder, chunk_filename, header_length
from ..format._index import ChunkInfo, DatasetConfig, Index
from ..format._loaders import PyTreeLoader, SampleEncoder
from ..storage._base import MiB
from ..storage._resolver import store_for
from ..storage._transfer import ByteBudget, Uploader
from ._append import check_sample_format, check_settings, next_chunk_number
from ._chunk_pack import check_chunking, dataset_config, pack_and_compress
from ._output import prepare_output
from ._uploader_args import DEFAULT_CHUNK_BYTES, check_uploader_args
from ._uploader_chunks import ChunkLedger, ClosedChunk
from ._uploader_keys import UploaderKeys
from ._uploader_stats import UploaderStatistics
from ._writer_lock import WriterLock
from .run._env import OptimizerEnv

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Mapping
    from types import TracebackType

    from ..format._serializers import Serializer
    from ..storage._resolver import Dir
    from ..storage._store import Store

__all__ = ["AsyncUploader", "UploaderStatistics"]


class AsyncUploader:
    """Appends samples to a dataset on local disk or object storage, from async code (asyncio or trio).

    ``async with AsyncUploader("s3://bucket/ds", chunk_bytes="64MB") as up: await up.add(sample)``.
    The dataset is LitData's format (readable by :class:`~litstream.StreamingDataset`,
    :func:`~litstream.astream` and LitData). ``add`` may be called from many tasks at once.

    Samples are encoded and chunks packed (and compressed) in worker threads, chunks are uploaded
    ``max_concurrency`` at a time, and at most ``max_bytes_in_flight`` bytes of closed chunks are
    held: ``add`` waits while the budget is spent, so a slow store slows the producers down instead
    of filling memory. The uploader holds at most ``max_bytes_in_flight`` plus the open chunk (one
    chunk) of sample bytes; a single chunk larger than the budget takes all of it.

    ``index.json`` is committed by :meth:`flush` and when the block ends without an error, listing
    only chunks that were completely uploaded. An exception or a cancellation inside the block
    cancels the uploads in flight and commits nothing: the dataset stays as the last commit left it.

    Call ``add`` and ``flush`` from the task that entered the block or from tasks started inside it:
    a failed upload cancels those, and the failure is raised from ``async with``. One writer at a time:
    the block holds the output's writer lock (as ``optimize`` and ``map`` do; ``docs/storage.md``).

    Args:
        output_dir: A local directory (created if missing), an object-store URL (``s3://``, ``gs://``,
            ``azure://``), a :class:`~litstream.Dir` or a :class:`~litstream.Store`.
        chunk_size: Items per chunk. Give at most one of ``chunk_size`` / ``chunk_bytes``.
        chunk_bytes: Payload bytes per chunk: an int, or a string with decimal units (``"64MB"``).
            When neither is given: the existing dataset's setting when appending, else ``"64MB"``.
        compression: ``None``, ``"zstd"`` or ``"zstd:N"``.
        item_loader: ``PyTreeLoader()`` (default).
        serializers: Extra serializers by registry key, tried before the built-ins.
        storage_options: Credentials and client options for object-store URLs (as for ``optimize``).
        mode: ``"append"`` (default): add to the dataset there, or create it; its config
            (chunking, compression, sample format) must equal this one, as in ``optimize``'s append
            mode. ``"overwrite"``: delete the dataset there first (on entering the block).
            ``None``: the location must be empty.
        rank: Chunk files are named ``chunk-{rank}-{n}.bin``; ``n`` continues after the existing
            chunks of this rank (committed or not).
        max_bytes_in_flight: Budget for closed chunks being packed, queued or uploading: an int of
            bytes or a string like ``"256MB"``. Default 256 MiB.
        max_concurrency: Uploads running at once. Default 4.
        key_fn: ``key_fn(sample) -> str | int`` (as ``optimize``'s): every commit also writes the ``keys/``
            sidecar, so ``ds["id"]`` finds committed samples; ``add`` refuses a duplicate key
            (``DuplicateKeyError``). Appending, the dataset must have a sidecar exactly when it is given.
        checksum: The digest recorded for each chunk, as ``optimize``'s: ``"xxh3"`` (default), ``"sha256"``,
            ``"blake2b"``, or ``None`` for none.

    Raises:
        ConfigurationError: a bad argument (raised here, before anything is written); on entering,
            a dataset there whose chunking, compression or item loader differs.
        OutputNotEmptyError: on entering, ``mode=None`` and the location holds files.
        OutputLockedError: on entering, another run writes there (named); at a commit, the lock was lost.
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str] | Dir | Store,
        *,
        chunk_size: int | None = None,
        chunk_bytes: int | str | None = None,
        compression: str | None = None,
        item_loader: PyTreeLoader | None = None,
        serializers: Mapping[str, Serializer] | None = None,
        storage_options: Mapping[str, Any] | None = None,
        mode: str | None = "append",
        rank: int = 0,
        max_bytes_in_flight: int | str = 256 * MiB,
        max_concurrency: int = 4,
        key_fn: Callable[[Any], Any] | None = None,
        checksum: str | None = DEFAULT_CHECKSUM,
    ) -> None:
        self._checksum = check_checksum_argument(checksum)
        self._chunking_given = chunk_size is not None or chunk_bytes is not None
        self._chunk_size, self._chunk_bytes = check_chunking(
            chunk_size, chunk_bytes if self._chunking_given else DEFAULT_CHUNK_BYTES
        )
        check_uploader_args(compression, item_loader, mode, rank, max_concurrency)
        self._max_bytes = parse_bytes(max_bytes_in_flight, argument="max_bytes_in_flight")
        self._store = store_for(output_dir, storage_options, argument="output_dir")
        self._compression = compression
        self._item_loader = item_loader or PyTreeLoader()
        self._serializers = serializers
        self._mode = mode
        self._rank = rank
        self._max_concurrency = max_concurrency
        self._encoder = SampleEncoder(serializers)
        self._json_leaves = True
        self._config: DatasetConfig | None = None
        self._existing: Index | None = None
        self._state = "new"
        self._uploader: Uploader | None = None
        self._chunks = ChunkLedger(rank)  # the closed chunks: uploaded, committed
        self._next_number = 0
        self._samples_added = 0
        self._last_stamp = 0.0
        self._peak_held = 0
        self._key_fn = key_fn
        self._keys: UploaderKeys | None = None

    @property
    def store(self) -> Store:
        """Where the dataset is written."""
        return self._store

    # -- lifecycle ------------------------------------------------------------------------------------

    async def __aenter__(self) -> AsyncUploader:
        if self._state != "new":
            raise RuntimeError("an AsyncUploader can be used in one `async with` block only; create a new one")
        lock = await WriterLock(self._store, "AsyncUploader").aacquire()
        try:
            await self._open(lock)
        except BaseException:
            await lock.arelease()
            raise
        return self

    async def _open(self, lock: WriterLock) -> None:
        env = OptimizerEnv()
        prepared = await prepare_output(
            self._store, self._mode, [self._rank], env, None, unlisted_chunks_ok=True, sweep=lock.sweep
        )
        existing, starts = prepared.existing, prepared.start_chunks
        if existing is not None and existing.config is not None:
            self._check_existing(existing.config)
        self._existing = existing
        # keep a pre-0.2.76 dataset's layout: its list fields were flattened, not stored as json leaves
        self._json_leaves = existing is None or existing.config is None or "json" in existing.config.data_format
        self._encoder = SampleEncoder(self._serializers, json_leaves=self._json_leaves)
        self._keys = await UploaderKeys.open(self._store, existing, self._key_fn)
        self._next_number = await next_chunk_number(self._store, self._rank, starts.get(self._rank, 0))
        self._builder = ChunkBuilder(chunk_size=self._chunk_size, chunk_bytes=self._chunk_bytes)
        self._budget = ByteBudget(self._max_bytes)
        self._lock, self._commit_lock = anyio.Lock(), anyio.Lock()
        # The byte budget bounds what is queued, so the queue itself never makes add() wait.
        uploader = Uploader(self._store, max_concurrency=self._max_concurrency, max_pending=sys.maxsize)
        await anyio.to_thread.run_sync(lock.note_index)
        await uploader.__aenter__()
        self._uploader, self._wlock = uploader, lock
        self._state = "open"

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        uploader = self._uploader
        if uploader is None:
            raise RuntimeError("AsyncUploader.__aexit__ without __aenter__")
        try:
            return await self._close(uploader, exc_type, exc, tb)
        finally:  # however the block ends: chunks no commit lists are removed, then the writer lock is given back
            with anyio.CancelScope(shield=True):
                try:
                    await anyio.to_thread.run_sync(self._wlock.sweep)
                finally:
                    await self._wlock.arelease()

    async def _close(
        self,
        uploader: Uploader,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if exc_type is None:
            try:
                await self.flush()
            except BaseException as error:
                self._state = "closed"
                if await uploader.__aexit__(type(error), error, error.__traceback__):
                    return None
                raise
        self._state = "closed"
        return await uploader.__aexit__(exc_type, exc, tb)

    def _check_open(self, what: str) -> None:
        if self._state != "open":
            raise RuntimeError(
                f"AsyncUploader.{what}() needs an open block: use `async with AsyncUploader(...) as up:` "
                f"and call it inside (this uploader is {self._state})"
            )

    def _check_existing(self, config: DatasetConfig) -> None:
        """Compare the settings known before the first sample with the dataset's config."""
        if not self._chunking_given and (config.chunk_size is not None or config.chunk_bytes is not None):
            self._chunk_size, self._chunk_bytes = config.chunk_size, config.chunk_bytes
        check_settings(self._store.url, config, chunk_size=self._chunk_size, chunk_bytes=self._chunk_bytes,
                       compression=self._compression, item_loader=self._item_loader)  # fmt: skip

    # -- writing --------------------------------------------------------------------------------------

    async def add(self, sample: Any) -> None:
        """Encode ``sample`` and buffer it; waits while the byte budget is spent (backpressure).

        Safe to call from many tasks at once. When ``add`` returns, the sample will be in the next
        commit. If it is cancelled, the sample was either accepted whole or not at all, and the other
        samples are unaffected.

        Raises:
            FormatError: the sample cannot be encoded, differs in structure from the first one, or
                (appending) its format differs from the dataset's.
            RuntimeError: called outside the ``async with`` block.
        """
        self._check_open("add")
        async with self._lock:
            self._check_open("add")
            key = None if self._keys is None else self._keys.key_of(sample, self._samples_added)
            item = await anyio.to_thread.run_sync(self._encode, sample)
            charge = 0
            if self._builder.closes_before(len(item)):
                charge = await self._reserve()  # may wait; nothing has changed yet
            with anyio.CancelScope(shield=True):  # from here on, the sample is accepted whole
                closed = self._builder.add(item)
                del item
                if self._keys is not None and key is not None:
                    self._keys.accept(key)
                self._samples_added += 1
                self._note_held()
                if closed is not None:
                    await self._ship(closed[0], charge)

    async def flush(self) -> int:
        """Close the open chunk, wait until every chunk closed so far is uploaded, then commit ``index.json``.

        Returns:
            The number of samples ``index.json`` describes (earlier sessions included).

        Raises:
            StorageError: an upload or the ``index.json`` write failed (the previous commit stays).
            RuntimeError: called outside the ``async with`` block.
        """
        self._check_open("flush")
        async with self._lock:
            if len(self._builder):
                charge = await self._reserve()
                with anyio.CancelScope(shield=True):
                    closed = self._builder.flush()
                    if closed is not None:
                        await self._ship(closed[0], charge)
            target = list(self._chunks.chunks)
        await self._chunks.wait(target)
        async with self._commit_lock:
            await self._commit()
        return self.statistics().dataset_samples

    def _encode(self, sample: Any) -> bytes:
        """Encode in a worker thread; the first sample fixes the format (checked against the dataset's)."""
        first = self._config is None
        item = self._encoder.encode(sample)
        if first:  # as _writer.ChunkWriter builds its config, from this uploader's own settings (no encryption)
            config = dataset_config(
                self._encoder,
                chunk_size=self._chunk_size,
                chunk_bytes=self._chunk_bytes,
                compression=self._compression,
                item_loader=self._item_loader,
            )
            try:
                check_sample_format(self._store.url, config, self._existing.config if self._existing else None)
            except FormatError:  # the next sample may fix it again
                self._encoder = SampleEncoder(self._serializers, json_leaves=self._json_leaves)
                raise
            self._config = config
        return item

    async def _reserve(self) -> int:
        # While a chunk is packed, its items and the packed bytes (or packed and compressed) coexist.
        charge: int = await self._budget.acquire(2 * (header_length(len(self._builder)) + self._builder.nbytes))
        self._note_held()
        return charge

    async def _ship(self, items: list[bytes], charge: int) -> None:
        """Pack the closed chunk off the event loop and queue it (call under the lock, shielded)."""
        assert self._uploader is not None
        count = len(items)
        name = chunk_filename(self._rank, self._next_number, self._compression)
        self._next_number += 1
        payload, size, extra = await anyio.to_thread.run_sync(self._pack, items)
        keep = min(len(payload), charge)
        self._budget.release(charge - keep)
        chunk = self._chunks.close(ChunkInfo(filename=name, chunk_size=count, chunk_bytes=size, extra=extra))
        await self._uploader.upload_data(payload, name, on_done=partial(self._uploaded, chunk, keep))

    def _pack(self, items: list[bytes]) -> tuple[bytes, int, dict[str, Any]]:
        payload, size = pack_and_compress(items, self._compression)
        digest = None if self._checksum is None else chunk_digest([payload], self._checksum)
        return payload, size, {} if digest is None else {CHECKSUM_KEY: digest}

    def _uploaded(self, chunk: ClosedChunk, charge: int, _nbytes: int) -> None:
        self._budget.release(charge)
        self._chunks.finished(chunk)

    def _note_held(self) -> None:
        self._peak_held = max(self._peak_held, self._budget.used + self._builder.nbytes)

    async def _commit(self) -> None:
        ready = await self._chunks.next_index(self._store, self._config, self._existing, self._keys)
        if ready is None:
            return
        merged, done = ready
        stamp = max(time.time(), self._last_stamp + 1e-6)  # updated_at changes with every commit
        await self._wlock.acommit_index(merged.stamped(stamp).to_json().encode())
        self._last_stamp = stamp
        self._chunks.committed_to(done)

    def statistics(self) -> UploaderStatistics:
        """Counters of this uploader (see :class:`UploaderStatistics`)."""
        opened = self._state != "new"
        existing, chunks = self._existing.num_items if self._existing is not None else 0, self._chunks
        return UploaderStatistics(
            samples_added=self._samples_added,
            samples_committed=chunks.samples_committed,
            dataset_samples=existing + chunks.samples_committed,
            chunks_closed=len(chunks.chunks),
            chunks_uploaded=chunks.uploaded,
            chunks_committed=chunks.committed,
            commits=chunks.commits,
            bytes_reserved=self._budget.used if opened else 0,
            buffered_bytes=self._builder.nbytes if opened else 0,
            peak_held_bytes=self._peak_held,
            waiting=self._budget.waiting if opened else 0,
        )
