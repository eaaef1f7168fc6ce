"""``StreamingDataset``: the torch ``IterableDataset`` facade over a :class:`~litstream.read._reader.DatasetReader`
(which owns the read: spec, pinned version, source, checkpoint, shuffler). It pickles as configuration only.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, TypeVar

from torch.utils.data import IterableDataset

from ..read._dataset_resume import dataset_state
from ..read._params import check_read_params
from ..read._reader import DatasetReader
from ..read._spec import Loader, ReadSpec
from ..read._spec_attribute import ReaderAttribute, SpecAttribute
from ..read._transform import check_transforms
from ..read.engine._memory import check_max_memory
from ..read.engine._pump import SampleChain
from ..read.plan._window import DEFAULT_SHUFFLE_WINDOW
from ..storage._cache_dirs import check_cache_size
from ._collate import loader_groups

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Generator, Mapping, Sequence
    from datetime import datetime

    from ..format._encryption import Encryption
    from ..format._loaders import PyTreeLoader, TokensLoader
    from ..format._serializers import Serializer
    from ..format.arrow._parquet import ParquetLoader
    from ..read._shuffler import Shuffle
    from ..read._transform import Transform
    from ..read.cache._source_cache import CacheSettings
    from ..read.engine._limits import MaxMemory
    from ..read.engine._memory import MemoryLimit
    from ..read.plan._pieces import ShuffleMode
    from ..read.plan._resume import ResumePlan
    from ..read.plan._resume_types import Level
    from ..storage._resolver import Dir
    from ..storage._store import Store
    from ._litdata_cache import Cache

__all__ = ["StreamingDataset"]

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
        # Everything that decides what is read and in which order, checked once (read/_spec.py), pinned to the
        # version committed now: every worker serves it, whatever is committed next (docs/versions.md).
        spec = ReadSpec.build(
            input_dir, shuffle=shuffle, seed=seed, drop_last=drop_last, max_pre_download=max_pre_download,
            transform=transform, serializers=serializers, item_loader=item_loader, shuffle_window=shuffle_window,
            storage_options=storage_options, cache_dir=cache_dir, max_cache_size=max_cache_size,
            hedge_delay=hedge_delay, subsample=subsample, index_path=index_path, encryption=encryption,
            item_shuffle_window=item_shuffle_window, allow_pickle=allow_pickle, cache_chunks=cache_chunks,
            version=version,
        )  # fmt: skip
        pinned, index_bytes = spec.pin_now_with_index()
        self._reader = DatasetReader(
            pinned, max_memory=check_max_memory(max_memory), force_override_state_dict=force_override_state_dict,
            num_canonical_nodes=num_canonical_nodes, index_bytes=index_bytes,
        )  # fmt: skip
        check_cache_size(max_cache_size)  # warn under 25 GB, as LitData does

    def _open_reader(self) -> DatasetReader:
        """The reader, with this dataset's transforms (a subclass's ``transform`` too) as they are now."""
        reader = self._reader
        reader.transforms = tuple(self.transforms)
        return reader

    # -- LitData's attributes, kept by the reader ----------------------------------------------------------
    current_epoch: ReaderAttribute[int] = ReaderAttribute("current_epoch", "The 1-based epoch that drives the order.")
    batch_size: ReaderAttribute[int] = ReaderAttribute("batch_size", "The loader's batch size (1 outside a loader).")
    num_workers: ReaderAttribute[int] = ReaderAttribute("num_workers", "The loader's worker count (at least 1).")
    shuffler: ReaderAttribute[Shuffle | None] = ReaderAttribute(
        "shuffler",
        "LitData's ``dataset.shuffler`` (``read/_shuffler.py``): ``None`` until the first ``len()`` or iteration, "
        "then a ``NoShuffle`` / ``FullShuffle`` / ``WindowShuffle`` for this dataset's plan; ``set_shuffle`` / "
        "``set_drop_last`` (or assigning ``None``) reset it.",
    )
    num_canonical_nodes: ReaderAttribute[int | None] = ReaderAttribute(
        "num_canonical_nodes", "LitData's first-run node count recorded in ``state_dict()``."
    )

    @property
    def max_memory(self) -> MaxMemory:
        """The checked ``max_memory``: what all readers of a loader may buffer."""
        return self._reader.max_memory

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
    _loader_group: tuple[int, bool] | None = None  # set by StreamingDataLoader while it starts, see __iter__

    # -- configuration (LitData's setters) -------------------------------------------------------
    def set_epoch(self, current_epoch: int) -> None:
        """Set the 1-based epoch that drives the shuffle order (ignored while a resume is pending)."""
        if self._reader.resume.saved is None:
            self.current_epoch = current_epoch

    def set_shuffle(self, shuffle: ShuffleMode) -> None:
        self._reader.replace_order(shuffle=shuffle)

    def set_drop_last(self, drop_last: bool) -> None:
        self._reader.replace_order(drop_last=drop_last)

    def set_batch_size(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def set_num_workers(self, num_workers: int) -> None:
        self.num_workers = num_workers or 1

    # -- lengths ----------------------------------------------------------------------------------------------
    def get_len(self, num_workers: int, batch_size: int) -> int:
        """Items this rank serves per epoch with ``num_workers`` workers and ``batch_size``."""
        self._reader.ensure_shuffler()
        return self._reader.rank_length(num_workers, batch_size)

    def worker_lengths(self, num_workers: int, batch_size: int) -> list[int]:
        """Items each worker of this rank serves per epoch (index = worker id)."""
        return self._reader.worker_lengths(num_workers, batch_size)

    def __len__(self) -> int:
        return self.get_len(self.num_workers, self.batch_size)

    # -- random access and transforms ----------------------------------------------------------------------------
    def __getitem__(self, index: int | slice | str) -> Any:
        """Sample ``index`` (0-based, index order; ``IndexError`` outside ``[-len, len)``), a list for a slice,
        or for a ``str`` the sample with that key (:meth:`get_by_key`)."""
        if isinstance(index, str):
            return self.get_by_keys([index])[0]
        return self._open_reader().get_item(index)

    def get_by_key(self, key: str | int) -> Any:
        """The sample whose ``key_fn`` value is ``key`` (``ds["id"]`` for ``str`` keys; ``ds[5]`` stays position 5),
        transformed as ``ds[i]``. ``KeyNotFoundError`` (a ``KeyError``) when the key is not in the dataset, this
        subset/split, or there is no ``keys/`` sidecar; ``ConfigurationError`` when ``key`` is neither str nor int."""
        return self.get_by_keys([key])[0]

    def get_by_keys(self, keys: Sequence[str | int]) -> list[Any]:
        """The samples of ``keys``, in that order, in one call to the read engine (see :meth:`get_by_key`)."""
        return self._open_reader().get_by_keys(keys)

    @property
    def transforms(self) -> list[Callable[[Any], Any]]:
        """The callables applied to each sample, in order: ``transform=``, else a ``transform`` attribute
        (LitData's README subclasses define a ``transform`` method or set ``self.transform`` in ``__init__``)."""
        given = self._reader.spec.transforms
        if given:
            return list(given)
        own = getattr(self, "transform", None)
        return [] if own is None else check_transforms(own)

    @transforms.setter
    def transforms(self, value: list[Callable[[Any], Any]]) -> None:
        self._reader.replace_spec(transforms=tuple(check_transforms(value)))

    # -- iteration: one epoch of the reader ---------------------------------------------------------------------
    def __iter__(self) -> SampleChain | Generator[Any, None, None]:
        group = self._loader_group  # read now: StreamingDataLoader sets it only while it starts its workers
        batches = self._open_reader().epoch(None if group is None else group[1])
        return SampleChain.over(batches) if group is None else loader_groups(batches, group[0])  # type: ignore[arg-type]

    # -- selection and checkpoints --------------------------------------------------------------------------
    @property
    def cache(self) -> Cache:
        """LitData's ``ds.cache``: a :class:`~litstream.Cache` over the local directory this dataset reads."""
        from ._litdata_cache import dataset_cache

        return dataset_cache(self._reader.spec, self._reader.source())

    @property
    def subsampled_files(self) -> list[str]:
        """The chunk files this dataset reads, in selection order (LitData's attribute): every chunk of
        ``index.json`` unless ``subsample``, ``subset()`` or a split selects fewer. Reads the index."""
        return self._reader.chunk_names()

    @property
    def region_of_interest(self) -> list[tuple[int, int]]:
        """``(start, end)`` items served of each of :attr:`subsampled_files` (LitData's attribute; end exclusive)."""
        return self._reader.plan_inputs()[0]

    def _with_reader(self: D, reader: DatasetReader) -> D:
        """A copy of this dataset reading with ``reader``."""
        new = copy.copy(self)
        new._reader = reader
        return new

    def subset(self: D, indices: Sequence[int] | slice) -> D:
        """A copy of this dataset (same arguments, epoch 1) serving only ``indices`` (LitData's ``subset``): 0-based
        ``ds[i]`` positions in serving order, or a ``slice``; the copy is shuffled, sharded and resumable like any
        dataset. Raises ``ConfigurationError`` (a ``ValueError``) for an index outside ``[0, len)`` or not an int."""
        return self._with_reader(self._open_reader().subset(indices))

    def state_dict(
        self, num_samples_yielded: int, num_workers: int, batch_size: int, *, current_epoch: int | None = None,
        worker_samples_yielded: Sequence[int] | None = None, resume_levels: Sequence[Level] = (),
    ) -> dict[str, Any]:  # fmt: skip
        """Checkpoint of this rank's position in the current epoch: LitData's keys plus three, plain values.
        :class:`StreamingDataLoader` fills every argument; by hand, the first three do (samples this rank delivered
        in the epoch, workers, batch size). ``read.plan._resume`` gives the meaning of every key and argument."""
        return dataset_state(self._reader, num_samples_yielded, num_workers, batch_size, current_epoch,
                             worker_samples_yielded, resume_levels)  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict`: the next iteration serves only the rest of that epoch. Another world
        size, worker count or batch size spreads the samples not yet served over the new topology (elastic resume);
        a checkpoint taken at an epoch's end starts the next epoch; a LitData 0.2.71-0.2.76 state resumes where
        LitData would (``read.plan._litdata_state``). Raises ``ConfigurationError`` for a checkpoint taken with another
        ``shuffle``, ``seed``, ``drop_last``, input or item loader, or whose counts its epoch cannot hold."""
        self._reader.load_state(state)

    # -- the Face protocol (read/_face.py): what StreamingDataLoader calls, each one call on the reader -----------
    def _config(self) -> dict[str, Any]:
        return self._reader.config()

    def _pin_distributed(self) -> None:
        self._reader.pin_distributed()

    def _resume_plan(self, num_workers: int) -> ResumePlan | None:
        return self._reader.resume_position(num_workers)

    def _clear_resume(self) -> None:
        self._reader.clear_resume()

    def _set_loader_prefetch(self, prefetch_factor: int) -> None:
        self._reader.loader_prefetch = prefetch_factor

    def _epoch_served(self, epoch: int, own: Sequence[int], levels: Sequence[Level], num_workers: int) -> None:
        """A single dataset keeps nothing across epochs (a cycling Parallel does)."""

    def _fit_loader_prefetch(self, limit: MemoryLimit, num_workers: int) -> int | None:
        return self._reader.fit_prefetch(limit, num_workers)
