"""Writing LitData's Arrow chunks (``optimize(..., chunk_format="arrow")``): samples → chunk bytes.

The layout is :mod:`._arrow`'s. A sample is a ``dict`` with ``str`` keys whose values are JSON-like:
``None``, ``bool``, ``int`` (64-bit), ``float``, ``str``, ``bytes``, lists of those and nested dicts
of those. :class:`ArrowEncoder` checks every sample and keeps LitData's fused schema, recorded in
``index.json`` as ``config.types`` with LitData's encoding::

    scalar field      "int" | "float" | "bool" | "str" | "bytes"
    optional field    {"type": "int", "optional": true}      (missing or None in some sample)
    always None       {"type": "null", "optional": true}
    list              {"type": "list", "value": <type or "json" when every list was empty>}
    nested dict       {"type": "struct", "fields": {name: <type>, ...}}

A field whose kind differs between samples (``int`` in one, ``str`` in another) cannot be one Arrow
column: :meth:`ArrowEncoder.add` raises. ``config.data_format`` / ``data_spec`` describe the first
sample as LitData's writer records them (lists as one ``"json"`` leaf, ``None`` as ``"pickle"``);
readers of Arrow chunks never use them. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._core._errors import ConfigurationError, FormatError
from .._chunk import header_length
from .._pytree import spec_to_json, tree_flatten
from ._chunk import ARROW_BATCH_ROWS, ARROW_FOOTER_MAGIC, pyarrow_module

__all__ = [
    "CHUNK_FORMATS",
    "ArrowEncoder",
    "check_chunk_format",
    "ipc_codec",
    "pack_arrow_chunk",
    "pyarrow_available",
    "snapshot",
]

CHUNK_FORMATS = (None, "pytree", "arrow")
"""Values of ``optimize(chunk_format=...)``: ``None`` (default) picks the layout as LitData 0.2.76 does (Arrow
for dict samples of JSON-like values, see ``write/_writer.py``), ``"pytree"`` and ``"arrow"`` force one."""
_INT64 = (-(2**63), 2**63 - 1)
_U32_MAX = 2**32 - 1


def check_chunk_format(chunk_format: object) -> str | None:
    """``"arrow"``, ``"pytree"`` or ``None`` (chosen per sample, LitData's rule) for a ``chunk_format`` argument.

    Raises:
        ConfigurationError: another value; the message lists the valid ones.
    """
    if chunk_format not in CHUNK_FORMATS:
        raise ConfigurationError(
            f"chunk_format must be None (the default: Arrow chunks for dict samples of JSON-like values, as "
            f"LitData writes them), 'pytree' or 'arrow', got {chunk_format!r}"
        )
    return None if chunk_format is None else str(chunk_format)


def pyarrow_available() -> bool:
    """Whether pyarrow can be imported (the default layout writes Arrow chunks only then, as LitData)."""
    try:
        pyarrow_module()
    except ModuleNotFoundError:
        return False
    return True


def ipc_codec(compression: str | None) -> tuple[str | None, int | None]:
    """``(codec, level)`` of the Arrow IPC buffers for an ``optimize`` ``compression``.

    ``None`` → no compression; ``"zstd"`` → zstd at Arrow's default level (what LitData writes);
    ``"zstd:N"`` → zstd level N. Recorded as ``config.ipc_compression = "zstd"``; the chunk files
    themselves are not compressed again (their names carry no ``.zstd`` infix), as in LitData.
    """
    if compression is None:
        return None, None
    codec, _, level = compression.partition(":")
    return codec, int(level) if level else None


@dataclass(frozen=True)
class _Type:
    """One node of LitData's ``config.types`` schema."""

    kind: str
    optional: bool = False
    value: _Type | None = None  # list items; None for a list only ever seen empty
    fields: tuple[tuple[str, _Type], ...] = ()

    def as_optional(self) -> _Type:
        return self if self.optional else _Type(self.kind, True, self.value, self.fields)

    def to_json(self) -> Any:
        if self.kind in ("str", "int", "float", "bool", "bytes", "null") and not self.optional:
            return self.kind
        obj: dict[str, Any] = {"type": self.kind}
        if self.optional:
            obj["optional"] = True
        if self.kind == "list":
            obj["value"] = "json" if self.value is None else self.value.to_json()
        elif self.kind == "struct":
            obj["fields"] = {name: t.to_json() for name, t in self.fields}
        return obj


_SCALARS: tuple[tuple[type, str], ...] = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"))


def _infer(value: Any, where: str) -> _Type:
    if value is None:
        return _Type("null", optional=True)
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
        raise FormatError(f"{where} = {value} does not fit a 64-bit Arrow integer; store it as a str")
    for kind, name in _SCALARS:
        if isinstance(value, kind):
            return _Type(name)
    if isinstance(value, (bytes, bytearray)):
        return _Type("bytes")
    if isinstance(value, list):
        fused: _Type | None = None
        for k, item in enumerate(value):
            t = _infer(item, f"{where}[{k}]")
            fused = t if fused is None else _fuse(fused, t, f"{where}[{k}]")
        return _Type("list", value=fused)
    if isinstance(value, dict):
        fields = tuple((_key(key, where), _infer(v, f"{where}[{key!r}]")) for key, v in value.items())
        return _Type("struct", fields=fields)
    raise FormatError(
        f"{where} is a {type(value).__name__}, which an Arrow chunk cannot hold (None, bool, int, float, str, "
        "bytes, lists and dicts of those); drop chunk_format='arrow' for samples with arrays, tensors or images"
    )


def _key(key: object, where: str) -> str:
    if not isinstance(key, str):
        raise FormatError(f"{where} has the key {key!r}; Arrow chunks need str keys (drop chunk_format='arrow')")
    return key


def _fuse(left: _Type, right: _Type, where: str) -> _Type:
    """LitData's ``fuse_type``; a kind conflict (LitData's ``"json"``) raises instead."""
    optional = left.optional or right.optional
    if left.kind == "null":
        return right.as_optional()
    if right.kind == "null":
        return left.as_optional()
    if left.kind != right.kind:
        raise FormatError(
            f"{where} is a {left.kind} in one sample and a {right.kind} in another; an Arrow column has one type "
            "(keep each field's type the same, or drop chunk_format='arrow')"
        )
    if left.kind == "list":
        if left.value is None or right.value is None:
            value = left.value or right.value
        else:
            value = _fuse(left.value, right.value, f"{where}[]")
        return _Type("list", optional, value)
    if left.kind == "struct":
        mine, theirs = dict(left.fields), dict(right.fields)
        fields: list[tuple[str, _Type]] = []
        for name in [*mine, *(n for n in theirs if n not in mine)]:
            if name in mine and name in theirs:
                fields.append((name, _fuse(mine[name], theirs[name], f"{where}[{name!r}]")))
            else:
                fields.append((name, (mine.get(name) or theirs[name]).as_optional()))
        return _Type("struct", optional, fields=tuple(fields))
    return _Type(left.kind, optional)


class _Leaf:
    """A placeholder leaf for describing the first sample's pytree shape."""


def _leaf_format(value: Any) -> str:
    if value is None:
        return "pickle"
    for kind, name in _SCALARS:
        if isinstance(value, kind):
            return name
    return "bytes" if isinstance(value, (bytes, bytearray)) else "json"


def _skeleton(sample: dict[str, Any], formats: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in sample.items():
        if isinstance(value, dict):
            out[key] = _skeleton(value, formats)
        else:
            formats.append(_leaf_format(value))
            out[key] = _Leaf()
    return out


class ArrowEncoder:
    """Checks samples for Arrow chunks and keeps their fused schema (module docstring).

    Attributes:
        data_format: LitData's leaf formats of the first sample (``()`` before it).
        data_spec: LitData's ``data_spec`` of the first sample (``None`` before it).
    """

    def __init__(self) -> None:
        self._type: _Type | None = None
        self.data_format: tuple[str, ...] = ()
        self.data_spec: str | None = None

    def add(self, sample: Any) -> int:
        """Check ``sample`` and fuse its schema; return its size for ``chunk_bytes``.

        The size is LitData's estimate of a row: 8 bytes per number or bool, the length of each
        ``str`` (characters) and ``bytes``, 0 for ``None``.

        Raises:
            FormatError: not a dict of JSON-like values, or a field changes kind; the message names it.
        """
        if not isinstance(sample, dict):
            raise FormatError(
                f"chunk_format='arrow' stores dict samples, got a {type(sample).__name__}; return a dict from fn "
                "or drop chunk_format='arrow'"
            )
        inferred = _infer(sample, "sample")
        self._type = inferred if self._type is None else _fuse(self._type, inferred, "sample")
        if self.data_spec is None:
            formats: list[str] = []
            _, spec = tree_flatten(_skeleton(sample, formats))
            self.data_format, self.data_spec = tuple(formats), spec_to_json(spec)
        return _estimate(sample)

    def types_json(self) -> Any:
        """``config.types``: ``{field: type}`` of the fused schema (``None`` before any sample)."""
        if self._type is None:
            return None
        return {name: t.to_json() for name, t in self._type.fields}


def snapshot(value: Any) -> Any:
    """A copy of a checked sample's dicts and lists (its scalars are immutable), so a sample kept until
    its chunk is packed cannot change if ``fn`` reuses and mutates the object it returned."""
    if isinstance(value, dict):
        return {key: snapshot(item) for key, item in value.items()}
    if isinstance(value, list):
        return [snapshot(item) for item in value]
    return bytes(value) if isinstance(value, bytearray) else value


def _estimate(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, dict):
        return sum(_estimate(v) for v in value.values())
    if isinstance(value, list):
        return sum(_estimate(v) for v in value)
    return 8


def pack_arrow_chunk(samples: list[dict[str, Any]], compression: str | None) -> bytes:
    """The bytes of one Arrow chunk holding ``samples`` (checked by :class:`ArrowEncoder`), in order.

    Columns are the samples' keys in order of first appearance in this chunk; a sample lacking a key
    holds ``None`` there. Record batches of 256 rows; IPC buffers compressed as :func:`ipc_codec` says.
    Pure CPU work, meant for a worker thread.

    Raises:
        FormatError: Arrow cannot build the table, or the chunk would exceed 4 GiB.
        ModuleNotFoundError: pyarrow is missing (``pip install "litstream[arrow]"``).
    """
    pa = pyarrow_module()
    keys = list(dict.fromkeys(key for sample in samples for key in sample))
    codec, level = ipc_codec(compression)
    try:
        table = pa.Table.from_pylist([{key: sample.get(key) for key in keys} for sample in samples])
        options = pa.ipc.IpcWriteOptions(compression=None if codec is None else pa.Codec(codec, level))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema, options=options) as writer:
            for start in range(0, table.num_rows, ARROW_BATCH_ROWS):
                writer.write_table(table.slice(start, min(ARROW_BATCH_ROWS, table.num_rows - start)))
        ipc = sink.getvalue()
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise FormatError(f"these samples cannot form an Arrow table: {exc}") from exc
    n = len(samples)
    head = header_length(n)
    if head + len(ipc) + 12 > _U32_MAX:
        raise FormatError(f"an Arrow chunk of {head + len(ipc) + 12} bytes exceeds the 4 GiB limit; lower chunk_bytes")
    header = n.to_bytes(4, "little") + head.to_bytes(4, "little") * (n + 1)
    return b"".join((header, ipc.to_pybytes(), len(ipc).to_bytes(4, "little"), ARROW_FOOTER_MAGIC))
