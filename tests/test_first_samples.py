"""The first samples of a local dataset are served before the engine starts, with the same result."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

import litstream
from litstream import ObjectNotFoundError

if TYPE_CHECKING:
    from pathlib import Path


def _sample(i: int) -> dict[str, int]:
    return {"i": i}


@pytest.fixture
def small_chunks(tmp_path: Path) -> Path:
    out = tmp_path / "ds"
    litstream.optimize(_sample, list(range(20)), out, chunk_size=3, num_workers=1, verbose=False)
    return out


async def _astream_ids(path: Path, shuffle: bool) -> list[int]:
    return [s["i"] async for s in litstream.astream(path, shuffle=shuffle)]


@pytest.mark.parametrize("shuffle", [False, True])
def test_same_samples_in_the_same_order(small_chunks: Path, shuffle: bool) -> None:
    expected = anyio.run(_astream_ids, small_chunks, shuffle)  # astream does not take the head path
    assert sorted(expected) == list(range(20))
    assert [s["i"] for s in litstream.StreamingDataset(small_chunks, shuffle=shuffle)] == expected
    transformed = litstream.StreamingDataset(small_chunks, shuffle=shuffle, transform=lambda s: s["i"] * 10)
    assert list(transformed) == [i * 10 for i in expected]


def test_a_missing_first_chunk_raises_at_the_first_sample(small_chunks: Path) -> None:
    (small_chunks / "chunk-0-0.bin").unlink()
    it = iter(litstream.StreamingDataset(small_chunks))
    with pytest.raises(ObjectNotFoundError, match=r"get: .*chunk-0-0\.bin does not exist"):
        next(it)


def test_without_index_json_the_dataset_opens_on_the_event_loop(small_chunks: Path) -> None:
    (small_chunks / "index.json").rename(small_chunks / "0.index.json")  # as an unfinished optimize leaves it
    with pytest.warns(UserWarning, match="partial indexes of an uncommitted run"):  # served only when asked
        served = [s["i"] for s in litstream.StreamingDataset(small_chunks, version="partial")]
    assert served == list(range(20))
