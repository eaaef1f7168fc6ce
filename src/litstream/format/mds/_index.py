"""Mosaic MDS datasets (``mosaicml-streaming``'s ``MDSWriter``): their ``index.json`` and shard files.

An MDS directory holds ``index.json`` and shard files::

    {"version": 2, "shards": [{"format": "mds", "version": 2, "samples": N,
        "column_names": [...], "column_encodings": [...], "column_sizes": [int|null, ...],
        "compression": null | "zstd" | "zstd:7" | "gz" | "bz2" | "br" | "snappy" | "<name>:<level>",
        "raw_data": {"basename": "shard.00000.mds", "bytes": int, "hashes": {}},
        "zip_data": null | {"basename": "shard.00000.mds.zstd", "bytes": int, "hashes": {}},
        "size_limit": int, "hashes": []}, ...]}

A shard (``raw_data``; ``zip_data`` is that file compressed whole) has LitData's chunk layout
(``format/_chunk.py``: ``N``, ``N + 1`` absolute uint32 offsets, items) with a JSON block between the
offsets and the first item, which the absolute offsets skip. One item (``format/mds/_encodings.py``)
is a uint32 size for each variable-size column (``column_sizes[i]`` null) in column order, then every
column's bytes in column order.

LitData reads MDS by rewriting this index into its own shape; :func:`parse_index` does the same, into
an :class:`~litstream.format._index.Index` whose chunks are the shards (``filename`` the file to read,
``chunk_bytes`` the raw shard length) and whose config has ``extra["format"] == "mds"`` and
``data_format`` = the column encodings. Every field is validated here: the index is untrusted.
"""

from __future__ import annotations

import bz2
import gzip
import importlib
import json
from typing import TYPE_CHECKING, Any

from ..._core._errors import ConfigurationError, FormatError
from .._index import ChunkInfo, DatasetConfig, Index
from ._encodings import check_encoding

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["decompress_shard", "is_mds_config", "parse_index", "read_index"]

_COMPRESSIONS = {"br": range(12), "bz2": range(1, 10), "gz": range(10), "snappy": range(0), "zstd": range(1, 23)}
_SHARD_KEYS = ("column_names", "column_encodings", "column_sizes", "compression")


def is_mds_config(config: DatasetConfig | None) -> bool:
    """True for the config :func:`parse_index` made from an MDS index."""
    return config is not None and config.extra.get("format") == "mds"


def _check_compression(compression: object, where: str) -> str | None:
    if compression is None:
        return None
    if isinstance(compression, str):
        name, _, level = compression.partition(":")
        levels = _COMPRESSIONS.get(name)
        if levels is not None and (not level or (level.isdigit() and int(level) in levels)):
            return compression
    raise FormatError(
        f"{where}: compression={compression!r} is not an MDS compression ({', '.join(sorted(_COMPRESSIONS))}, "
        "optionally ':level')"
    )


def _relative_name(name: str) -> bool:
    parts = name.split("/")
    return "\\" not in name and "\x00" not in name and all(p not in ("", ".", "..") for p in parts)


def _file(obj: object, where: str) -> tuple[str, int]:
    if not isinstance(obj, dict):
        raise FormatError(f"{where} must be an object with 'basename' and 'bytes', got {obj!r}")
    name, size = obj.get("basename"), obj.get("bytes")
    if not isinstance(name, str) or not _relative_name(name):
        raise FormatError(f"{where}.basename={name!r} is not a relative file name inside the dataset")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise FormatError(f"{where}.bytes={size!r} is not a byte count")
    return name, size


def _columns(shard: Mapping[str, Any], where: str) -> tuple[list[str], list[str], list[int | None]]:
    names, encodings, sizes = shard.get("column_names"), shard.get("column_encodings"), shard.get("column_sizes")
    if not (isinstance(names, list) and isinstance(encodings, list) and isinstance(sizes, list)):
        raise FormatError(f"{where}: column_names, column_encodings and column_sizes must be lists")
    if not len(names) == len(encodings) == len(sizes) or not names:
        raise FormatError(f"{where}: column_names, column_encodings and column_sizes differ in length or are empty")
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise FormatError(f"{where}: column_names={names!r} must be distinct strings")
    for encoding, size in zip(encodings, sizes, strict=True):
        if not isinstance(encoding, str):
            raise FormatError(f"{where}: column encoding {encoding!r} is not a string")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise FormatError(f"{where}: column size {size!r} is not null or a byte count")
        check_encoding(encoding, size, where)
    return names, encodings, sizes


