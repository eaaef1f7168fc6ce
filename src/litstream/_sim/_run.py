"""Run the real read engine for a whole simulated cluster, in one process, on the virtual clock (trio).

Each DataLoader worker of each rank is one real read session with its own read plan (``ReadPlanArgs`` with its
rank, worker, worker count and machine count), reading from its own :class:`~litstream._sim._store.SimStore`:
what ``astream``'s ``SampleStream`` runs inside (``ReadSpec.open``, ``plan_pieces``, ``produce_chunks``), chunk
by chunk. A worker counts each chunk's samples into batches (decoding costs no virtual time, so samples are
decoded only to record ``record_key``), spends the modelled decode time (a virtual sleep) and hands each batch
to its rank through a queue of ``prefetch_factor`` batches; the rank takes batches from its workers in turn (as
``DataLoader`` does), waits when none is ready (the device stalls) and spends the device time per sample (a
virtual sleep).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._core._errors import ConfigurationError, raise_collapsed
from ..format._loaders import TokensLoader
from ..read._spec import ReadSpec
from ..read.engine._decode import work_batches
from ..read.engine._engine import ChunkWork, produce_chunks
from ..read.plan._pieces import ReadPlanArgs, plan_pieces
from ._clock import VirtualClock
from ._store import Network, NetworkStats, SimStore

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import ObjectReceiveStream, ObjectSendStream
    from anyio.streams.memory import MemoryObjectReceiveStream

    from ..read.source._source import DatasetSource
    from ._config import SimulationConfig
    from ._dataset import SimDataset

__all__ = ["RankTimeline", "RunResult", "run_cluster"]


@dataclass
class RankTimeline:
    """One rank's batches: when each arrived (virtual seconds), how long the device waited for it, its size."""

    rank: int
    node: int
    arrivals: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    order: list[Any] = field(default_factory=list)
    end: float = 0.0


@dataclass
class RunResult:
    """What :func:`run_cluster` measured: the timelines, the store's counters, the virtual and real seconds."""

    ranks: list[RankTimeline]
    network: NetworkStats
    virtual_seconds: float
    real_seconds: float


def _keys_of(source: DatasetSource, work: ChunkWork, key: str) -> list[Any]:
    """``record_key`` of each sample of ``work``, decoded as ``SampleStream`` decodes them (no transform)."""
    return [sample[key] for batch in work_batches(source, work, None) for sample in batch]


