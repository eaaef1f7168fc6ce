"""The one contract between the reading faces: what they may call on each other besides the public API.

``StreamingDataset``, the Combined / Parallel wrappers, ``StreamingDataLoader``, ``astream(dataset)``,
``train_test_split`` and LitData's ``Cache`` reach into another face only through these protocols
(``tests/test_face_protocol.py`` checks that no other private name crosses objects):

* :class:`Face`: what ``StreamingDataLoader`` calls on the dataset it loads (a ``StreamingDataset`` or a
  Combined / Parallel wrapper): its position in the epoch and its checkpoint.
* :class:`Member`: what the other faces call on a ``StreamingDataset``: its
  :class:`~litstream.read._reader.DatasetReader` (spec, pinned version, source, selection, the samples of given
  pieces on a shared portal), nothing else.
* :class:`Composite`: what ``read/_composite_state.py`` (the wrappers' checkpoints) calls on a Combined /
  Parallel wrapper.

A ``StreamingDataset``'s logic is its reader's; the wrappers' checkpoints are ``read/_composite_state.py``'s,
which drives them through :class:`Composite`; ``astream`` tells a dataset from a location with
``isinstance(x, Member)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._core._distributed import DistributedEnv
    from ._reader import DatasetReader
    from .engine._memory import MemoryLimit
    from .plan._compose import Composer
    from .plan._pieces import ShuffleMode
    from .plan._resume_types import Level, Topology

__all__ = ["Composite", "Face", "Member", "ResumePosition"]


class ResumePosition(Protocol):
    """A loaded checkpoint resolved for this rank and topology (``ResumePlan`` or ``CompositePlan``)."""

    @property
    def consumed(self) -> Sequence[int]: ...
    @property
    def levels(self) -> tuple[Level, ...]: ...
    @property
    def start(self) -> int: ...
    @property
    def finished(self) -> bool: ...


class Face(Protocol):
    """What ``StreamingDataLoader`` calls on its dataset besides LitData's public methods."""

    current_epoch: int
    _kind: str  # "dataset", "combined" or "parallel": the kind a checkpoint records

    def set_epoch(self, current_epoch: int) -> None: ...
    def set_shuffle(self, shuffle: ShuffleMode) -> None: ...
    def set_drop_last(self, drop_last: bool) -> None: ...
    def set_batch_size(self, batch_size: int) -> None: ...
    def set_num_workers(self, num_workers: int) -> None: ...
    def worker_lengths(self, num_workers: int, batch_size: int) -> list[int]: ...

    def _config(self) -> dict[str, Any]:
        """The settings a checkpoint of this dataset must match."""

    def _pin_distributed(self) -> None:
        """Record this process's rank and world size for the DataLoader workers about to start."""

    def _resume_plan(self, num_workers: int) -> ResumePosition | None:
        """The loaded checkpoint resolved for ``num_workers``, or ``None`` when none is pending."""

    def _clear_resume(self) -> None:
        """Forget a loaded checkpoint (its epoch was served or abandoned)."""

    def _epoch_served(self, epoch: int, own: Sequence[int], levels: Sequence[Level], num_workers: int) -> None:
        """``epoch`` ended after this rank's workers served ``own`` samples at its current level."""

    def _fit_loader_prefetch(self, limit: MemoryLimit, num_workers: int) -> int | None:
        """Under a memory ``limit``, the loader's ``prefetch_factor`` whose batches fit, or ``None``."""

    def _set_loader_prefetch(self, prefetch_factor: int) -> None:
        """Tell the dataset (every member) the batches a worker builds ahead, which its memory share counts."""


@runtime_checkable
class Member(Face, Protocol):
    """What the other faces (and ``read/_composite_state.py``) call on a ``StreamingDataset``: its reader."""

    _reader: DatasetReader  # the read's state and operations; its transforms as last set by the dataset

    _loader_group: tuple[int, bool] | None  # StreamingDataLoader's batch size and column batches, while it starts

    def _open_reader(self) -> DatasetReader:
        """The reader, with the dataset's transforms (a subclass's ``transform`` too) as they are now."""

    def _with_reader(self, reader: DatasetReader) -> Member:
        """A copy of the dataset reading with ``reader`` (a subset or split of it)."""


class Composite(Face, Protocol):
    """What ``read/_composite_state.py`` reads of a Combined / Parallel wrapper (it writes none of it)."""

    _datasets: list[Member]
    _force_override_state_dict: bool
    num_workers: int

    def _env(self) -> DistributedEnv:
        """Rank and world size (one node only)."""

    def _composer(self) -> Composer:
        """The members' plans composed into this wrapper's stream."""

    def _cycles(self) -> bool:
        """Whether an epoch continues the member cycles of the previous one (a cycling Parallel)."""

    def _carry_for(self, epoch: int, topology: Topology) -> tuple[int, ...] | None:
        """The cycle bases of ``epoch`` on ``topology`` when known, else ``None``."""

    def _topology(self, num_workers: int, batch_size: int | None = None) -> Topology:
        """This rank's topology with ``num_workers`` workers."""
