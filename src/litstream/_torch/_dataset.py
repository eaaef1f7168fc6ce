"""``StreamingDataset``: the torch ``IterableDataset`` facade over the async read engine (``read/_pump.py``
serves its batches, ``read/_dataset_state.py`` its plan and checkpoints). It pickles as configuration only.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

from torch.utils.data import IterableDataset

from .._core._distributed import DistributedEnv, detect_distributed
from ..read import _dataset_state as engine
from ..read import _pump as pump
from ..read._memory import check_max_memory
from ..read._params import check_read_params
from ..read._spec import Loader, ReadSpec
from ..read._spec_attribute import SpecAttribute
from ..read._transform import apply as apply_transforms
from ..read._transform import transforms as transforms_of
from ..read.plan._window import DEFAULT_SHUFFLE_WINDOW
from ..storage._cache_dirs import check_cache_size
from ._collate import loader_groups, shared_block

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Generator, Mapping, Sequence
    from datetime import datetime

    from anyio.from_thread import BlockingPortal

    from ..format._encryption import Encryption
    from ..format._loaders import PyTreeLoader, TokensLoader
    from ..format._serializers import Serializer
    from ..format.arrow._parquet import ParquetLoader
    from ..read._memory import MemoryLimit
    from ..read._shuffler import Shuffle
    from ..read._source import DatasetSource
    from ..read._transform import Transform
    from ..read.cache._source_cache import CacheSettings
    from ..read.plan._pieces import Piece, ShuffleMode
    from ..read.plan._resume import ResumePlan
    from ..read.plan._resume_types import Level
    from ..storage._resolver import Dir
    from ..storage._store import Store
    from ._litdata_cache import Cache

__all__ = ["StreamingDataset"]

_PROCESS_LOCAL = frozenset({"_source", "_resume", "_key_reader", "shuffler"})  # rebuilt in each process, never pickled
D = TypeVar("D", bound="StreamingDataset")


class StreamingDataset(IterableDataset[Any]):
    """Stream an optimized dataset (LitData format) into PyTorch.

    Iteration splits items between ranks and DataLoader workers in whole batches, ordered exactly as LitData's
    ``NoShuffle`` / ``FullShuffle``; ``ds[i]`` reads one item directly. Every argument is keyword-only but the first.

    Args:
        input_dir: Local dataset directory (``index.json`` + ``chunk-*.bin``), ``Dir`` or ``Store``.
        shuffle: ``False`` (default, index order), ``True``/``"full"`` (LitData's FullShuffle, multi-node aware) or
            ``"window"`` (also mixes the items of up to ``shuffle_window`` consecutive chunks of a worker).
        seed: Shuffle seed, an int in ``[0, 2**32)``. Default 42.
        drop_last: Drop items that do not fill whole batches on every rank; ``None`` (default): world size > 1.
        max_pre_download: Chunks each worker fetches ahead (int >= 1). Default 2; remote datasets at least 4.
        transform: A callable, or a list applied in order, to each sample (in the worker after decoding, and in
            ``ds[i]``). Default ``None``. Anything else raises ``ConfigurationError``.
        serializers: Extra serializers by registry key. Default ``None``.
        item_loader: ``PyTreeLoader()`` (default), ``ParquetLoader()``, or ``TokensLoader(block_size=B)``: items are
            windows of ``B`` tokens, and lengths, sharding and resume count them.
        shuffle_window: Chunks mixed together with ``shuffle="window"`` (int >= 1). Default 8.
        storage_options: Object-store credentials and client options (LitData's boto-style keys such as
            ``endpoint_url``, or obstore's). Default ``None``; ignored locally.
        cache_dir: Chunk cache root for remote datasets. Default: ``LITSTREAM_CACHE_DIR``, ``LITDATA_CACHE_DIR`` or
            ``~/.cache/litstream/chunks``. Local datasets are read in place.
        max_cache_size: Cache budget in bytes (int or ``"50GB"``) or a fraction of free disk in (0, 1]. ``None``
            (default): 75 % of the free disk. Chunks in use are never evicted.
        cache_chunks: ``True``: remote chunks are cached (LitData's way); ``False``: read into memory and dropped
            (later epochs and ``ds[i]`` fetch again); ``None`` (default): cached when ``max_cache_size`` holds the
            whole dataset, else as ``False`` (docs/storage.md).
        hedge_delay: Seconds after which a slow remote range read (``ds[i]``) is sent again; ``None`` (default):
            from observed latency; ``0``: off.
        subsample: Fraction of the items served (float > 0, default 1.0), as LitData selects them: ``int(N * s)``
            items of the chunk list, permuted by ``seed`` first unless ``shuffle`` is ``False``; above 1, whole copies
            too.
        index_path: A local ``index.json`` (or its directory) used instead of ``input_dir``'s. Default ``None``.
        encryption: The ``FernetEncryption`` / ``RSAEncryption`` the dataset was written with (LitData's key files
            work); chunks stay encrypted in the cache. Default ``None``.
        force_override_state_dict: ``True``: loading a state saved with another ``shuffle``, ``seed``, ``drop_last``,
            input, item loader or ``item_shuffle_window`` warns and resumes with this dataset's values (samples may
            repeat or be skipped in that epoch), as LitData. Default ``False``: refused.
        num_canonical_nodes: LitData's first-run node count recorded in ``state_dict()`` (int >= 1, or ``None``: the
            loaded state's, else the world size); it changes no order.
        item_shuffle_window: With ``shuffle=True``, items of each chunk slice are shuffled in blocks of this many
            (LitData 0.2.76's order): an int >= 0 (``0``/``"full"``: one permutation); ``None``/``"auto"``: 256.
        session_options, batch_decode, window_direct_io: LitData's, accepted without effect: ``session_options``
            only ``None``/``{}`` (use ``storage_options``), ``batch_decode`` ``"auto"``/``"all"``/a bool/an int >= 0,
            ``window_direct_io`` a bool.
        allow_pickle: Whether ``pickle`` leaves may be unpickled. ``None`` (default): ``litstream.set_allow_pickle``,
            else ``LITSTREAM_ALLOW_PICKLE``, else allowed except for ``hf://`` and ``http(s)://`` data
            (``PickleRefusedError`` before anything is unpickled; docs/security.md).
        max_memory: Bytes all readers of a loader may buffer (int or ``"800MB"``), ``"auto"`` or ``"off"``. ``None``
            (default): ``LITSTREAM_MAX_MEMORY``, else ``"auto"`` (half the cgroup or rlimit memory); prefetch depths
            shrink until every buffer fits (docs/storage.md).
        version: The committed version read (docs/versions.md): ``None`` (default) the latest; an int, that version
            number (``litstream versions PATH`` lists them); an aware ``datetime``, the version that was the latest
            then; ``"partial"``, an interrupted run's partial indexes (never a committed version; warns). ``None`` pins
            the latest when the dataset is constructed: every worker (of any start method) and every epoch serves
            that version, whatever is committed since.

    Raises:
        ConfigurationError: a bad argument, at construction (a ``ValueError``, as in LitData).
        DatasetNotFoundError: no dataset at ``input_dir``: at construction locally, on first use remotely.
            ``VersionNotFoundError`` (a ``DatasetNotFoundError``): ``version``, or the pinned version, is not kept.
        EncryptionError: on first use, when ``encryption`` is missing or wrong (a ``FormatError``).
    """

    _kind = "dataset"

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
        cache_chunks: bool | None = None,
        version: int | datetime | str | None = None,
    ) -> None:
        check_read_params(session_options=session_options, force_override_state_dict=force_override_state_dict,
                          num_canonical_nodes=num_canonical_nodes, batch_decode=batch_decode,
                          window_direct_io=window_direct_io)  # fmt: skip
        self.max_memory = check_max_memory(max_memory)
        # Everything that decides what is read and in which order, checked once (read/_spec.py).
        self._spec = ReadSpec.build(
            input_dir, shuffle=shuffle, seed=seed, drop_last=drop_last, max_pre_download=max_pre_download,
            transform=transform, serializers=serializers, item_loader=item_loader, shuffle_window=shuffle_window,
            storage_options=storage_options, cache_dir=cache_dir, max_cache_size=max_cache_size,
            hedge_delay=hedge_delay, subsample=subsample, index_path=index_path, encryption=encryption,
            item_shuffle_window=item_shuffle_window, allow_pickle=allow_pickle, cache_chunks=cache_chunks,
            version=version,
        )  # fmt: skip
        self._spec = self._spec.pin_now()  # the version committed now: every worker serves it, whatever comes next
        check_cache_size(max_cache_size)  # warn under 25 GB, as LitData does
        self.current_epoch, self.batch_size, self.num_workers = 1, 1, 1
        self._loader_prefetch = 0  # batches a DataLoader worker builds ahead, set by StreamingDataLoader
        self._force_override_state_dict = force_override_state_dict
        self.num_canonical_nodes = num_canonical_nodes
        self._resume_state: dict[str, Any] | None = None  # a loaded checkpoint, until its epoch ends
        self._parent_env: DistributedEnv | None = None  # rank/world of the process that started the workers
        self._source: DatasetSource | None = None  # per process: the opened dataset
        self._resume: ResumePlan | None = None  # per process: _resume_state resolved for one rank and topology

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
    _cache_settings: SpecAttribute[CacheSettings | None] = SpecAttribute("cache")  # None for a local dataset
    # LitData's dataset.shuffler (read/_shuffler.py): None until the first len() or iteration, then a NoShuffle/
    # FullShuffle/WindowShuffle for this dataset's plan; set_shuffle/set_drop_last (or assigning None) reset it.
    shuffler: Shuffle | None = None
    _loader_group: tuple[int, bool] | None = None  # set by StreamingDataLoader while it starts, see __iter__

    # -- configuration (LitData's setters) -------------------------------------------------------
    def set_epoch(self, current_epoch: int) -> None:
        """Set the 1-based epoch that drives the shuffle order (ignored while a resume is pending)."""
        if self._resume_state is None:
            self.current_epoch = current_epoch

    def _replace_spec(self, **changes: Any) -> None:
        self._spec, self._source = self._spec.replace(**changes), None

    def set_shuffle(self, shuffle: ShuffleMode) -> None:
        engine.replace_order(self, shuffle=shuffle)

    def set_drop_last(self, drop_last: bool) -> None:
        engine.replace_order(self, drop_last=drop_last)

    def set_batch_size(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def set_num_workers(self, num_workers: int) -> None:
        self.num_workers = num_workers or 1

    def __getstate__(self) -> dict[str, Any]:
        """The spec, the counters and the loaded checkpoint; nothing opened in this process."""
        state = {k: v for k, v in self.__dict__.items() if k not in _PROCESS_LOCAL}
        state["_parent_env"] = detect_distributed()  # a spawned worker may not see the process group
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _source=None, _resume=None)

    # -- the opened dataset, topology and lengths ---------------------------------------------------
    def _get_source(self) -> DatasetSource:
        self._source = pump.face_source(self, self._source)
        return self._source

    def get_len(self, num_workers: int, batch_size: int) -> int:
        """Items this rank serves per epoch with ``num_workers`` workers and ``batch_size``."""
        engine.ensure_shuffler(self)
        return engine.rank_length(self, num_workers, batch_size)

    def worker_lengths(self, num_workers: int, batch_size: int) -> list[int]:
        """Items each worker of this rank serves per epoch (index = worker id)."""
        return engine.worker_lengths(self, num_workers, batch_size)

    def __len__(self) -> int:
        return self.get_len(self.num_workers, self.batch_size)

    # -- random access and transforms (read/_pump.py, read/_dataset_state.py) -------------------------
    def __getitem__(self, index: int | slice | str) -> Any:
        """Sample ``index`` (0-based, index order; ``IndexError`` outside ``[-len, len)``), a list for a slice,
        or for a ``str`` the sample with that key (:meth:`get_by_key`)."""
        return pump.get_item(self, index)

    def get_by_key(self, key: str | int) -> Any:
        """The sample whose ``key_fn`` value is ``key`` (``ds["id"]`` for ``str`` keys; ``ds[5]`` stays position 5),
        transformed as ``ds[i]``. ``KeyNotFoundError`` (a ``KeyError``) when the key is not in the dataset, this
        subset/split, or there is no ``keys/`` sidecar; ``ConfigurationError`` when ``key`` is neither str nor int."""
        return self.get_by_keys([key])[0]

    def get_by_keys(self, keys: Sequence[str | int]) -> list[Any]:
        """The samples of ``keys``, in that order, in one call to the read engine (see :meth:`get_by_key`)."""
        return pump.get_by_keys(self, keys)

    @property
    def transforms(self) -> list[Callable[[Any], Any]]:
        """The callables applied to each sample, in order: ``transform=``, else a ``transform`` attribute
        (LitData's README subclasses define a ``transform`` method or set ``self.transform`` in ``__init__``)."""
        return transforms_of(self)

    @transforms.setter
    def transforms(self, value: list[Callable[[Any], Any]]) -> None:
        self._spec = dataclasses.replace(self._spec, transforms=tuple(value))

    _apply = apply_transforms

    # -- iteration: the portal pump (read/_pump.py) -----------------------------------------------------
    def __iter__(self) -> pump.SampleStream | Generator[Any, None, None]:
        # _loader_group read now: StreamingDataLoader sets it only while it starts
        return pump.iterate(self, self._loader_group, shared_block, loader_groups)

    def _serve(self, pieces: Sequence[Piece], portal: BlockingPortal, members: int = 1) -> Generator[Any, None, None]:
        """The samples of ``pieces``, fetched on ``portal``'s loop; also for the Combined / Parallel wrappers, which
        share one portal per worker (``members``: the datasets a worker reads at once, sharing its memory budget)."""
        return pump.face_samples(self, pieces, portal, members, shared_block)

    # -- selection and checkpoints (read/_dataset_state.py) ---------------------------------------------
    @property
    def cache(self) -> Cache:
        """LitData's ``ds.cache``: a :class:`~litstream.Cache` over the local directory this dataset reads."""
        from ._litdata_cache import dataset_cache

        return dataset_cache(self._spec, self._get_source())

    @property
    def subsampled_files(self) -> list[str]:
        """The chunk files this dataset reads, in selection order (LitData's attribute): every chunk of
        ``index.json`` unless ``subsample``, ``subset()`` or a split selects fewer. Reads the index."""
        return engine.chunk_names(self)

    @property
    def region_of_interest(self) -> list[tuple[int, int]]:
        """``(start, end)`` items served of each of :attr:`subsampled_files` (LitData's attribute; end exclusive)."""
        return engine.plan_inputs(self)[0]

    def subset(self: D, indices: Sequence[int] | slice) -> D:
        """A copy of this dataset (same arguments, epoch 1) serving only ``indices`` (LitData's ``subset``): 0-based
        ``ds[i]`` positions in serving order, or a ``slice``; the copy is shuffled, sharded and resumable like any
        dataset. Raises ``ConfigurationError`` (a ``ValueError``) for an index outside ``[0, len)`` or not an int."""
        return engine.subset(self, indices)

    def state_dict(
        self, num_samples_yielded: int, num_workers: int, batch_size: int, *, current_epoch: int | None = None,
        worker_samples_yielded: Sequence[int] | None = None, resume_levels: Sequence[Level] = (),
    ) -> dict[str, Any]:  # fmt: skip
        """Checkpoint of this rank's position in the current epoch: LitData's keys plus three, plain values.
        :class:`StreamingDataLoader` fills every argument; by hand, the first three do (samples this rank delivered
        in the epoch, workers, batch size). ``read.plan._resume`` gives the meaning of every key and argument."""
        return engine.dataset_state(self, num_samples_yielded, num_workers, batch_size, current_epoch,
                                   worker_samples_yielded, resume_levels)  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict`: the next iteration serves only the rest of that epoch. Another world
        size, worker count or batch size spreads the samples not yet served over the new topology (elastic resume);
        a checkpoint taken at an epoch's end starts the next epoch; a LitData 0.2.71-0.2.76 state resumes where
        LitData would (``read.plan._litdata_state``). Raises ``ConfigurationError`` for a checkpoint taken with another
        ``shuffle``, ``seed``, ``drop_last``, input or item loader, or whose counts its epoch cannot hold."""
        engine.load_state(self, state)

    # the Face / Member protocol's private calls (read/_face.py), each one engine function
    _selected = engine.selected
    _config = engine.dataset_config
    _state_config = engine.state_config
    _litdata_layout = engine.layout
    _resume_plan = engine.resume_position
    _clear_resume = engine.clear_resume
    _read_spec = engine.read_spec
    _set_loader_prefetch = engine.set_loader_prefetch
    _pin_distributed = engine.pin_distributed
    _distributed = engine.distributed

    def _epoch_served(self, epoch: int, own: Sequence[int], levels: Sequence[Level], num_workers: int) -> None:
        """A single dataset keeps nothing across epochs (a cycling Parallel does)."""

    def _fit_loader_prefetch(self, limit: MemoryLimit, num_workers: int) -> int | None:
        return pump.face_prefetch(self, self._source, limit, num_workers)
