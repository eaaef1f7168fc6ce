"""optimize's inputs, modes and argument checks: queue inputs, weights / reorder_files, fast_dev_run,
batch_size, overwrite (sidecars included), append, and every bad argument rejected before a write."""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
from typing import TYPE_CHECKING, Any

import pytest

from dataset_files import without_version_log
from litstream import ConfigurationError, FormatError, OutputNotEmptyError, StreamingDataset, optimize
from litstream.write.run._inputs import ALL_DONE, assign_inputs, pack_by_weight

if TYPE_CHECKING:
    from pathlib import Path


def _chunks(d: Path) -> list[str]:
    return [c["filename"] for c in json.loads((d / "index.json").read_text())["chunks"]]


def square(i: int) -> int:
    return i * i


def test_queue_queue_input_in_this_process(tmp_path: Path) -> None:
    q: queue.Queue[Any] = queue.Queue()
    for i in range(7):
        q.put(i)
    q.put(ALL_DONE)
    optimize(square, q, tmp_path, chunk_size=3, num_workers=1, verbose=False)
    assert list(StreamingDataset(tmp_path)) == [i * i for i in range(7)]


def test_multiprocessing_queue_input_feeds_every_worker(tmp_path: Path) -> None:
    q: Any = multiprocessing.get_context("fork").Queue()
    for i in range(20):
        q.put(i)
    q.put(ALL_DONE)
    optimize(square, queue=q, output_dir=tmp_path, chunk_size=2, num_workers=2, verbose=False)
    # Which worker takes which item depends on timing; the dataset holds each exactly once.
    assert sorted(StreamingDataset(tmp_path)) == [i * i for i in range(20)]


def test_queue_without_sentinel_ends_after_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATA_OPTIMIZER_TIMEOUT", "0.3")
    q: queue.Queue[Any] = queue.Queue()
    for i in range(4):
        q.put(i)
    optimize(square, q, tmp_path, chunk_size=3, num_workers=1, verbose=False)
    assert list(StreamingDataset(tmp_path)) == [0, 1, 4, 9]


def test_pack_by_weight_fills_the_lightest_bin_heaviest_first() -> None:
    assert pack_by_weight([1, 1, 1, 1, 1, 10], 2) == [[5], [0, 1, 2, 3, 4]]
    assert pack_by_weight([5, 4, 3, 3, 2, 1], 3) == [[0, 5], [1, 4], [2, 3]]
    split = assign_inputs(30, 2, num_nodes=3, node_rank=1)
    assert ([list(p) for p in split.positions], split.global_ranks) == (
        [list(range(10, 15)), list(range(15, 20))],
        [2, 3],
    )


def test_weights_balance_workers(tmp_path: Path) -> None:
    optimize(square, list(range(6)), tmp_path, weights=[1, 1, 1, 1, 1, 10], chunk_size=10, num_workers=2, verbose=False)
    # Worker 0 gets the heavy input alone; the dataset is rank 0's chunks, then rank 1's.
    assert _chunks(tmp_path) == ["chunk-0-0.bin", "chunk-1-0.bin"]
    assert list(StreamingDataset(tmp_path)) == [25, 0, 1, 4, 9, 16]


def file_size(path: str) -> int:
    return os.path.getsize(path)


def test_reorder_files_balances_by_the_size_of_files_under_input_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    paths = []
    for name, size in [("a", 10), ("b", 10), ("c", 10), ("big", 1000)]:
        (data / name).write_bytes(b"x" * size)
        paths.append(str(data / name))
    out = tmp_path / "out"
    optimize(file_size, paths, out, input_dir=data, chunk_size=10, num_workers=2, verbose=False)
    assert list(StreamingDataset(out)) == [1000, 10, 10, 10]
    optimize(file_size, paths, out, input_dir=data, reorder_files=False, chunk_size=10, num_workers=2, mode="overwrite")
    assert list(StreamingDataset(out)) == [10, 10, 10, 1000]


@pytest.mark.parametrize(
    ("fast_dev_run", "expected"), [(True, [*range(10), *range(15, 25)]), (3, [0, 1, 2, 15, 16, 17])]
)
def test_fast_dev_run_keeps_the_first_inputs_of_every_worker(
    tmp_path: Path, fast_dev_run: bool | int, expected: list[int]
) -> None:
    optimize(int, range(30), tmp_path, chunk_size=4, num_workers=2, fast_dev_run=fast_dev_run, verbose=False)
    assert list(StreamingDataset(tmp_path)) == expected


def test_batch_size_groups_inputs_into_lists(tmp_path: Path) -> None:
    optimize(sum, range(10), tmp_path, batch_size=4, chunk_size=2, num_workers=1, verbose=False)
    assert list(StreamingDataset(tmp_path)) == [0 + 1 + 2 + 3, 4 + 5 + 6 + 7, 8 + 9]


