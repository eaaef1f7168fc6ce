"""``StreamingDataset.shuffler`` compared with LitData 0.2.76's: ``None`` until ``len()``, then a shuffle
object whose class, ``seed``, ``drop_last``, lengths, per-worker chunks and intervals and in-chunk order
(``shuffler(array, num_chunks, epoch, chunk_index)``) are LitData's; reset by ``set_shuffle``/``set_drop_last``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import litstream
from litstream.read._shuffler import FullShuffle, NoShuffle, WindowShuffle
from peer import litdata_marks, require_peer

litdata = require_peer("litdata")
from litdata.utilities.env import _DistributedEnv  # noqa: E402

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO:ResourceWarning")

N = 61


def _sample(i: int) -> dict[str, Any]:
    return {"i": i}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("shuffler") / "ds")
    litstream.optimize(fn=_sample, inputs=list(range(N)), output_dir=out, chunk_size=7, num_workers=1)
    return out


@pytest.mark.parametrize("shuffle", [False, True])
def test_shuffler_is_none_until_len_then_litdatas(dataset: str, shuffle: bool) -> None:
    ours = litstream.StreamingDataset(dataset, shuffle=shuffle, seed=7)
    theirs = litdata.StreamingDataset(dataset, shuffle=shuffle, seed=7)
    assert ours.shuffler is None
    assert theirs.shuffler is None
    assert len(ours) == len(theirs) == N
    assert type(ours.shuffler).__name__ == type(theirs.shuffler).__name__ == ("FullShuffle" if shuffle else "NoShuffle")
    assert isinstance(ours.shuffler, FullShuffle if shuffle else NoShuffle)
    assert (ours.shuffler.seed, ours.shuffler.drop_last) == (theirs.shuffler.seed, theirs.shuffler.drop_last)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize(
    ("world_size", "num_workers", "batch_size", "epoch"), [(1, 1, 1, 1), (2, 3, 4, 2), (4, 2, 3, 3)]
)
def test_shuffler_plans_and_orders_as_litdatas(
    dataset: str, shuffle: bool, world_size: int, num_workers: int, batch_size: int, epoch: int
) -> None:
    ours = litstream.StreamingDataset(dataset, shuffle=shuffle, seed=11, drop_last=False)
    theirs = litdata.StreamingDataset(dataset, shuffle=shuffle, seed=11, drop_last=False)
    len(ours), len(theirs)
    mine, peer = ours.shuffler, theirs.shuffler
    assert mine is not None
    assert peer is not None
    for rank in range(world_size):
        env = _DistributedEnv(world_size, rank, 1)
        assert mine.get_len(env, num_workers, batch_size, epoch) == peer.get_len(env, num_workers, batch_size, epoch)
        chunks, intervals = mine.get_chunks_and_intervals_per_workers(env, num_workers, batch_size, epoch)
        their_chunks, their_intervals = peer.get_chunks_and_intervals_per_workers(env, num_workers, batch_size, epoch)
        assert chunks == [[int(c) for c in w] for w in their_chunks]
        assert intervals == [[[int(v) for v in i] for i in w] for w in their_intervals]
    num_chunks = len(ours.subsampled_files)
    for chunk_index, interval in [(0, (0, 7)), (3, (21, 28)), (8, (58, 61)), (2, (16, 21))]:
        array = np.arange(*interval)
        assert mine(array, num_chunks, epoch, chunk_index) == [
            int(v) for v in peer(array, num_chunks, epoch, chunk_index)
        ]


def test_shuffler_is_reset_by_set_shuffle_and_set_drop_last(dataset: str) -> None:
    ours = litstream.StreamingDataset(dataset)
    theirs = litdata.StreamingDataset(dataset)
    for ds in (ours, theirs):
        len(ds)
        ds.set_shuffle(True)
        assert ds.shuffler is None
        len(ds)
        assert type(ds.shuffler).__name__ == "FullShuffle"
        ds.set_drop_last(True)
        assert ds.shuffler is None
        len(ds)
        assert ds.shuffler is not None
        assert ds.shuffler.drop_last is True


def test_shuffler_after_iteration_and_for_the_window_shuffle(dataset: str) -> None:
    ds = litstream.StreamingDataset(dataset, shuffle="window", shuffle_window=3)
    served = [s["i"] for s in ds]
    assert isinstance(ds.shuffler, WindowShuffle)
    assert ds.shuffler.window == 3
    assert sorted(served) == list(range(N))
    ds.shuffler = None  # LitData code clears it to force a new plan
    assert ds.shuffler is None
    assert len(ds) == N
    assert ds.shuffler is not None
