"""Tests for the pure read plan (``litstream.read.plan._plan``).

Three layers: golden vectors from the spec (``read.md`` §3.1, §3.2, §3.8, §4.4), a live comparison
against the installed LitData (its shuffler classes over a full parameter grid, and end-to-end
``StreamingDataset`` iteration over a deterministic sample of it), and hypothesis properties.
"""

from __future__ import annotations

import gc
import itertools
import random
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litstream._core._errors import LitstreamError, PlanError
from litstream.read.plan._plan import (
    ChunkSlice,
    assign_items,
    chunk_order,
    item_order,
    items_per_rank,
    replay_skip,
    resume_position,
    worker_plan,
)
from peer import require_peer

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

# --------------------------------------------------------------------------------------------- helpers


def _uniform(num_items: int, chunk_size: int) -> list[tuple[int, int]]:
    """Regions of a dataset of ``num_items`` written ``chunk_size`` items per chunk (last one short)."""
    sizes = [min(chunk_size, num_items - start) for start in range(0, num_items, chunk_size)]
    return [(0, size) for size in sizes]


def _served(
    plan: Sequence[ChunkSlice], *, num_chunks: int, shuffle: bool, seed: int, epoch: int
) -> list[tuple[int, int]]:
    """The ``(chunk, chunk-local item)`` pairs a worker serves, in order."""
    return [
        (piece.chunk_index, item)
        for piece in plan
        for item in item_order(piece, num_chunks=num_chunks, shuffle=shuffle, seed=seed, epoch=epoch)
    ]


def _global_ids(plan: Sequence[ChunkSlice], chunk_size: int, **order: Any) -> list[int]:
    return [c * chunk_size + i for c, i in _served(plan, **order)]


# ------------------------------------------------------------------------------------ golden vectors


def test_spec_3_1_worked_example_budgets_and_slices() -> None:
    plans = assign_items(
        [0, 1, 2, 3],
        [(0, 6), (0, 7), (0, 6), (0, 7)],
        world_size=2,
        num_workers=8,
        batch_size=6,
        drop_last=False,
    )
    assert [sum(len(p) for p in plan) for plan in plans] == [6, 6, 0, 0, 0, 0, 0, 0, 6, 6, 2, 0, 0, 0, 0, 0]
    assert plans[0] == [ChunkSlice(0, 0, 6)]
    assert plans[1] == [ChunkSlice(1, 0, 6)]
    assert plans[8] == [ChunkSlice(1, 6, 7), ChunkSlice(2, 0, 5)]
    assert plans[9] == [ChunkSlice(2, 5, 6), ChunkSlice(3, 0, 5)]
    assert plans[1 * 8 + 2] == [ChunkSlice(3, 5, 7)]  # rank 1 worker 2: the 2 leftovers


def test_spec_3_1_drop_last_drops_the_leftovers() -> None:
    plans = assign_items(
        [0, 1, 2, 3],
        [(0, 6), (0, 7), (0, 6), (0, 7)],
        world_size=2,
        num_workers=8,
        batch_size=6,
        drop_last=True,
    )
    assert [sum(len(p) for p in plan) for plan in plans] == [6, 6, 0, 0, 0, 0, 0, 0, 6, 6, 0, 0, 0, 0, 0, 0]
    assert plans[9] == [ChunkSlice(2, 5, 6), ChunkSlice(3, 0, 5)]


