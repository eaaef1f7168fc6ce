"""Where this process sits: rank and world size, DataLoader worker id and count.

The environment is read through ``_environ.environ``. Rank and world size come from ``torch.distributed`` when it
is initialised, else from ``WORLD_SIZE`` and ``GLOBAL_RANK`` (LitData's names) or ``RANK``, else a
single process. The node count comes from ``NNODES``, else ``world_size // CUDA devices`` when
CUDA is present, else 1. They are read when iteration starts, not at construction.

torch is consulted only once something has imported it: ``torch.distributed`` cannot be initialised,
nor a DataLoader worker be running, in a process that never imported torch (so ``astream`` alone
never pays for importing it).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ._environ import environ

__all__ = ["DistributedEnv", "WorkerEnv", "detect_distributed", "detect_worker", "in_worker"]


@dataclass(frozen=True)
class DistributedEnv:
    rank: int
    world_size: int
    num_nodes: int = 1


@dataclass(frozen=True)
class WorkerEnv:
    worker: int
    num_workers: int


def detect_distributed() -> DistributedEnv:
    """Rank and world size of this process (see the module docstring)."""
    if "torch" in sys.modules:
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                world = dist.get_world_size()
                return DistributedEnv(dist.get_rank(), world, _num_nodes(world))
        except ImportError:  # pragma: no cover - torch is a dependency
            pass
    env = environ()
    world = max(int(env.world_size or "1"), 1)
    rank = int(env.global_rank or env.rank or "0")
    return DistributedEnv(rank, world, _num_nodes(world))


def _num_nodes(world_size: int) -> int:
    """``NNODES`` if set, else ``world_size // cuda devices`` with CUDA, else 1 (LitData's rule)."""
    nnodes = environ().nnodes
    if nnodes is not None:
        return max(int(nnodes), 1)
    if world_size <= 1:  # one process is one node, whatever the device count
        return 1
    try:
        import torch

        devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:  # pragma: no cover
        devices = 0
    return max(world_size // devices, 1) if devices else 1


def detect_worker() -> WorkerEnv:
    """This DataLoader worker's id and the worker count (0 workers count as 1)."""
    if "torch" not in sys.modules:  # no DataLoader worker runs without torch
        return WorkerEnv(0, 1)
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if info is None:
        return WorkerEnv(0, 1)
    return WorkerEnv(info.id, info.num_workers)


def in_worker() -> bool:
    """Whether this process is a torch DataLoader worker."""
    if "torch" not in sys.modules:
        return False
    from torch.utils.data import get_worker_info

    return get_worker_info() is not None
