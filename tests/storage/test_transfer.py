"""Downloader and Uploader: atomic files, shared downloads, bounds, errors; round trips on SeaweedFS and disk.

A scripted store (the Store protocol, injected) produces the faults and timings a real server cannot.
"""

from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING

import anyio
import pytest
from storage_backends import unique

from litstream import ConfigurationError, ObjectNotFoundError, StorageError
from litstream.storage._base import ObjectMeta
from litstream.storage._local import LocalFileStore
from litstream.storage._resolver import store_for
from litstream.storage._transfer import Downloader, Uploader

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from litstream.storage._base import PutData
    from servers import S3Server

pytestmark = pytest.mark.anyio


class ScriptedStore:
    """An in-memory Store that counts calls, tracks concurrency and runs a hook before each read or write."""

    def __init__(self, objects: dict[str, bytes] | None = None, *, delay: float = 0.0) -> None:
        self.objects = dict(objects or {})
        self.delay = delay
        self.calls: list[tuple[str, str]] = []
        self.active = 0
        self.max_active = 0
        self.active_bytes = 0
        self.max_active_bytes = 0
        self.gate: anyio.Event | None = None  # when set, every request waits for it
        self.before_read: Callable[[str, int], None] | None = None  # (name, start), before serving bytes
        self.fail: set[str] = set()  # names whose reads / puts raise StorageError
        self.cancelled_puts = 0

    @property
    def url(self) -> str:
        return "scripted://"

    async def _enter(self, op: str, name: str, nbytes: int) -> None:
        self.calls.append((op, name))
        self.active += 1
        self.active_bytes += nbytes
        self.max_active = max(self.max_active, self.active)
        self.max_active_bytes = max(self.max_active_bytes, self.active_bytes)
        try:
            if self.gate is not None:
                await self.gate.wait()
            await anyio.sleep(self.delay)
        except BaseException:
            self._leave(nbytes)
            if op == "put":
                self.cancelled_puts += 1
            raise

    def _leave(self, nbytes: int) -> None:
        self.active, self.active_bytes = self.active - 1, self.active_bytes - nbytes

    def _data(self, name: str) -> bytes:
        if name in self.fail:
            raise StorageError(f"scripted failure for {name}")
        if name not in self.objects:
            raise ObjectNotFoundError(f"{name} does not exist")
        return self.objects[name]

    async def _read(self, op: str, path: str, start: int, length: int | None) -> bytes:
        nbytes = len(self.objects.get(path, b"")) if length is None else length
        await self._enter(op, path, nbytes)
        try:
            if self.before_read is not None:
                self.before_read(path, start)
            return self._data(path)[start : None if length is None else start + length]
        finally:
            self._leave(nbytes)

    async def get(self, path: str) -> bytes:
        return await self._read("get", path, 0, None)

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        return await self._read("get_range", path, start, length)

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        raise NotImplementedError  # the Downloader does not use it

    async def put(self, path: str, data: PutData) -> None:
        await self._enter("put", path, 0)
        try:
            if path in self.fail:
                raise StorageError(f"scripted failure for {path}")
            raw = await anyio.Path(os.fspath(data)).read_bytes() if isinstance(data, os.PathLike) else bytes(data)
            self.objects[path] = raw
        finally:
            self._leave(0)

    async def head(self, path: str) -> ObjectMeta:
        await self._enter("head", path, 0)
        try:
            return ObjectMeta(path, len(self._data(path)))
        finally:
            self._leave(0)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        return [ObjectMeta(k, len(v)) for k, v in sorted(self.objects.items()) if k.startswith(prefix)]

    async def delete(self, path: str) -> None:
        self.objects.pop(path, None)

    def count(self, op: str, name: str | None = None) -> int:
        return sum(1 for o, n in self.calls if o == op and (name is None or n == name))


