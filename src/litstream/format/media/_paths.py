"""Which bare path strings are media: LitData 0.2.76's claim rule for ``str`` leaves.

A ``str`` leaf that names an existing local file whose extension one of the media encodings claims
(below) is stored as that medium, not as a string; every other ``str`` (a caption, a ``.txt`` or
``.npy`` path, a missing file) is stored as ``str``. Only strings with such an extension cost a
``stat`` call.

    video   mp4 ogv mjpeg avi mov h264 mpg mpeg webm wmv mkv
    audio   wav mp3 flac ogg opus m4a aac wma pcm
    image   jpg jpeg png webp bmp gif
    nifti   nii nii.gz
    mesh    glb ply stl
    pdf     pdf
    tiff    tif tiff
"""

from __future__ import annotations

import os

__all__ = ["MEDIA_PATH_EXTENSIONS", "is_media_path"]

MEDIA_PATH_EXTENSIONS: frozenset[str] = frozenset(
    (
        *("mp4", "ogv", "mjpeg", "avi", "mov", "h264", "mpg", "mpeg", "webm", "wmv", "mkv"),
        *("wav", "mp3", "flac", "ogg", "opus", "m4a", "aac", "wma", "pcm"),
        *("jpg", "jpeg", "png", "webp", "bmp", "gif"),
        *("nii", "gz", "glb", "ply", "stl", "pdf", "tif", "tiff"),
    )
)


def is_media_path(value: str) -> bool:
    """Whether ``value`` names an existing file with a media extension (``.gz`` only as ``.nii.gz``)."""
    lower = value.split("?", 1)[0].lower()
    ext = os.path.splitext(lower)[1][1:]
    if ext not in MEDIA_PATH_EXTENSIONS or (ext == "gz" and not lower.endswith(".nii.gz")):
        return False
    try:
        return os.path.isfile(value)
    except (ValueError, OSError):  # NUL bytes, overlong names
        return False