@pytest.mark.parametrize(
    ("rank", "drop_last", "first_ten", "count"),
    [
        (0, True, [536, 530, 531, 532, 534, 537, 535, 533, 538, 539], 548),
        (1, True, [248, 249, 889, 881, 883, 885, 886, 887, 888, 884], 548),
        (1, False, [248, 249, 889, 881, 883, 885, 886, 887, 888, 884], 549),
    ],
)
def test_spec_3_8_golden_1097_items_chunk_10(rank: int, drop_last: bool, first_ten: list[int], count: int) -> None:
    regions = _uniform(1097, 10)
    plan = worker_plan(
        regions,
        rank=rank,
        world_size=2,
        worker=0,
        num_workers=1,
        batch_size=1,
        drop_last=drop_last,
        shuffle=True,
        seed=42,
        epoch=1,
    )
    served = _global_ids(plan, 10, num_chunks=len(regions), shuffle=True, seed=42, epoch=1)
    assert served[:10] == first_ten
    assert len(served) == count
    kwargs: dict[str, Any] = {"world_size": 2, "num_workers": 1, "batch_size": 1, "drop_last": drop_last}
    assert items_per_rank(regions, rank=rank, **kwargs) == count


@pytest.mark.parametrize(
    ("rank", "first_ten"),
    [
        (0, [1144, 1030, 1092, 1095, 1171, 1192, 1085, 1161, 1134, 1165]),
        (1, [991, 911, 961, 941, 950, 948, 986, 957, 955, 998]),
    ],
)
def test_spec_3_8_golden_1222_items_chunk_500(rank: int, first_ten: list[int]) -> None:
    regions = _uniform(1222, 500)
    assert regions == [(0, 500), (0, 500), (0, 222)]
    plan = worker_plan(
        regions,
        rank=rank,
        world_size=2,
        worker=0,
        num_workers=0,
        batch_size=1,
        drop_last=True,
        shuffle=True,
        seed=42,
        epoch=1,
    )
    served = _global_ids(plan, 500, num_chunks=3, shuffle=True, seed=42, epoch=1)
    assert served[:10] == first_ten
    assert len(served) == 611


@pytest.mark.parametrize(("drop_last", "rank1_items"), [(True, list(range(50, 100))), (False, list(range(50, 101)))])
def test_spec_3_2_no_shuffle_gives_rank_0_the_beginning(drop_last: bool, rank1_items: list[int]) -> None:
    regions = _uniform(101, 10)
    order: dict[str, Any] = {"num_chunks": 11, "shuffle": False, "seed": 42, "epoch": 1}
    common: dict[str, Any] = {
        "world_size": 2,
        "worker": 0,
        "num_workers": 1,
        "batch_size": 1,
        "drop_last": drop_last,
    }
    rank0 = worker_plan(regions, rank=0, shuffle=False, seed=42, epoch=1, **common)
    rank1 = worker_plan(regions, rank=1, shuffle=False, seed=42, epoch=1, **common)
    assert _global_ids(rank0, 10, **order) == list(range(50))
    assert _global_ids(rank1, 10, **order) == rank1_items
    assert rank1[0] == ChunkSlice(5, 0, 10)


@pytest.mark.parametrize(
    ("n", "batch_size", "num_workers", "expected"),
    [
        (27, 8, 2, [16, 11]),
        (27, 7, 2, [14, 13]),
        (0, 4, 3, [0, 0, 0]),
        (12, 4, 3, [4, 4, 4]),
        (13, 4, 3, [5, 4, 4]),
        (5, 3, 0, [5]),
        (40, 4, 3, [16, 12, 12]),
    ],
)
def test_replay_skip_vectors(n: int, batch_size: int, num_workers: int, expected: list[int]) -> None:
    assert replay_skip(n, batch_size=batch_size, num_workers=num_workers) == expected


def test_resume_position_vectors() -> None:
    plan = [ChunkSlice(3, 5, 7), ChunkSlice(0, 0, 4), ChunkSlice(9, 2, 3)]
    assert resume_position(plan, 0) == (0, 0)
    assert resume_position(plan, 1) == (0, 1)
    assert resume_position(plan, 2) == (1, 0)
    assert resume_position(plan, 5) == (1, 3)
    assert resume_position(plan, 6) == (2, 0)
    assert resume_position(plan, 7) == (3, 0)
    assert resume_position(plan, 100) == (3, 0)
    assert resume_position([], 0) == (0, 0)


