"""The opt-in cross-chunk shuffle, ``shuffle="window"`` (``litstream.read.plan._window`` and its engine path).

Pure layer: vectors and hypothesis properties of the window order (every item exactly once, the same
per-worker counts as FullShuffle, reproducible, new each epoch, resume-from-k gives exactly the rest,
items of different chunks interleaved on a sorted dataset). Engine layer: ``plan_pieces`` +
``produce_chunks`` + ``decode_work`` on a written dataset (order, resume, bounded fetches), and
``astream(shuffle="window")``.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litstream import ConfigurationError, astream, optimize
from litstream._core._errors import PlanError
from litstream.read.engine._decode import decode_work
from litstream.read.engine._engine import ChunkWork, produce_chunks
from litstream.read.plan._pieces import ChunkWindow, ReadPlanArgs, plan_pieces
from litstream.read.plan._plan import ChunkSlice, epoch_assignment, item_order
from litstream.read.plan._window import window_items, window_order, window_position, windows
from litstream.read.source._source import DatasetSource
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from litstream.format._chunk import ChunkView

# ------------------------------------------------------------------------------------------- helpers


def _uniform(num_items: int, chunk_size: int) -> list[tuple[int, int]]:
    return [(0, min(chunk_size, num_items - start)) for start in range(0, num_items, chunk_size)]


def _full_shuffle_served(
    plan: Sequence[ChunkSlice], *, num_chunks: int, seed: int, epoch: int
) -> list[tuple[int, int]]:
    return [
        (p.chunk_index, i)
        for p in plan
        for i in item_order(p, num_chunks=num_chunks, shuffle=True, seed=seed, epoch=epoch)
    ]


def _chunk_runs(pairs: Sequence[tuple[int, int]]) -> int:
    """Number of maximal runs of consecutive items from the same chunk."""
    return sum(1 for _ in itertools.groupby(chunk for chunk, _ in pairs))


# ------------------------------------------------------------------------------------------ vectors


def test_windows_group_consecutive_slices() -> None:
    plan = [ChunkSlice(c, 0, 3) for c in (4, 1, 7, 0, 2)]
    assert windows(plan, 2) == [(plan[0], plan[1]), (plan[2], plan[3]), (plan[4],)]
    assert windows(plan, 8) == [tuple(plan)]
    assert windows([], 3) == []
    assert window_position(plan, 2, 0) == (0, 0)
    assert window_position(plan, 2, 5) == (0, 5)
    assert window_position(plan, 2, 6) == (1, 0)
    assert window_position(plan, 2, 13) == (2, 1)
    assert window_position(plan, 2, 15) == (3, 0)
    assert window_position(plan, 2, 99) == (3, 0)


def test_window_items_vector_and_arguments() -> None:
    window = (ChunkSlice(3, 2, 5), ChunkSlice(0, 0, 2))
    got = window_items(window, seed=1, epoch=1, global_worker=0, window_index=0)
    assert sorted(got) == [(0, 0), (0, 1), (3, 2), (3, 3), (3, 4)]
    assert got == window_items(window, seed=1, epoch=1, global_worker=0, window_index=0)
    # pool (3,2) (3,3) (3,4) (0,0) (0,1) in RandomState([1, 1, 0, 0]).permutation(5) == [3, 2, 0, 1, 4]
    assert got == [(0, 0), (3, 4), (3, 2), (3, 3), (0, 1)]
    with pytest.raises(PlanError, match=r"shuffle_window must be >= 1, got 0; pass the number of chunks"):
        windows([ChunkSlice(0, 0, 1)], 0)
    with pytest.raises(PlanError, match=r"global_worker must be >= 0, got -1"):
        window_items(window, seed=1, epoch=1, global_worker=-1, window_index=0)
    with pytest.raises(PlanError, match=r"consumed must be >= 0, got -2"):
        window_position([], 4, -2)


def test_sorted_dataset_items_of_different_chunks_are_interleaved() -> None:
    """On a dataset in sorted order, FullShuffle serves one chunk at a time; the window shuffle mixes."""
    chunk_size, window = 10, 8
    regions = _uniform(2000, chunk_size)
    kw: dict[str, Any] = {"world_size": 1, "num_workers": 1, "batch_size": 1, "drop_last": False}
    plan = epoch_assignment(regions, shuffle=True, seed=42, epoch=1, **kw)[0]
    full = _full_shuffle_served(plan, num_chunks=len(regions), seed=42, epoch=1)
    mixed = window_order(plan, shuffle_window=window, seed=42, epoch=1, global_worker=0)
    head = mixed[: window * chunk_size]
    assert len({chunk for chunk, _ in head}) == window  # the first window draws on all its chunks
    assert len({chunk for chunk, _ in mixed[:chunk_size]}) > 1  # even the first chunk's worth of items
    assert len({chunk for chunk, _ in full[:chunk_size]}) == 1
    assert _chunk_runs(full) == len(regions)
    assert _chunk_runs(mixed) > len(mixed) // 2  # a chunk change at most steps


# --------------------------------------------------------------------------------------- properties

_SETTINGS = settings(max_examples=300, deadline=None, database=None, derandomize=True)


@st.composite
def _setups(draw: st.DrawFn) -> dict[str, Any]:
    regions = []
    for _ in range(draw(st.integers(0, 12))):
        start = draw(st.integers(0, 6))
        regions.append((start, start + draw(st.integers(0, 15))))
    return {
        "regions": regions,
        "world_size": draw(st.integers(1, 3)),
        "num_workers": draw(st.integers(0, 3)),
        "batch_size": draw(st.integers(1, 4)),
        "drop_last": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "epoch": draw(st.integers(1, 4)),
        "window": draw(st.integers(1, 6)),
    }


def _plans(setup: dict[str, Any], epoch: int | None = None) -> list[list[ChunkSlice]]:
    keys = ("world_size", "num_workers", "batch_size", "drop_last", "seed")
    epoch = setup["epoch"] if epoch is None else epoch
    return epoch_assignment(setup["regions"], shuffle=True, epoch=epoch, **{k: setup[k] for k in keys})


def _orders(setup: dict[str, Any], epoch: int | None = None) -> list[list[tuple[int, int]]]:
    epoch = setup["epoch"] if epoch is None else epoch
    return [
        window_order(plan, shuffle_window=setup["window"], seed=setup["seed"], epoch=epoch, global_worker=g)
        for g, plan in enumerate(_plans(setup, epoch))
    ]


@_SETTINGS
@given(_setups())
def test_same_items_and_counts_as_full_shuffle_each_exactly_once(setup: dict[str, Any]) -> None:
    n_chunks = len(setup["regions"])
    plans = _plans(setup)
    for g, (plan, order) in enumerate(zip(plans, _orders(setup), strict=True)):
        full = _full_shuffle_served(plan, num_chunks=n_chunks, seed=setup["seed"], epoch=setup["epoch"])
        assert sorted(order) == sorted(full), f"worker {g}"
        assert len(order) == len(set(order))
    everything = [pair for order in _orders(setup) for pair in order]
    assert len(everything) == len(set(everything))
    if not setup["drop_last"]:
        assert sorted(everything) == [(c, i) for c, (s, e) in enumerate(setup["regions"]) for i in range(s, e)]


@_SETTINGS
@given(_setups())
def test_reproducible_and_windows_stay_within_their_chunks(setup: dict[str, Any]) -> None:
    assert _orders(setup) == _orders(dict(setup))
    for plan, order in zip(_plans(setup), _orders(setup), strict=True):
        position = 0
        for window in windows(plan, setup["window"]):
            size = sum(len(s) for s in window)
            assert {c for c, _ in order[position : position + size]} == {s.chunk_index for s in window}
            assert len({s.chunk_index for s in window}) <= setup["window"]
            position += size


@_SETTINGS
@given(_setups(), st.integers(0, 200))
def test_resume_from_k_yields_exactly_the_rest(setup: dict[str, Any], consumed: int) -> None:
    for g, plan in enumerate(_plans(setup)):
        kw: dict[str, Any] = {"seed": setup["seed"], "epoch": setup["epoch"], "global_worker": g}
        full = window_order(plan, shuffle_window=setup["window"], **kw)
        groups = windows(plan, setup["window"])
        index, offset = window_position(plan, setup["window"], consumed)
        rest: list[tuple[int, int]] = []
        for w in range(index, len(groups)):
            pairs = window_items(groups[w], window_index=w, **kw)
            rest += pairs[offset:] if w == index else pairs
        assert rest == full[consumed:]


@_SETTINGS
@given(st.integers(30, 400), st.integers(1, 12), st.integers(1, 8), st.integers(0, 2**32 - 1), st.integers(1, 50))
def test_a_new_order_every_epoch(n: int, chunk_size: int, window: int, seed: int, epoch: int) -> None:
    setup = {"regions": _uniform(n, chunk_size), "world_size": 1, "num_workers": 1, "batch_size": 1}
    setup |= {"drop_last": False, "seed": seed, "window": window, "epoch": epoch}
    this, following = _orders(setup)[0], _orders(setup, epoch + 1)[0]
    assert sorted(this) == sorted(following)
    assert this != following


# ------------------------------------------------------------------------------------------- engine


@pytest.fixture(scope="module")
def sorted_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sorted")
    optimize(fn=_identity, inputs=list(range(300)), output_dir=d, chunk_size=10, num_workers=1, verbose=False)
    return d


def _identity(i: int) -> int:
    return i


async def _serve(source: DatasetSource, args: ReadPlanArgs, *, max_pre_download: int = 2) -> list[int]:
    pieces = plan_pieces(source, args)
    send, receive = anyio.create_memory_object_stream[ChunkWork](1)
    out: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: produce_chunks(source, pieces, send, max_pre_download=max_pre_download))
        async with receive:
            async for work in receive:
                out += decode_work(source, work, work.items, None)
    return out


@pytest.mark.anyio
@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 1), (2, 3)])
async def test_engine_serves_the_window_order_and_resumes_exactly(
    sorted_dir: Path, world_size: int, num_workers: int
) -> None:
    source = await DatasetSource.open(store_for(sorted_dir))
    regions = [(0, size) for size in source.chunk_sizes]
    plans = epoch_assignment(
        regions,
        world_size=world_size,
        num_workers=num_workers,
        batch_size=4,
        drop_last=False,
        shuffle=True,
        seed=5,
        epoch=2,
    )
    served_everywhere: list[int] = []
    for rank, worker in itertools.product(range(world_size), range(num_workers)):
        g = rank * num_workers + worker
        args = ReadPlanArgs(
            rank=rank,
            world_size=world_size,
            worker=worker,
            num_workers=num_workers,
            batch_size=4,
            shuffle="window",
            shuffle_window=3,
            seed=5,
            epoch=2,
        )
        expected = [c * 10 + i for c, i in window_order(plans[g], shuffle_window=3, seed=5, epoch=2, global_worker=g)]
        got = await _serve(source, args)
        assert got == expected
        assert len(got) == sum(len(s) for s in plans[g])  # FullShuffle's count
        served_everywhere += got
        for skip in (1, 29, 30, 31, len(got) - 1, len(got), len(got) + 5):
            assert await _serve(source, replace(args, skip=skip)) == got[skip:], f"skip {skip}"
    assert sorted(served_everywhere) == list(range(300))


@pytest.mark.anyio
async def test_a_resumed_window_fetches_only_chunks_with_items_left(sorted_dir: Path) -> None:
    source = await DatasetSource.open(store_for(sorted_dir))
    args = ReadPlanArgs(shuffle="window", shuffle_window=8)
    first = plan_pieces(source, args)[0]
    assert isinstance(first[0], ChunkWindow)
    assert len(first[0].chunks) == 8
    assert first[0].bases == tuple(range(0, 80, 10))
    late = plan_pieces(source, replace(args, skip=78))[0]
    assert isinstance(late[0], ChunkWindow)
    assert len(late[1]) == 2
    assert len(late[0].chunks) <= 2


class _CountingSource:
    """Stands in for a ``DatasetSource`` in ``produce_chunks``: counts the chunk fetches."""

    def __init__(self, source: DatasetSource) -> None:
        self.source = source
        self.fetched: list[int] = []

    def download_ticket(self) -> int | None:
        return self.source.download_ticket()

    async def read_chunk(self, chunk_index: int, **options: Any) -> ChunkView:
        self.fetched.append(chunk_index)
        return await self.source.read_chunk(chunk_index, **options)


@pytest.mark.anyio
@pytest.mark.parametrize(("window", "max_pre_download"), [(8, 2), (3, 1), (4, 5)])
async def test_fetches_stay_within_two_windows_plus_the_prefetch(
    sorted_dir: Path, window: int, max_pre_download: int
) -> None:
    source = await DatasetSource.open(store_for(sorted_dir))
    pieces = plan_pieces(source, ReadPlanArgs(shuffle="window", shuffle_window=window))
    counting = _CountingSource(source)
    send, receive = anyio.create_memory_object_stream[ChunkWork](1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: produce_chunks(cast("DatasetSource", counting), pieces, send, max_pre_download=max_pre_download)
        )
        async with receive:
            held = []
            for _ in range(3):  # the consumer takes three works, holds them and stalls
                held.append(await receive.receive())
                assert held[-1].more  # every work of a window piece carries the window's other views
                await anyio.wait_all_tasks_blocked()
                # the window being served, the next one assembled, and the prefetch; nothing more
                assert len(counting.fetched) <= 2 * window + max_pre_download - 1
            assert len(counting.fetched) < len(source.chunk_sizes)
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_astream_window_shuffle(sorted_dir: Path) -> None:
    plain = [s async for s in astream(sorted_dir, shuffle="window", shuffle_window=4, seed=9)]
    async with astream(sorted_dir, shuffle="window", shuffle_window=4, seed=9) as samples:
        held = [s async for s in samples]
    assert plain == held
    assert sorted(plain) == list(range(300))
    full = [s async for s in astream(sorted_dir, shuffle=True, seed=9)]
    assert [s async for s in astream(sorted_dir, shuffle="full", seed=9)] == full
    assert plain != full
    assert _chunk_runs([(s // 10, s) for s in plain]) > _chunk_runs([(s // 10, s) for s in full]) * 5
    second = [s async for s in astream(sorted_dir, shuffle="window", shuffle_window=4, seed=9, epoch=2)]
    assert sorted(second) == sorted(plain)
    assert second != plain
    for rank in range(3):
        mine = [s async for s in astream(sorted_dir, shuffle="window", rank=rank, world_size=3, batch_size=4)]
        theirs = [s async for s in astream(sorted_dir, shuffle=True, rank=rank, world_size=3, batch_size=4)]
        assert sorted(mine) == sorted(theirs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shuffle": "windows"}, r"shuffle must be True or False, got 'windows' \(or 'full'.*or 'window'"),
        ({"shuffle": 1}, r"shuffle must be True or False, got 1"),
        ({"shuffle": "window", "shuffle_window": 0}, r"shuffle_window must be an int >= 1 .*got 0; pass e\.g\."),
        ({"shuffle_window": 2.5}, r"shuffle_window must be an int >= 1 .*got 2\.5"),
        ({"shuffle_window": True}, r"shuffle_window must be an int >= 1 .*got True"),
    ],
)
def test_bad_window_arguments_are_rejected_at_call(sorted_dir: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        astream(sorted_dir, **kwargs)


@pytest.mark.anyio
async def test_plan_pieces_rejects_an_unknown_shuffle_mode(sorted_dir: Path) -> None:
    source = await DatasetSource.open(store_for(sorted_dir))
    with pytest.raises(PlanError, match=r"shuffle must be False, True, 'full' or 'window', got 'nope'"):
        plan_pieces(source, ReadPlanArgs(shuffle=cast("Any", "nope")))
