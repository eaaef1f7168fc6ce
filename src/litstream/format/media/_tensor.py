"""The ``Tensor`` wrapper and the ``tensor`` / ``no_header_tensor`` encodings that accept it.

``Tensor(array=a)`` stores ``a`` (a ``torch.Tensor``, or anything ``torch.as_tensor`` takes, cast to
``dtype`` when given) exactly as a bare tensor: 1-D as ``"no_header_tensor:<dtype index>"``, any
other rank as ``"tensor"`` (layouts in :mod:`._serializers`). ``Tensor(path=..., dtype=d)`` and
``Tensor(bytes=..., dtype=d)`` store raw little-endian values of dtype ``d`` as a 1-D
``no_header_tensor``. Both decode to ``torch.Tensor``, as in LitData 0.2.76.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._core._errors import FormatError
from .._object_serializers import NoHeaderTensorSerializer, TensorSerializer
from ._base import MediaRef, read_media_bytes

__all__ = ["NoHeaderTensorRefSerializer", "Tensor", "TensorRefSerializer", "as_torch_tensor"]


@dataclass
class Tensor(MediaRef):
    """A tensor sample (LitData's ``litdata.types.Tensor``); streams back as ``torch.Tensor``.

    Args:
        path: A local file of raw values (needs ``dtype``).
        bytes: Raw values (needs ``dtype``).
        array: A ``torch.Tensor`` or NumPy array (1-D: no header, token layout; else with a header).
        dtype: A ``torch.dtype`` to cast ``array`` to, or the dtype of the raw ``path``/``bytes`` values.
    """

    array: Any = None
    dtype: Any = None

    @property
    def shape(self) -> tuple[int, ...]:
        """``array``'s shape (``TokensLoader`` reads ``shape[0]``).

        Raises:
            AttributeError: no ``array`` was given.
        """
        if self.array is None:
            raise AttributeError("Tensor.shape needs array=")
        return tuple(self.array.shape)


def as_torch_tensor(item: Any) -> Any:
    """The ``torch.Tensor`` a ``Tensor`` wrapper (or array-like) stands for.

    Raises:
        FormatError: ``path``/``bytes`` without ``dtype``, or values that do not fill whole ``dtype`` items.
    """
    import torch

    if isinstance(item, Tensor):
        if item.array is not None:
            tensor = item.array if isinstance(item.array, torch.Tensor) else torch.as_tensor(item.array)
            return tensor.to(item.dtype) if item.dtype is not None else tensor
        if item.dtype is None:
            raise FormatError("Tensor(path=...) / Tensor(bytes=...) needs dtype=, e.g. dtype=torch.int32")
        data, _ = read_media_bytes(item)
        itemsize = torch.empty(0, dtype=item.dtype).element_size()
        if len(data) % itemsize:
            raise FormatError(f"Tensor raw data of {len(data)} bytes is not a whole number of {item.dtype} values")
        return torch.frombuffer(bytearray(data), dtype=item.dtype) if data else torch.empty(0, dtype=item.dtype)
    if isinstance(item, torch.Tensor):
        return item
    return torch.as_tensor(item)


def _rank(item: Tensor) -> int | None:
    if item.array is not None:
        return len(item.array.shape)
    return 1 if (item.path is not None or item.bytes is not None) and item.dtype is not None else None


class TensorRefSerializer(TensorSerializer):
    """``tensor`` that also stores ``Tensor`` wrappers whose array is not 1-D."""

    def can_serialize(self, obj: object) -> bool:
        if isinstance(obj, Tensor):  # one that no_header_tensor left: not 1-D, or raw data without dtype
            return _rank(obj) != 1  # (LitData pickles the latter; serialize refuses it, naming dtype=)
        return super().can_serialize(obj)

    def accepts(self, obj: object) -> bool:
        return (isinstance(obj, Tensor) and obj.array is not None) or super().accepts(obj)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        return super().serialize(as_torch_tensor(obj) if isinstance(obj, Tensor) else obj)


class NoHeaderTensorRefSerializer(NoHeaderTensorSerializer):
    """``no_header_tensor`` that also stores 1-D ``Tensor`` wrappers and raw ``path``/``bytes`` ones."""

    def can_serialize(self, obj: object) -> bool:
        if isinstance(obj, Tensor):
            return _rank(obj) == 1
        return super().can_serialize(obj)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        return super().serialize(as_torch_tensor(obj) if isinstance(obj, Tensor) else obj)

    def setup(self, data_format: str) -> NoHeaderTensorSerializer:
        configured = super().setup(data_format)
        return NoHeaderTensorRefSerializer(configured.dtype)
