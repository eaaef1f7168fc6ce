"""Decode many items of one chunk at once: the read hot path of the PyTree loader.

:func:`decode_items` gives exactly what calling ``SampleDecoder.decode`` on each item would give,
but works column by column over the items' leaves with NumPy instead of sample by sample:

* the leaf-size headers of all items are read with one gather;
* ``int``, ``float`` and ``bool`` leaves are gathered into one array and turned into Python values
  with one ``tolist()``;
* ``numpy`` / ``no_header_numpy`` leaves whose items all carry the same dtype and shape are copied
  into ONE new array ``(n, *shape)`` (one gather when the items are evenly spaced in the chunk,
  else one ``memcpy`` per item); each sample gets a writable view of its row, so the only copy is
  that final array (the chunk itself may be a read-only ``mmap``);
* ``str`` leaves are decoded straight from the chunk buffer;
* flat ``dict`` / ``tuple`` / ``list`` samples are assembled with ``zip``.

Any column that does not fit a fast path (another serializer, mixed shapes, a malformed item) is
decoded item by item with its serializer, so errors and results are those of the general path.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core._errors import FormatError
from . import _dtypes as dt
from ._pytree import tree_unflatten
from ._serializers import (  # like _loaders.py's list in shape only: each names what its module uses
    BoolSerializer,
    FloatSerializer,
    IntSerializer,
    NoHeaderNumpySerializer,
    NumpySerializer,
    StrSerializer,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy.typing as npt

    from ._pytree import TreeSpec
    from ._serializer_base import Serializer

__all__ = ["ColumnBatch", "decode_items", "rows_from_columns", "rows_of", "sample_builder"]

_ROWS: dict[int, tuple[weakref.ref[np.ndarray[Any, Any]], tuple[int, ...]]] = {}
_MAX_ROWS_ENTRIES = 64


def rows_of(block: np.ndarray[Any, Any]) -> tuple[int, ...] | None:
    """The ``id`` of each row handed out from ``block`` (an array decoded as one), in order, if it is
    one of the last ``_MAX_ROWS_ENTRIES`` decoded; ``_collate`` batches exactly those rows without a copy."""
    entry = _ROWS.get(id(block))
    if entry is None or entry[0]() is not block:
        return None
    return entry[1]


def _remember_rows(block: np.ndarray[Any, Any], rows: list[Any]) -> None:
    if len(_ROWS) >= _MAX_ROWS_ENTRIES:
        with contextlib.suppress(RuntimeError, StopIteration, KeyError):  # another thread got there first
            del _ROWS[next(iter(_ROWS))]  # the oldest
    _ROWS[id(block)] = (weakref.ref(block), tuple(map(id, rows)))


_Column = list[Any]


class ColumnBatch:
    """Consecutive decoded items of flat ``dict`` samples kept as columns (``decode_items(columns=True)``).

    ``columns[j]`` holds leaf ``keys[j]`` of every item: a NumPy array for fast-path leaves (``(n,)`` of
    ``int64`` / ``float64`` / ``bool`` for scalars, ``(n, *shape)`` for fixed-shape arrays: owned, writable
    memory), else a ``list`` of the values ``decode`` gives. ``StreamingDataLoader``'s default collate turns
    such a batch into tensors without building a sample per item; :func:`rows_from_columns` gives the
    samples themselves.
    """

    __slots__ = ("columns", "keys", "size")

    def __init__(self, keys: tuple[Any, ...], columns: list[Any], size: int) -> None:
        self.keys = keys
        self.columns = columns
        self.size = size

    def __len__(self) -> int:
        return self.size

    def part(self, begin: int, end: int) -> ColumnBatch:
        """Items ``[begin, end)`` (views of the same arrays)."""
        if begin == 0 and end == self.size:
            return self
        return ColumnBatch(self.keys, [column[begin:end] for column in self.columns], end - begin)


def rows_from_columns(batch: ColumnBatch) -> list[dict[Any, Any]]:
    """The samples of ``batch``: what ``decode`` gives for each item (scalars as Python values, arrays as
    writable rows of their column's array)."""
    columns = [
        (column.tolist() if column.ndim == 1 else list(column)) if isinstance(column, np.ndarray) else column
        for column in batch.columns
    ]
    keys = batch.keys
    if 0 < len(keys) <= _MAX_DISPLAY_KEYS:
        return _dict_rows(len(keys))(columns, *keys)
    return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]


