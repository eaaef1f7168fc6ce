"""The item order of one planned slice, computed only once its chunk has been read and checked.

The read plan is built from ``index.json`` alone, and an index is a stranger's: it may claim that a
chunk holds 2^32 - 1 items. Expanding such a claim into one id per item (``list(range(n))``, a
permutation of ``n``) before the chunk is read would allocate gigabytes on the strength of a number.
A :class:`LazyOrder` records only the slice and the shuffle inputs; its ids are made when a
:class:`~litstream.read.engine._engine.ChunkWork` is built, which happens after the chunk's view exists, and
every view has already been checked against its own header (the item count it really holds,
``read/source/_source.py``). A claim the chunk does not back is therefore a ``FormatError`` naming the file,
and memory is bounded by what the chunk holds. An unshuffled slice never expands at all: it is a
``range``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, overload

from ._assign import ChunkSlice, as_int, check_rng, item_order

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Deferred", "LazyOrder", "chained", "resolve_order"]


class _LazyIds(Sequence[int]):
    """Positions ``[begin, end)`` of an id order that :meth:`_make_all` computes on first use.

    The one shape both lazy orders share: ``len()`` and slicing with step 1 cost nothing (a slice is a
    copy of this object with other bounds, sharing the inputs and the box that holds the order once
    made); anything else (an element, iteration, :meth:`resolve`) makes the ids once for every slice.
    """

    __slots__ = ("_begin", "_box", "_end")

    def __init__(self, length: int) -> None:
        self._begin, self._end = 0, length
        self._box: list[Sequence[int]] = []  # the full order, once made (shared by slices)

    def _make_all(self) -> Sequence[int]:
        """The full order (all ``length`` ids this object was built with)."""
        raise NotImplementedError

    def resolve(self) -> Sequence[int]:
        """The ids, in serving order."""
        if not self._box:
            self._box.append(self._make_all())
        return self._box[0][self._begin : self._end]

    def __len__(self) -> int:
        return self._end - self._begin

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return self.resolve()[index]
            part = copy.copy(self)  # shares the inputs and the box
            part._begin, part._end = self._begin + start, self._begin + max(start, stop)
            return part
        return self.resolve()[index]

    def __iter__(self) -> Iterator[int]:
        return iter(self.resolve())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == len(self) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # a sequence of ids, compared by value like a list


class LazyOrder(_LazyIds):
    """Positions ``[begin, end)`` of :func:`~litstream.read.plan._assign.item_order` for ``piece``, made on demand.

    ``len()`` and slicing with step 1 cost nothing; anything else (an element, iteration,
    :meth:`resolve`) makes the ids: a ``range`` when not shuffled, else the permutation (a list), computed
    once and shared with every slice of this order.

    Raises:
        PlanError: (when built) a bad ``seed``, ``epoch``, ``num_chunks`` or ``item_window``, as
            :func:`~litstream.read.plan._assign.item_order` would.
    """

    __slots__ = ("_args", "_piece")

    def __init__(
        self,
        piece: ChunkSlice,
        *,
        num_chunks: int,
        shuffle: bool,
        seed: int,
        epoch: int,
        item_window: int,
    ) -> None:
        seed, epoch = check_rng(seed, epoch)
        as_int("num_chunks", num_chunks, minimum=piece.chunk_index + 1, fix="pass the dataset's chunk count")
        as_int("item_window", item_window, minimum=0, fix="pass 256 (LitData's default) or 0 (full)")
        super().__init__(len(piece))
        self._piece = piece
        self._args = (num_chunks, shuffle, seed, epoch, item_window)

    def _make_all(self) -> Sequence[int]:
        num_chunks, shuffle, seed, epoch, window = self._args
        if not shuffle:
            return range(self._piece.start, self._piece.end)
        return item_order(self._piece, num_chunks=num_chunks, shuffle=True, seed=seed, epoch=epoch, item_window=window)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyOrder) and (other._piece, other._args) == (self._piece, self._args):
            return (other._begin, other._end) == (self._begin, self._end)
        return super().__eq__(other)

    def __repr__(self) -> str:
        return f"LazyOrder({self._piece!r}, [{self._begin}, {self._end}))"


class Deferred(_LazyIds):
    """``length`` ids that ``make()`` computes on first use (then shared by every slice of this one).

    For the orders that mix several slices (a window of ``shuffle="window"``, the runs of an elastic
    resume): like :class:`LazyOrder`, ``len()`` and step-1 slicing cost nothing, so a plan built from
    recorded counts allocates nothing per item until the chunks are read and checked (``make`` then
    raises nothing new: a claim the chunk does not back fails when its view is made).
    """

    __slots__ = ("_make",)

    def __init__(self, length: int, make: Callable[[], Sequence[int]]) -> None:
        super().__init__(length)
        self._make = make

    def _make_all(self) -> Sequence[int]:
        return self._make()

    def __repr__(self) -> str:
        return f"Deferred({len(self)} ids)"


def chained(orders: Sequence[Sequence[int]]) -> Sequence[int]:
    """``orders`` one after the other, without making any lazy one's ids before they are used."""
    if len(orders) == 1:
        return orders[0]
    return Deferred(sum(len(o) for o in orders), lambda: [i for o in orders for i in resolve_order(o)])


def resolve_order(order: Sequence[int]) -> Sequence[int]:
    """``order``'s ids if it is a :class:`LazyOrder` or :class:`Deferred`, else ``order`` itself."""
    return order.resolve() if isinstance(order, _LazyIds) else order
