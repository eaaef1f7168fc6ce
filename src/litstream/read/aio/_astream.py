"""``astream``: samples of a dataset as an async iterator, on asyncio or trio."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._core._errors import ConfigurationError
from .._args import check_read_args
from .._face import Member
from .._spec import ReadSpec
from .._transform import Transform, check_transforms
from ..plan._session import StreamPosition
from ..plan._subset import Selection, check_subsample, subsample_selection
from ..plan._window import DEFAULT_SHUFFLE_WINDOW

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from ...format._encryption import Encryption
    from ...format._loaders import PyTreeLoader, TokensLoader
    from ...format._serializers import Serializer
    from ...format.arrow._parquet import ParquetLoader
    from ...storage._resolver import Dir
    from ...storage._store import Store
    from ..plan._pieces import ShuffleMode
    from ._sample_stream import SampleStream

__all__ = ["astream"]


def astream(
    input_dir: str | os.PathLike[str] | Dir | Store | Member,
    *,
    shuffle: ShuffleMode = False,
    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
    seed: int = 42,
    drop_last: bool = False,
    epoch: int = 1,
    rank: int = 0,
    world_size: int = 1,
    batch_size: int = 1,
    max_pre_download: int = 2,
    transform: Transform = None,
    serializers: Mapping[str, Serializer] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    item_loader: PyTreeLoader | TokensLoader | ParquetLoader | None = None,
    subsample: float = 1.0,
    index_path: str | os.PathLike[str] | None = None,
    encryption: Encryption | None = None,
    allow_pickle: bool | None = None,
    state: Mapping[str, Any] | None = None,
    item_shuffle_window: int | str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    max_cache_size: int | float | str | None = None,
    hedge_delay: float | None = None,
    cache_chunks: bool | None = None,
    version: int | datetime | str | None = None,
) -> SampleStream:
    """Stream the samples of an optimized dataset into async code (asyncio or trio).

    Use it as ``async for sample in astream(d): ...`` or, for guaranteed clean-up of the
    background prefetch, ``async with astream(d) as samples: async for sample in samples: ...``.
    The order is the one ``StreamingDataset`` with the same arguments serves in a single process
    (LitData's NoShuffle / FullShuffle order).

    Args:
        input_dir: Local dataset directory (``index.json`` + chunks), ``Dir`` or ``Store``; or a
            ``StreamingDataset`` (e.g. a part from ``train_test_split`` or ``ds.subset(...)``), whose
            input, ``serializers``, selected items (subsample, subset, split) and transforms are
            used. Iteration arguments (``shuffle``, ``seed``, ``epoch``, ranks, ...) are always
            this function's own.
        shuffle: ``False`` (default): index order. ``True`` or ``"full"``: shuffle the chunk order and
            the items inside each chunk (LitData's FullShuffle). ``"window"``: FullShuffle's split of
            chunks between ranks, but each reader serves ``shuffle_window`` consecutive chunks of
            its share at a time, their items mixed together in one permutation — for datasets
            written in a meaningful order (sorted, grouped by source), where neighbouring items
            of one chunk would otherwise arrive together. Same items and counts as FullShuffle.
        shuffle_window: Chunks mixed together with ``shuffle="window"`` (>= 1; memory holds one
            window of chunks plus the prefetch). Ignored otherwise. Default 8.
        seed: Shuffle seed, an int in ``[0, 2**32)``. Default 42.
        drop_last: Drop items that do not fill whole batches across ranks. Default False.
        epoch: 1-based epoch; changes the shuffle order. Default 1.
        rank: This reader's rank in ``[0, world_size)``. Default 0.
        world_size: Number of readers sharing the dataset. Default 1.
        batch_size: Batch size used to split items between ranks in whole batches. Default 1.
        max_pre_download: Chunks fetched ahead of the consumer (>= 1). Default 2.
        transform: A callable, or a list of callables applied in order, to each decoded sample, in a
            worker thread (never on the event loop). With a ``StreamingDataset`` input, its own
            transforms run first.
        serializers: Extra serializers by registry key.
        storage_options: Credentials and client options for object stores (see ``StreamingDataset``).
        item_loader: ``PyTreeLoader()`` (default), ``TokensLoader(block_size=B)`` to stream a token
            dataset as ``B``-token windows, or ``ParquetLoader()`` for a Parquet directory indexed by
            ``index_parquet_dataset`` (see ``StreamingDataset``).
        subsample: Fraction of the items to serve (> 0, default 1.0), as ``StreamingDataset``'s
            ``subsample``: a random choice of chunks by ``RandomState([seed])`` when ``shuffle`` is
            not ``False``, else a prefix. With a ``StreamingDataset`` input it applies to the items
            that dataset selects.
        index_path: A local ``index.json`` (or a directory holding one) to use instead of the one in
            ``input_dir`` (see ``StreamingDataset``).
        encryption: For an encrypted dataset, the ``FernetEncryption`` / ``RSAEncryption`` it was
            written with (see ``StreamingDataset``); with a ``StreamingDataset`` input, its own.
        allow_pickle: Whether leaves stored with ``pickle`` may be unpickled; ``None`` (default): a
            ``StreamingDataset`` input's own decision, else as ``StreamingDataset`` decides it (allowed
            for local and object-store data, refused for ``hf://`` and ``http(s)://`` unless
            ``set_allow_pickle`` / ``LITSTREAM_ALLOW_PICKLE`` say otherwise). A refused dataset raises
            ``PickleRefusedError`` when iteration starts, before anything is unpickled.
        state: Resume from a checkpoint: what :meth:`SampleStream.state_dict` returned (or the
            dataset entry of a ``StreamingDataLoader`` checkpoint saved with the same arguments).
            The stream then serves exactly the samples of that epoch not yet served; ``epoch`` is
            the checkpoint's. ``rank``, ``world_size`` and ``batch_size`` may differ from the
            checkpoint's (elastic resume: the remaining samples are spread over the new ranks,
            each served once, assuming every old rank had returned the same number of batches).
            A checkpoint taken after the last sample starts the next epoch. ``None`` (default):
            start ``epoch`` from its beginning.
        item_shuffle_window: With ``shuffle=True``, the in-chunk shuffle block size, as
            ``StreamingDataset``'s (``None``/``"auto"``: 256; ``0``/``"full"``: one permutation of each
            slice). With a ``StreamingDataset`` input, ``None`` keeps the dataset's.
        cache_dir: Root of the local chunk cache of a remote dataset, as ``StreamingDataset``'s. ``None``
            (default) and no ``max_cache_size``: remote chunks are read into memory, no disk cache; with
            ``max_cache_size`` alone the cache is under ``LITSTREAM_CACHE_DIR``, ``LITDATA_CACHE_DIR`` or
            ``~/.cache/litstream/chunks``. With a ``StreamingDataset`` input its cache is used and this
            must be ``None``.
        max_cache_size: Cache budget (bytes, ``"50GB"`` or a fraction of free disk), as
            ``StreamingDataset``'s (given alone, it turns the disk cache on); it also decides the
            multi-node shuffle's epoch-2 order. With a ``StreamingDataset`` input, its own.
        hedge_delay: For remote datasets, seconds after which a slow range read is sent again (see
            ``StreamingDataset``); ``None`` derives it from observed latency.
        cache_chunks: Whether remote chunks are written to the disk cache, as ``StreamingDataset``'s:
            ``True`` always, ``False`` never (read into memory as they arrive). ``None`` (default): only
            when ``cache_dir`` or ``max_cache_size`` is given and the cache can hold the whole dataset.
            With a ``StreamingDataset`` input, its own.
        version: The committed version streamed, as ``StreamingDataset``'s (docs/versions.md): ``None``
            (default) the latest (with a ``StreamingDataset`` input: the version it pinned, if it was opened),
            a version number, an aware ``datetime`` or ``"partial"``. The stream serves the version it opened
            to its end, whatever is committed meanwhile.

    Returns:
        A :class:`SampleStream`. Nothing is read until iteration starts.

    Raises:
        ConfigurationError: a bad argument (raised here, before any I/O), including a ``state``
            saved with another ``shuffle``, ``seed``, ``drop_last``, input or item loader (named);
            on first iteration, a ``state`` whose counts its epoch cannot hold or that was saved
            with another selection (subsample, subset).
        DatasetNotFoundError: on first iteration, when ``input_dir`` holds no dataset.
    """
    check_read_args(shuffle, seed, drop_last, max_pre_download, shuffle_window)
    extra = check_transforms(transform)
    fraction = check_subsample(subsample)
    if isinstance(input_dir, Member):  # a StreamingDataset (read/_face.py)
        if any(v is not None for v in (cache_dir, max_cache_size, hedge_delay, cache_chunks)):
            raise ConfigurationError(
                "cache_dir, max_cache_size, hedge_delay and cache_chunks are the StreamingDataset's own when "
                "astream() reads a StreamingDataset; set them when constructing it, or pass its input_dir instead"
            )
        base = input_dir._open_reader().read_spec()
        spec = base.derive(
            shuffle=shuffle, shuffle_window=shuffle_window, seed=seed, drop_last=drop_last,
            max_pre_download=max_pre_download, transforms=extra, item_shuffle_window=item_shuffle_window,
            item_loader=item_loader, index_path=index_path, encryption=encryption, serializers=serializers,
            allow_pickle=allow_pickle, version=version,
        )  # fmt: skip
        chooses = base.select  # the dataset's own selection, with its own seed
    else:
        spec = ReadSpec.build(
            input_dir,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
            max_pre_download=max_pre_download,
            transform=extra,
            serializers=serializers,
            item_loader=item_loader,
            shuffle_window=shuffle_window,
            storage_options=storage_options,
            cache_dir=cache_dir,
            max_cache_size=max_cache_size,
            hedge_delay=hedge_delay,
            cache_chunks=cache_chunks,
            index_path=index_path,
            encryption=encryption,
            item_shuffle_window=item_shuffle_window,
            allow_pickle=allow_pickle,
            version=version,
            eager=False,
            cache_by_default=False,
        )
        chooses = spec.select

    def select(chunk_sizes: Sequence[int]) -> Selection | None:
        chosen = chooses(chunk_sizes)
        if fraction == 1.0:
            return chosen
        full = chosen or Selection.full(chunk_sizes)
        return subsample_selection(full, fraction, shuffle=shuffle is not False, seed=seed)

    plan = spec.plan_args(rank=rank, world_size=world_size, batch_size=batch_size, epoch=epoch)
    return spec.stream(plan, position=StreamPosition(plan, spec.config(), state), select=select)
