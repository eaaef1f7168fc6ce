"""What a sync reader's pump needs from the engine: a local dataset opened without an event loop, the calls
it makes on its portal (one chunk per call), how deep a reader of a spec prefetches, and the decode batches
of a worker's pieces (:func:`serve_batches`); ``read/_reader.py``'s ``DatasetReader`` drives it."""

from __future__ import annotations

import itertools
import sys
from concurrent.futures import CancelledError
from typing import TYPE_CHECKING, Any, cast

import anyio

from ..._core._errors import LitstreamError, collapse_exception_group, raise_collapsed
from ...storage._files import local_path
from ..plan._plan import ChunkSlice
from ..source._index_load import load_versioned_index_now
from ..source._source import DatasetSource
from ._decode import work_parts
from ._engine import ChunkWork, produce_chunks
from ._memory import REMOTE_MIN_PRE_DOWNLOAD, budget_for, reader_depth

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Mapping, Sequence
    from concurrent.futures import Future

    from anyio.from_thread import BlockingPortal

    from ...format._batch_decode import ColumnBatch
    from ...format._chunk import ChunkView
    from ...format._serializers import Serializer
    from ...storage._base import Store
    from .._spec import ReadSpec
    from ..plan._pieces import Piece
    from ..source._versions import VersionRef
    from ._memory import MemoryLimit

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "SHARED_ALLOC",
    "WORKER_ALLOC",
    "SampleChain",
    "close",
    "get_item_at",
    "in_place",
    "loader_prefetch",
    "make_stream",
    "open_now",
    "open_spec_now",
    "opens_remote",
    "receive",
    "serve_batches",
    "worker_alloc",
]


# Set in a DataLoader worker whose batches go through litstream._torch._slots (by the loader's worker_init_fn):
# arrays are then decoded into reused private memory (a _slots.ScratchPool), since the slots, not
# fresh shared memory, carry them to the main process; [1]: for column batches (no user code sees them
# before they are packed), straight into the next slot where possible (_slots.SlotAlloc).
WORKER_ALLOC: list[Callable[[int], Any] | None] = [None, None]
# Where a DataLoader worker decodes arrays by default: torch's shared memory (``_torch/_collate.shared_block``,
# registered when ``litstream._torch`` is imported: the only room that imports torch), so a batch is not copied
# to be shared with the main process.
SHARED_ALLOC: list[Callable[[int], Any] | None] = [None]


def worker_alloc(columns: bool) -> Callable[[int], Any] | None:
    """Where a DataLoader worker's batches (``columns``: column batches) decode their arrays."""
    return WORKER_ALLOC[1 if columns else 0] or SHARED_ALLOC[0]


async def get_item_at(source: DatasetSource, chunk: int, item: int) -> Any:
    return await source.read_sample(chunk, item)


def open_now(
    store: Store,
    serializers: Mapping[str, Serializer] | None,
    item_loader: Any,
    allow_pickle: bool | None = True,
    encryption: Any = None,
    version: VersionRef | None = None,
) -> DatasetSource | None:
    """``DatasetSource.open`` of a dataset in local files (``storage/_files.py``), done on this thread without an
    event loop (its index read in place, its decoder chosen). ``None`` when that needs a loop (a store without
    local files, no ``index.json``, partial indexes), so the caller opens it on the portal instead."""
    loaded = load_versioned_index_now(store, version)
    if loaded is None:
        return None
    index, digest = loaded
    return DatasetSource.prepared(store, index, digest, serializers, item_loader, allow_pickle, encryption)


def open_spec_now(spec: ReadSpec) -> DatasetSource | None:
    """:func:`open_now` of ``spec`` when it reads local files in place with their own index, else ``None``."""
    if spec.cache is not None or spec.index_path is not None:
        return None
    return open_now(spec.store, spec.serializers, spec.item_loader, spec.pickle_choice, spec.encryption, spec.version)


