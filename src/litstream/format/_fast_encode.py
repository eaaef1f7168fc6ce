"""The write hot path of the PyTree loader: encode samples of a fixed, flat layout in one join.

After the first sample fixes the format, :func:`fast_encoder` builds a function that encodes later
samples of the same flat ``dict`` / ``tuple`` / ``list`` layout (or a single leaf) whose leaves are
exactly ``int``, ``float``, ``bool``, ``str``, ``bytes`` or C-contiguous little-endian NumPy arrays
(the ``numpy`` format): the per-leaf size header, each array's header (cached per dtype and shape)
and the array's own memory go into ONE ``bytes.join`` — the only copy of the array's data. The
bytes are identical to the general path (LitData's layout); any sample that does not fit returns
``None`` and goes through the general path, which raises the errors.
"""

from __future__ import annotations

import struct
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core._errors import FormatError
from . import _dtypes as dt
from ._serializers import (
    BoolSerializer,
    BytesSerializer,
    FloatSerializer,
    IntSerializer,
    NumpySerializer,
    StrSerializer,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._pytree import TreeSpec
    from ._serializer_base import Serializer

__all__ = ["fast_encoder"]

_KINDS: dict[type, str] = {
    IntSerializer: "int",
    FloatSerializer: "float",
    BoolSerializer: "bool",
    StrSerializer: "str",
    BytesSerializer: "bytes",
    NumpySerializer: "numpy",
}
_INT = struct.Struct("<q")
_FLOAT = struct.Struct("<d")
_LITTLE = sys.byteorder == "little"


def fast_encoder(spec: TreeSpec, serializers: Sequence[Serializer]) -> Callable[[Any], bytes | None] | None:
    """An encoder for samples shaped like ``spec`` with these leaf serializers, or ``None`` if the
    layout has no fast path. The encoder returns ``None`` for a sample it cannot encode itself."""
    kinds = [_KINDS.get(type(s)) for s in serializers]
    if any(k is None for k in kinds):
        return None
    if spec.type is None:
        leaves_of: Callable[[Any], Sequence[Any] | None] = lambda sample: (sample,)  # noqa: E731
    elif not all(child.type is None for child in spec.children):
        return None
    elif spec.type == "builtins.dict":
        keys = tuple(spec.context)

        def leaves_of(sample: Any) -> Sequence[Any] | None:
            if type(sample) is not dict or tuple(sample) != keys:
                return None
            return list(sample.values())

    elif spec.type in ("builtins.tuple", "builtins.list"):
        kind = tuple if spec.type == "builtins.tuple" else list
        count = len(spec.children)

        def leaves_of(sample: Any) -> Sequence[Any] | None:
            return sample if type(sample) is kind and len(sample) == count else None

    else:
        return None
    sizes_format = struct.Struct(f"<{len(kinds)}I")
    headers: dict[tuple[Any, tuple[int, ...]], bytes] = {}
    plan = list(enumerate(kinds))

    def encode(sample: Any) -> bytes | None:
        leaves = leaves_of(sample)
        if leaves is None:
            return None
        parts: list[Any] = [b""]
        sizes: list[int] = []
        for position, kind in plan:
            leaf = leaves[position]
            if kind == "numpy":
                if type(leaf) is not np.ndarray or not leaf.flags.c_contiguous:
                    return None
                dtype = leaf.dtype
                order = dtype.byteorder
                if order == ">" or (order == "=" and not _LITTLE) or dtype.hasobject:
                    return None
                key = (dtype, leaf.shape)
                header = headers.get(key)
                if header is None:
                    try:
                        header = dt.pack_header(dt.numpy_dtype_index(dtype), leaf.shape, "<")
                    except FormatError:
                        return None
                    headers[key] = header
                parts.append(header)
                parts.append(leaf)
                sizes.append(len(header) + leaf.nbytes)
                continue
            if kind == "int":
                if type(leaf) is not int or not -(2**63) <= leaf < 2**63:
                    return None
                data = _INT.pack(leaf)
            elif kind == "str":
                if type(leaf) is not str:
                    return None
                try:
                    data = leaf.encode("utf-8")
                except UnicodeEncodeError:
                    return None
            elif kind == "float":
                if type(leaf) is not float:
                    return None
                data = _FLOAT.pack(leaf)
            elif kind == "bool":
                if type(leaf) is not bool:
                    return None
                data = b"\x01" if leaf else b"\x00"
            else:  # bytes
                if type(leaf) is not bytes:
                    return None
                data = leaf
            parts.append(data)
            sizes.append(len(data))
        try:
            parts[0] = sizes_format.pack(*sizes)
        except struct.error:  # a leaf of 4 GiB or more: the general path raises
            return None
        return b"".join(parts)

    return encode