_INDEXED_WIDTH = 64
"""Fields up to this many bytes are gathered from unevenly spaced items with one fancy-indexed ``take``
(~30x faster than a slice per item); wider ones (arrays) with one ``memcpy`` per item."""
_SCALARS: dict[type, tuple[int, str]] = {IntSerializer: (8, "<i8"), FloatSerializer: (8, "<f8")}


_MAX_DISPLAY_KEYS = 32
_DICT_ROWS: dict[int, Callable[..., list[dict[Any, Any]]]] = {}


def _dict_rows(width: int) -> Callable[..., list[dict[Any, Any]]]:
    """``f(columns, *keys)``: one dict per row of ``columns`` with ``keys``, built with a dict display.

    A display is ~3x faster than ``dict(zip(keys, row))`` per sample. Only ``width`` shapes the code
    (names ``k0..``, ``v0..``); the keys, which come from the dataset, are passed as arguments and never
    become source text.

    Raises:
        ValueError: ``width`` is not an int in ``[1, 32]`` (the code is made from it alone).
    """
    rows = _DICT_ROWS.get(width)
    if rows is None:
        if type(width) is not int or not 0 < width <= _MAX_DISPLAY_KEYS:
            raise ValueError(f"width={width!r}: a dict display has 1 to {_MAX_DISPLAY_KEYS} keys")
        names = range(width)
        keys = ", ".join(f"k{j}" for j in names)
        values = ", ".join(f"v{j}" for j in names)
        display = ", ".join(f"k{j}: v{j}" for j in names)
        code = f"lambda columns, {keys}: [{{{display}}} for {values}, in zip(*columns, strict=True)]"
        rows = _DICT_ROWS[width] = eval(code, {"zip": zip})  # names only, see above
    return rows


def sample_builder(spec: TreeSpec) -> Callable[[list[_Column]], list[Any]]:
    """A function turning leaf columns into samples shaped like ``spec`` (as ``tree_unflatten`` would)."""
    flat = all(child.type is None for child in spec.children)
    if spec.type is None:
        return lambda columns: columns[0]
    if flat and spec.type == "builtins.dict":
        keys = tuple(spec.context)
        if 0 < len(keys) <= _MAX_DISPLAY_KEYS:
            rows = _dict_rows(len(keys))
            return lambda columns: rows(columns, *keys)
        return lambda columns: [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]
    if flat and spec.type == "builtins.tuple":
        return lambda columns: list(zip(*columns, strict=True))
    if flat and spec.type == "builtins.list":
        return lambda columns: [list(row) for row in zip(*columns, strict=True)]
    return lambda columns: [tree_unflatten(list(row), spec) for row in zip(*columns, strict=True)]


def _gather(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], width: int, out: npt.NDArray[np.uint8] | None = None
) -> npt.NDArray[np.uint8]:
    """``buf[starts[k] : starts[k] + width]`` for every k, into ``out`` or a new ``(n, width)`` array."""
    n = len(starts)
    if out is None:
        out = np.empty((n, width), dtype=np.uint8)
    if n > 1 and width:
        steps = np.diff(starts)
        stride = int(steps[0])
        if stride > 0 and bool((steps == stride).all()):  # evenly spaced, ascending: one strided copy
            view = np.lib.stride_tricks.as_strided(buf[int(starts[0]) :], shape=(n, width), strides=(stride, 1))
            np.copyto(out, view)
            return out
    if width <= _INDEXED_WIDTH:  # small fields (headers, scalars) of unevenly spaced items: one indexed gather
        np.take(buf, starts[:, None] + np.arange(width, dtype=np.int64), out=out)
        return out
    for k, start in enumerate(starts.tolist()):
        out[k] = buf[start : start + width]
    return out


