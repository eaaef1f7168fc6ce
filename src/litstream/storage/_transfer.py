"""Bounded, atomic transfers between a :class:`~litstream.Store` and local files (asyncio and trio alike).

* :class:`Downloader`: a file appears complete or not at all (written under a hidden temporary name beside
  it, its blocks reserved first, then ``os.replace``-d); concurrent fetches of one name in a process share
  one download; a ``CapacityLimiter`` bounds the requests in flight, a byte budget the bytes between store
  and disk. Two *processes* fetching one name both download it, each atomically (cross-process use:
  ``read/cache/_cache.py``).
  An :class:`~litstream.storage.ObstoreStore` streams each piece into the file through ~256 KiB buffers
  (``get_into_file``): a reader's resident memory then stays flat however much it downloads.
* :class:`Uploader` (``storage/_upload.py``, re-exported here): local files (or bytes held in memory) go up
  from a task group fed by a bounded stream (backpressure).
* :class:`ByteBudget`: a first-come-first-served semaphore counting bytes (bounds memory held for transfers).

Local files are written with ``os`` calls in worker threads (aiofiles fails under trio).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from time import perf_counter_ns
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from .._core._errors import LitstreamError, StorageError
from .._core._trace import CAT_DOWNLOAD, TRACER
from ._base import MiB
from ._budget import ByteBudget
from ._ordered_fetch import OrderedFetcher, PieceSink
from ._upload import Uploader, UploadStatistics, _check_name

if sys.version_info < (3, 11):  # pragma: no cover
    pass

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._base import Store
    from ._ordered import OrderedGate
    from ._ordered_fetch import Once
    from ._progress import Progress

__all__ = ["ByteBudget", "Downloader", "UploadStatistics", "Uploader"]


@dataclass
class _Pending:  # one download in progress; followers wait on ``done``, then read ``error``
    done: anyio.Event
    error: BaseException | None = None


@dataclass
class _LoopState:  # what belongs to one event loop (anyio primitives are loop-bound)
    gate: OrderedGate
    inflight: dict[str, _Pending] = field(default_factory=dict)


def _stat_size(path: Path) -> int | None:
    with contextlib.suppress(FileNotFoundError):
        return path.stat().st_size
    return None


def _allocate(fd: int, size: int, tmp: Path) -> None:
    """Make the file ``size`` bytes long, its disk blocks reserved now where the file system can.

    Writing a cache file's pieces into reserved blocks took measurably less kernel CPU than filling the
    holes of a sparse file (ext4: ~0.2 CPU-s less per 620 MB, bench/remote_cpu.py). A file system
    without ``fallocate`` gets glibc's emulation or, if even that is refused, a sparse file
    (``ftruncate``), as before; macOS, which has no ``posix_fallocate``, always the latter.

    Raises:
        StorageError: the disk has no room for ``size`` bytes (``ENOSPC``).
    """
    allocate = getattr(os, "posix_fallocate", None)
    if allocate is not None:
        try:
            allocate(fd, 0, size)
            return
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageError(
                    f"no room for {size} bytes in {tmp.parent} ({exc.strerror}): free disk space, or give the "
                    "reader a smaller max_cache_size or another cache_dir"
                ) from exc
    os.ftruncate(fd, size)


def _open_temp(target: Path, size: int = 0) -> tuple[Path, int]:
    """A new hidden temporary file beside ``target``, ``size`` bytes long (see :func:`_allocate`)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    if size:
        try:
            _allocate(fd, size, tmp)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
    return tmp, fd


def _write_at(fd: int, data: bytes | memoryview, offset: int) -> None:
    t0 = perf_counter_ns() if TRACER.on else 0
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written
    if t0:
        TRACER.span("cache write", CAT_DOWNLOAD, t0, {"bytes": len(data)})


class _FileSink(PieceSink):
    """A download's temporary file (descriptor and path): a store with ``get_into_file`` streams each piece into
    it, other answers are written at their offsets in a worker thread."""

    def __init__(self, fd: int, tmp: Path) -> None:
        self._fd, self._tmp = fd, tmp

    async def stream(self, store: Store, name: str, start: int, length: int | None) -> int | None:
        into = getattr(store, "get_into_file", None)
        if into is None:
            return None
        t0 = perf_counter_ns() if TRACER.on else 0
        received: int = await into(name, self._tmp, start, length)
        if t0:
            TRACER.span("cache write", CAT_DOWNLOAD, t0, {"bytes": received, "streamed": True})
        return received

    async def write(self, data: bytes | memoryview, start: int) -> None:
        await anyio.to_thread.run_sync(_write_at, self._fd, data, start)


