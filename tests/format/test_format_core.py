from __future__ import annotations

import json
import subprocess
import sys
from collections import OrderedDict, defaultdict, deque
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from litstream import ConfigurationError, FormatError
from litstream._core._units import parse_bytes
from litstream.format._chunk import ChunkBuilder, ChunkView, chunk_filename, local_chunk_filename, pack_chunk
from litstream.format._compression import compress, decompress, validate_compression
from litstream.format._index import (
    ChunkInfo,
    DatasetConfig,
    Index,
    is_partial_index_name,
    merge_partial_indexes,
    natural_sort_key,
)
from litstream.format._pytree import spec_from_json, spec_to_json, tree_flatten, tree_unflatten

LEAF = '{"type": null, "context": null, "children_spec": []}'


def test_data_spec_matches_litdata_example() -> None:
    leaves, spec = tree_flatten((1, [2, 3]))
    assert leaves == [1, 2, 3]
    assert spec_to_json(spec) == (
        '[1, {"type": "builtins.tuple", "context": "null", "children_spec": [' + LEAF + ", "
        '{"type": "builtins.list", "context": "null", "children_spec": [' + LEAF + ", " + LEAF + "]}]}]"
    )


def test_data_spec_of_dict_keeps_insertion_order() -> None:
    leaves, spec = tree_flatten({"b": 1, "a": {"x": 2}})
    assert leaves == [1, 2]
    assert json.loads(spec_to_json(spec))[1]["context"] == '["b", "a"]'


@pytest.mark.parametrize(
    "sample",
    [
        5,
        (1, [2, 3]),
        {"b": 1, "a": {"x": [1, 2]}},
        OrderedDict(a=1, b=(2,)),
        deque([1, 2], maxlen=3),
        defaultdict[str, Any](list, {"k": 1}),
        [],
        {},
        (),
    ],
)
def test_pytree_round_trip(sample: object) -> None:
    leaves, spec = tree_flatten(sample)
    rebuilt = tree_unflatten(leaves, spec_from_json(spec_to_json(spec)))
    assert rebuilt == sample
    assert type(rebuilt) is type(sample)


def test_namedtuple_is_rejected_with_fix() -> None:
    class Point(NamedTuple):
        x: int

    with pytest.raises(FormatError, match=r"namedtuple 'test_namedtuple_is_rejected_with_fix.<locals>.Point'.*_asdict"):
        tree_flatten({"p": Point(1)})


def test_unflatten_rejects_wrong_leaf_count() -> None:
    _, spec = tree_flatten([1, 2])
    with pytest.raises(FormatError, match="describes 2 leaves but 3 were decoded"):
        tree_unflatten([1, 2, 3], spec)


@given(st.lists(st.binary(max_size=40), max_size=30))
def test_chunk_layout_round_trip(items: list[bytes]) -> None:
    data = pack_chunk(items)
    assert int.from_bytes(data[:4], "little") == len(items)
    assert len(data) == 4 * (len(items) + 2) + sum(map(len, items))
    view = ChunkView(data)
    assert view.num_items == len(items)
    assert [bytes(view.item(i)) for i in range(len(items))] == items


def test_chunk_view_rejects_out_of_range_and_truncation() -> None:
    data = pack_chunk([b"abc", b"de"])
    with pytest.raises(FormatError, match="item 2 is outside this chunk of 2 items"):
        ChunkView(data).item(2)
    with pytest.raises(FormatError, match="spans bytes"):
        ChunkView(data[:-1]).item(1)


def test_chunk_names_follow_litdata() -> None:
    assert chunk_filename(3, 7) == "chunk-3-7.bin"
    assert chunk_filename(0, 1, "zstd:10") == "chunk-0-1.zstd:10.bin"
    assert local_chunk_filename("chunk-0-1.zstd.bin", "zstd") == "chunk-0-1.bin"


def _chunks(builder: ChunkBuilder, sizes: list[int]) -> list[int]:
    out = []
    for size in sizes:
        closed = builder.add(b"x" * size)
        if closed:
            out.append(len(closed[0]))
    last = builder.flush()
    if last:
        out.append(len(last[0]))
    return out


def test_builder_closes_on_item_count() -> None:
    assert _chunks(ChunkBuilder(chunk_size=4, chunk_bytes=None), [1] * 10) == [4, 4, 2]


def test_builder_closes_before_the_item_that_crosses_the_byte_budget() -> None:
    # spec example: 36-byte items, chunk_bytes=90 -> 2 items per chunk
    assert _chunks(ChunkBuilder(chunk_size=None, chunk_bytes=90), [36] * 5) == [2, 2, 1]
    # an oversize item forms a chunk of its own
    assert _chunks(ChunkBuilder(chunk_size=None, chunk_bytes=10), [4, 50, 4, 4]) == [1, 1, 2]


def test_builder_counts_tokens_with_dim() -> None:
    builder = ChunkBuilder(chunk_size=10, chunk_bytes=None)
    assert builder.add(b"a", dim=6) is None
    closed = builder.add(b"b", dim=6)
    assert closed is not None
    assert closed[1] == [6]


def _index() -> Index:
    config = DatasetConfig(data_format=("int", "str"), data_spec="[1, {}]", chunk_size=10)
    return Index(chunks=(ChunkInfo("chunk-0-0.bin", 10, 918),), config=config, updated_at="1717171717.5")


