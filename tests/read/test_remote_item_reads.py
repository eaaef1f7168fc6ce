"""Requests a remote keyed lookup actually sends, counted by a loopback proxy in front of SeaweedFS.

After the dataset's index and its key shard are loaded (once per process) and a chunk's offset table is
held (once per chunk per process), ``ds["id"]``, ``get_by_key``, ``get_by_keys`` and ``ds[i]`` each cost
exactly one ranged GET of the sample's bytes.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest

from litstream import FormatError, StreamingDataset, optimize
from litstream.format._chunk import parse_chunk_offsets
from litstream.storage._resolver import store_for
from request_counter import Request, RequestCounter

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from servers import S3Server

CHUNK = 4
N = 12


def sample(i: int) -> dict[str, Any]:
    return {"id": f"id-{i}", "x": np.arange(i, i + 2 + i % 3, dtype=np.int64)}


def key_of(s: dict[str, Any]) -> str:
    return str(s["id"])


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["id"] == b["id"]
    np.testing.assert_array_equal(a["x"], b["x"])


@pytest.fixture
def keyed_s3(s3_server: S3Server) -> Iterator[tuple[str, dict[str, str], RequestCounter]]:
    """A keyed dataset written straight to SeaweedFS, and a counting proxy to read it through."""
    prefix = f"reads-{uuid.uuid4().hex[:10]}"
    url = f"s3://{s3_server.bucket}/{prefix}"
    optimize(sample, list(range(N)), url, chunk_size=CHUNK, num_workers=1, key_fn=key_of, verbose=False,
             storage_options=s3_server.options())  # fmt: skip
    with RequestCounter(s3_server.endpoint) as counter:
        yield f"/{s3_server.bucket}/{prefix}", {**s3_server.options(), "endpoint_url": counter.url}, counter
        assert counter.errors == []


def _range_gets(requests: list[Request], path: str) -> list[str | None]:
    assert all(r.method == "GET" and r.path == path for r in requests), requests
    return [r.range for r in requests]


def test_one_range_read_per_lookup_once_index_and_table_are_held(
    keyed_s3: tuple[str, dict[str, str], RequestCounter],
) -> None:
    root, options, counter = keyed_s3
    ds = StreamingDataset(f"s3:/{root}", storage_options=options, hedge_delay=3600.0)  # no duplicate reads
    assert_same(ds["id-5"], sample(5))
    first = counter.take()
    assert [r.path for r in first] == [
        f"{root}/index.json",
        f"{root}/keys/shard-00000.parquet",
        f"{root}/index.json",  # the sidecar belongs to the latest version: still the one this reader serves?
        f"{root}/chunk-0-1.bin",  # the offset table of chunk 1 ...
        f"{root}/chunk-0-1.bin",  # ... then the sample
    ]
    header = 4 * (CHUNK + 2)
    assert [r.range for r in first] == [None, None, None, f"bytes=0-{header - 1}", first[4].range]
    for i in (4, 6, 7, 5):  # the rest of chunk 1: one range read each
        assert_same(ds[f"id-{i}"], sample(i))
        assert len(_range_gets(counter.take(), f"{root}/chunk-0-1.bin")) == 1
    for chunk in (0, 2):  # another chunk: its table once, then one read per sample
        i = chunk * CHUNK
        assert_same(ds.get_by_key(f"id-{i}"), sample(i))
        assert _range_gets(counter.take(), f"{root}/chunk-0-{chunk}.bin")[0] == f"bytes=0-{header - 1}"
        for j in range(i + 1, i + CHUNK):
            assert_same(ds[f"id-{j}"], sample(j))
            assert len(_range_gets(counter.take(), f"{root}/chunk-0-{chunk}.bin")) == 1
    many = ds.get_by_keys([f"id-{i}" for i in range(N - 1, -1, -1)])
    for i, got in zip(range(N - 1, -1, -1), many, strict=True):
        assert_same(got, sample(i))
    requests = counter.take()
    assert len(requests) == N
    assert all(r.method == "GET" and r.range for r in requests)
    assert_same(ds[9], sample(9))  # positional reads share the tables
    assert len(counter.take()) == 1


def test_hedge_delay_zero_sends_each_read_once(keyed_s3: tuple[str, dict[str, str], RequestCounter]) -> None:
    """``hedge_delay=0`` turns hedging off, as in LitData and StreamingRawDataset (it used to duplicate every read)."""
    root, options, counter = keyed_s3
    ds = StreamingDataset(f"s3:/{root}", storage_options=options, hedge_delay=0)
    assert_same(ds[4], sample(4))  # the index, the sidecar-free table of chunk 1, the sample
    counter.take()
    for i in (5, 6, 7):
        assert_same(ds[i], sample(i))
        assert len(_range_gets(counter.take(), f"{root}/chunk-0-1.bin")) == 1


def test_each_process_view_loads_the_sidecar_once(keyed_s3: tuple[str, dict[str, str], RequestCounter]) -> None:
    root, options, counter = keyed_s3
    ds = StreamingDataset(f"s3:/{root}", storage_options=options, hedge_delay=3600.0)
    for i in range(N):
        assert_same(ds[f"id-{i}"], sample(i))
    paths = [r.path for r in counter.take()]
    assert paths.count(f"{root}/keys/shard-00000.parquet") == 1
    assert paths.count(f"{root}/index.json") == 2  # opened, then checked once when the shard is loaded
    assert len(paths) == 3 + N // CHUNK + N  # index twice, shard, one table per chunk, one read per sample


def shorter(i: int) -> dict[str, Any]:
    return {"id": f"new-{i}", "x": np.array([-i], dtype=np.int64)}


def test_a_chunk_rewritten_under_a_reader_is_read_from_the_new_file_alone(
    keyed_s3: tuple[str, dict[str, str], RequestCounter], s3_server: S3Server, tmp_path: Path
) -> None:
    """The item read asks for the chunk version its offset table came from (If-Match); a chunk replaced in
    place (LitData's dataset_update does so) fails it, and the reader re-reads the table of the new file."""
    root, options, counter = keyed_s3
    ds = StreamingDataset(f"s3:/{root}", storage_options=options, hedge_delay=3600.0)
    assert_same(ds["id-5"], sample(5))  # chunk 1's table and its ETag are held now
    optimize(shorter, list(range(N)), tmp_path, chunk_size=CHUNK, num_workers=1, verbose=False)
    store = store_for(f"s3:/{root}", s3_server.options())
    anyio.run(store.put, "chunk-0-1.bin", (tmp_path / "chunk-0-1.bin").read_bytes())  # smaller items, same count
    counter.take()
    assert_same(ds["id-6"], shorter(6))  # the new file's item 2, not bytes at the old offsets
    ranges = _range_gets(counter.take(), f"{root}/chunk-0-1.bin")
    assert len(ranges) == 3  # refused (changed), the new table, the item
    assert ranges[1] == f"bytes=0-{4 * (CHUNK + 2) - 1}"
    assert_same(ds["id-7"], shorter(7))
    assert len(counter.take()) == 1


def test_offset_tables_are_validated() -> None:
    good = (3).to_bytes(4, "little") + b"".join(v.to_bytes(4, "little") for v in (20, 22, 22, 25))
    np.testing.assert_array_equal(parse_chunk_offsets(good, num_items=3, chunk_bytes=25, source="c"), [20, 22, 22, 25])
    with pytest.raises(FormatError, match=r"holds 3 items but index\.json records 4"):
        parse_chunk_offsets(good + b"\0" * 4, num_items=4, chunk_bytes=99, source="c")
    with pytest.raises(FormatError, match="shorter than its header"):
        parse_chunk_offsets(good[:10], num_items=3, chunk_bytes=25, source="c")
    with pytest.raises(FormatError, match="damaged"):
        parse_chunk_offsets(good, num_items=3, chunk_bytes=24, source="c")  # past the chunk's end
    backwards = good[:8] + (23).to_bytes(4, "little") + good[12:]
    with pytest.raises(FormatError, match="damaged"):
        parse_chunk_offsets(backwards, num_items=3, chunk_bytes=25, source="c")


@pytest.mark.anyio
async def test_offset_tables_stay_within_their_budget_and_big_chunks_read_pairs(obstore_in_process: None) -> None:
    from obstore.store import MemoryStore

    from litstream.format._chunk import pack_chunk
    from litstream.format._index import ChunkInfo
    from litstream.read.source._headers import OffsetTables
    from litstream.storage._obstore import ObstoreStore

    memory = MemoryStore()
    chunks = []
    for c in range(3):
        items = [bytes([c, k]) * (k + 1) for k in range(5)]
        data = pack_chunk(items)
        memory.put(f"chunk-0-{c}.bin", data)
        chunks.append((ChunkInfo(f"chunk-0-{c}.bin", 5, len(data)), items))
    store = ObstoreStore(memory, url="memory://tables")
    tables = OffsetTables(max_bytes=2 * 6 * 8)  # room for two tables of 6 int64 offsets
    for info, items in chunks:
        for k in (4, 0, 2):
            assert await tables.read_item(store, info, k) == items[k]
    assert len(tables) == 2  # the least recently used table went first
    assert tables.nbytes == 2 * 6 * 8
    pairs = OffsetTables(max_table_bytes=8)  # every header is bigger: two small reads per item, nothing kept
    info, items = chunks[1]
    assert await pairs.read_item(store, info, 3) == items[3]
    assert len(pairs) == 0
    memory.put("chunk-0-1.bin", pack_chunk([b"z" * (k + 2) for k in range(5)]))  # rewritten in place
    assert await tables.read_item(store, chunks[2][0], 1) == chunks[2][1][1]
    assert await tables.read_item(store, info, 3) == b"z" * 5  # the new file's item, read with its own table
