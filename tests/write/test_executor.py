"""optimize / map on a concurrent.futures.Executor: a real Dask LocalCluster (scheduler and worker
processes on 127.0.0.1, one per module) and a ProcessPoolExecutor. LitData reads the Dask-written
dataset sample-identical."""

from __future__ import annotations

import gc
import multiprocessing
import shutil
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from clean_process import run_clean
from dataset_files import without_version_log
from litstream import StreamingDataset, WorkerError, map, optimize
from peer import require_dev, require_peer

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

distributed = require_dev("distributed")

pytestmark = [
    pytest.mark.slow,
    # Dask's comms and LitData's reader leave sockets / chunk files to the garbage collector.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:distributed.*"),
]


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"item-{i}", "score": i / 4, "raw": bytes(range(i % 7))}


def fail_on_13(i: int) -> dict[str, Any]:
    if i == 13:
        raise KeyError("no label for 13")
    return sample(i)


def write_text(i: int, output_dir: str) -> None:
    with open(f"{output_dir}/file-{i}.txt", "w") as f:
        f.write(f"content {i}\n")


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def test_optimize_on_a_dask_cluster(tmp_path: Path, dask_client: Any) -> None:
    out = tmp_path / "ds"
    optimize(
        sample, list(range(40)), out, chunk_size=6, num_workers=4, executor=dask_client.get_executor(), verbose=False
    )
    ds = StreamingDataset(out)
    assert [s["i"] for s in ds] == list(range(40))
    assert ds[17] == sample(17)
    names = sorted(without_version_log(p.name for p in out.iterdir()))
    assert names == sorted(["index.json", *(f"chunk-{r}-{n}.bin" for r in range(4) for n in range(2))])
    # The peer library reads the same samples in the same order.
    litdata = require_peer("litdata")
    copy = tmp_path / "ds-litdata-copy"
    shutil.copytree(out, copy)
    peer = litdata.StreamingDataset(str(copy))
    assert list(peer) == [sample(i) for i in range(40)]
    del peer
    gc.collect()


def test_worker_error_on_dask_names_the_input_and_cleans_up(tmp_path: Path, dask_client: Any) -> None:
    out = tmp_path / "ds"
    with pytest.raises(WorkerError, match=r"optimize worker 1 failed: WorkerError: fn failed on input 13 \(index 13"):
        optimize(
            fail_on_13,
            list(range(20)),
            out,
            chunk_size=2,
            num_workers=2,
            executor=dask_client.get_executor(),
            verbose=False,
        )
    assert not (out / "index.json").exists()
    assert not out.exists() or [p.name for p in out.iterdir()] == []


def test_map_on_a_dask_cluster(tmp_path: Path, dask_client: Any) -> None:
    out = tmp_path / "files"
    map(write_text, list(range(9)), out, num_workers=3, executor=dask_client.get_executor(), verbose=False)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"file-{i}.txt" for i in range(9))
    assert (out / "file-4.txt").read_text() == "content 4\n"


def _resume_on_a_fork_pool(tmp_path: Path) -> None:
    """In a clean helper process (it forks the pool's workers)."""
    out = tmp_path / "ds"
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        with pytest.raises(WorkerError, match=r"fn failed on input 13 \(index 13, worker 1\)"):
            optimize(fail_on_13, range(20), out, chunk_size=3, num_workers=2, executor=pool, use_checkpoint=True)
        # Worker 0 finished and checkpointed all its chunks; worker 1 failed before closing its first.
        assert (out / ".checkpoints" / "checkpoint-0.json").exists()
        assert sorted(p.name for p in out.glob("chunk-*")) == [f"chunk-0-{n}.bin" for n in range(4)]
        optimize(sample, range(20), out, chunk_size=3, num_workers=2, executor=pool, use_checkpoint=True, verbose=False)
    assert list(StreamingDataset(out)) == [sample(i) for i in range(20)]
    assert not (out / ".checkpoints").exists()


def test_optimize_on_a_process_pool_resumes_with_checkpoints(tmp_path: Path) -> None:
    run_clean(_resume_on_a_fork_pool, tmp_path)
    assert (tmp_path / "ds" / "index.json").is_file()
