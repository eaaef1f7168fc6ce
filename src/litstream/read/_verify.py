"""Checking chunk checksums on read (datasets written with ``optimize(..., checksum=...)``).

A chunk held in memory (read straight from a remote store) is checked every time it is fetched. A chunk
file (local dataset, or a download in the chunk cache) is checked on its first open in this process and
again whenever the file is replaced (a new download: another inode or modification time), not on every
read. Random access by range reads to a remote store (``ds[i]`` on uncompressed data) reads too little of a
chunk to check it; local random access checks the whole file once.
"""

from __future__ import annotations

import mmap
import os
import threading
from typing import TYPE_CHECKING, Any

from ..format._checksum import CHECKSUM_KEY, verify_chunk

if TYPE_CHECKING:
    from pathlib import Path

    from ..format._index import ChunkInfo

__all__ = ["check_chunk", "check_chunk_file", "has_checksum"]

_checked: set[tuple[str, int, int, int, int]] = set()  # (path, device, inode, size, mtime_ns) found intact
_lock = threading.Lock()


def has_checksum(info: ChunkInfo) -> bool:
    """Whether ``index.json`` records a checksum for this chunk (cheap; the value is validated on check)."""
    return CHECKSUM_KEY in info.extra


def _identity(path: Path) -> tuple[str, int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:  # evicted or replaced meanwhile: check the bytes in hand, remember nothing
        return None
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def check_chunk(data: bytes | mmap.mmap | memoryview, info: ChunkInfo, path: Path | None, where: str) -> None:
    """Verify one chunk's stored bytes, unless ``path`` (the file they came from) was found intact before.

    Blocking (hashes up to the whole chunk): run it in a worker thread from async code.

    Raises:
        FormatError: the checksum differs, naming the chunk (see :func:`~litstream.format._checksum.verify_chunk`).
    """
    key = _identity(path) if path is not None else None
    if key is not None:
        with _lock:
            if key in _checked:
                return
    verify_chunk(data, info, where=where)
    if key is not None:
        with _lock:
            _checked.add(key)


def check_chunk_file(path: Path, info: ChunkInfo) -> None:
    """Verify a local chunk file (mapped, not read into memory) once per process and file version.

    Raises:
        FormatError: the checksum differs. FileNotFoundError / OSError: the file cannot be opened.
    """
    key = _identity(path)
    if key is not None:
        with _lock:
            if key in _checked:
                return
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data: Any = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) if size else b""
    try:
        check_chunk(data, info, path, str(path))
    finally:
        if isinstance(data, mmap.mmap):
            data.close()