def test_chunk_order_and_item_order_vectors() -> None:
    assert chunk_order(5, shuffle=False, seed=42, epoch=3) == [0, 1, 2, 3, 4]
    assert chunk_order(0, shuffle=True, seed=42, epoch=1) == []
    assert chunk_order(5, shuffle=True, seed=42, epoch=1) == [0, 2, 1, 3, 4]  # RandomState([42, 1])
    # 1222/500 golden: rank 0 starts in chunk 2 (ids 1000..1221), rank 1 in chunk 1 (ids 889..999)
    assert chunk_order(3, shuffle=True, seed=42, epoch=1) == [2, 1, 0]
    piece = ChunkSlice(2, 3, 9)
    assert item_order(piece, num_chunks=4, shuffle=False, seed=1, epoch=1) == [3, 4, 5, 6, 7, 8]
    shuffled = item_order(piece, num_chunks=4, shuffle=True, seed=1, epoch=1)
    assert shuffled == [7, 8, 6, 5, 4, 3]  # RandomState([1, 4, 1, 2]).permutation(arange(3, 9))


@pytest.mark.parametrize("offset", [0, 1, 17, 1000, 2**40])
def test_shifted_arange_permutes_positions_identically(offset: int) -> None:
    """LitData permutes global interval ids; the permutation only depends on the length."""
    key = [7, 11, 2, 5]
    local = np.random.RandomState(key).permutation(np.arange(4, 29))
    shifted = np.random.RandomState(key).permutation(np.arange(offset + 4, offset + 29))
    assert (shifted - offset).tolist() == local.tolist()


def test_num_workers_zero_counts_as_one_worker() -> None:
    regions = _uniform(23, 4)
    zero = assign_items(range(6), regions, world_size=2, num_workers=0, batch_size=3, drop_last=False)
    one = assign_items(range(6), regions, world_size=2, num_workers=1, batch_size=3, drop_last=False)
    assert zero == one
    assert [sum(len(p) for p in plan) for plan in zero] == [9, 14]
    assert items_per_rank(regions, rank=1, world_size=2, num_workers=0, batch_size=3, drop_last=False) == 14


def test_empty_regions_and_tiny_datasets() -> None:
    regions = [(0, 0), (2, 5), (4, 4), (0, 1)]
    plans = assign_items([2, 0, 3, 1], regions, world_size=1, num_workers=2, batch_size=2, drop_last=False)
    assert plans == [[ChunkSlice(3, 0, 1), ChunkSlice(1, 2, 3)], [ChunkSlice(1, 3, 5)]]
    nothing = assign_items([], [], world_size=2, num_workers=2, batch_size=4, drop_last=False)
    assert nothing == [[], [], [], []]
    # fewer items than one batch: everything to worker 0 of the last rank, or nothing with drop_last
    small = assign_items([0], [(0, 3)], world_size=2, num_workers=2, batch_size=4, drop_last=False)
    assert small == [[], [], [ChunkSlice(0, 0, 3)], []]
    assert assign_items([0], [(0, 3)], world_size=2, num_workers=2, batch_size=4, drop_last=True) == [[]] * 4


def test_plan_error_is_a_value_error() -> None:
    assert issubclass(PlanError, ValueError)
    assert issubclass(PlanError, LitstreamError)


_BASE: dict[str, Any] = {
    "rank": 0,
    "world_size": 2,
    "worker": 0,
    "num_workers": 2,
    "batch_size": 4,
    "drop_last": False,
    "shuffle": True,
    "seed": 42,
    "epoch": 1,
}


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"world_size": 0}, r"world_size must be >= 1, got 0"),
        ({"world_size": True}, r"world_size must be an int, got the bool True"),
        ({"rank": 2}, r"rank must be < world_size=2, got 2"),
        ({"rank": -1}, r"rank must be >= 0, got -1"),
        ({"worker": 2}, r"worker must be < max\(num_workers, 1\)=2, got 2"),
        ({"num_workers": -1}, r"num_workers must be >= 0, got -1"),
        ({"batch_size": 0}, r"batch_size must be >= 1, got 0; pass the DataLoader's batch_size"),
        ({"batch_size": 2.0}, r"batch_size must be an int, got float 2.0"),
        ({"seed": -1}, r"seed must be >= 0, got -1"),
        ({"seed": 2**32}, r"seed must be < 2\*\*32, got 4294967296"),
        ({"epoch": 0}, r"epoch must be >= 1, got 0; epochs are 1-based"),
    ],
)
def test_bad_arguments_name_argument_value_and_fix(override: dict[str, Any], match: str) -> None:
    with pytest.raises(PlanError, match=match):
        worker_plan([(0, 10)], **{**_BASE, **override})


