"""Bounded, atomic transfers between a :class:`~litstream.Store` and local files (asyncio and trio alike).

* :class:`Downloader`: a file appears complete or not at all (written under a hidden temporary name beside
  it, then ``os.replace``-d); concurrent fetches of one name in a process share one download; a
  ``CapacityLimiter`` bounds the requests in flight, a byte budget the bytes between store and disk. Two
  *processes* fetching one name both download it, each atomically (cross-process use: ``read/_cache.py``).
  An :class:`~litstream.storage.ObstoreStore` streams each piece into the file through ~256 KiB buffers
  (``get_into_file``): a reader's resident memory then stays flat however much it downloads.
* :class:`Uploader`: local files (or bytes held in memory) go up from a task group fed by a bounded stream
  (backpressure).
* :class:`ByteBudget`: a first-come-first-served semaphore counting bytes (bounds memory held for transfers).

Local files are written with ``os`` calls in worker threads (aiofiles fails under trio).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from time import perf_counter_ns
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._errors import ConfigurationError, LitstreamError, StorageError, raise_collapsed
from .._trace import CAT_DOWNLOAD, CAT_WRITE, TRACER
from ._base import MiB, put_size
from ._budget import ByteBudget
from ._keys import check_key
from ._ordered import OrderedGate, Request

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import TracebackType

    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from ._base import Store

__all__ = ["ByteBudget", "Downloader", "UploadStatistics", "Uploader"]


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")
    return value


@contextlib.contextmanager
def _single_errors() -> Iterator[None]:
    """Re-raise a task group's only failure as itself (its own cause kept), not wrapped in a group."""
    try:
        yield
    except BaseExceptionGroup as group:
        raise_collapsed(group)


@dataclass
class _Pending:  # one download in progress; followers wait on ``done``, then read ``error``
    done: anyio.Event
    error: BaseException | None = None


@dataclass
class _LoopState:  # what belongs to one event loop (anyio primitives are loop-bound)
    gate: OrderedGate
    inflight: dict[str, _Pending] = field(default_factory=dict)


def _check_name(name: str) -> str:
    return check_key(name, "object name")


def _stat_size(path: Path) -> int | None:
    with contextlib.suppress(FileNotFoundError):
        return path.stat().st_size
    return None


def _open_temp(target: Path) -> tuple[Path, int]:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)


def _write_at(fd: int, data: bytes | memoryview, offset: int) -> None:
    t0 = perf_counter_ns() if TRACER.on else 0
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written
    if t0:
        TRACER.span("cache write", CAT_DOWNLOAD, t0, {"bytes": len(data)})


