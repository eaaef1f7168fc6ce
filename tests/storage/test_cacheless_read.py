"""``cache_chunks=False``: remote chunks read into memory as they arrive, decoded there, never written to disk.

Over a real S3 server (SeaweedFS): every face (dataset iteration, the loader, ``astream`` on both backends,
``ds[i]``) serves the same samples with and without the disk cache, and without it nothing at all appears
under ``cache_dir``; a loader checkpoint taken mid-epoch resumes with exactly the rest; the automatic
choice (``None``) caches only when ``max_cache_size`` can hold the whole dataset. The
:class:`~litstream.storage._memory_fetch.MemoryFetcher` itself is checked on an in-memory obstore store and
on a store that answers ranged GETs in one buffer.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest
from obstore.store import MemoryStore

from litstream import (
    ChecksumError,
    ConfigurationError,
    StorageError,
    StreamingDataLoader,
    StreamingDataset,
    astream,
    optimize,
)
from litstream.storage._memory_fetch import MemoryFetcher
from litstream.storage._obstore import ObstoreStore
from litstream.storage._progress import Progress
from request_counter import RequestCounter

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

N = 120
PIECE = 16 * 1024  # ranged GETs of 16 KiB: every 64 KB chunk is fetched in pieces and decoded while it arrives


def _sample(i: int) -> dict[str, Any]:
    return {"x": np.full(2048, i % 251, dtype=np.uint8), "i": i, "name": f"s{i}"}


def _key(sample: dict[str, Any]) -> tuple[int, int, str]:
    return int(sample["i"]), int(np.asarray(sample["x"]).sum()), str(sample["name"])


@pytest.fixture(scope="module", params=[None, "zstd"], ids=["plain", "zstd"])
def s3_dataset(request: pytest.FixtureRequest, s3_server: S3Server) -> tuple[str, dict[str, str]]:
    """One dataset of ``N`` samples in 64 KB chunks on the S3 server (plain or zstd chunks)."""
    url = f"s3://{s3_server.bucket}/cacheless-{request.param or 'plain'}-{uuid.uuid4().hex[:10]}"
    options = s3_server.options()
    optimize(_sample, list(range(N)), url, chunk_bytes="64KB", num_workers=1, verbose=False,
             storage_options=options, compression=request.param)  # fmt: skip
    return url, options


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) if root.exists() else []


def _dataset(url: str, options: dict[str, str], cache: Path, cache_chunks: bool | None, **kw: Any) -> StreamingDataset:
    return StreamingDataset(url, storage_options=options, cache_dir=str(cache), cache_chunks=cache_chunks, **kw)


@pytest.fixture(autouse=True)
def _small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks arrive in several ranged GETs (the transfer's seam: its environment variable)."""
    monkeypatch.setenv("LITSTREAM_DOWNLOAD_PIECE_SIZE", str(PIECE))


EXPECTED = sorted(_key(_sample(i)) for i in range(N))


@pytest.mark.parametrize("shuffle", [False, True, "window"])
@pytest.mark.parametrize("face", ["dataset", "loader_w0", "loader_w2", "getitem"])
def test_every_face_serves_the_same_samples_and_writes_nothing(
    s3_dataset: tuple[str, dict[str, str]], tmp_path: Path, face: str, shuffle: bool | str
) -> None:
    url, options = s3_dataset
    served: dict[bool, list[tuple[int, int, str]]] = {}
    for cache_chunks in (True, False):
        cache = tmp_path / f"cache-{cache_chunks}"
        ds = _dataset(url, options, cache, cache_chunks, shuffle=shuffle, seed=7)
        if face == "dataset":
            got = [_key(s) for s in ds]
        elif face == "getitem":
            got = [_key(ds[i]) for i in (N - 1, 0, 57, 3)]
        else:
            workers = int(face[-1])
            got = []
            for batch in StreamingDataLoader(ds, batch_size=16, num_workers=workers):
                for j in range(len(batch["i"])):
                    got.append((int(batch["i"][j]), int(batch["x"][j].sum()), str(batch["name"][j])))
        served[cache_chunks] = got
        if cache_chunks and face != "getitem":  # ds[i] of an uncompressed chunk: a range read, nothing cached
            assert any(name.endswith(".bin") for name in _files(cache)), "the cached mode writes its chunks"
        elif not cache_chunks:
            assert _files(cache) == [], "cache_chunks=False must write nothing under cache_dir"
    assert served[False] == served[True]  # same samples, same order
    if face != "getitem":
        assert sorted(served[False]) == EXPECTED
    else:
        assert served[False] == [_key(_sample(i)) for i in (N - 1, 0, 57, 3)]


