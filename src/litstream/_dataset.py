"""``StreamingDataset``: the torch ``IterableDataset`` facade over the async read engine.

Configuration plus a portal, no reading logic of its own. Each process that iterates (the main
process with ``num_workers=0``, else each DataLoader worker) opens one anyio blocking portal in
``__iter__``; the engine fills a bounded stream with whole chunks and this thread pulls one chunk
per ``portal.call`` and decodes its items here. The dataset pickles as configuration only.
"""

from __future__ import annotations

import os
import sys
from functools import partial
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
from ._litdata_params import check_read_params, item_shuffle_window_value
from ._local_remote import check_local_dataset, local_remote_source
from .format._encrypted import check_reader_encryption
from .format._loaders import PyTreeLoader, TokensLoader
from .read._args import check_read_args, check_read_loader
from .read._cache_dirs import parse_cache_size
from .read._core import ShuffleMode, produce_chunks
from .read._decode import iter_work
from .read._session import open_session, split_head
from .read._source import DatasetSource
from .read._source_cache import CacheSettings
from .read._subset import check_subsample
from .read._transform import Transform, check_transforms
from .read._trust import check_allow_pickle, resolve_allow_pickle
from .read._window import DEFAULT_SHUFFLE_WINDOW
from .storage._files import local_path
from .storage._resolver import Dir, resolve_dir, store_for
from .storage._store import HedgedStore, Store
from .write._hf import hf_dataset_index

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Mapping, Sequence

    from anyio.from_thread import BlockingPortal

    from .format._encryption import Encryption
    from .format._parquet import ParquetLoader
    from .format._serializers import Serializer
    from .read._core import Piece
    from .read._resume import ResumePlan

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
    ) -> None:
        check_read_params(
            session_options=session_options,
            force_override_state_dict=force_override_state_dict,
            num_canonical_nodes=num_canonical_nodes,
            batch_decode=batch_decode,
            item_shuffle_window=item_shuffle_window,
            window_direct_io=window_direct_io,
        )
        check_read_args(shuffle, seed, drop_last, max_pre_download, shuffle_window)
        transforms = check_transforms(transform)
        self.subsample = check_subsample(subsample)
        check_read_loader(item_loader)
        check_reader_encryption(encryption)
        local_source = None
        check_allow_pickle(allow_pickle)
        if isinstance(input_dir, Store) and not isinstance(input_dir, (str, os.PathLike, Dir)):
            self._store: Store = input_dir
            self.input_dir = Dir(path=None, url=input_dir.url)
        else:
            self.input_dir = resolve_dir(input_dir)
            local_source = local_remote_source(self.input_dir)
            if local_source is not None and cache_dir is None:
                cache_dir = self.input_dir.path  # LitData caches a local "remote" in Dir.path
            self._store = store_for(local_source) if local_source else store_for(self.input_dir, storage_options)
            if index_path is None and local_source is None and self.input_dir.url is not None:
                # hf:// Parquet: index once, kept
                hf_index, hf_loader = hf_dataset_index(
                    self._store, self.input_dir.url, cache_dir, storage_options, item_loader
                )
                index_path, item_loader = hf_index, hf_loader or item_loader
        remote = self.input_dir.path is None and self.input_dir.url is not None and "://" in self.input_dir.url
        remote = remote or local_source is not None
        if index_path is None and (root := local_path(self._store, "")) is not None:
            check_local_dataset(str(root))
        self.cache = (
            CacheSettings(None if cache_dir is None else os.fspath(cache_dir), max_cache_size)
            if remote and not (self.input_dir.url or "").startswith("memory://")
            else None
        )
        if max_cache_size is not None:
            parse_cache_size(max_cache_size)  # reject a bad value now, not in a worker
        if self.cache is not None:
            self._store = HedgedStore(self._store, hedge_delay)
        self.shuffle: ShuffleMode = shuffle
        self.shuffle_window = shuffle_window
        self._item_shuffle_window = item_shuffle_window_value(item_shuffle_window)
        self.seed = seed
        self.drop_last = drop_last
        self.max_pre_download = max_pre_download
        self._given_transforms = transforms
        self.serializers = dict(serializers) if serializers else None
        self.item_loader: PyTreeLoader | TokensLoader | ParquetLoader = item_loader or PyTreeLoader()
        self.index_path = index_path
        self.encryption = encryption
        self.allow_pickle = resolve_allow_pickle(allow_pickle, self.input_dir.url or self.input_dir.path)
        self.current_epoch = 1
        self.batch_size = 1
        self.num_workers = 1
        self._source: DatasetSource | None = None
        self._resume_state: dict[str, Any] | None = None  # a loaded checkpoint, until its epoch ends
        self._force_override_state_dict = force_override_state_dict
        self.num_canonical_nodes = num_canonical_nodes
        self._resume: ResumePlan | None = None  # _resume_state resolved for one rank and topology
        self._parent_env: DistributedEnv | None = None  # rank/world of the process that started the workers
        self._subsample_shuffle = shuffle is not False  # LitData subsamples with the shuffle flag of __init__
        self._selection = None  # from subset()/train_test_split, or the resolved subsample (_selection.py)

    # -- configuration (LitData's setters) -------------------------------------------------------
    def set_epoch(self, current_epoch: int) -> None:
        """Set the 1-based epoch that drives the shuffle order (ignored while a resume is pending)."""
        if self._resume_state is None:
            self.current_epoch = current_epoch

    def set_shuffle(self, shuffle: ShuffleMode) -> None:
        check_read_args(shuffle, self.seed, self.drop_last, self.max_pre_download, self.shuffle_window)
        self.shuffle = shuffle

    def set_drop_last(self, drop_last: bool) -> None:
        check_read_args(self.shuffle, self.seed, drop_last, self.max_pre_download, self.shuffle_window)
        self.drop_last = drop_last

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
        if self._source is None and self.cache is None and self.index_path is None:
            self._source = _open_now(
                self._store, self.serializers, self.item_loader, self.allow_pickle, self.encryption
            )
        if self._source is None:
            self._source = _portal.call(
                partial(DatasetSource.open, encryption=self.encryption),
                self._store,
                self.serializers,
                self.cache,
                self.item_loader,
                self.index_path,
                self.allow_pickle,
            )
        return self._source

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
        if self._given_transforms:
            return self._given_transforms
        own = getattr(self, "transform", None)
        return [] if own is None else check_transforms(own)

    @transforms.setter
    def transforms(self, value: list[Callable[[Any], Any]]) -> None:
        self._given_transforms = list(value)

    def _apply(self, sample: Any) -> Any:
        for t in self.transforms:
            sample = t(sample)
        return sample

    # -- iteration --------------------------------------------------------------------------------
    def __iter__(self) -> Generator[Any, None, None]:
        source = self._get_source()
        worker = detect_worker()
        session = open_session(source, self._plan_args(), self._selected(), self._resume_plan(worker.num_workers))
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
        if not _inside_worker():
            self.current_epoch += 1

    def _serve(self, pieces: Sequence[Piece], portal: BlockingPortal) -> Generator[Any, None, None]:
        """Yield the samples of ``pieces`` (as ``plan_pieces`` returns them), fetched on ``portal``'s loop.

        Used by ``__iter__`` and by the Combined / Parallel wrappers, which share one portal per worker.
        """
        source = self._get_source()
        transform = self._apply if self.transforms else None
        # Remote chunks: at least 4 ahead, as LitData's async prefetch floor for remote data (its
        # LITDATA_ASYNC_MIN_PRE_DOWNLOAD); downloads then overlap across chunk boundaries.
        ahead = self.max_pre_download
        if self.cache is not None:
            ahead = max(ahead, _REMOTE_MIN_PRE_DOWNLOAD)
        send, receive = portal.call(_make_stream)
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
            try:
                future.result()
            except BaseExceptionGroup as group:
                raise_collapsed(group)
        finally:
            if not sys.is_finalizing():  # at interpreter exit the loop thread may be gone
                if not future.done():
                    future.cancel()
                portal.call(_close, receive)
