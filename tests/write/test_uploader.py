"""AsyncUploader on local disk and SeaweedFS, on asyncio and trio: commits, concurrent readers, append,
crashes (exception, cancellation), many writer tasks, bad arguments."""

from __future__ import annotations

import gc
import json
import shutil
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from write_targets import TARGETS, GatedStore, Target, make_target, until

from dataset_files import without_version_log
from litstream import (
    AsyncUploader,
    ConfigurationError,
    FormatError,
    LocalFileStore,
    OutputNotEmptyError,
    StorageError,
    astream,
    optimize,
)
from litstream.write._writer_lock import is_lock_name
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

    from litstream.storage._base import PutData

pytestmark = pytest.mark.anyio


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "s": f"s{i}"}


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return make_target(request.param, request, tmp_path)


async def read_all(target: Target) -> list[int]:
    """The samples a reader opened now sees: through astream and through StreamingDataset (must agree)."""
    streamed = [s["i"] async for s in astream(target.location, storage_options=target.options)]
    dataset = await anyio.to_thread.run_sync(lambda: [s["i"] for s in target.dataset()])
    assert streamed == dataset
    return streamed


def index_of(target: Target) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(target.read("index.json"))
    return result


def chunk_table(target: Target) -> list[tuple[str, int]]:
    return [(c["filename"], c["chunk_size"]) for c in index_of(target)["chunks"]]


async def test_readers_see_exactly_the_committed_samples(target: Target) -> None:
    async with AsyncUploader(target.location, chunk_size=4, storage_options=target.options) as up:
        for i in range(10):
            await up.add(sample(i))
        assert "index.json" not in target.files()  # nothing is committed before a flush
        assert await up.flush() == 10
        assert chunk_table(target) == [("chunk-0-0.bin", 4), ("chunk-0-1.bin", 4), ("chunk-0-2.bin", 2)]
        assert await read_all(target) == list(range(10))

        for i in range(10, 15):  # 10..13 close chunk-0-3 (uploaded, not committed); 14 stays buffered
            await up.add(sample(i))
        await until(lambda: up.statistics().chunks_uploaded == 4)
        assert "chunk-0-3.bin" in target.files()
        assert await read_all(target) == list(range(10))
        stats = up.statistics()
        assert (stats.samples_added, stats.samples_committed, stats.chunks_committed) == (15, 10, 3)
    assert await read_all(target) == list(range(15))
    assert chunk_table(target)[3:] == [("chunk-0-3.bin", 4), ("chunk-0-4.bin", 1)]
    stats = up.statistics()
    assert (stats.samples_committed, stats.dataset_samples, stats.commits, stats.bytes_reserved) == (15, 15, 2, 0)
    chunks = [f"chunk-0-{k}.bin" for k in range(5)]
    assert sorted(without_version_log(target.files())) == sorted(["index.json", *chunks])


async def test_updated_at_changes_with_every_commit(target: Target) -> None:
    stamps = []
    async with AsyncUploader(target.location, chunk_size=2, storage_options=target.options) as up:
        for i in range(3):
            await up.add(sample(i))
            await up.flush()
            stamps.append(index_of(target)["updated_at"])
        await up.flush()  # nothing new: no write
        assert index_of(target)["updated_at"] == stamps[-1]
    assert len(set(stamps)) == 3
    assert [float(s) for s in stamps] == sorted(float(s) for s in stamps)
    assert up.statistics().commits == 3


