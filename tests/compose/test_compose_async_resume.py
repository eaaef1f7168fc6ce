"""Resumable async Combined / Parallel streams (``ds.astream(state=...)``), on asyncio and trio."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from litstream import (
    CombinedStreamingDataset,
    ConfigurationError,
    ParallelStreamingDataset,
    StreamingDataLoader,
    StreamingDataset,
)
from resume_law_async import assert_async_resume_law

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

pytestmark = pytest.mark.anyio


def combined(*paths: Path, **kwargs: Any) -> CombinedStreamingDataset:
    return CombinedStreamingDataset([StreamingDataset(p, shuffle=True, drop_last=False) for p in paths], **kwargs)


def parallel(*paths: Path, **kwargs: Any) -> ParallelStreamingDataset:
    return ParallelStreamingDataset([StreamingDataset(p, shuffle=True, drop_last=False) for p in paths], **kwargs)


def _maker(build: Callable[[], CombinedStreamingDataset | ParallelStreamingDataset]) -> Any:
    def make(rank: int, world: int, batch: int, epoch: int, state: Mapping[str, Any] | None) -> Any:
        return build().astream(rank=rank, world_size=world, batch_size=batch, epoch=epoch, state=state)

    return make


@pytest.mark.parametrize("stop_after", [0, 2, 7, 100])
@pytest.mark.parametrize("weighted", [False, True])
async def test_combined_obeys_the_resume_law(
    ints_50: Path, thousands_50: Path, odd_37: Path, stop_after: int, weighted: bool
) -> None:
    kwargs: dict[str, Any] = {"weights": [0.2, 0.3, 0.5], "iterate_over_all": False} if weighted else {}
    await assert_async_resume_law(
        _maker(lambda: combined(ints_50, thousands_50, odd_37, **kwargs)), stop_after=stop_after, batch_size=3
    )


@pytest.mark.parametrize(("world", "new_world", "new_batch"), [(1, 2, 3), (2, 3, 2), (3, 1, 4)])
async def test_combined_resumes_elastically(
    ints_50: Path, thousands_50: Path, odd_37: Path, world: int, new_world: int, new_batch: int
) -> None:
    outcome = await assert_async_resume_law(
        _maker(lambda: combined(ints_50, thousands_50, odd_37)),
        stop_after=4,
        batch_size=2,
        world_size=world,
        resumed_world_size=new_world,
        resumed_batch_size=new_batch,
    )
    assert sum(map(len, outcome.consumed)) + sum(map(len, outcome.rest)) == 50 + 50 + 37


@pytest.mark.parametrize("length", [None, 70])
@pytest.mark.parametrize("stop_after", [0, 3, 100])
async def test_parallel_obeys_the_resume_law(ints_50: Path, odd_37: Path, length: int | None, stop_after: int) -> None:
    await assert_async_resume_law(
        _maker(lambda: parallel(ints_50, odd_37, length=length)), stop_after=stop_after, batch_size=2, epoch=2
    )


@pytest.mark.parametrize("length", [None, 70])
async def test_parallel_resumes_elastically_with_tuples_intact(ints_50: Path, odd_37: Path, length: int | None) -> None:
    outcome = await assert_async_resume_law(
        _maker(lambda: parallel(ints_50, odd_37, length=length)),
        stop_after=3,
        batch_size=2,
        world_size=2,
        resumed_world_size=3,
        resumed_batch_size=3,
    )
    for part in [*outcome.consumed, *outcome.rest]:
        for first, second in part:  # one sample of each member per step
            assert first < 50 <= 2000 <= second


async def test_a_dataloader_checkpoint_of_a_combined_resumes_in_its_astream(ints_50: Path, thousands_50: Path) -> None:
    loader = StreamingDataLoader(combined(ints_50, thousands_50), batch_size=4)
    it = iter(loader)
    taken = [int(x) for _ in range(5) for x in next(it)]
    state = loader.state_dict()
    it.close()
    rest = [s async for s in combined(ints_50, thousands_50).astream(batch_size=4, state=state)]
    assert sorted(taken + rest) == list(range(50)) + list(range(1000, 1050))


async def test_a_checkpoint_of_another_wrapper_is_refused_on_first_iteration(ints_50: Path, odd_37: Path) -> None:
    stream = combined(ints_50, odd_37).astream()
    async for _ in stream:
        break
    state = stream.state_dict()
    assert state is not None
    other = parallel(ints_50, odd_37).astream(state=state)
    with pytest.raises(ConfigurationError, match="not a ParallelStreamingDataset checkpoint"):
        [s async for s in other]
