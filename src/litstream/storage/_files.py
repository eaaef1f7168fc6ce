"""Objects that are plain files on this machine: the one capability that lets readers map instead of copy.

A store whose objects live as files on a local file system says so with a ``local_path(key)`` method
(the :class:`LocalFiles` protocol): the absolute path of ``key``'s file, or ``None`` when that object is
not a local file. :class:`~litstream.LocalFileStore` implements it; a store that wraps another
(:class:`~litstream.HedgedStore`, or a user's own wrapper) forwards it. Nothing outside ``storage/``
tests a store's class or reaches into its root: readers ask :func:`local_path`, which answers ``None``
for a store without the method, and so keep their fast paths for any store that forwards it:

* a whole uncompressed chunk is memory-mapped (:func:`map_object`), never copied;
* ``index.json`` is read without an event loop, so ``ds[i]`` and ``len(ds)`` open the dataset in the
  calling thread;
* one item (``ds[i]``) is read in one worker-thread call (:func:`read_span_at`).

The key ``""`` names the store's root directory (for housekeeping such as removing stale temporaries).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import anyio.to_thread

from .._core._errors import FormatError, LitstreamError, ObjectNotFoundError, StorageError
from ._base import mapped_errors
from ._safe_files import open_regular

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

__all__ = [
    "LocalFiles",
    "local_path",
    "map_file",
    "map_object",
    "read_span",
    "read_span_at",
    "remove_empty_folder",
    "remove_stale_temporaries",
    "remove_stale_temporaries_below",
]


@runtime_checkable
class LocalFiles(Protocol):
    """A store whose objects are files on this machine (see the module docstring)."""

    def local_path(self, key: str) -> Path | None:
        """The absolute path of ``key``'s file (``""``: the root directory), or ``None`` when the object
        is not a local file. The file need not exist. Raises ConfigurationError for a key that would
        leave the root, as every store method does."""
        ...


def local_path(store: object, key: str) -> Path | None:
    """``store.local_path(key)`` when the store has that capability, else ``None``.

    Raises:
        ConfigurationError: the store refuses ``key`` (it would leave the root).
    """
    method = getattr(store, "local_path", None)
    if method is None:
        return None
    path: Path | None = method(key)
    return path


@contextlib.contextmanager
def _mapped_sync(operation: str, path: Path) -> Iterator[None]:
    """:func:`~litstream.storage._base.mapped_errors` for a local file, usable without an event loop."""
    try:
        yield
    except LitstreamError:  # already ours (a refused link or special file)
        raise
    except FileNotFoundError as exc:
        raise ObjectNotFoundError(f"{operation}: {path} does not exist") from exc
    except OSError as exc:
        raise StorageError(f"{operation} failed for {path}: {exc}") from exc


def map_file(path: str | os.PathLike[str]) -> bytes | mmap.mmap:
    """The whole file as a read-only ``mmap`` (``b""`` when empty), with read-ahead requested.

    No copy is made: items are decoded straight from the mapping. Pages are not mapped into this
    process yet (so a chunk fetched ahead costs no memory); ``populate`` (``read/source/_source.py``) maps them
    when a reader starts on the chunk. The mapping stays valid if the file is then deleted or evicted.
    """
    with os.fdopen(open_regular(path), "rb") as f:  # a regular file, never a FIFO or device
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        mapped = mmap.mmap(f.fileno(), size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    with contextlib.suppress(OSError, AttributeError):
        mapped.madvise(mmap.MADV_WILLNEED)
    return mapped


def map_object(store: object, key: str) -> tuple[bytes | mmap.mmap, Path] | None:
    """Object ``key`` of ``store`` memory-mapped read-only, with its path; ``None`` when the store does not
    keep it as a local file (read it with ``store.get``). Runs in the calling thread: open and mmap take
    microseconds and read nothing, with or without an event loop.

    Raises:
        ObjectNotFoundError: the file does not exist. StorageError: it cannot be opened or mapped.
    """
    path = local_path(store, key)
    if path is None:
        return None
    with _mapped_sync("get", path):
        return map_file(path), path


def read_span(path: Path, pointer: int) -> bytes:
    """Read the two uint32 little-endian offsets ``[begin, end)`` stored at byte ``pointer`` of a chunk
    file, then the bytes between them (one item of a chunk), in the calling thread.

    Raises:
        OSError: the file is missing or shorter than ``pointer + 8``.
        FormatError: the offsets read point outside the file.
    """
    with os.fdopen(open_regular(path), "rb") as f:
        span = os.pread(f.fileno(), 8, pointer)
        if len(span) != 8:
            raise OSError(f"{path} ends before byte {pointer + 8}")
        begin, end = int.from_bytes(span[:4], "little"), int.from_bytes(span[4:], "little")
        size = os.fstat(f.fileno()).st_size  # offsets come from the file: read no further than its end
        if begin > end or end > size:
            raise FormatError(
                f"{path}: the item at offset {pointer} spans bytes [{begin}, {end}) but the file "
                f"holds {size} bytes; the chunk is damaged — re-run optimize"
            )
        return os.pread(f.fileno(), end - begin, begin)


async def read_span_at(path: Path, pointer: int) -> bytes:
    """:func:`read_span` in one worker-thread call, its errors mapped (for ``ds[i]`` on a local chunk).

    Raises:
        ObjectNotFoundError: the file does not exist. StorageError: it is shorter than ``pointer + 8``.
        FormatError: the offsets read point outside the file.
    """
    with mapped_errors("get_range", str(path)):
        return await anyio.to_thread.run_sync(read_span, path, pointer)


def remove_stale_temporaries(store: object, folders: Sequence[str]) -> None:
    """Delete the hidden ``.name.tmp.*`` files that a killed local write left in ``folders`` (keys of
    directories; ``""`` is the root). A no-op for a store without local files. Blocking I/O."""
    for folder in folders:
        directory = local_path(store, folder)
        if directory is None:
            return
        for path in directory.glob(".*.tmp.*"):
            path.unlink(missing_ok=True)


_TEMPORARY = re.compile(r"\..+\.tmp\.\d+\.[0-9a-f]{8}")  # LocalFileStore's ``.name.tmp.<pid>.<hex>``


def remove_stale_temporaries_below(store: object) -> None:
    """Delete the hidden ``.name.tmp.*`` files that killed local writes left anywhere below the store's root
    (``map`` writes into sub-folders). Symbolic links are not followed. A no-op for a store without local
    files. Blocking I/O; call it only while no write of this output can be in flight (the run holds the
    writer lock and its workers have ended)."""
    root = local_path(store, "")
    if root is None:
        return
    for folder, _, names in os.walk(root):
        for name in names:
            if _TEMPORARY.fullmatch(name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, name))


def remove_empty_folder(store: object, folder: str) -> None:
    """Remove the directory ``folder`` (a key) of a store with local files once it holds nothing (a local
    directory outlives its files; an object store has no folders). Blocking I/O; never raises."""
    with contextlib.suppress(OSError):
        directory = local_path(store, folder)
        if directory is not None:
            directory.rmdir()