async def wait_until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` every 10 ms; fail after 3000 polls (30 s or more: a guard against a hang, long
    enough for thread hops on a loaded machine)."""
    for _ in range(3000):
        if condition():
            return
        await anyio.sleep(0.01)
    pytest.fail("condition not met within 3000 polls")


def leftovers(directory: Path) -> list[str]:
    """Every file below ``directory``, hidden temporaries included, as sorted relative paths."""
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


async def test_a_download_appears_complete_or_not_at_all(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 4  # 1024 bytes in 8 pieces of 128
    store = ScriptedStore({"chunk-0-0.bin": payload}, delay=0.005)
    target = tmp_path / "chunk-0-0.bin"
    seen: list[tuple[int, bool, list[str]]] = []

    def before_read(name: str, start: int) -> None:  # while pieces arrive: no target, one hidden temporary
        seen.append((start, target.exists(), [p.name for p in tmp_path.iterdir()]))

    store.before_read = before_read
    downloader = Downloader(store, tmp_path, max_concurrency=1, piece_size=128)
    assert await downloader.fetch("chunk-0-0.bin", size=1024) == target
    assert sorted(start for start, _, _ in seen) == list(range(0, 1024, 128))
    assert all(exists is False for _, exists, _ in seen)
    assert all(len(names) == 1 and names[0].startswith(".chunk-0-0.bin.tmp.") for _, _, names in seen)
    assert target.read_bytes() == payload
    assert leftovers(tmp_path) == ["chunk-0-0.bin"]
    assert store.count("get_range") == 8
    assert store.count("head") == 0


async def test_a_failed_or_cancelled_download_leaves_nothing(tmp_path: Path) -> None:
    store = ScriptedStore({"a.bin": b"x" * 100, "b.bin": b"y" * 100})
    reads = 0

    def fail_third(name: str, start: int) -> None:
        nonlocal reads
        reads += 1
        if reads == 3:
            raise StorageError("connection reset at piece 3")

    store.before_read = fail_third
    downloader = Downloader(store, tmp_path, max_concurrency=1, piece_size=10)
    with pytest.raises(StorageError, match="connection reset at piece 3"):  # raised as itself, not in a group
        await downloader.fetch("a.bin", size=100)
    assert leftovers(tmp_path) == []

    store.before_read = None
    store.gate = anyio.Event()  # never set: the download hangs until cancelled
    with anyio.move_on_after(0.2) as scope:
        await downloader.fetch("b.bin", size=100)
    assert scope.cancelled_caught
    assert leftovers(tmp_path) == []


async def test_concurrent_fetches_of_one_name_share_one_download_and_its_error(tmp_path: Path) -> None:
    store = ScriptedStore({"c.bin": b"z" * 50}, delay=0.05)
    downloader = Downloader(store, tmp_path)
    paths: list[Path] = []
    errors: list[str] = []

    async def fetch(name: str) -> None:
        try:
            paths.append(await downloader.fetch(name))
        except ObjectNotFoundError as exc:  # every waiter gets the type the downloading task got
            errors.append(str(exc))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(fetch, "c.bin")
            tg.start_soon(fetch, "missing.bin")
    assert errors == ["missing.bin does not exist"] * 5
    assert store.count("head", "missing.bin") == 1
    assert paths == [tmp_path / "c.bin"] * 5
    assert store.count("head", "c.bin") == 1  # size unknown: one HEAD
    assert store.count("get", "c.bin") == 1
    assert (tmp_path / "c.bin").read_bytes() == b"z" * 50
    assert len(store.calls) == 3
    await downloader.fetch("c.bin")  # present now: no request, with or without the matching size
    await downloader.fetch("c.bin", size=50)
    assert len(store.calls) == 3


async def test_a_waiting_fetch_takes_over_when_the_downloading_task_is_cancelled(tmp_path: Path) -> None:
    store = ScriptedStore({"d.bin": b"d" * 10})
    store.gate = anyio.Event()
    downloader = Downloader(store, tmp_path)
    leader_scope = anyio.CancelScope()
    result: list[Path] = []

    async def leader() -> None:
        with leader_scope:
            await downloader.fetch("d.bin", size=10)

    async def follower() -> None:
        result.append(await downloader.fetch("d.bin", size=10))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(leader)
            await wait_until(lambda: store.count("get") == 1)  # the leader's GET waits at the gate
            tg.start_soon(follower)
            pending = downloader._loop_state().inflight["d.bin"]
            await wait_until(lambda: pending.done.statistics().tasks_waiting == 1)  # the follower waits for it
            leader_scope.cancel()
            await wait_until(lambda: store.count("get") == 2)  # the follower took over
            store.gate.set()
    assert leader_scope.cancelled_caught
    assert result == [tmp_path / "d.bin"]
    assert (tmp_path / "d.bin").read_bytes() == b"d" * 10
    assert store.count("get", "d.bin") == 2
    assert leftovers(tmp_path) == ["d.bin"]


async def test_requests_in_flight_never_exceed_max_concurrency(tmp_path: Path) -> None:
    store = ScriptedStore({f"o{i}.bin": bytes([i]) * 20 for i in range(12)}, delay=0.02)
    downloader = Downloader(store, tmp_path, max_concurrency=3)
    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(partial(downloader.fetch, f"o{i}.bin", size=20))
    assert store.max_active == 3
    assert store.count("get") == 12
    assert leftovers(tmp_path) == sorted(f"o{i}.bin" for i in range(12))


async def test_bytes_in_flight_never_exceed_the_budget(tmp_path: Path) -> None:
    store = ScriptedStore({f"o{i}.bin": b"b" * 40 for i in range(6)} | {"big.bin": b"g" * 400}, delay=0.02)
    downloader = Downloader(store, tmp_path, max_concurrency=10, max_bytes_in_flight=100, piece_size=40)
    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(partial(downloader.fetch, f"o{i}.bin", size=40))
        tg.start_soon(partial(downloader.fetch, "big.bin", size=400))  # 10 ranged pieces of 40
    assert store.max_active_bytes == 80  # two 40-byte requests fit in 100 bytes, three do not
    assert store.max_active == 2
    assert (tmp_path / "big.bin").read_bytes() == b"g" * 400
    assert store.count("get_range", "big.bin") == 10


async def test_a_file_of_the_wrong_size_is_replaced_and_a_short_object_fails(tmp_path: Path) -> None:
    store = ScriptedStore({"e.bin": b"0123456789"})
    (tmp_path / "e.bin").write_bytes(b"012")  # truncated leftover
    downloader = Downloader(store, tmp_path)
    await downloader.fetch("e.bin", size=10)
    assert (tmp_path / "e.bin").read_bytes() == b"0123456789"
    assert store.count("get") == 1
    with pytest.raises(StorageError, match="expected 12 bytes at offset 0, got 10"):
        await downloader.fetch("e.bin", size=12)
    assert (tmp_path / "e.bin").read_bytes() == b"0123456789"  # the complete old file stays
    assert leftovers(tmp_path) == ["e.bin"]


async def test_a_local_directory_round_trip_in_pieces_and_invalid_names(tmp_path: Path) -> None:
    payload = os.urandom(300_007)
    source = LocalFileStore(tmp_path / "src")
    await source.put("sub/chunk-1-2.bin", payload)
    downloader = Downloader(source, tmp_path / "cache", piece_size=65_536, max_bytes_in_flight=131_072)
    path = await downloader.fetch("sub/chunk-1-2.bin")  # size from HEAD, 5 pieces
    assert path.read_bytes() == payload
    assert leftovers(tmp_path / "cache") == ["sub/chunk-1-2.bin"]
    for bad in ("", "/abs", "../up", "a/../b"):
        with pytest.raises(ConfigurationError, match="must be a relative '/'-separated key"):
            await downloader.fetch(bad)
    with pytest.raises(ConfigurationError, match="max_concurrency must be an int >= 1"):
        Downloader(source, tmp_path, max_concurrency=0)


def make_files(directory: Path, count: int) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (directory / f"chunk-0-{i}.bin").write_bytes(bytes([i]) * (i + 1))
    return [directory / f"chunk-0-{i}.bin" for i in range(count)]


async def test_upload_backpressure_bounds_the_queue(tmp_path: Path) -> None:
    store = ScriptedStore()
    store.gate = anyio.Event()
    files = make_files(tmp_path / "out", 10)
    returned = 0
    pending_seen: list[int] = []
    with pytest.raises(ConfigurationError, match="max_pending must be an int >= 1"):
        Uploader(store, max_pending=0)
    uploader = Uploader(store, max_concurrency=2, max_pending=3)
    with pytest.raises(RuntimeError, match="async with Uploader"):
        await uploader.upload(files[0], "x")
    async with uploader:

        async def produce() -> None:
            nonlocal returned
            for f in files:
                await uploader.upload(f, f.name)
                returned += 1
                pending_seen.append(uploader.statistics().pending)

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            await wait_until(lambda: store.active == 2 and uploader.statistics().pending == 3)
            await anyio.wait_all_tasks_blocked()  # the producer stays blocked
            assert returned == 5  # 2 running + 3 queued
            stats = uploader.statistics()
            assert (stats.active, stats.pending, stats.completed) == (2, 3, 0)
            store.gate.set()
    stats = uploader.statistics()
    assert (stats.active, stats.pending, stats.completed, stats.bytes_uploaded) == (0, 0, 10, 55)
    assert max(pending_seen) == 3
    assert store.max_active == 2
    assert store.objects == {f"chunk-0-{i}.bin": bytes([i]) * (i + 1) for i in range(10)}
    assert leftovers(tmp_path / "out") == []  # delete_after=True


async def test_a_failed_upload_is_raised_as_itself_and_stops_the_rest(tmp_path: Path) -> None:
    store = ScriptedStore(delay=0.01)
    store.fail = {"chunk-0-2.bin"}
    files = make_files(tmp_path / "out", 20)
    queued = 0
    with pytest.raises(StorageError, match=r"scripted failure for chunk-0-2\.bin"):
        async with Uploader(store, max_concurrency=1, max_pending=1) as uploader:
            for f in files:
                await uploader.upload(f, f.name)
                queued += 1
    assert queued < 20  # the producer was cancelled
    assert sorted(store.objects) == ["chunk-0-0.bin", "chunk-0-1.bin"]
    assert "chunk-0-2.bin" in leftovers(tmp_path / "out")  # not deleted: it did not upload
    with pytest.raises(RuntimeError, match="has stopped"):
        await uploader.upload(files[-1], files[-1].name)


async def test_an_error_in_the_block_cancels_pending_uploads(tmp_path: Path) -> None:
    store = ScriptedStore()
    store.gate = anyio.Event()
    files = make_files(tmp_path / "out", 3)
    with pytest.raises(ValueError, match="producer failed"):
        async with Uploader(store, max_concurrency=2) as uploader:
            for f in files:
                await uploader.upload(f, f.name, delete_after=False)
            await wait_until(lambda: store.active == 2)  # both puts are running (blocked at the gate)
            raise ValueError("producer failed")
    assert store.cancelled_puts == 2
    assert store.objects == {}
    assert len(leftovers(tmp_path / "out")) == 3


async def test_s3_round_trip(s3_server: S3Server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.bucket}/{unique()}/ds"
    store = store_for(url, s3_server.options())
    big = os.urandom(700_001)
    out = tmp_path / "out"
    out.mkdir()
    (out / "chunk-0-0.bin").write_bytes(big)
    (out / "chunk-0-1.bin").write_bytes(b"small chunk")
    async with Uploader(store, max_concurrency=2, max_pending=1) as uploader:
        await uploader.upload(out / "chunk-0-0.bin", "chunk-0-0.bin")
        await uploader.upload(out / "chunk-0-1.bin", "chunk-0-1.bin", delete_after=False)
    await store.put("index.json", b'{"chunks": []}')  # last, after every chunk
    assert leftovers(out) == ["chunk-0-1.bin"]  # kept: delete_after=False
    listing = [(m.path, m.size) for m in await store.list()]
    assert listing == [("chunk-0-0.bin", 700_001), ("chunk-0-1.bin", 11), ("index.json", 14)]
    cache = tmp_path / "cache"
    downloader = Downloader(store, cache, max_concurrency=4, piece_size=100_000, max_bytes_in_flight=250_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(downloader.fetch, "chunk-0-0.bin", size=700_001))  # 8 ranged GETs
        tg.start_soon(partial(downloader.fetch, "chunk-0-1.bin"))  # HEAD + GET
        tg.start_soon(partial(downloader.fetch, "chunk-0-0.bin", size=700_001))  # shares the first download
    assert (cache / "chunk-0-0.bin").read_bytes() == big
    assert (cache / "chunk-0-1.bin").read_bytes() == b"small chunk"
    assert leftovers(cache) == ["chunk-0-0.bin", "chunk-0-1.bin"]
    with pytest.raises(ObjectNotFoundError):
        await downloader.fetch("chunk-9-9.bin", size=5)
    assert leftovers(cache) == ["chunk-0-0.bin", "chunk-0-1.bin"]
