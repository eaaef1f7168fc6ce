"""Image encode / decode helpers behind the image wrappers (Pillow, imported when called).

Rules, as LitData 0.2.76 applies them:

* **Decoding** image bytes (``image``, ``jpeg``, ``jpeg_array``) gives a ``torch.uint8`` tensor of
  shape ``(3, height, width)``, RGB, contiguous. A JPEG carrying EXIF is turned upright first;
  other files are not rotated. LitData decodes with torchvision; litstream uses Pillow (both use
  libjpeg-turbo / libpng, so pixels normally agree; the alpha channel is dropped in both).
* **Arrays** become PIL images: 3-D and larger arrays as ``uint8`` (floats whose maximum is ``<= 1``
  are scaled by 255 first, other dtypes cast with a warning); 2-D arrays keep a Pillow-compatible
  dtype or are narrowed to one of the same kind (warning).
* **Quality**: ``quality=q`` re-encodes as JPEG at ``q``. ``max_quality=m`` is a cap: JPEG bytes
  whose estimated quality (from the luminance quantization table, IJG scale) is ``<= m``, or cannot
  be estimated, are kept unchanged; anything else is encoded as JPEG at ``m``.
"""

from __future__ import annotations

import functools
import io
import os
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._core._errors import FormatError
from ._base import read_media_bytes, require

if TYPE_CHECKING:
    import torch
    from PIL import Image as PILImage

__all__ = [
    "decode_image_tensor",
    "encode_image_ref",
    "estimate_jpeg_quality",
    "keep_jpeg_under",
    "pil_from_array",
    "save_pil",
]

# The IJG example luminance table (JPEG standard, Annex K.1), natural order.
_STD_LUMA = (
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
)  # fmt: skip