async def test_many_tasks_add_and_flush_concurrently_and_lose_nothing(target: Target) -> None:
    tasks, per_task = 5, 40

    async with AsyncUploader(target.location, chunk_size=7, storage_options=target.options) as up:

        async def producer(t: int) -> None:
            for n in range(per_task):
                await up.add({"i": t * 1000 + n, "s": f"{t}-{n}"})
                if n % 15 == 14:
                    await up.flush()

        async with anyio.create_task_group() as tg:
            for t in range(tasks):
                tg.start_soon(producer, t)
    got = await read_all(target)
    assert sorted(got) == sorted(t * 1000 + n for t in range(tasks) for n in range(per_task))
    assert len(got) == tasks * per_task
    # each task's samples keep their order
    for t in range(tasks):
        assert [i for i in got if i // 1000 == t] == [t * 1000 + n for n in range(per_task)]
    assert up.statistics().samples_added == tasks * per_task


async def test_append_continues_an_optimized_dataset(target: Target) -> None:
    def write() -> None:
        optimize(sample, list(range(10)), target.location, chunk_size=4, num_workers=1, verbose=False,
                 storage_options=target.options)  # fmt: skip

    await anyio.to_thread.run_sync(write)
    before = chunk_table(target)
    async with AsyncUploader(target.location, storage_options=target.options) as up:  # adopts chunk_size=4
        for i in range(10, 15):
            await up.add(sample(i))
    assert chunk_table(target) == [*before, ("chunk-0-3.bin", 4), ("chunk-0-4.bin", 1)]
    assert index_of(target)["config"]["chunk_size"] == 4
    assert await read_all(target) == list(range(15))
    assert up.statistics().dataset_samples == 15


async def test_append_with_another_sample_format_is_rejected_before_anything_is_written(target: Target) -> None:
    async with AsyncUploader(target.location, chunk_size=4, storage_options=target.options) as up:
        await up.add(sample(0))
    files, index = target.files(), target.read("index.json")
    async with AsyncUploader(target.location, chunk_size=4, storage_options=target.options) as up:
        with pytest.raises(FormatError, match=r"does not match the dataset .*data_format: \['int', 'str'\] in index"):
            await up.add({"i": 1.5})
        data_files = [n for n in target.files() if not is_lock_name(n)]  # the block holds the writer lock
        assert (data_files, target.read("index.json")) == (files, index)
        await up.add(sample(1))  # a matching sample is still accepted
    assert await read_all(target) == [0, 1]


async def test_append_with_other_chunking_or_compression_is_rejected_on_entering(target: Target) -> None:
    async with AsyncUploader(target.location, chunk_size=4, storage_options=target.options) as up:
        await up.add(sample(0))
    files = target.files()
    with pytest.raises(ConfigurationError, match=r"written with chunk_size=4 \(here 3\); appending needs the same"):
        async with AsyncUploader(target.location, chunk_size=3, storage_options=target.options):
            pass
    with pytest.raises(ConfigurationError, match=r"compression=None \(here 'zstd'\)"):
        async with AsyncUploader(target.location, chunk_size=4, compression="zstd", storage_options=target.options):
            pass
    assert target.files() == files


async def test_modes_none_and_overwrite(target: Target) -> None:
    async with AsyncUploader(target.location, chunk_size=4, storage_options=target.options) as up:
        for i in range(6):
            await up.add(sample(i))
    with pytest.raises(OutputNotEmptyError, match="is not empty"):
        async with AsyncUploader(target.location, chunk_size=4, mode=None, storage_options=target.options):
            pass
    options = target.options
    async with AsyncUploader(target.location, chunk_bytes="1MB", mode="overwrite", storage_options=options) as up:
        await up.add({"x": 1.0})
    # The new version's chunk is numbered after the old ones, which retention keeps for now (24 h).
    assert without_version_log(target.files()) == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-2.bin", "index.json"]
    assert chunk_table(target) == [("chunk-0-2.bin", 1)]
    assert [s async for s in astream(target.location, storage_options=options)] == [{"x": 1.0}]
    assert index_of(target)["config"]["data_format"] == ["float"]
    assert index_of(target)["config"]["chunk_bytes"] == 1_000_000


async def _commit_then_add(up: AsyncUploader, target: Target, committed: int, end: int) -> bytes:
    """Add samples ``0..committed-1`` and flush them (a commit), then add ``committed..end-1`` unflushed.

    Returns the committed ``index.json``."""
    for i in range(committed):
        await up.add(sample(i))
    await up.flush()
    index = target.read("index.json")
    for i in range(committed, end):
        await up.add(sample(i))
    return index


async def test_an_exception_in_the_block_keeps_the_last_commit(target: Target) -> None:
    with pytest.raises(ValueError, match=r"^boom$"):
        async with AsyncUploader(target.location, chunk_size=4, storage_options=target.options) as up:
            committed = await _commit_then_add(up, target, 10, 15)
            await until(lambda: up.statistics().chunks_uploaded == 4)
            raise ValueError("boom")
    assert target.read("index.json") == committed
    assert await read_all(target) == list(range(10))
    # chunk-0-3.bin was uploaded, never committed: removed when the block ended.
    assert without_version_log(target.files()) == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-2.bin", "index.json"]
    # The next session numbers its chunks after the committed ones.
    async with AsyncUploader(target.location, chunk_size=4, storage_options=target.options) as up:
        await up.add(sample(100))
    assert chunk_table(target)[-1] == ("chunk-0-3.bin", 1)
    assert await read_all(target) == [*range(10), 100]


async def test_cancelling_the_block_keeps_the_last_commit(target: Target) -> None:
    with anyio.CancelScope() as scope:
        async with AsyncUploader(target.location, chunk_size=4, storage_options=target.options) as up:
            committed = await _commit_then_add(up, target, 6, 20)
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert target.read("index.json") == committed
    assert await read_all(target) == list(range(6))
    # the chunks of samples 6..19 that were uploaded but never committed are removed as the block ends
    assert without_version_log(target.files()) == ["chunk-0-0.bin", "chunk-0-1.bin", "index.json"]


async def test_a_cancelled_add_loses_no_other_sample(tmp_path: Path) -> None:
    store = GatedStore(LocalFileStore(tmp_path / "ds"))
    # A 1-byte budget: one closed chunk takes all of it; the add that closes the next one waits.
    async with AsyncUploader(store, chunk_size=2, max_bytes_in_flight=1, max_concurrency=1) as up:
        for i in range(3):  # 0,1 -> chunk 0 (takes the whole budget of 1 byte); 2 buffered
            await up.add(sample(10 + i))
        await until(lambda: store.waiting == 1)  # chunk 0's upload is held at the gate
        await up.add(sample(13))  # 2, 3 in the open chunk
        with anyio.move_on_after(0.2) as waited:  # closing chunk 1 needs budget: the add waits
            await up.add(sample(14))
        assert waited.cancelled_caught
        assert up.statistics().samples_added == 4
        store.gate.set()
    assert [s["i"] async for s in astream(store)] == [10, 11, 12, 13]


class FailingStore(GatedStore):
    """A Store whose put of one object fails (a fault a real server does not produce on demand)."""

    def __init__(self, inner: LocalFileStore, fail: str) -> None:
        super().__init__(inner)
        self.gate.set()
        self._fail = fail

    async def put(self, path: str, data: PutData) -> None:
        if path == self._fail:
            raise StorageError(f"put failed for {path}: injected")
        await super().put(path, data)


async def test_a_failed_upload_is_raised_and_keeps_the_last_commit(tmp_path: Path) -> None:
    store = FailingStore(LocalFileStore(tmp_path / "ds"), fail="chunk-0-2.bin")
    with pytest.raises(StorageError, match=r"^put failed for chunk-0-2.bin: injected$"):
        async with AsyncUploader(store, chunk_size=2) as up:
            for i in range(4):
                await up.add(sample(i))
            await up.flush()
            for i in range(4, 10):
                await up.add(sample(i))
    assert [s["i"] async for s in astream(store)] == [0, 1, 2, 3]


async def test_zstd_chunks_round_trip(target: Target) -> None:
    async with AsyncUploader(
        target.location, chunk_bytes=100, compression="zstd", storage_options=target.options
    ) as up:
        for i in range(12):
            await up.add(sample(i))
    table = chunk_table(target)
    assert all(name.endswith(".zstd.bin") for name, _ in table)
    assert sum(n for _, n in table) == 12
    assert await read_all(target) == list(range(12))


async def test_an_empty_session_writes_nothing(target: Target) -> None:
    async with AsyncUploader(target.location, storage_options=target.options) as up:
        assert await up.flush() == 0
    assert target.files() == []


async def test_calls_outside_the_block_raise(tmp_path: Path) -> None:
    up = AsyncUploader(tmp_path / "ds", chunk_size=2)
    with pytest.raises(RuntimeError, match=r"AsyncUploader.add\(\) needs an open block.*this uploader is new"):
        await up.add(sample(0))
    async with up:
        await up.add(sample(0))
    with pytest.raises(RuntimeError, match=r"AsyncUploader.flush\(\) needs an open block.*this uploader is closed"):
        await up.flush()
    with pytest.raises(RuntimeError, match="can be used in one `async with` block only"):
        async with up:
            pass


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunk_bytes": "64MiB"}, "chunk_bytes='64MiB' is not a size"),
        ({"chunk_size": 2, "chunk_bytes": 10}, "give only one of chunk_size=2 and chunk_bytes=10"),
        ({"max_bytes_in_flight": 0}, "max_bytes_in_flight must be positive, got 0"),
        ({"max_concurrency": 0}, "max_concurrency must be an int >= 1 (uploads at once), got 0"),
        ({"mode": "replace"}, "mode must be 'append', 'overwrite' or None, got 'replace'"),
        ({"rank": -1}, "rank must be an int >= 0"),
        ({"compression": "lz4"}, "lz4"),
        ({"item_loader": object()}, "is not supported yet; use PyTreeLoader()"),
        ({"storage_options": {"key": "x"}}, "storage_options"),
    ],
)
def test_bad_arguments_are_rejected_before_anything_is_written(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    location: Any = tmp_path / "ds"
    if "storage_options" in kwargs:
        location = LocalFileStore(tmp_path / "ds")
    with pytest.raises(ConfigurationError) as info:
        AsyncUploader(location, **kwargs)
    assert message in str(info.value)
    assert not (tmp_path / "ds").exists()


@pytest.mark.litdata
@pytest.mark.filterwarnings(r"ignore:unclosed file <_io\.FileIO name='[^']*-litdata-copy/:ResourceWarning")
async def test_litdata_reads_what_the_uploader_appended(tmp_path: Path) -> None:
    litdata = require_peer("litdata")
    location = tmp_path / "ds"
    for session in range(2):  # two sessions: the second appends
        async with AsyncUploader(location, chunk_size=4, compression="zstd") as up:
            for i in range(session * 7, session * 7 + 7):
                await up.add(sample(i))
            await up.flush()
    copy = tmp_path / "ds-litdata-copy"
    shutil.copytree(location, copy)  # LitData decompresses into, and deletes from, the directory it reads

    def read() -> list[Any]:
        ds = litdata.StreamingDataset(str(copy))
        samples = list(ds)
        del ds
        gc.collect()  # LitData leaves chunk files open; close them inside this test
        return samples

    assert await anyio.to_thread.run_sync(read) == [sample(i) for i in range(14)]
