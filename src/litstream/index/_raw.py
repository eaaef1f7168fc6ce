"""The file list of a raw (never optimized) dataset: listed once, kept as LitData's ``index.json.zstd``.

Layout (LitData's, so either library reuses the other's cache): a zstd frame holding UTF-8 JSON
``{"source": <input_dir>, "files": [{"path": str, "size": int}, ...], "created_at": <epoch seconds>}``,
saved as ``<cache_dir>/<md5(input_dir)>/index.json.zstd`` (temporary name, then rename).

Where the list comes from and where it is kept: ``index/_raw_indexer.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core._bridge import run_sync
from .._core._errors import ConfigurationError, FormatError
from .._core._optional import optional_module
from ..storage._listing import list_retrying

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

    from ..storage._base import Store

__all__ = [
    "INDEX_NAME",
    "FileMetadata",
    "decode_index",
    "encode_index",
    "index_cache_dir",
    "key_of",
    "list_files",
    "save_index",
]

INDEX_NAME = "index.json.zstd"
_MAX_INDEX_BYTES = 1 << 31  # 2 GiB of JSON is far beyond any listing; bounds a hostile frame


@dataclass(frozen=True)
class FileMetadata:
    """One file of a raw dataset (LitData's ``litdata.raw.FileMetadata``).

    Attributes:
        path: The file's full location: an absolute local path, or a URL (``s3://bucket/dir/a.jpg``).
        size: Its length in bytes, as listed.
    """

    path: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        """``{"path": ..., "size": ...}``, as stored in the index."""
        return {"path": self.path, "size": self.size}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileMetadata:
        """The inverse of :meth:`to_dict`, validated.

        Raises:
            FormatError: a field is missing or of the wrong type.
        """
        if not isinstance(data, dict):
            raise FormatError(f"raw index: a file entry must be an object, got {type(data).__name__}")
        path, size = data.get("path"), data.get("size")
        if not isinstance(path, str) or isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise FormatError(f"raw index: bad file entry {data!r}; expected a string path and a size >= 0")
        return cls(path, size)


def check_key(key: str, where: str) -> str:
    """``key`` if it is a plain relative ``/``-separated name (no ``..``, ``.``, empty part, ``\\`` or NUL).

    Raises:
        FormatError: otherwise (names from a listing or an index are untrusted).
    """
    parts = key.split("/")
    if not key or "\x00" in key or "\\" in key or any(p in ("", ".", "..") for p in parts):
        raise FormatError(f"{where}: the file name {key!r} is not a plain relative name; it is refused")
    return key


def key_of(path: str, root: str) -> str:
    """The store key of ``path`` (a :attr:`FileMetadata.path`) under ``root`` (the dataset's location).

    Raises:
        ConfigurationError: ``path`` is not below ``root``.
        FormatError: the remainder is not a plain relative name.
    """
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        local = os.path.join(root, "")
        if path.startswith(local):
            return check_key(path[len(local) :].replace(os.sep, "/"), root)
        raise ConfigurationError(f"file {path!r} is not inside the dataset {root!r}; setup() must return its files")
    return check_key(path[len(prefix) :], root)


def list_files(store: Store, root: str) -> list[FileMetadata]:
    """Every file of ``store`` except ``index.json.zstd``, sorted by key, as :class:`FileMetadata` (blocking)."""
    listing = sorted(run_sync(list_retrying, store), key=lambda meta: meta.path)
    out: list[FileMetadata] = []
    for meta in listing:
        key = check_key(meta.path, root)
        if key.rsplit("/", 1)[-1] == INDEX_NAME or key.endswith("/"):
            continue
        out.append(FileMetadata(f"{root.rstrip('/')}/{key}", meta.size))
    return out


def _zstandard() -> ModuleType:
    """The ``zstandard`` module (LitData keeps a raw dataset's file list as ``index.json.zstd``)."""
    return optional_module(
        "zstandard",
        "StreamingRawDataset keeps its file list as LitData's index.json.zstd, which needs the zstandard "
        "package: pip install 'litstream[zstd]'",
    )


def decode_index(blob: bytes, where: str) -> list[FileMetadata]:
    """The files recorded in an ``index.json.zstd`` blob.

    Raises:
        FormatError: not a zstd frame of the expected JSON.
    """
    zstandard = _zstandard()
    try:
        text = zstandard.ZstdDecompressor().decompress(blob, max_output_size=_MAX_INDEX_BYTES)
        data = json.loads(text.decode("utf-8"))
    except (zstandard.ZstdError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{where}: not a raw-dataset index ({exc}); delete it or pass recompute_index=True") from exc
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise FormatError(f"{where}: the raw-dataset index has no 'files' list; pass recompute_index=True")
    return [FileMetadata.from_dict(entry) for entry in files]


def encode_index(files: Sequence[FileMetadata], source: str) -> bytes:
    """An ``index.json.zstd`` blob for ``files`` (LitData's layout)."""
    doc = {"source": source, "files": [f.to_dict() for f in files], "created_at": time.time()}
    return bytes(_zstandard().ZstdCompressor().compress(json.dumps(doc).encode("utf-8")))


def save_index(path: Path, blob: bytes) -> None:
    """Write ``blob`` to ``path`` atomically (temporary name, then rename), creating folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        tmp.write_bytes(blob)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def index_cache_dir(cache_root: str | os.PathLike[str], input_dir: str) -> Path:
    """``<cache_root>/<md5(input_dir)>``, LitData's per-dataset cache folder (not created)."""
    digest = hashlib.md5(input_dir.encode(), usedforsecurity=False).hexdigest()
    return Path(cache_root).expanduser().absolute() / digest
