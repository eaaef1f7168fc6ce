"""Resume of Combined / Parallel datasets: where each rank continues (pure: no I/O, no event loop).

See ``read._compose`` for streams and levels. A checkpoint records, per worker of the saving rank,
how many composite samples it served at the current level; :func:`all_consumed` derives the other
ranks' counts (DDP lock-step, torch's in-order delivery) and :func:`resolve_composite` turns that
into a :class:`CompositePlan` for the resuming rank: strict replay on the same topology, or a new
level restriped over another one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._errors import ConfigurationError
from ._compose import level_streams
from ._resume import _require, check_config, round_robin
from ._resume_types import Level, Topology

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._compose import Composer

__all__ = ["CompositePlan", "all_consumed", "check_members", "resolve_composite"]


@dataclass(frozen=True)
class CompositePlan:
    """Where one rank of a composite resumes (the counterpart of ``read._resume.ResumePlan``).

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


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"checkpoint has {what}={value!r}; expected an int >= 0")
    return value


def _levels(raw: Sequence[Mapping[str, Any]]) -> tuple[Level, ...]:
    out = []
    for entry in raw:
        top = Topology(*(max(_count(_require(entry, k), k), 1) for k in ("world_size", "num_workers", "batch_size")))
        consumed = tuple(_count(c, "consumed") for c in _require(entry, "consumed"))
        if len(consumed) != top.world_size * top.num_workers:
            raise ConfigurationError(f"checkpoint level {entry!r} must list one consumed count per global worker")
        out.append(Level(top, consumed))
    return tuple(out)


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


def resolve_composite(composer: Composer, state: Mapping[str, Any], *, rank: int, topology: Topology) -> CompositePlan:
    """Where ``rank`` of a run on ``topology`` resumes the composite checkpoint ``state``.

    ``state`` is the ``"composite"`` entry of a Combined / Parallel state dict (already checked).

    Raises:
        ConfigurationError: a missing or malformed key, or counts the epoch cannot hold.
    """
    levels = _levels(state.get("resume_levels") or ())
    saved = Topology(*(max(_count(_require(state, k), k), 1) for k in ("world_size", "num_workers", "batch_size")))
    epoch = max(_count(_require(state, "current_epoch"), "current_epoch"), 1)
    raw_carry = state.get("carry")
    carry = None if raw_carry is None else tuple(_count(c, "carry") for c in raw_carry)
    saver = _count(state.get("rank", 0), "rank")
    if saver >= saved.world_size:
        raise ConfigurationError(f"checkpoint has rank={saver} but world_size={saved.world_size}")
    own = [_count(c, "worker_samples_yielded") for c in _require(state, "worker_samples_yielded")]
    consumed, batches, lengths = all_consumed(composer, epoch, levels, saved, carry, saver, own)
    workers = saved.num_workers
    finished = own == lengths[saver * workers : (saver + 1) * workers]
    if topology == saved:
        mine = consumed[rank * workers : (rank + 1) * workers]
        start = round_robin(lengths[rank * workers : (rank + 1) * workers], saved.batch_size, batches)[1]
        return CompositePlan(epoch, levels, topology, rank, tuple(mine), start, finished, carry, tuple(consumed))
    closed = (*levels, Level(saved, tuple(consumed)))
    zeros = (0,) * topology.num_workers
    return CompositePlan(epoch, closed, topology, rank, zeros, 0, finished, carry, tuple(consumed))


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
