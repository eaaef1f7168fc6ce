"""``AsyncUploader``'s argument checks, kept apart from the writer so that each module stays small."""

from __future__ import annotations

from typing import Any

from .._core._errors import ConfigurationError
from ..format._compression import validate_compression
from ..format._loaders import PyTreeLoader

__all__ = ["DEFAULT_CHUNK_BYTES", "MODES", "check_uploader_args"]

MODES = (None, "append", "overwrite")
DEFAULT_CHUNK_BYTES = "64MB"  # when neither chunk_size nor chunk_bytes is given


def check_uploader_args(compression: Any, item_loader: Any, mode: Any, rank: Any, max_concurrency: Any) -> None:
    """Validate the arguments of ``AsyncUploader`` that need no I/O.

    Raises:
        ConfigurationError: a bad value, naming the argument, the value and what is accepted.
    """
    validate_compression(compression)
    if item_loader is not None and not isinstance(item_loader, PyTreeLoader):
        raise ConfigurationError(f"item_loader={item_loader!r} is not supported yet; use PyTreeLoader()")
    if mode not in MODES:
        raise ConfigurationError(f"mode must be 'append', 'overwrite' or None, got {mode!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ConfigurationError(f"rank must be an int >= 0 (chunk files are chunk-<rank>-<n>.bin), got {rank!r}")
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise ConfigurationError(f"max_concurrency must be an int >= 1 (uploads at once), got {max_concurrency!r}")
