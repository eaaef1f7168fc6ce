"""Running jobs (optimize or map workers) in this process, in worker processes, or on an executor.

* One job, no executor: in this process.
* Worker processes (``multiprocessing``, ``fork`` where safe else ``spawn``): each job is cloudpickled;
  workers report progress and errors on one queue. A worker dies with its parent (Linux
  ``PR_SET_PDEATHSIG``, and a check of the parent pid before every input elsewhere), so a killed
  ``optimize`` leaves no orphan still writing.
* Any :class:`concurrent.futures.Executor` (a Dask ``Client.get_executor()``, Ray's, a
  ``ProcessPoolExecutor``): one task per job; progress advances when a task finishes.

A failing job stops the run: the other worker processes are killed (executor tasks, which cannot be
stopped reliably, are waited for) and :class:`~litstream.WorkerError` is raised, chained to the
worker's own exception where it can be pickled.
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

from .._errors import WorkerError
from .._sync import run_sync
from ._env import set_worker_env
from ._inputs import ALL_DONE, drain_queue

if TYPE_CHECKING:
    from ._worker import Report

__all__ = ["Job", "run_jobs"]


class Job(Protocol):
    """What the runner needs from a job (see ``OptimizeJob`` and ``MapJob``)."""

    @property
    def rank(self) -> int: ...

    async def run(self, report: Report, source: Any = None) -> None: ...


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # the parent died before the line above
        os._exit(1)


def _pickle_exception(exc: BaseException) -> bytes | None:
    try:
        data = cloudpickle.dumps(exc)
        cloudpickle.loads(data)
    except Exception:
        return None
    return bytes(data)


def _worker_main(job_bytes: bytes, num_workers: int, events: Any, source: Any, parent_pid: int) -> None:
    _die_with_parent(parent_pid)
    job: Job = cloudpickle.loads(job_bytes)
    set_worker_env(job.rank, num_workers)
    try:
        run_sync(job.run, events.put, source)
    except BaseException as exc:
        # The parent chains its WorkerError to the user's own exception (the cause of ours), when it pickles.
        original = exc.__cause__ if isinstance(exc, WorkerError) and exc.__cause__ is not None else exc
        message = f"{type(exc).__name__}: {exc}"
        events.put(("error", job.rank, message, traceback.format_exc(), _pickle_exception(original)))
    else:
        events.put(("done", job.rank))


def run_in_executor(job_bytes: bytes, num_workers: int) -> int:
    """Run one cloudpickled job to completion (the function executors are given); returns its rank."""
    job: Job = cloudpickle.loads(job_bytes)
    set_worker_env(job.rank, num_workers)
    run_sync(job.run, lambda event: None)
    return job.rank


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
) -> None:
    """Run every job; return when all finished.

    Args:
        jobs: Picklable jobs, one per worker.
        total: Inputs for the progress bar (``None`` for a queue input).
        num_workers: Workers per node (exported as ``DATA_OPTIMIZER_NUM_WORKERS``).
        start_method: Multiprocessing start method for worker processes.
        executor: Run each job as one task of this executor instead of a process of ours.
        source: A queue input: drained by this process and fed to the workers.
        queue_timeout: Seconds of silence that end a queue input.
        verbose: Show a tqdm bar.
        desc: The bar's label.
        label: The function's name in error messages (``optimize`` / ``map``).

    Raises:
        WorkerError: a job failed; names the worker and, through the job's message, the input.
    """
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit="input", disable=not verbose)
    try:
        if executor is not None:
            _run_on_executor(jobs, num_workers, executor, bar, label)
        elif len(jobs) == 1:
            _run_here(jobs[0], num_workers, bar, source, queue_timeout)
        else:
            _run_processes(jobs, num_workers, start_method, bar, source, queue_timeout, label)
    finally:
        bar.close()


def _run_here(job: Job, num_workers: int, bar: Any, source: Any, queue_timeout: float) -> None:
    saved = {k: os.environ.get(k) for k in ("DATA_OPTIMIZER_GLOBAL_RANK", "DATA_OPTIMIZER_NUM_WORKERS")}
    set_worker_env(job.rank, num_workers)

    def report(event: tuple[Any, ...]) -> None:
        if event[0] == "progress":
            bar.update(event[2])

    try:
        run_sync(job.run, report, source)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _pump(source: Any, target: Any, timeout: float, num_workers: int, stop: threading.Event) -> None:
    """Forward a user's queue into the workers' queue, then one sentinel per worker."""
    try:
        for item in drain_queue(source, timeout):
            if stop.is_set():
                return
            target.put(item)
    finally:
        for _ in range(num_workers):
            target.put(ALL_DONE)


def _run_processes(
    jobs: list[Job], num_workers: int, start_method: str, bar: Any, source: Any, queue_timeout: float, label: str
) -> None:
    ctx: Any = multiprocessing.get_context(start_method)
    events = ctx.Queue()
    feed = ctx.Queue() if source is not None else None
    if feed is not None:
        feed.cancel_join_thread()  # items left for dead workers must not block this process's exit
    processes = [
        ctx.Process(
            target=_worker_main,
            args=(cloudpickle.dumps(job), num_workers, events, feed, os.getpid()),
            daemon=True,
        )
        for job in jobs
    ]
    for p in processes:
        p.start()
    stop = threading.Event()
    pump = None
    if source is not None:
        pump = threading.Thread(target=_pump, args=(source, feed, queue_timeout, len(jobs), stop), daemon=True)
        pump.start()
    by_rank = {job.rank: p for job, p in zip(jobs, processes, strict=True)}
    pending = set(by_rank)
    failure: tuple[Any, ...] | None = None
    try:
        while pending and failure is None:
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
        if pump is not None:
            pump.join(timeout=1.0)
    if failure is not None:
        _, rank, message, tb, original = failure
        cause = cloudpickle.loads(original) if original is not None else None
        raise WorkerError(f"{label} worker {rank} failed: {message}\n{tb}") from cause


def _run_on_executor(
    jobs: list[Job], num_workers: int, executor: concurrent.futures.Executor, bar: Any, label: str
) -> None:
    futures = {executor.submit(run_in_executor, cloudpickle.dumps(job), num_workers): job for job in jobs}
    counts = {job.rank: getattr(job, "num_inputs", None) or 0 for job in jobs}
    failure: tuple[int, BaseException] | None = None
    pending = set(futures)
    while pending:
        done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            rank = futures[future].rank
            exc = future.exception() if not future.cancelled() else None
            if exc is not None:
                # The other jobs are left to finish: an executor may report a running task as cancelled
                # while it still writes (Dask does), and cleaning up under it would leave its files behind.
                failure = failure or (rank, exc)
            elif not future.cancelled():
                bar.update(counts[rank])
    if failure is not None:
        rank, exc = failure
        raise WorkerError(f"{label} worker {rank} failed: {type(exc).__name__}: {exc}") from exc