def test_astream_reads_into_memory(s3_dataset: tuple[str, dict[str, str]], tmp_path: Path, anyio_backend: str) -> None:
    url, options = s3_dataset

    async def collect(cache_chunks: bool | None, cache: Path) -> list[tuple[int, int, str]]:
        async with astream(url, storage_options=options, cache_dir=str(cache), cache_chunks=cache_chunks,
                           shuffle=True) as samples:  # fmt: skip
            return [_key(s) async for s in samples]

    cached = anyio.run(collect, True, tmp_path / "a", backend=anyio_backend)
    streamed = anyio.run(collect, False, tmp_path / "b", backend=anyio_backend)
    assert streamed == cached
    assert sorted(streamed) == EXPECTED
    assert _files(tmp_path / "a") != []
    assert _files(tmp_path / "b") == []


def test_an_astream_checkpoint_resumes_with_the_rest(
    s3_dataset: tuple[str, dict[str, str]], tmp_path: Path, anyio_backend: str
) -> None:
    url, options = s3_dataset
    cache = tmp_path / "cache"
    kw: dict[str, Any] = {"storage_options": options, "cache_dir": str(cache), "cache_chunks": False, "shuffle": True}

    async def run() -> tuple[list[int], list[int]]:
        first: list[int] = []
        async with astream(url, **kw) as samples:
            async for sample in samples:
                first.append(int(sample["i"]))
                if len(first) == 50:
                    break
            state = json.loads(json.dumps(samples.state_dict()))  # a checkpoint as saved
        async with astream(url, state=state, **kw) as samples:
            return first, [int(s["i"]) async for s in samples]

    first, rest = anyio.run(run, backend=anyio_backend)
    assert len(first) == 50
    assert sorted(first + rest) == list(range(N))  # each sample once across the two runs
    assert _files(cache) == []


@pytest.mark.parametrize("workers", [0, 2])
def test_a_loader_checkpoint_resumes_with_the_rest(
    s3_dataset: tuple[str, dict[str, str]], tmp_path: Path, workers: int
) -> None:
    url, options = s3_dataset
    cache = tmp_path / "cache"
    loader = StreamingDataLoader(_dataset(url, options, cache, False, shuffle=True), batch_size=8, num_workers=workers)
    first: list[int] = []
    for k, batch in enumerate(loader):
        first += [int(i) for i in batch["i"]]
        if k == 4:
            state = loader.state_dict()
            break
    state = json.loads(json.dumps(state))  # a checkpoint as saved
    again = StreamingDataLoader(_dataset(url, options, cache, False, shuffle=True), batch_size=8, num_workers=workers)
    again.load_state_dict(state)
    rest = [int(i) for batch in again for i in batch["i"]]
    assert sorted(first + rest) == list(range(N))  # each sample once across the two runs
    assert _files(cache) == []


@pytest.mark.parametrize(("max_cache_size", "cached"), [(10_000, False), ("1GB", True)])
def test_the_automatic_choice_caches_only_what_the_cache_can_hold(
    s3_dataset: tuple[str, dict[str, str]], tmp_path: Path, max_cache_size: int | str, cached: bool
) -> None:
    url, options = s3_dataset
    cache = tmp_path / "cache"
    ds = _dataset(url, options, cache, None, max_cache_size=max_cache_size)
    assert ds._reader.spec.cache_chunks is None
    assert sorted(_key(s) for s in ds) == EXPECTED
    assert any(name.endswith(".bin") for name in _files(cache)) is cached


