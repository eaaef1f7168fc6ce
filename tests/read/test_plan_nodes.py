"""Multi-node ``FullShuffle`` in the read plan (``litstream.read.plan._plan``, spec ``read.md`` §3.3).

Golden vectors from the spec (§3.8 multi-node rows), a live grid against LitData's own ``FullShuffle``
with ``_DistributedEnv(W, rank, num_nodes)`` (shift-1 global plan in epoch 1, per-node permutation
from epoch 2 when the node shards fit ``max_cache_size``, the global plan of the epoch otherwise),
end-to-end ``StreamingDataset`` iteration with ``NNODES`` set, and hypothesis properties. The
single-node helpers mirror those of ``test_plan.py``.
"""

from __future__ import annotations

import gc
import itertools
import json
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litstream._core._errors import PlanError
from litstream.read.plan._plan import (
    ChunkSlice,
    epoch_assignment,
    item_order,
    items_per_rank,
    node_chunk_sets,
    node_shard_fits,
    worker_plan,
)
from peer import require_peer

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def _uniform(num_items: int, chunk_size: int) -> list[tuple[int, int]]:
    return [(0, min(chunk_size, num_items - start)) for start in range(0, num_items, chunk_size)]


def _served(plan: Sequence[ChunkSlice], *, num_chunks: int, seed: int, epoch: int) -> list[tuple[int, int]]:
    return [
        (piece.chunk_index, item)
        for piece in plan
        for item in item_order(piece, num_chunks=num_chunks, shuffle=True, seed=seed, epoch=epoch)
    ]


# ------------------------------------------------------------------------------------ golden vectors


@pytest.mark.parametrize(
    ("rank", "epoch", "first_ten"),
    [
        (0, 1, [275, 277, 273, 272, 270, 276, 271, 278, 279, 274]),
        (1, 1, [415, 419, 416, 418, 417, 348, 346, 341, 344, 349]),
        (1, 2, [407, 409, 405, 406, 408, 258, 257, 252, 254, 250]),  # "shard fits": no cache limit
    ],
)
def test_spec_3_8_golden_1222_items_chunk_10_two_nodes(rank: int, epoch: int, first_ten: list[int]) -> None:
    regions = _uniform(1222, 10)
    common: dict[str, Any] = {"world_size": 4, "num_workers": 1, "batch_size": 1, "drop_last": True, "num_nodes": 2}
    plan = worker_plan(regions, rank=rank, worker=0, shuffle=True, seed=42, epoch=epoch, **common)
    served = [c * 10 + i for c, i in _served(plan, num_chunks=len(regions), seed=42, epoch=epoch)]
    assert served[:10] == first_ten
    assert len(served) == 305
    assert items_per_rank(regions, rank=rank, shuffle=True, seed=42, epoch=epoch, **common) == 305


def test_epoch_two_goes_global_when_a_node_shard_does_not_fit() -> None:
    regions = _uniform(1222, 10)
    common: dict[str, Any] = {"world_size": 4, "num_workers": 1, "batch_size": 1, "drop_last": True, "shuffle": True}
    sizes = [100] * len(regions)
    first = epoch_assignment(regions, seed=42, epoch=1, num_nodes=2, **common)
    sets = node_chunk_sets(first, world_size=4, num_workers=1, num_nodes=2)
    largest = max(sum(sizes[c] for c in ids) for ids in sets)
    assert node_shard_fits(sets, sizes, largest)
    assert not node_shard_fits(sets, sizes, largest - 1)
    tight = epoch_assignment(
        regions, seed=42, epoch=2, num_nodes=2, chunk_bytes=sizes, max_cache_size=largest - 1, **common
    )
    assert tight == epoch_assignment(regions, seed=42, epoch=2, num_nodes=1, **common)  # the global plan
    fits = epoch_assignment(regions, seed=42, epoch=2, num_nodes=2, chunk_bytes=sizes, max_cache_size=largest, **common)
    assert fits == epoch_assignment(regions, seed=42, epoch=2, num_nodes=2, **common)  # as with no limit
    assert fits != tight


