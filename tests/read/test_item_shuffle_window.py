"""``shuffle=True`` inside chunks larger than ``item_shuffle_window``: LitData 0.2.76's order.

LitData 0.2.76 shuffles each worker's slice of a chunk in blocks of ``item_shuffle_window`` (default
256) and serves the blocks in a random order (``read._assign.item_order``). These tests compare
litstream's order with the installed LitData: the shuffler itself over chunks of up to 1000 items
(world sizes 1 and 2, several workers and epochs, ``drop_last``, windows), and both libraries'
``StreamingDataLoader`` end to end (0 and 2 workers, world sizes 1 and 2, three epochs).
"""

from __future__ import annotations

import gc
import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import litstream
from litstream.read.plan._plan import ChunkSlice, assign_items, chunk_order, item_order
from peer import require_peer

litdata = require_peer("litdata")
shuffle_mod = require_peer("litdata.streaming.shuffle")
env_mod = require_peer("litdata.utilities.env")

pytestmark = [
    pytest.mark.litdata,
    pytest.mark.filterwarnings(r"ignore:unclosed file <_io\.FileIO name=:ResourceWarning"),
]


def _litdata_full_shuffle(chunk_sizes: list[int], *, seed: int, drop_last: bool, window: Any) -> Any:
    """LitData's ``FullShuffle`` over a stand-in cache that only knows the chunk intervals."""
    offsets = [0, *itertools.accumulate(chunk_sizes)]
    intervals = [(offsets[c], offsets[c], offsets[c + 1], offsets[c + 1]) for c in range(len(chunk_sizes))]
    cache = SimpleNamespace(
        get_chunk_intervals=lambda: intervals, _reader=SimpleNamespace(_config=None, _max_cache_size=0)
    )
    return shuffle_mod.FullShuffle(cache, seed, drop_last, item_window=window)


_SIZES = [[1000, 1000, 500], [300, 300, 300, 100], [257, 1000, 3]]
_WINDOWS = [None, 0, 1, 7, 256, 300, 1000]


@pytest.mark.parametrize("sizes", _SIZES, ids=lambda s: "-".join(map(str, s)))
@pytest.mark.parametrize("window", _WINDOWS)
@pytest.mark.parametrize("drop_last", [False, True])
def test_in_chunk_order_matches_litdata_full_shuffle(sizes: list[int], window: Any, drop_last: bool) -> None:
    item_window = 256 if window is None else window
    for world_size, num_workers, batch_size, seed, epoch in itertools.product(
        (1, 2), (1, 2), (1, 4), (42, 7), (1, 2, 3)
    ):
        shuffler = _litdata_full_shuffle(sizes, seed=seed, drop_last=drop_last, window=window)
        env = env_mod._DistributedEnv(world_size, 0, 1)
        lit_chunks, lit_intervals = shuffler.get_chunks_and_intervals_per_workers(env, num_workers, batch_size, epoch)
        order = chunk_order(len(sizes), shuffle=True, seed=seed, epoch=epoch)
        plans = assign_items(
            order,
            [(0, n) for n in sizes],
            world_size=world_size,
            num_workers=num_workers,
            batch_size=batch_size,
            drop_last=drop_last,
        )
        offsets = [0, *itertools.accumulate(sizes)]
        for g, plan in enumerate(plans):
            theirs = [
                int(i)
                for c, iv in zip(lit_chunks[g], lit_intervals[g], strict=True)
                for i in shuffler(np.arange(iv[1], iv[2]), len(sizes), epoch, int(c))
            ]
            ours = [
                offsets[piece.chunk_index] + i
                for piece in plan
                for i in item_order(
                    piece, num_chunks=len(sizes), shuffle=True, seed=seed, epoch=epoch, item_window=item_window
                )
            ]
            assert ours == theirs, f"W={world_size} K={num_workers} B={batch_size} seed={seed} epoch={epoch} g={g}"


def test_the_last_partial_block_is_shuffled_and_placed_at_random() -> None:
    """600 items, window 256: blocks of 256, 256 and 88; each shuffled, the three in random order."""
    order = item_order(ChunkSlice(0, 0, 600), num_chunks=1, shuffle=True, seed=42, epoch=1)
    starts = []
    position = 0
    while position < 600:
        first = order[position]
        block = first // 256
        size = 256 if block < 2 else 88
        assert sorted(order[position : position + size]) == list(range(block * 256, block * 256 + size))
        starts.append(block)
        position += size
    assert sorted(starts) == [0, 1, 2]
    assert order != sorted(order)
    # Window 0 (or 1, or >= the slice) is one permutation of the whole slice.
    full = item_order(ChunkSlice(0, 0, 600), num_chunks=1, shuffle=True, seed=42, epoch=1, item_window=0)
    assert full == np.random.RandomState([42, 1, 1, 0]).permutation(600).tolist()
    assert item_order(ChunkSlice(0, 0, 600), num_chunks=1, shuffle=True, seed=42, epoch=1, item_window=600) == full


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


