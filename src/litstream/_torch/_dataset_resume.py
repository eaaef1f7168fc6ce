"""Checkpoints of ``StreamingDataset``: ``state_dict`` / ``load_state_dict`` and the resume plan.

A mixin kept apart from the facade so each module stays small; the meaning of every key and of
strict versus elastic resume is in ``read._resume``.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError
from ..read.plan._checkpoint import DatasetCheckpoint
from ..read.plan._litdata_state import from_litdata_state, is_litdata_state, same_order_window
from ..read.plan._resume import Level, ResumePlan, Topology, check_config, config_mismatches
from ..read.plan._session import resume_plan
from ..read.plan._subset import Selection
from ._selection import SelectionMixin

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .._core._distributed import DistributedEnv
    from ..read.cache._source_cache import CacheSettings

__all__ = ["ResumeMixin"]


class ResumeMixin(SelectionMixin):
    """Checkpoint methods of ``StreamingDataset`` (LitData's ``state_dict`` / ``load_state_dict``)."""

    num_canonical_nodes: int | None
    _force_override_state_dict: bool
    _cache_settings: CacheSettings | None
    batch_size: int

    if TYPE_CHECKING:

        def _distributed(self) -> DistributedEnv: ...

    # -- resume -----------------------------------------------------------------------------------
    def state_dict(
        self,
        num_samples_yielded: int,
        num_workers: int,
        batch_size: int,
        *,
        current_epoch: int | None = None,
        worker_samples_yielded: Sequence[int] | None = None,
        resume_levels: Sequence[Level] = (),
    ) -> dict[str, Any]:
        """Checkpoint of this rank's position in the current epoch (LitData's keys plus three).

        :class:`StreamingDataLoader` fills every argument; called by hand, only the first three are
        needed and the per-worker split is then derived as for a LitData checkpoint.

        Args:
            num_samples_yielded: Samples this rank delivered at the current level of the epoch
                (since the epoch began, or since the last elastic resume).
            num_workers: DataLoader workers (0 is stored as 1).
            batch_size: Loader batch size.
            current_epoch: The 1-based epoch the counts belong to. Default: this dataset's epoch.
            worker_samples_yielded: Samples delivered per worker of this rank at the current level.
            resume_levels: Levels closed by elastic resumes earlier in this epoch, oldest first.

        Returns:
            ``read._checkpoint.DatasetCheckpoint.to_state()`` (plain values, picklable, JSON-compatible);
            see ``read._resume`` for the meaning of ``rank``, ``worker_samples_yielded`` and
            ``resume_levels``.
        """
        env = self._distributed()
        if worker_samples_yielded is not None:  # LitData's count: batch_size per batch, short ones too
            batch = max(batch_size, 1)
            num_samples_yielded = batch * sum(-(-c // batch) for c in worker_samples_yielded)
        return DatasetCheckpoint(
            config=self._state_config(),
            num_samples_yielded=num_samples_yielded,
            num_workers=max(num_workers, 1),
            batch_size=batch_size,
            current_epoch=self.current_epoch if current_epoch is None else current_epoch,
            world_size=env.world_size,
            rank=env.rank,
            worker_samples_yielded=None if worker_samples_yielded is None else tuple(worker_samples_yielded),
            resume_levels=tuple(resume_levels),
        ).to_state()

    def _state_config(self) -> dict[str, Any]:
        """``_config()`` plus the keys LitData 0.2.76 writes into every dataset state.

        ``subsampled_files`` / ``region_of_interest`` (the whole dataset when nothing is selected),
        ``cache_dir_path``, ``num_canonical_nodes`` and ``initial_num_nodes``; the LitData spelling
        of the other values is ``read._checkpoint.litdata_spelling``'s.
        """
        config = self._config()
        if "region_of_interest" not in config:
            source = self._get_source()
            config.update(Selection.full(source.chunk_sizes).state([c.filename for c in source.index.chunks]))
        saved = self._resume_state or {}
        settings = self._cache_settings
        config["cache_dir_path"] = None if settings is None else settings.cache_dir
        config["num_canonical_nodes"] = self.num_canonical_nodes or saved.get("num_canonical_nodes")
        config["initial_num_nodes"] = saved.get("initial_num_nodes") or max(self._distributed().num_nodes, 1)
        return config

    def _config(self) -> dict[str, Any]:
        config = self._spec.config()
        config.update(self._selection_config())
        return config

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict`: the next iteration serves only the rest of that epoch.

        The checkpoint may come from another world size, worker count or batch size (elastic
        resume): the samples not yet served are then spread over the new topology, each served
        once. A checkpoint taken at the end of an epoch makes the next iteration the next epoch.
        A state saved by LitData 0.2.71-0.2.76 is accepted too and resumes where LitData would
        (``read._litdata_state`` says which LitData states are refused).

        Raises:
            ConfigurationError: the checkpoint was taken with a different ``shuffle``, ``seed``,
                ``drop_last``, input or item loader (the message names the key, both values and the
                fix), or its counts exceed what its epoch holds (raised on first use).
        """
        if is_litdata_state(state):  # saved by LitData: see read._litdata_state
            state = from_litdata_state(state, self._config(), layout=self._litdata_layout)
        elif state.get("shuffle") in (True, "full") and "item_shuffle_window" not in state:
            # saved before checkpoints recorded it (a full in-chunk permutation): fine if no chunk is split
            window = same_order_window(state, self._config(), self._litdata_layout()[0])
            state = {**state, "item_shuffle_window": window}
        state = self._override(state)
        check_config(state, self._config())
        if not self._force_override_state_dict:
            self._check_selection(state)
        self._resume_state = dict(state)
        self._resume = None
        self.current_epoch = max(int(state.get("current_epoch", 1)), 1)

    def _override(self, state: Mapping[str, Any]) -> Mapping[str, Any]:
        """With ``force_override_state_dict``, ``state`` with this dataset's value of each mismatching setting."""
        if not self._force_override_state_dict:
            return state
        current = self._config()
        fixed = dict(state)
        for key, message in config_mismatches(state, current):
            warnings.warn(f"force_override_state_dict: {message.split(';')[0]}; using the current value", stacklevel=4)
            fixed[key] = current[key]
        return fixed

    def _litdata_layout(self) -> tuple[Sequence[int], Sequence[tuple[int, int]] | None]:
        sizes = self._get_source().chunk_sizes
        selection = self._selected()
        return (sizes, None) if selection is None else (selection.sizes(sizes), selection.regions)

    def _resume_plan(self, num_workers: int) -> ResumePlan | None:
        """The loaded checkpoint resolved for this rank, ``num_workers`` and ``self.batch_size``."""
        if self._resume_state is None:
            return None
        env = self._distributed()
        if env.num_nodes > 1:
            raise ConfigurationError(
                f"resuming from a checkpoint with num_nodes={env.num_nodes} is not supported yet; resume on one "
                "node (unset NNODES) or start the epoch without load_state_dict()"
            )
        topology = Topology(env.world_size, max(num_workers, 1), self.batch_size)
        plan = self._resume
        if plan is None or plan.topology != topology or plan.rank != env.rank:
            plan = resume_plan(
                self._resume_state,
                self._get_source(),
                self._selected(),
                rank=env.rank,
                topology=topology,
                shuffle_window=self._spec.shuffle_window,
            )
            self._resume = plan
        return plan

    def _epoch_served(self, epoch: int, own: Sequence[int], levels: Sequence[Level], num_workers: int) -> None:
        """Called by ``StreamingDataLoader`` when an epoch ends; a single dataset keeps nothing across epochs."""

    def _clear_resume(self) -> None:
        self._resume_state = None
        self._resume = None
