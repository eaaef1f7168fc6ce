"""``OrderedGate``: request slots and a byte budget handed out in priority order (smallest key first).

The :class:`~litstream.storage._transfer.Downloader` fetches every chunk that the reader asked for ahead of
time, each in several ranged GETs. With a first-come-first-served limiter those GETs interleave (the
order in which tasks reach the limiter depends on thread hops and, on trio, on its scheduler), so all
prefetched chunks complete at about the same moment and the reader waits for the whole prefetch window
before its first item. Here every request carries a key — ``(ticket of its chunk, offset)`` — and a
slot goes to the waiting request with the smallest key: the chunk the reader needs next arrives first,
at the full bandwidth, while the following ones still download behind it.

A request is granted only when it is the smallest waiter and both a slot and its bytes are free (head of
line, as :class:`~litstream.storage._budget.ByteBudget` does), so a large request is never starved by
smaller later ones. A request for more bytes than the budget takes all of it.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["OrderedGate", "Request"]

Key = tuple[int, int]


@dataclass(order=True)
class Request:
    key: Key
    seq: int
    nbytes: int = field(compare=False)
    event: anyio.Event = field(compare=False, default_factory=anyio.Event)
    granted: bool = field(compare=False, default=False)
    gone: bool = field(compare=False, default=False)  # left the queue, or released what it held
    slot_freed: bool = field(compare=False, default=False)


class OrderedGate:
    """At most ``max_requests`` holders and ``max_bytes`` held bytes; waiters served smallest key first.

    Belongs to one event loop (its events are that loop's).

    Args:
        max_requests: Holders at once (>= 1).
        max_bytes: Bytes held at once (>= 1); a request above it takes all of it.
    """

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.requests = 0
        self.used = 0
        self._heap: list[Request] = []
        self._seq = itertools.count()

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot or for bytes."""
        return sum(not w.gone for w in self._heap)

    def enqueue(self, key: Key, nbytes: int) -> Request:
        """Queue a request now (no wait): queueing the requests of one download together, before any of them
        waits, keeps a later download's requests from overtaking them. Pair with :meth:`wait` and then
        :meth:`done`, or :meth:`drop` if the request will not be made."""
        waiter = Request(key, next(self._seq), min(nbytes, self.max_bytes))
        heapq.heappush(self._heap, waiter)
        self._wake()
        return waiter

    async def wait(self, waiter: Request) -> None:
        """Wait until ``waiter`` holds its slot and bytes (checks for cancellation even if it already does)."""
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
            await waiter.event.wait()
        except BaseException:
            self.drop(waiter)
            raise

    def free_slot(self, waiter: Request) -> None:
        """Give ``waiter``'s slot back now; its bytes stay held until :meth:`done`."""
        if waiter.granted and not waiter.slot_freed:
            waiter.slot_freed = True
            self.requests -= 1
            self._wake()

    def done(self, waiter: Request) -> None:
        """Give back what ``waiter`` holds (once; later calls do nothing)."""
        if waiter.granted and not waiter.gone:
            waiter.gone = True
            self.requests -= 0 if waiter.slot_freed else 1
            self.used -= waiter.nbytes
            self._wake()

    def drop(self, waiter: Request) -> None:
        """Withdraw ``waiter``: release what it holds, or leave the queue if it holds nothing yet."""
        if waiter.granted:
            self.done(waiter)
        elif not waiter.gone:
            waiter.gone = True
            self._wake()

    @contextlib.asynccontextmanager
    async def hold(self, key: Key, nbytes: int) -> AsyncIterator[Request]:
        """Hold one slot and ``min(nbytes, max_bytes)`` bytes for the body; waits in ``key`` order."""
        waiter = self.enqueue(key, nbytes)
        try:
            await self.wait(waiter)
            yield waiter
        finally:
            self.drop(waiter)

    def _fits(self, nbytes: int) -> bool:
        return self.requests < self.max_requests and self.used + nbytes <= self.max_bytes

    def _head(self) -> Request | None:
        while self._heap and self._heap[0].gone:  # withdrawn before being granted
            heapq.heappop(self._heap)
        return self._heap[0] if self._heap else None

    def _wake(self) -> None:
        while (head := self._head()) is not None and self._fits(head.nbytes):
            heapq.heappop(self._heap)
            self.requests += 1
            self.used += head.nbytes
            head.granted = True
            head.event.set()
