"""The values resume works with: topologies, stream segments, the epoch spec and resume levels.

Plain frozen dataclasses; the logic that uses them is in :mod:`._resume`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._assign import DEFAULT_ITEM_SHUFFLE_WINDOW
from ._window import DEFAULT_SHUFFLE_WINDOW

if TYPE_CHECKING:
    from ._pieces import ShuffleMode
    from ._plan import ChunkSlice

__all__ = ["EpochSpec", "Level", "Segment", "Stream", "Topology", "Window"]


@dataclass(frozen=True)
class Topology:
    """World size, DataLoader workers per rank (``>= 1``; 0 workers count as 1) and batch size."""

    world_size: int
    num_workers: int
    batch_size: int

    def as_dict(self) -> dict[str, int]:
        return {"world_size": self.world_size, "num_workers": self.num_workers, "batch_size": self.batch_size}


@dataclass(frozen=True)
class Window:
    """One window of a worker's level-0 plan with ``shuffle="window"`` (see ``read.plan._window``)."""

    slices: tuple[ChunkSlice, ...]
    global_worker: int
    index: int

    def __len__(self) -> int:
        return sum(len(s) for s in self.slices)


@dataclass(frozen=True)
class Segment:
    """Positions ``[start, end)`` of a unit's serving order: a slice's ``item_order`` or a window's
    ``window_items``. A stream is a list of segments."""

    unit: ChunkSlice | Window
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class EpochSpec:
    """What the level-0 plan of an epoch depends on besides the topology.

    Attributes:
        chunk_sizes: Items per chunk (every item of a chunk may be served).
        shuffle: A ``ShuffleMode``: ``False``, ``True``/``"full"`` or ``"window"``.
        seed: Shuffle seed in ``[0, 2**32)``.
        epoch: 1-based epoch.
        drop_last: The *effective* ``drop_last`` of level 0 (``None`` already resolved with its
            world size).
        shuffle_window: Slices per window with ``shuffle="window"``.
        regions: The chunk-local ``(start, end)`` items of each chunk that may be served; ``None``:
            every item (a subsample, subset or split passes its selected chunks' regions, with
            ``chunk_sizes`` the sizes of those chunks' files).
        item_shuffle_window: In-chunk shuffle block size with ``shuffle=True`` (``read.plan._assign.item_order``).
    """

    chunk_sizes: tuple[int, ...]
    shuffle: ShuffleMode
    seed: int
    epoch: int
    drop_last: bool
    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW
    regions: tuple[tuple[int, int], ...] | None = None
    item_shuffle_window: int = DEFAULT_ITEM_SHUFFLE_WINDOW

    @property
    def mode(self) -> str:
        """``"none"``, ``"full"`` or ``"window"``."""
        return "none" if self.shuffle is False else "window" if self.shuffle == "window" else "full"


@dataclass(frozen=True)
class Level:
    """A closed level: its topology and the items consumed from each global worker's stream."""

    topology: Topology
    consumed: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {**self.topology.as_dict(), "consumed": list(self.consumed)}


Stream = list[Segment]