def _shard(obj: object, i: int, source: str) -> tuple[ChunkInfo, tuple[Any, ...]]:
    where = f"{source} shards[{i}]"
    if not isinstance(obj, dict):
        raise FormatError(f"{where} is {type(obj).__name__}, not an object")
    if obj.get("format") != "mds":
        raise FormatError(f"{where} has format={obj.get('format')!r}; litstream reads only MDS shards ('mds')")
    samples = obj.get("samples")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise FormatError(f"{where}.samples={samples!r} is not a sample count")
    compression = _check_compression(obj.get("compression"), where)
    raw_name, raw_bytes = _file(obj.get("raw_data"), f"{where}.raw_data")
    filename = raw_name
    if compression is not None:
        filename, _ = _file(obj.get("zip_data"), f"{where}.zip_data")
    names, encodings, sizes = _columns(obj, where)
    info = ChunkInfo(filename=filename, chunk_size=samples, chunk_bytes=raw_bytes, extra={"column_sizes": sizes})
    return info, (tuple(names), tuple(encodings), tuple(sizes), compression)


def parse_index(raw: bytes | str, *, source: str = "index.json") -> Index | None:
    """The MDS ``index.json`` in ``raw`` as an :class:`Index`, or ``None`` when it is not an MDS index.

    Raises:
        FormatError: an MDS index with a malformed field, or shards whose columns or compression
            differ (litstream reads one schema per dataset).
    """
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or "chunks" in obj or "shards" not in obj:
        return None
    shards = obj["shards"]
    if not isinstance(shards, list) or not shards:
        raise FormatError(f"{source} has no shards; the MDSWriter wrote no sample")
    parsed = [_shard(s, i, source) for i, s in enumerate(shards)]
    schema = parsed[0][1]
    for i, (_, other) in enumerate(parsed):
        if other != schema:
            diff = [k for k, a, b in zip(_SHARD_KEYS, schema, other, strict=True) if a != b]
            raise FormatError(f"{source} shards[{i}] differs from shards[0] in {diff}; write one schema per dataset")
    names, encodings, sizes, compression = schema
    chunks = tuple(info for info, _ in parsed)
    config = DatasetConfig(
        data_format=encodings,
        data_spec=None,
        chunk_size=sum(c.chunk_size for c in chunks),
        chunk_bytes=sum(c.chunk_bytes for c in chunks),
        compression=compression,
        item_loader=None,
        extra={"format": "mds", "column_names": list(names), "column_sizes": list(sizes)},
    )
    return Index(chunks=chunks, config=config)


def read_index(raw: bytes, source: str) -> Index:
    """The index in ``raw``: LitData's / litstream's, or an MDS one adapted by :func:`parse_index`.

    Raises:
        FormatError: neither a valid LitData nor a valid MDS index; ``source`` names the file.
    """
    mds = parse_index(raw, source=source) if b'"shards"' in raw else None
    return mds if mds is not None else Index.from_json(raw, source=source)


def _codec(compression: str) -> Callable[[bytes], bytes]:
    name = compression.partition(":")[0]
    if name == "zstd":
        import zstandard

        return lambda data: bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))
    if name in ("gz", "bz2"):
        return gzip.decompress if name == "gz" else bz2.decompress
    package = "brotli" if name == "br" else "python-snappy"
    try:
        module = importlib.import_module("brotli" if name == "br" else "snappy")
    except ImportError:
        raise ConfigurationError(
            f"this MDS dataset is compressed with {compression!r}: pip install {package}"
        ) from None
    decompress: Callable[[bytes], bytes] = module.decompress
    return decompress


def decompress_shard(data: bytes | memoryview, compression: str) -> bytes:
    """The raw shard inside a ``zip_data`` file compressed with ``compression`` (whole file, one stream).

    Raises:
        FormatError: the bytes do not decompress. ConfigurationError: ``br`` / ``snappy`` without the
            ``brotli`` / ``python-snappy`` package installed.
    """
    decode = _codec(compression)
    try:
        return bytes(decode(bytes(data)))
    except Exception as exc:  # every codec has its own error types (zlib.error, EOFError, ZstdError, ...)
        raise FormatError(f"an MDS shard does not decompress with {compression!r}: {exc}") from exc