def test_no_shuffle_and_one_node_ignore_the_cache_inputs() -> None:
    regions = _uniform(97, 6)
    kw: dict[str, Any] = {"world_size": 4, "num_workers": 2, "batch_size": 3, "drop_last": False, "seed": 3}
    for epoch in (1, 2, 3):
        plain = epoch_assignment(regions, shuffle=False, epoch=epoch, **kw)
        assert epoch_assignment(regions, shuffle=False, epoch=epoch, num_nodes=2, **kw) == plain
        full = epoch_assignment(regions, shuffle=True, epoch=epoch, **kw)
        limited = epoch_assignment(regions, shuffle=True, epoch=epoch, chunk_bytes=[1] * 17, max_cache_size=1, **kw)
        assert limited == full


def test_bad_topologies_and_cache_inputs_are_named() -> None:
    kw: dict[str, Any] = {"rank": 0, "worker": 0, "num_workers": 1, "batch_size": 1, "drop_last": False}
    kw |= {"shuffle": True, "seed": 1, "epoch": 2}
    with pytest.raises(PlanError, match=r"world_size=3 is not a multiple of num_nodes=2"):
        worker_plan([(0, 4)], world_size=3, num_nodes=2, **kw)
    with pytest.raises(PlanError, match=r"num_nodes must be >= 1, got 0"):
        worker_plan([(0, 4)], world_size=2, num_nodes=0, **kw)
    with pytest.raises(PlanError, match=r"chunk_bytes has 1 entries but there are 2 regions"):
        worker_plan([(0, 4), (0, 4)], world_size=2, num_nodes=2, chunk_bytes=[5], **kw)
    with pytest.raises(PlanError, match=r"chunk_bytes\[0\] must be >= 0, got -5"):
        worker_plan([(0, 4)], world_size=2, num_nodes=2, chunk_bytes=[-5], **kw)
    with pytest.raises(PlanError, match=r"plans has 1 workers but world_size \* K = 2"):
        node_chunk_sets([[]], world_size=2, num_workers=1, num_nodes=2)


# --------------------------------------------------------------------------- live comparison: LitData


def _litdata_full_shuffle(
    regions: Sequence[tuple[int, int]], chunk_bytes: Sequence[int], max_cache_size: int | None, *, seed: int, drop: bool
) -> Any:
    shuffle_mod = require_peer("litdata.streaming.shuffle")
    offsets = [0, *itertools.accumulate(end for _, end in regions)]
    intervals = [(offsets[c], offsets[c] + s, offsets[c] + e, offsets[c + 1]) for c, (s, e) in enumerate(regions)]
    config = SimpleNamespace(_chunks=[{"chunk_bytes": b} for b in chunk_bytes])
    cache = SimpleNamespace(
        get_chunk_intervals=lambda: intervals, _reader=SimpleNamespace(_config=config, _max_cache_size=max_cache_size)
    )
    return shuffle_mod.FullShuffle(cache, seed, drop), intervals


_NODE_TOPOLOGY = [(2, 2), (4, 2), (6, 2), (6, 3), (4, 4), (8, 2)]  # (world_size, num_nodes)


