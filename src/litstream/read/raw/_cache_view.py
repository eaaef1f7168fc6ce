"""``StreamingRawDataset.cache_manager``: LitData's view of where a raw dataset's files are cached.

LitData's ``CacheManager`` also downloads; in litstream the dataset's own fetcher does that, so this is
only the part code reads: the locations and the mapping of a file to its local copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._core._errors import ConfigurationError

if TYPE_CHECKING:
    from ...storage._resolver import Dir

__all__ = ["RawCacheManager"]


@dataclass(frozen=True)
class RawCacheManager:
    """Where a ``StreamingRawDataset`` keeps its file list and (with ``cache_files=True``) its files.

    Attributes:
        input_dir: The dataset's location.
        cache_dir: The local folder: ``index.json.zstd`` and the cached files, at their paths below
            ``input_dir``.
        cache_files: Whether fetched files are kept in ``cache_dir``.
        storage_options: The dataset's store options.
    """

    input_dir: Dir
    cache_dir: str
    cache_files: bool
    storage_options: dict[str, Any] = field(default_factory=dict)

    def get_local_path(self, remote_file_path: str) -> str:
        """The local path of a dataset file (a ``FileMetadata.path``) in :attr:`cache_dir`; its folder is created.

        Raises:
            ConfigurationError: ``remote_file_path`` is not below ``input_dir`` (LitData: ``ValueError``; this is one).
        """
        root = (self.input_dir.url or self.input_dir.path or "").rstrip("/") + "/"
        if not remote_file_path.startswith(root):
            raise ConfigurationError(
                f"get_local_path({remote_file_path!r}): the file is not below the dataset's input_dir {root!r}"
            )
        relative = remote_file_path[len(root) :]
        if not relative or any(part in ("", ".", "..") for part in relative.split("/")):
            raise ConfigurationError(f"get_local_path({remote_file_path!r}): not a plain file path below {root!r}")
        local = Path(self.cache_dir) / relative
        local.parent.mkdir(parents=True, exist_ok=True)
        return str(local)