def test_bad_inputs_of_the_other_functions() -> None:
    with pytest.raises(PlanError, match=r"regions\[1\] end must be >= 3, got 2"):
        assign_items([0, 1], [(0, 4), (3, 2)], world_size=1, num_workers=1, batch_size=1, drop_last=False)
    with pytest.raises(PlanError, match=r"chunk_order\[1\] is 5 but there are only 2 regions"):
        assign_items([0, 5], [(0, 4), (0, 2)], world_size=1, num_workers=1, batch_size=1, drop_last=False)
    with pytest.raises(PlanError, match=r"num_samples_yielded must be >= 0, got -8"):
        replay_skip(-8, batch_size=8, num_workers=1)
    with pytest.raises(PlanError, match=r"consumed must be >= 0, got -1"):
        resume_position([ChunkSlice(0, 0, 1)], -1)
    with pytest.raises(PlanError, match=r"num_chunks must be >= 4, got 3"):
        item_order(ChunkSlice(3, 0, 1), num_chunks=3, shuffle=True, seed=1, epoch=1)
    with pytest.raises(PlanError, match=r"num_chunks must be >= 0, got -1"):
        chunk_order(-1, shuffle=False, seed=1, epoch=1)


# --------------------------------------------------------------------------- live comparison: LitData


def _litdata_shuffler(intervals: list[tuple[int, int, int, int]], *, shuffle: bool, seed: int, drop_last: bool) -> Any:
    """LitData's own single-node shuffler over a stand-in cache that only knows the intervals."""
    shuffle_mod = require_peer("litdata.streaming.shuffle")
    cache = SimpleNamespace(
        get_chunk_intervals=lambda: intervals, _reader=SimpleNamespace(_config=None, _max_cache_size=0)
    )
    cls = shuffle_mod.FullShuffle if shuffle else shuffle_mod.NoShuffle
    return cls(cache, seed, drop_last)


