"""A simulated object store: real bytes (or synthesised ones), modelled time, rate limits and faults.

Every request of every session goes through one :class:`Network` (the cluster-wide token bucket, the links of
the machines, the counters); each session reads through its own :class:`SimStore`, which knows its machine.
Time passes only through ``anyio.sleep``, so on the :class:`~litstream._sim._clock.VirtualClock` a request
costs virtual seconds and no real ones.

The real remote stores retry inside themselves (obstore in Rust, ``HTTPStore`` in its worker thread) by one
:class:`~litstream.storage._base.TransferConfig`: waits drawn uniformly below ``backoff(attempt)``, at most
``max_retries`` retries, none started after ``retry_timeout``, then
:class:`~litstream.RetriesExhaustedError`. :class:`SimStore` retries by the same rules and raises the same
error, so the engine above sees what it would see from a real store.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from .._core._errors import ObjectNotFoundError, StorageError
from ..storage._base import ObjectMeta, TransferConfig
from ..storage._faults import retries_exhausted

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..storage._base import PutData
    from ._config import NetworkModel
    from ._dataset import SimDataset

__all__ = ["Network", "NetworkStats", "SimStore"]


# Counters, alike in shape only to write/_summary.WorkerSummary's fields; nothing to share.
@dataclass
class NetworkStats:
    """What the store saw. ``events`` holds ``(end time, bytes, status)`` per answered request."""

    requests: int = 0
    ok: int = 0
    throttled: int = 0
    faults: int = 0
    retries: int = 0
    exhausted: int = 0
    bytes: int = 0
    events: list[tuple[float, int, int]] = field(default_factory=list)


class Network:
    """The shared part of the simulated store: the token bucket, each machine's link, faults, counters."""

    def __init__(self, model: NetworkModel, dataset: SimDataset, nodes: int) -> None:
        self.model = model
        self.dataset = dataset
        self.stats = NetworkStats()
        self.transfer = TransferConfig(
            max_retries=model.max_retries,
            retry_timeout=model.retry_timeout,
            backoff_initial=model.backoff_initial,
            backoff_max=model.backoff_max,
            backoff_base=model.backoff_base,
        )
        self._tokens = float(model.burst)
        self._filled_at = 0.0
        self._link_free = [0.0] * nodes

    def _admit(self, now: float) -> float | None:
        """Take a token; ``None`` if admitted, else the ``Retry-After`` seconds of the refusal."""
        rate = self.model.rate_limit
        if rate is None:
            return None
        self._tokens = min(float(self.model.burst), self._tokens + (now - self._filled_at) * rate)
        self._filled_at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return None
        return float(math.ceil((1 - self._tokens) / rate))

    def _outage(self, now: float) -> bool:
        return any(start <= now < end for start, end in self.model.outages)

    async def request(self, node: int, size: int, rng: random.Random) -> tuple[int, float | None]:
        """One attempt: wait the modelled time; the HTTP status (200, 429 or 503) and the ``Retry-After``.

        A 429/503 costs one round trip; a 200 costs the round trip and the transfer of ``size`` bytes at the
        lower of the connection's bandwidth and the machine's link (a FIFO queue shared by the machine).
        """
        m = self.model
        now = anyio.current_time()
        self.stats.requests += 1
        rtt = m.rtt * (math.exp(rng.gauss(0.0, m.jitter)) if m.jitter else 1.0)
        retry_after = self._admit(now)
        status = 200
        if retry_after is not None:
            status = m.throttle_status
            self.stats.throttled += 1
        elif self._outage(now) or (m.fault_rate and rng.random() < m.fault_rate):
            status = 503
            self.stats.faults += 1
        if status != 200:
            await anyio.sleep(rtt)
            self.stats.events.append((anyio.current_time(), 0, status))
            return status, retry_after
        start = now + rtt
        link_start = max(start, self._link_free[node])
        self._link_free[node] = link_start + size / m.node_bandwidth
        end = max(start + size / m.connection_bandwidth, self._link_free[node])
        await anyio.sleep(end - now)
        self.stats.ok += 1
        self.stats.bytes += size
        self.stats.events.append((anyio.current_time(), size, 200))
        return 200, None


