"""The opt-in window shuffle and multi-node plans through the torch facades."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from litstream import ConfigurationError, StreamingDataLoader, StreamingDataset, optimize
from resume_law import assert_resume_law

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="module")
def sorted_ints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sorted")
    optimize(fn=lambda i: i, inputs=range(160), output_dir=d, chunk_size=10, num_workers=1, verbose=False)
    return d


def test_window_shuffle_mixes_chunks_and_keeps_every_item(sorted_ints: Path) -> None:
    ds = StreamingDataset(sorted_ints, shuffle="window", shuffle_window=4)
    first = list(ds)
    assert sorted(first) == list(range(160))
    assert len({i // 10 for i in first[:10]}) > 1  # FullShuffle would serve one chunk's items first
    full = list(StreamingDataset(sorted_ints, shuffle=True))
    assert len({i // 10 for i in full[:10]}) == 1
    assert list(StreamingDataset(sorted_ints, shuffle="window", shuffle_window=4)) == first


def test_window_shuffle_through_the_loader_with_workers(sorted_ints: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(sorted_ints, shuffle="window"), batch_size=8, num_workers=2)
    items = [int(x) for batch in loader for x in batch]
    assert sorted(items) == list(range(160))
    assert len(loader) == 20


@pytest.mark.parametrize("stop_after", [0, 3, 9])
def test_window_shuffle_obeys_the_resume_law(sorted_ints: Path, stop_after: int) -> None:
    assert_resume_law(
        lambda: StreamingDataLoader(StreamingDataset(sorted_ints, shuffle="window", shuffle_window=3), batch_size=8),
        stop_after=stop_after,
    )


def test_bad_shuffle_values_are_rejected(sorted_ints: Path) -> None:
    with pytest.raises(ConfigurationError, match="shuffle must be True or False, got 'windows'"):
        StreamingDataset(sorted_ints, shuffle="windows")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="shuffle_window"):
        StreamingDataset(sorted_ints, shuffle="window", shuffle_window=0)


def test_two_nodes_epoch_one_covers_every_item_once(sorted_ints: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NNODES", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    seen: list[int] = []
    lengths = []
    for rank in range(4):
        monkeypatch.setenv("GLOBAL_RANK", str(rank))
        ds = StreamingDataset(sorted_ints, shuffle=True)
        items = list(ds)
        lengths.append(len(items))
        ds.set_epoch(1)
        assert len(ds) == len(items)
        seen += items
    assert sorted(seen) == list(range(160))
    assert lengths == [40, 40, 40, 40]


def test_resume_with_several_nodes_is_refused(sorted_ints: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loader = StreamingDataLoader(StreamingDataset(sorted_ints, shuffle=True), batch_size=4)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    it.close()
    monkeypatch.setenv("NNODES", "2")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("GLOBAL_RANK", "0")
    again = StreamingDataLoader(StreamingDataset(sorted_ints, shuffle=True), batch_size=4)
    with pytest.raises(ConfigurationError, match="num_nodes=2 is not supported yet"):
        again.load_state_dict(state)
        next(iter(again))
