"""Text and generic files: the ``Text`` and ``File`` wrappers and the ``text`` / ``file`` encodings.

Payloads (LitData 0.2.76)::

    key    data_format recorded           payload                  decodes to
    text   "text"                         UTF-8 bytes, as given    str
    file   "file:<ext>" or "file"         the file's bytes         bytes

``Text(path=...)`` and ``Text(bytes=...)`` are stored as given (not re-encoded); reading then
requires UTF-8. A ``File``'s extension only names the format; note that LitData (and therefore
litstream) resolves ``"file:<ext>"`` to the serializer called ``<ext>`` when one exists
(``File(path="a.json")`` reads back with ``json``); give such files another extension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._core._errors import FormatError
from .._serializer_base import Serializer
from ._base import MediaRef, read_media_bytes, same_head

__all__ = ["File", "FileSerializer", "Text", "TextSerializer"]


@dataclass
class Text(MediaRef):
    """A text sample; streams back as ``str`` (LitData's ``litdata.types.Text``).

    Args:
        path: A local UTF-8 file, stored as is.
        bytes: UTF-8 bytes, stored as is.
        text: A string, stored as UTF-8; wins over ``path`` and ``bytes``.

    An empty ``Text()`` is refused when written (:class:`~litstream.FormatError`).
    """

    text: str | None = None


@dataclass
class File(MediaRef):
    """Any file's bytes, kept opaque; streams back as ``bytes`` (LitData's ``litdata.types.File``).

    Args:
        path: A local file; its extension is recorded as ``"file:<ext>"``.
        bytes: The content; with ``path`` too, only the path's extension is used.
    """


class TextSerializer(Serializer):
    """``Text`` wrappers as UTF-8 (format ``"text"``); decodes to ``str``."""

    name = "text"

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, Text)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        if isinstance(obj, Text):
            if obj.text is not None:
                if not isinstance(obj.text, str):
                    raise FormatError(f"Text(text=...) must be a str, got {type(obj.text).__name__}")
                try:
                    return obj.text.encode("utf-8"), "text"
                except UnicodeEncodeError as exc:
                    raise FormatError(f"Text(text=...) cannot be encoded as UTF-8: {exc}") from exc
            if obj.path is None and obj.bytes is None:
                raise FormatError("Text() is empty: pass text='...', bytes=b'...' (UTF-8) or path='file.txt'")
        data, _ = read_media_bytes(obj)
        return data, "text"

    def deserialize(self, data: bytes | memoryview) -> str:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"text payload is not valid UTF-8: {exc}") from exc

    def same_format(self, recorded: str, fixed: str) -> bool:
        return recorded == fixed


class FileSerializer(Serializer):
    """``File`` wrappers as their bytes (format ``"file:<ext>"``); decodes to ``bytes``."""

    name = "file"

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, File)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        data, ext = read_media_bytes(obj)
        return data, (f"file:{ext}" if ext else "file")

    def deserialize(self, data: bytes | memoryview) -> bytes:
        return bytes(data)

    def same_format(self, recorded: str, fixed: str) -> bool:
        return same_head(recorded, fixed)
