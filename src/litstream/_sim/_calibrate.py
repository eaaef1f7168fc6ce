"""``litstream simulate calibrate``: measure a dataset's CPU costs (and, optionally, its store) on this machine.

A few real chunks are read through the real store, on the real clock:

* ``decode_time_per_byte``: seconds to decompress (and decrypt) one byte of chunk content, from timing the
  engine's own decompression of each chunk's fetched bytes (0 for an uncompressed, unencrypted dataset);
* ``decode_time_per_sample``: seconds to deserialise one sample, from timing the engine's decoder over every
  item of those chunks;
* with ``network=True``: ``rtt`` (median seconds of a one-byte range read) and ``connection_bandwidth`` (bytes
  per second of the whole-chunk reads once their round trip is taken off).

The device's time per sample is the user's to give: nothing here trains.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .._errors import ConfigurationError
from ..read._source import DatasetSource
from ..storage._resolver import store_for

if TYPE_CHECKING:
    from ._config import SimulationConfig

__all__ = ["Calibration", "measure_costs"]

_RTT_PROBES = 5


@dataclass(frozen=True)
class Calibration:
    """What :func:`measure_costs` measured.

    Attributes:
        decode_time_per_byte: Seconds per byte of (decompressed) chunk content to decompress/decrypt it.
        decode_time_per_sample: Seconds to deserialise one sample.
        rtt: Median seconds of a one-byte read (``None`` unless the network was measured).
        connection_bandwidth: Bytes per second of one whole-chunk read (``None`` unless measured).
        chunks: Chunks read. samples: Samples decoded. content_bytes: Decompressed bytes of those chunks.
    """

    decode_time_per_byte: float
    decode_time_per_sample: float
    rtt: float | None
    connection_bandwidth: float | None
    chunks: int
    samples: int
    content_bytes: int

    def costs(self) -> dict[str, float]:
        """The ``costs`` section's measured keys."""
        return {
            "decode_time_per_byte": self.decode_time_per_byte,
            "decode_time_per_sample": self.decode_time_per_sample,
        }

    def network(self) -> dict[str, float]:
        """The ``network`` section's measured keys (empty if not measured)."""
        if self.rtt is None or self.connection_bandwidth is None:
            return {}
        return {"rtt": self.rtt, "connection_bandwidth": self.connection_bandwidth}


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


async def measure_costs(config: SimulationConfig, chunks: int = 3, network: bool = False) -> Calibration:
    """Read the first ``chunks`` chunks of ``config.dataset`` and time their decompression and decoding.

    Args:
        config: Names the dataset and its ``storage_options`` (``block_size`` picks ``TokensLoader``).
        chunks: How many chunks to read (>= 1; fewer if the dataset has fewer). Default 3.
        network: Also measure the store's round trip and per-connection bandwidth. Default False.

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
    unpack_s = decode_s = fetch_s = 0.0
    fetched = content = samples = 0
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
        for item in range(count):
            source.decode_in(view, item)
        decode_s += time.perf_counter() - t3
        samples += count
    if rtt is not None:
        bandwidth = fetched / max(fetch_s - rtt * len(picked), 1e-9)
    return Calibration(
        decode_time_per_byte=unpack_s / max(1, content),
        decode_time_per_sample=decode_s / max(1, samples),
        rtt=rtt,
        connection_bandwidth=bandwidth,
        chunks=len(picked),
        samples=samples,
        content_bytes=content,
    )
