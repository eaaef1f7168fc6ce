"""The ``index.json`` model: reading, writing and merging it exactly as LitData does.

Layout (spec/format-and-write.md §2)::

    {"chunks": [{"chunk_bytes": int, "chunk_size": int, "dim": int|null, "filename": str}, ...],
     "config": {"chunk_bytes": int|null, "chunk_size": int|null, "compression": str|null,
                "data_format": [str, ...], "data_spec": str|null, "encryption": obj|null,
                "item_loader": "PyTreeLoader"},
     "updated_at": "<str(time.time())>"}

Written with ``json.dumps(..., sort_keys=True)`` on one line. Per-writer partial indexes are named
``{rank}.index.json`` and carry no ``updated_at``; they are merged in natural order (``10`` after
``2``) and every partial's config must equal the first one's.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .._core._errors import FormatError
from ._index_schema import check_index_obj

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "INDEX_FILENAME",
    "ChunkInfo",
    "comparable_config",
    "DatasetConfig",
    "Index",
    "is_partial_index_name",
    "merge_partial_indexes",
    "natural_sort_key",
    "partial_index_name",
]

INDEX_FILENAME = "index.json"
_PARTIAL_RE = re.compile(r"^\d+\.index\.json$")
_NODE_PARTIAL_RE = re.compile(r"^\d+-index\.json$")


@dataclass(frozen=True)
class ChunkInfo:
    """One ``chunks[]`` entry.

    Attributes:
        filename: Basename of the chunk file, including the ``.{compression}`` infix if any.
        chunk_size: Number of items in the chunk.
        chunk_bytes: Length of the chunk in bytes before compression (header included); for zstd
            ``compression_level`` ``"batch"`` / ``"sample"`` (LitData 0.2.76) the file's length.
        dim: Total token count for TokensLoader chunks, else ``None``.
        extra: Keys LitData or MosaicML add that litstream keeps but does not interpret.
    """

    filename: str
    chunk_size: int
    chunk_bytes: int
    dim: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def to_json_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = dict(self.extra)
        obj.update(
            {
                "chunk_bytes": self.chunk_bytes,
                "chunk_size": self.chunk_size,
                "dim": self.dim,
                "filename": self.filename,
            }
        )
        return obj

    @classmethod
    def from_json_obj(cls, obj: Mapping[str, Any]) -> ChunkInfo:
        try:
            known = {k: obj[k] for k in ("filename", "chunk_size", "chunk_bytes")}
        except KeyError as exc:
            raise FormatError(f"index.json chunk entry {dict(obj)!r} lacks the key {exc.args[0]!r}") from None
        extra = {k: v for k, v in obj.items() if k not in ("filename", "chunk_size", "chunk_bytes", "dim")}
        return cls(dim=obj.get("dim"), extra=extra, **known)


@dataclass(frozen=True)
class DatasetConfig:
    """The ``config`` object of ``index.json``; see the module docstring for the field meanings."""

    data_format: tuple[str, ...]
    data_spec: str | None
    chunk_size: int | None = None
    chunk_bytes: int | None = None
    compression: str | None = None
    encryption: Mapping[str, Any] | None = None
    item_loader: str | None = "PyTreeLoader"
    extra: Mapping[str, Any] = field(default_factory=dict)

    # Shaped like ChunkInfo.to_json_obj (the unknown keys, then the fields), but over other fields.
    def to_json_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = dict(self.extra)
        obj.update(
            {
                "chunk_bytes": self.chunk_bytes,
                "chunk_size": self.chunk_size,
                "compression": self.compression,
                "data_format": list(self.data_format),
                "data_spec": self.data_spec,
                "encryption": None if self.encryption is None else dict(self.encryption),
            }
        )
        if self.item_loader is not None:
            obj["item_loader"] = self.item_loader
        return obj

    @classmethod
    def from_json_obj(cls, obj: Mapping[str, Any]) -> DatasetConfig:
        for key in ("compression", "data_format", "data_spec"):
            if key not in obj:
                raise FormatError(f"index.json config lacks the required key {key!r}; is this a LitData index?")
        known = {
            "chunk_bytes",
            "chunk_size",
            "compression",
            "data_format",
            "data_spec",
            "encryption",
            "item_loader",
        }
        return cls(
            data_format=tuple(obj["data_format"]),
            data_spec=obj["data_spec"],
            chunk_size=obj.get("chunk_size"),
            chunk_bytes=obj.get("chunk_bytes"),
            compression=obj.get("compression"),
            encryption=obj.get("encryption"),
            item_loader=obj.get("item_loader"),
            extra={k: v for k, v in obj.items() if k not in known},
        )


@dataclass(frozen=True)
class Index:
    """A whole ``index.json`` (or a partial one when ``updated_at`` is ``None``)."""

    chunks: tuple[ChunkInfo, ...]
    config: DatasetConfig | None
    updated_at: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def num_items(self) -> int:
        """Items in the whole dataset (sum of ``chunk_size``)."""
        return sum(c.chunk_size for c in self.chunks)

    def stamped(self, now: float | None = None) -> Index:
        """A copy with ``updated_at = str(now or time.time())``, as LitData's final merge writes it."""
        return replace(self, updated_at=str(time.time() if now is None else now))

    def to_json(self) -> str:
        """Serialize exactly as LitData: ``json.dumps(obj, sort_keys=True)``."""
        obj: dict[str, Any] = dict(self.extra)
        obj["chunks"] = [c.to_json_obj() for c in self.chunks]
        obj["config"] = None if self.config is None else self.config.to_json_obj()
        if self.updated_at is not None:
            obj["updated_at"] = self.updated_at
        return json.dumps(obj, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "index.json") -> Index:
        """Parse an index written by LitData or litstream.

        Raises:
            FormatError: not JSON, or it breaks the schema of :mod:`._index_schema` (a missing key, a
                wrong type, a size out of range, an unsafe chunk name). ``source`` names the file.
        """
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
            raise FormatError(f"{source} is not valid JSON ({exc}); re-run optimize to rebuild it") from exc
        check_index_obj(obj, source)  # types, ranges, names and sizes: see _index_schema.py
        config = obj.get("config")
        return cls(
            chunks=tuple(ChunkInfo.from_json_obj(c) for c in obj["chunks"]),
            config=None if config is None else DatasetConfig.from_json_obj(config),
            updated_at=None if obj.get("updated_at") is None else str(obj["updated_at"]),
            extra={k: v for k, v in obj.items() if k not in ("chunks", "config", "updated_at")},
        )


