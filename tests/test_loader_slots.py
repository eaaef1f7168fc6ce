"""Batches of DataLoader workers travel in reusable shared-memory slots (``litstream._torch._slots``).

What a user gets is exactly what ``num_workers=0`` gives, batches kept by the user are never
overwritten by later ones, and no shared memory or process outlives an epoch however it ends.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import threading
from multiprocessing import queues
from typing import Any

import numpy as np
import pytest
import torch

import litstream
from litstream._torch import _slots
from litstream._torch._slots import ScratchPool, SlotBatch, SlotExchange, SlotPacker, SlotStatistics
from same_values import assert_same

ITEMS = 600
BATCH = 16  # 38 batches: each worker fills its slots many times over


def _sample(i: int) -> dict[str, Any]:
    image = np.full((3, 4, 5), i % 251, np.uint8)
    image[0, 0, 0] = i // 251
    return {"image": image, "label": i, "name": f"s{i}", "score": np.float32(i) / 3}


def _dies(sample: dict[str, Any]) -> dict[str, Any]:
    if sample["label"] == 300:
        os._exit(3)  # a worker crash
    return sample


def _breaks(sample: dict[str, Any]) -> dict[str, Any]:
    if sample["label"] == 300:
        raise ValueError("bad sample 300")
    return sample


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("slots") / "ds")
    litstream.optimize(fn=_sample, inputs=list(range(ITEMS)), output_dir=out, chunk_size=100, num_workers=1,
                       verbose=False)  # fmt: skip
    return out


def _shm_maps() -> int:
    """Shared-memory mappings of this process (a slot block received from a worker is one), after
    freeing what earlier tests left to the garbage collector."""
    gc.collect()
    with open("/proc/self/maps") as maps:
        return sum("/dev/shm/" in line for line in maps)


_THREADS_AT_START: set[threading.Thread] = set()


@pytest.fixture(autouse=True)
def _threads_at_start() -> None:
    _THREADS_AT_START.clear()
    _THREADS_AT_START.update(threading.enumerate())


def _queue_threads_ended() -> None:
    """Wait for the feeder threads of the queues torch made for this test's loader to end (closed with
    the loader, they end on their own). Each holds its queue's write lock and size semaphore, two
    /dev/shm mappings, until it ends, which on a loaded machine can be after the loader is gone."""
    for thread in set(threading.enumerate()) - _THREADS_AT_START:
        if thread.name == "QueueFeederThread":
            thread.join(60)  # a guard against a hang, not a pause: they end as soon as they run
            assert not thread.is_alive(), "a queue feeder thread of the loader is still running"


def _nothing_left(semaphores: tuple[str, ...], maps: int) -> None:
    _queue_threads_ended()
    assert _shm_maps() <= maps  # (collects garbage first)
    assert multiprocessing.active_children() == []
    assert _slots._EXCHANGES == {}  # the iteration closed its slots
    assert not set(semaphores) & set(os.listdir("/dev/shm"))


def _by_label(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # workers interleave their batches; compare the batches keyed by their first label
    return sorted(batches, key=lambda b: int(b["label"][0]))


@pytest.mark.parametrize("context", [pytest.param("fork", marks=pytest.mark.forks), "spawn", "forkserver"])
def test_batches_kept_by_the_user_equal_those_without_workers(data: str, context: str) -> None:
    expected = list(litstream.StreamingDataLoader(litstream.StreamingDataset(data), batch_size=BATCH))
    maps = _shm_maps()
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(data), batch_size=BATCH, num_workers=2,
                                           multiprocessing_context=context)  # fmt: skip
    kept = list(loader)  # every batch kept while later ones reuse the slots
    assert len(kept) == len(expected) == 38
    statistics = loader.slot_statistics()
    assert statistics.batches == len(kept)
    for got, want in zip(_by_label(kept), _by_label(expected), strict=True):
        assert_same(got, want)
        assert not got["image"].is_shared()  # the user's own memory, not a slot
    pointers = {b["image"].data_ptr() for b in kept}
    assert len(pointers) == len(kept)
    del loader
    _nothing_left(statistics.semaphores, maps)


@pytest.mark.parametrize("context", [pytest.param("fork", marks=pytest.mark.forks), "spawn"])
def test_an_early_break_leaves_no_shared_memory_or_process(data: str, context: str) -> None:
    maps = _shm_maps()
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(data), batch_size=BATCH, num_workers=2,
                                           multiprocessing_context=context)  # fmt: skip
    for k, batch in enumerate(loader):
        assert batch["image"].shape == (BATCH, 3, 4, 5)
        if k == 3:
            assert _shm_maps() > maps  # the workers' slot blocks, mapped here
            break
    statistics = loader.slot_statistics()
    assert statistics.batches == 4
    assert len(statistics.semaphores) == (0 if context == "fork" else 2)  # one per worker, named under spawn
    _nothing_left(statistics.semaphores, maps)
    # the next epoch is whole again
    assert sum(len(b["label"]) for b in loader) == ITEMS


@pytest.mark.forks
def test_shared_memory_is_counted_once_torchs_queue_threads_have_ended(
    data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leftovers an early break was once seen to leave on a loaded machine (two mappings) were torch's:
    a queue feeder thread not yet ended holds two semaphores. Held here until released, deterministically."""
    release = threading.Event()
    feed = queues.Queue._feed  # type: ignore[attr-defined]

    def late_feed(*args: Any) -> None:
        try:
            feed(*args)
        finally:
            release.wait()  # the queue is closed, but the thread (and what it refers to) is not gone yet

    monkeypatch.setattr(queues.Queue, "_feed", staticmethod(late_feed))
    maps = _shm_maps()
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(data), batch_size=BATCH, num_workers=2,
                                           multiprocessing_context="fork")  # fmt: skip
    for k, _batch in enumerate(loader):
        if k == 3:
            break
    assert multiprocessing.active_children() == []  # the loader is gone ...
    assert _slots._EXCHANGES == {}
    assert _shm_maps() > maps  # ... but its queues' threads still hold their semaphores
    release.set()
    _nothing_left(loader.slot_statistics().semaphores, maps)


