"""Running jobs (optimize or map workers) in this process, in worker processes, or on an executor.

* One job, no executor: in this process (:func:`run_jobs` itself).
* Worker processes: :mod:`._processes` (``fork`` where safe else ``spawn``/``forkserver``; a failing job
  kills the others).
* Any :class:`concurrent.futures.Executor`: :mod:`._executor` (one task per job).

A failing job stops the run with :class:`~litstream.WorkerError`, chained to the worker's own exception
where it can be pickled. Every input is accounted for (:mod:`._accounting`): the run succeeds only when
every job finished exactly the inputs it was given. A worker process that died, an executor task that was
cancelled, a queue that raised or an item that cannot be pickled is a :class:`~litstream.WorkerError`,
never a shorter dataset.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ..._core._bridge import run_sync
from ..._core._environ import exported
from ._accounting import check_accounting
from ._env import worker_env
from ._executor import run_on_executor
from ._processes import run_processes

if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Callable

    from .._summary import WorkerSummary
    from ._jobs import Job

__all__ = ["check_accounting", "run_jobs"]


def run_jobs(
    jobs: list[Any],
    *,
    total: int | None,
    num_workers: int,
    start_method: str,
    executor: concurrent.futures.Executor | None = None,
    source: Any = None,
    queue_timeout: float = 300.0,
    verbose: bool = True,
    desc: str = "Optimizing",
    label: str = "optimize",
    abort: Callable[[], str | None] | None = None,
) -> list[WorkerSummary]:
    """Run every job; return their summaries once all finished and every input is accounted for.

    Args:
        jobs: Picklable jobs, one per worker.
        total: Inputs for the progress bar (``None`` for a queue input).
        num_workers: Workers per node (exported as ``DATA_OPTIMIZER_NUM_WORKERS``).
        start_method: Multiprocessing start method for worker processes.
        executor: Run each job as one task of this executor instead of a process of ours.
        source: A queue input: drained by this process and fed to the workers.
        queue_timeout: Seconds of silence that end a queue input.
        verbose: Show a tqdm bar, and print (stderr, beside the bar) how many workers start on how many
            inputs and when they all finished, as LitData's ``verbose=True`` does.
        desc: The bar's label.
        label: The function's name in error messages (``optimize`` / ``map``).
        abort: Polled while worker processes run; a message stops the run (the writer lock was lost).

    Returns:
        One summary per job, in the order of ``jobs``.

    Raises:
        WorkerError: a job failed, a worker process died, an executor task was cancelled, the queue input
            failed or held an item that cannot be pickled, or a job finished fewer inputs than it was given;
            names the worker and, where known, the input.
        OutputLockedError: ``abort`` answered a message; the worker processes were killed.
    """
    from tqdm.auto import tqdm

    if verbose:
        amount = "a queue of inputs" if total is None else f"{total} input{'s' * (total != 1)}"
        print(f"{label}: starting {len(jobs)} worker{'s' * (len(jobs) != 1)} on {amount}", file=sys.stderr, flush=True)
    bar = tqdm(total=total, desc=desc, unit="input", disable=not verbose)
    try:
        if executor is not None:
            summaries = run_on_executor(jobs, num_workers, executor, bar, label)
            forwarded = None
        elif len(jobs) == 1:
            summaries = [_run_here(jobs[0], num_workers, bar, source, queue_timeout)]
            forwarded = None
        else:
            summaries, forwarded = run_processes(
                jobs, num_workers, start_method, bar, source, queue_timeout, label, abort
            )
    finally:
        bar.close()
    check_accounting(jobs, summaries, forwarded, label)
    if verbose:
        print(f"{label}: all workers finished ({sum(s.inputs for s in summaries)} inputs)", file=sys.stderr, flush=True)
    return summaries


def _run_here(job: Job, num_workers: int, bar: Any, source: Any, queue_timeout: float) -> WorkerSummary:
    def report(event: tuple[Any, ...]) -> None:
        if event[0] == "progress":
            bar.update(event[2])

    with exported(worker_env(job.rank, num_workers)):  # this process's own values come back after
        return run_sync(job.run, report, source)
