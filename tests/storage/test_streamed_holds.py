"""A chunk read through the cache stays held while it is needed, and every hold is given back, however
the read ends.

* A streamed chunk's download may end (and give back its hold) before the reader has mapped the file, when
  the reader's thread is slow to run: the reader holds the chunk itself until it is mapped, so another
  process evicting the cache meanwhile cannot delete it under the reader.
* A read cancelled while its chunk downloads still gives back its holds (a hold never given back keeps the
  chunk out of eviction for the life of the process).

Each race is made certain, not left to timing: the reader's first ``map_file`` call (of the chunk cache the
test injects) waits until the download has given its hold back and has another process's eviction run right
then; the cancellations come from the store while a request is in flight.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import numpy as np
import pytest
from test_transfer import ScriptedStore

from dataset_files import data_files
from litstream import optimize
from litstream.read.cache._cache import ChunkCache
from litstream.read.cache._source_cache import CacheSettings
from litstream.read.engine._decode import work_batches
from litstream.read.engine._engine import ChunkWork, produce_chunks
from litstream.read.plan._pieces import ReadPlanArgs, plan_pieces
from litstream.read.source._source import DatasetSource

if TYPE_CHECKING:
    import mmap
    from pathlib import Path

pytestmark = pytest.mark.anyio

PIECE = 64 * 1024


def _sample(i: int) -> dict[str, Any]:
    return {"x": np.full(4000, i % 251, dtype=np.uint8), "i": i}


@pytest.fixture
def one_chunk(tmp_path: Path) -> dict[str, bytes]:
    out = tmp_path / "data"
    optimize(_sample, list(range(200)), str(out), chunk_bytes="2MB", num_workers=1, verbose=False)
    return {p.name: p.read_bytes() for p in data_files(out)}


class CancellingStore(ScriptedStore):
    """Cancels ``scope`` from a chunk's ranged GET at or after ``cancel_from`` and never answers that request:
    the read is cancelled while its download is in flight."""

    def __init__(self, objects: dict[str, bytes], cancel_from: int) -> None:
        super().__init__(objects)
        self.cancel_from = cancel_from
        self.scope = anyio.CancelScope()
        self.cancelled_from: list[tuple[str, int]] = []

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        if path.startswith("chunk-") and start >= self.cancel_from:
            self.cancelled_from.append((path, start))
            self.scope.cancel()
            await anyio.sleep_forever()
        return await super().get_range(path, start, length)


async def _collect(source: DatasetSource) -> list[Any]:
    pieces = plan_pieces(source, ReadPlanArgs())
    send, receive = anyio.create_memory_object_stream[ChunkWork](1)
    samples: list[Any] = []
    async with anyio.create_task_group() as tg, receive:
        tg.start_soon(lambda: produce_chunks(source, pieces, send))
        async for work in receive:
            assert work.ready is not None  # decoded while it downloads
            batches = work_batches(source, work, None)
            samples += [s for batch in await anyio.to_thread.run_sync(list, batches) for s in batch]
    return samples


class _LateReader(ChunkCache):
    """A chunk cache (injected into the source) whose reader maps its first file only after the download gave its
    hold back, and has another process's eviction run right then."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.released = threading.Event()
        self.evicted: list[list[str]] = []

    def release(self, name: str) -> list[str]:
        out = super().release(name)
        self.released.set()
        return out

    def map_file(self, path: Path) -> bytes | mmap.mmap:
        if not self.evicted:  # the reader's first attempt: it runs only after the download gave its hold back
            assert self.released.wait(30), "the download never gave its hold back"
            other_process = ChunkCache(self.directory, max_cache_size=1)  # its own locks, as another process
            self.evicted.append(other_process.evict())
        return super().map_file(path)


async def test_a_streamed_chunk_is_not_evicted_between_its_download_and_its_mapping(
    one_chunk: dict[str, bytes], tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    opened = await DatasetSource.open(
        ScriptedStore(one_chunk), cache=CacheSettings(cache_dir=str(cache_dir), piece_size=PIECE)
    )
    assert opened.cache is not None
    cache = _LateReader(opened.cache.directory, max_cache_size=opened.cache.max_cache_size)
    source = dataclasses.replace(opened, cache=cache)
    samples = await _collect(source)
    assert cache.evicted == [[]]  # the reader's own hold kept the chunk
    assert [s["i"] for s in samples] == list(range(200))
    for s in samples:
        np.testing.assert_array_equal(s["x"], _sample(s["i"])["x"])
    assert cache.held() == {}


@pytest.mark.parametrize("streamed", [True, False])
async def test_a_read_cancelled_while_its_chunk_downloads_gives_back_every_hold(
    one_chunk: dict[str, bytes], tmp_path: Path, streamed: bool
) -> None:
    store = CancellingStore(one_chunk, cancel_from=2 * PIECE)
    source = await DatasetSource.open(store, cache=CacheSettings(cache_dir=str(tmp_path / "cache"), piece_size=PIECE))
    assert source.cache is not None
    pieces = plan_pieces(source, ReadPlanArgs(shuffle="window" if not streamed else False))
    send, receive = anyio.create_memory_object_stream[ChunkWork](1)
    with store.scope:
        async with anyio.create_task_group() as tg, receive:
            tg.start_soon(lambda: produce_chunks(source, pieces, send))
            async for _work in receive:
                pass
    assert store.scope.cancelled_caught
    assert store.cancelled_from  # cancelled from inside the download
    assert source.cache.held() == {}
