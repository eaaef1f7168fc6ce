"""Cross-chunk shuffle (``shuffle="window"``): the serving order of one worker's plan, window by window.

``FullShuffle`` permutes the items of each chunk on their own, so on a dataset written in sorted
order (by label, by source, by date) a worker still serves one chunk's worth of neighbours at a
time. The window shuffle keeps ``FullShuffle``'s plan (the same chunks, slices and item counts per
worker, so lengths and batch counts do not change) and changes only the order inside it::

    plan (slices, from read.plan._plan.worker_plan with shuffle=True)
      s0 s1 s2 s3 s4 s5 s6 s7 | s8 s9 s10 ...          consecutive slices, ``shuffle_window`` per window
      └──────── window 0 ─────┘ └── window 1 ...
    window w serves the union of its slices' items in the permutation drawn by
    RandomState([seed, epoch, global_worker, w])

A worker's slices come from distinct chunks, so a window holds at most ``shuffle_window`` chunks:
the reader needs one window of chunks in memory (plus its prefetch), never more. Every item of the
plan is served exactly once, and the order is a pure function of the plan, seed, epoch and global
worker id, so a resumed worker can skip exactly what it served (:func:`window_position`).

Pure and synchronous, like ``read.plan._plan``. This is litstream's own order; LitData has no equivalent.
Items are ``(chunk_index, chunk-local item)`` pairs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._assign import as_int, check_rng

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._assign import ChunkSlice

__all__ = ["DEFAULT_SHUFFLE_WINDOW", "window_items", "window_order", "window_position", "windows"]

DEFAULT_SHUFFLE_WINDOW = 8  # chunks per window


def _check_window(shuffle_window: int) -> int:
    return as_int("shuffle_window", shuffle_window, minimum=1, fix="pass the number of chunks per window, e.g. 8")


def windows(plan: Sequence[ChunkSlice], shuffle_window: int) -> list[tuple[ChunkSlice, ...]]:
    """Group a worker's consecutive slices into windows of up to ``shuffle_window`` slices.

    Args:
        plan: The worker's slices, in plan order (e.g. from ``read.plan._plan.worker_plan``).
        shuffle_window: Slices (so chunks) per window, ``>= 1``; the last window may hold fewer.

    Raises:
        PlanError: ``shuffle_window < 1``.
    """
    size = _check_window(shuffle_window)
    return [tuple(plan[i : i + size]) for i in range(0, len(plan), size)]


def window_items(
    window: Sequence[ChunkSlice], *, seed: int, epoch: int, global_worker: int, window_index: int
) -> list[tuple[int, int]]:
    """Return the ``(chunk_index, item)`` pairs of ``window`` in serving order.

    The pool is every item of the window's slices, slice after slice, ascending inside each; it is
    served in ``RandomState([seed, epoch, global_worker, window_index]).permutation(len(pool))``.

    Args:
        window: One entry of :func:`windows`.
        seed: Shuffle seed in ``[0, 2**32)``.
        epoch: 1-based epoch number.
        global_worker: ``rank * K + worker`` of the worker that serves the plan.
        window_index: Position of ``window`` in :func:`windows`, ``>= 0``.

    Raises:
        PlanError: A bad argument; the message names it.
    """
    seed, epoch = check_rng(seed, epoch)
    g = as_int("global_worker", global_worker, minimum=0, fix="pass rank * max(num_workers, 1) + worker")
    w = as_int("window_index", window_index, minimum=0, fix="pass the window's position in the plan")
    chunks = np.concatenate([np.full(len(s), s.chunk_index, dtype=np.int64) for s in window] or [np.zeros(0, np.int64)])
    items = np.concatenate([np.arange(s.start, s.end, dtype=np.int64) for s in window] or [np.zeros(0, np.int64)])
    perm = np.random.RandomState([seed, epoch, g, w]).permutation(len(items))
    return list(zip(chunks[perm].tolist(), items[perm].tolist(), strict=True))


def window_order(
    plan: Sequence[ChunkSlice], *, shuffle_window: int, seed: int, epoch: int, global_worker: int
) -> list[tuple[int, int]]:
    """Return every ``(chunk_index, item)`` pair ``plan`` serves, in order (all windows, concatenated).

    Convenient for tests and small plans; the reader walks :func:`windows` one at a time instead.

    Raises:
        PlanError: A bad argument; the message names it.
    """
    out: list[tuple[int, int]] = []
    for index, window in enumerate(windows(plan, shuffle_window)):
        out += window_items(window, seed=seed, epoch=epoch, global_worker=global_worker, window_index=index)
    return out


def window_position(plan: Sequence[ChunkSlice], shuffle_window: int, consumed: int) -> tuple[int, int]:
    """Locate where a worker resumes after serving ``consumed`` items of ``plan`` in window order.

    Returns:
        ``(window_index, offset)``: resume in window ``window_index`` of :func:`windows`, dropping
        the first ``offset`` pairs of its :func:`window_items` (``0 <= offset <`` its size).
        ``(len(windows(plan, shuffle_window)), 0)`` when nothing is left, including when
        ``consumed`` exceeds the plan's total.

    Raises:
        PlanError: ``consumed`` is negative or ``shuffle_window < 1``.
    """
    left = as_int("consumed", consumed, minimum=0, fix="pass the number of items already served")
    groups = windows(plan, shuffle_window)
    for index, window in enumerate(groups):
        size = sum(len(s) for s in window)
        if left < size:
            return index, left
        left -= size
    return len(groups), 0
