"""Checkpoints of ``CombinedStreamingDataset`` / ``ParallelStreamingDataset``: :class:`CompositeResume` owns a
wrapper's checkpoint state (the loaded entry, its resume plan, where a cycling Parallel's next epochs start)
and makes its ``state_dict``; :func:`loader_state` gives LitData's loader layout and :func:`checked_state` checks
a state. They read the wrapper through the :class:`~litstream.read._face.Composite` protocol and write nothing
of it (the logic is ``read/plan/_compose_resume.py`` and ``read/plan/_session_compose.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError
from ._dataset_resume import state_config
from .plan._checkpoint import CompositeCheckpoint, CycleCarry
from .plan._compose_resume import CompositePlan, check_composite_state, resolve_composite
from .plan._resume_types import Level, Topology
from .plan._session_compose import composite_checkpoint
from .source._versions import VERSION_KEY

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._face import Composite

__all__ = ["CompositeResume", "checked_state", "loader_state"]


class CompositeResume:
    """A Combined / Parallel wrapper's checkpoint state.

    Attributes:
        saved: The ``"composite"`` entry of a loaded checkpoint, until its epoch ends (``None``: none pending).
        carry: Where a cycling Parallel's next epochs start (``None``: the default bases).
    """

    def __init__(self) -> None:
        self.saved: dict[str, Any] | None = None
        self.carry: CycleCarry | None = None
        self._plan: CompositePlan | None = None  # ``saved`` resolved for one rank and topology

    def clear(self) -> None:
        """Forget the loaded checkpoint (its epoch was served or abandoned)."""
        self.saved = self._plan = None

    def carry_for(self, cycles: bool, epoch: int, topology: Topology) -> tuple[int, ...] | None:
        """The cycle bases of ``epoch`` on ``topology`` when known (``cycles``: a cycling Parallel), else ``None``."""
        carry = self.carry
        return None if carry is None or not cycles else carry.at(epoch, topology)

    def state(
        self, face: Composite, num_samples_yielded: int, num_workers: int, batch_size: int, current_epoch: int | None,
        worker_samples_yielded: Sequence[int] | None, resume_levels: Sequence[Level],
    ) -> dict[str, Any]:  # fmt: skip
        """``CombinedStreamingDataset.state_dict`` / ``ParallelStreamingDataset.state_dict`` (arguments and result
        there): LitData's member states plus a ``CompositeCheckpoint.to_state()`` of this rank's position."""
        env = face._env()
        epoch = face.current_epoch if current_epoch is None else max(current_epoch, 1)
        levels = tuple(resume_levels)
        topology = Topology(env.world_size, max(num_workers, 1), batch_size)
        first = levels[0].topology if levels else topology
        if self.saved is not None and self.saved.get("current_epoch") == epoch:
            raw = self.saved.get("carry")
            bases = None if raw is None else tuple(raw)
        else:
            bases = self.carry_for(face._cycles(), epoch, first)
        return composite_checkpoint(
            face._composer(),
            kind=face._kind,
            config=face._config(),
            members=[state_config(d._reader) for d in face._datasets],
            epoch=epoch,
            rank=env.rank,
            topology=topology,
            levels=levels,
            bases=bases,
            own=worker_samples_yielded,
            num_samples_yielded=num_samples_yielded,
        ).to_state()

    def load(self, face: Composite, state: Mapping[str, Any]) -> int:
        """Check ``state`` (see ``load_state_dict``) and keep its entry for the next epoch; each member is pinned
        to the version its state was saved on first (the weights and checks count those). Returns the epoch the
        wrapper (and each member) resumes in; then call :meth:`settle`.

        Raises:
            ConfigurationError: as :func:`checked_state`.
            VersionNotFoundError: a member's saved-on version is no longer kept.
        """
        for i, member in enumerate(face._datasets):
            saved = state.get(str(i))
            if isinstance(saved, Mapping):
                member._reader.resume_version(saved.get(VERSION_KEY))
        composite = checked_state(face, state)
        self.saved, self._plan, self.carry = dict(composite), None, None
        return max(int(composite.get("current_epoch", 1)), 1)

    def settle(self, face: Composite) -> None:
        """After :meth:`load`, once the wrapper is in the loaded epoch: where a cycling Parallel continues."""
        if self.saved is None or not face._cycles():
            return
        saved = CompositeCheckpoint.from_state(self.saved)
        if saved.carry is not None:
            self.carry = CycleCarry(face.current_epoch, saved.first_topology, saved.carry)
        plan = self.plan(face, face.num_workers)
        if plan is not None and plan.finished:
            self.carry = plan.following

    def plan(self, face: Composite, num_workers: int) -> CompositePlan | None:
        """The loaded checkpoint resolved for this rank, ``num_workers`` and the wrapper's batch size."""
        if self.saved is None:
            return None
        env = face._env()
        topology = face._topology(num_workers)
        plan = self._plan
        if plan is None or plan.topology != topology or plan.rank != env.rank:
            plan = resolve_composite(face._composer(), self.saved, rank=env.rank, topology=topology)
            self._plan = plan
        return plan


