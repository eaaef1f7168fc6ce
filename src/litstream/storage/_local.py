"""A local directory as a Store, through ``os`` calls run in worker threads.

It holds no runtime and no connection, so it is safe in forked DataLoader workers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from functools import partial
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from .._core._crash import crash_point
from .._core._errors import ConfigurationError, ObjectNotFoundError
from ._base import ObjectMeta, loop_limiter, mapped_errors, put_size
from ._files import read_span
from ._keys import check_key
from ._safe_files import contained, open_regular, read_regular

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._base import PutData

__all__ = ["LocalFileStore"]

_IOV_MAX = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)

T = TypeVar("T")


class LocalFileStore:
    """A local directory as a :class:`~litstream.Store`.

    Writes go to a temporary name beside the target and are renamed into place, so readers see the old
    file or the new one, never a partial file.

    Reads open regular files only (a FIFO, device or socket is refused, never waited on) and follow a
    symbolic link only when its target lies inside ``root`` (``storage/_safe_files.py``, docs/security.md).

    Args:
        root: The directory. It is created on the first ``put`` if missing.
        max_threads: Concurrent blocking file operations (default 8).
        follow_symlinks: Also follow symbolic links that lead out of ``root`` (default ``False``: such a
            file is refused with a ``StorageError`` naming it). Pass ``True`` only for a directory you
            laid out with links yourself, e.g. a Hugging Face cache snapshot.
    """

    def __init__(self, root: str | os.PathLike[str], *, max_threads: int = 8, follow_symlinks: bool = False) -> None:
        if not isinstance(follow_symlinks, bool):
            raise ConfigurationError(f"follow_symlinks must be True or False, got {follow_symlinks!r}")
        self._root = Path(root).absolute()
        self._max_threads = max_threads
        self._follow = follow_symlinks
        self._limiter_obj: tuple[object, anyio.CapacityLimiter] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_root": self._root, "_max_threads": self._max_threads, "_follow": self._follow, "_limiter_obj": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({"_follow": False, **state})

    def __repr__(self) -> str:
        return f"LocalFileStore({str(self._root)!r})"

    @property
    def root(self) -> Path:
        """The absolute directory this store reads and writes."""
        return self._root

    @property
    def url(self) -> str:
        return str(self._root)

    def local_path(self, key: str) -> Path:
        """The absolute path of ``key``'s file (``""``: the root directory); it need not exist. The
        capability readers use to map chunks instead of copying them (``storage/_files.py``).

        Raises:
            ConfigurationError: ``key`` would leave the root.
            StorageError: a symbolic link leads out of the root (without ``follow_symlinks=True``).
        """
        return self._root if key == "" else self._readable(key)

    def _limiter(self) -> anyio.CapacityLimiter:
        self._limiter_obj = loop_limiter(self._limiter_obj, self._max_threads)
        return self._limiter_obj[1]

    def _full(self, path: str) -> Path:
        return self._root / check_key(path, str(self._root))  # never outside the root, whatever the caller

    def _readable(self, path: str) -> Path:
        """The file to read for ``path``: inside the root after resolving links (``_safe_files.contained``)."""
        return contained(self._root, self._full(path), follow_symlinks=self._follow)

    async def _run(self, operation: str, path: str, fn: Callable[[], T]) -> T:
        with mapped_errors(operation, str(self._root / path)):  # for the message; fn checked the key
            return await anyio.to_thread.run_sync(fn, limiter=self._limiter())

    async def get(self, path: str) -> bytes:
        """See :meth:`litstream.Store.get`."""
        return await self._run("get", path, partial(read_regular, self._readable(path)))

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        """See :meth:`litstream.Store.get_range`; a ``start`` past the end gives ``b""``."""
        return (await self.get_ranges(path, [start], [length]))[0]

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """See :meth:`litstream.Store.get_ranges`."""
        full = self._readable(path)

        def read() -> list[bytes]:
            with os.fdopen(open_regular(full), "rb") as f:
                size = os.fstat(f.fileno()).st_size  # never allocate more than the file holds
                return [
                    os.pread(f.fileno(), max(0, min(length, size - start)), start) if start < size else b""
                    for start, length in zip(starts, lengths, strict=True)
                ]

        return await self._run("get_range", path, read)

    async def get_span_at(self, path: str, pointer: int) -> bytes:
        """Read the two uint32 little-endian offsets ``[begin, end)`` stored at byte ``pointer``, then
        the bytes between them, in one worker-thread call (a chunk item's lookup, for ``ds[i]``).

        Raises:
            ObjectNotFoundError: the file does not exist. StorageError: it is shorter than ``pointer + 8``.
            FormatError: the offsets read point outside the file.
        """
        full = self._readable(path)
        return await self._run("get_range", path, partial(read_span, full, pointer))

    async def put(self, path: str, data: PutData) -> None:
        """See :meth:`litstream.Store.put`; a path ``data`` is copied, never moved."""
        full = self._full(path)
        put_size(data)  # a missing source file fails here, before anything is created

        def write() -> None:
            full.parent.mkdir(parents=True, exist_ok=True)
            tmp = full.with_name(f".{full.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
            try:
                if isinstance(data, os.PathLike):
                    shutil.copyfile(data, tmp)
                else:
                    with open(tmp, "wb") as f:
                        f.write(data)
                crash_point("store:written")
                os.replace(tmp, full)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise

        await self._run("put", path, write)

    async def put_parts(self, path: str, parts: Sequence[bytes | memoryview]) -> None:
        """Write the concatenation of ``parts`` to ``path``, atomically like :meth:`put`, without joining
        them in memory first (``os.writev``: the kernel copies each part straight into the file)."""
        full = self._full(path)

        def write() -> None:
            full.parent.mkdir(parents=True, exist_ok=True)
            tmp = full.with_name(f".{full.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
            try:
                with open(tmp, "wb") as f:
                    views = [memoryview(p).cast("B") for p in parts if len(p)]
                    i = 0
                    while i < len(views):
                        written = os.writev(f.fileno(), views[i : i + _IOV_MAX])
                        while written:  # skip what was written; a partly written view keeps its rest
                            if written >= len(views[i]):
                                written -= len(views[i])
                                i += 1
                            else:
                                views[i] = views[i][written:]
                                written = 0
                crash_point("store:written")  # the crash tests' "mid-chunk": a whole temporary, not yet renamed
                os.replace(tmp, full)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise

        await self._run("put", path, write)

    async def head(self, path: str) -> ObjectMeta:
        """See :meth:`litstream.Store.head`."""
        full = self._readable(path)
        stat = await self._run("head", path, full.stat)
        if not S_ISREG(stat.st_mode):
            raise ObjectNotFoundError(f"head: {full} is not a regular file")
        return ObjectMeta(path, stat.st_size)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        """See :meth:`litstream.Store.list`; hidden files (``.name``, temporary writes) are left out."""
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
        """See :meth:`litstream.Store.delete`."""
        await self._run("delete", path, partial(self._full(path).unlink, missing_ok=True))
