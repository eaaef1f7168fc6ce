"""The numbers a simulation reports, computed from the ranks' timelines and the store's counters."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._config import SimulationConfig
    from ._run import RankTimeline, RunResult

__all__ = ["RankReport", "SimulationReport", "build_report"]

_POINTS = 200
"""Points per plotted series (timelines are thinned to this many)."""


@dataclass(frozen=True)
class RankReport:
    """One rank's result.

    Attributes:
        rank: Global rank. node: Its machine.
        time_to_first_batch: Virtual seconds from the start until its first batch arrived.
        samples: Samples it received. batches: Batches it received.
        stall_fraction: Share of the time after the first batch during which the device waited for data.
        end: Virtual seconds at which its last step finished.
        timeline: ``[time, cumulative samples]`` points (thinned). stalls: ``[start, end]`` of its waits
            longer than one device step (thinned to the longest).
        order: The recorded value of ``record_key`` of each sample, in the order served (empty if none asked).
    """

    rank: int
    node: int
    time_to_first_batch: float | None
    samples: int
    batches: int
    stall_fraction: float
    end: float
    timeline: list[list[float]] = field(default_factory=list)
    stalls: list[list[float]] = field(default_factory=list)
    order: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class SimulationReport:
    """What :func:`litstream.simulate.simulate` returns (and ``REPORT.json`` holds).

    All times are virtual seconds; rates are per virtual second.

    Attributes:
        config: The configuration, as plain values (``storage_options`` values redacted).
        epoch_seconds: Virtual seconds until the last rank finished (all epochs).
        time_to_first_batch: Over ranks: ``{"min", "mean", "max"}``.
        samples: Samples delivered to all ranks. samples_per_second: The same over ``epoch_seconds``.
        steady_samples_per_second: Samples per second once every rank had its first batch.
        stall_fraction: Mean over ranks of :attr:`RankReport.stall_fraction`.
        requests: Attempts sent to the store (throttled and failed ones included).
        requests_per_second, bytes_per_second: Over ``epoch_seconds``. bytes: Bytes transferred.
        throttled: Requests answered 429/503 by the rate limit. faults: Injected failures (503s).
        retries: Retries the stores made. exhausted: Requests that failed for good.
        series: ``{"time": [...], "requests": [...], "bytes": [...], "throttled": [...]}`` per time bin (rates).
        ranks: One :class:`RankReport` per rank.
        real_seconds: Real seconds the simulation took.
    """

    config: dict[str, Any]
    epoch_seconds: float
    time_to_first_batch: dict[str, float]
    samples: int
    samples_per_second: float
    steady_samples_per_second: float
    stall_fraction: float
    requests: int
    requests_per_second: float
    bytes: int
    bytes_per_second: float
    throttled: int
    faults: int
    retries: int
    exhausted: int
    series: dict[str, list[float]]
    ranks: list[RankReport]
    real_seconds: float

    def to_json(self) -> str:
        """The report as JSON text (``REPORT.json``)."""
        return json.dumps(asdict(self), indent=1, default=str)


def _thin(points: list[list[float]], limit: int = _POINTS) -> list[list[float]]:
    if len(points) <= limit:
        return points
    step = len(points) / limit
    kept = [points[int(i * step)] for i in range(limit)]
    return [*kept, points[-1]]


def _rank_report(t: RankTimeline, step_per_sample: float) -> RankReport:
    first = t.arrivals[0] if t.arrivals else None
    waits = sum(t.waits[1:])
    busy_span = (t.end - first) if first is not None else 0.0
    stall = waits / busy_span if busy_span > 0 else 0.0
    total = 0
    points: list[list[float]] = [[0.0, 0.0]]
    stalls: list[list[float]] = []
    for arrival, wait, size in zip(t.arrivals, t.waits, t.sizes, strict=True):
        total += size
        points.append([arrival, float(total)])
        if wait > step_per_sample * size:
            stalls.append([arrival - wait, arrival])
    stalls = sorted(sorted(stalls, key=lambda s: s[0] - s[1])[:_POINTS])
    return RankReport(
        rank=t.rank,
        node=t.node,
        time_to_first_batch=first,
        samples=total,
        batches=len(t.arrivals),
        stall_fraction=stall,
        end=t.end,
        timeline=_thin(points),
        stalls=stalls,
        order=list(t.order),
    )


def _series(result: RunResult, span: float, bins: int = 60) -> dict[str, list[float]]:
    width = span / bins if span > 0 else 1.0
    requests, sent, throttled = [0.0] * bins, [0.0] * bins, [0.0] * bins
    for end, size, status in result.network.events:
        i = min(bins - 1, int(end / width))
        requests[i] += 1 / width
        sent[i] += size / width
        if status != 200:
            throttled[i] += 1 / width
    return {
        "time": [(i + 0.5) * width for i in range(bins)],
        "requests": requests,
        "bytes": sent,
        "throttled": throttled,
    }


def build_report(config: SimulationConfig, result: RunResult) -> SimulationReport:
    """The report of one simulation run."""
    ranks = [_rank_report(t, config.costs.device_time_per_sample) for t in result.ranks]
    span = max((r.end for r in ranks), default=0.0)
    firsts = [r.time_to_first_batch for r in ranks if r.time_to_first_batch is not None]
    samples = sum(r.samples for r in ranks)
    warm = max(firsts, default=0.0)
    after = sum(size for t in result.ranks for a, size in zip(t.arrivals, t.sizes, strict=True) if a > warm)
    net = result.network
    per = 1 / span if span > 0 else 0.0
    shown = config.to_mapping()
    shown["storage_options"] = {key: "<redacted>" for key in shown["storage_options"]}  # no secrets in reports
    return SimulationReport(
        config=shown,
        epoch_seconds=span,
        time_to_first_batch={
            "min": min(firsts, default=0.0),
            "mean": sum(firsts) / len(firsts) if firsts else 0.0,
            "max": warm,
        },
        samples=samples,
        samples_per_second=samples * per,
        steady_samples_per_second=after / (span - warm) if span > warm else 0.0,
        stall_fraction=sum(r.stall_fraction for r in ranks) / len(ranks) if ranks else 0.0,
        requests=net.requests,
        requests_per_second=net.requests * per,
        bytes=net.bytes,
        bytes_per_second=net.bytes * per,
        throttled=net.throttled,
        faults=net.faults,
        retries=net.retries,
        exhausted=net.exhausted,
        series=_series(result, span),
        ranks=ranks,
        real_seconds=result.real_seconds,
    )
