"""``StreamingDataset``: the torch ``IterableDataset`` facade over the async read engine.

Configuration plus a portal, no reading logic of its own. Each process that iterates (the main
process with ``num_workers=0``, else each DataLoader worker) opens one anyio blocking portal in
``__iter__``; the engine fills a bounded stream with whole chunks and this thread pulls one chunk
per ``portal.call`` and decodes its items here. The dataset pickles as configuration only.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from torch.utils.data import IterableDataset

from . import _portal
from ._collate import shared_block
from ._dataset_io import WORKER_ALLOC, _close, _get_item_at, _inside_worker, _make_stream, _open_now, _receive
from ._dataset_keys import KeyedMixin
from ._dataset_plan import PlanMixin
from ._dataset_resume import ResumeMixin
from ._distributed import DistributedEnv, detect_distributed, detect_worker
from ._errors import raise_collapsed
from .read._params import check_read_params
from .read._cache_dirs import check_cache_size
from .read._core import ShuffleMode, produce_chunks
from .read._decode import iter_work
from .read._memory import adapt_reader, check_max_memory, fit_decoded_cache
from .read._session import open_session, split_head
from .read._spec import Loader, ReadSpec, SpecAttribute
from .read._transform import Transform, check_transforms
from .read._window import DEFAULT_SHUFFLE_WINDOW

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Generator, Mapping, Sequence

    from anyio.from_thread import BlockingPortal

    from ._litdata_cache import Cache
    from .format._encryption import Encryption
    from .format._loaders import PyTreeLoader, TokensLoader
    from .format._parquet import ParquetLoader
    from .format._serializers import Serializer
    from .read._core import Piece
    from .read._resume import ResumePlan
    from .read._source import DatasetSource
    from .read._source_cache import CacheSettings
    from .storage._resolver import Dir
    from .storage._store import Store

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["StreamingDataset"]

_REMOTE_MIN_PRE_DOWNLOAD = 4
_HEAD_ITEMS = 8  # samples of a local dataset served before the engine's event loop starts


class StreamingDataset(IterableDataset[Any], ResumeMixin, KeyedMixin, PlanMixin):
    """Stream an optimized dataset (LitData format) into PyTorch.

    Iteration splits items between ranks and DataLoader workers in whole batches and orders them
    exactly as LitData's ``NoShuffle`` / ``FullShuffle`` do. ``ds[i]`` reads one item directly.

    Args:
        input_dir: Local dataset directory (``index.json`` + ``chunk-*.bin``), ``Dir`` or ``Store``.
        shuffle: ``False`` (default: index order), ``True`` or ``"full"`` (shuffle the chunk order
            and the items inside each chunk per epoch, LitData's FullShuffle, multi-node aware), or
            ``"window"`` (opt-in, litstream's own: additionally mixes the items of up to
            ``shuffle_window`` consecutive chunks of a worker, for source data that is ordered;
            same items per worker and same lengths as ``True``).
        seed: Shuffle seed, an int in ``[0, 2**32)``. Default 42.
        drop_last: Drop the items that do not fill whole batches on every rank. ``None`` (default)
            means ``True`` when the world size is above 1, else ``False`` (as in LitData).
        max_pre_download: Chunks each worker fetches ahead (>= 1). Default 2; remote datasets fetch at
            least 4 ahead (LitData's floor for its async remote prefetch).
        transform: A callable, or a list of callables applied in order, to each sample (in the
            worker, after decoding; also applied by ``ds[i]`` and ``ds[a:b]``). Anything else raises
            ``ConfigurationError`` (a ``ValueError``, as in LitData).
        serializers: Extra serializers by registry key.
        item_loader: ``PyTreeLoader()`` (default), or ``TokensLoader(block_size=B)`` for data written
            with ``TokensLoader()``: items are then windows of ``B`` tokens (see its docstring) and
            ``len``, ``ds[i]``, sharding, shuffling and resume count windows.
        shuffle_window: Chunks mixed together with ``shuffle="window"`` (>= 1). Default 8.
        storage_options: Credentials and client options for object stores (LitData's boto-style keys
            such as ``endpoint_url``, ``aws_access_key_id``, or obstore's own keys); ignored locally.
        cache_dir: Root of the local chunk cache for remote datasets (default: ``LITSTREAM_CACHE_DIR``,
            ``LITDATA_CACHE_DIR`` or ``~/.cache/litstream/chunks``). Local datasets are read in place.
        max_cache_size: Cache budget: bytes (int or ``"50GB"``) or a fraction of free disk in (0, 1];
            ``None`` means 75 % of the free disk, as in LitData. Chunks in use are never evicted.
        hedge_delay: For remote datasets, seconds after which a slow range read (``ds[i]``) is sent
            again and the first answer wins; ``None`` (default) derives it from observed latency;
            ``0`` turns hedging off (each read sent once), as in ``StreamingRawDataset`` and LitData.
        subsample: Fraction of the items to serve, a float ``> 0`` (default 1.0: all), as in
            LitData: ``s < 1`` serves the first ``int(N * s)`` items of the chunk list, which is
            permuted by ``RandomState([seed])`` first when ``shuffle`` is not ``False`` (a prefix of
            the dataset otherwise); ``s > 1`` serves whole copies for each unit plus that fraction.
            Fixed once per dataset (``set_shuffle`` later does not change it).
        encryption: For a dataset written with ``encryption=``, the same ``FernetEncryption`` /
            ``RSAEncryption``, usually ``FernetEncryption.load(key_file, password)`` (LitData's key
            files work too). Items are decrypted in memory; chunk files stay encrypted in the cache.
        session_options: LitData's boto3 session options: only ``None`` or ``{}`` (credentials go in
            ``storage_options``); anything else raises ``ConfigurationError``.
        force_override_state_dict: With ``True``, ``load_state_dict`` of a state saved with another
            ``shuffle``, ``seed``, ``drop_last``, input, item loader or ``item_shuffle_window`` warns
            and resumes with this dataset's values (the counts are kept; samples may repeat or be
            skipped in that epoch), as LitData does. Default ``False``: such a state is refused.
        num_canonical_nodes: LitData's frozen first-run node count, recorded in ``state_dict()``
            (an int >= 1; default ``None``: the loaded state's, else the first run's world size). As in
            LitData it does not change the order of a resumed epoch (litstream rebuilds it from the read
            plan of the saving run).
        batch_decode: LitData's decode batching (``"auto"``, ``"all"``, a bool or an int >= 0): a
            speed knob that does not change the items; accepted without effect.
        item_shuffle_window: With ``shuffle=True``, items of each chunk slice are shuffled in blocks of
            this many, the blocks served in random order (LitData 0.2.76's order). ``None``/``"auto"``:
            256 (LitData's default); ``0``/``"full"``: one permutation of the whole slice; an int
            ``>= 0``. Ignored unless ``shuffle=True``. Raises ``ConfigurationError`` otherwise.
        window_direct_io: LitData's O_DIRECT reads of temporal windows on NFS: a speed knob,
            accepted (a bool) without effect.
        index_path: A local ``index.json`` (or a directory holding one) to use instead of the one in
            ``input_dir``.
        allow_pickle: Whether leaves stored with ``pickle`` may be unpickled (which runs code the data
            names). ``None`` (default): ``litstream.set_allow_pickle``, else ``LITSTREAM_ALLOW_PICKLE``,
            else allowed for local and object-store data (LitData's behaviour) and refused for
            ``hf://`` and ``http(s)://``. Refused data raises ``PickleRefusedError`` on first use, before
            anything is unpickled. Decided here, in this process; see docs/security.md.
        max_memory: The bytes the buffers of all readers of a loader may hold together (an int or ``"800MB"``),
            ``"auto"`` or ``"off"``. ``None`` (default): ``LITSTREAM_MAX_MEMORY``, else ``"auto"``: half the
            cgroup memory limit, or of what ``RLIMIT_DATA``/``RLIMIT_AS`` leave. Under a budget, prefetch depth
            (``max_pre_download``), download bytes in flight and the loader's ``prefetch_factor`` are lowered
            until every buffer fits; see docs/storage.md ("Memory limits").

    Raises:
        ConfigurationError: a bad argument (raised at construction).
        DatasetNotFoundError: ``input_dir`` holds no dataset: at construction for a local directory
            (missing, or without ``index.json`` or partial indexes), on first use for a remote one.
        EncryptionError: on first use, when the dataset is encrypted and ``encryption`` is missing
            or wrong (a ``FormatError``).
    """

    def __init__(
        self,
        input_dir: str | os.PathLike[str] | Dir | Store,
        *,
        shuffle: ShuffleMode = False,
        seed: int = 42,
        drop_last: bool | None = None,
        max_pre_download: int = 2,
        transform: Transform = None,
        serializers: Mapping[str, Serializer] | None = None,
        item_loader: PyTreeLoader | TokensLoader | ParquetLoader | None = None,
        shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        max_cache_size: int | float | str | None = None,
        hedge_delay: float | None = None,
        subsample: float = 1.0,
        index_path: str | os.PathLike[str] | None = None,
        encryption: Encryption | None = None,
        session_options: Mapping[str, Any] | None = None,
        force_override_state_dict: bool = False,
        num_canonical_nodes: int | None = None,
        batch_decode: int | str | bool = "auto",
        item_shuffle_window: int | str | None = None,
        window_direct_io: bool = False,
        allow_pickle: bool | None = None,
        max_memory: int | str | bool | None = None,
    ) -> None:
        check_read_params(
            session_options=session_options,
            force_override_state_dict=force_override_state_dict,
            num_canonical_nodes=num_canonical_nodes,
            batch_decode=batch_decode,
            window_direct_io=window_direct_io,
        )
        self.max_memory = check_max_memory(max_memory)
        self._loader_prefetch = 0  # batches a DataLoader worker builds ahead, set by StreamingDataLoader
        # Everything that decides what is read and in which order, checked once (read/_spec.py).
        self._spec = ReadSpec.build(
            input_dir,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
            max_pre_download=max_pre_download,
            transform=transform,
            serializers=serializers,
            item_loader=item_loader,
            shuffle_window=shuffle_window,
            storage_options=storage_options,
            cache_dir=cache_dir,
            max_cache_size=max_cache_size,
            hedge_delay=hedge_delay,
            subsample=subsample,
            index_path=index_path,
            encryption=encryption,
            item_shuffle_window=item_shuffle_window,
            allow_pickle=allow_pickle,
        )
        check_cache_size(max_cache_size)  # warn under 25 GB, as LitData does
        self.current_epoch = 1
        self.batch_size = 1
        self.num_workers = 1
        self._source: DatasetSource | None = None
        self._resume_state: dict[str, Any] | None = None  # a loaded checkpoint, until its epoch ends
        self._force_override_state_dict = force_override_state_dict
        self.num_canonical_nodes = num_canonical_nodes
        self._resume: ResumePlan | None = None  # _resume_state resolved for one rank and topology
        self._parent_env: DistributedEnv | None = None  # rank/world of the process that started the workers
        self._selection = None  # from subset()/train_test_split, or the resolved subsample (_selection.py)

    # -- the spec's values, as LitData's attributes ------------------------------------------------
    input_dir: SpecAttribute[Dir] = SpecAttribute("input_dir")
    shuffle: SpecAttribute[ShuffleMode] = SpecAttribute("shuffle")
    seed: SpecAttribute[int] = SpecAttribute("seed")
    drop_last: SpecAttribute[bool | None] = SpecAttribute("drop_last")
    max_pre_download: SpecAttribute[int] = SpecAttribute("max_pre_download")
    shuffle_window: SpecAttribute[int] = SpecAttribute("shuffle_window")
    serializers: SpecAttribute[Mapping[str, Serializer] | None] = SpecAttribute("serializers")
    item_loader: SpecAttribute[Loader] = SpecAttribute("item_loader")
    index_path: SpecAttribute[str | os.PathLike[str] | None] = SpecAttribute("index_path")
    encryption: SpecAttribute[Encryption | None] = SpecAttribute("encryption")
    allow_pickle: SpecAttribute[bool] = SpecAttribute("allow_pickle")
    subsample: SpecAttribute[float] = SpecAttribute("subsample")

    # -- configuration (LitData's setters) -------------------------------------------------------
    def set_epoch(self, current_epoch: int) -> None:
        """Set the 1-based epoch that drives the shuffle order (ignored while a resume is pending)."""
        if self._resume_state is None:
            self.current_epoch = current_epoch

    def set_shuffle(self, shuffle: ShuffleMode) -> None:
        self._spec = self._spec.replace(shuffle=shuffle)

    def set_drop_last(self, drop_last: bool) -> None:
        self._spec = self._spec.replace(drop_last=drop_last)

    def set_batch_size(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def set_num_workers(self, num_workers: int) -> None:
        self.num_workers = num_workers or 1

    # -- pickling: configuration only ------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_source"] = None
        # A spawn/forkserver DataLoader worker may not see the parent's process group or env vars.
        state["_parent_env"] = detect_distributed()
        return state

    # -- index ------------------------------------------------------------------------------------
    def _get_source(self) -> DatasetSource:
        spec = self._spec
        opened = self._source is None
        if self._source is None and spec.cache is None and spec.index_path is None:
            self._source = _open_now(
                spec.store, spec.serializers, spec.item_loader, spec.pickle_choice, spec.encryption
            )
        if self._source is None:
            self._source = _portal.call(spec.open)
        if opened:  # under a memory limit, ds[i]'s cache of decompressed chunks fits this reader's share
            fit_decoded_cache(self._source, self.max_memory, detect_worker().num_workers)
        return self._source

    @property
    def cache(self) -> Cache:
        """LitData's ``ds.cache``: a :class:`~litstream.Cache` over the local directory this dataset reads (see
        ``_litdata_cache.dataset_cache``); ``ds.cache.cache_dir`` is that directory. Opens the index."""
        from ._litdata_cache import dataset_cache

        return dataset_cache(self, self._get_source(), self._cache_settings)

    @property
    def _cache_settings(self) -> CacheSettings | None:
        """Where and how much of a remote dataset is cached (the spec's; ``None`` for a local dataset)."""
        return self._spec.cache

    @_cache_settings.setter
    def _cache_settings(self, settings: CacheSettings | None) -> None:
        self._spec = self._spec.replace(cache=settings)

    def _pickle_choice(self) -> bool | None:
        """``allow_pickle`` for ``DatasetSource.open``: ``None`` while only the location allowed pickles (the
        dataset's trust marker then decides, ``format/_trust_marker.py``)."""
        return self._spec.pickle_choice

    def _read_spec(self) -> ReadSpec:
        """What ``astream(this_dataset)`` and the Combined / Parallel wrappers read: the spec, with this
        dataset's transforms (a subclass's ``transform`` included) and selection."""
        return dataclasses.replace(self._spec, transforms=tuple(self.transforms), selection=self._selection)

    def __len__(self) -> int:
        return self.get_len(self.num_workers, self.batch_size)

    # -- random access ----------------------------------------------------------------------------
    def __getitem__(self, index: int | slice | str) -> Any:
        """Sample ``index`` (0-based, index order across the whole dataset), a list for a slice, or for a
        ``str`` the sample with that key (:meth:`get_by_key`).

        Raises:
            IndexError: ``index`` is outside ``[-len, len)`` of the whole dataset.
        """
        if isinstance(index, str):
            return self.get_by_key(index)
        source = self._get_source()
        selection = self._selected()
        total = len(source) if selection is None else len(selection)
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(total))]
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"dataset indices must be int or slice, got {type(index).__name__}")
        position = index + total if index < 0 else index
        if not 0 <= position < total:
            raise IndexError(f"index {index} is out of range for a dataset of {total} items")
        if selection is None:
            return self._apply(_portal.call(source.get_item, position))
        return self._apply(_portal.call(_get_item_at, source, *selection.locate(position)))

    @property
    def transforms(self) -> list[Callable[[Any], Any]]:
        """The callables applied to each sample, in order.

        ``transform=`` when given; otherwise a ``transform`` attribute of the dataset, which is how
        LitData's README subclasses add one (a ``def transform(self, sample)`` method, or
        ``self.transform = fn`` / a list set in ``__init__``), applied as LitData applies it.
        """
        if self._spec.transforms:
            return list(self._spec.transforms)
        own = getattr(self, "transform", None)
        return [] if own is None else check_transforms(own)

    @transforms.setter
    def transforms(self, value: list[Callable[[Any], Any]]) -> None:
        self._spec = dataclasses.replace(self._spec, transforms=tuple(value))

    def _apply(self, sample: Any) -> Any:
        for t in self.transforms:
            sample = t(sample)
        return sample

    # -- iteration --------------------------------------------------------------------------------
    def __iter__(self) -> Generator[Any, None, None]:
        source = self._get_source()
        worker = detect_worker()
        session = open_session(source, self._plan_args(worker), self._selected(), self._resume_plan(worker.num_workers))
        if session.restarted:
            self._clear_resume()
            self.current_epoch = session.epoch
        pieces: Sequence[Piece] = session.pieces
        if self.batch_size <= 1:  # serve the head of a local chunk before the engine's loop starts
            head, pieces = split_head(source, pieces, _HEAD_ITEMS)
            if head is not None:
                yield from iter_work(source, head, self._apply if self.transforms else None)
        with _portal.daemon_portal() as portal:
            yield from self._serve(pieces, portal)
        self._clear_resume()
        # In every process, as LitData: a persistent DataLoader worker keeps this copy, so its next epoch reshuffles.
        self.current_epoch += 1

    def _serve(self, pieces: Sequence[Piece], portal: BlockingPortal, members: int = 1) -> Generator[Any, None, None]:
        """Yield the samples of ``pieces`` (as ``plan_pieces`` returns them), fetched on ``portal``'s loop.

        Used by ``__iter__`` and by the Combined / Parallel wrappers, which share one portal per worker
        (``members``: the datasets a worker reads at once, sharing its memory budget).
        """
        source = self._get_source()
        transform = self._apply if self.transforms else None
        # Remote chunks: at least 4 ahead, as LitData's async prefetch floor for remote data (its
        # LITDATA_ASYNC_MIN_PRE_DOWNLOAD); downloads then overlap across chunk boundaries.
        ahead = self._spec.max_pre_download
        if self._spec.cache is not None:
            ahead = max(ahead, _REMOTE_MIN_PRE_DOWNLOAD)
        # Under a memory limit (read/_memory.py): as deep as this reader's share allows. A worker's batches
        # (torch's prefetch_factor, 2 unless StreamingDataLoader chose one) count against the share too.
        batches = (self._loader_prefetch or 2) if _inside_worker() else 0
        ahead, handover = adapt_reader(
            source, pieces, self.max_memory, readers=detect_worker().num_workers * members, max_pre_download=ahead,
            window=self.shuffle_window if self.shuffle == "window" else 0, batch_size=self.batch_size,
            prefetch_factor=batches,
        )  # fmt: skip
        send, receive = portal.call(_make_stream, handover)
        future = portal.start_task_soon(lambda: produce_chunks(source, pieces, send, max_pre_download=ahead))
        served, align = 0, max(self.batch_size, 1)
        # In a DataLoader worker, decode arrays into shared memory: the batch then goes to the main
        # process without the copy torch makes to share it; or, when the loader sends batches through
        # its slots (litstream._slots), into reused private memory.
        alloc = (WORKER_ALLOC[0] or shared_block) if align > 1 and _inside_worker() else None
        try:
            while True:
                work = portal.call(_receive, receive)
                if work is None:
                    break
                yield from iter_work(source, work, transform, served, align, alloc)
                served += len(work.items)
                del work  # the chunk is not held while the next one is handed over (read/_memory.py counts so)
            try:
                future.result()
            except BaseExceptionGroup as group:
                raise_collapsed(group)
        finally:
            if not sys.is_finalizing():  # at interpreter exit the loop thread may be gone
                if not future.done():
                    future.cancel()
                portal.call(_close, receive)