def test_a_worker_error_leaves_no_shared_memory_or_process(data: str) -> None:
    maps = _shm_maps()
    dataset = litstream.StreamingDataset(data, transform=_breaks)
    loader = litstream.StreamingDataLoader(dataset, batch_size=BATCH, num_workers=2)
    with pytest.raises(ValueError, match="bad sample 300"):
        for _ in loader:
            pass
    _nothing_left(loader.slot_statistics().semaphores, maps)


def test_a_worker_crash_leaves_no_shared_memory_or_process(data: str) -> None:
    maps = _shm_maps()
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(data, transform=_dies), batch_size=BATCH,
                                           num_workers=2)  # fmt: skip
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        for _ in loader:
            pass
    _nothing_left(loader.slot_statistics().semaphores, maps)


def test_resume_counts_batches_that_came_through_slots(data: str) -> None:
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(data), batch_size=BATCH, num_workers=2)
    seen: list[int] = []
    for k, batch in enumerate(loader):
        seen += batch["label"].tolist()
        if k == 9:
            break
    state = loader.state_dict()
    assert state["num_samples_yielded"] == 10 * BATCH
    resumed = litstream.StreamingDataLoader(litstream.StreamingDataset(data), batch_size=BATCH, num_workers=2)
    resumed.load_state_dict(state)
    rest = [label for batch in resumed for label in batch["label"].tolist()]
    assert sorted(seen + rest) == list(range(ITEMS))
    assert loader.slot_statistics().batches == 10
    assert resumed.slot_statistics().batches > 0


def test_persistent_workers_keep_torchs_path(data: str) -> None:
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(data), batch_size=BATCH, num_workers=2,
                                           persistent_workers=True)  # fmt: skip
    for _ in range(2):
        assert sorted(label for b in loader for label in b["label"].tolist()) == list(range(ITEMS))
    assert loader.slot_statistics() == SlotStatistics()


# -- the slots themselves, in one process ----------------------------------------------------------


@pytest.fixture
def exchange() -> Any:
    exchange = SlotExchange([multiprocessing.get_context("fork").Semaphore(2)], 2)
    exchange.open()
    yield exchange
    exchange.close()


def _batch(k: int) -> dict[str, Any]:
    return {
        "x": torch.arange(12, dtype=torch.float64).reshape(3, 4).t() + k,  # not contiguous
        "flag": torch.tensor([True, False, k % 2 == 0]),
        "half": torch.full((5,), k, dtype=torch.bfloat16),
        "scalar": torch.tensor(k),
        "empty": torch.empty(0, 7),
        "name": ["a", "b"],
    }


def test_a_slot_is_reused_only_after_its_batch_was_copied_out(exchange: SlotExchange) -> None:
    packer = SlotPacker(exchange)
    first = packer.pack(0, _batch(0))
    second = packer.pack(0, _batch(1))
    assert isinstance(first, SlotBatch)
    assert isinstance(second, SlotBatch)
    assert (first.slot, second.slot) == (0, 1)
    assert first.block is not None
    assert second.block is None
    third = _batch(2)
    assert packer.pack(0, third) is third  # both slots taken: torch's path, unchanged
    kept = first.unpack()
    assert_same(kept, _batch(0))
    reused = packer.pack(0, _batch(3))
    assert isinstance(reused, SlotBatch)
    assert reused.slot == 0
    assert_same(kept, _batch(0))  # the kept batch did not change when its slot was refilled
    assert_same(second.unpack(), _batch(1))
    assert_same(reused.unpack(), _batch(3))


def test_a_slot_batch_pickles_small_after_the_first(exchange: SlotExchange) -> None:
    packer = SlotPacker(exchange)
    first = packer.pack(0, _batch(0))
    again = pickle.loads(pickle.dumps(packer.pack(0, _batch(1))))
    first.unpack()
    assert_same(again.unpack(), _batch(1))
    assert len(pickle.dumps(SlotBatch(1, 0, 0, {"x": 1}))) < 200


