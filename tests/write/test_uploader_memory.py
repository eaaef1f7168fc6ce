"""AsyncUploader's byte budget against a store that holds uploads (a slow server, scripted behind the
Store protocol): ``add`` waits when the budget is spent, and the memory held stays within
``max_bytes_in_flight`` plus one chunk, by the uploader's own accounting and by tracemalloc."""

from __future__ import annotations

import tracemalloc
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from write_targets import GatedStore, until

from litstream import AsyncUploader, LocalFileStore, astream
from litstream.format._chunk import header_length

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

PAYLOAD = 32_000
ITEM = 2 * 4 + 8 + PAYLOAD  # two leaf sizes, the int, the bytes
PER_CHUNK = 8
CHUNK = PER_CHUNK * ITEM  # payload bytes of a full chunk
PACKED = header_length(PER_CHUNK) + CHUNK  # a full chunk as stored
BUDGET = 4 * PACKED
TOTAL = 96  # samples: 12 chunks, 3 times what fits in the budget


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "payload": bytes([i % 251]) * PAYLOAD}


async def test_add_waits_when_the_budget_is_spent_and_memory_stays_bounded(tmp_path: Path) -> None:
    store = GatedStore(LocalFileStore(tmp_path / "ds"))
    produced: list[int] = []
    tracemalloc.start()
    try:
        async with AsyncUploader(store, chunk_bytes=CHUNK, max_bytes_in_flight=BUDGET, max_concurrency=2) as up:
            tracemalloc.reset_peak()
            baseline = tracemalloc.get_traced_memory()[0]

            async def produce() -> None:
                for i in range(TOTAL):
                    await up.add(sample(i))
                    produced.append(i)

            async with anyio.create_task_group() as tg:
                tg.start_soon(produce)
                # Every upload is held: the producer must stop once the budget is spent. A closing
                # chunk reserves twice its packed size (items and packed bytes coexist while it is
                # packed), keeps its packed size: chunks 0, 1 and 2 fit (3 * PACKED), the add of
                # sample 32 (which closes chunk 3, of samples 24..31) waits for 2 * PACKED more.
                await until(lambda: up.statistics().waiting == 1)
                stats = up.statistics()
                assert produced == list(range(32))
                assert (stats.samples_added, stats.chunks_closed, stats.chunks_uploaded) == (32, 3, 0)
                assert stats.bytes_reserved == 3 * PACKED
                assert stats.buffered_bytes == CHUNK  # samples 24..31
                assert store.waiting == 2  # max_concurrency uploads held at the gate
                store.gate.set()
            assert produced == list(range(TOTAL))
            stats = up.statistics()
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert stats.peak_held_bytes <= BUDGET + CHUNK
    assert stats.peak_held_bytes >= 3 * PACKED + CHUNK  # the budget was really filled
    # tracemalloc sees every Python allocation: the budget, one open chunk, the sample being added
    # and its encoded item, plus interpreter bookkeeping (a little, measured at well under 64 KiB).
    assert peak <= BUDGET + CHUNK + 2 * ITEM + 64 * 1024, (peak, BUDGET + CHUNK)
    assert up.statistics().bytes_reserved == 0
    got = [(s["i"], bytes(s["payload"][:1])) async for s in astream(store)]
    assert got == [(i, bytes([i % 251])) for i in range(TOTAL)]


async def test_without_a_budget_limit_the_same_run_holds_everything(tmp_path: Path) -> None:
    """The control: the gate alone does not bound memory; the budget does."""
    store = GatedStore(LocalFileStore(tmp_path / "ds"))
    async with AsyncUploader(store, chunk_bytes=CHUNK, max_bytes_in_flight=TOTAL * ITEM * 3) as up:
        for i in range(TOTAL):
            await up.add(sample(i))  # never waits: nothing is uploaded while the gate is closed
        assert up.statistics().chunks_uploaded == 0
        assert up.statistics().bytes_reserved == 11 * PACKED
        store.gate.set()
    assert up.statistics().peak_held_bytes > BUDGET + CHUNK
