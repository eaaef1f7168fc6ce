"""A dataset reader's checkpoints: :func:`dataset_state` writes one (``StreamingDataset.state_dict``);
``DatasetResume`` holds a loaded one, checked once, and its plan for one topology.

:meth:`DatasetResume.load` checks a ``StreamingDataset.state_dict()`` (or LitData 0.2.71-0.2.76's) against the
reader it resumes and keeps it until the epoch it names ends; :meth:`DatasetResume.position` resolves it for this
rank, worker count and batch size. The meaning of every key and of strict versus elastic resume is
``read/plan/_resume.py``'s; LitData's states are converted by ``read/plan/_litdata_state.py``.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError
from .plan._checkpoint import DatasetCheckpoint
from .plan._litdata_state import from_litdata_state, is_litdata_state, same_order_window
from .plan._resume import ResumePlan, Topology
from .plan._resume_config import check_config, config_mismatches
from .plan._session import resume_plan
from .plan._subset import Selection, check_selection_state
from .source._versions import VERSION_KEY

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._reader import DatasetReader
    from .plan._resume_types import Level

__all__ = ["DatasetResume", "dataset_state", "state_config"]


class DatasetResume:
    """The checkpoint a reader resumes from.

    Attributes:
        saved: The loaded state (plain values), ``None`` when none is pending.
    """

    def __init__(self) -> None:
        self.saved: dict[str, Any] | None = None
        self._plan: ResumePlan | None = None  # per process: ``saved`` resolved for one rank and topology

    def __getstate__(self) -> dict[str, Any]:
        return {"saved": self.saved}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.saved, self._plan = state["saved"], None

    def clear(self) -> None:
        """Forget the loaded checkpoint (its epoch was served or abandoned)."""
        self.saved = self._plan = None

    def load(self, reader: DatasetReader, state: Mapping[str, Any]) -> int:
        """Check ``state`` against ``reader`` (opened on the version it was saved on) and keep it; returns the
        epoch to resume in.

        Raises:
            ConfigurationError: a checkpoint taken with another ``shuffle``, ``seed``, ``drop_last``, input or
                item loader (unless ``force_override_state_dict``: then it warns), or whose counts its epoch
                cannot hold.
        """
        if is_litdata_state(state):  # saved by LitData: see read/plan/_litdata_state.py
            state = from_litdata_state(state, reader.config(), layout=reader.layout)
        elif state.get("shuffle") in (True, "full") and "item_shuffle_window" not in state:
            # saved before checkpoints recorded it (a full in-chunk permutation): fine if no chunk is split
            window = same_order_window(state, reader.config(), reader.layout()[0])
            state = {**state, "item_shuffle_window": window}
        if reader.force_override_state_dict:  # the current value of each mismatching setting wins
            current, fixed = reader.config(), dict(state)
            for key, message in config_mismatches(state, current):
                warnings.warn(
                    f"force_override_state_dict: {message.split(';')[0]}; using the current value", stacklevel=5
                )
                fixed[key] = current[key]
            state = fixed
        check_config(state, reader.config())
        if not reader.force_override_state_dict and not (reader.whole() and "region_of_interest" not in state):
            source = reader.source()
            chosen = reader.selected() or Selection.full(source.chunk_sizes)
            check_selection_state(state, chosen, source.chunk_sizes, [c.filename for c in source.index.chunks])
        self.saved, self._plan = dict(state), None
        return max(int(state.get("current_epoch", 1)), 1)

    def position(self, reader: DatasetReader, num_workers: int) -> ResumePlan | None:
        """The loaded checkpoint resolved for ``reader``'s rank, ``num_workers`` and its batch size.

        Raises:
            ConfigurationError: a resume on more than one node.
        """
        if self.saved is None:
            return None
        env = reader.distributed()
        if env.num_nodes > 1:
            raise ConfigurationError(
                f"resuming from a checkpoint with num_nodes={env.num_nodes} is not supported yet; resume on one "
                "node (unset NNODES) or start the epoch without load_state_dict()"
            )
        topology = Topology(env.world_size, max(num_workers, 1), reader.batch_size)
        plan = self._plan
        if plan is None or plan.topology != topology or plan.rank != env.rank:
            plan = resume_plan(
                self.saved, reader.source(), reader.selected(), rank=env.rank, topology=topology,
                shuffle_window=reader.spec.shuffle_window,
            )  # fmt: skip
            self._plan = plan
        return plan


def state_config(reader: DatasetReader) -> dict[str, Any]:
    """``reader.config()`` plus the keys LitData 0.2.76 writes into every dataset state: ``subsampled_files`` /
    ``region_of_interest`` (the whole dataset when nothing is selected), ``cache_dir_path``,
    ``num_canonical_nodes`` and ``initial_num_nodes``; and the pinned version."""
    config = reader.config()
    source = reader.source()  # opened, so its version is pinned: a resume serves the same one (docs/versions.md)
    if "region_of_interest" not in config:
        config.update(Selection.full(source.chunk_sizes).state([c.filename for c in source.index.chunks]))
    saved = reader.resume.saved or {}
    settings = reader.spec.cache
    config["cache_dir_path"] = None if settings is None else settings.cache_dir
    config["num_canonical_nodes"] = reader.num_canonical_nodes or saved.get("num_canonical_nodes")
    config["initial_num_nodes"] = saved.get("initial_num_nodes") or max(reader.distributed().num_nodes, 1)
    pin = reader.spec.version
    config[VERSION_KEY] = None if pin is None else pin.digest
    return config


def dataset_state(
    reader: DatasetReader, num_samples_yielded: int, num_workers: int, batch_size: int, current_epoch: int | None,
    worker_samples_yielded: Sequence[int] | None, resume_levels: Sequence[Level],
) -> dict[str, Any]:  # fmt: skip
    """``StreamingDataset.state_dict``: a ``DatasetCheckpoint.to_state()`` of ``reader``'s rank's position."""
    env = reader.distributed()
    if worker_samples_yielded is not None:  # LitData's count: batch_size per batch, short ones too
        batch = max(batch_size, 1)
        num_samples_yielded = batch * sum(-(-c // batch) for c in worker_samples_yielded)
    return DatasetCheckpoint(
        config=state_config(reader), num_samples_yielded=num_samples_yielded, num_workers=max(num_workers, 1),
        batch_size=batch_size, current_epoch=reader.current_epoch if current_epoch is None else current_epoch,
        world_size=env.world_size, rank=env.rank, resume_levels=tuple(resume_levels),
        worker_samples_yielded=None if worker_samples_yielded is None else tuple(worker_samples_yielded),
    ).to_state()  # fmt: skip
