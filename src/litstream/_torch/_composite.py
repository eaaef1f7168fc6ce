"""What ``CombinedStreamingDataset`` and ``ParallelStreamingDataset`` share: configuration, the
loader protocol (lengths; ``state_dict`` / ``load_state_dict`` and resume plans, whose logic is
``read._composite_state.CompositeResume``) and the per-worker iteration skeleton. The logic lives in
``read.plan._compose`` (streams, levels, resume) and ``read.plan._mixing``; this facade only wires it to the
members (their readers) and to one portal per worker.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from torch.utils.data import IterableDataset

from .._core import _bridge
from .._core._distributed import DistributedEnv, detect_worker
from .._core._errors import ConfigurationError
from ..read._args import check_reader_args
from ..read._composite_state import CompositeResume, checked_state, loader_state
from ..read._trust import check_allow_pickle
from ..read.plan._checkpoint import CompositeCheckpoint, CycleCarry
from ..read.plan._compose import MemberSpec, level_streams
from ..read.plan._compose_resume import CompositePlan, resolve_composite
from ..read.plan._resume_types import Level, Topology
from ..read.plan._session_compose import (
    AsyncSession,
    carry_after_epoch,
    composite_checkpoint,
    member_pieces,
    open_composite,
)
from ._dataset import StreamingDataset

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.from_thread import BlockingPortal

    from ..read._face import Member
    from ..read.aio._compose import ComposedSampleStream
    from ..read.engine._memory import MemoryLimit
    from ..read.plan._compose import Composer, Run
    from ..read.plan._pieces import ShuffleMode

__all__ = ["CompositeDataset", "Position"]


class Position(NamedTuple):
    """Where a reader serves from: global worker, epoch, level index, the level's topology and the
    level-0 base positions of a cycling Parallel (``None``: the default)."""

    worker: int
    epoch: int
    level: int
    topology: Topology
    carry: tuple[int, ...] | None


class CompositeDataset(IterableDataset[Any]):
    """Base of the Combined / Parallel wrappers (not public). Subclasses define ``_kind``,
    ``_config()``, ``_composer()`` and ``_emit()``."""

    _kind = ""

    def __init__(
        self, datasets: Sequence[StreamingDataset], force_override_state_dict: bool, allow_pickle: bool | None = None
    ) -> None:
        if isinstance(datasets, StreamingDataset) or not isinstance(datasets, Sequence) or not datasets:
            raise ConfigurationError(f"datasets must be a non-empty list of StreamingDataset, got {datasets!r}")
        for i, d in enumerate(datasets):
            if not isinstance(d, StreamingDataset):
                raise ConfigurationError(
                    f"datasets[{i}] is a {type(d).__name__}; every dataset must be a StreamingDataset"
                )
            if d._reader.spec.selection is not None or d.subsample != 1.0:
                raise ConfigurationError(
                    f"datasets[{i}] serves a selection (subsample, subset or train_test_split part); "
                    f"{type(self).__name__} mixes whole datasets only in this version: write the part out "
                    "with optimize() or pass the whole dataset"
                )
        if not isinstance(force_override_state_dict, bool):
            raise ConfigurationError(f"force_override_state_dict must be a bool, got {force_override_state_dict!r}")
        override = check_allow_pickle(allow_pickle)
        if override is not None:
            for d in datasets:  # one switch for every member (docs/security.md)
                if d._reader.spec.pickle_choice != override:
                    d._reader.replace_spec(allow_pickle=override, pickle_from_marker=False)
        self._datasets: list[Member] = list(datasets)
        self._force_override_state_dict = force_override_state_dict
        self.current_epoch = 1
        self.batch_size = 1
        self.num_workers = 1
        self._checkpoints = CompositeResume()  # a loaded checkpoint, its plan, a cycling Parallel's carry

    @property
    def datasets(self) -> list[StreamingDataset]:
        """The wrapped datasets, in order."""
        return list(self._datasets)  # type: ignore[arg-type]  # every member is a StreamingDataset

    # -- configuration, pushed into every member (LitData's setters) ------------------------------
    def set_epoch(self, current_epoch: int) -> None:
        """Set the 1-based epoch (ignored while a loaded checkpoint is pending)."""
        if self._checkpoints.saved is None:
            self.current_epoch = current_epoch
            for d in self._datasets:
                d.set_epoch(current_epoch)

    def set_shuffle(self, shuffle: ShuffleMode) -> None:
        for d in self._datasets:
            d.set_shuffle(shuffle)

    def set_drop_last(self, drop_last: bool) -> None:
        for d in self._datasets:
            d.set_drop_last(drop_last)

    def set_batch_size(self, batch_size: int) -> None:
        self.batch_size = batch_size
        for d in self._datasets:
            d.set_batch_size(batch_size)

    def set_num_workers(self, num_workers: int) -> None:
        self.num_workers = num_workers or 1
        for d in self._datasets:
            d.set_num_workers(num_workers)

    def _set_loader_prefetch(self, prefetch_factor: int) -> None:
        for d in self._datasets:
            d._set_loader_prefetch(prefetch_factor)

    def _fit_loader_prefetch(self, limit: MemoryLimit, num_workers: int) -> int | None:
        return None  # the members' workers plan with torch's prefetch_factor

    def _pin_distributed(self) -> None:
        for d in self._datasets:
            d._pin_distributed()

    def _env(self) -> DistributedEnv:
        env = self._datasets[0]._reader.distributed()
        if env.num_nodes > 1:
            raise ConfigurationError(
                f"{type(self).__name__} does not support num_nodes={env.num_nodes} yet; run on one node (unset NNODES)"
            )
        return env

    # -- what subclasses provide --------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        raise NotImplementedError

    def _composer(self) -> Composer:
        raise NotImplementedError

    def _emit(
        self, streams: list[list[Run]], count: int, portal: BlockingPortal, where: Position
    ) -> Generator[Any, None, None]:
        """Serve ``streams`` (one per member) from sample ``count`` on."""
        raise NotImplementedError

    def _cycles(self) -> bool:
        """Whether an epoch continues the member cycles of the previous one (a cycling Parallel).

        Decided from the configuration alone: no member index is read (the parent process of
        DataLoader workers must not open remote members it does not need; see DESIGN, fork safety).
        """
        return False

    def _carry_for(self, epoch: int, topology: Topology) -> tuple[int, ...] | None:
        """The cycle bases of ``epoch`` on ``topology`` when known (cycling Parallel), else ``None``."""
        return self._checkpoints.carry_for(self._cycles(), epoch, topology)

    def _members(self) -> tuple[MemberSpec, ...]:
        return tuple(d._reader.spec.member(d._reader.source().chunk_sizes) for d in self._datasets)

    def _topology(self, num_workers: int, batch_size: int | None = None) -> Topology:
        return Topology(self._env().world_size, max(num_workers, 1), batch_size or self.batch_size)

    # -- lengths -------------------------------------------------------------------------------------
    def worker_lengths(self, num_workers: int, batch_size: int) -> list[int]:
        """Samples each worker of this rank serves in the current epoch (index = worker id)."""
        env = self._env()
        topology = self._topology(num_workers, batch_size)
        composer = self._composer()
        streams = level_streams(
            composer, self.current_epoch, (), topology, self._carry_for(self.current_epoch, topology)
        )
        k = topology.num_workers
        return [composer.served(s, batch_size) for s in streams[env.rank * k : (env.rank + 1) * k]]

    def get_len(self, num_workers: int, batch_size: int) -> int:
        """Samples this rank serves per epoch with ``num_workers`` workers and ``batch_size``."""
        return sum(self.worker_lengths(num_workers, batch_size))

    def __len__(self) -> int:
        return self.get_len(self.num_workers, self.batch_size)

    # -- iteration -------------------------------------------------------------------------------------
    def __iter__(self) -> Generator[Any, None, None]:
        env = self._env()
        worker = detect_worker()
        session = open_composite(
            self._composer(),
            epoch=self.current_epoch,
            rank=env.rank,
            worker=worker.worker,
            topology=self._topology(worker.num_workers),
            plan=self._resume_plan(worker.num_workers),
            carry=self._checkpoints.carry,
        )
        if session.restarted:
            self._checkpoints.carry = session.carry
            self._clear_resume()
            self.current_epoch = session.epoch
        where = Position(session.worker, session.epoch, len(session.levels), session.topology, session.bases)
        with _bridge.daemon_portal() as portal:
            yield from self._emit(session.streams, session.count, portal, where)
        self._clear_resume()
        self.current_epoch = session.epoch + 1  # in a persistent DataLoader worker too (as StreamingDataset)

    def _epoch_served(self, epoch: int, own: Sequence[int], levels: Sequence[Level], num_workers: int) -> None:
        """Called by ``StreamingDataLoader`` when ``epoch`` ended after this rank's workers served ``own``
        at its current level: a cycling Parallel's next epoch continues from there."""
        if not self._cycles():
            return
        self._checkpoints.carry = carry_after_epoch(
            self._composer(),
            self._checkpoints.carry,
            epoch=epoch,
            topology=self._topology(num_workers),
            rank=self._env().rank,
            own=own,
            levels=levels,
        )

    # -- checkpoints (read/_composite_state.CompositeResume) ------------------------------------------------
    def state_dict(
        self,
        num_samples_yielded: int,
        num_workers: int,
        batch_size: int,
        *,
        current_epoch: int | None = None,
        worker_samples_yielded: Sequence[int] | None = None,
        resume_levels: Sequence[Level] = (),
    ) -> dict[str, Any]:
        """Checkpoint of this rank's position in the current epoch (``StreamingDataLoader`` fills the arguments,
        as for ``StreamingDataset.state_dict``; the counts are of composite samples).

        Returns:
            ``{"0": <state of dataset 0>, "1": ..., "composite": {...}}`` (plain values, picklable):
            LitData's layout (one ``StreamingDataset`` state per member, holding that member's
            share of the counts) plus the wrapper's own entry, which is what resume uses.
        """
        return self._checkpoints.state(
            self, num_samples_yielded, num_workers, batch_size, current_epoch, worker_samples_yielded, resume_levels
        )

    def loader_state(self, state: Mapping[str, Any], *, current_epoch: int, latest_worker_idx: int) -> dict[str, Any]:
        """``StreamingDataLoader.state_dict()`` of this wrapper from its :meth:`state_dict`, in LitData 0.2.76's
        layout (member states under ``"dataset"``, per-worker member counts, a Parallel's ``"num_cycles"``) with
        litstream's own ``"composite"`` entry beside them (LitData ignores it; ``load_state_dict`` reads it)."""
        return loader_state(self, state, current_epoch=current_epoch, latest_worker_idx=latest_worker_idx)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict` (see ``StreamingDataLoader.load_state_dict``).

        Raises:
            ConfigurationError: ``state`` is not a state of this kind of wrapper, holds another
                number of datasets, or was saved with other settings (the wrapper's or a member's:
                ``seed``, ``shuffle``, input, ...). With ``force_override_state_dict=True`` a
                settings mismatch only warns and the current settings win.
        """
        epoch = self._checkpoints.load(self, state)
        self.current_epoch = epoch
        for d in self._datasets:
            d._clear_resume()
            d.current_epoch = epoch
        self._checkpoints.settle(self)

    def _resume_plan(self, num_workers: int) -> CompositePlan | None:
        return self._checkpoints.plan(self, num_workers)

    def _clear_resume(self) -> None:
        self._checkpoints.clear()

    # -- async ------------------------------------------------------------------------------------------
    def _async_session(
        self,
        epoch: int | None,
        rank: int,
        world_size: int,
        batch_size: int,
        max_pre_download: int,
        state: Mapping[str, Any] | None,
    ) -> Callable[[], AsyncSession]:
        """Check the ``astream`` arguments (and ``state``) now; return the function that opens the
        session (on first use, in a worker thread: it may read the members' indexes)."""
        check_reader_args(epoch, rank, world_size, batch_size, max_pre_download)
        chosen = self.current_epoch if epoch is None else epoch
        topology = Topology(world_size, 1, batch_size)

        def prepare() -> AsyncSession:
            saved = None if state is None else CompositeCheckpoint.from_state(checked_state(self, state))
            composer = self._composer()
            plan = None if saved is None else resolve_composite(composer, saved, rank=rank, topology=topology)
            carry = self._checkpoints.carry
            if saved is not None and saved.carry is not None and self._cycles():
                carry = CycleCarry(saved.current_epoch, saved.first_topology, saved.carry)
            session = open_composite(
                composer, epoch=chosen, rank=rank, worker=0, topology=topology, plan=plan, carry=carry
            )
            members = [  # each member read as its own spec says (loader, index, cache, ...), these pieces only
                d._open_reader().read_spec().stream(pieces=pieces, max_pre_download=max_pre_download)
                for d, pieces in zip(
                    self._datasets, member_pieces(composer, session.streams, session.count, batch_size), strict=True
                )
            ]
            config, member_configs = self._config(), [d._config() for d in self._datasets]

            def checkpoint(served: int) -> dict[str, Any]:
                return composite_checkpoint(
                    composer,
                    kind=self._kind,
                    config=config,
                    members=member_configs,
                    epoch=session.epoch,
                    rank=rank,
                    topology=topology,
                    levels=session.levels,
                    bases=session.bases,
                    own=[served],
                ).to_state()

            return AsyncSession(composer, session, members, checkpoint)

        return prepare

    def __aiter__(self) -> ComposedSampleStream:
        """``async for sample in ds``: this rank's samples of the current epoch, read as one reader."""
        env = self._env()
        return self.astream(rank=env.rank, world_size=env.world_size, batch_size=self.batch_size)

    def astream(
        self,
        *,
        epoch: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        batch_size: int = 1,
        max_pre_download: int = 2,
        state: Mapping[str, Any] | None = None,
    ) -> ComposedSampleStream:
        """What one reader of this dataset serves (a Combined dataset's mix, a Parallel dataset's tuples), as an
        async stream (asyncio or trio).

        The async twin of iterating the dataset in one process (``num_workers=0``); use it as
        ``async for sample in ds.astream()`` or ``async with ds.astream() as samples``, like
        :func:`litstream.astream`. Each member is read with its own settings (shuffle, seed,
        transform, ...); a Parallel dataset's ``transform`` runs on the event loop's thread.

        Args:
            epoch: 1-based epoch (default: this dataset's current epoch).
            rank: This reader's rank in ``[0, world_size)``. Default 0.
            world_size: Readers sharing the data. Default 1.
            batch_size: Batch size that splits items between ranks in whole batches (and the run
                length of ``"per_stream"``). Default 1.
            max_pre_download: Chunks each member fetches ahead (>= 1). Default 2.
            state: Resume from a checkpoint: what the stream's ``state_dict()`` returned (or the
                dataset entry of a ``StreamingDataLoader`` checkpoint of this wrapper). The stream
                serves exactly the rest of that epoch (``epoch`` is the checkpoint's); ``rank``,
                ``world_size`` and ``batch_size`` may differ from the checkpoint's (elastic
                resume, as ``StreamingDataLoader`` does it). A checkpoint taken after the last
                sample starts the next epoch. Checked on first iteration: a checkpoint of another
                wrapper or other settings raises ``ConfigurationError`` (see ``load_state_dict``).

        Returns:
            A ``CombinedSampleStream`` or ``ParallelSampleStream``. Nothing is read until iteration starts.

        Raises:
            ConfigurationError: a bad argument; an endless ``ParallelStreamingDataset`` (``length=float('inf')``).
        """
        open_session = self._async_session(epoch, rank, world_size, batch_size, max_pre_download, state)
        return self._stream(open_session, batch_size, state)

    def _stream(
        self, open_session: Callable[[], AsyncSession], batch_size: int, state: Mapping[str, Any] | None
    ) -> ComposedSampleStream:
        """The stream of the session ``open_session`` opens (on first use)."""
        raise NotImplementedError
