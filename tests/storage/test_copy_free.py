"""Copy-free transfer paths: ``ObstoreStore.get_range_buffer``, unhedged chunk downloads, ``put_parts``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from obstore.store import MemoryStore

from litstream.format._chunk import chunk_header, pack_chunk
from litstream.format._index import ChunkInfo, DatasetConfig, Index
from litstream.read.cache._source_cache import CacheSettings, _open_cache
from litstream.storage._hedged import HedgedStore
from litstream.storage._local import LocalFileStore
from litstream.storage._obstore import ObstoreStore
from litstream.storage._transfer import Downloader

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

DATA = bytes(range(256)) * 40


async def test_get_range_buffer_equals_get_range() -> None:
    store = ObstoreStore(MemoryStore(), url="memory://")
    await store.put("x.bin", DATA)
    for start, length in ((0, 10), (1000, 3000), (10_239, 1), (5, 0)):
        buffer = await store.get_range_buffer("x.bin", start, length)
        assert bytes(buffer) == await store.get_range("x.bin", start, length) == DATA[start : start + length]


async def test_downloader_pieces_use_the_buffer_and_match(tmp_path: Path) -> None:
    store = ObstoreStore(MemoryStore(), url="memory://")
    await store.put("x.bin", DATA)
    downloader = Downloader(store, tmp_path, piece_size=1000)
    path = await downloader.fetch("x.bin", size=len(DATA))
    assert path.read_bytes() == DATA


def test_chunk_downloads_bypass_hedging(tmp_path: Path) -> None:
    inner = ObstoreStore(MemoryStore(), url="memory://bench")
    index = Index(chunks=(ChunkInfo("chunk-0-0.bin", 1, 8),), config=DatasetConfig(("int",), None))
    _, downloader = _open_cache(HedgedStore(inner), index, CacheSettings(str(tmp_path)))
    assert downloader._store is inner


async def test_local_put_parts_writes_the_concatenation_atomically(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path)
    parts = [bytes([i % 251]) * (i % 7) for i in range(3000)]  # more parts than one writev takes, some empty
    await store.put_parts("d/chunk.bin", parts)
    assert (tmp_path / "d" / "chunk.bin").read_bytes() == b"".join(parts)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["chunk.bin"]  # no temporary file left
    await store.put_parts("d/chunk.bin", [b"new"])
    assert (tmp_path / "d" / "chunk.bin").read_bytes() == b"new"


def test_chunk_header_plus_items_is_pack_chunk() -> None:
    items = [b"a" * i for i in range(50)]
    assert chunk_header(items) + b"".join(items) == pack_chunk(items)
