"""The checkpoint format, defined once: frozen values with ``to_state()`` / ``from_state()`` (pure).

A checkpoint is a small dict of plain values (picklable, JSON-compatible). Its layout is LitData's
(so LitData's checkpoints load, and ours keep LitData's keys) plus litstream's own keys:

``DatasetCheckpoint`` — one ``StreamingDataset`` (or one ``astream``), one rank::

    {<config: input_dir_path, input_dir_url, item_loader, drop_last, seed, shuffle,
              shuffle_window, and subsampled_files / region_of_interest for a selection>,
     "num_samples_yielded", "num_workers", "batch_size", "current_epoch", "world_size",  # LitData
     "state_version": 2, "sample_in_epoch", "initial_world_size", "initial_num_workers",
     "initial_batch_size", "resume_mode", "rank", "worker_samples_yielded", "resume_levels",
     "dataset_version"}  # the index digest of the version it was saved on (read.source._versions; docs/versions.md)

``CompositeCheckpoint`` — a Combined / Parallel dataset: ``{"0": <member 0>, "1": ..., "composite":
{...}}``, one ``DatasetCheckpoint`` state per member (LitData's layout) plus the wrapper's entry,
which is what resume uses (``carry`` is the :class:`CycleCarry` bases of a cycling Parallel).

The meaning of the counts, levels and of strict versus elastic resume is in ``read.plan._resume``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._core._errors import ConfigurationError
from ._resume_types import Level, Topology

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "CompositeCheckpoint",
    "CycleCarry",
    "DatasetCheckpoint",
    "count",
    "level",
    "litdata_spelling",
    "require",
    "topology_of",
]

#: Keys of a dataset state that are counts or positions; every other key is configuration.
_POSITION_KEYS = frozenset(
    {
        "num_samples_yielded",
        "num_workers",
        "batch_size",
        "current_epoch",
        "world_size",
        "state_version",
        "sample_in_epoch",
        "initial_world_size",
        "initial_num_workers",
        "initial_batch_size",
        "resume_mode",
        "rank",
        "worker_samples_yielded",
        "resume_levels",
    }
)


def require(state: Mapping[str, Any], key: str) -> Any:
    """``state[key]``, or ``ConfigurationError`` naming the missing key and the fix."""
    if key not in state:
        raise ConfigurationError(
            f"checkpoint has no {key!r} key; pass the 'dataset' entry of StreamingDataLoader.state_dict()"
        )
    return state[key]


def count(value: Any, what: str) -> int:
    """``value`` when it is an int ``>= 0``, else ``ConfigurationError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"checkpoint has {what}={value!r}; expected an int >= 0")
    return value


def topology_of(entry: Mapping[str, Any]) -> Topology:
    """The topology a state (or one of its levels) was saved on; 0 workers count as 1."""
    return Topology(*(max(count(require(entry, k), k), 1) for k in ("world_size", "num_workers", "batch_size")))


def level(raw: Mapping[str, Any]) -> Level:
    """One entry of ``resume_levels``, checked (its topology, one count per global worker)."""
    sizes = [count(require(raw, key), key) for key in ("world_size", "num_workers", "batch_size")]
    if min(sizes) < 1:
        raise ConfigurationError(f"checkpoint level {raw!r} needs world_size, num_workers and batch_size >= 1")
    top = Topology(*sizes)
    consumed = tuple(count(c, "consumed") for c in require(raw, "consumed"))
    if len(consumed) != top.world_size * top.num_workers:
        raise ConfigurationError(f"checkpoint level {raw!r} must list one consumed count per global worker")
    return Level(top, consumed)


def litdata_spelling(config: Mapping[str, Any], first_world_size: int) -> dict[str, Any]:
    """``config`` with LitData 0.2.76's values for the keys LitData checks or expects on load.

    ``drop_last`` resolved (``None`` means "``True`` on more than one rank" of the epoch's first
    level), the default item loader as ``None``, and LitData's ``num_canonical_nodes`` (default: the
    first level's world size), ``initial_num_nodes`` (default 1) and ``cache_dir_path`` (default
    ``None``). ``read.plan._resume_config.check_config`` reads both spellings.
    """
    out = dict(config)
    if out.get("drop_last", False) is None:
        out["drop_last"] = first_world_size > 1
    if out.get("item_loader") == {}:
        out["item_loader"] = None
    out["cache_dir_path"] = out.get("cache_dir_path")
    if out.get("num_canonical_nodes") is None:
        out["num_canonical_nodes"] = first_world_size
    out["initial_num_nodes"] = out.get("initial_num_nodes") or 1
    return out


