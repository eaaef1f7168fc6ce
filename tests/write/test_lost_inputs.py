"""The write path never reports success for work it did not do.

Each way an input can be lost is injected — an exception in ``fn``, a queue that raises, a queue item
that cannot be pickled, a cancelled executor task, a worker killed with SIGKILL — on a local directory
and on S3 (SeaweedFS), with one and two workers. ``optimize`` must raise :class:`WorkerError` and leave no
``index.json`` (in append mode: the previous one, unchanged). Inputs are kept small: these runs start
processes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest
import sniffio
from write_targets import TARGETS, Target, make_target

from clean_process import run_clean
from litstream import LocalFileStore, RunSummary, StreamingDataset, WorkerError, WorkerSummary, map, optimize
from litstream._core._bridge import run_sync
from litstream.write.run._env import OptimizerEnv
from litstream.write.run._feed import SequenceInputs, run_ahead
from litstream.write.run._nodes import finish_node
from litstream.write.run._runner import check_accounting
from litstream.write.run._worker import OptimizeJob

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

N = 12
WORKERS = [1, 2]


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"n{i}"}


def fail_on_7(i: int) -> dict[str, Any]:
    if i == 7:
        raise KeyError("no label for 7")
    return sample(i)


def killed_on_7(i: int) -> dict[str, Any]:
    if i == 7:
        os.kill(os.getpid(), signal.SIGKILL)
    return sample(i)


class FailingQueue(queue.Queue[Any]):
    """A queue whose reader gets an error after ``ok`` items (a broken transport behind a queue API)."""

    def __init__(self, ok: int) -> None:
        super().__init__()
        self.ok = ok

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if self.ok == 0:
            raise ConnectionResetError("the producer's connection was reset")
        self.ok -= 1
        return super().get(block, timeout)


def filled(q: queue.Queue[Any], items: list[Any]) -> queue.Queue[Any]:
    for item in items:
        q.put(item)
    q.put("ALL_DONE")
    return q


class CancellingExecutor(Executor):
    """A thread pool whose ``cancel``-th task comes back cancelled before it runs, as Dask or Ray report
    the task of a lost or shut-down worker. (A scripted fault: no real executor cancels on demand.)"""

    def __init__(self, cancel: int) -> None:
        self._pool = ThreadPoolExecutor(2)
        self._cancel = cancel
        self._submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self._submitted += 1
        if self._submitted - 1 == self._cancel:
            future: Future[Any] = Future()
            future.cancel()
            future.set_running_or_notify_cancel()  # what an executor does with a cancelled task
            return future
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait, cancel_futures=cancel_futures)


POOL: ThreadPoolExecutor | None = None


def shuts_the_pool_down(i: int) -> dict[str, Any]:
    """On the first input, shut the (one-thread) pool down: the other worker's queued task is cancelled."""
    if i == 0 and POOL is not None:
        POOL.shutdown(wait=False, cancel_futures=True)
    return sample(i)


def assert_nothing_committed(target: Target, before: bytes | None = None, files: list[str] | None = None) -> None:
    names = target.files()
    if before is None:
        assert "index.json" not in names
        assert names == []  # this run's chunks and partial indexes were removed too
    else:
        assert target.read("index.json") == before
        assert names == files
        assert [s["i"] for s in target.dataset()] == list(range(4))


def run(target: Target, fn: Callable[[Any], Any], inputs: Any, workers: int, **kwargs: Any) -> RunSummary:
    kwargs.setdefault("start_method", "spawn" if target.name == "s3" else None)
    return optimize(
        fn,
        inputs,
        target.location,
        chunk_size=2,
        num_workers=workers,
        storage_options=target.options,
        verbose=False,
        **kwargs,
    )


def make_local(path: Path) -> Target:
    return Target("local", str(path), None, LocalFileStore(path))


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return make_target(str(request.param), request, tmp_path)


@pytest.mark.parametrize("workers", WORKERS)
def test_an_exception_in_fn(target: Target, workers: int) -> None:
    with pytest.raises(WorkerError, match=r"fn failed on input 7 \(index 7, worker \d\)") as info:
        run(target, fail_on_7, list(range(N)), workers)
    assert isinstance(info.value.__cause__, KeyError)
    assert_nothing_committed(target)


@pytest.mark.parametrize("workers", WORKERS)
def test_a_queue_that_raises(target: Target, workers: int) -> None:
    source = filled(FailingQueue(ok=5), list(range(N)))
    with pytest.raises(WorkerError, match=r"reading the queue input failed after 5 item\(s\): ConnectionResetError"):
        run(target, sample, source, workers)
    assert_nothing_committed(target)


def test_a_queue_item_that_cannot_be_pickled_stops_a_run_with_worker_processes(target: Target) -> None:
    items: list[Any] = [*range(5), threading.Lock(), *range(6, N)]
    with pytest.raises(WorkerError, match=r"queue item 5 <unlocked _thread.lock object.*cannot be sent to a worker"):
        run(target, lambda x: {"i": 0 if isinstance(x, int) else 1}, filled(queue.Queue(), items), 2)
    assert_nothing_committed(target)