def partial_index_name(rank: int) -> str:
    """The file name of writer ``rank``'s partial index: ``{rank}.index.json``."""
    return f"{rank}.index.json"


def is_partial_index_name(name: str, *, include_node_partials: bool = True) -> bool:
    """True for ``{rank}.index.json`` (and ``{node}-index.json`` when ``include_node_partials``)."""
    return bool(_PARTIAL_RE.match(name) or (include_node_partials and _NODE_PARTIAL_RE.match(name)))


def natural_sort_key(name: str) -> tuple[Any, ...]:
    """Sort key comparing digit runs as integers, so ``"10.index.json"`` sorts after ``"2.index.json"``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def merge_partial_indexes(partials: Iterable[tuple[str, Index]], existing: Index | None = None) -> Index:
    """Concatenate partial indexes in natural order of their names into one unstamped index.

    Args:
        partials: ``(file name, index)`` pairs; order does not matter.
        existing: A previous ``index.json`` whose chunks come first (append mode).

    Returns:
        The merged index with ``updated_at=None``; call :meth:`Index.stamped` before writing it.

    Raises:
        FormatError: two partials carry different configs (e.g. different ``data_format``).
    """
    ordered = sorted(partials, key=lambda p: natural_sort_key(p[0]))
    chunks: list[ChunkInfo] = list(existing.chunks) if existing is not None else []
    config = existing.config if existing is not None else None
    first_name = INDEX_FILENAME if existing is not None else None
    for name, part in ordered:
        if part.config is None:
            continue
        if config is None:
            config, first_name = part.config, name
        elif _without_types(part.config) == _without_types(config):  # workers may see different types
            config = _with_fused_types(config, part.config)
        elif part.config != config:
            raise FormatError(
                f"the config in {name} differs from the one in {first_name}: "
                f"{part.config.to_json_obj()} != {config.to_json_obj()}; every worker must produce samples "
                "with the same structure and types"
            )
        chunks.extend(part.chunks)
    return Index(chunks=tuple(chunks), config=config)


def _without_types(config: DatasetConfig) -> DatasetConfig:
    return comparable_config(config)


def comparable_config(config: DatasetConfig) -> DatasetConfig:
    """``config`` without what may differ between writers of one dataset: ``types`` (fused on merge) and the
    LitData 0.2.76 keys left ``None`` (an index of LitData <= 0.2.75 has none of them)."""
    extra = {k: v for k, v in config.extra.items() if k != "types" and v is not None}
    return replace(config, extra=extra)


def _with_fused_types(config: DatasetConfig, other: DatasetConfig) -> DatasetConfig:
    """``config`` with ``config.types`` fused with ``other``'s (LitData 0.2.76 merges them so)."""
    if "types" not in config.extra and "types" not in other.extra:
        return config
    from ._types import fuse_schema_json

    types = fuse_schema_json(config.extra.get("types"), other.extra.get("types"))
    return replace(config, extra={**config.extra, "types": types})
