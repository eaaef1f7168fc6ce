"""``DatasetReader``: an open read of one dataset, the object behind a ``StreamingDataset``.

It owns everything a read needs between calls: the spec and the version it pins, the opened source, the
loaded checkpoint and its resolved plan, LitData's ``shuffler``, the key reader, the loader's prefetch and
the rank of the process that started the DataLoader workers. A face holds a spec-backed reader and
delegates to it; nothing here reads or writes a face. An epoch walks down once: the face's ``__iter__``
asks :meth:`DatasetReader.epoch` for decode batches, which runs the plan (``read/plan/``) and the pump
(``read/engine/_pump.py``) over the engine (``read/engine/_engine.py``).

The meaning of every checkpoint key and of strict versus elastic resume is ``read/plan/_resume.py``'s; the
selection is ``read/plan/_subset.py``'s.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from typing import TYPE_CHECKING, Any

from .._core import _bridge
from .._core._distributed import detect_distributed, detect_worker, in_worker
from ._dataset_resume import DatasetResume
from ._shuffler import make_shuffler
from ._transform import compose
from .engine import _pump as pump
from .engine._decode import work_batches
from .engine._engine import split_head
from .engine._memory import fit_decoded_cache
from .plan._plan import items_per_rank, worker_plan
from .plan._session import open_session
from .plan._subset import Selection, subset_selection
from .source._keys import KeyReader, read_by_keys
from .source._versions import VERSION_KEY, check_version_digest

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Mapping, Sequence

    from anyio.from_thread import BlockingPortal

    from .._core._distributed import DistributedEnv, WorkerEnv
    from ..format._batch_decode import ColumnBatch
    from ._shuffler import Shuffle
    from ._spec import ReadSpec
    from .engine._limits import MaxMemory
    from .engine._memory import MemoryLimit
    from .plan._pieces import Piece
    from .plan._resume import ResumePlan
    from .source._source import DatasetSource

__all__ = ["DatasetReader"]

HEAD_ITEMS = 8  # samples of a local dataset served before the engine's event loop starts

# rebuilt in each process, never pickled (``transforms`` is set again by the face at each use)
_PROCESS_LOCAL = ("_source", "_key_reader", "shuffler", "transforms", "_index_bytes")


class DatasetReader:
    """The read state of one dataset in one process, and every operation on it.

    Args:
        spec: What is read and in which order (checked by ``ReadSpec.build``), pinned to a version or not.
        index_bytes: ``index.json`` as ``ReadSpec.pin_now_with_index`` read it: the first open uses it.
        max_memory: The checked ``max_memory`` (``read/engine/_limits.py``): bytes all readers of a loader may buffer.
        force_override_state_dict: Whether a checkpoint saved with other settings resumes with these (warns).
        num_canonical_nodes: LitData's first-run node count, recorded in checkpoints (``None``: unknown).

    Attributes:
        spec: The current spec (replaced, never mutated).
        current_epoch: The 1-based epoch that drives the shuffle order.
        batch_size: The loader's batch size (1 outside a loader).
        num_workers: The loader's worker count (at least 1).
        transforms: The callables applied to each sample, in order, as the face last set them.
        shuffler: LitData's ``shuffler`` for this plan: ``None`` until the first length or epoch.
        resume: The loaded checkpoint (``resume.saved``: ``None`` when none is pending), until its epoch ends.
        parent_env: Rank and world size of the process that started the DataLoader workers.
        loader_prefetch: Batches a DataLoader worker builds ahead (0: not in a loader).
    """

    def __init__(
        self,
        spec: ReadSpec,
        *,
        max_memory: MaxMemory,
        force_override_state_dict: bool = False,
        num_canonical_nodes: int | None = None,
        index_bytes: bytes | None = None,
    ) -> None:
        self.spec = spec
        self.max_memory = max_memory
        self.force_override_state_dict = force_override_state_dict
        self.num_canonical_nodes = num_canonical_nodes
        self.current_epoch, self.batch_size, self.num_workers = 1, 1, 1
        self.transforms: tuple[Callable[[Any], Any], ...] = spec.transforms
        self.shuffler: Shuffle | None = None
        self.resume = DatasetResume()
        self.parent_env: DistributedEnv | None = None
        self.loader_prefetch = 0
        self._source: DatasetSource | None = None  # per process: the opened dataset
        self._key_reader: KeyReader | None = None  # per process: the keys/ shards loaded
        # the pinned index.json as read in this process, until the first open (a local one is read again in place)
        self._index_bytes = index_bytes if pump.opens_remote(spec) else None

    # -- pickling: the spec, counters and checkpoint; nothing opened in this process ----------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in _PROCESS_LOCAL}
        state["parent_env"] = detect_distributed()  # a spawned worker may not see the process group
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.transforms = self.spec.transforms
        self.shuffler = self._source = self._key_reader = self._index_bytes = None

    # -- the spec and the opened source ------------------------------------------------------------------------
    def source(self) -> DatasetSource:
        """The dataset opened in this process (in place when local, else on a portal), pinned to the version it
        opened; under a memory limit, ``ds[i]``'s cache of decoded chunks fits this reader's share."""
        if self._source is None:
            known, self._index_bytes = self._index_bytes, None
            source = pump.open_spec_now(self.spec) or _bridge.call(self.spec.open, known)
            self.spec = self.spec.pinned(source)  # this reader's other processes serve the version it opened
            fit_decoded_cache(source, self.max_memory, detect_worker().num_workers)
            self._source = source
        return self._source

    @property
    def opened(self) -> DatasetSource | None:
        """The source if it is already open in this process, else ``None`` (opens nothing)."""
        return self._source

    def replace_spec(self, **changes: Any) -> None:
        """Replace the spec's ``changes`` (checked by ``ReadSpec.replace``); a change drops the opened source
        and the shuffler (made again on first use).

        Raises:
            ConfigurationError: a bad value, naming it.
        """
        if all(getattr(self.spec, name) is value for name, value in changes.items()):
            return
        self.spec, self._source, self.shuffler = self.spec.replace(**changes), None, None

    def replace_order(self, **changes: Any) -> None:
        """Set ``shuffle`` / ``drop_last``; a changed value drops the shuffler (made again on first use)."""
        if any(getattr(self.spec, name) != value for name, value in changes.items()):
            self.shuffler = None
        self.spec = self.spec.replace(**changes)

    def read_spec(self) -> ReadSpec:
        """The spec with the current transforms; an unresolved subsample stays lazy."""
        return dataclasses.replace(self.spec, transforms=self.transforms)

    def apply(self, sample: Any) -> Any:
        """``sample`` after the transforms, in order."""
        for t in self.transforms:
            sample = t(sample)
        return sample

    # -- selection ---------------------------------------------------------------------------------------------
    def selected(self) -> Selection | None:
        """The items served, or ``None`` for every item once; a subsample is resolved once, into the spec."""
        spec = self.spec
        if spec.selection is None and spec.subsample != 1.0:
            self.spec = dataclasses.replace(spec, selection=spec.select(self.source().chunk_sizes))
        return self.spec.selection

    def restricted(self, selection: Selection) -> DatasetReader:
        """A copy serving ``selection`` only, at epoch 1 with no pending checkpoint."""
        new = copy.copy(self)  # pickled state only: nothing opened, no shuffler (another plan: made on first use)
        new.spec = dataclasses.replace(self.read_spec(), selection=selection)
        new.current_epoch, new.resume = 1, DatasetResume()
        return new

    def subset(self, indices: Sequence[int] | slice) -> DatasetReader:
        """A copy restricted to ``indices`` of what this reader serves (see ``StreamingDataset.subset``)."""
        base = self.selected() or Selection.full(self.source().chunk_sizes)
        return self.restricted(subset_selection(base, indices))

    def whole(self) -> bool:
        """Whether every item is served once, decided without reading the index."""
        return self.spec.selection is None and self.spec.subsample == 1.0

    def address(self, index: object) -> range | int | tuple[int, int]:
        """Where item ``index`` is: the positions of a slice, a position of the whole dataset, or the
        ``(chunk, item)`` of a selected item.

        Raises:
            TypeError: ``index`` is neither int nor slice.
            IndexError: ``index`` is outside ``[-len, len)``.
        """
        source, selection = self.source(), self.selected()
        total = len(source) if selection is None else len(selection)
        if isinstance(index, slice):
            return range(*index.indices(total))
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"dataset indices must be int or slice, got {type(index).__name__}")
        position = index + total if index < 0 else index
        if not 0 <= position < total:
            raise IndexError(f"index {index} is out of range for a dataset of {total} items")
        return position if selection is None else selection.locate(position)

    def chunk_names(self) -> list[str]:
        """The chunk files read, in selection order (LitData's ``subsampled_files``)."""
        names = [c.filename for c in self.source().index.chunks]
        selection = self.selected()
        return names if selection is None else [names[c] for c in selection.chunks]

    def layout(self) -> tuple[Sequence[int], Sequence[tuple[int, int]] | None]:
        """Chunk sizes and regions of what is served, as LitData's states count them."""
        sizes = self.source().chunk_sizes
        selection = self.selected()
        return (sizes, None) if selection is None else (selection.sizes(sizes), selection.regions)

    # -- topology ----------------------------------------------------------------------------------------------
    def pin_distributed(self) -> None:
        """Record this process's rank and world size, and pin the dataset version, for the DataLoader workers
        about to start (each worker opens the dataset again: the pinned version, whatever was committed since)."""
        self.parent_env = detect_distributed()
        self.spec = self.spec.pin_now()  # opened here already: pinned then (source())

    def distributed(self) -> DistributedEnv:
        """Rank and world size: in a DataLoader worker, those of the process that started it."""
        return self.parent_env if self.parent_env is not None and in_worker() else detect_distributed()

    # -- lengths -----------------------------------------------------------------------------------------------
    def plan_inputs(self) -> tuple[list[tuple[int, int]], list[int]]:
        """Regions and chunk bytes of the chunks the plan runs on (the selected ones, if any)."""
        source = self.source()
        chunk_bytes = [c.chunk_bytes for c in source.index.chunks]
        selection = self.selected()
        if selection is None:
            return [(0, size) for size in source.chunk_sizes], chunk_bytes
        return list(selection.regions), [chunk_bytes[c] for c in selection.chunks]

    def _plan_keywords(self) -> dict[str, Any]:
        """What this rank's plan depends on besides the regions, the workers and the batch size."""
        env, spec = self.distributed(), self.spec
        return {
            "rank": env.rank, "world_size": env.world_size, "drop_last": spec.resolved_drop_last(env.world_size),
            "shuffle": spec.shuffle is not False, "seed": spec.seed, "epoch": self.current_epoch,
            "num_nodes": env.num_nodes, "max_cache_size": spec.plan_cache_bytes,
        }  # fmt: skip

    def worker_lengths(self, num_workers: int, batch_size: int) -> list[int]:
        """Items each worker of this rank serves in the current epoch (index = worker id)."""
        regions, chunk_bytes = self.plan_inputs()
        workers, keywords = max(num_workers, 1), self._plan_keywords()
        return [
            sum(p.end - p.start for p in worker_plan(regions, worker=worker, num_workers=workers, batch_size=batch_size,
                                                     chunk_bytes=chunk_bytes, **keywords))
            for worker in range(workers)
        ]  # fmt: skip

    def rank_length(self, num_workers: int, batch_size: int) -> int:
        """Items this rank serves in the current epoch with ``num_workers`` workers and ``batch_size``."""
        regions, chunk_bytes = self.plan_inputs()
        return items_per_rank(regions, num_workers=max(num_workers, 1), batch_size=batch_size,
                              chunk_bytes=chunk_bytes, **self._plan_keywords())  # fmt: skip

    def ensure_shuffler(self) -> None:
        """Make LitData's ``shuffler`` (``read/_shuffler.py``) for this plan unless it is already there."""
        if self.shuffler is None:
            regions, chunk_bytes = self.plan_inputs()
            spec = self.spec
            self.shuffler = make_shuffler(
                spec.shuffle, regions, [end for _, end in regions], seed=spec.seed,
                drop_last=spec.resolved_drop_last(self.distributed().world_size), item_window=spec.item_shuffle_window,
                shuffle_window=spec.shuffle_window, chunk_bytes=chunk_bytes, max_cache_size=spec.plan_cache_bytes,
            )  # fmt: skip

    # -- an epoch ----------------------------------------------------------------------------------------------
    def open_epoch(self, worker: WorkerEnv) -> Sequence[Piece]:
        """The pieces ``worker`` reads this epoch (the rest of a loaded checkpoint's epoch, if any); a checkpoint
        taken at its epoch's end is dropped and the reader moves on to the next epoch."""
        env = self.distributed()
        args = self.spec.plan_args(rank=env.rank, world_size=env.world_size, worker=worker.worker,
                                   num_workers=worker.num_workers, batch_size=self.batch_size,
                                   epoch=self.current_epoch, num_nodes=env.num_nodes)  # fmt: skip
        session = open_session(self.source(), args, self.selected(), self.resume_position(worker.num_workers))
        if session.restarted:
            self.clear_resume()
            self.current_epoch = session.epoch
        return session.pieces

    def epoch(self, columns: bool | None) -> Generator[list[Any] | ColumnBatch, None, None]:
        """This process's decode batches of one epoch: lists of samples, or with ``columns`` not ``None`` (a
        ``StreamingDataLoader`` groups them; ``True``: ``ColumnBatch`` es allowed) batches aligned to
        ``batch_size``. When it ends the checkpoint is cleared and the epoch advances (in every process, as
        LitData: a persistent DataLoader worker keeps this copy, so its next epoch reshuffles)."""
        source = self.source()
        self.ensure_shuffler()
        pieces = self.open_epoch(detect_worker())
        transform = compose(self.transforms)
        local = pump.in_place(source, pieces)  # no event loop needed: no engine thread, no hand-over per chunk
        if not local and self.batch_size <= 1 and columns is None:  # a local chunk's head before the loop starts
            head, pieces = split_head(source, pieces, HEAD_ITEMS)
            if head is not None:
                yield from work_batches(source, head, transform)
        with contextlib.nullcontext(None) if local else _bridge.daemon_portal() as portal:
            with contextlib.closing(self.batches(pieces, portal, 1, columns=bool(columns))) as batches:
                yield from batches
        self.clear_resume()
        self.current_epoch += 1

    def samples(self, pieces: Sequence[Piece], portal: BlockingPortal, members: int) -> Generator[Any, None, None]:
        """The samples of ``pieces`` fetched on ``portal``'s loop (a Combined / Parallel wrapper's member:
        ``members`` datasets a worker reads at once share its memory budget)."""
        with contextlib.closing(self.batches(pieces, portal, members)) as batches:
            for batch in batches:
                yield from batch  # type: ignore[misc]  # lists: batches without columns

    def batches(
        self, pieces: Sequence[Piece], portal: BlockingPortal | None, members: int, columns: bool = False
    ) -> Generator[list[Any] | ColumnBatch, None, None]:
        """Decode batches of ``pieces`` (``ColumnBatch`` es with ``columns``) fetched on ``portal``'s loop
        (``None``: mapped in place); ``members``: datasets a worker reads at once, sharing its memory budget."""
        inside = in_worker()  # a worker's batches (torch's prefetch_factor, 2 by default) count in its share
        return pump.serve_batches(
            portal, self.spec, self.source(), pieces, compose(self.transforms), max_memory=self.max_memory,
            readers=detect_worker().num_workers * members, batch_size=self.batch_size,
            prefetch_factor=(self.loader_prefetch or 2) if inside else 0,
            alloc=pump.worker_alloc(columns) if self.batch_size > 1 and inside else None, columns=columns,
        )  # fmt: skip

    def fit_prefetch(self, limit: MemoryLimit, num_workers: int) -> int | None:
        """The loader's ``prefetch_factor`` whose batches fit ``limit`` with ``num_workers`` workers, or ``None``
        (not when opening a remote index here would use its client in a process about to fork its workers)."""
        source = self.source() if self._source is not None or not pump.opens_remote(self.spec) else None
        return pump.loader_prefetch(self.spec, source, limit, num_workers, self.batch_size)

    # -- random and keyed access -------------------------------------------------------------------------------
    def get_item(self, index: int | slice) -> Any:
        """Item ``index`` transformed (a list for a slice); see ``StreamingDataset.__getitem__``."""
        at, source = self.address(index), self.source()
        if isinstance(at, range):
            return [self.get_item(i) for i in at]
        at_item = (source.get_item, at) if isinstance(at, int) else (pump.get_item_at, source, *at)
        return self.apply(_bridge.call(*at_item))

    def get_by_keys(self, keys: Sequence[str | int]) -> list[Any]:
        """The samples of ``keys``, in order, in one call to the read engine, each transformed."""
        if self._key_reader is None:
            self._key_reader = KeyReader()
        samples = _bridge.call(read_by_keys, self.source(), self._key_reader, list(keys), self.selected())
        return [self.apply(sample) for sample in samples]

    # -- checkpoints -------------------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """The settings a checkpoint must match (``read/plan/_resume_config.check_config``)."""
        config = self.spec.config()
        if not self.whole():  # LitData's subsampled_files / region_of_interest
            source = self.source()
            selection = self.selected() or Selection.full(source.chunk_sizes)
            config.update(selection.state([c.filename for c in source.index.chunks]))
        return config

    def load_state(self, state: Mapping[str, Any]) -> None:
        """``StreamingDataset.load_state_dict``: pin the version ``state`` was saved on, check ``state`` and keep
        it for the next epoch (:class:`~litstream.read._dataset_resume.DatasetResume`).

        Raises:
            ConfigurationError: as ``StreamingDataset.load_state_dict``.
            VersionNotFoundError: the version ``state`` was saved on is no longer kept.
        """
        self.resume_version(state.get(VERSION_KEY))
        self.current_epoch = self.resume.load(self, state)

    def resume_version(self, saved: object) -> None:
        """Pin the dataset version a checkpoint was saved on (``None``: saved without one, e.g. by LitData); an
        opened dataset of another version is opened again on the checkpoint's."""
        if saved is None:
            return
        ref = check_version_digest(saved, VERSION_KEY)
        current = self.spec.version
        if current is None or current.digest != ref.digest:
            self.replace_spec(version=ref)

    def clear_resume(self) -> None:
        """Forget the loaded checkpoint (its epoch was served or abandoned)."""
        self.resume.clear()

    def resume_position(self, num_workers: int) -> ResumePlan | None:
        """The loaded checkpoint resolved for this rank, ``num_workers`` and the batch size (``None``: none)."""
        return self.resume.position(self, num_workers)
