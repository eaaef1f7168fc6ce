"""The MDS index and sample decoding (``format/mds/_index.py``, ``format/mds/_encodings.py``) on hand-made,
hostile input: every malformed field is a ``FormatError`` naming it, never a crash or a wrong sample.
The samples MDSWriter itself writes are covered in ``tests/compat/test_mds_compat.py``."""

from __future__ import annotations

import gzip
import json
import struct
from typing import Any

import numpy as np
import pytest

from litstream import ConfigurationError, FormatError
from litstream.format.mds._encodings import MdsDecoder
from litstream.format.mds._index import decompress_shard, is_mds_config, parse_index


def _shard(**overrides: Any) -> dict[str, Any]:
    shard: dict[str, Any] = {
        "column_encodings": ["int", "str", "ndarray"],
        "column_names": ["a", "b", "c"],
        "column_sizes": [8, None, None],
        "compression": None,
        "format": "mds",
        "hashes": [],
        "raw_data": {"basename": "shard.00000.mds", "bytes": 100, "hashes": {}},
        "samples": 3,
        "size_limit": 1 << 20,
        "version": 2,
        "zip_data": None,
    }
    shard.update(overrides)
    return shard


def _index(*shards: dict[str, Any]) -> bytes:
    return json.dumps({"version": 2, "shards": list(shards)}).encode()


def test_a_valid_index_becomes_chunks_and_an_mds_config() -> None:
    second = _shard(
        raw_data={"basename": "part/shard.00001.mds", "bytes": 50},
        zip_data={"basename": "part/shard.00001.mds.zstd", "bytes": 20},
        compression="zstd",
        samples=2,
    )
    first = _shard(compression="zstd", zip_data={"basename": "shard.00000.mds.zstd", "bytes": 40})
    index = parse_index(_index(first, second))
    assert index is not None
    assert [(c.filename, c.chunk_size, c.chunk_bytes) for c in index.chunks] == [
        ("shard.00000.mds.zstd", 3, 100),
        ("part/shard.00001.mds.zstd", 2, 50),
    ]
    assert index.config is not None
    assert is_mds_config(index.config)
    assert index.config.data_format == ("int", "str", "ndarray")
    assert index.config.compression == "zstd"
    assert index.num_items == 5


