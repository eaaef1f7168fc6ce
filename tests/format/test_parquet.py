"""Parquet files as chunks: footers to index entries, bytes to rows (format/arrow/_parquet.py)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from litstream import ConfigurationError, FormatError
from litstream.format.arrow._parquet import (
    ParquetChunk,
    ParquetFileInfo,
    ParquetLoader,
    footer_length,
    parquet_config,
    parquet_file_info,
)
from parquet_index import INT64_STRING_CONFIG


def parquet_bytes(rows: int, *, start: int = 0, row_group_size: int = 3) -> bytes:
    table = pa.table(
        {
            "id": list(range(start, start + rows)),
            "name": [f"row-{i}" for i in range(start, start + rows)],
            "score": [i / 4 for i in range(start, start + rows)],
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


def expected_row(i: int) -> dict[str, object]:
    return {"id": i, "name": f"row-{i}", "score": i / 4}


def test_footer_gives_rows_and_arrow_types() -> None:
    data = parquet_bytes(7)
    length = footer_length(data[-8:])
    assert 0 < length < len(data)
    footer_only = data[-(length + 8) :]
    info = parquet_file_info("a.parquet", len(data), footer_only)
    assert info == ParquetFileInfo("a.parquet", len(data), 7, ("int64", "string", "double"))
    assert info.chunk_info().to_json_obj() == {
        "chunk_bytes": len(data),
        "chunk_size": 7,
        "dim": None,
        "filename": "a.parquet",
    }


def test_footer_length_rejects_non_parquet_bytes() -> None:
    with pytest.raises(FormatError, match=r"a file is not a Parquet file: its last 8 bytes are b'12345678'"):
        footer_length(b"12345678")
    with pytest.raises(FormatError, match=r"a\.bin is not a readable Parquet file"):
        parquet_file_info("a.bin", 20, b"\x00" * 12 + b"\x04\x00\x00\x00PAR1")


def test_rows_across_row_groups_and_column_subsets() -> None:
    chunk = ParquetChunk(parquet_bytes(7, start=10))
    assert chunk.num_items == 7
    assert [chunk.item(i) for i in range(7)] == [expected_row(10 + i) for i in range(7)]
    subset = ParquetChunk(parquet_bytes(7), columns=("score", "id"))
    assert subset.item(5) == {"score": 5 / 4, "id": 5}
    row = chunk.item(0)
    row["id"] = -1  # a caller's change does not leak into later reads
    assert chunk.item(0) == expected_row(10)


def test_row_out_of_range_and_missing_column_are_errors() -> None:
    chunk = ParquetChunk(parquet_bytes(4))
    with pytest.raises(FormatError, match="row 4 is outside this Parquet file of 4 rows"):
        chunk.item(4)
    with pytest.raises(FormatError, match=r"names \['nope'\], which the file lacks"):
        ParquetChunk(parquet_bytes(4), columns=("id", "nope"))
    with pytest.raises(FormatError, match="a chunk is not a readable Parquet file"):
        ParquetChunk(b"definitely not parquet")


def test_config_requires_identical_column_types() -> None:
    a = ParquetFileInfo("a.parquet", 10, 2, ("int64", "string"))
    b = ParquetFileInfo("b.parquet", 10, 3, ("int64", "large_string"))
    config = parquet_config([a])
    assert config.to_json_obj() == INT64_STRING_CONFIG
    with pytest.raises(FormatError, match=r"b.parquet has column types \['int64', 'large_string'\] but a.parquet"):
        parquet_config([a, b])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"columns": "id"}, r"ParquetLoader\(columns='id'\): expected a non-empty list"),
        ({"columns": []}, r"ParquetLoader\(columns=\[\]\): expected a non-empty list"),
        ({"low_memory": 1}, r"ParquetLoader\(low_memory=1\): expected True or False"),
    ],
)
def test_loader_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ParquetLoader(**kwargs)  # type: ignore[arg-type]


def test_loader_state_dict_records_its_settings() -> None:
    assert ParquetLoader(columns=["a", "b"]).state_dict() == {
        "pre_load_chunk": False,
        "low_memory": True,
        "columns": ["a", "b"],
    }
