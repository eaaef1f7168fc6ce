"""``StreamingDataset``'s topology and lengths: rank and world size, items per rank and worker, plan arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core._distributed import DistributedEnv, WorkerEnv, detect_distributed, detect_worker
from ..read._shuffler import Shuffle, make_shuffler
from ..read.plan._plan import items_per_rank, worker_plan
from ._dataset_io import _inside_worker

if TYPE_CHECKING:
    from ..read._spec import ReadSpec
    from ..read.plan._pieces import ReadPlanArgs

__all__ = ["PlanMixin"]


class PlanMixin:
    """Rank, world size and lengths of a ``StreamingDataset`` (the ``_distributed`` its resume code uses)."""

    _parent_env: DistributedEnv | None
    _spec: ReadSpec
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
        return self._spec.resolved_drop_last(world_size)

    _shuffler: Shuffle | None = None

    @property
    def shuffler(self) -> Shuffle | None:
        """LitData's ``dataset.shuffler`` (``read/_shuffler.py``): ``None`` until the first ``len()`` or
        iteration, then a ``NoShuffle``/``FullShuffle``/``WindowShuffle`` for this dataset's plan; reset to
        ``None`` by ``set_shuffle``/``set_drop_last`` (or by assigning ``None``)."""
        return self._shuffler

    @shuffler.setter
    def shuffler(self, value: Shuffle | None) -> None:
        self._shuffler = value

    def _replace_order(self, **changes: Any) -> None:
        """Set ``shuffle`` / ``drop_last`` in the spec; a changed value drops the shuffler (made again on first
        use, as LitData's)."""
        if any(getattr(self._spec, name) != value for name, value in changes.items()):
            self._shuffler = None
        self._spec = self._spec.replace(**changes)

    def _ensure_shuffler(self) -> None:
        if self._shuffler is None:
            regions, chunk_bytes = self._plan_inputs()
            spec = self._spec
            self._shuffler = make_shuffler(
                spec.shuffle,
                regions,
                [end for _, end in regions],
                seed=spec.seed,
                drop_last=self._drop_last(self._distributed().world_size),
                item_window=spec.item_shuffle_window,
                shuffle_window=spec.shuffle_window,
                chunk_bytes=chunk_bytes,
                max_cache_size=spec.plan_cache_bytes,
            )

    def get_len(self, num_workers: int, batch_size: int) -> int:
        """Items this rank serves per epoch with ``num_workers`` workers and ``batch_size``."""
        env = self._distributed()
        regions, chunk_bytes = self._plan_inputs()
        self._ensure_shuffler()
        return items_per_rank(
            regions,
            rank=env.rank,
            world_size=env.world_size,
            num_workers=max(num_workers, 1),
            batch_size=batch_size,
            drop_last=self._drop_last(env.world_size),
            num_nodes=env.num_nodes,
            shuffle=self._spec.shuffle is not False,
            seed=self._spec.seed,
            epoch=self.current_epoch,
            chunk_bytes=chunk_bytes,
            max_cache_size=self._spec.plan_cache_bytes,
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
                shuffle=self._spec.shuffle is not False,
                seed=self._spec.seed,
                epoch=self.current_epoch,
                num_nodes=env.num_nodes,
                chunk_bytes=chunk_bytes,
                max_cache_size=self._spec.plan_cache_bytes,
            )
            out.append(sum(p.end - p.start for p in plan))
        return out

    def _plan_args(self, worker: WorkerEnv | None = None) -> ReadPlanArgs:
        env = self._distributed()
        worker = worker or detect_worker()
        return self._spec.plan_args(
            rank=env.rank,
            world_size=env.world_size,
            worker=worker.worker,
            num_workers=worker.num_workers,
            batch_size=self.batch_size,
            epoch=self.current_epoch,
            num_nodes=env.num_nodes,
        )