def _grid_gather(
    buf: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    width: int,
    stride: int,
    out: npt.NDArray[np.uint8] | None = None,
) -> npt.NDArray[np.uint8] | None:
    """Like :func:`_gather` when every start lies on a grid of ``stride`` bytes (equal-size items)."""
    if stride < width or stride <= 0:
        return None
    low = int(starts.min())
    relative = starts - low
    if not bool((relative % stride == 0).all()):
        return None
    rows = relative // stride
    count = int(rows.max()) + 1
    if low + (count - 1) * stride + width > len(buf):
        return None
    grid = np.lib.stride_tricks.as_strided(buf[low:], shape=(count, width), strides=(stride, 1))
    if len(rows) == count and bool((np.diff(rows) == 1).all()):
        if out is None:
            return grid.copy()
        np.copyto(out, grid)
        return out
    if out is None:
        return grid[rows]
    return np.take(grid, rows, axis=0, out=out)


def _fields(
    buf: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    width: int,
    stride: int,
    out: npt.NDArray[np.uint8] | None = None,
) -> npt.NDArray[np.uint8]:
    """``buf[starts[k] : starts[k] + width]`` for every k, into ``out`` or a new ``(n, width)`` array: one
    strided view when the starts lie on a grid of ``stride`` bytes (:func:`_grid_gather`), else :func:`_gather`."""
    grid = _grid_gather(buf, starts, width, stride, out)
    return grid if grid is not None else _gather(buf, starts, width, out)


