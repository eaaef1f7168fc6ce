"""``StreamingDataLoader``: torch's ``DataLoader`` for a :class:`StreamingDataset`, with resume.

It pushes ``batch_size``, ``num_workers``, ``shuffle`` and ``drop_last`` into the dataset (torch's
own ``drop_last`` is never set: the dataset deals whole batches to workers), counts the samples it
hands out, and saves/restores that position with ``state_dict()`` / ``load_state_dict()``.

Worker start method: when ``num_workers > 0`` and no ``multiprocessing_context`` is given, the
platform default is used unless this process has used obstore (which hangs in forked children),
in which case ``forkserver`` (or ``spawn``) is chosen.
"""

from __future__ import annotations

import math
import multiprocessing
from typing import TYPE_CHECKING, Any

from torch.utils.data import DataLoader

from ._dataset import StreamingDataset
from ._errors import ConfigurationError
from .storage import _store

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["StreamingDataLoader"]


class StreamingDataLoader(DataLoader[Any]):
    """A ``torch.utils.data.DataLoader`` over a :class:`StreamingDataset` that can resume mid-epoch.

    Args:
        dataset: The :class:`StreamingDataset` to load.
        batch_size: Samples per batch (default 1).
        num_workers: Worker processes (default 0: load in this process).
        shuffle: If not ``None``, overrides the dataset's ``shuffle``.
        drop_last: If not ``None``, overrides the dataset's ``drop_last``.
        collate_fn: Batch builder (default torch's ``default_collate``).
        **kwargs: Passed to ``torch.utils.data.DataLoader`` (``pin_memory``, ``prefetch_factor``,
            ``multiprocessing_context``, ``persistent_workers``, ...).

    Raises:
        ConfigurationError: ``dataset`` is not a ``StreamingDataset``, or a bad argument.
    """

    def __init__(
        self,
        dataset: StreamingDataset,
        batch_size: int = 1,
        num_workers: int = 0,
        shuffle: bool | None = None,
        drop_last: bool | None = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(dataset, StreamingDataset):
            raise ConfigurationError(
                f"StreamingDataLoader needs a StreamingDataset, got {type(dataset).__name__}; "
                "use torch.utils.data.DataLoader for other datasets"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ConfigurationError(f"num_workers must be an int >= 0, got {num_workers!r}")
        if shuffle is not None:
            dataset.set_shuffle(shuffle)
        if drop_last is not None:
            dataset.set_drop_last(drop_last)
        dataset.set_batch_size(batch_size)
        dataset.set_num_workers(num_workers)
        if num_workers > 0 and kwargs.get("multiprocessing_context") is None and _store.obstore_used():
            methods = multiprocessing.get_all_start_methods()
            kwargs["multiprocessing_context"] = "forkserver" if "forkserver" in methods else "spawn"
        super().__init__(
            dataset, batch_size=batch_size, num_workers=num_workers, collate_fn=collate_fn, **kwargs
        )
        self.current_epoch = 0
        self.num_samples_yielded = 0
        self.latest_worker_idx = 0
        self._restoring = False

    def __len__(self) -> int:
        """Batches per epoch on this rank: each worker's items split into batches (the last may be short)."""
        dataset: StreamingDataset = self.dataset  # type: ignore[assignment]
        assert self.batch_size is not None
        lengths = dataset.worker_lengths(self.num_workers, self.batch_size)
        return sum(math.ceil(n / self.batch_size) for n in lengths)

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        dataset: StreamingDataset = self.dataset  # type: ignore[assignment]
        if not self._restoring:
            self.current_epoch += 1
            self.num_samples_yielded = 0
            self.latest_worker_idx = 0
            dataset.set_epoch(self.current_epoch)
        workers = max(self.num_workers, 1)
        completed = False
        for batch in super().__iter__():
            self.num_samples_yielded += _batch_len(batch, self.batch_size or 1)
            self.latest_worker_idx = (self.latest_worker_idx + 1) % workers
            yield batch
        completed = True
        if completed:
            self._restoring = False
            dataset._resume = None

    def state_dict(self) -> dict[str, Any]:
        """The position in the current epoch: LitData's keys (``dataset``, ``current_epoch``,
        ``num_samples_yielded``, ``latest_worker_idx``)."""
        dataset: StreamingDataset = self.dataset  # type: ignore[assignment]
        return {
            "dataset": dataset.state_dict(self.num_samples_yielded, self.num_workers, self.batch_size or 1),
            "current_epoch": self.current_epoch,
            "num_samples_yielded": self.num_samples_yielded,
            "latest_worker_idx": self.latest_worker_idx,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`: the next ``iter()`` yields exactly the rest of that epoch, or
        starts the next epoch when the checkpoint was taken at the end of one.

        Raises:
            ConfigurationError: the checkpoint does not match this loader's dataset or topology.
        """
        dataset: StreamingDataset = self.dataset  # type: ignore[assignment]
        saved = state["dataset"]
        if saved["num_workers"] != max(self.num_workers, 1) or saved["batch_size"] != self.batch_size:
            raise ConfigurationError(
                f"checkpoint was taken with num_workers={saved['num_workers']}, batch_size={saved['batch_size']}; "
                f"this loader has num_workers={self.num_workers}, batch_size={self.batch_size}. Resume with the "
                "same values (elastic resume is not supported yet)"
            )
        self.current_epoch = state["current_epoch"]
        self.num_samples_yielded = state["num_samples_yielded"]
        self.latest_worker_idx = state["latest_worker_idx"]
        total = dataset.get_len(self.num_workers, self.batch_size or 1)
        if 0 < self.num_samples_yielded < total:
            dataset.load_state_dict(saved)
            self._restoring = True
        else:
            # Taken at an epoch boundary: the next iter() starts the following epoch afresh.
            self._restoring = False
            dataset._resume = None


def _batch_len(batch: Any, default: int) -> int:
    import torch

    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, dict) and batch:
        return _batch_len(next(iter(batch.values())), default)
    if isinstance(batch, (list, tuple)) and batch:
        return _batch_len(batch[0], default)
    return default
