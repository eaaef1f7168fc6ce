"""``astream``: samples of a dataset as an async iterator, on asyncio or trio."""

from __future__ import annotations

import os
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

if sys.version_info < (3, 11):  # pragma: no cover
    pass

from ..format._encrypted import check_reader_encryption
from ..format._loaders import PyTreeLoader, TokensLoader
from ..storage._resolver import Dir, resolve_dir, store_for
from ._args import check_read_args, check_read_loader
from ._core import (
    ReadPlanArgs,
    ShuffleMode,
)
from ._sample_stream import SampleStream
from ._session import StreamPosition
from ._subset import HasDatasetView, Selection, check_subsample, subsample_selection
from ._transform import Transform, check_transforms, compose
from ._trust import check_allow_pickle, reader_pickle
from ._window import DEFAULT_SHUFFLE_WINDOW

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from ..format._encryption import Encryption
    from ..format._parquet import ParquetLoader
    from ..format._serializers import Serializer
    from ..storage._store import Store

__all__ = ["astream"]


def astream(
    input_dir: str | os.PathLike[str] | Dir | Store | HasDatasetView,
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
    transforms = check_transforms(transform)
    fraction = check_subsample(subsample)
    view = input_dir._dataset_view() if isinstance(input_dir, HasDatasetView) else None
    if view is not None:
        item_loader = item_loader if item_loader is not None else view.item_loader
        index_path = index_path if index_path is not None else view.index_path
        encryption = encryption if encryption is not None else view.encryption
        transforms = [*view.transforms, *transforms]
        serializers = serializers if serializers is not None else view.serializers

    def select(chunk_sizes: Sequence[int]) -> Selection | None:
        base = None if view is None else view.select(chunk_sizes)
        if fraction == 1.0:
            return base
        full = base or Selection.full(chunk_sizes)
        return subsample_selection(full, fraction, shuffle=shuffle is not False, seed=seed)

    check_read_loader(item_loader)
    check_reader_encryption(encryption)
    check_allow_pickle(allow_pickle)
    store = view.store if view is not None else store_for(input_dir, storage_options)  # type: ignore[arg-type]
    if allow_pickle is None and view is not None:
        allow_pickle = view.allow_pickle
    plan = ReadPlanArgs(
        rank=rank,
        world_size=world_size,
        batch_size=batch_size,
        drop_last=drop_last,
        shuffle=shuffle,
        shuffle_window=shuffle_window,
        seed=seed,
        epoch=epoch,
    )
    where = view.input_dir if view is not None and view.input_dir is not None else _input_identity(input_dir, store)
    config = {
        "input_dir_path": where.path,
        "input_dir_url": where.url,
        "item_loader": (item_loader or PyTreeLoader()).state_dict(),
        "drop_last": drop_last,
        "seed": seed,
        "shuffle": shuffle,
        "shuffle_window": shuffle_window,
        "item_shuffle_window": plan.item_shuffle_window,  # LitData 0.2.76's default in-chunk order
    }
    return SampleStream(
        store,
        plan,
        max_pre_download=max_pre_download,
        transform=compose(transforms),
        serializers=serializers,
        item_loader=item_loader,
        select=select,
        index_path=index_path,
        encryption=encryption,
        allow_pickle=reader_pickle(allow_pickle, store.url),  # None: the dataset's trust marker decides
        prepare=_hub_index(input_dir, store, storage_options, item_loader) if index_path is None else None,
        position=StreamPosition(plan, config, state),
    )


def _hub_index(
    input_dir: object, store: Store, storage_options: Mapping[str, Any] | None, item_loader: object
) -> Callable[[], Awaitable[tuple[str | None, ParquetLoader | None]]] | None:
    """For an ``hf://`` input: what indexes it on first use, as ``StreamingDataset`` does (``write/_hf.py``)."""
    url = input_dir.url if isinstance(input_dir, Dir) else input_dir if isinstance(input_dir, str) else None
    if url is None or not url.startswith("hf://"):
        return None
    from ..write._hf import ahf_dataset_index

    return partial(ahf_dataset_index, store, url.rstrip("/"), None, storage_options, item_loader)


def _input_identity(input_dir: object, store: Store) -> Dir:
    """The ``input_dir_path`` / ``input_dir_url`` a checkpoint records, as ``StreamingDataset`` records them."""
    if isinstance(input_dir, (str, os.PathLike, Dir)):
        return resolve_dir(input_dir)
    return Dir(path=None, url=store.url)
