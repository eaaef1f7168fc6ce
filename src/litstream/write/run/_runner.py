"""Running jobs (optimize or map workers) in this process, in worker processes, or on an executor.

* One job, no executor: in this process.
* Worker processes (``multiprocessing``, ``fork`` where safe else ``spawn``): each job is cloudpickled
  without its inputs, which reach the worker in bounded batches (:mod:`._sequence_feed`); workers
  report progress and errors on one queue. A worker dies with its parent (Linux
  ``PR_SET_PDEATHSIG``, and a check of the parent pid before every input elsewhere), so a killed
  ``optimize`` leaves no orphan still writing.
* Any :class:`concurrent.futures.Executor` (a Dask ``Client.get_executor()``, Ray's, a
  ``ProcessPoolExecutor``): one task per job; progress advances when a task finishes.

A failing job stops the run: the other worker processes are killed (executor tasks, which cannot be
stopped reliably, are waited for) and :class:`~litstream.WorkerError` is raised, chained to the
worker's own exception where it can be pickled.

Every input is accounted for. Each job returns a :class:`~._summary.WorkerSummary`; the run succeeds
only when every job did, and each finished exactly the inputs it was given (for a queue input: the
workers together finished every item this process forwarded). A worker process that died, an executor
task that was cancelled, a queue that raised or an item that cannot be pickled is a
:class:`~litstream.WorkerError`, never a shorter dataset.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import queue as queue_module
import signal
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, Protocol

import cloudpickle

from ..._core._bridge import run_sync
from ..._core._environ import exported, replace_all, snapshot
from ..._core._errors import OutputLockedError, WorkerError
from .._lease_holder import alive
from ._env import set_worker_env, worker_env
from ._feed import FedQueue, QueueInputs, pack
from ._inputs import ALL_DONE
from ._sequence_feed import BATCHES_AHEAD, BatchFeeder, FedBatches, put_until_stopped

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._summary import WorkerSummary
    from ._worker import Report

__all__ = ["Job", "run_jobs"]


class Job(Protocol):
    """What the runner needs from a job (see ``OptimizeJob`` and ``MapJob``)."""

    @property
    def rank(self) -> int: ...

    @property
    def items(self) -> Sequence[Any] | None: ...

    @property
    def positions(self) -> Sequence[int]: ...

    @property
    def num_inputs(self) -> int | None: ...

    @property
    def first_input(self) -> int: ...

    def without_inputs(self) -> Job: ...

    async def run(self, report: Report, source: Any = None) -> WorkerSummary: ...


def _die_with_parent(parent_pid: int) -> None:
    """Ends this worker when the optimize process ``parent_pid`` dies (Linux: at once, by signal).

    A forkserver's child has the fork server as its OS parent, which exits when ``parent_pid`` does.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid and not alive(parent_pid, None):  # it died before the line above
        os._exit(1)


def _pickle_exception(exc: BaseException) -> bytes | None:
    try:
        data = cloudpickle.dumps(exc)
        cloudpickle.loads(data)
    except Exception:
        return None
    return bytes(data)


def _worker_main(
    job_bytes: bytes, num_workers: int, events: Any, source: Any, parent_pid: int, environ: dict[str, str] | None
) -> None:
    _die_with_parent(parent_pid)
    if environ is not None:  # a forkserver's child: the environment of the optimize call, not the server's
        replace_all(environ)
    job: Job = cloudpickle.loads(job_bytes)
    set_worker_env(job.rank, num_workers)
    try:
        summary = run_sync(job.run, events.put, source)
    except BaseException as exc:
        # The parent chains its WorkerError to the user's own exception (the cause of ours), when it pickles.
        original = exc.__cause__ if isinstance(exc, WorkerError) and exc.__cause__ is not None else exc
        message = f"{type(exc).__name__}: {exc}"
        events.put(("error", job.rank, message, traceback.format_exc(), _pickle_exception(original)))
    else:
        events.put(("done", job.rank, summary))


def run_in_executor(job_bytes: bytes, num_workers: int) -> WorkerSummary:
    """Run one cloudpickled job to completion (the function executors are given); returns its summary."""
    job: Job = cloudpickle.loads(job_bytes)
    set_worker_env(job.rank, num_workers)
    return run_sync(job.run, lambda event: None)


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
            summaries = _run_on_executor(jobs, num_workers, executor, bar, label)
            forwarded = None
        elif len(jobs) == 1:
            summaries = [_run_here(jobs[0], num_workers, bar, source, queue_timeout)]
            forwarded = None
        else:
            summaries, forwarded = _run_processes(
                jobs, num_workers, start_method, bar, source, queue_timeout, label, abort
            )
    finally:
        bar.close()
    check_accounting(jobs, summaries, forwarded, label)
    if verbose:
        print(f"{label}: all workers finished ({sum(s.inputs for s in summaries)} inputs)", file=sys.stderr, flush=True)
    return summaries


def _span(positions: Sequence[int]) -> str:
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
                f"({_span(job.positions)}); nothing was committed"
            )
    if forwarded is not None:
        received = sum(s.inputs for s in summaries)
        if received != forwarded:
            raise WorkerError(
                f"{label}: the workers finished {received} of the {forwarded} queue items sent to them; nothing was "
                "committed"
            )


def _run_here(job: Job, num_workers: int, bar: Any, source: Any, queue_timeout: float) -> WorkerSummary:
    def report(event: tuple[Any, ...]) -> None:
        if event[0] == "progress":
            bar.update(event[2])

    with exported(worker_env(job.rank, num_workers)):  # this process's own values come back after
        return run_sync(job.run, report, source)


_FEED_PER_WORKER = 8
"""Queue items forwarded but not yet taken, per worker process."""


