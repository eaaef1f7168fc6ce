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

from typing import Any

from ._core._bridge import run_sync
from ._core._errors import ConfigurationError
from ._sim._config import (
    ClusterModel,
    CostModel,
    NetworkModel,
    ReadSettings,
    SimulationConfig,
    config_from_mapping,
)
from ._sim._report import RankReport, SimulationReport, build_report

__all__ = [
    "ClusterModel",
    "CostModel",
    "NetworkModel",
    "RankReport",
    "ReadSettings",
    "SimulationConfig",
    "SimulationReport",
    "config_from_mapping",
    "simulate",
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
    try:
        import trio  # noqa: F401  (the simulation's event loop)
    except ImportError:
        raise ConfigurationError(
            "simulate() runs on trio, which is not installed: pip install 'litstream[simulate]'"
        ) from None
    from ._sim._dataset import prepare_dataset
    from ._sim._run import run_cluster

    if not isinstance(config, SimulationConfig):
        config = config_from_mapping(config)
    dataset = run_sync(prepare_dataset, config)
    return build_report(config, run_cluster(config, dataset))
