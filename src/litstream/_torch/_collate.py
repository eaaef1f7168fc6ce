"""The default collate function of ``StreamingDataLoader``: torch's ``default_collate``, minus copies.

Samples decoded by litstream's batch decoder hold their fixed-shape arrays as consecutive rows of one
array (``format._batch_decode``), and the dataset aligns those decode batches with the loader's
batches. When every array of a leaf in a batch is such a row and together they are exactly that
array, the batch tensor is that array itself (``torch.from_numpy``, no stacking copy). Everything
else — other leaf types, arrays from elsewhere, a batch cut at a chunk boundary — goes to
``default_collate``, so the result (types, dtypes, shapes, values) is always what ``default_collate``
returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import default_collate

from ..format._batch_decode import rows_of

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["fast_collate", "shared_block"]


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
