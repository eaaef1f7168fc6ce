"""The cache roots: where litstream (or LitData, when its variable is set) keeps cached datasets.

Below ``read/`` and ``write/`` because both need it (the chunk cache, and the Hub's Parquet index cache).
"""

from __future__ import annotations

import os
from pathlib import Path

from .._core._environ import environ

__all__ = ["default_cache_root", "litdata_cache_root", "own_cache_root"]


def own_cache_root() -> Path:
    """litstream's own cache root (not created): ``LITSTREAM_CACHE_DIR``, else ``$XDG_CACHE_HOME/litstream/chunks``
    (if absolute), else ``~/.cache/litstream/chunks``. LitData's ``LITDATA_CACHE_DIR`` is never this one.
    """
    env = environ()
    if env.litstream_cache_dir is not None:
        return Path(env.litstream_cache_dir).expanduser().absolute()
    xdg = env.xdg_cache_home or ""
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "litstream" / "chunks"


def litdata_cache_root() -> Path | None:
    """LitData's cache root, ``LITDATA_CACHE_DIR``, when that variable is set (else ``None``)."""
    found = environ().litdata_cache_dir
    return Path(found).expanduser().absolute() if found is not None else None


def default_cache_root() -> Path:
    """Where remote datasets are cached (not created): ``LITSTREAM_CACHE_DIR``, else LitData's
    ``LITDATA_CACHE_DIR``, else ``$XDG_CACHE_HOME/litstream/chunks`` (if absolute), else ``~/.cache/litstream/chunks``.
    """
    litdata = litdata_cache_root()
    if environ().litstream_cache_dir is not None or litdata is None:
        return own_cache_root()
    return litdata
