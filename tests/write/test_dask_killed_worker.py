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
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from dataset_files import without_version_log
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
def traps(tmp_path: Path) -> Path:
    folder = tmp_path / "traps"
    folder.mkdir()
    os.mkfifo(folder / "pid")
    os.mkfifo(folder / "hold")
    (folder / "armed").write_text("")
    return folder


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


def make_cluster(allowed_failures: int) -> Any:
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        return distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        )


@pytest.fixture
def retrying_client() -> Iterator[Any]:
    """A cluster whose scheduler runs a task again when its worker dies (Dask's default, 3 times); one per
    test, so that no test starts while the nanny of another's killed worker restarts it."""
    with make_cluster(allowed_failures=3) as cluster, distributed.Client(cluster) as client:
        yield client


def test_optimize_survives_a_killed_dask_worker(tmp_path: Path, traps: Path, retrying_client: Any) -> None:
    out = tmp_path / "ds"
    executor = retrying_client.get_executor()
    pids = set(retrying_client.run(os.getpid).values())
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(
            optimize, trap(str(traps), sample), list(range(INPUTS)), out, chunk_size=500, num_workers=2,
            executor=executor, verbose=False,
        )  # fmt: skip
        assert kill_the_victim(traps) in pids
        run.result(timeout=600)  # Dask ran the killed task again, on a live worker
    ds = StreamingDataset(out)
    assert len(ds) == INPUTS
    assert list(ds) == [sample(i) for i in range(INPUTS)]
    names = sorted(without_version_log(p.name for p in out.iterdir()))
    assert names == sorted(["index.json", *(f"chunk-{r}-{n}.bin" for r in range(2) for n in range(2))])


def test_map_survives_a_killed_dask_worker(tmp_path: Path, traps: Path, retrying_client: Any) -> None:
    out = tmp_path / "files"
    executor = retrying_client.get_executor()
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(
            map, trapped_writer(str(traps)), list(range(INPUTS)), out, num_workers=2, executor=executor, verbose=False
        )
        kill_the_victim(traps)
        run.result(timeout=600)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"f-{i}.txt" for i in range(INPUTS))
    assert [(out / f"f-{i}.txt").read_text() for i in (0, VICTIM - 1, VICTIM, INPUTS - 1)] == [
        f"{i}\n" for i in (0, VICTIM - 1, VICTIM, INPUTS - 1)
    ]


def test_optimize_raises_and_commits_nothing_when_dask_gives_up(tmp_path: Path, traps: Path) -> None:
    out = tmp_path / "ds"
    with make_cluster(allowed_failures=0) as cluster, distributed.Client(cluster) as client:
        executor = client.get_executor()
        with ThreadPoolExecutor(1) as pool:
            run = pool.submit(
                optimize, trap(str(traps), sample), list(range(INPUTS)), out, chunk_size=500, num_workers=2,
                executor=executor, verbose=False,
            )  # fmt: skip
            kill_the_victim(traps)
            with pytest.raises(WorkerError, match=r"optimize worker 1 failed: KilledWorker"):
                run.result(timeout=600)
    assert not (out / "index.json").exists()
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == []


def trapped_writer(traps: str) -> Callable[[int, str], None]:
    trapped = trap(traps, lambda i: None)

    def wrapped(i: int, output_dir: str) -> None:
        trapped(i)
        write_file(i, output_dir)

    return wrapped


def test_map_and_optimize_remove_the_temporaries_a_killed_writer_left(tmp_path: Path) -> None:
    """What a worker killed in the middle of a put leaves (LocalFileStore's ``.name.tmp.<pid>.<hex>``) is gone
    after the run; the user's own hidden files stay."""
    files = tmp_path / "files"
    (files / "sub").mkdir(parents=True)
    stale = [files / ".f-3.txt.tmp.4242.0123abcd", files / "sub" / ".g.bin.tmp.17.89abcdef"]
    for path in stale:
        path.write_text("half")
    (files / ".keep.tmp.notes").write_text("mine")
    map(write_file, list(range(5)), files, num_workers=1, verbose=False, error_when_not_empty=False)
    assert sorted(p.name for p in files.rglob("*") if p.is_file()) == sorted(
        [".keep.tmp.notes", *(f"f-{i}.txt" for i in range(5))]
    )
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / ".chunk-0-0.bin.tmp.4242.0123abcd").write_text("half")
    optimize(sample, list(range(5)), ds, chunk_size=2, num_workers=1, verbose=False, mode="overwrite")
    assert sorted(without_version_log(p.name for p in ds.iterdir())) == [
        "chunk-0-0.bin",
        "chunk-0-1.bin",
        "chunk-0-2.bin",
        "index.json",
    ]
