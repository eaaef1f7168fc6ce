"""What a simulation runs: the dataset, the cluster, the read settings, the costs and the network model.

A :class:`SimulationConfig` is a plain value; :func:`config_from_mapping` builds one from the nested mapping a
YAML file holds (``litstream simulate init`` writes one) and checks every field, naming the key, the value and
the fix. All durations are in (virtual) seconds, all sizes in bytes, all bandwidths in bytes per second.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from .._core._errors import ConfigurationError

__all__ = ["ClusterModel", "CostModel", "NetworkModel", "ReadSettings", "SimulationConfig", "config_from_mapping"]


@dataclass(frozen=True)
class ClusterModel:
    """The machines and processes that read.

    Attributes:
        nodes: Machines (>= 1). Default 1.
        ranks_per_node: Training processes (GPUs) per machine (>= 1). Default 1.
        num_workers: DataLoader workers per rank, each an independent read session with its own plan;
            0 counts as one (>= 0). Default 2.
        prefetch_factor: Batches each worker may have ready ahead of its rank (>= 1), as ``DataLoader``'s.
            Default 2.
    """

    nodes: int = 1
    ranks_per_node: int = 1
    num_workers: int = 2
    prefetch_factor: int = 2


@dataclass(frozen=True)
class ReadSettings:
    """The read engine's settings, as ``StreamingDataset`` / ``astream`` take them.

    Attributes:
        epochs: Epochs to simulate (>= 1), numbered from 1. Default 1.
        batch_size: Samples per batch (>= 1). Default 32.
        shuffle: ``False``, ``True`` (``"full"``) or ``"window"``. Default False.
        seed: Shuffle seed. Default 42.
        drop_last: Drop items that do not fill whole batches across ranks; ``None`` (default): as
            ``StreamingDataset`` decides it, ``True`` when there is more than one rank.
        max_pre_download: Chunks each session fetches ahead (>= 1); for a remote dataset at least 4, as
            ``StreamingDataset`` does. Default 2.
        max_cache_size: One node's cache budget in bytes for the multi-node FullShuffle plan; ``None``: no
            limit. Default None.
        block_size: Stream a token dataset as windows of this many tokens (``TokensLoader``); ``None``: the
            default item loader (``PyTreeLoader``). Default None.
    """

    epochs: int = 1
    batch_size: int = 32
    shuffle: bool | Literal["full", "window"] = False
    seed: int = 42
    drop_last: bool | None = None
    max_pre_download: int = 2
    max_cache_size: int | None = None
    block_size: int | None = None


# The models below are plain field lists (numbers with defaults) that look alike to a duplicate finder, as
# write/_summary.py's and _sim/_store.py's counters do; each field is its own setting, with no logic to share.
@dataclass(frozen=True)
class CostModel:
    """CPU and device time, spent as virtual sleeps by each simulated worker and rank.

    Attributes:
        device_time_per_sample: Seconds the device spends per sample of a batch (the training step). Default 0.001.
        decode_time_per_sample: Seconds a worker spends deserialising one sample. Default 0.0001.
        decode_time_per_byte: Seconds spent per byte of a chunk's content (its recorded ``chunk_bytes``) to
            decompress and decrypt it, once per chunk fetched, by the reading session's engine as soon as the
            chunk's bytes have arrived (in the fetch, as the engine does it: overlapping the other fetches and
            the samples being served). Default 0 (what ``calibrate`` measures for an uncompressed dataset).
        collate_time_per_sample: Seconds spent collating one sample into a batch and handing it over. Default 0.
        startup_time: Seconds from a rank asking its loader for the first batch until reading starts (the
            iterator's set-up), once per run. Default 0.
        worker_startup_time: Seconds a DataLoader worker process takes to start before its first request
            (``num_workers`` > 0; workers restart every epoch, as without ``persistent_workers``). Default 0.
        open_time: Seconds each read session (a worker, or the rank itself with ``num_workers=0``) spends opening
            the dataset before its first request, every epoch: its event loops, the decoder's set-up (imports
            in a fresh process), the read plan. The index's read itself is a modelled request. Default 0.

    With ``num_workers=0`` the rank itself decodes and collates, so those costs are spent by the rank, one
    after the other with the device's time; with workers they overlap with it.
    """

    device_time_per_sample: float = 0.001
    decode_time_per_sample: float = 0.0001
    decode_time_per_byte: float = 0.0
    collate_time_per_sample: float = 0.0
    startup_time: float = 0.0
    worker_startup_time: float = 0.0
    open_time: float = 0.0


@dataclass(frozen=True)
class NetworkModel:
    """The store as the readers see it.

    Attributes:
        rtt: Seconds from sending a request until its first byte arrives (median). Default 0.03.
        connect_time: Extra seconds of each read session's first request: a new client and its connection
            (TCP and TLS set-up, the store's runtime in a fresh process). Default 0.
        jitter: Sigma of the log-normal factor applied to each request's ``rtt`` (0: none). Default 0.2.
        connection_bandwidth: Bytes per second one request can transfer. Default 100e6.
        node_bandwidth: Bytes per second one machine's link carries, shared by all its requests (a FIFO queue).
            Default 1.25e9 (10 Gbit/s).
        rate_limit: Requests per second the store admits, cluster-wide (a token bucket); ``None``: no limit.
            Default None.
        burst: Requests the bucket holds when full. Default 100.
        throttle_status: What an over-limit request is answered with: 429 or 503. Default 429.
        honor_retry_after: Whether a retry waits at least the answer's ``Retry-After`` (litstream's stores draw
            their waits from the backoff alone, so the default is False).
        fault_rate: Probability that a request fails with a retryable 503 (an injected fault). Default 0.
        outages: ``[start, end)`` windows of virtual seconds during which every request gets a 503.
        max_retries: ``TransferConfig.max_retries``. Default 100.
        retry_timeout: ``TransferConfig.retry_timeout`` (seconds). Default 60.
        backoff_initial: ``TransferConfig.backoff_initial`` (seconds). Default 0.2.
        backoff_max: ``TransferConfig.backoff_max`` (seconds). Default 4.
        backoff_base: ``TransferConfig.backoff_base``. Default 3.
        seed: Seed of the jitter, fault and backoff draws. Default 0.
    """

    rtt: float = 0.03
    connect_time: float = 0.0
    jitter: float = 0.2
    connection_bandwidth: float = 100e6
    node_bandwidth: float = 1.25e9
    rate_limit: float | None = None
    burst: int = 100
    throttle_status: int = 429
    honor_retry_after: bool = False
    fault_rate: float = 0.0
    outages: tuple[tuple[float, float], ...] = ()
    max_retries: int = 100
    retry_timeout: float = 60.0
    backoff_initial: float = 0.2
    backoff_max: float = 4.0
    backoff_base: float = 3.0
    seed: int = 0


@dataclass(frozen=True)
class SimulationConfig:
    """One simulation.

    Attributes:
        dataset: The dataset: a directory or a URL, the same strings ``StreamingDataset`` takes.
        chunks: ``"read"``: serve the real chunk files (a remote dataset's are read into memory first, at most
            1 GiB: for checking the order of real samples); ``"synthesise"``: serve chunks made of
            copies of the dataset's first sample, padded to the recorded sizes (only the first chunk is read,
            once, before the simulation starts). Default ``"synthesise"``.
        storage_options: Passed to the real store when the index and the first chunk are read.
        index_path: A local ``index.json`` to use instead of the dataset's (e.g. a bigger index than the data
            holds, to ask "what if"); ``None``: the dataset's. Default None.
        cluster: :class:`ClusterModel`. read: :class:`ReadSettings`. costs: :class:`CostModel`.
        network: :class:`NetworkModel`.
        record_key: Record, per rank, the value of this key of each sample (a dict sample), in the order served;
            ``None``: record nothing. Default None.
    """

    dataset: str
    chunks: Literal["read", "synthesise"] = "synthesise"
    storage_options: dict[str, Any] = field(default_factory=dict)
    index_path: str | None = None
    cluster: ClusterModel = field(default_factory=ClusterModel)
    read: ReadSettings = field(default_factory=ReadSettings)
    costs: CostModel = field(default_factory=CostModel)
    network: NetworkModel = field(default_factory=NetworkModel)
    record_key: str | None = None

    def to_mapping(self) -> dict[str, Any]:
        """The configuration as plain values (what ``litstream simulate init`` writes as YAML)."""
        out = dataclasses.asdict(self)
        out["network"]["outages"] = [list(w) for w in self.network.outages]
        return out


_SECTIONS: dict[str, type[Any]] = {
    "cluster": ClusterModel,
    "read": ReadSettings,
    "costs": CostModel,
    "network": NetworkModel,
}
_MIN_ONE = {"nodes", "ranks_per_node", "prefetch_factor", "epochs", "batch_size", "max_pre_download", "burst"}


def _bad(key: str, value: object, fix: str) -> ConfigurationError:
    return ConfigurationError(f"simulation config: {key}={value!r} is not usable; {fix}")


def _check_field(section: str, name: str, value: Any) -> Any:
    key = f"{section}.{name}"
    if name == "shuffle":
        if value not in (False, True, "full", "window"):
            raise _bad(key, value, "use false, true, 'full' or 'window'")
        return value
    if name == "drop_last" and value is None:
        return None
    if name in ("drop_last", "honor_retry_after"):
        if not isinstance(value, bool):
            raise _bad(key, value, "use true or false")
        return value
    if name == "outages":
        try:
            windows = tuple((float(a), float(b)) for a, b in value)
        except (TypeError, ValueError):
            raise _bad(key, value, "use a list of [start, end] pairs of seconds") from None
        if any(not 0 <= a < b for a, b in windows):
            raise _bad(key, value, "each window needs 0 <= start < end")
        return windows
    if name == "throttle_status":
        if value not in (429, 503):
            raise _bad(key, value, "use 429 or 503")
        return value
    if name in ("max_cache_size", "block_size", "rate_limit") and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(key, value, "use a number")
    if name in ("fault_rate",) and not 0 <= value <= 1:
        raise _bad(key, value, "use a probability in [0, 1]")
    if name == "backoff_base" and value <= 1:
        raise _bad(key, value, "use a number > 1")
    if name in ("rate_limit", "connection_bandwidth", "node_bandwidth", "block_size") and value <= 0:
        raise _bad(key, value, "use a number > 0")
    if value < 0:
        raise _bad(key, value, "use a number >= 0")
    if name in _MIN_ONE and value < 1:
        raise _bad(key, value, "use an integer >= 1")
    default = next(f for f in dataclasses.fields(_SECTIONS[section]) if f.name == name).default
    if isinstance(default, int) and not isinstance(value, int):
        raise _bad(key, value, "use an integer")
    return value


def _section(name: str, raw: Any) -> Any:
    cls = _SECTIONS[name]
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise _bad(name, raw, "use a mapping of settings")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise _bad(f"{name}.{unknown[0]}", raw[unknown[0]], f"known keys of {name}: {', '.join(sorted(known))}")
    return cls(**{k: _check_field(name, k, v) for k, v in raw.items()})


def config_from_mapping(raw: Any) -> SimulationConfig:
    """A :class:`SimulationConfig` from the nested mapping of a YAML file.

    Raises:
        ConfigurationError: a missing ``dataset``, an unknown key, or a value out of range (named).
    """
    if not isinstance(raw, dict):
        raise _bad("<top level>", raw, "the file must hold a mapping with at least 'dataset'")
    top = {"dataset", "chunks", "storage_options", "index_path", "record_key", *_SECTIONS}
    unknown = sorted(set(raw) - top)
    if unknown:
        raise _bad(unknown[0], raw[unknown[0]], f"known keys: {', '.join(sorted(top))}")
    dataset = raw.get("dataset")
    if not isinstance(dataset, str) or not dataset:
        raise _bad("dataset", dataset, "name the dataset: a directory or URL, as StreamingDataset takes it")
    chunks = raw.get("chunks", "synthesise")
    if chunks not in ("read", "synthesise"):
        raise _bad("chunks", chunks, "use 'read' (the real chunk files) or 'synthesise'")
    options = raw.get("storage_options") or {}
    if not isinstance(options, dict):
        raise _bad("storage_options", options, "use a mapping")
    index_path = raw.get("index_path")
    if index_path is not None and not isinstance(index_path, str):
        raise _bad("index_path", index_path, "use a path or leave it out")
    record_key = raw.get("record_key")
    if record_key is not None and not isinstance(record_key, str):
        raise _bad("record_key", record_key, "use a sample key or leave it out")
    return SimulationConfig(
        dataset=dataset,
        chunks=chunks,
        storage_options=dict(options),
        index_path=index_path,
        record_key=record_key,
        **{name: _section(name, raw.get(name)) for name in _SECTIONS},
    )
