"""The image wrapper classes (``Image``, ``Jpeg``, ``JpegArray``, ``Pil``, ``Tiff``): values only.

Their encodings live in :mod:`._media_image` (``image``, ``jpeg_array``, ``tifffile``) and
:mod:`._image_serializers` (``pil``, ``jpeg``); both import these classes from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._core._errors import FormatError
from ._serializer_base import loaded_class
from .media._base import MediaRef

__all__ = ["IMAGE_EXTENSIONS", "TIFF_EXTENSIONS", "Image", "Jpeg", "JpegArray", "Pil", "Tiff", "is_jpeg_list"]

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp", "bmp", "gif")
TIFF_EXTENSIONS = ("tif", "tiff")


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<UNSET>"


_UNSET: Any = _Unset()


def _exclusive(owner: str, quality: int | None, max_quality: int | None) -> None:
    if quality is not None and max_quality is not None:
        raise FormatError(
            f"{owner}(quality={quality!r}, max_quality={max_quality!r}): set only one; quality= re-encodes at "
            "that JPEG quality, max_quality= caps it (JPEG bytes already at or below the cap are kept)"
        )


@dataclass
class Image(MediaRef):
    """An image sample; streams back as a ``torch.uint8`` tensor ``(3, H, W)`` (LitData's ``Image``).

    Args:
        path: A local image file (stored as is unless a re-encode is asked for).
        bytes: An encoded image file.
        array: Pixels (NumPy array or tensor, ``(H, W)`` or ``(H, W, C)``), encoded as ``format``.
        image: A PIL image, encoded in its own format (``format`` overrides).
        mode: Convert to this PIL mode first (forces a re-encode).
        format: The format to encode to (``"png"``, ``"jpeg"``, ...); default PNG for arrays.
        quality: Re-encode as JPEG at this quality (1-100).
        max_quality: Cap: keep JPEGs at or below it, encode anything else as JPEG at it.

    Raises:
        FormatError: both ``quality`` and ``max_quality`` are set.
    """

    array: Any = None
    image: Any = None
    mode: str | None = None
    format: str | None = None
    quality: int | None = None
    max_quality: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _exclusive("Image", self.quality, self.max_quality)


@dataclass
class Jpeg(MediaRef):
    """A JPEG sample; streams back as a ``torch.uint8`` tensor ``(3, H, W)`` (LitData's ``Jpeg``).

    Arguments as :class:`Image` (without ``format``); ``max_quality`` defaults to 95 unless
    ``quality`` is given, so a PNG, raw pixels or a JPEG above quality 95 are encoded at 95.
    """

    array: Any = None
    image: Any = None
    mode: str | None = None
    quality: int | None = None
    max_quality: Any = _UNSET

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_quality is _UNSET:
            self.max_quality = None if self.quality is not None else 95
        _exclusive("Jpeg", self.quality, self.max_quality)


@dataclass
class JpegArray:
    """A list of JPEGs stored as one leaf; streams back as a list of uint8 tensors (LitData's ``JpegArray``).

    Args:
        images: ``Jpeg``/``Image`` wrappers, PIL images, paths or encoded bytes (non-empty).
        quality: Applied to child ``Jpeg`` wrappers whose quality differs.
        max_quality: Cap (default 95 unless ``quality``), applied to child ``Jpeg`` wrappers without ``quality``.
    """

    images: list[Any] = field(default_factory=list)
    quality: int | None = None
    max_quality: Any = _UNSET

    def __post_init__(self) -> None:
        if self.max_quality is _UNSET:
            self.max_quality = None if self.quality is not None else 95
        _exclusive("JpegArray", self.quality, self.max_quality)


@dataclass
class Pil(MediaRef):
    """A PIL image stored as raw pixels; streams back as a ``PIL.Image.Image`` (LitData's ``Pil``).

    Args:
        path / bytes: An image file to open with Pillow.
        array: Pixels, converted with ``Image.fromarray``.
        image: A PIL image.
        mode: Convert to this mode before storing.
    """

    array: Any = None
    image: Any = None
    mode: str | None = None


@dataclass
class Tiff(MediaRef):
    """A TIFF sample; streams back as a NumPy array read by ``tifffile`` (LitData's ``Tiff``).

    Args:
        path / bytes: A TIFF file, stored as is.
        array: An array written with ``tifffile.imwrite``.
        image: Anything ``np.asarray`` turns into such an array (a PIL image).
    """

    array: Any = None
    image: Any = None


def is_jpeg_list(obj: object) -> bool:
    """Whether ``obj`` is a non-empty ``list``/``tuple`` of ``JpegImageFile`` (one ``jpeg_array`` leaf)."""
    if type(obj) is not list and type(obj) is not tuple:
        return False
    jpeg_type = loaded_class("PIL.JpegImagePlugin", "JpegImageFile")
    return jpeg_type is not None and len(obj) > 0 and all(isinstance(x, jpeg_type) for x in obj)
