"""Image wrappers (``Image``, ``Jpeg``, ``JpegArray``, ``Pil``, ``Tiff``) and the ``image``,
``jpeg_array`` and ``tifffile`` encodings (``pil`` and ``jpeg`` live in :mod:`._image_serializers`,
the wrapper classes in :mod:`._image_types`).

Payloads (LitData 0.2.76)::

    key         data_format              payload                                      decodes to
    image       "image:<ext>"            the encoded image file (PNG, JPEG, ...)      uint8 tensor (3, H, W)
    jpeg_array  "jpeg_array"             LE uint32 n | n x LE uint32 size | n files   list of such tensors
    tifffile    "tifffile"               a TIFF file                                  np.ndarray (tifffile)

Bare values claimed here, as LitData claims them: a ``str`` naming an existing file ending in
``.jpg .jpeg .png .webp .bmp .gif`` (``image``) or ``.tif .tiff`` (``tifffile``), and a non-empty
list or tuple of ``PIL.JpegImagePlugin.JpegImageFile`` (``jpeg_array``; one leaf, not a list node).

Deliberate difference: LitData records a ``Tiff`` wrapper as ``"tiff"``, a name its own reader
cannot resolve (``KeyError: 'tiff'``); litstream writes ``"tifffile"`` for every TIFF (LitData reads
that) and reads ``"tiff"`` too. TIFF needs the ``tiff`` extra (``tifffile``).
"""

from __future__ import annotations

import io
import struct
from typing import Any

import numpy as np

from ..._core._errors import FormatError
from .._image_types import IMAGE_EXTENSIONS, TIFF_EXTENSIONS, Image, Jpeg, JpegArray, Pil, Tiff, is_jpeg_list
from .._serializer_base import Serializer, loaded_class
from ._base import MediaRef, has_media_extension, read_media_bytes, require, same_head
from ._image_codec import decode_image_tensor, encode_image_ref, save_pil
from ._image_serializers import JpegSerializer

__all__ = [
    "Image",
    "ImageSerializer",
    "Jpeg",
    "JpegArray",
    "JpegArraySerializer",
    "Pil",
    "Tiff",
    "TiffSerializer",
    "is_jpeg_list",
]


class ImageSerializer(Serializer):
    """``Image`` wrappers and image path strings, as the encoded file (``"image:<ext>"``)."""

    name = "image"

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, Image) or has_media_extension(obj, IMAGE_EXTENSIONS)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        if isinstance(obj, Image) and (
            obj.array is not None
            or obj.image is not None
            or obj.quality is not None
            or obj.max_quality is not None
            or obj.mode
            or obj.format
        ):
            data, ext = encode_image_ref(obj, obj.format or "PNG")
            return data, f"image:{ext}"
        data, ext = read_media_bytes(obj)
        return data, f"image:{ext or 'jpg'}"

    def deserialize(self, data: bytes | memoryview) -> Any:
        return decode_image_tensor(data)

    def same_format(self, recorded: str, fixed: str) -> bool:
        return same_head(recorded, fixed)


def _child_jpeg(image: Jpeg, parent: JpegArray) -> Jpeg:
    """The child with the parent's ``quality`` / ``max_quality`` applied, as LitData does."""
    if parent.quality is not None and image.quality != parent.quality:
        return Jpeg(image.path, image.bytes, image.array, image.image, image.mode, parent.quality, None)
    if parent.max_quality is not None and image.quality is None and image.max_quality != parent.max_quality:
        return Jpeg(image.path, image.bytes, image.array, image.image, image.mode, None, parent.max_quality)
    return image