def _intervals(regions: Sequence[tuple[int, int]], chunk_sizes: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """LitData intervals ``(chunk_start, roi_start, roi_end, chunk_end)`` in its global id space."""
    offsets = [0, *itertools.accumulate(chunk_sizes)]
    return [(offsets[c], offsets[c] + s, offsets[c] + e, offsets[c + 1]) for c, (s, e) in enumerate(regions)]


def _assert_matches_litdata(
    regions: list[tuple[int, int]],
    chunk_sizes: list[int],
    *,
    world_size: int,
    num_workers: int,
    batch_size: int,
    drop_last: bool,
    shuffle: bool,
    seed: int,
    epoch: int,
) -> None:
    env_mod = require_peer("litdata.utilities.env")
    intervals = _intervals(regions, chunk_sizes)
    shuffler = _litdata_shuffler(intervals, shuffle=shuffle, seed=seed, drop_last=drop_last)
    env = env_mod._DistributedEnv(world_size, 0, 1)
    lit_chunks, lit_intervals = shuffler.get_chunks_and_intervals_per_workers(env, num_workers, batch_size, epoch)
    order = chunk_order(len(regions), shuffle=shuffle, seed=seed, epoch=epoch)
    ours = assign_items(
        order,
        regions,
        world_size=world_size,
        num_workers=num_workers,
        batch_size=batch_size,
        drop_last=drop_last,
    )
    assert len(ours) == len(lit_chunks) == world_size * num_workers
    for g, plan in enumerate(ours):
        theirs = [
            ChunkSlice(int(c), iv[1] - iv[0], iv[2] - iv[0])
            for c, iv in zip(lit_chunks[g], lit_intervals[g], strict=True)
        ]
        assert plan == theirs, f"worker {g}"
        lit_served = [
            (int(c), int(i) - iv[0])
            for c, iv in zip(lit_chunks[g], lit_intervals[g], strict=True)
            for i in shuffler(np.arange(iv[1], iv[2]), len(regions), epoch, int(c))
        ]
        assert _served(plan, num_chunks=len(regions), shuffle=shuffle, seed=seed, epoch=epoch) == lit_served
    for rank in range(world_size):
        rank_env = env_mod._DistributedEnv(world_size, rank, 1)
        kwargs: dict[str, Any] = {"world_size": world_size, "num_workers": num_workers, "batch_size": batch_size}
        expected = shuffler.get_len(rank_env, num_workers, batch_size, epoch)
        assert items_per_rank(regions, rank=rank, drop_last=drop_last, **kwargs) == expected


_SIZES = [(n, cs) for n in (1, 7, 50, 101) for cs in (1, 3, 10)]
_TOPOLOGY = list(itertools.product((1, 2, 3), (1, 2, 3), (1, 4), (42, 7), (1, 2)))  # W, K, B, seed, epoch


@pytest.mark.litdata
@pytest.mark.parametrize(("n", "chunk_size"), _SIZES)
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_grid_matches_litdata_shufflers(n: int, chunk_size: int, shuffle: bool, drop_last: bool) -> None:
    regions = _uniform(n, chunk_size)
    for world_size, num_workers, batch_size, seed, epoch in _TOPOLOGY:
        _assert_matches_litdata(
            regions,
            [end for _, end in regions],
            world_size=world_size,
            num_workers=num_workers,
            batch_size=batch_size,
            drop_last=drop_last,
            shuffle=shuffle,
            seed=seed,
            epoch=epoch,
        )


@pytest.mark.litdata
@pytest.mark.parametrize("case", range(40))
def test_regions_of_interest_match_litdata_shufflers(case: int) -> None:
    rng = random.Random(case)
    chunk_sizes = [rng.randint(1, 12) for _ in range(rng.randint(1, 9))]
    regions = []
    for size in chunk_sizes:
        start = rng.randint(0, size)
        regions.append((start, rng.randint(start, size)))
    _assert_matches_litdata(
        regions,
        chunk_sizes,
        world_size=rng.randint(1, 4),
        num_workers=rng.randint(1, 4),
        batch_size=rng.randint(1, 5),
        drop_last=rng.random() < 0.5,
        shuffle=rng.random() < 0.5,
        seed=rng.randint(0, 2**32 - 1),
        epoch=rng.randint(1, 4),
    )


def _full_grid() -> list[tuple[int, int, int, int, int, bool, bool, int, int]]:
    return [
        (n, cs, w, k, b, dl, sh, seed, ep)
        for (n, cs), (w, k, b, seed, ep) in itertools.product(_SIZES, _TOPOLOGY)
        for dl, sh in itertools.product((False, True), (False, True))
    ]


_E2E_CASES = random.Random(20260818).sample(_full_grid(), 48)


@pytest.fixture(scope="module")
def written_datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, int], Path]:
    """One LitData dataset per (n, chunk_size) whose item i is the int i."""
    writer_mod = require_peer("litdata.streaming.writer")
    out = {}
    for n, chunk_size in sorted({(case[0], case[1]) for case in _E2E_CASES}):
        path = tmp_path_factory.mktemp(f"litdata_{n}_{chunk_size}")
        writer = writer_mod.BinaryWriter(str(path), chunk_size=chunk_size)
        for i in range(n):
            writer[i] = i
        writer.done()
        writer.merge()
        out[(n, chunk_size)] = path
    return out