def make_stream(buffer: int = 1) -> Any:
    return anyio.create_memory_object_stream[ChunkWork](buffer)


async def receive(stream: Any) -> ChunkWork | None:
    try:
        work: ChunkWork = await stream.receive()
        return work
    except anyio.EndOfStream:
        return None


async def close(stream: Any) -> None:
    stream.close()


def _ahead(spec: ReadSpec) -> int:
    """Chunks a reader of ``spec`` fetches ahead: remote ones at least 4, so downloads overlap chunk boundaries."""
    return spec.max_pre_download if spec.cache is None else max(spec.max_pre_download, REMOTE_MIN_PRE_DOWNLOAD)


def opens_remote(spec: ReadSpec) -> bool:
    """Whether opening ``spec``'s dataset uses a remote client (which a process about to fork should not)."""
    return spec.cache is not None or local_path(spec.store, "") is None


def loader_prefetch(
    spec: ReadSpec, source: DatasetSource | None, limit: MemoryLimit, readers: int, batch_size: int
) -> int | None:
    """The loader's ``prefetch_factor`` whose batches fit the memory ``limit`` with ``readers`` readers of ``spec``
    (``None`` without an opened ``source``: the workers then plan with torch's).

    Raises:
        ConfigurationError: not even one batch ahead fits.
    """
    if source is None:
        return None
    budget = budget_for(
        source, [], limit, readers=readers, max_pre_download=_ahead(spec),
        window=spec.shuffle_window if spec.shuffle == "window" else 0, batch_size=batch_size,
        prefetch_factor=2, fixed_prefetch=False,
    )  # fmt: skip
    return budget.prefetch_factor


def in_place(source: DatasetSource, pieces: Sequence[Piece]) -> bool:
    """Whether every chunk of ``pieces`` is a whole local, uncompressed, unencrypted file read in place (one
    chunk each, no shuffle window): the engine would only map them (open + mmap, no read: pages come with
    each decode batch), so they are mapped on the calling thread instead, without an event loop."""
    return bool(pieces) and all(isinstance(piece, ChunkSlice) for piece, _ in pieces) and source.maps_in_place()


def _serve_in_place(
    source: DatasetSource,
    pieces: Sequence[Piece],
    transform: Callable[[Any], Any] | None,
    ahead: int,
    align: int,
    alloc: Callable[[int], Any] | None,
    columns: bool,
) -> Generator[list[Any] | ColumnBatch, None, None]:
    """:func:`serve_batches` of pieces that are :func:`in_place`. A chunk is mapped ``ahead`` pieces before its
    turn, as the engine would (the mapping asks the kernel to read the file ahead: a cold disk reads while the
    chunks before it are decoded); an error mapping it is raised when its turn comes."""
    mapped: dict[int, ChunkView | Exception] = {}
    served = 0
    for k, (piece, order) in enumerate(pieces):
        for j in range(k, min(k + 1 + ahead, len(pieces))):
            if j not in mapped:
                chunk = pieces[j][0]
                assert isinstance(chunk, ChunkSlice)
                try:
                    view = source.map_local_chunk(chunk.chunk_index)
                except Exception as exc:  # raised in its turn, after the chunks before it
                    mapped[j] = exc
                else:
                    assert view is not None  # maps_in_place holds for every chunk of the dataset
                    mapped[j] = view
        got = mapped.pop(k)
        if isinstance(got, Exception):
            raise got
        assert isinstance(piece, ChunkSlice)
        work = ChunkWork(piece.chunk_index, got, order)
        del got
        yield from work_parts(source, work, transform, served, align, alloc, columns)
        served += len(work.items)
        del work  # not held while the next chunk is handed over


PRODUCER_FAILURE_WAIT = 60.0
"""Seconds :func:`_raise_producer_failure` waits for a failing engine to finish (it is already cancelling)."""


