"""zstd at LitData 0.2.76's three levels: layouts, round trips, config keys and bounded decompression."""

from __future__ import annotations

import json
import struct
import tracemalloc
from typing import TYPE_CHECKING

import pytest
import zstandard

import litstream
from litstream import FormatError
from litstream.format._chunk import ChunkView, pack_chunk
from litstream.format._compression import Compression, compression_from_config, inflate, resolve_compression
from litstream.format._config_keys import check_config_keys
from litstream.format._framed import FRAMED_MAGIC, chunk_from_file, pack

if TYPE_CHECKING:
    from pathlib import Path

GIB2 = 2 * 2**30
ITEMS = [bytes([k]) * (k * 7 % 23) + b"item %d" % k for k in range(11)]


def _bomb(size: int, *, declare: bool) -> bytes:
    """A zstd frame of ``size`` zero bytes (a few KB long), with or without its size in the header."""
    compressor = zstandard.ZstdCompressor(level=1, write_content_size=declare)
    chunker = compressor.chunker(size=size if declare else -1, chunk_size=1 << 20)
    block = bytes(16 << 20)
    out = b"".join(b"".join(chunker.compress(block)) for _ in range(size // len(block)))
    return out + b"".join(chunker.finish())  # type: ignore[no-untyped-call]  # zstandard has no annotations


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {"declared": _bomb(GIB2, declare=True), "undeclared": _bomb(GIB2, declare=False)}


@pytest.mark.parametrize(
    "compression",
    [Compression("zstd", "batch", 4), Compression("zstd:3", "batch", 256), Compression("zstd:1", "sample")],
    ids=["batch4", "batch256", "sample"],
)
def test_in_file_layouts_round_trip(compression: Compression) -> None:
    data = pack(ITEMS, compression)
    assert data.startswith(FRAMED_MAGIC) == (compression.level == "batch")
    classic = chunk_from_file(data, compression, filename="c", chunk_size=len(ITEMS), chunk_bytes=len(data))
    assert classic == pack_chunk(ITEMS)
    view = ChunkView(classic)
    assert [bytes(view.item(i)) for i in range(len(ITEMS))] == ITEMS


def test_framed_directory_matches_litdata_layout() -> None:
    data = pack(ITEMS, Compression("zstd", "batch", 4))
    magic, version, flags, n, rows, frames = struct.unpack_from("<8sHHIII", data)
    assert (magic, version, flags, n, rows, frames) == (FRAMED_MAGIC, 1, 0, 11, 4, 3)
    offsets = struct.unpack_from("<12I", data, 24)
    assert offsets[0] == 0
    assert offsets[-1] == sum(map(len, ITEMS))
    first, count, at, size, raw = struct.unpack_from("<IIQII", data, 24 + 48 + 2 * 24)
    assert (first, count, raw) == (8, 3, sum(map(len, ITEMS[8:])))
    assert zstandard.ZstdDecompressor().decompress(data[at : at + size]) == b"".join(ITEMS[8:])


def test_resolve_and_config_keys() -> None:
    assert resolve_compression("zstd") == Compression("zstd", "batch", 256)
    assert resolve_compression("zstd:9", "sample") == Compression("zstd:9", "sample", None)
    chunk_level = resolve_compression("zstd", default_level="chunk")
    assert chunk_level is not None
    assert chunk_level.config_keys() == {
        "compression": "zstd", "compression_level": None, "compression_batch_size": None,
    }  # fmt: skip
    with pytest.raises(litstream.ConfigurationError, match="compression_level='frame'"):
        resolve_compression("zstd", "frame")
    with pytest.raises(litstream.ConfigurationError, match="need compression="):
        resolve_compression(None, "batch")
    assert compression_from_config({"compression": "zstd"}) == Compression("zstd", "chunk")
    assert compression_from_config({"compression": "zstd", "compression_level": "batch", "compression_batch_size": 8})
    with pytest.raises(FormatError, match="compression='lz4'"):
        compression_from_config({"compression": "lz4"})


def test_unknown_config_key_names_key_and_writer() -> None:
    check_config_keys({"compression": None, "data_format": [], "types": None, "ipc_compression": None})
    with pytest.raises(FormatError, match=r"'shiny_new_key'.*newer than 0\.2\.76"):
        check_config_keys({"compression": None, "shiny_new_key": 1})
    with pytest.raises(FormatError, match=r"LitData 0\.3\.0"):
        check_config_keys({"compression": None, "x": 1}, {"litdata_version": "0.3.0"})
    with pytest.raises(FormatError, match="compression_level='frame'"):
        check_config_keys({"compression": "zstd", "compression_level": "frame"})


def test_corrupt_framed_directory_is_refused() -> None:
    data = bytearray(pack(ITEMS, Compression("zstd", "batch", 4)))
    struct.pack_into("<I", data, 24 + 48 + 20, 99)  # the first frame's uncompressed length
    with pytest.raises(FormatError, match="frame 0 records 99 bytes"):
        chunk_from_file(
            bytes(data), Compression("zstd", "batch", 4), filename="c", chunk_size=11, chunk_bytes=len(data)
        )
    good = pack(ITEMS, Compression("zstd", "batch", 4))
    with pytest.raises(FormatError, match=r"holds 11 items but index\.json records 12"):
        chunk_from_file(good, Compression("zstd", "batch", 4), filename="c", chunk_size=12, chunk_bytes=len(good))


@pytest.mark.parametrize("kind", ["declared", "undeclared"])
def test_two_gib_frame_is_refused_with_bounded_memory(bombs: dict[str, bytes], kind: str) -> None:
    bomb = bombs[kind]
    assert len(bomb) < 1 << 20
    whole = Compression("zstd")
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match=r"index allows|index records"):
            chunk_from_file(bomb, whole, filename="chunk-0-0.zstd.bin", chunk_size=1, chunk_bytes=4096)
        with pytest.raises(FormatError, match="index allows"):
            inflate(bomb, limit=32 << 20, what="item")
        framed = pack([b"x" * 10], Compression("zstd", "batch", 1))
        head = 24 + 8 + 24
        forged = bytearray(framed[:head])
        struct.pack_into("<QI", forged, 24 + 8 + 8, head, len(bomb))
        with pytest.raises(FormatError, match=r"index allows|index records"):
            chunk_from_file(bytes(forged) + bomb, Compression("zstd", "batch", 1), filename="c", chunk_size=1,
                            chunk_bytes=head + len(bomb))  # fmt: skip
        sample = pack_chunk([bomb])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 << 20, f"peak {peak} bytes"
    if kind == "declared":  # per-sample items are bounded by the frame's claim (1 GiB cap): refused at once
        with pytest.raises(FormatError, match="claims 2147483648 bytes"):
            chunk_from_file(sample, Compression("zstd", "sample"), filename="c", chunk_size=1, chunk_bytes=len(sample))


def test_dataset_with_a_bomb_chunk_raises(tmp_path: Path, bombs: dict[str, bytes]) -> None:
    # checksum=None: the decompression bound is under test (a recorded checksum would refuse the bomb first)
    litstream.optimize(
        lambda i: {"i": i}, list(range(4)), tmp_path, chunk_size=2, compression="zstd", verbose=False, checksum=None
    )
    index = json.loads((tmp_path / "index.json").read_text())
    (tmp_path / index["chunks"][0]["filename"]).write_bytes(bombs["undeclared"])
    ds = litstream.StreamingDataset(tmp_path, shuffle=False)
    assert ds[3] == {"i": 3}
    with pytest.raises(FormatError, match="expands past"):
        ds[0]