def test_chunks_arrive_in_ranged_gets_in_plan_order(
    s3_dataset: tuple[str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, options = s3_dataset
    monkeypatch.setenv("LITSTREAM_DOWNLOAD_CONCURRENCY", "1")
    with RequestCounter(options["endpoint_url"]) as counter:
        ds = _dataset(url, {**options, "endpoint_url": counter.url}, tmp_path / "cache", False, max_pre_download=4)
        assert [s["i"] for s in ds] == list(range(N))
        assert ds._reader.source().fetcher is not None
        assert counter.errors == []
    chunks = [r for r in counter.requests if r.path.rsplit("/", 1)[-1].startswith("chunk-") and r.method == "GET"]
    names = [r.path.rsplit("/", 1)[-1] for r in chunks]
    order = list(dict.fromkeys(names))
    assert len(order) >= 3
    assert [n for k, n in enumerate(names) if k == 0 or names[k - 1] != n] == order  # one run per chunk
    assert order == sorted(order, key=lambda n: int(n.split(".")[0].rsplit("-", 1)[1]))  # index order
    pieced = [n for n in order if names.count(n) > 1]  # (zstd chunks of these samples are smaller than PIECE)
    assert all(r.range for r in chunks if r.path.endswith(tuple(pieced)))  # ranged GETs, never a whole chunk
    assert pieced == (order if "-plain-" in url else [])
    assert _files(tmp_path / "cache") == []


@pytest.mark.parametrize("value", ["yes", 1, 0.5])
def test_a_bad_cache_chunks_is_refused_naming_it(tmp_path: Path, value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"cache_chunks="):
        StreamingDataset("s3://bucket/x", cache_chunks=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"cache_chunks="):
        astream("s3://bucket/x", cache_chunks=value)  # type: ignore[arg-type]


# -- the fetcher itself -------------------------------------------------------------------------------------

DATA = bytes(range(251)) * 4099  # ~1 MiB, not a multiple of any piece size


class _Buffered:
    """A store that answers ranged GETs in one buffer (no ``get_into_buffer``), over an obstore store."""

    def __init__(self, inner: ObstoreStore) -> None:
        self._inner = inner
        self.url = inner.url

    async def get(self, path: str) -> bytes:
        return await self._inner.get(path)

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        return await self._inner.get_range(path, start, length)

    async def head(self, path: str) -> Any:
        return await self._inner.head(path)


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [True, False], ids=["get_into_buffer", "get_range"])
@pytest.mark.parametrize("piece", [1000, 300_000, 2**20 + 7])
async def test_the_fetcher_assembles_objects_from_pieces(streamed: bool, piece: int) -> None:
    inner = ObstoreStore(MemoryStore(), url="memory://")
    await inner.put("x.bin", DATA)
    await inner.put("empty.bin", b"")
    store: Any = inner if streamed else _Buffered(inner)
    fetcher = MemoryFetcher(store, piece_size=piece, max_concurrency=3)
    progress = Progress(len(DATA))
    got = await fetcher.fetch("x.bin", size=len(DATA), progress=progress)
    assert bytes(got) == DATA
    assert progress.prefix == len(DATA)
    assert bytes(await fetcher.fetch("x.bin")) == DATA  # size from a HEAD request
    assert bytes(await fetcher.fetch("empty.bin", size=0)) == b""


@pytest.mark.anyio
async def test_a_buffer_is_reused_only_once_nothing_refers_to_it() -> None:
    store = ObstoreStore(MemoryStore(), url="memory://")
    other = DATA[::-1]
    await store.put("a.bin", DATA)
    await store.put("b.bin", other)
    fetcher = MemoryFetcher(store, piece_size=300_000)
    a = await fetcher.fetch("a.bin", size=len(DATA))
    owner = a.obj
    sample = np.frombuffer(a, dtype=np.uint8)[10:20]  # a decoded leaf that still refers to the chunk
    del a
    b = await fetcher.fetch("b.bin", size=len(DATA))
    assert b.obj is not owner  # still referred to: a new buffer
    assert bytes(sample) == DATA[10:20]  # and the sample's bytes are intact
    del sample, b
    c = await fetcher.fetch("b.bin", size=len(DATA))
    assert c.obj is owner  # nothing refers to it any more: reused
    assert bytes(c) == other


@pytest.mark.anyio
async def test_the_fetcher_refuses_a_size_that_differs() -> None:
    inner = ObstoreStore(MemoryStore(), url="memory://m")
    await inner.put("x.bin", DATA)
    for size, piece in ((len(DATA) + 10, 4096), (len(DATA) - 10, 2**21), (len(DATA) + 10, 2**21)):
        progress = Progress(size)
        with pytest.raises(StorageError, match=r"memory://m/x\.bin: expected \d+ bytes"):
            await MemoryFetcher(inner, piece_size=piece).fetch("x.bin", size=size, progress=progress)
        with pytest.raises(StorageError):
            progress.wait(size)  # a reader waiting for the bytes learns of the failure


def test_a_chunk_corrupt_on_the_server_is_refused_in_memory(s3_server: S3Server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.bucket}/cacheless-bad-{uuid.uuid4().hex[:10]}"
    options = s3_server.options()
    optimize(_sample, list(range(40)), url, chunk_bytes="64KB", num_workers=1, verbose=False,
             storage_options=options, compression="zstd")  # fmt: skip
    from litstream.storage._resolver import store_for

    store = store_for(url, options)

    async def corrupt() -> None:
        index = json.loads(await store.get("index.json"))
        name = str(index["chunks"][0]["filename"])
        data = bytearray(await store.get(name))
        data[len(data) // 2] ^= 0x01
        await store.put(name, bytes(data))

    anyio.run(corrupt)
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError):
        list(_dataset(url, options, cache, False))
    assert _files(cache) == []


def test_ds_cache_names_the_same_directory_in_both_modes(
    s3_dataset: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, options = s3_dataset
    cached, cacheless = (_dataset(url, options, tmp_path / "c", mode).cache.cache_dir for mode in (True, False))
    assert cacheless == cached
    assert cached.startswith(str(tmp_path / "c"))
