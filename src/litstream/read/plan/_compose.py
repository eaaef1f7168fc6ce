"""Member streams and levels of Combined / Parallel datasets (pure: no I/O, no event loop).

A *member* is one wrapped dataset; :class:`MemberSpec` is what its read plan depends on besides the
topology and the epoch. A reader (global worker ``g = rank * K + worker``) of a composite holds one
*member stream* per member: a list of :data:`Run` s, each a range of positions in one slice's (or
window's) serving order in one member epoch (``read.plan._resume``'s :class:`Segment` plus its
:class:`EpochSpec`). A *composer* says what the reader serves from its member streams:

* :class:`CombinedComposer`: the samples of its member streams, mixed by ``read.plan._mixing.mix_order``.
  At level 0 a member stream is the member's own read plan for that worker in the epoch.
* :class:`ParallelComposer`: tuples, one sample of every member per step, so all member streams of a
  reader have the same length. Without ``length`` (``None``) they are the members' plans cut to the
  shortest; with ``length`` every reader serves its share ``length // K + (worker < length % K)``
  of the rank's ``length`` tuples, reading each member's plan cyclically (cycle ``c`` is member
  epoch ``c + 1``) from a *base* position: where the previous epoch stopped (``carry``) or, without
  one, ``(epoch - 1) * share`` (``resume=True``: every earlier epoch complete) or 0 (``resume=False``).

Resume (``read.plan._compose_resume``) works like ``read.plan._resume``: a checkpoint records, per worker of
the saving rank, how many composite samples it served at the current *level*; the other ranks'
counts are derived assuming DDP lock-step and torch's in-order delivery. On the same topology each
worker skips what it served (each member stream its own share, the mixing sequence its prefix). On
another topology the level is closed and the remainder restriped (:func:`level_streams`): Combined
restripes each member's unserved items like an elastic ``StreamingDataset`` (so with
``iterate_over_all`` every sample of every member is still served exactly once), Parallel restripes
the unserved *tuples* (all members cut at the same places, so pairs stay pairs).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from ..._core._errors import ConfigurationError
from ._assign import DEFAULT_ITEM_SHUFFLE_WINDOW
from ._mixing import BatchingMethod, mix_order
from ._resume import _base_streams, _pieces, stripe_budgets
from ._resume_types import EpochSpec, Level, Segment, Topology
from ._window import DEFAULT_SHUFFLE_WINDOW

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ._pieces import Piece, ShuffleMode

__all__ = [
    "ENDLESS",
    "CombinedComposer",
    "Composer",
    "MemberSpec",
    "ParallelComposer",
    "Run",
    "cycle_streams",
    "level_streams",
    "split_runs",
    "to_pieces",
]

ENDLESS = 2**62
"""The share of every worker of an endless Parallel (``length=float("inf")``): never reached."""

Run: TypeAlias = tuple[EpochSpec, Segment]
"""Positions ``[segment.start, segment.end)`` of one unit's serving order in the epoch of ``spec``."""

Streams: TypeAlias = list[list[list[Run]]]
"""``streams[g][i]``: global worker ``g``'s stream of member ``i``."""


@dataclass(frozen=True)
class MemberSpec:
    """What a member's read plan depends on besides topology and epoch (see ``StreamingDataset``)."""

    chunk_sizes: tuple[int, ...]
    shuffle: ShuffleMode
    seed: int
    drop_last: bool | None
    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW
    item_shuffle_window: int = DEFAULT_ITEM_SHUFFLE_WINDOW

    def epoch_spec(self, epoch: int, world_size: int) -> EpochSpec:
        """The member's :class:`EpochSpec`; ``drop_last=None`` resolves with ``world_size``."""
        drop_last = (world_size > 1) if self.drop_last is None else self.drop_last
        return EpochSpec(
            self.chunk_sizes,
            self.shuffle,
            self.seed,
            epoch,
            drop_last,
            self.shuffle_window,
            item_shuffle_window=self.item_shuffle_window,
        )


@functools.lru_cache(maxsize=256)
def _member_base(member: MemberSpec, epoch: int, topology: Topology) -> tuple[tuple[Run, ...], ...]:
    spec = member.epoch_spec(epoch, topology.world_size)
    return tuple(tuple((spec, seg) for seg in stream) for stream in _base_streams(spec, topology))


def run_length(stream: Sequence[Run]) -> int:
    """Items in a member stream."""
    return sum(len(seg) for _, seg in stream)


def split_runs(stream: Sequence[Run], sizes: Sequence[int]) -> list[list[Run]]:
    """Cut ``stream`` into consecutive parts of ``sizes`` items (their sum must not exceed its length)."""
    out: list[list[Run]] = []
    it = iter(stream)
    current: Run | None = None
    for size in sizes:
        part: list[Run] = []
        while size > 0:
            if current is None or len(current[1]) == 0:
                current = next(it)
                continue
            spec, seg = current
            take = min(size, len(seg))
            part.append((spec, Segment(seg.unit, seg.start, seg.start + take)))
            current = (spec, Segment(seg.unit, seg.start + take, seg.end))
            size -= take
        out.append(part)
    return out