def test_a_queue_item_that_cannot_be_pickled_is_not_lost_with_one_worker(target: Target) -> None:
    # One worker reads the queue in this process: nothing is pickled, nothing is lost.
    items: list[Any] = [*range(5), threading.Lock(), *range(6, N)]
    summary = run(target, lambda x: {"i": x if isinstance(x, int) else -1}, filled(queue.Queue(), items), 1)
    assert summary.inputs == N
    assert [s["i"] for s in target.dataset()] == [*range(5), -1, *range(6, N)]


@pytest.mark.parametrize("workers", WORKERS)
def test_a_cancelled_executor_task(target: Target, workers: int) -> None:
    executor = CancellingExecutor(cancel=workers - 1)
    try:
        with pytest.raises(
            WorkerError,
            match=rf"worker {workers - 1} failed: its task was cancelled by the executor; its inputs at index "
            rf"{6 * (workers - 1)}\.\.{N - 1} were not written",
        ):
            run(target, sample, list(range(N)), workers, executor=executor)
    finally:
        executor.shutdown()
    assert_nothing_committed(target)


def test_a_pool_shut_down_under_the_run(target: Target) -> None:
    global POOL
    POOL = ThreadPoolExecutor(1)  # worker 1's task waits in the pool's queue while worker 0 runs
    try:
        # worker 0 shuts the pool down: worker 1's task is cancelled in the queue or, when worker 0 got there
        # first, cannot be submitted at all; either way the run fails naming worker 1
        expected = r"optimize worker 1 failed: its task (was cancelled|could not be submitted)"
        with pytest.raises(WorkerError, match=expected):
            run(target, shuts_the_pool_down, list(range(N)), 2, executor=POOL)
    finally:
        POOL.shutdown()
        POOL = None
    assert_nothing_committed(target)


def test_a_worker_process_killed(target: Target) -> None:
    with pytest.raises(WorkerError, match=r"optimize worker 1 failed: the worker process died \(exit code -9\)"):
        run(target, killed_on_7, list(range(N)), 2)
    assert_nothing_committed(target)


def _killed_pool_worker(target: Target) -> None:
    """In a clean helper process (it starts the pool's worker)."""
    context = multiprocessing.get_context("spawn" if target.name == "s3" else "fork")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        with pytest.raises(WorkerError, match=r"optimize worker 0 failed: BrokenProcessPool"):
            run(target, killed_on_7, list(range(N)), 1, executor=pool, start_method=None)
    assert_nothing_committed(target)


def test_the_one_worker_of_a_process_pool_killed(target: Target) -> None:
    run_clean(_killed_pool_worker, target)


@pytest.mark.parametrize("workers", WORKERS)
def test_append_keeps_the_previous_index_when_an_input_is_lost(target: Target, workers: int) -> None:
    run(target, sample, list(range(4)), 1)
    before, files = target.read("index.json"), target.files()
    with pytest.raises(WorkerError, match=r"fn failed on input 7"):
        run(target, fail_on_7, list(range(N)), workers, mode="append")
    assert_nothing_committed(target, before, files)
    source = filled(FailingQueue(ok=3), list(range(N)))
    with pytest.raises(WorkerError, match=r"reading the queue input failed after 3 item"):
        run(target, sample, source, workers, mode="append")
    assert_nothing_committed(target, before, files)


@pytest.mark.parametrize("workers", WORKERS)
def test_the_summary_counts_what_was_written(target: Target, workers: int) -> None:
    summary = run(target, repeated, list(range(N)), workers)
    index = target.dataset()
    chunks = [name for name in target.files() if name.startswith("chunk-")]
    assert isinstance(summary, RunSummary)
    assert (summary.inputs, summary.samples, summary.chunks, summary.files) == (N, len(index), len(chunks), 0)
    assert summary.samples == sum(i % 3 for i in range(N))
    assert summary.bytes == sum(len(target.read(name)) for name in chunks)
    assert summary.seconds > 0
    assert [w.rank for w in summary.workers] == list(range(workers))
    assert sum(w.inputs for w in summary.workers) == N
    assert summary.output == target.store.url


def repeated(i: int) -> Iterator[dict[str, Any]]:
    for _ in range(i % 3):
        yield sample(i)


def in_an_event_loop(i: int) -> dict[str, Any]:
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = ""
    return {"i": i, "loop": library}


def test_fn_runs_outside_the_event_loop(tmp_path: Path) -> None:
    optimize(in_an_event_loop, list(range(4)), tmp_path, chunk_size=2, num_workers=1, verbose=False)
    assert [s["loop"] for s in StreamingDataset(tmp_path)] == ["", "", "", ""]


def write_one(i: int, output_dir: str) -> None:
    if i == 5:
        raise KeyError("no file for 5")
    with open(os.path.join(output_dir, f"f{i}.txt"), "w") as f:
        f.write("x" * i)


