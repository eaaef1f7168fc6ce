"""Resumable optimize: kill -9 a run at about half way (a worker, or the parent), re-run with
``use_checkpoint=True``, and get every input exactly once — on local disk and on S3 (SeaweedFS).

The run under test is a separate Python process (so the parent can be killed). Its ``fn`` records every
call as a file ``calls/{input}-{pid}`` and, for the second half of each worker's inputs, blocks until a
gate file exists (it never does in the first run). The test waits until both workers' checkpoints show
all first-half inputs committed, then kills. Each input yields three samples and chunks hold four, so
a chunk boundary falls inside an input: the resumed run must skip the already committed samples of it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from dataset_files import without_version_log
from litstream import ConfigurationError, OutputNotEmptyError, StreamingDataset, WorkerError, optimize
from litstream.write._checkpoint import CommitTracker, WorkerCheckpoint

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

N = 24  # inputs; 2 workers x 12
WORKERS = 2
HALF = 6  # each worker blocks at its 7th input
SAMPLES_PER_INPUT = 3
CHUNK_SIZE = 4
# A worker that finished inputs 0..5 added 18 samples: 4 full chunks (16 samples) are committed, so
# its checkpoint says 5 inputs done and 1 sample of the 6th already written.
EXPECTED_DONE, EXPECTED_SKIP = 5, 1

SCRIPT = """
import json, os, sys, time
from pathlib import Path

from litstream import optimize

out, calls, gate, options = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), json.loads(sys.argv[4])


def fn(i):
    (calls / f"{i}-{os.getpid()}").touch()
    if i % 12 >= 6:
        while not gate.exists():
            time.sleep(0.02)
    for k in range(3):
        yield {"i": i, "k": k, "name": f"s{i}-{k}"}


if __name__ == "__main__":
    optimize(fn, list(range(24)), out, chunk_size=4, num_workers=2, use_checkpoint=True,
             storage_options=options or None, verbose=False)
"""


def expected_samples() -> list[tuple[int, int]]:
    return [(i, k) for i in range(N) for k in range(SAMPLES_PER_INPUT)]


def sample_fn(i: int) -> Any:
    for k in range(SAMPLES_PER_INPUT):
        yield {"i": i, "k": k, "name": f"s{i}-{k}"}


def start_run(tmp_path: Path, out: str, options: dict[str, str] | None) -> tuple[subprocess.Popen[bytes], Path]:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    calls = tmp_path / "calls"
    calls.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(
        [sys.executable, str(script), out, str(calls), str(tmp_path / "gate"), json.dumps(options or {})],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return proc, calls


def wait_for(condition: Any, what: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Poll ``condition`` until it holds (the run is not expected to finish while we wait)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the run ended (rc {proc.returncode}) before {what}: {err.decode()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by its dead parent's reaper) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def calls_by_input(calls: Path) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for p in calls.iterdir():
        i, pid = p.name.split("-")
        out.setdefault(int(i), []).append(int(pid))
    return out


def kill_half_way(tmp_path: Path, out: str, options: dict[str, str] | None, victim: str, read_checkpoint: Any) -> Path:
    """Start the run, wait until both workers committed their first half, kill ``victim``; return calls dir."""
    proc, calls = start_run(tmp_path, out, options)
    try:

        def half_committed() -> bool:
            states = [read_checkpoint(rank) for rank in range(WORKERS)]
            return all(s is not None and s["inputs_done"] == EXPECTED_DONE for s in states)

        wait_for(half_committed, "both workers to commit half of their inputs", proc)
        # Both workers are blocked in fn on their 7th input (its call is recorded).
        wait_for(lambda: {HALF, 12 + HALF} <= set(calls_by_input(calls)), "the blocked calls", proc)
        by_input = calls_by_input(calls)
        worker_pids = {by_input[HALF][0], by_input[12 + HALF][0]}
        assert len(worker_pids) == 2
        if victim == "worker":
            os.kill(by_input[12 + HALF][0], signal.SIGKILL)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 1
            assert "optimize worker 1 failed: the worker process died (exit code -9)" in err.decode()
        else:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=60)
            assert proc.returncode == -signal.SIGKILL
        # No worker outlives the run (a killed parent takes its workers with it).
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in worker_pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in worker_pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    first_run = calls_by_input(calls)
    assert sorted(first_run) == [*range(HALF + 1), *range(12, 12 + HALF + 1)]
    for p in calls.iterdir():
        p.unlink()
    return calls


def assert_resumed_exactly_once(calls: Path, samples: list[dict[str, Any]]) -> None:
    assert sorted((s["i"], s["k"]) for s in samples) == expected_samples()
    assert len(samples) == N * SAMPLES_PER_INPUT  # no duplicate
    assert all(s["name"] == f"s{s['i']}-{s['k']}" for s in samples)
    # The resumed run called fn only on the inputs not fully committed before the kill.
    assert sorted(calls_by_input(calls)) == [*range(EXPECTED_DONE, 12), *range(12 + EXPECTED_DONE, 24)]


RESUMED_FILES = sorted(["index.json", *(f"chunk-{r}-{n}.bin" for r in range(2) for n in range(9))])
"""The data files of the resumed run's dataset (version log left out)."""


