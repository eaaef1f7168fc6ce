"""Resume of Combined / Parallel datasets: where each rank continues (pure: no I/O, no event loop).

See ``read.plan._compose`` for streams and levels. A checkpoint records, per worker of the saving rank,
how many composite samples it served at the current level; :func:`all_consumed` derives the other
ranks' counts (DDP lock-step, torch's in-order delivery) and :func:`resolve_composite` turns that
into a :class:`CompositePlan` for the resuming rank: strict replay on the same topology, or a new
level restriped over another one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

from ..._core._errors import ConfigurationError
from ._checkpoint import CompositeCheckpoint, CycleCarry
from ._compose import ParallelComposer, level_streams
from ._resume import round_robin
from ._resume_config import check_config
from ._resume_types import Level, Topology

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._compose import Composer

__all__ = [
    "CompositePlan",
    "all_consumed",
    "check_composite_state",
    "check_members",
    "cycles_across_epochs",
    "resolve_composite",
]


@dataclass(frozen=True)
class CompositePlan:
    """Where one rank of a composite resumes (the counterpart of ``read.plan._resume.ResumePlan``).

    Attributes:
        epoch: The epoch being resumed.
        levels: Closed levels, oldest first.
        topology: The topology of the level being served.
        rank: The rank this plan is for.
        consumed: Samples served per logical worker of ``rank`` at this level.
        start: The logical worker that torch worker 0 serves.
        finished: The saved rank had finished the epoch.
        carry: Level-0 base positions (cycling Parallel), else ``None``.
        all_consumed: Served counts of every global worker at the saved level (exact for the saving
            rank, derived for the others).
        following: For a cycling Parallel (``length`` and ``resume=True``) checkpoint without
            elastic levels, where the epoch after the saved one starts (used when ``finished``).
    """

    epoch: int
    levels: tuple[Level, ...]
    topology: Topology
    rank: int
    consumed: tuple[int, ...]
    start: int
    finished: bool
    carry: tuple[int, ...] | None
    all_consumed: tuple[int, ...]
    following: CycleCarry | None = None


def all_consumed(
    composer: Composer,
    epoch: int,
    levels: tuple[Level, ...],
    topology: Topology,
    carry: tuple[int, ...] | None,
    rank: int,
    own: Sequence[int],
) -> tuple[list[int], int, list[int]]:
    """Counts of every global worker at the current level, given ``rank``'s own counts ``own``.

    Returns:
        ``(consumed, batches, lengths)``: per global worker, the batches ``rank`` delivered, and
        what each global worker serves at this level.

    Raises:
        ConfigurationError: ``own`` does not fit the level.
    """
    streams = level_streams(composer, epoch, levels, topology, carry)
    workers, batch = topology.num_workers, topology.batch_size
    lengths = [composer.served(s, batch) for s in streams]
    if len(own) != workers:
        raise ConfigurationError(f"checkpoint lists {len(own)} worker counts for num_workers={workers}")
    for w, (done, total) in enumerate(zip(own, lengths[rank * workers : (rank + 1) * workers], strict=True)):
        if done > total:
            raise ConfigurationError(
                f"checkpoint says worker {w} of rank {rank} served {done} samples but it serves only {total} in "
                f"epoch {epoch}; the checkpoint belongs to another dataset or run"
            )
    batches = sum(math.ceil(c / batch) for c in own)
    consumed: list[int] = []
    for r in range(topology.world_size):
        row = lengths[r * workers : (r + 1) * workers]
        consumed += list(own) if r == rank else round_robin(row, batch, batches)[0]
    return consumed, batches, lengths


def resolve_composite(
    composer: Composer, state: Mapping[str, Any] | CompositeCheckpoint, *, rank: int, topology: Topology
) -> CompositePlan:
    """Where ``rank`` of a run on ``topology`` resumes the composite checkpoint ``state``.

    ``state`` is the ``"composite"`` entry of a Combined / Parallel state dict (already checked), or
    that checkpoint read with :meth:`CompositeCheckpoint.from_state`.

    Raises:
        ConfigurationError: a missing or malformed key, or counts the epoch cannot hold.
    """
    saved_state = state if isinstance(state, CompositeCheckpoint) else CompositeCheckpoint.from_state(state)
    levels = saved_state.resume_levels
    saved = saved_state.topology
    epoch = saved_state.current_epoch
    carry = saved_state.carry
    saver = saved_state.rank
    if saver >= saved.world_size:
        raise ConfigurationError(f"checkpoint has rank={saver} but world_size={saved.world_size}")
    own = list(saved_state.worker_samples_yielded)
    consumed, batches, lengths = all_consumed(composer, epoch, levels, saved, carry, saver, own)
    workers = saved.num_workers
    finished = own == lengths[saver * workers : (saver + 1) * workers]
    following = None
    if cycles_across_epochs(composer) and not levels:
        bases = carry if carry is not None else composer.default_bases(epoch, saved)
        following = CycleCarry(epoch, saved, bases).advance(consumed)
    if topology == saved:
        mine = consumed[rank * workers : (rank + 1) * workers]
        start = round_robin(lengths[rank * workers : (rank + 1) * workers], saved.batch_size, batches)[1]
        return CompositePlan(
            epoch, levels, topology, rank, tuple(mine), start, finished, carry, tuple(consumed), following
        )
    closed = (*levels, Level(saved, tuple(consumed)))
    zeros = (0,) * topology.num_workers
    return CompositePlan(epoch, closed, topology, rank, zeros, 0, finished, carry, tuple(consumed), following)


def cycles_across_epochs(composer: Composer) -> TypeGuard[ParallelComposer]:
    """Whether an epoch of ``composer`` continues the member cycles where the previous one stopped
    (``ParallelStreamingDataset`` with ``length`` and ``resume=True``)."""
    return isinstance(composer, ParallelComposer) and composer.cycling and composer.resume


def check_members(saved: Mapping[str, Any], current: Sequence[Mapping[str, Any]]) -> list[str]:
    """Mismatches between the member states of a checkpoint and the members' configurations.

    Returns:
        One message per mismatching member (empty when all match).
    """
    problems = []
    for i, config in enumerate(current):
        try:
            check_config(saved[str(i)], config)
        except ConfigurationError as exc:
            problems.append(f"dataset {i}: {exc}")
    return problems


def check_composite_state(
    state: Mapping[str, Any],
    *,
    kind: str,
    wrapper: str,
    config: Mapping[str, Any],
    member_configs: Sequence[Mapping[str, Any]],
) -> tuple[Mapping[str, Any], list[str]]:
    """Check that ``state`` is a checkpoint of this kind of wrapper over as many members.

    Accepts the dataset entry of a checkpoint or the whole of ``StreamingDataLoader.state_dict()``.

    Returns:
        ``(composite, problems)``: the ``"composite"`` entry, and one message per setting (the
        wrapper's or a member's) that differs from the current one.

    Raises:
        ConfigurationError: not a checkpoint of a ``kind`` wrapper, or another number of members.
    """
    if isinstance(state, Mapping) and isinstance(state.get("dataset"), Mapping):
        # the whole loader state: the members in "dataset", litstream's entry beside them (or, before, in it)
        outer = state.get("composite")
        state = state["dataset"] if outer is None else {**state["dataset"], "composite": outer}
    composite = state.get("composite") if isinstance(state, Mapping) else None
    if not isinstance(composite, Mapping) or composite.get("kind") != kind:
        raise ConfigurationError(
            f"this is not a {wrapper} checkpoint (no 'composite' entry of kind {kind!r}); pass "
            "the 'dataset' entry of StreamingDataLoader.state_dict() saved with the same wrapper"
        )
    members = [key for key in state if key != "composite"]
    if composite.get("num_datasets") != len(member_configs) or len(members) != len(member_configs):
        raise ConfigurationError(
            f"checkpoint has {len(members)} datasets but this {wrapper} has {len(member_configs)}; "
            "build it with the same datasets, in the same order, as the run that saved the checkpoint"
        )
    problems = [
        f"checkpoint has {key}={composite.get(key)!r} but this {wrapper} has {key}={value!r}"
        for key, value in config.items()
        if composite.get(key) != value
    ]
    return composite, problems + check_members(state, member_configs)
