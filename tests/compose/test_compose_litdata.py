"""Combined and Parallel serve what LitData's serve, on the same data, in one process (LitData as test peer)."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

import pytest

from litstream import CombinedStreamingDataset, ParallelStreamingDataset, StreamingDataset
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")

pytestmark = [
    pytest.mark.litdata,
    # LitData's item loader drops open chunk files without closing them.
    pytest.mark.filterwarnings(r"ignore:unclosed file <_io\.FileIO name=:ResourceWarning"),
]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"seed": 3},
        {"iterate_over_all": False},
        {"iterate_over_all": False, "weights": [0.3, 0.6, 0.1]},
        {"iterate_over_all": False, "weights": [2, 0, 1]},
        {"batching_method": "per_stream"},
        {"batching_method": "per_stream", "iterate_over_all": False, "weights": [0.5, 0.2, 0.3]},
    ],
    ids=["all", "all-seed3", "default-weights", "weights", "zero-weight", "per-stream", "per-stream-weights"],
)
@pytest.mark.parametrize("shuffle", [False, True])
def test_same_mix_as_litdata(
    ints_50: Path, odd_37: Path, thousands_50: Path, tmp_path: Path, kwargs: dict[str, Any], shuffle: bool
) -> None:
    paths = (ints_50, odd_37, thousands_50)
    # LitData reads its own copies (it may write next to the chunks).
    copies = [shutil.copytree(p, tmp_path / f"litdata-{i}") for i, p in enumerate(paths)]
    peer = litdata.CombinedStreamingDataset(
        [litdata.StreamingDataset(str(p), shuffle=shuffle) for p in copies], **kwargs
    )
    mine = CombinedStreamingDataset([StreamingDataset(p, shuffle=shuffle) for p in paths], **kwargs)
    peer.set_batch_size(4)  # the run length of "per_stream"
    mine.set_batch_size(4)
    theirs, ours = list(peer), list(mine)
    assert ours == [int(x) for x in theirs]
    if kwargs.get("iterate_over_all", True):
        assert sorted(ours) == list(range(50)) + list(range(1000, 1050)) + list(range(2000, 2037))


@pytest.mark.parametrize("length", [None, 61, 200])
@pytest.mark.parametrize("shuffle", [False, True])
def test_parallel_same_tuples_as_litdata(
    ints_50: Path, odd_37: Path, tmp_path: Path, length: int | None, shuffle: bool
) -> None:
    paths = (ints_50, odd_37)
    copies = [shutil.copytree(p, tmp_path / f"litdata-{i}") for i, p in enumerate(paths)]
    peer = litdata.ParallelStreamingDataset(
        [litdata.StreamingDataset(str(p), shuffle=shuffle) for p in copies], length=length
    )
    theirs = [tuple(int(x) for x in t) for t in peer]
    ours = list(ParallelStreamingDataset([StreamingDataset(p, shuffle=shuffle) for p in paths], length=length))
    assert ours == theirs
    assert len(ours) == (length or 37)