def test_a_litdata_index_is_not_mds() -> None:
    assert parse_index(json.dumps({"chunks": [], "config": None}).encode()) is None
    assert parse_index(b"not json") is None


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"format": "json"}, "format='json'"),
        ({"samples": -1}, "samples=-1"),
        ({"samples": True}, "samples=True"),
        ({"compression": "lzma"}, "'lzma' is not an MDS compression"),
        ({"compression": "zstd:99"}, "'zstd:99' is not an MDS compression"),
        ({"compression": "gz", "zip_data": None}, "zip_data must be an object"),
        ({"raw_data": {"basename": "../etc/passwd", "bytes": 1}}, "not a relative file name"),
        ({"raw_data": {"basename": "/abs.mds", "bytes": 1}}, "not a relative file name"),
        ({"raw_data": {"basename": "a/./b.mds", "bytes": 1}}, "not a relative file name"),
        ({"raw_data": {"basename": "x.mds", "bytes": "many"}}, "bytes='many'"),
        ({"column_names": ["a", "a", "c"]}, "must be distinct"),
        ({"column_names": ["a", "b"]}, "differ in length"),
        ({"column_encodings": ["int", "str", "complex128"]}, "'complex128' is not supported"),
        ({"column_encodings": ["int", "str", "ndarray:complex64"]}, "not ndarray"),
        ({"column_encodings": ["int", "str", "ndarray:int8:0,3"]}, "dimension below 1"),
        ({"column_sizes": [4, None, None]}, "has size 4 in the index, expected 8"),
        ({"column_sizes": [8, 3, None]}, "has size 3 in the index, expected None"),
    ],
)
def test_malformed_shard_fields_are_format_errors(override: dict[str, Any], message: str) -> None:
    with pytest.raises(FormatError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_index(_index(_shard(**override)), source="x/index.json")


def test_shards_with_different_schemas_are_refused() -> None:
    other = _shard(column_encodings=["int", "bytes", "ndarray"])
    with pytest.raises(FormatError, match=r"shards\[1\] differs from shards\[0\] in \['column_encodings'\]"):
        parse_index(_index(_shard(), other))


def test_an_index_without_shards_is_refused() -> None:
    with pytest.raises(FormatError, match="no shards"):
        parse_index(_index())


def _decoder(encodings: list[str], sizes: list[int | None]) -> MdsDecoder:
    names = [f"c{i}" for i in range(len(encodings))]
    index = parse_index(_index(_shard(column_encodings=encodings, column_names=names, column_sizes=sizes)))
    assert index is not None
    assert index.config is not None
    return MdsDecoder(index.config)


def _item(sizes: list[int], *values: bytes) -> bytes:
    return struct.pack(f"<{len(sizes)}I", *sizes) + b"".join(values)


def test_decoder_reads_fixed_and_variable_columns() -> None:
    decoder = _decoder(["int", "str", "ndarray", "float32"], [8, None, None, 4])
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    arr_bytes = bytes([33, (2 << 2) | 0]) + bytes([2, 3]) + array.tobytes()
    minus_seven = (-7).to_bytes(8, "little", signed=True)
    item = _item([3, len(arr_bytes)], minus_seven, b"abc", arr_bytes, struct.pack("<f", 1.5))
    sample = decoder.decode(item)
    assert sample["c0"] == -7
    assert type(sample["c0"]) is int
    assert sample["c1"] == "abc"
    np.testing.assert_array_equal(sample["c2"], array)
    assert sample["c2"].dtype == np.int32
    assert sample["c3"] == np.float32(1.5)
    assert sample["c3"].dtype == np.float32


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (b"\x01\x00", "shorter than its 4-byte size header"),
        (_item([10], b"\x00" * 8, b"short"), "has columns of"),
        (_item([3], b"\x00" * 8, b"\xff\xfe\xfd"), "'c1' \\(str\\) does not decode"),
    ],
)
def test_decoder_refuses_inconsistent_items(item: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        _decoder(["int", "str"], [8, None]).decode(item)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (bytes([99, 4, 1, 0]), "unknown dtype code"),
        (bytes([8]), "ends before its shape"),
        (bytes([8, (1 << 2) | 0, 5, 1, 2]), r"shape \(5,\) holds 2 bytes"),
    ],
)
def test_decoder_refuses_malformed_arrays(value: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        _decoder(["ndarray"], [None]).decode(_item([len(value)], value))


def test_shard_decompression_and_its_errors() -> None:
    assert decompress_shard(gzip.compress(b"payload"), "gz:9") == b"payload"
    with pytest.raises(FormatError, match="does not decompress with 'gz'"):
        decompress_shard(b"not gzip", "gz")
    with pytest.raises(FormatError, match="does not decompress with 'zstd'"):
        decompress_shard(b"not zstd", "zstd")


def test_missing_codec_package_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def no_brotli(name: str, package: str | None = None) -> Any:
        if name == "brotli":
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", no_brotli)
    with pytest.raises(ConfigurationError, match="pip install brotli"):
        decompress_shard(b"x", "br")


def test_a_pkl_column_is_refused_before_decoding_when_pickles_are_not_allowed() -> None:
    from litstream import PickleRefusedError
    from litstream.format._index import DatasetConfig
    from litstream.format.mds._encodings import MdsDecoder

    config = DatasetConfig(
        data_format=("int", "pkl"),
        data_spec=None,
        extra={"column_names": ["n", "obj"], "column_sizes": [8, None]},
    )
    with pytest.raises(PickleRefusedError, match=r"column 'obj' with MDS's pkl encoding"):
        MdsDecoder(config, allow_pickle=False, where="the dataset x")
    MdsDecoder(config)  # allowed by default, as LitData and mosaic
