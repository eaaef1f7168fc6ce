"""Where a ``StreamingRawDataset``'s items come from: the store its fetcher reads, the checked items of
``setup()``, and the disk folder that serves files (kept copies of remote files, or local files in place)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core._errors import ConfigurationError
from ..index._raw import FileMetadata, key_of
from ..read.raw._files import RawFiles
from ..storage._files import local_path
from ..storage._hedged import HedgedStore
from ..storage._obstore import ObstoreStore

if TYPE_CHECKING:
    from pathlib import Path

    from ..read._spec import ReadSpec
    from ..read.raw._stream import RawItem
    from ..storage._store import Store

__all__ = ["checked_items", "disk_files", "fetch_store"]

_OBSTORE_THREADS = 256


def fetch_store(spec: ReadSpec) -> Store:
    """The store the raw fetcher reads through: the bare store of ``spec`` (the fetcher hedges and retries
    in its own loop, ``read/raw/_fetch.py``, through the store's ``without_retries()`` twin, so that every
    throttled answer counts); an obstore one with 256 threads (many small GETs: the adaptive limit, not
    the store's default 16 threads, should bound them) that calls obstore's async API under asyncio."""
    store = spec.store.inner if isinstance(spec.store, HedgedStore) else spec.store
    if isinstance(store, ObstoreStore) and store.spec is not None:
        store = ObstoreStore(spec=store.spec, url=store.url, max_threads=_OBSTORE_THREADS)
        store.native_async = True  # under asyncio, no thread hop per GET
    return store


def disk_files(store: Store, folder: Path, *, as_path: bool, cache_files: bool) -> RawFiles | None:
    """The disk folder that serves files, or ``None`` (fetched into memory each time): a local dataset's files
    are read in place, never copied (so only ``as_path`` needs one); a remote dataset's go through
    ``folder`` when ``cache_files``."""
    if local_path(store, "") is not None:
        return RawFiles(folder, source=store, as_path=True) if as_path else None
    if cache_files:
        return RawFiles(folder, as_path=as_path)
    return None


def checked_items(items: object, root: str) -> list[RawItem]:
    """What ``setup()`` returned, checked: a list of files or of lists of files, each below ``root``.

    Raises:
        ConfigurationError: not a list, an entry is not a ``FileMetadata``, or a path outside ``root``.
    """
    if not isinstance(items, list):
        raise ConfigurationError(f"setup() must return a list, but returned {type(items).__name__}")
    for item in items:
        for f in item if isinstance(item, list) else [item]:
            if not isinstance(f, FileMetadata):
                raise ConfigurationError(f"setup() returned {f!r}; items must be FileMetadata or lists of them")
            key_of(f.path, root)
    return list(items)
