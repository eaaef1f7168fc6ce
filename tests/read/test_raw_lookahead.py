"""StreamingRawDataset looks ahead: in a plain iteration, in ``astream`` (asyncio and trio) and with its own
batch sampler (``ds.batch_sampler``: in the process, and under 2 DataLoader workers started with fork,
forkserver and spawn from a clean process), on local files and on S3 (SeaweedFS). Look-ahead changes nothing
read: the same items in the same order as without it; every file is fetched exactly once; the requests in
flight never pass the limit (``statistics().max_in_flight``)."""

from __future__ import annotations

import pickle
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from clean_process import run_clean
from litstream import StreamingRawDataset
from litstream.read._raw_sampler import OrderKey, RawBatch, RawBatchSampler, upcoming_batches
from litstream.read.raw._stream import epoch_order
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

N = 300  # ten windows of an iteration, five batches of 64
LIMIT = 3
WINDOW = 32  # the iteration's window (_raw_dataset._WINDOW)


def payload(i: int) -> bytes:
    return bytes((i + k) % 256 for k in range(50 + i % 17))


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A folder or an S3 prefix holding ``f000.bin`` ... (sorted = index order)."""
    files = {f"f{i:03d}.bin": payload(i) for i in range(N)}
    if request.param == "local":
        folder = tmp_path / "files"
        folder.mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return str(folder), {}
    server: S3Server = request.getfixturevalue("s3_server")
    request.getfixturevalue("obstore_in_process")
    url, options = f"s3://{server.bucket}/lookahead-{uuid.uuid4().hex}", server.options()
    store = store_for(url, options)

    async def put_all() -> None:
        async with anyio.create_task_group() as tg:
            for name, data in files.items():
                tg.start_soon(store.put, name, data)

    anyio.run(put_all)
    return url, options


def dataset(location: tuple[str, dict[str, Any]], cache: Path, **kwargs: Any) -> StreamingRawDataset:
    url, options = location
    return StreamingRawDataset(url, cache_dir=cache, storage_options=options, max_concurrent_downloads=LIMIT, **kwargs)


EXPECTED = [payload(i) for i in range(N)]


def test_iteration_looks_ahead_and_reads_the_same(location: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    plain = dataset(location, tmp_path / "c0", max_prefetch=0)
    assert list(plain) == EXPECTED
    assert plain.statistics().ahead == 0
    ds = dataset(location, tmp_path / "c1")
    assert list(ds) == EXPECTED
    stats = ds.statistics()
    assert stats.objects == N  # every file exactly once: nothing fetched twice
    assert stats.ahead == N - WINDOW  # every window after the first was under way before it was asked for
    assert 1 <= stats.max_in_flight <= LIMIT
    assert stats.in_flight == 0


def _sampled(
    ds: StreamingRawDataset, workers: int, epoch: int, context: str | None = None
) -> tuple[list[list[bytes]], list[list[int]]]:
    from torch.utils.data import DataLoader

    sampler = ds.batch_sampler(64, shuffle=True, seed=7)
    sampler.set_epoch(epoch)
    loader = DataLoader(
        ds, batch_sampler=sampler, num_workers=workers, collate_fn=list, multiprocessing_context=context
    )
    return list(loader), [list(batch) for batch in sampler]


def _sampled_in_workers(location: tuple[str, dict[str, Any]], cache: Path, context: str) -> tuple[Any, Any]:
    """In a clean process (its DataLoader starts two workers with ``context``)."""
    return _sampled(dataset(location, cache), 2, 3, context)


@pytest.mark.parametrize(("workers", "context"), [(0, None), (2, "fork"), (2, "forkserver"), (2, "spawn")])
def test_batch_sampler_looks_ahead_and_reads_the_same(
    location: tuple[str, dict[str, Any]], tmp_path: Path, workers: int, context: str | None
) -> None:
    if workers:
        assert context is not None
        batches, order = run_clean(_sampled_in_workers, location, tmp_path / "c", context)
    else:
        ds = dataset(location, tmp_path / "c")
        batches, order = _sampled(ds, 0, 3)
        stats = ds.statistics()
        assert stats.objects == N
        assert stats.ahead == N - 64  # every batch after the first was under way before it was asked for
        assert 1 <= stats.max_in_flight <= LIMIT
    assert sorted(i for batch in order for i in batch) == list(range(N))
    assert order != [list(range(k, min(N, k + 64))) for k in range(0, N, 64)]  # shuffled
    assert batches == [[EXPECTED[i] for i in batch] for batch in order]


@pytest.mark.anyio
async def test_astream_looks_ahead_and_reads_the_same(
    location: tuple[str, dict[str, Any]], tmp_path: Path, anyio_backend: str
) -> None:
    ds = dataset(location, tmp_path / "c")
    async with ds.astream(shuffle=True, epoch=2, window=8) as items:
        got = [item async for item in items]
    assert got == [EXPECTED[i] for i in epoch_order(N, True, 42, 2)]
    stats = ds.statistics()
    assert stats.objects == N
    assert stats.ahead == N - 8
    assert 1 <= stats.max_in_flight <= LIMIT


def test_upcoming_batches_are_this_workers_next_ones() -> None:
    sampler = RawBatchSampler(10, 2, shuffle=True, seed=1)
    batches = list(sampler)
    assert [len(b) for b in batches] == [2] * 5
    assert upcoming_batches(batches[0], 1, 2) == [batches[1], batches[2]]
    assert upcoming_batches(batches[1], 2, 2) == [batches[3]]  # worker 1 of 2 gets batches 1, 3
    assert upcoming_batches(batches[4], 1, 2) == []
    assert upcoming_batches(list(batches[0]), 1, 2) is None  # a plain list: no order known
    stale = RawBatch(batches[0], 0, OrderKey(10, 2, True, 1, 2, False))  # epoch 2's key, epoch 1's indices
    assert upcoming_batches(stale, 1, 2) is None
    copy = pickle.loads(pickle.dumps(batches[3]))
    assert (copy, copy.number, copy.key) == (batches[3], 3, batches[3].key)


def test_batch_sampler_epochs_and_drop_last(tmp_path: Path) -> None:
    sampler = RawBatchSampler(10, 3, drop_last=True)
    assert len(sampler) == 3
    assert [list(b) for b in sampler] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    shuffled = RawBatchSampler(10, 3, shuffle=True)
    first = [list(b) for b in shuffled]
    shuffled.set_epoch(2)
    second = [list(b) for b in shuffled]
    assert len(shuffled) == 4
    assert first != second
    assert sorted(i for b in first for i in b) == sorted(i for b in second for i in b) == list(range(10))
