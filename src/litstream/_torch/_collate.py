"""The default collate function of ``StreamingDataLoader``: torch's ``default_collate``, minus copies.

Samples decoded by litstream's batch decoder hold their fixed-shape arrays as consecutive rows of one
array (``format._batch_decode``), and the dataset aligns those decode batches with the loader's
batches. When every array of a leaf in a batch is such a row and together they are exactly that
array, the batch tensor is that array itself (``torch.from_numpy``, no stacking copy); a batch cut at a
chunk boundary joins its pieces' columns first (one copy, as the stack would make). Everything else — other
leaf types, arrays from elsewhere — goes to ``default_collate``, so the result (types, dtypes, shapes,
values) is always what ``default_collate`` returns.

``litdata_collate`` is LitData 0.2.76's default batch builder, graphs included: graphs (``Graph`` wrappers
and PyG ``Data`` / ``HeteroData``) are batched with PyG's ``Batch.from_data_list`` (a list of the samples
when torch-geometric is not installed); a ``dict`` sample with a graph value is collated key by key;
everything else goes through :func:`fast_collate`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from ..format._batch_decode import ColumnBatch, rows_from_columns, rows_of
from ..format.media._graph import Graph, is_pyg_data
from ..read.engine._pump import SHARED_ALLOC
from ._loader_profile import after_batch

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterable, Iterator, Sequence

    from ._slots import SlotPacker

__all__ = [
    "LoaderGroup",
    "Tagged",
    "TaggingCollate",
    "collate_columns",
    "fast_collate",
    "litdata_collate",
    "loader_groups",
    "shared_block",
]


def _rows_of_one_array(values: Sequence[Any]) -> np.ndarray[Any, Any] | torch.Tensor | None:
    """The consecutive rows of one decoded block that ``values`` are, exactly and in order, as one
    array (a view of the block); else ``None``."""
    owner = values[0].base
    if not isinstance(owner, np.ndarray):
        return None
    rows = rows_of(owner)
    if rows is None or len(rows) < len(values):
        return None
    n = len(values)
    start = 0
    if len(rows) != n:  # a slice of a block that holds several loader batches
        try:
            start = rows.index(id(values[0]))
        except ValueError:
            return None
        if start + n > len(rows):
            return None
    for value, row in zip(values, rows[start : start + n], strict=True):
        if id(value) != row:  # every value is alive, so an equal id is the same row object
            return None
    first = values[0]
    if isinstance(owner.base, torch.Tensor):  # shared memory from shared_block: keep the tensor's storage
        return owner.base if n == len(rows) else None
    return np.ndarray((n, *first.shape), dtype=first.dtype, buffer=owner, offset=start * first.nbytes)


def shared_block(nbytes: int) -> np.ndarray[Any, Any]:
    """A writable uint8 array of ``nbytes`` in shared memory (as torch allocates batches in workers)."""
    storage = torch.UntypedStorage._new_shared(nbytes)  # type: ignore[no-untyped-call]
    tensor = torch.empty(0, dtype=torch.uint8).set_(storage)
    return tensor.numpy()


SHARED_ALLOC[0] = shared_block  # where DataLoader workers decode arrays by default (read/engine/_pump.py)


def _leaf(values: Sequence[Any]) -> Any:
    first = values[0]
    kind = type(first)
    if kind is np.ndarray:
        whole = _rows_of_one_array(values)
        if isinstance(whole, torch.Tensor):  # a shared block: its bytes, as this dtype and shape
            dtype = torch.from_numpy(np.empty(0, dtype=first.dtype)).dtype
            return whole.view(dtype).view(len(values), *first.shape)
        if whole is not None:
            return torch.from_numpy(whole)
    elif kind is str:  # default_collate decides by the first element too
        return values
    elif kind is int:
        return torch.tensor(values)
    return default_collate(values)  # type: ignore[arg-type]  # a tuple column, as default_collate's own


def fast_collate(batch: list[Any]) -> Any:
    """``default_collate(batch)``, without the stacking copy for leaves decoded as one array.

    Handles flat ``dict`` / ``tuple`` / ``list`` samples (and single leaves) itself, deciding by the
    first sample as ``default_collate`` does; any other structure goes to ``default_collate`` whole.
    """
    if not batch:
        return default_collate(batch)
    elem = batch[0]
    kind = type(elem)
    if kind is dict:
        return {key: _leaf([s[key] for s in batch]) for key in elem}
    if (kind is tuple or kind is list) and all(len(s) == len(elem) for s in batch):
        # default_collate returns a list for tuple and list samples alike
        return [_leaf(column) for column in zip(*batch, strict=True)]
    if kind is np.ndarray:
        return _leaf(batch)
    return default_collate(batch)


class LoaderGroup:
    """One loader batch as ``StreamingDataset`` hands it to ``StreamingDataLoader``'s collate (one object per
    batch instead of one per sample, so torch's fetcher makes one call per batch): ``part`` is the list of its
    samples or, for flat ``dict`` samples without a transform, a :class:`ColumnBatch` of them."""

    __slots__ = ("part", "size")

    def __init__(self, part: list[Any] | ColumnBatch, size: int) -> None:
        self.part = part
        self.size = size

    def samples(self) -> list[Any]:
        """The batch's samples (built from the columns when it holds columns)."""
        part = self.part
        return rows_from_columns(part) if isinstance(part, ColumnBatch) else part


