"""LitData's Arrow chunks: layout detection, decoding, untrusted payloads (format/arrow/_chunk.py) and the
writer side (format/arrow/_write.py)."""

from __future__ import annotations

import random
import sys
from typing import Any

import pyarrow as pa
import pytest

from litstream import ConfigurationError, FormatError
from litstream.format._chunk import ChunkView, header_length, pack_chunk
from litstream.format.arrow._chunk import (
    ARROW_FOOTER_MAGIC,
    ArrowChunk,
    ArrowRowsOnly,
    arrow_payload_span,
    pyarrow_module,
    read_chunk_view,
)
from litstream.format.arrow._write import ArrowEncoder, check_chunk_format, ipc_codec, pack_arrow_chunk


def arrow_chunk(data: Any, **kwargs: Any) -> ArrowChunk:
    """``read_chunk_view(data)`` of a chunk known to carry an Arrow payload."""
    view = read_chunk_view(data, **kwargs)
    assert isinstance(view, ArrowChunk)
    return view


def row(i: int) -> dict[str, Any]:
    return {
        "i": i,
        "x": i / 8,
        "ok": i % 3 == 0,
        "s": f"é{i}",
        "b": bytes([i % 256]) * (i % 4),
        "n": None if i % 2 else i,
        "l": [i, -i],
        "d": {"k": f"{i}", "v": [i / 2]},
    }


def footer(ipc: bytes) -> bytes:
    return ipc + len(ipc).to_bytes(4, "little") + ARROW_FOOTER_MAGIC