def test_batches_with_other_tensors_go_unchanged(exchange: SlotExchange) -> None:
    packer = SlotPacker(exchange)
    grad = {"x": torch.zeros(4, requires_grad=True)}
    assert packer.pack(0, grad) is grad
    strings = {"name": ["a"]}
    assert packer.pack(0, strings) is strings
    sparse = [torch.zeros(3, 3).to_sparse()]
    assert packer.pack(0, sparse) is sparse


def test_a_batch_larger_than_a_slot_comes_with_a_larger_block(exchange: SlotExchange) -> None:
    packer = SlotPacker(exchange)
    small = packer.pack(0, {"x": torch.arange(4.0)})  # sizes the slots: one page
    big = packer.pack(0, {"x": torch.arange(10_000.0)})
    assert isinstance(small, SlotBatch)
    assert isinstance(big, SlotBatch)
    assert small.block is not None
    assert big.block is not None
    assert big.block.nbytes() >= 2 * 40_000 > small.block.nbytes()  # two slots of 10,000 float32
    assert_same(small.unpack(), {"x": torch.arange(4.0)})  # unpacked in the order sent, as the loader does
    assert_same(big.unpack(), {"x": torch.arange(10_000.0)})
    after = packer.pack(0, {"x": torch.arange(5.0)})
    assert after.block is None  # the larger block is kept
    assert_same(after.unpack(), {"x": torch.arange(5.0)})


def test_a_batch_of_a_finished_iteration_is_refused(exchange: SlotExchange) -> None:
    batch = SlotPacker(exchange).pack(0, _batch(0))
    exchange.close()
    with pytest.raises(RuntimeError, match="finished DataLoader iteration"):
        batch.unpack()


def test_a_worker_with_file_system_sharing_keeps_torchs_path(exchange: SlotExchange) -> None:
    strategy = torch.multiprocessing.get_sharing_strategy()  # type: ignore[no-untyped-call]
    torch.multiprocessing.set_sharing_strategy("file_system")  # type: ignore[no-untyped-call]
    try:
        batch = _batch(0)
        assert SlotPacker(exchange).pack(0, batch) is batch
    finally:
        torch.multiprocessing.set_sharing_strategy(strategy)  # type: ignore[no-untyped-call]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs an accelerator")
def test_pin_memory_copies_into_pinned_tensors(exchange: SlotExchange) -> None:
    batch = SlotPacker(exchange).pack(0, _batch(0))
    pinned = batch.pin_memory()
    assert pinned["x"].is_pinned()
    assert_same(pinned, _batch(0))


def test_scratch_memory_is_reused_only_when_nothing_refers_to_it() -> None:
    pool = ScratchPool(size=2)
    first = pool(1000)
    address = first.ctypes.data
    row = first.reshape(10, 100)[3]  # a decoded row that a sample holds
    row[:] = 7
    del first
    second = pool(1000)
    assert second.ctypes.data != address  # the row still holds the first buffer
    tensor = torch.from_numpy(second)  # a batch tensor over the second buffer
    del second
    extra = pool(1000)  # both kept buffers in use: a new array
    assert extra.ctypes.data not in {address, tensor.data_ptr()}
    assert int(row.sum()) == 700  # untouched
    del row
    again = pool(1000)
    assert again.ctypes.data == address  # free again: reused
    assert again.flags.writeable
    assert not isinstance(again.base, np.ndarray)  # so _collate recognises the rows decoded into it
    del again, tensor
    assert len(pool._buffers) == 2  # the extra array was not kept


def test_scratch_rows_collate_without_a_copy() -> None:
    from litstream._torch._collate import fast_collate
    from litstream.format._chunk import ChunkView, pack_chunk
    from litstream.format._index import DatasetConfig
    from litstream.format._loaders import SampleDecoder, SampleEncoder

    encoder = SampleEncoder()
    view = ChunkView(pack_chunk([encoder.encode(_sample(i)) for i in range(8)]))
    decoder = SampleDecoder(DatasetConfig(data_format=tuple(encoder.data_format), data_spec=encoder.data_spec))
    pool = ScratchPool()
    samples = decoder.decode_many(view.data, *view.spans(range(8)), pool)
    batch = _collated = fast_collate(samples)
    assert batch["image"].data_ptr() == samples[0]["image"].ctypes.data  # the block itself, no stack
    assert_same(_collated, torch.utils.data.default_collate(samples))
    block = batch["image"].data_ptr()
    again = decoder.decode_many(view.data, *view.spans(range(8)), pool)
    assert again[0]["image"].ctypes.data != block  # the batch still holds the first block
    del batch, _collated, samples
    third = decoder.decode_many(view.data, *view.spans(range(8)), pool)
    assert third[0]["image"].ctypes.data == block  # reused once nothing refers to it
