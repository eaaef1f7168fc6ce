"""``StreamingDataset``'s topology and lengths: rank and world size, items per rank and worker, plan arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._dataset_io import _inside_worker
from ._distributed import DistributedEnv, detect_distributed, detect_worker
from .read._core import ReadPlanArgs, ShuffleMode
from .read._plan import items_per_rank, worker_plan

__all__ = ["PlanMixin"]


class PlanMixin:
    """Rank, world size and lengths of a ``StreamingDataset`` (the ``_distributed`` its resume code uses)."""

    _parent_env: DistributedEnv | None
    drop_last: bool | None
    shuffle: ShuffleMode
    shuffle_window: int
    _item_shuffle_window: int
    seed: int
    current_epoch: int
    batch_size: int

    if TYPE_CHECKING:

        def _plan_inputs(self) -> tuple[list[tuple[int, int]], list[int]]: ...

    def _pin_distributed(self) -> None:
        """Record this process's rank and world size for the DataLoader workers it is about to start."""
        self._parent_env = detect_distributed()

    def _distributed(self) -> DistributedEnv:
        """Rank and world size: in a DataLoader worker, those of the process that started it."""
        if self._parent_env is not None and _inside_worker():
            return self._parent_env
        return detect_distributed()

    def _drop_last(self, world_size: int) -> bool:
        return (world_size > 1) if self.drop_last is None else self.drop_last

    def get_len(self, num_workers: int, batch_size: int) -> int:
        """Items this rank serves per epoch with ``num_workers`` workers and ``batch_size``."""
        env = self._distributed()
        regions, chunk_bytes = self._plan_inputs()
        return items_per_rank(
            regions,
            rank=env.rank,
            world_size=env.world_size,
            num_workers=max(num_workers, 1),
            batch_size=batch_size,
            drop_last=self._drop_last(env.world_size),
            num_nodes=env.num_nodes,
            shuffle=self.shuffle is not False,
            seed=self.seed,
            epoch=self.current_epoch,
            chunk_bytes=chunk_bytes,
        )

    def worker_lengths(self, num_workers: int, batch_size: int) -> list[int]:
        """Items each worker of this rank serves per epoch (index = worker id)."""
        env = self._distributed()
        regions, chunk_bytes = self._plan_inputs()
        out = []
        for worker in range(max(num_workers, 1)):
            plan = worker_plan(
                regions,
                rank=env.rank,
                world_size=env.world_size,
                worker=worker,
                num_workers=max(num_workers, 1),
                batch_size=batch_size,
                drop_last=self._drop_last(env.world_size),
                shuffle=self.shuffle is not False,
                seed=self.seed,
                epoch=self.current_epoch,
                num_nodes=env.num_nodes,
                chunk_bytes=chunk_bytes,
            )
            out.append(sum(p.end - p.start for p in plan))
        return out

    def _plan_args(self) -> ReadPlanArgs:
        env = self._distributed()
        worker = detect_worker()
        return ReadPlanArgs(
            rank=env.rank,
            world_size=env.world_size,
            worker=worker.worker,
            num_workers=worker.num_workers,
            batch_size=self.batch_size,
            drop_last=self._drop_last(env.world_size),
            shuffle=self.shuffle,
            shuffle_window=self.shuffle_window,
            seed=self.seed,
            epoch=self.current_epoch,
            num_nodes=env.num_nodes,
            item_shuffle_window=self._item_shuffle_window,
        )