class Downloader:
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
    ) -> None:
        self._store = store
        self._root = Path(cache_root).absolute()
        self._max_concurrency = _positive("max_concurrency", max_concurrency)
        self._max_bytes = _positive("max_bytes_in_flight", max_bytes_in_flight)
        self._piece_size = _positive("piece_size", piece_size)
        self._state: tuple[object, _LoopState] | None = None
        self._tickets = itertools.count()

    def ticket(self) -> int:
        """A priority for :meth:`fetch`: requests of a smaller ticket are sent first. Tickets count up, so
        taking them in the order the objects are needed makes the downloads finish in that order."""
        return next(self._tickets)

    def path(self, name: str) -> Path:
        """Where object ``name`` is (or will be) stored locally; ConfigurationError if not a relative key."""
        return self._root / _check_name(name)

    def _loop_state(self) -> _LoopState:
        token = anyio.lowlevel.current_token()
        if self._state is None or self._state[0] != token:
            state = _LoopState(OrderedGate(self._max_concurrency, self._max_bytes))
            self._state = (token, state)
        return self._state[1]

    async def fetch(
        self,
        name: str,
        *,
        size: int | None = None,
        priority: int | None = None,
        queued: Callable[[], object] | None = None,
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

        Raises:
            ObjectNotFoundError: the object does not exist.
            StorageError: the transfer failed, or the object is shorter than ``size`` (or longer, for objects
                of at most ``piece_size`` bytes, which are fetched whole).
            ConfigurationError: ``name`` is not a relative key.
        """
        notify = _Once(queued)
        try:
            return await self._fetch(name, size, priority, notify)
        finally:
            notify()

    async def _fetch(self, name: str, size: int | None, priority: int | None, queued: _Once) -> Path:
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
            await self._download(name, target, size, state, ticket, queued)
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
        self, name: str, target: Path, size: int | None, state: _LoopState, ticket: int, queued: _Once
    ) -> None:
        gate = state.gate
        if size is None:
            async with gate.hold((ticket, -1), 0):
                size = (await self._store.head(name)).size
        tmp, fd = await anyio.to_thread.run_sync(_open_temp, target)
        done = False
        # every request of this download is queued before any waits (no other download can slip in between)
        spans = [(start, min(self._piece_size, size - start)) for start in range(0, max(size, 1), self._piece_size)]
        requests = [gate.enqueue((ticket, start), length) for start, length in spans]
        queued()
        try:
            if size <= self._piece_size:
                await self._piece(gate, requests[0], name, (fd, tmp), 0, size, whole=True)
            else:
                with _single_errors():
                    async with anyio.create_task_group() as tg:
                        for request, (start, length) in zip(requests, spans, strict=True):
                            tg.start_soon(self._piece, gate, request, name, (fd, tmp), start, length, False)
            done = True
        finally:
            for request in requests:  # a piece that never ran (cancelled, or a sibling failed) leaves the queue
                gate.drop(request)
            with anyio.CancelScope(shield=True):  # publish or clean up even when cancelled
                await anyio.to_thread.run_sync(os.close, fd)
                if done:
                    await anyio.to_thread.run_sync(os.replace, tmp, target)
                else:
                    await anyio.to_thread.run_sync(partial(tmp.unlink, missing_ok=True))

    async def _piece(
        self,
        gate: OrderedGate,
        request: Request,
        name: str,
        file: tuple[int, Path],
        start: int,
        length: int,
        whole: bool,
    ) -> None:
        """Fetch ``length`` bytes from offset ``start`` (the whole object if ``whole``) into ``file`` (the
        temporary file's descriptor and path) there: streamed by a store with ``get_into_file``, else
        answered in one buffer and written in a worker thread.

        ``request``'s slot is held until the response is in memory (streamed: on disk), its bytes until
        they are on disk.
        """
        try:
            await gate.wait(request)
            into = getattr(self._store, "get_into_file", None)
            data: bytes | memoryview | None = None
            if into is not None:
                t0 = perf_counter_ns() if TRACER.on else 0
                received: int = await into(name, file[1], start, None if whole else length)
                if t0:
                    TRACER.span("cache write", CAT_DOWNLOAD, t0, {"bytes": received, "streamed": True})
            elif whole:
                data = await self._store.get(name)
            else:
                buffered = getattr(self._store, "get_range_buffer", None)  # no copy, where offered
                if buffered is not None:
                    data = await buffered(name, start, length)
                else:
                    data = await self._store.get_range(name, start, length)
            if data is not None:
                received = len(data)
            gate.free_slot(request)
            if received != length:
                raise StorageError(
                    f"download of {self._store.url}/{name}: expected {length} bytes at offset {start}, got "
                    f"{received}; the object changed or the size given (from index.json) is wrong"
                )
            if data is not None:
                await anyio.to_thread.run_sync(_write_at, file[0], data, start)
        finally:
            gate.done(request)


class _Once:
    """Calls ``callback`` (if any) the first time it is called; later calls do nothing."""

    def __init__(self, callback: Callable[[], object] | None) -> None:
        self._callback = callback

    def __call__(self) -> None:
        callback, self._callback = self._callback, None
        if callback is not None:
            callback()


@dataclass(frozen=True)
class UploadStatistics:
    """A snapshot of an :class:`Uploader`: uploads queued and not started (at most ``max_pending``), running
    (at most ``max_concurrency``) and finished, and the bytes of the finished ones."""

    pending: int
    active: int
    completed: int
    bytes_uploaded: int


@dataclass(frozen=True)
class _Job:
    source: Path | bytes | bytearray | memoryview
    name: str
    delete_after: bool
    on_done: Callable[[int], object] | None = None


class Uploader:
    """Uploads local files to ``store`` in the background, with backpressure.

    ``async with Uploader(store) as up: await up.upload(path, name)`` (waits while ``max_pending`` are queued);
    leaving the block waits for every upload (put ``index.json`` after it). If the block raises or an upload
    fails, the other uploads are cancelled and the first failure is raised from ``async with`` as itself.

    Args:
        store: Where the files go.
        max_concurrency: Uploads running at once. Default 4.
        max_pending: Uploads queued beyond those running before ``upload`` waits. Default 4.

    Raises:
        ConfigurationError: a limit that is not an int >= 1.
    """

    def __init__(self, store: Store, *, max_concurrency: int = 4, max_pending: int = 4) -> None:
        self._store = store
        self._max_concurrency = _positive("max_concurrency", max_concurrency)
        self._max_pending = _positive("max_pending", max_pending)
        self._task_group: TaskGroup | None = None
        self._send: MemoryObjectSendStream[_Job] | None = None
        self._active = 0
        self._completed = 0
        self._bytes = 0

    async def __aenter__(self) -> Uploader:
        send, receive = anyio.create_memory_object_stream[_Job](self._max_pending)
        self._send = send
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        async with receive:
            for _ in range(self._max_concurrency):
                self._task_group.start_soon(self._work, receive.clone())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if self._task_group is None or self._send is None:
            raise RuntimeError("Uploader.__aexit__ without __aenter__")
        self._send.close()  # the workers finish what is queued, then stop
        if exc_type is not None:
            self._task_group.cancel_scope.cancel()
        with _single_errors():
            return await self._task_group.__aexit__(exc_type, exc, tb)

    def statistics(self) -> UploadStatistics:
        """Counters for this uploader (all zero before ``async with``)."""
        pending = 0 if self._send is None else self._send.statistics().current_buffer_used
        return UploadStatistics(pending, self._active, self._completed, self._bytes)

    async def upload(self, local_path: str | os.PathLike[str], name: str, *, delete_after: bool = True) -> None:
        """Queue ``local_path`` for upload as object ``name``; wait while ``max_pending`` uploads are queued.

        A failure of the upload cancels the block and is raised from ``async with``. Do not change the file.

        Args:
            local_path: The file to send.
            name: The object's key in the store.
            delete_after: Remove the local file once it has been uploaded (not if the upload fails).

        Raises:
            RuntimeError: called outside ``async with``, or after it ended.
            ConfigurationError: ``name`` is not a relative key.
        """
        if self._send is None:
            raise RuntimeError("use Uploader as `async with Uploader(store) as uploader:` before upload()")
        await self._queue(_Job(Path(local_path), _check_name(name), delete_after))

    async def upload_data(
        self, data: bytes | bytearray | memoryview, name: str, *, on_done: Callable[[int], object] | None = None
    ) -> None:
        """Queue bytes held in memory for upload as object ``name``; like :meth:`upload`, but nothing to delete.

        The uploader drops its reference to ``data`` as soon as the object is stored, then calls
        ``on_done(number of bytes)`` (not when the upload fails).

        Raises:
            RuntimeError: called outside ``async with``, or after it ended.
            ConfigurationError: ``name`` is not a relative key.
        """
        await self._queue(_Job(data, _check_name(name), False, on_done))

    async def _queue(self, job: _Job) -> None:
        if self._send is None:
            raise RuntimeError("use Uploader as `async with Uploader(store) as uploader:` before upload()")
        name = job.name
        try:
            await self._send.send(job)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            await anyio.lowlevel.checkpoint()  # a failed upload cancels this block: let that land first
            raise RuntimeError(
                f"cannot queue {name}: the Uploader has stopped (its block ended, or an earlier upload failed)"
            ) from exc

    async def _work(self, receive: MemoryObjectReceiveStream[_Job]) -> None:
        async with receive:
            async for job in receive:
                self._active += 1
                t0 = perf_counter_ns() if TRACER.on else 0
                try:
                    if isinstance(job.source, Path):
                        size = await anyio.to_thread.run_sync(put_size, job.source)
                    else:
                        size = put_size(job.source)
                    await self._store.put(job.name, job.source)
                finally:
                    self._active -= 1
                if job.delete_after and isinstance(job.source, Path):
                    await anyio.to_thread.run_sync(partial(job.source.unlink, missing_ok=True))
                self._completed += 1
                self._bytes += size
                if t0:
                    TRACER.async_span("upload", CAT_WRITE, t0, {"name": job.name, "bytes": size})
                on_done = job.on_done
                del job  # do not hold the uploaded bytes while waiting for the next job
                if on_done is not None:
                    on_done(size)
