"""How a chunk download lays out its requests and its file (both chosen to cost less CPU, bench/remote_cpu.py).

* The ranged GETs end on multiples of the piece size, also after the short first GET of a chunk read while
  it downloads (the second GET is the shorter one): SeaweedFS spent ~20 % more CPU serving the same bytes
  in ranges shifted by the first GET's length. Checked on the requests a real server receives (the
  loopback proxy of ``tests/request_counter.py``), and on the bytes written.
* The temporary file has its full length and its disk blocks reserved before the first byte is written
  (``posix_fallocate``; filling a sparse file's holes cost more kernel time); a full disk fails the
  download at once with a clear error and leaves no file; a file system that refuses ``fallocate`` gets a
  sparse file, as before.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING, Any

import pytest
from obstore.store import MemoryStore
from storage_backends import unique

from litstream import StorageError
from litstream.storage._memory_fetch import MemoryFetcher
from litstream.storage._obstore import ObstoreStore
from litstream.storage._ordered_fetch import spans as piece_spans
from litstream.storage._progress import Progress
from litstream.storage._resolver import store_for
from litstream.storage._transfer import Downloader
from request_counter import RequestCounter

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

pytestmark = pytest.mark.anyio

KiB = 1024
PAYLOAD = bytes(range(251)) * 1200  # 301,200 bytes: four whole 64 KiB pieces and a short fifth


def test_spans_end_on_piece_multiples_after_a_short_first_span() -> None:
    MiB = 1024 * KiB
    assert piece_spans(20 * MiB, 8 * MiB, MiB) == [(0, MiB), (MiB, 7 * MiB), (8 * MiB, 8 * MiB), (16 * MiB, 4 * MiB)]
    assert piece_spans(20 * MiB, 8 * MiB, None) == [(0, 8 * MiB), (8 * MiB, 8 * MiB), (16 * MiB, 4 * MiB)]
    assert piece_spans(5 * MiB, 8 * MiB, MiB) == [(0, 5 * MiB)]  # one piece: one whole GET
    assert piece_spans(100, 16, MiB) == [(s, min(16, 100 - s)) for s in range(0, 100, 16)]  # piece <= first piece
    for size, piece, first in [(20 * MiB, 8 * MiB, MiB), (8 * MiB + 1, 8 * MiB, MiB), (999, 10, None)]:
        spans = piece_spans(size, piece, first)
        assert [s for s, _ in spans[1:]] == [s + n for s, n in spans[:-1]]  # contiguous, nothing twice
        assert sum(n for _, n in spans) == size


@pytest.mark.parametrize("cached", [True, False], ids=["Downloader", "MemoryFetcher"])
@pytest.mark.parametrize("streamed", [True, False])
async def test_s3_ranged_gets_are_aligned_to_the_piece_size(
    s3_server: S3Server, tmp_path: Path, streamed: bool, cached: bool
) -> None:
    url = f"s3://{s3_server.bucket}/{unique()}"
    await store_for(url, s3_server.options()).put("chunk-0-0.bin", PAYLOAD)
    with RequestCounter(s3_server.endpoint) as counter:
        store = store_for(url, {**s3_server.options(), "endpoint_url": counter.url})
        tuning = {"max_concurrency": 1, "piece_size": 64 * KiB, "first_piece": 16 * KiB}
        progress = Progress(len(PAYLOAD)) if streamed else None
        if cached:
            path = await Downloader(store, tmp_path, **tuning).fetch(
                "chunk-0-0.bin", size=len(PAYLOAD), progress=progress
            )
            got = path.read_bytes()
        else:  # the cacheless reader's fetcher: the same requests, into memory
            got = bytes(
                await MemoryFetcher(store, **tuning).fetch("chunk-0-0.bin", size=len(PAYLOAD), progress=progress)
            )
        assert counter.errors == []
    assert got == PAYLOAD
    last = len(PAYLOAD) - 1
    expected = ["bytes=0-16383", "bytes=16384-65535"] if streamed else ["bytes=0-65535"]
    expected += ["bytes=65536-131071", "bytes=131072-196607", "bytes=196608-262143", f"bytes=262144-{last}"]
    assert [r.range for r in counter.requests if r.method == "GET"] == expected


class _CountingStore(ObstoreStore):
    """An obstore-backed store that records the objects :meth:`get_into_file` was asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gets: list[str] = []

    async def get_into_file(self, path: str, file: Path, start: int = 0, length: int | None = None) -> int:
        self.gets.append(path)
        return await super().get_into_file(path, file, start, length)


class _Opened(Progress):
    """Records the temporary file's length and allocated bytes when the download opens it."""

    seen: tuple[int, int] | None = None

    def opened(self, path: Path) -> None:
        info = path.stat()
        self.seen = (info.st_size, info.st_blocks * 512)
        super().opened(path)


async def _download_opened(tmp_path: Path) -> tuple[int, int]:
    """Download :data:`PAYLOAD` from memory into ``tmp_path``; check the bytes; return what :class:`_Opened` saw."""
    store = ObstoreStore(MemoryStore(), url="memory://")
    await store.put("x.bin", PAYLOAD)
    progress = _Opened(len(PAYLOAD))
    path = await Downloader(store, tmp_path, piece_size=64 * KiB).fetch("x.bin", size=len(PAYLOAD), progress=progress)
    assert path.read_bytes() == PAYLOAD
    assert progress.seen is not None
    return progress.seen


@pytest.mark.skipif(not hasattr(os, "posix_fallocate"), reason="no posix_fallocate on this platform")
async def test_the_temporary_file_is_allocated_before_any_byte_is_written(tmp_path: Path) -> None:
    length, allocated = await _download_opened(tmp_path)
    assert length == len(PAYLOAD)
    assert allocated >= len(PAYLOAD)  # a sparse file would have (almost) no blocks yet


async def test_a_full_disk_fails_the_download_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)  # an OS fault no real disk gives on cue
    store = _CountingStore(MemoryStore(), url="memory://")
    await store.put("x.bin", PAYLOAD)
    downloader = Downloader(store, tmp_path / "cache", piece_size=64 * KiB)
    with pytest.raises(StorageError, match=rf"no room for {len(PAYLOAD)} bytes in .*cache.*free disk space"):
        await downloader.fetch("x.bin", size=len(PAYLOAD), progress=Progress(len(PAYLOAD)))
    assert store.gets == []
    assert os.listdir(tmp_path / "cache") == []  # no temporary file left


async def test_a_file_system_without_fallocate_gets_a_sparse_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", refused, raising=False)
    length, _ = await _download_opened(tmp_path)
    assert length == len(PAYLOAD)  # full length (ftruncate) for the reader that maps it
