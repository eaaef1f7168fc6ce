"""The one contract between the reading faces: what they may call on each other besides the public API.

``StreamingDataset``, the Combined / Parallel wrappers, ``StreamingDataLoader``, ``astream(dataset)``,
``train_test_split`` and LitData's ``Cache`` reach into another face only through these protocols
(``tests/test_face_protocol.py`` checks that no other private name crosses objects):

* :class:`Face`: what ``StreamingDataLoader`` calls on the dataset it loads (a ``StreamingDataset`` or a
  Combined / Parallel wrapper): its position in the epoch and its checkpoint.
* :class:`Member`: what the other faces call on a ``StreamingDataset``: its spec, its opened source, its
  selection and the pump that serves given pieces on a shared portal.
* :class:`Composite`: what ``read/_composite_state.py`` (the wrappers' checkpoints) calls on a Combined /
  Parallel wrapper.

The engine modules that hold a face's logic (``read/_dataset_state.py``, ``read/_composite_state.py``) drive
it through these protocols too; ``astream`` tells a dataset from a location with ``isinstance(x, Member)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Sequence

    from anyio.from_thread import BlockingPortal

    from .._core._distributed import DistributedEnv
    from ._limits import MaxMemory
    from ._memory import MemoryLimit
    from ._shuffler import Shuffle
    from ._source import DatasetSource
    from ._spec import ReadSpec
    from .plan._checkpoint import CycleCarry
    from .plan._compose import Composer
    from .plan._compose_resume import CompositePlan
    from .plan._pieces import Piece, ShuffleMode
    from .plan._resume_types import Level, Topology
    from .plan._subset import Selection

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
    """What the other faces (and ``read/_dataset_state.py``) call on a ``StreamingDataset``."""

    _spec: ReadSpec
    _resume_state: dict[str, Any] | None
    _resume: Any
    _force_override_state_dict: bool
    num_canonical_nodes: int | None
    batch_size: int
    max_memory: MaxMemory
    shuffler: Shuffle | None
    _loader_group: tuple[int, bool] | None  # StreamingDataLoader's batch size and column batches, while it starts
    _loader_prefetch: int  # batches a DataLoader worker builds ahead (0: not in a loader)
    _parent_env: DistributedEnv | None  # rank and world size of the process that started the workers

    @property
    def transforms(self) -> list[Callable[[Any], Any]]:
        """The callables applied to each sample, in order."""

    def __getitem__(self, index: int | slice | str) -> Any: ...

    def _read_spec(self) -> ReadSpec:
        """The spec of what this dataset serves: its transforms (a subclass's too) and its selection."""

    def _get_source(self) -> DatasetSource:
        """The opened dataset (index, decoder) in this process."""

    def _selected(self) -> Selection | None:
        """The items served (subset, split or the resolved subsample), ``None`` for every item once."""

    def _distributed(self) -> DistributedEnv:
        """Rank and world size (in a DataLoader worker, those of the process that started it)."""

    def _state_config(self) -> dict[str, Any]:
        """``_config()`` plus the keys LitData writes into a dataset state."""

    def _litdata_layout(self) -> tuple[Sequence[int], Sequence[tuple[int, int]] | None]:
        """Chunk sizes and regions of what is served, as LitData's states count them."""

    def _serve(self, pieces: Sequence[Piece], portal: BlockingPortal, members: int = 1) -> Generator[Any, None, None]:
        """The samples of ``pieces``, fetched on ``portal``'s loop (``members``: readers sharing the memory)."""

    def _replace_spec(self, **changes: Any) -> None:
        """Replace the spec's ``changes`` (checked); the dataset is opened again in this process."""

    def _apply(self, sample: Any) -> Any:
        """``sample`` after this dataset's transforms."""


class Composite(Face, Protocol):
    """What ``read/_composite_state.py`` calls on a Combined / Parallel wrapper."""

    _datasets: list[Member]
    _force_override_state_dict: bool
    _resume_state: dict[str, Any] | None
    _resume: CompositePlan | None
    _carry: CycleCarry | None
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