def test_index_json_is_litdatas_sorted_single_line() -> None:
    text = _index().to_json()
    assert text == (
        '{"chunks": [{"chunk_bytes": 918, "chunk_size": 10, "dim": null, "filename": "chunk-0-0.bin"}], '
        '"config": {"chunk_bytes": null, "chunk_size": 10, "compression": null, "data_format": ["int", "str"], '
        '"data_spec": "[1, {}]", "encryption": null, "item_loader": "PyTreeLoader"}, "updated_at": "1717171717.5"}'
    )
    assert Index.from_json(text) == _index()


def test_index_keeps_foreign_keys() -> None:
    obj = json.loads(_index().to_json())
    obj["chunks"][0]["column_sizes"] = [8]
    obj["config"]["format"] = "mds"
    again = json.loads(Index.from_json(json.dumps(obj)).to_json())
    assert again["chunks"][0]["column_sizes"] == [8]
    assert again["config"]["format"] == "mds"


def test_index_errors_name_the_problem() -> None:
    with pytest.raises(FormatError, match="is not valid JSON"):
        Index.from_json("{nope")
    with pytest.raises(FormatError, match="lacks the required key 'data_spec'"):
        Index.from_json('{"chunks": [], "config": {"compression": null, "data_format": []}}')


def test_natural_order_merge_puts_worker_10_after_worker_2() -> None:
    config = DatasetConfig(data_format=("int",), data_spec="s", chunk_size=1)
    names = ["10.index.json", "2.index.json", "1.index.json"]
    partials = [(n, Index((ChunkInfo(f"chunk-{n.split('.')[0]}-0.bin", 1, 16),), config)) for n in names]
    merged = merge_partial_indexes(partials)
    assert [c.filename for c in merged.chunks] == ["chunk-1-0.bin", "chunk-2-0.bin", "chunk-10-0.bin"]
    assert sorted(names, key=natural_sort_key) == ["1.index.json", "2.index.json", "10.index.json"]
    assert merged.updated_at is None
    assert merged.stamped(now=12.5).updated_at == "12.5"


def test_merge_rejects_inconsistent_configs() -> None:
    a = Index((ChunkInfo("a", 1, 1),), DatasetConfig(data_format=("int",), data_spec="s", chunk_size=1))
    b = Index((ChunkInfo("b", 1, 1),), DatasetConfig(data_format=("str",), data_spec="s", chunk_size=1))
    with pytest.raises(FormatError, match=r"the config in 1.index.json differs from the one in 0.index.json"):
        merge_partial_indexes([("0.index.json", a), ("1.index.json", b)])


def test_partial_index_names() -> None:
    assert is_partial_index_name("12.index.json")
    assert is_partial_index_name("3-index.json")
    assert not is_partial_index_name("index.json")
    assert not is_partial_index_name("3-index.json", include_node_partials=False)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1000, 1000), ("64MB", 64_000_000), ("1.5g", 1_500_000_000), (" 512kb ", 512_000), ("2T", 2 * 10**12), ("7b", 7)],
)
def test_parse_bytes(value: int | str, expected: int) -> None:
    assert parse_bytes(value) == expected


@pytest.mark.parametrize("value", ["64MiB", "1000", "", "MB", 0, -3, 1.5, True])
def test_parse_bytes_rejects(value: object) -> None:
    with pytest.raises(ConfigurationError, match="chunk_bytes"):
        parse_bytes(value)  # type: ignore[arg-type]


def test_zstd_round_trip_and_levels() -> None:
    data = np.arange(10_000, dtype=np.int64).tobytes()
    for name in ("zstd", "zstd:1", "zstd:22"):
        packed = compress(data, name)
        assert len(packed) < len(data)
        assert decompress(packed, name) == data
    assert validate_compression("zstd") == 4
    assert validate_compression("zstd:9") == 9
    with pytest.raises(ConfigurationError, match="compression='gzip' is not supported"):
        validate_compression("gzip")
    with pytest.raises(FormatError, match="not a valid zstd frame"):
        decompress(b"not zstd", "zstd")


def test_format_package_imports_no_io_modules() -> None:
    """format/ is pure: importing it pulls in no file, network or event-loop module."""
    code = (
        "import sys\n"
        "import numpy, torch  # the allowed dependencies (torch itself loads asyncio and socket)\n"
        "before = set(sys.modules)\n"
        "import litstream.format._chunk, litstream.format._index, litstream.format._pytree\n"
        "import litstream.format._loaders, litstream.format._compression, litstream._core._units\n"
        "import litstream.format._serializers\n"
        "new = set(sys.modules) - before\n"
        "bad = sorted(m for m in new if m.split('.')[0] in {'anyio', 'obstore', 'httpx', 'trio', 'asyncio',"
        " 'aiofiles', 'socket', 'ssl', 'urllib', 'http', 'litstream.storage', 'litstream.read'}"
        " or m.startswith(('litstream.storage', 'litstream.read', 'litstream.write')))\n"
        "print(bad)\n"
    )
    # Import through the package without running litstream/__init__ (which loads the facades).
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.util, sys, types\n"
            "spec = importlib.util.find_spec('litstream')\n"
            "pkg = types.ModuleType('litstream'); pkg.__path__ = list(spec.submodule_search_locations)\n"
            "sys.modules['litstream'] = pkg\n" + code,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
