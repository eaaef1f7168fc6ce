"""``Uploader``: local files (or bytes held in memory) go up to a :class:`~litstream.Store` from a task
group fed by a bounded stream (backpressure); see ``storage/_transfer.py`` for downloads."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from time import perf_counter_ns
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._core._errors import ConfigurationError, raise_collapsed
from .._core._trace import CAT_WRITE, TRACER
from ._base import put_size
from ._keys import check_key

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterator
    from types import TracebackType

    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from ._base import Store

__all__ = ["UploadStatistics", "Uploader"]


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")
    return value


def _check_name(name: str) -> str:
    return check_key(name, "object name")


@contextlib.contextmanager
def _single_errors() -> Iterator[None]:
    """Re-raise a task group's only failure as itself (its own cause kept), not wrapped in a group."""
    try:
        yield
    except BaseExceptionGroup as group:
        raise_collapsed(group)


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
