"""``StreamingDataLoader``: torch's ``DataLoader`` for a :class:`StreamingDataset`, with resume.

It pushes ``batch_size``, ``num_workers``, ``shuffle`` and ``drop_last`` into the dataset (torch's
own ``drop_last`` is never set: the dataset deals whole batches to workers), counts the samples it
hands out, and saves/restores that position with ``state_dict()`` / ``load_state_dict()``.

Exact counting: the collate function is wrapped so that every batch travels with the id of the
torch worker that built it and its sample count (read in the worker with ``get_worker_info()``);
the loader strips the tag and adds the count to that worker's tally. So the per-worker counts in a
checkpoint are what torch really delivered, whatever order it delivered batches in. How the counts
of other ranks and a resume on another topology follow from them is described in
``litstream.read.plan._resume``.

Batches from workers: each worker copies a batch's tensors into one of a few shared-memory slots it
reuses, and this process copies them out and frees the slot (``litstream._torch._slots``); torch's own
path (new shared memory per tensor) is used with ``persistent_workers=True``, and for a batch when
no slot is free.

Worker start method: when ``num_workers > 0`` and no ``multiprocessing_context`` is given, the
platform default is used unless this process has used obstore (forked children then need a private
copy of obstore's native module and the parent has obstore's threads), in which case ``forkserver``
(or ``spawn``) is chosen. Workers started by ``forkserver`` or ``spawn`` get the environment of the
moment the iterator starts them (``WorkerSetup.hand_over_environ``), as forked ones do.
"""

from __future__ import annotations

import cProfile
import math
import multiprocessing
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from torch.utils.data import BatchSampler, DataLoader

from .._core._distributed import detect_distributed
from .._core._errors import ConfigurationError
from .._core._trace import CAT_BATCH, CAT_EPOCH, TRACER
from ..read.engine._memory import memory_limit
from ..read.engine._pump import opens_remote
from ..read.plan._litdata_state import from_litdata_combined, is_litdata_composite_state
from ..storage import _store
from ._collate import TaggingCollate as _TaggingCollate
from ._collate import litdata_collate
from ._composite import CompositeDataset
from ._dataset import StreamingDataset
from ._loader_profile import CPROFILE_MAIN, ProfileArgs, WorkerSetup, dump_cprofile, output_dir
from ._loader_slots import close_slots, open_slots
from ._slots import SlotBatch, SlotStatistics

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Generator

    from ..read.plan._pieces import ShuffleMode
    from ..read.plan._resume import Level

__all__ = ["StreamingDataLoader"]


def _start_method(context: Any) -> str:
    """The start method of workers torch starts with ``context`` (torch's ``multiprocessing_context``, a name
    or a context; ``None``: the program's default, which this does not fix: ``set_start_method`` stays open)."""
    if isinstance(context, str):
        return context
    if context is not None:
        return str(context.get_start_method())
    return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]


def _forks(context: Any) -> bool:
    """Whether workers started with ``context`` (see :func:`_start_method`) are forked from this process."""
    return _start_method(context) == "fork"


