"""Copying an obstore GET's answer as it arrives, in pieces of :data:`STREAM_BUFFER`: into a file, or a buffer.

Both run in a worker thread (``ObstoreStore._call``). Pieces of about 256 KiB, never a buffer of the whole
range: glibc keeps freed multi-MiB buffers in the malloc arena of the thread that allocated them, so whole
8 MiB pieces made a reader's resident memory grow with the bytes it had downloaded.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .._core._errors import StorageError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["STREAM_BUFFER", "stream_into_buffer", "stream_into_file"]

STREAM_BUFFER = 256 * 1024
"""Bytes per piece of a streamed GET."""


def stream_into_file(result: Any, file: Path, start: int, url: str) -> int:
    """Write obstore's ``GetResult`` ``result`` at offset ``start`` of the existing file ``file``; return the
    bytes written. ``file`` is opened by its path and never created.

    Raises:
        StorageError: ``file`` cannot be opened or written (``url`` and ``file`` named in the message).
    """
    try:
        fd = os.open(file, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise StorageError(f"cannot open {file} to write {url} into it: {exc}") from exc
    offset = start
    try:
        for buffer in result.stream(min_chunk_size=STREAM_BUFFER):
            view = memoryview(buffer)
            while view:
                written = os.pwrite(fd, view, offset)
                view = view[written:]
                offset += written
    except OSError as exc:
        raise StorageError(f"writing {url} into {file} failed: {exc}") from exc
    finally:
        os.close(fd)
    return offset - start


def stream_into_buffer(result: Any, buffer: memoryview) -> int:
    """Copy obstore's ``GetResult`` ``result`` into ``buffer`` from offset 0; return the bytes that arrived
    (those beyond ``len(buffer)`` are counted, not copied). NumPy copies without holding the GIL."""
    import numpy as np

    target = np.frombuffer(buffer, dtype=np.uint8)
    offset, room = 0, len(buffer)
    for piece in result.stream(min_chunk_size=STREAM_BUFFER):
        size = len(piece)
        if offset + size <= room:
            target[offset : offset + size] = np.frombuffer(piece, dtype=np.uint8)
        offset += size
    return offset
