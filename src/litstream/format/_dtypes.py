"""dtype index tables and raw element codecs behind the ``numpy`` and ``tensor`` leaf encodings.

The indices are part of the on-disk format (LitData ``constants.py``) and must never change.

Table D1 (torch). Reading maps every index to a dtype; several dtypes have two indices (an alias pair).
LitData writes the *later* index of each pair, and so do we, to stay byte-identical::

    index  dtype        written     index  dtype        written
      0    float32                    11   uint8          yes
      1    float32        yes         12   int8           yes
      2    float64                    13   int16
      3    float64        yes         14   int16          yes
      4    complex64                  15   int32
      5    complex64      yes         16   int32          yes
      6    complex128                 17   int64
      7    complex128     yes         18   int64          yes
      8    float16                    19   bool           yes
      9    float16        yes         20   uint16         yes
     10    bfloat16       never written (NumPy cannot export it); readable

Table D2 (NumPy), one index per dtype, all little-endian::

     0 int8    1 int16    2 int32      3 int64       4 uint8     5 uint16    6 uint32
     7 uint64  8 float16  9 float32   10 float64    11 complex64 12 complex128  13 bool

LitData also lists 14 object, 15 bytes, 16 str and 17 void; arrays of those cannot be stored as raw bytes in
a readable way, so litstream rejects them when writing and when reading.
"""

from __future__ import annotations

import functools
import math
import struct
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core._errors import FormatError

if TYPE_CHECKING:
    import numpy.typing as npt
    import torch

__all__ = [
    "array_from_bytes",
    "array_to_bytes",
    "numpy_dtype_from_index",
    "numpy_dtype_index",
    "pack_header",
    "parse_dtype_suffix",
    "tensor_from_bytes",
    "tensor_to_bytes",
    "torch_dtype_from_index",
    "torch_dtype_index",
    "torch_dtype_itemsize",
    "unpack_header",
]

# Table D1 by torch attribute name; torch itself is imported only when a tensor is read or written
# (``import litstream`` stays torch-free), through the two cached tables below.
_TORCH_NAMES: tuple[str, ...] = (
    "float32", "float32", "float64", "float64", "complex64", "complex64", "complex128", "complex128",
    "float16", "float16", "bfloat16", "uint8", "int8", "int16", "int16", "int32", "int32", "int64", "int64",
    "bool", "uint16",
)  # fmt: skip
# Element sizes in bytes, index by index (token layouts need them without torch).
_TORCH_ITEMSIZES: tuple[int, ...] = (4, 4, 8, 8, 8, 8, 16, 16, 2, 2, 2, 1, 1, 2, 2, 4, 4, 8, 8, 1, 2)
# The "written" column of D1; bfloat16 is deliberately absent.
_TORCH_WRITTEN_NAMES: dict[str, int] = {
    "float32": 1, "float64": 3, "complex64": 5, "complex128": 7, "float16": 9, "uint8": 11, "int8": 12,
    "int16": 14, "int32": 16, "int64": 18, "bool": 19, "uint16": 20,
}  # fmt: skip


@functools.cache
def _torch_by_index() -> tuple[torch.dtype, ...]:
    import torch

    return tuple(getattr(torch, name) for name in _TORCH_NAMES)


@functools.cache
def _torch_written() -> dict[torch.dtype, int]:
    import torch

    return {getattr(torch, name): index for name, index in _TORCH_WRITTEN_NAMES.items()}


_NUMPY_BY_INDEX: tuple[np.dtype[Any], ...] = tuple(
    np.dtype(code).newbyteorder("<")
    for code in ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16", "?")
)
_NUMPY_INDEX: dict[str, int] = {dtype.str: index for index, dtype in enumerate(_NUMPY_BY_INDEX)}


def _torch_names() -> str:
    return ", ".join(_TORCH_WRITTEN_NAMES)


def _numpy_names() -> str:
    return ", ".join(dtype.name for dtype in _NUMPY_BY_INDEX)


def torch_dtype_index(dtype: torch.dtype) -> int:
    """Return the D1 index LitData writes for ``dtype``.

    Args:
        dtype: The tensor's dtype.

    Returns:
        The "written" index of table D1 (for example 1 for float32, 18 for int64).

    Raises:
        FormatError: ``dtype`` cannot be written (bfloat16, uint32, uint64, float8, ...).
    """
    try:
        return _torch_written()[dtype]
    except KeyError:
        raise FormatError(f"cannot serialize a tensor of dtype {dtype}; supported dtypes: {_torch_names()}") from None


def torch_dtype_from_index(index: int) -> torch.dtype:
    """Return the torch dtype stored under ``index`` in table D1.

    Args:
        index: A D1 index, 0 to 20 inclusive.

    Raises:
        FormatError: ``index`` is not in the table.
    """
    _check_torch_index(index)
    return _torch_by_index()[index]


def torch_dtype_itemsize(index: int) -> int:
    """Return the element size in bytes of the torch dtype stored under ``index`` (no torch import).

    Raises:
        FormatError: ``index`` is not in the table.
    """
    _check_torch_index(index)
    return _TORCH_ITEMSIZES[index]


