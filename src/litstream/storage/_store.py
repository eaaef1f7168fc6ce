"""One async Store protocol over every place bytes live, and its two local implementations.

``Store`` is what the read and write paths talk to; they never touch files or SDKs directly. Paths
are ``/``-separated keys relative to the store's root (``"chunk-0-0.bin"``).

* :class:`LocalFileStore` — a directory on this machine, through ``os`` calls run in worker threads.
  It holds no runtime, so it is safe in forked DataLoader workers.
* :class:`ObstoreStore` — any obstore store (``MemoryStore``, ``LocalStore``, and the object stores).
  obstore's ``*_async`` calls need a running asyncio loop and fail under trio, so every call is the
  sync one run in ``anyio.to_thread.run_sync`` with this store's ``CapacityLimiter``: that one
  function, :meth:`ObstoreStore._call`, is the whole asyncio/trio bridge. After a process has used
  obstore, obstore hangs in a forked child; the store remembers the pid that created it and raises
  :class:`~litstream.StorageError` in any other process instead of hanging.

Foreign exceptions are mapped once, here, into :class:`~litstream.StorageError` and
:class:`~litstream.ObjectNotFoundError`.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._errors import ObjectNotFoundError, StorageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["LocalFileStore", "ObjectMeta", "ObstoreStore", "Store", "obstore_used"]

T = TypeVar("T")


@dataclass(frozen=True)
class ObjectMeta:
    """What a listing or ``head`` returns: the key and its size in bytes."""

    path: str
    size: int


@runtime_checkable
class Store(Protocol):
    """Async access to objects under one root. All sizes and offsets are in bytes."""

    @property
    def url(self) -> str:
        """Where the root is, for messages (``"/data/ds"``, ``"memory://"``)."""
        ...

    async def get(self, path: str) -> bytes:
        """The whole object. Raises ObjectNotFoundError if absent, StorageError on failure."""
        ...

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes from offset ``start`` (shorter only at the end of the object)."""
        ...

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """Several ranges of one object, in the order given."""
        ...

    async def put(self, path: str, data: bytes) -> None:
        """Write the whole object atomically: readers see the old object, or all of ``data``."""
        ...

    async def head(self, path: str) -> ObjectMeta:
        """Metadata of one object. Raises ObjectNotFoundError if absent."""
        ...

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        """Every object whose key starts with ``prefix``, sorted by key."""
        ...

    async def delete(self, path: str) -> None:
        """Remove one object; a missing object is not an error."""
        ...


@contextlib.contextmanager
def _mapped_errors(operation: str, where: str) -> Iterator[None]:
    try:
        yield
    except (StorageError, anyio.get_cancelled_exc_class()):
        raise
    except FileNotFoundError as exc:
        raise ObjectNotFoundError(f"{operation}: {where} does not exist") from exc
    except OSError as exc:
        raise StorageError(f"{operation} failed for {where}: {exc}") from exc
    except Exception as exc:
        raise StorageError(f"{operation} failed for {where}: {type(exc).__name__}: {exc}") from exc


def _loop_limiter(
    current: tuple[object, anyio.CapacityLimiter] | None, size: int
) -> tuple[object, anyio.CapacityLimiter]:
    """A CapacityLimiter for the running event loop (a limiter belongs to the loop that made it).

    A dataset's store is reused by successive portals, each with its own loop, so the limiter is
    remade whenever the loop changes.
    """
    token = anyio.lowlevel.current_token()
    if current is not None and current[0] == token:
        return current
    return (token, anyio.CapacityLimiter(size))


