"""Resumable ``astream``: ``state_dict()`` / ``astream(..., state=...)`` obey the resume law, on asyncio and trio."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from litstream import ConfigurationError, StreamingDataLoader, StreamingDataset, astream
from resume_law_async import assert_async_resume_law

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from litstream.read.aio._sample_stream import SampleStream

pytestmark = pytest.mark.anyio


def _maker(path: Path, **kwargs: Any) -> Any:
    def make(rank: int, world: int, batch: int, epoch: int, state: Mapping[str, Any] | None) -> SampleStream:
        return astream(path, rank=rank, world_size=world, batch_size=batch, epoch=epoch, state=state, **kwargs)

    return make


@pytest.mark.parametrize("shuffle", [False, True, "window"])
@pytest.mark.parametrize("stop_after", [0, 1, 5, 100])
async def test_astream_obeys_the_resume_law(ints_100: Path, shuffle: Any, stop_after: int) -> None:
    outcome = await assert_async_resume_law(
        _maker(ints_100, shuffle=shuffle, shuffle_window=2), stop_after=stop_after, batch_size=4
    )
    assert len(outcome.consumed[0]) == min(stop_after * 4, 100)


@pytest.mark.parametrize(
    ("world", "batch", "new_world", "new_batch"),
    [(2, 4, 3, 4), (3, 2, 1, 5), (1, 3, 2, 2), (2, 1, 2, 3)],
)
async def test_astream_resumes_elastically(
    ints_100: Path, world: int, batch: int, new_world: int, new_batch: int
) -> None:
    outcome = await assert_async_resume_law(
        _maker(ints_100, shuffle=True),
        stop_after=3,
        batch_size=batch,
        world_size=world,
        resumed_world_size=new_world,
        resumed_batch_size=new_batch,
    )
    assert outcome.state is not None
    assert outcome.state["resume_mode"] == "strict"
    assert outcome.state["worker_samples_yielded"] == [3 * batch]
    assert sum(len(part) for part in outcome.rest) == 100 - sum(len(part) for part in outcome.consumed)


async def _first(stream: SampleStream, count: int) -> list[Any]:
    out: list[Any] = []
    async for s in stream:
        out.append(s)
        if len(out) == count:
            break
    return out


async def test_a_chain_of_elastic_resumes_serves_every_sample_once(ints_100: Path) -> None:
    first = astream(ints_100, shuffle=True, batch_size=2)
    seen = await _first(first, 10)
    state = first.state_dict()
    states = []
    for rank in range(2):  # lock-step: both ranks of the second run take 3 batches of 3
        second = astream(ints_100, shuffle=True, rank=rank, world_size=2, batch_size=3, state=state)
        seen += await _first(second, 9)
        states.append(second.state_dict())
    again = states[0]
    assert again is not None
    assert again["resume_mode"] == "elastic"
    assert again["resume_levels"] == [{"world_size": 1, "num_workers": 1, "batch_size": 2, "consumed": [10]}]
    json.dumps(again)
    for rank in range(3):
        seen += [s async for s in astream(ints_100, shuffle=True, rank=rank, world_size=3, batch_size=4, state=again)]
    assert sorted(seen) == list(range(100))


async def test_state_dict_before_iteration_is_the_given_state(ints_100: Path) -> None:
    assert astream(ints_100).state_dict() is None
    stream = astream(ints_100, batch_size=4)
    assert len(await _first(stream, 8)) == 8
    state = stream.state_dict()
    assert state is not None
    resumed = astream(ints_100, batch_size=4, state=state)
    assert resumed.state_dict() == state


async def test_a_dataloader_checkpoint_resumes_in_astream(ints_100: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(ints_100, shuffle=True, drop_last=False), batch_size=4)
    it = iter(loader)
    taken = [int(x) for _ in range(3) for x in next(it)]
    state = loader.state_dict()
    it.close()
    rest = [s async for s in astream(ints_100, shuffle=True, batch_size=4, state=state)]
    assert sorted(taken + rest) == list(range(100))


async def test_a_subset_resumes_through_astream(ints_100: Path) -> None:
    part = StreamingDataset(ints_100).subset(list(range(10, 60)))
    stream = astream(part, shuffle=True, batch_size=2)
    got = await _first(stream, 12)
    state = stream.state_dict()
    assert state is not None
    assert "region_of_interest" in state
    rest = [s async for s in astream(part, shuffle=True, batch_size=2, state=state)]
    assert sorted(got + rest) == list(range(10, 60))
    with pytest.raises(ConfigurationError, match="it serves other items"):
        [s async for s in astream(ints_100, shuffle=True, batch_size=2, state=state)]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"seed": 7}, r"checkpoint has seed=42 but this dataset has seed=7"),
        ({"shuffle": False}, r"checkpoint has shuffle=True but this dataset has shuffle=False"),
    ],
)
async def test_a_state_of_other_settings_is_refused_at_call(ints_100: Path, kwargs: dict[str, Any], match: str) -> None:
    stream = astream(ints_100, shuffle=True, batch_size=4)
    await _first(stream, 1)
    state = stream.state_dict()
    assert state is not None
    with pytest.raises(ConfigurationError, match=match):
        astream(ints_100, **{"shuffle": True, "batch_size": 4, **kwargs, "state": state})


async def test_counts_beyond_the_epoch_are_refused_on_first_iteration(ints_100: Path) -> None:
    stream = astream(ints_100, batch_size=4)
    await _first(stream, 1)
    state = stream.state_dict()
    assert state is not None
    state["num_samples_yielded"] = state["worker_samples_yielded"][0] = 101
    with pytest.raises(ConfigurationError, match="serves only 100"):
        [s async for s in astream(ints_100, batch_size=4, state=state)]