def suffix(stream: Sequence[Run], skip: int) -> list[Run]:
    """``stream`` without its first ``skip`` items."""
    return split_runs(stream, [skip, run_length(stream) - skip])[1] if skip else list(stream)


def to_pieces(stream: Sequence[Run]) -> list[Piece]:
    """The pieces (as ``read.plan._pieces.plan_pieces`` returns them) that serve ``stream`` in order."""
    out: list[Piece] = []
    group: list[Segment] = []
    spec: EpochSpec | None = None
    for run_spec, seg in stream:
        if spec is not None and run_spec != spec:
            out += _pieces(spec, group)
            group = []
        spec = run_spec
        if len(seg):
            group.append(seg)
    if spec is not None and group:
        out += _pieces(spec, group)
    return out


def _cycled_worker(member: MemberSpec, topology: Topology, g: int) -> int:
    """The global worker whose share of ``member`` worker ``g`` cycles through.

    ``g`` itself when its share is not empty. A worker with no item of a short member (more
    workers than the member has chunks) cycles through the share of a worker that has items,
    chosen round-robin, so every worker serves its steps and every rank its ``length``.
    """
    base = _member_base(member, 1, topology)
    if run_length(base[g]):
        return g
    donors = [h for h, stream in enumerate(base) if run_length(stream)]
    return donors[g % len(donors)] if donors else g


def _cycle_slice(member: MemberSpec, topology: Topology, g: int, start: int, count: int) -> list[Run]:
    """Items ``[start, start + count)`` of worker ``g``'s endless cyclic read of ``member``."""
    g = _cycled_worker(member, topology, g)
    period = run_length(_member_base(member, 1, topology)[g])
    if period == 0 or count == 0:
        return []
    cycle, offset = divmod(start, period)
    out: list[Run] = []
    while count > 0:
        stream = _member_base(member, cycle + 1, topology)[g]
        take = min(period - offset, count)
        out += split_runs(stream, [offset, take])[1]
        count -= take
        cycle, offset = cycle + 1, 0
    return out


def cycle_streams(member: MemberSpec, topology: Topology, g: int, start: int) -> Iterator[list[Run]]:
    """Worker ``g``'s endless cyclic read of ``member`` from item ``start`` on, one member epoch at a time.

    A worker with no item of ``member`` reads another worker's share (:func:`_cycled_worker`);
    yields nothing when the member has no item at all.
    """
    g = _cycled_worker(member, topology, g)
    period = run_length(_member_base(member, 1, topology)[g])
    if period == 0:
        return
    cycle, offset = divmod(start, period)
    while True:
        yield suffix(_member_base(member, cycle + 1, topology)[g], offset)
        cycle, offset = cycle + 1, 0


def _restripe(streams: Sequence[Sequence[Run]], consumed: Sequence[int], budgets: Sequence[int]) -> list[list[Run]]:
    rest = [run for stream, done in zip(streams, consumed, strict=True) for run in suffix(stream, done)]
    return split_runs(rest, budgets)


@dataclass(frozen=True)
class CombinedComposer:
    """Mixes its member streams (``CombinedStreamingDataset``); see the module docstring."""

    members: tuple[MemberSpec, ...]
    weights: tuple[float, ...]
    seed: int
    iterate_over_all: bool
    batching_method: BatchingMethod
    cycling: bool = field(default=False, init=False)

    def base(self, epoch: int, topology: Topology, carry: tuple[int, ...] | None) -> Streams:
        per = [_member_base(m, epoch, topology) for m in self.members]
        return [[list(p[g]) for p in per] for g in range(topology.world_size * topology.num_workers)]

    def order(self, streams: Sequence[Sequence[Run]], batch_size: int) -> Sequence[int]:
        """The member of each sample this reader serves."""
        return mix_order(
            tuple(run_length(s) for s in streams),
            self.weights,
            seed=self.seed,
            iterate_over_all=self.iterate_over_all,
            batching_method=self.batching_method,
            batch_size=batch_size,
        )

    def served(self, streams: Sequence[Sequence[Run]], batch_size: int) -> int:
        if self.iterate_over_all:  # every item of every member drawn at all (weight 0: only empty members)
            return sum(run_length(s) for s, w in zip(streams, self.weights, strict=True) if w > 0)
        return len(self.order(streams, batch_size))

    def split(self, streams: Sequence[Sequence[Run]], count: int, batch_size: int) -> list[int]:
        """Items of each member stream served in the first ``count`` samples."""
        order = self.order(streams, batch_size)
        counts = np.bincount(np.asarray(order[:count], dtype=np.int64), minlength=len(self.members))
        return [int(c) for c in counts]

    def restripe(self, streams: Streams, consumed: Sequence[int], topology: Topology, batch_size: int) -> Streams:
        done = [self.split(streams[g], c, batch_size) for g, c in enumerate(consumed)]
        per_member = []
        for i in range(len(self.members)):
            own = [streams[g][i] for g in range(len(streams))]
            mine = [done[g][i] for g in range(len(streams))]
            total = sum(run_length(s) for s in own) - sum(mine)
            per_member.append(_restripe(own, mine, stripe_budgets(total, topology)))
        return [[p[g] for p in per_member] for g in range(topology.world_size * topology.num_workers)]


