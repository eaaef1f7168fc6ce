"""The chunk cache: location and layout, size parsing, reference counts across processes, eviction (B30, B31, B33).

Chunks come from a real local directory through the real Downloader; "workers" are separate ChunkCache
instances (each hold is its own open file description, as in another process) and, once, a spawned process.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
import threading
from typing import TYPE_CHECKING

import anyio
import pytest

from clean_process import run_clean
from litstream import ConfigurationError
from litstream.read.cache._cache import ChunkCache
from litstream.storage._cache_dirs import LOCK_DIR, dataset_cache_dir, default_cache_root, parse_cache_size
from litstream.storage._local import LocalFileStore
from litstream.storage._transfer import Downloader

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from pathlib import Path

DEADLINE = 30.0  # seconds a spawned child may take to answer


class CountingStore(LocalFileStore):
    """A real local directory that counts whole-object reads."""

    gets = 0

    async def get(self, path: str) -> bytes:
        self.gets += 1
        return await super().get(path)


def write_chunks(directory: Path, count: int, size: int) -> dict[str, bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    chunks = {f"chunk-0-{i}.bin": bytes([i]) * size for i in range(count)}
    for name, data in chunks.items():
        (directory / name).write_bytes(data)
    return chunks


def chunk_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("chunk-*.bin"))


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


# -- location, layout, sizes -------------------------------------------------------------------------------


def test_default_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("LITSTREAM_CACHE_DIR", "LITDATA_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_root() == tmp_path / "home" / ".cache" / "litstream" / "chunks"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert default_cache_root() == tmp_path / "home" / ".cache" / "litstream" / "chunks"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_root() == tmp_path / "xdg" / "litstream" / "chunks"
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path / "litdata"))
    assert default_cache_root() == tmp_path / "litdata"
    monkeypatch.setenv("LITSTREAM_CACHE_DIR", "~/mine")
    assert default_cache_root() == tmp_path / "home" / "mine"
    assert not (tmp_path / "home").exists()  # nothing is created


def test_dataset_cache_dir_layout_and_old_versions(tmp_path: Path) -> None:
    url = "s3://bucket/ds"
    base = tmp_path / md5(url)
    v1 = dataset_cache_dir(tmp_path, url, "1700000000.5")
    assert v1 == base / "1700000000.5"
    assert v1.is_dir()
    (v1 / "chunk-0-0.bin").write_bytes(b"old")
    v0 = dataset_cache_dir(tmp_path, url, None)  # no updated_at: md5(url) twice, as LitData
    assert v0 == base / md5(url)
    assert sorted(p.name for p in base.iterdir()) == [md5(url)]  # the other version was removed
    in_use = ChunkCache(v0)
    in_use.acquire("chunk-0-0.bin")
    v2 = dataset_cache_dir(tmp_path, url, 1700000001.25)
    assert v2 == base / "1700000001.25"
    assert sorted(p.name for p in base.iterdir()) == sorted(["1700000001.25", md5(url)])  # held: kept
    in_use.close()
    assert dataset_cache_dir(tmp_path, url, "1700000001.25") == v2
    assert sorted(p.name for p in base.iterdir()) == ["1700000001.25"]
    assert dataset_cache_dir(tmp_path, url, "a/b") == base / md5("a/b")
    other = dataset_cache_dir(tmp_path, "gs://other/ds", "1")
    assert other == tmp_path / md5("gs://other/ds") / "1"
    assert (base / md5("a/b")).is_dir()  # another URL leaves this one alone


def test_parse_cache_size(tmp_path: Path) -> None:
    assert parse_cache_size(None) is None
    assert parse_cache_size(2000) == 2000
    assert parse_cache_size("50GB") == 50_000_000_000
    assert parse_cache_size("1MB") == 1_000_000
    assert parse_cache_size("1KB") == 1000
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    half = parse_cache_size(0.5, directory=tmp_path / "not" / "yet")
    assert half is not None
    assert abs(half - free // 2) < 64 * 1024 * 1024
    for bad in (0, -1, "abc", "-5MB", True, 1.5, 0.0):
        with pytest.raises(ValueError, match="max_cache_size"):
            parse_cache_size(bad, directory=tmp_path)
    with pytest.raises(ConfigurationError, match="needs the cache directory"):
        parse_cache_size(0.5)
    with pytest.raises(ConfigurationError):
        ChunkCache(tmp_path, max_cache_size="lots")
    assert ChunkCache(tmp_path, max_cache_size="2KB").max_cache_size == 2000


# -- reference counts and eviction --------------------------------------------------------------------------


def test_eviction_is_least_recently_released_first(tmp_path: Path) -> None:
    write_chunks(tmp_path, 4, 1000)
    (tmp_path / "index.json").write_bytes(b"{}" * 250)
    unlimited = ChunkCache(tmp_path)
    for i in range(4):
        unlimited.acquire(f"chunk-0-{i}.bin")
    for i in (2, 0, 3, 1):
        assert unlimited.release(f"chunk-0-{i}.bin") == []
    assert unlimited.usage() == 4000  # index.json is not counted
    budget = ChunkCache(tmp_path, max_cache_size=2500)
    assert budget.evict() == ["chunk-0-2.bin", "chunk-0-0.bin"]
    assert budget.evict(incoming=1000) == ["chunk-0-3.bin"]
    assert chunk_files(tmp_path) == ["chunk-0-1.bin"]
    assert (tmp_path / "index.json").exists()
    assert budget.usage() == 1000


def test_holds_are_counted_and_held_chunks_are_never_evicted(tmp_path: Path) -> None:
    write_chunks(tmp_path, 2, 100)
    worker = ChunkCache(tmp_path, max_cache_size=1)
    other = ChunkCache(tmp_path, max_cache_size=1)
    worker.acquire("chunk-0-0.bin")
    worker.acquire("chunk-0-0.bin")
    assert worker.held() == {"chunk-0-0.bin": 2}
    assert other.evict() == ["chunk-0-1.bin"]
    assert worker.release("chunk-0-0.bin") == []
    assert other.evict() == []
    assert chunk_files(tmp_path) == ["chunk-0-0.bin"]
    assert worker.release("chunk-0-0.bin") == ["chunk-0-0.bin"]
    assert worker.held() == {}
    assert chunk_files(tmp_path) == []
    assert list((tmp_path / LOCK_DIR).iterdir()) == []
    with pytest.raises(RuntimeError, match="does not hold"):
        worker.release("chunk-0-0.bin")
    with pytest.raises(ConfigurationError):
        worker.acquire("../escape.bin")


def test_a_cache_pickles_as_configuration(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path, max_cache_size="1KB", delete_consumed=True)
    cache.acquire("chunk-0-0.bin")
    copy = pickle.loads(pickle.dumps(cache))
    assert (copy.directory, copy.max_cache_size, copy.held()) == (tmp_path, 1000, {})
    cache.close()


def test_concurrent_holders_never_lose_a_chunk_they_hold(tmp_path: Path) -> None:
    """Eight holders (separate instances, like processes) churn one chunk under a 1-byte budget."""
    name, payload = "chunk-0-0.bin", b"p" * 4096
    errors: list[BaseException] = []

    def churn(index: int) -> None:
        cache = ChunkCache(tmp_path, max_cache_size=1, delete_consumed=index % 2 == 0)
        try:
            for _ in range(150):
                path = cache.acquire(name)
                if not path.exists():  # download, atomically
                    tmp = path.with_name(f".{name}.tmp.{index}")
                    tmp.write_bytes(payload)
                    os.replace(tmp, path)
                assert path.read_bytes() == payload
                assert path.read_bytes() == payload  # still there while held
                cache.release(name)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert chunk_files(tmp_path) == []
    assert list((tmp_path / LOCK_DIR).iterdir()) == []


# -- the reported failures, driven through the Downloader (asyncio and trio) --------------------------------


@pytest.mark.anyio
async def test_b33_a_budget_below_one_chunk_keeps_exactly_the_chunk_in_use(tmp_path: Path) -> None:
    chunks = write_chunks(tmp_path / "src", 5, 4000)
    cache_dir = tmp_path / "cache"
    cache = ChunkCache(cache_dir, max_cache_size="1KB")
    downloader = Downloader(LocalFileStore(tmp_path / "src"), cache_dir)
    seen = []
    with anyio.fail_after(10):
        for name, data in chunks.items():
            path = await cache.aacquire(name, size=4000)
            await downloader.fetch(name, size=4000)
            assert chunk_files(cache_dir) == [name]  # everything else was evicted to make room
            seen.append(path.read_bytes() == data)
            assert await cache.arelease(name) == [name]
        # Two in use at once (prefetch): both stay, over budget, until released.
        for name in ("chunk-0-0.bin", "chunk-0-1.bin"):
            await cache.aacquire(name, size=4000)
            await downloader.fetch(name, size=4000)
        assert chunk_files(cache_dir) == ["chunk-0-0.bin", "chunk-0-1.bin"]
        assert await cache.arelease("chunk-0-0.bin") == ["chunk-0-0.bin"]
        assert await cache.aclose() == ["chunk-0-1.bin"]
    assert seen == [True] * 5
    assert chunk_files(cache_dir) == []


@pytest.mark.anyio
@pytest.mark.parametrize("shared", [False, True])
async def test_b31_the_last_chunk_of_every_worker_is_deleted(tmp_path: Path, shared: bool) -> None:
    chunks = write_chunks(tmp_path / "src", 5, 1608)  # about 100 ints per chunk; 8040 bytes > the budget
    cache_dir = tmp_path / "cache"
    downloader = Downloader(LocalFileStore(tmp_path / "src"), cache_dir)
    plans = [["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-2.bin"], ["chunk-0-3.bin", "chunk-0-4.bin"]]
    if shared:  # a chunk cut between the two workers' item ranges
        plans[1].insert(0, "chunk-0-2.bin")
    caches = [ChunkCache(cache_dir, max_cache_size=2000, delete_consumed=True) for _ in plans]
    gone_at_release: dict[int, bool] = {}
    read: list[str] = []

    async def worker(index: int) -> None:
        for name in plans[index]:
            await caches[index].aacquire(name, size=1608)
            path = await downloader.fetch(name, size=1608)
            assert path.read_bytes() == chunks[name]
            read.append(name)
            await caches[index].arelease(name)
            # Deleted by this release, or by the other worker's eviction in the moment between this release
            # dropping its lock and taking the deleting one (a race the chunk is deleted in either way).
            gone_at_release[index] = not (cache_dir / name).exists()
            await anyio.sleep(0.001)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for index in range(len(plans)):
                tg.start_soon(worker, index)
    if not shared:  # each worker's last chunk was gone as soon as its last release returned
        assert gone_at_release == {0: True, 1: True}
    assert [cache.close() for cache in caches] == [[], []]  # nothing left to release
    assert sorted(read) == sorted([*chunks, *(["chunk-0-2.bin"] if shared else [])])
    assert chunk_files(cache_dir) == []
    assert list((cache_dir / LOCK_DIR).iterdir()) == []
    assert [c.held() for c in caches] == [{}, {}]
    assert {p.name: p.read_bytes() for p in (tmp_path / "src").iterdir()} == chunks  # the source is untouched


@pytest.mark.anyio
@pytest.mark.parametrize("eager", [True, False])
async def test_b30_a_shared_chunk_is_not_lost_by_the_slow_worker(tmp_path: Path, eager: bool) -> None:
    chunks = write_chunks(tmp_path / "src", 2, 500)
    store = CountingStore(tmp_path / "src")
    cache_dir = tmp_path / "cache"
    downloader = Downloader(store, cache_dir)
    shared = "chunk-0-1.bin"
    fast = ChunkCache(cache_dir, max_cache_size="1KB", delete_consumed=True)
    slow = ChunkCache(cache_dir, max_cache_size="1KB", delete_consumed=True)
    if eager:
        await slow.aacquire(shared)  # at the start of the epoch, before any download
    for name in ("chunk-0-0.bin", shared):
        await fast.aacquire(name, size=500)
        await downloader.fetch(name, size=500)
        await fast.arelease(name)
    assert chunk_files(cache_dir) == ([shared] if eager else [])
    if not eager:
        await slow.aacquire(shared, size=500)
    path = await downloader.fetch(shared, size=500)  # present, or downloaded again: never FileNotFoundError
    assert path.read_bytes() == chunks[shared]
    assert store.gets == (2 if eager else 3)
    assert await slow.arelease(shared) == [shared]
    assert chunk_files(cache_dir) == []
    assert (fast.held(), slow.held()) == ({}, {})


# -- real processes ----------------------------------------------------------------------------------------


def _report_holds(cache: ChunkCache, conn: Connection) -> None:
    """In a forked child: what it holds, then linger (its inherited descriptors would keep the locks)."""
    conn.send(cache.held())
    conn.recv()


def _fork_and_release(tmp_path: Path) -> int | None:
    """In a clean helper process: hold a chunk, fork a child, release the chunk while the child lives."""
    write_chunks(tmp_path, 1, 100)
    cache = ChunkCache(tmp_path, max_cache_size=1)
    cache.acquire("chunk-0-0.bin")
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    process = context.Process(target=_report_holds, args=(cache, child))
    process.start()
    try:
        assert parent.poll(DEADLINE)
        assert parent.recv() == {}
        assert cache.release("chunk-0-0.bin") == ["chunk-0-0.bin"]  # the living child does not block it
        assert chunk_files(tmp_path) == []
    finally:
        parent.send("bye")
        process.join(DEADLINE)
        parent.close()
    return process.exitcode


def test_a_forked_child_does_not_keep_its_parents_holds(tmp_path: Path) -> None:
    assert run_clean(_fork_and_release, tmp_path) == 0  # the fork happens in a clean helper process


def _serve_holds(directory: str, conn: Connection) -> None:
    """A spawned "worker" holding chunks on command: acquire / read / release / exit."""
    cache = ChunkCache(directory, max_cache_size=1, delete_consumed=True)
    while True:
        op, name = conn.recv()
        if op == "acquire":
            conn.send(cache.acquire(name).exists())
        elif op == "read":
            conn.send(cache.path(name).read_bytes())
        elif op == "release":
            conn.send(cache.release(name))
        else:
            conn.send(None)
            return


@pytest.mark.slow
def test_b30_two_processes_share_a_chunk_and_a_dead_one_leaks_no_hold(tmp_path: Path) -> None:
    chunks = write_chunks(tmp_path / "src", 3, 2000)
    cache_dir = tmp_path / "cache"
    downloader = Downloader(LocalFileStore(tmp_path / "src"), cache_dir)
    mine = ChunkCache(cache_dir, max_cache_size=1, delete_consumed=True)
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve_holds, args=(str(cache_dir), child))
    process.start()

    def call(op: str, name: str) -> object:
        parent.send((op, name))
        if not parent.poll(DEADLINE):
            pytest.fail(f"the child did not answer {op} within {DEADLINE} s")
        return parent.recv()

    try:
        shared = "chunk-0-1.bin"
        assert call("acquire", shared) is False  # the slow worker registers before the download
        mine.acquire(shared)
        anyio.run(downloader.fetch, shared)
        assert mine.release(shared) == []  # the other process still holds it
        assert mine.evict() == []
        assert call("read", shared) == chunks[shared]
        assert call("release", shared) == [shared]  # the last holder's release deletes it
        assert chunk_files(cache_dir) == []
        assert list((cache_dir / LOCK_DIR).iterdir()) == []

        assert call("acquire", "chunk-0-2.bin") is False
        mine.acquire("chunk-0-2.bin")
        anyio.run(downloader.fetch, "chunk-0-2.bin")
        assert mine.release("chunk-0-2.bin") == []
        process.kill()  # dies holding chunk-0-2: the kernel drops its lock
        process.join(DEADLINE)
        assert mine.evict() == ["chunk-0-2.bin"]
        assert chunk_files(cache_dir) == []
    finally:
        if process.is_alive():
            process.kill()
        process.join(DEADLINE)
        parent.close()
