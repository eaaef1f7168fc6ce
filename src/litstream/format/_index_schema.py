"""The schema of ``index.json``: types, ranges and sizes checked before anything is built from them.

An index is data from whoever wrote the dataset. :func:`check_index_obj` runs on the parsed JSON before
:class:`~litstream.format._index.Index` is built, so that every malformed index raises one
:class:`~litstream.FormatError` naming the key, and no size is used (to allocate, plan or read) before
it is known to be in range and consistent with the others:

=====================================  ==============================================================
key                                    rule
=====================================  ==============================================================
(top level)                            an object with a ``chunks`` list; ``config`` an object or null
``updated_at``                         null, a number, or a string of at most 256 printable characters
``chunks[i]``                          an object
``chunks[i].filename``                 a safe relative name (:mod:`._names`), unique in the index
``chunks[i].chunk_size``               an int in ``[0, 2**32)`` (a chunk header counts items in uint32)
``chunks[i].chunk_bytes``              an int in ``[0, MAX_CHUNK_BYTES]``; for chunks with LitData's
                                       header (PyTree and Tokens loaders, unframed) at least the header
                                       length ``4 * (chunk_size + 2)``
``chunks[i].dim``                      null or an int >= 0; for header chunks at most the bytes after
                                       the header
``config.data_format``                 a list of strings (at most 1024 bytes each)
``config.data_spec``                   null or a string
``config.compression``,                null or a string
``config.item_loader``,
``config.compression_level``,
``config.ipc_compression``
``config.chunk_size``,                 null or an int >= 0 (>= 1 for the batch size)
``config.chunk_bytes``,
``config.compression_batch_size``
``config.encryption``                  null or an object whose ``algorithm`` / ``level`` are strings
``config.types``                       null, an object, a list or a string (LitData 0.2.76's Arrow
                                       type map; not interpreted here)
=====================================  ==============================================================

Other keys are kept and not interpreted. Values of known keys are checked here for type and range
only; what a value means (a compression name, a loader name) is checked by the module that uses it.
"""

from __future__ import annotations

import re
from typing import Any

from .._core._errors import FormatError
from ._names import check_object_name

__all__ = ["MAX_CHUNK_BYTES", "MAX_CHUNK_ITEMS", "check_index_obj"]

MAX_CHUNK_BYTES = 2**40
"""The largest ``chunk_bytes`` accepted (1 TiB): far above LitData's 4 GiB chunk format limit, small
enough that no size derived from it overflows an int64."""

MAX_CHUNK_ITEMS = 2**32 - 1
"""The largest ``chunk_size`` accepted: the item count of a chunk header is a uint32."""

_HEADER_LOADERS = (None, "PyTreeLoader", "TokensLoader")
_UNFRAMED = (None, "", "chunk")
_PRINTABLE = re.compile(r"^[^\x00-\x1f\x7f]{0,256}$")