@dataclass(frozen=True)
class DatasetCheckpoint:
    """Where one rank of one dataset stands in an epoch.

    Attributes:
        config: The settings that must match to resume (``read.plan._resume_config.CONFIG_KEYS`` plus the
            selection keys ``subsampled_files`` / ``region_of_interest`` when not the whole dataset).
        num_samples_yielded: Samples this rank delivered at the current level of the epoch.
        num_workers: DataLoader workers (``>= 1``; 0 workers are stored as 1).
        batch_size: Loader batch size (``>= 1``).
        current_epoch: The 1-based epoch the counts belong to.
        world_size: Ranks of the saving run.
        rank: The saving rank (LitData's checkpoints lack it: 0).
        worker_samples_yielded: Samples delivered per worker of ``rank`` at the current level;
            ``None`` (LitData's checkpoints): derived from ``num_samples_yielded``.
        resume_levels: Levels closed by elastic resumes earlier in this epoch, oldest first.
    """

    config: Mapping[str, Any]
    num_samples_yielded: int
    num_workers: int
    batch_size: int
    current_epoch: int
    world_size: int
    rank: int = 0
    worker_samples_yielded: tuple[int, ...] | None = None
    resume_levels: tuple[Level, ...] = ()

    @property
    def topology(self) -> Topology:
        """The topology of the current level (``num_workers`` and ``batch_size`` at least 1)."""
        return Topology(max(self.world_size, 1), max(self.num_workers, 1), max(self.batch_size, 1))

    def to_state(self) -> dict[str, Any]:
        """The checkpoint as a dict of plain values (the layout of the module docstring)."""
        first = self.resume_levels[0].topology if self.resume_levels else self.topology
        dropped = sum(sum(done.consumed) for done in self.resume_levels)
        own = self.worker_samples_yielded
        return {
            **litdata_spelling(self.config, first.world_size),
            "num_samples_yielded": self.num_samples_yielded,
            "num_workers": self.num_workers,
            "batch_size": self.batch_size,
            "current_epoch": self.current_epoch,
            "world_size": self.world_size,
            "state_version": 2,
            "sample_in_epoch": dropped + self.num_samples_yielded * self.world_size,
            "initial_world_size": first.world_size,
            "initial_num_workers": first.num_workers,
            "initial_batch_size": first.batch_size,
            "resume_mode": "elastic" if self.resume_levels else "strict",
            "rank": self.rank,
            "worker_samples_yielded": None if own is None else list(own),
            "resume_levels": [done.as_dict() for done in self.resume_levels],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> DatasetCheckpoint:
        """Read a dataset state: ours, or LitData's (no ``rank``, per-worker counts or levels).

        Raises:
            ConfigurationError: a missing or malformed key (named, with its value).
        """
        levels = tuple(level(raw) for raw in state.get("resume_levels") or ())
        own_raw = state.get("worker_samples_yielded")
        return cls(
            config={k: v for k, v in state.items() if k not in _POSITION_KEYS},
            num_samples_yielded=count(require(state, "num_samples_yielded"), "num_samples_yielded"),
            num_workers=count(require(state, "num_workers"), "num_workers"),
            batch_size=count(require(state, "batch_size"), "batch_size"),
            current_epoch=max(count(require(state, "current_epoch"), "current_epoch"), 1),
            world_size=count(require(state, "world_size"), "world_size"),
            rank=count(state.get("rank", 0), "rank"),
            worker_samples_yielded=None
            if own_raw is None
            else tuple(count(c, "worker_samples_yielded") for c in own_raw),
            resume_levels=levels,
        )


@dataclass(frozen=True)
class CycleCarry:
    """Where a cycling ``ParallelStreamingDataset`` (``length`` and ``resume=True``) starts an epoch.

    Attributes:
        epoch: The epoch these bases start.
        topology: The level-0 topology of that epoch (bases are per global worker of it).
        bases: Per global worker, how far each member's cycle has gone (``read.plan._compose``).
    """

    epoch: int
    topology: Topology
    bases: tuple[int, ...]

    def at(self, epoch: int, topology: Topology) -> tuple[int, ...] | None:
        """The bases when they belong to ``epoch`` on ``topology``, else ``None`` (the default bases)."""
        return self.bases if self.epoch == epoch and self.topology == topology else None

    def advance(self, consumed: Sequence[int]) -> CycleCarry:
        """The carry of the next epoch after every global worker served ``consumed`` steps of this one."""
        moved = tuple(b + c for b, c in zip(self.bases, consumed, strict=True))
        return CycleCarry(self.epoch + 1, self.topology, moved)


@dataclass(frozen=True)
class CompositeCheckpoint:
    """Where one rank of a Combined / Parallel dataset stands in an epoch.

    Attributes:
        kind: ``"combined"`` or ``"parallel"``.
        config: The wrapper's own settings (``seed``, ``weights``, ``length``, ...).
        members: One checkpoint per member, holding that member's share of the counts.
        num_workers, batch_size, current_epoch, world_size, rank, resume_levels: As in
            :class:`DatasetCheckpoint`, counting composite samples.
        worker_samples_yielded: Composite samples delivered per worker of ``rank`` at this level.
        carry: The level-0 :class:`CycleCarry` bases of a cycling Parallel's epoch, else ``None``.
    """

    kind: str
    config: Mapping[str, Any]
    members: tuple[Mapping[str, Any], ...]
    worker_samples_yielded: tuple[int, ...]
    num_workers: int
    batch_size: int
    current_epoch: int
    world_size: int
    rank: int = 0
    resume_levels: tuple[Level, ...] = ()
    carry: tuple[int, ...] | None = None

    @property
    def topology(self) -> Topology:
        """The topology of the current level."""
        return Topology(max(self.world_size, 1), max(self.num_workers, 1), max(self.batch_size, 1))

    @property
    def first_topology(self) -> Topology:
        """The topology of level 0 of the epoch (what :attr:`carry` is relative to)."""
        return self.resume_levels[0].topology if self.resume_levels else self.topology

    def to_state(self) -> dict[str, Any]:
        """``{"0": <member 0 state>, ..., "composite": {...}}`` (plain values)."""
        out: dict[str, Any] = {str(i): dict(member) for i, member in enumerate(self.members)}
        out["composite"] = {
            "kind": self.kind,
            **self.config,
            "num_datasets": len(self.members),
            "num_samples_yielded": sum(self.worker_samples_yielded),
            "worker_samples_yielded": list(self.worker_samples_yielded),
            "num_workers": self.num_workers,
            "batch_size": self.batch_size,
            "world_size": self.world_size,
            "rank": self.rank,
            "current_epoch": self.current_epoch,
            "resume_levels": [done.as_dict() for done in self.resume_levels],
            "carry": None if self.carry is None else list(self.carry),
        }
        return out

    @classmethod
    def from_state(cls, composite: Mapping[str, Any], members: Sequence[Mapping[str, Any]] = ()) -> CompositeCheckpoint:
        """Read the ``"composite"`` entry of a state (and the member states, kept as they are).

        Raises:
            ConfigurationError: a missing or malformed key.
        """
        known = {
            "kind", "num_datasets", "num_samples_yielded", "worker_samples_yielded", "num_workers", "batch_size",
            "world_size", "rank", "current_epoch", "resume_levels", "carry",
        }  # fmt: skip
        raw_carry = composite.get("carry")
        return cls(
            kind=str(composite.get("kind")),
            config={k: v for k, v in composite.items() if k not in known},
            members=tuple(members),
            worker_samples_yielded=tuple(
                count(c, "worker_samples_yielded") for c in require(composite, "worker_samples_yielded")
            ),
            num_workers=count(require(composite, "num_workers"), "num_workers"),
            batch_size=count(require(composite, "batch_size"), "batch_size"),
            current_epoch=max(count(require(composite, "current_epoch"), "current_epoch"), 1),
            world_size=count(require(composite, "world_size"), "world_size"),
            rank=count(composite.get("rank", 0), "rank"),
            resume_levels=tuple(level(raw) for raw in composite.get("resume_levels") or ()),
            carry=None if raw_carry is None else tuple(count(c, "carry") for c in raw_carry),
        )