@pytest.mark.litdata
@pytest.mark.parametrize(("n", "chunk_size"), [(7, 3), (50, 3), (101, 10), (230, 7), (64, 64)])
@pytest.mark.parametrize(("world_size", "num_nodes"), _NODE_TOPOLOGY)
@pytest.mark.parametrize("drop_last", [False, True])
def test_grid_matches_litdata_full_shuffle_on_several_nodes(
    n: int, chunk_size: int, world_size: int, num_nodes: int, drop_last: bool
) -> None:
    env_mod = require_peer("litdata.utilities.env")
    regions = _uniform(n, chunk_size)
    chunk_bytes = [100 + (37 * c) % 23 for c in range(len(regions))]
    for num_workers, batch_size, seed in [(1, 1, 42), (3, 4, 7), (2, 3, 42)]:
        topo: dict[str, Any] = {"world_size": world_size, "num_workers": num_workers, "batch_size": batch_size}
        first = epoch_assignment(
            regions, drop_last=drop_last, shuffle=True, seed=seed, epoch=1, num_nodes=num_nodes, **topo
        )
        sets = node_chunk_sets(first, world_size=world_size, num_workers=num_workers, num_nodes=num_nodes)
        largest = max(sum(chunk_bytes[c] for c in ids) for ids in sets)
        # Epoch 1 ignores the budget; later epochs: no limit (None, 0), a budget that just fits, one byte short.
        for cache, epoch in [(None, 1), (None, 2), (None, 3), (0, 2), (largest, 3), (largest - 1, 2), (largest - 1, 3)]:
            shuffler, intervals = _litdata_full_shuffle(regions, chunk_bytes, cache, seed=seed, drop=drop_last)
            kw: dict[str, Any] = {"drop_last": drop_last, "shuffle": True, "seed": seed, "epoch": epoch}
            kw |= {"num_nodes": num_nodes, "chunk_bytes": chunk_bytes, "max_cache_size": cache, **topo}
            ours = epoch_assignment(regions, **kw)
            env = env_mod._DistributedEnv(world_size, 0, num_nodes)
            lit_chunks, lit_intervals = shuffler.get_chunks_and_intervals_per_workers(
                env, num_workers, batch_size, epoch
            )
            assert shuffler.node_shard_fits == node_shard_fits(sets, chunk_bytes, cache)
            assert len(ours) == len(lit_chunks) == world_size * num_workers
            where = (
                f"W={world_size} nodes={num_nodes} K={num_workers} B={batch_size} seed={seed} cache={cache} e={epoch}"
            )
            for g, plan in enumerate(ours):
                pairs = zip(lit_chunks[g], lit_intervals[g], strict=True)
                theirs = [ChunkSlice(int(c), iv[1] - iv[0], iv[2] - iv[0]) for c, iv in pairs]
                assert plan == theirs, f"worker {g}, {where}"
                lit_served = [
                    (int(c), int(i) - iv[0])
                    for c, iv in zip(lit_chunks[g], lit_intervals[g], strict=True)
                    for i in shuffler(np.arange(iv[1], iv[2]), len(intervals), epoch, int(c))
                ]
                assert _served(plan, num_chunks=len(regions), seed=seed, epoch=epoch) == lit_served, where
            for rank in range(world_size):
                rank_env = env_mod._DistributedEnv(world_size, rank, num_nodes)
                expected = shuffler.get_len(rank_env, num_workers, batch_size, epoch)
                assert items_per_rank(regions, rank=rank, **kw) == expected, f"rank {rank}, {where}"


_E2E = [
    (230, 7, 4, 2, 2, 3, False),
    (230, 7, 4, 2, 1, 1, True),
    (101, 10, 6, 3, 2, 2, True),
    (64, 5, 2, 2, 3, 4, False),
]


@pytest.fixture(scope="module")
def node_datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, int], Path]:
    writer_mod = require_peer("litdata.streaming.writer")
    out = {}
    for n, chunk_size in sorted({(case[0], case[1]) for case in _E2E}):
        path = tmp_path_factory.mktemp(f"litdata_nodes_{n}_{chunk_size}")
        writer = writer_mod.BinaryWriter(str(path), chunk_size=chunk_size)
        for i in range(n):
            writer[i] = i
        writer.done()
        writer.merge()
        out[(n, chunk_size)] = path
    return out


