"""Parquet datasets indexed by one library and streamed by the other (LitData 0.2.71 as the peer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import litstream
from peer import require_dev, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")
require_dev("polars")
from litdata.streaming.item_loader import ParquetLoader as LitParquetLoader  # noqa: E402
from litdata.streaming.writer import index_parquet_dataset as lit_index_parquet_dataset  # noqa: E402

pytestmark = pytest.mark.litdata

ROWS = (6, 4, 8)


def row(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", "value": i * 1.5}


def write_dir(directory: Path) -> list[dict[str, Any]]:
    directory.mkdir(parents=True)
    start, everything = 0, []
    for k, n in enumerate(ROWS):
        rows = [row(i) for i in range(start, start + n)]
        pq.write_table(pa.Table.from_pylist(rows), directory / f"part-{k}.parquet", row_group_size=4)
        everything += rows
        start += n
    return everything


def test_litdata_streams_a_directory_litstream_indexed(tmp_path: Path) -> None:
    expected = write_dir(tmp_path / "pq")
    litstream.index_parquet_dataset(tmp_path / "pq")
    ds = litdata.StreamingDataset(str(tmp_path / "pq"), item_loader=LitParquetLoader(), shuffle=False)
    assert len(ds) == len(expected)
    assert [ds[i] for i in range(len(ds))] == expected
    assert list(ds) == expected


def test_litstream_streams_a_directory_litdata_indexed(tmp_path: Path) -> None:
    expected = write_dir(tmp_path / "pq")
    lit_index_parquet_dataset(str(tmp_path / "pq"))
    ds = litstream.StreamingDataset(tmp_path / "pq", item_loader=litstream.ParquetLoader())
    # LitData indexes files in directory-listing order: compare as sets, then by the index's file order
    assert sorted(ds, key=lambda r: r["id"]) == expected
    assert len(ds) == len(expected)
    assert sorted((ds[i] for i in range(len(ds))), key=lambda r: r["id"]) == expected