def test_map_returns_a_summary_and_raises_on_a_lost_input(tmp_path: Path) -> None:
    summary = map(write_one, [1, 2, 3], tmp_path / "ok", num_workers=1, verbose=False)
    assert (summary.inputs, summary.files, summary.bytes, summary.samples) == (3, 3, 6, 0)
    with pytest.raises(WorkerError, match=r"reading the queue input failed after 2 item"):
        map(write_one, filled(FailingQueue(ok=2), [1, 2, 3]), tmp_path / "q", num_workers=2, verbose=False)
    with pytest.raises(WorkerError, match=r"fn failed on input 5"):
        map(write_one, list(range(8)), tmp_path / "f", num_workers=2, verbose=False)


def test_a_worker_that_finished_fewer_inputs_than_given_is_an_error() -> None:
    job = OptimizeJob(3, [10, 11, 12], [4, 5, 6], b"", None, {})  # type: ignore[arg-type]
    check_accounting([job], [WorkerSummary(rank=3, inputs=3)], None, "optimize")
    with pytest.raises(WorkerError, match=r"optimize worker 3 finished 2 of its 3 inputs \(inputs at index 4\.\.6\)"):
        check_accounting([job], [WorkerSummary(rank=3, inputs=2)], None, "optimize")
    queue_job = OptimizeJob(0, None, [], b"", None, {})  # type: ignore[arg-type]
    with pytest.raises(WorkerError, match=r"the workers finished 4 of the 5 queue items sent to them"):
        check_accounting([queue_job, queue_job], [WorkerSummary(0, inputs=1), WorkerSummary(0, inputs=3)], 5, "map")


def test_a_missing_partial_index_stops_the_merge(tmp_path: Path) -> None:
    run(make_local(tmp_path / "a"), sample, list(range(N)), 1)  # a dataset to take a partial index from
    store = LocalFileStore(tmp_path / "b")
    (tmp_path / "b").mkdir()
    index = (tmp_path / "a" / "index.json").read_bytes()
    (tmp_path / "b" / "0.index.json").write_bytes(index)
    missing = r"worker 1 reported 2 chunk\(s\), but its partial index 1.index.json .* is missing"
    with pytest.raises(WorkerError, match=missing):
        run_sync(finish_node, store, [0, 1], OptimizerEnv(), None, False, {0: 6, 1: 2})
    different = r"worker 0 reported 5 chunk\(s\), but its partial index 0.index.json .* lists 6"
    with pytest.raises(WorkerError, match=different):
        run_sync(finish_node, store, [0, 1], OptimizerEnv(), None, False, {0: 5, 1: 0})
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["0.index.json"]


async def test_run_ahead_hands_over_in_order_and_fails_in_order(anyio_backend: str) -> None:
    seen: list[tuple[int, str, int]] = []

    async def handle(item: int, where: str, result: int) -> None:
        seen.append((item, where, result))

    def call(item: int, where: str, last: bool) -> int:
        if item == 30:
            raise KeyError(item)
        return item * 2

    halt = threading.Event()
    await run_ahead(SequenceInputs(list(range(25)), list(range(25))), call, handle, halt)
    assert seen == [(i, f"index {i}", 2 * i) for i in range(25)]
    seen.clear()
    with pytest.raises(KeyError):
        await run_ahead(SequenceInputs(list(range(40)), list(range(40))), call, handle, threading.Event())
    assert [s[0] for s in seen] == list(range(30))  # every input before the failing one was handled


def test_a_queue_longer_than_the_feed_reaches_every_worker(tmp_path: Path) -> None:
    # 60 items through a feed bounded at 8 per worker: the forwarder waits for the workers, loses nothing.
    source = filled(queue.Queue(), list(range(60)))
    summary = optimize(sample, source, tmp_path, chunk_size=4, num_workers=2, verbose=False)
    assert (summary.inputs, summary.samples) == (60, 60)
    assert sorted(s["i"] for s in StreamingDataset(tmp_path)) == list(range(60))
    assert sum(w.inputs for w in summary.workers) == 60


KILLED_SCRIPT = """
import json, os, signal, sys

from litstream import optimize


def fn(i):
    if i == 7:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"i": i}


optimize(fn, list(range(12)), sys.argv[1], chunk_size=2, num_workers=1, storage_options=json.loads(sys.argv[2]) or None,
         verbose=False)
"""


def test_a_one_worker_run_killed_in_its_own_process(target: Target, tmp_path: Path) -> None:
    # One worker runs in the calling process: SIGKILL ends the call itself, and nothing is committed.
    script = tmp_path / "killed.py"
    script.write_text(KILLED_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, str(script), target.location, json.dumps(target.options or {})],
        env=env,
        capture_output=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert "index.json" not in target.files()


def test_a_worker_process_killed_while_reading_a_queue(tmp_path: Path) -> None:
    source = filled(queue.Queue(), list(range(N)))
    with pytest.raises(WorkerError, match=r"optimize worker \d failed: the worker process died \(exit code -9\)"):
        optimize(killed_on_7, source, tmp_path, chunk_size=2, num_workers=2, verbose=False)
    assert [p.name for p in tmp_path.iterdir()] == []
