"""Parquet files as chunks (LitData's ``ParquetLoader``): footers to index entries, file bytes to rows.

A Parquet dataset is indexed, not optimized: every ``*.parquet`` file of a directory is one chunk
whose ``chunk_size`` is its row count and whose ``chunk_bytes`` is its file size, and the index's
``config`` records the Arrow type of every column (spec/format-and-write.md §6.2)::

    config = {"chunk_bytes": null, "chunk_size": null, "compression": null, "data_format": ["int64", ...],
              "data_spec": null, "encryption": null, "item_loader": "ParquetLoader"}
    chunks = [{"chunk_bytes": <file size>, "chunk_size": <rows>, "dim": null, "filename": "a.parquet"}, ...]

Items are rows as ``dict`` column name → Python value (Arrow's ``as_py()``), as LitData returns them.
Pure: bytes in, values out. Needs ``pyarrow`` (the ``parquet`` extra); importing this module does
not import it, only using it does.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..._core._errors import ConfigurationError, FormatError
from .._chunk import ChunkView
from .._index import ChunkInfo, DatasetConfig

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "PARQUET_FOOTER_TAIL",
    "PARQUET_LOADER_NAME",
    "ParquetChunk",
    "ParquetFileInfo",
    "ParquetLoader",
    "RowDecoder",
    "check_parquet_loader",
    "footer_length",
    "parquet_config",
    "parquet_file_info",
]

PARQUET_LOADER_NAME = "ParquetLoader"
PARQUET_FOOTER_TAIL = 8
"""Bytes at the end of every Parquet file: uint32 LE footer length, then the magic ``PAR1``."""
_MAGIC = b"PAR1"


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError as exc:  # pragma: no cover - pyarrow is in the dev install
        raise ModuleNotFoundError(
            "reading Parquet datasets needs pyarrow; install it with `pip install litstream[parquet]`"
        ) from exc
    return pa, pq


class ParquetLoader:
    """Read Parquet files as chunks, one row per item (LitData's ``ParquetLoader``).

    Pass an instance as ``item_loader=`` to ``StreamingDataset`` or ``astream`` for a dataset indexed
    with :func:`litstream.index_parquet_dataset`. Each item is a ``dict`` of column name → Python value.

    Args:
        pre_load_chunk: Accepted for LitData compatibility; litstream always decodes a whole row
            group at a time. Default ``False``.
        low_memory: Accepted for LitData compatibility (LitData reads one row group at a time when
            ``True``); litstream decodes row groups lazily either way. Default ``True``.
        columns: Read only these columns (in this order), or ``None`` (default) for all of them.

    Raises:
        ConfigurationError: ``columns`` is not a non-empty sequence of strings, or a flag is not a bool.
    """

    def __init__(
        self, pre_load_chunk: bool = False, low_memory: bool = True, columns: Sequence[str] | None = None
    ) -> None:
        for name, value in (("pre_load_chunk", pre_load_chunk), ("low_memory", low_memory)):
            if not isinstance(value, bool):
                raise ConfigurationError(f"ParquetLoader({name}={value!r}): expected True or False")
        if columns is not None and (
            isinstance(columns, str) or not columns or not all(isinstance(c, str) for c in columns)
        ):
            raise ConfigurationError(
                f"ParquetLoader(columns={columns!r}): expected a non-empty list of column names, or None for all"
            )
        self.pre_load_chunk = pre_load_chunk
        self.low_memory = low_memory
        self.columns: tuple[str, ...] | None = None if columns is None else tuple(columns)

    def state_dict(self) -> dict[str, Any]:
        """Loader settings stored in checkpoints."""
        return {
            "pre_load_chunk": self.pre_load_chunk,
            "low_memory": self.low_memory,
            "columns": None if self.columns is None else list(self.columns),
        }

    def __repr__(self) -> str:
        return f"ParquetLoader(columns={None if self.columns is None else list(self.columns)!r})"


def footer_length(tail: bytes | memoryview, *, name: str = "a file") -> int:
    """The footer length announced by the last 8 bytes of a Parquet file (``name`` is for messages).

    Raises:
        FormatError: ``tail`` is not 8 bytes ending in the magic ``PAR1``.
    """
    if len(tail) != PARQUET_FOOTER_TAIL or bytes(tail[4:]) != _MAGIC:
        raise FormatError(f"{name} is not a Parquet file: its last 8 bytes are {bytes(tail)!r}, expected <length>PAR1")
    return int.from_bytes(tail[:4], "little")


@dataclass(frozen=True)
class ParquetFileInfo:
    """What the index needs from one Parquet file.

    Attributes:
        filename: Basename of the file.
        size: File size in bytes (the index's ``chunk_bytes``).
        num_rows: Rows in the file (the index's ``chunk_size``).
        data_types: ``str(arrow_type)`` of every column, in column order (``"int64"``, ``"string"``, ...).
    """

    filename: str
    size: int
    num_rows: int
    data_types: tuple[str, ...]

    def chunk_info(self) -> ChunkInfo:
        return ChunkInfo(filename=self.filename, chunk_size=self.num_rows, chunk_bytes=self.size, dim=None)


def parquet_file_info(filename: str, size: int, footer: bytes | memoryview) -> ParquetFileInfo:
    """Describe a Parquet file from its footer.

    Args:
        filename: Basename of the file (recorded in the index).
        size: File size in bytes.
        footer: The last ``footer_length(tail) + 8`` bytes of the file (the whole file works too).

    Raises:
        FormatError: the bytes are not a Parquet footer.
    """
    pa, pq = _pyarrow()
    try:
        meta = pq.read_metadata(pa.BufferReader(bytes(footer)))
        schema = meta.schema.to_arrow_schema()
    except (pa.ArrowInvalid, OSError) as exc:
        raise FormatError(f"{filename} is not a readable Parquet file: {exc}") from exc
    return ParquetFileInfo(filename, size, int(meta.num_rows), tuple(str(field.type) for field in schema))


def parquet_config(files: Sequence[ParquetFileInfo]) -> DatasetConfig:
    """The index ``config`` for ``files``.

    Raises:
        FormatError: two files have different column types (LitData raises too); the message names both.
    """
    if not files:
        raise FormatError("no Parquet files to index")
    first = files[0]
    for other in files[1:]:
        if other.data_types != first.data_types:
            raise FormatError(
                f"{other.filename} has column types {list(other.data_types)} but {first.filename} has "
                f"{list(first.data_types)}; every Parquet file of a dataset must have the same columns"
            )
    return DatasetConfig(
        data_format=first.data_types,
        data_spec=None,
        chunk_size=None,
        chunk_bytes=None,
        compression=None,
        encryption=None,
        item_loader=PARQUET_LOADER_NAME,
        extra={"types": None},  # LitData 0.2.76 records the key (null) in Parquet indexes
    )


@dataclass(frozen=True)
class ParquetChunk(ChunkView):
    """Rows of one Parquet file held in memory, decoded one row group at a time on first use.

    Offers what the read engine needs from a chunk (``num_items``, ``item(i)``, ``data``); here
    ``item`` returns the decoded row (a ``dict``), so a Parquet dataset's decoder is the identity.

    Args:
        data: The whole file.
        columns: Columns to read, or ``None`` for all.

    Raises:
        FormatError: the bytes are not a Parquet file, or a requested column does not exist.
    """

    columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        names = self._file.schema_arrow.names
        if self.columns is not None:
            missing = [c for c in self.columns if c not in names]
            if missing:
                raise FormatError(f"ParquetLoader(columns=...) names {missing}, which the file lacks; it has {names}")

    @cached_property
    def _file(self) -> Any:
        pa, pq = _pyarrow()
        try:
            return pq.ParquetFile(pa.BufferReader(self.data))
        except (pa.ArrowInvalid, OSError) as exc:
            raise FormatError(f"a chunk is not a readable Parquet file: {exc}") from exc

    @cached_property
    def _ends(self) -> list[int]:
        meta = self._file.metadata
        return list(itertools.accumulate(meta.row_group(g).num_rows for g in range(meta.num_row_groups)))

    @cached_property
    def _groups(self) -> dict[int, list[dict[str, Any]]]:
        return {}

    @property
    def num_items(self) -> int:
        return self._ends[-1] if self._ends else 0

    def item(self, i: int) -> Any:
        """Row ``i`` (0-based, file-local) as a new ``dict``.

        Raises:
            FormatError: ``i`` is outside ``[0, num_items)``.
        """
        if not 0 <= i < self.num_items:
            raise FormatError(f"row {i} is outside this Parquet file of {self.num_items} rows")
        group = bisect.bisect_right(self._ends, i)
        rows = self._groups.get(group)
        if rows is None:
            columns = None if self.columns is None else list(self.columns)
            rows = self._file.read_row_group(group, columns=columns).to_pylist()
            self._groups[group] = rows
        start = self._ends[group - 1] if group else 0
        return dict(rows[i - start])


class RowDecoder:
    """The decoder of a Parquet dataset: chunks already give rows, so ``decode`` returns its input."""

    def decode(self, item: Any) -> Any:
        return item


def check_parquet_loader(where: str, config: DatasetConfig, item_loader: object) -> ParquetLoader | None:
    """The ``ParquetLoader`` reading a dataset, or ``None`` when the dataset is not a Parquet one.

    Raises:
        ConfigurationError: a Parquet index read without ``ParquetLoader()``, or ``ParquetLoader()``
            given for an optimized (non-Parquet) dataset.
    """
    written = config.item_loader == PARQUET_LOADER_NAME
    if isinstance(item_loader, ParquetLoader):
        if not written:
            raise ConfigurationError(
                f"{where} was written with item_loader={config.item_loader!r}, not by index_parquet_dataset; "
                "drop item_loader=ParquetLoader()"
            )
        return item_loader
    if written:
        raise ConfigurationError(
            f"{where} is a Parquet dataset (indexed by index_parquet_dataset); pass item_loader=ParquetLoader()"
        )
    return None
