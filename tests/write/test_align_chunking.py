"""``optimize(align_chunking=True)``: single-worker chunk boundaries with several workers (LitData as peer)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

import litstream
from litstream import ConfigurationError
from litstream.write.run._inputs import split_aligned
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")

pytestmark = pytest.mark.filterwarnings(r"ignore:unclosed file <_io\.FileIO name=:ResourceWarning")


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


def _chunk_sizes(folder: Path) -> list[int]:
    return [int(c["chunk_size"]) for c in json.loads((folder / "index.json").read_text())["chunks"]]


@pytest.mark.parametrize(("n", "workers", "chunk"), [(30, 3, 4), (41, 4, 5), (7, 2, 3)])
def test_split_is_litdata_split(n: int, workers: int, chunk: int) -> None:
    bins = split_aligned(n, workers, chunk)
    assert [list(b) for b in bins] == [list(b) for b in _litdata_split(n, workers, chunk)]
    assert [i for b in bins for i in b] == list(range(n))


def _litdata_split(n: int, workers: int, chunk: int) -> list[list[int]]:
    from litdata.processing.data_processor import _map_items_to_workers_sequentially

    return list(_map_items_to_workers_sequentially(workers, list(range(n)), chunk_size=chunk))


@pytest.mark.litdata
@pytest.mark.parametrize("workers", [3])
def test_chunks_are_those_of_one_worker_and_of_litdata(tmp_path: Path, workers: int) -> None:
    n, chunk = 30, 4
    ours, one, theirs = tmp_path / "ours", tmp_path / "one", tmp_path / "theirs"
    litstream.optimize(fn=_sample, inputs=list(range(n)), output_dir=str(ours), chunk_size=chunk,
                       num_workers=workers, align_chunking=True)  # fmt: skip
    litstream.optimize(fn=_sample, inputs=list(range(n)), output_dir=str(one), chunk_size=chunk, num_workers=1)
    litdata.optimize(fn=_sample, inputs=list(range(n)), output_dir=str(theirs), chunk_size=chunk,
                     num_workers=workers, align_chunking=True)  # fmt: skip
    assert _chunk_sizes(ours) == _chunk_sizes(one) == _chunk_sizes(theirs) == [4] * 7 + [2]
    assert [s["x"] for s in litstream.StreamingDataset(str(ours))] == list(range(n))
    assert [int(s["x"]) for s in litdata.StreamingDataset(str(ours))] == list(range(n))
    # without it, every worker closes a partial chunk of its own
    plain = tmp_path / "plain"
    litstream.optimize(fn=_sample, inputs=list(range(n)), output_dir=str(plain), chunk_size=chunk, num_workers=workers)
    assert _chunk_sizes(plain) != _chunk_sizes(one)


def test_bad_uses_are_refused(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    with pytest.raises(ConfigurationError, match=r"align_chunking=True needs chunk_size"):
        litstream.optimize(fn=_sample, inputs=[1, 2], output_dir=out, chunk_bytes="1MB", align_chunking=True)
    with pytest.raises(ConfigurationError, match=r"cannot be combined with weights"):
        litstream.optimize(fn=_sample, inputs=[1, 2], output_dir=out, chunk_size=1, weights=[1, 2],
                           align_chunking=True)  # fmt: skip
    with pytest.raises(ConfigurationError, match=r"align_chunking must be True or False"):
        litstream.optimize(fn=_sample, inputs=[1, 2], output_dir=out, chunk_size=1, align_chunking="yes")  # type: ignore[arg-type]


def test_a_chunk_too_large_warns_and_the_last_worker_takes_all(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match=r"chunk_size=8 is too large for 10 inputs over 3 workers"):
        litstream.optimize(fn=_sample, inputs=list(range(10)), output_dir=str(out), chunk_size=8, num_workers=3,
                           align_chunking=True)  # fmt: skip
    assert _chunk_sizes(out) == [8, 2]
    assert [s["x"] for s in litstream.StreamingDataset(str(out))] == list(range(10))