def _array_column(
    buf: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    serializer: Serializer,
    stride: int,
    alloc: Callable[[int], npt.NDArray[np.uint8]] | None = None,
    as_arrays: bool = False,
) -> Any:
    """A ``numpy`` / ``no_header_numpy`` column as row views of one new array (``as_arrays``: that
    array, ``(n, *shape)``), or ``None``.

    ``alloc(nbytes)`` supplies that array's memory (a writable 1-D uint8 array) when given, e.g. shared
    memory in a DataLoader worker so the collated batch crosses to the main process without a copy."""
    first_size = int(sizes[0])
    shape: tuple[int, ...]
    if not bool((sizes == first_size).all()):
        return None
    if isinstance(serializer, NoHeaderNumpySerializer):
        dtype = serializer.dtype
        if dtype is None or first_size == 0 or first_size % dtype.itemsize:
            return None
        header, shape = 0, (first_size // dtype.itemsize,)
    else:
        s0 = int(starts[0])
        if first_size < 8:
            return None
        rank = int(buf[s0 + 4 : s0 + 8].view("<u4")[0])
        header = 8 + 4 * rank
        if rank < 1 or first_size < header:
            return None
        heads = _fields(buf, starts, header, stride)
        if not bool((heads == heads[0]).all()):
            return None
        words = heads[0].view("<u4")
        try:
            dtype = dt.numpy_dtype_from_index(int(words[0]))
        except FormatError:
            return None
        shape = tuple(int(d) for d in words[2:])
        if first_size - header != dtype.itemsize * int(np.prod(shape, dtype=np.int64)) or first_size == header:
            return None
    width = first_size - header
    n = len(starts)
    block = None if alloc is None else alloc(n * width)
    out = None if block is None else block.reshape(n, width)
    data = _fields(buf, starts + header, width, stride, out)
    whole = data.view(dtype).reshape((n, *shape))
    if as_arrays:
        return whole
    rows = list(whole)
    _remember_rows(data if block is None else block, rows)
    return rows


# The parameters repeat _array_column's because this dispatcher hands them on to it (not duplicated logic).
def _column(
    data: Any,
    buf: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    serializer: Serializer,
    stride: int,
    alloc: Callable[[int], npt.NDArray[np.uint8]] | None = None,
    as_arrays: bool = False,
) -> Any:
    """One leaf's column: a list of values, or with ``as_arrays`` a NumPy array for the fast-path leaves
    (see :class:`ColumnBatch`); ``None`` when it does not fit a fast path."""
    kind = type(serializer)
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        width, code = scalar
        if not bool((sizes == width).all()):
            return None
        numbers = _fields(buf, starts, width, stride).view(code).ravel()
        return numbers.astype(code[1:]) if as_arrays else numbers.tolist()  # astype: native order, owned
    if kind is BoolSerializer:
        if not bool((sizes == 1).all()):
            return None
        flags = buf[starts] != 0
        return flags if as_arrays else flags.tolist()
    if kind is StrSerializer:
        memory = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        try:
            return [str(memory[s : s + z], "utf-8") for s, z in zip(starts.tolist(), sizes.tolist(), strict=True)]
        except UnicodeDecodeError:
            return None
    if kind is NumpySerializer or kind is NoHeaderNumpySerializer:
        return _array_column(buf, starts, sizes, serializer, stride, alloc, as_arrays)
    return None


def _one_by_one(
    memory: memoryview,
    begins: npt.NDArray[np.int64],
    ends: npt.NDArray[np.int64],
    decode_one: Callable[[memoryview], Any],
) -> list[Any]:
    """The items ``memory[begins[k]:ends[k]]`` decoded by ``decode_one``, one by one (no fast path fits)."""
    return [decode_one(memory[b:e]) for b, e in zip(begins.tolist(), ends.tolist(), strict=True)]


def decode_items(
    data: Any,
    begins: npt.NDArray[np.int64],
    ends: npt.NDArray[np.int64],
    serializers: Sequence[Serializer],
    build: Callable[[list[_Column]], list[Any]],
    decode_one: Callable[[memoryview], Any],
    alloc: Callable[[int], npt.NDArray[np.uint8]] | None = None,
    keys: tuple[Any, ...] | None = None,
) -> Any:
    """Decode the items ``data[begins[k]:ends[k]]`` (spans already checked against ``data``).

    ``decode_one`` is the general per-item decoder, used for any item or column that does not fit
    a fast path (it raises the errors the general path raises). With ``keys`` (the keys of flat
    ``dict`` samples, one per leaf) the result is a :class:`ColumnBatch` instead of the samples, or
    ``None`` where the items must be decoded one by one.
    """
    n = len(begins)
    if n == 0:
        return [] if keys is None else None
    memory = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    lengths = ends - begins
    num_leaves = len(serializers)
    head = 4 * num_leaves
    if num_leaves == 0 or bool((lengths < head).any()):  # no leaves (an empty dict sample): nothing to gather
        return None if keys is not None else _one_by_one(memory, begins, ends, decode_one)
    buf = np.frombuffer(data, dtype=np.uint8)
    stride = int(lengths[0]) if bool((lengths == lengths[0]).all()) else 0
    raw = _fields(buf, begins, head, stride)
    sizes = raw.view("<u4").reshape(n, num_leaves).astype(np.int64)
    if bool((head + sizes.sum(axis=1) > lengths).any()):
        return None if keys is not None else _one_by_one(memory, begins, ends, decode_one)
    starts = np.empty_like(sizes)
    starts[:, 0] = begins + head
    if num_leaves > 1:
        np.cumsum(sizes[:, :-1], axis=1, out=starts[:, 1:])
        starts[:, 1:] += starts[:, :1]
    columns: list[_Column] = []
    for j, serializer in enumerate(serializers):
        column = _column(data, buf, starts[:, j], sizes[:, j], serializer, stride, alloc, keys is not None)
        if column is None:
            deserialize = serializer.deserialize
            column = [
                deserialize(memory[s : s + z]) for s, z in zip(starts[:, j].tolist(), sizes[:, j].tolist(), strict=True)
            ]
        columns.append(column)
    return build(columns) if keys is None else ColumnBatch(keys, columns, n)