class _Cluster:
    def __init__(self, config: SimulationConfig, dataset: SimDataset) -> None:
        self.config = config
        self.stop: Callable[[], None] | None = None  # set: called once a rank has its first batch
        self.dataset = dataset
        cluster = config.cluster
        self.world_size = cluster.nodes * cluster.ranks_per_node
        self.workers = max(1, cluster.num_workers)
        self.network = Network(config.network, dataset, cluster.nodes)
        drop_last = config.read.drop_last
        self.drop_last = self.world_size > 1 if drop_last is None else drop_last  # StreamingDataset's default
        self.ahead = config.read.max_pre_download
        if dataset.remote:  # as StreamingDataset: remote chunks at least 4 ahead
            from ..read.engine._memory import REMOTE_MIN_PRE_DOWNLOAD

            self.ahead = max(self.ahead, REMOTE_MIN_PRE_DOWNLOAD)
        block = config.read.block_size
        self.item_loader = TokensLoader(block_size=block) if block is not None else None

    def spec_and_plan(self, rank: int, worker: int, epoch: int) -> tuple[ReadSpec, ReadPlanArgs]:
        """The spec a real reader of this session's simulated store would open, and its read plan."""
        read = self.config.read
        node = rank // self.config.cluster.ranks_per_node
        store = SimStore(
            self.network,
            node=node,
            session=f"{epoch}/{rank}/{worker}",
            unpack_time_per_byte=self.config.costs.decode_time_per_byte,
        )
        # The spec a real reader of this store would open (read/_spec.py); the simulated store is its location, and
        # its plan is the spec's own (every order argument as StreamingDataset resolves it, item_shuffle_window too).
        spec = ReadSpec.build(
            store, item_loader=self.item_loader, max_pre_download=self.ahead, shuffle=read.shuffle, seed=read.seed,
            drop_last=self.drop_last, eager=False, cache_by_default=False,
        ).replace(plan_cache_bytes=read.max_cache_size)  # fmt: skip
        plan = spec.plan_args(
            rank=rank, world_size=self.world_size, worker=worker, num_workers=self.workers,
            batch_size=read.batch_size, epoch=epoch, num_nodes=self.config.cluster.nodes,
        )  # fmt: skip
        return spec, plan

    async def chunks(
        self, rank: int, worker: int, epoch: int, send: ObjectSendStream[tuple[int, list[Any] | None]]
    ) -> None:
        """The engine's read session, chunk by chunk: what ``astream``'s ``SampleStream`` runs inside (open the
        dataset, plan this reader's pieces, fetch their chunks in order with ``max_pre_download`` ahead); each
        message is a chunk's count of samples, with the recorded keys when ``record_key`` is set (then its
        samples are decoded as ``SampleStream`` decodes them, in a thread). Decoding costs no virtual time, so
        without ``record_key`` nothing is decoded: the modelled costs stand for it."""
        spec, plan = self.spec_and_plan(rank, worker, epoch)
        source = await spec.open()
        pieces = plan_pieces(source, plan, spec.select(source.chunk_sizes))
        key = self.config.record_key
        works, receive = anyio.create_memory_object_stream[ChunkWork](1)
        try:
            async with send, receive, anyio.create_task_group() as tg:
                tg.start_soon(lambda: produce_chunks(source, pieces, works, max_pre_download=self.ahead))
                async for work in receive:
                    keys = None
                    if key is not None:
                        keys = await anyio.to_thread.run_sync(_keys_of, source, work, key)
                    await send.send((len(work.items), keys))
        finally:
            works.close()  # produce_chunks closes it, unless it was cancelled before it started

    def cpu_per_sample(self) -> float:
        """Seconds to decode and collate one sample (by a worker; by the rank itself with ``num_workers=0``).
        A chunk's decompression is not in it: the simulated store charges it per chunk, in the fetch."""
        costs = self.config.costs
        return costs.decode_time_per_sample + costs.collate_time_per_sample

    async def worker(self, rank: int, worker: int, epoch: int, send: ObjectSendStream[list[Any]]) -> None:
        size = self.config.read.batch_size
        in_process = self.config.cluster.num_workers == 0
        per_sample = 0.0 if in_process else self.cpu_per_sample()  # the rank spends it (see _consume)
        costs = self.config.costs
        if not in_process:
            await anyio.sleep(costs.worker_startup_time)
        await anyio.sleep(costs.open_time)
        chunks, receive = anyio.create_memory_object_stream[tuple[int, list[Any] | None]](0)
        recording = self.config.record_key is not None
        try:
            async with send, receive, anyio.create_task_group() as tg:
                tg.start_soon(self.chunks, rank, worker, epoch, chunks)
                pending = 0  # samples of the batch being filled
                keys: list[Any] = []
                async for count, chunk_keys in receive:
                    keys.extend(chunk_keys or ())
                    pending += count
                    while pending >= size:  # a whole batch per step: no work per sample
                        pending -= size
                        await anyio.sleep(per_sample * size)
                        await send.send(keys[:size] if recording else [None] * size)
                        del keys[:size]
                if pending and not self.drop_last:
                    await anyio.sleep(per_sample * pending)
                    await send.send(keys if recording else [None] * pending)
        finally:
            chunks.close()  # self.chunks closes it, unless it was cancelled before it started

    async def _consume(self, timeline: RankTimeline, queues: list[ObjectReceiveStream[list[Any]]]) -> None:
        """Take batches from the workers in turn (as DataLoader does) until all are done; train on each."""
        step = self.config.costs.device_time_per_sample
        if self.config.cluster.num_workers == 0:  # no worker processes: the rank decodes and collates too
            step += self.cpu_per_sample()
        turn = 0
        while queues:
            queue = queues[turn % len(queues)]
            asked = anyio.current_time()
            try:
                batch = await queue.receive()
            except anyio.EndOfStream:
                queues.remove(queue)
                continue
            now = anyio.current_time()
            timeline.arrivals.append(now)
            timeline.waits.append(now - asked)
            timeline.sizes.append(len(batch))
            if self.config.record_key is not None:
                timeline.order.extend(batch)
            if self.stop is not None:
                self.stop()
                return
            turn += 1
            await anyio.sleep(step * len(batch))

    async def rank(self, timeline: RankTimeline) -> None:
        prefetch = self.config.cluster.prefetch_factor
        await anyio.sleep(self.config.costs.startup_time)
        for epoch in range(1, self.config.read.epochs + 1):
            receives: list[MemoryObjectReceiveStream[list[Any]]] = []
            try:
                async with anyio.create_task_group() as tg:
                    for worker in range(self.workers):
                        send, receive = anyio.create_memory_object_stream[list[Any]](prefetch)
                        receives.append(receive)
                        tg.start_soon(self.worker, timeline.rank, worker, epoch, send)
                    await self._consume(timeline, list(receives))
            finally:
                for receive in receives:
                    receive.close()
        timeline.end = anyio.current_time()


def run_cluster(config: SimulationConfig, dataset: SimDataset, *, first_batch_only: bool = False) -> RunResult:
    """Simulate every rank and worker of ``config`` over ``dataset`` on a fresh trio loop with a virtual clock.

    ``first_batch_only``: stop once a rank has its first batch (what ``calibrate`` needs).

    Raises:
        ConfigurationError: called from a running event loop (run it in a thread then), or a bad setting the
            engine refused (its message names it).
        StorageError: the simulated store's retries were spent (e.g. a long outage).
    """
    cluster = _Cluster(config, dataset)
    timelines = [RankTimeline(rank, rank // config.cluster.ranks_per_node) for rank in range(cluster.world_size)]
    clock = VirtualClock()

    async def main() -> None:
        clock.watch_threads(anyio.to_thread.current_default_thread_limiter())
        async with anyio.create_task_group() as tg:
            if first_batch_only:
                cluster.stop = tg.cancel_scope.cancel
            for timeline in timelines:
                tg.start_soon(cluster.rank, timeline)

    started = time.perf_counter()
    try:
        anyio.run(main, backend="trio", backend_options={"clock": clock})
    except BaseExceptionGroup as group:
        raise_collapsed(group)
    except RuntimeError as exc:
        if "already running" in str(exc):
            raise ConfigurationError(
                "simulate() runs its own trio event loop: call it from synchronous code (or from a worker "
                "thread, e.g. anyio.to_thread.run_sync)"
            ) from exc
        raise
    return RunResult(timelines, cluster.network.stats, clock.current_time(), time.perf_counter() - started)
