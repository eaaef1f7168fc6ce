"""The local chunk cache: where it lives, which chunk files are in use, and which may be deleted.

Layout (directory names as LitData's; the lock files differ)::

    <root>/<md5(url)>/<updated_at or md5(url)>/    default_cache_root() / dataset_cache_dir()
        index.json                                 never counted nor evicted
        chunk-0-0.bin ...                          complete files (the Downloader renames finished files in)
        .chunk-0-0.bin.tmp.<pid>.<hex>             a download in progress (hidden: not counted, not evicted)
        .locks/chunk-0-0.bin.lock                  the chunk's lock file while it is or was in use

Cross-process protocol (POSIX ``flock``: Linux, macOS). A user of a chunk holds a *shared* ``flock`` on its
lock file (one open file description per hold) from ``acquire`` to ``release``, and downloads and reads it
only in between. Deleting takes an *exclusive, non-blocking* ``flock``, granted only while nobody holds the
chunk, then removes chunk and lock file; a holder re-locks if its lock file was removed meanwhile. Hence a
chunk shared by DataLoader workers is deleted only after the last release (B30: a later user downloads it
again), a dead process leaks no hold (the kernel drops its locks), and deleting never waits, so a budget
smaller than the chunks in use is exceeded by exactly those (B33). Eviction deletes unheld chunks, least
recently released first (release sets the mtime), until they fit ``max_cache_size``; ``delete_consumed``
also deletes a chunk at its last release (LitData's delete-when-processed mode, B31).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio.to_thread

from ..._core._errors import ConfigurationError
from ..._core._trace import CAT_DELETE, CAT_LOCK, TRACER
from ...storage._cache_dirs import LOCK_DIR, parse_cache_size
from ...storage._files import map_file

if TYPE_CHECKING:
    import mmap

if os.name == "posix":
    import fcntl

__all__ = ["ChunkCache"]

_NOT_CHUNKS = (".json", ".lock", ".cnt", ".tmb")  # never counted nor evicted (LitData's side files included)

_LIVE: weakref.WeakSet[ChunkCache] = weakref.WeakSet()


def _forget_holds_after_fork() -> None:
    """In a forked child the inherited holds are the parent's: close the child's copies of their descriptors
    (or the parent's releases would not unlock them) and renew the thread lock (a parent thread may hold it)."""
    for cache in list(_LIVE):
        cache._lock = threading.Lock()
        for hold in cache._holds.values():
            os.close(hold.fd)
        cache._holds = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_holds_after_fork)


@dataclass
class _Hold:
    fd: int
    count: int


def _same_file(fd: int, path: Path) -> bool:
    with contextlib.suppress(FileNotFoundError):
        now, mine = os.stat(path), os.fstat(fd)
        return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)
    return False


