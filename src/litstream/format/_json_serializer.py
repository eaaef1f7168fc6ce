"""The ``json`` leaf encoding of LitData 0.2.76: a nested list or dict stored as ONE leaf.

LitData 0.2.76 wraps each list / dict field of a ``dict`` sample in a marker (:class:`JsonLeaf`) so that
variable-length lists do not change the sample's leaf count, and records the leaf as ``"json"``.
The payload is a tagged binary encoding (all integers little-endian, ``u32`` lengths)::

    tag  value                  payload after the tag byte
    0    any JSON value         u32 n | n bytes of compact UTF-8 JSON
    1    list of str            u32 count | count x (u32 n | n UTF-8 bytes)
    2    list of int            u32 count | count x int64
    3    list of float          u32 count | count x float64
    4    list of bool           u32 count | count x (1 byte, 0 or 1)
    5    dict with str keys     u32 count | count x (u32 n | key UTF-8 | tagged value)
    6    list of flat records   u32 rows | u32 keys | keys x (u32 n | UTF-8) | rows x keys x cell
                                cell: 0x10 None | 0x11 str (u32 n | UTF-8) | 0x12 int64 | 0x13 float64
                                | 0x14 bool (1 byte)
    7    str                    u32 n | UTF-8        8 int  int64     9 float  float64
    10   bool                   1 byte               11 None (no payload)

An empty list is tag 1 with count 0. A payload whose first byte is above 0x20 is plain JSON text (what
older LitData wrote). Values are written with the same choices as LitData, so payloads are byte-identical.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core._errors import FormatError
from ._serializer_base import Serializer

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["JsonLeaf", "JsonSerializer"]

_U32 = struct.Struct("<I")
_HEAD = struct.Struct("<BI")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_JSON, _STRS, _I64S, _F64S, _BOOLS, _DICT, _RECS, _STR, _INT, _FLOAT, _BOOL, _NONE = range(12)
_CELL_NONE, _CELL_STR, _CELL_INT, _CELL_FLOAT, _CELL_BOOL = 0x10, 0x11, 0x12, 0x13, 0x14
_VALUE_TAGS = (_NONE, _STR, _INT, _FLOAT, _BOOL)  # a scalar's tag at the top level or in a dict/list
_CELL_TAGS = (_CELL_NONE, _CELL_STR, _CELL_INT, _CELL_FLOAT, _CELL_BOOL)  # ... in a record (tag 6)
_MAX_DEPTH = 200


class JsonLeaf:
    """Marks a list or dict that is stored as one ``json`` leaf instead of being flattened.

    Args:
        value: The list or dict (of JSON values: str, int, float, bool, None, bytes-free).
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonLeaf) and other.value == self.value

    def __hash__(self) -> int:  # pragma: no cover - unhashable payloads are the norm
        return id(self)

    def __repr__(self) -> str:
        return f"JsonLeaf({self.value!r})"


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _utf8(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _U32.pack(len(raw)) + raw


def _as_json(value: Any) -> bytes:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise FormatError(f"the json leaf cannot be written as JSON: {exc}") from exc
    return _HEAD.pack(_JSON, len(text)) + text


def _scalar(value: Any, tags: tuple[int, int, int, int, int]) -> bytes | None:
    """``value`` tagged by ``tags`` (:data:`_VALUE_TAGS` or :data:`_CELL_TAGS`: None, str, int, float, bool) when it
    is None, a bool, a str, an int64 or a float; else ``None``."""
    none, text, integer, real, boolean = tags
    if value is None:
        return bytes([none])
    if isinstance(value, bool):
        return bytes([boolean, 1 if value else 0])
    if isinstance(value, str):
        return bytes([text]) + _utf8(value)
    if _is_int(value) and _I64_MIN <= value <= _I64_MAX:
        return bytes([integer]) + _I64.pack(value)
    if isinstance(value, float):
        return bytes([real]) + _F64.pack(value)
    return None


def _record(rows: list[dict[str, Any]]) -> bytes | None:
    keys = list(rows[0])
    if not keys or not all(isinstance(k, str) for k in keys):
        return None
    parts = [_HEAD.pack(_RECS, len(rows)), _U32.pack(len(keys)), *(_utf8(k) for k in keys)]
    keyset = set(keys)
    for row in rows:
        if set(row) != keyset:
            return None
        for key in keys:
            cell = _scalar(row[key], _CELL_TAGS)
            if cell is None:
                return None
            parts.append(cell)
    return b"".join(parts)


def dumps(value: Any) -> bytes:
    """Encode a JSON value with LitData 0.2.76's tags (see the module docstring)."""
    scalar = _scalar(value, _VALUE_TAGS)
    if scalar is not None:
        return scalar
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return _as_json(value)
        return b"".join([_HEAD.pack(_DICT, len(value)), *(_utf8(k) + dumps(v) for k, v in value.items())])
    if not isinstance(value, list):
        return _as_json(value)
    if not value:
        return _HEAD.pack(_STRS, 0)
    if all(isinstance(x, str) for x in value):
        return b"".join([_HEAD.pack(_STRS, len(value)), *(_utf8(x) for x in value)])
    if all(isinstance(x, bool) for x in value):
        return _HEAD.pack(_BOOLS, len(value)) + bytes(1 if x else 0 for x in value)
    if all(_is_int(x) and _I64_MIN <= x <= _I64_MAX for x in value):
        return _HEAD.pack(_I64S, len(value)) + np.asarray(value, dtype="<i8").tobytes()
    if all(isinstance(x, float) for x in value):
        return _HEAD.pack(_F64S, len(value)) + np.asarray(value, dtype="<f8").tobytes()
    if all(isinstance(x, dict) for x in value):
        records = _record(value)
        if records is not None:
            return records
    return _as_json(value)


class _Reader:
    """Bounds-checked cursor over one payload."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int) -> bytes:
        end = self.at + n
        if n < 0 or end > len(self.data):
            raise FormatError(f"json payload of {len(self.data)} bytes ends inside a value at byte {self.at}")
        out = self.data[self.at : end]
        self.at = end
        return out

    def u32(self) -> int:
        value: int = _U32.unpack(self.take(4))[0]
        return value

    def text(self) -> str:
        try:
            return self.take(self.u32()).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"json payload holds invalid UTF-8: {exc}") from exc

    def none(self) -> None:
        return None

    def int64(self) -> int:
        value: int = _I64.unpack(self.take(8))[0]
        return value

    def float64(self) -> float:
        value: float = _F64.unpack(self.take(8))[0]
        return value

    def flag(self) -> bool:
        return bool(self.take(1)[0])

    def count(self, width: int) -> int:
        n = self.u32()
        if n * width > len(self.data) - self.at:
            raise FormatError(f"json payload announces {n} entries but holds {len(self.data) - self.at} bytes")
        return n


# how a scalar is read after its tag, in the order of _VALUE_TAGS and _CELL_TAGS (None, str, int, float, bool)
_SCALAR_READS: tuple[Callable[[_Reader], Any], ...] = (
    _Reader.none,
    _Reader.text,
    _Reader.int64,
    _Reader.float64,
    _Reader.flag,
)
_VALUE_READS = dict(zip(_VALUE_TAGS, _SCALAR_READS, strict=True))
_CELL_READS = dict(zip(_CELL_TAGS, _SCALAR_READS, strict=True))


def _load_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise FormatError(f"json payload is not valid JSON: {exc}") from exc


def _value(r: _Reader, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise FormatError(f"json payload nests deeper than {_MAX_DEPTH} levels")
    tag = r.take(1)[0]
    if tag == _JSON:
        return _load_json(r.take(r.u32()))
    if tag == _STRS:
        return [r.text() for _ in range(r.count(4))]
    if tag in (_I64S, _F64S):
        n = r.count(8)
        return np.frombuffer(r.take(8 * n), dtype="<i8" if tag == _I64S else "<f8").tolist()
    if tag == _BOOLS:
        return [bool(b) for b in r.take(r.count(1))]
    read = _VALUE_READS.get(tag)
    if read is not None:
        return read(r)
    if tag == _DICT:
        n = r.count(5)
        out: dict[str, Any] = {}
        for _ in range(n):
            key = r.text()
            out[key] = _value(r, depth + 1)
        return out
    if tag == _RECS:
        rows, keys = r.u32(), [r.text() for _ in range(r.count(4))]
        if rows > len(r.data) - r.at:
            raise FormatError(f"json payload announces {rows} records but holds {len(r.data) - r.at} bytes")
        return [{key: _cell(r) for key in keys} for _ in range(rows)]
    raise FormatError(f"json payload has the unknown tag {tag}; a newer LitData may have written it")


def _cell(r: _Reader) -> Any:
    kind = r.take(1)[0]
    read = _CELL_READS.get(kind)
    if read is None:
        raise FormatError(f"json payload has the unknown record cell tag {kind:#x}")
    return read(r)


def loads(data: bytes | memoryview) -> Any:
    """Decode a ``json`` payload (tagged, or plain JSON text from older LitData).

    Raises:
        FormatError: truncated, unknown tag, invalid UTF-8 or JSON, or bytes after the value.
    """
    raw = bytes(data)
    if not raw or raw[0] > 0x20:
        return _load_json(raw)
    reader = _Reader(raw)
    value = _value(reader, 0)
    if reader.at != len(raw):
        raise FormatError(f"json payload has {len(raw) - reader.at} bytes after its value")
    return value


class JsonSerializer(Serializer):
    """A :class:`JsonLeaf` (a list or dict kept whole) as LitData 0.2.76's ``json`` payload.

    Only :class:`JsonLeaf` objects are claimed: plain lists and dicts are flattened into leaves as
    before. Decoding returns the plain list or dict.
    """

    name = "json"

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, JsonLeaf)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        return dumps(obj.value if isinstance(obj, JsonLeaf) else obj), None

    def deserialize(self, data: bytes | memoryview) -> Any:
        return loads(data)
