"""Which inputs each worker of each node processes.

* Sequential split (LitData's ordered mode): ``world = num_nodes x num_workers`` contiguous slices,
  ``len // world`` items each, the remainder one each to the **last** slices (5 inputs, 2 workers →
  ``[0, 1]``, ``[2, 3, 4]``); node ``k`` keeps slices ``k·W … k·W+W-1``.
* Weighted split (``weights=``, or ``reorder_files=True`` with a local ``input_dir``): greedy bin packing,
  heaviest input first into the currently lightest of the ``world`` bins (ties: the lowest bin), as
  LitData does. Unlike LitData, a bin keeps its inputs in input order instead of a random permutation,
  so the assignment is deterministic and the per-worker order is predictable.
* ``fast_dev_run`` keeps the first ``n`` inputs of every worker (``True`` → 10). LitData documents 10
  but, because ``True`` is an ``int``, actually keeps 1; litstream keeps the documented 10.
* A queue input (``queue.Queue`` or ``multiprocessing.Queue``) is drained until the sentinel
  :data:`ALL_DONE` (LitData's string ``"ALL_DONE"``) or ``DATA_OPTIMIZER_TIMEOUT`` seconds of silence
  (read by :class:`~._feed.QueueInputs`).

No per-input list is made for a ``list``, ``tuple`` or ``range`` input: a worker's positions are a
``range`` (ordered split) or an ``array`` of int64 (weighted split), its inputs a :class:`Picked` view on
the user's sequence, and ``batch_size`` groups are made on access (:class:`Batched`).
"""

from __future__ import annotations

import os
import queue as queue_module
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from ..._core._errors import ConfigurationError

__all__ = [
    "ALL_DONE",
    "DEFAULT_FAST_DEV_RUN_ITEMS",
    "Assignment",
    "Batched",
    "Picked",
    "assign_inputs",
    "check_fast_dev_run",
    "check_weights",
    "is_queue",
    "pack_by_weight",
    "split_inputs",
]

ALL_DONE = "ALL_DONE"
"""The sentinel a producer puts on a queue input to end it (LitData's ``data_processor.ALL_DONE``)."""

DEFAULT_FAST_DEV_RUN_ITEMS = 10


def is_queue(value: Any) -> bool:
    """True for a ``queue.Queue`` (and subclasses) or a ``multiprocessing.Queue``."""
    import multiprocessing.queues

    return isinstance(value, (queue_module.Queue, multiprocessing.queues.Queue))