def resume(calls: Path, out: str | Path, options: dict[str, Any] | None) -> StreamingDataset:
    """Re-run the killed optimize with ``use_checkpoint=True``; check that every input came out exactly once.

    Returns the resumed dataset."""
    optimize(
        recording_fn(calls),
        list(range(N)),
        out,
        chunk_size=CHUNK_SIZE,
        num_workers=WORKERS,
        use_checkpoint=True,
        storage_options=options,
        verbose=False,
    )
    ds = StreamingDataset(out, storage_options=options)
    assert_resumed_exactly_once(calls, list(ds))
    return ds


def recording_fn(calls: Path) -> Any:
    def fn(i: int) -> Any:
        (calls / f"{i}-{os.getpid()}").touch()
        yield from sample_fn(i)

    return fn


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["worker", "parent"])
def test_kill_9_then_resume_local(tmp_path: Path, victim: str) -> None:
    out = tmp_path / "ds"

    def read_checkpoint(rank: int) -> dict[str, Any] | None:
        path = out / ".checkpoints" / f"checkpoint-{rank}.json"
        return json.loads(path.read_text()) if path.exists() else None

    calls = kill_half_way(tmp_path, str(out), None, victim, read_checkpoint)
    state = read_checkpoint(0)
    assert state is not None
    assert (state["inputs_done"], state["samples_skip"], state["next_chunk_index"]) == (EXPECTED_DONE, EXPECTED_SKIP, 4)
    assert not (out / "index.json").exists()
    (out / ".chunk-1-9.bin.tmp.123.abcdef01").write_bytes(b"half a chunk")  # as a write cut short by kill -9
    # Without use_checkpoint the interrupted output is refused, with a hint.
    with pytest.raises(OutputNotEmptyError, match="interrupted run's checkpoints: pass use_checkpoint=True"):
        optimize(sample_fn, list(range(N)), out, chunk_size=CHUNK_SIZE, num_workers=WORKERS, verbose=False)
    # Other inputs or workers cannot resume these checkpoints.
    with pytest.raises(ConfigurationError, match="not compatible with this run: they were made with other inputs"):
        optimize(sample_fn, list(range(N + 1)), out, chunk_size=CHUNK_SIZE, num_workers=WORKERS, use_checkpoint=True)
    with pytest.raises(ConfigurationError, match="made with other num_workers=2 on 1 node"):
        optimize(sample_fn, list(range(N)), out, chunk_size=CHUNK_SIZE, num_workers=3, use_checkpoint=True)

    ds = resume(calls, out, None)
    assert [ds[i]["i"] for i in (0, 35, 71)] == [0, 11, 23]
    assert sorted(without_version_log(p.name for p in out.iterdir())) == RESUMED_FILES


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["worker", "parent"])
def test_kill_9_then_resume_s3(tmp_path: Path, victim: str, s3_server: S3Server) -> None:
    import uuid

    import boto3

    prefix = f"resume-{uuid.uuid4().hex[:10]}"
    url = f"s3://{s3_server.bucket}/{prefix}"
    options = s3_server.options()
    client = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        aws_access_key_id=s3_server.access_key,
        aws_secret_access_key=s3_server.secret_key,
        region_name="us-east-1",
    )

    def read_checkpoint(rank: int) -> dict[str, Any] | None:
        try:
            body = client.get_object(Bucket=s3_server.bucket, Key=f"{prefix}/.checkpoints/checkpoint-{rank}.json")
        except client.exceptions.NoSuchKey:
            return None
        return json.loads(body["Body"].read())  # type: ignore[no-any-return]

    calls = kill_half_way(tmp_path, url, options, victim, read_checkpoint)
    resume(calls, url, options)
    keys = sorted(
        without_version_log(
            o["Key"][len(prefix) + 1 :]
            for o in client.list_objects_v2(Bucket=s3_server.bucket, Prefix=prefix)["Contents"]
        )
    )
    assert keys == RESUMED_FILES


