"""``StreamingRawDataset``'s arguments, checked: numbers of seconds and counts, and the ``indexer`` (LitData's
own ``FileIndexer`` translated to litstream's)."""

from __future__ import annotations

from typing import cast

from .._core._errors import ConfigurationError
from ..index._raw_indexer import BaseIndexer, FileIndexer

__all__ = ["as_indexer", "count", "seconds"]


def seconds(name: str, value: float) -> float:
    """``value`` (argument ``name``) as seconds; a negative number gives 0 (off).

    Raises:
        ConfigurationError: not an int or float.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{name}={value!r}: use a number of seconds (0 turns it off)")
    return max(0.0, float(value))


def count(name: str, value: int, low: int = 0) -> int:
    """``value`` (argument ``name``) as a count, raised to ``low`` when below it.

    Raises:
        ConfigurationError: not an int.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name}={value!r}: use an int >= {low}")
    return max(low, value)


def as_indexer(indexer: object) -> BaseIndexer:
    """``indexer`` as a litstream indexer (``None``: ``FileIndexer()``; LitData's own ``FileIndexer`` is
    translated; other indexers are used through their ``discover_files``).

    Raises:
        ConfigurationError: none of these.
    """
    if indexer is None:
        return FileIndexer()
    if isinstance(indexer, BaseIndexer):
        return indexer
    kind = type(indexer)
    if kind.__name__ == "FileIndexer" and kind.__module__.startswith("litdata."):
        return FileIndexer(getattr(indexer, "max_depth", 5), getattr(indexer, "extensions", None))
    if callable(getattr(indexer, "discover_files", None)):
        return cast("BaseIndexer", indexer)
    raise ConfigurationError(
        f"indexer={indexer!r}: use a FileIndexer(max_depth, extensions) or a BaseIndexer subclass that "
        "implements discover_files(input_dir, storage_options)"
    )
