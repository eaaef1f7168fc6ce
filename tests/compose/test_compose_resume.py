"""Resume of Combined / Parallel through ``StreamingDataLoader``: the law helper (same and other
topologies), exact continuation of a weighted mix, and case B13 (Parallel cycling resumes)."""

from __future__ import annotations

import functools
import pickle
from itertools import islice
from typing import TYPE_CHECKING, Any

import pytest
from compose_sets import flat, take

from litstream import CombinedStreamingDataset, ParallelStreamingDataset, StreamingDataLoader, StreamingDataset
from resume_law import as_items, assert_resume_law

if TYPE_CHECKING:
    from pathlib import Path


def pair_code(samples: tuple[int, ...]) -> int:
    """Parallel transform: one int naming the tuple (members hold < 10_000)."""
    return samples[0] * 10_000 + samples[1]


# ------------------------------------------------------------------------------------------ factories


def combined_loader(
    paths: tuple[Path, ...],
    num_workers: int,
    batch_size: int,
    shuffle: Any,
    weights: list[float] | None = None,
    drop_last: bool | None = None,
) -> StreamingDataLoader:
    members = [StreamingDataset(p, shuffle=shuffle, drop_last=drop_last) for p in paths]
    cds = CombinedStreamingDataset(members, seed=5, weights=weights, iterate_over_all=weights is None)
    return StreamingDataLoader(cds, batch_size=batch_size, num_workers=num_workers)


def parallel_loader(
    paths: tuple[Path, ...], num_workers: int, batch_size: int, shuffle: Any, length: int | None, resume: bool = True
) -> StreamingDataLoader:
    members = [StreamingDataset(p, shuffle=shuffle) for p in paths]
    pds = ParallelStreamingDataset(members, length=length, transform=pair_code, resume=resume)
    return StreamingDataLoader(pds, batch_size=batch_size, num_workers=num_workers)


# ---------------------------------------------------------------------------------------- Combined law

TOPOLOGIES = [  # (num_workers, batch_size) before -> after
    ((0, 4), (0, 4)),
    ((2, 3), (2, 3)),
    ((2, 3), (0, 3)),
    ((0, 4), (2, 4)),
    ((2, 3), (3, 2)),
]


@pytest.mark.parametrize(("before", "after"), TOPOLOGIES)
@pytest.mark.parametrize("shuffle", [False, True])
def test_combined_iterate_over_all_obeys_the_resume_law(
    ints_50: Path, thousands_50: Path, odd_37: Path, before: tuple[int, int], after: tuple[int, int], shuffle: bool
) -> None:
    paths = (ints_50, thousands_50, odd_37)
    make = functools.partial(combined_loader, paths, *before, shuffle)
    make_resumed = functools.partial(combined_loader, paths, *after, shuffle)
    for stop in (1, 7, lambda n: n - 1):
        outcome = assert_resume_law(make, stop_after=stop, make_resumed_loader=make_resumed)
        served = outcome.consumed[0] + outcome.rest[0]
        assert sorted(served) == list(range(50)) + list(range(1000, 1050)) + list(range(2000, 2037))


def test_combined_elastic_over_ranks_obeys_the_resume_law(ints_50: Path, thousands_50: Path, odd_37: Path) -> None:
    paths = (ints_50, thousands_50, odd_37)
    make = functools.partial(combined_loader, paths, 2, 2, True, drop_last=False)
    make_resumed = functools.partial(combined_loader, paths, 1, 3, True, drop_last=False)
    outcome = assert_resume_law(
        make, stop_after=5, make_resumed_loader=make_resumed, world_size=2, resumed_world_size=3
    )
    served = [x for part in outcome.consumed + outcome.rest for x in part]
    assert sorted(served) == list(range(50)) + list(range(1000, 1050)) + list(range(2000, 2037))


