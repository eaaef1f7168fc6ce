"""The fetch engine behind ``StreamingRawDataset``: many whole-object GETs, fast and within bounds.

One :class:`RawFetcher` per process fetches whole objects (raw files) from a :class:`~litstream.Store`::

    fetch_many(keys, sizes) ─▶ one task per object ─▶ ByteBudget.hold(size)     memory bound
                                                    └▶ adaptive limiter          requests in flight (AIMD)
                                                        └▶ deadline per request  retried on expiry/failure
                                                            ├▶ hedge after delay  first answer wins
                                                            └▶ ranged parts       objects >= threshold

* **Adaptive concurrency** (``max_concurrent_downloads=None``): the in-flight limit starts at 128 and is
  re-judged once per "round" (as many completions as the limit): it grows by a quarter while the round's
  throughput (bytes/s) beats the previous round by 5 %, holds otherwise, and halves on any failed request
  (throttling, 5xx, dropped connections, expired deadlines). A fixed int pins it.
* **Hedging** (``hedge_delay > 0``): an object below 8 MiB that has not answered after
  ``max(hedge_delay, p95 of recent latencies)`` seconds is asked for again, if a request slot is free;
  the first answer wins and the other request is cancelled.
* **Deadlines** (``download_timeout > 0``): each request may take ``max(download_timeout, 3 * size /
  25 MiB/s)`` seconds; an expired request counts as a failure and is retried.
* **Ranged GETs** (``range_parallel_threshold > 0``): objects of at least that many bytes are read as
  ``range_chunk_size`` parts in parallel, each under the same limiter, and their lengths checked.
* **Retries are ours.** A remote store retries failed requests inside its client (obstore does it in
  Rust, with no callback), which would hide every throttled (429) or failed (5xx) try from the limit and
  from :meth:`RawFetcher.statistics`. So GETs go through the store's ``without_retries()`` twin (one try
  per request) and this loop retries them, by the store's own budget (``storage_options``' ``max_retries``,
  ``retry_timeout`` and backoff: :class:`~litstream.storage._base.TransferConfig`): every failed try
  halves the adaptive limit and counts in ``failures``. A store without that capability (local files, a
  store passed in) is tried :data:`_ATTEMPTS` times.

Every anyio primitive belongs to one event loop; the fetcher remakes them when the loop changes (a
dataset's fetcher is used by successive portals). Counters survive.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from ..._core._errors import ObjectNotFoundError, RetriesExhaustedError, StorageError
from ...storage._budget import ByteBudget
from ...storage._safe_files import UnsafeFileError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ...storage._base import Store, TransferConfig

__all__ = ["FetchConfig", "FetchStatistics", "RawFetcher"]

MiB = 1024 * 1024
_HEDGE_MAX_BYTES = 8 * MiB
_ASSUMED_STREAM_BPS = 25 * MiB  # LitData's per-stream floor for size-aware deadlines
_INITIAL_LIMIT = 128  # LitData's static choice for small objects in one process (its Little's-law arm, capped)
_MAX_LIMIT = 512
_ATTEMPTS = 4


@dataclass(frozen=True)
class FetchConfig:
    """How a :class:`RawFetcher` fetches (see the module docstring). Sizes in bytes, times in seconds.

    Attributes:
        max_concurrent_downloads: A fixed number of requests in flight (values < 1 mean 1), or ``None``
            (default) for the adaptive limit.
        hedge_delay: The least delay before a duplicate request; ``0`` turns hedging off (LitData's default).
        download_timeout: The deadline floor of one request; ``0`` turns deadlines off. Default 120.
        range_parallel_threshold: Objects of at least this size are read in parallel ranges; ``0`` (default)
            never.
        range_chunk_size: Bytes per ranged part. Default 8 MiB.
        max_bytes: Bytes of object data held in flight at once (the byte budget). Default 512 MiB.
    """

    max_concurrent_downloads: int | None = None
    hedge_delay: float = 0.0
    download_timeout: float = 120.0
    range_parallel_threshold: int = 0
    range_chunk_size: int = 8 * MiB
    max_bytes: int = 512 * MiB


@dataclass(frozen=True)
class FetchStatistics:
    """Counters of a :class:`RawFetcher` in this process (``StreamingRawDataset.statistics()``).

    Attributes:
        in_flight: Requests in flight now.
        concurrency: The current limit on requests in flight (adaptive unless fixed).
        requests: Requests answered (ranged parts and hedges count one each).
        objects: Whole objects delivered.
        bytes: Bytes of object data delivered.
        retries: Requests sent again after a failure or an expired deadline.
        hedges: Duplicate requests sent because the first was slow.
        hedges_won: Objects the duplicate delivered first.
        ranged: Objects read as parallel ranges.
        failures: Failed requests (each halves the adaptive limit).
        budget_used: Bytes of the byte budget held now.
        max_in_flight: The most requests that were in flight at once (never above the limit).
        ahead: Items fetched by look-ahead, before they were asked for.
    """

    in_flight: int
    concurrency: int
    requests: int
    objects: int
    bytes: int
    retries: int
    hedges: int
    hedges_won: int
    ranged: int
    failures: int
    budget_used: int
    max_in_flight: int = 0
    ahead: int = 0


class _LoopParts:
    """The anyio primitives of one event loop."""

    def __init__(self, token: object, limit: int, max_bytes: int) -> None:
        self.token = token
        self.limiter = anyio.CapacityLimiter(limit)
        self.budget = ByteBudget(max_bytes)


class RawFetcher:
    """Fetches whole objects from one store under a byte budget and an adaptive request limit.

    Args:
        store: Where the objects live.
        config: How to fetch (see :class:`FetchConfig`).
        remote: Whether hedging and ranged reads apply (they never do for local files).
    """

    def __init__(self, store: Store, config: FetchConfig, *, remote: bool) -> None:
        self.store = store
        self.config = config
        self.remote = remote
        quiet = getattr(store, "without_retries", None)
        transfer = getattr(store, "transfer", None)
        # Remote GETs are tried once by the store and retried here, where each failure is seen (see above).
        self._get_store: Store = quiet() if remote and callable(quiet) and transfer is not None else store
        self._transfer: TransferConfig | None = transfer if self._get_store is not store else None
        fixed = config.max_concurrent_downloads
        self._fixed = None if fixed is None else max(1, int(fixed))
        self._limit = self._fixed or _INITIAL_LIMIT
        self._parts: _LoopParts | None = None
        self._latencies: deque[float] = deque(maxlen=256)
        # adaptive rounds
        self._round_done = 0
        self._round_bytes = 0
        self._round_start = 0.0
        self._last_rate = 0.0
        # counters
        self._in_flight = 0
        self._requests = 0
        self._objects = 0
        self._bytes = 0
        self._retries = 0
        self._hedges = 0
        self._hedges_won = 0
        self._ranged_count = 0
        self._failures = 0
        self._max_in_flight = 0
        self.ahead = 0  # items fetched by look-ahead (RawReader counts them)

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_parts"] = None
        return state

    def statistics(self) -> FetchStatistics:
        """Counters since this fetcher was made (in this process)."""
        used = self._parts.budget.used if self._parts is not None else 0
        return FetchStatistics(
            self._in_flight, self._limit, self._requests, self._objects, self._bytes, self._retries,
            self._hedges, self._hedges_won, self._ranged_count, self._failures, used, self._max_in_flight,
            self.ahead,
        )  # fmt: skip

    def _loop_parts(self) -> _LoopParts:
        token = anyio.lowlevel.current_token()
        if self._parts is None or self._parts.token != token:
            self._parts = _LoopParts(token, self._limit, self.config.max_bytes)
        return self._parts

    # -- adaptive limit -------------------------------------------------------------------------

    def _set_limit(self, value: int) -> None:
        self._limit = max(1, min(_MAX_LIMIT, value))
        if self._parts is not None:
            self._parts.limiter.total_tokens = self._limit

    def _on_success(self, nbytes: int, latency: float) -> None:
        self._requests += 1
        self._latencies.append(latency)
        if self._fixed is not None:
            return
        now = anyio.current_time()
        if self._round_done == 0:
            self._round_start = now - latency
        self._round_done += 1
        self._round_bytes += nbytes
        if self._round_done < self._limit:
            return
        elapsed = max(now - self._round_start, 1e-6)
        rate = self._round_bytes / elapsed
        if rate > self._last_rate * 1.05:
            self._set_limit(self._limit + max(1, self._limit // 4))
        self._last_rate = rate
        self._round_done = self._round_bytes = 0

    def _on_failure(self) -> None:
        self._failures += 1
        if self._fixed is None:
            self._set_limit(self._limit // 2)
            self._last_rate = 0.0
            self._round_done = self._round_bytes = 0

    def _hedge_delay(self) -> float:
        if not self._latencies:
            return self.config.hedge_delay
        ordered = sorted(self._latencies)
        p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
        return max(self.config.hedge_delay, p95)

    def _deadline(self, size: int) -> float:
        if self.config.download_timeout <= 0:
            return math.inf
        return max(self.config.download_timeout, 3.0 * size / _ASSUMED_STREAM_BPS)

    # -- requests -------------------------------------------------------------------------------

    def _retry_wait(self, attempt: int, elapsed: float) -> float | None:
        """Seconds to wait before retry ``attempt + 1`` after ``elapsed`` s, or ``None`` when the budget is spent."""
        t = self._transfer
        if t is None:
            return None if attempt + 1 >= _ATTEMPTS else min(2.0, 0.1 * 3**attempt)
        if attempt >= t.max_retries or elapsed >= t.retry_timeout:
            return None
        return random.uniform(0, t.backoff(attempt))

    async def _request(self, key: str, start: int | None, length: int) -> bytes:
        """One GET (or ranged GET) under the limiter and a deadline; failures are retried with backoff."""
        parts = self._loop_parts()
        store = self._get_store
        first = anyio.current_time()
        attempt = 0
        while True:
            borrower = object()
            try:  # a free slot is taken without a trip through the event loop (many small GETs)
                parts.limiter.acquire_on_behalf_of_nowait(borrower)
            except anyio.WouldBlock:
                await parts.limiter.acquire_on_behalf_of(borrower)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            started = anyio.current_time()
            try:
                with anyio.fail_after(self._deadline(length)):
                    if start is None:
                        data = await store.get(key)
                    else:
                        data = await store.get_range(key, start, length)
            except (ObjectNotFoundError, RetriesExhaustedError, UnsafeFileError):  # not transient
                self._failures += 1
                raise
            except (StorageError, TimeoutError) as exc:
                self._on_failure()
                elapsed = anyio.current_time() - first
                wait = self._retry_wait(attempt, elapsed)
                if wait is None:
                    raise RetriesExhaustedError(
                        f"GET {self.store.url}/{key} failed {attempt + 1} times in {elapsed:.1f} s; last error: "
                        f"{exc}; raise download_timeout or storage_options={{'retry_timeout': <seconds>, "
                        "'max_retries': <n>}, or check that the server is up"
                    ) from exc
                self._retries += 1
            else:
                self._on_success(len(data), anyio.current_time() - started)
                return data
            finally:
                self._in_flight -= 1
                parts.limiter.release_on_behalf_of(borrower)
            await anyio.sleep(wait)
            attempt += 1

    async def _hedged(self, key: str, size: int) -> bytes:
        """The whole object; a duplicate request after the hedge delay when a request slot is free."""
        delay = self._hedge_delay()
        results: list[bytes] = []
        errors: list[BaseException] = []

        async def attempt(index: int, scope: anyio.CancelScope) -> None:
            if index:
                await anyio.sleep(delay)
                if self._loop_parts().limiter.available_tokens < 1:
                    return
                self._hedges += 1
            try:
                value = await self._request(key, None, size)
            except Exception as exc:  # the other attempt may still answer
                errors.append(exc)
                if index == 0 or isinstance(exc, ObjectNotFoundError):
                    scope.cancel()
                return
            if not results:
                results.append(value)
                self._hedges_won += index
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt, 0, tg.cancel_scope)
            tg.start_soon(attempt, 1, tg.cancel_scope)
        if results:
            return results[0]
        raise errors[0]

    async def _ranged(self, key: str, size: int) -> bytes:
        step = max(1, self.config.range_chunk_size)
        starts = list(range(0, size, step))
        out: list[bytes] = [b""] * len(starts)

        async def part(i: int) -> None:
            length = min(step, size - starts[i])
            data = await self._request(key, starts[i], length)
            if len(data) != length:
                raise StorageError(
                    f"{self.store.url}/{key}: range {starts[i]}+{length} returned {len(data)} bytes; the object "
                    "changed or is shorter than its listed size; rebuild the index (recompute_index=True)"
                )
            out[i] = data

        async with anyio.create_task_group() as tg:
            for i in range(len(starts)):
                tg.start_soon(part, i)
        self._ranged_count += 1
        return b"".join(out)

    async def fetch(self, key: str, size: int) -> bytes:
        """The whole object ``key`` (``size`` from the listing, used for budgets, deadlines and ranges).

        Raises:
            ObjectNotFoundError: the object is gone.
            RetriesExhaustedError: it kept failing or timing out.
        """
        async with self._loop_parts().budget.hold(max(size, 1)):
            return await self._fetch_held(key, size)

    async def _fetch_held(self, key: str, size: int) -> bytes:
        """:meth:`fetch` once its bytes are held in the budget."""
        threshold = self.config.range_parallel_threshold
        if self.remote and threshold > 0 and size >= threshold and size > self.config.range_chunk_size:
            data = await self._ranged(key, size)
        elif self.remote and self.config.hedge_delay > 0 and size < _HEDGE_MAX_BYTES:
            data = await self._hedged(key, size)
        else:
            data = await self._request(key, None, size)
        self._objects += 1
        self._bytes += len(data)
        return data

    async def fetch_many(self, keys: Sequence[str], sizes: Sequence[int]) -> list[bytes]:
        """Every object of ``keys``, concurrently, in the order given (largest started first).

        A group that fits the byte budget holds it once, as a whole (one wait instead of one per object);
        a larger group holds it object by object.
        """
        out: list[bytes] = [b""] * len(keys)
        budget = self._loop_parts().budget
        total = sum(max(size, 1) for size in sizes)
        whole = total <= budget.total
        fetch = self._fetch_held if whole else self.fetch

        async def one(i: int) -> None:
            out[i] = await fetch(keys[i], sizes[i])

        order = sorted(range(len(keys)), key=lambda i: -sizes[i])
        async with contextlib.AsyncExitStack() as stack:
            if whole:
                await stack.enter_async_context(budget.hold(total))
            async with anyio.create_task_group() as tg:
                for i in order:
                    tg.start_soon(one, i)
        return out
