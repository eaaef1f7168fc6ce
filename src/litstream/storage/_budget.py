"""``ByteBudget``: a first-come-first-served semaphore counting bytes (bounds memory held for transfers)."""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["ByteBudget"]


@dataclass
class _Waiter:
    nbytes: int
    event: anyio.Event
    granted: bool = False


class ByteBudget:
    """A first-come-first-served semaphore counting bytes; a request above ``total`` takes all of it."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self._waiters: deque[_Waiter] = deque()

    @contextlib.asynccontextmanager
    async def hold(self, nbytes: int) -> AsyncIterator[None]:
        nbytes = min(nbytes, self.total)
        await self._acquire(nbytes)
        try:
            yield
        finally:
            self._release(nbytes)

    async def _acquire(self, nbytes: int) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        if not self._waiters and self.used + nbytes <= self.total:
            self.used += nbytes
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return
        waiter = _Waiter(nbytes, anyio.Event())
        self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                self._release(nbytes)
            else:
                self._waiters.remove(waiter)
                self._wake()
            raise

    @property
    def waiting(self) -> int:
        """Requests waiting for bytes to be released."""
        return len(self._waiters)

    async def acquire(self, nbytes: int) -> int:
        """Wait until ``nbytes`` (at most ``total``) fit, take them and return how many were taken.

        Pair it with :meth:`release` of the returned count (possibly in parts, from any task).
        """
        nbytes = min(nbytes, self.total)
        await self._acquire(nbytes)
        return nbytes

    def release(self, nbytes: int) -> None:
        """Give back ``nbytes`` taken by :meth:`acquire`; waiters that now fit are woken, in order."""
        self._release(nbytes)

    def _release(self, nbytes: int) -> None:
        self.used -= nbytes
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.used + self._waiters[0].nbytes <= self.total:
            waiter = self._waiters.popleft()
            self.used += waiter.nbytes
            waiter.granted = True
            waiter.event.set()
