"""Which items of a dataset are served: subsample, subset and split, as chunk regions (pure, no I/O).

A :class:`Selection` is LitData's ``subsampled_files`` + ``region_of_interest`` pair: an ordered list
of *selected chunks*, each a chunk file of ``index.json`` (``chunks[j]``, the file's position there)
and a chunk-local item range ``[start, end)`` of it. The read plan (``read.plan._plan``) runs on the
selected chunks as if they were the dataset's chunks: selected chunk ``v`` is chunk id ``v`` (so a file
listed twice, as with ``subsample > 1``, has two ids, as in LitData), and the pieces it produces are
mapped back to chunk files with :meth:`Selection.file_pieces` before anything is fetched. Item ids
stay chunk-local to the file, so a region never needs the file re-encoded.

The dataset index space (``ds[i]``, ``len``) is the regions concatenated in selection order.

* :func:`subsample_selection` — LitData's ``subsample`` (spec read.md §2.6): whole copies for each
  full unit of the fraction, then the first ``int(total * rest)`` items; with ``shuffle`` the chunk
  list is permuted by ``RandomState([seed])`` before each copy (the same generator throughout).
* :func:`subset_selection` — LitData's ``StreamingDataset.subset(indices)``.
* :func:`split_selection` — LitData's ``train_test_split``: ``int(total * f)`` items per fraction,
  carved off one after the other from the (optionally permuted) chunk list.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np

from ..._core._errors import ConfigurationError
from ._pieces import ChunkWindow
from ._plan import ChunkSlice

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._pieces import Piece

__all__ = [
    "Region",
    "Selection",
    "check_selection_state",
    "check_splits",
    "check_subsample",
    "resolve_selection",
    "split_selection",
    "subsample_selection",
    "subset_selection",
]

Region = tuple[int, int]
"""A chunk-local item range ``(start, end)``, end exclusive."""


@dataclass(frozen=True)
class Selection:
    """Selected chunks, in serving order, and the item range of each.

    Attributes:
        chunks: ``chunks[v]`` is the position in ``index.json``'s ``chunks`` of selected chunk ``v``
            (a file may appear several times).
        regions: ``regions[v] = (start, end)``: the chunk-local items of selected chunk ``v`` that are
            served, end exclusive; ``0 <= start <= end <= chunk_size``.
    """

    chunks: tuple[int, ...]
    regions: tuple[Region, ...]

    @classmethod
    def full(cls, chunk_sizes: Sequence[int]) -> Selection:
        """Every chunk in index order, whole (LitData's default region of interest)."""
        return cls(tuple(range(len(chunk_sizes))), tuple((0, int(n)) for n in chunk_sizes))

    @cached_property
    def _ends(self) -> list[int]:
        return list(itertools.accumulate(end - start for start, end in self.regions))

    def __len__(self) -> int:
        """Items selected (the dataset's length in one process)."""
        return self._ends[-1] if self._ends else 0

    def sizes(self, chunk_sizes: Sequence[int]) -> list[int]:
        """The item count of each selected chunk's file (``chunk_sizes`` is per ``index.json`` chunk)."""
        return [chunk_sizes[c] for c in self.chunks]

    def locate(self, index: int) -> tuple[int, int]:
        """``(chunk file position, chunk-local item)`` of item ``index`` (0-based, ``< len(self)``)."""
        v = bisect.bisect_right(self._ends, index)
        before = self._ends[v - 1] if v else 0
        return self.chunks[v], self.regions[v][0] + index - before

    def file_pieces(self, pieces: Sequence[Piece]) -> list[Piece]:
        """Map the chunk ids of plan pieces (selected-chunk ids) to chunk file positions."""
        out: list[Piece] = []
        for piece, order in pieces:
            if isinstance(piece, ChunkSlice):
                out.append((ChunkSlice(self.chunks[piece.chunk_index], piece.start, piece.end), order))
            else:
                out.append((ChunkWindow(tuple(self.chunks[c] for c in piece.chunks), piece.bases), order))
        return out

    def state(self, filenames: Sequence[str]) -> dict[str, list[str] | list[list[int]]]:
        """LitData's checkpoint keys ``subsampled_files`` and ``region_of_interest`` (JSON values)."""
        return {
            "subsampled_files": [filenames[c] for c in self.chunks],
            "region_of_interest": [[start, end] for start, end in self.regions],
        }

    def _pairs(self) -> list[tuple[int, Region]]:
        return list(zip(self.chunks, self.regions, strict=True))

    @classmethod
    def _of(cls, pairs: Sequence[tuple[int, Region]]) -> Selection:
        return cls(tuple(c for c, _ in pairs), tuple(r for _, r in pairs))


def _short(values: Sequence[Any]) -> str:
    return repr(values) if len(values) <= 6 else f"[{', '.join(map(repr, values[:6]))}, ... ({len(values)} entries)]"


def check_selection_state(
    state: Mapping[str, Any], selection: Selection, chunk_sizes: Sequence[int], filenames: Sequence[str]
) -> None:
    """Raise unless checkpoint ``state`` was saved by a dataset serving ``selection``.

    A checkpoint without LitData's ``subsampled_files`` / ``region_of_interest`` keys was saved by a
    whole dataset (litstream writes them only for a subsample, subset or split; LitData always).

    Raises:
        ConfigurationError: naming the key, both values (shortened) and the fix.
    """
    mine = selection.state(filenames)
    full = Selection.full(chunk_sizes).state(filenames)
    for key in ("subsampled_files", "region_of_interest"):
        raw = state.get(key)
        saved = full[key] if raw is None else [list(v) if isinstance(v, (list, tuple)) else v for v in raw]
        if saved != mine[key]:
            raise ConfigurationError(
                f"checkpoint has {key}={_short(saved)} but this dataset has {key}={_short(mine[key])}: it "
                "serves other items (subsample, subset() or train_test_split differ); build the dataset "
                "as in the run that saved it, or start without the checkpoint"
            )


def check_subsample(subsample: object) -> float:
    """Return ``subsample`` as a float after checking it is a finite number ``> 0``.

    LitData accepts only a ``float``; an ``int`` such as ``2`` is accepted here too.

    Raises:
        ConfigurationError: naming the value and the fix.
    """
    if isinstance(subsample, bool) or not isinstance(subsample, (int, float)):
        raise ConfigurationError(
            f"subsample must be a float > 0 (the fraction of the dataset to serve), got {subsample!r}; "
            "pass e.g. subsample=0.5 for half of the items or 2.0 for every item twice"
        )
    value = float(subsample)
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(
            f"subsample must be a finite float > 0, got {subsample!r}; pass e.g. subsample=0.5 (half) or 1.0 (all)"
        )
    return value


def _permuted(pairs: list[tuple[int, Region]], rng: np.random.RandomState) -> list[tuple[int, Region]]:
    return [pairs[i] for i in rng.permutation(len(pairs)).tolist()]


Pairs = list[tuple[int, Region]]


def _carve(pairs: Sequence[tuple[int, Region]], count: int) -> tuple[Pairs, Pairs]:
    """Split ``pairs`` after ``count`` items: a chunk whose region straddles the cut is split in two."""
    head: list[tuple[int, Region]] = []
    left = count
    for i, (chunk, (start, end)) in enumerate(pairs):
        if left == 0:
            return head, list(pairs[i:])
        size = end - start
        if size <= left:
            head.append((chunk, (start, end)))
            left -= size
            continue
        head.append((chunk, (start, start + left)))
        return head, [(chunk, (start + left, end)), *pairs[i + 1 :]]
    return head, []


def subsample_selection(base: Selection, subsample: float, *, shuffle: bool, seed: int) -> Selection:
    """LitData's subsample of ``base`` (spec read.md §2.6).

    ``subsample`` close to 1 (``math.isclose``) returns ``base``. Otherwise, while the fraction left
    is ``>= 1``, one whole copy of the chunk list is added and 1 subtracted; a remaining fraction
    ``s > 0`` adds the first ``int(len(base) * s)`` items of the chunk list (the last chunk cut).
    With ``shuffle`` the chunk list is permuted before every copy and before the partial one, all
    with one ``RandomState([seed])``; without it, ``subsample < 1`` is a prefix of the dataset.

    Args:
        base: What is being subsampled (normally :meth:`Selection.full`).
        subsample: Checked fraction ``> 0`` (see :func:`check_subsample`); above 1 upsamples.
        shuffle: Whether the dataset shuffles (any shuffle mode but ``False``).
        seed: The dataset's seed, an int in ``[0, 2**32)``.
    """
    if math.isclose(subsample, 1.0):
        return base
    rng = np.random.RandomState([seed]) if shuffle else None
    pairs = base._pairs()
    out: list[tuple[int, Region]] = []
    rest = subsample
    while rest >= 1.0:
        if rng is not None:
            pairs = _permuted(pairs, rng)
        out += pairs
        rest -= 1.0
    if rest > 0:
        if rng is not None:
            pairs = _permuted(pairs, rng)
        out += _carve(pairs, int(len(base) * rest))[0]
    return Selection._of(out)


def subset_selection(base: Selection, indices: Sequence[int] | slice) -> Selection:
    """The items ``indices`` of ``base`` (its dataset index space), in the order given.

    Consecutive indices inside one region become one region, so ``range(a, b)`` costs one region per
    chunk it touches. An index may repeat (the item is then served again).

    Raises:
        ConfigurationError: an index that is not an int or is outside ``[0, len(base))``.
    """
    total = len(base)
    if isinstance(indices, slice):
        indices = range(*indices.indices(total))
    if isinstance(indices, (str, bytes)) or not hasattr(indices, "__iter__"):
        raise ConfigurationError(f"indices must be a sequence of ints or a slice, got {indices!r:.80}")
    out: list[tuple[int, Region]] = []
    previous = -1
    for position, raw in enumerate(indices):
        if isinstance(raw, bool) or not isinstance(raw, SupportsIndex):
            raise ConfigurationError(f"indices[{position}] must be an int, got {raw!r}")
        index = operator.index(raw)
        if not 0 <= index < total:
            raise ConfigurationError(
                f"indices[{position}]={index} is outside the dataset's [0, {total}); subset() takes indices of "
                "this dataset (0-based, no negative indices)"
            )
        v = bisect.bisect_right(base._ends, index)
        before = base._ends[v - 1] if v else 0
        chunk, (start, _) = base.chunks[v], base.regions[v]
        item = start + index - before
        if out and previous == v and out[-1][1][1] == item:
            out[-1] = (chunk, (out[-1][1][0], item + 1))
        else:
            out.append((chunk, (item, item + 1)))
        previous = v
    return Selection._of(out)


def check_splits(splits: object) -> list[float]:
    """Return ``splits`` as floats after checking each is in ``[0, 1]`` and their sum ``<= 1``.

    Raises:
        ConfigurationError: (a ``ValueError``) naming ``splits``, the offending value and the fix.
    """
    if isinstance(splits, (str, bytes)) or not hasattr(splits, "__iter__"):
        raise ConfigurationError(f"splits must be a list of fractions such as [0.8, 0.1, 0.1], got {splits!r:.80}")
    values = list(splits)
    if not values:
        raise ConfigurationError("splits must hold at least one fraction, got []; pass e.g. splits=[0.8, 0.2]")
    out: list[float] = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ConfigurationError(
                f"splits[{i}]={value!r} must be a fraction in [0, 1]; pass e.g. splits=[0.8, 0.1, 0.1]"
            )
        out.append(float(value))
    total = math.fsum(out)
    if total > 1 + 1e-9:
        raise ConfigurationError(
            f"splits={values!r} sum to {total:g}, more than 1; the fractions must sum to at most 1 "
            "(what is left over is in no split)"
        )
    return out


def split_selection(base: Selection, splits: Sequence[float], *, seed: int, shuffle: bool) -> list[Selection]:
    """LitData's ``train_test_split`` on selections: disjoint parts of ``int(len(base) * f)`` items.

    With ``shuffle`` the chunk list is permuted once by ``RandomState([seed])``; then each part takes
    the next ``int(len(base) * f)`` items in chunk order, a chunk whose region straddles two parts
    being split between them. Items beyond the parts' total are in none.

    Args:
        base: What is split.
        splits: Checked fractions (see :func:`check_splits`).
        seed: An int in ``[0, 2**32)``.
        shuffle: Permute the chunk list first.
    """
    pairs = base._pairs()
    if shuffle:
        pairs = _permuted(pairs, np.random.RandomState([seed]))
    total = len(base)
    out: list[Selection] = []
    for fraction in splits:
        head, pairs = _carve(pairs, int(total * fraction))
        out.append(Selection._of(head))
    return out


def resolve_selection(
    chunk_sizes: Sequence[int], *, explicit: Selection | None, subsample: float, shuffle: bool, seed: int
) -> Selection | None:
    """The selection a dataset serves: ``explicit`` if given, else the subsample of every chunk.

    Returns ``None`` when every item of every chunk is served once, in index order (the fast path).
    """
    if explicit is not None:
        return explicit
    if math.isclose(subsample, 1.0):
        return None
    return subsample_selection(Selection.full(chunk_sizes), subsample, shuffle=shuffle, seed=seed)
