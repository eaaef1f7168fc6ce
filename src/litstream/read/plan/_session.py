"""The read session of one dataset: what one reader serves in one epoch (backend neutral, no I/O).

Every face of the reader drives this module — ``StreamingDataset.__iter__`` (sync, one portal per
DataLoader worker), :func:`litstream.astream` (asyncio or trio) and the Combined / Parallel
wrappers (``read.plan._session_compose``) — so a feature of one face is a feature of all.

Given the dataset (its :class:`~litstream.read.source._source.DatasetSource` and selection), the plan
arguments of the reader (:class:`~litstream.read.plan._pieces.ReadPlanArgs`: rank, world size, worker,
workers, batch size, shuffle, seed, epoch, drop_last) and a checkpoint, :func:`open_session` decides:

* **fresh**: no checkpoint; the plan of ``args.epoch`` (``read.plan._plan``);
* **strict resume**: the checkpoint's topology; logical worker ``(start + worker) % K`` drops what
  it already served (``read.plan._resume`` explains ``start``);
* **elastic resume**: another topology; the reader serves its run of the restriped remainder;
* **next epoch**: a checkpoint taken at the end of its epoch starts the following epoch afresh.

:func:`~litstream.read.engine._engine.split_head` is the head-chunk fast path of a local, uncompressed dataset, and
:class:`StreamPosition` counts what a single reader (``astream``) served so that it can write its
own checkpoint (``read.plan._checkpoint``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..._core._errors import ConfigurationError
from ._checkpoint import DatasetCheckpoint
from ._pieces import ReadPlanArgs, plan_pieces
from ._resume import ResumePlan, Topology, resolve_resume
from ._resume_config import check_config
from ._subset import Selection, check_selection_state

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..source._source import DatasetSource
    from ._pieces import Piece
    from ._resume_types import Level

__all__ = ["Session", "StreamPosition", "open_session", "resume_plan"]


@dataclass(frozen=True)
class Session:
    """What one reader serves in one epoch, as decided by :func:`open_session`.

    Attributes:
        epoch: The 1-based epoch served; the next session of this reader is ``epoch + 1``.
        pieces: The chunk pieces, in serving order, with the item order inside each.
        logical: The logical worker served (torch worker ``j`` of a resumed run serves
            ``(start + j) % K``; otherwise the worker itself).
        served: Samples of this logical worker already served at this level (strict resume).
        levels: Levels closed by elastic resumes earlier in this epoch (empty otherwise).
        restarted: The checkpoint was taken at the end of its epoch: this is the next one, fresh.
    """

    epoch: int
    pieces: list[Piece]
    logical: int = 0
    served: int = 0
    levels: tuple[Level, ...] = ()
    restarted: bool = False


def resume_plan(
    state: Mapping[str, Any] | DatasetCheckpoint,
    source: DatasetSource,
    selection: Selection | None,
    *,
    rank: int,
    topology: Topology,
    shuffle_window: int,
) -> ResumePlan:
    """Resolve a dataset checkpoint for ``rank`` of a run on ``topology`` (see ``read.plan._resume``).

    Raises:
        ConfigurationError: a malformed checkpoint or counts its epoch cannot hold.
    """
    sizes = source.chunk_sizes
    return resolve_resume(
        state,
        chunk_sizes=sizes if selection is None else selection.sizes(sizes),
        rank=rank,
        topology=topology,
        shuffle_window=shuffle_window,
        regions=None if selection is None else selection.regions,
    )


def open_session(
    source: DatasetSource, args: ReadPlanArgs, selection: Selection | None, resume: ResumePlan | None
) -> Session:
    """Decide the pieces of the reader ``args`` describes (fresh, strict, elastic or next epoch).

    Args:
        source: The open dataset.
        args: The reader: rank, world size, worker and workers, batch size, shuffle, seed, epoch
            (used when there is no pending checkpoint), drop_last.
        selection: The items the dataset serves (subsample, subset, split), or ``None``: all.
        resume: A checkpoint resolved for this rank and topology (:func:`resume_plan`), or ``None``.
    """
    restarted = False
    if resume is not None and resume.finished:  # saved at the end of its epoch: go on with the next
        args, resume, restarted = replace(args, epoch=resume.spec.epoch + 1), None, True
    if resume is None:
        return Session(args.epoch, plan_pieces(source, args, selection), args.worker, restarted=restarted)
    logical = (resume.start + args.worker) % args.num_workers
    if not resume.levels:  # same topology as the checkpoint: the plan skips what was served
        done = resume.consumed[logical]
        strict = replace(args, worker=logical, epoch=resume.spec.epoch, skip=done)
        return Session(resume.spec.epoch, plan_pieces(source, strict, selection), logical, done)
    pieces = resume.pieces(logical)  # elastic: this worker's run of the restriped remainder
    if selection is not None:
        pieces = selection.file_pieces(pieces)
    return Session(resume.spec.epoch, pieces, logical, 0, resume.levels)


class StreamPosition:
    """The position of one reader that counts its own samples (``astream``): its checkpoint.

    Holds the reader's arguments and configuration (the checkpoint keys that must match) and,
    once :meth:`open` decided the session, its epoch, closed levels and the samples already served
    at the current level; the reader counts what it returns since (an int, no call per sample) and
    :meth:`checkpoint` turns that into a :class:`DatasetCheckpoint` with one worker.
    """

    def __init__(self, args: ReadPlanArgs, config: Mapping[str, Any], state: Mapping[str, Any] | None = None) -> None:
        self.args = args
        self.config = dict(config)
        self.state = None if state is None else loaded_state(state, self.config)
        self.epoch = args.epoch if self.state is None else self.state.current_epoch
        self.levels: tuple[Level, ...] = ()
        self.served = 0 if self.state is None else self.state.num_samples_yielded
        self._started = False

    @property
    def topology(self) -> Topology:
        return Topology(self.args.world_size, 1, self.args.batch_size)

    def open(self, source: DatasetSource, selection: Selection | None) -> list[Piece]:
        """The pieces still to serve (checks the checkpoint's selection against ``selection``)."""
        plan = None
        filenames = [c.filename for c in source.index.chunks]
        if selection is not None:  # LitData's selection keys, as StreamingDataset writes them
            self.config.update(selection.state(filenames))
        if self.state is not None:
            if selection is not None or "region_of_interest" in self.state.config:
                whole = selection or Selection.full(source.chunk_sizes)
                check_selection_state(self.state.config, whole, source.chunk_sizes, filenames)
            plan = resume_plan(
                self.state,
                source,
                selection,
                rank=self.args.rank,
                topology=self.topology,
                shuffle_window=self.args.shuffle_window,
            )
        session = open_session(source, self.args, selection, plan)
        self.epoch, self.levels, self.served = session.epoch, session.levels, session.served
        self._started = True
        return session.pieces

    def checkpoint(self, returned: int) -> dict[str, Any]:
        """The checkpoint after ``returned`` more samples than the session started with
        (``DatasetCheckpoint.to_state()``, one worker).

        Before the session started, the loaded checkpoint as it was (or epoch ``args.epoch`` with
        nothing served).
        """
        if not self._started and self.state is not None:
            return self.state.to_state()
        served = self.served + returned
        return DatasetCheckpoint(
            config=self.config,
            num_samples_yielded=served,
            num_workers=1,
            batch_size=self.args.batch_size,
            current_epoch=self.epoch,
            world_size=self.args.world_size,
            rank=self.args.rank,
            worker_samples_yielded=(served,),
            resume_levels=self.levels,
        ).to_state()


def loaded_state(state: Mapping[str, Any], config: Mapping[str, Any]) -> DatasetCheckpoint:
    """Read a checkpoint given to a reader and check it was saved with the reader's ``config``.

    Accepts a dataset state, or the whole of ``StreamingDataLoader.state_dict()`` (its ``"dataset"``).

    Raises:
        ConfigurationError: not a mapping, a malformed key, or another ``shuffle`` / ``seed`` /
            ``drop_last`` / input / item loader (named, with both values and the fix).
    """
    if not hasattr(state, "get"):
        raise ConfigurationError(
            f"state must be a dict from state_dict(), got {type(state).__name__}; pass what "
            "SampleStream.state_dict() or StreamingDataLoader.state_dict() returned"
        )
    inner = state.get("dataset")
    if isinstance(inner, dict) and "num_samples_yielded" in inner:
        state = inner
    check_config(state, config)
    return DatasetCheckpoint.from_state(state)