class JpegArraySerializer(Serializer):
    """``JpegArray`` wrappers and lists of ``JpegImageFile`` (``"jpeg_array"``).

    Layout: uint32 LE count ``n >= 1`` | ``n`` uint32 LE sizes | the ``n`` files back to back.
    """

    name = "jpeg_array"
    _u32 = struct.Struct("<I")

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, JpegArray) or is_jpeg_list(obj)

    def _one(self, image: Any, parent: JpegArray | None) -> bytes:
        if isinstance(image, Jpeg):
            return JpegSerializer().serialize(_child_jpeg(image, parent) if parent else image)[0]
        if isinstance(image, Image):
            return ImageSerializer().serialize(image)[0]
        if isinstance(image, (bytes, bytearray, str, dict, MediaRef)):
            return read_media_bytes(image)[0]
        if JpegSerializer().can_serialize(image):
            return JpegSerializer().serialize(image)[0]
        image_type = loaded_class("PIL.Image", "Image")
        if image_type is not None and isinstance(image, image_type):
            return save_pil(image.convert("RGB"), "JPEG", quality=100)[0]
        raise FormatError(f"JpegArray cannot store a {type(image).__name__}; pass PIL images, Jpeg(), paths or bytes")

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        parent = obj if isinstance(obj, JpegArray) else None
        images = list(obj.images if parent is not None else obj)
        if not images:
            raise FormatError("JpegArray(images=[]) is empty; pass at least one image")
        files = [self._one(image, parent) for image in images]
        sizes = np.array([len(f) for f in files], dtype="<u4").tobytes()
        return b"".join((self._u32.pack(len(files)), sizes, *files)), None

    def deserialize(self, data: bytes | memoryview) -> list[Any]:
        view = memoryview(data)
        if len(view) < 4:
            raise FormatError(f"jpeg_array payload of {len(view)} bytes has no image count")
        (count,) = self._u32.unpack_from(view, 0)
        start = 4 + 4 * count
        if count == 0 or start > len(view):
            raise FormatError(f"jpeg_array payload of {len(view)} bytes cannot hold {count} images")
        sizes = np.frombuffer(view[4:start], dtype="<u4").astype(np.int64)
        if start + int(sizes.sum()) > len(view):
            raise FormatError(f"jpeg_array sizes add up past the end of the {len(view)}-byte payload")
        images = []
        for size in sizes.tolist():
            images.append(decode_image_tensor(view[start : start + size]))
            start += size
        return images


class TiffSerializer(Serializer):
    """``Tiff`` wrappers and ``.tif``/``.tiff`` path strings, as a TIFF file (``"tifffile"``).

    Also answers for LitData's ``"tiff"`` name. Through :meth:`setup`, a ``"image:tiff"`` or
    ``"file:tiff"`` format still decodes as ``image`` / ``file`` (LitData's resolution).
    """

    name = "tifffile"

    def can_serialize(self, obj: object) -> bool:
        if isinstance(obj, Tiff):
            return True
        return isinstance(obj, str) and has_media_extension(obj, TIFF_EXTENSIONS)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        if isinstance(obj, Tiff) and (obj.array is not None or obj.image is not None):
            tifffile = require("tifffile", "tiff", "writing Tiff(array=...)")
            buffer = io.BytesIO()
            tifffile.imwrite(buffer, np.asarray(obj.array if obj.array is not None else obj.image))
            return buffer.getvalue(), None
        data, _ = read_media_bytes(obj)
        return data, None

    def deserialize(self, data: bytes | memoryview) -> Any:
        tifffile = require("tifffile", "tiff", "reading TIFF samples")
        try:
            return tifffile.imread(io.BytesIO(bytes(data)))
        except Exception as exc:  # tifffile raises many unrelated types (struct.error, ...) on bad files
            raise FormatError(f"invalid TIFF payload ({len(data)} bytes): {exc}") from exc

    def same_format(self, recorded: str, fixed: str) -> bool:
        return {recorded, fixed} <= {"tiff", "tifffile"}

    def setup(self, data_format: str) -> Serializer:
        head = data_format.partition(":")[0]
        if head == "image":
            return ImageSerializer()
        if head == "file":
            from ._text import FileSerializer

            return FileSerializer()
        return self
