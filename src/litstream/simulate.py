"""Simulate how a training cluster would stream a dataset, on the real read engine and a virtual clock.

``simulate(config)`` runs the real read plan, prefetch and decoder of every DataLoader worker of every rank
of a simulated cluster, in this process, against a simulated object store (modelled round trips, bandwidth per
connection and per machine, jitter, a cluster-wide rate limit answering 429/503, injected faults, and the
stores' own retry policy) and with decode and device time as virtual sleeps. It runs on **trio** with a
virtual clock, so an epoch that would take hours takes seconds. See ``docs/simulate.md``.

Example::

    from litstream.simulate import SimulationConfig, simulate, ClusterModel

    report = simulate(SimulationConfig("s3://bucket/ds", cluster=ClusterModel(nodes=2, ranks_per_node=8)))
    print(report.time_to_first_batch, report.stall_fraction)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core._bridge import run_sync
from ._core._errors import ConfigurationError
from ._sim._calibrate import Calibration
from ._sim._config import (
    ClusterModel,
    CostModel,
    NetworkModel,
    ReadSettings,
    SimulationConfig,
    config_from_mapping,
)
from ._sim._report import RankReport, SimulationReport, build_report
from ._sim._tune import KNOBS, Trial, TuneReport

if TYPE_CHECKING:
    from ._sim._dataset import SimDataset

__all__ = [
    "Calibration",
    "ClusterModel",
    "CostModel",
    "NetworkModel",
    "RankReport",
    "ReadSettings",
    "SimulationConfig",
    "SimulationReport",
    "Trial",
    "TuneReport",
    "calibrate",
    "config_from_mapping",
    "simulate",
    "tune",
]


def simulate(config: SimulationConfig | dict[str, Any]) -> SimulationReport:
    """Simulate one run of ``config`` and report it.

    The dataset's index (and, with ``chunks="synthesise"``, its first chunk) is read first through the real
    store; then every rank and worker runs on a fresh trio event loop with a virtual clock. Call it from
    synchronous code.

    Args:
        config: A :class:`SimulationConfig`, or the nested mapping a YAML config holds.

    Returns:
        A :class:`SimulationReport` (virtual seconds throughout; ``real_seconds`` is the wall time).

    Raises:
        ConfigurationError: a bad setting (named), a call from a running event loop, or trio not installed.
        DatasetNotFoundError: the dataset has no index.
        StorageError: reading the real index failed, or the simulated store's retries were spent.
    """
    from ._sim._run import run_cluster

    config, dataset = _prepared(config)
    return build_report(config, run_cluster(config, dataset))


def tune(
    config: SimulationConfig | dict[str, Any],
    *,
    knobs: tuple[str, ...] = KNOBS,
    max_runs: int = 40,
    time_budget: float = 300.0,
    tolerance: float = 0.02,
) -> TuneReport:
    """Sweep the read knobs on the simulated cluster and recommend settings (see ``docs/simulate.md``).

    A coordinate descent over ``knobs`` (``num_workers``, ``max_pre_download``, ``prefetch_factor``,
    ``chunk_size``, ``batch_size``, ``max_cache_size``): one simulated epoch per candidate value, every other
    knob at its best value so far; a change is kept only when it shortens the predicted epoch by more than
    ``tolerance``, and then the smallest value within ``tolerance`` of the best is taken.

    Args:
        config: A :class:`SimulationConfig`, or the nested mapping a YAML config holds (the starting point).
        knobs: The knobs to sweep. Default: all.
        max_runs: Simulations at most, the starting point included. Default 40.
        time_budget: No simulation starts after this many real seconds. Default 300.
        tolerance: The least fraction of the epoch a change must save. Default 0.02.

    Returns:
        A :class:`TuneReport`: every trial, the recommended settings and the predicted speed-up.

    Raises:
        ConfigurationError: a bad setting or bound (named), a call from a running event loop, no trio.
        DatasetNotFoundError: the dataset has no index.
        StorageError: reading the real index failed, or the simulated store's retries were spent.
    """
    from ._sim._tune import tune_config

    config, dataset = _prepared(config)
    return tune_config(config, dataset, knobs=knobs, max_runs=max_runs, time_budget=time_budget, tolerance=tolerance)


def calibrate(
    config: SimulationConfig | dict[str, Any],
    *,
    chunks: int = 3,
    network: bool = False,
    startup: bool = False,
    probes: int = 3,
) -> Calibration:
    """Measure this machine's CPU costs for the dataset from its first ``chunks`` real chunks.

    Args:
        config: Names the dataset (and its ``storage_options``).
        chunks: Chunks to read (>= 1). Default 3.
        network: Also measure the store's round trip and per-connection bandwidth. Default False.
        startup: Also measure the start-up costs: a read session's open, the loader's set-up and its workers'
            start (needs torch; runs fresh interpreters with the config's read settings and workers).
            Default False.
        probes: Fresh interpreters per kind of start-up probe; the fastest counts (>= 1). Default 3.

    Returns:
        A :class:`Calibration`; its ``costs()`` (and ``network()``) are the config keys to set.

    Raises:
        ConfigurationError: a bad setting. DatasetNotFoundError: no index. StorageError: a read failed.
    """
    from ._sim._calibrate import measure_costs

    if not isinstance(config, SimulationConfig):
        config = config_from_mapping(config)
    return run_sync(measure_costs, config, chunks, network, startup, probes)


def _prepared(config: SimulationConfig | dict[str, Any]) -> tuple[SimulationConfig, SimDataset]:
    """The opening of ``simulate`` and ``tune``: trio checked, ``config`` as a :class:`SimulationConfig`, and
    what the simulation needs of the real dataset read (``_sim._dataset.prepare_dataset``)."""
    _need_trio()
    from ._sim._dataset import prepare_dataset

    if not isinstance(config, SimulationConfig):
        config = config_from_mapping(config)
    return config, run_sync(prepare_dataset, config)


def _need_trio() -> None:
    try:
        import trio  # noqa: F401  (the simulation's event loop)
    except ImportError:
        raise ConfigurationError(
            "simulate() runs on trio, which is not installed: pip install 'litstream[simulate]'"
        ) from None
