"""Image leaf encodings with LitData's names: ``pil`` (raw pixels) and ``jpeg`` (re-encoded JPEG).

Pillow is imported only when an image is decoded; an image is recognised only if Pillow is
already loaded, so encoding other samples never imports it.
"""

from __future__ import annotations

import io
import struct
from typing import TYPE_CHECKING

import numpy as np

from .._errors import FormatError
from ._serializer_base import Serializer, loaded_class

if TYPE_CHECKING:
    import torch
    from PIL import Image as PILImage

__all__ = ["JpegSerializer", "PilSerializer"]


class PilSerializer(Serializer):
    """Uncompressed PIL images (any ``PIL.Image.Image`` except ``JpegImageFile``).

    Payload: uint32 LE width, uint32 LE height, uint32 LE ``len(mode)``, the mode in ASCII, then
    ``img.tobytes()``. Decodes to a new image via ``Image.frombytes``; a ``P`` image's palette is not kept.
    """

    name = "pil"
    _header = struct.Struct("<3I")

    def can_serialize(self, obj: object) -> bool:
        image_type = loaded_class("PIL.Image", "Image")
        jpeg_type = loaded_class("PIL.JpegImagePlugin", "JpegImageFile")
        return (
            image_type is not None
            and isinstance(obj, image_type)
            and not (jpeg_type is not None and isinstance(obj, jpeg_type))
        )

    def serialize(self, obj: PILImage.Image) -> tuple[bytes, str | None]:
        mode = obj.mode.encode("ascii")
        width, height = obj.size
        return b"".join((self._header.pack(width, height, len(mode)), mode, obj.tobytes())), None

    def deserialize(self, data: bytes | memoryview) -> PILImage.Image:
        from PIL import Image

        try:
            width, height, mode_length = self._header.unpack_from(data, 0)
        except struct.error as exc:
            raise FormatError(f"pil payload too short ({len(data)} bytes)") from exc
        start = self._header.size + mode_length
        try:
            mode = bytes(data[self._header.size : start]).decode("ascii")
            return Image.frombytes(mode, (width, height), bytes(data[start:]))
        except ValueError as exc:
            raise FormatError(f"invalid pil payload: {exc}") from exc


class JpegSerializer(Serializer):
    """JPEG images (``PIL.JpegImagePlugin.JpegImageFile``).

    The payload is the image re-encoded by Pillow's ``save(format="JPEG")`` with default settings
    (quality 75; EXIF and ICC profile dropped). Decodes to a ``torch.uint8`` tensor of shape
    ``(3, height, width)`` (RGB, channels first, EXIF orientation applied), contiguous and writable.
    """

    name = "jpeg"

    def can_serialize(self, obj: object) -> bool:
        jpeg_type = loaded_class("PIL.JpegImagePlugin", "JpegImageFile")
        return jpeg_type is not None and isinstance(obj, jpeg_type)

    def serialize(self, obj: PILImage.Image) -> tuple[bytes, str | None]:
        buffer = io.BytesIO()
        obj.save(buffer, format="JPEG")
        return buffer.getvalue(), None

    def deserialize(self, data: bytes | memoryview) -> torch.Tensor:
        import torch
        from PIL import Image, ImageOps, UnidentifiedImageError

        try:
            image = Image.open(io.BytesIO(bytes(data)))
            image.load()
        except (UnidentifiedImageError, OSError, SyntaxError) as exc:
            raise FormatError(f"invalid jpeg payload: {exc}") from exc
        upright = ImageOps.exif_transpose(image)
        pixels = np.array((upright if upright is not None else image).convert("RGB"), dtype=np.uint8)
        return torch.from_numpy(np.ascontiguousarray(pixels.transpose(2, 0, 1)))
