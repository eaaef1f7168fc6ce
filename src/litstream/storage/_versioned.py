"""Conditional writes: create an object only if it is absent, replace it only if it is unchanged.

The primitives of the writer lock and of a guarded ``index.json`` commit (``write/_writer_lock.py``).
Every object read here comes with a *version*: an opaque token that changes whenever the object is
replaced. A put names the version it expects (``None``: the object must not exist) and fails with
:class:`VersionConflictError` when the object is not in that state; the check and the write are one
atomic step where the store allows it:

* **Local directories** (a store with ``local_path``): the version is ``inode:mtime_ns:size`` (every
  write is a rename of a new file, so a new inode); the check and the rename run while this process
  holds an exclusive ``flock`` on the store's root directory, so they are atomic between every
  litstream process on this machine (POSIX systems; on network file systems as far as they honour
  ``flock``).
* **Object stores through obstore** (S3, GCS, Azure, memory): the version is the ETag; obstore's
  ``mode="create"`` sends ``If-None-Match: *`` and ``mode={"e_tag": v}`` sends ``If-Match: v``, and the
  server decides (checked against SeaweedFS in ``tests/write/test_writer_lock.py``).
* **Any other store**: read, compare the content's digest, then write. Not atomic: two writers that
  check at the same moment can both succeed. Documented in ``docs/storage.md``.

The functions are synchronous (one object, a few requests): the writer lock's heartbeat thread calls
them directly, async code through :func:`anyio.to_thread.run_sync`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._core._bridge import run_sync
from .._core._errors import ObjectNotFoundError, StorageError
from ._base import mapped_errors
from ._keys import check_key
from ._listing import list_retrying
from ._obstore import ObstoreStore
from ._obstore_fork import note_used

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._store import Store

__all__ = ["ObjectTooLargeError", "VersionConflictError", "VersionedObjects", "versioned"]


class VersionConflictError(StorageError):
    """The object exists although it should not, or was replaced since the version given (internal)."""


class ObjectTooLargeError(StorageError):
    """A small object (a lease, a version record) holds more bytes than its reader accepts (internal)."""


def _too_large(where: str, size: int, limit: int) -> ObjectTooLargeError:
    return ObjectTooLargeError(f"{where} holds {size} bytes, more than the {limit} accepted there; it was not read")


def _listed(store: Store, prefix: str) -> list[str]:
    """Keys in the folder ``prefix`` names that start with it, through the store's own listing: a cut listing is
    retried like every listing (``storage/_listing.py``), and a store wrapper sees it (the fault-injection seam)."""
    folder, _ = _split(prefix)
    listing = run_sync(list_retrying, store, prefix)
    return sorted(m.path for m in listing if m.path.rpartition("/")[0] == folder)


def _split(prefix: str) -> tuple[str, str]:
    """``("a/b", "c")`` for ``"a/b/c"``: the folder a prefix names and the start of the names in it."""
    folder, _, start = prefix.rpartition("/")
    return folder, start


class VersionedObjects(Protocol):
    """Conditional reads and writes of small objects under one store's root (see the module docstring)."""

    url: str

    def read(self, key: str, limit: int | None = None) -> tuple[bytes, str] | None:
        """The object's bytes and version, or ``None`` when it does not exist.

        Raises:
            ObjectTooLargeError: ``limit`` is given and the object holds more bytes (nothing more is read).
        """
        ...

    def version(self, key: str) -> str | None:
        """The object's version, or ``None`` when it does not exist."""
        ...

    def put(self, key: str, data: bytes, expect: str | None) -> str:
        """Write ``data`` if the object's version is ``expect`` (``None``: absent); returns the new version.

        Raises:
            VersionConflictError: the object is in another state; nothing was written.
        """
        ...

    def delete(self, key: str, expect: str) -> bool:
        """Delete the object if its version is ``expect``; returns whether it was deleted."""
        ...

    def names(self, prefix: str) -> list[str]:
        """Keys that start with ``prefix``, in the folder the prefix names (``"a/b"``: keys ``a/b*`` of folder
        ``a``; ``""``: the top level), hidden files included, sorted; a cut listing is retried."""
        ...


def versioned(store: Store) -> VersionedObjects:
    """The conditional operations for ``store``: atomic for local directories and obstore stores."""
    local_path = getattr(store, "local_path", None)
    root = local_path("") if callable(local_path) else None
    if root is not None and hasattr(os, "O_DIRECTORY"):
        return _LocalObjects(store, Path(root))
    if isinstance(store, ObstoreStore):
        return _ObstoreObjects(store)
    return _CheckThenWrite(store)


