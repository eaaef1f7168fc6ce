"""The resumption law of ``tests/resume_law.py`` for async streams (``astream``, ``ds.astream()``).

    take k batches on every rank -> state_dict() -> pickle -> fresh stream (any world size or batch
    size) with state= -> the rest of that epoch: consumed + rest == one full epoch, as a multiset
    -> the resumed stream's state_dict() after its last sample -> a stream from it serves exactly
    what a clean stream serves in the next epoch

Several ranks are simulated in one event loop: each rank's stream is built with its ``rank`` and
``world_size``. Every rank stops after the same number of batches (DDP's lock-step) and only the
``saver_rank``'s state is restored, on every new rank.

Import it as ``from resume_law_async import assert_async_resume_law``.
"""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["AsyncLawOutcome", "assert_async_resume_law"]


class Resumable(Protocol):
    """What the law drives: ``SampleStream`` or a composite stream."""

    def __aiter__(self) -> Any: ...

    def state_dict(self) -> dict[str, Any] | None: ...


#: ``make(rank, world_size, batch_size, epoch, state)`` -> a new stream of that reader.
MakeStream = Callable[[int, int, int, int, "Mapping[str, Any] | None"], Resumable]


@dataclass(frozen=True)
class AsyncLawOutcome:
    """What one :func:`assert_async_resume_law` run saw.

    Attributes:
        consumed: Per old rank, the samples returned before the checkpoint.
        rest: Per new rank, the samples returned after resuming.
        state: The restored checkpoint (after its pickle round trip); ``None`` when nothing was served.
    """

    consumed: list[list[Any]]
    rest: list[list[Any]]
    state: dict[str, Any] | None


async def _take(stream: Resumable, count: int | None) -> list[Any]:
    out: list[Any] = []
    if count == 0:
        return out
    async for sample in stream:
        out.append(sample)
        if count is not None and len(out) == count:
            break
    return out


async def assert_async_resume_law(
    make: MakeStream,
    *,
    stop_after: int,
    batch_size: int = 1,
    world_size: int = 1,
    resumed_batch_size: int | None = None,
    resumed_world_size: int | None = None,
    saver_rank: int = 0,
    epoch: int = 1,
) -> AsyncLawOutcome:
    """Check stop / save / pickle / restore / finish / next epoch for an async stream factory.

    Args:
        make: Builds a fresh stream for ``(rank, world_size, batch_size, epoch, state)``.
        stop_after: Batches (of ``batch_size`` samples) each old rank returns before the checkpoint
            (fewer when its share is shorter).
        batch_size: Batch size of the checkpointed run.
        world_size: Ranks of the checkpointed run.
        resumed_batch_size: Batch size of the resumed run (default ``batch_size``).
        resumed_world_size: Ranks of the resumed run (default ``world_size``).
        saver_rank: The rank whose state is restored on every new rank.
        epoch: The epoch of the checkpointed run.

    Raises:
        AssertionError: a sample lost or served twice, or a next epoch that is not a clean one.
    """
    new_world = resumed_world_size or world_size
    new_batch = resumed_batch_size or batch_size
    reference = [s for r in range(world_size) for s in await _take(make(r, world_size, batch_size, epoch, None), None)]

    consumed: list[list[Any]] = []
    states: list[dict[str, Any] | None] = []
    for rank in range(world_size):
        stream = make(rank, world_size, batch_size, epoch, None)
        consumed.append(await _take(stream, stop_after * batch_size))
        states.append(stream.state_dict())
    # None: the stream was never iterated (stop_after=0), so resuming means starting afresh
    state: dict[str, Any] | None = pickle.loads(pickle.dumps(states[saver_rank]))

    finished = bool(reference) and Counter(s for part in consumed for s in part) == Counter(reference)
    rest: list[list[Any]] = []
    for rank in range(new_world):
        resumed = make(rank, new_world, new_batch, epoch, pickle.loads(pickle.dumps(state)))
        if finished:  # saved after the last sample: the resumed stream is the next epoch
            clean = await _take(make(rank, new_world, new_batch, epoch + 1, None), None)
            assert await _take(resumed, None) == clean, f"rank {rank}: a finished checkpoint must start epoch + 1"
            rest.append([])
            continue
        rest.append(await _take(resumed, None))
        after = resumed.state_dict()
        following = await _take(make(rank, new_world, new_batch, 1, after), None)
        clean = await _take(make(rank, new_world, new_batch, epoch + 1, None), None)
        assert following == clean, f"rank {rank}: the epoch after the resumed one is not a clean epoch"

    served = [s for part in consumed for s in part] + [s for part in rest for s in part]
    counts, expected = Counter(served), Counter(reference)  # multisets: a cycling Parallel repeats samples
    missing = sorted((expected - counts).elements())
    extra = sorted((counts - expected).elements())
    problems = f"stop_after={stop_after}: lost {missing[:10]}, served too often {extra[:10]}"
    assert not missing, problems
    assert not extra, problems
    return AsyncLawOutcome(consumed, rest, state)
