"""Appending to an existing dataset: which settings must match, and where chunk numbering continues.

LitData's append mode (spec/format-and-write.md §2.6, §7.7) merges the new chunks after the old ones
only when both configs are identical, and continues each rank's chunk numbers after its old ones.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, FormatError
from ..format._index import comparable_config
from ..storage._listing import list_retrying

if TYPE_CHECKING:
    from ..format._index import DatasetConfig
    from ..format._loaders import PyTreeLoader
    from ..storage._store import Store

__all__ = ["check_sample_format", "check_settings", "config_diff", "next_chunk_number", "settings_mismatch"]

_CHUNK_NAME = re.compile(r"^chunk-(\d+)-(\d+)(?:\.[^/]+)?\.bin$")


def settings_mismatch(
    config: DatasetConfig,
    *,
    chunk_size: int | None,
    chunk_bytes: int | None,
    compression: str | None,
    item_loader: PyTreeLoader,
) -> list[str]:
    """The settings (known before any sample) that differ from ``config``, as ``"name=theirs (here ours)"``."""
    ours: dict[str, Any] = {
        "chunk_size": chunk_size,
        "chunk_bytes": chunk_bytes,
        "compression": compression,
        "item_loader": type(item_loader).__name__,
        "encryption": None,
    }
    theirs: dict[str, Any] = {key: getattr(config, key) for key in ours}
    theirs["encryption"] = None if config.encryption is None else dict(config.encryption)
    return [f"{key}={theirs[key]!r} (here {ours[key]!r})" for key in ours if ours[key] != theirs[key]]


def check_settings(
    url: str,
    config: DatasetConfig,
    *,
    chunk_size: int | None,
    chunk_bytes: int | None,
    compression: str | None,
    item_loader: PyTreeLoader,
) -> None:
    """Refuse appending to the dataset at ``url`` (written with ``config``) with other settings.

    Raises:
        ConfigurationError: a setting of :func:`settings_mismatch` differs (all of them named).
    """
    wrong = settings_mismatch(
        config, chunk_size=chunk_size, chunk_bytes=chunk_bytes, compression=compression, item_loader=item_loader
    )
    if wrong:
        raise ConfigurationError(
            f"output_dir {url} holds a dataset written with {', '.join(wrong)}; appending needs "
            "the same values (LitData merges identical configs only): pass them, or use mode='overwrite'"
        )


def check_sample_format(url: str, config: DatasetConfig, existing: DatasetConfig | None) -> None:
    """Refuse a first sample whose format (``config``) differs from the dataset's at ``url`` (``existing``).

    Raises:
        FormatError: the formats differ (each differing key named).
    """
    if existing is not None and comparable_config(config) != comparable_config(existing):
        raise FormatError(
            f"this sample's format does not match the dataset at {url} "
            f"({'; '.join(config_diff(config, existing))}); append samples with the same keys, "
            "order and leaf types, or use mode='overwrite'"
        )


def config_diff(ours: DatasetConfig, theirs: DatasetConfig) -> list[str]:
    """The keys of two configs that differ, as ``"key: theirs in index.json, ours here"``."""
    a, b = ours.to_json_obj(), theirs.to_json_obj()
    keys = sorted(a.keys() | b.keys())
    return [f"{key}: {b.get(key)!r} in index.json, {a.get(key)!r} here" for key in keys if a.get(key) != b.get(key)]


async def next_chunk_number(store: Store, rank: int, start: int = 0) -> int:
    """The first free chunk number of ``rank``: at least ``start`` (from ``index.json``), and past every
    ``chunk-{rank}-{n}`` file there, committed or not (an earlier writer may have crashed after
    uploading chunks it never committed)."""
    numbers = [
        int(match.group(2))
        for meta in await list_retrying(store)
        if "/" not in meta.path and (match := _CHUNK_NAME.match(meta.path)) is not None and int(match.group(1)) == rank
    ]
    return max([start - 1, *numbers]) + 1
