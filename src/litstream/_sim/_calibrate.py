"""``litstream simulate calibrate``: measure a dataset's CPU costs (and, optionally, its store) on this machine.

A few real chunks are read through the real store, on the real clock:

* ``decode_time_per_byte``: seconds to decompress (and decrypt) one byte of chunk content, from timing the
  engine's own decompression of each chunk's fetched bytes (0 for an uncompressed, unencrypted dataset);
* ``decode_time_per_sample``: seconds to deserialise one sample, from timing the engine's decoder over every
  item of those chunks;
* ``collate_time_per_sample``: seconds to collate decoded samples into a batch (``config.read.batch_size``),
  with the collate function ``StreamingDataLoader`` uses;
* with ``network=True``: ``rtt`` (median seconds of a one-byte range read), ``connection_bandwidth`` (bytes
  per second of the whole-chunk reads once their round trip is taken off) and ``connect_time`` (how much longer
  a new client's first request takes than its round trip and transfer);
* with ``startup=True`` (needs torch; runs ``3 * probes`` fresh interpreters with the config's read settings,
  the fastest of each kind counting): ``open_time`` (opening the dataset, planning the epoch and starting the
  iterator's event loop, as one read session does, less its index request as the model charges it), then
  ``startup_time`` and ``worker_startup_time``: what a simulation of one rank, on the measured network and
  costs and stopped at its first batch, does not explain of the first batch of a fresh ``StreamingDataLoader``
  with no worker, and then of one with the config's ``num_workers``.

The device's time per sample is the user's to give: nothing here trains.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .._core._errors import ConfigurationError, StorageError
from ..format._index import INDEX_FILENAME
from ..read.source._source import DatasetSource
from ..storage._resolver import store_for

if TYPE_CHECKING:
    from ._config import SimulationConfig
    from ._dataset import SimDataset

__all__ = ["Calibration", "measure_costs"]

_RTT_PROBES = 9


@dataclass(frozen=True)
class Calibration:
    """What :func:`measure_costs` measured.

    Attributes:
        decode_time_per_byte: Seconds per byte of (decompressed) chunk content to decompress/decrypt it.
        decode_time_per_sample: Seconds to deserialise one sample.
        collate_time_per_sample: Seconds to collate one sample.
        startup_time, worker_startup_time, open_time: Seconds (``None`` unless ``startup=True``).
        rtt: Median seconds of a one-byte read (``None`` unless the network was measured).
        connection_bandwidth: Bytes per second of one whole-chunk read (``None`` unless measured).
        connect_time: Extra seconds of a new client's first request (``None`` unless measured).
        chunks: Chunks read. samples: Samples decoded. content_bytes: Decompressed bytes of those chunks.
    """

    decode_time_per_byte: float
    decode_time_per_sample: float
    collate_time_per_sample: float
    startup_time: float | None
    worker_startup_time: float | None
    rtt: float | None
    connection_bandwidth: float | None
    chunks: int
    samples: int
    content_bytes: int
    open_time: float | None = None
    connect_time: float | None = None

    def costs(self) -> dict[str, float]:
        """The ``costs`` section's measured keys."""
        out = {
            "decode_time_per_byte": self.decode_time_per_byte,
            "decode_time_per_sample": self.decode_time_per_sample,
            "collate_time_per_sample": self.collate_time_per_sample,
        }
        if self.startup_time is not None and self.worker_startup_time is not None and self.open_time is not None:
            out["startup_time"] = self.startup_time
            out["worker_startup_time"] = self.worker_startup_time
            out["open_time"] = self.open_time
        return out

    def network(self) -> dict[str, float]:
        """The ``network`` section's measured keys (empty if not measured)."""
        if self.rtt is None or self.connection_bandwidth is None:
            return {}
        out = {"rtt": self.rtt, "connection_bandwidth": self.connection_bandwidth}
        if self.connect_time is not None:
            out["connect_time"] = self.connect_time
        return out


