"""The tensor and pickle encodings (``no_header_tensor``, ``tensor``, ``pickle``; layouts in :mod:`._serializers`).

Apart from the other core encodings because the media encodings build on them (``Tensor`` and ``Graph``
wrappers, :mod:`._media_tensor`, :mod:`._media_graph`); :mod:`._serializers` registers them.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

from .._core._errors import FormatError
from . import _dtypes as dt
from ._serializer_base import Serializer, loaded_class

if TYPE_CHECKING:
    import torch

__all__ = ["NoHeaderTensorSerializer", "PickleSerializer", "TensorSerializer"]


def _is_tensor(obj: object) -> bool:
    """Whether ``obj`` is a ``torch.Tensor``, without importing torch (no tensor exists before it is loaded)."""
    tensor_type = loaded_class("torch", "Tensor")
    return tensor_type is not None and isinstance(obj, tensor_type)


class NoHeaderTensorSerializer(Serializer):
    """1-D tensors as raw little-endian bytes; the dtype index (table D1) travels in the name.

    Args:
        dtype: The dtype to decode to; set by :meth:`setup` from ``"no_header_tensor:<index>"``.
    """

    name = "no_header_tensor"

    # Mirrors NoHeaderNumpySerializer for torch: the same layout through torch's dtype table and conversions.
    def __init__(self, dtype: torch.dtype | None = None) -> None:
        self.dtype = dtype

    def can_serialize(self, obj: object) -> bool:
        return _is_tensor(obj) and obj.ndim == 1  # type: ignore[attr-defined]

    def serialize(self, obj: torch.Tensor) -> tuple[bytes, str | None]:
        index = dt.torch_dtype_index(obj.dtype)
        return dt.tensor_to_bytes(obj), f"{self.name}:{index}"

    def deserialize(self, data: bytes | memoryview) -> torch.Tensor:
        if self.dtype is None:
            raise FormatError("no_header_tensor needs setup('no_header_tensor:<index>') before deserialize")
        return dt.tensor_from_bytes(data, self.dtype)

    def setup(self, data_format: str) -> NoHeaderTensorSerializer:
        return NoHeaderTensorSerializer(dt.torch_dtype_from_index(dt.parse_dtype_suffix(data_format)))


class TensorSerializer(Serializer):
    """Tensors with ndim != 1 (including 0-d), with a header (table T1).

    Layout: uint32 BIG-endian dtype index (table D1) | BE rank R | R BE dims | C-order little-endian data.
    """

    name = "tensor"

    def can_serialize(self, obj: object) -> bool:
        return _is_tensor(obj) and obj.ndim != 1  # type: ignore[attr-defined]

    def accepts(self, obj: object) -> bool:
        return _is_tensor(obj)

    def serialize(self, obj: torch.Tensor) -> tuple[bytes, str | None]:
        index = dt.torch_dtype_index(obj.dtype)
        return dt.pack_header(index, tuple(obj.shape), ">") + dt.tensor_to_bytes(obj), None

    def deserialize(self, data: bytes | memoryview) -> torch.Tensor:
        index, shape, payload = dt.unpack_header(data, ">")
        return dt.tensor_from_bytes(payload, dt.torch_dtype_from_index(index), shape)


class PickleSerializer(Serializer):
    """Anything, as ``pickle.dumps(obj)`` with the default protocol. Accepts every object."""

    name = "pickle"

    def can_serialize(self, obj: object) -> bool:
        return True

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        try:
            return pickle.dumps(obj), None
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise FormatError(f"cannot pickle an object of type {type(obj).__qualname__}: {exc}") from exc

    def deserialize(self, data: bytes | memoryview) -> Any:
        try:
            return pickle.loads(data)
        except (pickle.UnpicklingError, EOFError) as exc:
            raise FormatError(f"invalid pickle payload: {exc}") from exc