def boom_at_7(i: int) -> int:
    if i == 7:
        raise KeyError("no label")
    return i


def test_failed_worker_leaves_a_resumable_state(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match=r"fn failed on input 7 \(index 7, worker 1\): KeyError") as info:
        optimize(boom_at_7, range(10), tmp_path, chunk_size=2, num_workers=2, use_checkpoint=True, verbose=False)
    assert isinstance(info.value.__cause__, KeyError)
    assert str(info.value.__cause__) == "'no label'"
    # How far worker 0 got before it was stopped depends on timing; the run's checkpoint state stays.
    assert (tmp_path / ".checkpoints" / "config-0.json").exists()
    assert not (tmp_path / "index.json").exists()
    optimize(lambda i: i, range(10), tmp_path, chunk_size=2, num_workers=2, use_checkpoint=True, verbose=False)
    assert list(StreamingDataset(tmp_path)) == list(range(10))
    assert not (tmp_path / ".checkpoints").exists()


def test_commit_tracker_counts_inputs_inside_committed_chunks() -> None:
    from litstream.format._index import ChunkInfo

    tracker = CommitTracker(WorkerCheckpoint())
    for n in [3, 0, 2, 4]:  # samples per input
        tracker.start_input()
        tracker.add_samples(n)
        tracker.end_input()
    first = tracker.committed(ChunkInfo("chunk-0-0.bin", 4, 10), 1, None)
    assert (first.inputs_done, first.samples_skip, first.samples_written) == (2, 1, 4)
    second = tracker.committed(ChunkInfo("chunk-0-1.bin", 4, 10), 2, None)
    assert (second.inputs_done, second.samples_skip, second.samples_written) == (3, 3, 8)
    resumed = CommitTracker(second)
    resumed.start_input()
    resumed.add_samples(4)  # the straddling input is re-run in full; 3 of its 4 samples were committed
    resumed.end_input()
    third = resumed.committed(ChunkInfo("chunk-0-2.bin", 1, 3), 3, None)
    assert (third.inputs_done, third.samples_skip, third.samples_written, third.next_chunk_index) == (4, 0, 9, 3)
    assert [c.filename for c in third.chunks] == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-2.bin"]


def plus_100_failing_at_3(i: int) -> int:
    if i == 3:
        raise ValueError("bad input 3")
    return 100 + i


def test_append_with_checkpoints_resumes_after_a_failure(tmp_path: Path) -> None:
    optimize(int, range(5), tmp_path, chunk_size=2, num_workers=1, verbose=False)
    with pytest.raises(WorkerError, match=r"fn failed on input 3 \(index 3, worker 0\): ValueError: bad input 3"):
        optimize(
            plus_100_failing_at_3, range(6), tmp_path, chunk_size=2, num_workers=1, mode="append", use_checkpoint=True
        )
    # The dataset is untouched meanwhile; the new chunk 3 (inputs 0, 1) is checkpointed.
    assert list(StreamingDataset(tmp_path)) == [0, 1, 2, 3, 4]
    state = json.loads((tmp_path / ".checkpoints" / "checkpoint-0.json").read_text())
    assert (state["inputs_done"], state["next_chunk_index"]) == (2, 4)
    optimize(lambda i: 100 + i, range(6), tmp_path, chunk_size=2, num_workers=1, mode="append", use_checkpoint=True)
    assert list(StreamingDataset(tmp_path)) == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104, 105]
    assert sorted(without_version_log(p.name for p in tmp_path.iterdir())) == [
        *(f"chunk-0-{n}.bin" for n in range(6)),
        "index.json",
    ]
