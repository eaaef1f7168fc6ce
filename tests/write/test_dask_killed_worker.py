"""optimize / map on a real Dask ``LocalCluster`` (2 worker processes) with 2,000 inputs, and a Dask worker
killed (SIGKILL, by its pid) while it runs a litstream job: the result is complete and exact (Dask runs the
task again), or, when Dask may not retry, the call raises ``WorkerError`` and commits nothing.

Synchronisation is by named pipes, not sleeps: at input ``VICTIM`` the function writes its worker's pid
into one pipe and then blocks opening another that nobody ever writes; the test reads the pid (a
``select`` with a generous deadline), disarms the trap and kills that process.
"""

from __future__ import annotations

import os
import select
import signal
from typing import TYPE_CHECKING, Any

import pytest

from litstream import StreamingDataset, WorkerError, map, optimize
from peer import require_dev

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

distributed = require_dev("distributed")
dask = require_dev("dask")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:distributed.*"),
    pytest.mark.filterwarnings("ignore::UserWarning:distributed.*"),
]

INPUTS = 2_000
VICTIM = 1_500  # in worker 1's half of the inputs (ordered split: 1000..1999), two chunks already written


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"item-{i}"}


def trap(traps: str, fn: Callable[[int], Any]) -> Callable[[int], Any]:
    """``fn``, but the input ``VICTIM`` reports its process's pid and blocks while ``<traps>/armed`` exists."""

    def wrapped(i: int) -> Any:
        if i == VICTIM and os.path.exists(os.path.join(traps, "armed")):
            fd = os.open(os.path.join(traps, "pid"), os.O_WRONLY)  # waits for the test's reader
            os.write(fd, f"{os.getpid()}\n".encode())
            os.close(fd)
            os.open(os.path.join(traps, "hold"), os.O_RDONLY)  # blocks: nobody opens it for writing
        return fn(i)

    return wrapped


def write_file(i: int, output_dir: str) -> None:
    with open(os.path.join(output_dir, f"f-{i}.txt"), "w") as f:
        f.write(f"{i}\n")


@pytest.fixture
def traps(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "traps"
    folder.mkdir()
    os.mkfifo(folder / "pid")
    os.mkfifo(folder / "hold")
    (folder / "armed").write_text("")
    yield folder


def kill_the_victim(traps: Path) -> int:
    """Wait (at most 120 s) for the trapped input to report its pid, disarm the trap, SIGKILL that process."""
    fd = os.open(traps / "pid", os.O_RDWR | os.O_NONBLOCK)  # O_RDWR: never an EOF before the writer comes
    try:
        ready, _, _ = select.select([fd], [], [], 120.0)
        assert ready, "the trapped input never ran"
        pid = int(os.read(fd, 64).decode().strip())
    finally:
        os.close(fd)
    (traps / "armed").unlink()
    os.kill(pid, signal.SIGKILL)
    return pid


def cluster(allowed_failures: int) -> Any:
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        return distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        )


def run_in_thread(call: Callable[[], Any]) -> tuple[Any, Callable[[], Any]]:
    """Start ``call`` in a thread; return the thread and a function that joins it and returns or raises."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1)
    future = pool.submit(call)
    pool.shutdown(wait=False)

    def result() -> Any:
        return future.result(timeout=600)

    return future, result


def worker_pids(client: Any) -> set[int]:
    return set(client.run(os.getpid).values())


def test_optimize_survives_a_killed_dask_worker(tmp_path: Path, traps: Path) -> None:
    out = tmp_path / "ds"
    with cluster(allowed_failures=3) as c, distributed.Client(c) as client:
        before = worker_pids(client)
        call = lambda: optimize(  # noqa: E731
            trap(str(traps), sample), list(range(INPUTS)), out, chunk_size=500, num_workers=2,
            executor=client.get_executor(), verbose=False,
        )  # fmt: skip
        _, result = run_in_thread(call)
        pid = kill_the_victim(traps)
        assert pid in before
        result()  # Dask ran the killed task again, on a live worker
    ds = StreamingDataset(out)
    assert len(ds) == INPUTS
    assert list(ds) == [sample(i) for i in range(INPUTS)]
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["index.json", *(f"chunk-{r}-{n}.bin" for r in range(2) for n in range(2))])


def test_optimize_raises_and_commits_nothing_when_dask_gives_up(tmp_path: Path, traps: Path) -> None:
    out = tmp_path / "ds"
    with cluster(allowed_failures=0) as c, distributed.Client(c) as client:
        call = lambda: optimize(  # noqa: E731
            trap(str(traps), sample), list(range(INPUTS)), out, chunk_size=500, num_workers=2,
            executor=client.get_executor(), verbose=False,
        )  # fmt: skip
        _, result = run_in_thread(call)
        kill_the_victim(traps)
        with pytest.raises(WorkerError, match=r"optimize worker 1 failed: KilledWorker"):
            result()
    assert not (out / "index.json").exists()
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == []


def test_map_survives_a_killed_dask_worker(tmp_path: Path, traps: Path) -> None:
    out = tmp_path / "files"
    with cluster(allowed_failures=3) as c, distributed.Client(c) as client:
        call = lambda: map(  # noqa: E731
            _trapped_writer(str(traps)), list(range(INPUTS)), out, num_workers=2, executor=client.get_executor(), verbose=False,
        )  # fmt: skip
        _, result = run_in_thread(call)
        kill_the_victim(traps)
        result()
    assert sorted(p.name for p in out.iterdir()) == sorted(f"f-{i}.txt" for i in range(INPUTS))
    assert all((out / f"f-{i}.txt").read_text() == f"{i}\n" for i in (0, VICTIM - 1, VICTIM, INPUTS - 1))


def _trapped_writer(traps: str) -> Callable[[int, str], None]:
    def wrapped(i: int, output_dir: str) -> None:
        trap(traps, lambda k: None)(i)
        write_file(i, output_dir)

    return wrapped
