"""Image leaf encodings with LitData's names: ``pil`` (raw pixels) and ``jpeg`` (a JPEG file).

Both also take the typed wrappers ``Pil`` and ``Jpeg`` (:mod:`._media_image`). Pillow is imported
only when an image is encoded from a wrapper or decoded; a bare image is recognised only if Pillow
is already loaded, so encoding other samples never imports it.
"""

from __future__ import annotations

import io
import os
import struct
from typing import TYPE_CHECKING

from ..._core._errors import FormatError
from .._image_types import Jpeg, Pil
from .._serializer_base import Serializer, loaded_class
from ._base import read_media_bytes, require
from ._image_codec import decode_image_tensor, encode_image_ref, pil_from_array

if TYPE_CHECKING:
    import torch
    from PIL import Image as PILImage

__all__ = ["JpegSerializer", "PilSerializer"]


class PilSerializer(Serializer):
    """Uncompressed PIL images (any ``PIL.Image.Image`` except ``JpegImageFile``, and ``Pil`` wrappers).

    A ``Pil`` wrapper's ``image``, ``array`` (``Image.fromarray``) or file (``path``/``bytes``, opened
    with Pillow) is stored, converted to its ``mode`` first when one is given.

    Payload: uint32 LE width, uint32 LE height, uint32 LE ``len(mode)``, the mode in ASCII, then
    ``img.tobytes()``. Decodes to a new image via ``Image.frombytes``; a ``P`` image's palette is not kept.
    """

    name = "pil"
    _header = struct.Struct("<3I")

    def can_serialize(self, obj: object) -> bool:
        if isinstance(obj, Pil):
            return True
        image_type = loaded_class("PIL.Image", "Image")
        jpeg_type = loaded_class("PIL.JpegImagePlugin", "JpegImageFile")
        return (
            image_type is not None
            and isinstance(obj, image_type)
            and not (jpeg_type is not None and isinstance(obj, jpeg_type))
        )

    def serialize(self, obj: PILImage.Image | Pil) -> tuple[bytes, str | None]:
        if isinstance(obj, Pil):
            obj = self._image_of(obj)
        mode = obj.mode.encode("ascii")
        width, height = obj.size
        return b"".join((self._header.pack(width, height, len(mode)), mode, obj.tobytes())), None

    @staticmethod
    def _image_of(ref: Pil) -> PILImage.Image:
        image: PILImage.Image
        if ref.image is not None:
            image = ref.image
        elif ref.array is not None:
            image = pil_from_array(ref.array)
        else:
            data, _ = read_media_bytes(ref)
            try:
                image = require("PIL.Image", "image", "Pil(path=/bytes=)").open(io.BytesIO(data))
            except (OSError, SyntaxError, ValueError) as exc:
                raise FormatError(f"Pil(...) holds no image Pillow can read: {exc}") from exc
        if ref.mode and image.mode != ref.mode:
            image = image.convert(ref.mode)
        return image

    def deserialize(self, data: bytes | memoryview) -> PILImage.Image:
        image_module = require("PIL.Image", "image", "reading 'pil' samples")
        try:
            width, height, mode_length = self._header.unpack_from(data, 0)
        except struct.error as exc:
            raise FormatError(f"pil payload too short ({len(data)} bytes)") from exc
        start = self._header.size + mode_length
        if width * height > 8 * max(len(data) - start, 0):  # at least 1 bit per pixel: bound the allocation
            raise FormatError(f"pil payload of {len(data)} bytes cannot hold a {width}x{height} image")
        try:
            mode = bytes(data[self._header.size : start]).decode("ascii")
            image: PILImage.Image = image_module.frombytes(mode, (width, height), bytes(data[start:]))
            return image
        except (ValueError, MemoryError) as exc:  # MemoryError: Pillow refuses absurd sizes before using memory
            raise FormatError(f"invalid pil payload: {exc}") from exc


class JpegSerializer(Serializer):
    """JPEG images (``PIL.JpegImagePlugin.JpegImageFile`` and ``Jpeg`` wrappers), as a JPEG file.

    A ``JpegImageFile`` opened from an existing local file is stored as that file's bytes; one
    without a file is re-encoded by Pillow with default settings (quality 75). A ``Jpeg`` wrapper
    follows the quality rules of :mod:`._media_image_codec` (default cap 95). Decodes to a
    ``torch.uint8`` tensor of shape ``(3, height, width)`` (RGB, channels first, EXIF orientation
    applied), contiguous and writable.
    """

    name = "jpeg"

    def can_serialize(self, obj: object) -> bool:
        if isinstance(obj, Jpeg):
            return True
        jpeg_type = loaded_class("PIL.JpegImagePlugin", "JpegImageFile")
        return jpeg_type is not None and isinstance(obj, jpeg_type)

    def serialize(self, obj: PILImage.Image | Jpeg) -> tuple[bytes, str | None]:
        if isinstance(obj, Jpeg):
            if (
                obj.array is not None
                or obj.image is not None
                or obj.mode
                or obj.quality is not None
                or (obj.max_quality is not None)
            ):
                return encode_image_ref(obj, "JPEG")[0], None
            return read_media_bytes(obj)[0], None
        filename = getattr(obj, "filename", None)
        if filename and os.path.isfile(filename):
            with open(filename, "rb") as handle:
                return handle.read(), None
        buffer = io.BytesIO()
        obj.save(buffer, format="JPEG")
        return buffer.getvalue(), None

    def deserialize(self, data: bytes | memoryview) -> torch.Tensor:
        return decode_image_tensor(data, "jpeg")
