"""Adds the media encodings to the serializer registry, in LitData 0.2.76's priority order.

LitData offers a leaf to its serializers in this order (the first that accepts it wins)::

    str text bool int float video audio image nifti mesh pdf graph tifffile file
    pil jpeg jpeg_array bytes no_header_numpy numpy no_header_tensor tensor json pickle

:func:`with_media_serializers` inserts the media keys into a registry of the core encodings at those
places, swaps ``tensor`` / ``no_header_tensor`` for versions that also take ``Tensor`` wrappers, puts
``litdata_types`` (LitData's own wrapper objects, written as litstream's; never recorded) just before
``pickle``, and appends ``tiff`` (LitData's name for ``Tiff`` wrappers, read here, never written).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._serializer_base import Serializer

__all__ = ["MEDIA_KEYS", "media_serializers", "with_media_serializers"]

# The registry keys that with_media_serializers adds or replaces (tests/format/test_serializers.py checks the list):
# a format naming none of them decodes the same with the core registry alone.
MEDIA_KEYS = frozenset({
    "text", "video", "audio", "image", "nifti", "mesh", "pdf", "graph", "tifffile", "file", "jpeg_array",
    "tensor", "no_header_tensor", "litdata_types", "tiff",
})  # fmt: skip


def media_serializers() -> dict[str, Serializer]:
    """New instances of the media encodings, keyed by registry name (no heavy package is imported)."""
    from ._audio import AudioSerializer
    from ._graph import GraphSerializer
    from ._image import ImageSerializer, JpegArraySerializer, TiffSerializer
    from ._mesh import MeshSerializer, PdfSerializer
    from ._nifti import NiftiSerializer
    from ._tensor import NoHeaderTensorRefSerializer, TensorRefSerializer
    from ._text import FileSerializer, TextSerializer
    from ._video import VideoSerializer

    found: list[Serializer] = [
        TextSerializer(), VideoSerializer(), AudioSerializer(), ImageSerializer(), NiftiSerializer(),
        MeshSerializer(), PdfSerializer(), GraphSerializer(), TiffSerializer(), FileSerializer(),
        JpegArraySerializer(), NoHeaderTensorRefSerializer(), TensorRefSerializer(),
    ]  # fmt: skip
    return {serializer.name: serializer for serializer in found}


_AFTER = {
    "str": ("text",),
    "float": ("video", "audio", "image", "nifti", "mesh", "pdf", "graph", "tifffile", "file"),
    "jpeg": ("jpeg_array",),
}


def with_media_serializers(
    core: dict[str, Serializer], *, fresh: Callable[[], dict[str, Serializer]]
) -> dict[str, Serializer]:
    """``core`` (a registry of the core encodings, in order) with the media encodings inserted.

    Args:
        core: The core encodings, keyed by name, in priority order.
        fresh: Makes a new complete default registry (``_serializers.default_serializers``); LitData's own
            wrapper classes are written through one (passed in, so this module does not import the registry).
    """
    media = media_serializers()
    registry: dict[str, Serializer] = {}
    for key, serializer in core.items():
        if key == "pickle":  # LitData's own wrapper classes, written as litstream's twins rather than pickled
            from ._foreign import LitdataWrapperSerializer

            registry["litdata_types"] = LitdataWrapperSerializer(fresh)
        registry[key] = media.get(key, serializer) if key in ("tensor", "no_header_tensor") else serializer
        for extra in _AFTER.get(key, ()):
            if extra in media:
                registry[extra] = media[extra]
    if "tifffile" in registry:
        from ._image import TiffSerializer

        registry["tiff"] = TiffSerializer()
    return registry