def test_combined_resumed_twice_on_three_topologies(ints_50: Path, thousands_50: Path, odd_37: Path) -> None:
    paths = (ints_50, thousands_50, odd_37)
    first = combined_loader(paths, 2, 3, True)
    part1 = take(first, 5)
    second = combined_loader(paths, 0, 4, True)
    second.load_state_dict(pickle.loads(pickle.dumps(first.state_dict())))
    part2 = take(second, 6)
    third = combined_loader(paths, 3, 2, True)
    third.load_state_dict(pickle.loads(pickle.dumps(second.state_dict())))
    part3 = flat(third)
    assert sorted(part1 + part2 + part3) == list(range(50)) + list(range(1000, 1050)) + list(range(2000, 2037))


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("stop", [1, 9, 20])
def test_weighted_combined_resumes_exactly_where_the_uninterrupted_stream_is(
    mix_sets: tuple[Path, Path, Path], num_workers: int, stop: int
) -> None:
    paths = mix_sets
    make = functools.partial(combined_loader, paths, num_workers, 25, True, [0.2, 0.5, 0.3])
    uninterrupted = [as_items(b) for b in islice(make(), 60)]
    loader = make()
    first = take(loader, stop)
    resumed = make()
    resumed.load_state_dict(pickle.loads(pickle.dumps(loader.state_dict())))
    rest = [as_items(b) for b in islice(resumed, 60 - stop)]
    assert first == [x for b in uninterrupted[:stop] for x in b]
    assert rest == uninterrupted[stop:]


def test_weighted_combined_obeys_the_resume_law_on_the_same_topology(ints_50: Path, odd_37: Path) -> None:
    make = functools.partial(combined_loader, (ints_50, odd_37), 2, 3, True, [0.7, 0.3])
    for stop in (2, 5):
        assert_resume_law(make, stop_after=stop)


# ---------------------------------------------------------------------------------------- Parallel law


@pytest.mark.parametrize(("before", "after"), TOPOLOGIES)
@pytest.mark.parametrize(("length", "resume"), [(None, True), (61, True), (61, False)])
def test_parallel_obeys_the_resume_law(
    ints_50: Path, odd_37: Path, before: tuple[int, int], after: tuple[int, int], length: int | None, resume: bool
) -> None:
    paths = (ints_50, odd_37)
    make = functools.partial(parallel_loader, paths, *before, True, length, resume)
    make_resumed = functools.partial(parallel_loader, paths, *after, True, length, resume)
    for stop in (1, 6, lambda n: n - 1):
        outcome = assert_resume_law(make, stop_after=stop, make_resumed_loader=make_resumed)
        served = outcome.consumed[0] + outcome.rest[0]
        pairs = [divmod(code, 10_000) for code in served]
        assert len(served) == sum(make().dataset.worker_lengths(*before))  # type: ignore[attr-defined]
        if before[0] <= 1:
            assert len(served) == (length or 37)
        assert all(0 <= a < 50 and 2000 <= b < 2037 for a, b in pairs)


def test_parallel_without_length_zips_the_members_in_order(ints_50: Path, odd_37: Path) -> None:
    pds = ParallelStreamingDataset([StreamingDataset(ints_50), StreamingDataset(odd_37)])
    assert len(pds) == 37
    assert list(pds) == [(i, 2000 + i) for i in range(37)]


def test_parallel_with_length_cycles_the_shorter_member(ints_50: Path, odd_37: Path) -> None:
    pds = ParallelStreamingDataset([StreamingDataset(ints_50), StreamingDataset(odd_37)], length=61)
    assert len(pds) == 61
    assert list(pds) == [(i % 50, 2000 + i % 37) for i in range(61)]
    # resume=True without a loader: the next epoch continues the cycle
    assert list(pds) == [((61 + i) % 50, 2000 + (61 + i) % 37) for i in range(61)]


# -------------------------------------------------------------------------------------------------- B13


def b13_loader(d: Path, resume: bool = True) -> StreamingDataLoader:
    pds = ParallelStreamingDataset([StreamingDataset(d, shuffle=False)], length=999, resume=resume)
    return StreamingDataLoader(pds, batch_size=1)


def first4(loader: StreamingDataLoader) -> list[int]:
    out = []
    for batch in loader:
        (sample,) = batch  # a 1-tuple of tensors of one item
        out.append(int(sample[0]))
        if len(out) == 4:
            break
    return out


