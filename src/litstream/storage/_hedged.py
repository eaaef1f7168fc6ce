"""Hedged range reads: when a read is slow, ask again and keep whichever answer comes first.

A few requests to an object store take far longer than the rest (a slow disk, a busy front end, a lost
packet). Waiting ``delay`` seconds and then sending one duplicate cuts that tail at the cost of a few
percent more requests ("The Tail at Scale", Dean and Barroso, 2013)::

    t=0        primary ─────────────────────────────────────────────▶ (cancelled)
    t=delay               duplicate ─────────▶ answer, returned
                                                 └ the task group cancels the primary

Only range reads are hedged: they are small and idempotent. Whole-object ``get``s and all writes pass
through unchanged, and ``local_path`` is forwarded, so a hedged local store keeps the mmap fast paths.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import anyio

from .._core._errors import ConfigurationError, ObjectNotFoundError
from ._files import local_path

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from pathlib import Path

    from ._base import ObjectMeta, PutData, Store

__all__ = ["HedgeStatistics", "HedgedStore"]

T = TypeVar("T")


@dataclass(frozen=True)
class HedgeStatistics:
    """Counters of a :class:`HedgedStore` since it was made.

    Attributes:
        reads: Range reads answered.
        hedges: Duplicates sent (reads that had not answered within the delay).
        hedge_wins: Reads the duplicate answered first.
        delay: The hedge delay in force now, in seconds.
    """

    reads: int
    hedges: int
    hedge_wins: int
    delay: float


class HedgedStore:
    """Wraps a :class:`~litstream.Store`; its ``get_range`` and ``get_ranges`` send a duplicate when slow.

    Args:
        inner: The store that serves every request.
        hedge_delay: Seconds to wait for an answer before sending the duplicate; ``0`` turns hedging off
            (every read is sent once, as ``hedge_delay=0`` means in LitData). ``None`` (default) adapts it:
            the ``quantile`` of the latencies of the last ``window`` reads, at least ``min_delay``, and
            ``initial_delay`` until ``min_samples`` reads have been seen.
        min_delay: The floor of the adaptive delay, in seconds (default 0.05).
        initial_delay: The delay before enough latencies are known, in seconds (default 1.0).
        quantile: Which latency quantile the adaptive delay follows (default 0.95, so about 5% of reads
            are duplicated).
        window: How many recent latencies are kept (default 256).
        min_samples: Latencies needed before the delay adapts (default 16).

    Raises:
        ConfigurationError: a delay is negative, or ``quantile`` is outside (0, 1].
    """

    def __init__(
        self,
        inner: Store,
        hedge_delay: float | None = None,
        *,
        min_delay: float = 0.05,
        initial_delay: float = 1.0,
        quantile: float = 0.95,
        window: int = 256,
        min_samples: int = 16,
    ) -> None:
        for name, value in (("hedge_delay", hedge_delay), ("min_delay", min_delay), ("initial_delay", initial_delay)):
            if value is not None and (not isinstance(value, (int, float)) or value < 0):
                raise ConfigurationError(f"HedgedStore({name}={value!r}): use a number of seconds >= 0")
        if not 0 < quantile <= 1:
            raise ConfigurationError(f"HedgedStore(quantile={quantile!r}): use a value in (0, 1]")
        if window < 1 or min_samples < 1:
            raise ConfigurationError(f"HedgedStore(window={window}, min_samples={min_samples}): use values >= 1")
        self._inner = inner
        self._fixed = hedge_delay
        self._min_delay = float(min_delay)
        self._initial_delay = float(initial_delay)
        self._quantile = quantile
        self._min_samples = min_samples
        self._latencies: deque[float] = deque(maxlen=window)
        self._reads = 0
        self._hedges = 0
        self._hedge_wins = 0

    def __repr__(self) -> str:
        return f"HedgedStore({self._inner!r})"

    @property
    def url(self) -> str:
        return self._inner.url

    @property
    def inner(self) -> Store:
        """The wrapped store."""
        return self._inner

    def local_path(self, key: str) -> Path | None:
        """The wrapped store's local file for ``key``, forwarded (``storage/_files.py``); ``None`` when the
        wrapped store keeps no local files. A local file is mapped or read directly, never hedged."""
        return local_path(self._inner, key)

    def delay(self) -> float:
        """The hedge delay now in force, in seconds."""
        if self._fixed is not None:
            return float(self._fixed)
        if len(self._latencies) < self._min_samples:
            return self._initial_delay
        ordered = sorted(self._latencies)
        index = max(0, math.ceil(self._quantile * len(ordered)) - 1)
        return max(self._min_delay, ordered[index])

    def statistics(self) -> HedgeStatistics:
        """Counters since this store was made."""
        return HedgeStatistics(self._reads, self._hedges, self._hedge_wins, self.delay())

    async def _hedged(self, read: Callable[[], Awaitable[T]]) -> T:
        """Run ``read``; if it has not answered after :meth:`delay` seconds run it again; first answer wins.

        A failure waits for the other attempt when one is in flight; ObjectNotFoundError does not (the
        object will not appear). With both failed, the first failure is raised.
        """
        if self._fixed == 0:  # hedging off
            value = await read()
            self._reads += 1
            return value
        delay = self.delay()
        results: list[T] = []
        errors: list[Exception] = []
        in_flight = 0

        async def attempt(index: int, scope: anyio.CancelScope) -> None:
            nonlocal in_flight
            if index:
                await anyio.sleep(delay)
                self._hedges += 1
            in_flight += 1
            started = anyio.current_time()
            try:
                value = await read()
            except Exception as exc:
                in_flight -= 1
                errors.append(exc)
                if in_flight == 0 or isinstance(exc, ObjectNotFoundError):
                    scope.cancel()
                return
            in_flight -= 1
            if not results:
                results.append(value)
                self._latencies.append(anyio.current_time() - started)
                self._hedge_wins += index
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt, 0, tg.cancel_scope)
            tg.start_soon(attempt, 1, tg.cancel_scope)
        if results:
            self._reads += 1
            return results[0]
        raise errors[0]

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        """See :meth:`litstream.Store.get_range`, hedged."""
        return await self._hedged(lambda: self._inner.get_range(path, start, length))

    async def get_range_versioned(
        self, path: str, start: int, length: int, version: str | None
    ) -> tuple[bytes, str | None] | None:
        """The inner store's ``get_range_versioned`` (``(bytes, None)`` from ``get_range`` without it), hedged."""
        inner = getattr(self._inner, "get_range_versioned", None)
        if inner is None:
            return await self.get_range(path, start, length), None
        return await self._hedged(lambda: inner(path, start, length, version))

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """See :meth:`litstream.Store.get_ranges`, hedged as one read."""
        return await self._hedged(lambda: self._inner.get_ranges(path, starts, lengths))

    async def get(self, path: str) -> bytes:
        """See :meth:`litstream.Store.get` (not hedged)."""
        return await self._inner.get(path)

    async def put(self, path: str, data: PutData) -> None:
        """See :meth:`litstream.Store.put` (not hedged)."""
        await self._inner.put(path, data)

    async def head(self, path: str) -> ObjectMeta:
        """See :meth:`litstream.Store.head` (not hedged)."""
        return await self._inner.head(path)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        """See :meth:`litstream.Store.list` (not hedged)."""
        return await self._inner.list(prefix)

    async def delete(self, path: str) -> None:
        """See :meth:`litstream.Store.delete` (not hedged)."""
        await self._inner.delete(path)