def _collate_fn() -> Any:
    """``StreamingDataLoader``'s collate function, or ``None`` without torch."""
    try:
        from .._torch._collate import litdata_collate
    except ImportError:  # pragma: no cover - torch missing
        return None
    return litdata_collate


_PROBE = """
import json, multiprocessing, sys, time
spec = json.loads(sys.stdin.read())
import litstream
loader = litstream.TokensLoader(spec["block"]) if spec["block"] else None
ds = litstream.StreamingDataset(spec["dataset"], storage_options=spec["options"] or None, item_loader=loader,
                                shuffle=spec["shuffle"], seed=spec["seed"], drop_last=spec["drop_last"],
                                max_pre_download=spec["ahead"])
Loader = litstream.StreamingDataLoader  # imports torch, as a training script has before it iterates
if spec["kind"] == "open":  # what one read session does before its first chunk request, timed alone
    from litstream._core import _bridge
    from litstream._core._distributed import detect_worker
    t1 = time.perf_counter()
    reader = ds._open_reader()
    reader.source()
    reader.ensure_shuffler()
    reader.open_epoch(detect_worker())
    with _bridge.daemon_portal():
        pass
    print(json.dumps({"seconds": time.perf_counter() - t1, "workers_running": 0}))
else:
    extra = {"prefetch_factor": spec["prefetch"]} if spec["workers"] else {}
    loader = Loader(ds, batch_size=spec["batch"], num_workers=spec["workers"], **extra)
    t1 = time.perf_counter()
    batches = iter(loader)  # held: a dropped iterator would join its workers before the clock is read
    next(batches)
    seconds = time.perf_counter() - t1
    running = sum(p.is_alive() for p in multiprocessing.active_children())
    print(json.dumps({"seconds": seconds, "workers_running": running}))
    del batches
"""