def _torch_dtype(dtype: np.dtype[Any]) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


def _array_leaf(array: np.ndarray[Any, Any]) -> torch.Tensor:
    """A column array as the batch tensor; an array decoded into a shared block (``shared_block``) stays in it."""
    owner = array.base
    storage = owner.base if isinstance(owner, np.ndarray) else None
    if isinstance(storage, torch.Tensor) and owner.nbytes == array.nbytes and storage.nbytes == array.nbytes:
        return storage.view(_torch_dtype(array.dtype)).view(array.shape)
    return torch.from_numpy(array)


def collate_columns(batch: ColumnBatch) -> dict[Any, Any] | None:
    """``fast_collate(rows_from_columns(batch))``, from the columns: a fast-path column's array is the batch
    tensor (``torch.tensor`` of the Python scalars gives the same dtype and values; an array column is the
    stack of its rows), other columns go through the per-leaf collate. ``None`` when a value is a graph
    (``litdata_collate`` batches those with PyG)."""
    out: dict[Any, Any] = {}
    for key, column in zip(batch.keys, batch.columns, strict=True):
        if isinstance(column, np.ndarray):
            out[key] = _array_leaf(column)
        elif _is_graph(column[0]):
            return None
        else:
            out[key] = _leaf(column)
    return out


def loader_groups(
    batches: Generator[list[Any] | ColumnBatch, None, None], size: int
) -> Generator[LoaderGroup, None, None]:
    """Cut a stream of decode batches into loader batches of ``size`` samples (the last may be short), as
    torch's fetcher cuts a stream of samples. A loader batch within one decode batch keeps its form; one
    that spans decode batches (a chunk boundary) is their columns joined when every piece is a
    :class:`ColumnBatch` of the same keys and column kinds, else a list of samples. Closes ``batches`` when
    closed."""
    with contextlib.closing(batches):
        yield from _cut(batches, size)


def _cut(batches: Iterable[list[Any] | ColumnBatch], size: int) -> Iterator[LoaderGroup]:
    pending: list[list[Any] | ColumnBatch] = []  # the pieces of the batch being filled (views, no copies yet)
    held = 0
    for part in batches:
        n = len(part)
        if n == 0:
            continue
        begin = 0
        if held:
            begin = min(size - held, n)
            pending.append(_part_of(part, 0, begin))
            held += begin
            if held < size:
                continue
            yield LoaderGroup(_joined(pending), size)
            pending, held = [], 0
        while n - begin >= size:
            yield LoaderGroup(_part_of(part, begin, begin + size), size)
            begin += size
        if begin < n:
            pending, held = [_part_of(part, begin, n)], n - begin
    if held:
        yield LoaderGroup(_joined(pending), held)


def _part_of(part: list[Any] | ColumnBatch, begin: int, end: int) -> list[Any] | ColumnBatch:
    if isinstance(part, ColumnBatch):
        return part.part(begin, end)
    return part if begin == 0 and end == len(part) else part[begin:end]


