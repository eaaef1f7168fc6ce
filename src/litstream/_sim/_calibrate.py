"""``litstream simulate calibrate``: measure a dataset's CPU costs (and, optionally, its store) on this machine.

A few real chunks are read through the real store, on the real clock:

* ``decode_time_per_byte``: seconds to decompress (and decrypt) one byte of chunk content, from timing the
  engine's own decompression of each chunk's fetched bytes (0 for an uncompressed, unencrypted dataset);
* ``decode_time_per_sample``: seconds to deserialise one sample, from timing the engine's decoder over every
  item of those chunks;
* ``collate_time_per_sample``: seconds to collate decoded samples into a batch (``config.read.batch_size``),
  with the collate function ``StreamingDataLoader`` uses;
* with ``network=True``: ``rtt`` (median seconds of a one-byte range read) and ``connection_bandwidth`` (bytes
  per second of the whole-chunk reads once their round trip is taken off);
* with ``startup=True`` (needs torch; runs six fresh interpreters): ``startup_time`` (the fastest first batch of a
  ``num_workers=0`` ``StreamingDataLoader`` in a fresh interpreter, less the reads of ``index.json`` and the
  first chunk and the batch's decoding) and ``worker_startup_time`` (how much later the first batch of a
  one-worker loader comes: the worker process's start, as ``StreamingDataLoader`` starts it there).

The device's time per sample is the user's to give: nothing here trains.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .._core._errors import ConfigurationError, StorageError
from ..format._index import INDEX_FILENAME
from ..read._source import DatasetSource
from ..storage._resolver import store_for

if TYPE_CHECKING:
    from ._config import SimulationConfig

__all__ = ["Calibration", "measure_costs"]

_RTT_PROBES = 9
_PROBES = 3
"""Fresh interpreters started per start-up measurement (the fastest counts)."""


@dataclass(frozen=True)
class Calibration:
    """What :func:`measure_costs` measured.

    Attributes:
        decode_time_per_byte: Seconds per byte of (decompressed) chunk content to decompress/decrypt it.
        decode_time_per_sample: Seconds to deserialise one sample.
        collate_time_per_sample: Seconds to collate one sample.
        startup_time, worker_startup_time: Seconds (``None`` unless ``startup=True``).
        rtt: Median seconds of a one-byte read (``None`` unless the network was measured).
        connection_bandwidth: Bytes per second of one whole-chunk read (``None`` unless measured).
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

    def costs(self) -> dict[str, float]:
        """The ``costs`` section's measured keys."""
        out = {
            "decode_time_per_byte": self.decode_time_per_byte,
            "decode_time_per_sample": self.decode_time_per_sample,
            "collate_time_per_sample": self.collate_time_per_sample,
        }
        if self.startup_time is not None and self.worker_startup_time is not None:
            out["startup_time"] = self.startup_time
            out["worker_startup_time"] = self.worker_startup_time
        return out

    def network(self) -> dict[str, float]:
        """The ``network`` section's measured keys (empty if not measured)."""
        if self.rtt is None or self.connection_bandwidth is None:
            return {}
        return {"rtt": self.rtt, "connection_bandwidth": self.connection_bandwidth}


def _collate_fn() -> Any:
    """``StreamingDataLoader``'s collate function, or ``None`` without torch."""
    try:
        from .._torch._collate import litdata_collate
    except ImportError:  # pragma: no cover - torch missing
        return None
    return litdata_collate


_PROBE = """
import json, sys, time
t0 = time.perf_counter()
import litstream
spec = json.loads(sys.stdin.read())
loader = litstream.TokensLoader(spec["block"]) if spec["block"] else None
ds = litstream.StreamingDataset(spec["dataset"], storage_options=spec["options"] or None, item_loader=loader)
loader = litstream.StreamingDataLoader(ds, batch_size=spec["batch"], num_workers=spec["workers"])
t1 = time.perf_counter()
next(iter(loader))
print(json.dumps({"first": time.perf_counter() - t1, "imports": t1 - t0}))
"""


