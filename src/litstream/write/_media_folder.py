"""Ingest helpers with LitData 0.2.76's names: list a class-folder tree, read a WebDataset tar.

Both feed ``optimize`` / ``map``: pass the list (or the iterator, materialised) as ``inputs``.
"""

from __future__ import annotations

import os
import tarfile
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, FormatError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["MEDIA_KINDS", "iter_webdataset_tar", "list_media_folder"]

MEDIA_KINDS: dict[str, tuple[str, ...]] = {
    "text": ("txt", "md"),
    "image": ("jpg", "jpeg", "png", "bmp", "gif", "webp", "tif", "tiff"),
    "video": ("mp4", "ogv", "mjpeg", "avi", "mov", "h264", "mpg", "mpeg", "webm", "wmv", "mkv"),
    "audio": ("wav", "mp3", "flac", "ogg", "opus", "m4a", "aac", "wma", "pcm"),
    "mesh": ("glb", "ply", "stl"),
    "pdf": ("pdf",),
    "nifti": ("nii", "nii.gz"),
}


def _matches(filename: str, extensions: tuple[str, ...]) -> bool:
    lower = filename.lower().split("?", 1)[0]
    if lower.endswith(".nii.gz"):
        return "nii.gz" in extensions
    return os.path.splitext(lower)[1][1:] in extensions


def list_media_folder(root: str, kind: str = "image", drop_labels: bool = False) -> list[dict[str, Any]]:
    """List the media files of a class-folder tree (``root/<class>/<file>``), sorted by path.

    Args:
        root: The folder to walk (recursively, following no symlinked folders).
        kind: Which extensions count: ``"image"`` (default: jpg jpeg png bmp gif webp tif tiff),
            ``"text"`` (txt md), ``"audio"``, ``"video"``, ``"mesh"``, ``"pdf"`` or ``"nifti"``
            (nii, nii.gz); case-insensitive.
        drop_labels: Give every item ``label=None``.

    Returns:
        ``[{"path": absolute path, "label": name of the file's folder, or None for files directly
        in root}]``, as LitData's ``list_media_folder`` returns.

    Raises:
        ConfigurationError: ``kind`` is not one of the names above.
    """
    if kind not in MEDIA_KINDS:
        raise ConfigurationError(f"list_media_folder(kind={kind!r}): use one of {sorted(MEDIA_KINDS)}")
    extensions = MEDIA_KINDS[kind]
    top = os.path.abspath(root)
    items: list[dict[str, Any]] = []
    for folder, _dirs, files in os.walk(top):
        label = None if drop_labels or os.path.abspath(folder) == top else os.path.basename(folder)
        items.extend({"path": os.path.join(folder, f), "label": label} for f in files if _matches(f, extensions))
    items.sort(key=lambda item: item["path"])
    return items


def iter_webdataset_tar(tar_path: str) -> Iterator[dict[str, Any]]:
    """Yield one sample per key of a WebDataset ``.tar`` shard, in archive order.

    Members are grouped by consecutive key, the file name up to its first dot (``dir/000.jpg`` and
    ``dir/000.cls`` → key ``000``; the folder is ignored); each sample maps the rest of the name
    (``"jpg"``, ``"seg.png"``) to the member's bytes, plus ``"__key__"`` and ``"__url__"`` (``tar_path``).
    Members that are not regular files or whose names have no dot are skipped. As in LitData.

    Raises:
        FormatError: the file is not a readable tar archive.
    """
    sample: dict[str, Any] = {}
    key: str | None = None
    try:
        with tarfile.open(tar_path, "r") as archive:
            for member in archive:
                if not member.isfile():
                    continue
                base = os.path.basename(member.name.replace("\\", "/"))
                if "." not in base:
                    continue
                member_key, suffix = base.split(".", 1)
                if key is not None and member_key != key:
                    yield {**sample, "__key__": key, "__url__": tar_path}
                    sample = {}
                key = member_key
                handle = archive.extractfile(member)
                if handle is not None:
                    sample[suffix] = handle.read()
    except tarfile.TarError as exc:
        raise FormatError(f"{tar_path!r} is not a readable tar archive: {exc}") from exc
    if key is not None:
        yield {**sample, "__key__": key, "__url__": tar_path}