def ipc_file(table: pa.Table, batch_rows: int = 256, compression: str | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as writer:
        for start in range(0, table.num_rows, batch_rows):
            writer.write_table(table.slice(start, batch_rows))
    return bytes(sink.getvalue().to_pybytes())


def slim_header(n: int) -> bytes:
    head = header_length(n)
    return n.to_bytes(4, "little") + head.to_bytes(4, "little") * (n + 1)


@pytest.mark.parametrize("compression", [None, "zstd", "zstd:3"])
@pytest.mark.parametrize("n", [1, 255, 256, 257, 700])
def test_pack_then_read_every_row(n: int, compression: str | None) -> None:
    samples = [row(i) for i in range(n)]
    data = pack_arrow_chunk(samples, compression)
    view = read_chunk_view(data)
    assert isinstance(view, ArrowChunk)
    assert view.num_items == n
    assert view.rows(range(n)) == samples
    assert [view.item(i) for i in range(n)] == samples
    order = list(range(n))
    random.Random(n).shuffle(order)
    assert view.rows(order) == [samples[i] for i in order]
    assert view.rows([n - 1, 0, n - 1]) == [samples[n - 1], samples[0], samples[n - 1]]
    assert view.rows([]) == []


def test_rows_are_new_objects() -> None:
    view = arrow_chunk(pack_arrow_chunk([row(i) for i in range(3)], None))
    first = view.item(1)
    first["l"].append(99)
    assert view.item(1)["l"] == [1, -1]


def test_rows_keep_value_types() -> None:
    samples = [{"a": 1, "f": 1.0, "t": True, "s": "1", "b": b"1", "n": None}]
    got = arrow_chunk(pack_arrow_chunk(samples, None)).item(0)
    assert [type(v) for v in got.values()] == [int, float, bool, str, bytes, type(None)]
    assert got == samples[0]


def test_missing_fields_read_as_none_in_first_seen_order() -> None:
    samples: list[dict[str, Any]] = [{"a": 1}, {"b": "x", "a": 2}]
    assert arrow_chunk(pack_arrow_chunk(samples, None)).rows([0, 1]) == [
        {"a": 1, "b": None},
        {"a": 2, "b": "x"},
    ]


def test_plain_chunks_stay_plain() -> None:
    plain = pack_chunk([b"abc", b"LDARW01\0"])  # the last item even ends with the magic
    view = read_chunk_view(plain)
    assert type(view) is ChunkView
    assert arrow_payload_span(plain, 2) is None
    assert bytes(view.item(1)) == b"LDARW01\0"


def test_pytree_items_with_a_footer_read_from_the_footer() -> None:
    """LitData may keep the pytree items and append the footer after them; it reads the footer."""
    table = pa.Table.from_pylist([{"v": 10}, {"v": 11}])
    data = pack_chunk([b"item0", b"item1"]) + footer(ipc_file(table))
    view = read_chunk_view(data)
    assert isinstance(view, ArrowChunk)
    assert view.span[0] == len(pack_chunk([b"item0", b"item1"]))
    assert view.rows([1, 0]) == [{"v": 11}, {"v": 10}]


def test_stream_payload_and_uneven_batches() -> None:
    """Older LitData wrote an IPC stream; other writers may cut batches anywhere: both read."""
    table = pa.Table.from_pylist([{"v": i, "s": str(i)} for i in range(10)])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for start, size in ((0, 3), (3, 1), (4, 6)):
            writer.write_table(table.slice(start, size))
    stream = bytes(sink.getvalue().to_pybytes())
    uneven = ipc_file(table, batch_rows=4)
    for payload in (stream, uneven):
        view = read_chunk_view(slim_header(10) + footer(payload))
        assert isinstance(view, ArrowChunk)
        assert view.rows([9, 0, 4, 3]) == [{"v": v, "s": str(v)} for v in (9, 0, 4, 3)]
    # as many batches as LitData's layout would cut (2 for 300 rows), but not every 256 rows
    table = pa.Table.from_pylist([{"v": i} for i in range(300)])
    for ids in ([299], [0], [140, 160, 7], list(range(300))):
        view = arrow_chunk(slim_header(300) + footer(ipc_file(table, batch_rows=150)))
        assert view.rows(ids) == [{"v": i} for i in ids]


def test_rows_outside_the_chunk() -> None:
    view = arrow_chunk(pack_arrow_chunk([row(0), row(1)], None))
    with pytest.raises(FormatError, match="item 2 is outside"):
        view.rows([0, 2])
    with pytest.raises(FormatError, match="item -1 is outside"):
        view.item(-1)


def test_row_count_must_match_the_header() -> None:
    table = pa.Table.from_pylist([{"v": 1}, {"v": 2}, {"v": 3}])
    with pytest.raises(FormatError, match="holds 3 rows but the chunk header announces 2"):
        arrow_chunk(slim_header(2) + footer(ipc_file(table, batch_rows=2))).rows([0])
    short = arrow_chunk(slim_header(4) + footer(ipc_file(table)))  # one batch: 3 rows, 4 expected
    with pytest.raises(FormatError, match="holds 3 rows"):
        short.rows([0])


def test_forged_footer_length() -> None:
    data = bytearray(pack_arrow_chunk([row(0), row(1)], None))
    length = int.from_bytes(data[-12:-8], "little")
    for forged in (0, length + 1, length - 1, 2**32 - 1):
        data[-12:-8] = forged.to_bytes(4, "little")
        with pytest.raises(FormatError, match="Arrow footer"):
            read_chunk_view(bytes(data))


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_corrupt_payload_raises_format_error_only(compression: str | None) -> None:
    """Every single-byte corruption of the IPC payload gives a FormatError or the right rows, never a
    pyarrow exception (the values are untrusted bytes)."""
    samples = [row(i) for i in range(300)]
    data = pack_arrow_chunk(samples, compression)
    begin, end = arrow_payload_span(data, 300) or (0, 0)
    rng = random.Random(7)
    positions = [*range(begin, begin + 64), *range(end - 64, end), *rng.sample(range(begin, end), 300)]
    for position in positions:
        broken = bytearray(data)
        broken[position] ^= 1 + rng.randrange(255)
        try:
            view = read_chunk_view(bytes(broken))
            got = view.rows(range(300)) if isinstance(view, ArrowChunk) else None
        except FormatError:
            continue
        assert got is None or len(got) == 300


def test_truncated_payload() -> None:
    data = pack_arrow_chunk([row(i) for i in range(20)], "zstd")
    for cut in (13, 100, len(data) // 2):
        broken = data[: len(data) - 12 - cut] + data[-12:]
        with pytest.raises(FormatError):
            read_chunk_view(broken).item(0)


def test_span_must_lie_inside_the_chunk() -> None:
    data = pack_arrow_chunk([row(0)], None)
    with pytest.raises(FormatError, match="outside the chunk"):
        ArrowChunk(data, span=(0, len(data) + 1))


def test_rows_only_decoder_defers_its_error() -> None:
    decoder = ArrowRowsOnly(FormatError("unknown data format 'json'"))
    with pytest.raises(FormatError, match="unknown data format 'json'"):
        decoder.decode(b"")


def test_missing_pyarrow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ModuleNotFoundError, match=r'pip install "litstream\[arrow\]"'):
        pyarrow_module()


# -- writing ---------------------------------------------------------------------------------------------


def test_encoder_types_and_first_sample_format() -> None:
    encoder = ArrowEncoder()
    assert encoder.types_json() is None
    sizes = [encoder.add(row(i)) for i in range(4)]
    assert encoder.types_json() == {
        "i": "int",
        "x": "float",
        "ok": "bool",
        "s": "str",
        "b": "bytes",
        "n": {"type": "int", "optional": True},
        "l": {"type": "list", "value": "int"},
        "d": {"type": "struct", "fields": {"k": "str", "v": {"type": "list", "value": "float"}}},
    }
    assert encoder.data_format == ("int", "float", "bool", "str", "bytes", "int", "json", "str", "json")
    assert encoder.data_spec is not None
    assert '"context": "[\\"k\\", \\"v\\"]"' in encoder.data_spec
    # LitData's row estimate: 8 per number or bool, the length of str and bytes, 0 for None
    assert sizes[1] == 8 + 8 + 8 + 2 + 1 + 0 + 16 + 1 + 8


def test_encoder_optional_null_and_empty_lists() -> None:
    encoder = ArrowEncoder()
    encoder.add({"a": None, "e": [], "o": 1})
    encoder.add({"a": None, "e": [], "p": "x"})
    assert encoder.types_json() == {
        "a": {"type": "null", "optional": True},
        "e": {"type": "list", "value": "json"},
        "o": {"type": "int", "optional": True},
        "p": {"type": "str", "optional": True},
    }
    assert encoder.data_format == ("pickle", "json", "int")


@pytest.mark.parametrize(
    ("samples", "match"),
    [
        ([[1, 2]], "stores dict samples, got a list"),
        ([{"a": 1}, {"a": "1"}], r"sample\['a'\] is a int in one sample and a str in another"),
        ([{"a": [1, "x"]}], r"sample\['a'\]\[1\] is a int in one sample and a str"),
        ([{"a": 2**64}], "does not fit a 64-bit Arrow integer"),
        ([{1: "x"}], "Arrow chunks need str keys"),
        ([{"a": {1, 2}}], "is a set, which an Arrow chunk cannot hold"),
        ([{"a": 1.5}, {"a": 1}], "is a float in one sample and a int"),
    ],
)
def test_encoder_rejects_what_arrow_cannot_hold(samples: list[Any], match: str) -> None:
    encoder = ArrowEncoder()
    with pytest.raises(FormatError, match=match):
        for sample in samples:
            encoder.add(sample)


def test_chunk_format_argument() -> None:
    assert check_chunk_format(None) is None  # LitData's choice per sample
    assert check_chunk_format("pytree") == "pytree"
    assert check_chunk_format("arrow") == "arrow"
    with pytest.raises(ConfigurationError, match=r"chunk_format must be None .*'pytree' or 'arrow', got 'parquet'"):
        check_chunk_format("parquet")


def test_ipc_codec() -> None:
    assert ipc_codec(None) == (None, None)
    assert ipc_codec("zstd") == ("zstd", None)
    assert ipc_codec("zstd:7") == ("zstd", 7)


def test_compression_shrinks_repetitive_payloads() -> None:
    samples = [{"s": "same text " * 20, "i": 0} for _ in range(500)]
    raw, packed = pack_arrow_chunk(samples, None), pack_arrow_chunk(samples, "zstd")
    assert len(packed) < len(raw) // 5
    assert arrow_chunk(packed).rows(range(500)) == samples


def test_decompression_bomb_is_refused_before_decoding() -> None:
    """The decoded size comes from the IPC message headers (each compressed buffer's int64 length);
    a payload that would inflate past ``MAX_INFLATION`` x its size (and the floor) is refused."""
    samples = [{"s": "x" * 200_000} for _ in range(20)]  # 4 MB of text that zstd squeezes to a few KB
    data = pack_arrow_chunk(samples, "zstd")
    assert arrow_chunk(data).rows([19]) == [samples[19]]  # under the 1 GiB floor: read
    with pytest.raises(FormatError, match=r"would decode to \d+ bytes, more than the \d+ allowed \(128x"):
        read_chunk_view(data, decoded_floor=0)
    plain = pack_arrow_chunk(samples, None)  # uncompressed: decodes to its own size
    assert arrow_chunk(plain, decoded_floor=0).rows([0]) == [samples[0]]


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_ipc_compression_codecs_litdata_may_record(codec: str) -> None:
    """LitData records ``ipc_compression`` "zstd" or "lz4"; both codecs decode."""
    table = pa.Table.from_pylist([row(i) for i in range(300)])
    view = arrow_chunk(slim_header(300) + footer(ipc_file(table, compression=codec)))
    assert view.rows([299, 0, 256]) == [row(299), row(0), row(256)]


@pytest.mark.parametrize("compression", [None, "zstd", "lz4"])
def test_decoded_size_read_from_headers_equals_arrow_buffers(compression: str | None) -> None:
    from litstream.format.arrow._ipc import decoded_bytes

    table = pa.Table.from_pylist([row(i) for i in range(600)])
    payload = memoryview(ipc_file(table, compression=compression))
    decoded = pa.ipc.open_file(pa.py_buffer(payload)).read_all()
    buffers = sum(b.size for column in decoded.columns for chunk in column.chunks for b in chunk.buffers() if b)
    assert decoded_bytes(pa, payload) == buffers