def test_overwrite_replaces_the_dataset_and_its_sidecars(tmp_path: Path) -> None:
    optimize(int, range(12), tmp_path, chunk_size=2, num_workers=2, verbose=False)
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "shard-00000.parquet").write_bytes(b"stale")
    (tmp_path / "keys.parquet").write_bytes(b"stale")
    (tmp_path / "0.keys.parquet").write_bytes(b"stale")
    (tmp_path / ".checkpoints").mkdir()
    (tmp_path / ".checkpoints" / "checkpoint-7.json").write_text("{}")
    (tmp_path / "README.txt").write_text("mine")
    optimize(int, range(3), tmp_path, chunk_size=2, num_workers=1, mode="overwrite", verbose=False)
    assert list(StreamingDataset(tmp_path)) == [0, 1, 2]
    # The new version's chunks are numbered after the old ones, which retention keeps for now (24 h).
    assert _chunks(tmp_path) == ["chunk-0-3.bin", "chunk-0-4.bin"]
    old = [f"chunk-{rank}-{n}.bin" for rank in range(2) for n in range(3)]
    left = sorted(without_version_log(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")))
    assert left == sorted(["README.txt", *old, "chunk-0-3.bin", "chunk-0-4.bin", "index.json", "keys"])


def test_append_with_several_workers_continues_each_ranks_numbering(tmp_path: Path) -> None:
    optimize(int, range(8), tmp_path, chunk_size=3, num_workers=2, verbose=False)
    assert _chunks(tmp_path) == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-1-0.bin", "chunk-1-1.bin"]
    optimize(lambda i: 100 + i, range(4), tmp_path, chunk_size=3, num_workers=2, mode="append", verbose=False)
    assert _chunks(tmp_path)[4:] == ["chunk-0-2.bin", "chunk-1-2.bin"]
    assert list(StreamingDataset(tmp_path)) == [*range(8), 100, 101, 102, 103]


def test_append_to_an_empty_output_is_a_plain_run(tmp_path: Path) -> None:
    optimize(int, range(3), tmp_path / "new", chunk_size=2, num_workers=1, mode="append", verbose=False)
    assert list(StreamingDataset(tmp_path / "new")) == [0, 1, 2]


def test_append_with_another_format_is_refused_and_keeps_the_dataset(tmp_path: Path) -> None:
    optimize(int, range(3), tmp_path, chunk_size=2, num_workers=1, verbose=False)
    before = (tmp_path / "index.json").read_text()
    with pytest.raises(FormatError, match=r"the config in 0\.index\.json differs from the one in index\.json"):
        optimize(str, range(3), tmp_path, chunk_size=2, num_workers=1, mode="append", verbose=False)
    assert (tmp_path / "index.json").read_text() == before
    assert sorted(without_version_log(p.name for p in tmp_path.iterdir())) == [
        "chunk-0-0.bin",
        "chunk-0-1.bin",
        "index.json",
    ]
    assert list(StreamingDataset(tmp_path)) == [0, 1, 2]


class NotAnExecutor:
    def submit(self, fn: Any) -> None:
        raise AssertionError("never called")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"inputs": [1], "queue": queue.Queue()}, "give inputs or queue, not both"),
        ({"inputs": None}, "give inputs: a non-empty sequence, or a queue"),
        ({"inputs": None, "queue": [1, 2]}, "queue must be a queue.Queue or multiprocessing.Queue, got list"),
        ({"inputs": {1, 2}}, "inputs must be a non-empty sequence"),
        ({"weights": [1, 2]}, "weights has 2 entries but inputs has 4"),
        ({"weights": [1, 0, 1, 1]}, r"weights\[1\]=0 is not a positive number"),
        ({"inputs": queue.Queue(), "weights": [1]}, "weights=.* cannot be used with a queue input"),
        ({"inputs": queue.Queue(), "use_checkpoint": True}, "use_checkpoint=True needs a sequence of inputs"),
        ({"executor": NotAnExecutor()}, "executor must be a concurrent.futures.Executor"),
        ({"fast_dev_run": -1}, "fast_dev_run must be True, False or a positive int"),
        ({"batch_size": 0}, "batch_size must be a positive int"),
        ({"reorder_files": "yes"}, "reorder_files must be True or False"),
        ({"use_checkpoint": 1}, "use_checkpoint must be True or False"),
        ({"start_method": "teleport"}, "start_method='teleport' is not available here"),
        ({"fn": 5}, "fn must be callable, got 5"),
        ({"output_dir": "ftp://host/x"}, "unknown URL scheme 'ftp'"),
        ({"output_dir": "hf://datasets/org/name"}, r"cannot write datasets to hf:// \(read-only here\)"),
        ({"output_dir": "https://example.com/ds"}, "cannot write datasets to https://"),
    ],
)
def test_bad_arguments_are_rejected_before_anything_is_written(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    out = tmp_path / "out"
    args: dict[str, Any] = {"fn": int, "inputs": [0, 1, 2, 3], "output_dir": out, "chunk_size": 2, "verbose": False}
    args.update(kwargs)
    with pytest.raises(ConfigurationError, match=message):
        optimize(**args)
    assert not out.exists()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DATA_OPTIMIZER_NUM_NODES": "2", "DATA_OPTIMIZER_NODE_RANK": "2"}, "NODE_RANK=2 must be below"),
        ({"DATA_OPTIMIZER_NUM_NODES": "two"}, "DATA_OPTIMIZER_NUM_NODES='two' is not an integer"),
        ({"DATA_OPTIMIZER_TIMEOUT": "-1"}, "DATA_OPTIMIZER_TIMEOUT='-1' must be a positive number"),
    ],
)
def test_bad_environment_is_rejected_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigurationError, match=message):
        optimize(int, range(4), tmp_path / "out", chunk_size=2, verbose=False)
    assert not (tmp_path / "out").exists()


