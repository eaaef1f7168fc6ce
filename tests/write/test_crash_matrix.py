"""Crash matrix: ``optimize`` killed with SIGKILL (its whole process group) at every moment that matters.

For each crash point (``litstream._core._crash``) x local and S3 x fresh / overwrite / append: the run is
started in a process group of its own and killed there; afterwards every reader sees exactly one committed
version (the one before the run, or the run's own once its commit happened; for a first write,
``DatasetNotFoundError`` naming the interrupted run), and the next write (the same call again) succeeds,
commits exactly its samples and leaves no file of the dead run behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from write_targets import TARGETS, Target, make_target

import litstream
from litstream import DatasetNotFoundError, StreamingDataset
from litstream._core._crash import CRASH_ENV

if TYPE_CHECKING:
    from pathlib import Path

OLD = list(range(100, 123))  # the committed version a run starts from (overwrite, append)
NEW = list(range(40))  # what the killed run writes

_RUN = """
import json, sys
import litstream
args = json.loads(sys.argv[1])
litstream.optimize(int, args["inputs"], args["location"], chunk_size=4, num_workers=2, mode=args["mode"],
                   storage_options=args["options"], verbose=False)
"""

# (crash point, whether the run's version is committed when it dies, backends where the point is reached)
POINTS: list[tuple[str, bool, tuple[str, ...]]] = [
    ("run:prepared", False, ("local", "s3")),  # lease held, before the first chunk
    ("chunk:stored@1", False, ("local", "s3")),  # after a worker's first chunk
    ("chunk:stored@3", False, ("local", "s3")),  # after a worker's third chunk
    ("store:written", False, ("local",)),  # mid-chunk: a whole temporary file, not yet renamed
    ("run:partials-written", False, ("local", "s3")),  # every partial index stored, nothing committed
    ("commit:staged", False, ("local", "s3")),  # the new index copy staged in the version log
    ("commit:published", True, ("local", "s3")),  # index.json replaced; no version record yet
    ("commit:recorded", True, ("local", "s3")),  # recorded; retention not applied yet
    ("run:committed", True, ("local", "s3")),  # committed; partial indexes not removed yet
]


def _expected(mode: str, committed: bool) -> list[int] | None:
    if not committed:
        return None if mode == "fresh" else OLD
    return OLD + NEW if mode == "append" else NEW


def _optimize(target: Target, inputs: list[int], mode: str | None) -> None:
    litstream.optimize(
        int, inputs, target.location, chunk_size=4, num_workers=1, mode=mode, storage_options=target.options,
        verbose=False,
    )  # fmt: skip


def _run_killed(target: Target, mode: str | None, point: str) -> None:
    args = json.dumps({"inputs": NEW, "location": target.location, "mode": mode, "options": target.options})
    env = {**os.environ, CRASH_ENV: point}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, args], env=env, start_new_session=True, capture_output=True, timeout=180
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]


def _read(target: Target) -> list[int]:
    return list(StreamingDataset(target.location, storage_options=target.options))


def _dead_run_files(target: Target, expected: list[int]) -> list[str]:
    """Chunk files and partial indexes no kept version references (the log keeps every version here)."""
    versions = litstream.list_versions(target.location, storage_options=target.options)
    assert versions[-1].samples == len(expected)
    referenced: set[str] = set()
    for v in versions:
        assert v.number is not None
        ds = StreamingDataset(target.location, storage_options=target.options, version=v.number)
        len(ds)
        referenced |= {c.filename for c in ds._reader.source().index.chunks}
    return [
        n
        for n in target.files()
        if "/" not in n and (n.startswith("chunk-") or n.endswith("index.json")) and n not in referenced
        and n != "index.json"
    ]  # fmt: skip


_CASES = [
    pytest.param(backend, point, committed, id=f"{backend}-{point}")
    for backend in TARGETS
    for point, committed, where in POINTS
    if backend in where  # a point that only a local file system step reaches is not run on S3
]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fresh", "overwrite", "append"])
@pytest.mark.parametrize(("backend", "point", "committed"), _CASES)
def test_a_killed_optimize_leaves_exactly_one_committed_version(
    backend: str, point: str, committed: bool, mode: str, request: Any, tmp_path: Path
) -> None:
    target = make_target(backend, request, tmp_path)
    given = None if mode == "fresh" else mode
    if mode != "fresh":
        _optimize(target, OLD, None)
    _run_killed(target, given, point)

    expected = _expected(mode, committed)
    if expected is None:
        with pytest.raises(DatasetNotFoundError) as info:
            _read(target)
        if point in ("run:partials-written", "commit:staged"):  # the dead run is named, with the ways forward
            assert "interrupted run left partial indexes" in str(info.value)
    else:
        assert _read(target) == expected

    # The next write (the same call again) succeeds, commits exactly its samples and removes the dead run's files.
    again = "overwrite" if mode == "fresh" and committed else given  # mode=None refuses a committed dataset
    _optimize(target, NEW, again)
    final = (expected or []) + NEW if mode == "append" else NEW
    assert _read(target) == final
    assert _dead_run_files(target, final) == []


@pytest.mark.slow
@pytest.mark.parametrize("point", ["gc:records-removed", "gc:file-removed@2"])
@pytest.mark.parametrize("backend", TARGETS)
def test_a_run_killed_while_retention_removes_files_keeps_its_commit(
    backend: str, point: str, request: Any, tmp_path: Path
) -> None:
    """Retention removes a superseded version after the commit: killed part way, the new version stands, the
    old one is gone from the log, and the files it left are removed by the next run."""
    target = make_target(backend, request, tmp_path)
    _optimize(target, OLD, None)
    litstream.collect_garbage(target.location, keep=1, grace=0, save=True, storage_options=target.options)
    _run_killed(target, "overwrite", point)
    assert _read(target) == NEW
    assert [v.number for v in litstream.list_versions(target.location, storage_options=target.options)] == [2]
    _optimize(target, NEW, "overwrite")
    assert _read(target) == NEW
    assert [v.number for v in litstream.list_versions(target.location, storage_options=target.options)] == [3]
    assert _dead_run_files(target, NEW) == []
    chunks = sorted(n for n in target.files() if n.startswith("chunk-"))
    assert len(chunks) == 10
    assert all(n.startswith(("chunk-0-",)) for n in chunks)


# (node killed, crash point, whether the dataset commit happened): node 1, the last, commits for both
NODE_POINTS = [
    (0, "chunk:stored@2", False),  # node 0 mid-share
    (0, "run:committed", False),  # node 0 stored its node index, before removing its partials
    (1, "run:partials-written", False),  # node 0 done, node 1's workers done, nothing committed
    (1, "commit:published", True),  # index.json replaced by the last node, no record yet
]


def _node_command(target: Target, mode: str | None, node: int, point: str | None) -> tuple[list[str], dict[str, str]]:
    args = json.dumps({"inputs": NEW, "location": target.location, "mode": mode, "options": target.options})
    env = {**os.environ, "DATA_OPTIMIZER_NUM_NODES": "2", "DATA_OPTIMIZER_NODE_RANK": str(node)}
    env["DATA_OPTIMIZER_TIMEOUT"] = "120"
    if point is not None:
        env[CRASH_ENV] = point
    return [sys.executable, "-c", _RUN, args], env


def _run_node(target: Target, mode: str | None, node: int, point: str | None) -> subprocess.CompletedProcess[bytes]:
    command, env = _node_command(target, mode, node, point)
    return subprocess.run(command, env=env, start_new_session=True, capture_output=True, timeout=180)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fresh", "overwrite", "append"])
@pytest.mark.parametrize(("victim", "point", "committed"), NODE_POINTS, ids=[f"node{v}-{p}" for v, p, _ in NODE_POINTS])
@pytest.mark.parametrize("backend", TARGETS)
def test_a_killed_node_of_two_leaves_exactly_one_committed_version(
    backend: str, victim: int, point: str, committed: bool, mode: str, request: Any, tmp_path: Path
) -> None:
    target = make_target(backend, request, tmp_path)
    given = None if mode == "fresh" else mode
    if mode != "fresh":
        _optimize(target, OLD, None)
    for node in range(victim + 1):  # nodes in order; the victim dies at its point
        proc = _run_node(target, given, node, point if node == victim else None)
        expected_rc = -signal.SIGKILL if node == victim else 0
        assert proc.returncode == expected_rc, proc.stderr.decode()[-2000:]

    expected = _expected(mode, committed)
    if expected is None:
        with pytest.raises(DatasetNotFoundError):
            _read(target)
    else:
        assert _read(target) == expected

    # Both nodes run again, in order, and commit exactly their samples. A node whose earlier share was finished
    # cannot tell a dead job from one whose last node has not started yet: a fresh write then needs
    # mode="overwrite", as the last node's timeout message says.
    again = "overwrite" if mode == "fresh" and (committed or victim == 1) else given
    for node in (0, 1):
        proc = _run_node(target, again, node, None)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    final = (expected or []) + NEW if mode == "append" else NEW
    assert _read(target) == final
    assert _dead_run_files(target, final) == []
