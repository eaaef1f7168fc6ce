"""One writer at a time: ``optimize``, ``map`` and ``AsyncUploader`` hold a lease on their output.

Two real processes race for one output (local and S3 on SeaweedFS, every mode): exactly one writes, the
other gets ``OutputLockedError`` naming it, and the dataset is exactly the winner's. A SIGKILLed writer's
lock is taken over; the lock is given back after success, failure and KeyboardInterrupt; a run that lost
its lock, or whose ``index.json`` another writer changed, commits nothing.
"""

from __future__ import annotations

import functools
import gc
import json
import multiprocessing
import os
import shutil
import signal
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from lock_racers import hold, inputs_of, race, sample
from obstore.store import MemoryStore
from write_targets import TARGETS, make_target

from dataset_files import without_version_log
from litstream import (
    AsyncUploader,
    LocalFileStore,
    ObstoreStore,
    OutputLockedError,
    StreamingDataset,
    WorkerError,
    optimize,
)
from litstream._core._bridge import run_sync
from litstream.storage._resolver import store_for
from litstream.storage._versioned import VersionConflictError, versioned
from litstream.write._lease_holder import Holder
from litstream.write._writer_lock import WriterLock, lock_name, set_lease_ttl
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

    from write_targets import Target

LOCK = lock_name(0)
BASE = [9000 + i for i in range(4)]  # a dataset already there for "overwrite" and "append"


def _samples(target: Target) -> list[int]:
    return sorted(s["i"] for s in target.dataset())


def _has_lock(target: Target) -> bool:
    if target.name == "local":
        return os.path.exists(os.path.join(target.location, LOCK))
    return LOCK in target.files()


def _race(kinds: tuple[str, str], target: Target, mode: str | None) -> dict[str, tuple[int, int, str, str]]:
    """Run two racers (spawned processes) lined up on a barrier; returns ``{"ok": ..., "locked": ...}``."""
    outcomes = race(kinds, target.location, target.options, mode)
    by = {o[2]: o for o in outcomes}
    assert sorted(by) == ["locked", "ok"], outcomes
    return by


def _check_race(target: Target, kinds: tuple[str, str], mode: str | None) -> None:
    by = _race(kinds, target, mode)
    winner, loser = by["ok"], by["locked"]
    # The refusal names the run that holds the output: operation, host and pid.
    assert f"{'AsyncUploader' if kinds[winner[0]] == 'uploader' else kinds[winner[0]]} run " in loser[3]
    assert f"host {socket.gethostname()}, pid {winner[1]}," in loser[3]
    kind = kinds[winner[0]]
    if kind == "map":
        names = sorted(n for n in target.files() if n.startswith("file-"))
        assert names == sorted(f"file-{i}.txt" for i in inputs_of(winner[0]))
    else:
        expected = (BASE if mode == "append" else []) + inputs_of(winner[0])
        assert _samples(target) == sorted(expected)  # exactly the winner's samples, never a mix
    assert not any(n.startswith("file-") for n in target.files()) or kind == "map"
    assert not _has_lock(target)


def _base(target: Target, mode: str | None) -> None:
    if mode is not None:
        optimize(
            sample, BASE, target.location, chunk_size=2, num_workers=1, storage_options=target.options, verbose=False
        )


