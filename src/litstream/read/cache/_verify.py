"""Checking chunk checksums on read (every dataset litstream writes records one unless ``checksum=None``).

A chunk held in memory (read straight from a remote store) is checked every time it is fetched. A chunk
file (local dataset, or a download in the chunk cache) is checked on its first open in this process and
again whenever the file is replaced (a new download: another inode or modification time), not on every
read. A local dataset read in place (``persistent=True``) is not hashed again by every new process either: once a
file is found intact, a record of it goes into the cache root (``<cache root>/verified/``: the file's
device, inode, size, modification and status-change times in nanoseconds, and the digest ``index.json``
records), and a later process that finds the file exactly so trusts it. Any write to the file, or a
``touch``/``utime`` that hides one, changes its status-change time (the kernel sets it; no call can set it
back), so a flipped byte is still caught on the next open; a different recorded digest checks it again too.
What the record cannot see is corruption that never went through the file system (a failing disk); the
chunk cache (downloads) keeps the check in every new process for that reason, and deleting
``<cache root>/verified/`` (``litstream cache clear``) makes the next read check everything again.

Random access by range reads to a remote store (``ds[i]`` on uncompressed data) reads too little of a
chunk to check it; local random access checks the whole file once. What a mismatch leads to (a cached copy
dropped and downloaded again, a remote chunk fetched again) is decided by the callers in ``_source*.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import threading
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ..._core._errors import ChecksumError, ConfigurationError, ObjectNotFoundError, StorageError
from ...format._checksum import CHECKSUM_KEY, verify_chunk
from ...storage._cache_dirs import default_cache_root
from ...storage._safe_files import UnsafeFileError, regular_size

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from ...format._index import ChunkInfo
    from ...storage._store import Store

__all__ = [
    "check_chunk",
    "check_chunk_file",
    "check_local_file",
    "drop_copy",
    "file_id",
    "get_checked",
    "has_checksum",
]

_checked: set[tuple[str, int, int, int, int]] = set()  # (path, device, inode, size, mtime_ns) found intact
_lock = threading.Lock()
_RECORDS = "verified"


def _record(path: Path, info: ChunkInfo) -> tuple[Path, str] | None:
    """Where the persistent record of ``path`` lives and what it must say for the file as it is now."""
    try:
        st = os.stat(path)
        root = default_cache_root()
    except (OSError, ConfigurationError):
        return None
    digest = str(info.extra.get(CHECKSUM_KEY))
    name = hashlib.blake2b(f"{os.path.abspath(path)}|{st.st_dev}|{st.st_ino}".encode(), digest_size=16).hexdigest()
    state = f"{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {digest}\n"
    return root / _RECORDS / name[:2] / name, state


def _recorded(record: tuple[Path, str] | None) -> bool:
    if record is None:
        return False
    try:
        with open(record[0], encoding="ascii") as f:
            return f.read(256) == record[1]
    except (OSError, ValueError):
        return False


def _remember(record: tuple[Path, str] | None) -> None:
    """Write the record atomically (a new file renamed into place); a cache root that cannot be written is
    simply not used."""
    if record is None:
        return
    path, state = record
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(state, encoding="ascii")
        os.replace(tmp, path)


def has_checksum(info: ChunkInfo) -> bool:
    """Whether ``index.json`` records a checksum for this chunk (cheap; the value is validated on check)."""
    return CHECKSUM_KEY in info.extra


def _identity(path: Path) -> tuple[str, int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:  # evicted or replaced meanwhile: check the bytes in hand, remember nothing
        return None
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


_WINDOW = 8 * 2**20  # bytes of a mapped chunk file hashed at a time
_MADV_POPULATE_READ = 22  # Linux >= 5.14 (see read/_pages.populate); older kernels fall back to page faults


def _windows(data: mmap.mmap) -> Iterator[memoryview]:
    """The mapping in ``_WINDOW``-byte pieces, each mapped in one call before it is hashed (no page faults) and
    unmapped from this process after (it stays in the page cache), so checking a chunk adds no resident memory."""
    view = memoryview(data)
    try:
        for start in range(0, len(view), _WINDOW):
            length = min(_WINDOW, len(view) - start)
            with contextlib.suppress(OSError, ValueError):
                data.madvise(_MADV_POPULATE_READ, start, length)
            piece = view[start : start + length]
            yield piece
            piece.release()
            with contextlib.suppress(OSError, ValueError):
                data.madvise(mmap.MADV_DONTNEED, start, length)
    finally:
        view.release()


def check_chunk(
    data: bytes | mmap.mmap | memoryview,
    info: ChunkInfo,
    path: Path | None,
    where: str,
    fix: str | None = None,
    *,
    persistent: bool = False,
) -> None:
    """Verify one chunk's stored bytes, unless ``path`` (the file they came from) was found intact before.

    Blocking (hashes up to the whole chunk, about 20 GB/s for the default ``xxh3``): run it in a worker thread
    from async code. ``fix`` replaces the message's default advice. ``persistent``: ``path`` is a local
    dataset's own file, found intact by an earlier process if its record says so (module docstring).

    Raises:
        ChecksumError: the checksum differs, naming the chunk (see
            :func:`~litstream.format._checksum.verify_chunk`). FormatError: a malformed recorded checksum.
    """
    key = _identity(path) if path is not None else None
    if key is not None:
        with _lock:
            if key in _checked:
                return
    record = _record(path, info) if persistent and path is not None else None
    if not _recorded(record):
        parts = _windows(data) if isinstance(data, mmap.mmap) else None
        if fix is None:
            verify_chunk(data, info, where=where, parts=parts)
        else:
            verify_chunk(data, info, where=where, fix=fix, parts=parts)
        _remember(record)
    if key is not None:
        with _lock:
            _checked.add(key)


def check_chunk_file(path: Path, info: ChunkInfo, *, persistent: bool = False) -> None:
    """Verify a local chunk file (mapped, not read into memory) once per process and file version
    (``persistent``: see :func:`check_chunk`).

    Raises:
        FormatError: the checksum differs. FileNotFoundError / OSError: the file cannot be opened.
    """
    key = _identity(path)
    if key is not None:
        with _lock:
            if key in _checked:
                return
    if persistent and _recorded(_record(path, info)):
        if key is not None:
            with _lock:
                _checked.add(key)
        return
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data: Any = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) if size else b""
    try:
        check_chunk(data, info, path, str(path), persistent=persistent)
    finally:
        if isinstance(data, mmap.mmap):
            data.close()


async def check_local_file(path: Path, info: ChunkInfo, *, persistent: bool) -> None:
    """:func:`check_chunk_file` in a worker thread, for a random read of a local chunk file; never hashes a
    special file (a FIFO would block).

    Raises:
        ObjectNotFoundError: no file at ``path``. StorageError: it cannot be read. UnsafeFileError: a special file.
        FormatError: the checksum differs.
    """
    try:
        await anyio.to_thread.run_sync(regular_size, path)
        await anyio.to_thread.run_sync(partial(check_chunk_file, path, info, persistent=persistent))
    except UnsafeFileError:  # a refused special file: already ours
        raise
    except FileNotFoundError as exc:
        raise ObjectNotFoundError(f"get: {path} does not exist") from exc
    except OSError as exc:
        raise StorageError(f"get failed for {path}: {exc}") from exc


def file_id(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path`` now, ``None`` if there is none."""
    key = _identity(path)
    return None if key is None else (key[1], key[2])


def drop_copy(path: Path, data: object, mapped: tuple[int, int] | None) -> None:
    """Delete a corrupt cached chunk file (after closing ``data``, its mapping), so no later read serves it.

    Only the file that was mapped (``mapped``: its :func:`file_id`) is deleted: if another process replaced it
    meanwhile (a fresh download renamed into place), the new file stays. Holds and lock files are left to the
    cache.
    """
    if isinstance(data, mmap.mmap):
        data.close()
    if mapped is not None and file_id(path) == mapped:
        path.unlink(missing_ok=True)


async def get_checked(store: Store, info: ChunkInfo) -> bytes:
    """Chunk ``info`` read whole from ``store`` into memory and verified; read once more if it does not match
    (a transfer that went wrong), then :class:`~litstream.ChecksumError` naming the chunk.
    """
    where = f"{store.url}/{info.filename}"
    for attempt in range(2):
        data = await store.get(info.filename)
        try:
            await anyio.to_thread.run_sync(check_chunk, data, info, None, where)
            return data
        except ChecksumError:
            if attempt:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
