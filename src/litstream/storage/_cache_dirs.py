"""Where the chunk cache lives: the cache roots, a dataset's directory under one, and ``max_cache_size`` in bytes."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path

from .._core._errors import ConfigurationError
from .._core._units import parse_bytes
from ._cache_root import default_cache_root, litdata_cache_root, own_cache_root

if os.name == "posix":
    import fcntl

__all__ = [
    "LOCK_DIR",
    "dataset_cache_dir",
    "default_cache_root",
    "litdata_cache_root",
    "own_cache_root",
    "check_cache_size",
    "parse_cache_size",
]

_LOG = logging.getLogger("litstream")
SMALL_CACHE = "25GB"
"""Below this ``max_cache_size`` (bytes or a size string), :func:`check_cache_size` logs LitData's warning."""

LOCK_DIR = ".locks"


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def dataset_cache_dir(
    root: str | os.PathLike[str], url: str, updated_at: str | float | None, *, remove_old: bool = True
) -> Path:
    """``<root>/<md5(url)>/<updated_at or md5(url)>`` as LitData lays it out, created if missing (blocking I/O).

    An ``updated_at`` that is not a plain name (has ``/``, or is ``.``/``..``) is replaced by its md5.

    Args:
        root: The cache root (see :func:`default_cache_root`).
        url: The dataset's URL as the user gave it.
        updated_at: ``index.json``'s ``updated_at``, or ``None``/``""`` when it has none.
        remove_old: Delete the other entries under ``<root>/<md5(url)>`` (older versions), except a version
            in which some process holds a chunk (see :class:`ChunkCache`).
    """
    key = _md5(url)
    version = key if updated_at is None or str(updated_at) == "" else str(updated_at)
    if "/" in version or "\\" in version or version in (".", ".."):
        version = _md5(version)
    parent = Path(root).expanduser().absolute() / key
    target = parent / version
    target.mkdir(parents=True, exist_ok=True)
    if remove_old:
        for entry in [e for e in parent.iterdir() if e.name != version]:
            if not entry.is_dir() or entry.is_symlink():
                entry.unlink(missing_ok=True)
            elif not _in_use(entry):
                shutil.rmtree(entry, ignore_errors=True)
    return target


def _in_use(directory: Path) -> bool:
    """Whether any process holds a chunk of the cache ``directory``."""
    locks = directory / LOCK_DIR
    if os.name != "posix" or not locks.is_dir():
        return False
    for lock in locks.iterdir():
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
    return False


def parse_cache_size(value: int | float | str | None, *, directory: str | os.PathLike[str] | None = None) -> int | None:
    """Convert a ``max_cache_size`` argument to bytes.

    Args:
        value: ``None`` (no limit), a positive ``int`` of bytes, a string with a decimal unit (``"50GB"``,
            ``"1MB"``, as :func:`~litstream._core._units.parse_bytes`), or a ``float`` in ``(0, 1]``: that
            fraction of the free space on ``directory``'s file system.
        directory: Where the cache is (the nearest existing ancestor is measured); needed for a fraction.

    Raises:
        ConfigurationError: (a ``ValueError``) zero, negative, unparseable, a fraction outside ``(0, 1]``,
            or a fraction without ``directory``.
    """
    if value is None:
        return None
    if isinstance(value, float):
        if not 0.0 < value <= 1.0:
            raise ConfigurationError(f"max_cache_size={value!r}: a fraction of the free disk must be in (0, 1]")
        if directory is None:
            raise ConfigurationError(f"max_cache_size={value!r}: a fraction needs the cache directory to measure")
        place = Path(directory).absolute()
        while not place.exists() and place != place.parent:
            place = place.parent
        return max(1, int(shutil.disk_usage(place).free * value))
    return parse_bytes(value, argument="max_cache_size")


def check_cache_size(value: int | float | str | None) -> None:
    """Reject a bad ``max_cache_size`` now (not in a worker), and log a warning (logger ``"litstream"``, as
    LitData logs it) when an absolute size is under 25 GB: with several DataLoader workers each holding
    ``max_pre_download`` chunks of ~64 MB, a smaller budget makes chunks be evicted and fetched again.
    A fraction of the free disk (a ``float``) is checked where the cache directory is known.

    Raises:
        ConfigurationError: as :func:`parse_cache_size`.
    """
    if value is None:
        return
    if isinstance(value, float):
        if not 0.0 < value <= 1.0:
            raise ConfigurationError(f"max_cache_size={value!r}: a fraction of the free disk must be in (0, 1]")
        return
    size = parse_cache_size(value)
    floor = parse_bytes(SMALL_CACHE, argument="max_cache_size")
    if size is not None and size < floor:
        _LOG.warning(
            "max_cache_size=%r is under %s: the chunks DataLoader workers hold at once (about num_workers * "
            "max_pre_download * chunk size) may not fit, and evicted chunks are downloaded again; raise it "
            "to 25GB or more unless the disk is that small",
            value,
            SMALL_CACHE,
        )