class Downloader(OrderedFetcher):
    """Downloads objects of ``store`` into ``cache_root``, atomically and with bounded resources.

    It may serve successive event loops (one portal per epoch), one at a time.

    Args:
        store: Where the objects are.
        cache_root: The local directory; object ``name`` lands at ``cache_root / name``.
        max_concurrency: Requests (whole GETs, ranged GETs, HEADs) in flight at once. Default 8.
        max_bytes_in_flight: Bytes fetched but not yet written to disk, at most (a piece larger than this
            reserves the whole budget; each piece in flight reserves its length, though a store that streams
            it into the file holds only a few buffers of it). Default 256 MiB.
        piece_size: Objects larger than this are fetched in ranged GETs of this many bytes, written at their
            offsets as they arrive. Default 8 MiB.
        first_piece: The first ranged GET of an object read while it downloads (a ``progress`` given to
            :meth:`fetch`) is this short (at most ``piece_size``), so its first items come quickly. Default 1 MiB.

    Raises:
        ConfigurationError: a limit that is not an int >= 1.
    """

    def __init__(
        self,
        store: Store,
        cache_root: str | os.PathLike[str],
        *,
        max_concurrency: int = 8,
        max_bytes_in_flight: int = 256 * MiB,
        piece_size: int = 8 * MiB,
        first_piece: int = 1 * MiB,
    ) -> None:
        super().__init__(
            store,
            max_concurrency=max_concurrency,
            max_bytes_in_flight=max_bytes_in_flight,
            piece_size=piece_size,
            first_piece=first_piece,
        )
        self._root = Path(cache_root).absolute()
        self._state: _LoopState | None = None

    def path(self, name: str) -> Path:
        """Where object ``name`` is (or will be) stored locally; ConfigurationError if not a relative key."""
        return self._root / _check_name(name)

    def _loop_state(self) -> _LoopState:
        gate = self._loop_gate()
        if self._state is None or self._state.gate is not gate:
            self._state = _LoopState(gate)
        return self._state

    # The keywords repeat MemoryFetcher.fetch's (one OrderedFetcher interface); what comes back differs (a file).
    async def fetch(
        self,
        name: str,
        *,
        size: int | None = None,
        priority: int | None = None,
        queued: Callable[[], object] | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Make sure object ``name`` is a complete local file; return its path.

        A file at the path is kept if ``size`` is ``None`` or its length; else it is downloaded (replacing a file
        of another size). Concurrent calls for one name share one download; if its task is cancelled, a
        waiting call takes over.

        Args:
            name: The object's key in the store (also its path below ``cache_root``).
            size: The object's length in bytes when known (from ``index.json``); ``None`` costs one HEAD
                request per download.
            priority: A :meth:`ticket`: the requests of this download are sent before those of downloads with
                a larger one (pieces of one download in offset order). ``None``: a new ticket (after every
                download asked for so far).
            queued: Called once, as soon as every request of this download is queued (or none is needed:
                the file is there, another call is downloading it, or this call failed). A reader that
                starts the next download only then keeps the downloads in its order.
            progress: Told where the bytes are written and which are there as they land, then that the file
                is complete (or that the download failed), so a reader can decode while it downloads.

        Raises:
            ObjectNotFoundError: the object does not exist.
            StorageError: the transfer failed, or the object is shorter than ``size`` (or longer, for objects
                of at most ``piece_size`` bytes, which are fetched whole).
            ConfigurationError: ``name`` is not a relative key.
        """
        path = await self._reported(lambda once: self._fetch(name, size, priority, once, progress), queued, progress)
        if progress is not None:
            progress.complete(path)
        return path

    async def _fetch(
        self, name: str, size: int | None, priority: int | None, queued: Once, progress: Progress | None
    ) -> Path:
        target = self.path(name)
        state = self._loop_state()
        while True:
            present = await anyio.to_thread.run_sync(_stat_size, target)
            if present is not None and (size is None or present == size):
                return target
            pending = state.inflight.get(name)
            if pending is None:
                break
            queued()  # another call downloads it: nothing of this call's will be queued
            await pending.done.wait()
            error = pending.error
            if error is None:
                return target
            if isinstance(error, anyio.get_cancelled_exc_class()):
                continue  # the downloading task was cancelled, not this one: try again
            if isinstance(error, LitstreamError):  # a fresh copy per waiter (every class takes one message)
                raise type(error)(str(error)) from error
            raise error
        pending = _Pending(anyio.Event())
        state.inflight[name] = pending
        t0 = perf_counter_ns() if TRACER.on else 0
        try:
            ticket = self.ticket() if priority is None else priority
            await self._download(name, target, size, state, ticket, queued, progress)
        except BaseException as exc:
            pending.error = exc
            raise
        finally:
            del state.inflight[name]
            pending.done.set()
            if t0:
                TRACER.async_span("download", CAT_DOWNLOAD, t0, {"chunk": name, "ok": pending.error is None})
        return target

    async def _download(
        self,
        name: str,
        target: Path,
        size: int | None,
        state: _LoopState,
        ticket: int,
        queued: Once,
        progress: Progress | None,
    ) -> None:
        gate = state.gate
        if size is None:
            size = await self._head_size(gate, name, ticket)
        tmp, fd = await anyio.to_thread.run_sync(_open_temp, target, size)
        if progress is not None:
            progress.opened(tmp)
        done = False
        try:
            await self._fetch_pieces(gate, name, size, ticket, _FileSink(fd, tmp), queued, progress)
            done = True
        finally:
            with anyio.CancelScope(shield=True):  # publish or clean up even when cancelled
                await anyio.to_thread.run_sync(os.close, fd)
                if done:
                    await anyio.to_thread.run_sync(os.replace, tmp, target)
                else:
                    await anyio.to_thread.run_sync(partial(tmp.unlink, missing_ok=True))
