"""Where this process sits: rank and world size, DataLoader worker id and count.

The environment is read in one place. Rank and world size come from ``torch.distributed`` when it
is initialised, else from ``WORLD_SIZE`` and ``GLOBAL_RANK`` (LitData's names) or ``RANK``, else a
single process. They are read when iteration starts, not at construction.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DistributedEnv", "WorkerEnv", "detect_distributed", "detect_worker"]


@dataclass(frozen=True)
class DistributedEnv:
    rank: int
    world_size: int


@dataclass(frozen=True)
class WorkerEnv:
    worker: int
    num_workers: int


def detect_distributed() -> DistributedEnv:
    """Rank and world size of this process (see the module docstring)."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return DistributedEnv(dist.get_rank(), dist.get_world_size())
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("GLOBAL_RANK", os.environ.get("RANK", "0")))
    return DistributedEnv(rank, max(world, 1))


def detect_worker() -> WorkerEnv:
    """This DataLoader worker's id and the worker count (0 workers count as 1)."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if info is None:
        return WorkerEnv(0, 1)
    return WorkerEnv(info.id, info.num_workers)
