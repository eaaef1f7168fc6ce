"""The resumption law, as one helper every reader's tests can call (torchdata's ``run_test_save_load_state``).

    stop after k batches -> state_dict() -> pickle -> fresh loader (any topology) -> load_state_dict()
    -> the rest of that epoch: consumed + rest == one full epoch, as a multiset (no loss, no repeat)
    -> one more epoch: exactly what a clean loader serves in that epoch

Several ranks are simulated in one process: each rank's loader is built, iterated and checkpointed
with ``WORLD_SIZE`` / ``GLOBAL_RANK`` set for it, one rank after the other. All ranks stop after the
same number of batches (DDP's lock-step) and only the ``saver_rank``'s state is restored, on every
new rank, as a DDP job that checkpoints on rank 0 would do.

Import it from tests as ``from resume_law import assert_resume_law`` (``tests/`` is on ``sys.path``
through its ``conftest.py``).
"""

from __future__ import annotations

import os
import pickle
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from litstream import StreamingDataLoader

__all__ = ["LawOutcome", "as_items", "assert_resume_law", "rank_env"]

MakeLoader = Callable[[], StreamingDataLoader]

# Clean epochs already iterated, per factory: {(world_size, rank, epoch): batches as lists}. Calling the
# law several times with one factory (say for several stop_after values) then iterates each clean
# epoch once. Factories must be deterministic, which the law requires anyway.
_CLEAN: weakref.WeakKeyDictionary[MakeLoader, dict[tuple[int, int, int], list[list[Any]]]] = weakref.WeakKeyDictionary()


def _clean_epoch(make: MakeLoader, *, world_size: int, rank: int, epoch: int) -> list[list[Any]]:
    """The batches (as lists) a fresh loader from ``make`` serves on ``rank`` in ``epoch`` (cached)."""
    cache = _CLEAN.setdefault(make, {})
    key = (world_size, rank, epoch)
    if key not in cache:
        with rank_env(rank, world_size):
            loader = make()
            loader.current_epoch = epoch - 1  # its next iter() is `epoch`
            cache[key] = [as_items(batch) for batch in loader]
    return cache[key]


@contextmanager
def rank_env(rank: int, world_size: int) -> Iterator[None]:
    """Run the body as ``rank`` of ``world_size`` (``WORLD_SIZE`` / ``GLOBAL_RANK``), then restore."""
    saved = {name: os.environ.get(name) for name in ("WORLD_SIZE", "GLOBAL_RANK")}
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ["GLOBAL_RANK"] = str(rank)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def as_items(batch: Any) -> list[Any]:
    """The samples of a collated batch of scalars (a tensor or a list) as plain Python values."""
    if isinstance(batch, torch.Tensor):
        values: list[Any] = batch.tolist()
        return values
    return list(batch)


def _flatten(batches: list[Any]) -> list[Any]:
    return [item for batch in batches for item in as_items(batch)]


def _take(loader: StreamingDataLoader, count: int) -> list[Any]:
    """The first ``count`` batches of a new epoch of ``loader``; the iterator is closed afterwards."""
    out: list[Any] = []
    if count <= 0:
        return out
    it = iter(loader)
    try:
        for batch in it:
            out.append(batch)
            if len(out) == count:
                break
    finally:
        it.close()
    return out


@dataclass(frozen=True)
class LawOutcome:
    """What one :func:`assert_resume_law` run saw, for extra assertions.

    Attributes:
        consumed: Per old rank, the samples delivered before the checkpoint.
        rest: Per new rank, the samples delivered after resuming, until that epoch's end.
        state: The checkpoint that was restored (after its pickle round trip).
    """

    consumed: list[list[Any]]
    rest: list[list[Any]]
    state: dict[str, Any]


def assert_resume_law(
    make_loader: MakeLoader,
    *,
    stop_after: int | Callable[[int], int],
    make_resumed_loader: MakeLoader | None = None,
    world_size: int = 1,
    resumed_world_size: int | None = None,
    saver_rank: int = 0,
) -> LawOutcome:
    """Check stop / save / pickle / restore / finish-the-epoch / next-epoch for a loader factory.

    Args:
        make_loader: Builds a fresh loader of the checkpointed run; called inside each rank's env.
        stop_after: Batches each old rank takes before the checkpoint (clamped to what the rank
            has), or a function of the rank's batches per epoch (``len(loader)``) returning it.
        make_resumed_loader: Builds a loader of the resumed run (default ``make_loader``); it may
            use other ``num_workers`` / ``batch_size``.
        world_size: Ranks of the checkpointed run.
        resumed_world_size: Ranks of the resumed run (default ``world_size``).
        saver_rank: The rank whose state is restored on every new rank.

    Raises:
        AssertionError: a sample lost or served twice, or a next epoch that is not a clean one.
    """
    make_resumed = make_resumed_loader or make_loader
    new_world = resumed_world_size or world_size

    reference = [
        item
        for rank in range(world_size)
        for batch in _clean_epoch(make_loader, world_size=world_size, rank=rank, epoch=1)
        for item in batch
    ]

    consumed: list[list[Any]] = []
    states: list[dict[str, Any]] = []
    for rank in range(world_size):
        with rank_env(rank, world_size):
            loader = make_loader()
            count = stop_after(len(loader)) if callable(stop_after) else stop_after
            consumed.append(_flatten(_take(loader, count)))
            states.append(loader.state_dict())
    state: dict[str, Any] = pickle.loads(pickle.dumps(states[saver_rank]))
    epoch = max(state["current_epoch"], 1)
    all_consumed = [item for part in consumed for item in part]
    finished = Counter(all_consumed) == Counter(reference)

    rest: list[list[Any]] = []
    for rank in range(new_world):
        with rank_env(rank, new_world):
            resumed = make_resumed()
            resumed.load_state_dict(pickle.loads(pickle.dumps(state)))
            rest.append([] if finished else _flatten(list(resumed)))
            if not finished:
                assert resumed.current_epoch == epoch, f"rank {rank}: the resumed epoch is {resumed.current_epoch}"
            following = [as_items(b) for b in resumed]
            assert resumed.current_epoch == epoch + 1
        expected = _clean_epoch(make_resumed, world_size=new_world, rank=rank, epoch=epoch + 1)
        assert following == expected, f"rank {rank}: the epoch after the resumed one is not a clean epoch"

    served = all_consumed + [item for part in rest for item in part]
    counts = Counter(served)
    repeated = sorted(item for item, n in counts.items() if n > 1)
    missing = sorted((Counter(reference) - counts).elements())
    extra = sorted((counts - Counter(reference)).elements())
    problems = f"stop_after={stop_after!r}: served twice {repeated[:10]}, lost {missing[:10]}, foreign {extra[:10]}"
    assert not repeated, problems
    assert not missing, problems
    assert not extra, problems
    return LawOutcome(consumed, rest, state)
