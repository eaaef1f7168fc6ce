"""The raw fetch engine: adaptive concurrency, byte budget, hedging, deadlines, retries, ranged reads.

Slow and failing requests are faults a real server does not produce on demand, so a scripted store
(the Store protocol over a dict) plays them; everything else is the real engine.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import anyio
import pytest

from litstream import ObjectNotFoundError, StorageError
from litstream.index._raw import FileMetadata
from litstream.read.raw._fetch import _INITIAL_LIMIT, FetchConfig, RawFetcher
from litstream.read.raw._stream import RawReader
from litstream.storage._base import ObjectMeta

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from litstream.storage._base import PutData

pytestmark = pytest.mark.anyio


class ScriptedStore:
    """Objects in a dict; ``script(key, attempt)`` returns seconds to wait, or raises, per request."""

    def __init__(self, objects: dict[str, bytes], script: Callable[[str, int], float] | None = None) -> None:
        self.objects = objects
        self.script = script or (lambda key, attempt: 0.0)
        self.attempts: dict[str, int] = {}
        self.active = 0
        self.peak = 0
        self.ranges = 0

    @property
    def url(self) -> str:
        return "scripted://"

    async def _serve(self, key: str) -> None:
        attempt = self.attempts.get(key, 0)
        self.attempts[key] = attempt + 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await anyio.sleep(self.script(key, attempt))
        finally:
            self.active -= 1
        if key not in self.objects:
            raise ObjectNotFoundError(f"{key} does not exist")

    async def get(self, path: str) -> bytes:
        await self._serve(path)
        return self.objects[path]

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        await self._serve(f"{path}")
        self.ranges += 1
        return self.objects[path][start : start + length]

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        return [await self.get_range(path, s, n) for s, n in zip(starts, lengths, strict=False)]

    async def put(self, path: str, data: PutData) -> None:
        raise StorageError("read-only")

    async def head(self, path: str) -> ObjectMeta:
        return ObjectMeta(path, len(self.objects[path]))

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        return [ObjectMeta(k, len(v)) for k, v in sorted(self.objects.items()) if k.startswith(prefix)]

    async def delete(self, path: str) -> None:
        raise StorageError("read-only")


def objects(n: int, size: int = 100) -> dict[str, bytes]:
    return {f"f{i:04d}": bytes([i % 256]) * size for i in range(n)}


async def test_adaptive_limit_grows_while_throughput_grows() -> None:
    data = objects(2000)
    store = ScriptedStore(data, lambda key, attempt: 0.005)  # fixed latency: throughput grows with concurrency
    fetcher = RawFetcher(store, FetchConfig(), remote=True)
    keys = sorted(data)
    got = await fetcher.fetch_many(keys, [100] * len(keys))
    assert got == [data[k] for k in keys]
    stats = fetcher.statistics()
    assert stats.concurrency > _INITIAL_LIMIT  # grew from its start
    assert store.peak > _INITIAL_LIMIT
    assert stats.objects == stats.requests == len(keys)
    assert stats.bytes == 100 * len(keys)
    assert stats.in_flight == 0
    assert stats.failures == 0


async def test_failures_halve_the_limit_and_are_retried() -> None:
    data = objects(64)

    def script(key: str, attempt: int) -> float:
        if attempt == 0 and key < "f0008":
            raise StorageError(f"503 SlowDown for {key}")
        return 0.0

    store = ScriptedStore(data, script)
    fetcher = RawFetcher(store, FetchConfig(), remote=True)
    keys = sorted(data)
    assert await fetcher.fetch_many(keys, [100] * len(keys)) == [data[k] for k in keys]
    stats = fetcher.statistics()
    assert stats.failures == stats.retries == 8
    assert stats.concurrency < _INITIAL_LIMIT  # halved per failure (then regrown at most a little)


async def test_fixed_limit_is_exact() -> None:
    data = objects(50)
    store = ScriptedStore(data, lambda key, attempt: 0.002)
    fetcher = RawFetcher(store, FetchConfig(max_concurrent_downloads=3), remote=True)
    await fetcher.fetch_many(sorted(data), [100] * 50)
    assert store.peak == 3
    assert fetcher.statistics().concurrency == 3


async def test_byte_budget_bounds_objects_in_flight() -> None:
    data = objects(30, size=1000)
    store = ScriptedStore(data, lambda key, attempt: 0.002)
    fetcher = RawFetcher(store, FetchConfig(max_bytes=4000), remote=True)
    await fetcher.fetch_many(sorted(data), [1000] * 30)
    assert store.peak == 4


async def test_slow_requests_are_hedged_and_the_duplicate_wins() -> None:
    data = objects(6)
    store = ScriptedStore(data, lambda key, attempt: 30.0 if attempt == 0 else 0.0)  # first try stalls
    fetcher = RawFetcher(store, FetchConfig(hedge_delay=0.05), remote=True)
    with anyio.fail_after(20):
        got = await fetcher.fetch_many(sorted(data), [100] * 6)
    assert got == [data[k] for k in sorted(data)]
    stats = fetcher.statistics()
    assert stats.hedges == stats.hedges_won == 6
    assert stats.in_flight == 0


async def test_an_expired_deadline_is_retried() -> None:
    data = objects(4)
    store = ScriptedStore(data, lambda key, attempt: 30.0 if attempt == 0 else 0.0)
    fetcher = RawFetcher(store, FetchConfig(download_timeout=0.1), remote=False)
    with anyio.fail_after(20):
        assert await fetcher.fetch_many(sorted(data), [100] * 4) == [data[k] for k in sorted(data)]
    assert fetcher.statistics().retries == 4


async def test_large_objects_are_read_as_parallel_ranges() -> None:
    blob = bytes(range(256)) * 40  # 10240 bytes
    store = ScriptedStore({"big": blob, "small": b"x" * 10})
    fetcher = RawFetcher(store, FetchConfig(range_parallel_threshold=4096, range_chunk_size=1000), remote=True)
    assert await fetcher.fetch_many(["big", "small"], [len(blob), 10]) == [blob, b"x" * 10]
    assert store.ranges == 11
    assert fetcher.statistics().ranged == 1


async def test_a_missing_object_is_raised_as_itself() -> None:
    store = ScriptedStore(objects(3))
    items = [FileMetadata(f"scripted:/{k}", 100) for k in ("f0000", "gone", "f0001")]
    reader = RawReader(RawFetcher(store, FetchConfig(), remote=True), "scripted:", items, 8)
    with pytest.raises(ObjectNotFoundError, match="gone"):
        await reader.get_items([0, 1, 2])
    assert store.attempts["gone"] == 1  # not retried: it will not appear


async def test_statistics_are_a_frozen_snapshot() -> None:
    fetcher = RawFetcher(ScriptedStore(objects(1)), FetchConfig(), remote=True)
    before = fetcher.statistics()
    await fetcher.fetch("f0000", 100)
    assert before.objects == 0
    assert fetcher.statistics().objects == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.objects = 5  # type: ignore[misc]


async def test_a_group_that_fits_the_budget_holds_it_whole() -> None:
    data = objects(20, size=100)
    seen: list[int] = []

    def script(key: str, attempt: int) -> float:
        seen.append(fetcher.statistics().budget_used)
        return 0.0

    store = ScriptedStore(data, script)
    fetcher = RawFetcher(store, FetchConfig(max_bytes=2000), remote=True)
    keys = sorted(data)
    assert await fetcher.fetch_many(keys, [100] * 20) == [data[k] for k in keys]
    assert set(seen) == {2000}  # held once, for the whole group, while every request ran
    assert fetcher.statistics().budget_used == 0
