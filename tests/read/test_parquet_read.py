"""Streaming Parquet directories with ParquetLoader: reported failure B28 (``index_path``), rows, errors, resume."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from litstream import (
    ConfigurationError,
    ParquetLoader,
    StreamingDataLoader,
    StreamingDataset,
    astream,
    index_parquet_dataset,
    optimize,
)
from resume_law import assert_resume_law

if TYPE_CHECKING:
    from pathlib import Path

ROWS = (7, 5, 9)
TOTAL = sum(ROWS)


def row(i: int) -> dict[str, Any]:
    return {"id": i, "text": f"text-{i}", "score": i / 8}


def write_parquet_dir(directory: Path, rows: tuple[int, ...] = ROWS) -> None:
    """``part-{k}.parquet`` per entry of ``rows``; ids run 0..sum(rows)-1 across the files in name order."""
    directory.mkdir(parents=True, exist_ok=True)
    start = 0
    for k, n in enumerate(rows):
        table = pa.Table.from_pylist([row(i) for i in range(start, start + n)])
        pq.write_table(table, directory / f"part-{k}.parquet", row_group_size=3)
        start += n


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, Path]:
    """B28's setup: the index lands in a separate directory, the Parquet directory stays untouched."""
    pq_dir, idx_dir = tmp_path / "pq", tmp_path / "idx"
    write_parquet_dir(pq_dir)
    index_parquet_dataset(pq_dir, cache_dir=idx_dir)
    return pq_dir, idx_dir


def test_b28_index_path_with_a_local_parquet_directory(indexed: tuple[Path, Path]) -> None:
    pq_dir, idx_dir = indexed
    before = sorted(os.listdir(pq_dir))
    ds = StreamingDataset(pq_dir, index_path=idx_dir / "index.json", item_loader=ParquetLoader(), shuffle=True)
    assert len(ds) == TOTAL
    rows = list(ds)
    assert sorted(r["id"] for r in rows) == list(range(TOTAL))
    assert sorted(rows, key=lambda r: r["id"]) == [row(i) for i in range(TOTAL)]
    assert sorted(os.listdir(pq_dir)) == before  # no index.json written into it
    # a directory holding index.json works as index_path too
    assert len(StreamingDataset(pq_dir, index_path=idx_dir, item_loader=ParquetLoader())) == TOTAL


def test_b28_missing_index_path_names_the_path(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    pq_dir, _ = indexed
    missing = tmp_path / "nowhere" / "index.json"
    ds = StreamingDataset(pq_dir, index_path=missing, item_loader=ParquetLoader())
    with pytest.raises(FileNotFoundError, match=f"index_path='{missing}': no index file at {missing}"):
        len(ds)


def test_random_access_order_and_column_subset(indexed: tuple[Path, Path]) -> None:
    pq_dir, idx_dir = indexed
    ds = StreamingDataset(pq_dir, index_path=idx_dir, item_loader=ParquetLoader())
    assert list(ds) == [row(i) for i in range(TOTAL)]  # no shuffle: file order, then row order
    assert [ds[i] for i in (0, 6, 7, 11, 12, 20)] == [row(i) for i in (0, 6, 7, 11, 12, 20)]
    narrow = StreamingDataset(pq_dir, index_path=idx_dir, item_loader=ParquetLoader(columns=["score", "id"]))
    assert narrow[9] == {"score": 9 / 8, "id": 9}


def test_loader_with_workers_collates_rows(indexed: tuple[Path, Path]) -> None:
    pq_dir, idx_dir = indexed
    ds = StreamingDataset(pq_dir, index_path=idx_dir, item_loader=ParquetLoader(), shuffle=True)
    batches = list(StreamingDataLoader(ds, batch_size=4, num_workers=2))
    ids = [i for b in batches for i in b["id"].tolist()]
    assert sorted(ids) == list(range(TOTAL))
    assert all(isinstance(b["id"], torch.Tensor) for b in batches)
    texts = [t for b in batches for t in b["text"]]
    assert sorted(texts) == sorted(f"text-{i}" for i in range(TOTAL))


def test_loader_must_match_the_dataset(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    pq_dir, idx_dir = indexed
    with pytest.raises(ConfigurationError, match=r"is a Parquet dataset .*; pass item_loader=ParquetLoader\(\)"):
        len(StreamingDataset(pq_dir, index_path=idx_dir))
    optimize(fn=lambda i: i, inputs=list(range(4)), output_dir=tmp_path / "ints", chunk_size=2, verbose=False)
    with pytest.raises(ConfigurationError, match=r"not by index_parquet_dataset; drop item_loader=ParquetLoader\(\)"):
        len(StreamingDataset(tmp_path / "ints", item_loader=ParquetLoader()))
    with pytest.raises(ConfigurationError, match=r"item_loader='parquet' is not supported"):
        StreamingDataset(pq_dir, item_loader="parquet")  # type: ignore[arg-type]


def _ids(r: dict[str, Any]) -> int:
    return int(r["id"])


def test_parquet_dataset_obeys_the_resume_law(indexed: tuple[Path, Path]) -> None:
    pq_dir, idx_dir = indexed

    def make(workers: int) -> Any:
        def build() -> StreamingDataLoader:
            ds = StreamingDataset(pq_dir, index_path=idx_dir, item_loader=ParquetLoader(), shuffle=True, transform=_ids)
            return StreamingDataLoader(ds, batch_size=2, num_workers=workers)

        return build

    assert_resume_law(make(0), stop_after=3)
    assert_resume_law(make(2), stop_after=2, make_resumed_loader=make(1))


@pytest.mark.anyio
async def test_astream_reads_parquet_rows(indexed: tuple[Path, Path], anyio_backend: str) -> None:
    pq_dir, idx_dir = indexed
    rows = [r async for r in astream(pq_dir, index_path=idx_dir / "index.json", item_loader=ParquetLoader())]
    assert rows == [row(i) for i in range(TOTAL)]
    async with astream(
        pq_dir, index_path=idx_dir, item_loader=ParquetLoader(columns=["id"]), shuffle=True, seed=7
    ) as samples:
        ids = [r["id"] async for r in samples]
    assert sorted(ids) == list(range(TOTAL))
    assert ids != list(range(TOTAL))
