from __future__ import annotations

import pickle
import re
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pytest
import torch

from dataset_files import write_ints
from litstream import ConfigurationError, FormatError, StreamingDataLoader, StreamingDataset, optimize

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="module")
def ints_1000(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ints(tmp_path_factory.mktemp("ints1000"), 1000, 100)


@pytest.fixture(scope="module")
def vec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("vec")
    optimize(
        fn=lambda i: {"idx": i, "vec": np.arange(i, i + 99)},
        inputs=range(10),
        output_dir=d,
        num_workers=1,
        chunk_bytes="64MB",
        verbose=False,
    )
    return d


def test_random_access_and_slices(vec_dir: Path) -> None:
    ds = StreamingDataset(vec_dir)
    assert len(ds) == 10
    for i in range(10):
        sample = ds[i]
        assert sample["idx"] == i
        assert sample["vec"].dtype == np.int64
        np.testing.assert_array_equal(sample["vec"], np.arange(i, i + 99))
    assert ds[-1]["idx"] == 9
    assert [s["idx"] for s in ds[2:8:3]] == [2, 5]
    with pytest.raises(IndexError, match="index 10 is out of range for a dataset of 10 items"):
        ds[10]


def test_arrays_come_back_writable(vec_dir: Path) -> None:
    ds = StreamingDataset(vec_dir)
    vec = ds[3]["vec"]
    vec += 1
    assert int(vec[0]) == 4
    assert next(iter(ds))["vec"].flags.writeable


def test_b24_loader_batches_int_and_1d_arrays(vec_dir: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(vec_dir, shuffle=False), batch_size=1)
    batches = list(loader)
    assert len(batches) == 10
    for i, batch in enumerate(batches):
        assert batch["vec"].shape == (1, 99)
        assert torch.equal(batch["vec"][0], torch.arange(i, i + 99))
        assert batch["idx"].tolist() == [i]


def test_transform_list_applies_in_order(tmp_path: Path) -> None:
    write_ints(tmp_path, 6, 4)
    ds = StreamingDataset(tmp_path, transform=[lambda x: x + 1, lambda x: x * 10])
    assert list(ds) == [10, 20, 30, 40, 50, 60]
    assert ds[2] == 30
    with pytest.raises(ConfigurationError, match=re.escape("transform[0] must be callable, got int 3")):
        StreamingDataset(tmp_path, transform=[3])  # type: ignore[list-item]


def test_shuffle_changes_with_epoch_and_covers_everything(ints_1000: Path) -> None:
    ds = StreamingDataset(ints_1000, shuffle=True)
    first = list(ds)
    second = list(ds)  # the epoch advances after a full pass
    assert sorted(first) == sorted(second) == list(range(1000))
    assert first != second
    ds.set_epoch(1)
    assert list(ds) == first


def test_b01_len_stays_right_after_asking_the_loader(ints_1000: Path) -> None:
    for workers in (0, 1, 3):
        ds = StreamingDataset(ints_1000, shuffle=True)
        a = len(ds)
        loader = StreamingDataLoader(ds, num_workers=workers)
        b = len(loader)
        c = len(ds)
        assert (a, b, c) == (1000, 1000, 1000)
        items = [int(x) for batch in loader for x in batch]
        assert sorted(items) == list(range(1000))


@pytest.mark.parametrize(("workers", "batch_size", "drop_last"), [(2, 8, False), (2, 8, True), (3, 64, False)])
def test_loader_len_equals_real_batch_count(ints_1000: Path, workers: int, batch_size: int, drop_last: bool) -> None:
    loader = StreamingDataLoader(
        StreamingDataset(ints_1000), batch_size=batch_size, num_workers=workers, drop_last=drop_last
    )
    batches = list(loader)
    assert len(loader) == len(batches)
    items = [int(x) for b in batches for x in b]
    expected = (1000 // (batch_size * 1)) * batch_size if drop_last else 1000
    assert len(items) == expected == len(set(items))
    if drop_last:
        assert all(len(b) == batch_size for b in batches)


def test_resume_mid_epoch_yields_exactly_the_rest(ints_1000: Path) -> None:
    def loader() -> StreamingDataLoader:
        return StreamingDataLoader(StreamingDataset(ints_1000, shuffle=True), batch_size=10, num_workers=2)

    full = loader()
    first: list[int] = []
    for k, batch in enumerate(full):
        first += batch.tolist()
        if k == 36:
            break
    state = pickle.loads(pickle.dumps(full.state_dict()))
    assert state["num_samples_yielded"] == 370
    assert state["current_epoch"] == 1

    resumed = loader()
    resumed.load_state_dict(state)
    rest = [x for b in resumed for x in b.tolist()]
    assert sorted(first + rest) == list(range(1000))
    assert len(first) + len(rest) == 1000
    # the next epoch is a normal, complete and differently shuffled one
    nxt = [x for b in resumed for x in b.tolist()]
    assert sorted(nxt) == list(range(1000))
    assert resumed.current_epoch == 2


def test_resume_from_a_state_taken_at_the_end_of_an_epoch(ints_1000: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(ints_1000), batch_size=100)
    assert len(list(loader)) == 10
    state = loader.state_dict()
    again = StreamingDataLoader(StreamingDataset(ints_1000), batch_size=100)
    again.load_state_dict(state)
    items = [x for b in again for x in b.tolist()]
    assert items == list(range(1000))
    assert again.current_epoch == 2


def test_resume_rejects_a_different_seed(ints_1000: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(ints_1000, shuffle=True), batch_size=10)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    other = StreamingDataLoader(StreamingDataset(ints_1000, shuffle=True, seed=7), batch_size=10)
    with pytest.raises(ConfigurationError, match="checkpoint has seed=42 but this dataset has seed=7"):
        other.load_state_dict(state)


def test_breaking_out_of_iteration_stops_the_portal_thread(ints_1000: Path) -> None:
    ds = StreamingDataset(ints_1000)
    before = {t.ident for t in threading.enumerate()}
    it = iter(ds)
    assert [next(it) for _ in range(5)] == [0, 1, 2, 3, 4]
    it.close()  # what `break` + garbage collection does
    # The portal's event-loop thread is joined by close(); only anyio's idle worker threads (which
    # exit on their own a little later) may still be listed.
    left = [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in before]
    assert [name for name in left if not name.startswith("AnyIO worker thread")] == []


def test_dataset_pickles_as_configuration(ints_1000: Path) -> None:
    ds = StreamingDataset(ints_1000, shuffle=True, seed=5)
    assert len(ds) == 1000  # loads the index in this process
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._reader.opened is None
    assert list(clone) == list(ds)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shuffle": 1}, "shuffle must be True or False, got 1"),
        ({"seed": "a"}, "seed must be an int"),
        ({"drop_last": "no"}, "drop_last must be True, False or None"),
    ],
)
def test_bad_dataset_arguments(ints_1000: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        StreamingDataset(ints_1000, **kwargs)


def test_loader_rejects_other_datasets() -> None:
    with pytest.raises(ConfigurationError, match="StreamingDataLoader needs a StreamingDataset, got list"):
        StreamingDataLoader([1, 2, 3])  # type: ignore[arg-type]


def test_corrupt_chunk_surfaces_through_the_sync_iterator(tmp_path: Path) -> None:
    write_ints(tmp_path, 10, 5)
    (tmp_path / "chunk-0-1.bin").write_bytes(b"\x00\x00")
    with pytest.raises(FormatError, match=r"chunk-0-1\.bin holds 2 bytes"):
        list(StreamingDataset(tmp_path))


def test_a_custom_collate_fn_gets_the_samples_and_its_batches_come_back_untouched(tmp_path: Path) -> None:
    write_ints(tmp_path, 10, 3)

    def collate(samples: list[Any]) -> dict[str, Any]:
        return {"ids": list(samples), "n": len(samples)}

    loader = StreamingDataLoader(StreamingDataset(tmp_path), batch_size=4, collate_fn=collate)
    batches = list(loader)
    assert batches == [{"ids": [0, 1, 2, 3], "n": 4}, {"ids": [4, 5, 6, 7], "n": 4}, {"ids": [8, 9], "n": 2}]
    state = loader.state_dict()
    assert state["num_samples_yielded"] == 12  # LitData's count: batch_size per batch, the short one too
    assert state["dataset"]["worker_samples_yielded"] == [10]  # real batch lengths, whatever the batch type


def test_resume_counts_each_workers_samples_exactly(ints_1000: Path) -> None:
    """The per-worker counts in a checkpoint are what torch delivered from each worker."""
    loader = StreamingDataLoader(StreamingDataset(ints_1000), batch_size=64, num_workers=3)
    it = iter(loader)
    for _ in range(7):
        next(it)
    state = loader.state_dict()
    it.close()
    # 1000 items: 15 batches of 64 over 3 workers (5 each) plus 40 leftover items on worker 0
    assert state["dataset"]["worker_samples_yielded"] == [3 * 64, 2 * 64, 2 * 64]
    assert state["latest_worker_idx"] == 0
    assert state["num_samples_yielded"] == 7 * 64


def test_interpreter_exits_with_a_half_consumed_iterator_alive(ints_1000: Path) -> None:
    """A module-level iterator that was never closed must not keep the process from exiting."""
    import subprocess
    import sys

    code = (
        "import litstream\n"
        f"ds = litstream.StreamingDataset({str(ints_1000)!r})\n"
        "it = iter(ds)\n"
        "print(next(it), next(it), ds[7])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["0", "1", "7"]


def test_random_access_into_compressed_chunks_decompresses_each_chunk_once(tmp_path: Path) -> None:
    import random

    from litstream import LocalFileStore

    optimize(
        fn=lambda i: {"i": i, "v": np.full(50, i)},
        inputs=range(300),
        output_dir=tmp_path,
        chunk_size=40,
        compression="zstd",
        num_workers=1,
        verbose=False,
    )

    class CountingStore(LocalFileStore):
        gets: ClassVar[list[str]] = []

        async def get(self, path: str) -> bytes:
            self.gets.append(path)
            return await super().get(path)

    store = CountingStore(tmp_path)
    ds = StreamingDataset(store)
    order = list(range(300))
    random.Random(0).shuffle(order)
    assert [ds[i]["i"] for i in order] == order
    chunk_reads = [p for p in store.gets if p.endswith(".bin")]
    assert sorted(chunk_reads) == sorted(f"chunk-0-{k}.zstd.bin" for k in range(8))


def _portal_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.is_alive() and t.name == "litstream-portal"]


@pytest.mark.parametrize(
    ("compression", "shuffle", "kwargs", "in_place"),
    [
        (None, False, {}, True),
        (None, True, {}, True),
        ("zstd", False, {}, False),  # decompressed by the engine
        (None, "window", {"shuffle_window": 2}, False),  # a window spans chunks: the engine assembles it
    ],
)
def test_a_local_dataset_read_in_place_starts_no_event_loop(
    tmp_path: Path, compression: str | None, shuffle: Any, kwargs: dict[str, Any], in_place: bool
) -> None:
    optimize(fn=lambda i: {"i": i, "v": np.full(5, i)}, inputs=range(200), output_dir=tmp_path, chunk_size=30,
             compression=compression, num_workers=1, verbose=False)  # fmt: skip
    before = _portal_threads()
    ds = StreamingDataset(tmp_path, shuffle=shuffle, **kwargs)
    it = iter(ds)
    first = [next(it)["i"] for _ in range(40)]  # past the first chunk: the engine, if any, is running
    during = _portal_threads()
    rest = [sample["i"] for sample in it]
    assert (len(during) == len(before)) is in_place
    served = first + rest
    assert sorted(served) == list(range(200))
    assert served == [s["i"] for s in StreamingDataset(tmp_path, shuffle=shuffle, **kwargs)]  # same order again
    if not shuffle:
        assert served == list(range(200))


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_batches_of_a_dataset_read_in_place_are_the_samples_in_order(tmp_path: Path, workers: int) -> None:
    optimize(fn=lambda i: {"i": i, "v": np.full(5, i)}, inputs=range(200), output_dir=tmp_path, chunk_size=30,
             num_workers=1, verbose=False)  # fmt: skip
    loader = StreamingDataLoader(StreamingDataset(tmp_path), batch_size=16, num_workers=workers)
    batches = list(loader)
    ids = sorted(int(i) for batch in batches for i in batch["i"])
    assert ids == list(range(200))
    for batch in batches:
        assert torch.equal(batch["v"], batch["i"][:, None].expand(-1, 5))
