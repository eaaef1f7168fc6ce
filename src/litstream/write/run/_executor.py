"""Running jobs on any :class:`concurrent.futures.Executor` (a Dask ``Client.get_executor()``, Ray's, a
``ProcessPoolExecutor``): one task per job; progress advances when a task finishes.

Executor tasks cannot be stopped reliably, so a failing task does not stop the others: they are waited
for, then the run fails with :class:`~litstream.WorkerError` (a cancelled task counts as a failure: its
inputs were not written).
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Any

import cloudpickle

from ..._core._bridge import run_sync
from ..._core._errors import WorkerError
from ._accounting import describe_positions
from ._env import set_worker_env

if TYPE_CHECKING:
    from .._summary import WorkerSummary
    from ._jobs import Job

__all__ = ["run_in_executor", "run_on_executor"]


def run_in_executor(job_bytes: bytes, num_workers: int) -> WorkerSummary:
    """Run one cloudpickled job to completion (the function executors are given); returns its summary."""
    job: Job = cloudpickle.loads(job_bytes)
    set_worker_env(job.rank, num_workers)
    return run_sync(job.run, lambda event: None)


def run_on_executor(
    jobs: list[Job], num_workers: int, executor: concurrent.futures.Executor, bar: Any, label: str
) -> list[WorkerSummary]:
    """Run each job as one task of ``executor``; the summaries in the order of ``jobs``.

    A failing task does not cancel the others: they are waited for (an executor may report a running task
    as cancelled while it still writes), then :class:`~litstream.WorkerError` names the first failure.

    Raises:
        WorkerError: a task failed, was cancelled or could not be submitted.
    """
    futures: dict[concurrent.futures.Future[WorkerSummary], Job] = {}
    summaries: dict[int, WorkerSummary] = {}
    failure: tuple[int, str, BaseException | None] | None = None
    for job in jobs:
        try:
            futures[executor.submit(run_in_executor, cloudpickle.dumps(job), num_workers)] = job
        except Exception as error:  # e.g. a pool shut down (by a task, or another thread) before this submit
            reason = (
                f"its task could not be submitted ({type(error).__name__}: {error}); "
                f"its {describe_positions(job.positions)} were not written"
            )
            failure = (job.rank, reason, error)
            break  # the tasks already submitted are waited for below, so none writes after the run fails
    pending = set(futures)
    while pending:
        done, pending = concurrent.futures.wait(pending, timeout=1.0, return_when=concurrent.futures.FIRST_COMPLETED)
        # A future cancelled without notifying its waiters (not through its executor) never counts as done.
        cancelled = {future for future in pending if future.cancelled()}
        done, pending = done | cancelled, pending - cancelled
        for future in done:
            job = futures[future]
            if future.cancelled():
                # Counts as a failure: the task's inputs were not written (LitData's runs "succeeded" here).
                inputs = describe_positions(job.positions)
                reason = f"its task was cancelled by the executor; its {inputs} were not written"
                failure = failure or (job.rank, reason, None)
                continue
            exc = future.exception()
            if exc is not None:
                # The other jobs are left to finish: an executor may report a running task as cancelled
                # while it still writes (Dask does), and cleaning up under it would leave its files behind.
                failure = failure or (job.rank, f"{type(exc).__name__}: {exc}", exc)
            else:
                summaries[job.rank] = future.result()
                bar.update(job.num_inputs or 0)
    if failure is not None:
        rank, message, cause = failure
        raise WorkerError(f"{label} worker {rank} failed: {message}") from cause
    return [summaries[job.rank] for job in jobs]
