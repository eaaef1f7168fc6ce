"""Which files a raw dataset holds: indexers (LitData's ``BaseIndexer`` / ``FileIndexer``) and the kept list.

Where the list comes from, first found wins (LitData's order):

1. ``<cache_dir>/<md5(input_dir)>/index.json.zstd`` (this machine's copy);
2. ``<input_dir>/index.json.zstd``, the copy kept next to the data;
3. the indexer's ``discover_files``. The fresh list is then saved to 1 and put at 2 (best effort, as in
   LitData: a location that refuses the write, such as read-only credentials, gets a ``UserWarning`` once
   per process; ``hf://`` and ``http(s)://`` locations are read-only and are not written to).

``recompute_index=True`` skips 1 and 2. Everything runs in the calling process: no process is started
(DataLoader workers forked afterwards rebuild their own obstore clients, see ``storage/_obstore_fork.py``).
"""

from __future__ import annotations

import os
import warnings
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core._bridge import run_sync
from .._core._errors import ConfigurationError, ObjectNotFoundError, StorageError
from ._raw import INDEX_NAME, FileMetadata, decode_index, encode_index, key_of, list_files, save_index

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..storage._base import Store

__all__ = ["BaseIndexer", "FileIndexer", "build_or_load_index"]

_WARNED: set[tuple[int, str]] = set()


class BaseIndexer(ABC):
    """Chooses the files of a ``StreamingRawDataset`` (LitData's ``litdata.raw.indexer.BaseIndexer``).

    Subclass it and implement :meth:`discover_files`; pass an instance as ``indexer=``. The dataset keeps
    what it returns (see the module docs of ``index/_raw_indexer.py``: cached under ``cache_dir`` and next
    to the data), so ``discover_files`` runs again only with ``recompute_index=True`` or a fresh cache.
    """

    @abstractmethod
    def discover_files(self, input_dir: str, storage_options: dict[str, Any] | None) -> list[FileMetadata]:
        """Every file of the dataset.

        Args:
            input_dir: The dataset's location as ``FileMetadata.path`` values must start: an absolute local
                folder, or a URL (``s3://bucket/dir``) without a trailing ``/``.
            storage_options: The dataset's ``storage_options`` (``None`` when none were given).

        Returns:
            One :class:`FileMetadata` per file, each ``path`` below ``input_dir``, in item order.
        """

    def build_or_load_index(
        self,
        input_dir: str,
        cache_dir: str,
        storage_options: dict[str, Any] | None,
        recompute_index: bool = False,
    ) -> list[FileMetadata]:
        """The files of ``input_dir`` as ``StreamingRawDataset`` gets them (LitData's method): the list kept in
        ``cache_dir``, else the one kept next to the data, else this indexer's fresh listing, which is then
        kept in both places (not next to read-only ``hf://`` / ``http(s)://`` data). Blocking.

        Args:
            input_dir: The dataset's folder or URL.
            cache_dir: The folder that keeps the list (``index.json.zstd``); created when missing.
            storage_options: Options of the dataset's store (and passed to :meth:`discover_files`).
            recompute_index: List afresh even when a kept list exists.

        Raises:
            ConfigurationError: no file was found, or an unknown URL scheme.
            StorageError: the listing failed.
        """
        from ..storage._resolver import resolve_dir, store_for

        resolved = resolve_dir(input_dir)
        root = resolved.url.rstrip("/") if resolved.url is not None else str(resolved.path)
        scheme = root.split("://", 1)[0] if resolved.url is not None else ""
        return build_or_load_index(
            self,
            store_for(resolved, storage_options),
            root,
            Path(cache_dir),
            recompute=recompute_index,
            storage_options=storage_options,
            remote=resolved.url is not None,
            upload=scheme not in ("hf", "http", "https"),
        )


class FileIndexer(BaseIndexer):
    """Every file below ``input_dir``, optionally filtered by suffix (LitData's ``FileIndexer``).

    Args:
        max_depth: For remote locations, the deepest folder level listed (default 5, as LitData's
            ``fsspec.find(maxdepth=5)``: ``1`` keeps only files directly in ``input_dir``); local folders are
            listed to any depth, as in LitData.
        extensions: Keep only files with these suffixes, dot included (``[".jpg", ".png"]``, compared
            lower-case); ``None`` or ``[]`` keeps every file.

    Raises:
        ConfigurationError: ``max_depth`` is not an int >= 1, or ``extensions`` is not a list of strings.
    """

    def __init__(self, max_depth: int = 5, extensions: Sequence[str] | None = None) -> None:
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
            raise ConfigurationError(f"FileIndexer(max_depth={max_depth!r}): use an int >= 1")
        if isinstance(extensions, str) or not all(isinstance(e, str) for e in extensions or ()):
            raise ConfigurationError(f"FileIndexer(extensions={extensions!r}): use a list of suffixes like ['.jpg']")
        self.max_depth = max_depth
        self.extensions = [e.lower() for e in extensions or ()]

    def __repr__(self) -> str:
        return f"FileIndexer(max_depth={self.max_depth}, extensions={self.extensions!r})"

    def _should_include_file(self, file_path: str) -> bool:
        """Whether to keep ``file_path`` (LitData's override point): not the kept list, and a wanted suffix."""
        name = file_path.rsplit("/", 1)[-1]
        if name == INDEX_NAME:
            return False
        return not self.extensions or os.path.splitext(name)[1].lower() in self.extensions

    def keep(self, files: list[FileMetadata], root: str, *, remote: bool) -> list[FileMetadata]:
        """``files`` that :meth:`_should_include_file` accepts and (remote locations) at most ``max_depth`` deep."""
        files = [f for f in files if self._should_include_file(f.path)]
        if remote:
            files = [f for f in files if key_of(f.path, root).count("/") < self.max_depth]
        return files

    def discover_files(self, input_dir: str, storage_options: dict[str, Any] | None) -> list[FileMetadata]:
        """Every matching file of ``input_dir``, sorted by path (blocking; see the class docs).

        Raises:
            ConfigurationError: ``input_dir`` is an ``http(s)://`` URL (a web server cannot be listed; LitData
                raises ``ValueError`` too, and ``ConfigurationError`` is one) or has an unknown scheme.
            StorageError: the listing failed.
            FormatError: a listed name is not a plain relative name.
        """
        from ..storage._resolver import resolve_dir, store_for

        scheme = input_dir.split("://", 1)[0].lower() if "://" in input_dir else ""
        if scheme in ("http", "https"):
            raise ConfigurationError(
                f"FileIndexer.discover_files(input_dir={input_dir!r}): an {scheme}:// location cannot be listed; "
                "use a local folder, s3://, gs://, azure:// or hf://, or list the files in your own BaseIndexer"
            )
        resolved = resolve_dir(input_dir)
        root = resolved.url.rstrip("/") if resolved.url is not None else str(resolved.path)
        store = store_for(resolved, storage_options)
        return self.keep(list_files(store, root), root, remote=resolved.url is not None)


