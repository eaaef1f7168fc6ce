"""A local compressed dataset that LitData has read (its chunks decompressed in place) still reads in litstream.

LitData decompresses ``chunk-*.zstd.bin`` next to itself as ``chunk-*.bin`` and removes the compressed
file, while ``index.json`` keeps naming it; litstream used to fail with ``ObjectNotFoundError``.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

import litstream
from litstream import FormatError, StreamingDataLoader, StreamingDataset
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO name=:ResourceWarning")

N = 40


def _sample(i: int) -> dict[str, object]:
    return {"x": i, "text": f"sample {i} " * (i % 5)}


@pytest.fixture
def read_by_litdata(tmp_path: Path) -> Path:
    """A zstd dataset after LitData read it once: only the decompressed chunk files remain."""
    out = tmp_path / "data"
    litstream.optimize(fn=_sample, inputs=list(range(N)), output_dir=str(out), chunk_size=8, num_workers=1,
                       compression="zstd")  # fmt: skip
    compressed = sorted(p.name for p in out.glob("chunk-*.zstd.bin"))
    assert len(compressed) == 5
    assert [s["x"] for s in litdata.StreamingDataset(str(out))] == list(range(N))
    assert sorted(p.name for p in out.glob("chunk-*.bin")) == [n.replace(".zstd", "") for n in compressed]
    return out


def _rows(ds: StreamingDataset) -> list[tuple[int, str]]:
    return [(int(s["x"]), str(s["text"])) for s in ds]


def test_only_the_decompressed_chunks_remain(read_by_litdata: Path) -> None:
    expected = [(i, str(_sample(i)["text"])) for i in range(N)]
    assert _rows(StreamingDataset(read_by_litdata)) == expected
    assert StreamingDataset(read_by_litdata)[13]["x"] == 13  # random access too
    loader = StreamingDataLoader(StreamingDataset(read_by_litdata, shuffle=True), batch_size=4, num_workers=2)
    assert sorted(int(x) for batch in loader for x in batch["x"]) == list(range(N))


def test_both_files_present(read_by_litdata: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    litstream.optimize(fn=_sample, inputs=list(range(N)), output_dir=str(fresh), chunk_size=8, num_workers=1,
                       compression="zstd")  # fmt: skip
    for p in fresh.glob("chunk-*.zstd.bin"):  # the moment before LitData removes the compressed file
        shutil.copy(p, read_by_litdata / p.name)
    assert _rows(StreamingDataset(read_by_litdata)) == [(i, str(_sample(i)["text"])) for i in range(N)]


def test_a_truncated_decompressed_chunk_is_refused(read_by_litdata: Path) -> None:
    victim = read_by_litdata / "chunk-0-2.bin"
    victim.write_bytes(victim.read_bytes()[:-10])
    with pytest.raises(FormatError, match=r"chunk-0-2\.zstd\.bin holds .* bytes but index.json records chunk_bytes"):
        _rows(StreamingDataset(read_by_litdata))
