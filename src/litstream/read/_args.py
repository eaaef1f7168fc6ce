"""Checks of the read arguments shared by ``astream`` and ``StreamingDataset`` (pure)."""

from __future__ import annotations

from .._core._errors import ConfigurationError
from ..format._loaders import PyTreeLoader, TokensLoader
from ..format.arrow._parquet import ParquetLoader
from .plan._window import DEFAULT_SHUFFLE_WINDOW

__all__ = ["check_read_args", "check_read_loader", "check_reader_args"]


def check_read_loader(item_loader: object) -> None:
    """Validate the ``item_loader`` of a reader: ``None``, ``PyTreeLoader()``, ``TokensLoader(B)`` or
    ``ParquetLoader()``.

    Raises:
        ConfigurationError: another object, or a ``TokensLoader`` without ``block_size``.
    """
    if item_loader is None or isinstance(item_loader, (PyTreeLoader, ParquetLoader)):
        return
    if not isinstance(item_loader, TokensLoader):
        raise ConfigurationError(
            f"item_loader={item_loader!r} is not supported; use PyTreeLoader(), TokensLoader(block_size=N) "
            "or ParquetLoader()"
        )
    if item_loader.block_size is None:
        raise ConfigurationError(
            "item_loader=TokensLoader() needs block_size to read: pass TokensLoader(block_size=N), N tokens per item"
        )


def check_read_args(
    shuffle: object,
    seed: object,
    drop_last: object,
    max_pre_download: object,
    shuffle_window: object = DEFAULT_SHUFFLE_WINDOW,
) -> None:
    """Validate the read arguments shared by ``astream`` and ``StreamingDataset``.

    Raises:
        ConfigurationError: naming the argument, its value and the fix.
    """
    if not (isinstance(shuffle, bool) or (isinstance(shuffle, str) and shuffle in ("full", "window"))):
        raise ConfigurationError(
            f"shuffle must be True or False, got {shuffle!r} (or 'full', the same as True, or 'window' to also "
            "mix the items of neighbouring chunks); pass shuffle=True for LitData's FullShuffle"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ConfigurationError(f"seed must be an int in [0, 2**32), got {seed!r}")
    if drop_last is not None and not isinstance(drop_last, bool):
        raise ConfigurationError(f"drop_last must be True, False or None, got {drop_last!r}")
    if isinstance(max_pre_download, bool) or not isinstance(max_pre_download, int) or max_pre_download < 1:
        raise ConfigurationError(f"max_pre_download must be an int >= 1 (chunks), got {max_pre_download!r}")
    if isinstance(shuffle_window, bool) or not isinstance(shuffle_window, int) or shuffle_window < 1:
        raise ConfigurationError(
            f"shuffle_window must be an int >= 1 (chunks mixed together with shuffle='window'), got "
            f"{shuffle_window!r}; pass e.g. shuffle_window={DEFAULT_SHUFFLE_WINDOW}"
        )


def check_reader_args(epoch: int | None, rank: int, world_size: int, batch_size: int, max_pre_download: int) -> None:
    """Validate who reads: the arguments of a wrapper's ``astream`` (``epoch`` may be ``None``).

    Raises:
        ConfigurationError: naming the argument and its value.
    """
    for name, value in (("world_size", world_size), ("batch_size", batch_size), ("max_pre_download", max_pre_download)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ConfigurationError(f"rank must be an int in [0, world_size={world_size}), got {rank!r}")
    if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1):
        raise ConfigurationError(f"epoch must be an int >= 1 (1-based) or None, got {epoch!r}")