def _check_torch_index(index: int) -> None:
    if not 0 <= index < len(_TORCH_NAMES):
        raise FormatError(f"unknown torch dtype index {index}; expected 0 to {len(_TORCH_NAMES) - 1}")


def numpy_dtype_index(dtype: np.dtype[Any]) -> int:
    """Return the D2 index of ``dtype``, ignoring byte order.

    Args:
        dtype: The array's dtype, in any byte order.

    Returns:
        The index of the little-endian form of ``dtype`` in table D2.

    Raises:
        FormatError: ``dtype`` is not numeric or bool (object, strings, bytes, void, datetimes, long double).
    """
    index = _NUMPY_INDEX.get(dtype.newbyteorder("<").str)
    if index is None:
        raise FormatError(f"cannot serialize a NumPy array of dtype {dtype}; supported dtypes: {_numpy_names()}")
    return index


def numpy_dtype_from_index(index: int) -> np.dtype[Any]:
    """Return the little-endian NumPy dtype stored under ``index`` in table D2.

    Args:
        index: A D2 index, 0 to 13 inclusive (14 to 17 name object/bytes/str/void and are refused).

    Raises:
        FormatError: ``index`` is not a readable entry of the table.
    """
    if not 0 <= index < len(_NUMPY_BY_INDEX):
        raise FormatError(f"unsupported NumPy dtype index {index}; expected 0 to {len(_NUMPY_BY_INDEX) - 1}")
    return _NUMPY_BY_INDEX[index]


def parse_dtype_suffix(data_format: str) -> int:
    """Return the dtype index after the colon of ``"no_header_numpy:10"``-style names.

    Raises:
        FormatError: there is no colon or the suffix is not a decimal integer.
    """
    _, _, suffix = data_format.partition(":")
    if not (suffix.isascii() and suffix.isdigit()):
        raise FormatError(f"data format {data_format!r} lacks a dtype index (expected 'name:<index>')")
    return int(suffix)


def pack_header(index: int, shape: tuple[int, ...], order: str) -> bytes:
    """Encode ``index | rank | dims`` as uint32 values in byte ``order`` (``"<"`` or ``">"``).

    Raises:
        FormatError: a dimension is 2**32 or more.
    """
    if any(dim > 0xFFFFFFFF for dim in shape):
        raise FormatError(f"cannot serialize shape {shape}: every dimension must be below 2**32")
    return struct.pack(f"{order}{2 + len(shape)}I", index, len(shape), *shape)


def unpack_header(data: bytes | memoryview, order: str) -> tuple[int, tuple[int, ...], memoryview]:
    """Decode a :func:`pack_header` header; return the dtype index, the shape and the data after it.

    Raises:
        FormatError: ``data`` is shorter than the header it announces.
    """
    try:
        index, rank = struct.unpack_from(f"{order}2I", data, 0)
        shape: tuple[int, ...] = struct.unpack_from(f"{order}{rank}I", data, 8)
    except struct.error as exc:
        raise FormatError(f"truncated array header ({len(data)} bytes)") from exc
    return index, shape, memoryview(data)[8 + 4 * rank :]


def _check_size(nbytes: int, itemsize: int, shape: tuple[int, ...] | None) -> None:
    if nbytes % itemsize:
        raise FormatError(f"{nbytes} data bytes is not a multiple of the {itemsize}-byte item size")
    if shape is not None and nbytes != math.prod(shape) * itemsize:
        raise FormatError(f"{nbytes} data bytes do not match shape {shape} with {itemsize}-byte items")


def array_to_bytes(array: npt.NDArray[Any]) -> bytes:
    """Return the array's elements in C order, little-endian (big-endian arrays are converted)."""
    target = array.dtype.newbyteorder("<")
    return (array if array.dtype == target else array.astype(target)).tobytes(order="C")


def array_from_bytes(
    data: bytes | memoryview, dtype: np.dtype[Any], shape: tuple[int, ...] | None = None
) -> npt.NDArray[Any]:
    """Copy raw elements into a new, writable array; 1-D when ``shape`` is ``None``.

    Raises:
        FormatError: the byte count does not fit ``dtype`` (and ``shape``).
    """
    _check_size(len(data), dtype.itemsize, shape)
    array = np.frombuffer(data, dtype=dtype).copy()
    return array if shape is None else array.reshape(shape)


def tensor_to_bytes(tensor: torch.Tensor) -> bytes:
    """Return the tensor's elements in C order (native little-endian), from any device, grad or not."""
    return tensor.numpy(force=True).tobytes(order="C")


def tensor_from_bytes(
    data: bytes | memoryview, dtype: torch.dtype, shape: tuple[int, ...] | None = None
) -> torch.Tensor:
    """Copy raw elements into a new, writable CPU tensor; 1-D when ``shape`` is ``None``.

    Raises:
        FormatError: the byte count does not fit ``dtype`` (and ``shape``).
    """
    _check_size(len(data), dtype.itemsize, shape)
    if shape is None:
        shape = (len(data) // dtype.itemsize,)
    import torch

    if len(data) == 0:
        return torch.empty(shape, dtype=dtype)
    # The bytearray is a private, writable copy; the tensor keeps it alive.
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