@pytest.fixture(scope="module")
def ints_2500(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Chunks of 1000, 1000 and 500 items (every one larger than the default window)."""
    # LitData reads it too and leaves chunk files open; a folder named "litdata" falls under the global
    # filter (pyproject.toml) when the garbage collector closes them during a later test.
    out = tmp_path_factory.mktemp("item-window") / "litdata"
    litstream.optimize(fn=_sample, inputs=list(range(2500)), output_dir=str(out), chunk_size=1000, num_workers=1)
    return str(out)


def _epochs(loader: Any, epochs: int) -> list[list[int]]:
    return [[int(v) for batch in loader for v in batch["x"]] for _ in range(epochs)]


@pytest.mark.parametrize("world_rank", [(1, 0), (2, 0), (2, 1)], ids=lambda wr: f"W{wr[0]}-r{wr[1]}")
@pytest.mark.parametrize("workers", [0, 2])
def test_loaders_serve_litdatas_order_over_epochs(
    ints_2500: str, workers: int, world_rank: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    world_size, rank = world_rank
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")  # keep LitData's FullShuffle on a local disk
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    monkeypatch.setenv("GLOBAL_RANK", str(rank))
    theirs_ds = litdata.StreamingDataset(ints_2500, shuffle=True, seed=3)
    theirs = _epochs(litdata.StreamingDataLoader(theirs_ds, batch_size=4, num_workers=workers), 3)
    ours_ds = litstream.StreamingDataset(ints_2500, shuffle=True, seed=3)
    ours = _epochs(litstream.StreamingDataLoader(ours_ds, batch_size=4, num_workers=workers), 3)
    gc.collect()
    assert ours == theirs
    assert len({tuple(epoch) for epoch in ours}) == 3  # each epoch has its own order
    assert ours[0] != sorted(ours[0])


@pytest.mark.parametrize("window", [0, 100, "full"])
def test_item_shuffle_window_argument_matches_litdata(ints_2500: str, window: Any) -> None:
    theirs_ds = litdata.StreamingDataset(ints_2500, shuffle=True, item_shuffle_window=window)
    theirs = _epochs(litdata.StreamingDataLoader(theirs_ds, batch_size=5), 2)
    ours_ds = litstream.StreamingDataset(ints_2500, shuffle=True, item_shuffle_window=window)
    ours = _epochs(litstream.StreamingDataLoader(ours_ds, batch_size=5), 2)
    gc.collect()
    assert ours == theirs
    default = _epochs(
        litstream.StreamingDataLoader(litstream.StreamingDataset(ints_2500, shuffle=True), batch_size=5), 1
    )
    assert default[0] != ours[0]  # the window changes the order of these 1000-item chunks


def test_window_shuffle_mode_ignores_the_item_window(ints_2500: str) -> None:
    """``shuffle="window"`` is litstream's own cross-chunk order: ``item_shuffle_window`` does not change it."""
    a = list(litstream.StreamingDataset(ints_2500, shuffle="window", shuffle_window=2))
    b = list(litstream.StreamingDataset(ints_2500, shuffle="window", shuffle_window=2, item_shuffle_window=0))
    assert a == b
    assert sorted(s["x"] for s in a) == list(range(2500))


def test_checkpoint_without_a_window_resumes_only_when_the_order_is_the_same(ints_2500: str, tmp_path: Any) -> None:
    """A litstream checkpoint from before ``item_shuffle_window`` was recorded permuted whole slices."""
    ds = litstream.StreamingDataset(ints_2500, shuffle=True)
    old = ds.state_dict(10, 1, 1)
    assert old.pop("item_shuffle_window") == 256
    with pytest.raises(litstream.ConfigurationError, match=r"item_shuffle_window=0 but this dataset has.*=256"):
        litstream.StreamingDataset(ints_2500, shuffle=True).load_state_dict(old)
    full = [s["x"] for s in litstream.StreamingDataset(ints_2500, shuffle=True, item_shuffle_window=0)]
    resumed = litstream.StreamingDataset(ints_2500, shuffle=True, item_shuffle_window=0)
    resumed.load_state_dict(old)
    assert [s["x"] for s in resumed] == full[10:]
    # Chunks of at most 256 items: both orders agree, so the default dataset resumes it.
    small = str(tmp_path / "small")
    litstream.optimize(fn=_sample, inputs=list(range(500)), output_dir=small, chunk_size=200, num_workers=1)
    state = litstream.StreamingDataset(small, shuffle=True).state_dict(7, 1, 1)
    del state["item_shuffle_window"]
    again = litstream.StreamingDataset(small, shuffle=True)
    again.load_state_dict(state)
    assert [s["x"] for s in again] == [s["x"] for s in litstream.StreamingDataset(small, shuffle=True)][7:]
