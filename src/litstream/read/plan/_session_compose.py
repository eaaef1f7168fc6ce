"""The read session of a Combined / Parallel dataset: what one reader serves in one epoch (pure).

The composite counterpart of ``read.plan._session``, driven by the sync wrappers
(``CompositeDataset.__iter__``) and by their async streams (``read.aio._compose``). Given the
composer (``read.plan._compose``), the reader (rank, worker, topology), the epoch, a resolved
checkpoint (``read.plan._compose_resume``) and the cycle carry of a cycling Parallel
(``read.plan._checkpoint.CycleCarry``), :func:`open_composite` decides fresh / strict / elastic / next
epoch and returns each member's stream; :func:`carry_after_epoch` advances the carry when an epoch
ends; :func:`composite_checkpoint` writes the checkpoint of a position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ._checkpoint import CompositeCheckpoint, CycleCarry, DatasetCheckpoint
from ._compose import level_streams, suffix, to_pieces
from ._compose_resume import all_consumed, cycles_across_epochs
from ._resume import round_robin

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from ..aio._sample_stream import SampleStream
    from ._compose import Composer, Run
    from ._compose_resume import CompositePlan
    from ._pieces import Piece
    from ._resume_types import Level, Topology

__all__ = [
    "AsyncSession",
    "CompositeSession",
    "carry_after_epoch",
    "composite_checkpoint",
    "member_pieces",
    "open_composite",
]


@dataclass(frozen=True)
class CompositeSession:
    """What one reader of a composite serves in one epoch, as decided by :func:`open_composite`.

    Attributes:
        epoch: The 1-based epoch served.
        levels: Closed levels of this epoch (elastic resumes), oldest first.
        topology: The topology of the level served.
        worker: The global worker served (``rank * K + logical worker``).
        bases: The level-0 cycle bases of a cycling Parallel (``None``: the default ones).
        streams: One stream of runs per member: this worker's share at this level.
        count: Samples of this worker already served at this level (strict resume).
        carry: The cycle carry after a checkpoint taken at its epoch's end was passed over
            (``restarted``); the caller keeps it.
        restarted: The checkpoint was at its epoch's end: this is the next epoch, fresh.
    """

    epoch: int
    levels: tuple[Level, ...]
    topology: Topology
    worker: int
    bases: tuple[int, ...] | None
    streams: list[list[Run]]
    count: int
    carry: CycleCarry | None = None
    restarted: bool = False


class AsyncSession(NamedTuple):
    """A composite session as its async stream (``read.aio._compose``) serves it.

    ``checkpoint(served)`` is the state after ``served`` composite samples of this level (counted
    from the level's start, so a strict resume starts at ``session.count``).
    """

    composer: Composer
    session: CompositeSession
    members: list[SampleStream]
    checkpoint: Callable[[int], dict[str, Any]]


def open_composite(
    composer: Composer,
    *,
    epoch: int,
    rank: int,
    worker: int,
    topology: Topology,
    plan: CompositePlan | None,
    carry: CycleCarry | None,
) -> CompositeSession:
    """Decide the member streams of torch worker ``worker`` of ``rank`` on ``topology``.

    Args:
        composer: The wrapper's composer.
        epoch: The epoch to serve when there is no pending checkpoint.
        rank: The reader's rank.
        worker: The torch worker (0 for a single reader).
        topology: The reader's topology (``num_workers`` counts 0 workers as 1).
        plan: The pending checkpoint resolved for this rank and topology, or ``None``.
        carry: The cycle carry the wrapper holds (cycling Parallel), or ``None``.
    """
    restarted = False
    if plan is not None and plan.finished:  # saved at the end of its epoch: go on with the next
        epoch, carry, plan, restarted = plan.epoch + 1, plan.following, None, True
    levels: tuple[Level, ...] = ()
    if plan is None:
        logical, count = worker, 0
        bases = carry.at(epoch, topology) if carry is not None and cycles_across_epochs(composer) else None
    else:
        epoch, levels, bases = plan.epoch, plan.levels, plan.carry
        logical = (plan.start + worker) % topology.num_workers
        count = plan.consumed[logical]
    g = rank * topology.num_workers + logical
    streams = level_streams(composer, epoch, levels, topology, bases)[g]
    return CompositeSession(epoch, levels, topology, g, bases, streams, count, carry, restarted)


def member_pieces(
    composer: Composer, streams: Sequence[Sequence[Run]], count: int, batch_size: int
) -> list[list[Piece]]:
    """Each member's pieces still to serve after ``count`` composite samples of ``streams``."""
    done = composer.split(streams, count, batch_size)
    return [to_pieces(suffix(s, k)) for s, k in zip(streams, done, strict=True)]


def carry_after_epoch(
    composer: Composer,
    carry: CycleCarry | None,
    *,
    epoch: int,
    topology: Topology,
    rank: int,
    own: Sequence[int],
    levels: Sequence[Level],
) -> CycleCarry | None:
    """The cycle carry once ``epoch`` ended after this rank's workers served ``own`` (at its current level).

    Only a cycling Parallel carries (else ``carry`` is returned unchanged). An epoch resumed
    elastically starts the next one afresh (``None``). With nothing served — a checkpoint taken at
    the epoch's end was loaded (already advanced), the epoch was left before its first batch, or
    there is no history — what is known is kept.

    Raises:
        ConfigurationError: ``own`` does not fit the epoch.
    """
    if not cycles_across_epochs(composer):
        return carry
    if levels:
        return None
    base = carry.at(epoch, topology) if carry is not None else None
    if not any(own):
        return CycleCarry(epoch + 1, topology, base) if base is not None else carry
    consumed = all_consumed(composer, epoch, (), topology, base, rank, own)[0]
    bases = base if base is not None else composer.default_bases(epoch, topology)
    return CycleCarry(epoch, topology, bases).advance(consumed)


def composite_checkpoint(
    composer: Composer,
    *,
    kind: str,
    config: Mapping[str, Any],
    members: Sequence[Mapping[str, Any]],
    epoch: int,
    rank: int,
    topology: Topology,
    levels: tuple[Level, ...],
    bases: tuple[int, ...] | None,
    own: Sequence[int] | None,
    num_samples_yielded: int = 0,
) -> CompositeCheckpoint:
    """The checkpoint of ``rank``'s position in ``epoch`` at the level after ``levels``.

    Args:
        composer: The wrapper's composer.
        kind: ``"combined"`` or ``"parallel"``.
        config: The wrapper's settings.
        members: Each member's configuration (``StreamingDataset._config()``).
        epoch: The epoch.
        rank: The saving rank.
        topology: The topology of the current level.
        levels: Closed levels of the epoch.
        bases: The level-0 cycle bases (cycling Parallel), else ``None``.
        own: Composite samples served per worker of ``rank`` at this level; ``None``: derived
            from ``num_samples_yielded`` as torch's in-order delivery would have served them.
        num_samples_yielded: Composite samples this rank served, used when ``own`` is ``None``.
    """
    workers, batch = topology.num_workers, topology.batch_size
    streams = level_streams(composer, epoch, levels, topology, bases)
    mine = streams[rank * workers : (rank + 1) * workers]
    if own is None:
        lengths = [composer.served(s, batch) for s in mine]
        own = round_robin(lengths, batch, -(-num_samples_yielded // batch))[0]
    own = [int(c) for c in own]
    split = [composer.split(s, c, batch) for s, c in zip(mine, own, strict=True)]
    states = []
    for i, member in enumerate(members):
        per_worker = tuple(row[i] for row in split)
        states.append(
            DatasetCheckpoint(
                config=member,
                num_samples_yielded=sum(per_worker),
                num_workers=workers,
                batch_size=batch,
                current_epoch=epoch,
                world_size=topology.world_size,
                rank=rank,
                worker_samples_yielded=per_worker,
            ).to_state()
        )
    return CompositeCheckpoint(
        kind=kind,
        config=config,
        members=tuple(states),
        worker_samples_yielded=tuple(own),
        num_workers=workers,
        batch_size=batch,
        current_epoch=epoch,
        world_size=topology.world_size,
        rank=rank,
        resume_levels=levels,
        carry=bases,
    )
