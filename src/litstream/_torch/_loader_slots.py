"""``StreamingDataLoader``'s shared-memory batch slots (``litstream._torch._slots``) for one iteration: opened
for its workers when they can use them, closed (their statistics kept) when it ends."""

from __future__ import annotations

import multiprocessing
from typing import TYPE_CHECKING, Any

from ._collate import TaggingCollate
from ._slots import SlotExchange, SlotPacker

if TYPE_CHECKING:
    from ._loader_profile import WorkerSetup
    from ._slots import SlotStatistics

__all__ = ["close_slots", "open_slots"]


def open_slots(
    collate: Any,
    setup: WorkerSetup,
    *,
    num_workers: int,
    persistent_workers: bool,
    prefetch_factor: int | None,
    context: Any,
) -> SlotExchange | None:
    """The slots of an iteration's workers, or ``None`` (torch's own path); tells ``collate`` (the loader's
    ``TaggingCollate``) and the workers' ``setup`` which.

    Not with persistent workers: they keep the collate function of their first epoch, and torch
    drops the batches they prefetched when an epoch is left early (those slots would stay taken).
    """
    if num_workers == 0 or persistent_workers or not isinstance(collate, TaggingCollate):
        if isinstance(collate, TaggingCollate):
            collate.packer = None
        setup.slots = False
        return None
    # Each worker has at most prefetch_factor batches in flight, plus the one this process has
    # received and not yet copied out: with that many slots, a batch never waits for one.
    slots = (prefetch_factor or 2) + 1
    context = context or multiprocessing.get_context()
    exchange = SlotExchange([context.Semaphore(slots) for _ in range(num_workers)], slots)
    exchange.open()
    collate.packer = SlotPacker(exchange)
    setup.slots = True
    return exchange


def close_slots(collate: Any, exchange: SlotExchange | None, statistics: SlotStatistics) -> SlotStatistics:
    """Close ``exchange`` (if any) and return ``statistics`` plus what it carried."""
    if exchange is None:
        return statistics
    statistics += exchange.statistics()
    exchange.close()
    if isinstance(collate, TaggingCollate) and collate.packer is not None and collate.packer.exchange == exchange.id:
        collate.packer = None  # drop the semaphores (spawn's are named) with the last reference
    return statistics
