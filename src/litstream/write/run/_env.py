"""The ``DATA_OPTIMIZER_*`` environment that LitData users set on multi-node jobs, read through ``_environ.environ``.

A SLURM, torchrun or Kubernetes job of N nodes runs the same script on every node with
``DATA_OPTIMIZER_NUM_NODES=N`` and ``DATA_OPTIMIZER_NODE_RANK=0..N-1``; each node writes its share of
one dataset and the last node merges the per-node indexes (see :mod:`._nodes`). Workers get
``DATA_OPTIMIZER_GLOBAL_RANK`` and ``DATA_OPTIMIZER_NUM_WORKERS``, as in LitData, so user code can ask
which shard it is running. The table of variables is in ``docs/environment.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._core._environ import environ, export
from ..._core._errors import ConfigurationError

__all__ = ["OptimizerEnv", "optimizer_env", "set_worker_env", "worker_env"]

DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class OptimizerEnv:
    """Where this process stands in a (possibly multi-node) optimize job.

    Attributes:
        num_nodes: Machines writing the same dataset (``DATA_OPTIMIZER_NUM_NODES``, default 1).
        node_rank: This machine's rank, ``0 <= node_rank < num_nodes`` (``DATA_OPTIMIZER_NODE_RANK``, default 0).
        timeout: Seconds to wait, as in LitData's ``DATA_OPTIMIZER_TIMEOUT`` (default 300): for the next
            item of a queue input before treating the queue as finished, and for the other nodes' indexes
            in the last node's merge.
    """

    num_nodes: int = 1
    node_rank: int = 0
    timeout: float = DEFAULT_TIMEOUT

    @property
    def is_last_node(self) -> bool:
        """True on the node that writes the final ``index.json`` (``node_rank == num_nodes - 1``)."""
        return self.node_rank == self.num_nodes - 1


def _int_var(name: str, raw_value: str | None, default: int, minimum: int) -> int:
    raw = (raw_value or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(
            f"environment variable {name}={raw!r} is not an integer; unset it or use an int"
        ) from None
    if value < minimum:
        raise ConfigurationError(f"environment variable {name}={raw!r} must be >= {minimum}")
    return value


def optimizer_env() -> OptimizerEnv:
    """Read ``DATA_OPTIMIZER_NUM_NODES``, ``DATA_OPTIMIZER_NODE_RANK`` and ``DATA_OPTIMIZER_TIMEOUT``.

    ``DATA_OPTIMIZER_NUM_NODES=0`` (LitData's "not inside a launched job") counts as 1.

    Raises:
        ConfigurationError: a value is not a number, or the node rank is not below the node count.
    """
    env = environ()
    num_nodes = max(_int_var("DATA_OPTIMIZER_NUM_NODES", env.data_optimizer_num_nodes, 1, 0), 1)
    node_rank = _int_var("DATA_OPTIMIZER_NODE_RANK", env.data_optimizer_node_rank, 0, 0)
    if node_rank >= num_nodes:
        raise ConfigurationError(
            f"DATA_OPTIMIZER_NODE_RANK={node_rank} must be below DATA_OPTIMIZER_NUM_NODES={num_nodes}; "
            "give every node a rank 0..num_nodes-1"
        )
    raw_timeout = (env.data_optimizer_timeout or "").strip()
    timeout = DEFAULT_TIMEOUT
    if raw_timeout:
        try:
            timeout = float(raw_timeout)
        except ValueError:
            raise ConfigurationError(
                f"environment variable DATA_OPTIMIZER_TIMEOUT={raw_timeout!r} is not a number of seconds"
            ) from None
        if timeout <= 0:
            raise ConfigurationError(f"DATA_OPTIMIZER_TIMEOUT={raw_timeout!r} must be a positive number of seconds")
    return OptimizerEnv(num_nodes=num_nodes, node_rank=node_rank, timeout=timeout)


def set_worker_env(global_rank: int, num_workers: int) -> None:
    """Export ``DATA_OPTIMIZER_GLOBAL_RANK`` / ``DATA_OPTIMIZER_NUM_WORKERS`` in a worker, as LitData does."""
    export(worker_env(global_rank, num_workers))


def worker_env(global_rank: int, num_workers: int) -> dict[str, str]:
    """``DATA_OPTIMIZER_GLOBAL_RANK`` and ``DATA_OPTIMIZER_NUM_WORKERS`` for one optimize worker (as LitData)."""
    return {"DATA_OPTIMIZER_GLOBAL_RANK": str(global_rank), "DATA_OPTIMIZER_NUM_WORKERS": str(num_workers)}
