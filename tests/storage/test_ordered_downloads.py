"""Downloads in the reader's order: ``OrderedGate`` hands out request slots smallest key first, and the
reader queues chunk k+1's requests only after chunk k's, so the chunk it needs first arrives first.

The reader-level test counts the real GETs a remote read sends to SeaweedFS through a loopback proxy.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest
from test_transfer import ScriptedStore

from litstream import StorageError, StreamingDataset, optimize
from litstream.storage._ordered import OrderedGate
from litstream.storage._transfer import Downloader
from request_counter import RequestCounter

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server


@pytest.mark.anyio
async def test_waiters_are_served_smallest_key_first_whatever_their_arrival() -> None:
    gate = OrderedGate(1, 100)
    served: list[tuple[int, int]] = []
    first = gate.enqueue((9, 0), 1)
    await gate.wait(first)  # holds the only slot

    async def take(key: tuple[int, int]) -> None:
        async with gate.hold(key, 1):
            served.append(key)

    async with anyio.create_task_group() as tg:
        for key in [(3, 0), (1, 5), (2, 0), (1, 0)]:
            tg.start_soon(take, key)
        await anyio.wait_all_tasks_blocked()
        assert gate.waiting == 4
        assert served == []
        gate.done(first)
    assert served == [(1, 0), (1, 5), (2, 0), (3, 0)]
    assert (gate.requests, gate.used, gate.waiting) == (0, 0, 0)


@pytest.mark.anyio
async def test_a_freed_slot_lets_the_next_in_while_the_bytes_stay_held() -> None:
    gate = OrderedGate(1, 10)
    a = gate.enqueue((0, 0), 6)
    b = gate.enqueue((1, 0), 4)
    c = gate.enqueue((2, 0), 6)
    await gate.wait(a)
    assert (b.granted, c.granted) == (False, False)  # no slot
    gate.free_slot(a)
    assert (b.granted, c.granted) == (True, False)  # a slot again; 6 + 4 bytes fit, c's 6 more do not
    gate.free_slot(b)
    assert c.granted is False
    assert gate.used == 10
    gate.done(a)
    assert c.granted is True
    assert gate.used == 10
    gate.done(b)
    gate.done(c)
    gate.done(c)  # twice is harmless
    assert (gate.requests, gate.used) == (0, 0)
    big = gate.enqueue((3, 0), 1000)  # more than the budget takes all of it
    assert big.granted
    assert gate.used == 10
    gate.drop(big)
    assert (gate.requests, gate.used) == (0, 0)


@pytest.mark.anyio
async def test_a_cancelled_waiter_leaves_the_queue_and_a_cancelled_holder_releases() -> None:
    gate = OrderedGate(1, 100)
    holder = gate.enqueue((0, 0), 50)
    await gate.wait(holder)
    with anyio.move_on_after(0) as scope:  # the deadline has passed: wait() is cancelled at once
        async with gate.hold((1, 0), 10):
            pytest.fail("granted without a free slot")
    assert scope.cancelled_caught
    assert gate.waiting == 0
    late = gate.enqueue((2, 0), 10)
    gate.done(holder)
    assert late.granted
    assert (gate.requests, gate.used) == (1, 10)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await gate.wait(late)  # granted, but cancelled in wait(): it gives back what it held
    assert (gate.requests, gate.used) == (0, 0)


@pytest.mark.anyio
async def test_fetch_reports_queued_before_any_data_and_on_every_other_path(tmp_path: Path) -> None:
    store = ScriptedStore({"a": bytes(range(40)), "bad": bytes(20)})
    store.gate = anyio.Event()  # every request waits for this
    store.fail.add("bad")
    downloader = Downloader(store, tmp_path, piece_size=8, max_concurrency=2)
    queued = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(downloader.fetch, "a", size=40, queued=queued.set))
        await queued.wait()  # all five requests are queued, no byte has arrived
        assert not (tmp_path / "a").exists()
        await anyio.wait_all_tasks_blocked()
        assert store.active == 2  # two of them in flight
        store.gate.set()
    assert (tmp_path / "a").read_bytes() == bytes(range(40))
    calls = []
    await downloader.fetch("a", size=40, queued=lambda: calls.append("present"))  # already there
    with pytest.raises(StorageError):
        await downloader.fetch("bad", size=20, queued=lambda: calls.append("failed"))
    assert calls == ["present", "failed"]


@pytest.mark.anyio
async def test_tickets_order_the_requests_of_downloads_queued_together(tmp_path: Path) -> None:
    objects = {name: bytes([i]) * 32 for i, name in enumerate("abc")}
    store = ScriptedStore(objects)
    store.gate = anyio.Event()
    order: list[tuple[str, int]] = []
    store.before_read = lambda name, start: order.append((name, start))
    downloader = Downloader(store, tmp_path, piece_size=8, max_concurrency=1)
    tickets = {name: downloader.ticket() for name in "abc"}
    async with anyio.create_task_group() as tg:
        for name in "cba":  # asked for in reverse: the first request takes the free slot, the rest queue
            queued = anyio.Event()
            tg.start_soon(partial(downloader.fetch, name, size=32, priority=tickets[name], queued=queued.set))
            await queued.wait()
        store.gate.set()
    assert order[0] == ("c", 0)  # it found the slot free
    assert order[1:] == [("a", s) for s in range(0, 32, 8)] + [("b", s) for s in range(0, 32, 8)] + [
        ("c", s) for s in range(8, 32, 8)
    ]
    for name, data in objects.items():
        assert (tmp_path / name).read_bytes() == data


def _sample(i: int) -> dict[str, Any]:
    return {"x": np.full(4096, i % 251, dtype=np.uint8), "i": i}


def test_a_remote_read_downloads_its_chunks_in_plan_order(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = f"order-{uuid.uuid4().hex[:10]}"
    url = f"s3://{s3_server.bucket}/{prefix}"
    optimize(_sample, list(range(160)), url, chunk_bytes="64KB", num_workers=1, verbose=False,
             storage_options=s3_server.options())  # fmt: skip
    # one request at a time, in 16 KiB pieces: the order the proxy sees is the order they were granted
    monkeypatch.setenv("LITSTREAM_DOWNLOAD_CONCURRENCY", "1")  # the downloader's settings
    monkeypatch.setenv("LITSTREAM_DOWNLOAD_PIECE_SIZE", str(16 * 1024))
    with RequestCounter(s3_server.endpoint) as counter:
        options = {**s3_server.options(), "endpoint_url": counter.url}
        ds = StreamingDataset(url, storage_options=options, cache_dir=str(tmp_path / "cache"), max_pre_download=4)
        assert [s["i"] for s in ds] == list(range(160))
        assert counter.errors == []
    chunks = [r for r in counter.requests if r.path.rsplit("/", 1)[-1].startswith("chunk-")]
    names = [r.path.rsplit("/", 1)[-1] for r in chunks]
    order = list(dict.fromkeys(names))
    assert len(order) >= 3  # several chunks, several pieces each
    # each chunk's requests form one run (no chunk's request overtakes an earlier chunk's), in plan order
    runs = [name for k, name in enumerate(names) if k == 0 or names[k - 1] != name]
    assert runs == order
    assert order == sorted(order, key=lambda n: int(n.removesuffix(".bin").rsplit("-", 1)[1]))  # index order
    starts = [int(r.range.removeprefix("bytes=").split("-")[0]) for r in chunks if r.range]
    assert len(starts) == len(chunks)
    for name in order:
        own = [s for s, n in zip(starts, names, strict=True) if n == name]
        assert own == sorted(own)
        assert own[0] == 0
