"""Chunk downloads stream into the cache file through small buffers (``ObstoreStore.get_into_file``).

Reading whole 8 MiB pieces into one buffer each made a remote reader's resident memory grow with the
bytes downloaded (glibc keeps the freed buffers in the arenas of the many worker threads). What is
checked here is the cause, not an RSS figure: no buffer written into the cache file is anywhere near
a piece's size, whatever the piece size, and the file still holds exactly the object's bytes.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

import pytest
from obstore.store import MemoryStore
from storage_backends import unique

from litstream import ObjectNotFoundError, StorageError
from litstream.storage._obstore import ObstoreStore
from litstream.storage._obstore_stream import STREAM_BUFFER
from litstream.storage._resolver import store_for
from litstream.storage._transfer import Downloader

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

pytestmark = pytest.mark.anyio

MiB = 2**20
DATA = bytes(range(251)) * 4099  # ~1 MiB, not a multiple of any buffer size


@pytest.fixture
def pwrite_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every buffer passed to ``os.pwrite`` during the test (any thread)."""
    sizes: list[int] = []
    lock = threading.Lock()
    real = os.pwrite

    def recording(fd: int, data: bytes | memoryview, offset: int) -> int:
        with lock:
            sizes.append(len(data))
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", recording)
    return sizes


async def test_get_into_file_writes_the_range_at_its_offsets(tmp_path: Path) -> None:
    store = ObstoreStore(MemoryStore(), url="memory://")
    await store.put("x.bin", DATA)
    target = tmp_path / "x.part"
    target.write_bytes(b"\0" * len(DATA))
    assert await store.get_into_file("x.bin", target, 1000, 300_000) == 300_000
    assert await store.get_into_file("x.bin", target, 500_000, 0) == 0
    written = target.read_bytes()
    assert written[1000:301_000] == DATA[1000:301_000]
    assert written[:1000] == b"\0" * 1000
    assert written[301_000:] == b"\0" * (len(DATA) - 301_000)
    assert await store.get_into_file("x.bin", target) == len(DATA)  # the whole object
    assert target.read_bytes() == DATA


async def test_get_into_file_errors_name_what_failed(tmp_path: Path) -> None:
    store = ObstoreStore(MemoryStore(), url="memory://m")
    await store.put("x.bin", DATA)
    with pytest.raises(ObjectNotFoundError, match=r"missing\.bin"):
        await store.get_into_file("missing.bin", tmp_path / "any", 0, 10)
    with pytest.raises(StorageError, match=r"cannot open .*absent\.part to write memory://m/x\.bin") as info:
        await store.get_into_file("x.bin", tmp_path / "absent.part", 0, 10)  # never created by the store
    assert not isinstance(info.value, ObjectNotFoundError)
    assert not (tmp_path / "absent.part").exists()


async def test_downloader_streams_pieces_and_whole_objects(tmp_path: Path, pwrite_sizes: list[int]) -> None:
    store = ObstoreStore(MemoryStore(), url="memory://")
    big = DATA * 3
    await store.put("x.bin", big)
    await store.put("small.bin", DATA[:5000])
    downloader = Downloader(store, tmp_path, piece_size=len(big) // 2 + 1)
    assert (await downloader.fetch("x.bin", size=len(big))).read_bytes() == big
    assert (await downloader.fetch("small.bin", size=5000)).read_bytes() == DATA[:5000]  # whole-object GET
    assert sum(pwrite_sizes) == len(big) + 5000  # each byte written once


async def test_downloader_refuses_a_short_or_long_object_when_streaming(tmp_path: Path) -> None:
    store = ObstoreStore(MemoryStore(), url="memory://m")
    await store.put("x.bin", DATA)
    downloader = Downloader(store, tmp_path, piece_size=MiB)
    with pytest.raises(StorageError, match=rf"expected {len(DATA) + 7} bytes at offset 0, got {len(DATA)}"):
        await downloader.fetch("x.bin", size=len(DATA) + 7)  # fetched whole: the object is shorter
    with pytest.raises(StorageError, match=rf"expected {len(DATA) - 7} bytes at offset 0, got {len(DATA)}"):
        await downloader.fetch("x.bin", size=len(DATA) - 7)  # fetched whole: the object is longer
    assert os.listdir(tmp_path) == []  # no partial or temporary file left


async def test_s3_chunk_download_never_holds_a_piece_sized_buffer(
    s3_server: S3Server, tmp_path: Path, pwrite_sizes: list[int]
) -> None:
    url = f"s3://{s3_server.bucket}/{unique()}"
    store = store_for(url, s3_server.options())
    payload = (DATA * 10)[: 9 * MiB + 12345]  # two 4 MiB pieces and a short third one
    await store.put("chunk-0-0.bin", payload)
    pwrite_sizes.clear()
    downloader = Downloader(store, tmp_path, piece_size=4 * MiB)
    path = await downloader.fetch("chunk-0-0.bin", size=len(payload))
    assert path.read_bytes() == payload
    assert sum(pwrite_sizes) == len(payload)
    # obstore hands over buffers of at least STREAM_BUFFER, or one received frame when larger
    # (at most ~400 KiB here); a piece read in one buffer would be written as 4 MiB at once
    assert STREAM_BUFFER <= max(pwrite_sizes) <= 1 * MiB
    assert len(pwrite_sizes) >= len(payload) // MiB