@pytest.mark.parametrize("external", [False, True], ids=["breaks-only", "load_state_dict-between"])
def test_b13_parallel_cycling_resumes_when_the_epoch_is_cut_short(ints_10: Path, external: bool) -> None:
    loader = b13_loader(ints_10)
    passes = []
    for _ in range(3):
        passes.append(first4(loader))
        if external:
            loader.load_state_dict(loader.state_dict())
    assert passes == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]


def test_b13_external_load_into_a_new_loader(ints_10: Path) -> None:
    loader = b13_loader(ints_10)
    passes = [first4(loader)]
    for _ in range(2):
        state = pickle.loads(pickle.dumps(loader.state_dict()))
        loader = b13_loader(ints_10)
        loader.load_state_dict(state)
        passes.append(first4(loader))
    assert passes == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]


def test_b13_resume_false_restarts_every_epoch(ints_10: Path) -> None:
    loader = b13_loader(ints_10, resume=False)
    assert [first4(loader) for _ in range(3)] == [[0, 1, 2, 3]] * 3


def test_parallel_cycling_continues_across_complete_epochs_with_workers(ints_50: Path, odd_37: Path) -> None:
    def per_worker(batches: list[list[int]]) -> list[list[int]]:
        # both workers hold the same share, so torch alternates them strictly: batch i is worker i % 2's
        return [[x for b in batches[w::2] for x in b] for w in range(2)]

    loader = parallel_loader((ints_50, odd_37), 2, 4, False, 30)
    epochs = [per_worker([as_items(b) for b in loader]) for _ in range(3)]
    assert [len(e[0]) + len(e[1]) for e in epochs] == [30, 30, 30]
    # three epochs of 30 steps continue each worker's cycle: together they are one epoch of 90
    one = per_worker([as_items(b) for b in parallel_loader((ints_50, odd_37), 2, 4, False, 90)])
    assert [epochs[0][w] + epochs[1][w] + epochs[2][w] for w in range(2)] == one


@pytest.mark.parametrize("length", [None, 40])
def test_parallel_elastic_over_ranks_keeps_tuples_intact(ints_50: Path, odd_37: Path, length: int | None) -> None:
    paths = (ints_50, odd_37)
    # No shuffle: with it, a cycle (the member's next epoch) may hand a worker items another worker
    # already paired, so one tuple could legitimately occur twice in an epoch, which the law forbids.
    make = functools.partial(parallel_loader, paths, 2, 2, False, length)
    make_resumed = functools.partial(parallel_loader, paths, 0, 3, False, length)
    outcome = assert_resume_law(
        make, stop_after=3, make_resumed_loader=make_resumed, world_size=2, resumed_world_size=1
    )
    served = [divmod(x, 10_000) for part in outcome.consumed + outcome.rest for x in part]
    assert len(served) == (2 * length if length else 2 * 18)
    assert all(0 <= a < 50 and 2000 <= b < 2037 for a, b in served)


def test_composites_refuse_several_nodes(ints_50: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("GLOBAL_RANK", "0")
    monkeypatch.setenv("NNODES", "2")
    cds = CombinedStreamingDataset([StreamingDataset(ints_50)])
    with pytest.raises(Exception, match=r"CombinedStreamingDataset does not support num_nodes=2 yet"):
        len(cds)


def test_window_shuffled_members_obey_the_resume_law(ints_50: Path, thousands_50: Path, odd_37: Path) -> None:
    paths = (ints_50, thousands_50, odd_37)
    make = functools.partial(combined_loader, paths, 2, 3, "window")
    for after in ((2, 3), (0, 4)):
        assert_resume_law(
            make, stop_after=5, make_resumed_loader=functools.partial(combined_loader, paths, *after, "window")
        )
    make = functools.partial(parallel_loader, paths[::2], 2, 3, "window", 33)
    assert_resume_law(
        make, stop_after=3, make_resumed_loader=functools.partial(parallel_loader, paths[::2], 0, 4, "window", 33)
    )
