"""Leaf serializers: turn one flattened sample leaf into bytes and back, byte-compatible with LitData.

Each serializer has a registry key (``name``) that is also the ``data_format`` recorded in ``index.json``,
unless :meth:`Serializer.serialize` returns a more specific name (``"no_header_numpy:10"``). A writer offers
the first leaf of each position to the registry in priority order and keeps the first serializer that
accepts it (:func:`select_serializer`); a reader maps each recorded name back with
:func:`serializer_for_format`.

Priority order and payload layouts (all integers unsigned 32-bit unless stated)::

    key               claims                              payload
    str               str                                 UTF-8
    bool              bool                                1 byte, 0x01 or 0x00
    int               int (not bool, not NumPy ints)      int64 little-endian, 8 bytes
    float             float, incl. np.float64             float64 little-endian, 8 bytes
    pil               PIL image that is not a JPEG file   LE width | LE height | LE len(mode) | mode ASCII
                                                          | img.tobytes()
    jpeg              PIL JpegImageFile                   JPEG file bytes
    bytes             bytes (not bytearray)               as-is
    no_header_numpy   np.ndarray, ndim == 1               C-order bytes; dtype index in the name
    numpy             np.ndarray, ndim > 1                LE dtype index | LE ndim | LE dims | C-order bytes
    no_header_tensor  torch.Tensor, ndim == 1             C-order bytes; dtype index in the name
    tensor            torch.Tensor, ndim != 1 (incl. 0-d) BE dtype index | BE rank | BE dims | LE bytes
    json              JsonLeaf (a list / dict of a dict   tagged binary, see :mod:`._json_serializer`
                      sample kept whole, LitData 0.2.76)
    pickle            anything else (0-d arrays, NumPy    pickle.dumps(obj), default protocol
                      scalars, None, bytearray, ...)

Array data is always little-endian; dtype indices come from :mod:`litstream.format._dtypes`.
Every decoded array, tensor and image owns a writable copy of its data.

Deliberate differences from LitData:

* A ``str`` naming an existing local file with a media extension (``.jpg``, ``.wav``, ``.nii.gz``, ...)
  is left to the media serializers, as in LitData (:mod:`._media_paths`); any other ``str`` is stored as
  ``str``. LitData pickles a string that names an existing file of another kind (``.txt``, ``.npy``).
* The media encodings (``text``, ``image``, ``audio``, ``jpeg_array``, ``tifffile``, ``file``, ...) and
  their typed wrappers live in the ``_media_*`` modules and join the registry through
  :mod:`._media_registry`. Image payloads decode with Pillow instead of torchvision, so pixel values
  may differ slightly from LitData's decode; the result is the same kind of tensor.
* NumPy arrays in big-endian byte order are converted to little-endian instead of being refused; arrays of
  object, string, bytes or void dtype are refused instead of being stored as unreadable bytes.
* Tensors that require grad, live on another device or carry a conjugate bit are accepted by
  ``no_header_tensor`` too (LitData refuses them there).
* Failures raise :class:`~litstream._core._errors.FormatError` (a ``ValueError``) instead of ``KeyError``,
  ``struct.error`` or ``AssertionError``.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np

from .._core._errors import FormatError
from . import _dtypes as dt
from ._json_serializer import JsonSerializer
from ._object_serializers import NoHeaderTensorSerializer, PickleSerializer, TensorSerializer
from ._serializer_base import Serializer, select_serializer
from .media._image_serializers import JpegSerializer, PilSerializer
from .media._paths import is_media_path

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy.typing as npt

__all__ = [
    "BoolSerializer",
    "BytesSerializer",
    "FloatSerializer",
    "IntSerializer",
    "JpegSerializer",
    "JsonSerializer",
    "NoHeaderNumpySerializer",
    "NoHeaderTensorSerializer",
    "NumpySerializer",
    "PickleSerializer",
    "PilSerializer",
    "Serializer",
    "StrSerializer",
    "TensorSerializer",
    "default_serializers",
    "select_serializer",
    "serializer_for_format",
]

_T = TypeVar("_T", int, float)


class StrSerializer(Serializer):
    """``str`` as UTF-8."""

    name = "str"

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, str) and not is_media_path(obj)

    def accepts(self, obj: object) -> bool:
        return isinstance(obj, str)

    def serialize(self, obj: str) -> tuple[bytes, str | None]:
        try:
            return obj.encode("utf-8"), None
        except UnicodeEncodeError as exc:
            raise FormatError(f"cannot encode string as UTF-8: {exc}") from exc

    def deserialize(self, data: bytes | memoryview) -> str:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"str payload is not valid UTF-8: {exc}") from exc


class BoolSerializer(Serializer):
    """``bool`` as one byte, ``0x01`` or ``0x00``; any non-zero byte decodes as ``True``."""

    name = "bool"
    fixed_size = 1

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, bool)

    def serialize(self, obj: bool) -> tuple[bytes, str | None]:
        return (b"\x01" if obj else b"\x00"), None

    def deserialize(self, data: bytes | memoryview) -> bool:
        if len(data) != 1:
            raise FormatError(f"bool payload must be 1 byte, got {len(data)}")
        return bool(data[0])


class _PackedScalar(Serializer, Generic[_T]):
    """A number packed by one ``struct`` format (``_format``) into ``fixed_size`` bytes: int and float."""

    _format: ClassVar[struct.Struct]

    def deserialize(self, data: bytes | memoryview) -> _T:
        if len(data) != self._format.size:
            raise FormatError(f"{self.name} payload must be {self._format.size} bytes, got {len(data)}")
        value: _T = self._format.unpack(data)[0]
        return value


class IntSerializer(_PackedScalar[int]):
    """Python ``int`` (not ``bool``) as int64 little-endian, 8 bytes; values outside int64 are refused."""

    name = "int"
    fixed_size = 8
    _format = struct.Struct("<q")

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, int) and not isinstance(obj, bool)

    def serialize(self, obj: int) -> tuple[bytes, str | None]:
        try:
            return self._format.pack(obj), None
        except struct.error as exc:
            raise FormatError(f"int {obj} does not fit in int64; store it as a str or with pickle") from exc


class FloatSerializer(_PackedScalar[float]):
    """Python ``float`` (including ``np.float64``) as IEEE float64 little-endian, 8 bytes."""

    name = "float"
    fixed_size = 8
    _format = struct.Struct("<d")

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, float)

    def serialize(self, obj: float) -> tuple[bytes, str | None]:
        return self._format.pack(obj), None


class BytesSerializer(Serializer):
    """``bytes`` stored as-is (``bytearray`` is pickled, as in LitData). Decodes to ``bytes``."""

    name = "bytes"

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, bytes)

    def serialize(self, obj: bytes) -> tuple[bytes, str | None]:
        return bytes(obj), None

    def deserialize(self, data: bytes | memoryview) -> bytes:
        return bytes(data)


class NoHeaderNumpySerializer(Serializer):
    """1-D NumPy arrays as raw little-endian bytes; the dtype index (table D2) travels in the name.

    Args:
        dtype: The dtype to decode to; set by :meth:`setup` from ``"no_header_numpy:<index>"``.
    """

    name = "no_header_numpy"

    def __init__(self, dtype: np.dtype[Any] | None = None) -> None:
        self.dtype = dtype

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, np.ndarray) and obj.ndim == 1

    def serialize(self, obj: npt.NDArray[Any]) -> tuple[bytes, str | None]:
        index = dt.numpy_dtype_index(obj.dtype)
        return dt.array_to_bytes(obj), f"{self.name}:{index}"

    def deserialize(self, data: bytes | memoryview) -> npt.NDArray[Any]:
        if self.dtype is None:
            raise FormatError("no_header_numpy needs setup('no_header_numpy:<index>') before deserialize")
        return dt.array_from_bytes(data, self.dtype)

    def setup(self, data_format: str) -> NoHeaderNumpySerializer:
        return NoHeaderNumpySerializer(dt.numpy_dtype_from_index(dt.parse_dtype_suffix(data_format)))


class NumpySerializer(Serializer):
    """NumPy arrays with ndim > 1, with a header (table N1, all uint32 little-endian).

    Layout: dtype index (table D2) | ndim R | R dims | C-order little-endian data.
    """

    name = "numpy"

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, np.ndarray) and obj.ndim > 1

    def accepts(self, obj: object) -> bool:
        return isinstance(obj, np.ndarray)

    def serialize(self, obj: npt.NDArray[Any]) -> tuple[bytes, str | None]:
        index = dt.numpy_dtype_index(obj.dtype)
        return dt.pack_header(index, obj.shape, "<") + dt.array_to_bytes(obj), None

    def deserialize(self, data: bytes | memoryview) -> npt.NDArray[Any]:
        index, shape, payload = dt.unpack_header(data, "<")
        return dt.array_from_bytes(payload, dt.numpy_dtype_from_index(index), shape)


_DEFAULT_ORDER: tuple[type[Serializer], ...] = (
    StrSerializer, BoolSerializer, IntSerializer, FloatSerializer, PilSerializer, JpegSerializer,
    BytesSerializer, NoHeaderNumpySerializer, NumpySerializer, NoHeaderTensorSerializer, TensorSerializer,
    JsonSerializer, PickleSerializer,
)  # fmt: skip


def default_serializers(*, media: bool = True) -> dict[str, Serializer]:
    """Return a new registry of the built-in serializers, keyed by name, in priority order.

    Args:
        media: With the media encodings (``media/_registry.py``, keys ``MEDIA_KEYS``); ``False``: the core
            ones only, for a reader none of whose formats names a media key (importing the media modules
            costs milliseconds in every new process). Default ``True``.
    """
    core = {serializer.name: serializer for serializer in (cls() for cls in _DEFAULT_ORDER)}
    if not media:
        return core
    from .media._registry import with_media_serializers  # typed media wrappers (LitData's litdata.types)

    return with_media_serializers(core, fresh=default_serializers)


def serializer_for_format(data_format: str, registry: Mapping[str, Serializer]) -> Serializer:
    """Return the serializer that decodes leaves recorded as ``data_format``, already set up for it.

    ``"name"`` resolves to ``registry["name"]``; ``"a:b"`` resolves to ``b`` when ``b`` is a key, else
    to ``a`` (LitData's rule). The result is ``serializer.setup(data_format)``; the registry is not modified.

    Raises:
        FormatError: the format names no registered serializer, or its suffix is invalid for it.
    """
    head, colon, tail = data_format.partition(":")
    key = tail if colon and tail in registry else head
    serializer = registry.get(key)
    if serializer is None:
        raise FormatError(f"unknown data format {data_format!r}; known serializers: {', '.join(registry)}")
    configured = serializer.setup(data_format)
    return serializer if configured is None else configured  # LitData's setup() configures in place