def _raise_producer_failure(future: Future[None], error: LitstreamError) -> None:
    """Raise the engine's own failure instead of ``error``, which only follows it (``follows_another_failure``:
    the bytes a decode waited for will not come because their download was cancelled).

    The decode runs on this thread and learns of the cancellation as soon as it happens, while the failure
    that caused it (a checksum mismatch, a storage error) ends the engine's task group on the loop thread
    just after: wait for that to finish and raise its failure (collapsed), chained from ``error``. Returns
    (the caller raises ``error``) when the engine ended without a failure of its own or did not end within
    :data:`PRODUCER_FAILURE_WAIT` seconds.
    """
    try:
        failure = future.exception(timeout=PRODUCER_FAILURE_WAIT)
    except (TimeoutError, CancelledError):
        return
    if isinstance(failure, BaseExceptionGroup):
        failure = collapse_exception_group(failure)
    if isinstance(failure, Exception) and not (isinstance(failure, LitstreamError) and failure.follows_another_failure):
        raise failure from error


def serve_batches(
    portal: BlockingPortal | None,
    spec: ReadSpec,
    source: DatasetSource,
    pieces: Sequence[Piece],
    transform: Callable[[Any], Any] | None,
    *,
    max_memory: int | str | bool | None,
    readers: int,
    batch_size: int,
    prefetch_factor: int,
    alloc: Callable[[int], Any] | None,
    columns: bool = False,
) -> Generator[list[Any] | ColumnBatch, None, None]:
    """The decode batches of ``pieces`` (``ColumnBatch`` es allowed with ``columns``): the engine fetches whole
    chunks on ``portal``'s loop, one ``portal.call`` hands each over, and its items are decoded on the calling
    thread (``alloc``: where arrays are decoded). ``portal`` ``None``: the pieces are :func:`in_place`."""
    ahead, handover = reader_depth(  # under a memory limit: this reader's share (read/engine/_memory.py)
        source, pieces, max_memory, max_pre_download=spec.max_pre_download, cached=spec.cache is not None,
        readers=readers, window=spec.shuffle_window if spec.shuffle == "window" else 0, batch_size=batch_size,
        loader_batches=prefetch_factor,
    )  # fmt: skip
    if portal is None:  # chunks mapped in place on this thread (see in_place)
        yield from _serve_in_place(source, pieces, transform, max(ahead - 1, 0), max(batch_size, 1), alloc, columns)
        return
    send, received = portal.call(make_stream, handover)
    future = portal.start_task_soon(lambda: produce_chunks(source, pieces, send, max_pre_download=ahead))
    served, align = 0, max(batch_size, 1)
    try:
        while True:
            work = portal.call(receive, received)
            if work is None:
                break
            try:
                yield from work_parts(source, work, transform, served, align, alloc, columns)
            except LitstreamError as error:
                if error.follows_another_failure:  # e.g. a chunk decoded while it downloads: raise why it stopped
                    _raise_producer_failure(future, error)
                raise
            served += len(work.items)
            del work  # the chunk is not held while the next one is handed over (read/engine/_memory.py counts so)
        try:
            future.result()
        except BaseExceptionGroup as group:
            raise_collapsed(group)
    finally:
        if not sys.is_finalizing():  # at interpreter exit the loop thread may be gone
            if not future.done():
                future.cancel()
            portal.call(close, received)


class SampleChain(itertools.chain):  # type: ignore[type-arg]
    """The samples of an iterator of sample lists, one by one: ``next()`` takes them from the current list
    in C (``itertools.chain``); the Python generator ``batches`` resumes only once per list. :meth:`close`
    closes ``batches`` (what a generator's ``close()`` would do), as does garbage collection."""

    __slots__ = ("batches",)
    batches: Generator[list[Any], None, None]

    @classmethod
    def over(cls, batches: Generator[list[Any], None, None]) -> SampleChain:
        stream = cast("SampleChain", cls.from_iterable(batches))  # an instance of cls
        stream.batches = batches
        return stream

    def close(self) -> None:
        self.batches.close()