class _LocalObjects:
    def __init__(self, store: Store, root: Path) -> None:
        self._store = store
        self._root = root
        self.url = store.url

    def _path(self, key: str) -> Path:
        return self._root / check_key(key, self.url)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        import fcntl

        self._root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd is closed
            yield
        finally:
            os.close(fd)

    @staticmethod
    def _stamp(stat: os.stat_result) -> str:
        return f"{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_size}"

    def read(self, key: str, limit: int | None = None) -> tuple[bytes, str] | None:
        path = self._path(key)
        with mapped_errors("get", str(path)):
            try:
                with open(path, "rb") as f:
                    stat = os.fstat(f.fileno())
                    if limit is not None and stat.st_size > limit:
                        raise _too_large(str(path), stat.st_size, limit)
                    return f.read(), self._stamp(stat)
            except (FileNotFoundError, NotADirectoryError):
                return None

    def version(self, key: str) -> str | None:
        path = self._path(key)
        with mapped_errors("head", str(path)):
            try:
                return self._stamp(os.stat(path))
            except FileNotFoundError:
                return None

    def put(self, key: str, data: bytes, expect: str | None) -> str:
        path = self._path(key)
        with mapped_errors("put", str(path)), self._exclusive():
            current = self.version(key)
            if current != expect:
                raise VersionConflictError(f"{path} is at version {current}, not {expect}")
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            return self._stamp(os.stat(path))

    def delete(self, key: str, expect: str) -> bool:
        path = self._path(key)
        with mapped_errors("delete", str(path)), self._exclusive():
            if self.version(key) != expect:
                return False
            path.unlink(missing_ok=True)
            return True

    def names(self, prefix: str) -> list[str]:
        folder, start = _split(prefix)
        where = self._root / check_key(folder, self.url) if folder else self._root
        with mapped_errors("list", str(where)):
            try:
                found = sorted(n for n in os.listdir(where) if n.startswith(start))
            except (FileNotFoundError, NotADirectoryError):
                return []
        return [f"{folder}/{n}" if folder else n for n in found]


class _ObstoreObjects:
    def __init__(self, store: ObstoreStore) -> None:
        self._store = store
        self.url = store.url

    def _client(self, operation: str, key: str) -> tuple[Any, Any]:
        """``(obstore native module, client)`` that work in this process (a private copy after fork)."""
        with mapped_errors(operation, f"{self.url}/{key}"):
            module, client = self._store._client()
        note_used(module)
        return module, client

    def read(self, key: str, limit: int | None = None) -> tuple[bytes, str] | None:
        obstore, client = self._client("get", key)
        try:
            with mapped_errors("get", f"{self.url}/{key}"):
                result = obstore.get(client, key)
                size = int(result.meta.get("size") or 0)
                if limit is not None and size > limit:  # the body is dropped unread
                    raise _too_large(f"{self.url}/{key}", size, limit)
                return bytes(result.bytes()), str(result.meta.get("e_tag"))
        except ObjectNotFoundError:
            return None

    def version(self, key: str) -> str | None:
        obstore, client = self._client("head", key)
        try:
            with mapped_errors("head", f"{self.url}/{key}"):
                return str(obstore.head(client, key).get("e_tag"))
        except ObjectNotFoundError:
            return None

    def put(self, key: str, data: bytes, expect: str | None) -> str:
        obstore, client = self._client("put", key)
        mode: Any = "create" if expect is None else {"e_tag": expect}
        try:
            with mapped_errors("put", f"{self.url}/{key}"):
                try:
                    result = obstore.put(client, key, data, mode=mode)
                except Exception as exc:
                    # By name: a private copy of obstore (after fork) has exception classes of its own.
                    if type(exc).__name__ not in ("AlreadyExistsError", "PreconditionError"):
                        raise
                    raise VersionConflictError(f"{self.url}/{key} is not at version {expect}") from exc
        except ObjectNotFoundError as exc:  # If-Match on an object deleted meanwhile
            raise VersionConflictError(f"{self.url}/{key} no longer exists") from exc
        return str(result.get("e_tag"))

    def delete(self, key: str, expect: str) -> bool:
        if self.version(key) != expect:  # S3 has no conditional delete that every server honours
            return False
        obstore, client = self._client("delete", key)
        with mapped_errors("delete", f"{self.url}/{key}"):
            obstore.delete(client, key)
        return True

    def names(self, prefix: str) -> list[str]:
        return _listed(self._store, prefix)


class _CheckThenWrite:
    """Any other store: compare a digest of the content, then write (not atomic)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.url = store.url

    def read(self, key: str, limit: int | None = None) -> tuple[bytes, str] | None:
        try:
            if limit is not None and (size := run_sync(self._store.head, key).size) > limit:
                raise _too_large(f"{self.url}/{key}", size, limit)
            data = run_sync(self._store.get, key)
        except ObjectNotFoundError:
            return None
        return data, hashlib.sha256(data).hexdigest()

    def version(self, key: str) -> str | None:
        found = self.read(key)
        return None if found is None else found[1]

    def put(self, key: str, data: bytes, expect: str | None) -> str:
        current = self.version(key)
        if current != expect:
            raise VersionConflictError(f"{self.url}/{key} is at version {current}, not {expect}")
        run_sync(self._store.put, key, data)
        return hashlib.sha256(data).hexdigest()

    def delete(self, key: str, expect: str) -> bool:
        if self.version(key) != expect:
            return False
        run_sync(self._store.delete, key)
        return True

    def names(self, prefix: str) -> list[str]:
        return _listed(self._store, prefix)
