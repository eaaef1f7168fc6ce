"""What every typed media wrapper shares: the ``path`` / ``bytes`` reference and the rules for reading it.

A wrapper (``Text``, ``Image``, ``Audio``, ...; LitData 0.2.76's names in ``litdata.types``) marks a
sample leaf as media so that a caption is not mistaken for a path. Its ``path=`` or ``bytes=`` is
turned into the stored payload by the family's serializer; ``bytes=`` wins over ``path=`` and
``path=`` then only supplies the file extension.

The one exception to "``format/`` does no I/O": a wrapper's ``path=`` (and a bare path string
claimed as media) names a **local** file that the serializer reads while encoding, as LitData does.
That read happens in the writer's worker, once per sample.

Heavy decoders are optional extras; :func:`require` imports one and, when it is missing, raises
:class:`ModuleNotFoundError` naming the ``pip install "litstream[extra]"`` to run.
"""

from __future__ import annotations

import builtins
import importlib
import os
from dataclasses import dataclass
from typing import Any

from ..._core._errors import FormatError

__all__ = [
    "MediaRef",
    "extension",
    "has_media_extension",
    "media_path_bytes",
    "read_media_bytes",
    "require",
    "same_head",
]


@dataclass
class MediaRef:
    """Base of the media wrappers: a local ``path`` or in-memory ``bytes`` (LitData's ``_MediaRef``).

    Args:
        path: A local file; stored as ``str`` (``os.PathLike`` accepted). Default ``None``.
        bytes: The encoded file content (``bytes`` or ``bytearray``, copied to ``bytes``). Default ``None``.

    Raises:
        FormatError: ``bytes`` is neither ``bytes`` nor ``bytearray``.
    """

    path: str | None = None
    bytes: builtins.bytes | None = None

    def __post_init__(self) -> None:
        if self.path is not None:
            self.path = os.fspath(self.path) if isinstance(self.path, os.PathLike) else str(self.path)
        if self.bytes is not None:
            if not isinstance(self.bytes, (builtins.bytes, bytearray)):
                raise FormatError(
                    f"{type(self).__name__}(bytes=...) must be bytes or bytearray, got {type(self.bytes).__name__}; "
                    f"pass the encoded file content, or use path= for a file"
                )
            self.bytes = builtins.bytes(self.bytes)


def extension(path: str | None, default: str = "") -> str:
    """The lower-case extension of ``path`` without its dot (``"a/b.JPG?x=1"`` → ``"jpg"``), else ``default``."""
    if not path:
        return default
    return os.path.splitext(str(path).split("?", 1)[0])[1].replace(".", "").lower()


def media_path_bytes(item: object) -> tuple[str | None, builtins.bytes | None]:
    """``(path, bytes)`` of a wrapper or of a ``{"path", "bytes"}`` dict (Hugging Face style), else ``(None, None)``."""
    if isinstance(item, MediaRef):
        return item.path, item.bytes
    if isinstance(item, dict):
        payload = item.get("bytes")
        path = item.get("path")
        return (str(path) if path is not None else None), (builtins.bytes(payload) if payload is not None else None)
    return None, None


def read_media_bytes(item: object) -> tuple[builtins.bytes, str]:
    """The encoded bytes of a wrapper, ``{"path", "bytes"}`` dict, ``bytes`` or local path, and the extension.

    Raises:
        FormatError: a wrapper with neither ``path`` nor ``bytes``, a path that is not a file, or
            an unsupported input type.
    """
    path, payload = media_path_bytes(item)
    if payload is not None:
        return payload, extension(path)
    if isinstance(item, MediaRef) and path is None:
        native = [n for n in ("array", "image", "mesh", "pdf", "text") if getattr(item, n, None) is not None]
        detail = f" ({', '.join(native)} given, which this serializer cannot store)" if native else ""
        raise FormatError(f"{type(item).__name__} needs path= or bytes={detail}; e.g. {type(item).__name__}(path='x')")
    if path is None and isinstance(item, (builtins.bytes, bytearray)):
        return builtins.bytes(item), ""
    if path is None and isinstance(item, (str, os.PathLike)):
        path = os.fspath(item)
    if isinstance(path, str):
        try:
            with open(path, "rb") as handle:
                return handle.read(), extension(path)
        except OSError as exc:
            raise FormatError(f"cannot read media file {path!r}: {exc}; pass an existing local file") from exc
    raise FormatError(f"unsupported media input of type {type(item).__name__}; pass a path or bytes")


def has_media_extension(item: object, extensions: tuple[str, ...]) -> bool:
    """LitData's claim rule for bare values: a wrapper or dict whose ``path`` has one of ``extensions``,
    or a ``str`` / path-like naming an existing file with one of them. Only that last case touches the disk."""
    if isinstance(item, MediaRef):
        return bool(item.path) and extension(item.path) in extensions
    if isinstance(item, dict):
        path = item.get("path")
        return bool(path) and extension(str(path)) in extensions
    if isinstance(item, os.PathLike):
        item = os.fspath(item)
    return isinstance(item, str) and extension(item) in extensions and os.path.isfile(item)


def same_head(recorded: str, fixed: str) -> bool:
    """Whether two ``data_format`` names share their serializer part (``"image:png"`` and ``"image:jpg"``)."""
    return recorded.partition(":")[0] == fixed.partition(":")[0]


def require(module: str, extra: str, what: str) -> Any:
    """Import and return ``module``.

    Raises:
        ModuleNotFoundError: the module is not installed; the message names ``pip install "litstream[extra]"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"{what} needs the optional package {module.split('.')[0]!r}, which is not installed; "
            f'run: pip install "litstream[{extra}]"',
            name=module,
        ) from exc