def test_append_refuses_chunks_that_no_index_lists(tmp_path: Path) -> None:
    optimize(fn=square, inputs=list(range(8)), output_dir=tmp_path, chunk_size=2, num_workers=1, verbose=False)
    (tmp_path / "index.json").unlink()  # an interrupted run: chunk files, no index
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OutputNotEmptyError, match=r"holds chunk-0-0\.bin, .* but no index\.json .*complete_dataset"):
        optimize(fn=square, inputs=[9], output_dir=tmp_path, chunk_size=2, num_workers=1, mode="append", verbose=False)
    assert sorted(os.listdir(tmp_path)) == before


def _parent_pid(i: int) -> dict[str, int]:
    return {"i": i, "ppid": os.getppid()}


def _optimize_under(method: str | None, out: str, as_argument: bool = False) -> tuple[int, list[int]]:
    """In a clean process: set the program's start method (or pass it to optimize, or neither), optimize with
    2 workers, return this process's pid and each sample's worker's parent pid."""
    if method is not None and not as_argument:
        multiprocessing.set_start_method(method)
    start_method = method if as_argument else None
    optimize(_parent_pid, list(range(6)), out, chunk_size=2, num_workers=2, verbose=False, start_method=start_method)
    return os.getpid(), [int(s["ppid"]) for s in StreamingDataset(out)]


@pytest.mark.parametrize(("method", "as_argument"), [(None, False), ("forkserver", False), ("forkserver", True)])
def test_optimize_follows_the_start_method_the_program_set(
    tmp_path: Path, method: str | None, as_argument: bool
) -> None:
    """``multiprocessing.set_start_method("forkserver")`` (or ``start_method="forkserver"``) is honoured: the
    workers are children of the fork server, not of this process; without it, they are forked from this process."""
    from clean_process import run_clean

    pid, parents = run_clean(_optimize_under, method, str(tmp_path / "out"), as_argument)
    assert len(parents) == 6
    if method is None:
        assert set(parents) == {pid}
    else:
        assert pid not in parents
        assert len(set(parents)) == 1  # one fork server


def _start_method_after_import() -> str | None:
    import litstream
    import litstream._torch
    import litstream.write

    assert litstream.StreamingDataLoader is not None
    return multiprocessing.get_start_method(allow_none=True)


def test_importing_litstream_leaves_the_start_method_to_the_program() -> None:
    """``import litstream`` must not fix multiprocessing's default context, or the program's own
    ``multiprocessing.set_start_method("spawn")`` fails with "context has already been set"."""
    from clean_process import run_clean

    assert run_clean(_start_method_after_import) is None


def _read_marker(i: int) -> dict[str, Any]:
    return {"i": i, "marker": os.environ.get("LITSTREAM_TEST_MARKER", "")}


def _markers_after_the_server_started(out: str) -> list[str]:
    """In a clean process: start the fork server with one optimize, set a variable, optimize again."""
    multiprocessing.set_start_method("forkserver")
    optimize(_read_marker, list(range(2)), out + "-first", chunk_size=2, num_workers=2, verbose=False)
    os.environ["LITSTREAM_TEST_MARKER"] = "set after the fork server started"
    optimize(_read_marker, list(range(4)), out, chunk_size=2, num_workers=2, verbose=False)
    return [str(s["marker"]) for s in StreamingDataset(out)]


def test_forkserver_workers_see_the_environment_of_the_call(tmp_path: Path) -> None:
    """A fork server's children inherit the server's environment, fixed when it started: optimize hands its
    workers the environment of the call instead, as fork and spawn do."""
    from clean_process import run_clean

    markers = run_clean(_markers_after_the_server_started, str(tmp_path / "out"))
    assert markers == ["set after the fork server started"] * 4
