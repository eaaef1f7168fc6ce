"""Decoding one MDS sample: the column encodings of ``mosaicml-streaming`` (``MDSWriter``).

Sample layout (all integers little-endian)::

    uint32 size of each variable-size column (column_sizes[i] null), in column order
    column 0 bytes | column 1 bytes | ...        fixed-size columns take column_sizes[i] bytes

Encodings and the values they decode to (as mosaic's reader returns them):

    bytes, str (UTF-8), json, pkl             bytes, str, the JSON value, the unpickled object
    int                                       int (from int64)
    uint8 … uint64, int8 … int64,
    float16, float32, float64                 a NumPy scalar of that dtype
    str_int, str_float, str_decimal           int, float, decimal.Decimal (from their text)
    ndarray[:dtype[:d0,d1,...]]               numpy array; without a static dtype the value starts
                                              with one dtype code byte; without a static shape,
                                              then a byte (ndim << 2 | shape dtype code) and the
                                              shape as uint8/16/32/64 (code 0..3); then the values
    pil                                       PIL image: uint32 width, height, len(mode), mode, raw pixels
    jpeg, png                                 PIL image opened on the encoded file
    jpeg_array / jpegarray                    list of PIL images: uint32 n, n uint32 sizes, the files
    list[pil] / list[jpeg] / list[png]        list of PIL images: uint32 0, uint32 n, n uint32 sizes, items

``pkl`` runs ``pickle.loads`` on stored bytes, as LitData and mosaic (with ``allow_unsafe_types``) do:
read pickled MDS data only from a source you trust.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._core._errors import ConfigurationError, FormatError, PickleRefusedError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._index import DatasetConfig

__all__ = ["MdsDecoder", "check_encoding"]

_SCALARS = {name: np.dtype(name) for name in ("uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64")}
_SCALARS.update({f"int{bits}": np.dtype(f"int{bits}") for bits in (8, 16, 32, 64)})
_VALUE_DTYPES = {8: "uint8", 9: "int8", 16: "uint16", 17: "int16", 18: "float16", 32: "uint32", 33: "int32",
                 34: "float32", 64: "uint64", 65: "int64", 66: "float64"}  # fmt: skip
_SHAPE_DTYPES = ("<u1", "<u2", "<u4", "<u8")
_PLAIN = ("bytes", "str", "int", "str_int", "str_float", "str_decimal", "pil", "jpeg", "png", "pkl", "json",
          "jpeg_array", "jpegarray", "list[pil]", "list[jpeg]", "list[png]")  # fmt: skip


def _ndarray_args(encoding: str, where: str) -> tuple[np.dtype[Any] | None, tuple[int, ...] | None]:
    args = encoding.split(":")[1:]
    if len(args) > 2 or (args and args[0] not in _VALUE_DTYPES.values()):
        raise FormatError(f"{where}: {encoding!r} is not ndarray[:dtype[:shape]] with a supported dtype")
    dtype = np.dtype(args[0]).newbyteorder("<") if args else None
    shape = None
    if len(args) == 2:
        try:
            shape = tuple(int(d) for d in args[1].split(","))
        except ValueError:
            raise FormatError(f"{where}: {encoding!r} has a malformed shape") from None
        if not shape or min(shape) < 1:
            raise FormatError(f"{where}: {encoding!r} has a dimension below 1")
    return dtype, shape


def check_encoding(encoding: str, size: int | None, where: str) -> None:
    """Check that ``encoding`` is one litstream decodes and that its recorded fixed ``size`` fits it.

    Raises:
        FormatError: an unknown encoding, or a fixed size that contradicts it.
    """
    if encoding in _SCALARS or encoding == "int":
        expected: int | None = 8 if encoding == "int" else _SCALARS[encoding].itemsize
    elif encoding.split(":")[0] == "ndarray":
        dtype, shape = _ndarray_args(encoding, where)
        expected = None if dtype is None or shape is None else dtype.itemsize * int(np.prod(shape))
    elif encoding in _PLAIN:
        expected = None
    else:
        raise FormatError(
            f"{where}: MDS column encoding {encoding!r} is not supported; supported: {sorted({*_SCALARS, *_PLAIN})} "
            "and ndarray[:dtype[:shape]]"
        )
    if size != expected:
        raise FormatError(f"{where}: encoding {encoding!r} has size {size!r} in the index, expected {expected!r}")


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ConfigurationError('MDS image columns need Pillow: pip install "litstream[image]"') from None
    return Image


def _image(data: bytes) -> Any:
    return _pillow().open(io.BytesIO(data))


def _pil(data: bytes) -> Any:
    image_module = _pillow()
    if len(data) < 12:
        raise FormatError(f"a 'pil' value of {len(data)} bytes is shorter than its 12-byte header")
    width, height, mode_size = struct.unpack_from("<3I", data)
    mode = data[12 : 12 + mode_size].decode("ascii")
    return image_module.frombytes(mode, (width, height), data[12 + mode_size :])


def _sized_list(data: bytes, offset: int, decode: Callable[[bytes], Any]) -> list[Any]:
    (n,) = struct.unpack_from("<I", data, offset)
    start = offset + 4 + 4 * n
    if start > len(data):
        raise FormatError(f"a list value of {len(data)} bytes announces {n} elements")
    out = []
    for size in struct.unpack_from(f"<{n}I", data, offset + 4):
        if start + size > len(data):
            raise FormatError("a list value ends inside one of its elements")
        out.append(decode(data[start : start + size]))
        start += size
    return out


def _ndarray(encoding: str) -> Callable[[bytes], Any]:
    dtype, shape = _ndarray_args(encoding, "index.json")

    def decode(data: bytes) -> Any:
        pos, value_dtype, value_shape = 0, dtype, shape
        if value_dtype is None:
            name = _VALUE_DTYPES.get(data[0]) if data else None
            if name is None:
                raise FormatError(f"an ndarray value has an unknown dtype code {data[:1]!r}")
            value_dtype, pos = np.dtype(name).newbyteorder("<"), 1
        if value_shape is None:
            if len(data) <= pos:
                raise FormatError("an ndarray value ends before its shape")
            ndim, code = data[pos] >> 2, data[pos] & 3
            width = 2**code
            value_shape = tuple(int(d) for d in np.frombuffer(data, _SHAPE_DTYPES[code], ndim, pos + 1))
            pos += 1 + ndim * width
        count = int(np.prod(value_shape))
        if len(data) - pos != count * value_dtype.itemsize:
            raise FormatError(f"an ndarray value of shape {value_shape} holds {len(data) - pos} bytes of values")
        return np.frombuffer(data, value_dtype, count, pos).reshape(value_shape).copy()

    return decode


def _decoder(encoding: str) -> Callable[[bytes], Any]:
    if encoding in _SCALARS:
        dtype = _SCALARS[encoding].newbyteorder("<")
        return lambda data: np.frombuffer(data, dtype)[0]
    simple: dict[str, Callable[[bytes], Any]] = {
        "bytes": bytes,
        "str": lambda data: data.decode("utf-8"),
        "int": lambda data: int.from_bytes(data, "little", signed=True),
        "str_int": lambda data: int(data.decode("utf-8")),
        "str_float": lambda data: float(data.decode("utf-8")),
        "str_decimal": lambda data: Decimal(data.decode("utf-8")),
        "json": lambda data: json.loads(data.decode("utf-8")),
        "pkl": pickle.loads,
        "pil": _pil,
        "jpeg": _image,
        "png": _image,
        "jpeg_array": lambda data: _sized_list(data, 0, _image),
        "jpegarray": lambda data: _sized_list(data, 0, _image),
        "list[pil]": lambda data: _sized_list(data, 4, _pil),
        "list[jpeg]": lambda data: _sized_list(data, 4, _image),
        "list[png]": lambda data: _sized_list(data, 4, _image),
    }
    return simple[encoding] if encoding in simple else _ndarray(encoding)


class MdsDecoder:
    """Turns one MDS sample's bytes into ``{column name: value}`` (layout in the module docstring).

    Args:
        config: The config :func:`~litstream.format.mds._index.parse_index` made (validated there).
        allow_pickle: ``False`` refuses a dataset with a ``pkl`` column here, before anything is read.
        where: Names the dataset in errors.

    Raises:
        PickleRefusedError: ``allow_pickle=False`` and a column is stored with ``pkl``.
    """

    def __init__(self, config: DatasetConfig, *, allow_pickle: bool = True, where: str = "the MDS dataset") -> None:
        self._names: Sequence[str] = config.extra["column_names"]
        self._encodings: Sequence[str] = config.data_format
        if not allow_pickle and "pkl" in self._encodings:
            column = self._names[list(self._encodings).index("pkl")]
            raise PickleRefusedError(
                f"{where} stores column {column!r} with MDS's pkl encoding, and allow_pickle is off: unpickling runs "
                "code chosen by whoever wrote the data. If you trust its source, pass allow_pickle=True (or call "
                "litstream.set_allow_pickle(True)); see docs/security.md"
            )
        self._sizes: Sequence[int | None] = config.extra["column_sizes"]
        self._decoders = [_decoder(e) for e in self._encodings]
        self._variable = sum(1 for s in self._sizes if s is None)

    def decode(self, item: bytes | memoryview) -> dict[str, Any]:
        """Decode one sample.

        Raises:
            FormatError: the sizes do not add up to the item's length, or a value does not decode.
        """
        data = bytes(item)
        header = 4 * self._variable
        if len(data) < header:
            raise FormatError(f"an MDS sample of {len(data)} bytes is shorter than its {header}-byte size header")
        variable = iter(struct.unpack_from(f"<{self._variable}I", data))
        sizes = [next(variable) if s is None else s for s in self._sizes]
        if header + sum(sizes) != len(data):
            raise FormatError(f"an MDS sample of {len(data)} bytes has columns of {sizes} bytes after its header")
        out: dict[str, Any] = {}
        pos = header
        for name, encoding, size, decode in zip(self._names, self._encodings, sizes, self._decoders, strict=True):
            try:
                out[name] = decode(data[pos : pos + size])
            except FormatError:
                raise
            except (ValueError, TypeError, IndexError, OSError, EOFError, struct.error, InvalidOperation) as exc:
                raise FormatError(f"MDS column {name!r} ({encoding}) does not decode: {exc}") from exc
            pos += size
        return out