def _first_batch_seconds(config: SimulationConfig, workers: int) -> float:
    """Seconds to the first batch of a fresh interpreter's ``StreamingDataLoader`` over the dataset.

    Raises:
        StorageError: the probe failed (its last error lines are in the message).
    """
    import json
    import subprocess
    import sys

    spec = {"dataset": config.dataset, "options": config.storage_options, "batch": config.read.batch_size}
    spec["workers"] = workers  # credentials go through stdin, never the command line
    spec["block"] = config.read.block_size
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], input=json.dumps(spec), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise StorageError(f"simulate calibrate: the start-up probe failed: {done.stderr.strip()[-500:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["first"])


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
    config: SimulationConfig, chunks: int = 3, network: bool = False, startup: bool = False
) -> Calibration:
    """Read the first ``chunks`` chunks of ``config.dataset`` and time their decompression and decoding.

    Args:
        config: Names the dataset and its ``storage_options`` (``block_size`` picks ``TokensLoader``).
        chunks: How many chunks to read (>= 1; fewer if the dataset has fewer). Default 3.
        network: Also measure the store's round trip and per-connection bandwidth. Default False.
        startup: Also measure the loader's and a worker process's start-up (needs torch). Default False.

    Raises:
        ConfigurationError: ``chunks`` below 1. DatasetNotFoundError: no index there.
        StorageError: a read failed.
    """
    if chunks < 1:
        raise ConfigurationError(f"simulate calibrate: chunks={chunks!r} must be >= 1")
    from ..format._loaders import TokensLoader

    store = store_for(config.dataset, config.storage_options or None)
    loader = TokensLoader(config.read.block_size) if config.read.block_size is not None else None
    source = await DatasetSource.open(store, item_loader=loader, allow_pickle=True)
    picked = list(range(min(chunks, len(source.index.chunks))))
    rtt = bandwidth = None
    first = source.index.chunks[0].filename
    await store.get_range(first, 0, 1)  # untimed: the first read opens connections and starts threads
    if network:
        probes = []
        for _ in range(_RTT_PROBES):
            t0 = time.perf_counter()
            await store.get_range(first, 0, 1)
            probes.append(time.perf_counter() - t0)
        rtt = statistics.median(probes)
    t0 = time.perf_counter()
    await store.get(INDEX_FILENAME)
    index_s = time.perf_counter() - t0
    unpack_s = decode_s = fetch_s = collate_s = 0.0
    first_fetch_s = 0.0
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
        first_fetch_s = first_fetch_s or (t1 - t0)
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
    if rtt is not None:
        # a chunk read no slower than its round trip says nothing about bandwidth: then count the whole read
        transfer = fetch_s - rtt * len(picked)
        bandwidth = fetched / (transfer if transfer > 0.5 * fetch_s else fetch_s)
    started = worker_started = None
    if startup:
        per_sample = (decode_s + collate_s) / max(1, samples)
        # the fastest of a few probes: a slower one mostly measures the machine's other load
        in_process = min([await anyio.to_thread.run_sync(_first_batch_seconds, config, 0) for _ in range(_PROBES)])
        one_worker = min([await anyio.to_thread.run_sync(_first_batch_seconds, config, 1) for _ in range(_PROBES)])
        started = max(0.0, in_process - index_s - first_fetch_s - per_sample * batch)
        worker_started = max(0.0, one_worker - in_process)
    return Calibration(
        decode_time_per_byte=unpack_s / max(1, content),
        decode_time_per_sample=decode_s / max(1, samples),
        collate_time_per_sample=collate_s / max(1, collated),
        startup_time=started,
        worker_startup_time=worker_started,
        rtt=rtt,
        connection_bandwidth=bandwidth,
        chunks=len(picked),
        samples=samples,
        content_bytes=content,
    )
