"""``ParallelStreamingDataset``: one sample of every ``StreamingDataset`` per step (LitData's name)."""

from __future__ import annotations

import hashlib
import inspect
import random
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._core._errors import ConfigurationError, PlanError
from ..read.aio._compose import ParallelSampleStream, Prepared
from ..read.plan._compose import ENDLESS, ParallelComposer, cycle_streams, run_length, to_pieces
from ..read.plan._session_compose import member_pieces
from ._composite import CompositeDataset, Position

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator, Mapping, Sequence

    from anyio.from_thread import BlockingPortal

    from ..read._face import Member
    from ..read.plan._compose import Run
    from ..read.plan._session_compose import AsyncSession
    from ._dataset import StreamingDataset

__all__ = ["ParallelStreamingDataset"]


def _positional_arity(fn: Callable[..., Any]) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: assume one argument
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds for p in params)


def _first(cycles: Iterator[list[Run]]) -> list[Run]:
    return next(cycles, [])


class ParallelStreamingDataset(CompositeDataset):
    """Read several :class:`StreamingDataset` s side by side: each step yields one sample of every member.

    Matches LitData's ``ParallelStreamingDataset``. Each reader (DataLoader worker, or the process)
    reads its usual share of every member and zips them.

    Args:
        datasets: The members, each a :class:`StreamingDataset`.
        length: ``None`` (default): stop when the shortest member's share ends (per reader); the
            length is the shortest member's. An int ``>= 0``: serve exactly ``length`` steps per rank
            and epoch (split over the workers as ``length // K + (worker < length % K)``), reading
            the members cyclically: a member whose share ends starts over with its next epoch (a
            worker with no item of a short member cycles through another worker's share of it).
        force_override_state_dict: Let ``load_state_dict`` accept a checkpoint saved with other
            settings, warning instead of raising. Default False.
        allow_pickle: ``True`` / ``False`` sets every member's ``allow_pickle`` (see
            :class:`StreamingDataset`); ``None`` (default) keeps each member's own decision.
        transform: Applied to each step's tuple of samples, in the reader: ``transform(samples)`` or
            ``transform(samples, rngs)`` where ``rngs`` is ``{"random": random.Random, "numpy":
            numpy.random.Generator, "torch": torch.Generator}``, seeded from ``seed``, the worker and
            the position where the reader started (so a run that resumes gets the same generators
            as a fresh run started at that position). Other arities raise.
        seed: Seed of the ``rngs`` given to ``transform``. Default 42.
        resume: With ``length``: ``True`` (default) makes every epoch continue the cycle where the
            previous one stopped — also when it was cut short, and across a checkpoint restored with
            ``StreamingDataLoader.load_state_dict`` (cases B13); an epoch started without history
            (a fresh loader at epoch ``e``) assumes ``e - 1`` complete epochs before it. ``False``:
            every epoch starts at the members' beginning (their epoch 1). Ignored without ``length``.
        reset_rngs: Give ``transform`` the same generators at the start of every epoch. Default False.

    Yields:
        ``tuple`` of one sample per member, or ``transform``'s result.

    Resume: see ``StreamingDataLoader``; a checkpoint may be resumed on another number of workers
    or ranks: the steps not yet served are then served exactly once, tuples intact (with
    ``length`` and ``resume=True``, the epoch after such a resume starts where a run on the new
    topology with complete epochs would be).

    Raises:
        ConfigurationError: a member that is not a ``StreamingDataset``, a bad ``length`` (e.g.
            ``float("inf")``, not supported yet), a ``transform`` taking other than 1 or 2
            positional arguments (all at construction).
    """

    _kind = "parallel"

    def __init__(
        self,
        datasets: Sequence[StreamingDataset],
        length: int | float | None = None,
        force_override_state_dict: bool = False,
        transform: Callable[..., Any] | None = None,
        seed: int = 42,
        resume: bool = True,
        reset_rngs: bool = False,
        allow_pickle: bool | None = None,
    ) -> None:
        super().__init__(datasets, force_override_state_dict, allow_pickle)
        endless = isinstance(length, float) and length == float("inf")
        if (
            length is not None
            and not endless
            and (isinstance(length, bool) or not isinstance(length, int) or length < 0)
        ):
            raise ConfigurationError(
                f"length must be None (stop at the shortest dataset), an int >= 0 (steps per rank and epoch, cycling "
                f"the datasets) or float('inf') (cycle forever), got {length!r}"
            )
        self._transform_nargs: int | None = None
        if transform is not None:
            if not callable(transform):
                raise ConfigurationError(f"transform must be callable, got {transform!r}")
            nargs = _positional_arity(transform)
            if nargs not in (None, 1, 2):
                raise ConfigurationError(
                    f"transform must take 1 argument (the tuple of samples) or 2 (samples, rngs), "
                    f"{transform!r} takes {nargs}"
                )
            self._transform_nargs = nargs or 1
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise ConfigurationError(f"seed must be an int in [0, 2**32), got {seed!r}")
        for name, value in (("resume", resume), ("reset_rngs", reset_rngs)):
            if not isinstance(value, bool):
                raise ConfigurationError(f"{name} must be a bool, got {value!r}")
        self.length = length
        self._endless = endless
        self.transform = transform
        self.seed = seed
        self.resume = resume
        self.reset_rngs = reset_rngs

    def _config(self) -> dict[str, Any]:
        return {"length": self.length, "seed": self.seed, "resume": self.resume, "reset_rngs": self.reset_rngs}

    def _composer(self) -> ParallelComposer:
        length = None if self._endless or self.length is None else int(self.length)
        return ParallelComposer(self._members(), length, self.resume, endless=self._endless)

    def is_cycling(self) -> bool:
        """Whether the members are cycled (LitData's meaning): ``length`` is an int or ``float("inf")``."""
        return self.length is not None

    def is_infinite(self) -> bool:
        """Whether the stream never ends (LitData's meaning): ``length=float("inf")``."""
        return self._endless

    def _cycles(self) -> bool:
        return self.length is not None and self.resume

    def worker_lengths(self, num_workers: int, batch_size: int) -> list[int]:
        """Steps each worker of this rank serves per epoch (see ``CompositeDataset.worker_lengths``).

        Raises:
            TypeError: ``length=float("inf")``: the stream has no length.
        """
        if self._endless:
            raise TypeError("ParallelStreamingDataset(length=float('inf')) is endless and has no length")
        return super().worker_lengths(num_workers, batch_size)

    # -- iteration ----------------------------------------------------------------------------------
    def _rngs(self, where: Position, count: int) -> dict[str, Any]:
        g, epoch, level = where.worker, where.epoch, where.level
        key = (self.seed, g) if self.reset_rngs else (self.seed, g, epoch, level, count)
        seed = int(hashlib.sha256(str(key).encode()).hexdigest(), 16) % (2**32 - 1)
        return {
            "random": random.Random(seed),
            "numpy": np.random.default_rng(seed),
            "torch": torch.Generator().manual_seed(seed),
        }

    def _finisher(self, where: Position, count: int) -> Callable[[tuple[Any, ...]], Any]:
        transform = self.transform
        if transform is None:
            return lambda samples: samples
        if self._transform_nargs == 2:
            rngs = self._rngs(where, count)
            return lambda samples: transform(samples, rngs)
        return transform

    def _emit(
        self, streams: list[list[Run]], count: int, portal: BlockingPortal, where: Position
    ) -> Generator[Any, None, None]:
        if self._endless:
            start = (where.carry[where.worker] if where.carry is not None else 0) + count
            cycles = [cycle_streams(m, where.topology, where.worker, start) for m in self._composer().members]  # lazy
            members = [
                self._chain(d, c, portal, len(self._datasets)) for d, c in zip(self._datasets, cycles, strict=True)
            ]
            specs = self._composer().members
            nothing = any(not _first(cycle_streams(m, where.topology, where.worker, 0)) for m in specs)
            steps = count if nothing else ENDLESS  # a dataset with nothing for this worker: it serves nothing
        else:
            steps = run_length(streams[0]) if streams else 0
            pieces = member_pieces(self._composer(), streams, count, where.topology.batch_size)
            members = [
                d._open_reader().samples(p, portal, len(self._datasets))
                for d, p in zip(self._datasets, pieces, strict=True)
            ]
        finish = self._finisher(where, count)
        try:
            for _ in range(steps - count):
                samples = []
                for i, it in enumerate(members):
                    try:
                        samples.append(next(it))
                    except StopIteration:
                        raise PlanError(
                            f"dataset {i} ran out before its planned share (worker {where.worker})"
                        ) from None
                yield finish(tuple(samples))
        finally:
            for it in members:
                it.close()

    @staticmethod
    def _chain(
        d: Member, cycles: Iterator[list[Run]], portal: BlockingPortal, members: int
    ) -> Generator[Any, None, None]:
        for stream in cycles:
            yield from d._open_reader().samples(to_pieces(stream), portal, members)

    def _stream(
        self, open_session: Callable[[], AsyncSession], batch_size: int, state: Mapping[str, Any] | None
    ) -> ParallelSampleStream:
        """The tuples one reader of this dataset serves (see :meth:`CompositeDataset.astream`; ``transform`` runs
        on the event loop's thread)."""
        if self._endless:
            raise ConfigurationError(
                "astream() of an endless ParallelStreamingDataset (length=float('inf')) is not supported yet; "
                "pass an int length"
            )

        def prepare() -> Prepared:
            _, session, members, checkpoint = open_session()
            where = Position(session.worker, session.epoch, len(session.levels), session.topology, session.bases)
            finish = self._finisher(where, session.count)
            steps = run_length(session.streams[0]) if session.streams else 0
            return Prepared(members, (steps, lambda samples, _step: finish(samples)), session.count, checkpoint)

        return ParallelSampleStream(prepare, state)
