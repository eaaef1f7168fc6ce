"""A remote chunk is decoded while it downloads: its first items are served once the first ranged GET is
on disk, each later batch once the bytes before its end are, and a download that fails midway raises
its error to the reader and leaves no file behind.

Holding back part of a response is a fault a real server cannot produce on demand, so the unit tests use
the scripted store of ``tests/storage/test_transfer.py`` (serving the bytes of a real dataset); the last
test reads through SeaweedFS with small ranged GETs, so the same path runs against a real server.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import numpy as np
import pytest
from test_transfer import ScriptedStore

from dataset_files import data_files
from litstream import StorageError, StreamingDataset, debugger, optimize
from litstream.read.cache._source_cache import CacheSettings
from litstream.read.engine._decode import work_batches
from litstream.read.engine._engine import ChunkWork, produce_chunks
from litstream.read.plan._pieces import ReadPlanArgs, plan_pieces
from litstream.read.source._source import DatasetSource

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

PIECE = 64 * 1024


def _sample(i: int) -> dict[str, Any]:
    return {"x": np.full(4000, i % 251, dtype=np.uint8), "i": i}


class HoldingStore(ScriptedStore):
    """Serves ranges starting at or after ``hold_from`` only once ``release`` is set; ``fail_from``: those
    ranges fail instead."""

    def __init__(self, objects: dict[str, bytes], hold_from: int) -> None:
        super().__init__(objects)
        self.hold_from = hold_from
        self.release = anyio.Event()
        self.fail_from: int | None = None

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        if path.startswith("chunk-") and start >= self.hold_from:
            await self.release.wait()
            if self.fail_from is not None and start >= self.fail_from:
                raise StorageError(f"scripted failure of {path} at {start}")
        return await super().get_range(path, start, length)


@pytest.fixture
def one_chunk(tmp_path: Path) -> dict[str, bytes]:
    out = tmp_path / "data"
    optimize(_sample, list(range(200)), str(out), chunk_bytes="2MB", num_workers=1, verbose=False)
    objects = {p.name: p.read_bytes() for p in data_files(out)}
    assert sum(name.startswith("chunk-") for name in objects) == 1
    return objects


async def _open(objects: dict[str, bytes], cache: Path) -> tuple[HoldingStore, DatasetSource]:
    store = HoldingStore(objects, hold_from=2 * PIECE)
    source = await DatasetSource.open(store, cache=CacheSettings(cache_dir=str(cache), piece_size=PIECE))
    return store, source


@pytest.mark.anyio
async def test_the_first_items_are_served_before_the_chunk_has_arrived(
    one_chunk: dict[str, bytes], tmp_path: Path
) -> None:
    store, source = await _open(one_chunk, tmp_path / "cache")
    pieces = plan_pieces(source, ReadPlanArgs())
    send, receive = anyio.create_memory_object_stream[ChunkWork](1)
    samples: list[Any] = []
    async with anyio.create_task_group() as tg, receive:
        tg.start_soon(lambda: produce_chunks(source, pieces, send))
        work = await receive.receive()
        assert work.ready is not None  # decoded while it downloads
        batches = work_batches(source, work, None)
        samples += await anyio.to_thread.run_sync(next, batches)  # the first batch: within the first GET
        assert [s["i"] for s in samples] == list(range(len(samples)))
        assert len(samples) > 0
        assert not list((tmp_path / "cache").rglob("chunk-*.bin"))  # not complete: still a temporary file
        store.release.set()
        samples += [s for batch in await anyio.to_thread.run_sync(list, batches) for s in batch]
    assert [s["i"] for s in samples] == list(range(200))
    for s in samples:
        np.testing.assert_array_equal(s["x"], _sample(s["i"])["x"])
    assert [p.name for p in (tmp_path / "cache").rglob("chunk-*")] == ["chunk-0-0.bin"]


@pytest.mark.anyio
async def test_a_download_failing_midway_raises_to_the_reader_and_leaves_no_file(
    one_chunk: dict[str, bytes], tmp_path: Path
) -> None:
    store, source = await _open(one_chunk, tmp_path / "cache")
    store.fail_from = 4 * PIECE
    pieces = plan_pieces(source, ReadPlanArgs())
    send, receive = anyio.create_memory_object_stream[ChunkWork](1)
    errors: list[BaseException] = []

    async def consume() -> None:
        async with receive:
            work = await receive.receive()
            batches = work_batches(source, work, None)
            assert len(await anyio.to_thread.run_sync(next, batches)) > 0
            store.release.set()
            try:
                await anyio.to_thread.run_sync(list, batches)
            except StorageError as exc:
                errors.append(exc)
                raise

    with pytest.raises(BaseExceptionGroup) as caught:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: produce_chunks(source, pieces, send))
            tg.start_soon(consume)
    failures = caught.value.subgroup(lambda e: isinstance(e, StorageError) and "scripted failure" in str(e))
    assert failures is not None  # the download's own error, from the producer and from the reader
    assert len(errors) == 1  # the reader waiting for the bytes got the download's error
    assert "scripted failure" in str(errors[0])
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and "chunk" in p.name]


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_remote_read_in_small_ranged_gets_yields_every_sample(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shuffle: bool
) -> None:
    url = f"s3://{s3_server.bucket}/streamed-{uuid.uuid4().hex[:10]}"
    optimize(_sample, list(range(600)), url, chunk_bytes="1MB", num_workers=1, verbose=False,
             storage_options=s3_server.options())  # fmt: skip
    monkeypatch.setenv("LITSTREAM_DOWNLOAD_PIECE_SIZE", str(PIECE))  # the downloader's settings
    ds = StreamingDataset(url, storage_options=s3_server.options(), cache_dir=str(tmp_path / "cache"), shuffle=shuffle)
    trace = tmp_path / "trace.json"
    debugger.enable_tracer(categories=["read"], log_file=str(trace))
    try:
        seen = [s["i"] for s in ds]
    finally:
        debugger.enable_tracer("off", log_file=str(trace))
    assert sorted(seen) == list(range(600))
    assert (seen == list(range(600))) is not shuffle
    reads = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("name") == "read"]
    assert len(reads) >= 2
    assert all(e["args"].get("streamed") for e in reads)  # every chunk was decoded while it downloaded
    again = StreamingDataset(url, storage_options=s3_server.options(), cache_dir=str(tmp_path / "cache"))
    assert [s["i"] for s in again] == list(range(600))  # from the cache the downloads left complete