def _probe(config: SimulationConfig, kind: str, workers: int = 0) -> dict[str, float]:
    """One probe in a fresh interpreter: ``kind="loader"``, the first batch of a ``StreamingDataLoader`` with
    ``workers`` workers and the config's read settings; ``kind="open"``, opening the dataset, planning the
    epoch and starting the iterator's event loop, as one read session does.

    Returns:
        ``seconds`` (what was timed) and ``workers_running`` (the probe's worker processes still alive when
        the clock was read: the loader's, as the first batch of a training run has them).

    Raises:
        StorageError: the probe failed (its last error lines are in the message).
    """
    import json
    import subprocess
    import sys

    r = config.read
    spec = {"dataset": config.dataset, "options": config.storage_options, "batch": r.batch_size, "kind": kind}
    spec.update(workers=workers, block=r.block_size, shuffle=r.shuffle, seed=r.seed, drop_last=r.drop_last)
    spec.update(ahead=r.max_pre_download, prefetch=config.cluster.prefetch_factor)
    # credentials go through stdin, never the command line
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], input=json.dumps(spec), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise StorageError(f"simulate calibrate: the start-up probe failed: {done.stderr.strip()[-500:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"seconds": float(result["seconds"]), "workers_running": float(result["workers_running"])}


async def _fastest(config: SimulationConfig, kind: str, probes: int, workers: int = 0) -> float:
    """The fastest of ``probes`` probes (a slower one mostly measures the machine's other load)."""
    return min([(await anyio.to_thread.run_sync(_probe, config, kind, workers))["seconds"] for _ in range(probes)])


def _simulated_first_batch(config: SimulationConfig, dataset: SimDataset) -> float:
    """The first batch of one rank of ``config``, as the simulation predicts it (it stops there)."""
    from ._run import run_cluster

    one = dataclasses.replace(
        config,
        cluster=dataclasses.replace(config.cluster, nodes=1, ranks_per_node=1),
        read=dataclasses.replace(config.read, epochs=1),
        network=dataclasses.replace(config.network, jitter=0.0, fault_rate=0.0, outages=(), rate_limit=None),
        record_key=None,
    )
    arrivals = run_cluster(one, dataset, first_batch_only=True).ranks[0].arrivals
    return arrivals[0] if arrivals else 0.0


async def _startup(
    config: SimulationConfig, costs: dict[str, float], network: dict[str, Any], index_seconds: float, probes: int
) -> dict[str, float]:
    """``open_time``, ``startup_time`` and ``worker_startup_time``: see the module's docstring."""
    from ._dataset import prepare_dataset

    opened = await _fastest(config, "open", probes)
    workers = config.cluster.num_workers
    in_process = await _fastest(config, "loader", probes, 0)
    with_workers = await _fastest(config, "loader", probes, workers) if workers else in_process
    # the session's open, less its index request as the model charges it (its first: it opens the connection)
    out = {"open_time": max(0.0, opened - index_seconds)}
    model = dataclasses.replace(
        config,
        costs=dataclasses.replace(config.costs, **costs, **out, startup_time=0.0, worker_startup_time=0.0),
        network=dataclasses.replace(config.network, **network),
    )
    dataset = await prepare_dataset(model)  # the config's own chunks (a remote "read" dataset is fetched)
    no_workers = dataclasses.replace(model, cluster=dataclasses.replace(model.cluster, num_workers=0))
    # what the model does not explain of the measured first batches: the rank's set-up, then a worker's start
    simulated = await anyio.to_thread.run_sync(_simulated_first_batch, no_workers, dataset)
    out["startup_time"] = max(0.0, in_process - simulated)
    if workers:
        model = dataclasses.replace(model, costs=dataclasses.replace(model.costs, startup_time=out["startup_time"]))
        simulated = await anyio.to_thread.run_sync(_simulated_first_batch, model, dataset)
        out["worker_startup_time"] = max(0.0, with_workers - simulated)
    else:
        out["worker_startup_time"] = config.costs.worker_startup_time
    return out


def _unpack(source: DatasetSource, raw: bytes, chunk: int) -> Any:
    """Decompress/decrypt ``raw`` as the engine's ``DatasetSource.read_chunk`` does (timed by the caller)."""
    from ..format._encrypted import decrypt_chunk
    from ..format._framed import chunk_from_file

    info = source.index.chunks[chunk]
    compression = source.index.config.compression if source.index.config else None
    data: Any = raw
    if source.compression is not None and compression:
        spec = source.compression
        data = chunk_from_file(
            memoryview(raw), spec, filename=info.filename, chunk_size=info.chunk_size, chunk_bytes=info.chunk_bytes
        )
    elif compression:
        data = source.unpack(memoryview(raw), compression)
    if source.encryption_level is not None:
        data = decrypt_chunk(source.encryption, source.encryption_level, data, info.filename)
    return data


async def measure_costs(
    config: SimulationConfig, chunks: int = 3, network: bool = False, startup: bool = False, probes: int = 3
) -> Calibration:
    """Read the first ``chunks`` chunks of ``config.dataset`` and time their decompression and decoding.

    Args:
        config: Names the dataset and its ``storage_options``; its read settings (``block_size`` picks
            ``TokensLoader``) and ``cluster.num_workers`` are those the start-up probes run with.
        chunks: How many chunks to read (>= 1; fewer if the dataset has fewer). Default 3.
        network: Also measure the store's round trip, per-connection bandwidth and connection set-up.
            Default False.
        startup: Also measure the start-up costs (needs torch; starts fresh interpreters). Default False.
        probes: Fresh interpreters per kind of start-up probe; the fastest counts (>= 1). Default 3.

    Raises:
        ConfigurationError: ``chunks`` below 1. DatasetNotFoundError: no index there.
        StorageError: a read failed.
    """
    if chunks < 1:
        raise ConfigurationError(f"simulate calibrate: chunks={chunks!r} must be >= 1")
    if probes < 1:
        raise ConfigurationError(f"simulate calibrate: probes={probes!r} must be >= 1")
    from ..format._loaders import TokensLoader

    loader = TokensLoader(config.read.block_size) if config.read.block_size is not None else None
    # untimed: a first request in this process also starts what every later client shares (threads, runtimes)
    await store_for(config.dataset, config.storage_options or None).get_range(INDEX_FILENAME, 0, 1)
    store = store_for(config.dataset, config.storage_options or None)
    t0 = time.perf_counter()
    index_bytes = len(await store.get(INDEX_FILENAME))  # a new client's first request: it opens its connection
    first_request_s = time.perf_counter() - t0
    source = await DatasetSource.open(store, item_loader=loader, allow_pickle=True)
    picked = list(range(min(chunks, len(source.index.chunks))))
    first = source.index.chunks[0].filename
    await store.get_range(first, 0, 1)  # untimed: the first read of a chunk may start threads
    trips: list[float] = []
    for _ in range(_RTT_PROBES if network or startup else 0):
        t0 = time.perf_counter()
        await store.get_range(first, 0, 1)
        trips.append(time.perf_counter() - t0)
    rtt = statistics.median(trips) if trips else None
    unpack_s = decode_s = fetch_s = collate_s = 0.0
    fetched = content = samples = collated = 0
    collate = _collate_fn()
    batch = max(1, config.read.batch_size)
    warm = collate is not None and [source.decode_in(await source.read_chunk(0), 0)]
    if warm:
        collate(warm)  # untimed: the first call imports and sets up
    for chunk in picked:
        info = source.index.chunks[chunk]
        t0 = time.perf_counter()
        raw = await store.get(info.filename)
        t1 = time.perf_counter()
        data = await anyio.to_thread.run_sync(_unpack, source, raw, chunk)
        t2 = time.perf_counter()
        fetch_s += t1 - t0
        fetched += len(raw)
        unpack_s += (t2 - t1) if data is not raw else 0.0
        content += len(data)
        view = await source.read_chunk(chunk)
        count = source.chunk_sizes[chunk]
        t3 = time.perf_counter()
        decoded = [source.decode_in(view, item) for item in range(count)]
        decode_s += time.perf_counter() - t3
        if collate is not None:
            t4 = time.perf_counter()
            for start in range(0, count - batch + 1, batch):
                collate(decoded[start : start + batch])
                collated += batch
            collate_s += time.perf_counter() - t4
        samples += count
    measured_net: dict[str, float] = {}
    if rtt is not None:
        # a chunk read no slower than its round trip says nothing about bandwidth: then count the whole read
        transfer = fetch_s - rtt * len(picked)
        bandwidth = fetched / (transfer if transfer > 0.5 * fetch_s else fetch_s)
        connect = max(0.0, first_request_s - rtt - index_bytes / bandwidth)
        measured_net = {"rtt": rtt, "connection_bandwidth": bandwidth, "connect_time": connect}
    costs = {
        "decode_time_per_byte": unpack_s / max(1, content),
        "decode_time_per_sample": decode_s / max(1, samples),
        "collate_time_per_sample": collate_s / max(1, collated),
    }
    started: dict[str, float] = {}
    if startup:
        assert rtt is not None
        modelled = rtt + index_bytes / measured_net["connection_bandwidth"] + measured_net["connect_time"]
        started = await _startup(config, costs, measured_net, modelled, probes)
    return Calibration(
        **costs,
        startup_time=started.get("startup_time"),
        worker_startup_time=started.get("worker_startup_time"),
        open_time=started.get("open_time"),
        rtt=measured_net.get("rtt") if network else None,
        connection_bandwidth=measured_net.get("connection_bandwidth") if network else None,
        connect_time=measured_net.get("connect_time") if network else None,
        chunks=len(picked),
        samples=samples,
        content_bytes=content,
    )
