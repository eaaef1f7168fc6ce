"""Raw files kept on disk (``StreamingRawDataset(cache_files=True)``), and local paths as items.

A remote file ``<input_dir>/<key>`` is kept at ``<cache_dir>/<md5(input_dir)>/<key>`` (LitData's layout: the
folder that also holds ``index.json.zstd``). A kept file whose length matches the listed size is read from
disk instead of the network; any other is fetched again. Files appear atomically (a temporary name in the
same folder, then a rename), so processes sharing the folder never see a partial file; two that fetch the
same file at once both write it, and either copy is whole.

Disk work for a batch runs in one worker thread (one look-up, one write), never on the event loop.
With ``item_type="path"`` items are local paths: the kept copy of a remote file, or, for a store whose
objects are local files (``storage/_files.py::local_path``), the file itself (nothing is copied).
"""

from __future__ import annotations

import os
import stat
import uuid
from typing import TYPE_CHECKING

import anyio.to_thread

from ..._core._errors import ObjectNotFoundError, StorageError
from ...storage._files import local_path
from ...storage._safe_files import read_regular

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from ...storage._base import Store
    from ._fetch import RawFetcher

__all__ = ["RawFiles"]


class RawFiles:
    """Serves files through a disk folder: kept copies of remote files, or a local dataset's own files.

    Args:
        folder: Where kept copies go (remote datasets); ignored with ``source``.
        source: A store whose objects are local files: its files are the values (nothing is written;
            only ``as_path`` makes sense).
        as_path: Values are local paths (``str``) instead of bytes.
    """

    def __init__(self, folder: Path, *, source: Store | None = None, as_path: bool) -> None:
        self.folder = folder
        self.source = source
        self.local = source is not None
        self.as_path = as_path

    def _path(self, key: str) -> Path:
        if self.source is None:
            return self.folder / key
        path = local_path(self.source, key)
        if path is None:
            raise StorageError(f"{self.source.url}/{key} is not a local file; item_type='path' needs a local file")
        return path

    def _find(self, keys: Sequence[str], sizes: Sequence[int]) -> list[bytes | str | None]:
        """Blocking: for each key, its path or bytes when on disk with the right size, else ``None``."""
        out: list[bytes | str | None] = []
        for key, size in zip(keys, sizes, strict=True):
            path = self._path(key)
            try:
                st = os.stat(path)
            except FileNotFoundError as exc:
                if self.local:
                    raise ObjectNotFoundError(
                        f"{path}: the file is gone; rebuild the index (recompute_index=True)"
                    ) from exc
                out.append(None)
                continue
            if self.local and not stat.S_ISREG(st.st_mode):
                read_regular(path)  # raises StorageError naming what the file is (a FIFO, a device, ...)
            if not self.local and size > 0 and st.st_size != size:
                out.append(None)  # partial or stale copy: fetch again
            elif self.as_path:
                out.append(str(path))
            else:
                try:
                    out.append(read_regular(path) if self.local else path.read_bytes())
                except FileNotFoundError:  # removed since the stat
                    out.append(None)
        return out

    def _keep(self, keys: Sequence[str], blobs: Sequence[bytes]) -> list[str]:
        """Blocking: write each blob at its key's path (atomically); the paths."""
        out: list[str] = []
        for key, blob in zip(keys, blobs, strict=True):
            path = self.folder / key
            tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_bytes(blob)
                os.replace(tmp, path)
            except OSError as exc:
                raise StorageError(
                    f"cache_files=True could not keep {key} at {path}: {exc}; free space there, pick another "
                    "cache_dir, or pass cache_files=False"
                ) from exc
            finally:
                tmp.unlink(missing_ok=True)
            out.append(str(path))
        return out

    async def values(self, fetcher: RawFetcher, keys: Sequence[str], sizes: Sequence[int]) -> list[bytes | str]:
        """For each key, in order: its bytes or local path, from disk when kept, else fetched (and kept).

        Raises:
            ObjectNotFoundError: a local dataset's file is gone, or a remote object is.
            StorageError: a copy could not be written, or the fetch failed.
        """
        found = await anyio.to_thread.run_sync(self._find, keys, sizes)
        missing = [i for i, value in enumerate(found) if value is None]
        if missing:
            wanted = [keys[i] for i in missing]
            blobs = await fetcher.fetch_many(wanted, [sizes[i] for i in missing])
            paths = await anyio.to_thread.run_sync(self._keep, wanted, blobs)
            for i, blob, path in zip(missing, blobs, paths, strict=True):
                found[i] = path if self.as_path else blob
        return [value for value in found if value is not None]