class SimStore:
    """A read-only :class:`~litstream.Store` for one session (one DataLoader worker) on machine ``node``."""

    def __init__(self, network: Network, *, node: int, session: str, unpack_time_per_byte: float = 0.0) -> None:
        """A session's store; ``unpack_time_per_byte`` (seconds per byte of chunk content, default 0) is the
        virtual time a chunk's decompression and decryption take once its bytes have arrived."""
        self._network = network
        self._node = node
        self._session = session
        self._unpack_time_per_byte = unpack_time_per_byte
        self._count = 0
        self._connected = False

    def __repr__(self) -> str:
        return f"SimStore({self.url!r}, node={self._node}, session={self._session!r})"

    @property
    def url(self) -> str:
        """``sim://`` and the simulated dataset's URL."""
        return f"sim://{self._network.dataset.url}"

    async def _fetch(self, operation: str, path: str, size: int) -> None:
        """Retry one request until it is answered with 200, as the real stores' ``TransferConfig`` retries."""
        if not self._network.dataset.has(path):
            raise ObjectNotFoundError(f"{operation}: {self.url}/{path} does not exist")
        self._count += 1
        if not self._connected:  # a session's first request also opens its client's connection
            self._connected = True
            await anyio.sleep(self._network.model.connect_time)
        seed = f"{self._network.model.seed}:{self._session}:{self._count}:{path}"
        rng = random.Random(seed)
        t = self._network.transfer
        first = anyio.current_time()
        attempt = 0
        while True:
            status, retry_after = await self._network.request(self._node, size, rng)
            if status == 200:
                return
            elapsed = anyio.current_time() - first
            failure = StorageError(f"HTTP {status} from GET {self.url}/{path}")
            if attempt >= t.max_retries or elapsed >= t.retry_timeout:
                self._network.stats.exhausted += 1
                if attempt == 0:
                    raise failure
                raise retries_exhausted(operation, f"{self.url}/{path}", attempt + 1, elapsed, str(failure))
            wait = rng.uniform(0, t.backoff(attempt))
            if retry_after is not None and self._network.model.honor_retry_after:
                wait = max(wait, retry_after)
            self._network.stats.retries += 1
            await anyio.sleep(wait)
            attempt += 1

    async def _unpack(self, path: str, fetched: int) -> None:
        """The engine's decompression (and decryption) of what a GET of ``path`` brought: a chunk's whole
        content for a whole GET, the same share of it for a ranged one. It runs where the engine runs it, in
        the fetch, so it overlaps the session's other fetches and its samples being served."""
        if self._unpack_time_per_byte <= 0:
            return
        content = self._network.dataset.content_size(path)
        wire = self._network.dataset.wire_size(path)
        if content and wire:
            await anyio.sleep(self._unpack_time_per_byte * content * min(1.0, fetched / wire))

    async def get(self, path: str) -> bytes:
        """See :meth:`litstream.Store.get`."""
        size = self._network.dataset.wire_size(path)
        await self._fetch("get", path, size)
        await self._unpack(path, size)
        return self._network.dataset.body(path)

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        """See :meth:`litstream.Store.get_range`."""
        await self._fetch("get_range", path, max(0, length))
        await self._unpack(path, max(0, length))
        return self._network.dataset.body(path)[start : start + max(0, length)]

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """See :meth:`litstream.Store.get_ranges` (one request per range, one after the other)."""
        if len(starts) != len(lengths):
            raise ValueError(f"get_ranges: {len(starts)} starts but {len(lengths)} lengths")
        return [await self.get_range(path, s, n) for s, n in zip(starts, lengths, strict=True)]

    async def head(self, path: str) -> ObjectMeta:
        """See :meth:`litstream.Store.head` (one round trip)."""
        await self._fetch("head", path, 0)
        return ObjectMeta(path, len(self._network.dataset.body(path)))

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        """Only ``index.json`` is listed: the simulated readers need nothing else."""
        if not "index.json".startswith(prefix):
            return []
        return [ObjectMeta("index.json", len(self._network.dataset.index_bytes))]

    async def put(self, path: str, data: PutData) -> None:
        """Not supported. Raises: StorageError: always (the simulated store is read-only)."""
        raise StorageError(f"put is not supported: {self.url} is a simulated, read-only store")

    async def delete(self, path: str) -> None:
        """Not supported. Raises: StorageError: always (the simulated store is read-only)."""
        raise StorageError(f"delete is not supported: {self.url} is a simulated, read-only store")