def _scaled_table(quality: int) -> tuple[int, ...]:
    scale = 5000 // quality if quality < 50 else 200 - 2 * quality
    return tuple(min(255, max(1, (c * scale + 50) // 100)) for c in _STD_LUMA)


@functools.cache
def _tables() -> tuple[tuple[tuple[int, ...], ...], dict[tuple[int, ...], int]]:
    """The IJG luminance table of every quality 1-100, and the quality of each table."""
    tables = tuple(_scaled_table(q) for q in range(1, 101))
    return tables, {table: q for q, table in enumerate(tables, start=1)}


_PIL_ARRAY_DTYPES = tuple(
    np.dtype(d)
    for d in ("|b1", "|u1", "<u2", ">u2", "<i2", ">i2", "<u4", ">u4", "<i4", ">i4", "<f4", ">f4", "<f8", ">f8")
)  # fmt: skip


def _pil() -> Any:
    return require("PIL.Image", "image", "encoding or decoding images")


def _open(data: bytes, kind: str = "image") -> PILImage.Image:
    pil = _pil()
    try:
        image: PILImage.Image = pil.open(io.BytesIO(data))
        image.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise FormatError(f"invalid {kind} payload ({len(data)} bytes): {exc}") from exc
    return image


def estimate_jpeg_quality(data: bytes) -> int | None:
    """The IJG quality (1-100) whose luminance table is closest (L1) to the JPEG's table 0, or ``None``
    when ``data`` is not a JPEG or has no quantization table."""
    if data[:2] != b"\xff\xd8":
        return None
    pil = _pil()
    try:
        tables = pil.open(io.BytesIO(data)).quantization or {}
    except (OSError, SyntaxError, ValueError, AttributeError):
        return None
    table = tables.get(0) if 0 in tables else next(iter(tables.values()), None)
    if table is None or len(table) != 64:
        return None
    key = tuple(int(v) for v in table)
    tables, quality_of = _tables()
    exact = quality_of.get(key)
    if exact is not None:
        return exact
    errors = [sum(abs(a - b) for a, b in zip(key, candidate, strict=True)) for candidate in tables]
    return errors.index(min(errors)) + 1


def keep_jpeg_under(data: bytes, max_quality: int) -> bool:
    """Whether ``data`` is a JPEG to keep as is under the cap ``max_quality`` (unknown quality: keep)."""
    if data[:2] != b"\xff\xd8":
        return False
    estimated = estimate_jpeg_quality(data)
    return estimated is None or estimated <= max_quality


def _as_numpy(array: Any) -> np.ndarray[Any, Any]:
    detach = getattr(array, "detach", None)
    if detach is not None:  # a torch tensor
        return np.asarray(detach().cpu().numpy())
    return np.asarray(array)


def pil_from_array(array: Any) -> PILImage.Image:
    """``Image.fromarray`` after LitData's dtype rules (module docstring).

    Raises:
        FormatError: the dtype cannot be narrowed to one Pillow stores.
    """
    values = _as_numpy(array)
    dtype = values.dtype
    if values.ndim >= 3:
        if np.issubdtype(dtype, np.floating) and float(np.nanmax(values)) <= 1.0:
            values = np.clip(values, 0.0, 1.0) * 255.0
        elif dtype != np.uint8:
            warnings.warn(f"Downcasting array dtype {dtype} to uint8 for image encoding.", UserWarning, stacklevel=3)
        values = values.astype(np.uint8)
    elif dtype not in _PIL_ARRAY_DTYPES:
        order = dtype.byteorder if dtype.byteorder != "=" else ("<" if np.little_endian else ">")
        size = dtype.itemsize
        while size >= 1:
            target = np.dtype(f"{order}{dtype.kind}{size}") if dtype.kind in "biuf" else None
            if target is not None and target in _PIL_ARRAY_DTYPES:
                warnings.warn(f"Downcasting array dtype {dtype} to {target} for image encoding.", UserWarning, 3)
                values = values.astype(target)
                break
            size //= 2
        else:
            raise FormatError(f"an image array of dtype {dtype} cannot be stored; use uint8, int16/32 or float32/64")
    try:
        image: PILImage.Image = _pil().fromarray(values)
    except (TypeError, ValueError) as exc:
        raise FormatError(f"an array of shape {values.shape} and dtype {values.dtype} is not an image: {exc}") from exc
    return image


def save_pil(image: PILImage.Image, fmt: str, quality: int | None = None, mode: str | None = None) -> tuple[bytes, str]:
    """Encode ``image`` as ``fmt`` (``"jpg"``/``"jpeg"`` mean JPEG); returns the bytes and the extension.

    ``mode`` converts first; JPEG needs ``RGB`` or ``L`` (others are converted to ``RGB``); ``quality``
    applies to JPEG and WebP only.
    """
    if mode and image.mode != mode:
        image = image.convert(mode)
    name = "JPEG" if fmt.upper() in {"JPG", "JPEG"} else fmt.upper()
    if name == "JPEG" and image.mode not in {"RGB", "L"}:
        image = image.convert("RGB")
    buffer = io.BytesIO()
    options: dict[str, Any] = {"format": name}
    if quality is not None and name in {"JPEG", "WEBP"}:
        options["quality"] = int(quality)
    try:
        image.save(buffer, **options)
    except (OSError, KeyError, ValueError) as exc:
        raise FormatError(f"cannot encode a {image.mode} image as {name}: {exc}") from exc
    return buffer.getvalue(), ("jpg" if name == "JPEG" else name.lower())


def _jpeg_file_bytes(image: Any) -> bytes | None:
    filename = getattr(image, "filename", None)
    if filename and str(filename).lower().endswith((".jpg", ".jpeg")) and os.path.isfile(filename):
        with open(filename, "rb") as handle:
            return handle.read()
    return None


def _native_format(image: Any) -> str:
    fmt = getattr(image, "format", None)
    if fmt:
        return str(fmt)
    return "PNG" if image.mode in {"1", "L", "LA", "RGB", "RGBA"} else "TIFF"


def encode_image_ref(item: Any, default_format: str) -> tuple[bytes, str]:
    """Encode an ``Image`` / ``Jpeg`` wrapper from its ``image``, ``array``, ``path`` or ``bytes``.

    Returns the bytes and their extension. Unchanged bytes are returned when nothing asks for a
    re-encode (no ``quality``, ``max_quality``, ``mode`` or ``format``) or under the quality cap.
    """
    array = getattr(item, "array", None)
    image = getattr(item, "image", None)
    mode = getattr(item, "mode", None)
    quality = getattr(item, "quality", None)
    max_quality = getattr(item, "max_quality", None)
    explicit = getattr(item, "format", None)
    encode_quality = quality if quality is not None else max_quality

    def encode(pil: Any, fmt: str) -> tuple[bytes, str]:
        return save_pil(pil, "JPEG" if max_quality is not None else fmt, encode_quality, mode)

    if image is not None or array is not None:
        if max_quality is not None and image is not None:
            original = _jpeg_file_bytes(image)
            if original is not None and keep_jpeg_under(original, int(max_quality)):
                return original, "jpg"
        pil = image if image is not None else pil_from_array(array)
        return encode(pil, explicit or (_native_format(pil) if image is not None else default_format))
    data, ext = read_media_bytes(item)
    if quality is None and max_quality is None and mode is None and explicit is None:
        return data, ext or default_format.lower()
    if max_quality is not None and keep_jpeg_under(data, int(max_quality)):
        return data, ext or "jpg"
    return encode(_open(data), explicit or ext or default_format)


def _is_jpeg_with_exif(image: Any) -> bool:
    return getattr(image, "format", None) == "JPEG" and "exif" in getattr(image, "info", {})


def decode_image_tensor(data: bytes | memoryview, kind: str = "image") -> torch.Tensor:
    """Image bytes → ``torch.uint8`` tensor ``(3, H, W)``, RGB (module docstring).

    Raises:
        FormatError: the bytes are not an image Pillow can read (the message names ``kind``).
    """
    import torch

    image = _open(bytes(data), kind)
    if _is_jpeg_with_exif(image):
        upright = require("PIL.ImageOps", "image", "decoding images").exif_transpose(image)
        image = upright if upright is not None else image
    pixels = np.asarray(image.convert("RGB"), dtype=np.uint8)
    return torch.from_numpy(np.ascontiguousarray(pixels.transpose(2, 0, 1)))