def _joined(pieces: list[list[Any] | ColumnBatch]) -> list[Any] | ColumnBatch:
    """One loader batch from the consecutive ``pieces`` of decode batches: their columns joined (one copy of
    each array column, the copy stacking its samples' rows would make) when every piece holds the same keys
    with columns of one kind (arrays of one dtype and row shape, or lists); else their samples."""
    first = pieces[0]
    if len(pieces) == 1:
        return first
    if isinstance(first, ColumnBatch):
        joined = _joined_columns(first, pieces)
        if joined is not None:
            return joined
    return [sample for piece in pieces for sample in _samples_of(piece, 0, len(piece))]


def _joined_columns(first: ColumnBatch, pieces: list[list[Any] | ColumnBatch]) -> ColumnBatch | None:
    batches = [piece for piece in pieces if isinstance(piece, ColumnBatch) and piece.keys == first.keys]
    if len(batches) != len(pieces):
        return None
    columns: list[Any] = []
    for j, column in enumerate(first.columns):
        parts = [batch.columns[j] for batch in batches]
        if isinstance(column, np.ndarray):
            row = (column.dtype, column.shape[1:])
            if not all(isinstance(p, np.ndarray) and (p.dtype, p.shape[1:]) == row for p in parts):
                return None
            columns.append(np.concatenate(parts))
        elif all(type(p) is list for p in parts):
            columns.append([value for p in parts for value in p])
        else:
            return None
    return ColumnBatch(first.keys, columns, sum(batch.size for batch in batches))


def _samples_of(part: list[Any] | ColumnBatch, begin: int, end: int) -> list[Any]:
    if isinstance(part, ColumnBatch):
        return rows_from_columns(part.part(begin, end))
    return part[begin:end]


class Tagged(NamedTuple):
    """A collated batch with the torch worker that built it and its sample count (``size``).

    A ``NamedTuple`` so that torch's ``pin_memory`` pins ``batch`` and passes the ints through.
    """

    worker: int
    size: int
    batch: Any


class TaggingCollate:
    """Wraps a collate function; runs in the worker that builds the batch (picklable)."""

    def __init__(self, collate: Callable[[list[Any]], Any]) -> None:
        self.collate = collate
        self.packer: SlotPacker | None = None  # set by the loader for each iteration with workers

    def __call__(self, samples: list[Any] | LoaderGroup) -> Tagged:
        info = get_worker_info()
        if isinstance(samples, LoaderGroup):  # one batch from StreamingDataset's grouped iteration
            size = samples.size
            part = samples.part
            batch = collate_columns(part) if isinstance(part, ColumnBatch) and self.collate is litdata_collate else None
            if batch is None:
                batch = self.collate(samples.samples())
        else:
            size = len(samples)
            batch = self.collate(samples)
        if info is not None and self.packer is not None:
            batch = self.packer.pack(info.id, batch)
        tagged = Tagged(0 if info is None else info.id, size, batch)
        after_batch()  # profile_batches counts the batches worker 0 built
        return tagged


def _is_graph(item: object) -> bool:
    return isinstance(item, Graph) or is_pyg_data(item)


def litdata_collate(items: list[Any]) -> Any:
    """Collate one batch of samples as LitData's ``litdata_collate`` does.

    Args:
        items: The samples of the batch.

    Returns:
        ``items`` itself when empty; a PyG ``Batch`` (or the list of graphs, without torch-geometric)
        for graph samples; a ``dict`` collated per key when a value of the first sample is a graph;
        otherwise what ``torch.utils.data.default_collate(items)`` returns.
    """
    if not items:
        return items
    first = items[0]
    if _is_graph(first):
        try:
            from torch_geometric.data import Batch  # type: ignore[import-not-found,import-untyped,unused-ignore]
        except ImportError:
            return items
        return Batch.from_data_list([item.to_pyg() if isinstance(item, Graph) else item for item in items])
    if isinstance(first, Mapping) and any(_is_graph(first[key]) for key in first):
        return {key: litdata_collate([item[key] for item in items]) for key in first}
    return fast_collate(items)
