"""``litstream simulate tune``: sweep the read knobs on the simulated cluster and recommend settings.

The sweep is a coordinate descent over the knobs, in order of their usual weight: each knob's candidate values
are simulated with every other knob at its best value so far, and a knob is changed only when a candidate
shortens the predicted epoch by more than ``tolerance`` (among the candidates within ``tolerance`` of the best,
the cheapest, i.e. the smallest value, is taken: fewer workers, less memory). The dataset is read once; each
trial is one simulated epoch. The cost is bounded by ``max_runs`` simulations and ``time_budget`` real seconds:
candidates left over are listed as skipped.

Knobs: ``num_workers``, ``max_pre_download`` (chunks fetched ahead), ``prefetch_factor`` (batches queued per
worker), ``chunk_size`` (samples per chunk; only with ``chunks: synthesise``, whose chunks can be re-cut: the
index is rewritten with the same samples and bytes per sample), ``batch_size`` and ``max_cache_size`` (only
where it changes the plan: several nodes and a shuffled read).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, StorageError
from ..format._chunk import header_length
from ._report import build_report

if TYPE_CHECKING:
    from ._config import SimulationConfig
    from ._dataset import SimDataset
    from ._report import SimulationReport

__all__ = ["KNOBS", "TuneReport", "Trial", "tune_config"]

KNOBS = ("num_workers", "max_pre_download", "prefetch_factor", "chunk_size", "batch_size", "max_cache_size")
"""The knobs :func:`tune_config` can sweep, in the order it sweeps them."""

_MAX_CHUNK_BYTES = 256 * 2**20
"""The largest chunk the chunk-size sweep proposes (bytes)."""


@dataclass(frozen=True)
class Trial:
    """One simulated epoch of the sweep.

    Attributes:
        knob: The knob changed (``"baseline"`` for the starting point). value: Its value in this trial.
        settings: Every knob's value in this trial.
        epoch_seconds, time_to_first_batch, stall_fraction, steady_samples_per_second, throttled: As in
            :class:`~litstream._sim._report.SimulationReport` (virtual seconds).
        real_seconds: How long the simulation took.
    """

    knob: str
    value: Any
    settings: dict[str, Any]
    epoch_seconds: float
    time_to_first_batch: float
    stall_fraction: float
    steady_samples_per_second: float
    throttled: int
    real_seconds: float


@dataclass(frozen=True)
class TuneReport:
    """What :func:`tune_config` returns (and ``TUNE.json`` holds).

    Attributes:
        config: The starting configuration (plain values, ``storage_options`` redacted).
        baseline: The starting point's trial. best: The recommended settings' trial.
        recommended: ``{knob: value}`` for each knob whose recommended value differs from the starting one.
        speedup: ``baseline.epoch_seconds / best.epoch_seconds`` (1.0: nothing to gain).
        trials: Every trial, in the order run. skipped: ``"knob=value"`` candidates not run (budget spent), or
            run and failed (``"knob=value (failed: why)"``, e.g. the store's retries were spent).
        not_swept: ``{knob: why}`` for knobs that do not apply to this configuration.
        sweeps: ``{knob: trials}``: each swept knob's values, the trial its sweep started from first.
        real_seconds: The sweep's wall time.
    """

    config: dict[str, Any]
    baseline: Trial
    best: Trial
    recommended: dict[str, Any]
    speedup: float
    trials: list[Trial] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    not_swept: dict[str, str] = field(default_factory=dict)
    sweeps: dict[str, list[Trial]] = field(default_factory=dict)
    real_seconds: float = 0.0

    def to_json(self) -> str:
        """The report as JSON text (``TUNE.json``)."""
        return json.dumps(asdict(self), indent=1, default=str)


def _settings(config: SimulationConfig, chunk_size: int) -> dict[str, Any]:
    c, r = config.cluster, config.read
    return {
        "num_workers": c.num_workers,
        "max_pre_download": r.max_pre_download,
        "prefetch_factor": c.prefetch_factor,
        "chunk_size": chunk_size,
        "batch_size": r.batch_size,
        "max_cache_size": r.max_cache_size,
    }


def _apply(config: SimulationConfig, knob: str, value: Any) -> SimulationConfig:
    if knob in ("num_workers", "prefetch_factor"):
        return dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, **{knob: value}))
    if knob in ("max_pre_download", "batch_size", "max_cache_size"):
        return dataclasses.replace(config, read=dataclasses.replace(config.read, **{knob: value}))
    return config  # chunk_size lives in the dataset


def rechunked(dataset: SimDataset, chunk_size: int) -> SimDataset:
    """``dataset`` with its samples re-cut into chunks of ``chunk_size`` (the same samples and bytes per sample)."""
    index = dataset.index
    total = index.num_items
    payload = sum(c.chunk_bytes - header_length(c.chunk_size) for c in index.chunks)
    per_item = max(len(dataset.template or b""), payload / max(1, total))
    first = index.chunks[0]
    chunks = []
    for i, start in enumerate(range(0, total, chunk_size)):
        n = min(chunk_size, total - start)
        size = header_length(n) + int(per_item * n)
        chunks.append(dataclasses.replace(first, filename=f"chunk-0-{i}.bin", chunk_size=n, chunk_bytes=size))
    config = index.config
    if config is not None:
        config = dataclasses.replace(config, chunk_size=chunk_size, chunk_bytes=None)
    new = dataclasses.replace(index, chunks=tuple(chunks), config=config)
    return dataclasses.replace(dataset, index=new, index_bytes=new.to_json().encode(), _made=OrderedDict())


def _candidates(
    knob: str, config: SimulationConfig, dataset: SimDataset, chunk_size: int
) -> tuple[list[Any], str | None]:
    """The values to try for ``knob``, or ``([], why)`` when it does not apply."""
    c, r = config.cluster, config.read
    if knob == "num_workers":
        return sorted({1, 2, 4, 8, max(1, c.num_workers)}), None
    if knob == "prefetch_factor":
        return sorted({1, 2, 4, 8, c.prefetch_factor}), None
    if knob == "max_pre_download":
        floor = 4 if dataset.remote else 1  # StreamingDataset fetches a remote dataset's chunks 4 ahead at least
        values = {v for v in (1, 2, 4, 8, 16) if v >= floor} | {max(floor, r.max_pre_download)}
        return sorted(values), None
    if knob == "batch_size":
        return sorted({max(1, r.batch_size // 2), r.batch_size, r.batch_size * 2}), None
    if knob == "chunk_size":
        if dataset.template is None:
            return [], "the real chunk files are served (chunks: read); re-cutting needs chunks: synthesise"
        per_item = max(1.0, sum(ch.chunk_bytes for ch in dataset.index.chunks) / max(1, dataset.index.num_items))
        most = max(1, min(dataset.index.num_items, int(_MAX_CHUNK_BYTES / per_item)))
        values = {max(1, min(most, int(chunk_size * f))) for f in (0.25, 0.5, 1, 2, 4)} | {chunk_size}
        return sorted(values), None
    if knob == "max_cache_size":
        if c.nodes < 2 or not r.shuffle:
            return [], "it changes the plan only for several nodes reading a shuffled dataset"
        total = sum(ch.chunk_bytes for ch in dataset.index.chunks)
        return [None, max(1, total // (4 * c.nodes)), max(1, total // c.nodes)], None
    raise ConfigurationError(f"simulate tune: knobs={knob!r} is not a knob; use some of {', '.join(KNOBS)}")


def _run(config: SimulationConfig, dataset: SimDataset, knob: str, value: Any, chunk_size: int) -> Trial:
    from ._run import run_cluster  # imports trio: only once a simulation runs

    report: SimulationReport = build_report(config, run_cluster(config, dataset))
    return Trial(
        knob=knob,
        value=value,
        settings=_settings(config, chunk_size),
        epoch_seconds=report.epoch_seconds,
        time_to_first_batch=report.time_to_first_batch["max"],
        stall_fraction=report.stall_fraction,
        steady_samples_per_second=report.steady_samples_per_second,
        throttled=report.throttled,
        real_seconds=report.real_seconds,
    )


def _sort_key(value: Any) -> float:
    return float("inf") if value is None else float(value)


def tune_config(
    config: SimulationConfig,
    dataset: SimDataset,
    *,
    knobs: tuple[str, ...] = KNOBS,
    max_runs: int = 40,
    time_budget: float = 300.0,
    tolerance: float = 0.02,
) -> TuneReport:
    """Sweep ``knobs`` by coordinate descent (see the module's docstring) over one epoch each.

    Args:
        config: The starting point (its ``read.epochs`` is taken as 1).
        dataset: What :func:`~litstream._sim._dataset.prepare_dataset` read for ``config``.
        knobs: Which of :data:`KNOBS` to sweep, swept in :data:`KNOBS`'s order.
        max_runs: Simulations at most, the baseline included (>= 1).
        time_budget: No simulation is started after this many real seconds (> 0).
        tolerance: A change must shorten the epoch by more than this fraction to be recommended (0 to 1).

    Raises:
        ConfigurationError: an unknown knob or a bound out of range (named).
    """
    unknown = [k for k in knobs if k not in KNOBS]
    if unknown:
        raise ConfigurationError(f"simulate tune: knobs={unknown[0]!r} is not a knob; use some of {', '.join(KNOBS)}")
    if max_runs < 1:
        raise ConfigurationError(f"simulate tune: max_runs={max_runs!r} must be >= 1")
    if not time_budget > 0:
        raise ConfigurationError(f"simulate tune: time_budget={time_budget!r} must be > 0 seconds")
    if not 0 <= tolerance < 1:
        raise ConfigurationError(f"simulate tune: tolerance={tolerance!r} must be in [0, 1)")
    started = time.perf_counter()
    config = dataclasses.replace(config, read=dataclasses.replace(config.read, epochs=1), record_key=None)
    chunk_size = max(c.chunk_size for c in dataset.index.chunks)
    baseline = _run(config, dataset, "baseline", None, chunk_size)
    trials, skipped, not_swept = [baseline], [], {}
    sweeps: dict[str, list[Trial]] = {}
    best, best_dataset = baseline, dataset
    current = config
    for knob in (k for k in KNOBS if k in knobs):
        values, why = _candidates(knob, current, dataset, chunk_size)
        if why is not None:
            not_swept[knob] = why
            continue
        now = best.settings[knob]
        results: list[tuple[Any, Trial, SimDataset]] = [(now, best, best_dataset)]
        for value in values:
            if value == now:
                continue
            if len(trials) >= max_runs or time.perf_counter() - started > time_budget:
                skipped.append(f"{knob}={value}")
                continue
            variant = rechunked(dataset, value) if knob == "chunk_size" else best_dataset
            size = value if knob == "chunk_size" else chunk_size
            try:
                trial = _run(_apply(current, knob, value), variant, knob, value, size)
            except StorageError as exc:  # e.g. retries spent against the rate limit: that value is no choice
                skipped.append(f"{knob}={value} (failed: {exc})")
                continue
            trials.append(trial)
            results.append((value, trial, variant))
        sweeps[knob] = [t for _, t, _ in results]
        fastest = min(t.epoch_seconds for _, t, _ in results)
        if fastest < best.epoch_seconds * (1 - tolerance):
            near = [r for r in results if r[1].epoch_seconds <= fastest * (1 + tolerance)]
            value, best, best_dataset = min(near, key=lambda r: _sort_key(r[0]))
            current = _apply(current, knob, value)
            if knob == "chunk_size":
                chunk_size = value
    recommended = {k: v for k, v in best.settings.items() if v != baseline.settings[k]}
    shown = config.to_mapping()
    shown["storage_options"] = {key: "<redacted>" for key in shown["storage_options"]}
    return TuneReport(
        config=shown,
        baseline=baseline,
        best=best,
        recommended=recommended,
        speedup=baseline.epoch_seconds / best.epoch_seconds if best.epoch_seconds > 0 else 1.0,
        trials=trials,
        skipped=skipped,
        not_swept=not_swept,
        sweeps=sweeps,
        real_seconds=time.perf_counter() - started,
    )
