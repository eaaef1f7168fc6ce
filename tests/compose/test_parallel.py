"""ParallelStreamingDataset: arguments, transforms and their generators, the endless form."""

from __future__ import annotations

import pickle
from itertools import islice
from typing import TYPE_CHECKING, Any

import pytest

from litstream import ConfigurationError, ParallelStreamingDataset, StreamingDataLoader, StreamingDataset

if TYPE_CHECKING:
    from pathlib import Path


def _pick(samples: tuple[int, ...], rngs: dict[str, Any]) -> tuple[int, float, float, int]:
    """A transform with generators: the sample plus one draw of each generator."""
    return (
        samples[0],
        rngs["random"].random(),
        float(rngs["numpy"].random()),
        int(__import__("torch").randint(0, 10**6, (1,), generator=rngs["torch"])),
    )


def _first_of(samples: tuple[int, ...]) -> int:
    return samples[0]


@pytest.mark.parametrize("length", [-1, 1.5, "10", True, float("nan")])
def test_bad_length_is_refused(ints_10: Path, length: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"length must be None .* or float\('inf'\) \(cycle forever\), got"):
        ParallelStreamingDataset([StreamingDataset(ints_10)], length=length)


def test_transform_must_take_one_or_two_arguments(ints_10: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"transform must take 1 argument .* takes 3"):
        ParallelStreamingDataset([StreamingDataset(ints_10)], transform=lambda a, b, c: a)
    with pytest.raises(ConfigurationError, match=r"transform must take 1 argument .* takes 0"):
        ParallelStreamingDataset([StreamingDataset(ints_10)], transform=lambda: 0)
    with pytest.raises(ConfigurationError, match="transform must be callable, got 3"):
        ParallelStreamingDataset([StreamingDataset(ints_10)], transform=3)  # type: ignore[arg-type]


def test_transform_gets_reproducible_generators(ints_10: Path) -> None:
    def run(**kwargs: Any) -> list[list[Any]]:
        pds = ParallelStreamingDataset([StreamingDataset(ints_10)], length=5, transform=_pick, **kwargs)
        return [list(pds) for _ in range(2)]

    first, again = run(), run()
    assert first == again  # same seed: same draws
    assert [s[0] for s in first[0]] == [0, 1, 2, 3, 4]
    assert [s[0] for s in first[1]] == [5, 6, 7, 8, 9]
    assert first[0][0][1:] != first[1][0][1:]  # the next epoch draws differently
    reset = run(reset_rngs=True, resume=False)
    assert reset[0] == reset[1]  # reset_rngs + resume=False: every epoch is the same
    assert run(seed=7) != first


def test_endless_parallel_cycles_and_resumes(ints_10: Path) -> None:
    def make(num_workers: int) -> StreamingDataLoader:
        pds = ParallelStreamingDataset([StreamingDataset(ints_10)], length=float("inf"), transform=_first_of)
        return StreamingDataLoader(pds, batch_size=2, num_workers=num_workers)

    loader = make(0)
    with pytest.raises(
        TypeError, match=r"ParallelStreamingDataset\(length=float\('inf'\)\) is endless and has no length"
    ):
        len(loader)
    passes = [[int(x) for b in islice(loader, 3) for x in b] for _ in range(2)]
    assert passes == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 0, 1]]
    resumed = make(0)
    resumed.load_state_dict(pickle.loads(pickle.dumps(loader.state_dict())))
    assert [int(x) for b in islice(resumed, 3) for x in b] == [2, 3, 4, 5, 6, 7]

    two = make(2)
    first = [int(x) for b in islice(two, 4) for x in b]
    # whole batches per worker: worker 0 holds 0..5 (3 batches), worker 1 holds 6..9 (2 batches)
    assert first == [0, 1, 6, 7, 2, 3, 8, 9]
    again = make(2)
    again.load_state_dict(two.state_dict())
    assert [int(x) for b in islice(again, 4) for x in b] == [4, 5, 6, 7, 0, 1, 8, 9]
    other = make(3)
    with pytest.raises(ConfigurationError, match=r"an endless ParallelStreamingDataset \(length=inf\) resumes only on"):
        other.load_state_dict(two.state_dict())
        next(iter(other))


def test_endless_has_no_async_form_yet(ints_10: Path) -> None:
    pds = ParallelStreamingDataset([StreamingDataset(ints_10)], length=float("inf"))
    with pytest.raises(ConfigurationError, match=r"astream\(\) of an endless ParallelStreamingDataset"):
        pds.astream()