class ChunkCache:
    """Reference-counted chunk files in one dataset cache directory, shared safely between processes.

    Use: ``acquire(name, size=n)``, then ``Downloader.fetch(name, size=n)``, read, ``release(name)``. Methods
    are thread-safe, blocking file I/O of microseconds (``flock``, ``stat``, ``unlink``); the ``a``-prefixed
    twins run them in a worker thread. It pickles as its configuration; a forked child forgets inherited holds.

    Args:
        directory: The dataset's cache directory (see :func:`dataset_cache_dir`); created if missing.
        max_cache_size: Bytes of chunk files to keep in ``directory`` (``int``, ``"50GB"``, a fraction, see
            :func:`parse_cache_size`); ``None`` never evicts. Chunks in use are never deleted, so a budget
            smaller than them is exceeded by exactly the chunks in use.
        delete_consumed: Delete each chunk as soon as no process holds it any more, whatever the budget
            (LitData does this when the dataset is larger than ``max_cache_size``).

    Attributes:
        directory: The absolute cache directory.
        max_cache_size: The budget in bytes, or ``None``.
        delete_consumed: As given.

    Raises:
        ConfigurationError: an invalid ``max_cache_size``.
        NotImplementedError: on a platform without ``fcntl.flock`` (Windows).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_cache_size: int | float | str | None = None,
        delete_consumed: bool = False,
    ) -> None:
        if os.name != "posix":  # pragma: no cover
            raise NotImplementedError("ChunkCache needs POSIX flock (Linux, macOS)")
        self.directory = Path(directory).absolute()
        self.max_cache_size = parse_cache_size(max_cache_size, directory=self.directory)
        self.delete_consumed = delete_consumed
        self._holds: dict[str, _Hold] = {}
        self._lock = threading.Lock()
        _LIVE.add(self)
        (self.directory / LOCK_DIR).mkdir(parents=True, exist_ok=True)

    def __getstate__(self) -> dict[str, Any]:
        return {key: self.__dict__[key] for key in ("directory", "max_cache_size", "delete_consumed")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._holds = {}
        self._lock = threading.Lock()
        _LIVE.add(self)

    def __enter__(self) -> ChunkCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def path(self, name: str) -> Path:
        """Where chunk ``name`` is stored (whether or not it is there).

        Raises:
            ConfigurationError: ``name`` is empty, absolute, or has ``.``/``..`` segments.
        """
        parts = PurePosixPath(name).parts
        if not name or name.startswith("/") or any(p in (".", "..") for p in parts) or parts[0] == LOCK_DIR:
            raise ConfigurationError(f"chunk name {name!r} must be a relative '/'-separated key without '.' or '..'")
        return self.directory / name

    def map_file(self, path: Path) -> bytes | mmap.mmap:
        """The file ``path`` (of this cache), memory-mapped read-only (``storage._files.map_file``): how readers
        map the chunks they hold.

        Raises:
            FileNotFoundError: no such file (evicted, or renamed by its download).
        """
        return map_file(path)

    def _lock_path(self, name: str) -> Path:
        return self.directory / LOCK_DIR / f"{quote(name, safe='')}.lock"

    def _open_lock(self, name: str) -> int:
        (self.directory / LOCK_DIR).mkdir(parents=True, exist_ok=True)
        return os.open(self._lock_path(name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def held(self) -> dict[str, int]:
        """The chunks this process holds, with how many times each is held."""
        with self._lock:
            return {name: hold.count for name, hold in self._holds.items()}

    def acquire(self, name: str, *, size: int | None = None) -> Path:
        """Hold chunk ``name`` (no process deletes it until released); return its path. Acquire, then download.

        Holds are counted (two acquires, two releases). Waits only while another process deletes this chunk.

        Args:
            name: The chunk's file name in the directory.
            size: The chunk's size in bytes: when given and the file is missing, unused chunks are evicted to
                leave room for it within the budget (never waiting; the budget may be exceeded).

        Raises:
            ConfigurationError: an invalid ``name``.
            OSError: the lock file cannot be created.
        """
        path = self.path(name)
        t0 = time.perf_counter_ns() if TRACER.on else 0
        with self._lock:
            hold = self._holds.get(name)
            if hold is not None:
                hold.count += 1
            else:
                self._holds[name] = _Hold(self._lock_shared(name), 1)
        if t0:
            TRACER.span("lock", CAT_LOCK, t0, {"chunk": name})
        if size is not None and not path.exists():
            self.evict(incoming=size)
        return path

    def _lock_shared(self, name: str) -> int:
        lock_path = self._lock_path(name)
        while True:
            fd = self._open_lock(name)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                if _same_file(fd, lock_path):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # an evictor removed the lock file we locked: lock the new one

    def release(self, name: str) -> list[str]:
        """Give back one hold of ``name``; after the last, set its mtime to now and delete what the budget requires.

        Returns:
            The chunks deleted by this call.

        Raises:
            RuntimeError: ``name`` is not held by this process.
        """
        with self._lock:
            hold = self._holds.get(name)
            if hold is None:
                raise RuntimeError(f"release({name!r}): this process does not hold that chunk in {self.directory}")
            hold.count -= 1
            if hold.count > 0:
                return []
            del self._holds[name]
        return self._let_go({name: hold})

    def close(self) -> list[str]:
        """Release every hold of this process (end of an epoch, teardown); returns what was deleted, as release."""
        with self._lock:
            holds, self._holds = self._holds, {}
        return self._let_go(holds)

    def _let_go(self, holds: dict[str, _Hold]) -> list[str]:
        for name, hold in holds.items():
            with contextlib.suppress(FileNotFoundError):
                now = time.time_ns()  # its place in the least-recently-released order (ns: no coarse-clock ties)
                os.utime(self.path(name), ns=(now, now))
            os.close(hold.fd)
        removed = [name for name in holds if self._try_remove(name, chunk=self.delete_consumed)]
        return removed + self.evict()

    def _try_remove(self, name: str, *, chunk: bool = True) -> bool:
        """If nobody holds ``name``, delete its lock file and (if ``chunk``) the chunk file, and say if it did."""
        t0 = time.perf_counter_ns() if TRACER.on else 0
        lock_path = self._lock_path(name)
        fd = self._open_lock(name)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            if not _same_file(fd, lock_path):
                return False
            removed = chunk and self.path(name).exists()
            if removed:
                self.path(name).unlink(missing_ok=True)
                if t0:
                    TRACER.span("delete", CAT_DELETE, t0, {"chunk": name})
            lock_path.unlink(missing_ok=True)
            return removed
        finally:
            os.close(fd)

    def _scan(self) -> list[tuple[int, str, int]]:
        """``(mtime_ns, name, size)`` of every chunk file (hidden entries and side files left out)."""
        out: list[tuple[int, str, int]] = []
        for dirpath, dirnames, filenames in os.walk(self.directory):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for filename in filenames:
                if filename.startswith(".") or filename.endswith(_NOT_CHUNKS):
                    continue
                full = os.path.join(dirpath, filename)
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(full)
                    out.append((st.st_mtime_ns, Path(full).relative_to(self.directory).as_posix(), st.st_size))
        return out

    def usage(self) -> int:
        """Bytes of chunk files in the directory now (``index.json``, locks and partial downloads excluded)."""
        return sum(size for _mtime, _name, size in self._scan())

    def evict(self, incoming: int = 0) -> list[str]:
        """Delete unused chunks, least recently released first, until ``usage() + incoming <= max_cache_size``.

        ``incoming`` is the bytes about to be added (a download). Chunks held by any process are skipped and it
        never waits, so the result may stay over budget. Returns the chunks deleted, in order.
        """
        if self.max_cache_size is None:
            return []
        files = sorted(self._scan())
        total = sum(size for _mtime, _name, size in files)
        with self._lock:
            mine = set(self._holds)
        removed: list[str] = []
        for _mtime, name, size in files:
            if total + incoming <= self.max_cache_size:
                break
            if name not in mine and self._try_remove(name):
                total -= size
                removed.append(name)
        return removed

    async def aacquire(self, name: str, *, size: int | None = None) -> Path:
        """:meth:`acquire` in a worker thread."""
        return await anyio.to_thread.run_sync(lambda: self.acquire(name, size=size))

    async def arelease(self, name: str) -> list[str]:
        """:meth:`release` in a worker thread."""
        return await anyio.to_thread.run_sync(self.release, name)

    async def aclose(self) -> list[str]:
        """:meth:`close` in a worker thread."""
        return await anyio.to_thread.run_sync(self.close)