def _fetch_kept(store: Store) -> bytes | None:
    try:
        return run_sync(store.get, INDEX_NAME)
    except ObjectNotFoundError:
        return None


def _put_kept(store: Store, blob: bytes) -> str | None:
    """Put the list next to the data; the error message when the location refused it."""
    try:
        run_sync(store.put, INDEX_NAME, blob)
    except (StorageError, OSError) as exc:
        return str(exc)
    return None


def _list_and_keep(
    store: Store, root: str, indexer: FileIndexer, remote: bool, look_first: bool, upload: bool
) -> tuple[bytes | None, list[FileMetadata], bytes | None, str | None]:
    """(the kept list found next to the data, or: the fresh files, their encoded list, an upload error)."""
    if look_first and (kept := _fetch_kept(store)) is not None:
        return kept, [], None, None
    files = indexer.keep(list_files(store, root), root, remote=remote)
    if not files:
        return None, [], None, None
    blob = encode_index(files, root)
    return None, files, blob, _put_kept(store, blob) if upload else None


def _validated(found: object, root: str, indexer: BaseIndexer) -> list[FileMetadata]:
    if not isinstance(found, list):
        raise ConfigurationError(
            f"{type(indexer).__name__}.discover_files returned {type(found).__name__}; return a list of FileMetadata"
        )
    out: list[FileMetadata] = []
    for entry in found:  # LitData's own FileMetadata objects are accepted too (same two fields)
        meta = FileMetadata.from_dict({"path": getattr(entry, "path", None), "size": getattr(entry, "size", None)})
        key_of(meta.path, root)
        out.append(meta)
    return out


def build_or_load_index(
    indexer: BaseIndexer,
    store: Store,
    root: str,
    cache_dir: Path,
    *,
    recompute: bool,
    storage_options: dict[str, Any] | None,
    remote: bool,
    upload: bool,
) -> list[FileMetadata]:
    """The dataset's files, from the first source that has them (see the module docs). Blocking.

    Args:
        indexer: What chooses the files when they are listed afresh.
        store: The dataset's store.
        root: The dataset's location as :attr:`FileMetadata.path` values start (local path or URL).
        cache_dir: The dataset's cache folder (``index_cache_dir``); the list is saved there.
        recompute: List again even when a kept list exists.
        storage_options: Passed to a custom indexer's ``discover_files``.
        remote: Whether ``root`` is a URL (``FileIndexer.max_depth`` applies).
        upload: Whether to put a fresh list next to the data.

    Raises:
        ConfigurationError: no file was found, or a custom indexer returned something else than files below
            ``root``.
        FormatError: a kept list is corrupt, or a listed name is not a plain relative name.
        StorageError: the listing failed.
    """
    local = cache_dir / INDEX_NAME
    if not recompute and local.is_file():
        return decode_index(local.read_bytes(), str(local))
    upload_error: str | None = None
    if type(indexer) is FileIndexer:  # list, filter and keep in one call
        kept, files, blob, upload_error = _list_and_keep(store, root, indexer, remote, not recompute, upload)
    else:
        kept = None if recompute else _fetch_kept(store)
        files, blob = [], None
        if kept is None:
            if isinstance(indexer, FileIndexer) and type(indexer).discover_files is FileIndexer.discover_files:
                files = indexer.keep(list_files(store, root), root, remote=remote)
            else:
                files = _validated(indexer.discover_files(root, storage_options), root, indexer)
            blob = encode_index(files, root) if files else None
            if blob is not None and upload:
                upload_error = _put_kept(store, blob)
    if kept is not None:
        save_index(local, kept)
        return decode_index(kept, f"{root}/{INDEX_NAME}")
    if not files or blob is None:
        raise ConfigurationError(f"input_dir={root!r}: no files found; check the path and storage_options")
    save_index(local, blob)
    if upload_error is not None and (os.getpid(), root) not in _WARNED:
        _WARNED.add((os.getpid(), root))
        warnings.warn(
            f"StreamingRawDataset could not keep its file list at {root}/{INDEX_NAME} ({upload_error}); it is "
            f"kept at {local} only, so other machines will list {root} again",
            UserWarning,
            stacklevel=3,  # the caller of StreamingRawDataset(...)
        )
    return files
