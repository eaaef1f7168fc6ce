"""index_parquet_dataset on local directories: the index it writes, where, and its errors."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from litstream import DatasetNotFoundError, FormatError, index_parquet_dataset
from parquet_index import INT64_STRING_CONFIG
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

ROWS = (7, 5, 9)


def write_parquet_dir(directory: Path, rows: tuple[int, ...] = ROWS) -> list[Path]:
    """One file per entry of ``rows`` (``part-{k}.parquet``), ids numbered across files."""
    directory.mkdir(parents=True, exist_ok=True)
    paths, start = [], 0
    for k, n in enumerate(rows):
        table = pa.table({"id": list(range(start, start + n)), "text": [f"t{i}" for i in range(start, start + n)]})
        path = directory / f"part-{k}.parquet"
        pq.write_table(table, path, row_group_size=4)
        paths.append(path)
        start += n
    return paths


def test_index_lands_next_to_the_files_by_default(tmp_path: Path) -> None:
    paths = write_parquet_dir(tmp_path / "pq")
    (tmp_path / "pq" / "notes.txt").write_text("not parquet")
    (tmp_path / "pq" / "nested").mkdir()
    write_parquet_dir(tmp_path / "pq" / "nested", (3,))  # only the top level is indexed
    index = index_parquet_dataset(tmp_path / "pq")
    on_disk = json.loads((tmp_path / "pq" / "index.json").read_text())
    assert on_disk == json.loads(index.to_json())
    assert on_disk["chunks"] == [
        {"chunk_bytes": os.path.getsize(p), "chunk_size": n, "dim": None, "filename": p.name}
        for p, n in zip(paths, ROWS, strict=True)
    ]
    assert on_disk["config"] == INT64_STRING_CONFIG
    assert float(on_disk["updated_at"]) > 0


def test_cache_dir_keeps_the_parquet_directory_unchanged(tmp_path: Path) -> None:
    write_parquet_dir(tmp_path / "pq")
    before = sorted(os.listdir(tmp_path / "pq"))
    index_parquet_dataset(tmp_path / "pq", cache_dir=tmp_path / "idx")
    assert sorted(os.listdir(tmp_path / "pq")) == before
    assert sorted(os.listdir(tmp_path / "idx")) == ["index.json"]
    assert [c["chunk_size"] for c in json.loads((tmp_path / "idx" / "index.json").read_text())["chunks"]] == [7, 5, 9]


def test_errors_name_the_directory_and_the_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetNotFoundError, match=r"empty holds no \*\.parquet file at its top level"):
        index_parquet_dataset(tmp_path / "empty")
    write_parquet_dir(tmp_path / "mixed", (2,))
    pq.write_table(pa.table({"id": [1.5]}), tmp_path / "mixed" / "part-9.parquet")
    with pytest.raises(FormatError, match=r"part-9.parquet has column types \['double'\] but part-0.parquet"):
        index_parquet_dataset(tmp_path / "mixed", cache_dir=tmp_path / "idx")
    assert not (tmp_path / "idx").exists()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.parquet").write_bytes(b"0123456789abcdefPAR0")
    with pytest.raises(FormatError, match=r"bad/x.parquet is not a Parquet file: its last 8 bytes are b'cdefPAR0'"):
        index_parquet_dataset(tmp_path / "bad")
    with pytest.raises(ValueError, match=r"num_workers=0: expected an int >= 1"):
        index_parquet_dataset(tmp_path / "pq", num_workers=0)


@pytest.mark.litdata
def test_same_index_as_litdata(tmp_path: Path) -> None:
    litdata_writer = require_peer("litdata.streaming.writer")
    write_parquet_dir(tmp_path / "pq")
    ours = index_parquet_dataset(tmp_path / "pq", cache_dir=tmp_path / "ours")
    (tmp_path / "theirs").mkdir()
    litdata_writer.index_parquet_dataset(str(tmp_path / "pq"), cache_dir=str(tmp_path / "theirs"))
    theirs = json.loads((tmp_path / "theirs" / "index.json").read_text())
    mine = json.loads(ours.to_json())
    assert mine["config"] == theirs["config"]
    by_name = sorted(theirs["chunks"], key=lambda c: c["filename"])  # LitData keeps the listing's order
    assert mine["chunks"] == by_name