def split_inputs(num_inputs: int, num_workers: int) -> list[range]:
    """Contiguous input slices per worker: ``num_inputs // num_workers`` each, the remainder one
    each to the **last** workers (LitData's ordered split: 5 inputs, 2 workers → [0, 1], [2, 3, 4])."""
    base, extra = divmod(num_inputs, num_workers)
    out, start = [], 0
    for w in range(num_workers):
        size = base + (1 if w >= num_workers - extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def split_aligned(num_inputs: int, num_workers: int, chunk_size: int) -> list[range]:
    """LitData's ``align_chunking=True`` split: every worker but the last gets the same number of whole
    chunks (``num_inputs // chunk_size // num_workers`` of them), the last worker the rest, so that with one
    sample per input the chunk boundaries are those of a single worker."""
    per = (num_inputs // chunk_size // num_workers) * chunk_size
    out = [range(w * per, (w + 1) * per) for w in range(num_workers - 1)]
    out.append(range((num_workers - 1) * per, num_inputs))
    return out


def pack_by_weight(weights: Sequence[float], num_bins: int) -> list[list[int]]:
    """Greedy bin packing of input positions: heaviest first into the lightest bin (ties → lowest bin).

    Returns:
        ``num_bins`` lists of input positions, each in increasing order.
    """
    order = sorted(range(len(weights)), key=lambda i: (-weights[i], i))
    loads = [0.0] * num_bins
    bins: list[list[int]] = [[] for _ in range(num_bins)]
    for i in order:
        target = min(range(num_bins), key=lambda b: (loads[b], b))
        bins[target].append(i)
        loads[target] += weights[i]
    return [sorted(b) for b in bins]


def check_fast_dev_run(fast_dev_run: bool | int) -> int | None:
    """Inputs kept per worker: ``None`` for a full run, else the count.

    Raises:
        ConfigurationError: not a bool or a positive int.
    """
    if fast_dev_run is False:
        return None
    if fast_dev_run is True:
        return DEFAULT_FAST_DEV_RUN_ITEMS
    if not isinstance(fast_dev_run, int) or fast_dev_run <= 0:
        raise ConfigurationError(
            f"fast_dev_run must be True, False or a positive int (inputs per worker), got {fast_dev_run!r}"
        )
    return fast_dev_run


def check_weights(weights: Sequence[float], num_inputs: int) -> list[float]:
    """The weights as floats.

    Raises:
        ConfigurationError: not one positive number per input.
    """
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise ConfigurationError(f"weights must be a sequence of positive numbers, got {type(weights).__name__}")
    if len(weights) != num_inputs:
        raise ConfigurationError(
            f"weights has {len(weights)} entries but inputs has {num_inputs}; give one positive weight per input"
        )
    out: list[float] = []
    for position, w in enumerate(weights):
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
            raise ConfigurationError(f"weights[{position}]={w!r} is not a positive number; every weight must be > 0")
        out.append(float(w))
    return out


def _file_leaves(item: Any) -> list[str]:
    if isinstance(item, (str, os.PathLike)):
        return [os.fspath(item)]
    if isinstance(item, dict):
        return [p for v in item.values() for p in _file_leaves(v)]
    if isinstance(item, (list, tuple)):
        return [p for v in item for p in _file_leaves(v)]
    return []


def file_weights(inputs: Sequence[Any], input_dir: str | os.PathLike[str]) -> list[float]:
    """Per input: total bytes of the files under ``input_dir`` its string/path leaves name (at least 1).

    Matches LitData's ``reorder_files`` sizing; an input without such files weighs 1 instead of
    making the packing fail as in LitData.
    """
    root = Path(input_dir).absolute()
    out: list[float] = []
    for item in inputs:
        total = 0
        for leaf in _file_leaves(item):
            path = Path(leaf) if os.path.isabs(leaf) else root / leaf
            if path.is_file() and root in path.absolute().parents:
                total += path.stat().st_size
        out.append(float(max(total, 1)))
    return out


def _restore(items: Sequence[Any]) -> Sequence[Any]:
    return items


class Picked(Sequence[Any]):
    """``items[positions[k]]`` for every ``k``: a worker's inputs, looked up on access instead of copied.

    Pickled (a job sent to an executor), it becomes what it shows: a ``range`` when both are ranges,
    else a ``list`` of the inputs.
    """

    __slots__ = ("_items", "_positions")

    def __init__(self, items: Sequence[Any], positions: Sequence[int]) -> None:
        self._items = items
        self._positions = positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return Picked(self._items, self._positions[index])
        return self._items[self._positions[index]]

    def __iter__(self) -> Iterator[Any]:
        for position in self._positions:
            yield self._items[position]

    def materialize(self) -> Sequence[Any]:
        """The inputs as a ``range`` (a range picked from a range) or a ``list``."""
        items, positions = self._items, self._positions
        if isinstance(items, range) and isinstance(positions, range) and (not positions or positions[0] >= 0):
            return items[positions.start : positions.stop : positions.step]
        return list(self)

    def __reduce__(self) -> tuple[Any, tuple[Sequence[Any]]]:
        return _restore, (self.materialize(),)


class Batched(Sequence[list[Any]]):
    """``items`` in lists of ``size`` (the last one shorter), each made when it is read (``batch_size``)."""

    __slots__ = ("_items", "_size")

    def __init__(self, items: Sequence[Any], size: int) -> None:
        self._items = items
        self._size = size

    def __len__(self) -> int:
        return -(-len(self._items) // self._size)

    @overload
    def __getitem__(self, index: int) -> list[Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[list[Any]]: ...
    def __getitem__(self, index: int | slice) -> list[Any] | list[list[Any]]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        count = len(self)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(f"batch {index} out of range ({count} batches)")
        start = index * self._size
        return list(self._items[start : start + self._size])


@dataclass(frozen=True)
class Assignment:
    """This node's share of the inputs.

    Attributes:
        positions: One sequence per local worker: the input positions (indexes into ``inputs``) it
            processes, in processing order (a ``range`` for the ordered split, an int64 ``array`` for the
            weighted one; no list of ints per input).
        global_ranks: The global rank of each local worker (``node_rank x num_workers + i``); it names
            the worker's chunk files.
    """

    positions: list[Sequence[int]]
    global_ranks: list[int]

    @property
    def num_inputs(self) -> int:
        """Inputs this node processes."""
        return sum(len(p) for p in self.positions)


def assign_inputs(
    num_inputs: int,
    num_workers: int,
    *,
    num_nodes: int = 1,
    node_rank: int = 0,
    weights: Sequence[float] | None = None,
    keep: int | None = None,
    align: int | None = None,
) -> Assignment:
    """Split ``num_inputs`` over ``num_nodes x num_workers`` workers and return this node's part.

    Args:
        num_inputs: Length of ``inputs``.
        num_workers: Workers per node.
        num_nodes: Nodes in the job.
        node_rank: This node's rank.
        weights: Validated per-input weights for bin packing, or ``None`` for the sequential split.
        keep: ``fast_dev_run``: keep only the first ``keep`` positions of every worker.
        align: ``align_chunking``: the chunk size whose boundaries the split keeps (:func:`split_aligned`).
    """
    world = num_nodes * num_workers
    bins: list[Sequence[int]]
    if weights is None and align is not None:
        bins = list(split_aligned(num_inputs, world, align))
    elif weights is None:
        bins = list(split_inputs(num_inputs, world))
    else:
        bins = [array("q", b) for b in pack_by_weight(check_weights(weights, num_inputs), world)]
    mine = bins[node_rank * num_workers : (node_rank + 1) * num_workers]
    if keep is not None:
        mine = [b[:keep] for b in mine]
    return Assignment(positions=mine, global_ranks=[node_rank * num_workers + i for i in range(num_workers)])
