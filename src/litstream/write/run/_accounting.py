"""Every input is accounted for: a run succeeds only when each job finished exactly the inputs it was given.

Each job returns a ``WorkerSummary`` (``write/_summary.py``); :func:`check_accounting` compares it with the job
(for a queue input: the workers together finished every item this process forwarded). A shortfall is a
:class:`~litstream.WorkerError` naming the worker and its inputs, never a shorter dataset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._core._errors import WorkerError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._summary import WorkerSummary

__all__ = ["check_accounting", "describe_positions"]


def describe_positions(positions: Sequence[int]) -> str:
    """``positions`` (indices of inputs) for an error message: a run as ``a..b``, else the first eight."""
    if not positions:
        return "no inputs"
    if (isinstance(positions, range) and positions.step == 1) or list(positions) == list(
        range(positions[0], positions[-1] + 1)
    ):
        return f"inputs at index {positions[0]}..{positions[-1]}"
    shown = ", ".join(str(p) for p in positions[:8])
    return f"inputs at index {shown}{', ...' if len(positions) > 8 else ''}"


def check_accounting(jobs: list[Any], summaries: list[WorkerSummary], forwarded: int | None, label: str) -> None:
    """Raise unless every job finished every input it was given (and the workers every forwarded queue item).

    Raises:
        WorkerError: names the worker and the inputs it did not finish.
    """
    for job, summary in zip(jobs, summaries, strict=True):
        expected = job.num_inputs
        if summary.rank != job.rank or (expected is not None and summary.inputs != expected):
            raise WorkerError(
                f"{label} worker {job.rank} finished {summary.inputs} of its {expected} inputs "
                f"({describe_positions(job.positions)}); nothing was committed"
            )
    if forwarded is not None:
        received = sum(s.inputs for s in summaries)
        if received != forwarded:
            raise WorkerError(
                f"{label}: the workers finished {received} of the {forwarded} queue items sent to them; nothing was "
                "committed"
            )