def _int(value: Any, where: str, low: int, high: int, *, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an int or null" if nullable else "an int"
        raise FormatError(f"{where} must be {kind}, got {type(value).__name__} {_short(value)}")
    if not low <= value <= high:
        raise FormatError(f"{where}={_short(value)} is outside [{low}, {high}]")
    return value


def _str(value: Any, where: str, *, nullable: bool = True, max_bytes: int = 1 << 20) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        kind = "a string or null" if nullable else "a string"
        raise FormatError(f"{where} must be {kind}, got {type(value).__name__} {_short(value)}")
    if len(value) > max_bytes:
        raise FormatError(f"{where} is a string of {len(value)} characters, more than the {max_bytes} allowed")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_config(config: Any, where: str) -> dict[str, Any] | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        raise FormatError(f"{where} must be an object or null, got {type(config).__name__} {_short(config)}")
    data_format = config.get("data_format", [])
    if not isinstance(data_format, list):
        raise FormatError(f"{where}.data_format must be a list of strings, got {_short(data_format)}")
    for i, name in enumerate(data_format):
        _str(name, f"{where}.data_format[{i}]", nullable=False, max_bytes=1024)
    for key in ("data_spec", "compression", "item_loader", "compression_level", "ipc_compression"):
        _str(config.get(key), f"{where}.{key}")
    for key in ("chunk_size", "chunk_bytes"):
        _int(config.get(key), f"{where}.{key}", 0, 2**63 - 1, nullable=True)
    _int(config.get("compression_batch_size"), f"{where}.compression_batch_size", 1, 2**31 - 1, nullable=True)
    encryption = config.get("encryption")
    if encryption is not None:
        if not isinstance(encryption, dict):
            raise FormatError(f"{where}.encryption must be an object or null, got {_short(encryption)}")
        for key in ("algorithm", "level"):
            _str(encryption.get(key), f"{where}.encryption.{key}", max_bytes=256)
    types = config.get("types")
    if types is not None and not isinstance(types, (dict, list, str)):
        raise FormatError(f"{where}.types must be an object, a list, a string or null, got {_short(types)}")
    return config


def _check_chunk(entry: Any, where: str, header: bool) -> str:
    if not isinstance(entry, dict):
        raise FormatError(f"{where} must be an object, got {type(entry).__name__} {_short(entry)}")
    for key in ("filename", "chunk_size", "chunk_bytes"):
        if key not in entry:
            raise FormatError(f"{where} lacks the key {key!r}; is this a LitData index?")
    name = check_object_name(entry["filename"], f"{where}.filename")
    size = _int(entry["chunk_size"], f"{where}.chunk_size", 0, MAX_CHUNK_ITEMS)
    nbytes = _int(entry["chunk_bytes"], f"{where}.chunk_bytes", 0, MAX_CHUNK_BYTES)
    dim = _int(entry.get("dim"), f"{where}.dim", 0, MAX_CHUNK_BYTES, nullable=True)
    assert size is not None
    assert nbytes is not None
    if header:
        head = 4 * (size + 2)
        if nbytes < head:
            raise FormatError(
                f"{where}.chunk_bytes={nbytes} cannot hold the header of chunk_size={size} items "
                f"({head} bytes); the sizes in this index.json contradict each other"
            )
        if dim is not None and dim > nbytes - head:
            raise FormatError(
                f"{where}.dim={dim} tokens cannot fit in the {nbytes - head} bytes after the chunk header "
                f"(chunk_bytes={nbytes}); the sizes in this index.json contradict each other"
            )
    return name


def check_index_obj(obj: Any, source: str = "index.json") -> None:
    """Check a parsed ``index.json`` (or partial index) against the schema in the module docstring.

    Args:
        obj: What ``json.loads`` returned.
        source: The file, for messages.

    Raises:
        FormatError: the first rule broken; the message names ``source``, the key and the value.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("chunks"), list):
        raise FormatError(f"{source} has no 'chunks' list; it is not a LitData/litstream index")
    updated_at = obj.get("updated_at")
    if updated_at is not None and not (
        (isinstance(updated_at, (int, float)) and not isinstance(updated_at, bool))
        or (isinstance(updated_at, str) and _PRINTABLE.match(updated_at))
    ):
        raise FormatError(f"{source} updated_at must be a number or a short printable string, got {_short(updated_at)}")
    config = _check_config(obj.get("config"), f"{source} config")
    header = config is None or (
        config.get("item_loader") in _HEADER_LOADERS and config.get("compression_level") in _UNFRAMED
    )
    seen: dict[str, int] = {}
    for i, entry in enumerate(obj["chunks"]):
        name = _check_chunk(entry, f"{source} chunks[{i}]", header)
        if name in seen:
            raise FormatError(
                f"{source} chunks[{i}].filename={name!r} repeats chunks[{seen[name]}]; every chunk needs its own file"
            )
        seen[name] = i
