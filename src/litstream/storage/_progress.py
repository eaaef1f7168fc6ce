"""``Progress``: how much of a download is on disk, for a reader that decodes a chunk while it arrives.

The :class:`~litstream.storage._transfer.Downloader` writes a chunk's pieces at their offsets in a temporary
file of the chunk's full size and reports each piece here (the
:class:`~litstream.storage._memory_fetch.MemoryFetcher` likewise, into a buffer in memory).
:meth:`Progress.wait` blocks the calling thread
until the bytes before an offset are all written (the *contiguous* prefix: pieces may land out of order),
the whole object is in place, or the download failed — then it raises that failure. Thread-safe: the
event loop reports, a decoding thread waits.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from .._core._errors import LitstreamError, StorageError
from ._files import map_file

if TYPE_CHECKING:
    import mmap
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["DownloadAbandoned", "Progress"]


class DownloadAbandoned(StorageError):
    """The bytes a reader waits for will not come: their download was cancelled (the read is shutting
    down, usually because of another error, which the reader raises instead)."""

    follows_another_failure = True


class Progress:
    """The state of one download of ``size`` bytes (see the module docstring).

    Args:
        size: The object's length in bytes.
        map_file: Maps a file read-only for :meth:`map_when`; default ``storage._files.map_file`` (the chunk
            cache passes its own, ``ChunkCache.map_file``).
    """

    def __init__(self, size: int, *, map_file: Callable[[Path], bytes | mmap.mmap] = map_file) -> None:
        self.size = size
        self._map_file = map_file
        self._cond = threading.Condition()
        self._landed: dict[int, int] = {}  # start -> end of pieces written beyond the contiguous prefix
        self._prefix = 0
        self._path: Path | None = None  # where the bytes are being written (a temporary name), then the file
        self._buffer: memoryview | None = None  # or the buffer in memory they are copied into
        self._error: BaseException | None = None
        self._complete = False

    @property
    def prefix(self) -> int:
        """Bytes from offset 0 that are written."""
        return self._prefix

    def opened(self, path: Path) -> None:
        """The download writes into ``path`` (already ``size`` bytes long)."""
        with self._cond:
            self._path = path
            self._cond.notify_all()

    def opened_buffer(self, buffer: memoryview) -> None:
        """The download copies into ``buffer`` (``size`` bytes, in memory) instead of a file."""
        with self._cond:
            self._buffer = buffer
            self._cond.notify_all()

    def landed(self, start: int, length: int) -> None:
        """Bytes ``[start, start + length)`` are written."""
        with self._cond:
            self._landed[start] = start + length
            while self._prefix in self._landed:
                self._prefix = self._landed.pop(self._prefix)
            self._cond.notify_all()

    def complete(self, path: Path) -> None:
        """The whole object is the file at ``path``."""
        with self._cond:
            self._path, self._prefix, self._complete = path, self.size, True
            self._landed.clear()
            self._cond.notify_all()

    def complete_buffer(self) -> None:
        """The whole object is in the buffer given to :meth:`opened_buffer`."""
        with self._cond:
            self._prefix, self._complete = self.size, True
            self._landed.clear()
            self._cond.notify_all()

    def failed(self, error: BaseException) -> None:
        """The download stopped with ``error`` (also when cancelled); waiters for bytes not written raise.

        Recorded even when every byte was written: a download cancelled after its last piece landed but
        before the rename removes its temporary file, and a reader about to map it must learn that."""
        with self._cond:
            if not self._complete:
                self._error = error
            self._cond.notify_all()

    def _raise(self) -> None:
        error = self._error
        if not isinstance(error, Exception):  # cancelled (or interrupted): not a failure of this download
            raise DownloadAbandoned("the download was cancelled before these bytes were written") from error
        if isinstance(error, LitstreamError):  # a fresh copy: the original is raised by the download's task
            raise type(error)(str(error)) from error
        raise StorageError(f"the download stopped before the bytes were written: {error!r}") from error

    def wait(self, end: int) -> None:
        """Block until bytes ``[0, end)`` are written; raise the download's error if it stopped first."""
        with self._cond:
            while self._prefix < min(end, self.size) and self._error is None:
                self._cond.wait()
            if self._prefix < min(end, self.size):
                self._raise()

    def _wait_target(self) -> Path | memoryview:
        with self._cond:
            while self._path is None and self._buffer is None and self._error is None:
                self._cond.wait()
            if self._buffer is not None:
                return self._buffer
            if self._path is None:
                self._raise()
            assert self._path is not None
            return self._path

    def _map(self, end: int) -> bytes | memoryview | mmap.mmap:
        self.wait(end)
        path = self._wait_target()
        if isinstance(path, memoryview):
            return path
        while True:
            try:
                return self._map_file(path)
            except FileNotFoundError:
                pass
            # The name changed since it was read: the download ended (renamed into place) or failed
            # (temporary file removed). Wait for that news, then map the file under its new name.
            with self._cond:
                while self._path == path and self._error is None and not self._complete:
                    self._cond.wait()
                if self._path == path:
                    if self._error is not None:
                        self._raise()
                    raise StorageError(f"{path} was removed before it could be read (evicted from the cache?)")
                assert self._path is not None
                path = self._path

    async def map_when(self, end: int) -> bytes | memoryview | mmap.mmap:
        """Once bytes ``[0, end)`` are written: the file they are in, memory-mapped read-only (the temporary
        file while the download runs; the mapping stays valid after the rename), or the buffer in memory. A
        rename between learning the name and opening it is followed. Waits in a worker thread.

        Raises:
            StorageError: the download failed (its error), or the finished file vanished before mapping.
            DownloadAbandoned: the download was cancelled first.
        """
        return await anyio.to_thread.run_sync(self._map, end, abandon_on_cancel=True)