@pytest.mark.litdata
@pytest.mark.filterwarnings(r"ignore:unclosed file <_io\.FileIO name=.*chunk-:ResourceWarning")
@pytest.mark.parametrize("case", _E2E_CASES, ids=lambda c: "n{}-cs{}-W{}-K{}-B{}-dl{:d}-sh{:d}-s{}-e{}".format(*c))
def test_streaming_dataset_serves_the_same_items(
    case: tuple[int, int, int, int, int, bool, bool, int, int],
    written_datasets: dict[tuple[int, int], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """End to end: LitData's ``StreamingDataset`` iterated as every (rank, worker) of the topology."""
    n, chunk_size, world_size, num_workers, batch_size, drop_last, shuffle, seed, epoch = case
    litdata = require_peer("litdata")
    env_mod = require_peer("litdata.utilities.env")
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")  # keep FullShuffle on a local disk
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    regions = _uniform(n, chunk_size)
    served_everywhere: list[int] = []
    for rank in range(world_size):
        monkeypatch.setenv("GLOBAL_RANK", str(rank))
        for worker in range(num_workers):
            ds = litdata.StreamingDataset(
                str(written_datasets[(n, chunk_size)]), shuffle=shuffle, drop_last=drop_last, seed=seed
            )
            ds._forced_worker_env = env_mod._WorkerEnv(num_workers, worker)
            ds.set_batch_size(batch_size)
            ds.set_num_workers(num_workers)
            ds.set_epoch(epoch)
            theirs = [int(x) for x in ds]
            plan = worker_plan(
                regions,
                rank=rank,
                world_size=world_size,
                worker=worker,
                num_workers=num_workers,
                batch_size=batch_size,
                drop_last=drop_last,
                shuffle=shuffle,
                seed=seed,
                epoch=epoch,
            )
            ours = _global_ids(plan, chunk_size, num_chunks=len(regions), shuffle=shuffle, seed=seed, epoch=epoch)
            assert ours == theirs, f"rank {rank} worker {worker}"
            served_everywhere += ours
            del ds
        kwargs: dict[str, Any] = {"world_size": world_size, "num_workers": num_workers, "batch_size": batch_size}
        ds = litdata.StreamingDataset(
            str(written_datasets[(n, chunk_size)]), shuffle=shuffle, drop_last=drop_last, seed=seed
        )
        ds.set_epoch(epoch)
        length = ds.get_len(num_workers, batch_size)
        assert items_per_rank(regions, rank=rank, drop_last=drop_last, **kwargs) == length
        del ds
    gc.collect()  # close LitData's last chunk handles while this test's warning filters apply
    expected_total = n if not drop_last else world_size * batch_size * ((n // batch_size) // world_size)
    assert sorted(served_everywhere) == sorted(set(served_everywhere))
    assert len(served_everywhere) == expected_total


# ------------------------------------------------------------------------------------------ properties

_PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, database=None, derandomize=True)


@st.composite
def _setups(draw: st.DrawFn) -> dict[str, Any]:
    regions = []
    for _ in range(draw(st.integers(0, 8))):
        start = draw(st.integers(0, 12))
        regions.append((start, start + draw(st.integers(0, 12))))
    return {
        "regions": regions,
        "world_size": draw(st.integers(1, 4)),
        "num_workers": draw(st.integers(0, 4)),
        "batch_size": draw(st.integers(1, 6)),
        "shuffle": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "epoch": draw(st.integers(1, 5)),
    }


def _rank_served(setup: dict[str, Any], *, drop_last: bool) -> list[list[list[tuple[int, int]]]]:
    """``[rank][worker]`` -> served ``(chunk, item)`` pairs."""
    workers = max(setup["num_workers"], 1)
    rng = {"shuffle": setup["shuffle"], "seed": setup["seed"], "epoch": setup["epoch"]}
    order = chunk_order(len(setup["regions"]), **rng)
    plans = assign_items(
        order,
        setup["regions"],
        world_size=setup["world_size"],
        num_workers=setup["num_workers"],
        batch_size=setup["batch_size"],
        drop_last=drop_last,
    )
    served = [_served(plan, num_chunks=len(setup["regions"]), **rng) for plan in plans]
    return [served[r * workers : (r + 1) * workers] for r in range(setup["world_size"])]


def _all_items(regions: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(c, i) for c, (start, end) in enumerate(regions) for i in range(start, end)]


@_PROPERTY_SETTINGS
@given(_setups())
def test_every_item_exactly_once_without_drop_last(setup: dict[str, Any]) -> None:
    ranks = _rank_served(setup, drop_last=False)
    served = [pair for rank in ranks for worker in rank for pair in worker]
    assert sorted(served) == _all_items(setup["regions"])


@_PROPERTY_SETTINGS
@given(_setups())
def test_drop_last_gives_equal_ranks_and_no_repeats(setup: dict[str, Any]) -> None:
    ranks = _rank_served(setup, drop_last=True)
    total, batch, world = len(_all_items(setup["regions"])), setup["batch_size"], setup["world_size"]
    per_rank = batch * ((total // batch) // world)
    assert [sum(len(worker) for worker in rank) for rank in ranks] == [per_rank] * world
    served = [pair for rank in ranks for worker in rank for pair in worker]
    assert len(served) == len(set(served)) == per_rank * world
    assert set(served) <= set(_all_items(setup["regions"]))
    for rank in ranks:  # workers of a rank differ by at most one batch, and hold whole batches
        sizes = [len(worker) for worker in rank]
        assert max(sizes) - min(sizes) in (0, batch)
        assert all(size % batch == 0 for size in sizes)


@_PROPERTY_SETTINGS
@given(_setups(), st.booleans())
def test_items_per_rank_is_the_sum_of_the_rank_plans(setup: dict[str, Any], drop_last: bool) -> None:
    ranks = _rank_served(setup, drop_last=drop_last)
    for rank, workers in enumerate(ranks):
        expected = sum(len(worker) for worker in workers)
        assert (
            items_per_rank(
                setup["regions"],
                rank=rank,
                world_size=setup["world_size"],
                num_workers=setup["num_workers"],
                batch_size=setup["batch_size"],
                drop_last=drop_last,
            )
            == expected
        )


@_PROPERTY_SETTINGS
@given(st.integers(0, 10_000), st.integers(1, 64), st.integers(0, 16))
def test_replay_skip_sums_and_is_round_robin(n: int, batch_size: int, num_workers: int) -> None:
    counts = replay_skip(n, batch_size=batch_size, num_workers=num_workers)
    assert len(counts) == max(num_workers, 1)
    assert sum(counts) == n
    assert max(counts) - min(counts) <= batch_size  # round-robin: at most one batch ahead
    assert counts == sorted(counts, reverse=True)  # earlier workers were served first


@_PROPERTY_SETTINGS
@given(_setups(), st.booleans(), st.integers(0, 200))
def test_resume_position_serves_exactly_the_rest(setup: dict[str, Any], drop_last: bool, consumed: int) -> None:
    rng = {"shuffle": setup["shuffle"], "seed": setup["seed"], "epoch": setup["epoch"]}
    n_chunks = len(setup["regions"])
    plan = worker_plan(
        setup["regions"],
        rank=setup["world_size"] - 1,
        world_size=setup["world_size"],
        worker=0,
        num_workers=setup["num_workers"],
        batch_size=setup["batch_size"],
        drop_last=drop_last,
        **rng,
    )
    full = _served(plan, num_chunks=n_chunks, **rng)
    index, offset = resume_position(plan, consumed)
    if index == len(plan):
        rest: list[tuple[int, int]] = []
        assert offset == 0
    else:
        head = item_order(plan[index], num_chunks=n_chunks, **rng)[offset:]
        tail = _served(plan[index + 1 :], num_chunks=n_chunks, **rng)
        rest = [(plan[index].chunk_index, i) for i in head] + tail
    assert rest == full[consumed:]