class LocalFileStore:
    """A local directory as a :class:`Store`.

    Args:
        root: The directory. It is created on the first ``put`` if missing.
        max_threads: Concurrent blocking file operations (default 8).
    """

    def __init__(self, root: str | os.PathLike[str], *, max_threads: int = 8) -> None:
        self._root = Path(root).absolute()
        self._max_threads = max_threads
        self._limiter_obj: tuple[object, anyio.CapacityLimiter] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_root": self._root, "_max_threads": self._max_threads, "_limiter_obj": None}

    @property
    def root(self) -> Path:
        return self._root

    @property
    def url(self) -> str:
        return str(self._root)

    def _limiter(self) -> anyio.CapacityLimiter:
        self._limiter_obj = _loop_limiter(self._limiter_obj, self._max_threads)
        return self._limiter_obj[1]

    def _full(self, path: str) -> Path:
        return self._root / path

    async def _run(self, operation: str, path: str, fn: Callable[[], T]) -> T:
        with _mapped_errors(operation, str(self._full(path))):
            return await anyio.to_thread.run_sync(fn, limiter=self._limiter())

    async def get(self, path: str) -> bytes:
        return await self._run("get", path, self._full(path).read_bytes)

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        return (await self.get_ranges(path, [start], [length]))[0]

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        full = self._full(path)

        def read() -> list[bytes]:
            with open(full, "rb") as f:
                return [os.pread(f.fileno(), length, start) for start, length in zip(starts, lengths, strict=False)]

        return await self._run("get_range", path, read)

    async def put(self, path: str, data: bytes) -> None:
        full = self._full(path)

        def write() -> None:
            full.parent.mkdir(parents=True, exist_ok=True)
            tmp = full.with_name(f".{full.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, full)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise

        await self._run("put", path, write)

    async def head(self, path: str) -> ObjectMeta:
        full = self._full(path)
        stat = await self._run("head", path, full.stat)
        if not full.is_file():
            raise ObjectNotFoundError(f"head: {full} is not a file")
        return ObjectMeta(path, stat.st_size)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        root = self._root

        def walk() -> list[ObjectMeta]:
            out: list[ObjectMeta] = []
            if not root.is_dir():
                return out
            for dirpath, _dirs, files in os.walk(root):
                for name in files:
                    full = Path(dirpath) / name
                    key = full.relative_to(root).as_posix()
                    if key.startswith(prefix) and not name.startswith("."):
                        with contextlib.suppress(FileNotFoundError):
                            out.append(ObjectMeta(key, full.stat().st_size))
            return sorted(out, key=lambda m: m.path)

        return await self._run("list", prefix, walk)

    async def delete(self, path: str) -> None:
        await self._run("delete", path, partial(self._full(path).unlink, missing_ok=True))


class ObstoreStore:
    """Any obstore store as a :class:`Store`.

    Args:
        store: An ``obstore.store.*`` instance (``MemoryStore()``, ``LocalStore(root)``, ``S3Store``…).
        url: A description of the root for messages (default: the store's repr).
        max_threads: Concurrent obstore calls (default 16).
    """

    def __init__(self, store: Any, *, url: str | None = None, max_threads: int = 16) -> None:
        self._store = store
        self._url = url or repr(store)
        self._pid = os.getpid()
        self._max_threads = max_threads
        self._limiter_obj: tuple[object, anyio.CapacityLimiter] | None = None

    @property
    def url(self) -> str:
        return self._url

    async def _call(self, operation: str, path: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one synchronous obstore call in a worker thread (the asyncio/trio bridge)."""
        if os.getpid() != self._pid:
            raise StorageError(
                f"this store was created in process {self._pid} and used in forked process {os.getpid()}; "
                "obstore cannot be used across fork: create stores inside the worker, or use "
                "multiprocessing_context='spawn' or 'forkserver'"
            )
        self._limiter_obj = _loop_limiter(self._limiter_obj, self._max_threads)
        limiter = self._limiter_obj[1]
        _OBSTORE_USED_IN.add(self._pid)
        with _mapped_errors(operation, f"{self._url}/{path}"):
            return await anyio.to_thread.run_sync(partial(fn, self._store, *args, **kwargs), limiter=limiter)

    async def get(self, path: str) -> bytes:
        import obstore

        def fetch(store: Any, key: str) -> bytes:
            return bytes(obstore.get(store, key).bytes())

        return await self._call("get", path, fetch, path)

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        import obstore

        def fetch(store: Any, key: str) -> bytes:
            return bytes(obstore.get_range(store, key, start=start, length=length))

        return await self._call("get_range", path, fetch, path)

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        import obstore

        def fetch(store: Any, key: str) -> list[bytes]:
            return [bytes(b) for b in obstore.get_ranges(store, key, starts=list(starts), lengths=list(lengths))]

        return await self._call("get_ranges", path, fetch, path)

    async def put(self, path: str, data: bytes) -> None:
        import obstore

        await self._call("put", path, obstore.put, path, data)

    async def head(self, path: str) -> ObjectMeta:
        import obstore

        meta = await self._call("head", path, obstore.head, path)
        return ObjectMeta(str(meta["path"]), int(meta["size"]))

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        import obstore

        def collect(store: Any) -> list[ObjectMeta]:
            out: list[ObjectMeta] = []
            for batch in obstore.list(store, prefix=prefix or None):
                out.extend(ObjectMeta(str(m["path"]), int(m["size"])) for m in batch)
            return sorted(out, key=lambda m: m.path)

        return await self._call("list", prefix, collect)

    async def delete(self, path: str) -> None:
        import obstore

        def remove(store: Any, key: str) -> None:
            with contextlib.suppress(FileNotFoundError):
                obstore.delete(store, key)

        await self._call("delete", path, remove, path)


_OBSTORE_USED_IN: set[int] = set()


def obstore_used() -> bool:
    """True once an :class:`ObstoreStore` has made a call in this process (forking is then unsafe)."""
    return os.getpid() in _OBSTORE_USED_IN
