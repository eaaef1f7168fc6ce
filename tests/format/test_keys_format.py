"""The ``keys/`` sidecar codec (format/_keys.py): round trips, LitData's shard hash, and hostile files."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from litstream import ConfigurationError, DuplicateKeyError, FormatError
from litstream.format._keys import (
    decode_key_table,
    encode_key_table,
    key_shard,
    normalize_key,
    parse_keys_config,
    shard_split,
    sorted_table,
    table_from_values,
)


def parquet_bytes(columns: dict[str, Any]) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink)
    return bytes(sink.getvalue().to_pybytes())


def test_round_trip_and_lookup() -> None:
    keys, indices = table_from_values(["b", "a", "c", "é"], source="t")
    table = sorted_table(keys, indices, source="t")
    data = encode_key_table(table.keys, table.indices, chunk_starts=[0, 2])
    read = pq.read_table(pa.BufferReader(data))
    assert read.column("key").to_pylist() == ["a", "b", "c", "é"]
    assert read.column("index").to_pylist() == [1, 0, 2, 3]
    assert read.column("chunk_index").to_pylist() == [0, 0, 1, 1]
    assert read.column("chunk_offset").to_pylist() == [1, 0, 2, 3]
    k, i, _ = decode_key_table(data, source="t", num_items=4)
    again = sorted_table(k, i, source="t")
    lookups: list[str | int] = ["a", "b", "c", "é", "zz", 3]
    assert [again.find(x) for x in lookups] == [1, 0, 2, 3, None, None]
    ints = sorted_table(*table_from_values([30, -5, 7], source="t"), source="t")
    values: list[str | int] = [30, -5, 7, 8, "30"]
    assert [ints.find(x) for x in values] == [0, 1, 2, None, None]


def test_shard_hash_is_litdatas() -> None:
    shard_keys: list[str | int] = ["a", "user-42", 7, -3]
    for key in shard_keys:
        digest = hashlib.blake2b(str(key).encode(), digest_size=8).digest()
        assert key_shard(key, 5) == int.from_bytes(digest, "little") % 5
    assert key_shard("x", 1) == 0
    table = sorted_table(*table_from_values([f"k{i}" for i in range(50)], source="t"), source="t")
    parts = shard_split(table, 4)
    assert sum(len(p) for p in parts) == 50
    for s, part in enumerate(parts):
        assert all(key_shard(k, 4) == s for k in part.keys.to_pylist())


def test_normalize_key() -> None:
    assert normalize_key(np.int32(5)) == 5
    assert normalize_key(b"ab") == "ab"
    for bad in [None, True, 1.5, 2**64, b"\xff"]:
        with pytest.raises(ConfigurationError):
            normalize_key(bad)


def test_duplicates_name_both_inputs() -> None:
    keys, indices = table_from_values(["x", "y", "x"], source="t")
    with pytest.raises(DuplicateKeyError, match=r"duplicate key 'x' in t: produced by input A and input C"):
        sorted_table(keys, indices, source="t", inputs=["input A", "input B", "input C"])
    with pytest.raises(FormatError, match=r"str keys .* and int keys"):
        table_from_values(["x", 1], source="t")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not parquet at all", "not a readable Parquet file"),
        (parquet_bytes({"key": ["a"]}), "no 'index' column"),
        (parquet_bytes({"key": [1.5], "index": [0]}), "column 'key' has type double"),
        (parquet_bytes({"key": ["a", None], "index": [0, 1]}), "null values"),
        (parquet_bytes({"key": ["a"], "index": ["0"]}), "column 'index' has type string"),
        (parquet_bytes({"key": ["a"], "index": [5]}), r"outside the dataset's 3 items"),
        (parquet_bytes({"key": ["a"], "index": [-1]}), r"outside the dataset's 3 items"),
        (parquet_bytes({"key": ["a", "b", "c", "d"], "index": [0, 1, 2, 2]}), "lists 4 keys for a dataset of 3"),
    ],
)
def test_hostile_shards_raise_format_error(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        decode_key_table(data, source="keys/shard-00000.parquet", num_items=3)


def test_hostile_keys_sections() -> None:
    assert parse_keys_config(None) is None
    assert parse_keys_config({"num_shards": 3, "sharding": "hash", "version": 1}) == 3
    for bad in [[], {"num_shards": "3"}, {"num_shards": 0}, {"num_shards": 10**9}, {"num_shards": 2, "sharding": "x"}]:
        with pytest.raises(FormatError):
            parse_keys_config(bad)