def loader_state(
    face: Composite, state: Mapping[str, Any], *, current_epoch: int, latest_worker_idx: int
) -> dict[str, Any]:
    """``StreamingDataLoader.state_dict()`` of this wrapper from its :meth:`state_dict`, in LitData's layout.

    LitData 0.2.76's keys: ``"dataset"`` holds only the member states, ``"num_samples_yielded"``
    is ``{worker: [samples of each member]}`` (workers that delivered nothing are absent, as in
    LitData) and a Parallel's ``"num_cycles"`` is ``{worker: [cycles of each member]}``, with
    ``"num_samples_yielded"`` then counting within the current cycle. litstream's own entry,
    ``"composite"``, sits beside them (LitData ignores it; ``load_state_dict`` reads it).
    """
    members = [state[str(i)] for i in range(len(face._datasets))]
    composite = dict(state["composite"])
    rows = [list(row) for row in zip(*(m["worker_samples_yielded"] for m in members), strict=True)]
    out: dict[str, Any] = {
        "dataset": {str(i): m for i, m in enumerate(members)},
        "current_epoch": current_epoch,
        "latest_worker_idx": latest_worker_idx,
    }
    if face._kind == "parallel":
        rows, cycles = _cycle_rows(face, rows, composite)
        out["num_cycles"] = {w: cycles[w] for w, row in enumerate(rows) if any(row) or any(cycles[w])}
        out["num_samples_yielded"] = {w: row for w, row in enumerate(rows) if w in out["num_cycles"]}
    else:
        out["num_samples_yielded"] = {w: row for w, row in enumerate(rows) if any(row)}
    out["composite"] = composite
    return out


def _cycle_rows(
    face: Composite, rows: list[list[int]], composite: Mapping[str, Any]
) -> tuple[list[list[int]], list[list[int]]]:
    """Per worker, each member's samples in its current cycle and its completed cycles (LitData's counting:
    a member cycles when a sample is asked of it after its last one)."""
    if not face._cycles():
        return rows, [[0] * len(row) for row in rows]
    workers, batch = max(int(composite["num_workers"]), 1), max(int(composite["batch_size"]), 1)
    rank = int(composite.get("rank", 0))
    carry = composite.get("carry")
    lengths = [d.worker_lengths(workers, batch) for d in face._datasets]
    samples, cycles = [], []
    for w, row in enumerate(rows):
        base = int(carry[rank * workers + w]) if carry and len(carry) > rank * workers + w else 0
        here, turns = [], []
        for i, done in enumerate(row):
            length, total = lengths[i][w], base + done
            turn = (total - 1) // length if length > 0 and total > 0 else 0
            here.append(total - turn * length)
            turns.append(turn)
        samples.append(here)
        cycles.append(turns)
    return samples, cycles


def checked_state(face: Composite, state: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``"composite"`` entry of ``state`` once checked against this wrapper (see ``load_state_dict``)."""
    composite, problems = check_composite_state(
        state,
        kind=face._kind,
        wrapper=type(face).__name__,
        config=face._config(),
        member_configs=[d._config() for d in face._datasets],
    )
    if problems:
        if not face._force_override_state_dict:
            raise ConfigurationError(
                f"{problems[0]}; build it with the checkpoint's settings, or pass force_override_state_dict=True "
                "to resume with the current ones"
            )
        for problem in problems:
            warnings.warn(f"force_override_state_dict: {problem}; using the current value", stacklevel=4)
    return composite