@pytest.mark.litdata
@pytest.mark.filterwarnings(r"ignore:unclosed file <_io\.FileIO name=.*chunk-:ResourceWarning")
@pytest.mark.parametrize("case", _E2E, ids=lambda c: "n{}-cs{}-W{}-nodes{}-K{}-B{}-dl{:d}".format(*c))
@pytest.mark.parametrize("epoch", [1, 2, 3])
def test_streaming_dataset_on_several_nodes_serves_the_same_items(
    case: tuple[int, int, int, int, int, int, bool],
    epoch: int,
    node_datasets: dict[tuple[int, int], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LitData's ``StreamingDataset`` with ``NNODES`` set (its cache budget, 75% of free disk, fits)."""
    n, chunk_size, world_size, num_nodes, num_workers, batch_size, drop_last = case
    litdata = require_peer("litdata")
    env_mod = require_peer("litdata.utilities.env")
    path = node_datasets[(n, chunk_size)]
    chunk_bytes = [c["chunk_bytes"] for c in json.loads((path / "index.json").read_text())["chunks"]]
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    monkeypatch.setenv("NNODES", str(num_nodes))
    regions = _uniform(n, chunk_size)
    kw: dict[str, Any] = {"world_size": world_size, "num_workers": num_workers, "batch_size": batch_size}
    kw |= {"drop_last": drop_last, "shuffle": True, "seed": 42, "epoch": epoch, "num_nodes": num_nodes}
    kw |= {"chunk_bytes": chunk_bytes}
    for rank in range(world_size):
        monkeypatch.setenv("GLOBAL_RANK", str(rank))
        for worker in range(num_workers):
            ds = litdata.StreamingDataset(str(path), shuffle=True, drop_last=drop_last, seed=42)
            ds._forced_worker_env = env_mod._WorkerEnv(num_workers, worker)
            ds.set_batch_size(batch_size)
            ds.set_num_workers(num_workers)
            ds.set_epoch(epoch)
            theirs = [int(x) for x in ds]
            plan = worker_plan(regions, rank=rank, worker=worker, **kw)
            ours = [c * chunk_size + i for c, i in _served(plan, num_chunks=len(regions), seed=42, epoch=epoch)]
            assert ours == theirs, f"rank {rank} worker {worker}"
            del ds
        ds = litdata.StreamingDataset(str(path), shuffle=True, drop_last=drop_last, seed=42)
        ds.set_epoch(epoch)
        assert items_per_rank(regions, rank=rank, **kw) == ds.get_len(num_workers, batch_size)
        del ds
    # LitData's shuffler methods are lru_cached on the class and keep the datasets (and their open
    # chunk files) alive; release them while this test's warning filter applies.
    shuffle_mod = require_peer("litdata.streaming.shuffle")
    shuffle_mod.Shuffle.get_len.cache_clear()
    shuffle_mod.FullShuffle.get_chunks_and_intervals_per_workers.cache_clear()
    gc.collect()


# ------------------------------------------------------------------------------------------ properties


@st.composite
def _node_setups(draw: st.DrawFn) -> dict[str, Any]:
    regions = []
    for _ in range(draw(st.integers(0, 10))):
        start = draw(st.integers(0, 8))
        regions.append((start, start + draw(st.integers(0, 12))))
    num_nodes = draw(st.integers(1, 3))
    return {
        "regions": regions,
        "world_size": num_nodes * draw(st.integers(1, 3)),
        "num_nodes": num_nodes,
        "num_workers": draw(st.integers(0, 3)),
        "batch_size": draw(st.integers(1, 5)),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "epoch": draw(st.integers(1, 4)),
    }


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(_node_setups())
def test_nodes_cover_every_item_and_never_repeat_one_inside_a_node(setup: dict[str, Any]) -> None:
    """Without drop_last every item is served; a node never serves an item twice; lengths agree."""
    regions, nodes, world = setup["regions"], setup["num_nodes"], setup["world_size"]
    workers = max(setup["num_workers"], 1)
    kw: dict[str, Any] = {
        k: setup[k] for k in ("world_size", "num_workers", "batch_size", "seed", "epoch", "num_nodes")
    }
    plans = epoch_assignment(regions, drop_last=False, shuffle=True, **kw)
    served = [_served(plan, num_chunks=len(regions), seed=setup["seed"], epoch=setup["epoch"]) for plan in plans]
    everything = [(c, i) for c, (start, end) in enumerate(regions) for i in range(start, end)]
    assert sorted({pair for worker in served for pair in worker}) == everything
    per_node = world // nodes * workers
    for node in range(nodes):
        mine = [pair for worker in served[node * per_node : (node + 1) * per_node] for pair in worker]
        assert len(mine) == len(set(mine))
    if setup["epoch"] == 1 or nodes == 1:
        assert sorted(pair for worker in served for pair in worker) == everything  # exactly once
    for rank in range(world):
        expected = sum(len(worker) for worker in served[rank * workers : (rank + 1) * workers])
        assert items_per_rank(regions, rank=rank, drop_last=False, shuffle=True, **kw) == expected