@pytest.mark.parametrize("mode", [None, "overwrite", "append"])
@pytest.mark.parametrize("where", TARGETS)
def test_two_optimize_runs_race_one_wins_whole(
    where: str, mode: str | None, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    target = make_target(where, request, tmp_path)
    _base(target, mode)
    _check_race(target, ("optimize", "optimize"), mode)


@pytest.mark.parametrize("where", TARGETS)
def test_optimize_and_map_race(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target(where, request, tmp_path)
    _base(target, "overwrite")
    _check_race(target, ("optimize", "map"), "overwrite")
    if not any(n.startswith("file-") for n in target.files()):  # optimize won
        assert _samples(target) == inputs_of(0)


@pytest.mark.parametrize("where", TARGETS)
def test_an_uploader_and_optimize_race(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target(where, request, tmp_path)
    _base(target, "append")
    _check_race(target, ("uploader", "optimize"), "append")


@pytest.mark.parametrize("where", TARGETS)
def test_a_sigkilled_writers_lock_is_taken_over(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target(where, request, tmp_path)
    ctx = multiprocessing.get_context("spawn")
    started = ctx.Event()
    proc = ctx.Process(target=hold, args=(target.location, target.options, started))
    proc.start()
    assert started.wait(120), "the writer did not start"
    assert _has_lock(target)
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(60)
    assert proc.exitcode == -signal.SIGKILL
    # Same host, process gone: the lock is stale at once, and the checkpointed run resumes under a new lease.
    optimize(
        sample,
        inputs_of(0),
        target.location,
        chunk_size=2,
        num_workers=1,
        use_checkpoint=True,
        storage_options=target.options,
        verbose=False,
    )
    assert _samples(target) == inputs_of(0)
    assert not _has_lock(target)


def _foreign(target: Target, expires: float, state: str = "running") -> Holder:
    """A lease as another machine's run would have written it."""
    now = time.time()
    holder = Holder(
        run_id="feedc0ffee00",
        operation="optimize",
        host="node-b",
        machine="node-b|boot|1",
        pid=4242,
        pid_start=None,
        started=now - 30,
        renewed=now - 30,
        expires=expires,
        state=state,
    )
    versioned(target.store).put(LOCK, holder.to_json(), None)
    return holder


@pytest.mark.parametrize("where", TARGETS)
def test_another_machines_lease_holds_until_it_expires(
    where: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    target = make_target(where, request, tmp_path)
    _foreign(target, expires=time.time() + 600)
    with pytest.raises(OutputLockedError, match=r"optimize run feedc0ffee00 \(host node-b, pid 4242, started "):
        optimize(sample, [1, 2], target.location, chunk_size=2, storage_options=target.options, verbose=False)
    assert target.files() == ([LOCK] if where == "s3" else [])  # nothing written (local listings hide dot-files)
    objects = versioned(target.store)
    found = objects.read(LOCK)
    assert found is not None
    objects.put(LOCK, json.dumps({**json.loads(found[0]), "expires": time.time() - 1}).encode(), found[1])
    optimize(sample, [1, 2], target.location, chunk_size=2, storage_options=target.options, verbose=False)
    assert _samples(target) == [1, 2]
    assert not _has_lock(target)


def test_a_stale_lease_of_this_host_is_recognised(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target("local", request, tmp_path)
    lock = WriterLock(target.store, "optimize")
    alive = lock.holder
    assert alive.stale_reason(time.time()) is None  # this very process
    gone = Holder(**{**alive.__dict__, "pid": 2**22 + 12345})
    assert gone.stale_reason(time.time()) == f"its process {2**22 + 12345} on this host is gone"
    reused = Holder(**{**alive.__dict__, "pid_start": "1"})  # this pid, but another process's start time
    assert reused.stale_reason(time.time()) is not None
    assert Holder.from_json(b'{"run_id": 1}') is None
    assert Holder.from_json(b"\xff") is None


@pytest.mark.parametrize("where", TARGETS)
def test_the_lock_is_given_back_after_a_failure_and_a_keyboard_interrupt(
    where: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    target = make_target(where, request, tmp_path)

    def fails(i: int) -> dict[str, int]:
        raise ValueError("boom")

    def interrupted(i: int) -> dict[str, int]:
        raise KeyboardInterrupt

    with pytest.raises(WorkerError):
        optimize(
            fails, [1], target.location, chunk_size=2, num_workers=1, storage_options=target.options, verbose=False
        )
    assert not _has_lock(target)
    with pytest.raises(KeyboardInterrupt):
        optimize(
            interrupted,
            [1],
            target.location,
            chunk_size=2,
            num_workers=1,
            storage_options=target.options,
            verbose=False,
        )
    assert not _has_lock(target)
    optimize(sample, [5], target.location, chunk_size=2, num_workers=1, storage_options=target.options, verbose=False)
    assert _samples(target) == [5]


@pytest.mark.parametrize("where", TARGETS)
def test_a_run_that_lost_its_lock_commits_nothing(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target(where, request, tmp_path)
    location, options = target.location, target.options

    def steals(i: int) -> dict[str, int]:  # another machine's run takes the lease over mid-run
        objects = versioned(store_for(location, options))
        found = objects.read(LOCK)
        assert found is not None
        now = time.time()
        thief = Holder("0123456789ab", "optimize", "node-c", "node-c|x|1", 7, None, now, now, now + 600)
        objects.put(LOCK, thief.to_json(), found[1])
        return {"i": i}

    with pytest.raises(OutputLockedError, match=r"lost its writer lock .* taken over by optimize run 0123456789ab"):
        optimize(steals, [1, 2], location, chunk_size=2, num_workers=1, storage_options=options, verbose=False)
    assert "index.json" not in target.files()


@pytest.mark.parametrize("where", TARGETS)
def test_a_commit_refuses_an_index_changed_by_another_writer(
    where: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    target = make_target(where, request, tmp_path)
    _base(target, "append")
    before = target.read("index.json")
    location, options = target.location, target.options

    def rewrites(i: int) -> dict[str, int]:  # a writer that ignores the lock (LitData, a script) commits
        store = store_for(location, options)
        run_sync(store.put, "index.json", before.replace(b'"chunks"', b'"chunks" '))
        return {"i": i}

    with pytest.raises(OutputLockedError, match=r"index\.json was changed by another writer"):
        optimize(
            rewrites, [1], location, chunk_size=2, num_workers=1, mode="append", storage_options=options, verbose=False
        )
    assert _samples(target) == BASE  # the other writer's index stands; this run's samples are not in it
    assert not _has_lock(target)


@pytest.mark.anyio
async def test_an_uploader_is_refused_while_another_holds_the_output(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    target = make_target("local", request, tmp_path)
    async with AsyncUploader(target.location, chunk_size=2) as first:
        await first.add({"i": 1})
        with pytest.raises(OutputLockedError, match=rf"AsyncUploader run \w+ \(host .*, pid {os.getpid()},"):
            async with AsyncUploader(target.location, chunk_size=2):
                pass
        await first.add({"i": 2})
    assert _samples(target) == [1, 2]
    assert not _has_lock(target)


def test_a_single_run_is_refused_beside_a_multi_node_run(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target("local", request, tmp_path)
    node = WriterLock(target.store, "optimize", node_rank=1, num_nodes=2).acquire()
    try:
        with pytest.raises(OutputLockedError, match=r"node 1 of 2"):
            optimize(sample, [1], target.location, chunk_size=2, num_workers=1, verbose=False)
    finally:
        node.release()
    assert os.listdir(target.location) == []


def test_seaweedfs_decides_conditional_puts(s3_server: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """What the S3 lock relies on, checked against the real server: If-None-Match and If-Match on PUT."""
    objects = versioned(make_target("s3", request, tmp_path).store)
    first = objects.put("k", b"1", None)
    with pytest.raises(VersionConflictError):
        objects.put("k", b"2", None)  # exists
    second = objects.put("k", b"3", first)
    with pytest.raises(VersionConflictError):
        objects.put("k", b"4", first)  # replaced since
    assert objects.read("k") == (b"3", second)
    assert not objects.delete("k", first)
    assert objects.delete("k", second)
    assert objects.read("k") is None


@pytest.mark.litdata
@pytest.mark.anyio
async def test_litdata_and_litstream_ignore_a_held_lock(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    litdata = require_peer("litdata")
    target = make_target("local", request, tmp_path)
    async with AsyncUploader(target.location, chunk_size=2) as up:
        for i in range(5):
            await up.add({"i": i})
        await up.flush()
        copy = tmp_path / "copy"
        shutil.copytree(target.location, copy)  # a reader that comes while the writer holds its lock
        assert (copy / LOCK).is_file()

        def read() -> tuple[list[int], list[int]]:
            theirs = litdata.StreamingDataset(str(copy))
            ours = [s["i"] for s in StreamingDataset(str(copy))]
            found = [int(s["i"]) for s in theirs]
            del theirs
            gc.collect()  # LitData leaves chunk files open; close them inside this test
            return found, ours

        assert await anyio.to_thread.run_sync(read) == ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4])
    assert not _has_lock(target)
    assert sorted(without_version_log(os.listdir(target.location))) == [
        "chunk-0-0.bin",
        "chunk-0-1.bin",
        "chunk-0-2.bin",
        "index.json",
    ]


class _PlainStore:
    """A user's Store without ``local_path``: the lock falls back to read, compare, write."""

    def __init__(self, inner: LocalFileStore) -> None:
        self._inner = inner
        self.url = f"plain+{inner.url}"

    def __getattr__(self, name: str) -> Any:
        if name == "local_path":
            raise AttributeError(name)
        return getattr(self._inner, name)


@pytest.mark.parametrize("kind", ["memory", "plain"])
@pytest.mark.usefixtures("obstore_in_process")  # the memory store is obstore: run late (see conftest.py)
def test_conditional_puts_and_the_lock_on_other_stores(kind: str, tmp_path: Path) -> None:
    store: Any = ObstoreStore(MemoryStore()) if kind == "memory" else _PlainStore(LocalFileStore(tmp_path))
    objects = versioned(store)
    first = objects.put("k", b"1", None)
    with pytest.raises(VersionConflictError):
        objects.put("k", b"2", None)
    second = objects.put("k", b"3", first)
    with pytest.raises(VersionConflictError):
        objects.put("k", b"4", first)
    assert objects.read("k") == (b"3", second)
    assert objects.delete("k", second)
    holder = WriterLock(store, "optimize").acquire()
    try:
        with pytest.raises(OutputLockedError, match=rf"optimize run {holder.holder.run_id} "):
            WriterLock(store, "map").acquire()
    finally:
        holder.release()
    assert objects.read(LOCK) is None


@pytest.mark.parametrize("content", [b"\x00garbage", b"[]", b'{"run_id": "x", "pid": -1}', b'{"pid": "1"}'])
def test_a_lease_that_is_not_ours_is_never_taken_over(
    content: bytes, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    target = make_target("local", request, tmp_path)
    os.makedirs(target.location)
    with open(os.path.join(target.location, LOCK), "wb") as f:
        f.write(content)
    with pytest.raises(OutputLockedError, match=r"is being written by an unreadable lock file \.litstream-writer-0"):
        optimize(sample, [1], target.location, chunk_size=2, num_workers=1, verbose=False)
    assert sorted(os.listdir(target.location)) == [LOCK]  # nothing written, the file left as it was


def _steal_then_wait(i: int, location: str) -> dict[str, int]:
    """A worker's fn: on input 0 another machine's run takes the lease over; every input then waits for ever."""
    if i == 0:
        objects = versioned(LocalFileStore(location))
        found = objects.read(LOCK)
        assert found is not None
        now = time.time()
        thief = Holder("0123456789ab", "optimize", "node-c", "node-c|x|1", 7, None, now, now, now + 600)
        objects.put(LOCK, thief.to_json(), found[1])
    threading.Event().wait()  # only the parent's heartbeat, noticing the loss, ends this run
    return {"i": i}


def test_a_lost_lease_stops_the_worker_processes(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    target = make_target("local", request, tmp_path)
    set_lease_ttl(0.4)  # renewals every 0.1 s
    try:
        with pytest.raises(OutputLockedError, match=r"lost its writer lock .* taken over by optimize run 0123456789ab"):
            optimize(
                functools.partial(_steal_then_wait, location=target.location),
                [0, 1],
                target.location,
                chunk_size=2,
                num_workers=2,
                verbose=False,
            )
    finally:
        set_lease_ttl(None)
    with open(os.path.join(target.location, LOCK), "rb") as f:
        holder = Holder.from_json(f.read())
    assert holder is not None
    assert holder.run_id == "0123456789ab"  # the new holder's lease is left alone
    assert not os.path.exists(os.path.join(target.location, "index.json"))
