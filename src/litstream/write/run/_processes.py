"""Running jobs in worker processes (``multiprocessing``, with the run's start method).

Each job is cloudpickled without its inputs, which reach the worker in bounded batches
(:mod:`._sequence_feed`); a queue input is drained by a thread of this process (:class:`_Pump`) and
forwarded on one bounded queue. Workers report progress and errors on one event queue. A worker dies with
its parent (Linux ``PR_SET_PDEATHSIG``, and a check of the parent pid before every input elsewhere), so a
killed ``optimize`` leaves no orphan still writing. A forkserver's worker takes the environment of the
call (``_environ.snapshot``), not the fork server's.

A failing job stops the run: the other worker processes are killed and :class:`~litstream.WorkerError` is
raised, chained to the worker's own exception where it can be pickled.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue as queue_module
import signal
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any

import cloudpickle

from ..._core._bridge import run_sync
from ..._core._environ import replace_all, snapshot
from ..._core._errors import OutputLockedError, WorkerError
from .._lease_holder import alive
from ._env import set_worker_env
from ._feed import FedQueue, QueueInputs, pack
from ._inputs import ALL_DONE
from ._sequence_feed import BATCHES_AHEAD, BatchFeeder, FedBatches, put_until_stopped

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._summary import WorkerSummary
    from ._jobs import Job

__all__ = ["run_processes"]


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


def run_processes(
    jobs: list[Job],
    num_workers: int,
    start_method: str,
    bar: Any,
    source: Any,
    queue_timeout: float,
    label: str,
    abort: Callable[[], str | None] | None = None,
) -> tuple[list[WorkerSummary], int | None]:
    """Run each job in a worker process started with ``start_method``; their summaries in the order of
    ``jobs``, and the number of queue items forwarded (``None`` without a queue ``source``).

    Raises:
        WorkerError: a job failed, a worker process died, or the queue input failed (the others are killed).
        OutputLockedError: ``abort`` answered a message; the worker processes were killed.
    """
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