class _Pump:
    """Forwards a user's queue to the workers (in a thread of this process), each item pickled here."""

    def __init__(
        self, source: Any, target: Any, timeout: float, num_workers: int, events: Any, stop: threading.Event
    ) -> None:
        self.stop = stop
        self.forwarded = 0
        self.error: BaseException | None = None
        self._inputs = QueueInputs(source, timeout, self.stop)
        self._target = target
        self._num_workers = num_workers
        self._events = events
        self.thread = threading.Thread(target=self._run, name="litstream-queue-pump", daemon=True)

    def _put(self, entry: Any) -> bool:
        """Put ``entry`` on the bounded feed, waiting while it is full; False once the run is stopped."""
        return put_until_stopped(self._target, entry, self.stop)

    def _run(self) -> None:
        try:
            while True:
                taken = self._inputs.take()
                if self.stop.is_set():
                    return  # the run failed; no ALL_DONE, the workers are stopped
                if taken is None:
                    break
                item, where, _ = taken
                if not self._put(pack(item, where)):
                    return
                self.forwarded += 1
            for _ in range(self._num_workers):
                if not self._put(ALL_DONE):
                    return
        except BaseException as exc:
            self.error = exc
            self._events.put(("source_error",))  # wakes the runner


def _run_processes(
    jobs: list[Job],
    num_workers: int,
    start_method: str,
    bar: Any,
    source: Any,
    queue_timeout: float,
    label: str,
    abort: Callable[[], str | None] | None = None,
) -> tuple[list[WorkerSummary], int | None]:
    ctx: Any = multiprocessing.get_context(start_method)
    events = ctx.Queue()
    stop = threading.Event()  # ends the threads that feed the workers
    # Bounded: a fast producer waits for the workers instead of filling this process's memory.
    feed = ctx.Queue(_FEED_PER_WORKER * len(jobs)) if source is not None else None
    if feed is not None:
        feed.cancel_join_thread()  # items left for dead workers must not block this process's exit
    feeders: list[BatchFeeder | _Pump] = []
    processes = []
    for job in jobs:
        sent: Job = job
        fed: FedQueue | FedBatches | None = FedQueue(feed) if feed is not None else None
        if job.items is not None:  # a sequence: sent in batches by a thread of ours, not inside the job
            batches = ctx.Queue(BATCHES_AHEAD)
            batches.cancel_join_thread()
            sent, fed = job.without_inputs(), FedBatches(batches, len(job.items) - job.first_input)
            feeders.append(BatchFeeder(job.items, job.positions, job.first_input, batches, stop, events))
        environ = snapshot() if start_method == "forkserver" else None
        args = (cloudpickle.dumps(sent), num_workers, events, fed, os.getpid(), environ)
        processes.append(ctx.Process(target=_worker_main, args=args, daemon=True))
    for p in processes:
        p.start()
    pump = None
    if source is not None:
        pump = _Pump(source, feed, queue_timeout, len(jobs), events, stop)
        feeders.append(pump)
    for feeder in feeders:  # threads only once every worker is forked
        feeder.thread.start()
    by_rank = {job.rank: p for job, p in zip(jobs, processes, strict=True)}
    pending = set(by_rank)
    summaries: dict[int, WorkerSummary] = {}
    failure: tuple[Any, ...] | None = None
    try:
        while pending and failure is None:
            if any(feeder.error is not None for feeder in feeders):
                failure = ("source",)
                break
            if abort is not None and (why := abort()) is not None:
                failure = ("abort", why)
                break
            try:
                event = events.get(timeout=0.5)
            except queue_module.Empty:
                dead = [rank for rank in sorted(pending) if not by_rank[rank].is_alive()]
                if dead and events.empty():
                    rank = dead[0]
                    code = by_rank[rank].exitcode
                    failure = ("error", rank, f"the worker process died (exit code {code})", "", None)
                continue
            if event[0] == "progress":
                bar.update(event[2])
            elif event[0] == "done":
                pending.discard(event[1])
                summaries[event[1]] = event[2]
            elif event[0] == "error":
                failure = event
    finally:
        stop.set()
        if failure is not None or pending:
            for p in processes:
                if p.is_alive():
                    p.kill()
        for p in processes:
            p.join()
        for feeder in feeders:
            feeder.thread.join(timeout=5.0)
    error = next((feeder.error for feeder in feeders if feeder.error is not None), None)
    if error is not None:
        raise WorkerError(f"{label}: {error}; nothing was committed") from (error.__cause__ or error)
    if failure is not None and failure[0] == "abort":
        raise OutputLockedError(failure[1])
    if failure is not None:
        _, rank, message, tb, original = failure
        cause = cloudpickle.loads(original) if original is not None else None
        raise WorkerError(f"{label} worker {rank} failed: {message}\n{tb}") from cause
    return [summaries[job.rank] for job in jobs], None if pump is None else pump.forwarded


def _run_on_executor(
    jobs: list[Job], num_workers: int, executor: concurrent.futures.Executor, bar: Any, label: str
) -> list[WorkerSummary]:
    futures: dict[concurrent.futures.Future[WorkerSummary], Job] = {}
    summaries: dict[int, WorkerSummary] = {}
    failure: tuple[int, str, BaseException | None] | None = None
    for job in jobs:
        try:
            futures[executor.submit(run_in_executor, cloudpickle.dumps(job), num_workers)] = job
        except Exception as error:  # e.g. a pool shut down (by a task, or another thread) before this submit
            reason = (
                f"its task could not be submitted ({type(error).__name__}: {error}); "
                f"its {_span(job.positions)} were not written"
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
                reason = f"its task was cancelled by the executor; its {_span(job.positions)} were not written"
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
