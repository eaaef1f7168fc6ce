"""Small I/O helpers of ``StreamingDataset``: the portal's stream calls, opening a local dataset
without an event loop, single-item reads, and telling a DataLoader worker from the main process."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import sniffio

from ..format._index import INDEX_FILENAME
from ..read._engine import ChunkWork
from ..read._source import DatasetSource
from ..storage._files import local_path

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..format._serializers import Serializer
    from ..storage._base import Store

__all__ = ["_close", "_get_item_at", "_inside_worker", "_make_stream", "_open_now", "_receive"]


async def _get_item_at(source: DatasetSource, chunk: int, item: int) -> Any:
    return await source.read_sample(chunk, item)


def _open_now(
    store: Store,
    serializers: Mapping[str, Serializer] | None,
    item_loader: Any,
    allow_pickle: bool | None = True,
    encryption: Any = None,
) -> DatasetSource | None:
    """``DatasetSource.open`` of a dataset in local files (``storage/_files.py``) run to completion in this
    thread, without an event loop: with ``index.json`` present it awaits nothing. ``None`` when it would
    need a loop (a store without local files, no index.json, or a step that awaits), so the caller opens
    it on the portal instead."""
    index = local_path(store, INDEX_FILENAME)
    if index is None or not index.is_file():
        return None
    coroutine = DatasetSource.open(
        store, serializers, None, item_loader, allow_pickle=allow_pickle, encryption=encryption
    )
    try:
        coroutine.send(None)
    except StopIteration as done:
        source: DatasetSource = done.value
        return source
    except sniffio.AsyncLibraryNotFoundError:  # a step needed an event loop: open on the portal instead
        return None
    coroutine.close()  # it suspended on something only a loop can resume
    return None


def _make_stream(buffer: int = 1) -> Any:
    return anyio.create_memory_object_stream[ChunkWork](buffer)


async def _receive(receive: Any) -> ChunkWork | None:
    try:
        work: ChunkWork = await receive.receive()
        return work
    except anyio.EndOfStream:
        return None


async def _close(receive: Any) -> None:
    receive.close()


# Set in a DataLoader worker whose batches go through litstream._torch._slots (by the loader's worker_init_fn):
# arrays are then decoded into reused private memory (a _slots.ScratchPool), since the slots, not
# fresh shared memory, carry them to the main process; [1]: for column batches (no user code sees them
# before they are packed), straight into the next slot where possible (_slots.SlotAlloc).
WORKER_ALLOC: list[Callable[[int], Any] | None] = [None, None]


def _inside_worker() -> bool:
    from torch.utils.data import get_worker_info

    return get_worker_info() is not None
