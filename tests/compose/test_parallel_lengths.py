"""``ParallelStreamingDataset(length=L)`` serves ``L`` steps per rank whatever the workers and ranks.

A worker with no item of a short member (more rank x worker slots than the member has chunks)
cycles through another worker's share of it, so it still serves its steps. Ranks are simulated with
``WORLD_SIZE`` / ``GLOBAL_RANK``; DataLoader workers in-process, as in ``tests/test_lengths_and_ddp.py``
(a pickled copy of the configured dataset per worker, ``detect_worker`` patched to report worker
``w`` of ``K``; torch batches each worker's items ``B`` at a time).
"""

from __future__ import annotations

import math
import pickle
from typing import TYPE_CHECKING, Any

import pytest

import litstream._torch._composite as composite_module
from litstream import ParallelStreamingDataset, StreamingDataLoader, StreamingDataset, optimize
from litstream._core._distributed import WorkerEnv

if TYPE_CHECKING:
    from pathlib import Path

LENGTH = 11
BATCH = 2


def _identity(i: int) -> int:
    return i


@pytest.fixture(scope="module")
def two_chunks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short member: 100..103 in 2 chunks, fewer than the 6 rank x worker slots of world 2 x 3 workers."""
    d = tmp_path_factory.mktemp("two_chunks")
    optimize(fn=_identity, inputs=list(range(100, 104)), output_dir=d, chunk_size=2, num_workers=1, verbose=False)
    return d


def _rank_steps(
    paths: tuple[Path, Path], world: int, rank: int, num_workers: int, mp: pytest.MonkeyPatch
) -> tuple[list[list[Any]], int]:
    """Each worker's steps on ``rank`` in epoch 1, and what ``len(loader)`` says for that rank."""
    mp.setenv("WORLD_SIZE", str(world))
    mp.setenv("GLOBAL_RANK", str(rank))
    members = [StreamingDataset(p, shuffle=True, drop_last=False) for p in paths]
    pds = ParallelStreamingDataset(members, length=LENGTH)
    loader = StreamingDataLoader(pds, batch_size=BATCH, num_workers=num_workers)
    if num_workers == 0:
        pairs = [(int(a), int(b)) for first, second in loader for a, b in zip(first, second, strict=True)]
        return [list(pairs)], len(loader)
    ds = loader.dataset
    assert isinstance(ds, ParallelStreamingDataset)
    ds.set_epoch(1)
    steps: list[list[Any]] = []
    for w in range(num_workers):
        copy = pickle.loads(pickle.dumps(ds))  # what torch hands to worker w
        mp.setattr(composite_module, "detect_worker", lambda w=w: WorkerEnv(w, num_workers))
        steps.append(list(copy))
    return steps, len(loader)


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
@pytest.mark.parametrize("world", [1, 2])
def test_every_rank_serves_length_steps(
    ints_10: Path, two_chunks: Path, num_workers: int, world: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = []
    for rank in range(world):
        with monkeypatch.context() as mp:
            per_worker, reported = _rank_steps((ints_10, two_chunks), world, rank, num_workers, mp)
        steps = [step for worker in per_worker for step in worker]
        assert len(steps) == LENGTH, f"rank {rank} of {world} with {num_workers} workers"
        for first, second in steps:  # one sample of each member per step
            assert 0 <= first < 10
            assert 100 <= second < 104
        rank_batches = sum(math.ceil(len(worker) / BATCH) for worker in per_worker)
        assert rank_batches == reported  # len(loader) is what the rank serves
        batches.append(rank_batches)
    assert len(set(batches)) == 1, f"ranks disagree on batch counts: {batches}"  # DDP lock-step holds
