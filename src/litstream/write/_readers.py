"""LitData's input readers for ``optimize`` / ``map`` (``reader=``): ``BaseReader`` and ``ParquetReader``.

A reader turns the user's inputs into the items the workers get (``remap_items``, once, in the calling
process) and each item into what ``fn`` receives (``read``, in the worker, just before ``fn``).
``ParquetReader`` cuts Parquet files into shards of at most ``num_rows`` rows (written once into
``cache_folder``, reused by later runs), so large files spread over the workers, and hands ``fn`` each
shard as a ``pyarrow.parquet.ParquetFile`` (or a pandas ``DataFrame`` / Arrow table).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, FormatError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["BaseReader", "ParquetReader", "ReadThen", "with_reader"]


class BaseReader(ABC):
    """How ``optimize`` / ``map`` read their inputs (LitData's ``litdata.processing.readers.BaseReader``)."""

    @abstractmethod
    def remap_items(self, items: Any, num_workers: int) -> list[Any]:
        """The items the workers get, from the user's inputs (called once, before the workers start)."""

    @abstractmethod
    def read(self, item: Any) -> Any:
        """What ``fn`` receives for ``item`` (called in the worker)."""


class ParquetReader(BaseReader):
    """Parquet files as inputs, resharded into pieces of at most ``num_rows`` rows (LitData's ``ParquetReader``).

    Args:
        cache_folder: Where the shards are written (``<cache_folder>/<num_rows>/<start>_<end>_<file name>``);
            a shard already there is reused.
        num_rows: Rows per shard (>= 1, default 65536).
        to_pandas: ``fn`` gets a pandas ``DataFrame`` (default); ``False`` gives a ``ParquetFile``.
        columns: Read only these columns (``fn`` then gets a table, or a ``DataFrame`` with ``to_pandas``).
        filters: pyarrow filters (a list of tuples or an expression) applied to each shard.

    Raises:
        ConfigurationError: ``num_rows`` is not an int >= 1.
        ModuleNotFoundError: pyarrow is missing (the ``parquet`` extra).
    """

    def __init__(
        self,
        cache_folder: str,
        num_rows: int = 65536,
        to_pandas: bool = True,
        columns: list[str] | None = None,
        filters: Any | None = None,
    ) -> None:
        if isinstance(num_rows, bool) or not isinstance(num_rows, int) or num_rows < 1:
            raise ConfigurationError(f"ParquetReader(num_rows={num_rows!r}): use an int >= 1 (rows per shard)")
        from ..format.media._base import require

        require("pyarrow.parquet", "parquet", "ParquetReader")
        self.cache_folder = os.fspath(cache_folder)
        self.num_rows = num_rows
        self.to_pandas = to_pandas
        self.columns = columns
        self.filters = filters

    def remap_items(self, items: Any, num_workers: int) -> list[str]:
        """Write each file's ``num_rows`` shards (row groups copied, nothing else loaded); their paths in order.

        Raises:
            FormatError: an input is not a readable Parquet file.
        """
        import pyarrow.parquet as pq

        folder = os.path.join(self.cache_folder, str(self.num_rows))
        os.makedirs(folder, exist_ok=True)
        shards: list[str] = []
        for path in items:
            try:
                with pq.ParquetFile(os.fspath(path), memory_map=True) as parquet:
                    total = parquet.metadata.num_rows
                    for start in range(0, total, self.num_rows):
                        end = min(start + self.num_rows, total)
                        shard = os.path.join(folder, f"{start}_{end}_{os.path.basename(os.fspath(path))}")
                        shards.append(shard)
                        if not os.path.exists(shard):
                            self._write_shard(parquet, start, end, shard)
            except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
                raise FormatError(f"ParquetReader: {path!r} is not a readable Parquet file ({exc})") from exc
        return shards

    def _write_shard(self, parquet: Any, start: int, end: int, shard: str) -> None:
        import pyarrow.parquet as pq

        groups: list[int] = []
        first = offset = 0
        for g in range(parquet.metadata.num_row_groups):
            rows = parquet.metadata.row_group(g).num_rows
            if offset + rows > start and offset < end:
                if not groups:
                    first = offset
                groups.append(g)
            offset += rows
        table = parquet.read_row_groups(groups).slice(start - first, end - start)
        partial = f"{shard}.{os.getpid()}.tmp"
        pq.write_table(table, partial)
        os.replace(partial, shard)  # a reader never sees half a shard

    def read(self, item: Any) -> Any:
        """Shard ``item``: a ``DataFrame`` (``to_pandas``), a table (``columns``, ``filters``), a ``ParquetFile``."""
        import pyarrow.parquet as pq

        if self.to_pandas or self.columns is not None or self.filters is not None:
            table = pq.read_table(item, columns=self.columns, filters=self.filters, memory_map=True)
            return table.to_pandas() if self.to_pandas else table
        return pq.ParquetFile(item, memory_map=True)


class ReadThen:
    """``fn`` called with ``reader.read(item)`` instead of ``item`` (picklable; the worker side of ``reader=``)."""

    def __init__(self, fn: Callable[..., Any], reader: Any) -> None:
        self.fn = fn
        self.reader = reader

    def __call__(self, item: Any, *args: Any) -> Any:
        return self.fn(self.reader.read(item), *args)


def with_reader(reader: Any, fn: Callable[..., Any], inputs: Any, num_workers: int | None) -> tuple[Any, list[Any]]:
    """``(fn, inputs)`` for ``reader=``: ``fn`` wrapped in :class:`ReadThen`, inputs as ``reader.remap_items`` gives.

    Raises:
        ConfigurationError: ``reader`` has no ``read`` / ``remap_items``, or ``inputs`` is not a sequence.
    """
    if not (callable(getattr(reader, "read", None)) and callable(getattr(reader, "remap_items", None))):
        raise ConfigurationError(
            f"reader={reader!r} is not supported: pass a litstream.ParquetReader or a BaseReader subclass "
            "(read(item) and remap_items(items, num_workers))"
        )
    if not isinstance(inputs, (list, tuple, range)):
        raise ConfigurationError("reader= needs inputs as a list (of file paths for ParquetReader)")
    items: Sequence[Any] = reader.remap_items(list(inputs), num_workers or 1)
    return ReadThen(fn, reader), list(items)
