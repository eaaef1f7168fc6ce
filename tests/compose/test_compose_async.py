"""Async forms of Combined / Parallel (``async for ds``, ``ds.astream()``), on asyncio and trio."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from litstream import CombinedStreamingDataset, ConfigurationError, ParallelStreamingDataset, StreamingDataset

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


def combined(*paths: Path, **kwargs: Any) -> CombinedStreamingDataset:
    return CombinedStreamingDataset([StreamingDataset(p, shuffle=True) for p in paths], **kwargs)


def parallel(*paths: Path, **kwargs: Any) -> ParallelStreamingDataset:
    return ParallelStreamingDataset([StreamingDataset(p, shuffle=True) for p in paths], **kwargs)


def _sum(samples: tuple[int, ...]) -> int:
    return sum(samples)


async def test_async_for_serves_what_a_sync_iteration_serves(ints_50: Path, thousands_50: Path, odd_37: Path) -> None:
    expected = list(combined(ints_50, thousands_50, odd_37))
    got = [s async for s in combined(ints_50, thousands_50, odd_37)]
    assert got == expected
    assert sorted(got) == list(range(50)) + list(range(1000, 1050)) + list(range(2000, 2037))


async def test_async_with_prefetches_and_serves_the_same_weighted_mix(ints_50: Path, thousands_50: Path) -> None:
    sync = combined(ints_50, thousands_50, weights=[0.3, 0.7], iterate_over_all=False)
    sync.set_epoch(3)
    expected = list(sync)
    async with combined(ints_50, thousands_50, weights=[0.3, 0.7], iterate_over_all=False).astream(epoch=3) as samples:
        got = [s async for s in samples]
    assert got == expected


async def test_ranks_split_the_mix(ints_50: Path, odd_37: Path) -> None:
    parts = []
    for rank in range(2):
        ds = CombinedStreamingDataset([StreamingDataset(p, drop_last=False) for p in (ints_50, odd_37)])
        parts.append([s async for s in ds.astream(rank=rank, world_size=2, batch_size=2)])
    assert sorted(parts[0] + parts[1]) == list(range(50)) + list(range(2000, 2037))
    assert set(parts[0]).isdisjoint(parts[1])


@pytest.mark.parametrize("length", [None, 70])
async def test_parallel_async_equals_sync(ints_50: Path, odd_37: Path, length: int | None) -> None:
    expected = list(parallel(ints_50, odd_37, length=length, transform=_sum))
    got = [s async for s in parallel(ints_50, odd_37, length=length, transform=_sum)]
    assert got == expected
    assert len(got) == (length or 37)
    async with parallel(ints_50, odd_37, length=length).astream() as samples:
        pairs = [s async for s in samples]
    assert [a + b for a, b in pairs] == expected


async def test_leaving_early_stops_every_member(ints_50: Path, thousands_50: Path) -> None:
    tasks_before = len(anyio.get_running_tasks())
    seen = []
    async with combined(ints_50, thousands_50).astream(max_pre_download=1) as samples:
        async for s in samples:
            seen.append(s)
            if len(seen) == 5:
                break
    await anyio.wait_all_tasks_blocked()
    assert len(seen) == 5
    assert len(anyio.get_running_tasks()) == tasks_before


async def test_bad_arguments_are_refused_before_any_read(ints_50: Path) -> None:
    ds = combined(ints_50)
    with pytest.raises(ConfigurationError, match=r"rank must be an int in \[0, world_size=2\), got 2"):
        ds.astream(rank=2, world_size=2)
    with pytest.raises(ConfigurationError, match="batch_size must be an int >= 1, got 0"):
        ds.astream(batch_size=0)
    with pytest.raises(ConfigurationError, match=r"epoch must be an int >= 1 \(1-based\) or None, got 0"):
        ds.astream(epoch=0)