class StreamingDataLoader(DataLoader[Any]):
    """A ``torch.utils.data.DataLoader`` over a :class:`StreamingDataset` that can resume mid-epoch.

    Args:
        dataset: The :class:`StreamingDataset` to load, or a ``CombinedStreamingDataset`` /
            ``ParallelStreamingDataset`` of them.
        batch_size: Samples per batch (default 1).
        num_workers: Worker processes (default 0: load in this process).
        shuffle: If not ``None``, overrides the dataset's ``shuffle``.
        drop_last: If not ``None``, overrides the dataset's ``drop_last``.
        collate_fn: Batch builder (default: :func:`litstream.litdata_collate`, LitData's default: graphs
            batched with PyG, everything else as torch's ``default_collate`` minus its stacking copy
            where samples were decoded as one array; see ``litstream._torch._collate``).
        profile_batches: Profile DataLoader worker 0 of rank 0 with ``torch.profiler`` and write
            ``result.json`` (Chrome trace JSON) to ``profile_dir``: ``True`` for the worker's whole
            life, an int ``N`` for ``N`` batches (LitData's argument; LitData uses viztracer). Needs
            ``num_workers >= 1``. Default ``False``.
        profile_skip_batches: Batches worker 0 builds before ``profile_batches`` starts (default 0).
        profile_dir: Directory of the profiles (created; default ``None``: the current directory).
        profile_cprofile: Write cProfile statistics of this process and of worker 0:
            ``cprofile_main.prof``/``.txt`` and ``cprofile_worker0.prof``/``.txt`` in ``profile_dir``
            (LitData's). Not with ``profile_batches``. Default ``False``. See ``docs/tracing.md``.
        prefetch_factor: Passed to ``torch.utils.data.DataLoader`` when not ``None`` (torch's default then).
        **kwargs: Passed to ``torch.utils.data.DataLoader`` (``pin_memory``, ``prefetch_factor``,
            ``multiprocessing_context``, ...). A ``worker_init_fn`` is called in each worker after
            litstream's own set-up (trace settings, worker 0's profiler).

    Resume (:meth:`state_dict` / :meth:`load_state_dict`): the checkpoint holds the samples this rank
    delivered per worker, counted exactly from the batches torch handed out, so a resume on this rank
    is exact whatever order torch used. Under DDP every rank restores one rank's checkpoint; the
    position of the other ranks is then derived assuming lock-step (every rank delivered the same
    number of batches) and torch's default in-order delivery (``in_order=True``). A different world
    size, ``num_workers`` or ``batch_size`` is allowed (elastic resume). ``persistent_workers=True``
    is not supported with resume: persistent workers keep the dataset copy of the first epoch (each
    copy advances its own epoch when it finishes one, so the shuffle changes every epoch, as in LitData).

    Raises:
        ConfigurationError: ``dataset`` is not a ``StreamingDataset``, or a bad argument.
    """

    def __init__(
        self,
        dataset: StreamingDataset | CompositeDataset,
        batch_size: int = 1,
        num_workers: int = 0,
        shuffle: ShuffleMode | None = None,
        drop_last: bool | None = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        *,
        profile_batches: bool | int = False,
        profile_skip_batches: int = 0,
        profile_dir: str | os.PathLike[str] | None = None,
        profile_cprofile: bool = False,
        prefetch_factor: int | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ConfigurationError(f"num_workers must be an int >= 0, got {num_workers!r}")
        self._profile = ProfileArgs.check(profile_batches, profile_skip_batches, profile_dir, profile_cprofile,
                                          num_workers)  # fmt: skip
        self._setup = WorkerSetup(kwargs.pop("worker_init_fn", None), self._profile)
        self._slot_statistics = SlotStatistics()
        self._auto_prefetch = prefetch_factor is None and kwargs.get("prefetch_factor") is None
        if prefetch_factor is not None:
            kwargs["prefetch_factor"] = prefetch_factor
        if not isinstance(dataset, (StreamingDataset, CompositeDataset)):
            raise ConfigurationError(
                f"StreamingDataLoader needs a StreamingDataset, got {type(dataset).__name__}; "
                "wrap several in CombinedStreamingDataset or ParallelStreamingDataset, "
                "or use torch.utils.data.DataLoader for other datasets"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if shuffle is not None:
            dataset.set_shuffle(shuffle)
        if drop_last is not None:
            dataset.set_drop_last(drop_last)
        dataset.set_batch_size(batch_size)
        dataset.set_num_workers(num_workers)
        if num_workers > 0 and kwargs.get("multiprocessing_context") is None and _store.obstore_used():
            methods = multiprocessing.get_all_start_methods()
            kwargs["multiprocessing_context"] = "forkserver" if "forkserver" in methods else "spawn"
        # A StreamingDataset (not a subclass that iterates its own way) hands over whole batches while this
        # loader iterates (``_loader_group``): torch's fetcher then makes one call per batch, not per sample
        # (torch's batch_size is None for it; ``self.batch_size`` stays the batch size, and ``batch_sampler`` is
        # LitData's, see ``_auto_collation``).
        self._grouped = isinstance(dataset, StreamingDataset) and type(dataset).__iter__ is StreamingDataset.__iter__
        super().__init__(
            dataset,
            batch_size=None if self._grouped else batch_size,
            num_workers=num_workers,
            collate_fn=_TaggingCollate(collate_fn or litdata_collate),
            worker_init_fn=self._setup,
            **kwargs,
        )
        if self._grouped:  # torch forbids setting these after __init__
            object.__setattr__(self, "batch_size", batch_size)
            object.__setattr__(self, "batch_sampler", BatchSampler(self.sampler, batch_size, drop_last=False))
        self.current_epoch = 0
        self.num_samples_yielded = 0
        self.latest_worker_idx = 0
        self._worker_samples = [0] * max(num_workers, 1)  # per logical worker, at the current level
        self._levels: tuple[Level, ...] = ()  # levels closed by elastic resumes in this epoch
        self._start = 0  # logical worker that torch worker 0 serves
        self._restoring = False

    @property
    def _auto_collation(self) -> bool:
        """Whether torch groups samples into batches (torch's rule: it has a ``batch_sampler``); not while the
        dataset hands over whole batches, whose ``batch_sampler`` is only LitData's (a ``BatchSampler`` over
        torch's ``_InfiniteConstantSampler`` with ``batch_size`` and ``drop_last=False``) for code that reads it."""
        return not self._grouped and self.batch_sampler is not None

    def __len__(self) -> int:
        """Batches per epoch on this rank: each worker's items split into batches (the last may be short).

        This is the length of a normal epoch, also while a resumed epoch is being served.
        """
        dataset: StreamingDataset | CompositeDataset = self.dataset  # type: ignore[assignment]
        assert self.batch_size is not None
        lengths = dataset.worker_lengths(self.num_workers, self.batch_size)
        return sum(math.ceil(n / self.batch_size) for n in lengths)

    def __iter__(self) -> Generator[Any, None, None]:  # type: ignore[override]
        dataset: StreamingDataset | CompositeDataset = self.dataset  # type: ignore[assignment]
        workers = max(self.num_workers, 1)
        plan = dataset._resume_plan(self.num_workers) if self._restoring else None
        if plan is not None:
            # (Re)start the resumed epoch from the checkpoint, also after an abandoned first try.
            self._set_position(list(plan.consumed), plan.levels, plan.start)
        else:
            if self.current_epoch >= 1:  # the epoch that ends: a cycling Parallel continues from there
                dataset._epoch_served(self.current_epoch, self._worker_samples, self._levels, self.num_workers)
            self.current_epoch += 1
            self._set_position([0] * workers, (), 0)
            dataset._clear_resume()
            dataset.set_epoch(self.current_epoch)
        dataset._pin_distributed()
        self._setup.rank = detect_distributed().rank
        # What this rank serves in a whole epoch: the resumed epoch is over once its count reaches it.
        epoch_total: int | None = None
        if plan is not None:
            try:
                epoch_total = sum(dataset.worker_lengths(self.num_workers, self.batch_size or 1))
            except TypeError:  # an endless ParallelStreamingDataset: its epoch has no last batch
                epoch_total = None
        epoch_t0 = perf_counter_ns() if TRACER.on else 0
        self._fit_prefetch(dataset)
        exchange = open_slots(
            self.collate_fn, self._setup, num_workers=self.num_workers, persistent_workers=self.persistent_workers,
            prefetch_factor=self.prefetch_factor, context=self.multiprocessing_context,
        )  # fmt: skip
        if self._grouped:
            assert isinstance(dataset, StreamingDataset)
            assert self.batch_size is not None
            if self.num_workers > 0 and _forks(self.multiprocessing_context) and not opens_remote(dataset._reader.spec):
                dataset._reader.source()  # opened once here (local files, no client), not again in every forked worker
            collate = self.collate_fn
            columns = isinstance(collate, _TaggingCollate) and collate.collate is litdata_collate
            dataset._loader_group = (self.batch_size, columns)
        self._setup.hand_over_environ(_start_method(self.multiprocessing_context) if self.num_workers else None)
        try:
            batches = super().__iter__()  # starts the workers (each copies the dataset, _loader_group included)
        except BaseException:
            self._slot_statistics = close_slots(self.collate_fn, exchange, self._slot_statistics)
            raise
        finally:
            self._setup.hand_over_environ(None)
            if isinstance(dataset, StreamingDataset):
                dataset._loader_group = None
        main_profile = cProfile.Profile() if self._profile.cprofile and self._setup.rank == 0 else None
        if main_profile is not None:
            main_profile.enable()
        try:
            batch_t0 = perf_counter_ns() if TRACER.on else 0
            for tagged in batches:
                if batch_t0:
                    TRACER.span("batch", CAT_BATCH, batch_t0, {"worker": tagged.worker, "samples": tagged.size})
                worker = (self._start + tagged.worker) % workers
                self._worker_samples[worker] += tagged.size
                self.num_samples_yielded += tagged.size
                self.latest_worker_idx = worker
                if self._restoring and epoch_total is not None and self.num_samples_yielded >= epoch_total:
                    # The resumed epoch's last batch. A consumer that stops here without asking for more
                    # (PyTorch Lightning stops after len() batches) has finished that epoch: the next
                    # iter() must start the next epoch, not serve the resumed one again.
                    self._restoring = False
                batch = tagged.batch
                yield batch.unpack() if isinstance(batch, SlotBatch) else batch
                batch_t0 = perf_counter_ns() if TRACER.on else 0
            self._restoring = False
            dataset._clear_resume()
        except BaseException:
            # The exception's traceback holds torch's iterator (its frames' ``self``) and so its workers'
            # queues, feeder threads and semaphores for as long as the exception lives: shut them now.
            shutdown = getattr(batches, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
            raise
        finally:
            del batches  # and drop the iterator itself (an early break, too)
            self._slot_statistics = close_slots(self.collate_fn, exchange, self._slot_statistics)
            if main_profile is not None:
                dump_cprofile(main_profile, output_dir(self._profile.directory) / CPROFILE_MAIN)
            if epoch_t0:
                TRACER.span("dataloader", CAT_EPOCH, epoch_t0, {"epoch": self.current_epoch})

    def _fit_prefetch(self, dataset: StreamingDataset | CompositeDataset) -> None:
        """Under a memory limit, the ``prefetch_factor`` whose batches fit the workers' share with their chunks
        (``read.engine._memory``), unless one was given; ConfigurationError if even one batch ahead does not fit.
        The workers' datasets are told the factor, so that they count the batches it keeps."""
        dataset._set_loader_prefetch(self.prefetch_factor or 0)
        if self.num_workers == 0 or not self._auto_prefetch or not isinstance(dataset, StreamingDataset):
            return
        limit = memory_limit(dataset.max_memory)
        if limit is None:
            return
        fitted = dataset._fit_loader_prefetch(limit, self.num_workers)
        if fitted is not None:  # None: the workers plan with torch's prefetch_factor (and raise if it does not fit)
            self.prefetch_factor = fitted
            dataset._set_loader_prefetch(fitted)

    def slot_statistics(self) -> SlotStatistics:
        """What the shared-memory batch slots (``litstream._torch._slots``) carried over this loader's finished
        iterations."""
        return self._slot_statistics

    def _set_position(self, counts: list[int], levels: tuple[Level, ...], start: int) -> None:
        self._worker_samples = counts
        self.num_samples_yielded = sum(counts)
        self._levels = levels
        self._start = start
        self.latest_worker_idx = (start - 1) % len(counts)

    @property
    def restore(self) -> bool:
        """LitData's flag: ``True`` from :meth:`load_state_dict` (with part of an epoch left to serve) until
        the resumed epoch has been served; the next ``iter()`` then continues the checkpoint's epoch."""
        return self._restoring

    @restore.setter
    def restore(self, value: bool) -> None:
        self._restoring = bool(value)

    def state_dict(self) -> dict[str, Any]:
        """The position in the current epoch, as plain values (picklable; safe to ``torch.save``).

        Returns:
            LitData 0.2.76's layout, so LitData's loader can resume from it (docs/resume.md says
            where): ``{"dataset": <dataset state>, "current_epoch": int, "num_samples_yielded": int,
            "latest_worker_idx": int}`` for a ``StreamingDataset``, where ``num_samples_yielded``
            counts ``batch_size`` per batch delivered at the current level of the epoch (a short
            batch too, as LitData counts; the exact per-worker counts are in the dataset state);
            ``latest_worker_idx`` is the worker of the last batch; ``current_epoch`` is 0 before the
            first ``iter()``. A Combined / Parallel dataset:
            ``CompositeDataset.loader_state`` (per-worker, per-member ``num_samples_yielded``, a
            Parallel's ``num_cycles``, and litstream's ``"composite"`` entry). The dataset state is
            described in :meth:`StreamingDataset.state_dict`.
        """
        dataset: StreamingDataset | CompositeDataset = self.dataset  # type: ignore[assignment]
        state = dataset.state_dict(
            self.num_samples_yielded,
            self.num_workers,
            self.batch_size or 1,
            current_epoch=max(self.current_epoch, 1),
            worker_samples_yielded=self._worker_samples,
            resume_levels=self._levels,
        )
        if isinstance(dataset, CompositeDataset):
            return dataset.loader_state(
                state, current_epoch=self.current_epoch, latest_worker_idx=self.latest_worker_idx
            )
        return {
            "dataset": state,
            "current_epoch": self.current_epoch,
            "num_samples_yielded": state["num_samples_yielded"],
            "latest_worker_idx": self.latest_worker_idx,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`, possibly saved by another rank or on another topology.

        The next ``iter()`` yields exactly the samples of that epoch not yet delivered, then epochs
        go on normally. A checkpoint taken before the first batch starts its epoch from the
        beginning; one taken after the last batch of an epoch makes the next ``iter()`` the next
        epoch. Under DDP every rank loads the same checkpoint (normally rank 0's). Other world sizes,
        worker counts and batch sizes are accepted (elastic resume): every remaining sample is then
        served exactly once across the new ranks and workers; see ``litstream.read.plan._resume`` for
        what is exact and under which assumption. A state saved by LitData's loader is accepted too
        (of a ``StreamingDataset``, a ``CombinedStreamingDataset`` or a ``ParallelStreamingDataset`` without
        ``length``; see ``read.plan._litdata_state``).

        Raises:
            ConfigurationError: the checkpoint was saved with another ``shuffle``, ``seed``,
                ``drop_last``, input or item loader, or its counts exceed what its epoch holds.
        """
        dataset: StreamingDataset | CompositeDataset = self.dataset  # type: ignore[assignment]
        if isinstance(dataset, CompositeDataset) and is_litdata_composite_state(state):  # see read.plan._litdata_state
            members = [d._config() for d in dataset.datasets]
            layouts = [d._reader.layout for d in dataset.datasets]
            state = from_litdata_combined(
                state, kind=dataset._kind, config=dataset._config(), members=members, layouts=layouts
            )
        saved = state["dataset"]
        if isinstance(saved, dict) and isinstance(state.get("composite"), dict):  # litstream's entry beside LitData's
            saved = {**saved, "composite": state["composite"]}
        dataset.load_state_dict(saved)
        epoch = int(state.get("current_epoch", saved.get("current_epoch", 0)))
        plan = dataset._resume_plan(self.num_workers) if epoch >= 1 else None
        self._restoring = plan is not None and not plan.finished
        self.current_epoch = epoch
        if plan is not None and self._restoring:
            self._set_position(list(plan.consumed), plan.levels, plan.start)
        else:
            # Nothing of the epoch consumed yet (epoch 0), or all of it: the next iter() starts afresh.
            self._set_position([0] * max(self.num_workers, 1), (), 0)
            dataset._clear_resume()