@dataclass(frozen=True)
class ParallelComposer:
    """Zips its member streams (``ParallelStreamingDataset``); see the module docstring."""

    members: tuple[MemberSpec, ...]
    length: int | None
    resume: bool
    endless: bool = False

    @property
    def cycling(self) -> bool:
        return self.length is not None or self.endless

    def shares(self, topology: Topology) -> list[int]:
        """Tuples each global worker serves per epoch when cycling (:data:`ENDLESS` when endless)."""
        if self.endless:
            return [ENDLESS] * (topology.world_size * topology.num_workers)
        assert self.length is not None
        base, rem = divmod(self.length, topology.num_workers)
        return [base + (1 if k < rem else 0) for _ in range(topology.world_size) for k in range(topology.num_workers)]

    def default_bases(self, epoch: int, topology: Topology) -> tuple[int, ...]:
        """Where each worker's cycle starts in ``epoch`` when no earlier epoch says otherwise."""
        factor = (epoch - 1) if self.resume and not self.endless else 0
        return tuple(factor * n for n in self.shares(topology))

    def base(self, epoch: int, topology: Topology, carry: tuple[int, ...] | None) -> Streams:
        workers = topology.world_size * topology.num_workers
        if self.endless:  # served lazily from the base position (see ``cycle_streams``)
            return [[[] for _ in self.members] for _ in range(workers)]
        if self.length is None:
            per = [_member_base(m, epoch, topology) for m in self.members]
            out: Streams = []
            for g in range(workers):
                n = min(run_length(p[g]) for p in per)
                out.append([split_runs(p[g], [n])[0] for p in per])
            return out
        bases = carry if carry is not None else self.default_bases(epoch, topology)
        out = []
        for g, (start, n) in enumerate(zip(bases, self.shares(topology), strict=True)):
            parts = [_cycle_slice(m, topology, g, start, n) for m in self.members]
            if any(run_length(p) != n for p in parts):  # a member with nothing for this worker
                parts = [[] for _ in self.members]
            out.append(parts)
        return out

    def served(self, streams: Sequence[Sequence[Run]], batch_size: int) -> int:
        if self.endless:
            return ENDLESS
        return run_length(streams[0]) if streams else 0

    def split(self, streams: Sequence[Sequence[Run]], count: int, batch_size: int) -> list[int]:
        return [count] * len(self.members)

    def restripe(self, streams: Streams, consumed: Sequence[int], topology: Topology, batch_size: int) -> Streams:
        if self.endless:
            raise ConfigurationError(
                "an endless ParallelStreamingDataset (length=inf) resumes only on the checkpoint's world size, "
                "num_workers and batch_size; resume with those, or start a new epoch without load_state_dict()"
            )
        total = sum(self.served(s, batch_size) for s in streams) - sum(consumed)
        budgets = stripe_budgets(total, topology)
        per_member = [_restripe([s[i] for s in streams], consumed, budgets) for i in range(len(self.members))]
        return [[p[g] for p in per_member] for g in range(topology.world_size * topology.num_workers)]


Composer: TypeAlias = CombinedComposer | ParallelComposer


@functools.lru_cache(maxsize=32)
def level_streams(
    composer: Composer, epoch: int, levels: tuple[Level, ...], topology: Topology, carry: tuple[int, ...] | None
) -> Streams:
    """Every global worker's member streams at the level after ``levels``, which runs on ``topology``.

    ``carry`` (cycling Parallel only) holds the level-0 base position of every global worker of the
    first level's topology. Cached: do not modify the result.

    Raises:
        ConfigurationError: a closed level says a worker served more than its streams hold.
    """
    tops = [level.topology for level in levels] + [topology]
    streams = composer.base(epoch, tops[0], carry)
    for level, following in zip(levels, tops[1:], strict=True):
        batch = level.topology.batch_size
        for g, done in enumerate(level.consumed):
            if done > composer.served(streams[g], batch):
                raise ConfigurationError(
                    f"checkpoint level {level.as_dict()} says global worker {g} served {done} samples but it serves "
                    f"only {composer.served(streams[g], batch)} in epoch {epoch}; the checkpoint belongs to another run"
                )
        streams = composer.restripe(streams, level.consumed, following, following.batch_size)
    return streams
